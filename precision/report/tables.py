"""Report tables: pandas DataFrames computed from a run folder, written as CSV.

Every table below is derived from the run's own files (:mod:`precision.sweep`
documents them) with vectorized pandas/numpy; the only values computed afresh
are those of :func:`q_table` (a few scalars of q = 1 - p on the npu machine
against mpmath, by design) and the float64 cancellation ratio of the dpos
terms used to locate the cancellation window (:func:`dpos_term_ratio`).

Tables (CSV columns)
--------------------
``summary.csv`` (:func:`summary_table`)
    variant, format, model, profile, count, max_finite_ulp (max over finite
    errors), max_ulp (inf when an output is NaN/inf), witness_pred (of max_ulp),
    witness_pred_dec, witness_target, witness_alpha, witness_gamma,
    witness_weight, witness_dout, mean_ulp, p99_ulp, share_correct,
    over_1ulp, nan_inf, nan, inf.
``by_selector.csv`` (:func:`selector_table`)
    variant, model, format, profile, target, region and the run's stat columns.
``hist.csv`` (:func:`histogram_table`)
    variant, format, bin, upper_ulp, count: the run's ulp histograms merged per
    variant and format (16 bins per octave; ``upper_ulp`` is inf for NaN/inf).
``ablation.csv`` (:func:`ablation_table`)
    guard, with_variant, without_variant, model, format, profile, region
    (``all`` = every region), changed, count, then max/max finite/mean/p99 ulp
    and NaN / inf counts with and without the guard (``*_with``, ``*_without``)
    and the differences ``d_max_ulp``, ``d_max_finite_ulp``, ``d_nan``,
    ``d_inf`` (with minus without; 0 when both are inf).
``ablation_gamma.csv`` (:func:`ablation_gamma_table`)
    guard, with_variant, without_variant, model, format, gamma, changed, count.
``cancellation_window.csv`` (:func:`cancellation_window_table`)
    gamma, count, opposite (points whose dpos terms have opposite signs),
    min_ratio, x_min_ratio, cancel_64 (points with ratio <= 1/64),
    x_lo_64, x_hi_64.
``threshold.csv`` (:func:`threshold_table`)
    model, format, subset (``all`` | ``opposite_signs`` | ``engaged_any``), variant, k (tau =
    2^-k; NaN for never and always), tau (0 = never, inf = always), count,
    max_ulp, max_finite_ulp, mean_ulp, p99_ulp, nan_inf, engages, improves, worsens.
``recovery.csv`` (:func:`recovery_table`)
    model, variant, format, log2_rw (floor of log2 |raw*weight|), count,
    max_ulp, max_finite_ulp, mean_ulp, over_1ulp, nan_inf, lost (computed 0,
    exact rounded != 0).
``recovery_g7.csv`` (:func:`recovery_g7_table`)
    model, band (``rw >= 2^-126``, ``rw < 2^-126, 1/w finite``,
    ``rw < 2^-126, 1/w = inf``), variant, count, max_ulp, max_finite_ulp,
    mean_ulp, over_1ulp, nan_inf, zero (computed 0), lost (computed 0 where
    the correctly rounded value is not), changed_by_g7 (outputs whose bits
    differ from the same recipe without G7).
``recovery_weight.csv`` (:func:`recovery_weight_table`)
    model, weight, log2_weight, recip_overflows (float32 1/weight is inf),
    variant, and the columns of ``recovery_g7.csv`` from count on.
``q_table.csv`` (:func:`q_table`)
    x, q_computed, q_exact, q_rel_err, q_err_ulp, lnp_computed, lnp_exact,
    lnp_rel_err, qg_computed, qg_exact, qg_rel_err (float32 npu ops, gamma 2).
``bracket.csv`` (:func:`bracket_table`)
    variant, model, format, gamma, bracket (band of the bracket's cancellation
    factor C, :mod:`precision.bracket`), c_lo (the band's lower edge) and the
    run's stat columns; studies with ``bracket_bands`` only.
``targets.csv`` (:func:`targets_table`)
    variant, model, format, count, outside (points with C below the root
    neighbourhood's edge), max_ulp_outside, max_finite_ulp_outside and its
    witness (hex), inside, max_ulp_inside, nan_inf (all points: NaN/inf where
    the correctly rounded value is finite), share_correct, not_correct (outputs
    that are not the correctly rounded value), over_1ulp, max_ulp.
``neighbourhood.csv`` (:func:`neighbourhood_table`)
    gamma, c_threshold, s_lo, s_hi: intervals of the argument s of A (pred for
    selector 0, -pred for selector 1) where C >= the threshold (float64,
    bisection).
``opcount.csv`` (:func:`opcount_table`)
    variant, ops (primitive ops per element on the npu machine,
    :mod:`precision.opcount`), ratio_to_kernel, per_op.
``onset.csv`` (:func:`onset_table`)
    variant, model, format, target, gamma, max_ulp, x_at_max, max_finite_ulp,
    x_at_max_finite, nan_inf (NaN/inf outputs), x_onset_1ulp
    (smallest x >= 0 with error over 1 ulp, NaN/inf included; NaN if none),
    x_first_nan_inf.

Notes
-----
ulp errors are those of the run (ulp of the exact value's binade in the
output format); quantiles named ``p99_ulp`` are the run's histogram upper
bounds, except in ``threshold.csv`` where they are exact (numpy ``higher``
method over the per-point errors).  NaN errors count as infinitely large.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from precision.bracket import band_bounds, neighbourhood
from precision.sweep import merge_groups

__all__ = [
    "MIN_NORMAL_FP32",
    "fmt_num",
    "summary_table",
    "selector_table",
    "histogram_table",
    "ablation_table",
    "ablation_gamma_table",
    "dpos_term_ratio",
    "cancellation_window_table",
    "g5_threshold_of",
    "threshold_table",
    "recovery_table",
    "recovery_g7_table",
    "recovery_weight_table",
    "q_table",
    "onset_table",
    "bracket_table",
    "targets_table",
    "neighbourhood_table",
    "opcount_table",
]

#: float32 smallest normal (spec S2's MIN_NORMAL); the G7 band edge.
MIN_NORMAL_FP32 = 2.0 ** -126
#: x values of the direct q = 1 - p table: where q loses accuracy (x > 8) and where p rounds to 1.
Q_TABLE_X = (1.0, 2.0, 4.0, 8.0, 10.0, 12.0, 14.0, 16.0, 16.5, 17.0, 18.0, 20.0, 24.0, 30.0, 40.0, 60.0, 87.0,
             88.0, 89.0, 100.0)
#: gamma of the powers in the q table (the operator's default).
Q_TABLE_GAMMA = 2.0
#: Stat columns copied from the run tables.
_STATS = ["count", "max_ulp", "witness_pred", "witness_target", "witness_alpha", "witness_gamma", "witness_weight",
          "witness_dout", "mean_ulp", "p50_ulp", "p99_ulp", "p999_ulp", "mean_bits", "share_correct", "over_1ulp",
          "nan", "inf", "wrong_sign"]


def fmt_num(value) -> str:
    """The one spelling of a number in report text (findings cite it verbatim).

    Integers get thousands separators (``1,142,784``); floats from 1e4 to 1e9
    one decimal with separators (``27,744.8``), others 4 significant digits
    (``0.5012``, ``3.2e+11``); ``inf`` and ``NaN`` as such.

    Examples
    --------
    >>> fmt_num(1142784), fmt_num(0.50123456), fmt_num(float("inf"))
    ('1,142,784', '0.5012', 'inf')
    """
    if isinstance(value, str):  # a hex float or label: verbatim
        return value
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    v = float(value)
    if np.isnan(v):
        return "NaN"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == int(v) and abs(v) < 1e15:
        return f"{int(v):,}"
    if 1e4 <= abs(v) < 1e9:  # one decimal: 16,777,215.9 must not read as more than 16,777,216
        return f"{v:,.1f}"
    return f"{v:.4g}"


def _order(frame: pd.DataFrame, variants: list, models: list) -> pd.DataFrame:
    """Sort rows by the run's variant order, then format, then model order."""
    key = {v: i for i, v in enumerate(variants)}
    mkey = {m: i for i, m in enumerate(models)}
    cols = [c for c in ("variant", "with_variant", "format", "model") if c in frame.columns]

    def sorter(s):
        if s.name in ("variant", "with_variant"):
            return s.map(key).fillna(len(key))
        if s.name == "model":
            return s.map(mkey).fillna(len(mkey))
        return s
    return frame.sort_values(cols, key=sorter, kind="stable").reset_index(drop=True)


def summary_table(run) -> pd.DataFrame:
    """Variant x format x model accuracy table in the style of Zimmermann's tables.

    Parameters
    ----------
    run : RunData

    Returns
    -------
    pandas.DataFrame
        Columns of ``summary.csv`` (module docstring); the witness inputs are
        hex floats, ``witness_pred_dec`` the decimal of the witness pred.
    """
    s = run.summary.copy()
    s["witness_pred_dec"] = s["witness_pred"].map(lambda h: repr(float.fromhex(h)))
    s["nan_inf"] = s["nan"] + s["inf"]
    cols = ["variant", "format", "model", "profile", "count", "max_finite_ulp", "max_ulp", "witness_pred",
            "witness_pred_dec",
            "witness_target", "witness_alpha", "witness_gamma", "witness_weight", "witness_dout", "mean_ulp",
            "p99_ulp", "share_correct", "over_1ulp", "nan_inf", "nan", "inf"]
    return _order(s[cols], run.variants, run.models)


def selector_table(run) -> pd.DataFrame:
    """Stats per (variant, model, format, profile, target, region), merged from the fine groups."""
    t = merge_groups(run.groups_raw, run.hist, ["variant", "model", "format", "profile", "target", "region"])
    return _order(t, run.variants, run.models)


def histogram_table(run) -> pd.DataFrame:
    """ulp histograms merged per (variant, format): variant, format, bin, upper_ulp, count."""
    from precision.scoring import bin_upper_edge
    g = run.groups_raw.set_index("group")
    h = run.hist
    keys = g.loc[h["group"].to_numpy(), ["variant", "format"]].reset_index(drop=True)
    merged = (pd.concat([keys, h[["bin", "count"]].reset_index(drop=True)], axis=1)
              .groupby(["variant", "format", "bin"], sort=True)["count"].sum().reset_index())
    merged["upper_ulp"] = bin_upper_edge(merged["bin"].to_numpy())
    return _order(merged[["variant", "format", "bin", "upper_ulp", "count"]], run.variants, run.models)


def _diff(a: pd.Series, b: pd.Series) -> np.ndarray:
    """a - b, 0 where both are equal (inf - inf is 0, not NaN)."""
    a, b = a.to_numpy(float), b.to_numpy(float)
    with np.errstate(invalid="ignore"):
        return np.where(a == b, 0.0, a - b)


def ablation_table(run) -> pd.DataFrame:
    """Per guard pair, model, format and region: outputs changed and stats with/without the guard.

    Returns an empty frame when the run holds no one-guard pairs.
    """
    ch = run.changes
    if ch.empty:
        return pd.DataFrame()
    keys = ["guard", "with_variant", "without_variant", "model", "format", "profile"]
    per_region = ch.groupby(keys + ["region"], sort=False)[["changed", "count"]].sum().reset_index()
    overall = ch.groupby(keys, sort=False)[["changed", "count"]].sum().reset_index().assign(region="all")
    t = pd.concat([per_region, overall], ignore_index=True)
    stats = pd.concat([run.by_region, run.summary.assign(region="all")], ignore_index=True)
    per = ["max_ulp", "max_finite_ulp", "mean_ulp", "p99_ulp", "nan", "inf"]
    stats = stats[["variant", "model", "format", "profile", "region"] + per]
    for side in ("with", "without"):
        s = stats.rename(columns={"variant": f"{side}_variant", **{c: f"{c}_{side}" for c in per}})
        t = t.merge(s, on=[f"{side}_variant", "model", "format", "profile", "region"], how="left")
    t["d_max_ulp"] = _diff(t["max_ulp_with"], t["max_ulp_without"])
    t["d_max_finite_ulp"] = _diff(t["max_finite_ulp_with"], t["max_finite_ulp_without"])
    t["d_nan"] = t["nan_with"] - t["nan_without"]
    t["d_inf"] = t["inf_with"] - t["inf_without"]
    regions = list(dict.fromkeys(run.by_region["region"])) + ["all"]
    t["_r"] = t["region"].map({r: i for i, r in enumerate(regions)})
    g = {f"G{i}": i for i in range(1, 9)}
    t["_g"] = t["guard"].map(g)
    t["_d"] = (t["without_variant"] != "naive").astype(int)
    mkey = {m: i for i, m in enumerate(run.models)}
    t["_m"] = t["model"].map(mkey)
    t = t.sort_values(["_g", "_d", "_m", "format", "_r"], kind="stable").drop(columns=["_r", "_g", "_d", "_m"])
    return t.reset_index(drop=True)


def ablation_gamma_table(run) -> pd.DataFrame:
    """Outputs changed per guard pair, model, format and gamma (where a guard matters)."""
    ch = run.changes
    if ch.empty:
        return pd.DataFrame()
    keys = ["guard", "with_variant", "without_variant", "model", "format", "gamma"]
    return ch.groupby(keys, sort=False)[["changed", "count"]].sum().reset_index()


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


def g5_threshold_of(variant: str) -> float | None:
    """The G5 threshold of a ``kernel[G5=...]`` variant: 0 for never, inf for always, None otherwise."""
    from precision.guards import get_variant
    if "G5=" not in variant:
        return None
    tau = dict(get_variant(variant).params).get("g5_threshold")
    if tau == "never":
        return 0.0
    if tau == "always":
        return float("inf")
    return float(tau)


def _err_inf(err) -> np.ndarray:
    e = np.asarray(err, dtype=np.float64)
    return np.where(np.isnan(e), np.inf, e)


def threshold_table(run) -> pd.DataFrame:
    """Per G5 threshold, model, format and subset: max/mean/p99 ulp, engages, improves, worsens.

    Engages: the output differs in bits from ``kernel[G5=never]``; improves /
    worsens: its ulp error is lower / higher than never's at the same point.
    Subsets: ``all`` points, ``opposite_signs`` (the dpos terms have
    opposite signs, from :func:`dpos_term_ratio`, selector 0, alpha > 0) and
    ``engaged_any`` (points where some threshold's output differs from never:
    where the choice of threshold matters).  ``max_finite_ulp`` ignores
    NaN/inf outputs (counted in ``nan_inf``).
    Empty when the run has fewer than two G5-threshold variants or no
    per-point rows.
    """
    taus = {v: g5_threshold_of(v) for v in run.variants}
    taus = {v: t for v, t in taus.items() if t is not None}
    never = [v for v, t in taus.items() if t == 0.0]
    if len(taus) < 2 or not never:
        return pd.DataFrame()
    pts = run.points(["pred", "target", "alpha", "gamma", "variant", "model", "format", "computed", "err_ulp"])
    if pts.empty:
        return pd.DataFrame()
    pts = pts[pts["variant"].isin(list(taus))]
    keys = ["model", "format", "alpha", "gamma", "target", "pred"]
    base = pts[pts["variant"] == never[0]][keys + ["computed", "err_ulp"]].rename(
        columns={"computed": "c0", "err_ulp": "e0"})
    m = pts.merge(base, on=keys, how="left")
    c = m["computed"].to_numpy(np.float64)
    c0 = m["c0"].to_numpy(np.float64)
    e, e0 = _err_inf(m["err_ulp"]), _err_inf(m["e0"])
    m["engages"] = (c.view(np.int64) != c0.view(np.int64)) & ~(np.isnan(c) & np.isnan(c0))
    m["improves"] = e < e0
    m["worsens"] = e > e0
    m["err"] = e
    m["finite_err"] = np.where(np.isfinite(e), e, np.nan)
    m["nan_inf"] = ~np.isfinite(e)
    opposite, _ = dpos_term_ratio(m["pred"].to_numpy(), m["gamma"].to_numpy())
    opp = opposite & (m["target"].to_numpy() == 0) & (m["alpha"].to_numpy() > 0)
    any_eng = m.groupby(keys, sort=False)["engages"].transform("any").to_numpy()
    frames = []
    for subset, mask in (("all", np.ones(len(m), dtype=bool)), ("opposite_signs", opp), ("engaged_any", any_eng)):
        sub = m[mask]
        if sub.empty:
            continue
        gb = sub.groupby(["model", "format", "variant"], sort=False)
        agg = gb.agg(count=("err", "size"), max_ulp=("err", "max"), max_finite_ulp=("finite_err", "max"),
                     mean_ulp=("finite_err", "mean"), nan_inf=("nan_inf", "sum"), engages=("engages", "sum"), improves=("improves", "sum"),
                     worsens=("worsens", "sum")).reset_index()
        p99 = gb["err"].quantile(0.99, interpolation="higher").reset_index(name="p99_ulp")
        agg = agg.merge(p99, on=["model", "format", "variant"])
        agg.insert(2, "subset", subset)
        frames.append(agg)
    t = pd.concat(frames, ignore_index=True)
    t["tau"] = t["variant"].map(taus)
    with np.errstate(divide="ignore"):
        k = -np.log2(t["tau"].to_numpy())
    t["k"] = np.where(np.isfinite(k), k, np.nan)
    for col in ("count", "nan_inf", "engages", "improves", "worsens"):
        t[col] = t[col].astype(np.int64)
    mkey = {mm: i for i, mm in enumerate(run.models)}
    t["_m"] = t["model"].map(mkey)
    t = t.sort_values(["_m", "format", "subset", "tau"], kind="stable").drop(columns="_m")
    return t[["model", "format", "subset", "variant", "k", "tau", "count", "max_ulp", "max_finite_ulp", "mean_ulp",
              "p99_ulp",
              "nan_inf", "engages", "improves", "worsens"]].reset_index(drop=True)


def _recovery_points(run) -> pd.DataFrame:
    pts = run.points(["pred", "target", "alpha", "gamma", "weight", "dout", "variant", "model", "format",
                      "computed", "exact", "rounded", "err_ulp"])
    pts = pts[pts["weight"].notna()].copy()
    if pts.empty:
        return pts
    with np.errstate(divide="ignore", invalid="ignore"):
        pts["rw"] = np.abs(pts["exact"].to_numpy()) / np.abs(pts["dout"].to_numpy())
    pts["err"] = _err_inf(pts["err_ulp"])
    pts["nan_inf"] = ~np.isfinite(pts["err"])
    pts["finite_err"] = np.where(np.isfinite(pts["err"]), pts["err"], np.nan)
    pts["lost"] = (pts["computed"] == 0) & (pts["rounded"] != 0)
    pts["zero"] = pts["computed"] == 0
    pts["over_1ulp"] = pts["err"] > 1
    return pts


def recovery_table(run) -> pd.DataFrame:
    """Error against |raw*weight| (= |exact| / |dout|), per model and variant, in binades.

    Empty when the run has no weighted per-point rows.
    """
    pts = _recovery_points(run)
    if pts.empty:
        return pd.DataFrame()
    pts = pts[pts["rw"] > 0]
    pts["log2_rw"] = np.floor(np.log2(pts["rw"].to_numpy())).astype(np.int64)
    t = (pts.groupby(["model", "variant", "format", "log2_rw"], sort=False)
         .agg(count=("err", "size"), max_ulp=("err", "max"), max_finite_ulp=("finite_err", "max"),
              mean_ulp=("finite_err", "mean"), over_1ulp=("over_1ulp", "sum"), nan_inf=("nan_inf", "sum"),
              lost=("lost", "sum")).reset_index())
    for col in ("count", "over_1ulp", "nan_inf", "lost"):
        t[col] = t[col].astype(np.int64)
    mkey = {m: i for i, m in enumerate(run.models)}
    vkey = {v: i for i, v in enumerate(run.variants)}
    t = t.assign(_m=t["model"].map(mkey), _v=t["variant"].map(vkey))
    return t.sort_values(["_m", "_v", "format", "log2_rw"], kind="stable").drop(columns=["_m", "_v"]).reset_index(
        drop=True)


#: Variant pairs (with G7, without G7) whose difference is guard G7.
G7_PAIRS = (("kernel", "kernel-G7"), ("naive+G7", "naive"))

#: Bands of recovery_g7.csv: where G7 cannot engage, where it can recover, where its reciprocal overflows.
G7_BANDS = ("rw >= 2^-126", "rw < 2^-126, 1/w finite", "rw < 2^-126, 1/w = inf")


def _mark_g7_changes(pts: pd.DataFrame) -> pd.DataFrame:
    """Column ``changed_by_g7``: output bits differ from the same recipe without G7 (G7_PAIRS)."""
    keys = ["model", "format", "alpha", "gamma", "weight", "dout", "target", "pred"]
    pts["changed_by_g7"] = False
    for with_v, without_v in G7_PAIRS:
        a = pts[pts["variant"] == with_v]
        b = pts[pts["variant"] == without_v][keys + ["computed"]].rename(columns={"computed": "c0"})
        if a.empty or b.empty:
            continue
        j = a[keys].reset_index().merge(b, on=keys, how="left")
        ca, cb = a.loc[j["index"], "computed"].to_numpy(np.float64), j["c0"].to_numpy(np.float64)
        diff = (ca.view(np.int64) != cb.view(np.int64)) & ~(np.isnan(ca) & np.isnan(cb))
        pts.loc[j["index"].to_numpy(), "changed_by_g7"] = diff
    return pts


def _recip_overflows(weight) -> np.ndarray:
    """1/weight overflows float32 (the kernel's Div0ulp(1, weight) is inf): |weight| <= 2^-128."""
    w = np.abs(np.asarray(weight, dtype=np.float64))
    with np.errstate(divide="ignore", over="ignore"):
        return ~np.isfinite((np.float64(1.0) / w).astype(np.float32)) & (w > 0)


_RECOVERY_AGG = dict(count=("err", "size"), max_ulp=("err", "max"), max_finite_ulp=("finite_err", "max"),
                     mean_ulp=("finite_err", "mean"), over_1ulp=("over_1ulp", "sum"), nan_inf=("nan_inf", "sum"),
                     zero=("zero", "sum"), lost=("lost", "sum"), changed_by_g7=("changed_by_g7", "sum"))


def recovery_g7_table(run) -> pd.DataFrame:
    """Per model, band and variant: error, outputs lost to zero, outputs G7 changes.

    Bands (disjoint, :data:`G7_BANDS`): ``rw >= 2^-126`` (raw*weight normal:
    G7 does not engage), ``rw < 2^-126, 1/w finite`` (G7 re-derives the
    product by dividing by 1/weight and 1/dout), ``rw < 2^-126, 1/w = inf``
    (weight <= 2^-128: the float32 reciprocal of the weight overflows).
    """
    pts = _recovery_points(run)
    if pts.empty:
        return pd.DataFrame()
    over = _recip_overflows(pts["weight"].to_numpy())
    small = pts["rw"].to_numpy() < MIN_NORMAL_FP32
    pts["band"] = np.where(~small, G7_BANDS[0], np.where(over, G7_BANDS[2], G7_BANDS[1]))
    pts = _mark_g7_changes(pts)
    t = pts.groupby(["model", "band", "variant"], sort=False).agg(**_RECOVERY_AGG).reset_index()
    for col in ("count", "over_1ulp", "nan_inf", "zero", "lost", "changed_by_g7"):
        t[col] = t[col].astype(np.int64)
    mkey = {m: i for i, m in enumerate(run.models)}
    vkey = {v: i for i, v in enumerate(run.variants)}
    bkey = {b: i for i, b in enumerate(G7_BANDS)}
    t = t.assign(_m=t["model"].map(mkey), _b=t["band"].map(bkey), _v=t["variant"].map(vkey))
    return t.sort_values(["_m", "_b", "_v"], kind="stable").drop(columns=["_m", "_b", "_v"]).reset_index(drop=True)


def recovery_weight_table(run) -> pd.DataFrame:
    """Per model, weight and variant: error, outputs lost to zero and outputs G7 changes.

    Columns: model, weight, log2_weight, recip_overflows (float32 1/weight is
    inf), variant, count, max_ulp, max_finite_ulp, mean_ulp, over_1ulp,
    nan_inf, zero, lost, changed_by_g7.
    """
    pts = _recovery_points(run)
    if pts.empty:
        return pd.DataFrame()
    pts = _mark_g7_changes(pts)
    t = pts.groupby(["model", "weight", "variant"], sort=False).agg(**_RECOVERY_AGG).reset_index()
    for col in ("count", "over_1ulp", "nan_inf", "zero", "lost", "changed_by_g7"):
        t[col] = t[col].astype(np.int64)
    w = t["weight"].to_numpy(np.float64)
    with np.errstate(divide="ignore"):
        t.insert(2, "log2_weight", np.log2(np.abs(w)))
    t.insert(3, "recip_overflows", _recip_overflows(w))
    mkey = {m: i for i, m in enumerate(run.models)}
    vkey = {v: i for i, v in enumerate(run.variants)}
    t = t.assign(_m=t["model"].map(mkey), _v=t["variant"].map(vkey))
    return t.sort_values(["_m", "weight", "_v"], ascending=[True, False, True], kind="stable").drop(
        columns=["_m", "_v"]).reset_index(drop=True)


def q_table(xs=Q_TABLE_X, gamma: float = Q_TABLE_GAMMA, machine: str = "npu") -> pd.DataFrame:
    """q = 1 - p, ln(p) and q**gamma in float32 as the kernel computes them, against the exact values.

    The kernel's steps S1-S3 for x >= 0 on ``machine``: ``p = Div0ulp(1,
    Exp(-|x|) + 1)``, ``q = 1 - p``, ``ln(max(p, 2^-126))`` and
    ``Power_hp(max(q, 2^-126), gamma)``; exact values from mpmath at 200 bits
    (``q = 1/(1+e^x)``, ``ln p = -log1p(e^-x)``).

    Returns
    -------
    pandas.DataFrame
        Columns of ``q_table.csv``; relative errors ``|computed - exact| / exact``,
        ``q_err_ulp`` in fp32 ulps of the exact q.
    """
    import mpmath

    from precision.formats import ulp
    from precision.machine import get_machine
    m = get_machine(machine)
    x = np.asarray(xs, dtype=np.float32)
    one = np.float32(1.0)
    floor = np.float32(MIN_NORMAL_FP32)
    e = m.exp(m.neg(m.abs(x)))
    p = m.div(np.full_like(x, one), m.add(e, np.full_like(x, one)), mode="0ulp")
    q = m.sub(np.full_like(x, one), p)
    lp = m.ln(m.maximum(p, np.full_like(x, floor)))
    qg = m.pow(m.maximum(q, np.full_like(x, floor)), np.full_like(x, np.float32(gamma)), algo="double_float")
    ctx = mpmath.mp.clone()
    ctx.prec = 200
    exact = [(float(1 / (1 + ctx.exp(ctx.mpf(float(v))))), float(-ctx.log1p(ctx.exp(-ctx.mpf(float(v))))),
              float((1 / (1 + ctx.exp(ctx.mpf(float(v))))) ** ctx.mpf(gamma))) for v in x]
    qe, lpe, qge = (np.array(c) for c in zip(*exact))

    def rel(a, b):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.abs(np.asarray(a, np.float64) - b) / np.abs(b)
    return pd.DataFrame({
        "x": x.astype(np.float64), "q_computed": q.astype(np.float64), "q_exact": qe, "q_rel_err": rel(q, qe),
        "q_err_ulp": np.abs(q.astype(np.float64) - qe) / ulp(qe, "fp32"),
        "lnp_computed": lp.astype(np.float64), "lnp_exact": lpe, "lnp_rel_err": rel(lp, lpe),
        "qg_computed": qg.astype(np.float64), "qg_exact": qge, "qg_rel_err": rel(qg, qge)})


def onset_table(run) -> pd.DataFrame:
    """Per variant, model, format, selector and gamma: worst error and where errors over 1 ulp begin for x >= 0.

    Empty without per-point rows.
    """
    pts = run.points(["pred", "target", "gamma", "variant", "model", "format", "err_ulp"])
    if pts.empty:
        return pd.DataFrame()
    pts["err"] = _err_inf(pts["err_ulp"])
    pts["finite_err"] = np.where(np.isfinite(pts["err"]), pts["err"], -np.inf)
    pts["nan_inf"] = ~np.isfinite(pts["err"])
    keys = ["variant", "model", "format", "target", "gamma"]
    worst = pts.sort_values(keys + ["err"], ascending=[True] * len(keys) + [False], kind="stable")
    worst = worst.drop_duplicates(keys)[keys + ["err", "pred"]].rename(columns={"err": "max_ulp",
                                                                                "pred": "x_at_max"})
    wf = pts.sort_values(keys + ["finite_err"], ascending=[True] * len(keys) + [False], kind="stable")
    wf = wf.drop_duplicates(keys)[keys + ["finite_err", "pred"]].rename(
        columns={"finite_err": "max_finite_ulp", "pred": "x_at_max_finite"})
    wf.loc[~np.isfinite(wf["max_finite_ulp"]), ["max_finite_ulp", "x_at_max_finite"]] = np.nan
    n_bad = pts.groupby(keys)["nan_inf"].sum().astype(np.int64).rename("nan_inf")
    pos = pts[pts["pred"] >= 0]
    over = pos[pos["err"] > 1].groupby(keys)["pred"].min().rename("x_onset_1ulp")
    bad = pos[~np.isfinite(pos["err"])].groupby(keys)["pred"].min().rename("x_first_nan_inf")
    t = (worst.merge(wf, on=keys, how="left").merge(n_bad.reset_index(), on=keys, how="left")
         .merge(over.reset_index(), on=keys, how="left").merge(bad.reset_index(), on=keys, how="left"))
    t = t[keys + ["max_ulp", "x_at_max", "max_finite_ulp", "x_at_max_finite", "nan_inf", "x_onset_1ulp",
                  "x_first_nan_inf"]]
    return t.sort_values(["variant", "model", "format", "target", "gamma"],
                         key=lambda s: s.map({v: i for i, v in enumerate(run.variants)}) if s.name == "variant"
                         else (s.map({m: i for i, m in enumerate(run.models)}) if s.name == "model" else s),
                         kind="stable").reset_index(drop=True)


# ---------------------------------------------------------------------------
# Bracket bands, the issue-6 targets, operation counts
# ---------------------------------------------------------------------------

def bracket_table(run) -> pd.DataFrame:
    """Stats per (variant, model, format, gamma, bracket band); empty without bracket bands.

    C is the true cancellation factor for every gamma < 0 (1 for gamma >= 0);
    only gamma < -1 has roots, so only there do bands at or above the
    neighbourhood's edge count as inside it (:func:`targets_table`).
    """
    if "bracket" not in run.groups_raw.columns:
        return pd.DataFrame()
    t = merge_groups(run.groups_raw, run.hist, ["variant", "model", "format", "gamma", "bracket"])
    t.insert(5, "c_lo", t["bracket"].map(band_bounds).str[0])
    t = t.sort_values(["gamma", "c_lo"], kind="stable")
    return _order(t, run.variants, run.models)


def targets_table(run, c_threshold: float) -> pd.DataFrame:
    """Per (variant, model, format): errors outside and inside the root neighbourhood.

    The neighbourhood is gamma < -1 and C >= c_threshold; empty without
    bracket bands or when a band straddles ``c_threshold`` (its points could
    not be placed).
    """
    if "bracket" not in run.groups_raw.columns:
        return pd.DataFrame()
    g = run.groups_raw.copy()
    bounds = g["bracket"].map(band_bounds)
    c_lo, c_hi = bounds.str[0], bounds.str[1]
    if ((c_lo < c_threshold) & (c_hi > c_threshold)).any():  # a band straddles the threshold
        return pd.DataFrame()
    g["zone"] = np.where((c_lo >= c_threshold) & (g["gamma"] < -1), "inside", "outside")
    keys = ["variant", "model", "format"]
    allz = merge_groups(g, run.hist, keys).set_index(keys)
    zoned = merge_groups(g, run.hist, keys + ["zone"])
    out = zoned[zoned["zone"] == "outside"].set_index(keys)
    ins = zoned[zoned["zone"] == "inside"].set_index(keys)
    t = pd.DataFrame(index=allz.index)
    t["count"] = allz["count"]
    t["outside"] = out["count"]
    t["max_ulp_outside"] = out["max_ulp"]
    t["max_finite_ulp_outside"] = out["max_finite_ulp"]
    for col in ("witness_pred", "witness_target", "witness_alpha", "witness_gamma"):
        t[f"{col}_outside"] = out[col]
    t["inside"] = ins["count"].reindex(t.index).fillna(0).astype(np.int64)
    t["max_ulp_inside"] = ins["max_ulp"].reindex(t.index)
    t["nan_inf"] = (allz["nan"] + allz["inf"]).astype(np.int64)
    t["share_correct"] = allz["share_correct"]
    t["not_correct"] = t["count"] - g.groupby(keys)["n_correct"].sum().reindex(t.index)
    t["over_1ulp"] = allz["over_1ulp"]
    t["max_ulp"] = allz["max_ulp"]
    return _order(t.reset_index(), run.variants, run.models)


def neighbourhood_table(gammas, c_threshold: float) -> pd.DataFrame:
    """The root neighbourhood's intervals per gamma < -1 (:func:`precision.bracket.neighbourhood`)."""
    rows = [(float(g), c_threshold, a, b) for g in sorted(gammas) for a, b in neighbourhood(g, c_threshold)]
    return pd.DataFrame(rows, columns=["gamma", "c_threshold", "s_lo", "s_hi"])


def opcount_table(variants, reference: str = "kernel") -> pd.DataFrame:
    """Primitive ops per element on the npu machine (:func:`precision.opcount.count_ops`) and the ratio to ``reference``."""
    from precision.opcount import count_ops
    names = list(dict.fromkeys([reference, *variants]))
    counts = {v: count_ops(v) for v in names}
    rows = [(v, counts[v][0], counts[v][0] / counts[reference][0],
             " ".join(f"{k}={n:.2f}" for k, n in counts[v][1].items())) for v in names]
    return pd.DataFrame(rows, columns=["variant", "ops", "ratio_to_kernel", "per_op"])
