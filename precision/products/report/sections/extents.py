"""Where the holes are: per variant, machine and selector, how many outputs pass 1, 2^10 and 2^20 ulp, and the
first and the last pred where one does (``extents.csv`` of the run).

On an exhaustive set the extent is exact: every value of the format between the first and the last pred was
evaluated (the outputs between them need not all be off: ``over`` counts those that are); on a sampled set it
is the extent among the sampled preds.
"""

from __future__ import annotations

import math

import pandas as pd

from precision.analysis.scoring import SPECIAL_CLASSES
from precision.products.report.document import Bullets, Details, Para, Section, Table
from precision.products.report.findings import Finding, cite, fmt_num
from precision.products.report.tables import exact_text, maximum_label

__all__ = ["build"]

T = "extents.csv"


def _level_text(level: float) -> str:
    """``1``, ``2^10``, ``2^20``: an extent level in ulp as the page spells it."""
    e = math.log2(level)
    return fmt_num(int(level)) if e < 4 or e != int(e) else f"2^{int(e)}"


def build(ctx) -> Section:
    """One finding per variant, machine, attribute values and selector with an output past 1 ulp (the highest
    level passed, with its extent: ranked with the report's worst defects past 2^20 ulp), and the table."""
    run = ctx.run
    section = Section("extents", "Where the holes are")
    path = run.folder / T
    if not path.is_file():
        section.body = [Para(f"This run folder has no {T} (written by runs of this version on); run the study again "
                             "to see each hole's extent.")]
        return section
    t = pd.read_csv(path, keep_default_na=False, dtype={"first_pred": str, "last_pred": str, "weight": str})
    section.tables[T] = t
    keys = [c for c in t.columns if c not in ("level_ulp", "over", "first_pred", "last_pred")]
    inputs = [c for c in keys if c not in ("variant", "machine", "format", "profile", "target")]
    varying = [c for c in inputs if t[c].nunique() > 1]
    label = maximum_label(run, str(t["format"].iloc[0])) if len(t) else ""
    findings, lines = [], []
    for key, rows in t.groupby(keys, sort=False):
        rows = rows[rows["over"] > 0]
        if rows.empty:
            continue
        top = rows.iloc[-1]  # (levels ascend) the highest level passed
        where = {**dict(zip(keys, key)), "level_ulp": float(top["level_ulp"])}
        over = cite("over", T, t, where, "over")
        at = "".join(f", {c} {fmt_num(top[c]) if isinstance(top[c], float) else top[c]}" for c in varying)
        text = (f"{top['variant']} on {top['machine']}, {top['format']}{at}, target {top['target']}: {over.text} "
                f"outputs more than {_level_text(top['level_ulp'])} ulp off, the first at pred = "
                f"{exact_text(top['first_pred'])}, the last at {exact_text(top['last_pred'])}.")
        lines.append((-top["level_ulp"], -over.value, text))
        findings.append(Finding(f"extents/{'/'.join(str(k) for k in key)}", "extents", text, [over],
                                12 if top["level_ulp"] >= 2**20 else 40))
    section.findings = findings
    shown = t.assign(level=[f"> {_level_text(v)} ulp" for v in t["level_ulp"]],
                     first=[exact_text(v) if v else "" for v in t["first_pred"]],
                     last=[exact_text(v) if v else "" for v in t["last_pred"]])
    shown = shown[["variant", "machine", "format", *varying, "target", "level", "over", "first", "last"]]
    section.body = [Para("Per variant, machine and selector: how many outputs are more than 1, 2^10 and 2^20 ulp "
                         f"off ({', '.join(SPECIAL_CLASSES)} outputs count as past every level), and the first and the "
                         f"last pred where one is ({label}; between them, only the outputs counted are off).")]
    if lines:
        section.body.append(Bullets([text for *_, text in sorted(lines, key=lambda x: x[:2])]))
    section.body.append(Details("Every extent", [Table(shown, T)]))
    return section
