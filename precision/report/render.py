"""Report assembly: tables, plots and findings of a run folder into ``reports/<study>/``.

Layout of a report folder::

    report.md          Markdown (plots linked from plots/)
    report.html        self-contained: plots embedded as base64 PNG, no external
                       resource, every string from the study/run HTML-escaped
    findings.json      the findings and the numbers each cites (table, row, column)
    tables/*.csv       every table (see precision.report.tables)
    plots/*.png, *.svg every plot (see precision.report.plots)

The folder is built in a temporary sibling and renamed into place, so a
failed report leaves the previous one (or nothing) behind, never a partial one.
"""

from __future__ import annotations

import base64
import html
import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from precision.bracket import ROOT_NEIGHBOURHOOD_C
from precision.errors import ParameterError
from precision.report import findings as F
from precision.report import plots as P
from precision.report import tables as T
from precision.report.load import load_run

__all__ = ["build_report", "REPORT_COLUMNS"]

#: Summary columns shown in the Markdown/HTML summary table (the CSV has them all).
REPORT_COLUMNS = ["variant", "format", "model", "count", "max_finite_ulp", "nan", "inf", "max_ulp", "witness_pred",
                  "witness_target", "witness_alpha", "witness_gamma", "witness_weight", "witness_dout", "mean_ulp",
                  "p99_ulp", "share_correct", "over_1ulp"]


def _cell(v) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, (float, np.floating)) and not np.isfinite(v):
        return T.fmt_num(v)
    if isinstance(v, (int, np.integer, float, np.floating)):
        return T.fmt_num(v)
    return str(v)


def _md_table(frame: pd.DataFrame) -> str:
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines)


def _html_table(frame: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_cell(v))}</td>" for v in row) + "</tr>"
                   for row in frame.itertuples(index=False))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


class _Doc:
    """Markdown and HTML written side by side from the same blocks."""

    def __init__(self, plot_dir: Path):
        self.md: list = []
        self.html: list = []
        self.plot_dir = plot_dir

    def heading(self, text: str, level: int = 2):
        self.md.append("#" * level + " " + text + "\n")
        self.html.append(f"<h{level}>{html.escape(text)}</h{level}>")

    def para(self, text: str):
        self.md.append(text + "\n")
        self.html.append(f"<p>{html.escape(text)}</p>")

    def bullets(self, items):
        self.md.append("\n".join(f"- {t}" for t in items) + "\n")
        self.html.append("<ul>" + "".join(f"<li>{html.escape(t)}</li>" for t in items) + "</ul>")

    def code(self, text: str):
        self.md.append("```\n" + text + "\n```\n")
        self.html.append(f"<pre>{html.escape(text)}</pre>")

    def table(self, frame: pd.DataFrame, csv_name: str, note: str = ""):
        self.md.append(_md_table(frame) + "\n")
        self.md.append(f"Full table: `tables/{csv_name}`{note}\n")
        self.html.append(_html_table(frame))
        self.html.append(f"<p class='note'>Full table: tables/{html.escape(csv_name)}{html.escape(note)}</p>")

    def image(self, stem: str | None, caption: str):
        if stem is None:
            return
        self.md.append(f"![{caption}](plots/{stem}.png)\n\n*{caption}* (also `plots/{stem}.svg`)\n")
        data = base64.b64encode((self.plot_dir / f"{stem}.png").read_bytes()).decode("ascii")
        self.html.append(f"<figure><img alt='{html.escape(caption, quote=True)}' "
                         f"src='data:image/png;base64,{data}'><figcaption>{html.escape(caption)}</figcaption>"
                         f"</figure>")


_CSS = ("body{font-family:sans-serif;max-width:1200px;margin:auto;padding:1em}"
        "table{border-collapse:collapse;font-size:11px}td,th{border:1px solid #ccc;padding:2px 4px}"
        "img{max-width:100%}pre{background:#f4f4f4;padding:.5em;overflow-x:auto}.note{font-size:11px;color:#555}")


def _write_csv(frame: pd.DataFrame, path: Path) -> None:
    frame.to_csv(path, index=False, float_format="%.17g")


def _reproduce(run: dict, study: str) -> str:
    versions = ", ".join(f"{k} {v}" for k, v in sorted(run.get("versions", {}).items()))
    return "\n".join([
        f"precision run {run.get('study_file', f'studies/{study}.toml')} && precision report {study}",
        f"study file     {run.get('study_file')}",
        f"study sha256   {run.get('study_sha256')}",
        f"seed           {run.get('seed')}",
        f"models         {', '.join(run.get('models', []))}",
        f"pred sets      {json.dumps(run.get('pred_sets', []), sort_keys=True)}",
        f"oracle version {run.get('oracle_version')}",
        f"code sha256    {run.get('code_sha256')}",
        f"python         {run.get('python')}",
        f"versions       {versions}",
        f"points         {run.get('points')}"])


def _study_text(run: dict) -> tuple:
    """The study's name and description as written in its file (shown escaped)."""
    import tomllib
    path = Path(run.get("study_file", ""))
    try:
        data = tomllib.loads(path.read_text())
        return str(data.get("name", run.get("study"))), str(data.get("description", ""))
    except (OSError, tomllib.TOMLDecodeError):
        return str(run.get("study")), ""


def _build(run_dir: Path, folder: Path, study: str) -> dict:
    """Write every file of the report into ``folder`` (which exists); returns findings.json's content."""
    run = load_run(run_dir)
    tdir, pdir = folder / "tables", folder / "plots"
    tdir.mkdir()
    pdir.mkdir()
    doc = _Doc(pdir)
    name, description = _study_text(run.run)
    doc.heading(f"Precision report: {name}", 1)
    doc.para(description)
    findings: list = []

    # --- summary ----------------------------------------------------------
    summary = T.summary_table(run)
    _write_csv(summary, tdir / "summary.csv")
    selector = T.selector_table(run)
    _write_csv(selector, tdir / "by_selector.csv")
    hist = T.histogram_table(run)
    _write_csv(hist, tdir / "hist.csv")
    findings += F.summary_findings(summary)
    points = run.points(["pred", "variant", "model", "profile", "err_ulp"])

    ablation = T.ablation_table(run)
    ablation_gamma = T.ablation_gamma_table(run)
    threshold = T.threshold_table(run)
    recovery = T.recovery_table(run)
    g7 = T.recovery_g7_table(run)
    by_weight = T.recovery_weight_table(run)
    window = pd.DataFrame()
    if not threshold.empty:
        preds = np.unique(run.points(["pred"])["pred"].to_numpy())
        window = T.cancellation_window_table(preds, run.by_gamma["gamma"].unique())
    q_section = threshold.empty and recovery.empty and not points.empty and points["pred"].max() >= 16
    qt = T.q_table() if q_section else pd.DataFrame()
    onset = T.onset_table(run) if q_section else pd.DataFrame()
    has_weights = bool(run.groups_raw["weight"].notna().any()) if "weight" in run.groups_raw.columns else True
    findings += F.ablation_findings(ablation, ablation_gamma, study_has_weights=has_weights)
    findings += F.window_findings(window) + F.threshold_findings(threshold)
    findings += F.recovery_findings(g7, recovery, by_weight)
    findings += F.q_findings(qt, onset, selector if q_section else None)
    bracket = T.bracket_table(run)
    targets = T.targets_table(run, ROOT_NEIGHBOURHOOD_C)
    cand_section = not targets.empty and "candidate" in set(targets["variant"])
    ops = T.opcount_table(run.variants) if cand_section else pd.DataFrame()
    findings += F.candidate_findings(targets, ops, ROOT_NEIGHBOURHOOD_C) if cand_section else []

    doc.heading("Findings")
    doc.para("Every sentence below is computed from the tables of this report; findings.json lists the table, "
             "row and column of each number.")
    doc.bullets([f.text for f in findings])

    doc.heading("Accuracy summary")
    doc.para("Per variant, output format and machine model: max ulp error with its witness inputs (hex floats), "
             "mean ulp (finite errors), p99 (upper bound from the run's histograms), share correctly rounded, "
             "count over 1 ulp, NaN/inf outputs. inf = a NaN or inf output where the exact value is finite.")
    doc.table(summary[REPORT_COLUMNS], "summary.csv")
    doc.image(P.plot_ulp_vs_pred(run.predbins, points.rename(columns={}) if not points.empty else points, pdir),
              "Max ulp error per symmetric-log pred bin (moving max over 3 bins; max over gamma, alpha, selector); "
              "grey: per-point errors kept by the run; NaN/inf drawn at 1e50")
    doc.image(P.plot_pred_gamma_heatmap(run.predbins, pdir),
              "log10 of the max ulp error per pred bin and gamma, naive and kernel")
    doc.image(P.plot_histograms(hist, pdir), "ulp error histogram per variant (counts per octave)")

    sections = {}
    if not ablation.empty:
        _write_csv(ablation, tdir / "ablation.csv")
        _write_csv(ablation_gamma, tdir / "ablation_gamma.csv")
        doc.heading("Guard ablation")
        doc.para("Per guard: outputs whose bits change when the guard is added to naive (naive+Gi vs naive) or "
                 "removed from the kernel (kernel vs kernel-Gi), and max finite / mean / p99 ulp and NaN / inf "
                 "counts with and without it (the CSV also has max_ulp, inf whenever an output is NaN/inf, and "
                 "d_* = with minus without).")
        cols = ["guard", "with_variant", "without_variant", "model", "format", "changed", "count",
                "max_finite_ulp_with", "max_finite_ulp_without", "mean_ulp_with", "mean_ulp_without", "p99_ulp_with", "p99_ulp_without",
                "nan_with", "nan_without", "inf_with", "inf_without"]
        doc.table(ablation[ablation["region"] == "all"][cols], "ablation.csv", " (also per region), "
                  "tables/ablation_gamma.csv (per gamma)")
        for fmt in dict.fromkeys(ablation["format"]):
            doc.image(P.plot_ablation(ablation, pdir, fmt, f"ablation_{fmt}"),
                      f"Guard x region, {fmt} output: change in max ulp and in NaN count (with minus without; "
                      f"colour on a signed log scale)")
        sections["ablation"] = True
    if not threshold.empty:
        _write_csv(threshold, tdir / "threshold.csv")
        _write_csv(window, tdir / "cancellation_window.csv")
        doc.heading("G5 cancellation threshold")
        doc.para("Where the terms of dpos have opposite signs and cancel (float64 ratio |u+v|/max(|u|,|v|) over "
                 "this study's pred values):")
        doc.table(window, "cancellation_window.csv")
        doc.para("Per threshold tau = 2^-k: engages = output bits differ from never; improves / worsens = lower / "
                 "higher ulp error than never at the same point; p99 exact over the points.")
        doc.table(threshold, "threshold.csv")
        doc.image(P.plot_threshold(threshold, pdir), "Max and mean ulp against the G5 threshold; 1/64 marked")
    if not recovery.empty:
        _write_csv(recovery, tdir / "recovery.csv")
        _write_csv(g7, tdir / "recovery_g7.csv")
        doc.heading("Subnormal recovery (G7)")
        doc.para("|raw*weight| = |exact gradient| / |dout|. lost = computed 0 where the correctly rounded value "
                 "is not 0; changed_by_g7 = output bits differ from the same recipe without G7.")
        doc.table(g7, "recovery_g7.csv", " (per binade: tables/recovery.csv)")
        _write_csv(by_weight, tdir / "recovery_weight.csv")
        doc.para("Per weight (recip_overflows: the float32 1/weight is inf, so G7's division by it gives 0):")
        doc.table(by_weight, "recovery_weight.csv")
        doc.image(P.plot_recovery(recovery, pdir), "Max (solid) and mean (dashed) ulp error per binade of "
                                                   "|raw*weight|; NaN/inf at 1e50")
    if q_section:
        _write_csv(qt, tdir / "q_table.csv")
        _write_csv(onset, tdir / "onset.csv")
        doc.heading("q = 1 - p, ln(p) and the powers as x grows")
        doc.para("Computed directly: the kernel's float32 steps on the npu machine (p = Div0ulp(1, Exp(-|x|)+1), "
                 "q = 1 - p, Ln(max(p, 2^-126)), Power_hp(max(q, 2^-126), 2)) against mpmath at 200 bits.")
        doc.table(qt, "q_table.csv")
        doc.para("Where each variant's error passes 1 ulp for x >= 0, per selector (gamma 2 shown):")
        doc.table(onset[onset["gamma"] == 2.0], "onset.csv", " (every gamma)")
        doc.image(P.plot_onset(run.points(["pred", "target", "variant", "model", "err_ulp"]), pdir),
                  "ulp error against x per selector (max over gamma); NaN/inf at 1e50")

    if cand_section:
        _write_csv(targets, tdir / "targets.csv")
        _write_csv(bracket, tdir / "bracket.csv")
        _write_csv(ops, tdir / "opcount.csv")
        hood = T.neighbourhood_table(run.by_gamma["gamma"].unique(), ROOT_NEIGHBOURHOOD_C)
        _write_csv(hood, tdir / "neighbourhood.csv")
        K = F.CANDIDATE_TARGETS
        doc.heading("Candidate against the targets")
        doc.para(f"Targets: fp32 output max error <= {T.fmt_num(K['fp32_max_ulp'])} ulp outside the root "
                 f"neighbourhood of A (gamma < -1 and the cancellation factor C of the selected term's bracket "
                 f"g*p*ln(p) - q at least {T.fmt_num(ROOT_NEIGHBOURHOOD_C)}; precision.bracket), no NaN/inf where "
                 f"the correctly rounded value is finite; fp16 output correctly rounded on a share >= "
                 f"{T.fmt_num(K['fp16_share_correct'])} and never over {T.fmt_num(K['fp16_max_ulp'])} ulp, "
                 f"everywhere; at most {T.fmt_num(K['ops_ratio'])}x the production kernel's primitive ops per "
                 f"element. The verdicts are in the findings above.")
        cols = ["variant", "model", "format", "count", "outside", "max_ulp_outside", "max_finite_ulp_outside",
                "witness_pred_outside", "witness_target_outside", "witness_gamma_outside", "inside",
                "max_ulp_inside", "nan_inf", "not_correct", "share_correct"]
        doc.table(targets[cols], "targets.csv")
        doc.para("The root neighbourhood (C >= " + T.fmt_num(ROOT_NEIGHBOURHOOD_C) + ") as intervals of the "
                 "argument s of A (s = pred for selector 0, -pred for selector 1):")
        doc.table(hood, "neighbourhood.csv")
        doc.para("Errors per band of C (gamma < 0, where the bracket's terms oppose; C = 1 for gamma >= 0). For "
                 "gamma < -1 the bands at or above the threshold are the root neighbourhood; there the error "
                 "grows with C, since the bracket magnifies the relative error of any input it is computed "
                 "from (here the rounding of e = Exp(-|x|)). For -1 <= gamma < 0 the terms cancel without a "
                 "root (without bound at gamma = -1 as x grows); a recipe that removes that cancellation "
                 "algebraically stays accurate in every band.")
        show = bracket[(bracket["gamma"] < 0)][["variant", "model", "format", "gamma", "bracket", "count",
                                                 "max_ulp", "max_finite_ulp", "witness_pred", "witness_target",
                                                 "mean_ulp", "share_correct", "nan", "inf"]]
        doc.table(show, "bracket.csv", " (gamma < 0 shown; the CSV has every gamma)")
        doc.image(P.plot_bracket(bracket, pdir, "fp32", run.models[-1], threshold=ROOT_NEIGHBOURHOOD_C),
                  "Max finite ulp error per band of the cancellation factor C, fp32 output (NaN/inf outputs "
                  "counted in the legend)")
        doc.para("Primitive ops per element (precision.opcount: every finite fp16 pred, both selectors, weight "
                 "present, reduction mean, gamma 2, npu machine; a library exp/ln/pow/div counts as one op):")
        doc.table(ops, "opcount.csv")

    doc.heading("Per selector and region")
    sel_cols = ["variant", "model", "format", "target", "region", "count", "max_ulp", "mean_ulp", "p99_ulp",
                "over_1ulp", "nan", "inf"]
    doc.para(f"{len(selector):,} rows in tables/by_selector.csv (columns: {', '.join(sel_cols)}, witnesses).")

    doc.heading("Reproduce")
    doc.code(_reproduce(run.run, study))

    fj = {"study": study, "study_sha256": run.run.get("study_sha256"), "findings": F.findings_json(findings)}
    (folder / "findings.json").write_text(json.dumps(fj, indent=1, sort_keys=True) + "\n")
    (folder / "report.md").write_text("\n".join(doc.md))
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{html.escape(f'Precision report: {name}')}</title><style>{_CSS}</style></head><body>"
            + "\n".join(doc.html) + "</body></html>\n")
    (folder / "report.html").write_text(page)
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
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{study}.", dir=out))
    try:
        _build(run_dir, tmp, study)
        os.chmod(tmp, 0o755)
        final = out / study
        old = None
        if final.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{study}.old.", dir=out))
            os.replace(final, old / "r")
        os.replace(tmp, final)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final
