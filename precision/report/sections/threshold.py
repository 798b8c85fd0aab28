"""The G5 cancellation threshold: each threshold against no correction and against the production 1/64.

Reads the run's comparisons of kind ``threshold`` (:mod:`precision.comparisons`)
and the statistics of each ``kernel[G5=...]`` variant over the same points.
``threshold.csv`` has one row per (machine, format, threshold): max finite
error, mean bits, specials, then the paired counts and verdict against
``never`` (``*_vs_never``) and against 1/64 (``*_vs_production``).  The
finding answers "is 1/64 right": which thresholds beat no correction, which
beat or lose to 1/64 by a significant paired difference, which are
indistinguishable from it.  ``cancellation_window.csv`` locates where the dpos
terms cancel at all (float64, over the run's kept pred values).
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from precision.comparisons import PRODUCTION_THRESHOLD, g5_threshold, threshold_name
from precision.report.document import Details, Image, Para, Section, Table
from precision.report.findings import Finding, cite, fmt_num
from precision.report.plots import save
from precision.report.tables import stat_table
from precision.scoring import SPECIAL_CLASSES

__all__ = ["build", "threshold_table", "dpos_term_ratio", "cancellation_window_table", "plot_threshold"]

T = "threshold.csv"
_PAIRED = ("changed", "better", "worse", "specials_fixed", "specials_caused", "p_value", "verdict")


def threshold_table(run) -> pd.DataFrame:
    """One row per (machine, format, profile, threshold variant); empty without threshold comparisons."""
    comps = run.comparisons
    comps = comps[(comps["kind"] == "threshold") & (comps["region"] == "all")] if not comps.empty else comps
    taus = {v: g5_threshold(v) for v in run.variants}
    taus = {v: t for v, t in taus.items() if t is not None}
    if comps.empty or len(taus) < 2:
        return pd.DataFrame()
    s = stat_table(run, ["variant", "machine", "format", "profile"])
    s = s[s["variant"].isin(list(taus))].copy()
    s["tau"] = s["variant"].map(taus)
    with np.errstate(divide="ignore"):
        k = -np.log2(s["tau"].to_numpy(np.float64))
    s["k"] = np.where(np.isfinite(k), k, np.nan)
    s["threshold"] = s["tau"].map(threshold_name)
    base = {v: g5_threshold(v) for v in comps["without_variant"].unique()}
    keys = ["variant", "machine", "format", "profile"]
    for label, is_base in (("never", lambda t: t == 0.0), ("production", lambda t: t == PRODUCTION_THRESHOLD)):
        c = comps[comps["without_variant"].map(base).map(is_base)]
        c = c.rename(columns={"with_variant": "variant", **{p: f"{p}_vs_{label}" for p in _PAIRED}})
        s = s.merge(c[keys + [f"{p}_vs_{label}" for p in _PAIRED]], on=keys, how="left")
    mkey = {m: i for i, m in enumerate(run.machines)}
    s = s.assign(_m=s["machine"].map(mkey), _t=-s["tau"]).sort_values(["_m", "format", "_t"], kind="stable")
    cols = ["machine", "format", "profile", "threshold", "k", "tau", "variant", "count", "max_finite_ulp", "mean_bits",
            "share_correct", *SPECIAL_CLASSES] + [f"{p}_vs_{b}" for b in ("never", "production") for p in _PAIRED]
    return s[cols].reset_index(drop=True)


def dpos_term_ratio(x, gamma):
    """The two terms of dpos and their cancellation ratio, in float64.

    With ``p = sigmoid(x)``, ``q = 1 - p``: ``u = gamma*p*ln(p)`` and ``v = -q``
    are the terms of ``dpos / (alpha * q**gamma)`` (the common factor
    ``q**gamma > 0`` does not change signs or the ratio).

    Parameters
    ----------
    x, gamma : array_like of float64

    Returns
    -------
    opposite : numpy.ndarray of bool
        The terms have opposite signs (both nonzero).
    ratio : numpy.ndarray of float64
        ``|u + v| / max(|u|, |v|)``: 1 without cancellation, near 0 close to a
        root of A; ``orig`` of spec S5 is corrected when about ``ratio <= tau``.

    Notes
    -----
    p, q and ln p come from ``exp(-|x|)`` and ``log1p`` (no ``1 - p``), so
    the float64 ratio is accurate to a few ulps of float64 except within
    ~1e-15 of a root, far below any threshold studied.
    """
    x = np.asarray(x, dtype=np.float64)
    g = np.asarray(gamma, dtype=np.float64)
    e = np.exp(-np.abs(x))
    l1 = np.log1p(e)
    p = np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))
    q = np.where(x >= 0, e / (1.0 + e), 1.0 / (1.0 + e))
    lp = np.where(x >= 0, -l1, x - l1)
    u = g * p * lp
    v = -q
    opposite = (np.sign(u) * np.sign(v)) < 0
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.abs(u + v) / np.maximum(np.abs(u), np.abs(v))
    return opposite, ratio


def cancellation_window_table(preds, gammas) -> pd.DataFrame:
    """Where the dpos terms have opposite signs and cancel to 1/64, per gamma, over the study's preds."""
    preds = np.asarray(preds, dtype=np.float64)
    gammas = np.asarray(sorted(gammas), dtype=np.float64)
    X = np.broadcast_to(preds[None, :], (gammas.size, preds.size))
    G = np.broadcast_to(gammas[:, None], X.shape)
    opposite, ratio = dpos_term_ratio(X, G)
    c64 = ratio <= 2.0 ** -6
    big = np.inf
    t = pd.DataFrame({
        "gamma": gammas, "count": preds.size, "opposite": opposite.sum(axis=1),
        "min_ratio": ratio.min(axis=1), "x_min_ratio": preds[ratio.argmin(axis=1)],
        "cancel_64": c64.sum(axis=1),
        "x_lo_64": np.where(c64, X, big).min(axis=1), "x_hi_64": np.where(c64, X, -big).max(axis=1)})
    none = t["cancel_64"] == 0
    t.loc[none, ["x_lo_64", "x_hi_64"]] = np.nan
    return t


def cancellation_window_table(preds, gammas) -> pd.DataFrame:
    """Where the dpos terms have opposite signs and cancel to 1/64, per gamma, over the given preds."""
    preds = np.asarray(preds, dtype=np.float64)
    gammas = np.asarray(sorted(gammas), dtype=np.float64)
    X = np.broadcast_to(preds[None, :], (gammas.size, preds.size))
    G = np.broadcast_to(gammas[:, None], X.shape)
    opposite, ratio = dpos_term_ratio(X, G)
    c64 = ratio <= PRODUCTION_THRESHOLD
    t = pd.DataFrame({
        "gamma": gammas, "count": preds.size, "opposite": opposite.sum(axis=1),
        "min_ratio": ratio.min(axis=1), "x_min_ratio": preds[ratio.argmin(axis=1)],
        "cancel_64": c64.sum(axis=1),
        "x_lo_64": np.where(c64, X, np.inf).min(axis=1), "x_hi_64": np.where(c64, X, -np.inf).max(axis=1)})
    t.loc[t["cancel_64"] == 0, ["x_lo_64", "x_hi_64"]] = np.nan
    return t


def plot_threshold(t: pd.DataFrame, folder, stem: str = "threshold") -> str | None:
    """Per machine and format: outputs better / worse than never and than 1/64 per threshold; verdicts marked."""
    if t.empty:
        return None
    cells = list(dict.fromkeys(zip(t["machine"], t["format"])))
    fig, axes = plt.subplots(1, len(cells), figsize=(4.6 * len(cells), 3.4), squeeze=False, sharey=True)
    for j, (machine, fmt) in enumerate(cells):
        ax = axes[0, j]
        sub = t[(t["machine"] == machine) & (t["format"] == fmt)].reset_index(drop=True)
        x = np.arange(len(sub))
        for base, marker, ls in (("never", "o", "-"), ("production", "s", "--")):
            b, w = sub[f"better_vs_{base}"].fillna(0), sub[f"worse_vs_{base}"].fillna(0)
            ax.plot(x, b, marker=marker, ms=3, ls=ls, color="tab:blue", label=f"better than {base}")
            ax.plot(x, w, marker=marker, ms=3, ls=ls, color="tab:red", label=f"worse than {base}")
        prod = sub.index[sub["tau"] == PRODUCTION_THRESHOLD]
        if len(prod):
            ax.axvline(prod[0], color="k", lw=0.8, ls=":", label="1/64 (production)")
        ax.set_yscale("symlog", linthresh=1)
        ax.set_xticks(x, sub["threshold"], fontsize=6, rotation=60)
        ax.set_title(f"{machine}, {fmt}", fontsize=8)
        ax.tick_params(labelsize=6)
        ax.set_xlabel("G5 threshold tau", fontsize=7)
    axes[0, 0].set_ylabel("changed outputs (symlog)", fontsize=7)
    axes[0, -1].legend(fontsize=6, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    return save(fig, folder, stem)


def _names(rows) -> str:
    return ", ".join(rows["threshold"]) if len(rows) else "none"


def _threshold_findings(t: pd.DataFrame) -> list:
    """Per machine and format: is 1/64 right? The verdicts against never and against 1/64, with their evidence."""
    out = []
    for (machine, fmt), sub in t.groupby(["machine", "format"], sort=False):
        prod = sub[sub["tau"] == PRODUCTION_THRESHOLD]
        others = sub[(sub["tau"] != PRODUCTION_THRESHOLD)]
        if prod.empty:
            continue
        w = {"machine": machine, "format": fmt, "variant": prod.iloc[0]["variant"]}
        nums = [cite(f"prod_{c}", T, t, w, f"{c}_vs_never") for c in ("better", "worse")]
        v_never = prod.iloc[0]["verdict_vs_never"]
        text = (f"On {machine} {fmt}: against no correction, 1/64 {v_never} ({nums[0].text} better, {nums[1].text} "
                f"worse)")
        helps_never = others[(others["verdict_vs_never"] == "helps") & (others["tau"] > 0)]
        text += f"; thresholds that help against no correction: {_names(helps_never)}"
        vs = others[others["tau"] != 0]
        better = vs[vs["verdict_vs_production"] == "helps"]
        worse = vs[vs["verdict_vs_production"] == "hurts"]
        same = vs[vs["verdict_vs_production"].isin(["no_effect", "inconclusive"])]
        mixed = vs[vs["verdict_vs_production"] == "mixed"]
        text += (f". Against 1/64: better {_names(better)}; worse {_names(worse)}; indistinguishable "
                 f"(no change or no significant one) {_names(same)}"
                 + (f"; mixed {_names(mixed)}" if len(mixed) else ""))
        if len(better):
            best = better.assign(_n=better["better_vs_production"] - better["worse_vs_production"]).sort_values(
                "_n", ascending=False, kind="stable").iloc[0]
            wb = {"machine": machine, "format": fmt, "variant": best["variant"]}
            b, wo, p = (cite(f"best_{c}", T, t, wb, f"{c}_vs_production") for c in ("better", "worse", "p_value"))
            nums += [b, wo, p]
            text += (f". The data do not single out 1/64: {best['threshold']} is better ({b.text} better, "
                     f"{wo.text} worse than 1/64, p = {p.text})")
        elif len(worse) and not len(same):
            text += ". Every other threshold is significantly worse than 1/64: the data support it here"
        else:
            text += (". No threshold is significantly better than 1/64; "
                     + ("it is not distinguishable from " + _names(same) if len(same) else "")
                     + ": a tie is not support for 1/64 over them")
        out.append(Finding(f"threshold/{machine}/{fmt}", "threshold", text + ".", nums, 5))
    return out


def build(ctx) -> Section:
    run = ctx.run
    t = threshold_table(run)
    section = Section("threshold", "G5 cancellation threshold: is 1/64 right?")
    if t.empty:
        return section
    section.tables[T] = t
    preds = run.points(["pred"])["pred"].to_numpy()
    window = cancellation_window_table(np.unique(preds), run.by_gamma["gamma"].unique()) if preds.size else \
        pd.DataFrame()
    if not window.empty:
        section.tables["cancellation_window.csv"] = window
    shown = ["machine", "format", "threshold", "max_finite_ulp", "mean_bits", "nan", "changed_vs_never",
             "better_vs_never", "worse_vs_never", "verdict_vs_never", "changed_vs_production",
             "better_vs_production", "worse_vs_production", "p_value_vs_production", "verdict_vs_production"]
    section.body = [
        Para("Each threshold tau (the correction is used when |orig| <= tau * max(|lhs|, |rhs|)) compared point "
             "by point with no correction (never) and with the production 1/64, on the same points; max finite "
             "error and mean bits over the same points."),
        Table(t[shown], T),
        Image(plot_threshold(t, ctx.plot_dir), "Outputs better (blue) and worse (red) than never (solid) and than "
                                                "1/64 (dashed), per threshold; 1/64 dotted"),
    ]
    if not window.empty:
        section.body.append(Details("Where the dpos terms cancel (float64, over the run's pred values)", [
            Table(window, "cancellation_window.csv")]))
    section.findings = _threshold_findings(t)
    return section
