"""Report plots: matplotlib (Agg) figures written as PNG and SVG.

Each function takes tables (or the run's arrays), draws one figure and writes
``<folder>/<stem>.png`` and ``<stem>.svg``; it returns the stem, or None when
the data hold nothing to draw.  Plots render tables, they never recompute
scores.  Infinite errors (NaN/inf outputs) are drawn at the top of the axis,
above the largest finite error (:data:`INF_AT`).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

__all__ = ["INF_AT", "save", "plot_ulp_vs_pred", "plot_pred_gamma_heatmap", "plot_histograms", "plot_ablation",
           "plot_threshold", "plot_recovery", "plot_onset", "plot_bracket"]

#: Where an infinite error (NaN or inf output) is drawn on a log ulp axis.
INF_AT = 1e50
#: Lower clip of log ulp axes (a correctly rounded output scores <= 0.5 ulp).
FLOOR = 1e-3
_DPI = 90


def save(fig, folder: Path, stem: str) -> str:
    """Write ``fig`` as ``stem.png`` and ``stem.svg`` (deterministic metadata) and close it."""
    fig.savefig(folder / f"{stem}.png", dpi=_DPI, metadata={"Software": None})
    with matplotlib.rc_context({"svg.hashsalt": stem}):  # fixed element ids: the same figure, the same bytes
        fig.savefig(folder / f"{stem}.svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)
    return stem


def _clip(v):
    v = np.asarray(v, dtype=np.float64)
    v = np.where(np.isnan(v) | np.isinf(v), INF_AT, v)
    return np.clip(v, FLOOR, INF_AT)  # finite errors stay below INF_AT (largest seen ~1e45 ulp)


def _family(variant: str) -> str:
    from precision.guards import get_variant
    try:
        return get_variant(variant).family
    except Exception:  # a variant name the registry no longer knows: its own family
        return variant


def _symlog_ticks(ax, lo: float, hi: float) -> None:
    """Readable ticks on a symlog pred axis: 0 and +-10^k every few decades within [lo, hi]."""
    top = max(abs(lo), abs(hi), 1.0)
    kmax = int(np.ceil(np.log10(top)))
    ks = list(range(kmax, -5, -max(1, (kmax + 4) // 3)))
    ticks = sorted({0.0} | {s * 10.0 ** k for k in ks for s in (-1, 1) if lo <= s * 10.0 ** k <= hi})
    ax.set_xticks(ticks, ["0" if t == 0 else f"{'-' if t < 0 else ''}1e{int(round(np.log10(abs(t))))}"
                          for t in ticks], fontsize=6)
    ax.set_xlim(lo, hi)


def plot_ulp_vs_pred(predbins: dict, points: pd.DataFrame, folder: Path, stem: str = "ulp_vs_pred") -> str | None:
    """Max ulp error per symmetric-log pred bin (moving max over 3 bins) against pred.

    One row of panels per variant family, one column per (model, profile);
    lines per variant; per-point errors (when the run kept some) as a grey cloud.
    """
    if predbins["variant"].size == 0:
        return None
    edges = predbins["edges"]
    centers = np.where(np.abs(edges[:-1]) < np.abs(edges[1:]), edges[1:], edges[:-1])
    frame = pd.DataFrame({"variant": predbins["variant"], "model": predbins["model"],
                          "profile": predbins["profile"]})
    families = list(dict.fromkeys(_family(v) for v in frame["variant"]))
    cols = list(dict.fromkeys(zip(frame["model"], frame["profile"])))
    used = np.flatnonzero(~np.isnan(predbins["max_ulp"]).all(axis=0))
    xlo = float(edges[used.min()]) if used.size else -1.0
    xhi = float(edges[used.max() + 1]) if used.size else 1.0
    fig, axes = plt.subplots(len(families), len(cols), figsize=(3.6 * len(cols), 2.6 * len(families)),
                             squeeze=False, sharex=True, sharey=True)
    for (model, profile), j in zip(cols, range(len(cols))):
        sel = (frame["model"] == model) & (frame["profile"] == profile)
        for i, fam in enumerate(families):
            ax = axes[i, j]
            if not points.empty:
                fam_of = {v: _family(v) for v in points["variant"].unique()}
                pp = points[(points["model"] == model) & (points["profile"] == profile)
                            & (points["variant"].map(fam_of) == fam)]
                if len(pp) > 20000:
                    pp = pp.iloc[np.linspace(0, len(pp) - 1, 20000).astype(int)]
                ax.scatter(pp["pred"], _clip(pp["err_ulp"]), s=1, c="0.75", rasterized=True, lw=0)
            for v in dict.fromkeys(frame["variant"][sel]):
                rows = np.flatnonzero(sel & (frame["variant"] == v))
                mx = np.nanmax(np.where(np.isnan(predbins["max_ulp"][rows]), -np.inf, predbins["max_ulp"][rows]),
                               axis=0) if _family(v) == fam else None
                if mx is None:
                    continue
                mov = pd.Series(mx).rolling(3, center=True, min_periods=1).max().to_numpy()
                ok = np.isfinite(mx) | np.isposinf(mx)
                ax.plot(centers[ok], _clip(mov[ok]), lw=0.9, label=v)
            ax.set_xscale("symlog", linthresh=1e-4)
            _symlog_ticks(ax, xlo, xhi)
            ax.set_yscale("log")
            ax.set_ylim(FLOOR, INF_AT * 3)
            ax.axhline(1.0, color="k", lw=0.4, ls=":")
            ax.set_title(f"{fam} | {model} | {profile}", fontsize=8)
            ax.tick_params(labelsize=6)
            if j == 0:
                ax.set_ylabel("max error (ulp)", fontsize=7)
            if i == len(families) - 1:
                ax.set_xlabel("pred (symlog axis, linear within 1e-4)", fontsize=7)
            if ax.lines:
                ax.legend(fontsize=5, ncol=2, loc="upper left")
    fig.tight_layout()
    return save(fig, folder, stem)


def plot_pred_gamma_heatmap(predbins: dict, folder: Path, variants=("naive", "kernel"),
                            stem: str = "heatmap_pred_gamma") -> str | None:
    """log10 max ulp per (pred bin, gamma) for the given variants, one panel per (variant, model, profile)."""
    frame = pd.DataFrame({"variant": predbins["variant"], "model": predbins["model"],
                          "profile": predbins["profile"], "gamma": predbins["gamma"]})
    want = [v for v in variants if v in set(frame["variant"])]
    gammas = np.unique(frame["gamma"])
    if not want or gammas.size < 1:
        return None
    edges = predbins["edges"]
    cols = list(dict.fromkeys(zip(frame["model"], frame["profile"])))
    used = np.flatnonzero(np.isfinite(predbins["max_ulp"]).any(axis=0) | np.isposinf(predbins["max_ulp"]).any(
        axis=0))
    lo, hi = used.min(), used.max() + 1
    fig, axes = plt.subplots(len(want), len(cols), figsize=(3.6 * len(cols), 3.2 * len(want)), squeeze=False,
                             constrained_layout=True)
    im = None
    for i, v in enumerate(want):
        for j, (model, profile) in enumerate(cols):
            ax = axes[i, j]
            img = np.full((gammas.size, hi - lo), np.nan)
            for gi, g in enumerate(gammas):
                rows = np.flatnonzero((frame["variant"] == v) & (frame["model"] == model)
                                      & (frame["profile"] == profile) & (frame["gamma"] == g))
                if rows.size:
                    img[gi] = np.log10(_clip(predbins["max_ulp"][rows[0], lo:hi]))
                    img[gi][np.isnan(predbins["max_ulp"][rows[0], lo:hi])] = np.nan
            im = ax.imshow(img, aspect="auto", origin="lower", cmap="viridis", vmin=np.log10(FLOOR),
                           vmax=np.log10(INF_AT), interpolation="nearest")
            ticks = np.linspace(0, hi - lo - 1, 5).astype(int)
            ax.set_xticks(ticks, [f"{edges[lo + t]:.2g}" for t in ticks], fontsize=6, rotation=30)
            ax.set_yticks(range(gammas.size), [f"{g:g}" for g in gammas], fontsize=6)
            ax.set_title(f"{v} | {model} | {profile}", fontsize=8)
            ax.set_xlabel("pred bin (lower edge; symmetric-log bins)", fontsize=7)
            ax.set_ylabel("gamma", fontsize=7)
    fig.colorbar(im, ax=axes, shrink=0.8, label=f"log10 max error in ulp ({np.log10(INF_AT):.0f} = NaN/inf; white = no point)")
    return save(fig, folder, stem)


def plot_histograms(hist: pd.DataFrame, folder: Path, stem: str = "ulp_histograms") -> str | None:
    """ulp error histogram per variant (counts per octave; one panel per variant, a line per format)."""
    if hist.empty:
        return None
    variants = list(dict.fromkeys(hist["variant"]))
    n = len(variants)
    ncol = min(4, n)
    nrow = -(-n // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.2 * ncol, 2.2 * nrow), squeeze=False, sharex=True)
    h = hist.copy()
    up = h["upper_ulp"].to_numpy()
    with np.errstate(divide="ignore"):
        octave = np.ceil(np.log2(np.maximum(up, 1e-300)))
    fin = np.isfinite(up) & (up > 0)
    top = int(np.nanmax(octave[fin])) if fin.any() else 0
    low = int(np.nanmin(octave[fin])) if fin.any() else 0
    nan_at, zero_at = top + 4, low - 4
    h["octave"] = np.where(np.isinf(up), nan_at, np.where(up <= 0, zero_at, octave))
    for k, v in enumerate(variants):
        ax = axes[k // ncol, k % ncol]
        for fmt, sub in h[h["variant"] == v].groupby("format", sort=True):
            per = sub.groupby("octave")["count"].sum()
            ax.step(per.index, per.to_numpy(), where="mid", label=fmt, lw=0.9)
        ax.set_yscale("log")
        ax.set_title(v, fontsize=8)
        ax.tick_params(labelsize=6)
        ax.axvline(0, color="k", lw=0.4, ls=":")
        ax.legend(fontsize=6)
        if k % ncol == 0:
            ax.set_ylabel("outputs", fontsize=6)
    for k in range(n, nrow * ncol):
        axes[k // ncol, k % ncol].axis("off")
    for k in range(max(0, n - ncol), n):
        axes[k // ncol, k % ncol].set_xlabel(f"log2 error in ulp ({nan_at} = NaN/inf, {zero_at} = exact)",
                                             fontsize=6)
        axes[k // ncol, k % ncol].xaxis.set_tick_params(labelbottom=True)
    fig.tight_layout()
    return save(fig, folder, stem)


def _signed_log(d):
    d = np.asarray(d, dtype=np.float64)
    return np.sign(d) * np.log10(1 + np.abs(np.where(np.isinf(d), INF_AT, d)))


def plot_ablation(ablation: pd.DataFrame, folder: Path, fmt: str, stem: str) -> str | None:
    """Guard x region heatmaps of the change in max ulp and in NaN count, with minus without the guard.

    Rows: models; columns: (naive+Gi vs naive, kernel vs kernel-Gi) x (d max ulp, d NaN).
    """
    t = ablation[(ablation["format"] == fmt) & (ablation["region"] != "all")]
    if t.empty:
        return None
    t = t.assign(d_nan_inf=t["d_nan"] + t["d_inf"])
    models = list(dict.fromkeys(t["model"]))
    from precision.report.findings import _region_lo
    regions = sorted(dict.fromkeys(t["region"]), key=_region_lo)
    t = t.assign(direction=np.where(t["without_variant"] == "naive", "naive+Gi vs naive", "kernel vs kernel-Gi"))
    directions = list(dict.fromkeys(t["direction"]))
    panels = [(d, m) for d in directions for m in ("d_max_finite_ulp", "d_nan_inf")]
    fig, axes = plt.subplots(len(models), len(panels), figsize=(3.4 * len(panels), 2.6 * len(models)),
                             squeeze=False)
    for i, model in enumerate(models):
        for j, (direction, metric) in enumerate(panels):
            ax = axes[i, j]
            sub = t[(t["model"] == model) & (t["direction"] == direction)]
            piv = sub.pivot_table(index="guard", columns="region", values=metric, aggfunc="first")
            piv = piv.reindex(columns=regions)
            vals = piv.to_numpy(dtype=np.float64)
            lim = max(1.0, np.nanmax(np.abs(_signed_log(vals))) if vals.size else 1.0)
            ax.imshow(_signed_log(vals), cmap="coolwarm", vmin=-lim, vmax=lim, aspect="auto")
            for (r, c), v in np.ndenumerate(vals):
                if np.isnan(v):
                    ax.text(c, r, "n/a", ha="center", va="center", fontsize=5, color="0.4")
                else:
                    ax.text(c, r, f"{v:.3g}" if abs(v) < 1e4 or np.isinf(v) else f"{v:.1e}", ha="center",
                            va="center", fontsize=6)
            ax.set_xticks(range(len(regions)), regions, fontsize=6, rotation=30)
            ax.set_yticks(range(len(piv.index)), piv.index, fontsize=6)
            ax.set_xlabel("pred region", fontsize=6)
            what = ("change in max finite error (ulp; n/a: no finite output)" if metric == "d_max_finite_ulp"
                    else "change in NaN+inf outputs (count)")
            ax.set_title(f"{model}: {direction}\n{what}", fontsize=7)
    fig.tight_layout()
    return save(fig, folder, stem)


def plot_threshold(threshold: pd.DataFrame, folder: Path, stem: str = "threshold_curve") -> str | None:
    """Max finite and mean ulp, and points improved / worsened against never, per G5 threshold; 1/64 marked.

    Top row: max finite error (solid) and mean error (dashed) in ulp; bottom
    row: points where the threshold's output is better / worse than never's.
    """
    if threshold.empty:
        return None
    t = threshold.copy()
    finite_k = t["k"].dropna()
    kmin, kmax = finite_k.min(), finite_k.max()
    # position: always (tau = inf) left of the largest tau, never (tau = 0) right of the smallest
    t["pos"] = np.where(np.isinf(t["tau"]), kmin - 1.5, np.where(t["tau"] == 0, kmax + 1.5, t["k"]))
    from precision.report.findings import SUBSET_ORDER
    subsets = sorted(dict.fromkeys(t["subset"]), key=lambda x: SUBSET_ORDER.index(x) if x in SUBSET_ORDER else 9)
    fig, axes = plt.subplots(2, len(subsets), figsize=(5.2 * len(subsets), 6.0), squeeze=False, sharex=True)
    ticks = [kmin - 1.5] + list(range(int(kmin), int(kmax) + 1)) + [kmax + 1.5]
    labels = ["always"] + [f"2^-{k}" for k in range(int(kmin), int(kmax) + 1)] + ["never"]
    for j, subset in enumerate(subsets):
        ax, bx = axes[0, j], axes[1, j]
        for (model, fmt), sub in t[t["subset"] == subset].groupby(["model", "format"], sort=False):
            sub = sub.sort_values("pos")
            ni = int(sub["nan_inf"].max())
            line, = ax.plot(sub["pos"], _clip(sub["max_finite_ulp"]), marker="o", ms=3,
                            label=f"max finite, {model} {fmt}" + (f" (+{ni:,} NaN/inf)" if ni else ""))
            ax.plot(sub["pos"], _clip(sub["mean_ulp"]), marker="s", ms=3, ls="--", color=line.get_color(),
                    label=f"mean, {model} {fmt}")
            bx.plot(sub["pos"], sub["improves"], marker="^", ms=3, color=line.get_color(),
                    label=f"improves, {model} {fmt}")
            bx.plot(sub["pos"], sub["worsens"], marker="v", ms=3, ls="--", color=line.get_color(),
                    label=f"worsens, {model} {fmt}")
        for a in (ax, bx):
            a.axvline(6, color="r", lw=0.9, ls=":", label="1/64 = 2^-6 (production)")
            a.tick_params(labelsize=6)
            a.legend(fontsize=6)
        ax.set_yscale("log")
        ax.set_ylabel("error (ulp, log scale)", fontsize=7)
        ax.set_title(f"G5 threshold, {subset}: error", fontsize=8)
        bx.set_ylabel("points (against never)", fontsize=7)
        bx.set_title(f"G5 threshold, {subset}: points improved / worsened", fontsize=8)
        bx.set_xticks(ticks, labels, fontsize=6, rotation=45)
        bx.set_xlabel("threshold tau (correction applied when the dpos terms cancel to within tau)", fontsize=7)
    fig.tight_layout()
    return save(fig, folder, stem)


def plot_recovery(recovery: pd.DataFrame, folder: Path, stem: str = "recovery") -> str | None:
    """Max ulp per binade of |raw*weight|, one panel per model, a line per variant; 2^-126 marked."""
    if recovery.empty:
        return None
    models = list(dict.fromkeys(recovery["model"]))
    fig, axes = plt.subplots(2, len(models), figsize=(3.8 * len(models), 5.6), squeeze=False, sharey="row",
                             sharex=True)
    for j, model in enumerate(models):
        ax, bx = axes[0, j], axes[1, j]
        for v, sub in recovery[recovery["model"] == model].groupby("variant", sort=False):
            line, = ax.plot(sub["log2_rw"], _clip(sub["max_finite_ulp"]), marker=".", ms=3, lw=0.9,
                            label=f"{v} max")
            ax.plot(sub["log2_rw"], _clip(sub["mean_ulp"]), lw=0.6, ls="--", color=line.get_color(),
                    label=f"{v} mean")
            bx.plot(sub["log2_rw"], sub["lost"], lw=0.9, color=line.get_color(), label=v)
        for a in (ax, bx):
            a.axvline(-126, color="r", lw=0.8, ls=":", label="2^-126 (G7 engages below)")
            a.axvline(-149, color="0.4", lw=0.8, ls=":", label="2^-149")
            a.tick_params(labelsize=6)
        ax.set_yscale("log")
        bx.set_xlabel("log2 |raw*weight| (binade)", fontsize=7)
        ax.set_title(f"{model}: error per binade", fontsize=8)
        bx.set_title(f"{model}: outputs lost to zero per binade", fontsize=8)
        if j == 0:
            ax.set_ylabel("error (ulp): max finite solid, mean dashed", fontsize=6)
            bx.set_ylabel("outputs lost (computed 0, exact not)", fontsize=6)
    axes[0, -1].legend(fontsize=5, loc="center left", bbox_to_anchor=(1.01, 0.5))
    axes[1, -1].legend(fontsize=5, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    return save(fig, folder, stem)


def plot_onset(points: pd.DataFrame, folder: Path, stem: str = "error_vs_x") -> str | None:
    """Max ulp over gamma against x, per selector (panels) and variant (lines), per model."""
    if points.empty:
        return None
    p = points.assign(err=_clip(points["err_ulp"]))
    g = p.groupby(["model", "target", "variant", "pred"], sort=False)["err"].max().reset_index()
    models = list(dict.fromkeys(g["model"]))
    targets = sorted(g["target"].unique())
    fig, axes = plt.subplots(len(models), len(targets), figsize=(5 * len(targets), 2.8 * len(models)),
                             squeeze=False, sharex=True, sharey=True)
    for i, model in enumerate(models):
        for j, t in enumerate(targets):
            ax = axes[i, j]
            for v, sub in g[(g["model"] == model) & (g["target"] == t)].groupby("variant", sort=False):
                ax.plot(sub["pred"], sub["err"], lw=0.7, label=v)
            ax.set_yscale("log")
            ax.axhline(1.0, color="k", lw=0.4, ls=":")
            ax.set_title(f"{model}, selector t={t} (max over gamma)", fontsize=8)
            ax.set_xlabel("x = pred", fontsize=7)
            ax.set_ylabel(f"error (ulp; NaN/inf at {INF_AT:.0e})", fontsize=7)
            ax.legend(fontsize=6)
    fig.tight_layout()
    return save(fig, folder, stem)


def plot_bracket(bracket: pd.DataFrame, folder: Path, fmt: str = "fp32", model: str = "npu",
                 stem: str = "error_vs_cancellation", threshold: float | None = None) -> str | None:
    """Max finite ulp per band of the bracket's cancellation factor C, one panel per gamma < -1, a line per variant.

    ``bracket``: :func:`precision.report.tables.bracket_table`; the root
    neighbourhood's edge (``threshold``) is marked.
    """
    if bracket.empty:
        return None
    b = bracket[(bracket["format"] == fmt) & (bracket["model"] == model) & (bracket["gamma"] < -1)]
    gammas = sorted(dict.fromkeys(b["gamma"]))
    if not gammas:
        return None
    fig, axes = plt.subplots(1, len(gammas), figsize=(4.2 * len(gammas), 3.4), squeeze=False, sharey=True)
    for j, gamma in enumerate(gammas):
        ax = axes[0, j]
        sub = b[b["gamma"] == gamma]
        bands = sorted(dict.fromkeys(sub["c_lo"]))
        pos = {c: i for i, c in enumerate(bands)}
        labels = list(sub.drop_duplicates("c_lo").sort_values("c_lo")["bracket"])
        for variant, rows in sub.groupby("variant", sort=False):
            rows = rows.sort_values("c_lo")
            bad = int((rows["nan"] + rows["inf"]).sum())
            ax.plot(rows["c_lo"].map(pos), _clip(rows["max_finite_ulp"]), marker="o", ms=3,
                    label=variant + (f" (+{bad:,} NaN/inf)" if bad else ""))
        if threshold is not None and threshold in pos:
            ax.axvline(pos[threshold] - 0.5, color="r", lw=0.9, ls=":", label=f"root neighbourhood C >= {threshold:g}")
        ax.set_yscale("log")
        ax.set_xticks(range(len(bands)), labels, fontsize=6, rotation=30)
        ax.set_title(f"gamma {gamma:g}, {model}, {fmt} output", fontsize=8)
        ax.set_xlabel("cancellation factor C of the bracket", fontsize=7)
        ax.tick_params(labelsize=6)
        ax.legend(fontsize=6)
    axes[0, 0].set_ylabel("max finite ulp error (log scale)", fontsize=7)
    fig.tight_layout()
    return save(fig, folder, stem)
