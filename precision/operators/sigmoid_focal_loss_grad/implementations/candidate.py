"""A candidate SigmoidFocalLossGrad recipe built from NPU primitives only (issue 6).

fp32 compute, fp16/fp32 in and out like the production kernel; contract
validation, host scalars and the store are shared with it (:mod:`common`).
Ops used: Exp, Ln, Div (0ulp mode), Mul, Add/Sub, fused multiply-add, Abs,
Neg, Min, Max, compares and selects (counts: precision.operators.sigmoid_focal_loss_grad.opcount).

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
   recovered as ``el/e = ln(2^n e_true) - Ln(2^n e)`` with ``n = round(ax/ln2)``
   (adding and subtracting 1.5*2^23), ``2^n = fma(fma(n*n, 1/6, 5/6), n, 1)``
   (constants rounded to float32; exact for n = 0..3), ``2^n e`` exact and ``n ln2 - ax`` exact in one fma
   with ``ln2 = LN2_HI + LN2_LO``.  Then ``|ln(2^n e)| <= ln(2)/2``, so the Ln
   result's own rounding, which bounds what is recovered, is at most u/4;
   for n > 3 (|x| > 2.43) ``el = 0`` (there the raw Exp is as good and ``e``
   matters less).  Near the roots of A this is the error that remains: a
   relative error eps in ``e`` changes the bracket by about ``C * eps``
   (C = its cancellation factor).  A fixed scale (4 on [0.6875, 2.5), 1
   below) left up to u/2 (u above |x| = 2.39): at gamma = -3, C = 2.65 that
   gave 4.28 ulp (pred 0x1.82895ep-1, target 1).
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

from dataclasses import dataclass

from precision.exact.formats import RNE
from precision.operators.sigmoid_focal_loss_grad.implementations.common import (
    _int_to_float32,
    load_operands,
    prepare_host_scalars,
    resolve_machine,
    store_output,
    validate_inputs,
    validate_mean_count,
)
from precision.recipes.steps import Recipe, RecipeCall, Step, sum_cond

__all__ = ["candidate", "LOG1P_TAIL_COEFFS", "SHIFT_RANGE", "LN_SCALE_MAX", "CANDIDATE_RECIPE",
           "candidate_constants", "candidate_call"]

#: Horner coefficients (highest order first) of T(w) = sum_{k>=1} 2 w^(k-1)/(2k+1), k = 1..7.
LOG1P_TAIL_COEFFS = tuple(np.float32(2.0 / (2 * k + 1)) for k in range(7, 0, -1))
#: Exp argument range of the small-base power: exp(-80) is normal, exp(88) < FLT_MAX.
SHIFT_RANGE = (np.float32(-80.0), np.float32(88.0))
#: ln 2 as an unevaluated float32 pair (n * LN2_HI - |x| is exact for the n used, n <= LN_SCALE_MAX).
LN2_HI = np.float32(mpmath.log(2))
LN2_LO = np.float32(mpmath.log(2) - mpmath.mpf(float(LN2_HI)))
#: The largest n of the scale 2^n of e read by Ln: 2^n = (n^3 + 5n)/6 + 1 is exact only for n = 0..3.
LN_SCALE_MAX = 3
#: Adding and subtracting 1.5 * 2^23 rounds a float32 in [0, 2^22) to an integer.
ROUND_MAGIC = np.float32(1.5 * 2 ** 23)


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


@dataclass(frozen=True)
class CandidateConstants:
    """The candidate's host values on the machine (compute format)."""

    one: np.ndarray
    two: np.ndarray
    zero: np.ndarray
    m_two: np.ndarray
    m_one: np.ndarray
    inv_ln2: np.ndarray
    round_magic: np.ndarray
    sixth: np.ndarray
    five_sixths: np.ndarray
    ln2_hi: np.ndarray
    ln2_lo: np.ndarray
    n_max: np.ndarray
    tail: tuple
    g: np.ndarray
    ng: np.ndarray
    ng_half: np.ndarray
    g1h: np.ndarray
    ng1h: np.ndarray
    ng1l: np.ndarray
    has_g1l: bool
    cap: np.ndarray
    a: np.ndarray
    noma: np.ndarray
    shift_lo: np.ndarray
    shift_hi: np.ndarray
    count32: np.ndarray | None
    pred_dtype: np.dtype
    host: object


def candidate_constants(machine, inputs, count: int) -> CandidateConstants:
    """The candidate's host values for one evaluation (``count``: the mean's N*C)."""
    m = machine
    host = prepare_host_scalars(inputs.alpha, inputs.gamma, inputs.reduction, count)

    def scalar(v):
        return m.asarray(np.float32(v))

    # host: g1 = g + 1 as an unevaluated float32 pair (exact); the low part is
    # nonzero only for |gamma| < 2^-23-ish or gamma beyond 2^24, and its ops
    # are emitted only then.
    g1 = float(host.g) + 1.0                              # exact for |gamma| < 2^53
    g1h = np.float32(host.g1)
    g1l = np.float32(g1 - float(g1h))
    return CandidateConstants(
        one=scalar(1.0), two=scalar(2.0), zero=scalar(0.0), m_two=scalar(-2.0), m_one=scalar(-1.0),
        inv_ln2=scalar(1.0 / math.log(2.0)), round_magic=scalar(ROUND_MAGIC), sixth=scalar(1.0 / 6.0),
        five_sixths=scalar(5.0 / 6.0), ln2_hi=scalar(LN2_HI), ln2_lo=scalar(LN2_LO), n_max=scalar(LN_SCALE_MAX),
        tail=tuple(scalar(c) for c in LOG1P_TAIL_COEFFS),
        g=scalar(host.g), ng=scalar(-host.g), ng_half=scalar(-0.5 * host.g),
        g1h=scalar(g1h), ng1h=scalar(-g1h), ng1l=scalar(-g1l), has_g1l=bool(g1l != 0),
        cap=scalar(_exponent_cap(g1)), a=scalar(host.a), noma=scalar(-host.oma),
        shift_lo=scalar(SHIFT_RANGE[0]), shift_hi=scalar(SHIFT_RANGE[1]),
        count32=scalar(_int_to_float32(count)) if (inputs.reduction == "mean" and count != 1) else None,
        pred_dtype=np.dtype(inputs.pred.dtype), host=host,
    )


def _two_sum(m, a, b):
    """Knuth's TwoSum: s + err == a + b exactly (6 ops)."""
    s = m.add(a, b)
    bb = m.sub(s, a)
    err = m.add(m.sub(a, m.sub(s, bb)), m.sub(b, bb))
    return s, err


def _horner(i):
    """Exact partial Horner value of T (coefficients 2/(2k+1) exactly) after step ``i``."""
    def exact(Q):
        acc = Q.ctx.mpf(2) / 15
        for k in range(6, 6 - i, -1):
            acc = acc * Q.z ** 2 + Q.ctx.mpf(2) / (2 * k + 1)
        return acc
    return exact


def _binary(op):
    return lambda m, c, k, a, b: getattr(m, op)(a, b)


def _fma(m, c, k, a, b, d):
    return m.fma(a, b, d)


def _two_sum_rows(prefix, a, b, exact_s, formula):
    """TwoSum of steps a, b: ``{prefix}`` the sum, ``{prefix}_err`` its exact rounding error (6 ops)."""
    return [
        Step(prefix, (a, b), _binary("add"), "add", exact=exact_s, formula=formula),
        Step(f"{prefix}_bb", (prefix, a), _binary("sub"), "sub", formula=f"{prefix} - {a}"),
        Step(f"{prefix}_sb", (prefix, f"{prefix}_bb"), _binary("sub"), "sub", formula=f"{prefix} - {prefix}_bb"),
        Step(f"{prefix}_ea", (a, f"{prefix}_sb"), _binary("sub"), "sub", formula=f"{a} - {prefix}_sb"),
        Step(f"{prefix}_eb", (b, f"{prefix}_bb"), _binary("sub"), "sub", formula=f"{b} - {prefix}_bb"),
        Step(f"{prefix}_err", (f"{prefix}_ea", f"{prefix}_eb"), _binary("add"), "add",
             formula=f"TwoSum error of {formula}"),
    ]


def _steps() -> list:
    S = Step
    rows = [
        # 1. e = Exp(-ax) and its error el
        S("ax", ("x",), lambda m, c, k, x: m.abs(x), "exact", exact=lambda Q: Q.ax, formula="|x|"),
        S("nax", ("ax",), lambda m, c, k, a: m.neg(a), "exact", exact=lambda Q: -Q.ax, formula="-|x|"),
        S("e", ("nax",), lambda m, c, k, y: m.exp(y, ftz=False), "exp", exact=lambda Q: Q.e, formula="Exp(-|x|)"),
        S("nq", ("ax",), lambda m, c, k, a: m.fma(a, c.inv_ln2, c.round_magic), "fma",
          formula="fma(|x|, 1/ln2, 1.5*2^23)"),
        S("n", ("nq",), lambda m, c, k, v: m.sub(v, c.round_magic), "sub", formula="round(|x| / ln2)"),
        S("nn", ("n",), lambda m, c, k, v: m.mul(v, v), "mul", formula="n * n"),
        S("kp", ("nn",), lambda m, c, k, v: m.fma(v, c.sixth, c.five_sixths), "fma", formula="fma(nn, 1/6, 5/6)"),
        S("k", ("kp", "n"), lambda m, c, k, p, v: m.fma(p, v, c.one), "fma", formula="2^n = fma(kp, n, 1)"),
        S("nax_lnk", ("n", "nax"), lambda m, c, k, v, a: m.fma(v, c.ln2_hi, a), "fma",
          formula="fma(n, LN2_HI, -|x|)"),
        S("ek", ("e", "k"), _binary("mul"), "mul", formula="e * 2^n"),
        S("ln_ek", ("ek",), lambda m, c, k, v: m.ln(v, ftz=False), "ln", formula="Ln(2^n * e)"),
        S("rel0", ("nax_lnk", "ln_ek"), _binary("sub"), "sub", formula="nax_lnk - ln_ek"),
        S("rel", ("n", "rel0"), lambda m, c, k, v, r: m.fma(v, c.ln2_lo, r), "fma",
          formula="ln(2^n e_true) - Ln(2^n e)"),
        S("el_small", ("n",), lambda m, c, k, v: m.le(v, c.n_max), "bool", formula="n <= 3", fmt="bool"),
        S("el_rel", ("el_small", "rel"), lambda m, c, k, s, r: m.select(s, r, c.zero), "select",
          formula="n <= 3 ? rel : 0", uses=lambda s, r: [None, s]),
        S("el", ("e", "el_rel"), _binary("mul"), "mul", formula="e * el_rel (e's rounding error)"),
        # 2. z = e / (2 + e) = zh + zl
        S("e2", ("e",), lambda m, c, k, e: m.add(c.two, e), "add", exact=lambda Q: 2 + Q.e, formula="2 + e",
          cond=sum_cond(2.0)),
        S("zh", ("e", "e2"), lambda m, c, k, e, e2: m.div(e, e2, mode="0ulp"), "div", exact=lambda Q: Q.z,
          formula="Div0ulp(e, 2 + e)"),
        S("nzh", ("zh",), lambda m, c, k, z: m.neg(z), "exact", exact=lambda Q: -Q.z, formula="-zh"),
        S("resid0", ("zh", "e"), lambda m, c, k, z, e: m.fma(c.m_two, z, e), "fma", formula="fma(-2, zh, e)"),
        S("resid", ("nzh", "e", "resid0"), _fma, "fma", formula="fma(-zh, e, resid0)"),
        S("omz", ("zh",), lambda m, c, k, z: m.sub(c.one, z), "sub", exact=lambda Q: 1 - Q.z, formula="1 - zh",
          cond=sum_cond(1.0)),
        S("zl2_0", ("omz", "el", "resid"), _fma, "fma", formula="fma(omz, el, resid)"),
        S("zl2", ("zl2_0", "omz"), _binary("mul"), "mul", formula="2 zl"),
        # 3. L = log1p(e) = lh + ll by the atanh series
        S("zz", ("zh",), lambda m, c, k, z: m.mul(z, z), "mul", exact=lambda Q: Q.z ** 2, formula="zh * zh"),
        S("tail1", ("zz",), lambda m, c, k, w: m.fma(c.tail[0], w, c.tail[1]), "fma", exact=_horner(1),
          formula="fma(T7, zz, T6)"),
    ]
    for i in range(2, len(LOG1P_TAIL_COEFFS)):
        rows.append(S(f"tail{i}", (f"tail{i - 1}", "zz"), lambda m, c, k, t, w, i=i: m.fma(t, w, c.tail[i]), "fma",
                      exact=_horner(i), formula=f"fma(tail{i - 1}, zz, T{7 - i})"))
    last = f"tail{len(LOG1P_TAIL_COEFFS) - 1}"
    rows += [
        S("zw", ("zh", "zz"), _binary("mul"), "mul", exact=lambda Q: Q.z ** 3, formula="zh * zz"),
        S("small", ("zw", last, "zl2"), _fma, "fma", formula="L - 2 zh"),
        S("z2", ("zh",), lambda m, c, k, z: m.add(z, z), "add", exact=lambda Q: 2 * Q.z, formula="zh + zh"),
        S("lh", ("z2", "small"), _binary("add"), "add", exact=lambda Q: Q.L, formula="z2 + small"),
        S("lh_z2", ("lh", "z2"), _binary("sub"), "sub", formula="lh - z2"),
        S("ll", ("small", "lh_z2"), _binary("sub"), "sub", formula="small - (lh - z2)"),
        # 4. D/e
        S("zz_omz", ("zz", "omz"), _binary("mul"), "mul", exact=lambda Q: Q.z ** 2 * (1 - Q.z), formula="zz * omz"),
        S("nzl2", ("zl2",), lambda m, c, k, v: m.neg(v), "exact", formula="-zl2"),
        S("dtail2", ("zz_omz", last, "nzl2"), _fma, "fma", formula="2 (D/e + zh)"),
        S("q1", ("zh",), lambda m, c, k, z: m.fma(c.g, z, c.ng1h), "fma", formula="g * zh - g1"),
        # 5. exponents
        S("bh", ("lh",), lambda m, c, k, v: m.mul(c.g1h, v), "mul", exact=lambda Q: Q.g1 * Q.L, formula="g1 * lh"),
        S("nbh", ("lh",), lambda m, c, k, v: m.mul(c.ng1h, v), "mul", exact=lambda Q: -Q.g1 * Q.L,
          formula="-g1 * lh"),
        S("nbl0", ("lh", "bh"), lambda m, c, k, v, b: m.fma(c.ng1h, v, b), "fma", formula="fma(-g1, lh, bh)"),
        S("nbl1", ("ll", "nbl0"), lambda m, c, k, v, b: m.fma(c.ng1h, v, b), "fma", formula="fma(-g1, ll, nbl0)"),
        S("axe", ("ax",), lambda m, c, k, a: m.minimum(a, c.cap), "clamp", exact=lambda Q: Q.ax,
          formula="min(|x|, cap)"),
        S("ah", ("axe",), lambda m, c, k, a: m.mul(c.g1h, a), "mul", exact=lambda Q: Q.g1 * Q.ax, formula="g1 * axe"),
        S("nah", ("axe",), lambda m, c, k, a: m.mul(c.ng1h, a), "mul", exact=lambda Q: -Q.g1 * Q.ax,
          formula="-g1 * axe"),
        S("nae0", ("axe", "ah"), lambda m, c, k, a, b: m.fma(c.ng1h, a, b), "fma", formula="fma(-g1, axe, ah)"),
        S("nae", ("axe", "nae0"), lambda m, c, k, a, b: m.fma(c.ng1l, a, b) if c.has_g1l else b, "fma",
          formula="fma(-g1_lo, axe, nae0) when g1 has a low part"),
        S("nbl", ("lh", "nbl1"), lambda m, c, k, a, b: m.fma(c.ng1l, a, b) if c.has_g1l else b, "fma",
          formula="fma(-g1_lo, lh, nbl1) when g1 has a low part"),
    ]
    rows += _two_sum_rows("nsh", "nah", "nbh", lambda Q: -Q.g1 * (Q.ax + Q.L), "nah + nbh")
    rows += [
        S("nslo0", ("nae", "nbl"), _binary("add"), "add", formula="nae + nbl"),
        S("nslo", ("nsh_err", "nslo0"), _binary("add"), "add", formula="low part of -g1 (|x| + L)"),
        S("eb", ("nbh",), lambda m, c, k, y: m.exp(y, ftz=False), "exp",
          exact=lambda Q: Q.ctx.exp(Q.rn(-Q.g1 * Q.L)), formula="Exp(nbh)"),
    ]
    rows += _two_sum_rows("ssh", "ax", "lh", lambda Q: Q.ax + Q.L, "ax + lh")
    rows += [
        S("ssl", ("ssh_err", "ll"), _binary("add"), "add", formula="low part of |x| + L"),
        S("ge", ("e",), lambda m, c, k, e: m.mul(c.g, e), "mul", exact=lambda Q: Q.g * Q.e, formula="g * e"),
        S("nge", ("e",), lambda m, c, k, e: m.mul(c.ng, e), "mul", exact=lambda Q: -Q.g * Q.e, formula="-g * e"),
        S("ngel0", ("e", "ge"), lambda m, c, k, e, b: m.fma(c.ng, e, b), "fma", formula="fma(-g, e, ge)"),
        S("ngel", ("el", "ngel0"), lambda m, c, k, e, b: m.fma(c.ng, e, b), "fma", formula="fma(-g, el, ngel0)"),
        # 6. bracket -(1 + g e (ax + L)) = t1 + t2
        S("t1", ("nge", "ssh"), lambda m, c, k, a, b: m.fma(a, b, c.m_one), "fma",
          exact=lambda Q: -(1 + Q.g * Q.e * (Q.ax + Q.L)), formula="fma(nge, ssh, -1)",
          cond=lambda c, v, a, b: np.maximum(1.0, np.abs(a * b)) / np.abs(v)),  # fma(a, b, -1)
        S("nge_ssl", ("nge", "ssl"), _binary("mul"), "mul", formula="nge * ssl"),
        S("t2", ("ngel", "ssh", "nge_ssl"), _fma, "fma", formula="fma(ngel, ssh, nge * ssl)"),
        # 7. coefficients, the powers, the sum
        S("scale", ("w", "d"), lambda m, c, k, w, d: d if w is None else m.mul(w, d), "mul",
          exact=lambda Q: Q.w * Q.d, formula="weight * dout"),
        S("scale_n", ("scale",), lambda m, c, k, s: s if c.count32 is None else m.div(s, c.count32, mode="0ulp"),
          "div", exact=lambda Q: Q.w * Q.d / Q.n, formula="Div0ulp(scale, float32(count)) (mean)"),
        S("nonneg", ("x",), lambda m, c, k, x: m.ge(x, c.zero), "bool", formula="x >= 0", fmt="bool"),
        S("a_scale", ("scale_n",), lambda m, c, k, s: m.mul(c.a, s), "mul", exact=lambda Q: Q.a * Q.w * Q.d / Q.n,
          formula="a * scale"),
        S("omt", ("t",), lambda m, c, k, t: m.sub(c.one, t), "sub", exact=lambda Q: 1 - Q.t, formula="1 - t",
          cond=sum_cond(1.0)),
        S("c0", ("a_scale", "omt"), _binary("mul"), "mul", exact=lambda Q: Q.c0, formula="a * scale * (1 - t)"),
        S("noma_scale", ("scale_n",), lambda m, c, k, s: m.mul(c.noma, s), "mul",
          exact=lambda Q: (Q.a - 1) * Q.w * Q.d / Q.n, formula="-(1 - a) * scale"),
        S("c1", ("noma_scale", "t"), _binary("mul"), "mul", exact=lambda Q: Q.c1, formula="-(1 - a) * scale * t"),
        S("cs", ("nonneg", "c0", "c1"), lambda m, c, k, s, a, b: m.select(s, a, b), "select",
          exact=lambda Q: Q.c0 if Q.x >= 0 else Q.c1, formula="x >= 0 ? c0 : c1"),
        S("cb", ("nonneg", "c1", "c0"), lambda m, c, k, s, a, b: m.select(s, a, b), "select",
          exact=lambda Q: Q.c1 if Q.x >= 0 else Q.c0, formula="x >= 0 ? c1 : c0"),
        S("dtail_h", ("dtail2",), lambda m, c, k, v: m.mul(c.ng_half, v), "mul", formula="-(g/2) * dtail2"),
        S("inner0", ("q1", "nslo", "dtail_h"), _fma, "fma", formula="fma(q1, nslo, dtail_h)"),
        S("inner", ("inner0",), lambda m, c, k, v: m.add(v, c.ng1l) if c.has_g1l else v, "add",
          formula="inner0 - g1_lo"),
        S("cs_inner", ("cs", "inner"), _binary("mul"), "mul", formula="cs * inner"),
        S("kcs0", ("cs", "q1", "cs_inner"), _fma, "fma", formula="fma(cs, q1, cs * inner)"),
        S("arg", ("nsh",), lambda m, c, k, v: m.minimum(m.maximum(v, c.shift_lo), c.shift_hi), "clamp",
          formula="clamp(nsh, -80, 88)"),
        S("shift", ("nsh", "arg"), _binary("sub"), "sub", formula="nsh - arg"),
        S("eshift", ("shift",), lambda m, c, k, y: m.exp(y, ftz=False), "exp", formula="Exp(nsh - arg)"),
        S("kcs", ("kcs0", "eshift"), _binary("mul"), "mul", formula="kcs0 * Exp(nsh - arg)"),
        S("cs_zero", ("cs",), lambda m, c, k, v: m.eq(v, c.zero), "bool", formula="cs == 0", fmt="bool"),
        S("earg", ("arg",), lambda m, c, k, y: m.exp(y, ftz=False), "exp", formula="Exp(arg)"),
        S("kcs_e", ("kcs", "earg"), _binary("mul"), "mul", exact=lambda Q: Q.vs, formula="kcs * Exp(arg)"),
        S("vs", ("cs_zero", "kcs_e"), lambda m, c, k, s, v: m.select(s, c.zero, v), "select",
          exact=lambda Q: Q.vs, formula="cs == 0 ? 0 : kcs * Exp(arg)", uses=lambda s, v: [None, ~s]),
        S("kcb0", ("t1", "nbl", "t2"), _fma, "fma", formula="fma(t1, nbl, t2)"),
        S("cb_kcb0", ("cb", "kcb0"), _binary("mul"), "mul", formula="cb * kcb0"),
        S("kcb", ("cb", "t1", "cb_kcb0"), _fma, "fma", formula="fma(cb, t1, cb * kcb0)"),
        S("vb", ("kcb", "eb"), _binary("mul"), "mul", exact=lambda Q: Q.vb, formula="kcb * eb"),
        S("total", ("vs", "vb"), _binary("add"), "add", exact=lambda Q: Q.grad, formula="vs + vb"),
        S("out", ("total",), lambda m, c, k, v: store_output(m, v, c.pred_dtype, RNE), "store",
          exact=lambda Q: Q.grad, formula="store RNE", fmt="output"),
    ]
    return rows


#: The candidate recipe (module docstring) as named steps.  Error-compensation
#: terms (``el``, ``resid``, ``zl2``, ``ll``, TwoSum errors, low parts) have no
#: exact counterpart (``exact=None``).
CANDIDATE_RECIPE = Recipe("candidate", _steps())


def candidate_call() -> RecipeCall:
    """The :class:`~precision.recipes.steps.RecipeCall` of ``candidate``."""
    return RecipeCall(CANDIDATE_RECIPE, CANDIDATE_RECIPE.config(), candidate_constants)


def candidate(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="mean", *,
              count=None):
    """SigmoidFocalLossGrad by the candidate recipe (see the module docstring).

    Parameters and return value as :func:`precision.operators.sigmoid_focal_loss_grad.implementations.kernel.kernel`
    (no guard switches).  Computes in fp32 (the machine's compute format).
    The op order is the step table :data:`CANDIDATE_RECIPE`.
    """
    inputs = validate_inputs(pred, target, dout, weight, alpha, gamma, reduction)
    n = validate_mean_count(count, inputs)
    m = resolve_machine(machine)
    consts = candidate_constants(m, inputs, n)
    out = CANDIDATE_RECIPE.run(CANDIDATE_RECIPE.plan(), m, consts, load_operands(m, inputs))
    return out.reshape(inputs.shape)
