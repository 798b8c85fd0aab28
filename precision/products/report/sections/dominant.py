"""What dominates the error: the largest errors per format, selector and region, each with its cause.

For the section's variants (option ``variants``; default: the production
kernel, else the run's first variant), every (format, selector, region) whose
outputs are over 1 ulp or special gets one line: its largest finite error
over the machines, at which inputs, and what that error is at its witness
(:func:`precision.products.report.tables.describe_error`), with the special outputs
of the group by class.  ``kind`` in ``dominant.csv`` names what the error is at the witness
(:func:`precision.products.report.tables.error_kind`).

When the run has ``attribution.csv`` (a study with ``[run] attribution``,
:mod:`precision.engine.attribution_table`), each line states where the error of the
group's attributed points is born instead: how many of them are over 1 ulp and
the top causes (step and cause, with the condition number at the worst point)
that explain most of them, cited from ``dominant_causes.csv``
(:func:`precision.products.report.sections.attribution.dominant_causes`); a group with
no attributed point keeps the description of its witness.  The first screen
shows the most severe lines (specials first, then the largest error).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from precision.products.report.answers import Answer
from precision.products.report.mechanism import explain_line, witness_at
from precision.products.report.document import Bullets, Details, Heading, Para, Section, Table
from precision.products.report.findings import Finding, cite
from precision.products.report.sections.attribution import dominant_causes, step_formula
from precision.products.report.sections.summary import headline_variants
from precision.products.report.tables import describe_error, error_kind, inputs_text, region_text, stat_table
from precision.analysis.scoring import SPECIAL_CLASSES
from precision.recipes.target_kinds import parse_target_text, target_text

__all__ = ["build", "dominant_table", "FIRST_SCREEN_LINES"]

T = "dominant.csv"
TC = "dominant_causes.csv"
#: Lines of this section on the first screen.
FIRST_SCREEN_LINES = 8
#: At most this many causes per line (those explaining the most points over 1 ulp).
CAUSES_PER_LINE = 2


def dominant_table(run, variants) -> pd.DataFrame:
    """Per variant, format, selector and region (over 1 ulp or special): the worst machine's max finite error.

    Columns: variant, format, target, region, machine (of the max), count
    (over every machine), max_finite_ulp with its finite_witness_* columns,
    kind, the special-class counts (over every machine) and ``special``
    (their sum).
    """
    keys = ["variant", "format", "target", "region"]
    per_model = stat_table(run, keys + ["machine"])
    per_model = per_model[per_model["variant"].isin(variants)]
    if per_model.empty:
        return pd.DataFrame()
    totals = stat_table(run, keys)
    totals = totals[totals["variant"].isin(variants)].set_index(keys)
    worst = (per_model.assign(_m=per_model["max_finite_ulp"].fillna(-np.inf))
             .sort_values(keys + ["_m"], ascending=[True] * len(keys) + [False], kind="stable")
             .drop_duplicates(keys).drop(columns="_m").set_index(keys))
    t = pd.DataFrame(index=worst.index)
    t["machine"] = worst["machine"]
    t["count"] = totals["count"]
    t["max_finite_ulp"] = worst["max_finite_ulp"]
    for col in (c for c in worst.columns if c.startswith("finite_witness_")):
        t[col] = worst[col]
    for c in SPECIAL_CLASSES:
        t[c] = totals[c]
    t["special"] = totals[list(SPECIAL_CLASSES)].sum(axis=1)
    t = t.reset_index()
    t["kind"] = [error_kind(m, c, e, f) if np.isfinite(m) else "special"
                 for m, c, e, f in zip(t["max_finite_ulp"].fillna(np.inf), t["finite_witness_computed"].fillna(0.0),
                                       t["finite_witness_exact"].fillna(0.0), t["format"])]
    t = t[(t["max_finite_ulp"].fillna(np.inf) > 1) | (t["special"] > 0)]
    t = t.assign(_s=t["special"], _m=t["max_finite_ulp"].fillna(np.inf))
    return t.sort_values(["_s", "_m"], ascending=False, kind="stable").drop(columns=["_s", "_m"]).reset_index(
        drop=True)


def _causes_text(causes: pd.DataFrame, w: dict, op) -> tuple[str, list] | None:
    """Where the group's attributed points are born, at the steps of the operator ``op``'s recipes (None: the
    group has no attributed point)."""
    if causes.empty:
        return None
    mask = np.ones(len(causes), bool)
    for k, v in w.items():
        mask &= (causes[k] == v).to_numpy()
    rows = causes[mask]
    if rows.empty:
        return None
    first = rows.iloc[0]
    key = dict(w, step=first["step"], cause=first["cause"])
    n_all = cite("group_points", TC, causes, key, "group_points")
    n_over = cite("group_over_1ulp", TC, causes, key, "group_over_1ulp")
    nums = [n_all, n_over]
    if first["group_over_1ulp"] == 0:
        return f"its {n_all.text} attributed points are all within 1 ulp", nums
    parts = []
    for j, (_, r) in enumerate(rows[rows["over_1ulp"] > 0].head(CAUSES_PER_LINE).iterrows()):
        k = dict(w, step=r["step"], cause=r["cause"])
        over = cite(f"over_1ulp_{j}", TC, causes, k, "over_1ulp")
        pct = cite(f"share_pct_{j}", TC, causes, k, "share_pct")
        nums += [over, pct]
        what = r["cause"]
        if np.isfinite(r["witness_cond"]) and r["cause"] in ("cancellation", "sensitivity"):
            cond = cite(f"witness_cond_{j}", TC, causes, k, "witness_cond")
            nums.append(cond)
            what += f", cond {cond.text} at the worst"
        step = step_formula(r["variant"], r["step"], op) if r["step"] != "none" else "no step (every local error 0)"
        parts.append(f"{over.text} ({pct.text}%) {'born ' if not parts else ''}at {step} ({what})")
    return f"of its {n_all.text} attributed points {n_over.text} are over 1 ulp: " + ", ".join(parts), nums


def _line(t: pd.DataFrame, i: int, causes: pd.DataFrame, op, machines: int) -> tuple[str, list]:
    """One group's line: its worst machine's max finite error and witness, where its error is born, and its
    special outputs counted over the run's ``machines`` machines (said so when there are several)."""
    r = t.iloc[i]
    w = {"variant": r["variant"], "format": r["format"], "target": parse_target_text(r["target"]),
         "region": r["region"]}
    mx, cnt = cite("max_finite_ulp", T, t, w, "max_finite_ulp"), cite("count", T, t, w, "count")
    specials = [cite(c, T, t, w, c) for c in SPECIAL_CLASSES]
    nums = [cnt] + [c for c in specials if c.value]
    head = f"{r['format']}, t={target_text(r['target'])}, {region_text(r['region'])}, {r['variant']}"
    bad = ", ".join(f"{c.text} {c.name}" for c in specials if c.value)
    over = f" on the {machines} machines" if machines > 1 else ""
    tail = f"; {bad} of {cnt.text} outputs{over}." if bad else f"; no special output of {cnt.text}{over}."
    born = _causes_text(causes, w, op)
    if born is not None:
        nums += born[1]
    if np.isnan(r["max_finite_ulp"]):
        return f"{head}: no finite output" + (f"; {born[0]}" if born else "") + f"; {bad} of {cnt.text}{over}.", nums
    nums.append(mx)
    at = inputs_text(r, "finite_witness_", attributes=op.ATTRIBUTES, dout="dout" in op.INPUTS)
    text = f"{head}: {mx.text} ulp (its worst machine: {r['machine']}) at {at}"
    described = describe_error(r["max_finite_ulp"], r["finite_witness_computed"], r["finite_witness_exact"],
                               r["format"])
    if born is None:
        return f"{text}: {described}{tail}", nums
    if r["kind"] in ("spurious", "lost_to_zero"):  # the figure itself needs explaining
        text += f" ({described})"
    return f"{text}; {born[0]}{tail}", nums


def build(ctx) -> Section:
    run = ctx.run
    variants = list(ctx.option("dominant", "variants")) or headline_variants(run.variants, run.operator)[:1]
    t = dominant_table(run, variants)
    section = Section("dominant", "What dominates the error")
    if t.empty:
        return section
    section.tables[T] = t
    causes = dominant_causes(run, variants)
    if not causes.empty:
        section.tables[TC] = causes
    lines = [_line(t, i, causes, run.operator, len(run.machines)) for i in range(len(t))]
    source = ("where the error is born from the attribution of each group's kept points (attribution.csv)"
              if not causes.empty else "what the error is at each group's witness")
    section.first = [Heading("What dominates the error", 2, "dominant"),
                     Para(f"{', '.join(variants)}: the worst (format, selector, region) groups, special outputs "
                          f"first, with {source}; {len(t)} groups over 1 ulp or special in all (below).", "note"),
                     Bullets([text for text, _ in lines[:FIRST_SCREEN_LINES]])]
    shown = t.assign(inputs=[inputs_text(r, "finite_witness_", attributes=run.operator.ATTRIBUTES,
                                                 dout="dout" in run.operator.INPUTS) for _, r in t.iterrows()])
    section.body = [Para("Every group over 1 ulp or with special outputs; max_finite_ulp is over the machines (the "
                         "machine of the max in `machine`), counts are over every machine; `kind` is what the error is at "
                         "its witness: special, lost_to_zero, spurious (the exact value rounds to zero or is subnormal, "
                         "the output is not), off_by_factor (relative error >= 1), inaccurate, rounding."),
                    Table(shown[["variant", "format", "target", "region", "machine", "count", "max_finite_ulp", "kind",
                                 "inputs", *SPECIAL_CLASSES]], T)]
    if not causes.empty:
        term = run.operator.TERMS_ATTRIBUTE
        over_terms = f" and {term}s" if term else ""
        section.body.append(Details(
            "Where the error of each group's attributed points is born (dominant_causes.csv)",
            [Para(f"Per group and top cause (step, cause) over the machines{over_terms}: the attributed points, how "
                  "many are over 1 ulp (special outputs included) and their share of the group's points over 1 ulp "
                  "(share_pct), the largest error and, at that point, the top step's condition number and local "
                  "error."), Table(causes, TC)]))
    section.findings = [Finding(f"dominant/{i}", "dominant", text, nums, 25 + i, shown=True)
                        for i, (text, nums) in enumerate(lines[:FIRST_SCREEN_LINES])]
    section.answers = _next_answer(run, t, lines)
    return section


def _next_answer(run, t: pd.DataFrame, lines: list) -> list:
    """What to look at next: the worst group (the first line) and the command that shows its witness step by
    step (not a headline: the guards' answers and the scope come first)."""
    if not lines:
        return []
    r = t.iloc[0]
    w = witness_at(run, r["variant"], r, "finite_witness_")
    text, nums = lines[0]
    tail = f" See it step by step: `{explain_line(w)}`." if w is not None else ""
    return [Answer("What should a newcomer look at next?", f"The worst group: {text}{tail}", nums,
                   subject=r["variant"], machine=str(r["machine"]), format=str(r["format"]),
                   region=str(r["region"]), verdict=str(r["kind"]),
                   mechanism={"witness": w.as_dict(), "explain": explain_line(w)} if w is not None else {})]
