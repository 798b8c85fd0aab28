"""Tests of precision.exact.double_double: the error-free transformations are exact, every operation and
exp/log1p stay within their stated bounds (checked against mpmath at 300 bits)."""

import math
from fractions import Fraction

import mpmath
import numba
import numpy as np
import pytest

from precision.exact import double_double as dd


def _rng(seed=0):
    return np.random.default_rng(seed)


def _random_doubles(n, lo=-60, hi=60, seed=0):
    rng = _rng(seed)
    return np.ldexp(rng.uniform(1, 2, n), rng.integers(lo, hi, n)) * rng.choice([-1, 1], n)


def _dd_random(n, seed):
    """Normalized double-doubles hi + lo with random low parts."""
    hi = _random_doubles(n, seed=seed)
    lo = hi * _rng(seed + 1).uniform(-1, 1, n) * 2.0**-53
    s = hi + lo
    return s, lo - (s - hi)


@numba.njit
def _apply(op, ah, al, bh, bl, out_h, out_l):
    for i in range(ah.size):
        if op == 0:
            out_h[i], out_l[i] = dd.dd_add(ah[i], al[i], bh[i], bl[i])
        elif op == 1:
            out_h[i], out_l[i] = dd.dd_mul(ah[i], al[i], bh[i], bl[i])
        elif op == 2:
            out_h[i], out_l[i] = dd.dd_mul_fp(ah[i], al[i], bh[i])
        elif op == 3:
            out_h[i], out_l[i] = dd.dd_add_fp(ah[i], al[i], bh[i])
        elif op == 4:
            out_h[i], out_l[i] = dd.two_sum(ah[i], bh[i])
        else:
            out_h[i], out_l[i] = dd.two_prod(ah[i], bh[i])


def _exact(h, lo):
    return Fraction(float(h)) + Fraction(float(lo))


class TestErrorFreeTransformations:
    @pytest.mark.parametrize("op", [4, 5])
    def test_exact(self, op):
        a, b = _random_doubles(2000, seed=1), _random_doubles(2000, seed=2)
        h, lo = np.empty(a.size), np.empty(a.size)
        _apply(op, a, a * 0, b, b * 0, h, lo)
        for i in range(a.size):
            want = Fraction(float(a[i])) + Fraction(float(b[i])) if op == 4 else \
                Fraction(float(a[i])) * Fraction(float(b[i]))
            assert _exact(h[i], lo[i]) == want
            assert h[i] == float(want)  # the high part is the rounded result

    def test_exponent_and_pow2(self):
        values = _random_doubles(1000, -1000, 1000, seed=3)

        @numba.njit
        def both(v, k):
            e = np.empty(v.size, np.int64)
            p = np.empty(k.size)
            for i in range(v.size):
                e[i] = dd.exponent(v[i])
            for i in range(k.size):
                p[i] = dd.pow2(k[i])
            return e, p
        ks = np.arange(-1022, 1024)
        e, p = both(values, ks)
        assert e.tolist() == [math.frexp(v)[1] - 1 for v in values]
        assert p.tolist() == [math.ldexp(1.0, int(k)) for k in ks]


class TestOperations:
    @pytest.mark.parametrize("op, bound", [(0, dd.ADD_REL), (1, dd.MUL_REL), (2, dd.MUL_FP_REL), (3, dd.ADD_FP_REL)])
    def test_relative_error_within_envelope(self, op, bound):
        ah, al = _dd_random(3000, seed=10)
        bh, bl = _dd_random(3000, seed=20)
        if op in (0, 3):
            # sums that cancel: b close to -a in a third of the cases
            bh[::3] = -ah[::3] * (1 + _rng(5).uniform(-2**-30, 2**-30, bh[::3].size))
            bl[::3] = bh[::3] * _rng(6).uniform(-1, 1, bh[::3].size) * 2.0**-54  # normalized again
        if op in (2, 3):
            bl = bl * 0  # a float64 operand
        h, lo = np.empty(ah.size), np.empty(ah.size)
        _apply(op, ah, al, bh, bl, h, lo)
        worst = Fraction(0)
        for i in range(ah.size):
            a, b = _exact(ah[i], al[i]), _exact(bh[i], bl[i])
            want = a + b if op in (0, 3) else a * b
            if want == 0:
                continue
            err = abs(_exact(h[i], lo[i]) - want) / abs(want)
            assert err <= Fraction(bound), (op, i, float(err))
            worst = max(worst, err)
        assert worst > 0  # the check is not vacuous


@numba.njit
def _exp_all(yh, yl, out_h, out_l, out_k):
    for i in range(yh.size):
        out_h[i], out_l[i], out_k[i] = dd.dd_exp(yh[i], yl[i])


class TestExp:
    def _check(self, yh, yl):
        h, lo, k = np.empty(yh.size), np.empty(yh.size), np.empty(yh.size, np.int64)
        _exp_all(yh, yl, h, lo, k)
        worst = 0.0
        with mpmath.workprec(300):
            for i in range(yh.size):
                want = mpmath.exp(mpmath.mpf(yh[i]) + mpmath.mpf(yl[i]))
                got = (mpmath.mpf(h[i]) + mpmath.mpf(lo[i])) * mpmath.mpf(2) ** int(k[i])
                err = float(abs(got / want - 1))
                assert err <= dd.EXP_REL + 2.0**-50 * abs(yl[i]), (yh[i], yl[i], err)
                assert 0.98 <= h[i] <= 2.02
                worst = max(worst, err)
        return worst

    def test_random_arguments_within_bound(self):
        rng = _rng(7)
        yh = rng.uniform(-dd.EXP_ARG_MAX, dd.EXP_ARG_MAX, 3000)
        yl = yh * rng.uniform(-1, 1, yh.size) * 2.0**-54
        worst = self._check(yh, yl)
        assert worst > 2.0**-110

    def test_small_and_boundary_arguments(self):
        step = math.log(2) / 2**dd.EXP_STEPS_LOG2
        ks = np.array([0, 1, -1, 255, 256, 65535, 65536, -65537, 2**20 + 7, -(2**20) - 7], dtype=np.float64)
        yh = np.concatenate([ks * step, ks * step + step / 2, ks * step - step / 2,
                             [0.0, 1e-300, -1e-300, 2.0**-60, dd.EXP_ARG_MAX, -dd.EXP_ARG_MAX]])
        self._check(yh, np.zeros(yh.size))


class TestLog1p:
    @pytest.mark.parametrize("seed_error", [0.0, 2.0**-30, -2.0**-25])
    def test_bound_holds_for_any_close_seed(self, seed_error):
        rng = _rng(11)
        e = np.ldexp(rng.uniform(1, 2, 500), rng.integers(-8, 0, 500))
        e = np.minimum(e, 1.0)

        @numba.njit
        def run(e, off):
            out = np.empty((e.size, 3))
            for i in range(e.size):
                seed = math.log1p(e[i]) * (1 + off)
                out[i, 0], out[i, 1], out[i, 2] = dd.log1p_newton(e[i], 0.0, 0.0, seed)
            return out
        out = run(e, seed_error)
        with mpmath.workprec(300):
            for i in range(e.size):
                want = mpmath.log1p(mpmath.mpf(e[i]))
                err = abs(mpmath.mpf(out[i, 0]) + mpmath.mpf(out[i, 1]) - want)
                assert err <= out[i, 2], (e[i], float(err), out[i, 2])
                assert out[i, 2] < 2.0**-83 or seed_error  # the bound is not vacuous
