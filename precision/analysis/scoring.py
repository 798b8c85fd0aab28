"""Scores of computed values against the exact gradient, and every statistic drawn from them.

Three layers, after numpy's ULP helpers: ordinals live in
:mod:`precision.exact.formats`; this module turns (computed, exact) pairs into
per-point scores (:func:`ulp_error`, :func:`bits_error`, :func:`classify`),
per-point scores into mergeable group statistics (:class:`GroupStats`) and
paired comparisons of two variants on the same points (:func:`compare_points`,
:class:`PairedStats`, :func:`verdicts`), adds the acceptance standards'
per-point metrics to the group statistics (:func:`relative_error`,
:func:`acceptance_columns`; judged by :mod:`precision.analysis.standards`), and offers
the test-only assertion :func:`assert_max_ulp`.  The sweep, the gate and the reports all use these;
no other module defines a max, a quantile, a class count or a paired count.

Conventions (every function):

* **Which ulp.** ``ulp(exact)`` in the *output* format: the quantum of the
  binade of the exact value, clamped below at the subnormal quantum.  The
  ulp error is ``|computed - exact| / ulp(exact)``, so a correctly rounded
  result has error <= 0.5, and a faithful one < 1.
* **Bits of error** (Herbie's measure): ``log2(1 + d)`` with ``d`` the
  ordinal distance from the computed value to the correctly rounded exact
  value; 0 exactly when correctly rounded.  Paired comparisons use the
  magnitude form ``log2(1 + ulp error)`` (:func:`error_bits`), which orders
  points exactly as their ulp errors do.
* **Zeros.** -0 and +0 are the same point (ordinal 0); a zero of the wrong
  sign is not an error in ulps.
* **Special classes** (:data:`CLASS_NAMES`, one per point, in this
  precedence): ``nan`` (computed NaN, correctly rounded value not NaN);
  ``wrong_sign`` (computed and correctly rounded values nonzero with
  opposite signs, infinities included); ``inf`` (computed +-inf, correctly
  rounded value finite); ``lost_inf`` (computed finite, correctly rounded
  value +-inf: the exact value overflows the format but the output does
  not); ``ok`` otherwise.  A computed inf of the sign of an overflowing
  exact value scores 0 ulp and is ``ok``.  Every special point ranks worse
  than any finite error; NaN, inf and lost_inf score inf ulps.
* **Subnormals and FTZ.** Subnormal outputs are scored like any other value,
  so a result flushed to zero is as many ulps off as the exact value holds
  subnormal quanta.
* **Quantiles** are upper bounds read from mergeable log histograms
  (:data:`HIST_SUBBINS` bins per octave: within 4.4 % of the exact order
  statistic); maxima are exact, with the first point attaining them as the
  witness.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from precision.io.frames import frame_from_arrays, frame_to_arrays
from precision.exact.formats import NAN_ORDINAL, get_format, round_to_format, to_ordinal, ulp

__all__ = [
    "CLASS_OK", "CLASS_NAN", "CLASS_INF", "CLASS_WRONG_SIGN", "CLASS_LOST_INF", "CLASS_NAMES",
    "SPECIAL_CLASSES", "ulp_error", "bits_error", "error_bits", "classify", "Scorer",
    "HIST_SUBBINS", "HIST_BINS", "histogram_bins", "bin_upper_edge", "quantile_upper_bound",
    "histogram_quantiles",
    "Grouping", "GroupStats", "STAT_SUMS", "STAT_COLUMNS",
    "GARBAGE_ULP", "SIGNIFICANCE", "VERDICTS", "VERDICT_RULE", "OUTCOME_NAMES", "FIX_QUALITIES",
    "outputs_changed", "compare_points", "PairedStats", "PAIR_SUMS", "CHANGED_QUALITIES", "changed_quality", "sign_test", "verdicts",
    "Summary", "summarize", "assert_max_ulp",
    "RELATIVE_FLOOR", "THRESHOLD_T", "BLIND_ULP", "ALLCLOSE_PRESETS", "ACCEPTANCE_MAXIMA", "relative_error",
    "allclose_tolerances", "acceptance_columns",
]

# ---------------------------------------------------------------------------
# Per-point scores
# ---------------------------------------------------------------------------

CLASS_OK, CLASS_NAN, CLASS_INF, CLASS_WRONG_SIGN, CLASS_LOST_INF = 0, 1, 2, 3, 4
#: int8 class code -> name, as written in score tables.
CLASS_NAMES = {CLASS_OK: "ok", CLASS_NAN: "nan", CLASS_INF: "inf", CLASS_WRONG_SIGN: "wrong_sign",
               CLASS_LOST_INF: "lost_inf"}
#: The special classes, in code order: one count column each in every table.
SPECIAL_CLASSES = ("nan", "inf", "wrong_sign", "lost_inf")


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
        (see :func:`precision.sigmoid_focal_loss_grad.oracle.exact_gradient`).
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
        one, and for any result but the right inf where it rounds to +-inf;
        see the module Notes for every convention.

    Examples
    --------
    >>> float(ulp_error(np.float32(1.0), 1.0 + 2.0**-24, "fp32"))
    0.5
    """
    fmt = get_format(fmt)
    hi, lo = _exact_parts(exact)
    if rounded is None:
        rounded = round_to_format(hi, fmt)
    with np.errstate(invalid="ignore"):
        return _ulp_error(computed, hi, lo, ulp(hi, fmt), np.asarray(rounded, dtype=np.float64))


def _ulp_error(computed, hi, lo, ulp_hi, r64) -> np.ndarray:
    """The ulp error given the exact side's pieces (see :func:`ulp_error`)."""
    c = np.asarray(computed, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs((c - hi) - lo) / ulp_hi
        special_exact = np.isinf(r64)
        err = np.where(special_exact, np.where(c == r64, 0.0, np.inf), err)
        return np.where(~np.isfinite(c) & ~special_exact, np.inf, err)


def bits_error(computed, rounded, fmt) -> np.ndarray:
    """Herbie's bits of error: log2(1 + ordinal distance to the correctly rounded value).

    A computed NaN (against a non-NaN correctly rounded value) scores the
    format's width in bits, the maximum.
    """
    fmt = get_format(fmt)
    return _bits_error(to_ordinal(np.asarray(computed, dtype=fmt.dtype), fmt),
                       to_ordinal(np.asarray(rounded, dtype=fmt.dtype), fmt), fmt)


def _bits_error(ordinal_computed, ordinal_rounded, fmt) -> np.ndarray:
    """Herbie's bits from the ordinals of the computed and correctly rounded values (see :func:`bits_error`)."""
    nan = (ordinal_computed == NAN_ORDINAL) | (ordinal_rounded == NAN_ORDINAL)
    d = np.where(nan, -1, np.abs(ordinal_computed - ordinal_rounded))
    bits = np.log2(1.0 + np.maximum(d, 0).astype(np.float64))
    return np.where(d < 0, float(fmt.width), np.minimum(bits, float(fmt.width)))


def error_bits(err_ulp) -> np.ndarray:
    """``log2(1 + ulp error)``: the error as bits, the unit of paired comparisons (inf stays inf)."""
    err = np.asarray(err_ulp, dtype=np.float64)
    return np.log2(1.0 + np.where(np.isnan(err), np.inf, err))


class Scorer:
    """:func:`ulp_error`, :func:`bits_error` and :func:`classify` of many computed arrays against one exact side.

    The exact side (the ulp of each exact value, the correctly rounded
    values and their ordinals) is computed once; :meth:`score` gives the
    three per-point scores of one computed array, equal to the three
    functions called on it (they share their cores).

    Parameters
    ----------
    exact : array_like or tuple of two array_like
        The exact values (float64 or a double-double ``(hi, lo)``).
    rounded : array_like
        The correctly rounded exact values in ``fmt``.
    fmt : str or Format
        The output format.
    """

    def __init__(self, exact, rounded, fmt):
        self.fmt = get_format(fmt)
        self.hi, self.lo = _exact_parts(exact)
        self.rounded = np.asarray(rounded, dtype=self.fmt.dtype)
        self.r64 = self.rounded.astype(np.float64)
        with np.errstate(invalid="ignore"):
            self.ulp = ulp(self.hi, self.fmt)
        self.r_ordinal = to_ordinal(self.rounded, self.fmt)

    def ulp_error(self, computed) -> np.ndarray:
        return _ulp_error(computed, self.hi, self.lo, self.ulp, self.r64)

    def bits_error(self, computed) -> np.ndarray:
        return _bits_error(to_ordinal(np.asarray(computed, dtype=self.fmt.dtype), self.fmt), self.r_ordinal, self.fmt)

    def classify(self, computed) -> np.ndarray:
        return classify(computed, self.r64)

    def score(self, computed) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ulp error, bits of error, class) of each computed value."""
        return self.ulp_error(computed), self.bits_error(computed), self.classify(computed)


def classify(computed, rounded) -> np.ndarray:
    """int8 special-class code per point (see :data:`CLASS_NAMES` and the module Notes).

    Examples
    --------
    >>> classify(np.float16([1.0, np.nan, np.inf, -2.0, np.inf, 65504.0]),
    ...          np.float16([1.0, 1.0, 3.0, 2.0, -np.inf, np.inf])).tolist()
    [0, 1, 2, 3, 3, 4]
    """
    c = np.asarray(computed, dtype=np.float64)
    r = np.asarray(rounded, dtype=np.float64)
    c, r = np.broadcast_arrays(c, r)
    out = np.full(c.shape, CLASS_OK, dtype=np.int8)
    r_num = ~np.isnan(r)
    out[np.isfinite(c) & np.isinf(r)] = CLASS_LOST_INF
    out[np.isinf(c) & np.isfinite(r)] = CLASS_INF
    both = ~np.isnan(c) & r_num & (c != 0) & (r != 0)
    out[both & (np.signbit(c) != np.signbit(r))] = CLASS_WRONG_SIGN
    out[np.isnan(c) & r_num] = CLASS_NAN
    return out


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
    """The q-quantiles of every group of a sparse histogram sorted by (key, bin).

    Vectorized :func:`quantile_upper_bound`: row k of the result holds group
    k's values (keys are 0 .. K-1; a group without counts gets NaN); ``edge``
    maps a bin to the value reported for it.
    """
    keys = np.asarray(keys, dtype=np.int64)
    K = int(keys.max()) + 1 if keys.size else 0
    totals = np.bincount(keys, counts, minlength=K)
    before = np.concatenate([[0], np.cumsum(totals)[:-1]])
    cum = np.cumsum(counts)
    out = np.empty((K, len(qs)))
    for j, q in enumerate(qs):
        rank = np.maximum(1, np.ceil(q * totals))
        idx = np.searchsorted(cum, before + rank, side="left")
        out[:, j] = edge(np.asarray(bins)[np.minimum(idx, len(bins) - 1)]) if len(bins) else np.nan
    out[totals == 0] = np.nan
    return out


# ---------------------------------------------------------------------------
# Acceptance standards' per-point metrics (Ascend's operator precision standards, allclose)
# ---------------------------------------------------------------------------

#: The floor in the relative error's denominator: ``r = |actual - golden| / (|golden| + 1e-7)``.
RELATIVE_FLOOR = 1e-7
#: The single-benchmark threshold T per output format: pass when MERE < T and MARE < 10 T.
THRESHOLD_T = {"fp16": 2.0 ** -10, "bf16": 2.0 ** -7, "fp32": 2.0 ** -13}
#: An output accepted element-wise (r <= 10 T) but over this many ulps wrong (or special) is ``blind``.
BLIND_ULP = 2.0 ** 10
#: allclose presets: name -> {format: (atol, rtol)}; passes when ``|a - g| <= atol + rtol |g|``.
#: ``dynamic_shape``: the operator's dynamic-shape example (every format); ``unit_test``: its kernel unit
#: test (fp16 and fp32 as the test; bf16, which it does not cover, takes the fp16 tolerances).
ALLCLOSE_PRESETS = {
    "dynamic_shape": {"fp16": (1e-3, 2e-3), "bf16": (1e-3, 2e-3), "fp32": (1e-3, 2e-3)},
    "unit_test": {"fp16": (2e-2, 2e-2), "bf16": (2e-2, 2e-2), "fp32": (8e-4, 2e-3)},
}
#: Maxima of the acceptance columns -> their witness prefix (see :func:`acceptance_columns`).
ACCEPTANCE_MAXIMA = {"mare": "mare_witness_", "blind_ulp": "blind_witness_", "false_alarm_r": "false_alarm_witness_"}


def relative_error(computed, golden) -> np.ndarray:
    """The standards' relative error ``|computed - golden| / (|golden| + 1e-7)`` (float64).

    ``golden`` is the exact value (float64); a NaN or infinite output scores
    inf (0 when it equals an infinite golden).
    """
    c = np.asarray(computed, dtype=np.float64)
    g = np.asarray(golden, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        r = np.abs(c - g) / (np.abs(g) + RELATIVE_FLOOR)
    return np.where(np.isfinite(c), r, np.where(c == g, 0.0, np.inf))


def allclose_tolerances(preset: str, fmt: str) -> tuple[float, float]:
    """(atol, rtol) of an allclose preset for an output format (KeyError naming the presets if unknown)."""
    if preset not in ALLCLOSE_PRESETS:
        raise KeyError(f"{preset!r} is not an allclose preset; expected one of {', '.join(ALLCLOSE_PRESETS)}")
    return ALLCLOSE_PRESETS[preset][get_format(fmt).name]


def acceptance_columns(grouping: "Grouping", computed, golden, err_ulp, fmt, witness=None) -> dict:
    """Mergeable per-group sums and maxima of the acceptance standards.

    Sums (``acc_*``): ``acc_sum_r`` (the relative errors, inf with any
    NaN/inf output), ``acc_sum_sq`` (squared absolute errors, for RMSE),
    ``acc_blind`` (r <= 10 T and the output special or over :data:`BLIND_ULP`
    ulps), ``acc_false_alarm`` (correctly rounded, <= 0.5 ulp, and r > 10 T)
    and ``acc_allclose_<preset>`` per :data:`ALLCLOSE_PRESETS`.  Maxima:
    ``mare`` (max r), ``blind_ulp`` (the largest ulp error among blind
    outputs, NaN when none), ``false_alarm_r`` (the largest r among false
    alarms); each with the witness columns ``<prefix><name>`` of
    :data:`ACCEPTANCE_MAXIMA` taken from ``witness`` (name -> per-point array).
    """
    fmt = get_format(fmt)
    c = np.asarray(computed, dtype=np.float64).ravel()
    g = np.asarray(golden, dtype=np.float64).ravel()
    err = np.asarray(err_ulp, dtype=np.float64).ravel()
    err = np.where(np.isnan(err), np.inf, err)
    r = relative_error(c, g)
    limit = 10 * THRESHOLD_T[fmt.name]
    blind = (r <= limit) & ~(err <= BLIND_ULP)
    false_alarm = (err <= 0.5) & (r > limit)
    with np.errstate(invalid="ignore", over="ignore"):
        sq = np.where(np.isfinite(c), (c - g) ** 2, np.inf)
        dist = np.abs(c - g)
    masks = {"acc_blind": blind, "acc_false_alarm": false_alarm}
    for name in ALLCLOSE_PRESETS:
        atol, rtol = allclose_tolerances(name, fmt.name)
        masks[f"acc_allclose_{name}"] = np.isfinite(c) & (dist <= atol + rtol * np.abs(g))
    tallied = grouping.tally(masks)
    out = {"acc_sum_r": grouping.sum(r), "acc_sum_sq": grouping.sum(sq), **tallied}
    for (col, prefix), values, where in zip(ACCEPTANCE_MAXIMA.items(), (r, err, r), (None, blind, false_alarm)):
        if where is None:
            top, at = grouping.argmax(values)
        elif where.any():
            top, at = grouping.argmax(np.where(where, values, -np.inf))
        else:  # no point qualifies (the usual case): no maximum, no witness, without a pass over the groups
            top, at = np.full(grouping.ids.size, -np.inf), np.zeros(grouping.ids.size, dtype=np.int64)
        none = top == -np.inf
        out[col] = np.where(none, np.nan, top)
        for name, v in (witness or {}).items():
            out[f"{prefix}{name}"] = _blank(np.asarray(v).ravel()[at], none)
    return out


# ---------------------------------------------------------------------------
# Groups of points
# ---------------------------------------------------------------------------

class Grouping:
    """Points sorted by group id once, shared by every reduction over the same points.

    Parameters
    ----------
    group : array_like of int
        Group id (0 .. n_groups - 1) of each point.
    n_groups : int

    Attributes
    ----------
    ids : numpy.ndarray of int64
        The ids of the nonempty groups, ascending (the rows of a reduction).
    counts : numpy.ndarray of int64
        Points per nonempty group.
    perm : numpy.ndarray
        Stable sort of the points by group (element order within a group).
    starts : numpy.ndarray
        Offset of each nonempty group in ``perm``.
    """

    def __init__(self, group, n_groups: int):
        self.group = np.asarray(group, dtype=np.int64).ravel()
        self.n_groups = int(n_groups)
        counts = np.bincount(self.group, minlength=self.n_groups)
        self.ids = np.flatnonzero(counts)
        self.counts = counts[self.ids]
        self.perm = np.argsort(self.group, kind="stable")
        self.starts = np.concatenate([[0], np.cumsum(self.counts)[:-1]]).astype(np.int64)

    def sum(self, values) -> np.ndarray:
        """Per nonempty group: the sum of ``values`` (float64)."""
        return np.bincount(self.group, np.asarray(values, dtype=np.float64).ravel(), self.n_groups)[self.ids]

    def count(self, mask) -> np.ndarray:
        """Per nonempty group: how many points have ``mask`` true (int64)."""
        return np.bincount(self.group, np.asarray(mask).ravel(), self.n_groups)[self.ids].astype(np.int64)

    def tally(self, masks: dict, codes: dict | None = None) -> dict:
        """Several counts per nonempty group in few passes over the points.

        ``masks``: name -> boolean array (count where true); ``codes``: name
        -> (small int array, {value: count name}) (count each value).  The
        masks and codes are packed into integers per point, as many fields
        per pass as keep the :func:`numpy.bincount` table (groups x bit
        patterns) within a few times the number of points; equal to
        :meth:`count` of each.
        """
        fields = [(name, np.asarray(mask).ravel(), 1, {1: name}) for name, mask in masks.items()]
        fields += [(name, np.asarray(values).ravel(), max(1, int(max(names)).bit_length()), names)
                   for name, (values, names) in (codes or {}).items()]
        limit = max(4 * self.group.size, 1 << 12)
        out, batch, shift = {}, [], 0
        for field in fields:
            width = field[2]
            if batch and (self.n_groups << (shift + width)) > limit:
                out.update(self._tally_packed(batch, shift))
                batch, shift = [], 0
            batch.append(field)
            shift += width
        if batch:
            out.update(self._tally_packed(batch, shift))
        return out

    def _tally_packed(self, fields: list, shift: int) -> dict:
        """The counts of ``fields`` (name, values, bit width, {value: count name}) in one bincount."""
        packed = np.zeros(self.group.size, dtype=np.int64)
        starts, start = [], 0
        for _, values, width, _ in fields:
            packed |= values.astype(np.int64) << start
            starts.append(start)
            start += width
        table = np.bincount(self.group << shift | packed, minlength=self.n_groups << shift)
        table = table.reshape(self.n_groups, 1 << shift)[self.ids]
        patterns = np.arange(1 << shift)
        out = {}
        for (_, _, width, names), start in zip(fields, starts):
            field = (patterns >> start) & ((1 << width) - 1)
            for value, name in names.items():
                out[name] = table[:, field == value].sum(axis=1).astype(np.int64)
        return out

    def top_k(self, values, k: int) -> np.ndarray:
        """Indices of the ``k`` largest ``values`` (NaN largest) of each group, ties to the first, ascending."""
        v = np.asarray(values, dtype=np.float64).ravel()
        v = np.where(np.isnan(v), np.inf, v)
        keep = []
        for start, n in zip(self.starts, self.counts):
            members = self.perm[start:start + n]  # element order within the group
            if n <= k:
                keep.append(members)
                continue
            kth = -np.partition(-v[members], k - 1)[k - 1]  # the k-th largest value
            above = members[v[members] > kth]
            at = members[v[members] == kth][:k - above.size]  # ties: the first in element order
            keep.append(np.concatenate([above, at]))
        return np.sort(np.concatenate(keep)) if keep else np.empty(0, dtype=np.int64)

    def argmax(self, values) -> tuple[np.ndarray, np.ndarray]:
        """Per nonempty group: the max of ``values`` (NaN = -inf) and the index of its first point."""
        v = np.asarray(values, dtype=np.float64).ravel()
        if v.size == 0:
            return np.empty(0), np.empty(0, dtype=np.int64)
        grouped = np.where(np.isnan(v), -np.inf, v)[self.perm]
        top = np.maximum.reduceat(grouped, self.starts)
        at = np.where(grouped == np.repeat(top, self.counts), np.arange(grouped.size), grouped.size)
        return top, self.perm[np.minimum.reduceat(at, self.starts)]

    def histogram(self, bins, n_bins: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sparse histogram per group: (row of the nonempty group, bin, count), sorted."""
        row_of = np.full(self.n_groups, -1, dtype=np.int64)
        row_of[self.ids] = np.arange(self.ids.size)
        keys = row_of[self.group] * n_bins + np.asarray(bins, dtype=np.int64).ravel()
        if keys.size * 8 < self.ids.size * n_bins:  # few points per bin range: sort them
            keys, counts = np.unique(keys, return_counts=True)
        else:  # many points: count densely
            dense = np.bincount(keys, minlength=self.ids.size * n_bins)
            keys = np.flatnonzero(dense)
            counts = dense[keys]
        return keys // n_bins, keys % n_bins, counts.astype(np.int64)


#: Up to this many (coarse group, bin) cells a merged histogram is counted densely, else by sorting; and only
#: while the cells are at most _DENSE_PER_ENTRY times its entries (a table of mostly empty cells costs more
#: to clear and scan than sorting the entries).
_DENSE_CELLS = 1 << 24
_DENSE_PER_ENTRY = 4


def _reorder_sparse(key, rows, bins, counts):
    """A sparse histogram sorted by (row, bin) with its rows renamed by the permutation ``key``: the blocks of
    rows move, their bins stay in order."""
    key = np.asarray(key, dtype=np.int64)
    rows = np.asarray(rows, dtype=np.int64)
    new = key[rows]
    order = np.argsort(new, kind="stable")  # stable: each block keeps its bins' order
    return new[order], np.asarray(bins)[order], np.asarray(counts, dtype=np.int64)[order]


def _merge_sparse(key, rows, bins, counts, n_bins: int):
    """Re-key a sparse histogram: its rows mapped by ``key`` (row -> coarse group), counts summed, sorted."""
    key = np.asarray(key, dtype=np.int64)
    codes = key[np.asarray(rows, dtype=np.int64)] * n_bins + np.asarray(bins)
    weights = np.asarray(counts, dtype=np.int64)
    cells = (int(key.max()) + 1 if key.size else 0) * n_bins
    if cells <= min(_DENSE_CELLS, _DENSE_PER_ENTRY * codes.size):
        dense = np.bincount(codes, weights, minlength=cells)
        merged = np.flatnonzero(dense)
        total = dense[merged]
    else:
        merged, inverse = np.unique(codes, return_inverse=True)
        total = np.bincount(inverse.ravel(), weights=weights, minlength=merged.size)
    return merged // n_bins, merged % n_bins, total.astype(np.int64)


def _blank(values: np.ndarray, none: np.ndarray) -> np.ndarray:
    """``values`` with the entries where ``none`` is true blanked (NaN, or None for text)."""
    if not none.any():
        return values
    out = values.astype(np.float64 if values.dtype.kind in "fiu" else object)
    out[none] = np.nan if out.dtype.kind == "f" else None
    return out


class _Mergeable:
    """Statistics of groups as a frame of sums and maxima plus a sparse histogram, merged by key columns.

    Subclasses name their summed columns (``SUMS``), their maxima and the
    column prefix of each maximum's witness (``MAXIMA``: a witness column is
    copied from the first row attaining the maximum), and their histogram's
    bin count (``BINS``).  ``frame`` has one row per group; ``hist`` has
    columns ``row`` (index of the frame row), ``bin`` and ``count``.
    """

    SUMS: tuple = ()
    SUM_PREFIXES: tuple = ()  # further summed columns, by name prefix
    MAXIMA: dict = {}
    BINS: int = 0

    def _sums(self) -> list:
        """The summed columns present: :attr:`SUMS` and the columns named with a :attr:`SUM_PREFIXES` prefix."""
        return [c for c in self.frame.columns if c in self.SUMS or c.startswith(self.SUM_PREFIXES or ("\0",))]

    def _value_column(self, column: str) -> bool:
        """A statistic's column (a sum, a maximum or a witness), not a key."""
        witnesses = tuple(self.MAXIMA.values())
        return column in self._sums() or column in self.MAXIMA or column.startswith(witnesses)

    def __init__(self, frame: pd.DataFrame, hist: pd.DataFrame):
        self.frame = frame.reset_index(drop=True)
        self.hist = hist.reset_index(drop=True)

    def __len__(self) -> int:
        return len(self.frame)

    @classmethod
    def concat(cls, parts) -> "_Mergeable":
        """One set of groups from several (their frames stacked, histogram rows re-indexed)."""
        parts = list(parts)
        frames, hists, offset = [], [], 0
        for p in parts:
            frames.append(p.frame)
            hists.append(p.hist.assign(row=p.hist["row"].to_numpy() + offset))
            offset += len(p.frame)
        if not parts:
            return cls(pd.DataFrame(), pd.DataFrame({"row": [], "bin": [], "count": []}))
        return cls(pd.concat(frames, ignore_index=True), pd.concat(hists, ignore_index=True))

    def select(self, mask) -> "_Mergeable":
        """The groups where ``mask`` (one bool per row) holds, with their histograms."""
        mask = np.asarray(mask, dtype=bool)
        new_row = np.cumsum(mask) - 1
        rows = self.hist["row"].to_numpy()
        keep = mask[rows] if rows.size else np.zeros(0, dtype=bool)
        hist = pd.DataFrame({"row": new_row[rows[keep]], "bin": self.hist["bin"].to_numpy()[keep],
                             "count": self.hist["count"].to_numpy()[keep]})
        return type(self)(self.frame[mask], hist)

    def with_columns(self, **columns) -> "_Mergeable":
        """The same groups with key columns added (scalars or one value per group)."""
        return type(self)(self.frame.assign(**columns), self.hist)

    def merge(self, by) -> "_Mergeable":
        """Groups merged by the key columns ``by`` (sorted by them; NaN keys are keys).

        Sums add, maxima take the max with the witness of their first row
        attaining it (in row order), histograms add.
        """
        by = list(by)
        f = self.frame
        key = f.groupby(by, sort=True, dropna=False).ngroup().to_numpy()
        n = int(key.max()) + 1 if key.size else 0
        order = np.argsort(key, kind="stable")
        starts = np.searchsorted(key[order], np.arange(n))
        out = f.iloc[order[starts]][by].reset_index(drop=True)
        for col in self._sums():
            out[col] = np.bincount(key, f[col].to_numpy(np.float64), n)
            if np.issubdtype(f[col].dtype, np.integer):
                out[col] = out[col].astype(np.int64)
        for col, prefix in self.MAXIMA.items():
            if col not in f.columns:  # optional maxima (the acceptance columns) absent from these groups
                continue
            v = f[col].to_numpy(np.float64)
            v = np.where(np.isnan(v), -np.inf, v)
            pick = np.lexsort((np.arange(v.size), -v, key))  # per key: largest first, then row order
            first = pick[np.searchsorted(key[pick], np.arange(n))]
            out[col] = f[col].to_numpy()[first]
            none = np.isnan(out[col].to_numpy(np.float64))  # no point attained a maximum: no witness
            for wcol in (c for c in f.columns if c.startswith(prefix)):
                out[wcol] = _blank(f[wcol].to_numpy()[first], none)
        if n == len(f):  # one row per key: the merge reorders rows, their histograms move with them
            rows, bins, counts = _reorder_sparse(key, self.hist["row"], self.hist["bin"], self.hist["count"])
        else:
            rows, bins, counts = _merge_sparse(key, self.hist["row"], self.hist["bin"], self.hist["count"],
                                               self.BINS)
        return type(self)(out, pd.DataFrame({"row": rows, "bin": bins, "count": counts}))

    def to_arrays(self, prefix: str) -> dict:
        """npz-storable arrays under ``prefix`` (:func:`precision.io.frames.frame_to_arrays`; the histogram as
        one int64 matrix)."""
        out = frame_to_arrays(self.frame, prefix)
        out[f"{prefix}.hist"] = np.stack([self.hist[c].to_numpy(np.int64) for c in ("row", "bin", "count")])
        return out

    @classmethod
    def from_arrays(cls, arrays, prefix: str) -> "_Mergeable":
        """The inverse of :meth:`to_arrays`."""
        row, bins, count = arrays[f"{prefix}.hist"]
        return cls(frame_from_arrays(arrays, prefix), pd.DataFrame({"row": row, "bin": bins, "count": count}))


#: Summed columns of :class:`GroupStats`: points, points with a finite error and the sum of
#: their errors, Herbie bits, correctly rounded points, points over 1 ulp (specials included),
#: and one count per special class.
STAT_SUMS = ("count", "n_finite", "sum_ulp", "sum_bits", "n_correct", "over_1ulp") + SPECIAL_CLASSES
#: Columns of :meth:`GroupStats.table` after the key columns (witness columns follow their maximum).
STAT_COLUMNS = ("count", "max_ulp", "max_finite_ulp", "mean_ulp", "p50_ulp", "p99_ulp", "p999_ulp", "mean_bits",
                "share_correct", "over_1ulp") + SPECIAL_CLASSES


class GroupStats(_Mergeable):
    """Mergeable error statistics of groups of points (one row per group).

    Columns of ``frame``: the key columns, then :data:`STAT_SUMS`,
    ``max_ulp`` (over every point; inf when one is NaN/inf) with its witness
    columns ``witness_*``, and ``max_finite_ulp`` (over points with a finite
    error; NaN when none) with ``finite_witness_*``.  ``hist`` holds each
    group's ulp-error histogram (:func:`histogram_bins`).  :meth:`table`
    turns the sums into the reported statistics.
    """

    SUMS = STAT_SUMS
    # counts of guard decisions (precision.engine.task.DECISIONS); the acceptance sums (acceptance_columns)
    SUM_PREFIXES = ("fired_", "acc_")
    MAXIMA = {"max_ulp": "witness_", "max_finite_ulp": "finite_witness_", **ACCEPTANCE_MAXIMA}
    BINS = HIST_BINS

    @classmethod
    def reduce(cls, grouping: Grouping, err_ulp, err_bits, classes, witness=None, counts=None,
               acceptance=None) -> "GroupStats":
        """Statistics of each nonempty group of ``grouping`` from per-point scores.

        Parameters
        ----------
        grouping : Grouping
        err_ulp, err_bits, classes : array_like, one entry per point
            From :func:`ulp_error`, :func:`bits_error`, :func:`classify`.
        witness : dict of str to array_like, optional
            Per-point values recorded for the witness of each maximum, as
            ``witness_<name>`` and ``finite_witness_<name>``.
        counts : dict of str to array_like of bool, optional
            Further per-group counts, named with a :attr:`SUM_PREFIXES`
            prefix (``fired_g5``: where a guard's decision held).
        acceptance : tuple (computed, golden, fmt), optional
            Adds the acceptance standards' columns (:func:`acceptance_columns`,
            witnesses from ``witness``).

        Returns
        -------
        GroupStats
            Key column ``group`` (the group id).
        """
        columns, hist = cls._reduce_columns(grouping, err_ulp, err_bits, classes, witness, counts, acceptance)
        return cls(pd.DataFrame(columns), pd.DataFrame(dict(zip(("row", "bin", "count"), hist))))

    @classmethod
    def reduce_to_arrays(cls, grouping: Grouping, err_ulp, err_bits, classes, prefix: str, witness=None,
                         counts=None, acceptance=None) -> dict:
        """:meth:`reduce` straight to :meth:`to_arrays`'s arrays under ``prefix`` (no frame built)."""
        columns, hist = cls._reduce_columns(grouping, err_ulp, err_bits, classes, witness, counts, acceptance)
        return {**frame_to_arrays(columns, prefix), f"{prefix}.hist": np.stack(hist).astype(np.int64)}

    @staticmethod
    def _reduce_columns(grouping: Grouping, err_ulp, err_bits, classes, witness, counts,
                        acceptance=None) -> tuple[dict, tuple]:
        """The columns of :meth:`reduce` as a dict of arrays, and its sparse histogram (rows, bins, counts)."""
        err = np.asarray(err_ulp, dtype=np.float64).ravel()
        cls_ = np.asarray(classes).ravel()
        finite = np.isfinite(err)
        top, at = grouping.argmax(np.where(np.isnan(err), np.inf, err))
        ftop, fat = grouping.argmax(np.where(finite, err, -np.inf))
        tallied = grouping.tally({"n_finite": finite, "n_correct": np.asarray(err_bits).ravel() == 0,
                                  "over_1ulp": ~(err <= 1.0), **(counts or {})},
                                 {"class": (cls_, {c: n for c, n in CLASS_NAMES.items() if c != CLASS_OK})})
        frame = {"group": grouping.ids, "count": grouping.counts.astype(np.int64), "n_finite": tallied["n_finite"],
                 "sum_ulp": grouping.sum(np.where(finite, err, 0.0)), "sum_bits": grouping.sum(err_bits),
                 "n_correct": tallied["n_correct"], "over_1ulp": tallied["over_1ulp"],
                 **{name: tallied[name] for name in SPECIAL_CLASSES}}
        frame["max_ulp"] = top
        frame["max_finite_ulp"] = np.where(ftop == -np.inf, np.nan, ftop)
        for name, values in (witness or {}).items():
            v = np.asarray(values).ravel()
            frame[f"witness_{name}"] = v[at]
            frame[f"finite_witness_{name}"] = _blank(v[fat], ftop == -np.inf)
        frame.update({name: tallied[name] for name in (counts or {})})
        if acceptance is not None:
            computed, golden, fmt = acceptance
            frame.update(acceptance_columns(grouping, computed, golden, err, fmt, witness))
        return frame, grouping.histogram(histogram_bins(err), HIST_BINS)

    def table(self, keys=None) -> pd.DataFrame:
        """The reported statistics per group: the key columns, :data:`STAT_COLUMNS`, the witnesses.

        ``mean_ulp`` is over points with a finite error (a descriptive
        figure: it never decides a comparison); ``p50_ulp``, ``p99_ulp``,
        ``p999_ulp`` are histogram upper bounds (module Notes);
        ``share_correct`` is the share correctly rounded.
        """
        f = self.frame
        keys = [c for c in (keys if keys is not None else f.columns) if not self._value_column(c)]
        out = f[keys].copy()
        q = histogram_quantiles(self.hist["row"].to_numpy(), self.hist["bin"].to_numpy(),
                                self.hist["count"].to_numpy(), (0.5, 0.99, 0.999))
        q = np.vstack([q, np.full((len(f) - len(q), 3), np.nan)]) if len(q) < len(f) else q
        with np.errstate(invalid="ignore", divide="ignore"):
            derived = {"mean_ulp": f["sum_ulp"] / f["n_finite"], "mean_bits": f["sum_bits"] / f["count"],
                       "share_correct": f["n_correct"] / f["count"], "p50_ulp": q[:, 0], "p99_ulp": q[:, 1],
                       "p999_ulp": q[:, 2]}
        for col in STAT_COLUMNS:
            out[col] = derived[col] if col in derived else f[col].to_numpy()
        for col in (c for c in f.columns if c.startswith("fired_")):
            out[col] = f[col].to_numpy()
        for col in (c for c in f.columns if c.startswith(("witness_", "finite_witness_"))):
            out[col] = f[col].to_numpy()
        return out


# ---------------------------------------------------------------------------
# Paired comparisons: two variants on the same points
# ---------------------------------------------------------------------------

#: A changed point that is special or over this many ulps both with and without is ``both_garbage``.
GARBAGE_ULP = 2.0 ** 20
#: Level of the two-sided exact sign tests behind a verdict.
SIGNIFICANCE = 0.01
#: Per-point outcome of a comparison (int8 codes of :func:`compare_points`).
OUTCOME_NAMES = {0: "unchanged", 1: "better", 2: "worse", 3: "tied", 4: "both_garbage"}
_UNCHANGED, _BETTER, _WORSE, _TIED, _GARBAGE = 0, 1, 2, 3, 4
#: Quality of the new value of a special output made finite (codes 1..4 of :func:`compare_points`); a
#: special made finite but still over :data:`GARBAGE_ULP` is ``both_garbage``, not a fix.
FIX_QUALITIES = {1: "fixed_correct", 2: "fixed_le_1ulp", 3: "fixed_le_2p10", 4: "fixed_le_2p20"}
_FIX_EDGES = (1.0, 2.0 ** 10)
#: Resolution of the change-in-bits histogram (bins per bit) and its finite range (+-bits).
DELTA_RES, DELTA_MAX = 64, 256
_DELTA_FINITE = 2 * DELTA_RES * DELTA_MAX + 1
#: Bin 0: -inf (a special caused); 1 .. _DELTA_FINITE: round(delta * DELTA_RES); last: +inf (a special fixed).
DELTA_BINS = _DELTA_FINITE + 2
#: Summed columns of :class:`PairedStats`.
PAIR_SUMS = ("count", "changed", "better", "worse", "tied", "both_garbage", "finite_better", "finite_worse",
             "specials_caused") + tuple(FIX_QUALITIES.values())
#: The verdict words, from the rule :data:`VERDICT_RULE`.
VERDICTS = ("no_effect", "helps", "hurts", "mixed", "inconclusive")
VERDICT_RULE = (
    "Each changed output (its bits differ, NaN payloads aside) is compared point by point in bits of error, "
    "log2(1 + ulp error), every special outcome (NaN, inf, wrong sign, lost inf) ranking worse than any finite "
    f"error: better, worse or tied; changed points that are special or over 2^20 ulp both with and without are "
    f"both_garbage and count for neither side. Verdict: no_effect when no output changes; otherwise two-sided exact "
    f"sign tests at level {SIGNIFICANCE:g}, one on the specials (fixed against caused) and one on the finite "
    f"outputs (better against worse): mixed when they are significant in opposite directions, helps (hurts) when "
    f"significant in one direction only, or, when neither alone is, when all better against all worse is; "
    f"inconclusive otherwise (no significant difference, or changes only on both_garbage points). Means over "
    f"different point sets never decide a verdict.")


def outputs_changed(a, b) -> np.ndarray:
    """Where two outputs differ: their bits differ, NaN payloads aside (the ``changed`` of every comparison).

    ``a`` and ``b`` are arrays of one float dtype (the output format's, or float64 holding its values).

    >>> outputs_changed(np.float32([1.0, 0.0, np.nan]), np.float32([1.0, -0.0, -np.nan])).tolist()
    [False, True, False]
    """
    a, b = np.asarray(a), np.asarray(b)
    u = np.dtype(f"u{a.dtype.itemsize}")
    return (a.view(u) != b.view(u)) & ~(np.isnan(a) & np.isnan(b))


def compare_points(err_with, cls_with, err_without, cls_without, changed):
    """Outcome of each point of a paired comparison ("with" against "without").

    Parameters
    ----------
    err_with, err_without : array_like of float64
        ulp errors (:func:`ulp_error`) of the two variants at the same points.
    cls_with, cls_without : array_like of int8
        Their classes (:func:`classify`).
    changed : array_like of bool
        Output bits differ (NaN against NaN is unchanged).

    Returns
    -------
    outcome : numpy.ndarray of int8
        :data:`OUTCOME_NAMES` codes: a special ranks worse than any finite
        error; a point that is special or over :data:`GARBAGE_ULP` on both
        sides is ``both_garbage`` (no evidence either way, as
        :data:`VERDICT_RULE` says).
    fix : numpy.ndarray of int8
        0, or the :data:`FIX_QUALITIES` code of a special made finite
        (correctly rounded = error <= 0.5 ulp).
    delta_bits : numpy.ndarray of float64
        ``error_bits(without) - error_bits(with)`` on better/worse/tied
        points (+inf: special fixed, -inf: special caused; positive = with is
        better), NaN elsewhere.
    """
    ew, eo = np.asarray(err_with, np.float64).ravel(), np.asarray(err_without, np.float64).ravel()
    sw = np.asarray(cls_with).ravel() != CLASS_OK
    so = np.asarray(cls_without).ravel() != CLASS_OK
    ch = np.asarray(changed, dtype=bool).ravel()
    with np.errstate(invalid="ignore"):
        bw, bo = error_bits(ew), error_bits(eo)
        gain = bo - bw
    finite_both = ~sw & ~so
    garbage = ch & (sw | (ew > GARBAGE_ULP)) & (so | (eo > GARBAGE_ULP))
    evidence = ch & ~garbage
    delta = np.full(ew.shape, np.nan)
    delta[evidence & finite_both] = gain[evidence & finite_both]
    delta[evidence & so & ~sw] = np.inf
    delta[evidence & sw & ~so] = -np.inf
    outcome = np.zeros(ew.shape, dtype=np.int8)
    outcome[evidence & (delta > 0)] = _BETTER
    outcome[evidence & (delta < 0)] = _WORSE
    outcome[evidence & (delta == 0)] = _TIED
    outcome[garbage] = _GARBAGE
    fix = np.zeros(ew.shape, dtype=np.int8)
    fixed = evidence & so & ~sw
    fix[fixed] = 2 + np.searchsorted(np.asarray(_FIX_EDGES), ew[fixed], side="left")
    fix[fixed & (ew <= 0.5)] = 1
    return outcome, fix, delta


def _delta_bins(delta) -> np.ndarray:
    d = np.asarray(delta, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        idx = 1 + DELTA_RES * DELTA_MAX + np.clip(np.rint(np.nan_to_num(d, posinf=0, neginf=0) * DELTA_RES),
                                                   -DELTA_RES * DELTA_MAX, DELTA_RES * DELTA_MAX)
    idx = np.where(d == np.inf, DELTA_BINS - 1, np.where(d == -np.inf, 0, idx))
    return idx.astype(np.int64)


def _delta_value(index) -> np.ndarray:
    i = np.asarray(index, dtype=np.float64)
    v = (i - 1 - DELTA_RES * DELTA_MAX) / DELTA_RES
    return np.where(i == 0, -np.inf, np.where(i == DELTA_BINS - 1, np.inf, v))


def sign_test(better, worse) -> np.ndarray:
    """Two-sided exact sign test: P(a split at least as uneven as better : worse | fair coin).

    Vectorized; 1 when there is no evidence (better + worse = 0).

    Examples
    --------
    >>> sign_test([3, 10, 0], [0, 0, 0]).round(4).tolist()
    [0.25, 0.002, 1.0]
    """
    from scipy.special import bdtr  # scipy.special loads in about 0.15 s: only for the commands that test

    b = np.asarray(better, dtype=np.int64)
    w = np.asarray(worse, dtype=np.int64)
    n = b + w
    with np.errstate(invalid="ignore"):
        p = np.minimum(1.0, 2.0 * bdtr(np.minimum(b, w), n, 0.5))
    return np.where(n == 0, 1.0, p)


def verdicts(table: pd.DataFrame) -> np.ndarray:
    """The verdict word of each row of a :meth:`PairedStats.table` (rule: :data:`VERDICT_RULE`)."""
    t = table
    fixed = t["specials_fixed"].to_numpy(np.float64)
    caused = t["specials_caused"].to_numpy(np.float64)
    fb, fw = t["finite_better"].to_numpy(np.float64), t["finite_worse"].to_numpy(np.float64)

    def direction(a, b, p):
        return np.where(p < SIGNIFICANCE, np.sign(a - b), 0.0)
    ds = direction(fixed, caused, t["p_specials"].to_numpy())
    df = direction(fb, fw, t["p_finite"].to_numpy())
    dall = direction(t["better"].to_numpy(np.float64), t["worse"].to_numpy(np.float64), t["p_value"].to_numpy())
    d = np.where((ds != 0) | (df != 0), ds + df, dall)
    out = np.where(d > 0, "helps", np.where(d < 0, "hurts", "inconclusive")).astype(object)
    out[(ds * df) < 0] = "mixed"
    out[t["changed"].to_numpy() == 0] = "no_effect"
    return out


class PairedStats(_Mergeable):
    """Mergeable paired comparisons of two variants on the same points (one row per group).

    Columns of ``frame``: the key columns, :data:`PAIR_SUMS`,
    ``max_gain_bits`` / ``max_loss_bits`` (the largest improvement / loss in
    bits of error over changed points finite on both sides and not
    garbage; NaN when none) with witnesses ``gain_witness_*`` /
    ``loss_witness_*``.  ``hist`` holds the change in bits over the
    evidence points (better, worse, tied) at 1/:data:`DELTA_RES` bit.
    """

    SUMS = PAIR_SUMS
    SUM_PREFIXES = ("changed_",)  # the quality of changed outputs (:data:`CHANGED_QUALITIES`)
    MAXIMA = {"max_gain_bits": "gain_witness_", "max_loss_bits": "loss_witness_"}
    BINS = DELTA_BINS

    @classmethod
    def reduce(cls, grouping: Grouping, outcome, fix, delta_bits, changed, witness=None) -> "PairedStats":
        """Paired counts of each nonempty group from :func:`compare_points`'s per-point outcomes (every point)."""
        at = np.flatnonzero(np.asarray(changed, dtype=bool).ravel())
        columns, hist = cls._changed_columns(grouping, at, np.asarray(outcome).ravel()[at],
                                             np.asarray(fix).ravel()[at],
                                             np.asarray(delta_bits, dtype=np.float64).ravel()[at], witness)
        return cls(pd.DataFrame(columns), pd.DataFrame(dict(zip(("row", "bin", "count"), hist))))

    @classmethod
    def compare(cls, grouping: Grouping, err_with, cls_with, err_without, cls_without, changed,
                witness=None) -> "PairedStats":
        """Paired counts of each nonempty group straight from two variants' scores on the same points.

        The same as :func:`compare_points` then :meth:`reduce`, computed on
        the changed points only (most outputs of a guard pair do not change).
        """
        columns, hist = cls._compare_columns(grouping, err_with, cls_with, err_without, cls_without, changed, witness)
        return cls(pd.DataFrame(columns), pd.DataFrame(dict(zip(("row", "bin", "count"), hist))))

    @classmethod
    def compare_to_arrays(cls, grouping: Grouping, err_with, cls_with, err_without, cls_without, changed,
                          prefix: str, witness=None) -> dict:
        """:meth:`compare` straight to :meth:`to_arrays`'s arrays under ``prefix`` (no frame built)."""
        columns, hist = cls._compare_columns(grouping, err_with, cls_with, err_without, cls_without, changed, witness)
        return {**frame_to_arrays(columns, prefix), f"{prefix}.hist": np.stack(hist).astype(np.int64)}

    @classmethod
    def _compare_columns(cls, grouping, err_with, cls_with, err_without, cls_without, changed, witness):
        at = np.flatnonzero(np.asarray(changed, dtype=bool).ravel())
        ew, cw = np.asarray(err_with).ravel()[at], np.asarray(cls_with).ravel()[at]
        eo, co = np.asarray(err_without).ravel()[at], np.asarray(cls_without).ravel()[at]
        outcome, fix, delta = compare_points(ew, cw, eo, co, np.ones(at.size, dtype=bool))
        return cls._changed_columns(grouping, at, outcome, fix, delta, witness, changed_quality(ew, cw, eo, co))

    @staticmethod
    def _changed_columns(grouping: Grouping, at, o, fx, d, witness, quality=None) -> tuple[dict, tuple]:
        """The columns of :meth:`reduce` (a dict of arrays) and its sparse histogram (rows, bins, counts), from
        the changed points ``at`` (indices), their outcomes and (optional) :func:`changed_quality` masks."""
        n = grouping.ids.size
        zeros = np.zeros(n, dtype=np.int64)
        frame = {"group": grouping.ids, "count": grouping.counts.astype(np.int64)}
        finite_d = np.isfinite(d)
        sub = Grouping(grouping.group[at], grouping.n_groups)
        rows = np.searchsorted(grouping.ids, sub.ids)  # rows of `sub` -> rows of this reduction
        tallied = sub.tally({"finite_better": finite_d & (d > 0), "finite_worse": finite_d & (d < 0),
                             "specials_caused": d == -np.inf},
                            {"outcome": (o, {_BETTER: "better", _WORSE: "worse", _TIED: "tied",
                                             _GARBAGE: "both_garbage"}),
                             "fix": (fx, dict(FIX_QUALITIES))})
        if quality is not None:
            tallied.update(sub.tally(quality))
        counts = {"changed": sub.counts.astype(np.int64), **tallied}
        for name in ("changed", "better", "worse", "tied", "both_garbage", "finite_better", "finite_worse",
                     "specials_caused", *FIX_QUALITIES.values(), *(quality or {})):
            full = zeros.copy()
            full[rows] = counts[name]
            frame[name] = full
        gain, at_gain = sub.argmax(np.where(finite_d & (d > 0), d, -np.inf))
        loss, at_loss = sub.argmax(np.where(finite_d & (d < 0), -d, -np.inf))
        for name, value in (("max_gain_bits", gain), ("max_loss_bits", loss)):
            full = np.full(n, np.nan)
            full[rows] = np.where(value == -np.inf, np.nan, value)
            frame[name] = full
        for name, values in (witness or {}).items():
            v = np.asarray(values).ravel()
            for prefix, idx, top in (("gain_witness_", at_gain, gain), ("loss_witness_", at_loss, loss)):
                full = np.full(n, np.nan) if v.dtype.kind in "fiu" else np.full(n, None, dtype=object)
                full[rows] = _blank(v[at[idx]], top == -np.inf) if idx.size else full[rows]
                frame[f"{prefix}{name}"] = full
        ev = ~np.isnan(d)
        hist_rows, bins, hist_counts = (np.empty(0, np.int64),) * 3
        if ev.any():
            evs = Grouping(sub.group[ev], grouping.n_groups)
            hist_rows, bins, hist_counts = evs.histogram(_delta_bins(d[ev]), DELTA_BINS)
            hist_rows = np.searchsorted(grouping.ids, evs.ids)[hist_rows]
        return frame, (hist_rows, bins, hist_counts)

    def table(self, keys=None) -> pd.DataFrame:
        """The reported comparison per group: keys, counts, tests, change in bits, verdict.

        Adds ``specials_fixed`` (the sum of the fix qualities),
        ``p_value`` (sign test on better vs worse), ``p_specials`` (fixed vs
        caused), ``p_finite`` (finite better vs worse),
        ``median_change_bits`` (over better/worse/tied points, at
        1/:data:`DELTA_RES` bit; positive = with is better) and ``verdict``.
        """
        f = self.frame
        keys = [c for c in (keys if keys is not None else f.columns) if not self._value_column(c)]
        out = f[keys].copy()
        for col in ("count", "changed", "better", "worse", "tied", "both_garbage"):
            out[col] = f[col].to_numpy()
        out["specials_fixed"] = sum(f[c].to_numpy() for c in FIX_QUALITIES.values())
        out["specials_caused"] = f["specials_caused"].to_numpy()
        for col in FIX_QUALITIES.values():
            out[col] = f[col].to_numpy()
        out["finite_better"] = f["finite_better"].to_numpy()
        out["finite_worse"] = f["finite_worse"].to_numpy()
        out["p_value"] = sign_test(out["better"], out["worse"])
        out["p_specials"] = sign_test(out["specials_fixed"], out["specials_caused"])
        out["p_finite"] = sign_test(out["finite_better"], out["finite_worse"])
        med = histogram_quantiles(self.hist["row"].to_numpy(), self.hist["bin"].to_numpy(),
                                  self.hist["count"].to_numpy(), (0.5,), edge=_delta_value)
        med = np.concatenate([med[:, 0], np.full(len(f) - len(med), np.nan)])
        out["median_change_bits"] = med
        out["max_gain_bits"] = f["max_gain_bits"].to_numpy()
        out["max_loss_bits"] = f["max_loss_bits"].to_numpy()
        for name, side in (("median_gain_bits", 1.0), ("median_loss_bits", -1.0)):
            out[name] = self._median_of_side(side, len(f))
        for col in (c for c in f.columns if c.startswith(self.SUM_PREFIXES)):
            out[col] = f[col].to_numpy()
        for col in (c for c in f.columns if c.startswith(("gain_witness_", "loss_witness_"))):
            out[col] = f[col].to_numpy()
        out["verdict"] = verdicts(out)
        return out

    def _median_of_side(self, side: float, n: int) -> np.ndarray:
        """Per row, the median gain (side +1, over finite better outputs) or loss (side -1, over finite worse
        outputs) in bits, positive, at 1/:data:`DELTA_RES` bit; NaN where there is none."""
        h = self.hist
        values = _delta_value(h["bin"].to_numpy())
        keep = np.isfinite(values) & (values * side > 0)
        med = histogram_quantiles(h["row"].to_numpy()[keep], h["bin"].to_numpy()[keep], h["count"].to_numpy()[keep],
                                  (0.5,), edge=_delta_value)
        out = np.full(n, np.nan)
        out[:len(med)] = np.abs(med[:, 0])
        return out


#: Per changed output, the quality of the "with" side: became correctly rounded (error <= 0.5 ulp, the
#: "without" side was not), became within 1 ulp (likewise), still garbage (special or over 2^20 ulp).
CHANGED_QUALITIES = ("changed_became_correct", "changed_became_le_1ulp", "changed_still_garbage")


def changed_quality(err_with, cls_with, err_without, cls_without) -> dict:
    """The :data:`CHANGED_QUALITIES` masks of changed outputs from both sides' ulp errors and classes."""
    ew, eo = np.asarray(err_with, np.float64), np.asarray(err_without, np.float64)
    sw, so = np.asarray(cls_with) != CLASS_OK, np.asarray(cls_without) != CLASS_OK
    with np.errstate(invalid="ignore"):
        return {"changed_became_correct": ~sw & (ew <= 0.5) & ~(~so & (eo <= 0.5)),
                "changed_became_le_1ulp": ~sw & (ew <= 1.0) & ~(~so & (eo <= 1.0)),
                "changed_still_garbage": sw | (ew > GARBAGE_ULP)}


# ---------------------------------------------------------------------------
# One set of points, and the test helper
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Summary:
    """Statistics of one set of scores (a :class:`GroupStats` of one group).

    ``max_ulp`` is over every point (inf when any result is special) and
    ``witness`` the index of its first point (-1 when empty);
    ``max_finite_ulp`` and ``mean_ulp`` are over points with a finite error;
    ``p50_ulp``, ``p99_ulp``, ``p999_ulp`` are histogram upper bounds;
    ``mean_bits`` is Herbie's average bits of error; ``share_correct`` the
    share correctly rounded; ``count_over_1ulp`` counts errors above 1 ulp
    (specials included); ``classes`` the count of each special class.
    """

    count: int
    max_ulp: float
    witness: int
    max_finite_ulp: float
    mean_ulp: float
    p50_ulp: float
    p99_ulp: float
    p999_ulp: float
    mean_bits: float
    share_correct: float
    count_over_1ulp: int
    classes: dict

    @property
    def count_nan(self) -> int:
        return self.classes["nan"]


def summarize(err_ulp, err_bits, classes) -> Summary:
    """Summarize per-point scores (arrays of equal length) with :class:`GroupStats`."""
    err = np.asarray(err_ulp, dtype=np.float64).ravel()
    if err.size == 0:
        nan = float("nan")
        return Summary(0, nan, -1, nan, nan, nan, nan, nan, nan, nan, 0, {c: 0 for c in SPECIAL_CLASSES})
    g = GroupStats.reduce(Grouping(np.zeros(err.size, dtype=np.int64), 1), err, err_bits, classes,
                          witness={"index": np.arange(err.size)})
    row = g.table().iloc[0]
    return Summary(int(row["count"]), float(row["max_ulp"]), int(row["witness_index"]),
                   float(row["max_finite_ulp"]), float(row["mean_ulp"]), float(row["p50_ulp"]),
                   float(row["p99_ulp"]), float(row["p999_ulp"]), float(row["mean_bits"]),
                   float(row["share_correct"]), int(row["over_1ulp"]), {c: int(row[c]) for c in SPECIAL_CLASSES})


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
