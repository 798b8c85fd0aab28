"""Tests of the oracle's fast certified path (precision.operators.sigmoid_focal_loss_grad.oracle_fast and its use in
terms): every row's bound holds against mpmath at 400 bits, on every regime's edges, near the roots of A
and at extreme inputs; the batch gradient gives the mpmath oracle's bits; the compiled derivation equals
its numpy definition bit for bit."""

import math

import mpmath
import numpy as np
import pytest

from precision.exact.formats import FORMATS, get_format
from precision.operators.sigmoid_focal_loss_grad import bracket, oracle, oracle_fast, terms


def _f32(values):
    return np.asarray(values, dtype=np.float32).astype(np.float64)


def _neighbours(value, k):
    """The float32 values within k ordinals of ``value`` (of its sign; about 0: the nonnegative ones)."""
    centre = np.abs(np.float32(value)).view(np.int32).astype(np.int64)
    ordinals = np.unique(np.abs(centre + np.arange(-k, k + 1)))
    return math.copysign(1.0, value) * np.asarray(ordinals, dtype=np.int32).view(np.float32).astype(np.float64)


#: The edges of the fast path's regimes (of a = |x|), each with its float32 neighbours.
EDGES = [0.0, 2.0**-149, oracle_fast.A_TAYLOR, oracle_fast.A_SERIES, 60 * math.log(2), oracle_fast.A_PLAIN,
         745.0, 4096 * math.log(2), 5600.0, 1e4, 3e38]
GAMMAS = _f32([-1e6, -100.0, -3.0, -2.0, -1.5, -1.0 - 2.0**-23, -1.0, -1.0 + 2.0**-24, -0.5, -2.0**-149, 0.0,
               2.0**-149, 0.5, 2.0, 6.0, 100.0, 1e6, 3e38])


def _points():
    rng = np.random.default_rng(2024)
    edges = np.concatenate([_neighbours(e, 3) for e in EDGES])
    binades = np.ldexp(rng.uniform(1, 2, 400), rng.integers(-149, 128, 400))
    moderate = rng.uniform(0, 40, 400)
    a = np.unique(np.abs(_f32(np.concatenate([edges, binades, moderate]))))
    x = np.concatenate([a, -a, [2.0**-1074, -(2.0**-1074)]])
    return x[np.argsort(np.abs(x), kind="stable")]


def _truth(x, g, bits=200):
    """A(x, g) from the mpmath oracle's ball, at 400 bits or more until its relative bound is below 2**-bits."""
    prec = max(400, 2 * bits)
    while True:
        ball = oracle.focal_term(float(x), float(g), prec)
        if ball.true_rel < 2.0**-bits:
            return mpmath.mpf(ball.mid)
        prec *= 2
        assert prec <= 1 << 14


def _check_rows(x, gammas, rows):
    hi, lo, ex, rel = rows
    counts = {"bounded": 0, "far": 0, "left": 0}
    worst = 0.0
    for j, g in enumerate(gammas):
        for i, xi in enumerate(x):
            if not rel[j, i] <= terms.TERM_REL:
                counts["left"] += 1
                continue
            # (a bound can be far below 2**-200 where A is -1 plus a tiny term: the truth to 64 bits beyond it)
            bits = max(200, int(-math.log2(rel[j, i])) + 64)
            with mpmath.workprec(2 * bits):
                truth = _truth(xi, g, bits)
                if abs(ex[j, i]) == oracle.EXP_CLAMP:
                    counts["far"] += 1
                    # only the side and the sign are kept: both must be right
                    binade = int(mpmath.floor(mpmath.log(abs(truth), 2)))
                    assert abs(binade) > oracle.EXP_FAR and (binade > 0) == (ex[j, i] > 0), (xi, g)
                    assert (hi[j, i] > 0) == (truth > 0) and abs(hi[j, i]) == 1.0 and lo[j, i] == 0.0
                    continue
                counts["bounded"] += 1
                got = (mpmath.mpf(hi[j, i]) + mpmath.mpf(lo[j, i])) * mpmath.mpf(2) ** int(ex[j, i])
                err = float(abs(got / truth - 1))
                assert err <= rel[j, i], (float(xi).hex(), g, err, rel[j, i])
                assert 1.0 <= abs(hi[j, i]) < 2.0 and abs(ex[j, i]) <= oracle.EXP_FAR
                worst = max(worst, err)
    return counts, worst


@pytest.mark.slow
def test_every_row_within_its_bound_on_edges_binades_and_extremes():
    x = _points()
    counts, worst = _check_rows(x, GAMMAS, oracle_fast.focal_rows(x, GAMMAS))
    total = x.size * GAMMAS.size
    # almost every row bounded by the fast path, the far ones decided, the bound tight
    assert counts["left"] <= total // 1000, counts
    assert counts["far"] > 100 and counts["bounded"] > total // 2, counts
    assert 2.0**-110 < worst < 2.0**-62


def test_rows_near_the_roots_of_A():
    """Near a root the bracket cancels: the bound grows with it and stays true; past 2**-62 mpmath takes over
    (within a few dozen float32 of a root), farther out the fast path bounds every row."""
    for g in (-3.0, -2.0, -1.5):
        for r in bracket.roots(g):
            near, out = _neighbours(r, 6), _neighbours(r, 70)[[0, 1, 2, -3, -2, -1]]
            xs = np.concatenate([near, out])
            order = np.argsort(np.abs(xs), kind="stable")
            rows = oracle_fast.focal_rows(xs[order], [g])
            counts, worst = _check_rows(xs[order], [g], rows)
            assert counts["bounded"] >= 6 and worst > 2.0**-85, counts  # the cancellation shows, and is covered
            assert (rows[3][0][np.isin(order, np.arange(near.size, xs.size))] <= terms.TERM_REL).all()


def test_rows_near_minus_one_bound_their_tiny_correction():
    """Far below 0, A = -(1 + low) with |low| from 2**-60 down to 2**-1000: the bound scales with low (not
    with 1), and holds against a truth to 64 bits beyond it."""
    rng = np.random.default_rng(3)
    xs = -np.sort(_f32(np.exp(rng.uniform(math.log(42), math.log(900), 60))))
    rows = oracle_fast.focal_rows(xs, [-3.0, -1.0, 0.0, 2.0])
    counts, worst = _check_rows(xs, [-3.0, -1.0, 0.0, 2.0], rows)
    assert counts["bounded"] == xs.size * 4
    # where the correction is far below 2**-60 the bound is a small multiple of it, not of 1
    low, rel = np.abs(rows[1]), rows[3]
    near = (rows[0] == -1.0) & (rows[2] == 0) & (low < 2.0**-70)
    assert near.sum() > xs.size and (rel[near] <= 2.0**-45 * low[near] + 2.0**-700).all()  # (past |x| = 600: 2**-727)


def test_a_float64_at_a_root_leaves_the_fast_path_and_mpmath_settles_it():
    root = bracket.roots(-2.0)[0]  # a float64 within a few ulps of a root: cancellation of about 2**50
    xs = np.array([root])
    assert not oracle_fast.focal_rows(xs, [-2.0])[3][0, 0] <= terms.TERM_REL
    table = terms.focal_term_tables(xs, [-2.0])[-2.0]
    assert table.rel[0] <= terms.TERM_REL
    assert (table.hi[0], table.lo[0], table.exp[0]) == terms._tight_row(root, -2.0, None)[:3]


def test_row_bits_do_not_depend_on_the_batch():
    x = _points()[::7]
    grid = oracle_fast.focal_rows(x, GAMMAS)
    alone = [oracle_fast.focal_rows(x[i:i + 1], GAMMAS[j:j + 1]) for j in (3, 12) for i in range(0, x.size, 5)]
    k = 0
    for j in (3, 12):
        for i in range(0, x.size, 5):
            assert all(np.array_equal(c[j, i], a[0, 0]) for c, a in zip(grid, alone[k]))
            k += 1
    pairs = oracle_fast.focal_pair_rows(np.repeat(x, 2), np.tile(GAMMAS[[3, 12]], x.size))
    for c, p in zip(grid, pairs):
        assert np.array_equal(c[[3, 12]].T.ravel(), p)


def _special_points(n, seed):
    """Random points of every input class: selectors outside {0, 1}, zeros, tiny and huge weights and douts,
    counts, alpha 0 and 1, real-valued alpha and gamma."""
    rng = np.random.default_rng(seed)
    x = _f32(np.concatenate([rng.uniform(-40, 40, n // 2),
                             np.ldexp(rng.uniform(1, 2, n - n // 2), rng.integers(-149, 128, n - n // 2))
                             * rng.choice([-1, 1], n - n // 2)]))
    t = rng.choice([0, 1, 2, -3], n, p=[0.45, 0.45, 0.05, 0.05])
    a = _f32(np.where(rng.random(n) < 0.5, rng.choice([0.0, 0.25, 1.0], n), rng.uniform(0, 1, n)))
    g = _f32(np.where(rng.random(n) < 0.5, rng.choice([-2.0, -1.0, 0.0, 2.0], n), rng.uniform(-3, 6, n)))
    w = _f32(rng.choice([1.0, 0.0, 2.0**-140, 3.0, 6e4, 1e38], n))
    d = _f32(rng.choice([1.0, -0.5, 2.0**-20, 2.0**-130, 3e38], n))
    cnt = rng.choice([1, 3, 2**24 + 1], n)
    return x, t, a, g, w, d, cnt


@pytest.mark.parametrize("fmt", ["fp32", "fp16", "bf16"])
def test_batch_gradient_gives_the_mpmath_oracles_bits(fmt):
    args = _special_points(1500, seed={"fp32": 1, "fp16": 2, "bf16": 3}[fmt])
    f = get_format(fmt)
    fast = terms.gradient(*args, fmt=fmt)
    slow = oracle.gradient(*args, fmt=fmt)
    assert fast.dtype == slow.dtype == f.dtype
    assert np.array_equal(fast.view(f.uint_dtype), slow.view(f.uint_dtype))


def test_batch_gradient_matches_the_reference_points(reference_points):
    for fmt in ("fp32", "fp16", "bf16"):
        rows = reference_points
        got = terms.gradient(np.array([r["x"] for r in rows]), np.array([r["t"] for r in rows]),
                             np.array([r["alpha"] for r in rows]), np.array([r["gamma"] for r in rows]),
                             np.array([r["weight"] for r in rows]), np.array([r["dout"] for r in rows]),
                             np.array([r["count"] for r in rows]), fmt=fmt)
        want = np.array([r[fmt] for r in rows], dtype=FORMATS[fmt].dtype)
        assert np.array_equal(got.view(FORMATS[fmt].uint_dtype), want.view(FORMATS[fmt].uint_dtype))


@pytest.mark.parametrize("fmt", ["fp32", "fp16", "bf16"])
def test_compiled_derivation_equals_its_numpy_definition(fmt):
    x, t, a, g, w, d, cnt = _special_points(20000, seed=9)
    pos, neg = terms.focal_term_table(x, g), terms.focal_term_table(-x, g)
    ref = terms._derive_reference(x, t, a, g, w, d, cnt, fmt, pos, neg)
    got = terms.derive_gradient(x, t, a, g, w, d, cnt, fmt, pos, neg)
    decided = ~ref[3]
    assert got.fallback == int(ref[3].sum()) > 0
    for want, have in zip(ref[:3], (got.rounded.astype(np.float64), got.exact_hi, got.exact_lo)):
        assert np.array_equal(np.asarray(want)[decided].view(np.int64), have[decided].view(np.int64))
    # not certified: the balls that straddle a cell's end keep their centre, as the numpy definition has it
    screened = terms.derive_gradient(x, t, a, g, w, d, cnt, fmt, pos, neg, certify=False)
    kept = decided | screened.estimated
    assert np.array_equal(screened.estimated, ref[3] & (ref[1] != 0))
    for want, have in zip(ref[:3], (screened.rounded.astype(np.float64), screened.exact_hi, screened.exact_lo)):
        assert np.array_equal(np.asarray(want)[kept].view(np.int64), have[kept].view(np.int64))


def test_a_ball_across_the_overflow_threshold_is_not_decided():
    """The largest finite value's rounding cell ends at the overflow threshold, not at infinity."""
    f = get_format("fp16")
    top = f.max_finite + math.ldexp(1.0, f.emax - f.prec)  # 65520: at and above, fp16 rounds to inf
    x = np.array([1.0, 1.0])
    below = top * (1 - 2.0**-45)  # the value: under the threshold by more than the decision's slack
    hi, ex = math.frexp(below)
    # the first ball reaches past the threshold, the second does not
    table = terms.TermTable(np.array([hi * 2, hi * 2]), np.zeros(2), np.array([ex - 1, ex - 1]),
                            np.array([2.0**-40, 2.0**-62]))
    args = (x, np.zeros(2, np.int64), np.ones(2), np.full(2, 2.0), np.ones(2), np.ones(2), np.ones(2, np.int64),
            "fp16", table, terms.absent_table(2))
    ref = terms._derive_reference(*args)
    assert ref[3].tolist() == [True, False] and ref[0][1] == f.max_finite
    got = terms.derive_gradient(*args)
    assert got.fallback == 1 and got.rounded[1] == f.max_finite


def test_a_ball_straddling_a_midpoint_keeps_its_centre_when_not_certified():
    """alpha = 0x1.d4d21ep-2 (odd last bit): 1 - alpha is an fp32 midpoint; at t = 1 and x = 2^27.97 the exact
    gradient is (1 - alpha) A(-x), A(-x) = -1 within exp(-2.6e8): a hair off that midpoint.  Certified, the
    scalar oracle cannot decide it (NaN); not certified, the compiled ball's centre is kept (``estimated``) and
    equals the oracle's exact value; the compiled and numpy definitions agree on it."""
    x = np.array([np.float32(2.63940589e+08), 1.5], dtype=np.float64)
    t = np.ones(2, dtype=np.int64)
    a = np.full(2, float.fromhex("0x1.d4d21ep-2"))
    g = np.full(2, float(np.float32(-2.78424311)))
    pos, neg = terms.focal_term_table(x, g), terms.focal_term_table(-x, g)
    args = (x, t, a, g, np.ones(2), np.ones(2), np.ones(2, np.int64), "fp32", pos, neg)
    screened = terms.derive_gradient(*args, certify=False)
    assert screened.estimated.tolist() == [True, False] and screened.fallback == 0
    hi, lo, _ = oracle.exact_gradient(float(x[0]), 1, float(a[0]), float(g[0]), 1.0, 1.0, 1)
    assert screened.exact_hi[0] == float(hi) == 1.0 - a[0] and screened.exact_lo[0] == 0.0
    assert abs(float(screened.rounded[0]) - (1.0 - a[0])) == 2.0**-25  # one of the midpoint's two neighbours
    certified = terms.derive_gradient(*args)
    assert certified.fallback == 1 and np.isnan(certified.rounded[0]) and certified.estimated is None
    assert certified.rounded[1] == screened.rounded[1]
    ref = terms._derive_reference(*args)
    assert ref[3].tolist() == [True, False]
    for want, have in zip(ref[:3], (screened.rounded.astype(np.float64), screened.exact_hi, screened.exact_lo)):
        assert np.array_equal(np.asarray(want).view(np.int64), have.view(np.int64))


def test_only_a_ball_at_most_estimate_rel_wide_is_kept_as_an_estimate():
    """Two balls across fp16's overflow threshold, of relative radius 2^-41 and 2^-39: not certified, the first
    keeps its centre (at most ESTIMATE_REL = 2^-40 wide), the second goes to the scalar oracle (which computes the
    gradient at x = 1 itself: not the planted value)."""
    f = get_format("fp16")
    top = f.max_finite + math.ldexp(1.0, f.emax - f.prec)
    hi, ex = math.frexp(top * (1 - 2.0**-45))
    table = terms.TermTable(np.array([hi * 2, hi * 2]), np.zeros(2), np.array([ex - 1, ex - 1]),
                            np.array([2.0**-41, 2.0**-39]))
    args = (np.array([1.0, 1.0]), np.zeros(2, np.int64), np.ones(2), np.full(2, 2.0), np.ones(2), np.ones(2),
            np.ones(2, np.int64), "fp16", table, terms.absent_table(2))
    got = terms.derive_gradient(*args, certify=False)
    assert terms.ESTIMATE_REL == 2.0**-40
    assert got.estimated.tolist() == [True, False] and got.fallback == 1
    assert got.exact_hi[0] == top * (1 - 2.0**-45)
    ref = terms._derive_reference(*args)
    assert ref[3].tolist() == [True, True] and ref[1][0] == got.exact_hi[0] and ref[1][1] == 0.0
