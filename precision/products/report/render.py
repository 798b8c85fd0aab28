"""Report assembly: the sections of a run folder into ``<out>/<study>/``.

Layout of a report folder::

    report.md          Markdown (plots linked from plots/)
    report.html        self-contained: plots embedded as base64 PNG, no external
                       resource, every string from the study/run HTML-escaped
    findings.json      the findings and the numbers each cites (table, row, column)
    tables/*.csv       every table of every section
    plots/*.png, *.svg every plot

The page opens with the first screen a reviewer reads in 30 seconds: the
sections' first-screen blocks (the verdict grid, what dominates the error,
headline maxima with their labels) and at most :data:`FIRST_SCREEN_FINDINGS`
findings; then a table of contents, then each section's body with its
detail folded into ``<details>``, then how to reproduce the report.  The
sections and their order come from the study file's ``[report]`` table
(:mod:`precision.products.report.sections`).

The folder is built in a temporary sibling and renamed into place, so a
failed report leaves the previous one (or nothing) behind, never a partial one.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import dataclass
from pathlib import Path

from precision.errors import ParameterError
from precision.products.report.answers import answers_json, merged_shorts, pointer_text
from precision.products.report.document import Bullets, Code, Details, Heading, Para, Table, to_markdown
from precision.products.report.defects import defect_lines, defect_table
from precision.products.report.findings import findings_json
from precision.products.report.glossary import guard_table, scope_table, used_terms
from precision.products.report.load import RunData, load_run
from precision.products.report.page import write_folder, write_page
from precision.products.report.sections import DEFAULT_SECTIONS, section_module, section_options
from precision.engine.operators import DEFAULT_OPERATOR, default_studies
from precision.engine.estimate import format_seconds, plan_study
from precision.engine.study import load_study
from precision.engine.sweep import run_study
from precision.io.frames import write_csv
from precision.io.shell import shell_join

__all__ = ["build_report", "report_all", "ReportContext", "FIRST_SCREEN_FINDINGS"]

#: ``report --all`` runs a study whose run folder is missing only when its plan takes at most this many seconds
#: (every review study does, in minutes); a longer one's committed report is kept.
REPORT_ALL_RUN_SECONDS = 15 * 60
#: At most this many findings on the first screen (the rest stay in their sections).
FIRST_SCREEN_FINDINGS = 15


@dataclass
class ReportContext:
    """What a section's ``build`` receives: the run, the study name, its options, the plot folder."""

    run: RunData
    study: str
    options: dict
    plot_dir: Path

    def option(self, section: str, key: str):
        """A section option: the study file's value, else the declared default."""
        given = self.options.get(section, {})
        if key in given:
            v = given[key]
            return tuple(v) if isinstance(v, list) else v
        return section_options(self.run.operator)[section][key][1]


def _write_csv(frame, path: Path) -> None:
    write_csv(frame, path)


def _guard_span(op) -> str:
    """``G1..G8``: the operator's guards, first to last."""
    guards = list(op.GUARD_NAMES)
    return f"{guards[0]}..{guards[-1]}" if guards else "(none)"


def _reproduce(run: dict, study: str) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in sorted(run.get("versions", {}).items()))
    return "\n".join([
        f"{shell_join(['precision', 'run', run.get('study_file', f'studies/{study}.toml')])} && "
        f"{shell_join(['precision', 'report', study])}",
        f"(the committed copy: {shell_join(['precision', 'report', study, '--out', 'reports'])})",
        f"study file     {run.get('study_file')}",
        f"study sha256   {run.get('study_sha256')}",
        f"seed           {run.get('seed')}",
        f"machines       {', '.join(run.get('machines', []))}",
        f"pred sets      {json.dumps(run.get('pred_sets', []), sort_keys=True)}",
        f"oracle version {run.get('oracle_version')}",
        f"code sha256    {run.get('code_sha256')}",
        f"python         {run.get('python')}",
        f"versions       {versions}",
        f"points         {run.get('points')}"])


def _study_text(run: dict) -> tuple:
    """The study's name and description as written in its file (shown escaped)."""
    path = Path(run.get("study_file", ""))
    try:
        data = tomllib.loads(path.read_text())
        return str(data.get("name", run.get("study"))), str(data.get("description", ""))
    except (OSError, tomllib.TOMLDecodeError):
        return str(run.get("study")), ""


#: The question the defect lines answer, first among a report's answers.
DEFECT_QUESTION = ("What does the production kernel get badly wrong on these points (special outputs: NaN, inf, "
                   "wrong sign, lost inf; finite errors over 2^20 ulp), where, why, and what fixes it?")


def _defect_blocks(defects, op) -> list:
    """The first answer of the page: the production kernel's defects on the study's points, per machine,
    realistic inputs first, with place, step, cause and fix (tables/defects.csv); nothing when there are none."""
    lines = defect_lines(defects, op.TERMS_ATTRIBUTE)
    if not lines:
        return []
    return [Para(DEFECT_QUESTION, "question"), Bullets(lines)]


def _answer_blocks(answers: list, scope, defects: list = ()) -> list:
    """The page's opening: the kernel's defects (``defects``, blocks of :func:`_defect_blocks`), each question with
    its headline answers, then the study's scope in one line."""
    blocks = []
    questions = list(dict.fromkeys(a.question for a in answers if a.headline))
    if questions or defects:
        blocks.append(Heading("Answers", 2, "answers"))
    blocks += list(defects)
    for q in questions:
        blocks += [Para(q, "question"), Bullets(merged_shorts([a for a in answers if a.headline
                                                               and a.question == q]))]
    full = [a.sentence for a in answers if a.headline and a.short and a.short != a.sentence]
    if full:
        blocks.append(Details(f"The answers in full ({len(full)}): every size, place and cause, with the "
                              "'precision explain' line of each witness", [Bullets(full)]))
    if scope.empty:  # an operator without guards: no guard scope to state
        return blocks
    done = scope[scope["exercised"]]
    missing = scope[~scope["exercised"]]
    line = "Scope: the study's points exercise " + (", ".join(done["guard"]) if len(done) else "no guard")
    if len(missing):
        where = [r["exercised in"].split(" report (")[0] if " report (" in r["exercised in"] else None
                 for _, r in missing.iterrows()]
        line += "; not " + "; ".join(f"{r['guard']} ({r['why not']}; {pointer_text(study)})"
                                     for (_, r), study in zip(missing.iterrows(), where))
    blocks.append(Para(line + " (guards and terms defined under 'Words and scope').", "note"))
    return blocks


def _build(run_dir: Path, folder: Path, study: str) -> dict:
    """Write every file of the report into ``folder`` (which exists); returns findings.json's content."""
    run = load_run(run_dir)
    tdir, pdir = folder / "tables", folder / "plots"
    tdir.mkdir()
    pdir.mkdir()
    spec = run.run.get("report") or {}
    names = spec.get("sections") or list(DEFAULT_SECTIONS)
    ctx = ReportContext(run, study, spec.get("options") or {}, pdir)
    sections = [s for s in (section_module(n, run.operator).build(ctx) for n in names) if not s.empty]
    for s in sections:
        for name, frame in s.tables.items():
            _write_csv(frame, tdir / name)

    name, description = _study_text(run.run)
    findings = [f for s in sections for f in s.findings]
    order = sorted((i for i, f in enumerate(findings) if not f.shown), key=lambda i: (findings[i].rank, i))
    top = [findings[i] for i in order[:FIRST_SCREEN_FINDINGS]]

    answers = [a for s in sections for a in s.answers]
    scope = scope_table(run)
    defects = defect_table(run)
    if len(defects):
        _write_csv(defects, tdir / "defects.csv")
    first = _answer_blocks(answers, scope, _defect_blocks(defects, run.operator))
    for s in sections:
        first += s.first
    if top:
        first += [Heading("Findings", 2, "findings"),
                  Para(f"The {len(top)} most important of the {len(findings)} findings (those shown above "
                       "excepted); each section lists all of its own. Every sentence is computed from this report's "
                       "tables (findings.json cites the table, row and column of each number).", "note"),
                  Bullets([f.text for f in top])]
    body = []
    for s in sections:
        body.append(Heading(s.title, 2, s.id))
        body += s.body
        if s.findings:
            body.append(Details(f"All {len(s.findings)} findings of this section",
                                [Bullets([f.text for f in s.findings])]))
    terms = used_terms(to_markdown(first + body), run.operator)
    _write_csv(scope, tdir / "scope.csv")
    body += [Heading("Words and scope", 2, "glossary"),
             Para(f"The guards {_guard_span(run.operator)} (the kernel's registry): what each does and what its "
                  "fired count counts."),
             Table(guard_table(run.operator)),
             Para("Scope of this study: per guard, the points it acted on in the variants that have it; a guard "
                  "never exercised here is exercised by the report named."),
             Table(scope, "scope.csv"),
             *([Para("Terms used on this page."), Table(terms)] if len(terms) else [])]
    body += [Heading("Reproduce", 2, "reproduce"), Code(_reproduce(run.run, study))]

    # (the operator is recorded only when it is not the default one: the default's reports keep their bytes)
    named = {} if run.operator_name == DEFAULT_OPERATOR else {"operator": run.operator_name}
    fj = {"study": study, **named, "study_sha256": run.run.get("study_sha256"), "findings": findings_json(findings),
          "answers": answers_json(answers)}
    verdicts = next((sec.tables["verdicts.csv"] for sec in sections if "verdicts.csv" in sec.tables), None)
    if verdicts is not None:  # the verdict of every comparison overall, as in tables/verdicts.csv
        fj["verdicts"] = json.loads(verdicts[verdicts["region"] == "all"].to_json(orient="records"))
    (folder / "findings.json").write_text(json.dumps(fj, indent=1, sort_keys=True) + "\n")
    write_page(folder, f"Precision report: {name}", description, first, body, pdir)
    return fj


def build_report(study: str, runs_dir="out", out_dir="reports") -> Path:
    """Build ``out_dir/<study>/`` from the run folder ``runs_dir/<study>``, atomically.

    Parameters
    ----------
    study : str
        The study name (its run folder's name).
    runs_dir, out_dir : str or Path
        Folder of run folders (default ``out``) and of reports (default ``reports``).

    Returns
    -------
    Path
        The report folder.

    Raises
    ------
    ParameterError
        Unknown study name or missing run folder (nothing is written).
    """
    if not study or "/" in study or study.startswith("."):
        raise ParameterError(f"study={study!r}; expected a study name like guard_ablation")
    run_dir = Path(runs_dir) / study
    load_run(run_dir)  # fail early, before anything is written
    return write_folder(Path(out_dir) / study, lambda folder: _build(run_dir, folder, study))


def report_all(runs_dir="out", out_dir="reports", studies_dir="studies", memory_limit=None, on_plan=None,
               run_limit_seconds: float = REPORT_ALL_RUN_SECONDS):
    """Regenerate every report under ``out_dir`` (the default studies if there is none), then the review page
    (:func:`precision.products.report.review.build_review`: ``index.md``, ``index.html``, ``review.json``).

    ``memory_limit`` and ``on_plan`` go to :func:`precision.engine.sweep.run_study` for a study run first.

    A study whose run folder ``runs_dir/<study>`` is missing is run first from
    ``studies_dir/<study>.toml``, unless its plan (:func:`precision.engine.estimate.plan_study`) takes
    longer than ``run_limit_seconds`` (default :data:`REPORT_ALL_RUN_SECONDS`; ``fp32_exhaustive``: an hour):
    then its report folder is kept as it is (a long study is run on purpose, ``precision run``, never as a
    side effect of regenerating the others).

    Yields
    ------
    (study, report folder, what happened) per report: ``"ran"`` (run, then reported), ``"reported"``
    (reported from its run folder) or ``"kept"`` (not run: the plan's seconds; the report left as it was).

    Raises
    ------
    ParameterError
        A report folder with neither a run folder nor a study file (nothing further is written).
    """
    out = Path(out_dir)
    names = sorted(p.name for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")) if out.is_dir() \
        else []
    names = names or default_studies()
    for name in names:  # a report is made from its run folder, or from its study file by running it first
        if not (Path(runs_dir) / name / "run.json").is_file() and not (Path(studies_dir) / f"{name}.toml").is_file():
            raise ParameterError(f"report --all: {out / name} has neither a run folder {Path(runs_dir) / name} nor "
                                 f"a study file {Path(studies_dir) / name}.toml")
    for name in names:
        what = "reported"
        if not (Path(runs_dir) / name / "run.json").is_file():
            study = load_study(Path(studies_dir) / f"{name}.toml")
            seconds = plan_study(study, None, None).seconds
            if seconds > run_limit_seconds and (out / name / "report.html").is_file():
                yield name, out / name, f"kept (no run folder {Path(runs_dir) / name}; the study is planned at " \
                                        f"{format_seconds(seconds)}: precision run {Path(studies_dir) / name}.toml " \
                                        f"--out {Path(runs_dir) / name} first to rebuild it)"
                continue
            run_study(study, Path(runs_dir) / name, memory_limit=memory_limit, on_plan=on_plan)
            what = "ran"
        yield name, build_report(name, runs_dir, out_dir), what
    from precision.products.report.review import build_review  # the review page, from the reports just written
    build_review(out)
