"""Tests of precision.exact.formats: ulp, rounding, ordinals, enumeration."""

import math
import subprocess
import sys
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mpmath import libmp
from numpy.testing import assert_array_equal

from precision.errors import ParameterError
from precision.exact.formats import (BF16, FP16, FP32, FP64, RDN, RNA, RNE, RTZ, RUP, from_ordinal, get_format,
                                     ordinal_distance, round_to_format, to_ordinal, ulp)


def exact_mpf(fraction: Fraction):
    """An exact mpf from a dyadic Fraction."""
    num, den = fraction.numerator, fraction.denominator
    assert den & (den - 1) == 0
    return libmp.from_man_exp(num, -(den.bit_length() - 1))


class TestFormatConstants:
    @pytest.mark.parametrize("fmt,dtype", [(FP16, np.float16), (FP32, np.float32), (FP64, np.float64)])
    def test_limits_match_numpy(self, fmt, dtype):
        info = np.finfo(dtype)
        assert fmt.max_finite == float(info.max)
        assert fmt.smallest_normal == float(info.smallest_normal)
        assert fmt.smallest_subnormal == float(info.smallest_subnormal)
        assert fmt.prec == info.nmant + 1

    def test_bf16_limits(self):
        assert BF16.max_finite == float.fromhex("0x1.fep+127")
        assert BF16.smallest_subnormal == 2.0**-133

    def test_get_format(self):
        assert get_format("fp32") is FP32
        assert get_format(np.float16) is FP16
        assert get_format(np.dtype("float32")) is FP32
        with pytest.raises(ParameterError, match="fp8"):
            get_format("fp8")
        with pytest.raises(ParameterError, match="int32"):
            get_format(np.int32)

    def test_bf16_storage_loads_on_first_use(self):
        """ml_dtypes (most of a second to import) loads only when bf16's dtype is asked for; a dtype lookup of
        another format never loads it, and bfloat16's own dtype finds BF16."""
        code = ("import sys, numpy as np; from precision.exact.formats import BF16, get_format; "
                "assert get_format(np.float32).name == 'fp32' and get_format(np.float64).name == 'fp64'; "
                "assert get_format('bfloat16').name == 'bf16'; "
                "assert 'ml_dtypes' not in sys.modules; "
                "import ml_dtypes; print(BF16.dtype, get_format(np.dtype(ml_dtypes.bfloat16)) is BF16)")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert (done.returncode, done.stdout) == (0, "bfloat16 True\n"), done.stderr


class TestEnumeration:
    def test_every_finite_fp16(self):
        values = FP16.finite_values()
        assert values.size == 63488 == FP16.finite_count
        assert np.all(np.isfinite(values))
        assert np.unique(values.view(np.uint16)).size == 63488

    def test_every_finite_bf16(self):
        values = BF16.finite_values()
        assert values.size == BF16.finite_count == 65280

    def test_fp32_refuses(self):
        with pytest.raises(ParameterError, match="stratified"):
            FP32.finite_values()


class TestOrdinals:
    def test_nulp_wraparound_example(self):
        # numpy's nulp_diff works in int16 for float16 and wraps here
        assert int(ordinal_distance(np.float16(1000), np.float16(-1000))) == 51104
        assert ordinal_distance(np.float16(1000), np.float16(-1000)).dtype == np.int64

    def test_numpy_float16_nulp_is_wrong_where_ours_is_right(self):
        from numpy.testing._private.utils import nulp_diff
        theirs = float(np.ravel(nulp_diff(np.float16(1000), np.float16(-1000)))[0])
        assert theirs != 51104

    def test_signed_zeros_equal(self):
        assert int(ordinal_distance(np.float32(0.0), np.float32(-0.0))) == 0
        assert to_ordinal(np.float32(-0.0), FP32) == 0

    def test_fp16_exhaustive_monotone_and_roundtrip(self):
        values = FP16.finite_values()
        order = np.argsort(values.astype(np.float64), kind="stable")
        o = to_ordinal(values[order], FP16)
        # strictly increasing except the two zeros sharing ordinal 0
        steps = np.diff(o)
        assert np.all(steps >= 0) and np.sum(steps == 0) == 1
        assert np.all(steps <= 1)
        assert_array_equal(from_ordinal(to_ordinal(values, FP16), FP16).astype(np.float64),
                           values.astype(np.float64))

    def test_inf_is_one_past_max(self):
        assert int(to_ordinal(np.float16(np.inf), FP16)) == int(to_ordinal(np.float16(65504), FP16)) + 1

    def test_nan_distance(self):
        assert int(ordinal_distance(np.float32(np.nan), np.float32(1))) == -1

    @pytest.mark.parametrize("dtype,bits", [(np.float32, np.uint32), (np.float64, np.uint64)])
    def test_agrees_with_numpy_nulp(self, dtype, bits):
        from numpy.testing._private.utils import nulp_diff
        rng = np.random.default_rng(7)
        raw = rng.integers(0, np.iinfo(bits).max, 5000, dtype=bits, endpoint=True)
        a = raw.view(dtype)
        b = (raw ^ rng.integers(0, 1 << 12, 5000).astype(bits)).view(dtype)
        ok = np.isfinite(a) & np.isfinite(b) & (np.sign(a) == np.sign(b))
        assert_array_equal(ordinal_distance(a[ok], b[ok]), np.ravel(nulp_diff(a[ok], b[ok])).astype(np.int64))

    @settings(max_examples=300, deadline=None)
    @given(st.floats(width=16, allow_nan=False), st.floats(width=16, allow_nan=False))
    def test_ordinal_monotone_fp16(self, a, b):
        oa, ob = int(to_ordinal(np.float16(a), FP16)), int(to_ordinal(np.float16(b), FP16))
        if a < b:
            assert oa < ob
        elif a == b:
            assert oa == ob


class TestUlp:
    @pytest.mark.parametrize("dtype", [np.float32, np.float64])
    def test_agrees_with_numpy_spacing(self, dtype):
        rng = np.random.default_rng(3)
        bits = rng.integers(0, 0x7F7FFFFF if dtype == np.float32 else 0x7FEFFFFFFFFFFFFF, 5000)
        x = bits.astype(np.uint32 if dtype == np.float32 else np.uint64).view(dtype)
        assert_array_equal(ulp(x, get_format(dtype)), np.spacing(x).astype(np.float64))

    def test_fp16_beats_numpy_spacing_at_max(self):
        # np.spacing(float16 max) is inf (next value overflows); the binade quantum is 32
        assert float(ulp(65504.0, FP16)) == 32.0
        assert float(ulp(1.0, FP16)) == 2.0**-10
        assert float(ulp(0.0, FP16)) == 2.0**-24
        assert float(ulp(2.0**-20, FP16)) == 2.0**-24  # clamped at the subnormal quantum

    def test_ulp_of_exact_value_between_floats(self):
        assert float(ulp(1.0 + 2.0**-30, FP32)) == 2.0**-23
        assert float(ulp(math.nextafter(1.0, 0), FP32)) == 2.0**-24


class TestRoundMpf:
    def test_nearest_even_ties(self):
        one = Fraction(1)
        tie = one + Fraction(1, 2**24)  # halfway between 1 and 1+2^-23
        assert FP32.round_mpf(exact_mpf(tie)) == 1.0
        tie2 = one + Fraction(3, 2**24)
        assert FP32.round_mpf(exact_mpf(tie2)) == 1.0 + 2.0**-22

    def test_gradual_underflow_and_signed_zero(self):
        q = Fraction(1, 2**149)
        assert FP32.round_mpf(exact_mpf(q * Fraction(3, 4))) == 2.0**-149
        assert FP32.round_mpf(exact_mpf(q / 2)) == 0.0  # tie to even zero
        neg = FP32.round_mpf(exact_mpf(-q / 4))
        assert neg == 0.0 and math.copysign(1, neg) == -1

    def test_far_below_subnormal_without_giant_integers(self):
        tiny = libmp.mpf_exp(libmp.from_float(-3.4e38), 64)
        assert FP32.round_mpf(tiny) == 0.0
        assert math.copysign(1, FP16.round_mpf(libmp.mpf_neg(tiny))) == -1

    def test_overflow(self):
        assert FP16.round_mpf(mpmath.mpf(65519)) == 65504.0
        assert FP16.round_mpf(mpmath.mpf(65520)) == math.inf
        assert FP16.round_mpf(mpmath.mpf(-70000)) == -math.inf
        assert FP16.round_mpf(mpmath.mpf(70000), RTZ) == 65504.0
        assert FP16.round_mpf(mpmath.mpf(70000), RDN) == 65504.0
        assert FP16.round_mpf(mpmath.mpf(70000), RUP) == math.inf

    def test_directed_modes(self):
        v = exact_mpf(Fraction(1) + Fraction(1, 2**30))
        assert FP32.round_mpf(v, RUP) == 1.0 + 2.0**-23
        assert FP32.round_mpf(v, RDN) == 1.0
        assert FP32.round_mpf(libmp.mpf_neg(v), RDN) == -(1.0 + 2.0**-23)
        half = exact_mpf(Fraction(1) + Fraction(1, 2**24))
        assert FP32.round_mpf(half, RNA) == 1.0 + 2.0**-23
        assert FP32.round_mpf(half, RNE) == 1.0

    @settings(max_examples=500, deadline=None)
    @given(st.floats(allow_nan=False, allow_infinity=False))
    def test_matches_numpy_conversion_from_float64(self, x):
        if x == 0:
            return  # mpmath has a single (unsigned) zero; signed zeros are tested above
        mpf = libmp.from_float(x)
        assert FP32.round_mpf(mpf) == float(np.float32(x)) or math.isinf(float(np.float32(x)))
        r16 = FP16.round_mpf(mpf)
        n16 = float(np.float16(x))
        assert r16 == n16 and math.copysign(1, r16) == math.copysign(1, n16)

    @settings(max_examples=300, deadline=None)
    @given(st.floats(allow_nan=False, allow_infinity=False), st.floats(allow_nan=False, allow_infinity=False))
    def test_monotone(self, a, b):
        a, b = min(a, b), max(a, b)
        for fmt in (FP16, BF16, FP32):
            assert fmt.round_mpf(libmp.from_float(a)) <= fmt.round_mpf(libmp.from_float(b))

    @settings(max_examples=200, deadline=None)
    @given(st.floats(width=32, allow_nan=False, allow_infinity=False))
    def test_idempotent(self, x):
        assert FP32.round_mpf(libmp.from_float(x)) == x


class TestRoundToFormat:
    @pytest.mark.parametrize("mode", [RNE, RNA, RTZ, RUP, RDN])
    def test_agrees_with_round_mpf(self, mode):
        rng = np.random.default_rng(11)
        x = np.concatenate([
            rng.standard_normal(3000) * np.exp2(rng.integers(-30, 20, 3000)),
            rng.uniform(-1, 1, 500) * 2.0**-140, rng.uniform(-1, 1, 500) * 2.0**-20,
            rng.uniform(-7e4, 7e4, 200)])
        for fmt in (FP16, BF16, FP32):
            got = round_to_format(x, fmt, mode).astype(np.float64)
            want = np.array([fmt.round_mpf(libmp.from_float(v), mode) for v in x.tolist()])
            assert_array_equal(got, want)
            assert_array_equal(np.signbit(got), np.signbit(want))

    def test_single_rounding_not_via_float32(self):
        # x is just above the fp16 midpoint 1 + 2^-11, but rounds to that midpoint in float32
        x = 1.0 + 2.0**-11 + 2.0**-40
        assert float(round_to_format(x, FP16)) == 1.0 + 2.0**-10
        assert float(np.float16(np.float32(x))) == 1.0  # the double rounding we avoid

    def test_bf16_matches_ml_dtypes_from_float32(self):
        rng = np.random.default_rng(5)
        x = rng.standard_normal(10000).astype(np.float32)
        assert_array_equal(round_to_format(x, BF16).view(np.uint16), x.astype(BF16.dtype).view(np.uint16))

    def test_specials_pass_through(self):
        out = round_to_format([np.inf, -np.inf, np.nan, -0.0], FP16).astype(np.float64)
        assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2]) and np.signbit(out[3])
