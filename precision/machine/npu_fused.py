"""The npu float32 Power (algorithm C) in compiled passes (numba, cached beside this file).

:func:`precision.machine.npu.power_c` written as numpy takes some forty passes
over its operands (each fp32 fma alone is eleven); a task of
``fp16_exhaustive`` on the npu spends a third of its evaluation there.  Two
passes do the same work, element by element, between which numpy computes the
exp proxy:

* :func:`power_c_terms`: R0-R5 and L6-L18 (the double-float ln|a|) and E1/E2
  (``b * ln|a|`` as ``phi + plo``);
* :func:`power_c_finish`: E4/E5 (``exp(phi) * (1 + plo)`` and the clamps on
  ``phi``) and the §2.4 special cases, which :func:`pow_special_cases` also
  applies to the INTRINSIC Power's results.

Each pass computes exactly what :func:`precision.machine.npu._power_c_block`
and :func:`precision.machine.npu._pow_special_cases` compute, bit for bit,
and the tests check it on every kind of fp32 operand (subnormal, zero, inf,
NaN, negative, near 1) with both ``subnormal_fix`` values:

* float32 operations stay float32 (every constant is a float32; numba would
  widen a Python float), each one IEEE-rounded, none contracted into an fma;
* the fmas are LLVM's ``llvm.fma.f32``, one rounding of the exact ``a*b + c``
  (the hardware instruction, or the C library's ``fmaf``), which is what
  :func:`precision.machine.fma.fma32` emulates;
* the integer steps (R1/R2) wrap as int32 arithmetic does;
* the exp proxy (E3) stays with numpy, whose ``exp`` a compiled one need not
  match.

Arrays of fewer than :data:`precision.machine.compiled.COMPILED_MIN_POINTS`
elements keep to the numpy blocks; :func:`load` loads the three passes (the tests
check that a sweep calls them with the argument types it loads).
"""

from __future__ import annotations

import numba
import numpy as np

from precision.exact.double_double import fma as _fma  # one rounding of the operands' type (float32 here)
from precision.machine.compiled import frozen
from precision.machine.npu_constants import (
    POW_EXP_OVERFLOW, POW_EXP_UNDERFLOW, POW_EXPONENT_MASK, POW_FLT_MIN, POW_LN2_HI, POW_LN2_LO, POW_LOG_POLY,
    POW_NAN_BITS, POW_SQRT_HALF_BITS, POW_SUBNORMAL_SCALE, POW_SUBNORMAL_SHIFT)

__all__ = ["power_c_terms", "power_c_finish", "pow_special_cases", "load"]


_ONE, _TWO_NEG, _THREE = np.float32(1.0), np.float32(-2.0), np.float32(3.0)
_C3, _C2, _C1, _C0 = POW_LOG_POLY
_SQRT_HALF_BITS, _EXPONENT_MASK = np.int64(POW_SQRT_HALF_BITS), np.int64(POW_EXPONENT_MASK)
_INF, _ZERO, _HALF = np.float32(np.inf), np.float32(0.0), np.float32(0.5)
_NAN = np.uint32(POW_NAN_BITS["fp32"]).view(np.float32)  # the quiet NaN the special cases write


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _terms(a, b, subnormal_fix, phi, plo):
    step = 1 if b.size > 1 else 0
    for j in range(a.size):
        x = abs(a[j])
        bj = b[j * step]
        # R0: subnormals scaled by 2**23 (exact); i0 = -23 compensates
        small = x < POW_FLT_MIN
        xs = x * POW_SUBNORMAL_SCALE if small and subnormal_fix else x
        # R1/R2: m in [sqrt(1/2), sqrt(2)), x = m * 2**k, e = k * 2**23 (int32 arithmetic: no step overflows)
        bits = np.int64(np.float32(xs).view(np.int32))
        e = (bits - _SQRT_HALF_BITS) & _EXPONENT_MASK
        m = np.int32(bits - e).view(np.float32)
        # R3: i = k + i0
        i = np.float32(e >> 23)
        if small:
            i = i + POW_SUBNORMAL_SHIFT
        # R4, R5 (the reciprocal: RN32(1/p), the proxy of vdiv)
        p = m + _ONE
        m1 = m - _ONE
        r = _ONE / p
        # L6-L8: q = (m-1)/(m+1) as qhi + qlo
        qhi = m1 * r
        t = m1 + qhi * _TWO_NEG
        qlo = r * _fma(-m1, qhi, t)
        # L9-L11
        s = qhi * qhi
        u = _fma(_C3, s, _C2)
        u = _fma(u, s, _C1)
        u = _fma(u, s, _C0)
        u = u * s
        # L12-L14
        qh2 = qhi + qhi
        ql2 = qlo + qlo
        fhi = i * POW_LN2_HI + qh2
        flo = qh2 - _fma(i, -POW_LN2_HI, fhi)
        # L15-L18
        second = _fma(qh2, u, flo)
        last = _fma(ql2 * _THREE, u, ql2)
        last = _fma(i, POW_LN2_LO, last)
        total = last + second
        lhi = fhi + total
        llo = (fhi - lhi) + total
        # E1/E2
        ph = lhi * bj
        phi[j] = ph
        plo[j] = _fma(llo, bj, _fma(lhi, bj, -ph))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _special_case(x, y, r):
    """§2.4 on one lane (x the base, y the exponent, r the result so far), in the order of
    precision.machine.npu._pow_special_cases_lanes; the NaN it writes is POW_NAN_BITS["fp32"]."""
    odd = _fma(np.floor(y * _HALF), _TWO_NEG, y) == _ONE
    x_zero_or_inf = (x == _ZERO) or np.isinf(x)
    r12 = np.copysign(_INF if x == _ZERO else _ZERO, x) if y < _ZERO else x  # step 3
    if not odd:
        r12 = abs(r12)
    negative = x < _ZERO  # step 4
    if negative and odd:
        r = -r
    nan = negative and (y != np.floor(y)) and not x_zero_or_inf
    if x_zero_or_inf:
        r = r12
    one = (y == _ZERO) or (x == _ONE)
    nan = (nan or np.isnan(x) or np.isnan(y)) and not one
    if one or ((x == -_ONE) and np.isinf(y)):
        r = _ONE
    return _NAN if nan else r


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _plain(x, y):
    """No special case can apply: a finite positive base other than 1, a nonzero exponent that is a number."""
    return (x > _ZERO) and (x < _INF) and (x != _ONE) and (y != _ZERO) and (y == y)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _finish(a, b, phi, plo, big_e, res):
    step = 1 if b.size > 1 else 0
    for j in range(a.size):
        r = _fma(plo[j], big_e[j], big_e[j])  # E4
        if phi[j] >= POW_EXP_OVERFLOW:  # E5
            r = _INF
        if phi[j] < POW_EXP_UNDERFLOW:
            r = _ZERO
        x, y = a[j], b[j * step]
        res[j] = r if _plain(x, y) else _special_case(x, y, r)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _special_cases(a, b, res):
    step = 1 if b.size > 1 else 0
    for j in range(a.size):
        x, y = a[j], b[j * step]
        if not _plain(x, y):
            res[j] = _special_case(x, y, res[j])


def _flat(a) -> np.ndarray:
    """``a`` as a 1-D C-contiguous read-only float32 array (the one form each pass is compiled for)."""
    return frozen(a, np.float32).reshape(-1)


def power_c_terms(a, b, subnormal_fix: bool) -> tuple[np.ndarray, np.ndarray]:
    """(phi, plo): steps R0-L18 and E1/E2 of algorithm C on float32 ``a`` (1-D) and ``b`` (the same length, or
    one value), as float32 arrays of ``a``'s length."""
    a, b = _flat(a), _flat(b)
    phi, plo = np.empty(a.size, dtype=np.float32), np.empty(a.size, dtype=np.float32)
    _terms(a, b, bool(subnormal_fix), phi, plo)
    return phi, plo


def power_c_finish(a, b, phi, plo, big_e) -> np.ndarray:
    """Steps E4/E5 from ``phi``, ``plo`` and ``big_e`` = vexp(phi), then the §2.4 special cases: the float32
    result of algorithm C."""
    a, b = _flat(a), _flat(b)
    res = np.empty(a.size, dtype=np.float32)
    _finish(a, b, _flat(phi), _flat(plo), _flat(big_e), res)
    return res


def pow_special_cases(a, b, res) -> np.ndarray:
    """The §2.4 special cases applied to the float32 Power results ``res`` (1-D, updated in place) of bases
    ``a`` and exponents ``b`` (the same length, or one value); ``res``."""
    _special_cases(_flat(a), _flat(b), res)
    return res


def load() -> None:
    """Load both passes now (from the cache beside this file, or compiled the first time)."""
    one = np.ones(1, dtype=np.float32)
    for fix in (False, True):
        phi, plo = power_c_terms(one, one, fix)
    power_c_finish(one, one, phi, plo, one)
    pow_special_cases(one, one, one.copy())
