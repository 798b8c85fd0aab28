"""The compiled passes of the ieee library (precision.machine.ieee_fused) and of the fp32 fma and select
(precision.machine.arith_fused) against the numpy definitions they stand in for: the same bits on every kind
of float32 operand (NaN payloads, infinities, zeros, subnormals, values whose exp/ln/pow lie near a float32
rounding boundary, exact midpoints), with ftz on and off; and the kernel's and the candidate's outputs on
the ieee machine, compiled against numpy."""

import math
import subprocess
import sys

import numpy as np
import pytest

from precision.exact.formats import FP32
from precision.machine import arith_fused, context, fma as fma_module, ieee, ieee_fused
from precision.machine.compiled import COMPILED_MIN_POINTS
from precision.machine.fma import fma32, fma_round_to_odd
from precision.machine.ieee import IEEE_F64_MARGIN, IeeeLibrary

#: Relative distance of a float64 value from a float32 rounding boundary that makes an operand "near" one.
NEAR = 2.0**-40

SPECIAL_BITS = np.array([
    0x00000000, 0x80000000, 0x7F800000, 0xFF800000,  # zeros, infinities
    0x7FC00000, 0xFFC00000, 0x7FC12345, 0xFFE00001, 0x7F800001, 0xFFBFFFFF,  # quiet and signalling NaNs
    0x00000001, 0x80000001, 0x007FFFFF, 0x807FFFFF, 0x00400000, 0x00800000, 0x80800000,  # subnormal edges
    0x7F7FFFFF, 0xFF7FFFFF, 0x3F800000, 0xBF800000, 0x3F7FFFFF, 0x3F800001, 0x3F000000, 0x40000000,
    0x33800000, 0xB3800000, 0x33000000, 0xB3000000, 0x34000000,  # 2**-24, 2**-25, 2**-23: exp near 1
    0x42B17218, 0x42B17217, 0xC2CFF1B5, 0xC2CE8ED0, 0xC2AEAC50, 0xC2D00000,  # exp overflow/underflow edges
    0x3FFFFFFF, 0x40400000, 0xC0400000, 0x3EAAAAAB,
], dtype=np.uint32)
SPECIAL = SPECIAL_BITS.view(np.float32)


def is_midpoint(v: float) -> bool:
    """Whether the float64 ``v`` lies exactly halfway between two consecutive float32 values."""
    r = np.float32(v)
    if not np.isfinite(r) or float(r) == v:
        return False
    other = np.nextafter(r, np.float32(math.copysign(np.inf, v - float(r))))
    return (float(r) + float(other)) / 2 == v


def bits(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


def raw_float32(rng, n) -> np.ndarray:
    """Random bit patterns: every class, NaN payloads and subnormals included."""
    return rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)


def near_boundaries(f64, *operands, rel=NEAR):
    """The lanes of float32 ``operands`` whose float64 value ``f64(*operands as float64)`` lies within ``rel``
    (relative) of a float32 rounding boundary (a midpoint, or the overflow threshold)."""
    with np.errstate(all="ignore"):
        v = f64(*(np.asarray(o, dtype=np.float64) for o in operands))
        lo, hi = (v * (1 - rel)).astype(np.float32), (v * (1 + rel)).astype(np.float32)
    return np.isfinite(v) & (bits(lo) != bits(hi))


@pytest.fixture(autouse=True)
def quiet():
    """The libraries' calls run inside np.errstate(all="ignore") (their contract: the machine sets it)."""
    with np.errstate(all="ignore"):
        yield


@pytest.fixture(scope="module")
def lib():
    return IeeeLibrary(context.get_machine("ieee").model, FP32)


@pytest.fixture()
def settled(monkeypatch):
    """Sizes of the lanes each settle gets (the numpy definitions' and the compiled paths' alike)."""
    sizes = []
    original = IeeeLibrary._settle_lanes

    def spy(self, out, idx, *args, **kwargs):
        sizes.append(int(idx.size))
        return original(self, out, idx, *args, **kwargs)

    monkeypatch.setattr(IeeeLibrary, "_settle_lanes", spy)
    return sizes


@pytest.fixture()
def passes(monkeypatch):
    """Names of the compiled ieee passes called (so a test knows the compiled path ran)."""
    called = []
    for name in ("exp_pass", "ln_pass", "pow_pass"):
        original = getattr(ieee_fused, name)

        def spy(*args, _original=original, _name=name):
            called.append(_name)
            return _original(*args)

        monkeypatch.setattr(ieee_fused, name, spy)
    return called


def assert_same_bits(got, want):
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
    differ = np.flatnonzero(bits(got) != bits(want))
    assert differ.size == 0, (f"{differ.size} lanes differ, first at {differ[0]}: "
                              f"{float(got.flat[differ[0]]).hex()} vs {float(want.flat[differ[0]]).hex()}")


# ---------------------------------------------------------------------------
# exp
# ---------------------------------------------------------------------------


def exp_operands(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    candidates = rng.uniform(-104, 89, 4_000_000).astype(np.float32)
    near = candidates[near_boundaries(np.exp, candidates)]
    # consecutive floats around 2**-25 .. 2**-23 and their negatives: exp(x) ~ 1 + x lies next to a midpoint
    tiny = np.concatenate([base + np.arange(-3000, 3000) for base in (0x33000000, 0x33800000, 0x33C00000, 0x34000000)])
    tiny = np.concatenate([tiny, tiny | 0x80000000]).astype(np.uint32).view(np.float32)
    return np.concatenate([
        raw_float32(rng, 40_000), rng.uniform(-110, 95, 40_000).astype(np.float32), near, tiny,
        np.ldexp(1.0, rng.integers(-149, -1, 4000)).astype(np.float32),
        np.float32(float.fromhex("-0x1.d2259ap+3")) * np.ones(3, np.float32), np.tile(SPECIAL, 20)])


class TestExp:
    @pytest.mark.parametrize("ftz", [False, True])
    def test_compiled_equals_the_numpy_definition(self, lib, settled, passes, ftz):
        x = exp_operands(seed=1)
        assert x.size >= COMPILED_MIN_POINTS
        want = lib._exp_numpy(x, ftz)
        assert sum(settled) > 100  # doubtful lanes, settled with mpmath
        settled.clear()
        got = lib.exp(x, ftz)
        assert passes == ["exp_pass"] and sum(settled) > 100
        assert_same_bits(got, want)
        assert np.count_nonzero(near_boundaries(np.exp, x)) > 300
        assert np.count_nonzero(np.isnan(want)) > 100 and np.count_nonzero(np.isinf(want)) > 1000
        subnormal = (want != 0) & (np.abs(want) < FP32.smallest_normal)
        assert (np.count_nonzero(subnormal) == 0) if ftz else (np.count_nonzero(subnormal) > 100)

    def test_nan_payloads_survive(self, lib):
        x = np.resize(SPECIAL_BITS[4:10].view(np.float32), COMPILED_MIN_POINTS)
        assert_same_bits(lib.exp(x, False), lib._exp_numpy(x, False))

    def test_keeps_the_shape(self, lib):
        x = exp_operands(seed=2)[: 3 * 20_000].reshape(3, 20_000)
        got = lib.exp(x, False)
        assert got.shape == x.shape
        assert_same_bits(got, lib._exp_numpy(x, False))


# ---------------------------------------------------------------------------
# ln
# ---------------------------------------------------------------------------


def ln_operands(seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    candidates = np.concatenate([
        (rng.uniform(0.5, 2, 2_000_000)).astype(np.float32),
        np.ldexp(rng.uniform(1, 2, 2_000_000), rng.integers(-149, 128, 2_000_000)).astype(np.float32)])
    near = candidates[near_boundaries(np.log, candidates)]
    around_one = (0x3F800000 + np.arange(-40_000, 40_000)).astype(np.uint32).view(np.float32)  # consecutive
    return np.concatenate([
        raw_float32(rng, 40_000), np.abs(raw_float32(rng, 20_000)), near, around_one,
        rng.integers(1, 0x00800000, 10_000, dtype=np.uint32).view(np.float32),  # positive subnormals
        (rng.integers(1, 0x00800000, 2000, dtype=np.uint32) | 0x80000000).astype(np.uint32).view(np.float32),
        np.full(5, np.float32(float.fromhex("0x1.fffffcp-1"))), np.tile(SPECIAL, 20)])


class TestLn:
    @pytest.mark.parametrize("ftz", [False, True])
    def test_compiled_equals_the_numpy_definition(self, lib, settled, passes, ftz):
        x = ln_operands(seed=3)
        want = lib._ln_numpy(x, ftz)
        assert sum(settled) > 10
        settled.clear()
        got = lib.ln(x, ftz)
        assert passes == ["ln_pass"] and sum(settled) > 10
        assert_same_bits(got, want)
        assert np.count_nonzero(near_boundaries(np.log, x)) > 50
        subnormal_in = (x != 0) & (np.abs(x) < FP32.smallest_normal)
        assert np.count_nonzero(subnormal_in) > 10_000
        assert np.all(np.isneginf(want[subnormal_in])) if ftz else np.all(np.isfinite(want[subnormal_in & (x > 0)]))
        assert np.count_nonzero(np.isnan(want)) > 1000


# ---------------------------------------------------------------------------
# pow
# ---------------------------------------------------------------------------


def pow_operands(seed: int):
    """(a, b): random bit patterns, bases near 1, exact midpoints (few-bit bases squared and cubed,
    negative ones too), subnormal bases, (a, b) pairs whose power lies near a boundary, the special values
    against each other."""
    rng = np.random.default_rng(seed)
    n = 20_000
    exponents = np.array([2, 3, 0.5, 1.5, -1, -2, 2.5, 7, 8, 1 / 3, -0.5, 4, 5, 6], dtype=np.float32)
    a_cand = rng.uniform(0, 4, 3_000_000).astype(np.float32)
    b_cand = rng.choice(exponents, a_cand.size)
    b_cand[::3] = rng.uniform(-30, 30, b_cand[::3].size).astype(np.float32)
    with np.errstate(all="ignore"):
        near = near_boundaries(np.power, a_cand, b_cand)
    few_bits = np.ldexp(1 + (2 * rng.integers(0, 1 << 12, n) + 1) * 2.0**-13, rng.integers(-40, 40, n))
    few_bits *= rng.choice([-1.0, 1.0], n)
    # s**2 4**e to the 1.5: s**3 8**e, a float32 midpoint for odd s in [257, 321] (the mpmath midpoint test)
    s3 = 257 + 2 * rng.integers(0, 33, n // 4)
    cubes = np.ldexp(s3.astype(np.float64) ** 2, 2 * rng.integers(-30, 20, n // 4)).astype(np.float32)
    a = np.concatenate([
        raw_float32(rng, n), (1 + rng.normal(0, 2.0**-10, n)).astype(np.float32), a_cand[near],
        few_bits.astype(np.float32), few_bits.astype(np.float32)[: n // 2], cubes,
        rng.integers(1, 0x00800000, n, dtype=np.uint32).view(np.float32), np.repeat(SPECIAL, SPECIAL.size)])
    b = np.concatenate([
        raw_float32(rng, n), rng.uniform(-40, 40, n).astype(np.float32), b_cand[near],
        rng.choice(np.float32([2, 3]), n), rng.integers(2, 8, n // 2).astype(np.float32), np.full(n // 4, np.float32(1.5)),
        rng.choice(exponents, n), np.tile(SPECIAL, SPECIAL.size)])
    return a, b


class TestPow:
    def test_compiled_equals_the_numpy_definition(self, lib, settled, passes):
        a, b = pow_operands(seed=5)
        assert a.size >= COMPILED_MIN_POINTS
        with np.errstate(all="ignore"):
            want = lib._pow_numpy(a, b)
            got = lib.pow(a, b, "double_float")
        assert passes == ["pow_pass"]
        assert_same_bits(got, want)
        with np.errstate(all="ignore"):
            assert np.count_nonzero(near_boundaries(np.power, a, b)) > 1000
        assert sum(settled) > 20  # mpmath settles (after the exact integer powers)
        assert np.count_nonzero(np.isnan(want)) > 1000 and np.count_nonzero(np.isinf(want)) > 1000
        assert np.count_nonzero(want < 0) > 5000  # negative bases, odd integer exponents

    @pytest.mark.parametrize("exponent", [2.0, 3.0, 0.5, -1.5, 0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, 7.0])
    def test_one_exponent(self, lib, passes, exponent):
        a, _ = pow_operands(seed=7)
        k = np.float32(exponent)
        with np.errstate(all="ignore"):
            want = lib._pow_numpy(a, k)
            got = lib.pow(a, k, "intrinsic")
        assert passes == ["pow_pass"]
        assert_same_bits(got, want)

    def test_broadcast_base(self, lib):
        a, b = pow_operands(seed=9)
        a2, b2 = a[: 2 * 15_000].reshape(2, 15_000)[:, :1], b[: 2 * 15_000].reshape(2, 15_000)
        with np.errstate(all="ignore"):
            got, want = lib.pow(a2, b2, "double_float"), lib._pow_numpy(a2, b2)
        assert got.shape == (2, 15_000)
        assert_same_bits(got, want)


class TestExactIntegerPowers:
    def test_equal_the_mpmath_settle(self):
        """Every power _exact_integer_powers takes, rounded once, is what the mpmath settle returns; exact
        midpoints (ties to even), subnormal and overflowing results, negative bases included."""
        rng = np.random.default_rng(11)
        n = 3000
        length = rng.integers(1, 25, n)
        odd = 2 * rng.integers(0, 1 << 23, n) % (1 << length) + 1
        a = np.ldexp(odd.astype(np.float64), rng.integers(-149, 128, n) - length)
        a = (a * rng.choice([-1.0, 1.0], n)).astype(np.float32)
        a = a[np.isfinite(a) & (a != 0)].astype(np.float64)
        b = rng.integers(2, 8, a.size).astype(np.float64)
        # (4096 + j)**2 2**-24 for odd j: 25 bits, a float32 midpoint (ties to even), 2**-75 squared: 2**-150
        j = 2 * rng.integers(0, 2048, 200) + 1
        mids = np.ldexp(1 + j * 2.0**-12, rng.integers(-60, 60, 200)) * rng.choice([-1.0, 1.0], 200)
        a, b = np.concatenate([a, mids, [2.0**-75, 3 * 2.0**-76]]), np.concatenate([b, np.full(202, 2.0)])
        lanes, values = ieee._exact_integer_powers(a, b)
        assert np.count_nonzero(lanes) > 1000
        checked = ties = 0
        for i in np.flatnonzero(lanes):
            want = ieee._settle(ieee._pow_abs_of(a[i], b[i]), FP32, ieee._pow_midpoint_test_of(a[i], b[i]))
            want = -want if a[i] < 0 and int(b[i]) % 2 else want
            got = np.float32(values[i])
            assert bits(got) == bits(np.float32(want)), (a[i].hex(), b[i], float(got), want)
            checked += 1
            ties += is_midpoint(values[i])
        assert checked > 1000 and ties > 20

    def test_only_exact_products_qualify(self):
        a = np.float32([1 + 2.0**-23, 3.0, 3.0, 3.0, -0.5, 2.0**-149, 0.0, np.inf, 1.5]).astype(np.float64)
        b = np.float64([3.0, 2.5, 8.0, -2.0, 7.0, 7.0, 2.0, 2.0, 1.0])
        lanes, values = ieee._exact_integer_powers(a, b)
        # 24-bit base cubed: 70 bits; 2.5, 8, -2: not taken; 0, inf: not finite nonzero; 1: never doubtful
        assert lanes.tolist() == [False, False, False, False, True, True, False, False, False]
        assert values[4] == -(0.5**7) and values[5] == 2.0**-1043


# ---------------------------------------------------------------------------
# the fp32 fma and select
# ---------------------------------------------------------------------------


def fma_operands(seed: int):
    """Random bit patterns, near-cancelling a*b + c, sums on float32 midpoints (the numpy definition's
    round-to-odd lanes), subnormal results."""
    rng = np.random.default_rng(seed)
    n = 60_000
    a, b = raw_float32(rng, n), raw_float32(rng, n)
    with np.errstate(all="ignore"):
        c = (-(a.astype(np.float64) * b) * (1 + rng.normal(0, 2.0**-30, n))).astype(np.float32)
    c[::7] = raw_float32(rng, c[::7].size)
    k = rng.integers(1, 256, n).astype(np.float64)
    c2 = np.ldexp(1 + rng.integers(0, 1 << 23, n) * 2.0**-23, rng.integers(-100, 100, n)).astype(np.float32)
    c2[::5] = rng.integers(1, 0x00800000, c2[::5].size, dtype=np.uint32).view(np.float32)
    half_ulp = np.spacing(np.abs(c2)).astype(np.float64) / 2
    log_h = np.log2(half_ulp).astype(np.int64)
    a2 = (rng.choice([-1.0, 1.0], n) * np.ldexp(1 + k * 2.0**-23, log_h // 2)).astype(np.float32)
    b2 = np.ldexp(1 - k * 2.0**-23, log_h - log_h // 2).astype(np.float32)
    small = np.ldexp(rng.uniform(-2, 2, (3, n)), rng.integers(-80, -60, (3, n))).astype(np.float32)
    small[2] = np.ldexp(rng.uniform(-2, 2, n), rng.integers(-149, -126, n)).astype(np.float32)
    return [np.concatenate(parts) for parts in zip((a, a2, small[0]), (b, b2, small[1]), (c, c2, small[2]))]


def assert_same_fma_bits(got, a, b, c):
    """``got`` equals fma32's numpy definition bit for bit on every lane where at most one NaN enters the
    fused operation (a NaN operand, or the invalid inf*0); where two or more meet, IEEE 754 leaves the
    payload open and numpy's loops decide it by the lane's place, so the lane need only be a NaN carrying
    one of theirs (quieted) or the default NaN."""
    want = fma_module._fma32_numpy(a, b, c)
    a, b, c = np.broadcast_arrays(*(np.asarray(v, dtype=np.float32) for v in (a, b, c)))
    invalid = (np.isinf(a) & (b == 0)) | ((a == 0) & np.isinf(b))
    several = (np.isnan(a).astype(int) + np.isnan(b) + np.isnan(c) + invalid) >= 2
    assert np.count_nonzero(several) < got.size // 10
    assert_same_bits(np.where(several, 0, got), np.where(several, 0, want).astype(np.float32))
    quiet = np.uint32(0x00400000)
    payloads = [bits(v) | quiet for v in (a, b, c)] + [np.full(got.shape, 0xFFC00000, np.uint32)]
    one_of = np.zeros(got.shape, dtype=bool)
    for p in payloads:
        one_of |= bits(got) == p
    assert np.all(one_of[several] & np.isnan(got[several]))


class TestFma32:
    def test_compiled_equals_the_numpy_definition_and_the_reference(self):
        a, b, c = fma_operands(seed=13)
        assert a.size >= COMPILED_MIN_POINTS
        got = fma32(a, b, c)
        assert_same_fma_bits(got, a, b, c)
        ref = fma_round_to_odd(*(v.astype(np.float64) for v in (a, b, c))).astype(np.float32)
        finite = np.isfinite(ref)
        assert_same_bits(got[finite], ref[finite])
        assert np.count_nonzero((got != 0) & (np.abs(got) < FP32.smallest_normal)) > 1000

    @pytest.mark.parametrize("scalar", [0, 1, 2])
    def test_single_value_operands(self, scalar):
        a, b, c = fma_operands(seed=17)
        ops = [a, b, c]
        for value in np.float32([1.5, -0.0, np.nan, 2.0**-140, np.inf]):
            ops[scalar] = value
            assert_same_fma_bits(fma32(*ops), *ops)

    def test_broadcast_operands(self):
        a, b, c = fma_operands(seed=19)
        m = 30_000
        a2, b2, c2 = a[:m].reshape(2, m // 2), b[: m // 2], c[:2].reshape(2, 1)
        got = fma32(a2, b2, c2)
        assert got.shape == (2, m // 2)
        assert_same_fma_bits(got, a2, b2, c2)

    def test_machine_fma_takes_the_pass(self, monkeypatch):
        called = []
        original = arith_fused.fma32_pass
        monkeypatch.setattr(arith_fused, "fma32_pass", lambda *args: called.append(1) or original(*args))
        a, b, c = fma_operands(seed=23)
        got = context.get_machine("ieee").fma(a, b, c)
        assert called
        assert_same_fma_bits(got, a, b, c)


class TestSelect:
    @pytest.mark.parametrize("spec", ["ieee", "ieee+fp16", "npu+bf16"])
    def test_the_same_bits_as_where(self, spec):
        m = context.get_machine(spec)
        rng = np.random.default_rng(29)
        n = 40_000
        uint = np.dtype(f"u{m.dtype.itemsize}")
        a, b = rng.integers(0, 2 ** (8 * uint.itemsize), (2, n), dtype=np.uint64).astype(uint).view(m.dtype)
        a[::3] = m.asarray(np.float32([np.nan, -0.0, 0.0]))[rng.integers(0, 3, a[::3].size)]
        cond = rng.random(n) < 0.5
        for x, y in ((a, b), (a, m.asarray(-0.0)), (m.asarray(np.nan), b)):
            got = m.select(cond, x, y)
            want = np.where(cond, x, y)
            assert got.dtype == m.dtype and got.shape == (n,)
            assert np.array_equal(got.view(uint), np.asarray(want, dtype=m.dtype).view(uint))


# ---------------------------------------------------------------------------
# the kernel and the candidate on ieee, compiled against numpy
# ---------------------------------------------------------------------------


def varied_points(n: int, seed: int):
    rng = np.random.default_rng(seed)
    pred = np.concatenate([
        rng.uniform(-20, 20, n // 2), rng.uniform(-110, 110, n // 8), rng.normal(0, 2.0**-20, n // 16),
        np.ldexp(rng.uniform(-2, 2, n // 16), rng.integers(-149, -100, n // 16)),
        rng.uniform(-1, 1, n // 8) * 2.0**-24, np.ldexp(rng.uniform(-2, 2, n // 8), rng.integers(0, 120, n // 8))])
    pred = np.resize(pred.astype(np.float32), n)
    pred[:6] = np.float32([0.0, -0.0, 88.72283, -103.97, 2.0**-149, -(2.0**-126)])
    target = rng.integers(0, 2, n).astype(np.int32)
    dout = rng.standard_normal(n).astype(np.float32)
    dout[::9] = np.ldexp(1.0, rng.integers(-140, 100, dout[::9].size)).astype(np.float32)
    weight = rng.standard_normal(n).astype(np.float32)
    weight[::11] = 0.0
    rows = 100
    return tuple(v.reshape(rows, n // rows) for v in (pred, target, dout, weight))


def numpy_definitions(monkeypatch):
    """Every compiled pass of the ieee evaluation off: the numpy definitions at every size."""
    for module in (ieee, fma_module, context):
        monkeypatch.setattr(module, "COMPILED_MIN_POINTS", 1 << 62)


@pytest.mark.parametrize("machine", ["ieee", "ieee+ftz+daz"])
@pytest.mark.parametrize("gamma", [2.0, 1.5, 3.0])
def test_kernel_and_candidate_bit_identical_compiled_and_numpy(monkeypatch, machine, gamma):
    from precision.operators.sigmoid_focal_loss_grad.guards import evaluate

    inputs = varied_points(100_000, seed=int(gamma * 10))
    with monkeypatch.context() as patch:
        called = []
        for name in ("exp_pass", "ln_pass", "pow_pass"):
            original = getattr(ieee_fused, name)
            patch.setattr(ieee_fused, name, lambda *args, _o=original: called.append(1) or _o(*args))
        compiled = {v: evaluate(v, *inputs, alpha=0.25, gamma=gamma, reduction="none", machine=machine)
                    for v in ("kernel", "candidate")}
        assert called
    numpy_definitions(monkeypatch)
    for variant, got in compiled.items():
        want = evaluate(variant, *inputs, alpha=0.25, gamma=gamma, reduction="none", machine=machine)
        assert np.count_nonzero(np.isfinite(want)) > 90_000
        assert_same_bits(got, want)


def test_small_arrays_keep_to_numpy():
    """Below COMPILED_MIN_POINTS, exp, ln, pow, fma and select never import numba (a subprocess)."""
    script = ("import sys, numpy as np\nfrom precision.machine import get_machine\n"
              "m = get_machine('ieee'); x = np.linspace(0.1, 2, 100, dtype=np.float32)\n"
              "m.exp(x); m.ln(x); m.pow(x, np.float32(2.5)); m.fma(x, x, x); m.select(x > 1, x, x)\n"
              "print('numba' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr
