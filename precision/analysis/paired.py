"""Paired comparisons: two variants on the same points, counted, tested and judged.

:func:`compare_points` classifies each point (better, worse, tied, ...);
:class:`PairedStats` holds the mergeable counts and the histogram of the
change in bits; :func:`sign_test` and :func:`verdicts` turn them into a verdict
(:data:`VERDICT_RULE`).  Conventions in :mod:`precision.analysis.scoring`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from precision.analysis.groups import Grouping, Mergeable, histogram_quantiles, packed_histogram
from precision.analysis.scoring import CLASS_OK, COMPILED_MIN_POINTS, blank_missing, error_bits
from precision.io.frames import frame_to_arrays

__all__ = [
    "GARBAGE_ULP", "SIGNIFICANCE", "VERDICTS", "VERDICT_RULE", "OUTCOME_NAMES", "FIX_QUALITIES",
    "outputs_changed", "compare_points", "PairedStats", "PAIR_SUMS", "CHANGED_QUALITIES", "changed_quality",
    "sign_test", "verdicts",
]

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



def _error_bits_at(err: np.ndarray, at: np.ndarray) -> np.ndarray:
    """:func:`error_bits` of ``err`` at the points ``at`` (indices), zero elsewhere (a comparison reads only its
    changed points')."""
    bits = np.zeros(err.size)
    with np.errstate(invalid="ignore"):
        bits[at] = error_bits(err[at])
    return bits


def _both_garbage(ew, sw, eo, so) -> np.ndarray:
    """Special (``sw``, ``so``) or over :data:`GARBAGE_ULP` ulps (``ew``, ``eo``) on both sides: no evidence."""
    with np.errstate(invalid="ignore"):
        return (sw | (ew > GARBAGE_ULP)) & (so | (eo > GARBAGE_ULP))


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
    garbage = ch & _both_garbage(ew, sw, eo, so)
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


class PairedStats(Mergeable):
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
        return {**frame_to_arrays(columns, prefix), f"{prefix}.hist": packed_histogram(hist)}

    @classmethod
    def _compare_columns(cls, grouping, err_with, cls_with, err_without, cls_without, changed, witness):
        """The columns of :meth:`compare` and its sparse histogram: one compiled pass over the points
        (:func:`precision.analysis.fused.compare_groups`; from :data:`COMPILED_MIN_POINTS` points), equal bit for
        bit to :meth:`_compare_columns_reference`."""
        err_with, err_without = (np.asarray(e, dtype=np.float64).ravel() for e in (err_with, err_without))
        if err_with.size < COMPILED_MIN_POINTS:
            return cls._compare_columns_reference(grouping, err_with, cls_with, err_without, cls_without, changed,
                                                  witness)
        from precision.analysis.fused import PAIR_COUNTS, compare_groups  # (numba, imported when first needed)
        changed = np.asarray(changed, dtype=bool).ravel()
        at = np.flatnonzero(changed)
        bits_with, bits_without = (_error_bits_at(e, at) for e in (err_with, err_without))
        counts, top, at, *hist = compare_groups(
            grouping.perm, grouping.starts, grouping.counts, changed, err_with, cls_with, err_without, cls_without,
            bits_with, bits_without, GARBAGE_ULP, DELTA_RES, DELTA_MAX, DELTA_BINS)
        frame = {"group": grouping.ids, "count": grouping.counts.astype(np.int64), **dict(zip(PAIR_COUNTS, counts.T))}
        none = top == -np.inf  # (no changed point qualifies; none at all: no witness either)
        frame["max_gain_bits"] = np.where(none[:, 0], np.nan, top[:, 0])
        frame["max_loss_bits"] = np.where(none[:, 1], np.nan, top[:, 1])
        for name, values in (witness or {}).items():
            v = np.asarray(values).ravel()
            for k, prefix in enumerate(("gain_witness_", "loss_witness_")):
                frame[f"{prefix}{name}"] = blank_missing(v[np.maximum(at[:, k], 0)], none[:, k])
        return frame, tuple(hist)

    @classmethod
    def _compare_columns_reference(cls, grouping, err_with, cls_with, err_without, cls_without, changed, witness):
        """:meth:`_compare_columns` as numpy defines it (:func:`compare_points` on the changed points, then the
        reduction of :meth:`reduce`)."""
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
                full[rows] = blank_missing(v[at[idx]], top == -np.inf) if idx.size else full[rows]
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
        out = {c: f[c] for c in keys}  # (the frame built once, at the end)
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
        table = pd.DataFrame(out, index=f.index)
        table["verdict"] = verdicts(table)
        return table

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
#: "without" side was not), became within 1 ulp (likewise), still garbage (special or over 2^20 ulp); and, among
#: both_garbage outputs (no evidence for the verdict), a change of class: finite (if far off) made special (NaN,
#: inf, wrong sign, lost inf), special made finite, or one special class made another (NaN to wrong sign...).
CHANGED_QUALITIES = ("changed_became_correct", "changed_became_le_1ulp", "changed_still_garbage",
                     "changed_garbage_made_special", "changed_garbage_made_finite", "changed_garbage_special_changed")


def changed_quality(err_with, cls_with, err_without, cls_without) -> dict:
    """The :data:`CHANGED_QUALITIES` masks of changed outputs from both sides' ulp errors and classes."""
    ew, eo = np.asarray(err_with, np.float64), np.asarray(err_without, np.float64)
    cw, co = np.asarray(cls_with), np.asarray(cls_without)
    sw, so = cw != CLASS_OK, co != CLASS_OK
    garbage = _both_garbage(ew, sw, eo, so)
    with np.errstate(invalid="ignore"):
        return {"changed_became_correct": ~sw & (ew <= 0.5) & ~(~so & (eo <= 0.5)),
                "changed_became_le_1ulp": ~sw & (ew <= 1.0) & ~(~so & (eo <= 1.0)),
                "changed_still_garbage": sw | (ew > GARBAGE_ULP),
                "changed_garbage_made_special": garbage & sw & ~so,
                "changed_garbage_made_finite": garbage & ~sw & so,
                "changed_garbage_special_changed": garbage & sw & so & (cw != co)}
