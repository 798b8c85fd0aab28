"""Exact fused multiply-add in the compute formats (one RNE rounding of a*b + c).

Every machine's ``fma`` is the exact fused operation (npu_math §1, §7.2),
and the npu Power algorithm (:mod:`precision.machine.npu`) is built from
fp32 fmas.  :func:`fma_round_to_odd` is the reference for every format;
:func:`fma32` is the fast fp32 path, bit-identical to it.
"""

from __future__ import annotations

import numpy as np

from precision.machine.compiled import COMPILED_MIN_POINTS

__all__ = ["fma_round_to_odd", "fma32"]


def fma_round_to_odd(a64, b64, c64):
    """a*b + c rounded to odd at float64 precision (53 bits).

    Preconditions: a, b, c are float64 arrays holding values of a format with
    at most 26 significand bits and exponents within float32's (fp32, fp16,
    bf16), so that ``a*b`` is exact in float64 and no float64 result is
    subnormal or overflows.

    Method (npu_math §1; Boldo & Melquiond, "Emulation of FMA and
    correctly rounded sums: proved algorithms using rounding to odd", IEEE TC
    2008): ``p = a*b`` is exact; Knuth's TwoSum gives ``s = RN(p + c)`` and
    the exact error ``e``; round-to-odd of the exact sum is ``s`` if
    ``e == 0``, else ``s`` truncated toward zero with its last bit set.  A
    round-to-odd value with p >= q + 2 bits rounds to nearest into q bits
    exactly as the exact value does, so a single RNE cast to fp32 (q = 24),
    fp16 or bf16 afterwards is the correctly rounded fma.  Subnormal targets
    only lower q.  Non-finite sums (inf, NaN operands, inf*0) take IEEE's
    float64 ``p + c`` unchanged; an exact zero sum keeps IEEE's sign rule.
    """
    with np.errstate(all="ignore"):
        p = np.asarray(a64 * b64)
        s = np.asarray(p + c64)
        z = s - p
        e = (p - (s - z)) + (c64 - z)
        inexact = (e != 0) & np.isfinite(s)
        toward_zero = inexact & ((s > 0) != (e > 0))
    bits = np.asarray(s.view(np.int64) - toward_zero.astype(np.int64))
    bits |= inexact.astype(np.int64)
    return bits.view(np.float64)


#: float64 bit masks of the fast fp32 fma: the 29 low significand bits of a
#: float64 hold what an RNE cast to a normal float32 drops; 0x10000000 there is
#: a float32 rounding midpoint.
_F64_LOW29 = np.int64(0x1FFFFFFF)
_F64_LOW29_MID = np.int64(0x10000000)


def fma32(a, b, c):
    """Fused a*b + c on float32 operands, one RNE rounding to float32 (exact).

    a, b, c: float32 arrays or scalars (broadcast).  Bit-identical to
    ``fma_round_to_odd(a, b, c).astype(float32)`` (the reference, kept for
    the rare lanes below and for the tests), at a fraction of the cost.
    Results of :data:`~precision.machine.compiled.COMPILED_MIN_POINTS`
    elements or more come from one compiled pass, the exact fused operation
    itself (:func:`precision.machine.arith_fused.fma32_pass`); smaller ones from
    :func:`_fma32_numpy`, the numpy definition below.
    """
    shape = np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(c))
    if np.prod(shape, dtype=np.int64) < COMPILED_MIN_POINTS:
        return _fma32_numpy(a, b, c)
    from precision.machine.arith_fused import fma32_pass  # (numba, imported when first needed)
    return fma32_pass(a, b, c, shape)


def _fma32_numpy(a, b, c):
    """:func:`fma32` in numpy (the definition the compiled pass equals).

    Fast path.  ``p = a*b`` is exact in float64 (two 24-bit significands,
    exponents within [-298, 256]) and ``s = RN64(p + c)``; the result is
    ``RN32(s)``.  Let ``v = p + c`` be the exact sum.  ``RN32(s) == RN32(v)``
    unless ``s`` is itself a float32 rounding boundary (a midpoint between
    consecutive float32 values, or the overflow threshold 2**128 - 2**103)
    and ``s != v``:

    * if ``s == v`` there is nothing to prove;
    * otherwise, say ``v < s``.  RN32 is monotone, so RN32(v) != RN32(s)
      needs a boundary ``m`` with ``v <= m <= s``.  Every boundary is a
      float64 number.  ``m == v`` would make ``v`` a float64, so ``s == v``;
      ``v < m < s`` contradicts ``s`` being the float64 nearest to ``v``
      (``|v - m| < |v - s|``).  Hence ``m == s``.  (Symmetric for v > s.)

    Which ``s`` can be a boundary (float64 ``s = 1.f * 2**E``, 52-bit f):

    * ``E >= -126`` (the float32 grid there is 2**(E-23)): the boundaries are
      exactly the ``s`` whose 29 low bits of f equal 0x10000000 (this
      includes 2**128 - 2**103, f = 2**52 - 2**28).  Test T1.
    * ``E <= -127`` (float32 subnormal grid 2**-149): boundaries are odd
      multiples of 2**-150.  Such an ``s`` with ``|s| <= 2**-150`` rounds to
      a float32 zero, and then ``v`` is exact: ``|v| < 2**-149`` with c != 0
      needs ``|p| >= 2**-151``, so ``p`` (48 significant bits) is a multiple
      of 2**-199 and so is ``v``, which then fits in 50 bits; with c == 0,
      ``v = p``.  Otherwise ``2**-150 < |s| < 2**-126`` and RN32(s) is a
      nonzero float32 of magnitude <= 2**-126 (0 < |bits| <= 0x00800000).
      Test T2 flags every such lane (a superset of the boundaries).

    Lanes flagged by T1 or T2 (about 2**-29 of random lanes, plus the rare
    subnormal results) are recomputed with the round-to-odd reference; a
    lane that is flagged but exact gets the same value either way.
    Non-finite sums: inf keeps the low bits zero and NaN is NaN in both
    paths; a zero sum is exact, so IEEE's sign rule of ``p + c`` applies in
    both.
    """
    shape = np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(c))
    with np.errstate(all="ignore"):
        # s = RN64(a*b + c), operands in this order (NaN payloads as before);
        # in place in one fresh float64 buffer (cheaper than mixed-dtype ufuncs).
        if np.shape(a) == shape:
            s = np.asarray(a).astype(np.float64)
        else:
            s = np.empty(shape, dtype=np.float64)
            s[...] = a
        np.multiply(s, b, out=s)
        np.add(s, c, out=s)
        out = s.astype(np.float32)
        # T1: s on a normal float32 midpoint (29 low bits == 0x10000000).
        low = s.view(np.int64)
        np.bitwise_and(low, _F64_LOW29, out=low)  # s is not needed any more
        risky = low == _F64_LOW29_MID
        # T2: 0 < |RN32(s)| <= 2**-126: 2*bits - 2 (uint32, sign shifted out,
        # zero wraps to 0xFFFFFFFE) <= 2*0x00800000 - 2.
        twice = np.add(out.view(np.uint32), out.view(np.uint32))
        twice -= np.uint32(2)
        risky |= twice <= np.uint32(0x00FFFFFE)
        if risky.any():
            _fma32_settle(a, b, c, out, np.flatnonzero(risky))
    return out


def _fma32_settle(a, b, c, out, idx):
    """Overwrite ``out`` (float32, C-contiguous) at flat indices ``idx`` with the round-to-odd fma."""
    shape = out.shape
    sub = [np.broadcast_to(np.asarray(v, dtype=np.float32), shape).reshape(-1)[idx].astype(np.float64)
           for v in (a, b, c)]
    out.reshape(-1)[idx] = fma_round_to_odd(*sub).astype(np.float32)

