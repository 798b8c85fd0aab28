"""The report section ``accuracy``: where is the forward inaccurate and why, do its two element recipes agree, and
what do the team's standards accept there?

Read from the run's tables, for the production kernel (``kernel``) on the production machine model (``npu``,
precision.machine.devices) and each output format:

- its worst groups (target x region, every gamma pooled; ``groups.csv``) and the confident-correct ones (t = 1
  with pred > 0, t = 0 with pred < 0: the prediction right and sure, where q = 1 - p by subtraction loses its
  bits);
- the cause, from the variants that change one step each (``kernel_accurate_q``: the accurate 1 - p alone;
  ``kernel_log1p``: log1p(e) alone; ``candidate``: both): the same group's maximum with each;
- the two element recipes (``kernel`` for reduction none, ``kernel_sum_path`` for sum and mean) per gamma: the
  largest error of each, and the outputs that differ (``comparisons.csv``);
- what the acceptance standards (``standards.csv``) accept of the kernel while outputs are far off.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from precision.analysis.scoring import SPECIAL_CLASSES
from precision.machine.devices import PRODUCTION_MODEL
from precision.products.report.answers import Answer
from precision.products.report.document import Para, Section, Table
from precision.products.report.findings import cite, fmt_num
from precision.products.report.tables import region_bounds

__all__ = ["build", "group_maxima", "confident", "decision", "UNREPAIRED_ULP"]

G, C, S = "groups.csv", "comparisons.csv", "standards.csv"
QUESTION = "Where is the forward loss inaccurate, and why; do the kernel's two element recipes agree?"
FIXES = (("kernel_accurate_q", "the accurate 1 - p alone"), ("kernel_log1p", "log1p(e) alone"),
         ("candidate", "both (the candidate)"))


def confident(target, region_lo: float, region_hi: float) -> bool:
    """A region of pred where the prediction is right and confident for this target: t = 1 and pred >= 0, or
    t = 0 and pred <= 0."""
    return bool((target == 1 and region_lo >= 0) or (target == 0 and region_hi <= 0))


def group_maxima(groups: pd.DataFrame, variant: str, machine: str, fmt: str) -> pd.DataFrame:
    """Per (target, region): the largest finite ulp error over every gamma, the special outputs and the count."""
    g = groups[(groups["variant"] == variant) & (groups["machine"] == machine) & (groups["format"] == fmt)
               & (groups["region"] != "all")]
    if g.empty:
        return pd.DataFrame(columns=["target", "region", "max_finite_ulp", "specials", "count"])
    g = g.assign(specials=g[list(SPECIAL_CLASSES)].sum(axis=1))
    return (g.groupby(["target", "region"], sort=False)
            .agg(max_finite_ulp=("max_finite_ulp", "max"), specials=("specials", "sum"), count=("count", "sum"))
            .reset_index())


#: A repair that leaves its group over this many ulp repairs nothing (the verdicts' garbage bound is 2^20; a
#: repair is judged against the best one tested: within twice it, or within 4 ulp, the issue-6 target).
UNREPAIRED_ULP = 2.0**10


def decision(kernel_max: float, repaired: dict) -> str:
    """What to do with the kernel, from its worst group's maximum and that group's maximum with each repair
    (``repaired``: variant -> max ulp, of :data:`FIXES`): keep it within 1 ulp; else the smallest repair within
    twice the best one's error (or 4 ulp)."""
    if kernel_max <= 1.0:
        return "keep the kernel's element recipe (within 1 ulp on these points)."
    if not repaired or min(repaired.values()) > UNREPAIRED_ULP:
        return f"change the kernel; no repair tested brings its worst group within {fmt_num(UNREPAIRED_ULP)} ulp."
    best = min(repaired.values())
    enough = max(2 * best, 4.0)
    alone = [(repaired[v], label) for v, label in FIXES[:2] if repaired.get(v, np.inf) <= enough]
    others = "; ".join(f"{label} {fmt_num(repaired[v])}" for v, label in FIXES if v in repaired)
    if alone:
        value, label = min(alone)
        return (f"change the kernel: {label} brings its worst group from {fmt_num(kernel_max)} to {fmt_num(value)} "
                f"ulp ({others}).")
    return (f"change the kernel: both repairs are needed, together they bring its worst group from "
            f"{fmt_num(kernel_max)} to {fmt_num(repaired.get('candidate', best))} ulp ({others}).")


def build(ctx) -> Section:
    run = ctx.run
    section = Section("accuracy", "Where the forward loss is inaccurate, and why")
    groups = pd.read_csv(run.folder / G) if (run.folder / G).is_file() else pd.DataFrame()
    if groups.empty or "kernel" not in set(groups["variant"]):
        return section
    machine = PRODUCTION_MODEL if PRODUCTION_MODEL in set(groups["machine"]) else sorted(set(groups["machine"]))[0]
    answers, tables = [], []
    for fmt in sorted(set(groups["format"])):
        kernel = group_maxima(groups, "kernel", machine, fmt)
        if kernel.empty:
            continue
        bounds = region_bounds(run)
        kernel["confident"] = [confident(t, *bounds[r]) for t, r in zip(kernel["target"], kernel["region"])]
        worst = kernel.loc[kernel["max_finite_ulp"].idxmax()]
        fixes = {v: group_maxima(groups, v, machine, fmt) for v, _ in FIXES}
        rows = kernel.copy()
        for v, frame in fixes.items():
            rows[f"{v}_max_ulp"] = rows.merge(frame, on=["target", "region"], how="left",
                                              suffixes=("", "_v"))["max_finite_ulp_v"].to_numpy()
        tables.append(rows.assign(format=fmt, machine=machine))
        where = {"variant": "kernel", "machine": machine, "format": fmt}
        sure = kernel[kernel["confident"]]
        other = kernel[~kernel["confident"]]
        sure_max = float(sure["max_finite_ulp"].max()) if len(sure) else float("nan")
        other_max = float(other["max_finite_ulp"].max()) if len(other) else float("nan")
        place = f"t = {int(worst['target'])}, pred in {worst['region']}"
        at_worst = {}
        for v, _ in FIXES:
            f = fixes[v]
            hit = f[(f["target"] == worst["target"]) & (f["region"] == worst["region"])]
            if len(hit):
                at_worst[v] = float(hit["max_finite_ulp"].iloc[0])
        region_word = "a confident-correct region" if bool(worst["confident"]) else "not a confident-correct region"
        top = float(worst["max_finite_ulp"])
        text = (f"{fmt} on {machine}: {decision(top, at_worst)} The kernel's largest error is {fmt_num(top)} ulp at "
                f"{place} ({region_word}; every gamma of the study pooled); in the confident-correct groups at most "
                f"{fmt_num(sure_max)} ulp, elsewhere at most {fmt_num(other_max)}.")
        nums = [cite(f"{fmt}_count", "summary.csv", run.summary, {**where, "profile": fmt}, "count")] \
            if "profile" in run.summary.columns and len(run.summary[(run.summary["variant"] == "kernel")
                                                                     & (run.summary["machine"] == machine)
                                                                     & (run.summary["profile"] == fmt)]) == 1 else []
        answers.append(Answer(QUESTION, text, nums, subject="kernel", machine=machine, format=fmt, short=text))
        # the two element recipes, per gamma
        per_gamma = groups[(groups["machine"] == machine) & (groups["format"] == fmt) & (groups["region"] != "all")
                           & groups["variant"].isin(["kernel", "kernel_sum_path"])]
        if set(per_gamma["variant"]) == {"kernel", "kernel_sum_path"}:
            m = per_gamma.groupby(["gamma", "variant"])["max_finite_ulp"].max().unstack()
            same = [g for g, r in m.iterrows() if r["kernel"] == r["kernel_sum_path"]]
            differ = [g for g in m.index if g not in same]
            comp = run.comparisons
            row = comp[(comp["comparison"] == "kernel_sum_path vs kernel") & (comp["machine"] == machine)
                       & (comp["format"] == fmt) & (comp["region"] == "all")] if len(comp) else comp
            changed = f"; {int(row['changed'].iloc[0]):,} of {int(row['count'].iloc[0]):,} outputs differ " \
                      f"({int(row['better'].iloc[0]):,} better, {int(row['worse'].iloc[0]):,} worse with the sum " \
                      f"path)" if len(row) == 1 else ""
            text = (f"{fmt} on {machine}: the two element recipes (none: Power, clamp after; sum/mean: clamp first, "
                    f"Exp(gamma Ln)) have the same largest error for gamma "
                    f"{', '.join(f'{g:g}' for g in same) or 'none'}"
                    + (f" and differ for gamma {', '.join(f'{g:g}' for g in differ)} (largest errors "
                       + "; ".join(f"gamma {g:g}: none {fmt_num(m.loc[g, 'kernel'])}, sum/mean "
                                   f"{fmt_num(m.loc[g, 'kernel_sum_path'])} ulp" for g in differ) + ")"
                       if differ else "") + f"{changed}.")
            answers.append(Answer(QUESTION, text, [], subject="kernel_sum_path", machine=machine, format=fmt,
                                  short=text))
    standards = run.folder / S
    if standards.is_file():
        s = pd.read_csv(standards)
        s = s[(s["variant"] == "kernel") & (s["machine"] == machine) & (s["region"] == "all")]
        for _, r in s.iterrows():
            if "blind" in r and r["blind"] > 0:
                text = (f"{r['format']} on {machine}: the acceptance standards judge the kernel at level "
                        f"{r['level']} (MERE {r['mere']:.3g}, MARE {r['mare']:.3g}) while accepting "
                        f"{int(r['blind']):,} outputs element-wise (r <= 10 T) that are more than 2^10 ulp wrong: r's "
                        "1e-7 floor in its denominator hides the tiny losses of the confident-correct region.")
                answers.append(Answer(QUESTION, text, [], subject="standards", machine=machine, format=r["format"],
                                      short=text))
    section.answers = answers
    table = pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()
    if not table.empty:
        section.tables["accuracy.csv"] = table
    section.body = [Para(a.sentence) for a in answers] + ([Table(table, "accuracy.csv")] if not table.empty else [])
    return section
