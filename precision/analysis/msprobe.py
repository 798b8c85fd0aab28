"""msprobe's accuracy pre-check standards, as its code computes them, on pooled group statistics.

msprobe (package ``mindstudio-probe``, ``msprobe.pytorch.api_accuracy_checker``)
compares a device output with a bench (its golden) element by element.  Here
the bench is the standards' golden before special values are substituted:
the oracle's exact value as a float64 (setting ``golden = "rounded"``: its
correct rounding to the output format), so msprobe's arithmetic is float64
throughout, as it is for an fp32 operator.  Per element (``c`` the output,
``B`` the bench, ``Bc`` the bench cast to the output format; every constant
per format in :data:`MSPROBE_PARAMETERS`, from msprobe's ``StandardConfig``):

* finite on both sides: ``c`` and ``Bc`` finite (``inf_nan`` otherwise);
  ``ae = |c - B|``; small: finite on both sides and ``|B| <= small_value``;
  normal: finite on both sides and not small; ``rel = ae / (|B| + eps)``
  (eps of the bench's float64, 2^-8 for bf16).
* **benchmark standard** (``benchmark_compare``): small-value error ratio
  (small with ``ae > atol``, over small), RMSE (``ae`` at normal positions,
  0 elsewhere; ``sqrt(mean * (n / (n - masked + 1e-4) + 1e-4))``), max and
  mean ``rel`` over normal (0 when none), error balance ``|#(c > Bc) -
  #(c < Bc)| / n``; each over the same metric of the third party,
  ``|x| / max(|y|, minimum_err)``; an inf/NaN metric on either side is
  consistent only when both are the same infinity or both NaN (then no
  ratio, a pass), else an error.  Error when a ratio exceeds its limit
  (:data:`BENCHMARK_LIMITS`, level L0: the operator is in neither of
  msprobe's L1/L2 lists); the error balance is computed and shown but, as
  in msprobe's code, not part of the verdict.
* **ULP standard** (``ulp_compare``): per element ``|(c - B) 2^(p - 1 -
  eb)|`` with ``eb = floor(log2|B|)`` raised to ``min_eb`` (0 at ``B = 0``),
  in float64 for fp32 and float32 for fp16/bf16; mean (NaN if one is NaN),
  share over the cut (32 fp32, 1 otherwise), share ratio to the third party.
  fp32 passes when mean < 64, or share < 0.05, or share ratio < 1;
  fp16/bf16 when share < 0.001 or share ratio < 1.
* **absolute-threshold standard** (``absolute_threshold``): error when any
  inf/NaN position differs (clipped to the format's range, relative
  difference over ``rtol``, NaN against NaN passes), a normal position has
  ``rel > rtol`` or a small one ``ae > atol``.
* **ratio standard** (``compare._compare_float_tensor``): shares with
  ``ae / (|B| + eps) < 0.01, 0.001, 0.0001``; pass when max ``ae < 0.001``;
  fp16/bf16: error unless the hundredth share > 0.99, then pass when the
  thousandth share > 0.999, else warning; fp32: error unless the thousandth
  share > 0.999, warning unless the ten-thousandth share > 0.9999, else
  pass.  msprobe's cosine-similarity gate before it (cosine < 0.99 is an
  error) is not evaluated: pooled over millions of points its sums
  overflow where the exact value is near 1e301.

Follows the code where docs and code differ: the small-value bounds are
``StandardConfig``'s (2^-10 fp16 and bf16, 2^-20 fp32; its documentation,
``api_accuracy_checker.md``, says 1e-3 and 1e-6) and its atol (fp16 1e-16 in
the benchmark standard, 2^-16 in the absolute-threshold one; documented
1e-5, and 1e-9 for fp32); a benchmark ratio above 1 and within its limit
passes (documented as a warning);
``floor(log2|B|)`` is taken exactly (msprobe's ``np.log2`` may round up
within one float64 ulp below a power of two); the inf/NaN check of the
absolute-threshold standard subtracts in the output format (msprobe does),
kept here as an exact difference that overflows where the format's
subtraction would.  A pooled sum is sequential per group and merged;
msprobe's ``np.mean`` sums pairwise (equal to about 1e-13 relative).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from precision.exact.formats import get_format

__all__ = ["MSPROBE_PARAMETERS", "BENCHMARK_LIMITS", "MSPROBE_COUNTS", "MSPROBE_SUMS", "MSPROBE_MAXIMA",
           "MSPROBE_COLUMNS", "MSPROBE_VERDICTS", "bench_in_format", "msprobe_parameters", "overflow_bound",
           "msprobe_point_values", "msprobe_columns", "msprobe_metrics", "msprobe_verdicts"]

#: msprobe's constants per output format (``StandardConfig``, ``ULP_PARAMETERS``, ``CompareConst``).
MSPROBE_PARAMETERS = {
    "fp16": dict(small_value=2.0 ** -10, atol_benchmark=1e-16, atol_threshold=2.0 ** -16, rtol=2.0 ** -10,
                 eps=float(np.finfo(np.float64).eps), min_eb=-14, mantissa=10, ulp_cut=1.0, minimum_err=2.0 ** -11,
                 ulp_share_limit=0.001, max_finite=65504.0),
    "bf16": dict(small_value=2.0 ** -10, atol_benchmark=1e-16, atol_threshold=1e-16, rtol=2.0 ** -8,
                 eps=2.0 ** -8, min_eb=-126, mantissa=7, ulp_cut=1.0, minimum_err=2.0 ** -8,
                 ulp_share_limit=0.001, max_finite=3.3895313892515355e38),
    "fp32": dict(small_value=2.0 ** -20, atol_benchmark=2.0 ** -30, atol_threshold=2.0 ** -30, rtol=2.0 ** -20,
                 eps=float(np.finfo(np.float64).eps), min_eb=-126, mantissa=23, ulp_cut=32.0,
                 minimum_err=2.0 ** -14, ulp_share_limit=0.05, max_finite=float(np.finfo(np.float32).max)),
}
#: The benchmark standard's error limits on the ratios (level L0), and the ULP standard's fp32 mean limit.
BENCHMARK_LIMITS = {"small_value": 2.0, "rmse": 2.0, "max_rel": 10.0, "mean_rel": 2.0, "eb": 2.0}
FP32_MEAN_ULP_LIMIT = 64.0
#: The ratio standard's relative-error cuts: hundredth, thousandth, ten-thousandth.
RATIO_CUTS = (0.01, 0.001, 0.0001)

#: Per-group counts, in the compiled pass's order.
MSPROBE_COUNTS = ("ms_inf_nan", "ms_inf_nan_err", "ms_small", "ms_small_err_benchmark", "ms_small_err_threshold",
                  "ms_rel_over", "ms_greater", "ms_less", "ms_ulp_nan", "ms_ulp_over", "ms_abs_nan",
                  "ms_within_hundredth", "ms_within_thousandth", "ms_within_ten_thousandth")
#: Per-group sums: squared ``ae`` and ``rel`` over normal positions, the ulp errors that are not NaN.
MSPROBE_SUMS = ("ms_sum_sq", "ms_sum_rel", "ms_sum_ulp")
#: Per-group maxima (NaN when no point qualifies) -> a witness prefix (none is recorded).
MSPROBE_MAXIMA = {"msprobe_max_rel": "msprobe_max_rel_witness_", "msprobe_max_ulp": "msprobe_max_ulp_witness_",
                  "msprobe_max_abs": "msprobe_max_abs_witness_"}
#: The verdict columns of the four standards (``pass``, ``warning``, ``error``; ``not judged`` without a third
#: party).
MSPROBE_VERDICTS = ("ms_benchmark", "ms_ulp", "ms_absolute", "ms_ratio")
#: Columns :func:`msprobe_verdicts` adds to a standards table.
MSPROBE_COLUMNS = ("ms_benchmark", "ms_benchmark_failed", "ms_small_value_ratio", "ms_rmse_ratio", "ms_max_rel_ratio",
                   "ms_mean_rel_ratio", "ms_eb_ratio", "ms_ulp", "ms_mean_ulp", "ms_max_ulp", "ms_ulp_share",
                   "ms_ulp_share_ratio", "ms_ulp_over", "ms_ulp_nan", "ms_absolute", "ms_inf_nan_error_ratio",
                   "ms_rel_err_ratio", "ms_abs_err_ratio", "ms_ratio", "ms_hundredth", "ms_thousandth",
                   "ms_ten_thousandth", "ms_max_abs_err")


def msprobe_parameters(fmt) -> dict:
    """msprobe's constants for an output format (:data:`MSPROBE_PARAMETERS`; KeyError for fp64)."""
    return MSPROBE_PARAMETERS[get_format(fmt).name]


def msprobe_point_values(computed, bench, bench_cast, fmt) -> dict:
    """The per-element masks and values msprobe's standards pool (the reference the compiled pass is tested
    against): ``computed`` the outputs, ``bench`` the bench (float64), ``bench_cast`` the bench cast to the output
    format (as float64).  Keys: the masks of :data:`MSPROBE_COUNTS` and ``normal``, ``ae``, ``rel``, ``ulp``."""
    k = msprobe_parameters(fmt)
    c = np.asarray(computed, dtype=np.float64).ravel()
    b = np.asarray(bench, dtype=np.float64).ravel()
    bc = np.asarray(bench_cast, dtype=np.float64).ravel()
    finite = np.isfinite(c) & np.isfinite(bc)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        ae = np.abs(c - b)
        magnitude = np.abs(b)
        rel = ae / (magnitude + k["eps"])
        small = finite & (magnitude <= k["small_value"])
        normal = finite & ~small
        # the inf/NaN check: both clipped to the format's range, their difference in the format (overflowing)
        top = k["max_finite"]
        diff = np.abs(np.clip(c, -top, top) - np.clip(bc, -top, top))
        diff = np.where(diff >= overflow_bound(fmt), np.inf, diff)
        passes = (diff / (magnitude + k["eps"]) <= k["rtol"]) | (np.isnan(c) & np.isnan(bc))
        ulp = _ulp_error(c, b, get_format(fmt).name, k)
        return {"ms_inf_nan": ~finite, "ms_inf_nan_err": ~finite & ~passes, "ms_small": small,
                "ms_small_err_benchmark": small & (ae > k["atol_benchmark"]),
                "ms_small_err_threshold": small & (ae > k["atol_threshold"]), "ms_rel_over": normal & (rel > k["rtol"]),
                "ms_greater": c > bc, "ms_less": c < bc, "ms_ulp_nan": np.isnan(ulp), "ms_ulp_over": ulp > k["ulp_cut"],
                "ms_abs_nan": np.isnan(ae), **{name: rel < cut for name, cut in zip(MSPROBE_COUNTS[-3:], RATIO_CUTS)},
                "normal": normal, "ae": ae, "rel": rel, "ulp": ulp}


def bench_in_format(bench, fmt) -> np.ndarray:
    """msprobe's bench cast to the output format (round to nearest; +-inf beyond it), as float64."""
    with np.errstate(over="ignore"):
        return np.asarray(bench, dtype=np.float64).astype(get_format(fmt).dtype).astype(np.float64)


def overflow_bound(fmt) -> float:
    """The largest magnitude that rounds to a finite value of the format (round to nearest, ties to even)."""
    f = get_format(fmt)
    return float(2.0 ** f.emax * (2.0 - 2.0 ** -f.prec))


def _ulp_error(c, b, name: str, k: dict) -> np.ndarray:
    """msprobe's ulp error ``|(c - B) 2^(p - 1 - eb)|``, float64 for fp32, float32 (as float64) otherwise."""
    finite = np.isfinite(b)
    eb = np.where(b == 0, 0, np.frexp(np.where(finite, b, 0.0))[1] - 1)  # floor(log2|B|), exact
    scale = np.where(finite, np.ldexp(1.0, k["mantissa"] - np.maximum(eb, k["min_eb"])), np.nan)
    if name == "fp32":
        return np.abs((c - b) * scale)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.abs((c - b).astype(np.float32) * scale.astype(np.float32)).astype(np.float64)


def msprobe_columns(grouping, computed, bench, bench_cast, fmt) -> dict:
    """Mergeable per-group counts (:data:`MSPROBE_COUNTS`), sums (:data:`MSPROBE_SUMS`) and maxima
    (:data:`MSPROBE_MAXIMA`) per group of ``grouping`` (numpy)."""
    v = msprobe_point_values(computed, bench, bench_cast, fmt)
    normal, ae, rel, ulp = v["normal"], v["ae"], v["rel"], v["ulp"]
    out = dict(grouping.tally({name: v[name] for name in MSPROBE_COUNTS}))
    with np.errstate(over="ignore"):
        out["ms_sum_sq"] = grouping.sum(np.where(normal, ae * ae, 0.0))
    out["ms_sum_rel"] = grouping.sum(np.where(normal, rel, 0.0))
    out["ms_sum_ulp"] = grouping.sum(np.where(np.isnan(ulp), 0.0, ulp))
    for col, values, where in zip(MSPROBE_MAXIMA, (rel, ulp, ae), (normal, ~np.isnan(ulp), ~np.isnan(ae))):
        top, _ = grouping.argmax(np.where(where, values, -np.inf))
        out[col] = np.where(top == -np.inf, np.nan, top)
    return out


def msprobe_metrics(f: pd.DataFrame) -> pd.DataFrame:
    """msprobe's per-tensor metrics of pooled cells (rows with ``count``, ``format`` and the columns of
    :func:`msprobe_columns`): what its ``*Compare`` classes report for one output against its bench."""
    n = f["count"].to_numpy(np.float64)
    col = {name: f[name].to_numpy(np.float64) for name in (*MSPROBE_COUNTS, *MSPROBE_SUMS, *MSPROBE_MAXIMA)}
    small, inf_nan = col["ms_small"], col["ms_inf_nan"]
    normal = n - inf_nan - small
    with np.errstate(invalid="ignore", divide="ignore"):
        mse = col["ms_sum_sq"] / n
        out = {
            "small_value": np.where(small > 0, col["ms_small_err_benchmark"] / small, 0.0),
            "rmse": np.sqrt(mse * (n / (n - (inf_nan + small) + 0.0001) + 0.0001)),
            "max_rel": np.where(normal > 0, col["msprobe_max_rel"], 0.0),
            "mean_rel": np.where(normal > 0, col["ms_sum_rel"] / normal, 0.0),
            "eb": np.abs(col["ms_greater"] - col["ms_less"]) / n,
            "mean_ulp": np.where(col["ms_ulp_nan"] > 0, np.nan, col["ms_sum_ulp"] / n),
            "max_ulp": np.where(col["ms_ulp_nan"] > 0, np.nan, col["msprobe_max_ulp"]),
            "ulp_share": col["ms_ulp_over"] / n, "ulp_over": col["ms_ulp_over"], "ulp_nan": col["ms_ulp_nan"],
            "inf_nan_error_ratio": np.where(inf_nan > 0, col["ms_inf_nan_err"] / inf_nan, 0.0),
            "rel_err_ratio": np.where(normal > 0, col["ms_rel_over"] / normal, 0.0),
            "abs_err_ratio": np.where(small > 0, col["ms_small_err_threshold"] / small, 0.0),
            "hundredth": col["ms_within_hundredth"] / n, "thousandth": col["ms_within_thousandth"] / n,
            "ten_thousandth": col["ms_within_ten_thousandth"] / n,
            "max_abs": np.where(col["ms_abs_nan"] > 0, np.nan, col["msprobe_max_abs"]),
        }
    return pd.DataFrame(out, index=f.index)


def _ratio(x, y, minimum_err) -> tuple[np.ndarray, np.ndarray]:
    """(ratio, consistent): msprobe's ``calc_ratio`` |x| / max(|y|, minimum_err) where both are finite; where
    either is inf or NaN no ratio (NaN), consistent when both are the same infinity or both NaN."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    special = ~np.isfinite(x) | ~np.isfinite(y)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.abs(x) / np.maximum(np.abs(y), minimum_err)
    consistent = ~special | (np.isinf(x) & (x == y)) | (np.isnan(x) & np.isnan(y))
    return np.where(special, np.nan, r), consistent


def msprobe_verdicts(own: pd.DataFrame, third: pd.DataFrame, formats) -> pd.DataFrame:
    """:data:`MSPROBE_COLUMNS` of each row: ``own`` and ``third`` the :func:`msprobe_metrics` of the rows and of
    the third party on the same points (NaN rows where there is none: the benchmark and ULP standards then read
    ``not judged``); verdicts ``pass``, ``warning``, ``error`` as msprobe writes them; ``ms_benchmark_failed``
    names the benchmark metrics that fail (``rmse 1.5e+05 > 2``), empty where none."""
    formats = np.asarray(formats, dtype=object)
    min_err = np.asarray([msprobe_parameters(f)["minimum_err"] for f in formats], dtype=np.float64)
    fp32 = formats == "fp32"
    judged = third["small_value"].notna().to_numpy()
    out = {}
    error = np.zeros(len(own), dtype=bool)
    failed = [[] for _ in range(len(own))]
    for metric, column in (("small_value", "ms_small_value_ratio"), ("rmse", "ms_rmse_ratio"),
                           ("max_rel", "ms_max_rel_ratio"), ("mean_rel", "ms_mean_rel_ratio"), ("eb", "ms_eb_ratio")):
        r, consistent = _ratio(own[metric], third[metric], min_err)
        out[column] = np.where(judged, r, np.nan)
        if metric != "eb":  # (computed, shown, not judged: msprobe leaves it out of its status list)
            bad = judged & (~consistent | (r > BENCHMARK_LIMITS[metric]))
            error |= bad
            for i in np.flatnonzero(bad):
                failed[i].append(f"{metric} {r[i]:.4g} > {BENCHMARK_LIMITS[metric]:g}" if consistent[i]
                                 else f"{metric} inf/NaN on one side")
    out["ms_benchmark"] = np.where(judged, np.where(error, "error", "pass"), "not judged")
    out["ms_benchmark_failed"] = np.asarray(["; ".join(f) for f in failed], dtype=object)
    share_ratio, share_consistent = _ratio(own["ulp_share"], third["ulp_share"], min_err)
    _, mean_consistent = _ratio(own["mean_ulp"], third["mean_ulp"], min_err)
    mean, share = own["mean_ulp"].to_numpy(np.float64), own["ulp_share"].to_numpy(np.float64)
    share_limit = np.asarray([msprobe_parameters(f)["ulp_share_limit"] for f in formats], dtype=np.float64)
    passes = (fp32 & (mean < FP32_MEAN_ULP_LIMIT)) | (share < share_limit) | (share_ratio < 1.0)
    ulp_ok = passes & share_consistent & mean_consistent
    out["ms_ulp"] = np.where(judged, np.where(ulp_ok, "pass", "error"), "not judged")
    out["ms_mean_ulp"], out["ms_max_ulp"], out["ms_ulp_share"] = mean, own["max_ulp"].to_numpy(), share
    out["ms_ulp_share_ratio"] = np.where(judged, share_ratio, np.nan)
    out["ms_ulp_over"] = own["ulp_over"].to_numpy(np.int64)
    out["ms_ulp_nan"] = own["ulp_nan"].to_numpy(np.int64)
    ratios = [own[c].to_numpy(np.float64) for c in ("inf_nan_error_ratio", "rel_err_ratio", "abs_err_ratio")]
    out["ms_absolute"] = np.where(np.logical_and.reduce([r == 0 for r in ratios]), "pass", "error")
    out["ms_inf_nan_error_ratio"], out["ms_rel_err_ratio"], out["ms_abs_err_ratio"] = ratios
    h, t, tt = (own[c].to_numpy(np.float64) for c in ("hundredth", "thousandth", "ten_thousandth"))
    max_abs = own["max_abs"].to_numpy(np.float64)
    low = np.where(h > 1 - RATIO_CUTS[0], np.where(t > 1 - RATIO_CUTS[1], "pass", "warning"), "error")
    high = np.where(t > 1 - RATIO_CUTS[1], np.where(tt > 1 - RATIO_CUTS[2], "pass", "warning"), "error")
    out["ms_ratio"] = np.where(max_abs < 0.001, "pass", np.where(fp32, high, low))
    out["ms_hundredth"], out["ms_thousandth"], out["ms_ten_thousandth"], out["ms_max_abs_err"] = h, t, tt, max_abs
    return pd.DataFrame({c: out[c] for c in MSPROBE_COLUMNS}, index=own.index)
