"""The compiled passes of the npu Power (precision.machine.npu_fused) against the numpy blocks they stand in
for: the same bits on every kind of float32 operand, with and without the subnormal fix, with an exponent
array and a single exponent."""

import numpy as np
import pytest

from precision.machine import npu
from precision.machine.compiled import COMPILED_MIN_POINTS
from precision.machine.fma import _fma32_numpy

SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 2.0**-149, -(2.0**-149), 2.0**-126,
                    2.0**-126 * (1 - 2.0**-23), 3.4028234663852886e38, 0.5, 2.0, 1 + 2.0**-23, 1 - 2.0**-24,
                    0.70710677, 0.70710683, 1.4142135, 88.72283935546875, -104.0, 0.25, 3.0, -3.0, 2.5,
                    -(1 - 2.0**-24)],  # (the odd-integer test's quirk: counts as odd)
                   dtype=np.float32)


def _operands(n: int, seed: int):
    """(a, b): random bit patterns of every class (NaNs with payloads, subnormals, infinities), bases near 1
    and the special values, each special base met by each special exponent."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 2**32, (2, n), dtype=np.uint64).astype(np.uint32).view(np.float32)
    near_one = (1 + rng.normal(0, 2.0**-10, n)).astype(np.float32)
    subnormal = (rng.integers(1, 2**23, n, dtype=np.uint32)).view(np.float32)
    moderate = rng.uniform(-40, 40, n).astype(np.float32)
    a = np.concatenate([raw[0], near_one, subnormal, np.abs(moderate), np.repeat(SPECIAL, SPECIAL.size)])
    b = np.concatenate([raw[1], moderate, rng.uniform(-2, 5, n).astype(np.float32), moderate,
                        np.tile(SPECIAL, SPECIAL.size)])
    return a, b


def _numpy_power_c(a, b, subnormal_fix):
    """power_c by the numpy blocks (the definition), whatever the size."""
    out = np.empty(a.size, dtype=np.float32)
    for start in range(0, a.size, npu.POW_BLOCK):
        block = slice(start, start + npu.POW_BLOCK)
        out[block] = npu._power_c_block(a[block], b if b.ndim == 0 else b[block], subnormal_fix)
    return out


@pytest.mark.parametrize("subnormal_fix", [True, False])
def test_power_c_compiled_equals_the_numpy_blocks_bit_for_bit(subnormal_fix):
    a, b = _operands(60_000, seed=7)
    assert a.size >= COMPILED_MIN_POINTS  # (power_c takes the compiled passes)
    got = npu.power_c(a, b, subnormal_fix)
    want = _numpy_power_c(a, b, subnormal_fix)
    assert got.dtype == np.float32 and got.shape == a.shape
    assert np.count_nonzero(got.view(np.uint32) != want.view(np.uint32)) == 0
    # the operands reach every step: subnormal bases scaled, special cases, overflow and underflow clamps
    assert np.count_nonzero(np.abs(a) < npu.POW_FLT_MIN) > 60_000
    assert np.count_nonzero(np.isnan(want)) > 1000 and np.count_nonzero(np.isinf(want)) > 1000
    assert np.count_nonzero(want == 0) > 1000


@pytest.mark.parametrize("exponent", [2.0, -1.5, 0.0, np.nan, 0.1875, 1e30])
@pytest.mark.parametrize("subnormal_fix", [True, False])
def test_power_c_compiled_with_one_exponent(exponent, subnormal_fix):
    a, _ = _operands(20_000, seed=11)
    b = np.float32(exponent)
    got = npu.power_c(a, b, subnormal_fix)
    want = _numpy_power_c(a, np.asarray(b).reshape(()), subnormal_fix)
    assert np.count_nonzero(got.view(np.uint32) != want.view(np.uint32)) == 0


def test_power_c_keeps_the_shape_and_broadcasts():
    a, b = _operands(10_000, seed=3)
    a2 = a[: 2 * (a.size // 2)].reshape(-1, 2)
    got = npu.power_c(a2, b[:2], True)
    want = _numpy_power_c(np.ascontiguousarray(a2).reshape(-1), np.tile(b[:2], a2.shape[0]), True)
    assert got.shape == a2.shape
    assert np.array_equal(got.reshape(-1).view(np.uint32), want.view(np.uint32))


def test_the_compiled_fma_is_the_exact_fma():
    """The passes' llvm.fma equals fma32's numpy definition (the round-to-odd emulation), NaN payloads
    included, where a*b and c nearly cancel."""
    from precision.machine import npu_fused
    import numba

    @numba.njit
    def fma_all(a, b, c, out):
        for i in range(a.size):
            out[i] = npu_fused._fma(a[i], b[i], c[i])

    rng = np.random.default_rng(5)
    a, b = rng.integers(0, 2**32, (2, 200_000), dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        c = (-(a.astype(np.float64) * b) * (1 + rng.normal(0, 2.0**-30, a.size))).astype(np.float32)
    c[::7] = rng.integers(0, 2**32, c[::7].size, dtype=np.uint64).astype(np.uint32).view(np.float32)
    out = np.empty_like(a)
    fma_all(a, b, c, out)
    assert np.count_nonzero(out.view(np.uint32) != _fma32_numpy(a, b, c).view(np.uint32)) == 0


def test_small_arrays_keep_to_numpy():
    """Below COMPILED_MIN_POINTS, power_c never imports numba (a subprocess: the command line's points)."""
    import subprocess
    import sys
    script = ("import sys, numpy as np\nfrom precision.machine import npu\n"
              "npu.power_c(np.ones(100, np.float32), np.float32(2.0))\nprint('numba' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "False", done.stderr


def test_special_cases_compiled_equal_the_numpy_definition():
    """pow_special_cases (the INTRINSIC Power's fix-ups) against _pow_special_cases_reference, with results
    of every class, an exponent array and a single exponent."""
    a, b = _operands(30_000, seed=13)
    rng = np.random.default_rng(17)
    res = rng.integers(0, 2**32, a.size, dtype=np.uint64).astype(np.uint32).view(np.float32)
    for exponent in (b, np.float32(3.0), np.float32(-0.0), np.float32(np.inf)):
        want = npu._pow_special_cases_reference(a, exponent, res.copy(), npu.POW_NAN_BITS["fp32"], np.uint32)
        got = npu._pow_special_cases(a, exponent, res.copy(), npu.POW_NAN_BITS["fp32"], np.uint32)
        assert np.count_nonzero(got.view(np.uint32) != want.view(np.uint32)) == 0
        assert np.count_nonzero(got.view(np.uint32) != res.view(np.uint32)) > 250  # the cases act
