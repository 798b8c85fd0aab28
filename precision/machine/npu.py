"""The npu model's math library: the Ascend 950 (arch 3510) vector unit.

As described in ``shared/spec/npu_math.md``: Exp and Ln in their 1-ulp
modes with and without flush to zero; the default (``vdiv``, DAZ+FTZ) and
the 0-ulp Div; the float32 ``Power`` with ``DOUBLE_FLOAT_TECH`` (algorithm
C, bit-level except the hardware reciprocal and exp: :func:`power_c`) and
the default ``INTRINSIC`` Power (:func:`power_intrinsic`).

Hardware ops whose algorithm is not public are *proxies* (marked
``# PROXY:``): ``vexp``, ``vln`` and ``vdiv`` are modelled as the
native-format RNE rounding of the float64 result, with the flushing the
documentation states.  They are within the documented 1 ulp but are not
claimed to be bit-exact.  The npu math library computes bf16 work in fp32
(the *native* format) and rounds once to bf16.
"""

from __future__ import annotations

import math

import numpy as np

from precision.errors import ParameterError
from precision.exact.formats import BF16, FP32, Format
from precision.machine.compiled import COMPILED_MIN_POINTS
from precision.machine.fma import fma32
from precision.machine.npu_constants import (
    POW_NAN_BITS, VDIV_NAN_BITS, MAX_SUBNORMAL_BITS, POW_FLT_MIN, POW_SUBNORMAL_SCALE, POW_SUBNORMAL_SHIFT,
    POW_SQRT_HALF_BITS, POW_EXPONENT_MASK, POW_LOG_POLY, POW_LN2_HI, POW_LN2_LO, POW_EXP_OVERFLOW,
    POW_EXP_UNDERFLOW, LN_SUBNORMAL_SCALE_LOG2, LN_SUBNORMAL_OFFSET_FP32)
from precision.machine.library import MathLibrary
from precision.machine.rounding import as_f64, flush, round_into, set_nan_bits

__all__ = ["NpuLibrary", "power_c", "power_intrinsic", "power_log"]

# ---------------------------------------------------------------------------
# The library
# ---------------------------------------------------------------------------


class NpuLibrary(MathLibrary):
    """Div, Exp, Ln and Power of the npu (npu_math §2, §5, §6).

    ``div(mode="0ulp")`` is Div PRECISION_0ULP_FTZ_FALSE, emulated as IEEE
    division (the default of :class:`MathLibrary`); ``"default"`` is vdiv.
    ``exp``/``ln`` with ``ftz=False`` are the PRECISION_1ULP_FTZ_FALSE
    routines, with ``ftz=True`` the INTRINSIC ones.  ``pow`` is algorithm C
    (``"double_float"``) or the INTRINSIC Power, both in fp32 with fp16/bf16
    operands cast exactly to fp32 and the result rounded back (RNE).
    """

    def div(self, a, b, mode: str) -> np.ndarray:
        if mode == "default":
            return self._vdiv(a, b)
        return super().div(a, b, mode)

    def exp(self, x, ftz: bool) -> np.ndarray:
        if ftz:
            return round_into(self._vexp(as_f64(x)), self.fmt)
        return round_into(self._exp_precise(as_f64(x)), self.fmt)

    def ln(self, x, ftz: bool) -> np.ndarray:
        if ftz:
            return round_into(self._vln(as_f64(x)), self.fmt)
        return round_into(self._ln_precise(as_f64(x)), self.fmt)

    def pow(self, base, k, algo: str) -> np.ndarray:
        if algo == "intrinsic" and self.fmt is BF16:
            raise ParameterError(
                "algo='intrinsic' with compute=bf16; the npu INTRINSIC Power rejects bf16 "
                "(static_assert): use algo='double_float' or compute fp16/fp32"
            )
        if algo == "double_float":
            # Both npu algorithms load half/bf16 operands as exact fp32,
            # compute in fp32 and store with CAST_RINT (power_3510_impl.h).
            # power_c broadcasts itself (keeping a single exponent scalar).
            a32, b32 = np.asarray(base, dtype=np.float32), np.asarray(k, dtype=np.float32)
            out = power_c(a32, b32, self.model.power_subnormal_fix)
        else:
            base, k = np.broadcast_arrays(base, k)
            out = power_intrinsic(base.astype(np.float32), k.astype(np.float32))
        if self.fmt is not FP32:
            out = round_into(out.astype(np.float64), self.fmt)
            out = set_nan_bits(out, self.fmt, POW_NAN_BITS[self.fmt.name])
        return out

    # -- native format -------------------------------------------------------------

    def _native_fmt(self) -> Format:
        """Format the npu math library computes in: bf16 work is done in fp32."""
        return FP32 if self.fmt is BF16 else self.fmt

    def _round_native(self, v64) -> np.ndarray:
        """RNE of float64 values into the npu native format, back as float64."""
        with np.errstate(all="ignore"):
            return v64.astype(self._native_fmt().dtype).astype(np.float64)

    def _flush_native(self, v64, positive_zero: bool = False) -> np.ndarray:
        """Nonzero subnormals of the native format -> +0 or signed zero (float64 in, out).

        Returns ``v64`` itself when nothing flushes (callers do not write to it).
        """
        fmt = self._native_fmt()
        tiny = np.abs(v64) < fmt.smallest_normal
        if not tiny.any():
            return v64
        tiny &= v64 != 0  # zeros keep their sign
        out = np.array(v64, dtype=np.float64, copy=True)
        out[tiny] = 0.0 if positive_zero else np.copysign(0.0, out[tiny])
        return out

    # -- div -----------------------------------------------------------------------

    def _vdiv(self, a, b) -> np.ndarray:
        # PROXY: hardware vdiv (Div INTRINSIC / PRECISION_1ULP_FTZ_TRUE),
        # algorithm not public, documented <= 1 ulp with DAZ/FTZ.  Modelled as
        # the compute-format RN of the float64 quotient (correctly rounded),
        # inputs and results flushed to signed zero, NaNs as 0x7FFFFFFF
        # (npu_math §6 doc examples).  bf16 is computed as fp32 then rounded.
        a64 = as_f64(flush(a, self.fmt))
        b64 = as_f64(flush(b, self.fmt))
        q = round_into(self._round_native(a64 / b64), self.fmt)
        q = flush(q, self.fmt)
        return set_nan_bits(q, self.fmt, VDIV_NAN_BITS[self.fmt.name])

    # -- exp -----------------------------------------------------------------------

    def _vexp(self, x64) -> np.ndarray:
        # PROXY: hardware vexp (Exp INTRINSIC / PRECISION_1ULP_FTZ_TRUE),
        # algorithm not public, documented <= 1 ulp without subnormal
        # support.  Modelled as RN of the float64 exp in the native format
        # (fp32, or fp16 for half), subnormal inputs read as 0 and subnormal
        # results flushed to +0.  Returns float64 holding native values.
        x64 = self._flush_native(x64)
        return self._flush_native(self._round_native(np.exp(x64)), positive_zero=True)

    def _exp_precise(self, x64) -> np.ndarray:
        """Exp PRECISION_1ULP_FTZ_FALSE (ExpImpl + ExpPrecision, npu_math §6)."""
        native = self._native_fmt()
        e = self._vexp(x64)
        max_subnormal = float(
            np.array(MAX_SUBNORMAL_BITS[native.name], dtype=native.uint_dtype).view(native.dtype)
        )
        tiny = e <= max_subnormal
        if tiny.any():  # the x/2 path on those lanes only (elementwise: same bits)
            # x/2 by vdiv is exact here; the square is a plain Mul (gradual underflow).
            half = self._vexp(x64[tiny] * 0.5)
            e = np.array(e, copy=True)
            e[tiny] = self._round_native(half * half)
        return e

    # -- ln ------------------------------------------------------------------------

    def _vln(self, x64) -> np.ndarray:
        # PROXY: hardware vln (Ln INTRINSIC / PRECISION_1ULP_FTZ_TRUE),
        # algorithm not public, documented <= 1 ulp without subnormal
        # support.  Modelled as RN of the float64 log in the native format,
        # subnormal inputs read as signed zero (-> -inf).  Returns float64.
        return self._round_native(np.log(self._flush_native(x64)))

    def _ln_precise(self, x64) -> np.ndarray:
        """Ln PRECISION_1ULP_FTZ_FALSE (LnCompute, npu_math §6)."""
        native = self._native_fmt()
        max_subnormal = float(
            np.array(MAX_SUBNORMAL_BITS[native.name], dtype=native.uint_dtype).view(native.dtype)
        )
        shift = LN_SUBNORMAL_SCALE_LOG2[native.name]
        if native is FP32:
            offset = np.float64(LN_SUBNORMAL_OFFSET_FP32)
        else:  # half: -ln(2**10) rounded to half (the constant's exact spelling is not public)
            offset = self._round_native(np.float64(-shift * math.log(2.0)))
        low = x64 < max_subnormal  # strict: 0x007FFFFF itself stays on vln
        out = self._vln(x64)
        if low.any():  # the scaled path on those lanes only (elementwise: same bits)
            scaled = self._vln(self._round_native(x64[low] * 2.0**shift)) + offset
            out = np.array(out, copy=True)
            out[low] = self._round_native(scaled)
        return out


# ---------------------------------------------------------------------------
# Power, algorithm C (npu_math §2), float32 bit level
# ---------------------------------------------------------------------------

#: Elements per block of the npu Power emulation.  The few dozen temporaries
#: of one block stay in the CPU cache; multi-megabyte temporaries of a whole
#: tensor cost a page fault per 4 KiB on every allocation.  Blocking changes
#: no bit (every step is elementwise).
POW_BLOCK = 1 << 15


def _vexp_intrinsic_fp32(x):
    # PROXY: hardware vexp (Exp INTRINSIC / PRECISION_1ULP_FTZ_TRUE), algorithm
    # not public, documented <= 1 ulp without subnormals.  Modelled as RN32 of
    # the float64 exp; subnormal inputs read as 0 (exp = 1 either way) and
    # subnormal results are flushed to +0 (npu_math §1, §6).
    with np.errstate(all="ignore"):
        e = np.exp(x.astype(np.float64)).astype(np.float32)
        np.putmask(e, e < POW_FLT_MIN, np.float32(0.0))
    return e


def power_log(x, subnormal_fix: bool = True):
    """Double-float ln(x) of npu Power algorithm C: steps R0-R5, L6-L18.

    Parameters
    ----------
    x : ndarray of float32
        |base|, non-negative (zero, inf and NaN give meaningless values that
        the special cases of :func:`power_c` replace).
    subnormal_fix : bool
        True: master 9e7fba1b9 (R1/R2 read the scaled bits); False: the
        9.0.0/9.1.0 bug (they read the unscaled bits, §2.5).

    Returns
    -------
    lhi, llo : ndarray of float32
        lhi + llo ~ ln(x) (relative error about 2**-29 with the fix).
    """
    shape = np.shape(x)
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    lhi = np.empty_like(x)
    llo = np.empty_like(x)
    for start in range(0, x.size, POW_BLOCK):
        block = slice(start, start + POW_BLOCK)
        lhi[block], llo[block] = _power_log_block(x[block], subnormal_fix)
    return lhi.reshape(shape), llo.reshape(shape)


def _power_log_block(x, subnormal_fix: bool):
    """:func:`power_log` on one contiguous 1-D float32 block."""
    f32 = np.float32
    with np.errstate(all="ignore"):
        # R0: subnormals scaled by 2**23 (Muls, exact); i0 compensates.
        small = x < POW_FLT_MIN
        any_small = bool(small.any())
        xs = np.where(small, x * POW_SUBNORMAL_SCALE, x) if any_small and subnormal_fix else x
        bits = xs.view(np.int32)
        # R1/R2: m in [sqrt(1/2), sqrt(2)), x = m * 2**k, e = k * 2**23.
        e = (bits - POW_SQRT_HALF_BITS) & POW_EXPONENT_MASK
        m = (bits - e).view(np.float32)
        # R3: i = fma(float(e), 2**-23, i0) = k + i0, computed without the fma:
        # e = k * 2**23 with |k| <= 256, so float(e) and float(e) * 2**-23 = k
        # are exact, k + i0 (i0 in {0, -23}) is an exact small integer, and
        # e >> 23 == k.  Zeros: k = 0 gives +0 both ways, and k + i0 = 0 is
        # an exact zero sum of opposite signs, +0 in both (RNE).
        i = (e >> 23).astype(np.float32)
        if any_small:
            i += np.where(small, POW_SUBNORMAL_SHIFT, f32(0.0))
        # R4
        p = m + f32(1.0)
        m1 = m - f32(1.0)
        # PROXY: (R5) hardware vdiv (Div INTRINSIC) of 1/p, <= 1 ulp; modelled as
        # RN32(1/p) (numpy float32 division is correctly rounded).  p is in
        # [1.7, 2.42], so no flushing is involved.
        r = f32(1.0) / p
        # L6-L8: q = (m-1)/(m+1) as qhi + qlo.
        qhi = m1 * r
        t = m1 + qhi * f32(-2.0)
        qhi1 = fma32(-m1, qhi, t)
        qlo = r * qhi1
        # L9-L11: u ~ q^2/3 + q^4/5 + ...
        s = qhi * qhi
        c3, c2, c1, c0 = POW_LOG_POLY
        u = fma32(c3, s, c2)
        u = fma32(u, s, c1)
        u = fma32(u, s, c0)
        u *= s
        # L12: 2q as a double-float (exact doublings).
        qh2 = qhi + qhi
        ql2 = qlo + qlo
        # L13-L14: i*ln2_hi + 2qhi and its rounding error (Muls then Add: two roundings).
        fhi = i * POW_LN2_HI + qh2
        t2 = fma32(i, -POW_LN2_HI, fhi)
        flo = qh2 - t2
        # L15-L17
        second = fma32(qh2, u, flo)
        last = fma32(ql2 * f32(3.0), u, ql2)
        last = fma32(i, POW_LN2_LO, last)
        total = last + second
        # L18: quick-two-sum.
        lhi = fhi + total
        llo = (fhi - lhi) + total
    return lhi, llo


def _odd_integer_fp32(b):
    """Algorithm C's odd-integer test fma(floor(0.5*b), -2, b) == 1 (False for inf, NaN, |b| >= 2**24).

    Quirk kept: the fma rounds, so b = -(1 - 2**-24) (2 + b = 1 + 2**-24,
    a tie that goes to 1) also counts as odd.
    """
    with np.errstate(all="ignore"):
        return fma32(np.floor(b * np.float32(0.5)), np.float32(-2.0), b) == np.float32(1.0)


def _pow_special_cases(a, b, res, nan_bits: int, uint_dtype):
    """npu_math §2.4 fix-ups (ProcessSpecialCaseForPowF), in source order.

    a, res are arrays of one float dtype (float32 or float16) and one shape;
    b has that shape or is a single value (broadcast).  Values of ``res``
    where no special case applies are kept.  ``a == 0`` is an exact compare
    (a subnormal base is not zero).  ``res`` is updated in place when it is
    writeable and returned.

    Only lanes with a base that is not finite positive, a == 1, b == 0 or a
    NaN b can meet a case (steps 3-5 need a <= 0, inf or NaN); the steps run
    on those lanes only.  On float32 arrays of :data:`COMPILED_MIN_POINTS`
    lanes or more, one compiled pass does the same
    (:func:`precision.machine.npu_fused.pow_special_cases`); the numpy
    definition is :func:`_pow_special_cases_reference`.
    """
    if res.dtype == np.float32 and res.size >= COMPILED_MIN_POINTS and nan_bits == POW_NAN_BITS["fp32"]:
        from precision.machine.npu_fused import pow_special_cases  # (numba, imported when first needed)
        return pow_special_cases(a, b, _writable(res).reshape(-1)).reshape(res.shape)
    return _pow_special_cases_reference(a, b, res, nan_bits, uint_dtype)


def _writable(res) -> np.ndarray:
    """``res`` itself when it is writeable and C-contiguous, else a C-contiguous copy (to update in place)."""
    return np.array(res, order="C", copy=not (res.flags.writeable and res.flags.c_contiguous))


def _pow_special_cases_reference(a, b, res, nan_bits: int, uint_dtype):
    """:func:`_pow_special_cases` as numpy defines it."""
    zero = np.zeros((), dtype=res.dtype)
    with np.errstate(all="ignore"):
        plain = (a > zero) & (a < np.array(np.inf, dtype=res.dtype)) & (a != np.ones((), dtype=res.dtype))
        plain &= (b != zero) & (b == b)
    if plain.all():
        return res
    res = _writable(res)
    idx = np.flatnonzero(~plain)
    a_sub = np.reshape(a, -1)[idx]
    b_sub = np.broadcast_to(b, res.shape).reshape(-1)[idx] if np.size(b) != 1 else np.reshape(b, ())
    res.reshape(-1)[idx] = _pow_special_cases_lanes(a_sub, b_sub, res.reshape(-1)[idx], nan_bits, uint_dtype)
    return res


def _pow_special_cases_lanes(a, b, res, nan_bits: int, uint_dtype):
    """The §2.4 steps on every lane (a, res 1-D; b the same shape or 0-d)."""
    one = np.ones((), dtype=res.dtype)
    zero = np.zeros((), dtype=res.dtype)
    inf = np.array(np.inf, dtype=res.dtype)
    with np.errstate(all="ignore"):
        odd = _odd_integer_fp32(b.astype(np.float32))
        a_nan_or_b_nan = np.isnan(a) | np.isnan(b)
        a_zero_or_inf = (a == zero) | np.isinf(a)
        # Step 3: r12 = b < 0 ? bits(a) ^ 0x7F800000 : bits(a) swaps 0 and inf keeping the sign.
        swapped = np.copysign(np.where(a == zero, inf, zero), a)
        r12 = np.where(b < zero, swapped, a)
        r12 = np.where(odd, r12, np.abs(r12))
        # Step 4: negative finite base.
        negative = a < zero
        non_integer = b != np.floor(b)
        res = np.where(negative & odd, -res, res)
        nan_mask = negative & non_integer & ~a_zero_or_inf
        res = np.where(a_zero_or_inf, r12, res)
        nan_mask = (nan_mask | a_nan_or_b_nan) & ~((b == zero) | (a == one))
        res = np.where((b == zero) | (a == one), one, res)
        res = np.where((a == -one) & np.isinf(b), one, res)
    res = np.array(res, order="C", copy=True)
    res.view(uint_dtype)[nan_mask] = nan_bits
    return res


def power_c(a, b, subnormal_fix: bool = True):
    """npu float32 Power, DOUBLE_FLOAT_TECH algorithm C (npu_math §2).

    Parameters
    ----------
    a, b : array_like of float32 (broadcast together)
        Base and exponent.

    Returns
    -------
    ndarray of float32
        Bit-level emulation of R0-R5, L6-L18, E1-E5 and the §2.4 special
        cases, except R5 (vdiv) and E3 (vexp), which are proxies.  Computed
        in blocks of :data:`POW_BLOCK` elements; a single exponent value is
        kept a scalar (elementwise, so neither changes a bit).
    """
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    shape = np.broadcast_shapes(a.shape, b.shape)
    a = np.ascontiguousarray(np.broadcast_to(a, shape)).reshape(-1)
    b = b.reshape(()) if b.size == 1 else np.ascontiguousarray(np.broadcast_to(b, shape)).reshape(-1)
    if a.size >= COMPILED_MIN_POINTS:  # the same steps in two compiled passes, the exp proxy between them
        from precision.machine.npu_fused import power_c_finish, power_c_terms  # (numba, imported when needed)
        phi, plo = power_c_terms(a, b, subnormal_fix)
        return power_c_finish(a, b, phi, plo, _vexp_intrinsic_fp32(phi)).reshape(shape)
    out = np.empty(a.size, dtype=np.float32)
    for start in range(0, a.size, POW_BLOCK):
        block = slice(start, start + POW_BLOCK)
        out[block] = _power_c_block(a[block], b if b.ndim == 0 else b[block], subnormal_fix)
    return out.reshape(shape)


def _power_c_block(a, b, subnormal_fix: bool):
    """:func:`power_c` on one contiguous 1-D block (b: same length or 0-d)."""
    f32 = np.float32
    lhi, llo = _power_log_block(np.abs(a), subnormal_fix)
    with np.errstate(all="ignore"):
        # E1/E2: b * ln|a| as phi + plo.
        phi = lhi * b
        plo = fma32(llo, b, fma32(lhi, b, -phi))
        # PROXY: (E3) hardware vexp in INTRINSIC mode (see _vexp_intrinsic_fp32).
        big_e = _vexp_intrinsic_fp32(phi)
        # E4: exp(phi) * (1 + plo).
        res = fma32(plo, big_e, big_e)
        # E5: clamps on phi (not on phi + plo).
        np.putmask(res, phi >= POW_EXP_OVERFLOW, f32(np.inf))
        np.putmask(res, phi < POW_EXP_UNDERFLOW, f32(0.0))
    return _pow_special_cases_reference(a, b, res, POW_NAN_BITS["fp32"], np.uint32)


def _vln_fp32(x):
    # PROXY: hardware vln (Ln INTRINSIC / PRECISION_1ULP_FTZ_TRUE), algorithm
    # not public, documented <= 1 ulp without subnormals.  Modelled as RN32 of
    # the float64 log, subnormal inputs read as signed zero (-> -inf).
    x = np.asarray(x, dtype=np.float32)
    flushed = np.where(np.abs(x) < POW_FLT_MIN, np.copysign(np.float32(0.0), x), x)
    with np.errstate(all="ignore"):
        return np.log(flushed.astype(np.float64)).astype(np.float32)


def power_intrinsic(a, b):
    """npu float32 Power, default INTRINSIC (npu_math §5, GetPowFIntrinsicCore).

    ``vexp(RN(b * vln(|a|)))`` with the hardware ops in their default FTZ
    modes (proxies), then the §2.4 special cases.  a, b: float32 arrays.
    """
    shape = np.shape(a)
    a = np.asarray(a, dtype=np.float32).reshape(-1)
    b = np.asarray(b, dtype=np.float32).reshape(-1)
    with np.errstate(all="ignore"):
        res = _vexp_intrinsic_fp32(b * _vln_fp32(np.abs(a)))
    return _pow_special_cases(a, b, res, POW_NAN_BITS["fp32"], np.uint32).reshape(shape)

