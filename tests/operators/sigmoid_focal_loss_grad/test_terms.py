"""Gradients derived from cached focal terms equal direct oracle evaluation, bit for bit."""

import numpy as np
import pytest

from precision.operators.sigmoid_focal_loss_grad import oracle
from precision.exact.formats import get_format
from precision.operators.sigmoid_focal_loss_grad.terms import (TermTable, absent_table, derive_gradient, focal_term_table,
                                                     focal_term_tables, selected_term_tables)


def random_points(n, seed):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(-30, 30, n // 2),
                        rng.standard_normal(n - n // 2) * 2.0 ** rng.integers(-20, 8, n - n // 2)])
    x = x.astype(np.float16).astype(np.float64)
    g = rng.choice(np.float32([-2, -1.5, -1, -0.5, 0, 0.5, 1, 2, 3, 5]), n).astype(np.float64)
    t = rng.choice([0, 1, 2, -1], n, p=[0.45, 0.45, 0.05, 0.05])
    a = rng.choice(np.float32([0, 0.25, 0.5, 0.75, 1, 2.0**-40, -0.5]), n).astype(np.float64)
    w = rng.choice([1.0, 0.0, 2.0**-24, 3.5, -2.0**-14, 65504.0], n)
    d = rng.choice([1.0, -1.0, 2.0**-24, 0.5, 1e4], n).astype(np.float16).astype(np.float64)
    cnt = rng.choice([1, 3, 6, 1024, 1000003], n)
    return x, t, a, g, w, d, cnt


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp32"])
def test_derived_equals_direct(fmt):
    x, t, a, g, w, d, cnt = random_points(3000, seed={"fp16": 1, "bf16": 2, "fp32": 3}[fmt])
    pos = focal_term_table(x, g)
    neg = focal_term_table(-x, g)
    got = derive_gradient(x, t, a, g, w, d, cnt, fmt, pos, neg)
    want = oracle.gradient(x, t, a, g, w, d, cnt, fmt=fmt)
    f = get_format(fmt)
    np.testing.assert_array_equal(got.rounded.view(f.uint_dtype), want.view(f.uint_dtype))
    # the fallback is the exception: structural zeros and single-term points are derived
    assert got.fallback < 0.15 * x.size
    # the exact double-double agrees with the oracle's exact values to 2**-60
    hi, lo, flag = oracle.exact_gradient(x[:300], t[:300], a[:300], g[:300], w[:300], d[:300], cnt[:300])
    normal = flag == oracle.RANGE_NORMAL
    diff = np.abs((got.exact_hi[:300] - hi) + (got.exact_lo[:300] - lo))
    assert np.all(diff[normal] <= np.abs(hi[normal]) * 2.0**-60)


def test_far_out_of_range_and_huge_x():
    x = np.array([3.4e38, -3.4e38, 1e5, -1e5, 200.0])
    g = np.array([-2.0, 2.0, -3.0, 5.0, -0.5])
    t = np.array([0, 1, 0, 1, 0])
    pos, neg = focal_term_table(x, g), focal_term_table(-x, g)
    one = np.ones(5)
    got = derive_gradient(x, t, 0.25 * one, g, one, one, np.ones(5, int), "fp32", pos, neg)
    want = oracle.gradient(x, t, 0.25, g, fmt="fp32")
    np.testing.assert_array_equal(got.rounded.view(np.uint32), want.view(np.uint32))
    assert got.fallback == 0


def test_shared_tables_equal_single_evaluations():
    rng = np.random.default_rng(9)
    x = np.concatenate([rng.uniform(-40, 40, 60), [0.0, -0.0, 3.0, -3.0, 30000.0, -30000.0]])
    gammas = [-2.0, -1.0, 0.0, 0.5, 2.0]
    shared = __import__("precision.operators.sigmoid_focal_loss_grad.terms", fromlist=["x"]).focal_term_tables(x, gammas)
    for g in gammas:
        single = focal_term_table(x, g)
        # the shared evaluation may run at a higher precision: equal within the bounds
        a = np.ldexp(shared[g].hi, 0) + shared[g].lo
        b = np.ldexp(single.hi, (single.exp - shared[g].exp).astype(np.int32)) + np.ldexp(
            single.lo, (single.exp - shared[g].exp).astype(np.int32))
        assert np.all(np.abs(a - b) <= np.abs(a) * 2.0**-60)
        assert np.all(shared[g].rel <= 2.0**-62)


def test_term_rows_do_not_depend_on_the_batch():
    """A row's bits depend on (x, gamma) only: not on the other gammas or x values computed with it
    (cold and warm caches must give identical tables)."""
    rng = np.random.default_rng(3)
    xs = np.concatenate([rng.uniform(-100, 100, 40), rng.uniform(-3, 3, 20)])
    alone = {g: focal_term_tables(xs, [g])[g] for g in (0.0, 6.0, -2.0)}
    together = focal_term_tables(xs, [0.0, 6.0, -2.0])
    split = focal_term_tables(xs[::-1], [6.0, 0.0])
    for g, table in alone.items():
        for field in ("hi", "lo", "exp", "rel"):
            assert np.array_equal(getattr(table, field), getattr(together[g], field)), (g, field)
            if g in split:
                assert np.array_equal(getattr(table, field), getattr(split[g], field)[::-1]), (g, field)


def test_selected_term_tables_hold_each_needed_term_and_the_absent_row_elsewhere():
    """A(x) where alpha*(1-t) != 0, A(-x) where (1-alpha)*t != 0, row for row equal to focal_term_tables;
    elsewhere hi = lo = 0 and rel = inf (never a decided rounding)."""
    x = np.array([0.5, -0.5, 3.0, 0.5, -7.25, 3.0])
    t = np.array([0, 1, 2, 1, 0, 0])
    for alpha in (0.25, np.array([0.0, 0.25, 1.0, 0.5, 1.0, 0.25])):
        pos, neg = selected_term_tables(x, t, alpha, -1.5)
        full_pos, full_neg = focal_term_tables(x, [-1.5])[-1.5], focal_term_tables(-x, [-1.5])[-1.5]
        for got, full, need in ((pos, full_pos, alpha * (1 - t) != 0), (neg, full_neg, (1 - alpha) * t != 0)):
            assert need.any() and not need.all()
            for f in ("hi", "lo", "exp", "rel"):
                np.testing.assert_array_equal(getattr(got, f)[need], getattr(full, f)[need])
            assert (got.hi[~need] == 0).all() and (got.lo[~need] == 0).all() and np.isinf(got.rel[~need]).all()
    pos, neg = selected_term_tables(x, np.zeros(x.size, int), 0.0, 2.0)  # no coefficient: nothing computed
    assert np.isinf(pos.rel).all() and np.isinf(neg.rel).all()


def test_term_table_columns_round_trip_through_their_arrays():
    """as_arrays names the fields (the stored layout); from_arrays, take and concatenate keep every column."""
    t = focal_term_table(np.array([-3.0, 0.5, 7.0, 2.0**-20]), np.full(4, 2.0))
    arrays = t.as_arrays()
    assert list(arrays) == ["hi", "lo", "exp", "rel"]
    assert arrays["exp"].dtype == np.int64
    for got, rows in ((TermTable.from_arrays(arrays), slice(None)), (t.take([3, 0]), [3, 0]),
                      (TermTable.from_arrays(arrays, np.array([True, False, True, False])), [0, 2]),
                      (TermTable.concatenate([t.take([0, 1]), t.take([2, 3])]), slice(None))):
        for name, column in got.as_arrays().items():
            np.testing.assert_array_equal(column, arrays[name][rows], err_msg=name)


def test_absent_table_stands_for_an_unused_term():
    """hi = lo = 0 and rel = inf (a rounding never decided from it), exp int64: the rows a sweep and
    selected_term_tables give a term no selector uses."""
    t = absent_table(3)
    assert len(t) == 3 and t.exp.dtype == np.int64
    np.testing.assert_array_equal(np.stack([t.hi, t.lo, t.exp]), np.zeros((3, 3)))
    assert np.isposinf(t.rel).all()
