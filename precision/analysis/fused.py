"""The sweep's scores and statistics in compiled passes over the points (numba, cached beside this file).

:meth:`precision.analysis.groups.GroupStats.reduce` needs, per group, a dozen
counts, four sums and five maxima with the first point attaining each, over
every point of a tensor (a task of ``fp16_exhaustive`` holds 127,000).  Written
as numpy reductions that is some sixty passes over the points, each a gather
into group order; :func:`reduce_error_groups` makes one.  So do
:func:`score_points` (the per-point scores of
:class:`precision.analysis.scoring.Scorer`: the ulp error, the ordinal
distance behind the bits of error, the special class), :func:`top_k_groups`
(the worst points of each group), :func:`compare_groups` (the paired counts of
:class:`precision.analysis.paired.PairedStats`) and :func:`merge_histogram`
(the histogram merges of a run's tables).  Arrays of fewer than
:data:`precision.analysis.scoring.COMPILED_MIN_POINTS` points keep to the numpy
definitions; :func:`load` loads every pass (each process that runs them loads them itself: a worker
forked after its parent loaded a pass can run it ten times slower, ``benchmarks/fork.py``).

Each computes exactly what the numpy definitions compute (the scores of
:mod:`precision.analysis.scoring`;
:meth:`~precision.analysis.groups.GroupStats._reduce_columns_reference`, with
:func:`precision.analysis.acceptance.acceptance_columns` and
:func:`precision.analysis.histograms.histogram_bins`; :func:`reduce_msprobe_groups`, with
:func:`precision.analysis.msprobe.msprobe_columns`;
:meth:`~precision.analysis.groups.Grouping.top_k_reference`;
:meth:`~precision.analysis.paired.PairedStats._compare_columns_reference`;
``precision.analysis.groups._merge_sparse_reference``), bit for bit, and
the tests check it on adversarial points (NaN, infinities, signed zeros, ties):

* **sums** add in element order from +0.0, as ``np.bincount`` does (float
  addition is not associative: any other order may differ in the last bit);
* **maxima** treat NaN as -inf unless said otherwise, and their witness is the
  first point of the group, in element order, attaining the maximum (the
  group's first point when every value is -inf);
* **the per-point metrics** are IEEE basic operations only (``+ - * /``,
  ``abs``, comparisons), evaluated in the definitions' order and without
  contraction into fused multiply-adds, so each equals numpy's (numba's
  ``error_model="numpy"``: a division by zero gives inf or NaN, as numpy's
  does, not an exception);
  the two logarithms (of the ordinal distance, for the bits of error, and of
  the ulp error, for the histogram bin) stay with numpy, whose SIMD ``log2``
  a compiled one need not match: the passes take or give their arguments.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from precision.analysis.histograms import HIST_BINS, HIST_MIN_EXP, HIST_SUBBINS
from precision.machine.compiled import frozen as _frozen

__all__ = ["COUNTS", "SUMS", "MAXIMA", "PAIR_COUNTS", "score_points", "reduce_error_groups", "top_k_groups",
           "compare_groups", "merge_histogram", "quantile_entries", "reduce_msprobe_groups", "load"]


def _index_points(order, starts, sizes, n: int) -> bool:
    """The groups (``order``, ``starts``, ``sizes``) index points 0 .. n-1 (some or all of them) and fit in
    ``order``: what the passes, which index unchecked, need."""
    return order.size <= n and (not order.size or (0 <= int(order.min()) and int(order.max()) < n)) and \
        (not starts.size or int((starts + sizes).max()) <= order.size)


_NAN_ORDINAL = np.iinfo(np.int64).min  # (precision.exact.formats.NAN_ORDINAL)
# the special-class codes (precision.analysis.scoring.CLASS_NAMES)
_OK, _NAN, _INF, _WRONG_SIGN, _LOST_INF = 0, 1, 2, 3, 4

#: The counted columns of :func:`reduce_error_groups`, in its output order (then one per decision mask, then the
#: acceptance counts :data:`precision.analysis.acceptance.ACCEPTANCE_COUNTS` and one per allclose tolerance).
COUNTS = ("n_finite", "n_correct", "over_1ulp", "nan", "inf", "wrong_sign", "lost_inf")
#: Its summed columns, in its output order (the last two with the acceptance standards only).
SUMS = ("sum_ulp", "sum_bits", "acc_sum_r", "acc_sum_sq")
#: Its maxima, in its output order (the last three with the acceptance standards only): the ulp error (NaN as
#: inf), the finite ulp error, the relative error r, the ulp error of blind outputs, r of false alarms.
MAXIMA = ("max_ulp", "max_finite_ulp", "mare", "blind_ulp", "false_alarm_r")


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _ordinal(raw, sign_bit, is_nan):
    """The sign-magnitude ordinal of a value's bits (precision.exact.formats.to_ordinal)."""
    if is_nan:
        return _NAN_ORDINAL
    magnitude = np.int64(raw & (sign_bit - 1))
    return -magnitude if raw & sign_bit else magnitude


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _score(computed, raw, hi, lo, ulp_hi, rounded, rounded_ordinal, sign_bit, err, distance, nan_pair, cls):
    inf = np.inf
    for i in range(computed.size):
        c, r = computed[i], rounded[i]
        c_finite, c_nan, r_nan = np.isfinite(c), np.isnan(c), np.isnan(r)
        special_exact = np.isinf(r)
        # ulp error: |(c - hi) - lo| / ulp(hi); an overflowing exact value scores 0 for its inf, else inf
        e = abs((c - hi[i]) - lo[i]) / ulp_hi[i]
        if special_exact:
            e = 0.0 if c == r else inf
        if not c_finite and not special_exact:
            e = inf
        err[i] = e
        # the ordinal distance d to the correctly rounded value (-1 with a NaN), as 1 + max(d, 0)
        oc, orr = _ordinal(np.uint64(raw[i]), sign_bit, c_nan), rounded_ordinal[i]
        pair = oc == _NAN_ORDINAL or orr == _NAN_ORDINAL
        nan_pair[i] = pair
        distance[i] = 1.0 + (0.0 if pair else float(abs(oc - orr)))
        # the special class, in the precedence of precision.analysis.scoring.classify
        k = _OK
        if c_finite and np.isinf(r):
            k = _LOST_INF
        if np.isinf(c) and np.isfinite(r):
            k = _INF
        if not c_nan and not r_nan and c != 0 and r != 0 and (np.signbit(c) != np.signbit(r)):
            k = _WRONG_SIGN
        if c_nan and not r_nan:
            k = _NAN
        cls[i] = k


def score_points(computed, raw, hi, lo, ulp_hi, rounded, rounded_ordinal, width: int) -> tuple:
    """Per point: the ulp error, the argument ``1 + max(d, 0)`` of the bits of error's log2 with ``d`` the
    ordinal distance to the correctly rounded value, where that distance is undefined (a NaN on either side),
    and the special class.

    ``computed`` (float64) and ``raw`` (its bits in the output format, unsigned) are the outputs; ``hi``,
    ``lo``, ``ulp_hi``, ``rounded`` (float64) and ``rounded_ordinal`` (int64) the exact side; ``width`` the
    format's bits.  All one-dimensional, one entry per point.  Returns (err float64, distance float64,
    nan_pair bool, cls int8).
    """
    computed, hi, lo, ulp_hi, rounded = (_frozen(a, np.float64) for a in (computed, hi, lo, ulp_hi, rounded))
    raw, rounded_ordinal = _frozen(raw), _frozen(rounded_ordinal, np.int64)
    n = computed.size
    err, distance = np.empty(n), np.empty(n)
    nan_pair, cls = np.empty(n, dtype=np.bool_), np.empty(n, dtype=np.int8)
    _score(computed, raw, hi, lo, ulp_hi, rounded, rounded_ordinal, np.uint64(1) << np.uint64(width - 1), err,
           distance, nan_pair, cls)
    return err, distance, nan_pair, cls


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _fold_max(top, at, value, i):
    """A running maximum and its first point after point i's ``value`` (strictly larger wins: the first
    attaining stays; the group's first point starts it, even at -inf)."""
    if at < 0 or value > top:
        return value, i
    return top, at


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _bin(e, log2_e, min_exp, subbins, regular, n_bins):
    """The histogram bin of ulp error e (precision.analysis.histograms.histogram_bins), from its log2; without a
    branch (zero errors come and go from point to point)."""
    v = np.floor((log2_e - min_exp) * subbins)
    v = v if v >= -1.0 else -1.0  # (and NaN, whose bin is the last)
    v = v if v <= regular else regular
    b = np.int64(2.0 + v)
    b = 0 if e == 0 else b
    return b if np.isfinite(e) else n_bins - 1


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _reduce(order, starts, sizes, err, bits, cls, log2_err, min_exp, subbins, regular, n_bins, decisions, computed,
            golden, limit, blind_ulp, floor, atol, rtol, acceptance):
    n_rows, n_decisions, n_close = sizes.size, decisions.shape[0], atol.size
    bins = np.empty(err.size, dtype=np.int64)  # (of the grouped points: every point, or those of a few groups)
    for j in range(order.size):
        i = order[j]
        bins[i] = _bin(err[i], log2_err[i], min_exp, subbins, regular, n_bins)
    # the histogram counted densely over the bins that occur (numbered in bin order: a few hundred of them)
    rank = np.zeros(n_bins, dtype=np.int64)
    for j in range(order.size):
        rank[bins[order[j]]] = 1
    used = np.flatnonzero(rank)
    rank[used] = np.arange(used.size)
    hist = np.zeros((n_rows, used.size), dtype=np.int64)
    base = 7 + n_decisions  # the acceptance counts' first column
    counts = np.zeros((n_rows, base + 5 + n_close), dtype=np.int64)
    sums = np.zeros((n_rows, 4))
    top = np.full((n_rows, 5), -np.inf)
    at = np.full((n_rows, 5), -1, dtype=np.int64)
    inf = np.inf
    by_class = np.zeros(5, dtype=np.int64)
    for row in range(n_rows):
        # one group's points in element order, its figures in registers (sums in that order, as np.bincount's);
        # counts add 0 or 1 without a branch (which it is varies from point to point, too often to predict)
        n_finite = n_correct = over_1ulp = n_blind = n_false_alarm = n_match = n_mismatch = n_mismatch_finite = 0
        sum_ulp = sum_bits = sum_r = sum_sq = 0.0
        t0 = t1 = t2 = t3 = t4 = -inf
        a0 = a1 = a2 = a3 = a4 = -1
        by_class[:] = 0
        for j in range(starts[row], starts[row] + sizes[row]):
            i = order[j]
            hist[row, rank[bins[i]]] += 1
            e = err[i]
            finite = np.isfinite(e)
            n_finite += finite
            n_correct += bits[i] == 0
            over_1ulp += not e <= 1.0
            by_class[cls[i]] += 1
            for k in range(n_decisions):
                counts[row, 7 + k] += decisions[k, i]
            sum_ulp += e if finite else 0.0
            sum_bits += bits[i]
            t0, a0 = _fold_max(t0, a0, inf if np.isnan(e) else e, i)
            t1, a1 = _fold_max(t1, a1, e if finite else -inf, i)
            if not acceptance:
                continue
            # the acceptance standards (precision.analysis.acceptance): r = |c - g| / (|g| + floor) where both are
            # finite; a special position matches (both NaN, the same infinity) or not (SPECIAL_RULE)
            x, gold = computed[i], golden[i]
            evaluated = np.isfinite(x) and np.isfinite(gold)
            matched = (not evaluated) and ((np.isnan(x) and np.isnan(gold)) or x == gold)
            mismatched = (not evaluated) and not matched
            r = sq = dist = 0.0
            magnitude = abs(gold)
            if evaluated:
                d = x - gold
                dist = abs(d)
                r = dist / (magnitude + floor)
                sq = d * d
            e_acc = inf if np.isnan(e) else e
            blind = evaluated and r <= limit and not e_acc <= blind_ulp
            false_alarm = e_acc <= 0.5 and ((evaluated and r > limit) or mismatched)
            n_blind += blind
            n_false_alarm += false_alarm
            n_match += matched
            n_mismatch += mismatched
            n_mismatch_finite += mismatched and np.isfinite(gold)
            equal_infinities = matched and not np.isnan(x)
            for k in range(n_close):
                counts[row, base + 5 + k] += (evaluated and dist <= atol[k] + rtol[k] * magnitude) or equal_infinities
            sum_r += r
            sum_sq += sq
            t2, a2 = _fold_max(t2, a2, r if evaluated else -inf, i)
            t3, a3 = _fold_max(t3, a3, e_acc if blind else -inf, i)
            t4, a4 = _fold_max(t4, a4, (r if evaluated else inf) if false_alarm else -inf, i)
        counts[row, 0], counts[row, 1], counts[row, 2] = n_finite, n_correct, over_1ulp
        counts[row, 3:7] = by_class[1:]  # the special classes' codes 1 .. 4
        counts[row, base], counts[row, base + 1] = n_blind, n_false_alarm
        counts[row, base + 2], counts[row, base + 3], counts[row, base + 4] = n_match, n_mismatch, n_mismatch_finite
        sums[row, 0], sums[row, 1], sums[row, 2], sums[row, 3] = sum_ulp, sum_bits, sum_r, sum_sq
        top[row, 0], top[row, 1], top[row, 2], top[row, 3], top[row, 4] = t0, t1, t2, t3, t4
        at[row, 0], at[row, 1], at[row, 2], at[row, 3], at[row, 4] = a0, a1, a2, a3, a4
    cells = np.flatnonzero(hist)  # in (row, bin) order
    width = max(used.size, 1)
    return counts, sums, top, at, cells // width, used[cells % width], hist.ravel()[cells]


def reduce_error_groups(order, starts, sizes, err_ulp, err_bits, classes, log2_err, decisions=None, computed=None,
                        golden=None, limit=0.0, blind_ulp=0.0, floor=0.0, tolerances=(), names=()) -> tuple:
    """Per group of points: counts, sums, maxima and their first points, and the histogram, in one pass.

    Parameters
    ----------
    order, starts, sizes : int64 arrays
        The groups: group j holds the points ``order[starts[j]:starts[j] + sizes[j]]``, in element order
        (:class:`precision.analysis.groups.Grouping`'s ``perm``, ``starts`` and ``counts``, or those of
        :meth:`~precision.analysis.groups.Grouping.restricted`: points in no group are not read).
    err_ulp, err_bits : float64 arrays
        Ulp error and bits of error per point (:mod:`precision.analysis.scoring`).
    classes : int8 array
        Special-class code per point (codes 1-4 are counted in :data:`COUNTS`'s order).
    log2_err : float64 array
        ``np.log2(err_ulp)``, whence the histogram bin of each point
        (:func:`precision.analysis.histograms.histogram_bins`).
    decisions : (K, n) bool array, optional
        Further masks to count (a guard's decisions).
    computed, golden : float64 arrays, optional
        The outputs and the acceptance standards' golden: with them, the
        acceptance counts, sums and maxima (``limit`` = 10 T of the format,
        ``blind_ulp``, ``floor`` of r's denominator, ``tolerances`` = (atol,
        rtol) per allclose preset: :func:`precision.analysis.acceptance.acceptance_parameters`, whose
        ``names`` are not read here).

    Returns
    -------
    counts : (groups, 7 + K [+ 5 + len(tolerances)]) int64
        ... then the acceptance counts (ACCEPTANCE_COUNTS), one per tolerance.
    sums : (groups, 2 [+ 2]) float64
    top, at : (groups, 2 [+ 3]) float64 and int64
        Each maximum (-inf when no point of the group qualifies) and the
        index of its first point (the group's first point then; -1 for an
        empty group).
    hist : (groups, bins, counts), int64 arrays
        The sparse histogram: every nonzero (group, bin) cell, sorted.
    """
    order = _frozen(order, dtype=np.int64)
    sizes = _frozen(sizes, dtype=np.int64)
    starts = _frozen(np.asarray(starts, dtype=np.int64)[:sizes.size])  # (no group: Grouping's [0])
    n = np.asarray(err_ulp).size
    acceptance = computed is not None
    classes = _frozen(classes, dtype=np.int8)
    # (the pass indexes its tables by these, unchecked)
    if n and not (0 <= int(classes.min()) and int(classes.max()) <= 4):
        raise ValueError("reduce_error_groups: a class code outside 0 .. 4")
    if not _index_points(order, starts, sizes, n):
        raise ValueError("reduce_error_groups: the groups do not index the points")
    decisions = (_frozen(np.zeros((0, n), dtype=np.bool_)) if decisions is None
                 else _frozen(decisions, dtype=np.bool_).reshape(-1, n))
    tolerances = np.asarray(tolerances, dtype=np.float64).reshape(-1, 2)
    empty = _frozen(np.zeros(0))
    counts, sums, top, at, *hist = _reduce(
        order, starts, sizes, _frozen(err_ulp, dtype=np.float64),
        _frozen(err_bits, dtype=np.float64), classes,
        _frozen(log2_err, dtype=np.float64), float(HIST_MIN_EXP), float(HIST_SUBBINS),
        float(HIST_BINS - 4), HIST_BINS, decisions,
        _frozen(computed, dtype=np.float64) if acceptance else empty,
        _frozen(golden, dtype=np.float64) if acceptance else empty,
        float(limit), float(blind_ulp), float(floor), _frozen(tolerances[:, 0]),
        _frozen(tolerances[:, 1]), acceptance)
    if not acceptance:
        counts, sums, top, at = counts[:, :7 + decisions.shape[0]], sums[:, :2], top[:, :2], at[:, :2]
    return counts, sums, top, at, tuple(hist)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _top_k(order, starts, sizes, values, k):
    kept = np.empty(order.size, dtype=np.int64)
    n_kept = 0
    best = np.empty(k)
    where = np.empty(k, dtype=np.int64)
    for row in range(sizes.size):
        m = 0  # entries held; once k, the weakest is best[low] (the smallest value, the latest point of a tie)
        low = 0
        for j in range(starts[row], starts[row] + sizes[row]):
            i = order[j]
            v = values[i]
            if np.isnan(v):
                v = np.inf
            if m < k:
                best[m], where[m] = v, i
                m += 1
            elif v > best[low]:  # (a later point beats the weakest only by a larger value: ties keep the first)
                best[low], where[low] = v, i
            else:
                continue
            if m == k:
                low = 0
                for q in range(1, k):
                    if best[q] < best[low] or (best[q] == best[low] and where[q] > where[low]):
                        low = q
        kept[n_kept:n_kept + m] = where[:m]
        n_kept += m
    return np.sort(kept[:n_kept])


def top_k_groups(order, starts, sizes, values, k: int) -> np.ndarray:
    """Indices of the ``k`` largest ``values`` (NaN largest) of each group, ties to the first point in element
    order, all groups' together ascending; the groups as :func:`reduce_error_groups` takes them.  One pass,
    holding each group's k best so far (:meth:`precision.analysis.groups.Grouping.top_k_reference` defines it
    with numpy's partition)."""
    sizes = _frozen(sizes, dtype=np.int64)
    starts = _frozen(np.asarray(starts, dtype=np.int64)[:sizes.size])
    order = _frozen(order, dtype=np.int64)
    values = _frozen(values, dtype=np.float64).ravel()
    if not _index_points(order, starts, sizes, values.size):
        raise ValueError("top_k_groups: the groups do not index the values")
    if k < 1:
        return np.empty(0, dtype=np.int64)
    return _top_k(order, starts, sizes, values, int(k))


#: The counted columns of :func:`compare_groups`, in its output order.
PAIR_COUNTS = ("changed", "better", "worse", "tied", "both_garbage", "finite_better", "finite_worse",
               "specials_caused", "fixed_correct", "fixed_le_1ulp", "fixed_le_2p10", "fixed_le_2p20",
               "changed_became_correct", "changed_became_le_1ulp", "changed_still_garbage",
               "changed_garbage_made_special", "changed_garbage_made_finite", "changed_garbage_special_changed")


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _compare(order, starts, sizes, changed, err_w, cls_w, err_o, cls_o, bits_w, bits_o, garbage_ulp, res, half_range,
             n_bins):
    n_rows = sizes.size
    counts = np.zeros((n_rows, 18), dtype=np.int64)
    top = np.full((n_rows, 2), -np.inf)
    at = np.full((n_rows, 2), -1, dtype=np.int64)
    inf = np.inf
    # the histogram: one row's counts densely over every bin, read back (and cleared) at the bins it touched
    dense = np.zeros(n_bins, dtype=np.int64)
    touched = np.empty(n_bins, dtype=np.int64)
    hist_rows, hist_bins, hist_counts = [np.int64(0)] * 0, [np.int64(0)] * 0, [np.int64(0)] * 0
    for row in range(n_rows):
        t_gain = t_loss = -inf
        a_gain = a_loss = -1
        n_touched = 0
        for j in range(starts[row], starts[row] + sizes[row]):
            i = order[j]
            if not changed[i]:
                continue
            ew, eo = err_w[i], err_o[i]
            sw, so = cls_w[i] != 0, cls_o[i] != 0
            # precision.analysis.paired.compare_points on one changed point
            garbage = (sw or ew > garbage_ulp) and (so or eo > garbage_ulp)
            evidence = not garbage
            d = np.nan
            if evidence and not sw and not so:
                d = bits_o[i] - bits_w[i]
            if evidence and so and not sw:
                d = inf
            if evidence and sw and not so:
                d = -inf
            outcome = 0
            if evidence and d > 0:
                outcome = 1
            if evidence and d < 0:
                outcome = 2
            if evidence and d == 0:
                outcome = 3
            if garbage:
                outcome = 4
            fix = 0
            if evidence and so and not sw:
                fix = 4 if np.isnan(ew) else 2 + (ew > 1.0) + (ew > 1024.0)
                if ew <= 0.5:
                    fix = 1
            finite_d = np.isfinite(d)
            counts[row, 0] += 1
            if outcome > 0:
                counts[row, outcome] += 1
            counts[row, 5] += finite_d and d > 0
            counts[row, 6] += finite_d and d < 0
            counts[row, 7] += d == -inf
            if fix > 0:
                counts[row, 7 + fix] += 1
            # precision.analysis.paired.changed_quality
            counts[row, 12] += (not sw and ew <= 0.5) and not (not so and eo <= 0.5)
            counts[row, 13] += (not sw and ew <= 1.0) and not (not so and eo <= 1.0)
            counts[row, 14] += sw or ew > garbage_ulp
            counts[row, 15] += garbage and sw and not so
            counts[row, 16] += garbage and so and not sw
            counts[row, 17] += garbage and sw and so and cls_w[i] != cls_o[i]
            gain = d if finite_d and d > 0 else -inf
            t_gain, a_gain = _fold_max(t_gain, a_gain, gain, i)
            loss = -d if finite_d and d < 0 else -inf
            t_loss, a_loss = _fold_max(t_loss, a_loss, loss, i)
            if not np.isnan(d):  # the change-in-bits histogram (precision.analysis.paired._delta_bins)
                if d == inf:
                    b = n_bins - 1
                elif d == -inf:
                    b = 0
                else:
                    b = int(1 + res * half_range + min(max(np.rint(d * res), -res * half_range), res * half_range))
                if dense[b] == 0:
                    touched[n_touched] = b
                    n_touched += 1
                dense[b] += 1
        top[row, 0], top[row, 1], at[row, 0], at[row, 1] = t_gain, t_loss, a_gain, a_loss
        for b in np.sort(touched[:n_touched]):
            hist_rows.append(np.int64(row))
            hist_bins.append(b)
            hist_counts.append(dense[b])
            dense[b] = 0
    return (counts, top, at, np.array(hist_rows, dtype=np.int64), np.array(hist_bins, dtype=np.int64),
            np.array(hist_counts, dtype=np.int64))


def compare_groups(order, starts, sizes, changed, err_with, cls_with, err_without, cls_without, bits_with,
                   bits_without, garbage_ulp: float, res: int, half_range: int, n_bins: int) -> tuple:
    """Per group (as :func:`reduce_error_groups` takes them): the paired counts of two variants' changed points,
    the largest gain and loss in bits with their first points, and the histogram of the change in bits; in one
    pass.  Equal to :meth:`precision.analysis.paired.PairedStats._compare_columns_reference` bit for bit.

    ``bits_*`` are :func:`precision.analysis.scoring.error_bits` of the ulp errors (numpy's log2, computed once
    per variant); ``garbage_ulp``, ``res``, ``half_range`` and ``n_bins`` are
    :data:`~precision.analysis.paired.GARBAGE_ULP`, ``DELTA_RES``, ``DELTA_MAX`` and ``DELTA_BINS``.  Returns
    (counts (groups, 18) int64 in :data:`PAIR_COUNTS` order, top and at (groups, 2): gain and loss, -inf / the
    group's first changed point when none, -1 without a changed point, and the histogram's (rows, bins,
    counts)).
    """
    sizes = _frozen(sizes, dtype=np.int64)
    starts = _frozen(np.asarray(starts, dtype=np.int64)[:sizes.size])
    order = _frozen(order, dtype=np.int64)
    arrays = [_frozen(a, dtype=t).ravel() for a, t in (
        (changed, np.bool_), (err_with, np.float64), (cls_with, np.int8), (err_without, np.float64),
        (cls_without, np.int8), (bits_with, np.float64), (bits_without, np.float64))]
    if any(a.size != order.size for a in arrays) or not _index_points(order, starts, sizes, order.size):
        raise ValueError("compare_groups: the groups do not index the points")
    return _compare(order, starts, sizes, *arrays, float(garbage_ulp), int(res), int(half_range), int(n_bins))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _merge_runs(key, rows, bins, counts, n_bins):
    n_rows, n = key.size, rows.size
    # each row's entries are one run (Mergeable's convention); a row met twice: not mergeable here (-1)
    start = np.full(n_rows, -1, dtype=np.int64)
    stop = np.zeros(n_rows, dtype=np.int64)
    j = 0
    while j < n:
        r, first = rows[j], j
        while j < n and rows[j] == r:
            j += 1
        if start[r] >= 0:
            return np.empty((3, 0), dtype=np.int64), False
        start[r], stop[r] = first, j
    # the rows of one merged key together, each key's histogram summed densely over every bin
    by_key = np.argsort(key, kind="mergesort")
    dense = np.zeros(n_bins, dtype=np.int64)
    hit = np.zeros(n_bins, dtype=np.bool_)
    touched = np.empty(n_bins, dtype=np.int64)
    out_key, out_bin, out_count = [np.int64(0)] * 0, [np.int64(0)] * 0, [np.int64(0)] * 0
    i = 0
    while i < n_rows:
        k, n_touched = key[by_key[i]], 0
        while i < n_rows and key[by_key[i]] == k:
            r = by_key[i]
            if start[r] >= 0:
                for e in range(start[r], stop[r]):
                    b = bins[e]
                    if not hit[b]:
                        hit[b] = True
                        touched[n_touched] = b
                        n_touched += 1
                    dense[b] += counts[e]
            i += 1
        for b in np.sort(touched[:n_touched]):
            if dense[b] != 0:
                out_key.append(np.int64(k))
                out_bin.append(np.int64(b))
                out_count.append(dense[b])
            dense[b], hit[b] = 0, False
    block = np.empty((3, len(out_key)), dtype=np.int64)
    for m in range(len(out_key)):
        block[0, m], block[1, m], block[2, m] = out_key[m], out_bin[m], out_count[m]
    return block, True


def merge_histogram(key, rows, bins, counts, n_bins: int):
    """A sparse histogram re-keyed (row -> ``key[row]``), counts summed per (key, bin), sorted: the (3, m) int64
    block of keys, bins and nonzero counts, or None when some row's entries are not one run (then
    :func:`precision.analysis.groups._merge_sparse`'s numpy path merges it).  Each merged key's rows are summed
    together in a dense table of the bins that stays in cache, instead of one table of every (key, bin) cell."""
    key, rows = _frozen(key, dtype=np.int64), _frozen(rows, dtype=np.int64)
    # two compiled forms: bins and counts as the tasks store them (int32), or as merges give them (int64)
    narrow = np.asarray(bins).dtype == np.int32 and np.asarray(counts).dtype == np.int32
    bins, counts = (_frozen(a, dtype=np.int32 if narrow else np.int64) for a in (bins, counts))
    if rows.size and not (0 <= int(rows.min()) and int(rows.max()) < key.size and 0 <= int(bins.min())
                          and int(bins.max()) < n_bins):
        raise ValueError("merge_histogram: an entry's row or bin is out of range")
    block, merged = _merge_runs(key, rows, bins, counts, int(n_bins))
    return block if merged else None


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _quantile_entries(keys, counts, qs, n_keys):
    n = keys.size
    at = np.full((n_keys, qs.size), -1, dtype=np.int64)
    ahead = 0  # the counts of the entries before this block
    j = 0
    while j < n:
        k, first, total = keys[j], j, 0
        while j < n and keys[j] == k:
            total += counts[j]
            j += 1
        for q in range(qs.size):  # (a key met again later: its last block's, as numpy's assignment keeps)
            if total == 0:
                at[k, q] = -1
                continue
            # the first entry whose running count reaches ahead + max(1, ceil(q * total)), all in float64 as
            # numpy compares them
            goal = float(ahead) + max(1.0, np.ceil(qs[q] * float(total)))
            i, running = first, ahead + counts[first]
            while i < n - 1 and float(running) < goal:
                i += 1
                running += counts[i]
            at[k, q] = i
        ahead += total
    return at


def quantile_entries(keys, counts, qs) -> np.ndarray:
    """Per key and quantile of a sparse histogram (each key's entries contiguous, in ascending bin order), the
    entry holding the quantile's order statistic (rank ``max(1, ceil(q * n))`` of the key's n counts), -1 for
    a key without counts: (keys.max() + 1, len(qs)) int64.  One pass, no running sum over every entry kept;
    equal to :func:`precision.analysis.histograms.histogram_quantiles`'s entries."""
    keys = _frozen(keys, dtype=np.int64)
    narrow = np.asarray(counts).dtype == np.int32  # (two compiled forms, as merge_histogram's)
    counts = _frozen(counts, dtype=np.int32 if narrow else np.int64)
    if keys.size != counts.size or (keys.size and int(keys.min()) < 0):
        raise ValueError("quantile_entries: keys and counts differ in size, or a key is negative")
    n_keys = int(keys.max()) + 1 if keys.size else 0
    return _quantile_entries(keys, counts, _frozen(np.asarray(qs, dtype=np.float64).ravel()), n_keys)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _reduce_msprobe(order, starts, sizes, computed, bench, bench_cast, small_value, atol_benchmark, atol_threshold,
                    rtol, eps, min_eb, mantissa, ulp_cut, max_finite, overflow, fp32):
    n_rows = sizes.size
    counts = np.zeros((n_rows, 14), dtype=np.int64)
    sums = np.zeros((n_rows, 3))
    top = np.full((n_rows, 3), -np.inf)
    tally = np.zeros(14, dtype=np.int64)
    for row in range(n_rows):
        tally[:] = 0
        sum_sq = sum_rel = sum_ulp = 0.0
        t0 = t1 = t2 = -np.inf
        for j in range(starts[row], starts[row] + sizes[row]):
            i = order[j]
            c, b, bc = computed[i], bench[i], bench_cast[i]
            finite = np.isfinite(c) and np.isfinite(bc)
            ae = abs(c - b)
            magnitude = abs(b)
            rel = ae / (magnitude + eps)
            small = finite and magnitude <= small_value
            normal = finite and not small
            cc = max_finite if c > max_finite else (-max_finite if c < -max_finite else c)
            bcc = max_finite if bc > max_finite else (-max_finite if bc < -max_finite else bc)
            diff = abs(cc - bcc)
            if diff >= overflow:
                diff = np.inf
            passes = diff / (magnitude + eps) <= rtol or (np.isnan(c) and np.isnan(bc))
            if np.isfinite(b):
                eb = 0
                if b != 0.0:
                    eb = math.frexp(b)[1] - 1
                    eb = eb if eb > min_eb else min_eb
                scale = math.ldexp(1.0, mantissa - eb)
            else:
                scale = np.nan
            if fp32:
                ulp = abs((c - b) * scale)
            else:
                ulp = np.float64(abs(np.float32(c - b) * np.float32(scale)))
            ulp_nan = np.isnan(ulp)
            tally[0] += not finite
            tally[1] += (not finite) and not passes
            tally[2] += small
            tally[3] += small and ae > atol_benchmark
            tally[4] += small and ae > atol_threshold
            tally[5] += normal and rel > rtol
            tally[6] += c > bc
            tally[7] += c < bc
            tally[8] += ulp_nan
            tally[9] += ulp > ulp_cut
            tally[10] += np.isnan(ae)
            tally[11] += rel < 0.01
            tally[12] += rel < 0.001
            tally[13] += rel < 0.0001
            sum_sq += ae * ae if normal else 0.0
            sum_rel += rel if normal else 0.0
            sum_ulp += 0.0 if ulp_nan else ulp
            if normal and rel > t0:
                t0 = rel
            if not ulp_nan and ulp > t1:
                t1 = ulp
            if ae > t2:
                t2 = ae
        counts[row, :] = tally
        sums[row, 0], sums[row, 1], sums[row, 2] = sum_sq, sum_rel, sum_ulp
        top[row, 0], top[row, 1], top[row, 2] = t0, t1, t2
    return counts, sums, top


def reduce_msprobe_groups(order, starts, sizes, computed, bench, bench_cast, parameters: dict, overflow: float,
                          fp32: bool) -> tuple:
    """Per group of points (as :func:`reduce_error_groups`' ``order``, ``starts``, ``sizes``): msprobe's counts,
    sums and maxima (:data:`precision.analysis.msprobe.MSPROBE_COUNTS`, ``MSPROBE_SUMS``, ``MSPROBE_MAXIMA``; a
    maximum -inf where no point qualifies), equal bit for bit to
    :func:`precision.analysis.msprobe.msprobe_columns`.  ``parameters``: the format's
    :data:`~precision.analysis.msprobe.MSPROBE_PARAMETERS`; ``overflow``: the least magnitude the format rounds to
    infinity; ``fp32``: msprobe's ulp error in float64 (else float32)."""
    order = _frozen(order, dtype=np.int64)
    sizes = _frozen(sizes, dtype=np.int64)
    starts = _frozen(np.asarray(starts, dtype=np.int64)[:sizes.size])
    n = np.asarray(computed).size
    if not _index_points(order, starts, sizes, n) or np.asarray(bench).size != n or np.asarray(bench_cast).size != n:
        raise ValueError("reduce_msprobe_groups: the groups do not index the points")
    k = parameters
    return _reduce_msprobe(order, starts, sizes, _frozen(computed, dtype=np.float64), _frozen(bench, dtype=np.float64),
                           _frozen(bench_cast, dtype=np.float64), float(k["small_value"]), float(k["atol_benchmark"]),
                           float(k["atol_threshold"]), float(k["rtol"]), float(k["eps"]), int(k["min_eb"]),
                           int(k["mantissa"]), float(k["ulp_cut"]), float(k["max_finite"]), float(overflow), bool(fp32))


def load() -> None:
    """Load every pass now (from the cache beside this file, or compiled the first time), for each argument
    type a sweep gives it (a run's process loads them while its workers work, for the tables' merges; never
    before the workers fork, which would leave them running inherited code, ``benchmarks/fork.py``)."""
    one = np.zeros(1)
    order, starts, sizes = np.zeros(1, np.int64), np.zeros(1, np.int64), np.ones(1, np.int64)
    cls, no = np.zeros(1, np.int8), np.zeros(1, np.bool_)
    for decisions in (None, no[None, :]):
        reduce_error_groups(order, starts, sizes, one, one, cls, one, decisions)
        reduce_error_groups(order, starts, sizes, one, one, cls, one, decisions, one, one, 1.0, 1.0, 1.0, ((0.0, 0.0),))
    for raw in (np.zeros(1, np.uint16), np.zeros(1, np.uint32)):
        score_points(one, raw, one, one, one, one, np.zeros(1, np.int64), raw.itemsize * 8)
    top_k_groups(order, starts, sizes, one, 1)
    from precision.analysis.msprobe import MSPROBE_PARAMETERS
    for fp32 in (False, True):
        reduce_msprobe_groups(order, starts, sizes, one, one, one, MSPROBE_PARAMETERS["fp32"], 1.0, fp32)
    compare_groups(order, starts, sizes, no, one, cls, one, cls, one, one, 1.0, 1, 1, 3)
    for dtype in (np.int32, np.int64):
        merge_histogram(np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, dtype), np.ones(1, dtype), 1)
        quantile_entries(np.zeros(1, np.int64), np.ones(1, dtype), (0.5,))

