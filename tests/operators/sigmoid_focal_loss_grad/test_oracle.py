"""Tests of precision.operators.sigmoid_focal_loss_grad.oracle: reference points, an independent direct evaluation,
identities, structural zeros, extreme inputs, the precision cap."""

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from precision.operators.sigmoid_focal_loss_grad import oracle
from precision.errors import OracleUndecidedError, ParameterError
from precision.exact.formats import FORMATS, get_format


def bits_of(value, fmt):
    f = get_format(fmt)
    return int(np.asarray(value, dtype=f.dtype).view(f.uint_dtype))


def direct_value(x, t, alpha, gamma, weight=1.0, dout=1.0, count=1, bits=3000):
    """The gradient by mpmath's high-level API at `bits`, from the textbook
    formulas with p and q each from exp directly and log1p for ln p, ln q."""
    with mpmath.workprec(bits):
        X, g, a = mpmath.mpf(x), mpmath.mpf(gamma), mpmath.mpf(alpha)
        p = 1 / (1 + mpmath.exp(-X))
        q = 1 / (1 + mpmath.exp(X))
        lnp = -mpmath.log1p(mpmath.exp(-X)) if X >= 0 else X - mpmath.log1p(mpmath.exp(X))
        lnq = -X - mpmath.log1p(mpmath.exp(-X)) if X >= 0 else -mpmath.log1p(mpmath.exp(X))
        A = g * p * mpmath.power(q, g) * lnp - mpmath.power(q, g + 1)
        B = mpmath.power(p, g + 1) - g * mpmath.power(p, g) * q * lnq
        raw = a * (1 - t) * A + (1 - a) * t * B
        return raw * mpmath.mpf(weight) * mpmath.mpf(dout) / count


def direct_rounded(fmt, *args, **kw):
    return get_format(fmt).round_mpf(direct_value(*args, **kw))


class TestReferencePoints:
    """Every row of tests/data/oracle_points.csv (Arb, independent of mpmath), bit for bit."""

    @pytest.mark.parametrize("fmt", ["fp32", "fp16", "bf16"])
    def test_batch_matches_reference_bits(self, reference_points, fmt):
        rows = reference_points
        got = oracle.gradient(
            np.array([r["x"] for r in rows]), np.array([r["t"] for r in rows]),
            np.array([r["alpha"] for r in rows]), np.array([r["gamma"] for r in rows]),
            np.array([r["weight"] for r in rows]), np.array([r["dout"] for r in rows]),
            np.array([r["count"] for r in rows]), fmt=fmt)
        want = np.array([r[fmt] for r in rows])
        f = get_format(fmt)
        mismatches = [(r["case"], r["x"], float(g), w) for r, g, w in zip(rows, got.astype(float), want)
                      if bits_of(g, fmt) != bits_of(w, fmt)]
        assert mismatches == []
        assert got.dtype == f.dtype and len(rows) == 78

    def test_scalar_matches_reference_and_signs_of_zero(self, reference_points):
        zeros = 0
        for r in reference_points:
            args = (r["x"], r["t"], r["alpha"], r["gamma"], r["weight"], r["dout"], r["count"])
            for fmt in ("fp32", "fp16", "bf16"):
                v = oracle.round_gradient(*args, fmt=fmt)
                assert v == r[fmt] and math.copysign(1, v) == math.copysign(1, r[fmt]), (r["case"], fmt)
                zeros += v == 0
        assert zeros > 10  # the file exercises both +0 and -0

    def test_exact_digits(self, reference_points):
        for r in reference_points:
            args = (r["x"], r["t"], r["alpha"], r["gamma"], r["weight"], r["dout"], r["count"])
            text = oracle.exact_decimal(*args, digits=40)
            with mpmath.workprec(300):
                got, want = mpmath.mpf(text), mpmath.mpf(r["exact"])
                assert abs(got - want) <= abs(want) * mpmath.mpf(10) ** -38, r


class TestDirectEvaluation:
    def test_random_points_all_formats(self):
        rng = np.random.default_rng(2024)
        n = 250
        x = np.concatenate([rng.uniform(-120, 120, n // 2), rng.uniform(-12, 12, n - n // 2)]).astype(np.float32)
        g = rng.uniform(-3, 6, n).astype(np.float32)
        a = rng.choice(np.float32([0.1, 0.25, 0.5, 0.75, 1.0, -0.5, 1.5]), n)
        t = rng.choice([-1, 0, 1, 2], n, p=[0.1, 0.4, 0.4, 0.1])
        w = rng.standard_normal(n).astype(np.float16)
        d = (rng.standard_normal(n) * 2.0 ** rng.integers(-20, 10, n)).astype(np.float16)
        cnt = rng.integers(1, 1000, n)
        for fmt in FORMATS:
            got = oracle.gradient(x, t, a, g, w, d, cnt, fmt=fmt)
            for i in range(n):
                want = direct_rounded(fmt, float(x[i]), int(t[i]), float(a[i]), float(g[i]),
                                      float(w[i]), float(d[i]), int(cnt[i]))
                assert bits_of(got[i], fmt) == bits_of(want, fmt), (fmt, i, float(x[i]).hex(), float(g[i]))

    @settings(max_examples=60, deadline=None)
    @given(st.floats(-200, 200, width=32), st.floats(-3, 6, width=32))
    def test_higher_precision_rounds_the_same(self, x, gamma):
        v = oracle.round_gradient(x, 0, 0.25, gamma)
        ball = oracle.gradient_ball(x, 0, 0.25, gamma, prec=1024)
        assert ball.true_rel < 2.0**-900
        assert get_format("fp32").round_mpf(ball.mid) == v


class TestIdentities:
    @settings(max_examples=150, deadline=None)
    @given(st.floats(-100, 100, width=32), st.floats(-3, 6, width=32))
    def test_B_is_minus_A_of_minus_x(self, x, gamma):
        # t=1, alpha=0 selects B(x); t=0, alpha=1 selects A(-x)
        b = oracle.round_gradient(x, 1, 0.0, gamma, fmt="fp32")
        a = oracle.round_gradient(-x, 0, 1.0, gamma, fmt="fp32")
        assert b == -a

    @settings(max_examples=100, deadline=None)
    @given(st.floats(-30, 30, width=32), st.floats(-3, 6, width=32))
    def test_focal_term_matches_direct(self, x, gamma):
        ball = oracle.focal_term(x, gamma, 200)
        with mpmath.workprec(600):
            want = direct_value(x, 0, 1.0, gamma, bits=600)
            got = mpmath.mpf(ball.mid)
            assert abs(got - want) <= abs(want) * max(ball.true_rel, 2.0**-190) or want == 0

    def test_structural_zeros_are_plus_zero(self):
        cases = [
            dict(x=3.0, t=0, alpha=0.0, gamma=2.0),        # alpha = 0 selects nothing
            dict(x=-3.4e38, t=1, alpha=1.0, gamma=-2.0),   # 1 - alpha = 0, even where A(-x) is huge
            dict(x=2.5, t=0, alpha=0.25, gamma=2.0, weight=-0.0),
            dict(x=2.5, t=1, alpha=0.25, gamma=2.0, dout=0.0),
        ]
        for c in cases:
            for fmt in FORMATS:
                v = oracle.round_gradient(fmt=fmt, **c)
                assert v == 0.0 and math.copysign(1, v) == 1.0, c

    def test_rounded_to_zero_keeps_sign(self):
        v = oracle.round_gradient(30.0, 0, 0.25, 2.0, fmt="fp16")
        assert v == 0 and math.copysign(1, v) == -1


class TestExtremeInputs:
    @pytest.mark.parametrize("gamma", [-2.0, -1.0, -0.5, 0.0, 0.5, 2.0, 5.0])
    @pytest.mark.parametrize("x", [3.4e38, -3.4e38, 1e6, -1e6, 88.75, -104.5, 2.0**-149, -(2.0**-149)])
    @pytest.mark.parametrize("t", [0, 1])
    def test_matches_direct_at_every_scale(self, x, gamma, t):
        x = float(np.float32(x))
        if gamma == -1.0 and abs(x) >= 1e6 and (x > 0) == (t == 0):
            # A(|x|, -1) = D / e ~ -e/2: the direct formula cancels to 0 at any feasible precision
            # (TestDeepCancellation checks this case against a direct evaluation at x <= 5000)
            v = oracle.round_gradient(x, t, 0.25, gamma, fmt="fp64")
            assert v == 0 and math.copysign(1, v) == (-1 if t == 0 else 1)
            return
        for fmt in ("fp16", "fp32", "fp64"):
            v = oracle.round_gradient(x, t, 0.25, gamma, fmt=fmt)
            want = direct_rounded(fmt, x, t, 0.25, gamma, bits=400)
            assert v == want and math.copysign(1, v) == math.copysign(1, want), fmt

    def test_huge_negative_gamma_overflows_to_inf(self):
        assert oracle.round_gradient(3.4e38, 0, 0.25, -2.0) == math.inf
        assert oracle.round_gradient(100.0, 0, 0.25, -3.0, fmt="fp32") == math.inf

    def test_far_below_subnormal(self):
        v = oracle.round_gradient(3.4e38, 0, 0.25, 2.0, weight=2.0**-149, dout=2.0**-24, fmt="fp64")
        assert v == 0 and math.copysign(1, v) == -1

    def test_tiny_weight_and_dout(self):
        # from the reference file: raw * weight below the fp32 subnormal range, then back with count
        v = oracle.round_gradient(-3.0, 0, 0.25, 2.0, float.fromhex("0x1.79ca1p-67"), float.fromhex("0x1.79ca1p-67"))
        assert v == -float.fromhex("0x1.3a18p-135")


class TestDeepCancellation:
    """gamma = -1 and large x: the textbook bracket cancels by a factor e**-x; the oracle's does not."""

    @pytest.mark.parametrize("x", [200.0, 1000.0, 5000.0])
    @pytest.mark.parametrize("gamma", [-1.0, -0.5, float(np.float32(-1.0000001))])
    def test_matches_very_high_precision_direct(self, x, gamma):
        bits = int(2.2 * x / math.log(2)) + 300
        for fmt in ("fp32", "fp64"):
            v = oracle.round_gradient(x, 0, 0.25, gamma, fmt=fmt)
            want = direct_rounded(fmt, x, 0, 0.25, gamma, bits=bits)
            assert v == want and math.copysign(1, v) == math.copysign(1, want)
        text = oracle.exact_decimal(x, 0, 0.25, gamma, digits=20)
        with mpmath.workprec(bits):
            exact = mpmath.mpf(text)
            ref = direct_value(x, 0, 0.25, gamma, bits=bits)
            assert abs(exact - ref) <= abs(ref) * mpmath.mpf(10) ** -19

    def test_sign_of_underflowed_result(self):
        v = oracle.round_gradient(30000.0, 0, 0.25, -1.0, fmt="fp32")
        assert v == 0 and math.copysign(1, v) == -1  # A(x, -1) = D / e is about -e/2 < 0

    def test_bounds_never_vanish_beyond_float64_range(self):
        # at working precisions past 1074 bits the float64 unit would underflow to 0
        ball = oracle.gradient_ball(30000.0, 0, 0.25, -1.0, prec=2048)
        assert ball.rel > 0


class TestNearTies:
    def test_decided_a_hair_off_a_midpoint(self):
        # found by the Arb cross-check: 2**-113 (relative) from an fp64 rounding midpoint;
        # bounds rounded at 74 bits could never decide it, bounds at the working precision do
        args = (float.fromhex("-0x1.4b8e88p+6"), 0, float.fromhex("0x1.8p-1"), float.fromhex("0x1.09d86ep+0"),
                float.fromhex("-0x1.e9890330a8766p-3"), 1.0, 1)
        assert oracle.round_gradient(*args, fmt="fp64") == float.fromhex("0x1.6f26c2647e58dp-3")
        assert oracle.round_gradient(*args, fmt="fp64") == direct_rounded("fp64", *args, bits=600)


class TestPrecisionCap:
    @staticmethod
    def root_of_A(gamma):
        """A float64 x next to a root of the bracket g p ln p - q (x < 0 for gamma = -2)."""
        with mpmath.workprec(200):
            g = mpmath.mpf(gamma)

            def S(x):
                e = mpmath.exp(x)  # x < 0
                return -g * e * (-x + mpmath.log1p(e)) - 1
            return float(mpmath.findroot(S, -1.5))

    def test_near_root_needs_more_bits_and_gets_them(self):
        x = self.root_of_A(-2.0)
        v = oracle.round_gradient(x, 0, 0.25, -2.0, fmt="fp32")
        want = direct_rounded("fp32", x, 0, 0.25, -2.0, bits=4000)
        assert v == want and v != 0
        ball = oracle.gradient_ball(x, 0, 0.25, -2.0, prec=oracle._initial_prec(x, -2.0))
        assert ball.rel > 2.0**-24  # the first precision did not decide it

    def test_cap_reports_unresolved_not_wrong(self, monkeypatch):
        x = self.root_of_A(-2.0)
        monkeypatch.setattr(oracle, "MAX_PREC", 100)
        with pytest.raises(OracleUndecidedError, match="undecided"):
            oracle.round_gradient(x, 0, 0.25, -2.0)
        out = oracle.gradient(np.array([x, 1.0]), 0, 0.25, -2.0)
        assert np.isnan(out[0]) and np.isfinite(out[1])


class TestBatchAPI:
    def test_broadcasting_and_dtypes(self):
        pred = np.float16([[-2.0, 0.5, 3.0]])
        gamma = np.float32([[0.0], [2.0]])
        out = oracle.gradient(pred, 1, 0.25, gamma, fmt="fp16")
        assert out.shape == (2, 3) and out.dtype == np.float16
        assert float(out[1, 2]) == direct_rounded("fp16", 3.0, 1, 0.25, 2.0)

    def test_alpha_is_float32(self):
        # alpha = 0.1 means float32(0.1) exactly
        v = oracle.gradient(2.5, 0, 0.1, 2.0, fmt="fp64")
        assert float(v) == direct_rounded("fp64", 2.5, 0, float(np.float32(0.1)), 2.0)
        assert float(v) != direct_rounded("fp64", 2.5, 0, 0.1, 2.0)

    def test_count_is_exact_rational(self):
        v = oracle.gradient(0.5, 0, 0.25, 2.0, count=3, fmt="fp64")
        assert float(v) == direct_rounded("fp64", 0.5, 0, 0.25, 2.0, count=3)

    @pytest.mark.parametrize("kwargs,match", [
        (dict(pred=np.nan), "pred"),
        (dict(pred=1.0, gamma=np.inf), "gamma"),
        (dict(pred=1.0, count=0), "count"),
        (dict(pred=1.0, target=0.5), "target"),
        (dict(pred=np.int32(1)), "pred"),
        (dict(pred=1.0, dout=np.inf), "dout"),
    ])
    def test_bad_input(self, kwargs, match):
        args = dict(target=0, alpha=0.25, gamma=2.0)
        args.update(kwargs)
        with pytest.raises(ParameterError, match=match):
            oracle.gradient(**args)


class TestExactGradient:
    def test_double_double_accuracy_and_flags(self):
        x = np.array([-1.25, 3.0, 9.0, 1000.0, -800.0, 0.0])
        t = np.array([0, 1, 0, 0, 1, 0])
        g = np.array([2.0, 0.5, -2.0, -3.0, 2.0, 0.0])
        hi, lo, flag = oracle.exact_gradient(x, t, 0.25, g)
        assert list(flag) == [0, 0, 0, oracle.RANGE_ABOVE, oracle.RANGE_BELOW, 0]
        assert hi[3] == math.inf
        for i in (0, 1, 2, 5):
            want = direct_value(float(x[i]), int(t[i]), 0.25, float(g[i]), bits=300)
            with mpmath.workprec(300):
                got = mpmath.mpf(hi[i]) + mpmath.mpf(lo[i])
                assert abs(got - want) <= abs(want) * mpmath.mpf(2) ** -64
            assert abs(lo[i]) <= abs(hi[i]) * 2.0**-53
