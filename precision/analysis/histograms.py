"""Mergeable log histograms of ulp errors: quantiles over merged groups as upper bounds.

:data:`HIST_SUBBINS` bins per octave (within 4.4 % of the exact order
statistic); conventions in :mod:`precision.analysis.scoring`.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "HIST_SUBBINS", "HIST_BINS", "histogram_bins", "bin_upper_edge", "quantile_upper_bound",
    "histogram_quantiles",
]

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


def histogram_quantiles(keys, bins, counts, qs, edge=bin_upper_edge) -> np.ndarray:
    """The q-quantiles of every group of a sparse histogram grouped by key (each key's entries contiguous, in
    ascending bin order; the keys' blocks in any order).

    Vectorized :func:`quantile_upper_bound`: row k of the result holds group
    k's values (keys are 0 .. K-1; a group without counts gets NaN); ``edge``
    maps a bin to the value reported for it.  (The numpy definition:
    :func:`precision.analysis.groups.histogram_quantiles` finds the same entries
    in one compiled pass on large histograms.)
    """
    keys = np.asarray(keys, dtype=np.int64)
    K = int(keys.max()) + 1 if keys.size else 0
    cum = np.cumsum(np.asarray(counts, dtype=np.int64))  # (numpy sums int32 into int64 five times slower)
    starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]])) if keys.size else np.empty(0, np.int64)
    before = np.zeros(K)  # the counts ahead of each key's block, and in it (exact integers)
    before[keys[starts]] = cum[starts] - np.asarray(counts)[starts]
    totals = np.zeros(K)
    totals[keys[starts]] = cum[np.append(starts[1:], keys.size) - 1] - before[keys[starts]] if keys.size else 0
    out = np.empty((K, len(qs)))
    for j, q in enumerate(qs):
        rank = np.maximum(1, np.ceil(q * totals))
        idx = np.searchsorted(cum, before + rank, side="left")
        out[:, j] = edge(np.asarray(bins)[np.minimum(idx, len(bins) - 1)]) if len(bins) else np.nan
    out[totals == 0] = np.nan
    return out
