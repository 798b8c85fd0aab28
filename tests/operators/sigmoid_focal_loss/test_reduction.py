"""Tests of precision/operators/sigmoid_focal_loss/reduction.py: the kernel's fp32 order of additions (against by-hand
orders and a scalar transcription of the kernel's loops), exact sums, correct rounding, mean scale and bounds."""

import math
from fractions import Fraction

import numpy as np
import pytest
from mpmath import libmp

from precision.errors import DtypeError, ParameterError, ShapeError
from precision.exact.formats import get_format, round_to_format
from precision.operators.sigmoid_focal_loss.reduction import (U_FP32, exact_sum, kernel_depth, kernel_mean, kernel_sum,
                                                              mean_scale, pairwise_sum, round_exact, sequential_bound,
                                                              sequential_sum, tree_bound)

f32 = np.float32


def bits(value) -> int:
    return int(np.float32(value).view(np.uint32))


def fraction_sum(values) -> Fraction:
    return sum(map(Fraction, np.asarray(values, dtype=np.float64).tolist()), Fraction(0))


def spread(rng, n, lo=-8, hi=9):
    """Positive fp32 values with mixed exponents (orders of addition then give different roundings)."""
    return (rng.random(n) * 2.0 ** rng.integers(lo, hi, n)).astype(np.float32)


def near_one(rng, n):
    """fp32 values in [1, 2) with random low bits: partial sums of every size round, so orders differ in bits."""
    return (1 + rng.random(n)).astype(np.float32)


# ---------------------------------------------------------------------------
# A scalar transcription of the kernel's loops (written from the sources, independent of the vectorised module)
# ---------------------------------------------------------------------------

def add(a, b):
    return f32(f32(a) + f32(b))


def lane_tree(v):
    """ReduceSum / ReduceSumWithDataBlock: adjacent pairs, level by level."""
    v = list(v)
    while len(v) > 1:
        v = [add(v[2 * k], v[2 * k + 1]) for k in range(len(v) // 2)]
    return v[0]


def halve(vectors):
    """Vector k + h onto vector k, h = half the count, repeatedly (the main and tail folds)."""
    while len(vectors) > 1:
        h = len(vectors) // 2
        vectors = [[add(a, b) for a, b in zip(vectors[k], vectors[k + h])] for k in range(h)]
    return vectors[0]


def ref_reduce_sum(row):
    """ReduceSum<float, AR, reuse source> of one padded row (asc-devkit ReduceARImpl)."""
    row = [f32(v) for v in row]
    width = len(row)
    if width <= 64:
        if width < 32:  # GroupReduceVf: block 0, then + block 1, + block 2; then the data-block tree
            acc = row[:8]
            for k in range(1, width // 8):
                acc = [add(row[8 * k + j], acc[j]) for j in range(8)]
            return lane_tree(acc)
        return lane_tree(row + [f32(0)] * (64 - width))
    main = 1 << (width.bit_length() - 1)
    for j in range(width - main):
        row[j] = add(row[j], row[main + j])
    vectors = [row[64 * k:64 * k + 64] for k in range(main // 64)]
    while len(vectors) >= 16:
        vectors = [halve(vectors[16 * g:16 * g + 16]) for g in range(len(vectors) // 16)]
    return lane_tree(halve(vectors))


def find_nearest_power2(value):
    if value <= 2:
        return 1
    if value <= 4:
        return 2
    return 1 << ((value - 1).bit_length() - 1)


def ref_kernel_sum(x, chunk, cores=1, align=8):
    """ProcessReductionRange with its binary-counter cache, Phase1Process's split, Phase2Process's RA reduce."""
    n = len(x)
    factor = min(chunk, n)
    width = -(-factor // align) * align
    nchunks = -(-n // factor)

    def padded(i):
        c = [f32(v) for v in x[i * factor:(i + 1) * factor]]
        return c + [f32(0)] * (width - len(c))

    def core(start, count):
        p = find_nearest_power2(count)
        cache = [f32(0)] * 64
        for i in range(p):
            row = padded(start + i)
            if i < count - p:
                row = [add(a, b) for a, b in zip(row, padded(start + i + p))]
            acc = ref_reduce_sum(row)
            cache_id = bin(i ^ (i + 1)).count("1") - 1
            for level in range(cache_id):
                acc = add(acc, cache[level])
            cache[cache_id] = acc
        return cache[p.bit_length() - 1]

    if cores < 2 or nchunks < 2:
        return core(0, nchunks)
    per_core = -(-nchunks // cores)
    groups = -(-nchunks // per_core)
    small, big = divmod(nchunks, groups)
    partials = []
    for g in range(groups):
        start = g * (small + 1) if g < big else big * (small + 1) + (g - big) * small
        partials.append(core(start, small + 1 if g < big else small))
    if groups == 1:
        return partials[0]
    main = 1 << (groups.bit_length() - 1)
    for r in range(groups - main):
        partials[r] = add(partials[r], partials[main + r])
    while main > 1:
        main //= 2
        for r in range(main):
            partials[r] = add(partials[r], partials[r + main])
    return partials[0]


def tree8(v):
    return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]))


# ---------------------------------------------------------------------------
# exact_sum
# ---------------------------------------------------------------------------

class TestExactSum:
    def test_float64_mixed_exponents_and_subnormals(self):
        rng = np.random.default_rng(1)
        for _ in range(20):
            n = int(rng.integers(1, 3000))
            v = np.ldexp(rng.standard_normal(n), rng.integers(-1085, 1000, n))
            v[rng.random(n) < 0.3] = v[0]
            assert exact_sum(v) == fraction_sum(v)

    @pytest.mark.parametrize("dtype,uint", [(np.float16, np.uint16), (np.float32, np.uint32), (np.float64, np.uint64)])
    def test_every_bit_pattern_class(self, dtype, uint):
        # random bit patterns: subnormals, huge/tiny mixes, both signs
        rng = np.random.default_rng(2)
        v = rng.integers(0, np.iinfo(uint).max, 4000, dtype=uint, endpoint=True).view(dtype)
        v = v[np.isfinite(v)]
        assert exact_sum(v) == fraction_sum(v)
        tiny = v[np.abs(v) < np.finfo(dtype).smallest_normal]
        assert exact_sum(tiny) == fraction_sum(tiny)

    def test_cancellation(self):
        rng = np.random.default_rng(3)
        x = np.ldexp(rng.random(5000), rng.integers(-200, 200, 5000))
        v = np.concatenate([x, -x, [2.0**-1074, 3.0]])
        rng.shuffle(v)
        assert exact_sum(v) == 3 + Fraction(1, 2**1074)
        assert exact_sum(np.array([2.0**1023, 2.0**1023, -2.0**1023, -2.0**1023, 2.0**-1074])) == Fraction(1, 2**1074)

    def test_many_terms_of_one_exponent(self):
        # more than one 2**10-term piece per exponent, largest significands, both signs
        big = np.nextafter(2.0, 0.0) * 2.0**100
        v = np.r_[np.full(5000, big), np.full(2000, -big), np.full(3001, np.float64(np.float32(1.5)))]
        assert exact_sum(v) == 3000 * Fraction(big) + 3001 * Fraction(3, 2)
        ones = np.ones(70_000, np.float32)
        assert exact_sum(ones) == 70_000

    def test_empty_and_zeros(self):
        assert exact_sum(np.array([], np.float32)) == 0
        assert exact_sum(np.array([-0.0, 0.0, -0.0])) == 0

    def test_non_finite(self):
        inf, nan = math.inf, math.nan
        assert exact_sum(np.array([1.0, inf, 2.0])) == inf
        assert exact_sum(np.array([-inf, 1.0, -inf], np.float32)) == -inf
        assert math.isnan(exact_sum(np.array([inf, -inf])))
        assert math.isnan(exact_sum(np.array([1.0, nan])))

    def test_rejects_integers(self):
        with pytest.raises(DtypeError):
            exact_sum(np.arange(3))


# ---------------------------------------------------------------------------
# round_exact
# ---------------------------------------------------------------------------

class TestRoundExact:
    @pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp32", "fp64"])
    def test_matches_round_to_format_on_float64(self, fmt):
        f = get_format(fmt)
        rng = np.random.default_rng(4)
        n = 3000
        e = rng.integers(f.emin - f.prec - 3, f.emax + 2, n)
        with np.errstate(over="ignore"):
            v = np.ldexp(rng.uniform(1.0, 2.0, n), e) * rng.choice([-1.0, 1.0], n)
            # exact ties of the format: odd multiples of half its quantum
            q = np.maximum(e, f.emin) - f.prec + 1
            ties = np.ldexp(2.0 * rng.integers(1, 2**f.prec, n) + 1.0, q - 1)
        values = np.concatenate([v, ties])
        values = values[np.isfinite(values) & (values != 0)]
        wants = round_to_format(values, f).astype(np.float64).tolist()
        for value, want in zip(values.tolist(), wants):
            assert round_exact(Fraction(value), fmt).hex() == want.hex(), value

    def test_fp32_ties_to_even(self):
        assert round_exact(1 + Fraction(1, 2**24), "fp32") == 1.0
        assert round_exact(1 + Fraction(3, 2**24), "fp32") == 1 + 2.0**-22
        assert round_exact(1 + Fraction(1, 2**24) + Fraction(1, 2**90), "fp32") == 1 + 2.0**-23
        assert round_exact(-1 - Fraction(3, 2**24), "fp32") == -(1 + 2.0**-22)

    def test_non_dyadic_against_mpmath(self):
        rng = np.random.default_rng(5)
        for fmt in ("fp16", "bf16", "fp32", "fp64"):
            f = get_format(fmt)
            for _ in range(200):
                p, q = int(rng.integers(2**40, 2**41)), int(rng.integers(2**40, 2**41)) | 1   # p/q in (1/2, 2)
                value = Fraction(p, q) * Fraction(2) ** int(rng.integers(f.emin - f.prec - 2, f.emax + 1))
                # 400 bits toward zero, then RNE: a non-dyadic value is no tie, and 400 bits cannot cross one
                mpf = libmp.mpf_div(libmp.from_int(value.numerator), libmp.from_int(value.denominator), 400, "d")
                assert round_exact(value, fmt) == f.round_mpf(mpf), (fmt, value)
        assert round_exact(Fraction(1, 3), "fp32").hex() == "0x1.5555560000000p-2"

    def test_overflow(self):
        assert round_exact(Fraction(65519), "fp16") == 65504.0
        assert round_exact(Fraction(65520), "fp16") == math.inf  # max + ulp/2, odd significand: up
        assert round_exact(Fraction(65520) - Fraction(1, 10**9), "fp16") == 65504.0
        max32 = Fraction(2**24 - 1) * 2**104
        assert round_exact(max32 + 2**103, "fp32") == math.inf
        assert round_exact(max32 + 2**103 - Fraction(1, 10**9), "fp32") == float(max32)
        assert round_exact(-Fraction(2**5000), "fp32") == -math.inf
        assert round_exact(Fraction(2**200), "bf16") == math.inf

    def test_subnormal_results(self):
        assert round_exact(Fraction(3, 2**151), "fp32") == 2.0**-149   # 0.75 quantum
        assert round_exact(Fraction(1, 2**150), "fp32") == 0.0          # half a quantum, to even 0
        assert round_exact(Fraction(3, 2**150), "fp32") == 2.0**-148    # 1.5 quanta, to even 2
        assert round_exact(-Fraction(1, 2**151), "fp32").hex() == "-0x0.0p+0"
        assert round_exact(Fraction(3, 2**26), "fp16") == 2.0**-24
        assert round_exact(Fraction(1, 2**25), "fp16") == 0.0
        assert round_exact(Fraction(1, 3 * 2**1070), "fp64") == 5 * 2.0**-1074  # 16/3 quanta of 2**-1074
        assert round_exact(Fraction(1, 2**100000), "fp64") == 0.0

    def test_specials_pass_through(self):
        assert round_exact(math.inf, "fp32") == math.inf
        assert math.isnan(round_exact(math.nan, "fp16"))
        assert round_exact(-0.0, "fp32").hex() == "-0x0.0p+0"
        assert round_exact(0, "bf16") == 0.0


# ---------------------------------------------------------------------------
# Reference orders
# ---------------------------------------------------------------------------

class TestReferenceOrders:
    def test_sequential_by_hand(self):
        x = spread(np.random.default_rng(6), 7)
        want = x[0]
        for v in x[1:]:
            want = f32(want + v)
        assert bits(sequential_sum(x)) == bits(want)

    def test_sequential_across_blocks(self):
        x = np.r_[np.float32(2.0**24), np.ones(2**20 + 5, np.float32)]   # ties all the way: stays 2**24
        assert sequential_sum(x) == 2.0**24
        assert sequential_sum(x[::-1]) == f32(2**20 + 5) + f32(2.0**24)   # the ones first (exact), then + 2**24

    def test_pairwise_by_hand(self):
        a, b, c, d, e = spread(np.random.default_rng(7), 5)
        assert bits(pairwise_sum([a, b, c, d, e])) == bits(((a + c) + (b + d)) + e)
        assert bits(pairwise_sum([a, b, c])) == bits((a + b) + c)
        assert pairwise_sum([]) == 0 and sequential_sum([]) == 0


# ---------------------------------------------------------------------------
# kernel_sum
# ---------------------------------------------------------------------------

class TestKernelSum:
    @pytest.mark.parametrize("chunk,cores", [(1, 1), (8, 1), (1, 4), (8, 4), (100, 2)])
    def test_one_and_two_elements_are_sequential(self, chunk, cores):
        a, b = spread(np.random.default_rng(8), 2)
        assert bits(kernel_sum([a], chunk, cores)) == bits(a)
        assert bits(kernel_sum([a, b], chunk, cores)) == bits(a + b)

    def test_five_chunks_of_eight_by_hand(self):
        rng = np.random.default_rng(14)
        x = (rng.random(40) * 2.0 ** rng.integers(-8, 9, 40)).astype(np.float32)
        c = x.reshape(5, 8)
        # P = 4: chunk 4 onto chunk 0; each row by the 8-lane tree; the cache tree over the 4 row sums
        s = [tree8(c[0] + c[4]), tree8(c[1]), tree8(c[2]), tree8(c[3])]
        want = (s[0] + s[1]) + (s[2] + s[3])
        assert bits(kernel_sum(x, 8)) == bits(want)
        # and this data tells the order apart from the others
        s5 = [tree8(r) for r in c]
        for other in (sequential_sum(x), pairwise_sum(x), ((s5[0] + s5[1]) + (s5[2] + s5[3])) + s5[4], np.sum(x)):
            assert bits(other) != bits(want)

    def test_partial_last_chunk_by_hand(self):
        x = spread(np.random.default_rng(9), 37)
        c = [x[8 * i:8 * i + 8] for i in range(4)] + [np.r_[x[32:], np.zeros(3, np.float32)]]
        s = [tree8(c[0] + c[4]), tree8(c[1]), tree8(c[2]), tree8(c[3])]
        assert bits(kernel_sum(x, 8)) == bits((s[0] + s[1]) + (s[2] + s[3]))

    def test_cores_by_hand(self):
        x = near_one(np.random.default_rng(7), 80)
        c = x.reshape(10, 8)
        # 10 chunks on 4 cores: 3, 3, 2, 2 chunks; then ReduceSum RA over 4 partials: (p0 + p2) + (p1 + p3)
        p = [tree8(c[0] + c[2]) + tree8(c[1]), tree8(c[3] + c[5]) + tree8(c[4]), tree8(c[6] + c[7]), tree8(c[8] + c[9])]
        want = (p[0] + p[2]) + (p[1] + p[3])
        assert bits(kernel_sum(x, 8, cores=4)) == bits(want)
        # not ceil(10 / 4) = 3 chunks per core (3, 3, 3, 1), nor the partials added in core order
        q = p[:2] + [tree8(c[6] + c[8]) + tree8(c[7]), tree8(c[9])]
        assert bits((q[0] + q[2]) + (q[1] + q[3])) != bits(want) != bits(((p[0] + p[1]) + p[2]) + p[3])
        # 5 chunks on 4 cores: ceil(5 / 4) = 2 per core, 3 cores (2, 2, 1); RA over 3: (p0 + p2) + p1
        p = [tree8(c[0] + c[1]), tree8(c[2] + c[3]), tree8(c[4])]
        assert bits(kernel_sum(x[:40], 8, cores=4)) == bits((p[0] + p[2]) + p[1]) != bits((p[0] + p[1]) + p[2])

    @pytest.mark.parametrize("n", [20, 50, 64, 200, 1000, 1500, 2148, 4096 + 8, 16384 + 16])
    def test_one_chunk_reduce_sum_regimes(self, n):
        # widths 24 (data blocks), 56, 64 (lanes); 200 (tail fold, 2 vectors), 1000 (8), 1500 (16: one main fold),
        # 2148 (32: main fold + 2), 4104 (64: main fold + 4), 16400 (256: two main folds)
        x = spread(np.random.default_rng(n), n)
        width = -(-n // 8) * 8
        assert bits(kernel_sum(x, n)) == bits(ref_reduce_sum(np.r_[x, np.zeros(width - n, np.float32)]))

    def test_matches_the_scalar_transcription(self):
        rng = np.random.default_rng(11)
        for chunk in (8, 16, 24, 40, 64, 72, 200, 520):
            for cores in (1, 2, 3, 8):
                for n in (int(rng.integers(1, 3 * chunk)), int(rng.integers(3 * chunk, 14 * chunk))):
                    x = near_one(rng, n)
                    assert bits(kernel_sum(x, chunk, cores)) == bits(ref_kernel_sum(x, chunk, cores)), (chunk, cores, n)
        x = near_one(rng, 700)
        assert bits(kernel_sum(x, 48, 5, align=16)) == bits(ref_kernel_sum(x, 48, 5, align=16))

    def test_exact_on_small_integers(self):
        rng = np.random.default_rng(12)
        for n, chunk, cores in ((1000, 8, 1), (65537, 2048, 1), (65537, 1000, 8), (65537, 11872, 64)):
            x = rng.integers(0, 256, n).astype(np.float32)   # every partial sum < 2**24
            assert kernel_sum(x, chunk, cores) == int(x.astype(np.int64).sum())

    def test_within_the_depth_bound(self):
        rng = np.random.default_rng(13)
        sizes = {1, 2, 3} | {2**k + d for k in (3, 5, 8, 11) for d in (-1, 0, 1)}
        for chunk in (64, 200, 1000):
            sizes |= {chunk - 1, chunk, chunk + 1, 2 * chunk + 1, 5 * chunk - 3, 9 * chunk + 1}
        checked = 0
        for n in sorted(sizes):
            x = spread(rng, n)
            exact = exact_sum(x)
            for chunk in (64, 200, 1000):
                for cores in (1, 3, 8):
                    err = abs(Fraction(float(kernel_sum(x, chunk, cores))) - exact)
                    assert err <= Fraction(tree_bound(x, kernel_depth(n, chunk, cores))), (n, chunk, cores)
                    checked += 1
            assert abs(Fraction(float(sequential_sum(x))) - exact) <= Fraction(sequential_bound(x))
            assert abs(Fraction(float(pairwise_sum(x))) - exact) <= Fraction(tree_bound(x))
        assert checked == 9 * len(sizes)

    def test_sequential_stagnates_where_the_kernel_does_not(self):
        n = 2**24 + 2**22
        x = np.ones(n, np.float32)
        assert sequential_sum(x) == 2.0**24          # 2**24 + 1 ties back to 2**24 from then on
        assert kernel_sum(x, 11872) == n             # every partial sum is an exact integer
        assert kernel_sum(x, 11872, cores=64) == n

    def test_empty_and_specials(self):
        assert kernel_sum(np.array([], np.float32), 8) == 0
        assert kernel_sum(np.array([1.0, np.inf], np.float32), 8) == np.inf
        assert np.isnan(kernel_sum(np.array([np.inf, -np.inf, 1.0], np.float32), 1))
        assert kernel_sum(np.full(16, 2.0**127, np.float32), 8) == np.inf

    def test_rejects_bad_input(self):
        x = np.ones(16, np.float32)
        with pytest.raises(ParameterError):
            kernel_sum(x, 0)
        with pytest.raises(ParameterError):
            kernel_sum(x, 8, cores=0)
        with pytest.raises(ParameterError):
            kernel_sum(x, 8, align=12)
        with pytest.raises(ParameterError):
            kernel_sum(np.ones(70_000, np.float32), 70_000)
        with pytest.raises(ParameterError):
            kernel_sum(np.array([0.1]), 8)               # not an fp32 value
        with pytest.raises(ShapeError):
            kernel_sum(x.reshape(2, 8), 8)
        assert kernel_sum([1, 2, 3], 8) == 6             # exact fp32 values of another dtype are accepted


# ---------------------------------------------------------------------------
# kernel_depth and the bounds
# ---------------------------------------------------------------------------

class TestKernelDepth:
    @pytest.mark.parametrize("n,chunk,cores,depth", [
        (0, 8, 1, 0),
        (1, 1, 1, 3),            # one row of width 8: the 8-lane tree
        (40, 8, 1, 6),           # pre-add 1 + lanes 3 + cache tree log2(4) = 2
        (80, 8, 4, 7),           # largest range 3 chunks: 1 + 3 + 1, RA over 4 partials: 2
        (40, 8, 4, 6),           # ranges 2, 2, 1: 1 + 3 + 0, RA over 3: 2
        (20, 100, 1, 5),         # width 24: two block adds + 3
        (50, 100, 1, 6),         # width 56: the 64-lane tree
        (200, 1000, 1, 8),       # width 200: tail fold 1 + log2(128)
        (1_000_000, 11872, 64, 21),  # 85 chunks, 43 cores of 2 or 1: 1 + (1 + 13) + 0 + 6
    ])
    def test_hand_values(self, n, chunk, cores, depth):
        assert kernel_depth(n, chunk, cores) == depth

    def test_rejects_negative_n(self):
        with pytest.raises(ParameterError):
            kernel_depth(-1, 8)


class TestBounds:
    def test_tree_bound_is_the_next_float_up(self):
        x = np.full(5, 0.1, np.float32)
        g = Fraction(3) * U_FP32 / (1 - 3 * U_FP32) * exact_sum(x)
        b = tree_bound(x)                     # default depth ceil(log2 5) = 3
        assert Fraction(b) >= g > Fraction(math.nextafter(b, 0.0))
        assert tree_bound(x, 3) == b

    def test_sequential_bound_uses_n_minus_1(self):
        x = np.ones(4, np.float32)
        assert Fraction(sequential_bound(x)) >= 3 * U_FP32 / (1 - 3 * U_FP32) * 4
        assert sequential_bound(x) == tree_bound(x, 3)
        assert sequential_bound(np.ones(1, np.float32)) == 0.0 == tree_bound([], 5)

    def test_bound_limits(self):
        assert tree_bound(np.ones(3), 2**24) == math.inf          # k u >= 1
        assert tree_bound(np.array([1.0, np.inf]), 1) == math.inf
        with pytest.raises(ParameterError):
            tree_bound(np.ones(3), -1)


# ---------------------------------------------------------------------------
# mean
# ---------------------------------------------------------------------------

class TestMean:
    def test_two_roundings_above_2_24(self):
        n = 2**24 + 1
        # float(n): 2**24 + 1 is halfway between 2**24 and 2**24 + 2; to even: 2**24; then 1 / 2**24 is exact
        assert bits(mean_scale(n)) == 0x33800000 == bits(2.0**-24)
        # one rounding of 1/n in [2**-25, 2**-24) (quantum 2**-48): (2**24 - 1) * 2**-48 is nearer than 2**-24
        exact = Fraction(1, n)
        below, above = Fraction(2**24 - 1, 2**48), Fraction(1, 2**24)
        assert below < exact < above and exact - below < above - exact
        assert round_exact(exact, "fp32") == float(below)
        assert bits(round_exact(exact, "fp32")) == 0x337FFFFF

    @pytest.mark.parametrize("n", [1, 3, 7, 1000003, 2**24])
    def test_one_rounding_up_to_2_24(self, n):
        assert float(mean_scale(n)) == round_exact(Fraction(1, n), "fp32")

    def test_zero_and_negative(self):
        assert mean_scale(0) == 0.0     # the host's ComputeReductionScale
        with pytest.raises(ParameterError):
            mean_scale(-1)

    def test_kernel_mean_is_one_multiply(self):
        x = spread(np.random.default_rng(15), 1001)
        got = kernel_mean(x, 200, cores=3)
        assert bits(got) == bits(f32(kernel_sum(x, 200, cores=3) * mean_scale(1001)))
        assert bits(kernel_mean(np.ones(3, np.float32), 8)) == bits(f32(3) * f32(1 / 3))
        assert np.isnan(kernel_mean(np.array([], np.float32), 8))
