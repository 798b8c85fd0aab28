"""A candidate SigmoidFocalLossGrad recipe built from NPU primitives only (issue 6).

fp32 compute, fp16/fp32 in and out like the production kernel; contract
validation, host scalars and the store are shared with it (:mod:`common`).
Ops used: Exp, Ln, Div (0ulp mode), Mul, Add/Sub, fused multiply-add, Abs,
Neg, Min, Max, compares and selects (counts: precision.opcount).

Everything is expressed through ``ax = |x|`` and ``e = exp(-ax)``.  With
``L = log1p(e)``, ``z = e/(2+e)`` (so ``L = 2 atanh z``), ``g1 = g + 1`` and
``D/e = (L - e)/e``, the two forms of ``A`` (spec section 2) are::

    A_small = -(g1 + g*D/e) * exp(-g1*(ax + L))     # power base q = e/(1+e); A(x) for x >= 0
    A_big   = -(1 + g*e*(ax + L)) * exp(-g1*L)      # power base p = 1/(1+e);  A(x) for x < 0

(``q^(g+1) = exp(-g1*(ax + L))`` absorbs the factor ``p`` of the bracket, so
no ``p``, ``q`` or ``1 - p`` is ever formed), and ``B(x) = -A(-x)``.

Steps (u = 2^-24, the unit roundoff of fp32; "double-float" = an unevaluated
sum hi + lo of two fp32 values):

1. **e and its rounding error.**  ``e = Exp(-ax)``; its relative error is
   recovered as ``el/e = ln(k*e_true) - Ln(k*e)`` with ``k = 4`` on
   ``[0.6875, 2.5)`` and ``k = 1`` below (``ln(4) = LN4_HI + LN4_LO``, the
   first sum exact by Sterbenz), so ``|ln(k*e)| < 0.7`` up to |x| = 2.08
   (the Ln result's own rounding, which bounds what is recovered, is then at
   most u/2) and ``< 1.12`` up to 2.5 (at most u); above 2.5 ``el = 0``
   (there the raw Exp is as good and ``e`` matters less).  Near the roots of A this is the error that
   remains: a relative error eps in ``e`` changes the bracket by about
   ``C * eps`` (C = its cancellation factor).
2. **z = e/(2+e) as zh + zl.**  ``zh = Div0ulp(e, 2+e)``; the residual
   ``e - zh*(2+e) = fma(-zh, e, fma(-2, zh, e))`` (the inner step is exact:
   ``2zh`` is within a factor 2 of ``e``) and ``el`` give
   ``2zl = 2(residual + (1-z)*el) / (2+e) = (residual + (1-z)*el) * (1-z)``.
3. **L = log1p(e) without Ln**, as a double-float: ``L = 2zh + (2zl + zh^3*T(zh^2))``
   with ``T(w) = 2/3 + 2w/5 + ... + 2w^6/15`` (the atanh series; ``z <= 1/3``,
   so the first omitted term ``2z^17/17`` is at most 2^-29.5 of L, at x = 0,
   and falls like ``z^16``), summed by Fast2Sum.
4. **D/e = -z + z^2*T/(2+e)**, ``1/(2+e) = (1-z)/2`` (the first series term folded: ``2z - e = -e*z``),
   so ``g1 + g*D/e`` has no cancellation except at its own roots
   (``-1.4427 < gamma < -1``); at ``gamma = -1`` it is ``-D/e``, exact to a few u
   while e is normal (|x| < 87.3; beyond, e and this bracket are subnormal).
5. **Powers as Exp of a double-float exponent.**  ``-g1*L`` and ``-g1*ax`` by
   exact products (mul + fma; |x| clamped first to a host power of two beyond
   which the power is 0 or inf anyway, so the product stays finite and its
   low part small), ``-g1*(ax + L)`` by TwoSum; ``Exp`` of the high
   part, the low part ``lo`` applied as ``(1 + lo)`` to the coefficient (one
   fma), so the product of three factors is rounded twice.
6. **Brackets.**  ``-(1 + g*e*(ax + L))`` with ``g*e`` and ``ax + L`` as
   double-floats (TwoSum), one fma for the large part.
7. **Coefficients first, then the power.**  ``scale = weight*dout``
   (``dout`` alone when weight is absent), for mean ``Div0ulp(scale,
   float32(count))`` (not the host's rounded ``1/count``); the coefficient
   (``alpha*scale*(1-t)`` for the term in ``A(x)``, ``-(1-alpha)*scale*t`` for
   ``A(-x)``; exact products for t in {0, 1}) is multiplied into the bracket by
   one fma before the Exp'd factor, so an exact value near FLT_MAX survives
   when the bracket times the coefficient is below 1 (gamma < -1, mean), and
   a tiny power is not rounded into the subnormal range before a large
   weight or dout multiplies it;
   the Exp argument of the small-base form is clamped to SHIFT_RANGE =
   [-80, 88] and the excess ``Exp(arg - clamped)`` (exactly 1 inside the
   range; the subtraction is exact) multiplied into the coefficient first, so
   the power neither overflows before the coefficient is applied (gamma < -1)
   nor turns subnormal and loses bits before it (large gamma * |x|): the one
   rounding into the subnormal range is the final product's.  A zero
   coefficient selects an exact zero (an inf power cannot leak as 0*inf = NaN).
   The two terms are added and stored (one rounding each).

Measured (``studies/candidate.toml``, reports/candidate): see the report for
the numbers.  Known limits: near the roots of A for gamma < -1 the error grows
like C times e's remaining error (intrinsic to an fp32 Exp of -|x|); the
``(1 - alpha)`` coefficient is the host's float32 rounding (exact on the alpha
grid); weight*dout (fp32 inputs) and the division by count are roundings of
their own, so with them the bound grows by up to 1 ulp each.  Magnitude
limits (products formed in a fixed order, not by size): a subnormal scale
(weight*dout/count below 2^-126) keeps only its absolute accuracy, and with
gamma < -1 its ``Exp(arg - 88)`` factor can overflow; a coefficient times
bracket above FLT_MAX (scale near FLT_MAX) overflows before the power
applies; at gamma = -1 a subnormal e (|x| > 87.3) stays subnormal whatever
the scale; for |gamma + 1| > 127 the big-base power ``Exp(-g1*L)`` can
overflow (a zero coefficient then gives NaN); the e-error recovery assumes a
moderate gamma (errors grow with |gamma| beyond the grid: 4.8 ulp at 20).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np

from precision.formats import RNE
from precision.implementations.common import (
    _int_to_float32,
    prepare_host_scalars,
    resolve_machine,
    store_output,
    validate_inputs,
    validate_mean_count,
)

__all__ = ["candidate", "LOG1P_TAIL_COEFFS", "SHIFT_RANGE", "LN_SCALED_RANGE"]

#: Horner coefficients (highest order first) of T(w) = sum_{k>=1} 2 w^(k-1)/(2k+1), k = 1..7.
LOG1P_TAIL_COEFFS = tuple(np.float32(2.0 / (2 * k + 1)) for k in range(7, 0, -1))
#: Exp argument range of the small-base power: exp(-80) is normal, exp(88) < FLT_MAX.
SHIFT_RANGE = (np.float32(-80.0), np.float32(88.0))
#: |x| range where e's error is read from Ln(4e) instead of Ln(e); none above it.
LN_SCALED_RANGE = (np.float32(0.6875), np.float32(2.5))
LN4_HI = np.float32(mpmath.log(4))
LN4_LO = np.float32(mpmath.log(4) - mpmath.mpf(float(LN4_HI)))


def _exponent_cap(g1: float) -> float:
    """Host: a power of two M with |g1| M in [2^12, 2^13) (float32 range; inf when g1 = 0).

    Beyond M, ``exp(-g1 |x|)`` is far outside float32 whatever the coefficient,
    so |x| can be clamped to M in that exponent: the product cannot overflow
    and its rounding error (the low part) stays far below 1.
    """
    if g1 == 0:
        return float(np.finfo(np.float32).max)
    k = math.ceil(math.log2(4096.0 / abs(g1)))
    return math.ldexp(1.0, min(max(k, -149), 127))


def _two_sum(m, a, b):
    """Knuth's TwoSum: s + err == a + b exactly (6 ops)."""
    s = m.add(a, b)
    bb = m.sub(s, a)
    err = m.add(m.sub(a, m.sub(s, bb)), m.sub(b, bb))
    return s, err


def candidate(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="mean", *,
              count=None):
    """SigmoidFocalLossGrad by the candidate recipe (see the module docstring).

    Parameters and return value as :func:`precision.implementations.kernel.kernel`
    (no guard switches).  Computes in fp32 (the machine's compute format).
    """
    inputs = validate_inputs(pred, target, dout, weight, alpha, gamma, reduction)
    n = validate_mean_count(count, inputs)
    m = resolve_machine(machine)
    host = prepare_host_scalars(inputs.alpha, inputs.gamma, inputs.reduction, n)

    def scalar(v):
        return m.asarray(np.float32(v))

    one, two, zero = scalar(1.0), scalar(2.0), scalar(0.0)
    g, ng, ng_half = scalar(host.g), scalar(-host.g), scalar(-0.5 * host.g)
    # host: g1 = g + 1 as an unevaluated float32 pair (exact); the low part is
    # nonzero only for |gamma| < 2^-23-ish or gamma beyond 2^24, and its ops
    # are emitted only then.
    g1 = float(host.g) + 1.0                              # exact for |gamma| < 2^53
    g1h = np.float32(host.g1)
    g1l = np.float32(g1 - float(g1h))
    has_g1l = bool(g1l != 0)
    g1h, ng1h, ng1l = scalar(g1h), scalar(-g1h), scalar(-g1l)
    a, noma = scalar(host.a), scalar(-host.oma)

    x = m.asarray(inputs.pred.reshape(-1))
    t = m.from_int32(inputs.target.reshape(-1))
    d_in = m.asarray(inputs.dout.reshape(-1))
    w_in = m.asarray(inputs.weight.reshape(-1)) if inputs.weight is not None else None

    with np.errstate(all="ignore"):
        # 1. e = Exp(-ax) and its error el (e_true ~ e + el).
        ax = m.abs(x)
        nax = m.neg(ax)
        e = m.exp(nax, ftz=False)
        scaled = m.ge(ax, scalar(LN_SCALED_RANGE[0]))
        k = m.select(scaled, scalar(4.0), one)
        lnk_hi = m.select(scaled, scalar(LN4_HI), zero)
        lnk_lo = m.select(scaled, scalar(LN4_LO), zero)
        rel = m.add(m.sub(m.add(nax, lnk_hi), m.ln(m.mul(e, k), ftz=False)), lnk_lo)
        el = m.mul(e, m.select(m.lt(ax, scalar(LN_SCALED_RANGE[1])), rel, zero))
        # 2. z = e/(2+e) = zh + zl.
        zh = m.div(e, m.add(two, e), mode="0ulp")
        nzh = m.neg(zh)
        resid = m.fma(nzh, e, m.fma(scalar(-2.0), zh, e))
        omz = m.sub(one, zh)                              # 1 - z = 2/(2+e)
        zl2 = m.mul(m.fma(omz, el, resid), omz)           # 2 zl
        # 3. L = 2 atanh(z) = lh + ll.
        w = m.mul(zh, zh)
        tail = scalar(LOG1P_TAIL_COEFFS[0])
        for c in LOG1P_TAIL_COEFFS[1:]:
            tail = m.fma(tail, w, scalar(c))
        small = m.fma(m.mul(zh, w), tail, zl2)            # L - 2zh
        z2 = m.add(zh, zh)
        lh = m.add(z2, small)
        ll = m.sub(small, m.sub(lh, z2))
        # 4. 2(D/e + zh) = z^2 T (1-z) - 2zl;  q1 = g*zh - g1 (so -(g1 + g*D/e) = q1 - (g/2)*dtail2).
        dtail2 = m.fma(m.mul(w, omz), tail, m.neg(zl2))
        q1 = m.fma(g, zh, ng1h)
        # 5. Exponents: -g1*L = nbh + nbl, -g1*(ax + L) = nsh + nslo.
        bh = m.mul(g1h, lh)
        nbh = m.mul(ng1h, lh)
        nbl = m.fma(ng1h, ll, m.fma(ng1h, lh, bh))
        axe = m.minimum(ax, scalar(_exponent_cap(g1)))   # = ax wherever exp(-g1*ax) is not 0 or inf
        ah = m.mul(g1h, axe)
        nah = m.mul(ng1h, axe)
        nae = m.fma(ng1h, axe, ah)
        if has_g1l:
            nae = m.fma(ng1l, axe, nae)
            nbl = m.fma(ng1l, lh, nbl)
        nsh, nse = _two_sum(m, nah, nbh)
        nslo = m.add(nse, m.add(nae, nbl))
        eb = m.exp(nbh, ftz=False)
        # 6. -(1 + g*e*(ax + L)) = t1 + t2.
        ssh, ssl = _two_sum(m, ax, lh)
        ssl = m.add(ssl, ll)
        ge = m.mul(g, e)
        nge = m.mul(ng, e)
        ngel = m.fma(ng, el, m.fma(ng, e, ge))
        t1 = m.fma(nge, ssh, scalar(-1.0))
        t2 = m.fma(ngel, ssh, m.mul(nge, ssl))
        # 7. Coefficients per form (selector and scale), folded into the bracket before the power.
        scale = m.mul(w_in, d_in) if w_in is not None else d_in
        if inputs.reduction == "mean" and n != 1:
            scale = m.div(scale, scalar(_int_to_float32(n)), mode="0ulp")
        nonneg = m.ge(x, zero)
        c0 = m.mul(m.mul(a, scale), m.sub(one, t))        # multiplies A(x)
        c1 = m.mul(m.mul(noma, scale), t)                 # multiplies A(-x)
        cs = m.select(nonneg, c0, c1)                     # ... of the small-base form
        cb = m.select(nonneg, c1, c0)                     # ... of the big-base form
        inner = m.fma(q1, nslo, m.mul(ng_half, dtail2))
        if has_g1l:
            inner = m.add(inner, ng1l)
        kcs = m.fma(cs, q1, m.mul(cs, inner))
        arg = m.minimum(m.maximum(nsh, scalar(SHIFT_RANGE[0])), scalar(SHIFT_RANGE[1]))
        kcs = m.mul(kcs, m.exp(m.sub(nsh, arg), ftz=False))
        vs = m.select(m.eq(cs, zero), zero, m.mul(kcs, m.exp(arg, ftz=False)))
        kcb = m.fma(cb, t1, m.mul(cb, m.fma(t1, nbl, t2)))
        out = store_output(m, m.add(vs, m.mul(kcb, eb)), inputs.pred.dtype, RNE)
    return out.reshape(inputs.shape)
