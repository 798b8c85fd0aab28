"""The bracket's cancellation factor C and the root neighbourhood (precision.bracket), against mpmath."""

import mpmath
import numpy as np
import pytest

from precision.bracket import (ROOT_NEIGHBOURHOOD_C, band_labels, bracket_band, cancellation_factor,
                               neighbourhood)


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


def test_one_without_roots():
    s = np.linspace(-50, 50, 101)
    for g in (-1.0, -0.5, 0.0, 2.0):
        assert (cancellation_factor(s, g) == 1.0).all()
        assert neighbourhood(g) == []


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
