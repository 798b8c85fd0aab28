"""Tests of precision.analysis.scoring: ulp error, bits, classes, group statistics, paired comparisons, verdicts."""

import math

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_array_equal
from scipy.stats import binomtest

from precision.analysis import scoring
from precision.sigmoid_focal_loss_grad.guards import evaluate
from precision.sigmoid_focal_loss_grad.oracle import gradient
from precision.analysis.scoring import (CLASS_INF, CLASS_LOST_INF, CLASS_NAN, CLASS_OK, CLASS_WRONG_SIGN, GARBAGE_ULP,
                                        GroupStats, Grouping, PairedStats, assert_max_ulp, bits_error, classify,
                                        compare_points, error_bits, sign_test, summarize, ulp_error, verdicts)


class TestUlpError:
    def test_half_ulp_and_exact(self):
        assert float(ulp_error(np.float32(1.0), 1.0 + 2.0**-24, "fp32")) == 0.5
        assert float(ulp_error(np.float32(1.0), 1.0, "fp32")) == 0.0

    def test_ulp_of_exact_binade_not_of_computed(self):
        # exact just below 2: ulp is 2^-23; computed 2.0 is 2^-24/2^-23 = 0.5 ulp away... of the exact binade
        exact = 2.0 - 2.0**-25
        assert float(ulp_error(np.float32(2.0), exact, "fp32")) == 2.0**-25 / 2.0**-23

    def test_double_double_exact(self):
        hi, lo = 1.0, 2.0**-60
        assert float(ulp_error(np.float32(1.0), (hi, lo), "fp32")) == 2.0**-60 / 2.0**-23

    def test_fp16_subnormal_quantum(self):
        assert float(ulp_error(np.float16(0.0), 3 * 2.0**-24, "fp16")) == 3.0

    def test_specials(self):
        assert float(ulp_error(np.float32(np.nan), 1.0, "fp32")) == math.inf
        assert float(ulp_error(np.float32(np.inf), 1.0, "fp32")) == math.inf
        # the exact value overflows fp16: the correctly rounded value is inf
        assert float(ulp_error(np.float16(np.inf), 70000.0, "fp16")) == 0.0
        assert float(ulp_error(np.float16(65504), 70000.0, "fp16")) == math.inf

    def test_signed_zero_is_no_error(self):
        assert float(ulp_error(np.float32(-0.0), 0.0, "fp32")) == 0.0


class TestBitsError:
    def test_values(self):
        got = bits_error(np.float32([1.0, np.nextafter(np.float32(1), np.float32(2)), np.nan, -0.0]),
                         np.float32([1.0, 1.0, 1.0, 0.0]), "fp32")
        assert_array_equal(got, [0.0, 1.0, 32.0, 0.0])

    def test_fp16_across_zero_does_not_wrap(self):
        assert float(bits_error(np.float16(1000), np.float16(-1000), "fp16")) == pytest.approx(math.log2(51105))


class TestClassify:
    def test_codes(self):
        c = classify(np.float32([1.0, np.nan, np.inf, -2.0, 0.0, np.inf, np.inf, 3.0e38, 0.0]),
                     np.float32([1.0, 1.0, 3.0, 2.0, -1e-30, np.inf, -np.inf, np.inf, np.inf]))
        assert_array_equal(c, [CLASS_OK, CLASS_NAN, CLASS_INF, CLASS_WRONG_SIGN, CLASS_OK, CLASS_OK,
                               CLASS_WRONG_SIGN, CLASS_LOST_INF, CLASS_LOST_INF])

    # Real operator points of each special class, found by sweeping kernel / naive over fp16 preds
    # (hex inputs; profile pred/dout; ieee machine).
    REAL = [
        # NaN where the exact value is a structural zero (alpha 0, t = 0): 0 * inf in the unselected algebra
        ("kernel", "-0x1.fcp+15", 0, 0.0, -2.0, "0x1p+0", "fp16", CLASS_NAN),
        # +inf where the correctly rounded value is -inf (the sign of an overflowing result is lost)
        ("kernel", "-0x1.6p+5", 1, 0.0, -2.0, "0x1p+0", "fp16", CLASS_WRONG_SIGN),
        # finite, of the wrong sign: +1.29e19 where the exact value is -1.29e19
        ("kernel", "-0x1.6p+5", 1, 0.0, -2.0, "0x1p+0", "fp32", CLASS_WRONG_SIGN),
        # a truncating store (G8 off) gives -65504 where the correctly rounded value is -inf
        ("naive", "-0x1.134p+4", 1, 0.0, -2.0, "0x1p+0", "fp16", CLASS_LOST_INF),
        ("kernel-G8", "-0x1.134p+4", 1, 0.0, -2.0, "0x1p+0", "fp16", CLASS_LOST_INF),
        # +inf where the correctly rounded value is 60000: the kernel's q = 1 - p is 7.75x too large
        ("kernel", "0x1.0ap+4", 0, 0.25, 2.0, "-0x1.2ec7c6p+88", "fp16/fp32", CLASS_INF),
    ]

    @pytest.mark.parametrize("variant,pred,t,alpha,gamma,dout,profile,expected", REAL)
    def test_real_operator_points(self, variant, pred, t, alpha, gamma, dout, profile, expected):
        fmt, dfmt = (profile.split("/") + [profile])[:2]
        dtype = {"fp16": np.float16, "fp32": np.float32}
        x = np.array([[float.fromhex(pred)]], dtype[fmt])
        d = np.array([[float.fromhex(dout)]], dtype[dfmt])
        got = evaluate(variant, x, np.array([[t]], np.int32), d, alpha=alpha, gamma=gamma, reduction="none",
                       machine="ieee")
        rounded = gradient(float(x[0, 0]), t, alpha, gamma, dout=float(d[0, 0]), fmt=fmt)
        assert int(classify(got, rounded)[0, 0]) == expected
        assert float(ulp_error(got, float(gradient(float(x[0, 0]), t, alpha, gamma, dout=float(d[0, 0]),
                                                    fmt="fp64")), fmt, rounded)[0, 0]) > 1


class TestErrorBits:
    def test_values(self):
        assert_array_equal(error_bits([0.0, 1.0, 3.0, np.inf, np.nan]), [0.0, 1.0, 2.0, np.inf, np.inf])


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
        monkeypatch.setattr(scoring, "_DENSE_PER_ENTRY", 1 << 40)
        dense = fine.merge(["half"]).hist
        pd.testing.assert_frame_equal(sorted_, dense)
        assert sorted_["count"].sum() == err.size and set(sorted_["row"]) == {0, 1}

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


class TestComparePoints:
    def test_outcomes(self):
        #          better tied  worse  garbage  fixed(cr) fixed(2^12) caused both-special unchanged
        ew = np.array([0.3, 2.0, 5.0, 3e6, 0.4, 4096.0, np.inf, np.inf, 1.0])
        eo = np.array([0.9, 2.0, 1.0, 5e6, np.inf, np.inf, 0.5, np.inf, 1.0])
        cw = np.array([0, 0, 0, 0, 0, 0, CLASS_NAN, CLASS_NAN, 0], np.int8)
        co = np.array([0, 0, 0, 0, CLASS_NAN, CLASS_INF, 0, CLASS_INF, 0], np.int8)
        changed = np.array([True] * 8 + [False])
        outcome, fix, delta = compare_points(ew, cw, eo, co, changed)
        assert_array_equal(outcome, [1, 3, 2, 4, 1, 1, 2, 4, 0])
        assert_array_equal(fix, [0, 0, 0, 0, 1, 4, 0, 0, 0])
        assert delta[0] == pytest.approx(math.log2(1.9) - math.log2(1.3))
        assert delta[4] == np.inf and delta[6] == -np.inf and np.isnan(delta[3]) and np.isnan(delta[8])

    def test_garbage_needs_both_sides_over_the_threshold(self):
        outcome, _, _ = compare_points([GARBAGE_ULP * 2], [0], [GARBAGE_ULP / 2], [0], [True])
        assert outcome[0] == 2  # worse, not garbage: without the guard it was under 2^20 ulp

    def test_special_against_garbage_is_both_garbage(self):
        """One verdict rule: a special on one side and over 2^20 ulp on the other is no evidence either way,
        in both directions (caused and fixed), and no fix is counted."""
        ew = np.array([np.inf, 3e6, GARBAGE_ULP, np.inf])
        eo = np.array([8.4e6, np.inf, np.inf, GARBAGE_ULP])
        cw = np.array([CLASS_NAN, 0, 0, CLASS_NAN], np.int8)
        co = np.array([0, CLASS_INF, CLASS_INF, 0], np.int8)
        outcome, fix, delta = compare_points(ew, cw, eo, co, np.ones(4, bool))
        # exactly 2^20 ulp is not over it: the last two are a fix (<= 2^20) and a special caused
        assert_array_equal(outcome, [4, 4, 1, 2])
        assert_array_equal(fix, [0, 0, 4, 0])
        assert np.isnan(delta[0]) and np.isnan(delta[1]) and delta[2] == np.inf and delta[3] == -np.inf

    def test_paired_stats_counts_and_median(self):
        rng = np.random.default_rng(7)
        n = 3000
        eo = rng.exponential(2.0, n)
        ew = eo * np.where(rng.random(n) < 0.6, 0.5, 2.0)
        changed = np.ones(n, bool)
        o, f, d = compare_points(ew, np.zeros(n, np.int8), eo, np.zeros(n, np.int8), changed)
        t = PairedStats.reduce(Grouping(np.zeros(n, int), 1), o, f, d, changed).table()
        assert t["better"].iloc[0] == int((ew < eo).sum()) and t["worse"].iloc[0] == int((ew > eo).sum())
        assert t["changed"].iloc[0] == n and t["verdict"].iloc[0] == "helps"
        assert abs(t["median_change_bits"].iloc[0] - np.median(d)) <= 1 / 64
        assert t["max_gain_bits"].iloc[0] == pytest.approx(d.max())


class TestSignTest:
    @pytest.mark.parametrize("b,w", [(3, 0), (10, 2), (50, 50), (0, 0), (120, 80), (7, 31)])
    def test_matches_scipy_binomtest(self, b, w):
        expected = 1.0 if b + w == 0 else binomtest(b, b + w, 0.5).pvalue
        assert float(sign_test([b], [w])[0]) == pytest.approx(expected, rel=1e-9)


def _row(changed, better, worse, fixed=0, caused=0, garbage=0):
    fb, fw = better - fixed, worse - caused
    return dict(changed=changed, better=better, worse=worse, specials_fixed=fixed, specials_caused=caused,
                finite_better=fb, finite_worse=fw, both_garbage=garbage,
                p_value=float(sign_test([better], [worse])[0]), p_specials=float(sign_test([fixed], [caused])[0]),
                p_finite=float(sign_test([fb], [fw])[0]))


class TestVerdicts:
    @pytest.mark.parametrize("row,expected", [
        (_row(0, 0, 0), "no_effect"),
        (_row(391000, 391000, 0, fixed=391000), "helps"),          # fixes NaN
        (_row(30000, 29000, 700), "helps"),                        # rounds better
        (_row(3, 3, 0), "inconclusive"),                           # three changes: noise
        (_row(40, 0, 0, garbage=40), "inconclusive"),              # changes only on garbage points
        (_row(500, 40, 460), "hurts"),
        (_row(5000, 1000 + 900, 3000, fixed=1000), "mixed"),       # fixes NaN, worsens finite outputs
        (_row(100, 55, 45), "inconclusive"),
    ])
    def test_rule(self, row, expected):
        assert verdicts(pd.DataFrame([row]))[0] == expected


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


class TestAssertMaxUlp:
    def test_passes_and_fails_with_witness(self):
        assert_max_ulp(np.float32([1.0]), [1.0 + 2.0**-24], "fp32", 0.5)
        with pytest.raises(AssertionError, match=r"max error is 2 ulp at index 1: got 0x1.0000080000000p\+0"):
            assert_max_ulp(np.float32([1.0, 1.0 + 2.0**-21]), [1.0, 1.0 + 2.0**-22], "fp32", 1.0)


class TestHistograms:
    def test_quantile_bounds_are_upper_bounds_within_resolution(self):
        from precision.analysis.scoring import HIST_SUBBINS, bin_upper_edge, histogram_bins, quantile_upper_bound
        rng = np.random.default_rng(4)
        err = np.concatenate([np.zeros(500), rng.exponential(2.0, 5000), [np.inf] * 3, [1e300]])
        bins, counts = np.unique(histogram_bins(err), return_counts=True)
        for q in (0.5, 0.99, 0.999):
            exact = np.sort(err)[int(np.ceil(q * err.size)) - 1]
            bound = quantile_upper_bound(bins, counts, q)
            assert exact <= bound <= exact * 2 ** (1 / HIST_SUBBINS) or exact == bound == 0
        assert np.all(err <= bin_upper_edge(histogram_bins(err)))

    def test_vectorized_group_quantiles_match_scalar(self):
        from precision.analysis.scoring import histogram_bins, histogram_quantiles, quantile_upper_bound
        rng = np.random.default_rng(5)
        keys_all, bins_all, counts_all, expected = [], [], [], []
        for k in range(7):
            err = rng.exponential(1.0 + k, 200 + 50 * k)
            b, c = np.unique(histogram_bins(err), return_counts=True)
            keys_all.append(np.full(b.size, k)); bins_all.append(b); counts_all.append(c)
            expected.append([quantile_upper_bound(b, c, q) for q in (0.5, 0.99, 0.999)])
        got = histogram_quantiles(np.concatenate(keys_all), np.concatenate(bins_all), np.concatenate(counts_all),
                                  (0.5, 0.99, 0.999))
        np.testing.assert_array_equal(got, np.array(expected))


def test_paired_table_gives_the_size_of_a_change():
    """Changed outputs: became correct / within 1 ulp, still garbage; median gain and loss in bits per side."""
    from precision.analysis.scoring import Grouping, PairedStats
    ok = CLASS_OK
    # with, without (ulp errors) at six changed points and one unchanged point
    ew = np.array([0.25, 0.9, 3.0, 2.0**21, 0.0, 7.0, 5.0])
    eo = np.array([3.0, 15.0, 0.4, 2.0**22, np.inf, 1.0, 5.0])
    cw = np.full(7, ok, np.int8)
    co = np.array([ok, ok, ok, ok, CLASS_INF, ok, ok], np.int8)
    changed = np.array([True] * 6 + [False])
    t = PairedStats.compare(Grouping(np.zeros(7, np.int64), 1), ew, cw, eo, co, changed).table()
    row = t.iloc[0]
    assert row["changed_became_correct"] == 2  # 3 -> 0.25 and inf -> 0 (0.4 -> 3 was correct already)
    assert row["changed_became_le_1ulp"] == 3  # also 15 -> 0.9
    assert row["changed_still_garbage"] == 1  # 2^22 -> 2^21 ulp
    gains = np.log2(1 + eo[:2]) - np.log2(1 + ew[:2])  # finite gains: 3 -> 0.25, 15 -> 0.9
    losses = np.log2(1 + ew[[2, 5]]) - np.log2(1 + eo[[2, 5]])
    # two values each: either is a median (histogram resolution 1/64 bit); never a value of the other side
    assert min(abs(row["median_gain_bits"] - gains)) <= 1 / 64
    assert min(abs(row["median_loss_bits"] - losses)) <= 1 / 64
    assert row["max_gain_bits"] == pytest.approx(gains.max())


@pytest.mark.parametrize("n, n_groups", [(7, 3), (40, 12), (5000, 9)])
def test_tally_equals_one_count_per_mask_and_code(n, n_groups):
    """However the fields are packed into passes (few points and many groups force several), every tally
    equals :meth:`Grouping.count` of its own mask."""
    rng = np.random.default_rng(n)
    grouping = Grouping(rng.integers(0, n_groups, n), n_groups)
    masks = {f"m{i}": rng.random(n) < 0.3 for i in range(13)}
    codes = rng.integers(0, 6, n)
    out = grouping.tally(masks, {"code": (codes, {1: "one", 3: "three", 5: "five"})})
    for name, mask in masks.items():
        np.testing.assert_array_equal(out[name], grouping.count(mask))
    for value, name in ((1, "one"), (3, "three"), (5, "five")):
        np.testing.assert_array_equal(out[name], grouping.count(codes == value))
