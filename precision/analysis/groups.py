"""Mergeable statistics of groups of points: sums, maxima with witnesses, histograms.

:class:`Grouping` maps points to groups; :class:`GroupStats` reduces per-point
scores into one row per group and merges rows by key columns (maxima exact,
the first row attaining one gives the witness; quantiles from
:mod:`precision.analysis.histograms`); :func:`summarize` does it for one set of
points.  Conventions in :mod:`precision.analysis.scoring`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from precision.analysis.acceptance import (ACCEPTANCE_COUNTS, ACCEPTANCE_MAXIMA, acceptance_columns,
                                          acceptance_parameters)
from precision.analysis import histograms
from precision.analysis.histograms import HIST_BINS, bin_upper_edge, histogram_bins
from precision.analysis.msprobe import (MSPROBE_COUNTS, MSPROBE_MAXIMA, MSPROBE_PARAMETERS, MSPROBE_SUMS,
                                        msprobe_columns, msprobe_parameters, overflow_bound)
from precision.analysis.scoring import CLASS_NAMES, CLASS_OK, COMPILED_MIN_POINTS, SPECIAL_CLASSES, blank_missing
from precision.exact.formats import get_format
from precision.io.frames import frame_from_arrays, frame_to_arrays

__all__ = [
    "Grouping", "Mergeable", "GroupStats", "packed_histogram", "STAT_SUMS", "STAT_COLUMNS", "Summary", "summarize",
    "witness_fields", "witness_attributes", "histogram_quantiles",
]

#: A witness's fields in the order a text names them: pred and target first, then the operator's attributes
#: (every other field of the family), then weight and dout (the inputs), then where the element is (its row and
#: col in a scored tensor, the machine and profile of a diff) and what was computed there against the exact value
#: (not inputs).
_WITNESS_HEAD = ("pred", "target")
_WITNESS_INPUT_TAIL = ("weight", "dout")
_WITNESS_NOT_INPUTS = ("row", "col", "machine", "profile", "computed", "exact")


def witness_attributes(fields) -> list:
    """The operator's attributes among a witness's fields: every field that is not pred, target, weight, dout,
    row, col, machine, profile, computed or exact, in their order."""
    return [f for f in fields if f not in _WITNESS_HEAD + _WITNESS_INPUT_TAIL + _WITNESS_NOT_INPUTS]


def witness_fields(columns, prefix: str, inputs_only: bool = False) -> list:
    """The fields of the witness family ``prefix`` among ``columns`` (``witness_pred`` -> ``pred``), in the order
    a text names them: pred, target, the operator's attributes (the other fields, in column order), weight, dout,
    then (unless ``inputs_only``) row, col, machine, profile, computed, exact."""
    present = [c[len(prefix):] for c in columns if c.startswith(prefix)]
    tail = _WITNESS_INPUT_TAIL + (() if inputs_only else _WITNESS_NOT_INPUTS)
    return [c for c in (*_WITNESS_HEAD, *witness_attributes(present), *tail) if c in present]

# ---------------------------------------------------------------------------
# Groups of points
# ---------------------------------------------------------------------------

def _offsets(counts) -> np.ndarray:
    """The offset of each of consecutive runs of ``counts`` elements (int64; [0] for no run)."""
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


#: Masks whose counts a :class:`Grouping` keeps (:meth:`Grouping.count`).
_COUNTS_KEPT = 64


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
        self.starts = _offsets(self.counts)
        self._counted = {}  # recent counts of read-only masks (count)

    def restricted(self, rows) -> "Grouping":
        """The groups at positions ``rows`` (ascending) of :attr:`ids` alone, their points as here: what the
        compiled passes read (:attr:`ids`, :attr:`counts`, :attr:`perm`, :attr:`starts`) restricted.  ``group``
        still names every point's group, so only the compiled passes see the restriction: a caller restricts
        arrays of :data:`COMPILED_MIN_POINTS` points or more."""
        rows = np.asarray(rows, dtype=np.int64)
        sub = object.__new__(Grouping)
        sub.group, sub.n_groups = self.group, self.n_groups
        sub.ids, sub.counts = self.ids[rows], self.counts[rows]
        sub.perm = (np.concatenate([self.perm[s:s + c] for s, c in zip(self.starts[rows], sub.counts)])
                    if rows.size else np.empty(0, dtype=self.perm.dtype))
        sub.starts = _offsets(sub.counts)
        sub._counted = {}
        return sub

    def sum(self, values) -> np.ndarray:
        """Per nonempty group: the sum of ``values`` (float64)."""
        return np.bincount(self.group, np.asarray(values, dtype=np.float64).ravel(), self.n_groups)[self.ids]

    def count(self, mask) -> np.ndarray:
        """Per nonempty group: how many points have ``mask`` true (int64).

        The counts of a read-only mask (a view of an array that is not
        writeable, held meanwhile) are kept for its next count: the variants
        of a task share most of their decision masks."""
        mask = np.asarray(mask, dtype=bool).ravel()
        root = mask
        while isinstance(root.base, np.ndarray):
            root = root.base
        key = None
        if not root.flags.writeable:
            key = (id(root), mask.__array_interface__["data"][0], mask.shape, mask.strides)
            held = self._counted.get(key)
            if held is not None:
                return held[1].copy()
        if not mask.any():  # (most decision masks): no gather
            counts = np.zeros(self.ids.size, dtype=np.int64)
        else:
            counts = self.count_grouped(mask[self.perm])
        if key is not None:
            self._counted[key] = (root, counts.copy())  # (held: its id names it while kept)
            if len(self._counted) > _COUNTS_KEPT:
                del self._counted[next(iter(self._counted))]
        return counts

    def tally(self, masks: dict, codes: dict | None = None) -> dict:
        """Several counts per nonempty group: :meth:`count` of each mask.

        ``masks``: name -> boolean array (count where true); ``codes``: name
        -> (small int array, {value: count name}) (count each value).
        """
        counted, out = {}, {}
        for name, mask in masks.items():  # (one count per distinct array: most decision masks are one shared none)
            held = counted.get(id(mask))
            out[name] = held.copy() if held is not None else counted.setdefault(id(mask), self.count(mask))
        for values, names in (codes or {}).values():
            grouped = np.asarray(values).ravel()[self.perm]
            for value, name in names.items():
                out[name] = self.count_grouped(grouped == value)
        return out

    def count_grouped(self, mask_in_group_order) -> np.ndarray:
        """:meth:`count` of a mask already in group order (indexed by :attr:`perm`)."""
        if self.ids.size == 0:
            return np.zeros(0, dtype=np.int64)
        return np.add.reduceat(mask_in_group_order, self.starts, dtype=np.int64)

    def top_k(self, values, k: int) -> np.ndarray:
        """Indices of the ``k`` largest ``values`` (NaN largest) of each group, ties to the first, ascending: one
        compiled pass (:func:`precision.analysis.fused.top_k_groups`; from :data:`COMPILED_MIN_POINTS` points),
        equal to :meth:`top_k_reference`."""
        if self.group.size < COMPILED_MIN_POINTS:
            return self.top_k_reference(values, k)
        from precision.analysis.fused import top_k_groups  # (numba, imported when first needed)
        return top_k_groups(self.perm, self.starts, self.counts, values, k)

    def top_k_reference(self, values, k: int) -> np.ndarray:
        """:meth:`top_k` as numpy defines it (a partition per group)."""
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
        grouped = v[self.perm]
        nan = np.isnan(grouped)
        if nan.any():
            grouped[nan] = -np.inf
        top = np.maximum.reduceat(grouped, self.starts)
        hits = np.flatnonzero(grouped == np.repeat(top, self.counts))  # every group attains its max at least once
        return top, self.perm[hits[np.searchsorted(hits, self.starts)]]

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


def _merge_sparse(key, rows, bins, counts, n_bins: int):
    """:func:`_merge_sparse_reference` by :func:`precision.analysis.fused.merge_histogram` (one merged key at a
    time, in cache) when every row's entries are one run, as :class:`Mergeable` keeps them; the same block."""
    if np.asarray(rows).size < COMPILED_MIN_POINTS:
        return _merge_sparse_reference(key, rows, bins, counts, n_bins)
    from precision.analysis.fused import merge_histogram  # (numba, imported when first needed)
    block = merge_histogram(key, _integers(rows), _integers(bins), _integers(counts), n_bins)
    return _merge_sparse_reference(key, rows, bins, counts, n_bins) if block is None else block


def _merge_sparse_reference(key, rows, bins, counts, n_bins: int):
    """Re-key a sparse histogram: its rows mapped by ``key`` (row -> coarse group), counts summed, sorted by
    (row, bin); the (3, n) int64 block of rows, bins and counts.

    The cells are (coarse group, bin) over the bins that occur only (numbered in bin order, so the order of
    the result is the same): a few hundred of the :data:`HIST_BINS` in practice, a table that many times
    smaller.
    """
    key = np.asarray(key, dtype=np.int64)
    rows, bins = _integers(rows), _integers(bins)
    occurs = np.zeros(n_bins, dtype=bool)
    occurs[bins] = True
    used = np.flatnonzero(occurs)  # the bins that occur, ascending
    rank = np.cumsum(occurs) - 1  # bin -> its number among them
    width = max(used.size, 1)
    codes = key[rows] * width + rank[bins]
    weights = np.asarray(counts)
    cells = (int(key.max()) + 1 if key.size else 0) * width
    if cells <= min(_DENSE_CELLS, _DENSE_PER_ENTRY * codes.size):
        dense = np.bincount(codes, weights, minlength=cells)
        merged = np.flatnonzero(dense)
        total = dense[merged]
    else:
        merged, inverse = np.unique(codes, return_inverse=True)
        total = np.bincount(inverse.ravel(), weights=weights, minlength=merged.size)
    block = np.empty((3, merged.size), dtype=np.int64)
    np.floor_divide(merged, width, out=block[0])
    np.take(used, merged % width, out=block[1])
    block[2] = total
    return block


def _integers(column) -> np.ndarray:
    """A histogram column's array as stored (int32 or int64, not copied); int64 if it is not integer (an empty
    frame's columns are float)."""
    a = np.asarray(column)
    return a if a.dtype.kind == "i" else a.astype(np.int64)


def hist_frame(rows, bins, counts) -> pd.DataFrame:
    """A sparse histogram's frame (columns row, bin, count) over its three arrays, not copied (a frame built
    from three columns by default copies them into one block)."""
    return pd.DataFrame({"row": rows, "bin": bins, "count": counts}, copy=False)


def packed_histogram(hist) -> np.ndarray:
    """A sparse histogram's (rows, bins, counts) as one stored matrix: int32 while every entry fits (half the
    bytes of the task results and caches), else int64; read back in that dtype (:meth:`Mergeable.from_arrays`;
    merges widen what they compute, never the entries they only carry)."""
    stacked = np.stack([np.asarray(a, dtype=np.int64) for a in hist])
    fits = stacked.size == 0 or (int(stacked.min()) >= 0 and int(stacked.max()) < 2**31)
    return stacked.astype(np.int32) if fits else stacked


class Mergeable:
    """Statistics of groups as a frame of sums and maxima plus a sparse histogram, merged by key columns.

    Subclasses name their summed columns (``SUMS``), their maxima and the
    column prefix of each maximum's witness (``MAXIMA``: a witness column is
    copied from the first row attaining the maximum), and their histogram's
    bin count (``BINS``).  ``frame`` has one row per group; ``hist`` has
    integer columns ``row`` (index of the frame row), ``bin`` and ``count``
    (int32 as the tasks store them, int64 where a merge summed them), each
    row's entries contiguous and in ascending bin order (the rows themselves
    in any order: a merge that only reorders the groups renames their rows
    and moves no entry).
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
    def concat(cls, parts) -> "Mergeable":
        """One set of groups from several (their frames stacked, histogram rows re-indexed)."""
        parts = list(parts)
        frames, hists, offset = [], [], 0
        for p in parts:
            frames.append(p.frame)
            hists.append(p.hist.assign(row=_integers(p.hist["row"]).astype(np.int64) + offset))
            offset += len(p.frame)
        if not parts:
            return cls(pd.DataFrame(), pd.DataFrame({"row": [], "bin": [], "count": []}))
        return cls(pd.concat(frames, ignore_index=True), pd.concat(hists, ignore_index=True))

    def select(self, mask) -> "Mergeable":
        """The groups where ``mask`` (one bool per row) holds, with their histograms."""
        mask = np.asarray(mask, dtype=bool)
        new_row = np.cumsum(mask) - 1
        rows = self.hist["row"].to_numpy()
        keep = mask[rows] if rows.size else np.zeros(0, dtype=bool)
        hist = pd.DataFrame({"row": new_row[rows[keep]], "bin": self.hist["bin"].to_numpy()[keep],
                             "count": self.hist["count"].to_numpy()[keep]})
        return type(self)(self.frame[mask], hist)

    def with_columns(self, **columns) -> "Mergeable":
        """The same groups with key columns added (scalars or one value per group)."""
        return type(self)(self.frame.assign(**columns), self.hist)

    def merge(self, by, within: "Mergeable | None" = None) -> "Mergeable":
        """Groups merged by the key columns ``by`` (sorted by them; NaN keys are keys).

        Sums add, maxima take the max with the witness of their first row
        attaining it (in row order), histograms add.  ``within``: these groups
        already merged by keys that include ``by`` (a finer table of the same
        rows); its histogram is re-merged instead of this one's, with fewer
        entries and the same counts (integers add exactly in any order).  The
        sums and maxima always come from this frame.
        """
        out, key = self._merged_frame(by)
        if within is not None:
            source = within
            key = within.frame.groupby(list(by), sort=True, dropna=False).ngroup().to_numpy()
        else:
            source = self
        h = source.hist
        if key.size == len(out):  # one row per key: the rows are renamed, their histograms stay where they are
            return type(self)(out, hist_frame(key[_integers(h["row"])], _integers(h["bin"]), _integers(h["count"])))
        return type(self)(out, hist_frame(*_merge_sparse(key, h["row"], h["bin"], h["count"], self.BINS)))

    def merge_frame(self, by) -> pd.DataFrame:
        """The frame of :meth:`merge` alone (its sums and maxima), for a caller that reads no histogram."""
        return self._merged_frame(by)[0]

    def _merged_frame(self, by) -> tuple[pd.DataFrame, np.ndarray]:
        """(the merged frame, the merged row of each row of this frame)."""
        by = list(by)
        f = self.frame
        key = f.groupby(by, sort=True, dropna=False).ngroup().to_numpy()
        n = int(key.max()) + 1 if key.size else 0
        order = np.argsort(key, kind="stable")
        starts = np.searchsorted(key[order], np.arange(n))
        keys = f.iloc[order[starts]][by].reset_index(drop=True)
        columns = {col: keys[col] for col in by}  # (one frame built at the end: setting a column at a time
        for col in self._sums():                  # costs more than its arithmetic)
            total = np.bincount(key, f[col].to_numpy(np.float64), n)
            columns[col] = total.astype(np.int64) if np.issubdtype(f[col].dtype, np.integer) else total
        for col, prefix in self.MAXIMA.items():
            if col not in f.columns:  # optional maxima (the acceptance columns) absent from these groups
                continue
            v = f[col].to_numpy(np.float64)
            v = np.where(np.isnan(v), -np.inf, v)
            pick = np.lexsort((np.arange(v.size), -v, key))  # per key: largest first, then row order
            first = pick[np.searchsorted(key[pick], np.arange(n))]
            columns[col] = f[col].to_numpy()[first]
            none = np.isnan(columns[col].astype(np.float64))  # no point attained a maximum: no witness
            for wcol in (c for c in f.columns if c.startswith(prefix)):
                columns[wcol] = blank_missing(f[wcol].to_numpy()[first], none)
        return pd.DataFrame(columns), key

    def to_arrays(self, prefix: str) -> dict:
        """npz-storable arrays under ``prefix`` (:func:`precision.io.frames.frame_to_arrays`; the histogram as
        one matrix, :func:`packed_histogram`)."""
        out = frame_to_arrays(self.frame, prefix)
        out[f"{prefix}.hist"] = packed_histogram([self.hist[c].to_numpy(np.int64) for c in ("row", "bin", "count")])
        return out

    @classmethod
    def from_arrays(cls, arrays, prefix: str) -> "Mergeable":
        """The inverse of :meth:`to_arrays`."""
        return cls(frame_from_arrays(arrays, prefix), hist_frame(*np.asarray(arrays[f"{prefix}.hist"])))


#: Summed columns of :class:`GroupStats`: points, points with a finite error and the sum of
#: their errors, Herbie bits, correctly rounded points, points over 1 ulp (specials included),
#: and one count per special class.
STAT_SUMS = ("count", "n_finite", "sum_ulp", "sum_bits", "n_correct", "over_1ulp") + SPECIAL_CLASSES
#: Columns of :meth:`GroupStats.table` after the key columns (witness columns follow their maximum).
STAT_COLUMNS = ("count", "max_ulp", "max_finite_ulp", "mean_ulp", "p50_ulp", "p99_ulp", "p999_ulp", "mean_bits",
                "share_correct", "over_1ulp") + SPECIAL_CLASSES


def histogram_quantiles(keys, bins, counts, qs, edge=bin_upper_edge) -> np.ndarray:
    """:func:`precision.analysis.histograms.histogram_quantiles`; from :data:`COMPILED_MIN_POINTS` entries, its
    entries found in one compiled pass (:func:`precision.analysis.fused.quantile_entries`), the same values."""
    keys = np.asarray(keys, dtype=np.int64)
    if keys.size < COMPILED_MIN_POINTS:
        return histograms.histogram_quantiles(keys, bins, counts, qs, edge)
    from precision.analysis.fused import quantile_entries  # (numba, imported when first needed)
    at = quantile_entries(keys, counts, qs)
    with np.errstate(invalid="ignore"):
        out = np.asarray(edge(np.asarray(bins)[np.maximum(at, 0)]), dtype=np.float64)
    out[at < 0] = np.nan
    return out


def _log2(values: np.ndarray) -> np.ndarray:
    """numpy's log2 of each value (-inf at 0, NaN at NaN), quietly."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log2(values)


def _msprobe_arrays(acceptance) -> tuple | None:
    """(computed, bench, bench_cast, fmt) of msprobe's standards from a reduce's ``acceptance`` argument, or None
    (no bench given, or a format msprobe has no standard for)."""
    if acceptance is None or len(acceptance) < 5 or get_format(acceptance[2]).name not in MSPROBE_PARAMETERS:
        return None
    computed, _, fmt, bench, cast = acceptance
    return tuple(np.asarray(a, dtype=np.float64).ravel() for a in (computed, bench, cast)) + (fmt,)


def _canonical_nan(sums: np.ndarray) -> np.ndarray:
    """Sums with every NaN the canonical one (a NaN's sign and payload depend on the order a compiler gives the
    operands of an addition, which IEEE 754 leaves open)."""
    return np.where(np.isnan(sums), np.nan, sums)


class GroupStats(Mergeable):
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
    SUM_PREFIXES = ("fired_", "acc_", "ms_")
    MAXIMA = {"max_ulp": "witness_", "max_finite_ulp": "finite_witness_", **ACCEPTANCE_MAXIMA, **MSPROBE_MAXIMA}
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
        acceptance : tuple (computed, golden, fmt[, bench, bench_cast]), optional
            Adds the acceptance standards' columns (:func:`acceptance_columns`,
            witnesses from ``witness``); with msprobe's bench (float64) and
            the bench cast to the format, msprobe's
            (:func:`precision.analysis.msprobe.msprobe_columns`).

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
        return {**frame_to_arrays(columns, prefix), f"{prefix}.hist": packed_histogram(hist)}

    @staticmethod
    def _reduce_columns(grouping: Grouping, err_ulp, err_bits, classes, witness, counts,
                        acceptance=None) -> tuple[dict, tuple]:
        """The columns of :meth:`reduce` as a dict of arrays, and its sparse histogram (rows, bins, counts): one
        compiled pass over the points (:func:`precision.analysis.fused.reduce_error_groups`), equal bit for bit to
        :meth:`_reduce_columns_reference` (from :data:`COMPILED_MIN_POINTS` points)."""
        err = np.asarray(err_ulp, dtype=np.float64).ravel()
        if err.size < COMPILED_MIN_POINTS:
            return GroupStats._reduce_columns_reference(grouping, err_ulp, err_bits, classes, witness, counts,
                                                        acceptance)
        from precision.analysis import fused  # (numba, imported when first needed)
        counts = {name: np.asarray(m, dtype=bool).ravel() for name, m in (counts or {}).items()}
        acting = [name for name, m in counts.items() if m.any()]  # (most decision masks are all false)
        decisions = np.stack([counts[name] for name in acting]) if acting else None
        extra = {}
        if acceptance is not None:
            computed, golden, fmt = acceptance[:3]
            extra = dict(computed=np.asarray(computed, dtype=np.float64).ravel(),
                         golden=np.asarray(golden, dtype=np.float64).ravel(), **acceptance_parameters(fmt))
        msprobe = _msprobe_arrays(acceptance)
        tally, sums, top, at, hist = fused.reduce_error_groups(
            grouping.perm, grouping.starts, grouping.counts, err, np.asarray(err_bits).ravel(),
            np.asarray(classes).ravel(), _log2(err), decisions, **extra)
        ids = grouping.ids
        names = (*fused.COUNTS, *acting, *((*ACCEPTANCE_COUNTS, *extra["names"]) if extra else ()))
        counted = dict(zip(names, tally.T))
        total = {name: _canonical_nan(v) if name.startswith("acc_") else v for name, v in zip(fused.SUMS, sums.T)}
        largest = {name: (v, np.where(v == -np.inf, np.nan, v), v == -np.inf, i)
                   for name, v, i in zip(fused.MAXIMA, top.T, at.T)}  # value, reported, none, first point
        frame = {"group": ids, "count": grouping.counts.astype(np.int64), "n_finite": counted["n_finite"],
                 "sum_ulp": total["sum_ulp"], "sum_bits": total["sum_bits"], "n_correct": counted["n_correct"],
                 "over_1ulp": counted["over_1ulp"], **{name: counted[name] for name in SPECIAL_CLASSES}}
        frame["max_ulp"] = largest["max_ulp"][0]
        frame["max_finite_ulp"] = largest["max_finite_ulp"][1]
        witness = {name: np.asarray(values).ravel() for name, values in (witness or {}).items()}
        for name, v in witness.items():
            frame[f"witness_{name}"] = v[largest["max_ulp"][3]]
            frame[f"finite_witness_{name}"] = blank_missing(v[largest["max_finite_ulp"][3]],
                                                            largest["max_finite_ulp"][2])
        frame.update({name: counted.get(name, np.zeros(ids.size, dtype=np.int64)) for name in counts})
        if acceptance is not None:
            frame["acc_sum_r"], frame["acc_sum_sq"] = total["acc_sum_r"], total["acc_sum_sq"]
            frame.update({name: counted[name] for name in (*ACCEPTANCE_COUNTS, *extra["names"])})
            for col, prefix in ACCEPTANCE_MAXIMA.items():
                _, reported, none, first = largest[col]
                frame[col] = reported
                for name, v in witness.items():
                    frame[f"{prefix}{name}"] = blank_missing(v[np.maximum(first, 0)], none)
        if msprobe is not None:
            c, bench, cast, fmt = msprobe
            ms_counts, ms_sums, ms_top = fused.reduce_msprobe_groups(
                grouping.perm, grouping.starts, grouping.counts, c, bench, cast, msprobe_parameters(fmt),
                overflow_bound(fmt), get_format(fmt).name == "fp32")
            frame.update(zip(MSPROBE_COUNTS, ms_counts.T))
            frame.update((name, _canonical_nan(v)) for name, v in zip(MSPROBE_SUMS, ms_sums.T))
            frame.update((name, np.where(v == -np.inf, np.nan, v)) for name, v in zip(MSPROBE_MAXIMA, ms_top.T))
        return frame, hist

    @staticmethod
    def _reduce_columns_reference(grouping: Grouping, err_ulp, err_bits, classes, witness, counts,
                                  acceptance=None) -> tuple[dict, tuple]:
        """The columns of :meth:`reduce` as numpy defines them (what
        :func:`precision.analysis.fused.reduce_error_groups` is tested against, bit for bit), and its sparse
        histogram (rows, bins, counts)."""
        err = np.asarray(err_ulp, dtype=np.float64).ravel()
        cls_ = np.asarray(classes).ravel()
        finite = np.isfinite(err)
        all_finite = finite.all()
        top, at = grouping.argmax(err if all_finite else np.where(np.isnan(err), np.inf, err))
        ftop, fat = (top, at) if all_finite else grouping.argmax(np.where(finite, err, -np.inf))
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
            frame[f"finite_witness_{name}"] = blank_missing(v[fat], ftop == -np.inf)
        frame.update({name: tallied[name] for name in (counts or {})})
        if acceptance is not None:
            computed, golden, fmt = acceptance[:3]
            columns = acceptance_columns(grouping, computed, golden, err, fmt, witness)
            frame.update(columns, acc_sum_r=_canonical_nan(columns["acc_sum_r"]),
                         acc_sum_sq=_canonical_nan(columns["acc_sum_sq"]))
        msprobe = _msprobe_arrays(acceptance)
        if msprobe is not None:
            columns = msprobe_columns(grouping, *msprobe)
            frame.update(columns, **{name: _canonical_nan(columns[name]) for name in MSPROBE_SUMS})
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
        out = {c: f[c] for c in keys}  # (the frame built once, at the end)
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
        return pd.DataFrame(out, index=f.index)


# ---------------------------------------------------------------------------
# One set of points
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
