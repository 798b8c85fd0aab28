"""A candidate SigmoidFocalLossGrad recipe built from NPU primitives only (issue 6).

fp32 compute, fp16/fp32 in and out like the production kernel; contract
validation, host scalars and the store are shared with it (:mod:`common`).
Everything is expressed through ``ax = |x|`` and ``e = Exp(-ax)``: with
``big = 1/(1+e)`` and ``small = e/(1+e)`` (so ``p, q`` = ``big, small`` for
``x >= 0`` and ``small, big`` for ``x < 0``) and ``L = log1p(e)``::

    ln(big) = -L          ln(small) = -(ax + L)

the two focal terms needed per element are (spec section 2, ``A``)::

    A_small = -big * (g1 + g*D/e) * exp(-(g1*ax + g*L))   # the base of the power is `small`
    A_big   = -big^g * (g*small*(ax + L) + big)            # the base of the power is `big`

with ``D = log1p(e) - e`` and ``g1 = g + 1``; then ``A(x) = x>=0 ? A_small :
A_big`` and ``A(-x) = x>=0 ? A_big : A_small`` (``B(x) = -A(-x)``).

Ingredients (each a handful of Mul/Add/Fma/Div/Exp ops):

* **log1p without Ln**: ``z = e/(2+e)`` (``h = 1/(2+e)`` by Div0ulp, ``z = e*h``),
  ``w = z*z`` and ``D/e = -z + w*h*T(w)``, ``T(w) = 2/3 + 2w/5 + ... + 2w^6/15``
  (the atanh series ``log1p(e) = 2 atanh(z)`` with its first term folded:
  ``2z - e = -e*z``).  ``w <= 1/9``; the tail ``w*h*T`` is at most 1/6 of
  ``z``, so ``D`` (and the ``gamma = -1`` bracket ``-D``) has no cancellation.
  ``L = e + D`` is kept as a double-float ``(Lh, Ll)`` (Fast2Sum, ``e >= |D|``).
* **p and q without 1 - p**: ``d = 1 + e`` with its exact error ``dlo = e - (d - 1)``;
  ``big = r - r*(dlo*r)`` with ``r = 1/d`` (Div0ulp), the first-order
  correction for the rounded ``1 + e``; ``small`` is never formed: it enters
  only through ``small^g * e`` (an Exp, below) and ``g*e*big`` (the x < 0 bracket).
* **powers as exp of a double-float exponent**: ``g*L`` as ``hi + lo``
  (``lo = fma(g, Lh, -hi) + g*Ll``); ``big^g = E*(1 - lo)`` with ``E = Exp(-hi)``
  (one fma).  ``small^g * e = exp(-(g1*ax + g*L))``: ``g1*ax`` as hi+lo by fma
  (``g1 = g + 1`` split on the host into two float32s, so a non-representable
  ``g + 1`` costs nothing), TwoSum with ``g*L``, ``Exp`` of the hi part and the
  low part applied by one fma.  Folding the ``e`` of the bracket into the
  exponent keeps ``small^g`` (which overflows for gamma < 0) and the tiny
  bracket from meeting as ``inf * 0``.
* **cancellation-free brackets**: ``g*p*ln(p) - q`` for ``x >= 0`` is
  ``-big*e*(g1 + g*D/e)`` (the roots of A for ``-1.4427 < gamma < -1`` lie here;
  for ``gamma = -1`` it is ``big*e*(z - w*h*T)``, no cancellation at all);
  for ``x < 0`` it is ``-(g*small*(ax + L) + big)`` by one fma (the roots for
  ``gamma < -1.4427`` lie here, cancellation is then intrinsic).
* **no NaN through the selector**: each term is kept by a select when its
  coefficient ``alpha*(1-t)`` / ``-(1-alpha)*t`` is nonzero (a structural zero
  stays an exact zero, an inf in the unselected term cannot leak).
* **scaling**: ``scale = weight*dout`` (``dout`` alone when weight is absent)
  and, for mean, ``scale = Div0ulp(scale, float32(count))`` (not the host's
  rounded ``1/count``); then one final ``raw * scale``, so ``raw`` is rounded
  only once more and no product of ``raw`` with a small factor is formed
  before a large one.

Known limits (measured, see the tests and the issue-6 report): the
``(1 - alpha)`` coefficient is the host's float32 rounding (exact on the
alpha grid); near the roots of ``A`` for ``gamma < -1`` the error is
unbounded in ulps (intrinsic cancellation of fp32 inputs to the bracket);
``raw`` is formed before the scale, so a subnormal ``raw`` with a scale
above 1 keeps only the subnormal's absolute accuracy.
"""

from __future__ import annotations

import numpy as np

from precision.formats import RNE
from precision.implementations.common import (
    MAX_FLOAT_FP32,
    _int_to_float32,
    prepare_host_scalars,
    resolve_machine,
    store_output,
    validate_inputs,
    validate_mean_count,
)

__all__ = ["candidate", "LOG1P_TAIL_COEFFS"]

#: Horner coefficients (highest order first) of T(w) = sum_{k>=1} 2 w^(k-1)/(2k+1), k = 1..7.
LOG1P_TAIL_COEFFS = tuple(np.float32(2.0 / (2 * k + 1)) for k in range(7, 0, -1))


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
    g, a = scalar(host.g), scalar(host.a)
    # host: g1 = g + 1 as an unevaluated float32 pair (exact), -(1 - a) rounded.
    g1h = np.float32(host.g1)
    g1l = np.float32(float(host.g) + 1.0 - float(g1h))
    g1h, g1l = scalar(g1h), scalar(g1l)
    noma = scalar(-host.oma)
    ng = scalar(-host.g)
    ng1h, ng1l = scalar(-g1h), scalar(-g1l)
    max_float = scalar(MAX_FLOAT_FP32)

    x = m.asarray(inputs.pred.reshape(-1))
    t = m.from_int32(inputs.target.reshape(-1))
    d_in = m.asarray(inputs.dout.reshape(-1))
    w_in = m.asarray(inputs.weight.reshape(-1)) if inputs.weight is not None else None

    with np.errstate(all="ignore"):
        ax = m.abs(x)
        nax = m.neg(ax)
        e = m.exp(nax, ftz=False)
        # e's own rounding: e_true = e*(1 + rr), rr = -ax - Ln(e) (exact difference).
        rr = m.sub(nax, m.ln(e, ftz=False))
        rr = m.select(m.gt(e, zero), rr, zero)             # e = 0: no correction (Ln(0) = -inf)
        el = m.mul(e, rr)
        # log1p(e) - e by the folded atanh series.
        h = m.div(one, m.add(two, e), mode="0ulp")
        z = m.mul(e, h)
        wz = m.mul(z, z)
        tail = scalar(LOG1P_TAIL_COEFFS[0])
        for c in LOG1P_TAIL_COEFFS[1:]:
            tail = m.fma(tail, wz, scalar(c))
        de = m.fma(m.mul(wz, h), tail, m.neg(z))          # D / e
        dd = m.mul(e, de)                                  # D = log1p(e) - e
        # big = 1/(1+e), corrected for the roundings of e and 1 + e.
        d1 = m.add(one, e)
        dlo = m.add(m.sub(e, m.sub(d1, one)), el)
        r = m.div(one, d1, mode="0ulp")
        corr = m.mul(dlo, r)
        big = m.fma(m.neg(r), corr, r)
        lh = m.add(e, dd)                                  # L = lh + ll
        ll = m.fma(el, r, m.add(m.sub(e, lh), dd))
        # -g*L as a double-float.
        nglh = m.mul(ng, lh)
        ngll = m.fma(ng, ll, m.fma(ng, lh, m.neg(nglh)))
        # big^g = exp(-g L).
        e1 = m.exp(nglh, ftz=False)
        pbig = m.fma(e1, ngll, e1)
        # small^g * e = exp(-(g1*ax + g*L)); the low-part fma only where Exp is finite
        # (inf * 0 would be NaN where the exact value overflows).
        nah = m.mul(ng1h, ax)
        nal = m.fma(ng1l, ax, m.fma(ng1h, ax, m.neg(nah)))
        nsh, nse = _two_sum(m, nah, nglh)
        nlo = m.add(m.add(nse, nal), ngll)
        e2 = m.exp(nsh, ftz=False)
        psmall_e = m.select(m.le(e2, max_float), m.fma(e2, nlo, e2), e2)
        # The two focal terms.
        kn = m.add(m.fma(g, de, g1h), g1l)                 # g1 + g*D/e
        a_small = m.neg(m.mul(m.mul(big, kn), psmall_e))
        # 1 + g*e*(ax + L) with g*e and ax + L as double-floats.
        ssh, ssl = _two_sum(m, ax, lh)
        ssl = m.add(ssl, ll)
        geh = m.mul(g, e)
        gel = m.fma(g, el, m.fma(g, e, m.neg(geh)))
        bb = m.add(m.fma(geh, ssh, one), m.fma(gel, ssh, m.mul(geh, ssl)))
        a_big = m.neg(m.mul(m.mul(big, bb), pbig))
        nonneg = m.ge(x, zero)
        a_x = m.select(nonneg, a_small, a_big)             # A(x)
        a_mx = m.select(nonneg, a_big, a_small)            # A(-x) = -B(x)
        # Selector: keep a term only where its coefficient is nonzero.
        c0 = m.mul(a, m.sub(one, t))
        c1 = m.mul(noma, t)
        v0 = m.select(m.eq(c0, zero), zero, m.mul(c0, a_x))
        v1 = m.select(m.eq(c1, zero), zero, m.mul(c1, a_mx))
        raw = m.add(v0, v1)
        # Scale formed first, applied once.
        scale = m.mul(w_in, d_in) if w_in is not None else d_in
        if inputs.reduction == "mean" and n != 1:
            scale = m.div(scale, scalar(_int_to_float32(n)), mode="0ulp")
        scaled = m.mul(raw, scale)
        out = store_output(m, scaled, inputs.pred.dtype, RNE)
    return out.reshape(inputs.shape)
