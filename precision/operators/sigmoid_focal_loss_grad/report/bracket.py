"""Errors by band of the bracket's cancellation factor C, and the root neighbourhood as intervals of s.

Studies with ``bracket_bands`` only.  ``bracket.csv``: statistics per
(variant, machine, format, gamma, band) with the band's lower edge ``c_lo``
(from the run's edges, :func:`precision.operators.sigmoid_focal_loss_grad.bracket.band_ranges`);
``neighbourhood.csv``: the intervals of the argument s of A (pred for selector
0, -pred for selector 1) where C >= the root neighbourhood's edge, per
gamma < -1.  For gamma < -1 the error grows with C, since the bracket
magnifies the relative error of any input it is computed from.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from precision.products.report.document import Details, Image, Para, Section, Table
from precision.products.report.plots import draw_curves, error_axis, legend_outside, save, special_level
from precision.products.report.tables import stat_table
from precision.analysis.scoring import SPECIAL_CLASSES

__all__ = ["build", "bracket_table", "band_lower_edges", "neighbourhood_table", "plot_bracket"]


def band_lower_edges(run) -> dict:
    """Band label -> its lower edge of C, from the run's bracket edges (numbers, never parsed from labels)."""
    return {label: lo for label, (lo, _) in zip(run.brackets, run.operator.band_ranges(run.bracket_edges))}


def bracket_table(run) -> pd.DataFrame:
    """Stats per (variant, machine, format, gamma, bracket band) with ``c_lo``; empty without bracket bands."""
    if "bracket" not in run.stats.frame.columns:
        return pd.DataFrame()
    t = stat_table(run, ["variant", "machine", "format", "gamma", "bracket"])
    t.insert(5, "c_lo", t["bracket"].map(band_lower_edges(run)))
    return t


def neighbourhood_table(gammas, c_threshold: float, op) -> pd.DataFrame:
    """The root neighbourhood's intervals per gamma < -1, of the operator ``op``
    (:func:`precision.operators.sigmoid_focal_loss_grad.bracket.neighbourhood`)."""
    rows = [(float(g), c_threshold, a, b) for g in sorted(gammas) for a, b in op.neighbourhood(g, c_threshold)]
    return pd.DataFrame(rows, columns=["gamma", "c_threshold", "s_lo", "s_hi"])


def plot_bracket(bracket: pd.DataFrame, folder, fmt: str, machine: str, threshold: float,
                 stem: str = "error_vs_cancellation") -> str | None:
    """Max finite ulp per band of C, one panel per gamma < -1, a line per variant; the neighbourhood's edge marked."""
    b = bracket[(bracket["format"] == fmt) & (bracket["machine"] == machine) & (bracket["gamma"] < -1)]
    gammas = sorted(dict.fromkeys(b["gamma"]))
    if not gammas:
        return None
    level = special_level(b["max_finite_ulp"])
    fig, axes = plt.subplots(1, len(gammas), figsize=(4.0 * len(gammas) + 1.6, 3.2), squeeze=False, sharey=True)
    for j, gamma in enumerate(gammas):
        ax = axes[0, j]
        sub = b[b["gamma"] == gamma]
        bands = sorted(dict.fromkeys(sub["c_lo"]))
        pos = {c: i for i, c in enumerate(bands)}
        labels = list(sub.drop_duplicates("c_lo").sort_values("c_lo")["bracket"])
        curves = []
        for variant, rows in sub.groupby("variant", sort=False):
            rows = rows.sort_values("c_lo")
            bad = int(rows[list(SPECIAL_CLASSES)].to_numpy().sum())
            curves.append((variant + (f" (+{bad:,} special)" if bad else ""), rows["c_lo"].map(pos).to_numpy(),
                           rows["max_finite_ulp"].to_numpy(np.float64)))
        draw_curves(ax, curves, level)
        if threshold in pos:
            ax.axvline(pos[threshold] - 0.5, color="r", lw=0.9, ls=":")
        error_axis(ax, level, "max finite ulp error" if j == 0 else "")
        ax.set_xticks(range(len(bands)), labels, fontsize=6, rotation=30)
        ax.set_title(f"gamma {gamma:g}, {machine}, {fmt} (red: C = {threshold:g})", fontsize=8)
        ax.set_xlabel("cancellation factor C of the bracket", fontsize=7)
        ax.tick_params(labelsize=6)
    legend_outside(axes[0, -1])
    fig.tight_layout()
    return save(fig, folder, stem)


def build(ctx) -> Section:
    run = ctx.run
    c_threshold = run.operator.ROOT_NEIGHBOURHOOD_C
    section = Section("bracket", "Errors by cancellation of the bracket")
    t = bracket_table(run)
    if t.empty:
        return section
    hood = neighbourhood_table(run.by_term["gamma"].unique(), c_threshold, run.operator)
    section.tables.update({"bracket.csv": t, "neighbourhood.csv": hood})
    shown = t[t["gamma"] < 0][["variant", "machine", "format", "gamma", "bracket", "count", "max_finite_ulp",
                               "mean_bits", "share_correct", "not_correct", *SPECIAL_CLASSES]]
    fmts = list(dict.fromkeys(t["format"]))
    section.body = [
        Para(f"The root neighbourhood (gamma < -1 and C >= {c_threshold:g}) as intervals of the argument "
             "s of A (s = pred for selector 0, -pred for selector 1):"),
        Table(hood, "neighbourhood.csv"),
        Image(plot_bracket(t, ctx.plot_dir, "fp32" if "fp32" in fmts else fmts[0], run.machines[-1], c_threshold),
              "Max finite ulp error per band of the cancellation factor C (special outputs counted in the legend)"),
        Details("Errors per band of C (gamma < 0; bracket.csv has every gamma)", [Table(shown, "bracket.csv")]),
    ]
    return section
