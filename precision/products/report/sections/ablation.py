"""Guard ablation in detail: where (region, gamma: the operator's terms attribute) each guard's comparisons change
outputs, and which way.

Reads the run's paired comparisons of kind ``guard`` (:mod:`precision.operators.sigmoid_focal_loss_grad.comparisons`)
merged per region (``ablation.csv``) and per gamma (``ablation_gamma.csv``);
the verdicts themselves are the verdict section's.  The plot shows, per guard
and region, the net evidence (better minus worse) with the verdict.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from precision.products.report.document import Details, Image, Para, Section, Table
from precision.products.report.findings import Finding, cite
from precision.products.report.plots import save
from precision.products.report.tables import paired_table

__all__ = ["build", "plot_ablation"]

COLUMNS = ["subject", "comparison", "with_variant", "without_variant", "machine", "format", "profile", "region", "count", "changed", "better", "worse",
           "tied", "both_garbage", "specials_fixed", "specials_caused", "median_change_bits", "max_gain_bits",
           "max_loss_bits", "p_value", "verdict"]
_VERDICT_MARK = {"helps": "+", "hurts": "-", "mixed": "±", "inconclusive": "?", "no_effect": ""}


def _short(n: int) -> str:
    """A count in at most four characters: 950, 12k, 3.4M."""
    n = int(n)
    if n < 1000:
        return str(n)
    if n < 10**6:
        return f"{n / 1e3:.0f}k" if n >= 10**4 else f"{n / 1e3:.1f}k"
    return f"{n / 1e6:.1f}M"


def plot_ablation(t: pd.DataFrame, folder, fmt: str, regions, stem: str) -> str | None:
    """Guard x region heatmaps, one per (direction, machine): net evidence better - worse, signed log colour.

    Each cell is annotated with better/worse and marked +, -, ±, ? by its verdict.
    """
    t = t[(t["format"] == fmt) & (t["region"] != "all")]
    if t.empty or not (t["changed"] > 0).any():
        return None
    t = t.assign(direction=np.where(t["without_variant"] == "naive", "naive+Gi vs naive", "kernel vs kernel-Gi"))
    machines = list(dict.fromkeys(t["machine"]))
    directions = list(dict.fromkeys(t["direction"]))
    regions = [r for r in regions if r in set(t["region"])]
    fig, axes = plt.subplots(len(machines), len(directions), figsize=(6.2 * len(directions) + 1.5, 2.9 * len(machines)),
                             squeeze=False, constrained_layout=True)
    net = (t["better"] - t["worse"]).to_numpy(np.float64)
    lim = max(1.0, float(np.log10(1 + np.abs(net)).max()))
    im = None
    for i, machine in enumerate(machines):
        for j, direction in enumerate(directions):
            ax = axes[i, j]
            sub = t[(t["machine"] == machine) & (t["direction"] == direction)]
            guards = list(dict.fromkeys(sub["subject"]))
            img = np.full((len(guards), len(regions)), np.nan)
            for r in sub.itertuples(index=False):
                gi, ri = guards.index(r.subject), regions.index(r.region)
                d = r.better - r.worse
                img[gi, ri] = np.sign(d) * np.log10(1 + abs(d))
                label = f"{_VERDICT_MARK[r.verdict]}{_short(r.better)}/{_short(r.worse)}" if r.changed else "·"
                ax.text(ri, gi, label, ha="center", va="center", fontsize=6)
            im = ax.imshow(img, cmap="coolwarm_r", vmin=-lim, vmax=lim, aspect="auto")
            ax.set_xticks(range(len(regions)), regions, fontsize=6, rotation=30)
            ax.set_yticks(range(len(guards)), guards, fontsize=6)
            ax.set_title(f"{machine}, {fmt}: {direction}", fontsize=7)
    fig.colorbar(im, ax=axes, shrink=0.8, label="better - worse outputs (signed log10(1 + |n|); blue = guard helps)")
    return save(fig, folder, stem)


def build(ctx) -> Section:
    run = ctx.run
    p = run.paired.frame
    term = run.operator.TERMS_ATTRIBUTE  # the per-<term> table (gamma); none when the operator has no such attribute
    section = Section("ablation", f"Guard ablation by region and {term}" if term else "Guard ablation by region")
    if p.empty or not (p["kind"] == "guard").any():
        return section
    t = paired_table(run)
    t = t[t["kind"] == "guard"][COLUMNS].reset_index(drop=True)
    T_TERM = f"ablation_{term}.csv"
    by_term = None
    if term is not None:
        by_term = paired_table(run, ["kind", "subject", "comparison", "with_variant", "without_variant", "machine",
                                     "format", "profile", term, "region"])
        by_term = by_term[(by_term["kind"] == "guard") & (by_term["region"] == "all")]
        by_term = by_term[["subject", "comparison", "machine", "format", term, "count", "changed", "better", "worse",
                           "verdict"]].reset_index(drop=True)
    section.tables.update({"ablation.csv": t, **({T_TERM: by_term} if by_term is not None else {})})
    plots = [Image(plot_ablation(t, ctx.plot_dir, fmt, run.regions, f"ablation_{fmt}"),
                   f"Guard x region, {fmt} output: better/worse outputs per cell, colour = net evidence, mark = "
                   f"verdict (+ helps, - hurts, ± mixed, ? inconclusive)") for fmt in dict.fromkeys(t["format"])]
    section.body = [
        Para("Per guard comparison, machine, format and region: outputs changed, better, worse, tied, both "
             "garbage (special or over 2^20 ulp both with and without), specials fixed and caused, the median and largest change in "
             "bits of error, and the verdict." + (f" {T_TERM} has the same per {term}." if term else "")),
        *plots,
        Details("Per region", [Table(t[t["region"] != "all"], "ablation.csv")]),
        *([Details(f"Per {term}", [Table(by_term[by_term["changed"] > 0], T_TERM, " (rows with changes shown)")])]
          if by_term is not None else []),
    ]
    findings = []
    for (subject, comparison), rows in t[t["region"] != "all"].groupby(["subject", "comparison"], sort=False):
        if not (rows["changed"] > 0).any():
            continue
        top = rows.sort_values("changed", ascending=False, kind="stable").iloc[0]
        w = {k: top[k] for k in ("comparison", "machine", "profile", "region")}
        ch = cite("changed", "ablation.csv", t, w, "changed")
        text = (f"{subject} ({comparison}) changes most in region {top['region']} ({ch.text} outputs on "
                f"{top['machine']} {top['format']}, verdict there: {top['verdict']})")
        nums = [ch]
        if by_term is not None:
            g = by_term[by_term["comparison"] == comparison].sort_values("changed", ascending=False,
                                                                          kind="stable").iloc[0]
            wg = {"comparison": comparison, "machine": g["machine"], "format": g["format"], term: float(g[term])}
            cg = cite(f"changed_{term}", T_TERM, by_term, wg, "changed")
            text += f" and at {term} {g[term]:g} ({cg.text} outputs on {g['machine']} {g['format']})"
            nums.append(cg)
        findings.append(Finding(f"ablation/{comparison}", "ablation", text + ".", nums, 70))
    section.findings = findings
    return section
