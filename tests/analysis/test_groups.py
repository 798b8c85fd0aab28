"""Tests of precision.analysis.groups: group statistics against a loop, merges, tallies, summaries."""

import math

import numpy as np
import pandas as pd
import pytest

import precision.analysis.groups as groups_module
from precision.analysis.groups import GroupStats, Grouping, summarize
from precision.analysis.histograms import HIST_BINS, histogram_quantiles, quantile_upper_bound
from precision.analysis.scoring import CLASS_NAN, CLASS_OK


def _reduce_loop(group, err, bits, cls):
    """The group statistics by a plain loop: the definition GroupStats must match."""
    rows = {}
    for g in sorted(set(group)):
        m = group == g
        e = err[m]
        fin = np.isfinite(e)
        em = np.where(np.isnan(e), np.inf, e)
        rows[g] = dict(count=int(m.sum()), n_finite=int(fin.sum()), sum_ulp=float(e[fin].sum()),
                       sum_bits=float(bits[m].sum()), n_correct=int((bits[m] == 0).sum()),
                       over_1ulp=int((~(e <= 1)).sum()), nan=int((cls[m] == CLASS_NAN).sum()),
                       max_ulp=float(em.max()), witness=int(np.flatnonzero(m)[np.argmax(em)]),
                       max_finite_ulp=float(e[fin].max()) if fin.any() else math.nan)
    return rows


class TestGroupStats:
    @pytest.fixture
    def scores(self):
        rng = np.random.default_rng(3)
        n = 4000
        group = rng.integers(0, 9, n)
        err = rng.exponential(3.0, n) * (rng.random(n) < 0.7)
        err[rng.integers(0, n, 25)] = np.inf
        bits = np.where(err == 0, 0.0, np.log2(1 + np.ceil(np.nan_to_num(err, posinf=99))))
        cls = np.where(np.isinf(err), CLASS_NAN, CLASS_OK).astype(np.int8)
        return group, err, bits, cls

    def test_reduce_matches_the_loop_definition(self, scores):
        group, err, bits, cls = scores
        s = GroupStats.reduce(Grouping(group, 10), err, bits, cls, witness={"index": np.arange(err.size)})
        f = s.frame.set_index("group")
        for g, row in _reduce_loop(group, err, bits, cls).items():
            for k, v in row.items():
                got = f.loc[g, "witness_index" if k == "witness" else k]
                assert got == pytest.approx(v, nan_ok=True, rel=1e-12), (g, k)

    def test_merge_of_parts_equals_reduce_of_whole(self, scores):
        group, err, bits, cls = scores
        whole = GroupStats.reduce(Grouping(np.zeros(err.size, int), 1), err, bits, cls,
                                  witness={"index": np.arange(err.size)}).table()
        fine = GroupStats.reduce(Grouping(group, 10), err, bits, cls, witness={"index": np.arange(err.size)})
        merged = fine.with_columns(all=0).merge(["all"]).table(["all"])
        for col in ("count", "max_ulp", "max_finite_ulp", "mean_ulp", "mean_bits", "share_correct", "over_1ulp",
                    "nan", "p50_ulp", "p99_ulp", "p999_ulp"):
            assert merged[col].iloc[0] == pytest.approx(whole[col].iloc[0], rel=1e-12), col
        # the witness of the max: the first point attaining it, in (fine group, element) order
        assert whole["witness_index"].iloc[0] == int(np.argmax(np.isinf(err)))
        at_max = np.flatnonzero(np.isinf(err))
        assert merged["witness_index"].iloc[0] == at_max[np.lexsort((at_max, group[at_max]))[0]]

    def test_merged_histogram_counted_densely_or_by_sorting_alike(self, scores, monkeypatch):
        """The histogram of a merge, whichever way its cells are counted (a dense table when they are few
        per entry, else sorted entries): the same rows, bins and counts."""
        group, err, bits, cls = scores
        fine = GroupStats.reduce(Grouping(group, 10), err, bits, cls)
        fine = fine.with_columns(half=fine.frame["group"].to_numpy() // 5)
        sorted_ = fine.merge(["half"]).hist
        monkeypatch.setattr(groups_module, "_DENSE_PER_ENTRY", 1 << 40)
        dense = fine.merge(["half"]).hist
        pd.testing.assert_frame_equal(sorted_, dense)
        assert sorted_["count"].sum() == err.size and set(sorted_["row"]) == {0, 1}

    def test_a_merge_within_a_finer_merge_is_the_same_merge(self, scores):
        """Merging by ``half`` from the groups merged by (half, third) first: the same frame (from the fine
        rows), the same histogram (re-merged from the finer one's fewer entries); the frame alone alike."""
        group, err, bits, cls = scores
        fine = GroupStats.reduce(Grouping(group, 10), err, bits, cls)
        g = fine.frame["group"].to_numpy()
        fine = fine.with_columns(half=g // 5, third=g % 3)
        finer = fine.merge(["half", "third"])
        direct, within = fine.merge(["half"]), fine.merge(["half"], within=finer)
        assert len(finer.hist) < len(fine.hist) and len(within.hist) < len(finer.hist)
        pd.testing.assert_frame_equal(within.frame, direct.frame)
        pd.testing.assert_frame_equal(within.hist, direct.hist)
        pd.testing.assert_frame_equal(fine.merge_frame(["half"]), direct.frame)
        assert within.hist["count"].sum() == err.size

    def test_quantiles_are_upper_bounds(self, scores):
        group, err, bits, cls = scores
        t = GroupStats.reduce(Grouping(np.zeros(err.size, int), 1), err, bits, cls).table()
        srt = np.sort(err)
        for col, q in (("p50_ulp", 0.5), ("p99_ulp", 0.99)):
            exact = srt[int(np.ceil(q * err.size)) - 1]
            assert exact <= t[col].iloc[0] <= exact * 2 ** (1 / 16)

    def test_arrays_round_trip(self, scores):
        group, err, bits, cls = scores
        s = GroupStats.reduce(Grouping(group, 10), err, bits, cls)
        back = GroupStats.from_arrays(s.to_arrays("x"), "x")
        pd.testing.assert_frame_equal(back.table(), s.table())


class TestSummarize:
    def test_numbers(self):
        err = np.array([0.0, 0.25, 0.5, 3.0, np.inf])
        bits = np.array([0.0, 0.0, 0.0, 2.0, 32.0])
        cls = np.array([0, 0, 0, 0, CLASS_NAN], dtype=np.int8)
        s = summarize(err, bits, cls)
        assert s.count == 5 and s.max_ulp == math.inf and s.witness == 4 and s.max_finite_ulp == 3.0
        assert s.mean_ulp == pytest.approx(3.75 / 4)
        assert s.share_correct == 0.6 and s.count_over_1ulp == 2 and s.count_nan == 1
        assert s.mean_bits == pytest.approx(34 / 5)

    def test_witness_is_first_max(self):
        s = summarize(np.array([1.0, 7.0, 7.0]), np.zeros(3), np.zeros(3, np.int8))
        assert s.witness == 1 and s.max_ulp == 7.0 and 7.0 <= s.p50_ulp <= 7.0 * 2 ** (1 / 16)

    def test_empty(self):
        assert summarize([], [], []).count == 0


@pytest.mark.parametrize("n, n_groups", [(7, 3), (40, 12), (5000, 9)])
def test_tally_counts_each_mask_and_code_per_group(n, n_groups):
    """Every tally equals the count of its own mask per nonempty group (an all-false mask included)."""
    rng = np.random.default_rng(n)
    group = rng.integers(0, n_groups, n)
    grouping = Grouping(group, n_groups)
    masks = {f"m{i}": rng.random(n) < 0.3 for i in range(13)}
    masks["never"] = np.zeros(n, dtype=bool)
    codes = rng.integers(0, 6, n)
    out = grouping.tally(masks, {"code": (codes, {1: "one", 3: "three", 5: "five"})})
    nonempty = np.unique(group)

    def count(mask):
        return np.bincount(group[mask], minlength=n_groups)[nonempty]
    for name, mask in masks.items():
        np.testing.assert_array_equal(out[name], count(mask))
        assert out[name].dtype == np.int64
    for value, name in ((1, "one"), (3, "three"), (5, "five")):
        np.testing.assert_array_equal(out[name], count(codes == value))


def test_a_mask_named_several_times_is_counted_once_each_name_its_own_array(monkeypatch):
    """One array under several names (a variant's guards that fire nowhere share one mask) is counted once; each
    name gets its own counts array (writing one changes no other)."""
    grouping = Grouping(np.array([0, 1, 1, 2, 2, 2]), 3)
    shared, other = np.array([1, 0, 1, 1, 0, 1], dtype=bool), np.array([0, 0, 0, 0, 0, 1], dtype=bool)
    counted = []
    real = Grouping.count
    monkeypatch.setattr(Grouping, "count", lambda self, mask: counted.append(mask) or real(self, mask))
    out = grouping.tally({"a": shared, "b": other, "c": shared, "d": shared})
    assert len(counted) == 2 and counted[0] is shared and counted[1] is other
    assert [out[k].tolist() for k in "abcd"] == [[1, 1, 2], [0, 0, 1], [1, 1, 2], [1, 1, 2]]
    out["a"][0] = 99
    assert out["c"].tolist() == [1, 1, 2] and out["d"].tolist() == [1, 1, 2]
    assert len({id(out[k]) for k in "abcd"}) == 4


def test_counts_of_a_read_only_mask_are_kept_and_of_a_writable_one_recounted():
    """A read-only mask's counts are kept for its next count (the same array, the same view); a writable mask,
    another view of the same array and another read-only array are counted afresh."""
    group = np.array([0, 1, 1, 2, 2, 2, 0, 1])
    grouping = Grouping(group, 3)
    whole = np.array([True, False, True, True, False, True, False, False,
                      False, True, True, False, False, False, True, True])
    whole.flags.writeable = False
    first, second = whole[:8], whole[8:]
    assert grouping.count(first).tolist() == [1, 1, 2]
    assert grouping.count(second).tolist() == [1, 3, 0]  # another view of the same array: its own counts
    kept = grouping.count(first)
    assert kept.tolist() == [1, 1, 2]
    kept[:] = 99  # (a caller's copy: the kept counts are not handed out)
    assert grouping.count(first).tolist() == [1, 1, 2]
    writable = first.copy()
    assert grouping.count(writable).tolist() == [1, 1, 2]
    writable[:] = True  # a writable mask may change between counts: counted afresh
    assert grouping.count(writable).tolist() == [2, 3, 3]
    assert grouping.count(np.broadcast_to(whole[8:], (8,))).tolist() == [1, 3, 0]  # a view of a view


@pytest.mark.parametrize("seed", range(6))
def test_argmax_is_each_groups_max_at_its_first_point(seed):
    """NaN counts as -inf; ties go to the first point in element order; a group of NaN gives -inf at its first."""
    rng = np.random.default_rng(seed)
    n, n_groups = 300, 7
    group = rng.integers(0, n_groups, n)
    values = rng.integers(0, 5, n).astype(np.float64)  # many ties
    values[rng.random(n) < 0.2] = np.nan
    values[group == 3] = np.nan
    top, at = Grouping(group, n_groups).argmax(values)
    for row, g in enumerate(np.unique(group)):
        members = np.flatnonzero(group == g)
        v = np.where(np.isnan(values[members]), -np.inf, values[members])
        assert top[row] == v.max() and at[row] == members[np.argmax(v)]


def test_a_merge_that_reorders_the_groups_renames_their_histogram_rows():
    """One group per key: the merge sorts the groups and renames their rows; each group keeps its own
    histogram entries (contiguous, bins ascending) and so its quantiles."""
    rng = np.random.default_rng(11)
    group = rng.integers(0, 12, 2000)
    err = np.exp2(rng.uniform(-6, 12, group.size))
    fine = GroupStats.reduce(Grouping(group, 12), err, np.zeros(group.size), np.zeros(group.size, np.int8))
    fine = fine.with_columns(key=rng.permutation(len(fine)))
    merged = fine.merge(["key"])
    assert merged.frame["key"].tolist() == sorted(fine.frame["key"])
    h, old = merged.hist, fine.hist
    for new_row, old_row in enumerate(np.argsort(fine.frame["key"].to_numpy())):
        mine, theirs = h[h["row"] == new_row], old[old["row"] == old_row]
        assert np.array_equal(mine["bin"], theirs["bin"]) and np.array_equal(mine["count"], theirs["count"])
        assert np.all(np.diff(np.flatnonzero(h["row"].to_numpy() == new_row)) == 1)  # contiguous
    q = ["p50_ulp", "p99_ulp", "p999_ulp"]
    pd.testing.assert_frame_equal(merged.table(["key"])[q].reset_index(drop=True),
                                  fine.table(["key"]).sort_values("key")[q].reset_index(drop=True))


@pytest.mark.parametrize("by", [["a"], []])
def test_groups_without_rows_merge_to_groups_without_rows(by):
    """An empty set of groups (its histogram's columns are float, having no values) merges, renamed or summed,
    to an empty one with an int64 histogram."""
    empty = GroupStats.concat([]).with_columns(a=[])
    merged = empty.merge(by) if by else empty.merge(["a"], within=empty.merge(["a"]))
    assert len(merged) == 0 and len(merged.hist) == 0
    assert [str(t) for t in merged.hist.dtypes] == ["int64"] * 3
    block = groups_module._merge_sparse(np.array([0, 0, 1]), np.array([]), np.array([]), np.array([]), HIST_BINS)
    assert block.shape == (3, 0) and block.dtype == np.int64  # groups whose histograms hold no entry


def test_quantiles_of_blocks_in_any_order_equal_those_of_the_sorted_histogram():
    rng = np.random.default_rng(12)
    for _ in range(40):
        K = int(rng.integers(1, 9))
        blocks = [(k, np.unique(rng.integers(0, 300, int(rng.integers(1, 12))))) for k in range(K)]
        keys = np.concatenate([np.full(b.size, k) for k, b in blocks])
        bins = np.concatenate([b for _, b in blocks])
        counts = rng.integers(1, 50, bins.size)
        qs = (0.5, 0.9, 0.999)
        expected = histogram_quantiles(keys, bins, counts, qs)
        order = np.concatenate([np.flatnonzero(keys == k) for k in rng.permutation(K)])
        np.testing.assert_array_equal(histogram_quantiles(keys[order], bins[order], counts[order], qs), expected)
        for k, b in blocks:  # the definition, one group at a time
            c = counts[keys == k]
            for j, q in enumerate(qs):
                assert expected[k, j] == quantile_upper_bound(b, c, q)


@pytest.mark.parametrize("dense", [True, False])
def test_merged_histogram_sums_the_counts_of_each_new_row_and_bin(dense, monkeypatch):
    """The merge counts only the bins that occur (a few, far apart among HIST_BINS): the same cells as a sum
    over (new row, bin), sorted, whichever way they are counted."""
    monkeypatch.setattr(groups_module, "_DENSE_PER_ENTRY", (1 << 40) if dense else 0)
    rng = np.random.default_rng(7)
    for _ in range(30):
        n = int(rng.integers(1, 40))
        rows = np.sort(rng.integers(0, n, int(rng.integers(0, 200))))
        bins = rng.choice(np.array([0, 1, 2, 700, 701, 5000, HIST_BINS - 2, HIST_BINS - 1]), rows.size)
        counts = rng.integers(1, 2**40, rows.size)
        key = rng.integers(0, 5, n)
        block = groups_module._merge_sparse(key, rows, bins, counts, HIST_BINS)
        assert block.dtype == np.int64 and block.shape == (3, block.shape[1])
        expected = pd.DataFrame({"row": key[rows], "bin": bins, "count": counts}).groupby(
            ["row", "bin"], as_index=False)["count"].sum()
        for j, column in enumerate(("row", "bin", "count")):
            np.testing.assert_array_equal(block[j], expected[column].to_numpy(np.int64))


def test_histograms_are_stored_as_int32_and_read_back_as_stored():
    g = GroupStats.reduce(Grouping(np.array([0, 0, 1, 1, 1]), 2), np.array([0.0, 3.0, 0.5, 0.5, np.inf]),
                          np.zeros(5), np.zeros(5, np.int8))
    arrays = g.to_arrays("stats")
    assert arrays["stats.hist"].dtype == np.int32
    back = GroupStats.from_arrays(arrays, "stats")
    assert all(back.hist[c].dtype == np.int32 for c in ("row", "bin", "count"))
    pd.testing.assert_frame_equal(back.hist, g.hist.astype(np.int32))
    # an entry beyond int32 keeps int64
    wide = groups_module.packed_histogram([np.array([0]), np.array([1]), np.array([2**31])])
    assert wide.dtype == np.int64 and wide[2, 0] == 2**31


def test_int32_histograms_merge_to_the_int64_merge_entry_for_entry():
    """Histograms carried as stored (int32) merge, reorder, concatenate and select exactly as widened ones."""
    rng = np.random.default_rng(3)
    group = rng.integers(0, 40, 5000)
    err = np.where(rng.random(5000) < 0.1, 0.0, np.exp2(rng.uniform(-30, 30, 5000)))
    g = GroupStats.reduce(Grouping(group, 40), err, np.zeros(5000), np.zeros(5000, np.int8))
    g = g.with_columns(a=g.frame["group"].to_numpy() % 3, b=g.frame["group"].to_numpy() % 5)
    narrow = GroupStats(g.frame, g.hist.astype(np.int32))
    wide = GroupStats(g.frame, g.hist.astype(np.int64))
    for by in (["a"], ["b", "a"], ["group"]):  # ["group"]: one row per key, the rows only renamed
        m32, m64 = narrow.merge(by), wide.merge(by)
        pd.testing.assert_frame_equal(m32.frame, m64.frame)
        pd.testing.assert_frame_equal(m32.hist.astype(np.int64), m64.hist)
        pd.testing.assert_frame_equal(m32.table(by), m64.table(by))
    both = GroupStats.concat([narrow, narrow])
    assert both.hist["row"].dtype == np.int64 and both.hist["row"].max() == 2 * len(g) - 1
    pd.testing.assert_frame_equal(both.merge(["a"]).table(["a"]), GroupStats.concat([wide, wide]).merge(["a"]).table(["a"]))
    pd.testing.assert_frame_equal(narrow.select(g.frame["a"].to_numpy() == 1).hist.astype(np.int64),
                                  wide.select(g.frame["a"].to_numpy() == 1).hist)
