"""Accuracy summary: per variant, format and machine, with the headline maxima on the first screen.

Every headline maximum says what it is (:func:`precision.products.report.tables.maximum_label`:
exhaustive over the study's points, or sampled and so a lower bound) and
what its figure means at its witness (:func:`precision.products.report.tables.describe_error`:
e.g. an exact value below the format's normal range, whose ulp is the
subnormal quantum, makes an O(1) output score 2^149 ulp in fp32).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

import matplotlib.pyplot as plt
from matplotlib.colors import ListedColormap

from precision.products.report.document import Bullets, Details, Heading, Image, Para, Section, Table
from precision.products.report.findings import Finding, cite, fmt_num, fmt_share
from precision.products.report.plots import (CEILING_ULP, FLOOR, clip_errors, curve_id, curve_style, draw_curves,
                                             error_axis, legend_outside, merge_identical, save, special_level)
from precision.products.report.tables import describe_error, inputs_text, maximum_label, stat_table
from precision.analysis.histograms import bin_upper_edge
from precision.analysis.scoring import SPECIAL_CLASSES
from precision.engine.operators import search_order

__all__ = ["build", "headline_variants", "plotted_variants", "plot_ulp_vs_pred", "plot_pred_term_heatmap",
           "plot_error_ecdf"]

#: At most this many variants share a panel of the summary plots.
MAX_LINES = 6

T = "summary.csv"
#: The headline variants' largest finite fp32 errors at the witnesses the study knows of (hunts, corpora).
TK = "headline_witnesses.csv"
#: Columns of the summary table shown in the page (the CSV has every statistic and both witnesses).
SHOWN = ["variant", "format", "machine", "count", "max_finite_ulp", "inputs", "mean_bits", "share_correct",
         "not_correct", "over_1ulp", *SPECIAL_CLASSES]


def headline_variants(variants, op, comparisons=None) -> list:
    """The production kernel when the run has it (the operator ``op``'s ``production_variant``; else the first
    variant), then the first variant of every declared comparison."""
    production = op.production_variant(variants)
    first = [production] if production is not None else list(variants[:1])
    declared = [] if comparisons is None or comparisons.empty else \
        list(comparisons.loc[comparisons["kind"] == "declared", "with_variant"])
    return list(dict.fromkeys(first + declared))


def plotted_variants(variants, op) -> list:
    """The variants of the summary plots: not the one-guard or one-parameter ablations of the registry's syntax
    (``naive+G1``, ``kernel-G5``, ``kernel[G5=...]``, with the operator ``op``'s guards; their own sections show
    them), at most :data:`MAX_LINES`, the production kernel first, then the naive recipe."""
    ablation = re.compile(r"[+-](?:" + "|".join(map(re.escape, op.GUARD_NAMES)) + r")\b|\[")
    plain = [v for v in variants if not ablation.search(v)]
    plain = sorted(plain, key=lambda v: (v != "kernel", v != "naive", variants.index(v)))
    return (plain or list(variants))[:MAX_LINES]


def plot_ulp_vs_pred(predbins: dict, points: pd.DataFrame, folder, variants, stem: str = "ulp_vs_pred") -> str | None:
    """Max ulp error per symmetric-log pred bin (moving max over 3 bins) against pred, a panel per
    (machine, profile), a line per variant (identical ones merged, :func:`draw_curves`); per-point errors as
    a grey cloud; bins holding a special output as ``x`` on the band."""
    sel = np.isin(predbins["variant"], list(variants))
    if not sel.any():
        return None
    edges = predbins["edges"]
    centers = np.where(np.abs(edges[:-1]) < np.abs(edges[1:]), edges[1:], edges[:-1])
    cols = list(dict.fromkeys(zip(predbins["machine"][sel], predbins["profile"][sel])))
    used = np.flatnonzero(~np.isnan(predbins["max_ulp"][sel]).all(axis=0))
    xlo, xhi = (float(edges[used.min()]), float(edges[used.max() + 1])) if used.size else (-1.0, 1.0)
    level = special_level(predbins["max_ulp"][sel], points["err_ulp"] if not points.empty else [])
    ncol = min(3, len(cols))
    nrow = -(-len(cols) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol + 1.6, 2.7 * nrow), squeeze=False, sharex=True,
                             sharey=True)
    for k, (machine, profile) in enumerate(cols):
        ax = axes[k // ncol, k % ncol]
        if not points.empty:
            pp = points[(points["machine"] == machine) & (points["profile"] == profile)
                        & points["variant"].isin(list(variants))]
            if len(pp) > 20000:
                pp = pp.iloc[np.linspace(0, len(pp) - 1, 20000).astype(int)]
            ax.scatter(pp["pred"], clip_errors(pp["err_ulp"], level), s=1, c="0.75", rasterized=True, lw=0)
        curves = []
        for v in variants:
            rows = np.flatnonzero(sel & (predbins["variant"] == v) & (predbins["machine"] == machine)
                                  & (predbins["profile"] == profile))
            if not rows.size:
                continue
            mx = np.nanmax(np.where(np.isnan(predbins["max_ulp"][rows]), -np.inf, predbins["max_ulp"][rows]), axis=0)
            mov = pd.Series(mx).rolling(3, center=True, min_periods=1).max().to_numpy()
            ok = mx > -np.inf
            curves.append((v, centers[ok], mov[ok]))
        draw_curves(ax, curves, level)
        ax.set_xscale("symlog", linthresh=1e-4)
        ax.set_xlim(xlo, xhi)
        error_axis(ax, level, "max error (ulp)" if k % ncol == 0 else "")
        ax.axhline(1.0, color="k", lw=0.4, ls=":")
        ax.set_title(f"{machine} | {profile}", fontsize=8)
        ax.tick_params(labelsize=6)
        ax.set_xlabel("pred (symlog, linear within 1e-4)", fontsize=7)
    for k in range(len(cols), nrow * ncol):
        axes[k // ncol, k % ncol].axis("off")
    legend_outside(axes[0, min(ncol, len(cols)) - 1])
    fig.tight_layout()
    return save(fig, folder, stem)


def plot_pred_term_heatmap(predbins: dict, folder, variants, term: str, stem: str | None = None) -> str | None:
    """log10 max finite ulp per (pred bin, value of the terms attribute ``term``: gamma), a panel per (variant,
    machine, profile), with a colour bar up to :data:`CEILING_ULP` (larger errors orange); bins with a special
    output in red.  ``stem`` defaults to ``heatmap_pred_<term>``."""
    want = [v for v in variants if v in set(predbins["variant"])]
    values = np.unique(predbins["term"])
    if not want or values.size < 2:  # one value: each panel a solid strip, ulp_vs_pred says it better
        return None
    stem = stem or f"heatmap_pred_{term}"
    edges = predbins["edges"]
    cols = list(dict.fromkeys(zip(predbins["machine"], predbins["profile"])))
    data = predbins["max_ulp"]
    used = np.flatnonzero((~np.isnan(data)).any(axis=0))
    lo, hi = used.min(), used.max() + 1
    finite = data[np.isfinite(data)]
    # the scale ends at 2^24 ulp (every bit of an fp32 output wrong): the few larger errors (an O(1) output
    # where the exact value is subnormal scores up to 2^149 ulp) get the 'over' colour instead of squeezing the
    # rest of the scale into one shade
    vmax = min(np.log10(max(float(finite.max()) if finite.size else 1.0, 1.0)), np.log10(CEILING_ULP))
    cmap = plt.get_cmap("viridis").with_extremes(over="orange")
    panels = [(v, machine, profile) for v in want for machine, profile in cols]
    ncol = min(3, len(panels))
    nrow = -(-len(panels) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.8 * ncol + 1.2, 2.6 * nrow), squeeze=False,
                             constrained_layout=True)
    im = None
    for k, (v, machine, profile) in enumerate(panels):
        ax = axes[k // ncol, k % ncol]
        img = np.full((values.size, hi - lo), np.nan)
        bad = np.full(img.shape, np.nan)
        for vi, value in enumerate(values):
            rows = np.flatnonzero((predbins["variant"] == v) & (predbins["machine"] == machine)
                                  & (predbins["profile"] == profile) & (predbins["term"] == value))
            if rows.size:
                row = data[rows[0], lo:hi]
                img[vi] = np.where(np.isfinite(row), np.log10(np.clip(row, FLOOR, None)), np.nan)
                bad[vi] = np.where(np.isinf(row), 1.0, np.nan)
        im = ax.imshow(img, aspect="auto", origin="lower", cmap=cmap, vmin=np.log10(FLOOR), vmax=vmax,
                       interpolation="nearest")
        ax.imshow(bad, aspect="auto", origin="lower", cmap=ListedColormap(["red"]), interpolation="nearest")
        ticks = np.linspace(0, hi - lo - 1, 5).astype(int)
        ax.set_xticks(ticks, [f"{edges[lo + t]:.2g}" for t in ticks], fontsize=6, rotation=30)
        ax.set_yticks(range(values.size), [f"{v:g}" for v in values], fontsize=6)
        ax.set_title(f"{v} | {machine} | {profile}", fontsize=8)
        ax.set_xlabel("pred bin (lower edge)", fontsize=7)
        ax.set_ylabel(term, fontsize=7)
    for k in range(len(panels), nrow * ncol):
        axes[k // ncol, k % ncol].axis("off")
    bar = fig.colorbar(im, ax=axes, shrink=0.8,
                       extend="max" if finite.size and finite.max() > CEILING_ULP else "neither")
    bar.set_label("log10 max finite ulp\n(orange > 2^24, red special)", fontsize=7)
    bar.ax.tick_params(labelsize=6)
    return save(fig, folder, stem)


#: The error ECDF's x axis: octaves of ulp error from 2^ECDF_LOW (below it, and exact outputs, on a band at the left)
#: to 2^24 (above it a band '> 2^24', then the special outputs' band).
ECDF_LOW = -6


def plot_error_ecdf(hist: pd.DataFrame, folder, variants, stem: str = "error_ecdf") -> str | None:
    """Empirical CDF of the ulp error, a panel per format, a line per variant (identical ones merged): the
    share of outputs whose error is at most 2^k ulp, against k from :data:`ECDF_LOW` to 24; three bands hold
    the rest: exact outputs and errors under 2^ECDF_LOW at the left, finite errors over 2^24 and special
    outputs at the right (a curve reaches 1 only after them).  Curves of one panel share their axes, so
    variants are told apart at a glance."""
    hist = hist[hist["variant"].isin(list(variants))]
    if hist.empty:
        return None
    top = int(np.log2(CEILING_ULP))
    low_at, over_at, special_at = ECDF_LOW - 4, top + 3, top + 7
    up = hist["upper_ulp"].to_numpy()
    regular = np.isfinite(up) & (up > 0)
    with np.errstate(divide="ignore"):
        octave = np.ceil(np.log2(np.where(regular, up, 1.0)))
    octave = np.where(~np.isfinite(up), special_at, np.where(~regular | (octave < ECDF_LOW), low_at,
                                                                np.where(octave > top, over_at, octave)))
    h = hist.assign(octave=octave)
    formats = list(dict.fromkeys(h["format"]))
    fig, axes = plt.subplots(1, len(formats), figsize=(4.6 * len(formats) + 1.6, 2.8), squeeze=False, sharey=True)
    handles = {}
    x = np.arange(low_at, special_at + 1, dtype=np.float64)
    for j, fmt in enumerate(formats):
        ax = axes[0, j]
        curves = []
        for v in [v for v in variants if v in set(h["variant"])]:
            per = h[(h["variant"] == v) & (h["format"] == fmt)].groupby("octave")["count"].sum()
            if per.sum() == 0:
                continue
            share = np.cumsum(per.reindex(x, fill_value=0).to_numpy()) / per.sum()
            curves.append((v, x, share))
        for i, (label, cx, cy) in enumerate(merge_identical(curves)):
            st = curve_style(i)
            line, = ax.step(cx, cy, where="post", lw=1.0, color=st["color"], ls=st["ls"], label=label,
                            gid=curve_id(ax, label))
            handles.setdefault(label, line)
        for at in (low_at, over_at, special_at):
            ax.axvspan(at - 0.5, at + 0.5, color="0.92", zorder=0)
        ax.axvline(0, color="k", lw=0.4, ls=":")
        ax.set_ylim(0, 1.02)
        regular = list(range(0, top, 6))
        ax.set_xticks([low_at, *regular, over_at, special_at],
                      ["exact or\n< 2^%d" % ECDF_LOW, *(str(t) for t in regular), "> 2^%d" % top, "special"])
        ax.set_title(fmt, fontsize=8)
        ax.tick_params(labelsize=6)
        ax.set_xlabel("log2 of the ulp error", fontsize=7)
        if j == 0:
            ax.set_ylabel("share of outputs with error <= 2^x", fontsize=7)
    axes[0, -1].legend(list(handles.values()), list(handles), fontsize=6, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                       borderaxespad=0.0, frameon=False)
    fig.tight_layout()
    return save(fig, folder, stem)


def _headline(s: pd.DataFrame, variant: str, fmt: str, label: str, attributes, dout: bool = True) -> tuple[str, list]:
    """One line: the variant's largest finite error over machines in one format, explained, with its specials."""
    rows = s[(s["variant"] == variant) & (s["format"] == fmt)]
    if rows.empty:
        return "", []
    mx = rows["max_finite_ulp"].fillna(-np.inf)
    top = rows.loc[mx.idxmax()]
    w = {"variant": variant, "format": fmt, "machine": top["machine"], "profile": top["profile"]}
    nums = [cite("max_finite_ulp", T, s, w, "max_finite_ulp"), cite("count", T, s, w, "count")]
    specials = [cite(c, T, s, w, c) for c in SPECIAL_CLASSES]
    nums += specials
    if np.isnan(top["max_finite_ulp"]):
        text = f"{fmt} output, {variant} on {top['machine']}: no finite output"
    else:
        text = (f"{fmt} output, {variant}: max finite error {nums[0].text} ulp on {top['machine']} "
                f"({label}) at {inputs_text(top, 'finite_witness_', attributes=attributes, dout=dout)}: "
                + describe_error(top["max_finite_ulp"], top["finite_witness_computed"], top["finite_witness_exact"],
                                 fmt))
    bad = [c for c in specials if c.value]
    text += (f"; of {nums[1].text} outputs, " + ", ".join(f"{c.text} {c.name}" for c in bad)) if bad else \
        f"; no special output of {nums[1].text}"
    return text + ".", nums


def _known_maxima(ctx, variants) -> pd.DataFrame:
    """Per headline variant, machine and known witness source (the study's ``[report.targets]`` hunts and
    corpus, :func:`precision.products.report.known_witnesses.known_sources`): the largest finite fp32 error
    re-evaluated with the current code.  Empty when the study names none, or when its operator has no
    ``targets`` section to name them in."""
    from precision.products.report.known_witnesses import hunt_table, known_sources, rescored_maxima
    if "targets" not in ctx.run.operator.SECTION_OPTIONS:
        return pd.DataFrame()
    hunts_opt, corpora = ctx.option("targets", "hunts"), ctx.option("targets", "corpus")
    points = ctx.option("targets", "points")
    if not hunts_opt and not corpora and not points:
        return pd.DataFrame()
    base = Path(ctx.run.run.get("study_file", ".")).parent
    hunts, _ = hunt_table(hunts_opt, base, ctx.run.operator)
    rows = []
    for v in variants:
        known, _ = known_sources(ctx.run, v, hunts, corpora, base, points)
        for machine in ctx.run.machines:
            rows += [{"variant": v, **r} for r in rescored_maxima(ctx.run, v, machine, known, outside_only=False,
                                                                   finite_only=True)]
    t = pd.DataFrame(rows)
    return t[t["max_ulp"].notna()].reset_index(drop=True) if len(t) else t


def _known_text(s: pd.DataFrame, known: pd.DataFrame, variant: str, attributes) -> tuple[str, list]:
    """The headline's clause on the known witnesses: the largest of them (source, machine, witness) and
    whether it exceeds the run's maximum."""
    k = known[known["variant"] == variant]
    rows = s[(s["variant"] == variant) & (s["format"] == "fp32")]
    if k.empty or rows.empty:
        return "", []
    top = k.loc[k["max_ulp"].idxmax()]
    kc = cite("known_max", TK, known, {"variant": variant, "machine": top["machine"], "source": top["source"]},
              "max_ulp")
    run_max = float(rows["max_finite_ulp"].max())
    verdict = "above the run's maximum, so the headline figure for this variant is" if kc.value > run_max else \
        "within the run's maximum; the largest is still"
    figure = kc.text if kc.value > run_max else fmt_num(run_max)
    return (f" Known witnesses re-evaluated with the current code (dout 1, no weight; {', '.join(dict.fromkeys(k['source']))}): "
            f"at most {kc.text} ulp ({top['source']}, {top['machine']}, at {inputs_text(top, attributes=attributes)}), {verdict} "
            f"{figure} ulp."), [kc]


def build(ctx) -> Section:
    """Headline maxima (first screen), the summary table, plots and one finding per format and machine."""
    run = ctx.run
    s = stat_table(run, ["variant", "machine", "format", "profile"])
    section = Section("summary", "Accuracy summary")
    section.tables[T] = s
    lines, findings = [], []
    known = _known_maxima(ctx, headline_variants(run.variants, run.operator, run.comparisons))
    if not known.empty:
        section.tables[TK] = known
    for fmt in dict.fromkeys(s["format"]):
        for v in headline_variants(run.variants, run.operator, run.comparisons):
            text, nums = _headline(s, v, fmt, maximum_label(run, fmt), run.operator.ATTRIBUTES,
                                   "dout" in run.operator.INPUTS)
            if text and fmt == "fp32" and not known.empty:
                more, cited = _known_text(s, known, v, run.operator.ATTRIBUTES)
                text, nums = text + more, nums + cited
            if text:
                lines.append(text)
                findings.append(Finding(f"summary/headline/{fmt}/{v}", "summary", text, nums, 15, shown=True))
    if lines:
        section.first = [Heading("Headline maxima", 2, "headline"), Bullets(lines)]
    for (fmt, machine), sub in s.groupby(["format", "machine"], sort=False):
        m = sub["max_finite_ulp"].fillna(np.inf)
        best = sub.loc[m.idxmin()]
        w = {"variant": best["variant"], "format": fmt, "machine": machine, "profile": best["profile"]}
        bm, bs = cite("best_max_finite_ulp", T, s, w, "max_finite_ulp"), cite("best_share", T, s, w, "share_correct")
        miss = cite("best_not_correct", T, s, w, "not_correct")
        ties = int((m == m.min()).sum())
        text = (f"On {machine}, {fmt} output: the lowest max finite error is {bm.text} ulp ({best['variant']}"
                + (f", tied by {fmt_num(ties - 1)} more" if ties > 1 else "")
                + f"; correctly rounded on a share {fmt_share(bs.value, miss.value)} of its outputs).")
        findings.append(Finding(f"summary/best/{fmt}/{machine}", "summary", text, [bm, bs] + ([miss] if miss.value else []), 60))
    section.findings = findings
    shown = s.assign(inputs=[inputs_text(r, "finite_witness_", attributes=run.operator.ATTRIBUTES,
                                                 dout="dout" in run.operator.INPUTS) for _, r in s.iterrows()])[SHOWN]
    points = run.points(["pred", "variant", "machine", "profile", "err_ulp"])
    term = run.operator.TERMS_ATTRIBUTE  # the heat map's rows (gamma); none when the operator has no such attribute
    # what a pred bin's maximum is taken over: the attributes (the terms attribute first) and the selector
    over = [*search_order(run.operator), "selector"]
    section.body = [
        Para("Per variant, output format and machine: the max finite ulp error and its inputs (hex floats; "
             + "; ".join(f"{f} outputs: {maximum_label(run, f)}" for f in dict.fromkeys(s["format"])) + "), Herbie's mean bits of error, the share correctly rounded, outputs over 1 ulp, and the "
             "special outputs: nan (NaN where the correctly rounded value is not), inf (+-inf where it is finite), "
             "wrong_sign (nonzero and of the opposite sign, infinities included), lost_inf (finite where it "
             "overflows). summary.csv also has max_ulp (inf when any output is special), the mean ulp over finite "
             "errors, quantile bounds, and the exact and computed values at each witness."),
        Table(shown, T),
        Image(plot_ulp_vs_pred(run.predbins, points, ctx.plot_dir, plotted_variants(run.variants, run.operator)),
              f"Max ulp error per symmetric-log pred bin (moving max over 3 bins; max over {', '.join(over)}) of "
              "the main variants; grey: per-point errors kept by the run; special outputs on the shaded band"),
    ]
    heat = plot_pred_term_heatmap(run.predbins, ctx.plot_dir, headline_variants(run.variants, run.operator)
                                  + [v for v in ("naive",) if v in run.variants and v != "kernel"], term) if term else None
    ecdf = plot_error_ecdf(_histogram_table(run), ctx.plot_dir, plotted_variants(run.variants, run.operator))
    shown_plots = [*([Image(heat, f"log10 of the max finite ulp error per pred bin and {term} (colour bar up to 2^24 "
                                  "ulp, larger errors orange); bins with a special output red, without a point white")]
                     if heat else []),
                   *([Image(ecdf, "Share of outputs with ulp error at most 2^x, per format, a line per variant (the "
                                  "main ones; identical lines merged): the higher and further left, the more accurate")]
                     if ecdf else [])]
    if shown_plots:
        section.body.append(Details(("Heat map of the error over pred and " + term + "; " if heat else "")
                                    + "error distributions", shown_plots))
    return section


def _histogram_table(run) -> pd.DataFrame:
    """ulp histograms merged per (variant, format): variant, format, bin, upper_ulp, count."""
    merged = run.stats.merge(["variant", "format"])
    keys = merged.frame[["variant", "format"]]
    h = merged.hist
    out = pd.DataFrame({"variant": keys["variant"].to_numpy()[h["row"]], "format": keys["format"].to_numpy()[h["row"]],
                        "bin": h["bin"].to_numpy(), "count": h["count"].to_numpy()})
    out["upper_ulp"] = bin_upper_edge(out["bin"].to_numpy())
    order = {v: i for i, v in enumerate(run.variants)}
    return out.sort_values(["variant", "format", "bin"], key=lambda c: c.map(order) if c.name == "variant" else c,
                           kind="stable").reset_index(drop=True)
