"""Tests of precision.analysis.paired: paired comparisons, the sign test, verdicts, the size of a change."""

import math

import numpy as np
import pandas as pd
import pytest
from numpy.testing import assert_array_equal
from scipy.stats import binomtest

from precision.analysis.groups import Grouping
from precision.analysis.paired import GARBAGE_ULP, PairedStats, compare_points, sign_test, verdicts
from precision.analysis.scoring import CLASS_INF, CLASS_NAN, CLASS_OK


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


def test_paired_table_gives_the_size_of_a_change():
    """Changed outputs: became correct / within 1 ulp, still garbage; median gain and loss in bits per side."""
    from precision.analysis.groups import Grouping
    from precision.analysis.paired import PairedStats
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


@pytest.mark.parametrize("compiled", [False, True])
def test_class_changes_among_garbage_pairs_are_counted(compiled, monkeypatch):
    """Outputs special or over 2^20 ulp on both sides are no evidence for the verdict, but a change of class among
    them (far-off finite made wrong-signed or NaN, and back, NaN made inf) is counted apart."""
    from precision.analysis import paired as paired_module
    from precision.analysis.groups import Grouping
    from precision.analysis.paired import PairedStats
    from precision.analysis.scoring import CLASS_NAN, CLASS_WRONG_SIGN
    ok, big = CLASS_OK, 2.0 ** 23
    # with, without: finite -> wrong sign, finite -> NaN, wrong sign -> finite, NaN -> inf, NaN -> NaN (payload
    # aside: unchanged), finite -> finite (both far off), and one evidence point (finite -> wrong sign, not garbage)
    cw = np.array([CLASS_WRONG_SIGN, CLASS_NAN, ok, CLASS_INF, CLASS_NAN, ok, CLASS_WRONG_SIGN], np.int8)
    co = np.array([ok, ok, CLASS_WRONG_SIGN, CLASS_NAN, CLASS_NAN, ok, ok], np.int8)
    ew = np.array([np.inf, np.nan, big, np.inf, np.nan, big, np.inf])
    eo = np.array([big, big, np.inf, np.nan, np.nan, 2 * big, 3.0])
    changed = np.array([True, True, True, True, False, True, True])
    n = 7
    if compiled:  # the compiled pass from this size on
        monkeypatch.setattr(paired_module, "COMPILED_MIN_POINTS", 1)
    t = PairedStats.compare(Grouping(np.zeros(n, np.int64), 1), ew, cw, eo, co, changed).table()
    row = t.iloc[0]
    assert (row["both_garbage"], row["specials_caused"]) == (5, 1)
    assert row["changed_garbage_made_special"] == 2  # finite -> wrong sign, finite -> NaN
    assert row["changed_garbage_made_finite"] == 1
    assert row["changed_garbage_special_changed"] == 1  # NaN -> inf
