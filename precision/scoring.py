"""Scores of computed values against the exact gradient.

Three layers, after numpy's ULP helpers: ordinals live in
:mod:`precision.formats`; this module turns (computed, exact) pairs into
errors (:func:`ulp_error`, :func:`bits_error`, :func:`classify`), errors into
summaries (:func:`summarize`), and offers the test-only assertion
:func:`assert_max_ulp`.

Conventions (every function):

* **Which ulp.** ``ulp(exact)`` in the *output* format: the quantum of the
  binade of the exact value, clamped below at the subnormal quantum.  The
  ulp error is ``|computed - exact| / ulp(exact)``, so a correctly rounded
  result has error <= 0.5, and a faithful one < 1.
* **Bits of error** (Herbie's measure): ``log2(1 + d)`` with ``d`` the
  ordinal distance from the computed value to the correctly rounded exact
  value; 0 exactly when correctly rounded.
* **Zeros.** -0 and +0 are the same point (ordinal 0); a zero of the wrong
  sign is not an error in ulps.
* **Specials.** If the correctly rounded value is +-inf (the exact value
  overflows the format), a computed inf of that sign scores 0 and anything
  else scores inf ulps.  A computed NaN or inf where the correctly rounded
  value is finite scores inf ulps and the format's width in bits, and is
  classified (see :data:`CLASS_NAMES`).
* **Subnormals and FTZ.** Subnormal outputs are scored like any other value,
  so a result flushed to zero is as many ulps off as the exact value holds
  subnormal quanta.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from precision.formats import get_format, ordinal_distance, round_to_format, ulp

__all__ = [
    "CLASS_OK",
    "CLASS_NAN",
    "CLASS_INF",
    "CLASS_WRONG_SIGN",
    "CLASS_NAMES",
    "ulp_error",
    "bits_error",
    "classify",
    "Summary",
    "summarize",
    "assert_max_ulp",
    "HIST_BINS",
    "histogram_bins",
    "bin_upper_edge",
    "quantile_upper_bound",
]

CLASS_OK, CLASS_NAN, CLASS_INF, CLASS_WRONG_SIGN = 0, 1, 2, 3
#: int8 class code -> name, as written in score tables.
CLASS_NAMES = {CLASS_OK: "ok", CLASS_NAN: "nan", CLASS_INF: "inf", CLASS_WRONG_SIGN: "wrong_sign"}


def _exact_parts(exact):
    """(hi, lo) float64 arrays from a float array or a (hi, lo) pair."""
    if isinstance(exact, tuple):
        hi, lo = exact[0], exact[1]
        return np.asarray(hi, dtype=np.float64), np.asarray(lo, dtype=np.float64)
    hi = np.asarray(exact, dtype=np.float64)
    return hi, np.zeros_like(hi)


def ulp_error(computed, exact, fmt, rounded=None) -> np.ndarray:
    """ulp error ``|computed - exact| / ulp(exact)`` in the output format.

    Parameters
    ----------
    computed : array_like
        Values of the output format (any float dtype holding them exactly).
    exact : array_like or tuple of two array_like
        The exact values, as float64 or as a double-double ``(hi, lo)``
        (see :func:`precision.oracle.exact_gradient`).
    fmt : str or Format
        The output format whose ulp is meant.
    rounded : array_like, optional
        The correctly rounded exact values; needed only to score the case of
        an exact value that overflows the format (computed of the same inf
        then scores 0).  Default None: derived from ``hi``.

    Returns
    -------
    numpy.ndarray of float64
        inf for NaN or inf results where the exact value rounds to a finite
        one; see the module Notes for every convention.

    Examples
    --------
    >>> float(ulp_error(np.float32(1.0), 1.0 + 2.0**-24, "fp32"))
    0.5
    """
    fmt = get_format(fmt)
    hi, lo = _exact_parts(exact)
    c = np.asarray(computed, dtype=np.float64)
    if rounded is None:
        rounded = round_to_format(hi, fmt)
    r = np.asarray(rounded, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs((c - hi) - lo) / ulp(hi, fmt)
        special_exact = np.isinf(r)
        err = np.where(special_exact, np.where(c == r, 0.0, np.inf), err)
        err = np.where(~np.isfinite(c) & ~special_exact, np.inf, err)
    return err


def bits_error(computed, rounded, fmt) -> np.ndarray:
    """Herbie's bits of error: log2(1 + ordinal distance to the correctly rounded value).

    A computed NaN (against a non-NaN correctly rounded value) scores the
    format's width in bits, the maximum.
    """
    fmt = get_format(fmt)
    d = ordinal_distance(np.asarray(computed, dtype=fmt.dtype), np.asarray(rounded, dtype=fmt.dtype), fmt)
    bits = np.log2(1.0 + np.maximum(d, 0).astype(np.float64))
    return np.where(d < 0, float(fmt.width), np.minimum(bits, float(fmt.width)))


def classify(computed, rounded) -> np.ndarray:
    """int8 special-class code per point (see :data:`CLASS_NAMES`).

    ``nan``: the correctly rounded value is not NaN but the computed one is;
    ``inf``: computed +-inf where the correctly rounded value is finite;
    ``wrong_sign``: both nonzero and finite with opposite signs;
    ``ok`` otherwise.
    """
    c = np.asarray(computed, dtype=np.float64)
    r = np.asarray(rounded, dtype=np.float64)
    out = np.full(np.broadcast(c, r).shape, CLASS_OK, dtype=np.int8)
    out[np.isnan(c) & ~np.isnan(r)] = CLASS_NAN
    out[np.isinf(c) & np.isfinite(r)] = CLASS_INF
    both = np.isfinite(c) & np.isfinite(r) & (c != 0) & (r != 0)
    out[both & (np.signbit(c) != np.signbit(r))] = CLASS_WRONG_SIGN
    return out


@dataclass(frozen=True)
class Summary:
    """Aggregate of one set of scores.

    ``max_ulp`` is over every point (inf when any result is special);
    ``mean_ulp``, ``p50_ulp``, ``p99_ulp``, ``p999_ulp`` are over the points
    with a finite error; ``mean_bits`` is Herbie's average bits of error;
    ``share_correct`` the share of points whose computed value equals the
    correctly rounded one (ordinal distance 0); ``count_over_1ulp`` counts
    errors above 1 ulp (specials included); ``witness`` is the index of the
    first point attaining ``max_ulp`` (-1 when empty).
    """

    count: int
    max_ulp: float
    witness: int
    mean_ulp: float
    p50_ulp: float
    p99_ulp: float
    p999_ulp: float
    mean_bits: float
    share_correct: float
    count_over_1ulp: int
    count_nan: int
    count_inf: int
    count_wrong_sign: int


def summarize(err_ulp, err_bits, classes) -> Summary:
    """Summarize per-point scores (arrays of equal length)."""
    err = np.asarray(err_ulp, dtype=np.float64).ravel()
    bits = np.asarray(err_bits, dtype=np.float64).ravel()
    cls = np.asarray(classes).ravel()
    n = err.size
    if n == 0:
        nan = float("nan")
        return Summary(0, nan, -1, nan, nan, nan, nan, nan, nan, 0, 0, 0, 0)
    finite = err[np.isfinite(err)]
    witness = int(np.argmax(np.where(np.isnan(err), np.inf, err)))
    q = np.quantile(finite, [0.5, 0.99, 0.999]) if finite.size else [np.nan] * 3
    return Summary(
        count=n,
        max_ulp=float(np.max(np.where(np.isnan(err), np.inf, err))),
        witness=witness,
        mean_ulp=float(finite.mean()) if finite.size else float("nan"),
        p50_ulp=float(q[0]),
        p99_ulp=float(q[1]),
        p999_ulp=float(q[2]),
        mean_bits=float(bits.mean()),
        share_correct=float(np.mean(bits == 0.0)),
        count_over_1ulp=int(np.sum(~(err <= 1.0))),
        count_nan=int(np.sum(cls == CLASS_NAN)),
        count_inf=int(np.sum(cls == CLASS_INF)),
        count_wrong_sign=int(np.sum(cls == CLASS_WRONG_SIGN)),
    )


def assert_max_ulp(computed, exact, fmt, max_ulp: float = 1.0) -> np.ndarray:
    """Assert every ulp error is at most ``max_ulp``; return the errors (test helper)."""
    __tracebackhide__ = True
    err = ulp_error(computed, exact, fmt)
    if not np.all(err <= max_ulp):
        worst = int(np.argmax(np.where(np.isnan(err), np.inf, err)))
        c = np.asarray(computed, dtype=np.float64).ravel()[worst]
        raise AssertionError(
            f"values are not within {max_ulp:g} ulp in {get_format(fmt).name} "
            f"(max error is {err.ravel()[worst]:g} ulp at index {worst}: got {float(c).hex()})"
        )
    return err


# ---------------------------------------------------------------------------
# Mergeable histograms of ulp errors (for quantiles over merged groups)
# ---------------------------------------------------------------------------

#: Sub-bins per octave: a quantile read from the histogram is an upper bound
#: within a factor 2**(1/16) (4.4 %) of the exact quantile.
HIST_SUBBINS = 16
#: Octaves covered: errors from 2**HIST_MIN_EXP to 2**HIST_MAX_EXP ulps (all of float64's range).
HIST_MIN_EXP, HIST_MAX_EXP = -40, 1100
_REGULAR = (HIST_MAX_EXP - HIST_MIN_EXP) * HIST_SUBBINS
#: Bin 0 holds exact zeros, bin 1 errors below 2**HIST_MIN_EXP, bins 2 .. 1 + _REGULAR
#: the octave sub-bins, then one bin for errors beyond 2**HIST_MAX_EXP and one for inf/NaN.
HIST_BINS = 4 + _REGULAR


def histogram_bins(err_ulp) -> np.ndarray:
    """Bin index (int32) of each ulp error; see :data:`HIST_BINS`."""
    err = np.asarray(err_ulp, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        pos = np.floor((np.log2(err) - HIST_MIN_EXP) * HIST_SUBBINS)
        idx = 2 + np.clip(pos, -1, _REGULAR)
    idx = np.where(err == 0, 0, idx)
    idx = np.where(~np.isfinite(err), HIST_BINS - 1, idx)
    return idx.astype(np.int32)


def bin_upper_edge(index) -> np.ndarray:
    """Upper edge (ulps) of each histogram bin: every error in the bin is <= it."""
    i = np.asarray(index, dtype=np.float64)
    with np.errstate(over="ignore"):
        edge = np.exp2(HIST_MIN_EXP + (i - 1) / HIST_SUBBINS)
    edge = np.where(i == 0, 0.0, edge)
    return np.where(i >= HIST_BINS - 2, np.inf, edge)


def quantile_upper_bound(bins, counts, q: float) -> float:
    """An upper bound of the q-quantile of errors given as a sparse histogram.

    ``bins`` (ascending, unique) and ``counts`` list the nonempty bins.  The
    quantile is the order statistic of rank ceil(q * n); the bound is the
    upper edge of the bin holding it.
    """
    counts = np.asarray(counts)
    n = int(counts.sum())
    if n == 0:
        return float("nan")
    rank = max(1, int(np.ceil(q * n)))
    k = int(np.searchsorted(np.cumsum(counts), rank))
    return float(bin_upper_edge(np.asarray(bins)[k]))
