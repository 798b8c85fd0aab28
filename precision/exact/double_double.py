"""Double-double arithmetic and exp/log1p with proven error bounds, in compiled functions (numba).

A double-double (dd) ``(hi, lo)`` stands for the unevaluated sum ``hi + lo`` of two float64 with
``hi = RN(hi + lo)``: about 106 bits.  Let ``u = 2**-53``, the unit roundoff of float64.  Every bound
below assumes IEEE binary64 arithmetic rounding to nearest-even, no overflow, and no underflow in the
operations' results (the callers keep their operands within [2**-900, 2**900]); numba compiles
``a * b + c`` as two rounded operations (no contraction into a fused multiply-add without
``fastmath``), and :func:`fma` is the exact fused operation (``llvm.fma.f64``).

Error-free transformations (exact: the pair's sum equals the operation's exact result):
:func:`two_sum` (Knuth), :func:`fast_two_sum` (Dekker; needs ``|a| >= |b|`` or ``a == 0``),
:func:`two_prod` (the FMA form).

Operations, after Joldes, Muller and Popescu, "Tight and rigorous error bounds for basic building blocks
of double-word arithmetic", ACM TOMS 44(2), 2017 (their algorithm numbers; the relative error bound
they prove, then the envelope this module states and its callers use):

========================  ===================  ===================  ===================
function                  algorithm            proven bound         envelope used
========================  ===================  ===================  ===================
:func:`dd_add`            6 AccurateDWPlusDW   3u^2 + 13u^3         :data:`ADD_REL` 4u^2
:func:`dd_add_fp`         4 DWPlusFP           2u^2                 :data:`ADD_FP_REL` 3u^2
:func:`dd_mul`            12 DWTimesDW3        5u^2                 :data:`MUL_REL` 8u^2
:func:`dd_mul_fp`         9 DWTimesFP3         2u^2                 :data:`MUL_FP_REL` 3u^2
========================  ===================  ===================  ===================

The bound of a sum is relative to the exact sum of the two *represented* operands: a sum that cancels
keeps a small relative error of its own, and the callers carry the operands' own errors through the
cancellation factor ``(|a| + |b|) / |a + b|``.  The envelopes leave room over the proven bounds (a later
formal proof of some of these bounds corrected others in the same paper).

Elementary functions, proven here (no library function's accuracy enters their bounds):

* :func:`dd_exp` -- ``exp(y)`` of a dd ``y`` with ``|y| <= EXP_ARG_MAX``, as ``(hi + lo) * 2**k``.
  Reduction ``y = k ln2/2**16 + r`` with ``ln2/2**16`` split in three float64 (the first with 23 bits,
  so ``k * C1`` is exact for ``|k| < 2**30``) and two tables of ``2**(j/256)`` and ``2**(j/65536)``
  rounded to nearest dd (computed once with mpmath at 200 bits; relative error ``u**2`` each), so
  ``|r| <= ln2/2**17 + 2**-60 < 2**-17.5``.  Then ``exp(r) = 1 + r + r**2/2 + c`` with ``r**2`` exact
  (:func:`two_prod`, plus its cross term ``rh rl``), ``c = r**3 (1/6 + r/24 + r**2/120)`` in float64
  (relative error below ``5u``: below ``2**-105.9`` of the result; the omitted ``r**6/720`` below
  ``2**-114.7``), the sums in dd (below ``2**-104.4``, ``2**-105.7``), the two table products (below
  ``2 * 5u**2``).  The reduction's absolute error is at most ``4u |y_lo| + 2**-113``.  In all
  (:func:`exp_rel`; the terms add up to ``2**-101.4``)::

      |computed / exp(y) - 1| <= 2**-100 + 2**-50 |y_lo|.

* :func:`log1p_newton` -- ``log(1 + e)`` for a dd ``e`` in [2**-8, 1], by one Newton step from any
  float64 seed ``L0`` (the library's ``log1p``; its accuracy only sets the size of the step):
  ``d = (1 + e) exp(-L0) - 1`` in dd, then ``L = L0 + (d - d**2/2)``.  Exactly, ``log(1 + e) = L0 +
  log1p(d)``, so the error is the series' remainder ``|d|**3/3`` plus the computed ``d``'s error (the
  exp's and the two dd operations' bounds, and the rounding of ``d - d**2/2``); the function returns
  that absolute bound, measured on the step it took.

Each bound is an upper bound on the exact error, computed in float64 (so itself rounded); callers
multiply their final bound by a safety factor (``1 + 2**-30``) that covers the rounding of the bound
arithmetic, as :mod:`precision.operators.sigmoid_focal_loss_grad.oracle` does for its balls.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

__all__ = ["fma", "float_bits", "exponent", "pow2", "two_sum", "fast_two_sum", "two_prod", "dd_add", "dd_add_fp", "dd_mul", "dd_mul_fp",
           "dd_exp", "exp_rel", "log1p_newton", "ADD_REL", "ADD_FP_REL", "MUL_REL", "MUL_FP_REL",
           "EXP_ARG_MAX", "EXP_REL", "U"]

#: The unit roundoff of float64.
U = 2.0**-53
#: Envelopes of the relative error bounds of the dd operations (module docstring's table).
ADD_REL = 4 * U * U
ADD_FP_REL = 3 * U * U
MUL_REL = 8 * U * U
MUL_FP_REL = 3 * U * U
#: The largest |y| :func:`dd_exp` takes: |k| = |round(64 y / ln 2)| < 2**19, for the exact k * C1.
EXP_ARG_MAX = 5600.0
#: The constant part of :func:`dd_exp`'s relative bound (module docstring).
EXP_REL = 2.0**-100


@intrinsic
def fma(typingctx, a, b, c):
    """a*b + c with one rounding (``llvm.fma`` of the operands' float type: float32 or float64)."""
    if not (a == b == c and isinstance(a, types.Float)):
        return None
    signature = a(a, b, c)

    def codegen(context, builder, sig, args):
        ftype = args[0].type
        fn = builder.module.declare_intrinsic("llvm.fma", [ftype], ir.FunctionType(ftype, [ftype] * 3))
        return builder.call(fn, args)
    return signature, codegen


@intrinsic
def float_bits(typingctx, x):
    """The bits of a float64 as an int64 (a bit cast)."""
    if not isinstance(x, types.Float) or x.bitwidth != 64:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(x), codegen


@intrinsic
def _bits_float(typingctx, i):
    """The float64 of an int64's bits (a bit cast)."""
    if not isinstance(i, types.Integer):
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


_JIT = dict(cache=True, nogil=True, error_model="numpy")


@numba.njit(inline="always", **_JIT)
def exponent(x):
    """floor(log2 |x|) of a normal float64 x (its biased exponent field minus 1023)."""
    return ((float_bits(x) >> 52) & 0x7FF) - 1023


@numba.njit(inline="always", **_JIT)
def pow2(k):
    """2.0**k for an integer -1022 <= k <= 1023, exactly (built from its bits)."""
    return _bits_float(np.int64(k + 1023) << 52)


@numba.njit(inline="always", **_JIT)
def two_sum(a, b):
    """(s, e) with s = RN(a + b) and s + e = a + b exactly (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


@numba.njit(inline="always", **_JIT)
def fast_two_sum(a, b):
    """(s, e) with s = RN(a + b) and s + e = a + b exactly, for |a| >= |b| or a = 0 (Dekker)."""
    s = a + b
    return s, b - (s - a)


@numba.njit(inline="always", **_JIT)
def two_prod(a, b):
    """(p, e) with p = RN(a * b) and p + e = a * b exactly (no underflow of e assumed)."""
    p = a * b
    return p, fma(a, b, -p)


@numba.njit(inline="always", **_JIT)
def dd_add(ah, al, bh, bl):
    """(ah + al) + (bh + bl); relative error <= ADD_REL (Joldes et al., algorithm 6)."""
    sh, sl = two_sum(ah, bh)
    th, tl = two_sum(al, bl)
    c = sl + th
    vh, vl = fast_two_sum(sh, c)
    w = tl + vl
    return fast_two_sum(vh, w)


@numba.njit(inline="always", **_JIT)
def dd_add_fp(ah, al, b):
    """(ah + al) + b for a float64 b; relative error <= ADD_FP_REL (algorithm 4)."""
    sh, sl = two_sum(ah, b)
    v = al + sl
    return fast_two_sum(sh, v)


@numba.njit(inline="always", **_JIT)
def dd_mul(ah, al, bh, bl):
    """(ah + al) * (bh + bl); relative error <= MUL_REL (algorithm 12, with FMA)."""
    ch, cl1 = two_prod(ah, bh)
    tl0 = al * bl
    tl1 = fma(ah, bl, tl0)
    cl2 = fma(al, bh, tl1)
    cl3 = cl1 + cl2
    return fast_two_sum(ch, cl3)


@numba.njit(inline="always", **_JIT)
def dd_mul_fp(ah, al, b):
    """(ah + al) * b for a float64 b; relative error <= MUL_FP_REL (algorithm 9, with FMA)."""
    ch, cl1 = two_prod(ah, b)
    cl3 = fma(al, b, cl1)
    return fast_two_sum(ch, cl3)


# ---------------------------------------------------------------------------
# exp: constants, computed once from mpmath at 200 bits
# ---------------------------------------------------------------------------

#: exp's reduction step is ln2 / 2**EXP_STEPS_LOG2: |r| <= ln2 / 2**17 < 2**-17.5.
EXP_STEPS_LOG2 = 16


def _exp_constants():
    """(C1, C2, C3, 2**16/ln2, tables of 2**(j/256) and 2**(j/65536) as dd) of :func:`dd_exp`."""
    import mpmath

    with mpmath.workprec(200):
        step = mpmath.log(2) / 2**EXP_STEPS_LOG2
        c1 = float(mpmath.floor(step * 2**39) / 2**39)  # step < 2**-16: 23 significant bits
        c2 = float(step - c1)
        c3 = float(step - c1 - c2)
        inv = float(2**EXP_STEPS_LOG2 / mpmath.log(2))
        tables = []
        for denominator in (256, 65536):
            hi, lo = np.empty(256), np.empty(256)
            for j in range(256):
                v = mpmath.mpf(2) ** (mpmath.mpf(j) / denominator)
                hi[j] = float(v)
                lo[j] = float(v - hi[j])
            tables += [hi, lo]
    assert math.frexp(c1)[0] * 2**23 == int(math.frexp(c1)[0] * 2**23)
    return (c1, c2, c3, inv, *tables)


_C1, _C2, _C3, _INV_STEP, _T1_HI, _T1_LO, _T2_HI, _T2_LO = _exp_constants()


@numba.njit(inline="always", **_JIT)
def exp_rel(yl):
    """The relative error bound of :func:`dd_exp` for an argument with low part ``yl``."""
    return EXP_REL + 2.0**-50 * abs(yl)


@numba.njit(**_JIT)
def dd_exp(yh, yl):
    """exp(yh + yl) as ``(hi, lo, k)``, the value ``(hi + lo) * 2**k`` with hi in [0.99, 2.01].

    Requires ``|yh| <= EXP_ARG_MAX`` and a normalized dd (``|yl| <= ulp(yh) / 2``).  The relative error
    is at most :func:`exp_rel` ``(yl)`` (module docstring).
    """
    kf = np.round(yh * _INV_STEP)
    ki = np.int64(kf)
    j2 = ki & 255
    j1 = (ki >> 8) & 255
    m = ki >> 16
    t1 = yh - kf * _C1                      # exact: kf * C1 has <= 53 bits, Sterbenz
    b, eb = two_prod(-kf, _C2)
    rh, rl = two_sum(t1, b)
    rl = rl + (eb + (yl - kf * _C3))
    rh, rl = two_sum(rh, rl)
    # exp(r) = 1 + r + r**2/2 + c: r**2 exact (two_prod), its cross term rh rl and
    # c = r**3 (1/6 + r/24 + r**2/120) in float64 (the rest below r**6/720 < 2**-114)
    ph, pl = two_prod(rh, rh)
    c = rh * ph * (1.0 / 6.0 + rh * (1.0 / 24.0 + rh * (1.0 / 120.0)))
    sh, sl = two_sum(1.0, rh)
    sh, sl = dd_add_fp(sh, sl, 0.5 * ph)
    sh, sl = fast_two_sum(sh, sl + (((rl + 0.5 * pl) + rh * rl) + c))
    sh, sl = dd_mul(sh, sl, _T2_HI[j2], _T2_LO[j2])
    sh, sl = dd_mul(sh, sl, _T1_HI[j1], _T1_LO[j1])
    return sh, sl, m


@numba.njit(**_JIT)
def log1p_newton(eh, el, rel_e, seed):
    """log(1 + e) for a dd e in [2**-8, 1] with relative error bound ``rel_e``, from a float64 ``seed``.

    Returns ``(hi, lo, abs_bound)``: ``|hi + lo - log(1 + e_exact)| <= abs_bound`` for every e_exact
    within ``rel_e`` of ``eh + el`` (module docstring; ``seed`` may be any value within 2**-20 of the
    logarithm, the bound measures the step actually taken).
    """
    wh, wl, k = dd_exp(-seed, 0.0)
    scale = pow2(k)
    wh, wl = wh * scale, wl * scale
    sh, sl = dd_add_fp(eh, el, 1.0)
    ph, pl = dd_mul(sh, sl, wh, wl)
    d = (ph - 1.0) + pl                      # ph - 1 exact (Sterbenz); one rounding
    step = d - 0.5 * d * d
    hi, lo = two_sum(seed, step)
    # the computed (1 + e) exp(-seed) = its exact value (1 + eps); |eps| bounded by e's own error
    # (relative to 1 + e: e / (1 + e) of it), 1 + e's sum, the exp and the product
    eps = rel_e * 0.5 + ADD_FP_REL + exp_rel(0.0) + MUL_REL
    eps = eps * (1.0 + 4.0 * eps)
    ad = abs(d)
    bound = (1.0 + ad) * eps * (1.0 + ad + eps) + ad * ad * ad * 0.34 + 3.0 * U * ad
    return hi, lo, bound
