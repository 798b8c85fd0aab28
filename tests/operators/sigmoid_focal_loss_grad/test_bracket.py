"""The bracket's cancellation factor C and the root neighbourhood (precision.operators.sigmoid_focal_loss_grad.bracket), against mpmath."""

import mpmath
import numpy as np
import pytest

from precision.operators.sigmoid_focal_loss_grad.bracket import (ROOT_NEIGHBOURHOOD_C, band_labels, band_ranges, bracket_band,
                                                       cancellation_factor, neighbourhood, selected_cancellation)


def c_exact(s, g):
    """C(s, g) at 60 digits: max(|u|, q) / |u - q|, u = g p ln p."""
    with mpmath.workdps(60):
        s = mpmath.mpf(s)
        p, q = 1 / (1 + mpmath.exp(-s)), 1 / (1 + mpmath.exp(s))
        u = g * p * mpmath.log(p)
        return max(abs(u), q) / abs(u - q)


@pytest.mark.parametrize("s,g", [(0.0, -2.0), (-0.5, -2.0), (-2.0, -3.0), (3.0, -1.5), (-40.0, -2.0),
                                 (30.0, -3.0), (1e-30, -2.5)])
def test_matches_mpmath(s, g):
    assert cancellation_factor(np.float64(s), g) == pytest.approx(float(c_exact(s, g)), rel=1e-9)


def test_one_when_terms_do_not_oppose():
    s = np.linspace(-50, 50, 101)
    for g in (0.0, 0.5, 2.0):
        assert (cancellation_factor(s, g) == 1.0).all()
    for g in (-1.0, -0.5, 0.0, 2.0):
        assert neighbourhood(g) == []  # no roots for gamma >= -1


@pytest.mark.parametrize("g,limit", [(-1.2, 6.0), (-1.5, 3.0), (-2.0, 2.0), (-3.0, 1.5), (-0.5, 2.0)])
def test_far_right_tends_to_the_ratio_of_the_terms(g, limit):
    # q and ln(p) underflow in float64 beyond s ~ 745; C does not: it tends to |g| / |g + 1|
    c = cancellation_factor(np.array([50.0, 745.0, 800.0, 65504.0, 3e38]), g)
    assert np.allclose(c, limit, rtol=1e-12)
    assert cancellation_factor(np.array([-800.0, -3e38]), g).tolist() == [1.0, 1.0]


def test_gamma_minus_one_cancels_without_bound():
    c = cancellation_factor(np.array([10.0, 30.0]), -1.0)
    assert float(c_exact(10.0, -1.0)) == pytest.approx(c[0], rel=1e-6)
    assert c[1] > 1e12


def test_open_neighbourhood_reaches_infinity():
    (lo, hi), = neighbourhood(-1.2)   # C -> 6 >= 4 as s -> inf
    assert hi == np.inf and float(c_exact(lo, -1.2)) == pytest.approx(ROOT_NEIGHBOURHOOD_C, rel=1e-9)


def test_neighbourhood_edges_are_where_c_crosses_the_threshold():
    for g in (-3.0, -2.0, -1.5):
        hood = neighbourhood(g)
        assert len(hood) == 1
        lo, hi = hood[0]
        for edge in (lo, hi):
            assert float(c_exact(edge, g)) == pytest.approx(ROOT_NEIGHBOURHOOD_C, rel=1e-9)
        mid = 0.5 * (lo + hi)
        assert cancellation_factor(mid, g) >= ROOT_NEIGHBOURHOOD_C
    # gamma = -2: the root of the bracket near s = -0.92 lies inside, s = 0 (C = 3.59) outside
    (lo, hi), = neighbourhood(-2.0)
    assert lo < -0.92 < hi < 0.0
    assert float(c_exact(0.0, -2.0)) == pytest.approx(3.5887, abs=1e-4)


def test_bands_follow_the_selector():
    x = np.array([-0.92, 0.92, 0.0, 5.0])
    edges = (2.0, 4.0, 16.0)
    b0 = bracket_band(x, np.zeros(4, int), -2.0, edges)   # A(x)
    b1 = bracket_band(x, np.ones(4, int), -2.0, edges)    # A(-x)
    assert b0.tolist() == [3, 1, 1, 1]
    assert b1.tolist() == [1, 3, 1, 0]
    both = bracket_band(x, np.full(4, 2), -2.0, edges)    # any other selector: the larger C
    assert both.tolist() == np.maximum(b0, b1).tolist()
    assert band_labels(edges) == ["C < 2", "C in [2, 4)", "C in [4, 16)", "C >= 16"]
    assert band_labels(()) == ["all"]
    # each label's edges, as numbers, in the labels' order
    assert band_ranges(edges) == [(1.0, 2.0), (2.0, 4.0), (4.0, 16.0), (16.0, np.inf)]
    assert band_ranges(()) == [(1.0, np.inf)] and len(band_ranges(edges)) == len(band_labels(edges))


def test_the_selected_cancellation_is_the_selected_terms():
    """Selector 0 takes A(x)'s C, selector 1 A(-x)'s, any other the larger (the hunt's and the bands' C)."""
    x = np.array([-0.92, 0.92, 0.0, 5.0, -3.0])
    for g in (-2.0, -0.5, 1.0):
        c_pos, c_neg = cancellation_factor(x, g), cancellation_factor(-x, g)
        for t, expected in ((0, c_pos), (1, c_neg), (2, np.maximum(c_pos, c_neg)), (-1, np.maximum(c_pos, c_neg))):
            np.testing.assert_array_equal(selected_cancellation(x, np.full(x.size, t), g), expected)
    assert selected_cancellation(x, np.zeros(x.size, int), -2.0)[0] > selected_cancellation(x, np.ones(x.size, int),
                                                                                            -2.0)[0]
