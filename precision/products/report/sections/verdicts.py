"""The verdict grid: every paired comparison of the run, per machine and format, on the first screen.

Rows are comparisons (a guard added to naive or removed from the kernel, a G5
threshold against no correction, a declared variant pair); columns are
(machine, profile); each cell is the verdict word of
:func:`precision.analysis.paired.verdicts` and its evidence, ``better/worse`` among
the changed outputs.  ``verdicts.csv`` holds every comparison overall
(region ``all``) and per region, with the counts and tests behind each
verdict.  The comparisons of G5 thresholds against 1/64 belong to the
threshold section.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from precision.products.report.answers import (NOT_EXERCISED, Answer, cells_text, effect_short, guard_label, magnitude,
                                               pointer_text, magnitude_cites, magnitude_sentence, magnitude_text,
                                               shown_verdict, subject_guard, verdict_table)
from precision.products.report.document import Bullets, Details, Heading, Para, Section, Table
from precision.products.report.findings import Finding, cite, fmt_num, p_text
from precision.products.report.mechanism import mechanism_of
from precision.products.report.tables import grid_scope
from precision.analysis.paired import VERDICT_RULE

__all__ = ["build", "verdict_grid", "cell_text", "against_production", "VERDICT_COLUMNS", "verdict_columns", "cell_answer",
           "garbage_class_clause",
           "GUARD_QUESTION"]

#: The question the verdicts of guard comparisons answer.
GUARD_QUESTION = "Does each guard earn its place: where does it help or hurt, by how much, and why?"
#: The question the declared comparisons (a variant against another) answer.
DECLARED_QUESTION = "Is each variant better than the one it is compared with?"

#: The class changes counted among both_garbage outputs -> how a sentence says them.
GARBAGE_CLASS_CHANGES = {"changed_garbage_made_special": "made special (NaN, inf, wrong sign or lost inf)",
                         "changed_garbage_made_finite": "made finite, still over 2^20 ulp",
                         "changed_garbage_special_changed": "changed from one special class to another"}

def garbage_class_clause(table: str, t: pd.DataFrame, where: dict, row, name: str) -> tuple[str, list]:
    """``25 made special (NaN, ...), 3 made finite, still over 2^20 ulp``: the class changes among the
    both_garbage outputs of one comparison row (``row`` of ``t``, written as ``table``, found by ``where``), each
    count cited (cite names ``name.format(col=column)``); ``("", [])`` when there is none."""
    moved = [c for c in GARBAGE_CLASS_CHANGES if c in t.columns and int(row[c]) > 0]
    cites = [cite(name.format(col=c), table, t, where, c) for c in moved]
    return ", ".join(f"{n.text} {GARBAGE_CLASS_CHANGES[c]}" for n, c in zip(cites, moved)), cites


#: Columns of verdicts.csv (the comparisons table of the run, in this order).
VERDICT_COLUMNS = ["subject", "comparison", "kind", "with_variant", "without_variant", "machine", "format", "profile",
                   "region", "count", "changed", "better", "worse", "tied", "both_garbage", "specials_fixed",
                   "fixed_correct", "fixed_le_1ulp", "fixed_le_2p10", "fixed_le_2p20",
                   "specials_caused", "finite_better", "finite_worse", "p_value", "p_specials", "p_finite",
                   "median_change_bits", "median_gain_bits", "max_gain_bits", "median_loss_bits", "max_loss_bits",
                   "changed_became_correct", "changed_became_le_1ulp", "changed_still_garbage",
                   "changed_garbage_made_special", "changed_garbage_made_finite", "changed_garbage_special_changed",
                   "share_correct_with", "share_correct_without", "fired", "exercised", "not_exercised_because",
                   "exercised_in",
                   "gain_witness_pred", "gain_witness_target", "gain_witness_weight", "gain_witness_dout",
                   "loss_witness_pred", "loss_witness_target", "loss_witness_weight", "loss_witness_dout", "verdict"]


def verdict_columns(op) -> list:
    """:data:`VERDICT_COLUMNS` with the operator ``op``'s attributes among each witness's inputs (after target)."""
    out = []
    for c in VERDICT_COLUMNS:
        out.append(c)
        if c.endswith("_witness_target"):
            out += [c.replace("target", a) for a in op.ATTRIBUTES]
    return out

T = "verdicts.csv"


def cell_text(row) -> str:
    """``helps 32,655/183; +1/3.2 -0.5/1 b; CR +12; >2^20 0``: the verdict, its evidence (better/worse of the
    changed outputs) and its size (:func:`precision.products.report.answers.magnitude_text`); ``not exercised`` where the
    guard acted nowhere."""
    shown = shown_verdict(row)
    if shown == NOT_EXERCISED:
        return NOT_EXERCISED
    if row["verdict"] == "no_effect":
        return "no_effect"
    size = magnitude_text(row)
    return f"{row['verdict']} {fmt_num(int(row['better']))}/{fmt_num(int(row['worse']))}" + (f"; {size}" if size else "")


def against_production(t: pd.DataFrame, op) -> np.ndarray:
    """Rows comparing a G5 threshold with the production threshold of the operator ``op`` (not with no
    correction)."""
    base = {v: op.is_production(v) for v in t.loc[t["kind"] == "threshold", "without_variant"].unique()}
    return ((t["kind"] == "threshold") & t["without_variant"].map(base).eq(True)).to_numpy()


def verdict_grid(t: pd.DataFrame, machines) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(cells, CSS classes): one row per comparison, one column per (machine, profile)."""
    t = t.assign(cell=[f"{m} {p}" for m, p in zip(t["machine"], t["profile"])])
    cols = sorted(dict.fromkeys(t["cell"]), key=lambda c: (machines.index(c.split(" ")[0])
                                                         if c.split(" ")[0] in machines else 99, c))
    rows = list(dict.fromkeys(zip(t["subject"], t["comparison"])))
    text = pd.DataFrame("", index=range(len(rows)), columns=["subject", "comparison"] + cols)
    style = pd.DataFrame("", index=text.index, columns=text.columns)
    where = {r: i for i, r in enumerate(rows)}
    for r in t.itertuples(index=False):
        i = where[(r.subject, r.comparison)]
        text.loc[i, "subject"], text.loc[i, "comparison"] = r.subject, r.comparison
        text.loc[i, r.cell] = cell_text(r._asdict())
        style.loc[i, r.cell] = r.verdict if getattr(r, "exercised", True) else "na"
    style = style.where(text != "", "na")
    style[["subject", "comparison"]] = ""
    return text, style


def _cell_name(row) -> str:
    return f"{row['machine']} {row['profile']}"


def _comparison_findings(grid: pd.DataFrame, t: pd.DataFrame, op) -> list:
    """One finding per comparison of the grid with any change; the comparisons that change nothing, together.

    Numbers are cited from ``t`` (all of verdicts.csv), at region ``all``.
    """
    out = []
    silent = []
    thresholds = grid[grid["kind"] == "threshold"]
    if len(thresholds):  # one line for the thresholds against no correction; the operator's section has the rest
        cells = []
        for (machine, profile), rows in thresholds.groupby(["machine", "profile"], sort=False):
            counts = rows["verdict"].value_counts()
            cells.append(f"{machine} {profile}: " + ", ".join(f"{v} {fmt_num(int(n))}" for v, n in counts.items()))
        phrases = op.PHRASES
        out.append(Finding("verdicts/thresholds", "verdicts",
                           f"{phrases['thresholds']} ({fmt_num(len(dict.fromkeys(thresholds['subject'])))}"
                           f" thresholds): " + "; ".join(cells) + f" ({phrases['thresholds_elsewhere']}).", [], 20))
        grid = grid[grid["kind"] != "threshold"]
    grid = grid.assign(shown=[shown_verdict(r) for _, r in grid.iterrows()])
    for (subject, comparison), rows in grid.groupby(["subject", "comparison"], sort=False):
        if (rows["shown"] == "no_effect").all():
            silent.append(f"{subject} ({comparison})")
            continue
        nums, parts = [], []
        for verdict, vrows in rows.groupby("shown", sort=False):
            cells = ", ".join(_cell_name(r) for _, r in vrows.iterrows())
            if verdict == "no_effect":
                parts.append(f"no_effect on {cells}")
                continue
            if verdict == NOT_EXERCISED:
                parts.append(f"not exercised on {cells} ({vrows['not_exercised_because'].iloc[0]}; "
                             f"{pointer_text(vrows['exercised_in'].iloc[0])})")
                continue
            top = vrows.sort_values("changed", ascending=False, kind="stable").iloc[0]
            w = {"comparison": comparison, "machine": top["machine"], "profile": top["profile"], "region": "all"}
            tag = f"{top['machine']}_{top['profile']}"
            ch, b, wo, cnt = (cite(f"{c}_{tag}", T, t, w, c) for c in ("changed", "better", "worse", "count"))
            nums += [ch, b, wo, cnt]
            text = (f"{verdict} on {cells} (on {_cell_name(top)}: {b.text} better, {wo.text} worse of {ch.text} "
                    f"changed outputs of {cnt.text}")
            p = float(top["p_value"])
            if p >= 1e-300:
                pc = cite(f"p_{tag}", T, t, w, "p_value")
                nums.append(pc)
                text += f", {p_text(p).replace(fmt_num(p), pc.text)}"
            else:
                text += ", p < 1e-300"
            if top["specials_fixed"] > 0 or top["specials_caused"] > 0:
                fx, cs, cr = (cite(f"{c}_{tag}", T, t, w, c) for c in ("specials_fixed", "specials_caused",
                                                                       "fixed_correct"))
                nums += [fx, cs, cr]
                text += (f"; special outputs fixed {fx.text} ({cr.text} of them now correctly rounded), "
                         f"caused {cs.text}")
            if top["both_garbage"] > 0:
                bg = cite(f"both_garbage_{tag}", T, t, w, "both_garbage")
                nums.append(bg)
                text += f"; {bg.text} changed outputs are special or over 2^20 ulp both with and without and count for neither"
                moved, cites = garbage_class_clause(T, t, w, top, "{col}_" + tag)
                if moved:
                    nums += cites
                    text += f" (of them {moved})"
            parts.append(text + ")")
        rank = 10 if rows["shown"].isin(["helps", "hurts", "mixed"]).any() else 30
        out.append(Finding(f"verdicts/{comparison}", "verdicts", f"{subject}, {comparison}: " + "; ".join(parts)
                           + ".", nums, rank))
    if silent:
        out.append(Finding("verdicts/no_effect", "verdicts",
                           "No output bit changes on any machine or format with " + "; ".join(silent) + ".", [], 40))
    return out


def cell_answer(run, t: pd.DataFrame, row, question: str, with_mechanism: bool = True) -> Answer:
    """The answer of one verdict cell (a comparison on one machine and profile, pooled regions), every number
    cited from verdicts.csv."""
    w = {"comparison": row["comparison"], "machine": row["machine"], "profile": row["profile"], "region": "all"}
    tag = f"{row['machine']}_{row['profile']}_"
    head = f"{row['subject']} ({row['comparison']}) on {row['machine']} {row['profile']}"
    base = dict(question=question, subject=row["subject"], comparison=row["comparison"], machine=row["machine"],
                format=row["format"], region="all", exercised=bool(row["exercised"]))
    if not row["exercised"]:
        cnt = cite(f"{tag}count", T, t, w, "count")
        return Answer(sentence=f"{head}: not exercised on its {cnt.text} points: {row['not_exercised_because']}; "
                               f"{pointer_text(row['exercised_in'])}.", numbers=[cnt], verdict="not_exercised",
                      short=f"not exercised ({row['not_exercised_because']}; {pointer_text(row['exercised_in'])})",
                      **base)
    tracked = subject_guard(row["subject"]) and not pd.isna(row["fired"])  # (an operator may not keep decisions)
    fired = [cite(f"{tag}fired", T, t, w, "fired")] if tracked else []
    cnt = cite(f"{tag}count", T, t, w, "count")
    acted = f"acted on {fired[0].text} of {cnt.text} points" if fired else \
        f"compared on {cnt.text} points" + (" (fired: not tracked)" if subject_guard(row["subject"]) else "")
    grid = grid_scope(run)
    acted += f" {grid}" if grid else ""
    if row["verdict"] == "no_effect":
        return Answer(sentence=f"{head}: {acted} and changed no output.", numbers=[*fired, cnt],
                      verdict="no_effect", short=f"{acted} and changed no output", **base)
    size = magnitude_cites(tag, T, t, w)
    text = (f"{head}: {row['verdict']}; {acted}, changed {size['changed'].text}: {size['better'].text} better, "
            f"{size['worse'].text} worse; {magnitude_sentence(size, counts=False)}")
    mech, where = {}, []
    if with_mechanism:
        mech, clause, where = mechanism_of(run, t, row, T)
        if clause:
            text += f". {clause[0].upper()}{clause[1:]}"
    short = effect_short(size, mech, row["verdict"])
    assume = getattr(run.operator, "decision_assumption", None)
    guard = subject_guard(row["subject"])
    assumption = assume(guard, int(row["fired"]), int(row["count"])) if assume and guard and fired else None
    if assumption:  # the verdict holds under it only (G4 with the whole task as one tile: an upper bound)
        text += f". Assumption: {assumption}"
        short += f"; assumption: {assumption}"
    return Answer(sentence=text + ".", numbers=[*fired, cnt, *size.values(), *where], verdict=row["verdict"],
                  magnitude=magnitude(row), mechanism=mech, short=short, **base)


_STRENGTH = {"hurts": 0, "mixed": 1, "helps": 2, "inconclusive": 3, "no_effect": 4}


def _subject_answers(run, t: pd.DataFrame, grid: pd.DataFrame) -> list:
    """Per subject (a guard or a declared variant): one headline answer naming its verdict on every cell, with
    the largest effect's sentence (its ``short``: the verdicts by comparison, cells in words, and the largest
    effect in one clause); then every cell's own answer (not headline)."""
    out = []
    every = list(dict.fromkeys(zip(grid["machine"], grid["profile"])))
    for subject, rows in grid.groupby("subject", sort=False):
        guard = subject_guard(subject)
        question = GUARD_QUESTION if guard else DECLARED_QUESTION
        cells = [cell_answer(run, t, r, question) for _, r in rows.iterrows()]
        words = {}
        for (_, r), a in zip(rows.iterrows(), cells):
            words.setdefault((a.verdict.replace("_", " "), r["comparison"]), []).append(_cell_name(r))
        listing = "; ".join(f"{v} on {', '.join(c)} ({comparison})" for (v, comparison), c in words.items())
        brief = {}
        for (_, r), a in zip(rows.iterrows(), cells):
            brief.setdefault(r["comparison"], {}).setdefault(a.verdict.replace("_", " "), []).append(
                (r["machine"], r["profile"]))
        exercised = any(bool(r["exercised"]) for _, r in rows.iterrows())
        short_listing = "; ".join(f"{comparison}: " + ", ".join(
            f"{v} {cells_text(c, every)}" if cells_text(c, every) == "everywhere" else f"{v} on {cells_text(c, every)}"
            for v, c in by.items()) for comparison, by in brief.items()) if exercised else ""
        acting = [(i, r) for i, (_, r) in enumerate(rows.iterrows()) if r["exercised"]
                  and r["verdict"] in _STRENGTH and r["verdict"] != "no_effect"]
        label = guard_label(guard, run.operator) if guard else subject
        if not guard and all(str(c).startswith(f"{subject} vs ") for c in brief):
            label = ""  # "kernel vs naive: helps everywhere" names its subject already
        if acting:
            i, _ = min(acting, key=lambda ir: (_STRENGTH[ir[1]["verdict"]], -int(ir[1]["changed"])))
            top = cells[i]
            sentence = f"{label or subject}: {listing}. Largest effect: {top.sentence}"
            head = Answer(question=question, sentence=sentence, numbers=top.numbers, subject=subject,
                          comparison=top.comparison, machine=top.machine, format=top.format, verdict=top.verdict,
                          exercised=True, magnitude=top.magnitude, mechanism=top.mechanism,
                          short=f"{label + ': ' if label else ''}{short_listing}. Largest: {top.verdict} on "
                                f"{top.machine} {top.format} ({top.comparison}): {top.short}.")
        else:
            first = cells[0]
            head = Answer(question=question, sentence=f"{label or subject}: {listing}. {first.sentence}",
                          numbers=first.numbers,
                          subject=subject, comparison=first.comparison, machine=first.machine, format=first.format,
                          verdict=first.verdict, exercised=first.exercised,
                          short=(f"{label + ': ' if label else ''}{short_listing}." if exercised
                                 else f"{label or subject}: {first.short}."))
        out.append(head)
        for a in cells:
            a.headline = False
        out += cells
    return out


def build(ctx) -> Section:
    """The verdict grid (first screen), its rule, verdicts.csv and one finding per comparison."""
    run = ctx.run
    t = verdict_table(run)
    section = Section("verdicts", "Verdicts: does each guard, threshold or variant change the error?"
                      if run.operator.GUARD_NAMES else "Verdicts: does each variant change the error?")
    if t.empty:
        return section
    t = t[[c for c in verdict_columns(run.operator) if c in t.columns]].reset_index(drop=True)
    section.tables[T] = t
    grid = t[(t["region"] == "all").to_numpy() & ~against_production(t, run.operator)]
    text, style = verdict_grid(grid, run.machines)
    section.first = [
        Heading("Verdicts", 2, "verdict-grid"),
        Table(text, T, " (every region, every count and test"
              + "".join(f"; {p}" for p in [run.operator.PHRASES.get("thresholds_shown")] if p) + ")",
              style, id="verdict-table"),
        *([Para(f"Pooled over every region except {', '.join(run.separate)} (kept apart by the study; per region in "
                f"{T}).", "rule")] if run.separate else []),
        Para("Cell: verdict, then better/worse = changed outputs whose error falls / rises with the first variant "
             "of the comparison; then the size over the changed outputs: +median/max bits gained, -median/max "
             "bits lost, CR +n = changed outputs that became correctly rounded, >2^20 n = changed outputs still "
             "over 2^20 ulp or special. "
             + ("'not exercised': the guard's condition held at none of the points (the reason and the report that "
                "exercises it are in the answers above and in verdicts.csv). " if run.operator.FIRED_COLUMNS else "")
             + "Rule: paired on the same points; exact sign tests at level 0.01 on specials fixed/caused and on "
             "finite outputs better/worse; ties, and outputs special or over 2^20 ulp both with and without, are "
             "no evidence.", "rule"),
    ]
    per_region = t[(t["region"] != "all")]
    section.body = [
        Para(VERDICT_RULE),
        Details("Verdicts per region (changed, better/worse, verdict)", [Table(
            per_region[["comparison", "machine", "profile", "region", "count", "changed", "better", "worse", "tied",
                        "both_garbage", "specials_fixed", "specials_caused", "p_value", "verdict"]],
            T)]),
    ]
    section.findings = _comparison_findings(grid.reset_index(drop=True), t, run.operator)
    section.answers = _subject_answers(run, t, grid[grid["kind"] != "threshold"].reset_index(drop=True))
    cells = [a.sentence for a in section.answers if not a.headline]
    if cells:
        section.body.append(Details(f"Every cell's answer ({len(cells)}: size, place and mechanism)",
                                    [Bullets(cells)]))
    return section
