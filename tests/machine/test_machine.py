"""Tests for precision.machine: bits and counts, against exact references."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from mpmath import libmp

from precision.errors import ParameterError
from precision.exact.formats import FP16, FP32, RNA, RNE, RTZ, round_to_format, ulp
from precision.machine import IEEE_F64_MARGIN, MODEL_NAMES, Machine, MachineModel, get_machine
from precision.machine import fma as fma_module
from precision.machine import npu as npu_module
from precision.machine.fma import fma32, fma_round_to_odd
from precision.machine.ieee import IeeeLibrary
from precision.machine.npu import (
    POW_EXP_OVERFLOW,
    POW_EXP_UNDERFLOW,
    POW_EXPONENT_MASK,
    POW_FLT_MIN,
    POW_LN2_HI,
    POW_LN2_LO,
    POW_LOG_POLY,
    POW_SQRT_HALF_BITS,
    POW_SUBNORMAL_SCALE,
    power_c,
    power_log,
)

#: R3's literal 1.19209290e-7f = 0x34000000 (the emulation computes k exactly without it).
POW_TWO_M23 = np.float32(2.0**-23)

REF_PREC = 200  # bits of the mpmath references


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------


def f32(x) -> np.float32:
    """float32 from a hex-float string or a number (exact when representable)."""
    return np.float32(float.fromhex(x) if isinstance(x, str) else x)


def from_bits32(b) -> np.ndarray:
    return np.asarray(b, dtype=np.uint32).view(np.float32)


def bits32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def bits16(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float16).view(np.uint16)


def round_fraction(q: Fraction, fmt=FP32) -> float:
    """RNE of an exact rational into ``fmt`` by integer arithmetic (gradual underflow, overflow to inf)."""
    if q == 0:
        return 0.0
    sign, q = (-1.0 if q < 0 else 1.0), abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    if Fraction(2) ** e > q:
        e -= 1
    qexp = max(e, fmt.emin) - fmt.prec + 1
    scaled = q / Fraction(2) ** qexp
    n, rem = divmod(scaled.numerator, scaled.denominator)
    twice = 2 * rem
    if twice > scaled.denominator or (twice == scaled.denominator and n % 2 == 1):
        n += 1
    value = n * Fraction(2) ** qexp
    if value > Fraction(fmt.max_finite):
        return sign * math.inf
    return sign * float(value)


def mp_ref(fn, *args) -> float:
    """Correctly rounded fp32 value of an mpmath libmp function at REF_PREC bits."""
    return FP32.round_mpf(fn(*[libmp.from_float(float(a)) for a in args], REF_PREC, libmp.round_nearest))


def random_float32(rng, n, exp_lo=-149, exp_hi=127) -> np.ndarray:
    """Random signs, full 24-bit significands, exponents uniform in [exp_lo, exp_hi]."""
    mant = rng.integers(1 << 23, 1 << 24, n).astype(np.float64)
    e = rng.integers(exp_lo, exp_hi + 1, n)
    sign = rng.choice([-1.0, 1.0], n)
    with np.errstate(over="ignore"):
        return (sign * np.ldexp(mant, e - 23)).astype(np.float32)


def ulp_error_fp32(got, ref64) -> np.ndarray:
    return np.abs(np.asarray(got, np.float64) - ref64) / ulp(ref64, FP32)


def risky_fma_triples(rng, n):
    """fp32 (a, b, c) whose float64 sum RN64(a*b + c) is a float32 rounding boundary, inexactly.

    a*b = +-h*(1 - k**2 * 2**-46) with h half an ulp of c (a = 2**ea*(1 + k*2**-23),
    b = 2**eb*(1 - k*2**-23), 0 < k < 256): the exact sum lies a hair inside
    c +- h, so the float64 sum is the midpoint c +- h and ties to even in the
    cast, while the correct result is c.  Mixes normal c, subnormal c (the
    subnormal grid), c = 0x007FFFFF (midpoint just below FLT_MIN) and ends
    with c = FLT_MAX (the overflow threshold).
    """
    k = rng.integers(1, 256, n).astype(np.float64)
    normal = random_float32(rng, n, -100, 100)
    subnormal = from_bits32(rng.integers(1, 0x00800000, n))
    c = np.where(rng.random(n) < 0.7, normal, subnormal).astype(np.float32)
    c[: n // 50] = from_bits32(np.uint32(0x007FFFFF))
    c[-1] = FP32.max_finite
    half_ulp = ulp(c.astype(np.float64), FP32) / 2
    log_h = np.log2(half_ulp).astype(np.int64)
    ea = log_h // 2
    eb = log_h - ea
    sign = rng.choice([-1.0, 1.0], n)
    sign[c == from_bits32(np.uint32(0x007FFFFF))] = 1.0
    sign[-1] = 1.0
    a = (sign * np.ldexp(1 + k * 2.0**-23, ea)).astype(np.float32)
    b = np.ldexp(1 - k * 2.0**-23, eb).astype(np.float32)
    return a, b, c


# ---------------------------------------------------------------------------
# fma
# ---------------------------------------------------------------------------


class TestFma:
    def test_random_fp32_triples_match_exact_rational(self):
        rng = np.random.default_rng(20240601)
        n = 7000
        a = random_float32(rng, 3 * n, -75, 63)
        b = random_float32(rng, 3 * n, -75, 63)
        with np.errstate(over="ignore"):
            prod32 = (a.astype(np.float64) * b.astype(np.float64)).astype(np.float32)
        # near cancellation: c = -RN(a*b) nudged by a few ulps; then c of similar
        # magnitude; then c of any magnitude (incl. subnormal results).
        nudge = rng.integers(-4, 5, n).astype(np.int32)
        c_cancel = from_bits32((bits32(-prod32[:n]).astype(np.int64) + nudge).astype(np.uint32))
        c_near = (prod32[n : 2 * n] * rng.uniform(-2, 2, n)).astype(np.float32)
        c_any = random_float32(rng, n, -149, 127)
        c = np.concatenate([c_cancel, c_near, c_any])
        keep = np.isfinite(prod32) & np.isfinite(c)
        a, b, c = a[keep], b[keep], c[keep]
        assert a.size >= 20000

        got = get_machine("ieee").fma(a, b, c)
        want = np.array(
            [round_fraction(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))) for x, y, z in zip(a, b, c)],
            dtype=np.float64,
        ).astype(np.float32)
        assert np.array_equal(bits32(got), bits32(want))

    def test_double_rounding_through_float64_is_avoided(self):
        a = f32(2.0**-12 * (1 + 2.0**-23))
        b = f32(2.0**-12 * (1 - 2.0**-23))
        c = f32(1 + 2.0**-23)
        exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))  # 1 + 2^-23 + 2^-24 - 2^-70
        naive = np.float32(float(a) * float(b) + float(c))  # float64 lands on the midpoint, ties to even
        assert bits32(naive) == bits32(f32(1 + 2.0**-22))
        fused = get_machine("npu").fma(a, b, c)
        assert bits32(fused) == bits32(f32(round_fraction(exact))) == bits32(f32(1 + 2.0**-23))

    def test_power_internal_fma_is_fused(self):
        a = np.array([2.0**-12 * (1 + 2.0**-23)], np.float32)
        b = np.array([2.0**-12 * (1 - 2.0**-23)], np.float32)
        c = np.array([1 + 2.0**-23], np.float32)
        assert bits32(fma32(a, b, c)) == bits32(f32(1 + 2.0**-23))
        rng = np.random.default_rng(21)
        x, y, z = (random_float32(rng, 5000, -60, 60) for _ in range(3))
        assert np.array_equal(bits32(fma32(x, y, z)), bits32(get_machine("ieee").fma(x, y, z)))

    def test_special_values_and_signed_zero(self):
        m = get_machine("ieee")
        inf, nan = np.float32(np.inf), np.float32(np.nan)
        assert np.isnan(m.fma(inf, 0, 1))
        assert np.isnan(m.fma(inf, 1, -inf))
        assert m.fma(inf, 2, 1) == inf
        assert bits32(m.fma(-0.0, 5, 0.0)) == 0  # -0 + +0 = +0 under RNE
        assert bits32(m.fma(-0.0, 5, -0.0)) == 0x80000000
        assert bits32(m.fma(3, 5, -15)) == 0
        assert np.isnan(m.fma(nan, 1, 1))

    def test_fast_fma_matches_round_to_odd_reference(self):
        # >= 200k triples: random bit patterns (every class: NaN, inf, zeros,
        # subnormals), normal-range triples, near cancellation, subnormal
        # results, and the constructed double-rounding lanes.
        rng = np.random.default_rng(20240612)
        n = 60_000
        a, b, c = (from_bits32(rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)) for _ in range(3))
        x, y = random_float32(rng, n, -75, 63), random_float32(rng, n, -75, 63)
        with np.errstate(over="ignore"):
            prod = (x.astype(np.float64) * y.astype(np.float64)).astype(np.float32)
        z = np.where(rng.random(n) < 0.5, -prod, random_float32(rng, n, -149, 127)).astype(np.float32)
        z = from_bits32(bits32(z).astype(np.int64) + rng.integers(-3, 4, n))
        u, v = random_float32(rng, n, -90, -40), random_float32(rng, n, -90, -40)
        w = random_float32(rng, n, -149, -120)  # subnormal and near-FLT_MIN results
        ra, rb, rc = risky_fma_triples(rng, 20_000)
        A, B, C = (np.concatenate(t) for t in ((a, x, u, ra), (b, y, v, rb), (c, z, w, rc)))
        assert A.size >= 200_000
        with np.errstate(all="ignore"):
            want = fma_round_to_odd(A.astype(np.float64), B.astype(np.float64), C.astype(np.float64)).astype(np.float32)
        assert np.array_equal(bits32(fma32(A, B, C)), bits32(want))
        assert np.array_equal(bits32(get_machine("npu").fma(A, B, C)), bits32(want))
        # scalars broadcast in every position
        assert np.array_equal(bits32(fma32(A[0], B, C)), bits32(fma32(np.full_like(B, A[0]), B, C)))
        assert np.array_equal(bits32(fma32(A, B[1], C[2])), bits32(fma32(A, np.full_like(A, B[1]), np.full_like(A, C[2]))))

    def test_risky_lanes_take_the_slow_path(self, monkeypatch):
        # s = RN64(a*b + c) lands exactly on a float32 midpoint (normal,
        # subnormal, the FLT_MIN edge, the overflow threshold) while the exact
        # sum is not a float64: RN32(s) is wrong on about half of them.
        rng = np.random.default_rng(31)
        a, b, c = risky_fma_triples(rng, 2000)
        exact = [Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)) for x, y, z in zip(a, b, c)]
        want = np.array([round_fraction(q) for q in exact]).astype(np.float32)
        with np.errstate(over="ignore"):
            naive = (a.astype(np.float64) * b.astype(np.float64) + c.astype(np.float64)).astype(np.float32)
        wrong = bits32(naive) != bits32(want)
        assert wrong.sum() > 500  # the float64 shortcut alone would fail here
        tiny = (np.abs(want) <= FP32.smallest_normal) & wrong
        assert tiny.sum() > 50  # subnormal-range midpoints (test T2) included
        assert np.isinf(naive[-1]) and float(want[-1]) == FP32.max_finite
        settled = []
        original = fma_module._fma32_settle

        def spy(a_, b_, c_, out, idx):
            settled.append(idx.size)
            return original(a_, b_, c_, out, idx)

        monkeypatch.setattr(fma_module, "_fma32_settle", spy)
        got = fma32(a, b, c)
        assert np.array_equal(bits32(got), bits32(want))
        assert settled and settled[0] >= wrong.sum()
        # flagged but exact lanes: a*b + c is itself a float32 midpoint (25
        # significant bits), so the cast's tie to even is right
        settled.clear()
        j, l = (2 * rng.integers(0, 1 << 10, 1000) + 1 for _ in range(2))
        e1, e2 = rng.integers(-60, 60, 1000), rng.integers(-60, 60, 1000)
        a2 = np.ldexp(1 + j * 2.0**-12, e1).astype(np.float32)
        b2 = -np.ldexp(1 + l * 2.0**-12, e2).astype(np.float32)
        c2 = (np.ldexp(1.0, e1 + e2) * rng.integers(-3, 4, 1000)).astype(np.float32)
        got = fma32(a2, b2, c2)
        ref = np.array([round_fraction(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))
                        for x, y, z in zip(a2, b2, c2)]).astype(np.float32)
        assert np.array_equal(bits32(got), bits32(ref))
        assert settled and settled[0] > 200

    def test_round_to_odd_sets_sticky_bit(self):
        p = np.array([1.0]), np.array([1.0]), np.array([2.0**-80])
        assert fma_round_to_odd(*p)[0] == 1.0 + 2.0**-52
        q = np.array([1.0]), np.array([1.0]), np.array([-(2.0**-80)])
        assert fma_round_to_odd(*q)[0] == 1.0 - 2.0**-53  # truncated to the predecessor, already odd


# ---------------------------------------------------------------------------
# ieee machine: correctly rounded exp / ln / pow
# ---------------------------------------------------------------------------


class TestIeeeTranscendentals:
    def test_exp_matches_mpmath(self):
        rng = np.random.default_rng(1)
        x = np.concatenate(
            [
                rng.uniform(-20, 20, 1500),
                rng.uniform(-104, -87, 700),  # subnormal results and underflow to 0
                rng.uniform(88.0, 88.8, 300),  # near overflow
                [88.72283, 88.7228394, -103.97, -87.3365478515625, 0.0, -0.0, 1e-30],
            ]
        ).astype(np.float32)
        got = get_machine("ieee").exp(x)
        want = np.array([mp_ref(libmp.mpf_exp, v) for v in x]).astype(np.float32)
        assert np.array_equal(bits32(got), bits32(want))
        assert np.any((got > 0) & (got < FP32.smallest_normal))

    def test_ln_matches_mpmath(self):
        rng = np.random.default_rng(2)
        x = np.concatenate(
            [
                from_bits32(rng.integers(1, 0x7F800000, 2000)),  # all positive finite incl. subnormals
                (1 + rng.uniform(-1e-3, 1e-3, 500)).astype(np.float32),
            ]
        ).astype(np.float32)
        got = get_machine("ieee").ln(x)
        want = np.array([mp_ref(libmp.mpf_log, v) if v != 1 else 0.0 for v in x]).astype(np.float32)
        assert np.array_equal(bits32(got), bits32(want))

    def test_pow_matches_mpmath(self):
        rng = np.random.default_rng(3)
        n = 1500
        a = np.exp(rng.uniform(-20, 20, n)).astype(np.float32)
        b = rng.uniform(-20, 20, n).astype(np.float32)
        a2 = np.exp(rng.uniform(-3, 3, 500)).astype(np.float32)  # subnormal results via large b
        b2 = np.float32(-110) / np.log(a2.astype(np.float64)) * rng.uniform(0.95, 1.3, 500)
        a3 = -np.exp(rng.uniform(-4, 4, 300)).astype(np.float32)  # negative bases, integer exponents
        b3 = rng.integers(-30, 30, 300).astype(np.float32)
        a = np.concatenate([a, a2, a3])
        b = np.concatenate([b, b2.astype(np.float32), b3])
        got = get_machine("ieee").pow(a, b)

        def ref(x, y):
            v = mp_ref(libmp.mpf_pow, abs(float(x)), float(y))
            return -v if (x < 0 and int(y) % 2) else v

        want = np.array([ref(x, y) for x, y in zip(a, b)]).astype(np.float32)
        assert np.array_equal(bits32(got), bits32(want))
        assert np.any((got != 0) & (np.abs(got) < FP32.smallest_normal))

    def test_near_tie_is_settled(self):
        # exp(-0x1.d2259ap+3) lies 1.1e-16 (relative) above the midpoint between
        # 0x1.fa6634p-22 and 0x1.fa6636p-22: inside the float64 safety margin.
        x = f32("-0x1.d2259ap+3")
        want = mp_ref(libmp.mpf_exp, x)
        assert want == float.fromhex("0x1.fa6636p-22")
        mid = float.fromhex("0x1.fa6635p-22")
        assert abs(math.exp(float(x)) - mid) / mid < 2.0**-50
        v = np.exp(np.float64(x))
        lo, hi = np.float32(v * (1 - IEEE_F64_MARGIN)), np.float32(v * (1 + IEEE_F64_MARGIN))
        assert lo != hi  # the float64 value is in doubt: the mpmath settle decides it
        assert float(get_machine("ieee").exp(x)) == want

    def test_settle_overrides_a_wrong_float64_value(self):
        # a float64 library off by 2 ulps to the wrong side of the midpoint would
        # round down; the margin check catches it and mpmath decides.
        x = f32("-0x1.d2259ap+3")
        mid = float.fromhex("0x1.fa6635p-22")
        wrong = np.array([mid - 2 * math.ulp(mid)])
        assert np.float32(wrong[0]) == f32("0x1.fa6634p-22")
        lib = IeeeLibrary(get_machine("ieee").model, FP32)
        exact = lambda xi: (lambda p: libmp.mpf_exp(libmp.from_float(xi), p, libmp.round_nearest))
        assert float(lib._round_settled(wrong, (np.array([float(x)]),), exact)[0]) == float.fromhex("0x1.fa6636p-22")

    @pytest.mark.parametrize(
        "a, b",
        [(257.0**2, 1.5), (1 + 2.0**-12, 2.0), (1 + 3 * 2.0**-12, 2.0), (2.0**-100, 1.5), (-(1 + 2.0**-12), 2.0)],
    )
    def test_pow_exact_midpoints_tie_to_even(self, a, b):
        exact = Fraction(abs(a)) ** 2 if b == 2.0 else None
        m = get_machine("ieee")
        got = m.pow(np.float32(a), np.float32(b))
        if exact is not None:
            want = round_fraction(exact)
        elif a == 257.0**2:
            want = round_fraction(Fraction(257**3))  # 16974593: 25 bits, a midpoint
            assert want == 16974592.0
        else:
            want = 0.0  # 2^-150, halfway between 0 and 2^-149: ties to +0
        assert float(got) == want

    def test_pow_special_values_c99(self):
        m = get_machine("ieee")
        nan, inf = np.nan, np.inf
        cases = [
            (nan, 0.0, 1.0), (1.0, nan, 1.0), (-1.0, inf, 1.0), (-1.0, -inf, 1.0), (-8.0, 1 / 3, nan),
            (0.0, -1.0, inf), (-0.0, -3.0, -inf), (-0.0, -2.0, inf), (-0.0, 3.0, -0.0), (-inf, 3.0, -inf),
            (-inf, -3.0, -0.0), (2.0, inf, inf), (0.5, inf, 0.0), (2.0, -inf, 0.0), (2.0, 128.0, inf),
        ]
        for a, b, want in cases:
            got = float(m.pow(np.float32(a), np.float32(b)))
            assert (math.isnan(got) and math.isnan(want)) or (
                got == want and math.copysign(1, got) == math.copysign(1, want)
            ), (a, b, got, want)


# ---------------------------------------------------------------------------
# npu Power algorithm C
# ---------------------------------------------------------------------------


class TestNpuPowerAlgorithmC:
    def test_accuracy_figure(self):
        # npu_math §2.6 with the RN32 exp proxy: max ~1.03 ulp, ~24.7% not correctly rounded.
        rng = np.random.default_rng(0)
        n = 200_000
        x = np.exp(rng.uniform(-20, 20, n)).astype(np.float32)
        y = rng.uniform(-20, 20, n).astype(np.float32)
        got = get_machine("npu").pow(x, y)
        ref = np.power(x.astype(np.float64), y.astype(np.float64))
        normal = (ref >= FP32.smallest_normal) & (ref <= FP32.max_finite)
        err = ulp_error_fp32(got[normal], ref[normal])
        not_cr = np.mean(got[normal] != ref[normal].astype(np.float32))
        assert 1.0 <= err.max() <= 1.1
        assert 0.20 <= not_cr <= 0.30

    def test_binade_crossing_witness(self):
        # E = RN(exp(phi)) rounds up to 2^24 while E*(1+plo) < 2^24: E's half-ulp
        # is a full ulp of the result's binade, so the error exceeds 1.03 ulp.
        x, y = f32("0x1.107142p+4"), f32("0x1.77915ap+2")
        got = get_machine("npu").pow(x, y)
        assert bits32(got) == bits32(f32("0x1.ffffe2p+23"))
        err = ulp_error_fp32(got, np.power(float(x), float(y)))
        assert 1.15 < err < 1.25

    # Regression pins of this emulation (reviewed step by step against
    # power_3510_impl.h @9e7fba1b9; not device data): (a, b, master bits, release bits).
    PINS = [
        ("0x1.8p+1", "0x1.4p+1", 0x41796A52, 0x41796A52),
        ("0x1.107142p+4", "0x1.77915ap+2", 0x4B7FFFF1, 0x4B7FFFF1),
        ("0x1.6a09e6p+0", "0x1.4p+4", 0x447FFFFA, 0x447FFFFA),
        ("0x1.6a09e8p-1", "-0x1.8p+5", 0x4B7FFFCA, 0x4B7FFFCA),
        ("0x1.2p-130", "0x1p-1", 0x1F07C3B6, 0x1A046C6E),
        ("0x1.fffffep+127", "0x1p-1", 0x5F7FFFFF, 0x5F7FFFFF),
        ("0x1.000002p+0", "0x1.8p+22", 0x40077CED, 0x40077CED),
        ("0x1.9p+3", "-0x1.5bp+5", 0x00000000, 0x00000000),
        ("-0x1.4p+1", "0x1.5p+4", 0xCD58D726, 0xCD58D726),
        ("0x1p-149", "-0x1p-3", 0x48C5672A, 0x48D744FD),
    ]

    @pytest.mark.parametrize("a, b, master, release", PINS)
    def test_regression_pins(self, a, b, master, release):
        args = f32(a), f32(b)
        assert int(bits32(get_machine("npu").pow(*args))) == master
        assert int(bits32(get_machine("npu+release").pow(*args))) == release

    def test_log_part_relative_error(self):
        rng = np.random.default_rng(4)
        x = np.concatenate(
            [
                from_bits32(rng.integers(1, 0x7F800000, 300_000)),  # incl. subnormals
                (1 + rng.uniform(-0.3, 0.42, 100_000)).astype(np.float32),  # i = 0, both q edges
            ]
        )
        lhi, llo = power_log(x)
        ln = np.log(x.astype(np.float64))
        nz = ln != 0
        rel = np.abs(lhi.astype(np.float64)[nz] + llo[nz] - ln[nz]) / np.abs(ln[nz])
        assert rel.max() <= 2.0**-29
        assert ulp_error_fp32(lhi, ln).max() <= 0.52

    @pytest.mark.parametrize(
        "a, b, want_bits",
        [
            (np.nan, 0.0, 0x3F800000),  # b == 0 -> 1 even with NaN base
            (1.0, np.nan, 0x3F800000),  # a == 1 -> 1 even with NaN exponent
            (np.nan, 2.0, 0x7FC00000),
            (2.0, np.nan, 0x7FC00000),
            (-np.nan, 2.0, 0x7FC00000),
            (0.0, 3.0, 0x00000000),
            (-0.0, 3.0, 0x80000000),  # odd integer keeps the sign
            (-0.0, 2.0, 0x00000000),
            (-0.0, -3.0, 0xFF800000),
            (-0.0, -2.0, 0x7F800000),
            (0.0, -0.5, 0x7F800000),
            (np.inf, 2.0, 0x7F800000),
            (np.inf, -2.0, 0x00000000),
            (-np.inf, 3.0, 0xFF800000),
            (-np.inf, -3.0, 0x80000000),
            (-np.inf, 2.0, 0x7F800000),
            (-2.0, 0.5, 0x7FC00000),  # negative base, non-integer exponent
            (-2.0, 3.0, 0xC1000000),  # -8
            (-2.0, 2.0, 0x40800000),  # 4
            (-1.0, np.inf, 0x3F800000),
            (-1.0, -np.inf, 0x3F800000),
            (2.0, np.inf, 0x7F800000),  # E5 clamp: phi = +inf, res NaN -> +inf
            (0.5, np.inf, 0x00000000),
            (2.0, -np.inf, 0x00000000),
            (0.5, -np.inf, 0x7F800000),
            (-3.0, np.inf, 0x7F800000),
            (-2.0, 2.0**24 + 2, 0x7F800000),  # |b| >= 2^24 counts as even
        ],
    )
    def test_special_cases(self, a, b, want_bits):
        got = get_machine("npu").pow(np.float32(a), np.float32(b))
        assert int(bits32(got)) == want_bits

    def test_e5_clamps_and_flushed_exp(self):
        m = get_machine("npu")
        # phi in [-104, -87.34): the exact 2^-127 is subnormal, vexp flushes -> +0
        assert bits32(m.pow(2.0, -127.0)) == 0
        assert float(get_machine("ieee").pow(2.0, -127.0)) == 2.0**-127
        # phi < -104: clamp to +0; phi >= 88.7228 -> +inf
        assert bits32(m.pow(2.0, -151.0)) == 0
        assert bits32(m.pow(2.0, 128.0)) == 0x7F800000
        assert float(m.pow(2.0, 127.0)) == 2.0**127
        # the clamps also turn the NaN of E4 (phi = +-inf, plo = NaN) into +inf / +0
        assert bits32(m.pow(np.float32(3.0), np.float32(np.inf))) == 0x7F800000
        assert bits32(m.pow(np.float32(3.0), np.float32(-np.inf))) == 0

    def test_release_subnormal_bug(self):
        rng = np.random.default_rng(5)
        x = from_bits32(rng.integers(1, 0x00800000, 50_000))
        ln = np.log(x.astype(np.float64))
        fixed_hi, fixed_lo = power_log(x, subnormal_fix=True)
        bug_hi, bug_lo = power_log(x, subnormal_fix=False)
        rel_fixed = np.abs(fixed_hi.astype(np.float64) + fixed_lo - ln) / np.abs(ln)
        rel_bug = np.abs(bug_hi.astype(np.float64) + bug_lo - ln) / np.abs(ln)
        assert rel_fixed.max() <= 2.0**-29
        assert 0.1 < rel_bug.max() < 0.25
        # end to end: pow(subnormal, 0.5)
        a = from_bits32(np.array([0x00001234, 0x00400000], dtype=np.uint32))
        exact = np.sqrt(a.astype(np.float64))
        fixed = get_machine("npu").pow(a, np.float32(0.5))
        release = get_machine("npu+release").pow(a, np.float32(0.5))
        assert ulp_error_fp32(fixed, exact).max() <= 1.0
        assert ulp_error_fp32(release, exact).max() > 1000

    def test_fp16_compute_casts_through_fp32(self):
        m16 = get_machine("npu+fp16")
        a = np.array([3.0, 0.1, -2.0, 0.0], dtype=np.float16)
        b = np.array([2.5, 3.0, 0.5, -1.0], dtype=np.float16)
        got = m16.pow(a, b)
        via32 = get_machine("npu").pow(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)
        assert got.dtype == np.float16
        assert np.array_equal(bits16(got[:2]), bits16(via32[:2]))
        assert bits16(got[2]) == 0x7E00 and bits16(got[3]) == 0x7C00


def reference_pow_c(a, b, subnormal_fix=True):
    """Literal transcription of npu_math §2 (R0-E5, §2.4) with the round-to-odd fma.

    No blocking, no shortcuts (R3 as the fma), the special cases on every
    lane: the bit reference of the optimized :func:`power_c`.
    """
    F = np.float32

    def fma(x, y, z):
        x, y, z = np.broadcast_arrays(*(np.asarray(v, F).astype(np.float64) for v in (x, y, z)))
        return fma_round_to_odd(x, y, z).astype(F)

    with np.errstate(all="ignore"):
        x = np.abs(a)
        small = x < POW_FLT_MIN
        xs = np.where(small, x * POW_SUBNORMAL_SCALE, x)
        i0 = np.where(small, F(-23.0), F(0.0))
        bits = (xs if subnormal_fix else x).view(np.int32)
        e = (bits - POW_SQRT_HALF_BITS) & POW_EXPONENT_MASK
        m = (bits - e).view(F)
        i = fma(e.astype(F), POW_TWO_M23, i0)
        p, m1 = m + F(1), m - F(1)
        r = F(1) / p
        qhi = m1 * r
        qhi1 = fma(-m1, qhi, m1 + qhi * F(-2))
        qlo = r * qhi1
        s = qhi * qhi
        u = fma(fma(fma(POW_LOG_POLY[0], s, POW_LOG_POLY[1]), s, POW_LOG_POLY[2]), s, POW_LOG_POLY[3]) * s
        qh2, ql2 = qhi + qhi, qlo + qlo
        fhi = i * POW_LN2_HI + qh2
        flo = qh2 - fma(i, -POW_LN2_HI, fhi)
        total = fma(i, POW_LN2_LO, fma(ql2 * F(3), u, ql2)) + fma(qh2, u, flo)
        lhi = fhi + total
        llo = (fhi - lhi) + total
        phi = lhi * b
        plo = fma(llo, b, fma(lhi, b, -phi))
        big_e = np.exp(phi.astype(np.float64)).astype(F)
        big_e = np.where(big_e < POW_FLT_MIN, F(0), big_e)
        res = fma(plo, big_e, big_e)
        res = np.where(phi >= POW_EXP_OVERFLOW, F(np.inf), res)
        res = np.where(phi < POW_EXP_UNDERFLOW, F(0), res)
        # §2.4 in source order
        odd = fma(np.floor(b * F(0.5)), F(-2), b) == F(1)
        r12 = np.where(b < 0, np.copysign(np.where(a == 0, F(np.inf), F(0)), a), a)
        r12 = np.where(odd, r12, np.abs(r12))
        negative = a < 0
        a_zero_or_inf = (a == 0) | np.isinf(a)
        res = np.where(negative & odd, -res, res)
        nan = negative & (b != np.floor(b)) & ~a_zero_or_inf
        res = np.where(a_zero_or_inf, r12, res)
        one = (b == 0) | (a == 1)
        nan = (nan | np.isnan(a) | np.isnan(b)) & ~one
        res = np.where(one, F(1), res)
        res = np.where((a == -1) & np.isinf(b), F(1), res)
    res = np.array(res, dtype=F)
    res.view(np.uint32)[nan] = 0x7FC00000
    return res


class TestNpuPowerBits:
    """The optimized Power (fast fma, blocks, scalar exponent, sparse special
    cases) against the literal transcription, bit for bit."""

    @staticmethod
    def inputs(rng, n):
        specials = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 2.0, -2.0, 0.5, 3.0, -(1 - 2.0**-24),
                             2.0**24, 2.0**24 + 2, 2.0**-149, -(2.0**-149), 2.0**-126, 88.0, -104.0], np.float32)
        a = np.concatenate([
            from_bits32(rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)),
            np.exp(rng.uniform(-20, 20, n)).astype(np.float32) * rng.choice([-1, 1], n).astype(np.float32),
            from_bits32(rng.integers(1, 0x00800000, n)),
            rng.uniform(0, 1, n).astype(np.float32),
            np.repeat(specials, specials.size),
        ])
        b = np.concatenate([
            from_bits32(rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)),
            rng.uniform(-20, 20, n).astype(np.float32),
            rng.uniform(-3, 3, n).astype(np.float32),
            rng.integers(-40, 40, n).astype(np.float32),
            np.tile(specials, specials.size),
        ])
        return a, b

    @pytest.mark.parametrize("fix", [True, False])
    def test_matches_literal_transcription(self, fix):
        rng = np.random.default_rng(40)
        a, b = self.inputs(rng, 40_000)
        want = reference_pow_c(a, b, fix)
        assert np.array_equal(bits32(power_c(a, b, fix)), bits32(want))
        spec = "npu" if fix else "npu+release"
        assert np.array_equal(bits32(get_machine(spec).pow(a, b)), bits32(want))

    @pytest.mark.parametrize("k", [2.0, 3.0, -0.5, 0.0, np.nan, -(1 - 2.0**-24)])
    def test_scalar_exponent_and_blocks(self, k, monkeypatch):
        rng = np.random.default_rng(41)
        a, _ = self.inputs(rng, 20_000)
        b = np.full_like(a, np.float32(k))
        want = reference_pow_c(a, b)
        assert np.array_equal(bits32(power_c(a, np.float32(k))), bits32(want))
        monkeypatch.setattr(npu_module, "POW_BLOCK", 1000)
        got = get_machine("npu").pow(a.reshape(-1, 1), np.float32(k))  # 2-D, broadcast scalar
        assert got.shape == (a.size, 1)
        assert np.array_equal(bits32(got.reshape(-1)), bits32(want))

    def test_broadcast_shapes(self):
        rng = np.random.default_rng(42)
        a = np.exp(rng.uniform(-5, 5, (7, 1))).astype(np.float32)
        b = rng.uniform(-4, 4, (1, 9)).astype(np.float32)
        A, B = np.broadcast_arrays(a, b)
        want = reference_pow_c(A.reshape(-1), B.reshape(-1)).reshape(7, 9)
        assert np.array_equal(bits32(get_machine("npu").pow(a, b)), bits32(want))
        assert get_machine("npu").pow(np.float32(2), np.float32(3)).shape == ()


class TestNpuPowerIntrinsic:
    def test_error_grows_with_b_ln_a(self):
        rng = np.random.default_rng(6)
        x = np.exp(rng.uniform(1.5, 2.0, 20000)).astype(np.float32)
        y = np.float32(44.0)  # |y ln x| in [66, 88]
        ref = np.power(x.astype(np.float64), 44.0)
        intr = get_machine("npu").pow(x, y, algo="intrinsic")
        dft = get_machine("npu").pow(x, y)
        assert ulp_error_fp32(intr, ref).max() > 10
        assert ulp_error_fp32(dft, ref).max() < 1.6

    def test_subnormal_base_and_special_cases(self):
        m = get_machine("npu")
        tiny = from_bits32(np.array([0x00000400], dtype=np.uint32))
        assert bits32(m.pow(tiny, np.float32(0.5), algo="intrinsic")) == 0  # vln flushes -> -inf -> exp -> 0
        assert bits32(m.pow(tiny, np.float32(-0.5), algo="intrinsic")) == 0x7F800000
        assert bits32(m.pow(np.float32(-2), np.float32(0.5), algo="intrinsic")) == 0x7FC00000
        assert bits32(m.pow(np.float32(np.nan), np.float32(0), algo="intrinsic")) == 0x3F800000
        assert bits32(m.pow(np.float32(-1), np.float32(np.inf), algo="intrinsic")) == 0x3F800000

    def test_bf16_rejected(self):
        with pytest.raises(ParameterError, match="bf16"):
            get_machine("npu+bf16").pow(1.5, 2.0, algo="intrinsic")


# ---------------------------------------------------------------------------
# npu Exp / Ln / Div modes
# ---------------------------------------------------------------------------


class TestNpuExpLnDiv:
    def test_exp_ftz_false_squares_into_subnormals(self):
        m = get_machine("npu")
        x = np.float32(-100.0)
        precise = m.exp(x)
        flushed = m.exp(x, ftz=True)
        cr = mp_ref(libmp.mpf_exp, x)
        assert 0 < float(precise) < FP32.smallest_normal
        assert abs(float(precise) - cr) <= 2 * FP32.smallest_subnormal
        assert bits32(flushed) == 0
        # the square of RN32(exp(x/2)), rounded in float32
        half = np.float32(math.exp(-50.0))
        assert bits32(precise) == bits32(half * half)
        # normal results are the plain proxy in both modes
        assert bits32(m.exp(np.float32(1.5))) == bits32(m.exp(np.float32(1.5), ftz=True))

    def test_ln_ftz_false_subnormal_input(self):
        m = get_machine("npu")
        x = from_bits32(np.array([0x00000001, 0x00012345, 0x007FFFFE], dtype=np.uint32))
        precise = m.ln(x)
        ref = np.array([mp_ref(libmp.mpf_log, v) for v in x])
        assert np.all(np.isfinite(precise))
        assert ulp_error_fp32(precise, ref).max() <= 1.0
        assert np.all(np.isneginf(m.ln(x, ftz=True)))

    def test_ln_strict_bound_quirk(self):
        m = get_machine("npu")
        largest_subnormal = from_bits32(np.uint32(0x007FFFFF))
        assert np.isneginf(m.ln(largest_subnormal))  # stays on vln, which flushes it
        assert np.isfinite(m.ln(from_bits32(np.uint32(0x007FFFFE))))
        assert np.isfinite(get_machine("ieee").ln(largest_subnormal))

    def test_div_default_flushes(self):
        m = get_machine("npu")
        assert bits32(m.div(np.float32(1), np.float32(-5.0e-39), mode="default")) == 0xFF800000
        q = m.div(np.float32(1.0e-39), np.float32(2.0e-39), mode="default")
        assert bits32(q) == 0x7FFFFFFF
        assert bits32(m.div(np.float32(1e-30), np.float32(1e10), mode="default")) == 0  # subnormal result
        assert bits32(m.div(np.float32(-1e-30), np.float32(1e10), mode="default")) == 0x80000000
        assert float(m.div(np.float32(1), np.float32(-5.0e-39))) == float(np.float32(1) / np.float32(-5.0e-39))

    def test_div_0ulp_equals_numpy(self):
        rng = np.random.default_rng(7)
        a = from_bits32(rng.integers(0, 1 << 32, 100_000, dtype=np.uint64).astype(np.uint32))
        b = from_bits32(rng.integers(0, 1 << 32, 100_000, dtype=np.uint64).astype(np.uint32))
        b[:20000] = from_bits32(rng.integers(1, 0x00800000, 20000))  # subnormal divisors
        a[20000:40000] = from_bits32(rng.integers(1, 0x00800000, 20000))
        with np.errstate(all="ignore"):
            want = a / b
        for spec in ("npu", "ieee", "numpy"):
            assert np.array_equal(bits32(get_machine(spec).div(a, b)), bits32(want))

    def test_div_0ulp_fp16_matches_exact(self):
        rng = np.random.default_rng(8)
        a = rng.integers(0, 0x7C00, 3000).astype(np.uint16).view(np.float16)
        b = rng.integers(1, 0x7C00, 3000).astype(np.uint16).view(np.float16)
        got = get_machine("ieee+fp16").div(a, b)
        want = np.array([round_fraction(Fraction(float(x)) / Fraction(float(y)), FP16) for x, y in zip(a, b)])
        assert np.array_equal(bits16(got), bits16(want.astype(np.float16)))


# ---------------------------------------------------------------------------
# flush switches
# ---------------------------------------------------------------------------


class TestFlushSwitches:
    def test_ftz_flushes_subnormal_results_keeping_sign(self):
        a, b = np.float32(-1e-20), np.float32(1e-20)  # product -1e-40 is subnormal
        assert bits32(get_machine("npu+ftz").mul(a, b)) == 0x80000000
        assert bits32(get_machine("ieee+ftz").fma(a, b, np.float32(0))) == 0x80000000
        assert bits32(get_machine("npu").mul(a, b)) == bits32(a * b)
        assert 0 < abs(float(get_machine("npu").mul(a, b))) < FP32.smallest_normal

    def test_daz_reads_subnormal_inputs_as_zero(self):
        sub = from_bits32(np.uint32(0x80000010))  # negative subnormal
        m = get_machine("npu+daz")
        assert bits32(m.add(sub, np.float32(0.0))) == 0  # -0 + +0 = +0
        assert bits32(m.mul(sub, np.float32(2.0))) == 0x80000000
        assert bits32(m.mul(sub, np.float32(2.0**30))) == 0x80000000
        assert float(get_machine("npu").mul(sub, np.float32(2.0**30))) == float(sub) * 2.0**30
        assert m.lt(sub, np.float32(0.0))  # compares stay exact

    def test_fma_flushes_like_mul(self):
        sub = from_bits32(np.uint32(0x00000010))
        assert bits32(get_machine("npu+daz").fma(sub, np.float32(2.0**30), np.float32(0))) == 0
        assert bits32(get_machine("npu+ftz").fma(np.float32(1e-20), np.float32(1e-20), np.float32(0))) == 0
        # ftz acts after the one rounding: a result that rounds up to FLT_MIN stays
        almost = from_bits32(np.uint32(0x007FFFFF))
        assert bits32(get_machine("ieee+ftz").fma(almost, np.float32(1 + 2.0**-23), np.float32(0))) == 0x00800000

    def test_g7_div0ulp_chain_keeps_subnormal_under_ftz(self):
        # raw*weight is subnormal: ftz flushes the Mul; the G7 rescue
        # Div0ulp(Div0ulp(raw, Div0ulp(1, weight)), Div0ulp(1, dout)) is not
        # in the Mul/Add class and keeps its subnormal result.
        raw, weight, dout = np.float32(-0.0746), np.float32(2.0**-124), np.float32(0.75)
        m, plain = get_machine("ieee+ftz"), get_machine("ieee")
        assert 0 < abs(float(plain.mul(raw, weight))) < FP32.smallest_normal
        assert bits32(m.mul(raw, weight)) == 0x80000000
        assert bits32(m.mul(m.mul(raw, weight), dout)) == 0x80000000
        one = np.float32(1.0)
        chain = m.div(m.div(raw, m.div(one, weight)), m.div(one, dout))
        assert 0 < abs(float(chain)) < FP32.smallest_normal and chain < 0
        want = plain.div(plain.div(raw, plain.div(one, weight)), plain.div(one, dout))
        assert bits32(chain) == bits32(want)
        for spec in ("npu+ftz", "npu+ftz+daz", "ieee+ftz+daz"):
            mm = get_machine(spec)
            assert bits32(mm.div(mm.div(raw, mm.div(one, weight)), mm.div(one, dout))) == bits32(want), spec

    @pytest.mark.parametrize("spec", ["ieee+ftz+daz", "numpy+ftz+daz", "npu+ftz+daz", "npu+release+ftz+daz"])
    def test_div_exp_ln_pow_ignore_the_switches(self, spec):
        flushing, plain = get_machine(spec), get_machine(spec.replace("+ftz", "").replace("+daz", ""))
        subs = from_bits32(np.array([0x00000001, 0x00012345, 0x807FFFFE], dtype=np.uint32))
        x = np.concatenate([subs, np.array([-100.0, -90.0, 0.5, 3.0], np.float32)])
        with np.errstate(all="ignore"):
            for name, args in (
                ("div", (x, np.float32(3.0))),
                ("div", (np.float32(1e-30), x)),
                ("exp", (x,)),
                ("ln", (np.abs(x),)),
                ("pow", (np.abs(x), np.float32(0.5))),
                ("pow", (np.float32(0.5), np.float32(140.0))),
            ):
                for kw in ({}, {"mode": "default"} if name == "div" else {"ftz": True} if name in ("exp", "ln") else
                           {"algo": "intrinsic"}):
                    got, want = getattr(flushing, name)(*args, **kw), getattr(plain, name)(*args, **kw)
                    assert np.array_equal(bits32(got), bits32(want)), (name, kw)
        # subnormals do come through the 0ulp Div, exp and ln on a flushing machine
        q = flushing.div(subs[1:], np.float32(3.0))
        assert np.all((q != 0) & (np.abs(q) < FP32.smallest_normal))
        assert np.all(np.isfinite(flushing.ln(np.abs(subs))))
        if "numpy" not in spec:
            assert 0 < float(flushing.exp(np.float32(-100.0))) < FP32.smallest_normal
        if spec.startswith("npu"):  # the npu default Div still flushes by itself
            assert bits32(flushing.div(np.float32(1e-30), np.float32(1e10), mode="default")) == 0

    def test_subnormals_kept_by_default(self):
        m = get_machine("npu")
        x = from_bits32(np.uint32(0x00000003))
        assert bits32(m.mul(x, np.float32(0.5))) == 0x00000002  # 1.5 ulp -> ties to even 2
        assert bits32(m.sub(x, from_bits32(np.uint32(0x00000001)))) == 0x00000002


# ---------------------------------------------------------------------------
# compute formats
# ---------------------------------------------------------------------------


class TestComputeFormats:
    def test_fp16_fma_avoids_float32_double_rounding(self):
        a = np.float16(1 + 2.0**-10)
        b = np.float16(2.0**-11 - 2.0**-21)
        c = np.float16(1 + 2.0**-10)
        naive = np.float16(np.float32(a) * np.float32(b) + np.float32(c))  # float32 lands on the fp16 midpoint
        exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
        got = get_machine("npu+fp16").fma(a, b, c)
        assert bits16(naive) == 0x3C02
        assert bits16(got) == 0x3C01 == bits16(np.float16(round_fraction(exact, FP16)))

    def test_fp16_ops_round_once(self):
        rng = np.random.default_rng(9)
        a = rng.integers(0, 0x7C00, 5000).astype(np.uint16).view(np.float16)
        b = rng.integers(0, 0xFC00, 5000).astype(np.uint16).view(np.float16)
        m = get_machine("ieee+fp16")
        for op, f in ((m.add, np.add), (m.sub, np.subtract), (m.mul, np.multiply)):
            with np.errstate(invalid="ignore"):
                want = round_to_format(f(a.astype(np.float64), b.astype(np.float64)), FP16)
            assert np.array_equal(bits16(op(a, b)), bits16(want))

    def test_float64_to_fp16_cast_is_single_rounding(self):
        rng = np.random.default_rng(10)
        v = rng.uniform(-1, 1, 200_000) * np.ldexp(1.0, rng.integers(-27, 17, 200_000))
        with np.errstate(over="ignore"):
            assert np.array_equal(v.astype(np.float16).view(np.uint16), round_to_format(v, FP16).view(np.uint16))

    def test_bf16_machine(self):
        m = get_machine("npu+bf16")
        assert m.dtype == np.dtype(ml_dtypes.bfloat16)
        x = m.asarray(np.float32(1.0 + 2.0**-8 + 2.0**-20))  # just above the bf16 midpoint
        assert float(x) == 1.0 + 2.0**-7
        assert float(m.add(np.float32(1.0), np.float32(2.0**-8))) == 1.0  # tie to even
        assert m.exp(1.0).dtype == m.dtype and m.pow(2.0, 0.5).dtype == m.dtype

    def test_asarray_and_casts(self):
        m = get_machine("ieee")
        assert m.asarray(np.float16(0.1)).dtype == np.float32
        assert float(m.asarray(np.float16(0.1))) == float(np.float16(0.1))  # exact widening
        assert float(m.asarray(0.1)) == float(np.float32(0.1))
        assert float(m.from_int32(np.array([16777217], dtype=np.int32))[0]) == 16777216.0
        x = np.array([2.5, -2.5, 1 + 2.0**-11], dtype=np.float32)
        assert m.cast(x, "fp16", RNE).tolist() == [2.5, -2.5, 1.0]
        assert m.cast(x, "fp16", RNA).tolist() == [2.5, -2.5, 1 + 2.0**-10]
        assert m.cast(np.float32(-(1 + 2.0**-10 - 2.0**-20)), "fp16", RTZ) == np.float16(-1.0)
        assert m.cast(np.float32(70000.0), "fp16").item() == np.inf


# ---------------------------------------------------------------------------
# numpy machine
# ---------------------------------------------------------------------------


class TestNumpyModel:
    def test_uses_numpy_ufuncs(self):
        rng = np.random.default_rng(11)
        x = rng.uniform(-90, 89, 10000).astype(np.float32)
        m = get_machine("numpy")
        with np.errstate(all="ignore"):
            assert np.array_equal(bits32(m.exp(x)), bits32(np.exp(x)))
            assert np.array_equal(bits32(m.ln(np.abs(x))), bits32(np.log(np.abs(x))))
            assert np.array_equal(bits32(m.pow(np.abs(x), x / 10)), bits32(np.power(np.abs(x), x / 10)))


# ---------------------------------------------------------------------------
# op counting
# ---------------------------------------------------------------------------


class TestCounting:
    def test_counts_of_a_tiny_recipe(self):
        m = Machine(MachineModel("npu"), count_ops=True)
        x = m.asarray(np.linspace(-2, 2, 5))
        e = m.exp(m.neg(m.abs(x)))
        p = m.div(1.0, m.add(e, 1.0))
        q = m.sub(1.0, p)
        r = m.select(m.ge(x, 0.0), p, q)
        m.pow(m.maximum(r, 1e-3), 2.0)
        m.fma(r, r, r)
        m.div(r, 3.0, mode="default")
        m.cast(r, "fp16")
        assert dict(m.counts) == {
            "abs": 5, "neg": 5, "exp": 5, "add": 5, "div0ulp": 5, "sub": 5, "cmp": 5,
            "select": 5, "max": 5, "pow": 5, "fma": 5, "div": 5, "cast": 5,
        }

    def test_counting_off(self):
        m = get_machine("npu")
        m.add(np.ones(3, np.float32), 1.0)
        assert not m.counts


# ---------------------------------------------------------------------------
# get_machine / MachineModel
# ---------------------------------------------------------------------------


class TestGetMachine:
    @pytest.mark.parametrize(
        "spec, fields",
        [
            ("ieee", dict(name="ieee")),
            ("numpy+fp16", dict(name="numpy", compute="fp16")),
            ("npu+ftz+daz", dict(name="npu", ftz=True, daz=True)),
            ("npu+release+bf16", dict(name="npu", power_subnormal_fix=False, compute="bf16")),
        ],
    )
    def test_valid(self, spec, fields):
        m = get_machine(spec)
        assert m.model == MachineModel(**fields)
        assert get_machine(m) is m
        assert get_machine(m.model.spec).model == m.model
        assert m.dtype == m.fmt.dtype

    @pytest.mark.parametrize("spec", ["cpu", "npu+fast", "ieee+release", "npu+ftz+ftz", "npu+fp16+bf16", "", 3])
    def test_invalid(self, spec):
        with pytest.raises(ParameterError):
            get_machine(spec)

    def test_unknown_name_lists_valid_names(self):
        with pytest.raises(ParameterError) as info:
            get_machine("gpu")
        for name in MODEL_NAMES:
            assert name in str(info.value)

    def test_model_validation_and_bad_modes(self):
        with pytest.raises(ParameterError, match="compute"):
            MachineModel("npu", compute="fp64")
        with pytest.raises(ParameterError, match="ftz"):
            MachineModel("npu", ftz="yes")
        m = get_machine("npu")
        with pytest.raises(ParameterError, match="mode='fast'"):
            m.div(1.0, 2.0, mode="fast")
        with pytest.raises(ParameterError, match="algo='taylor'"):
            m.pow(1.0, 2.0, algo="taylor")
