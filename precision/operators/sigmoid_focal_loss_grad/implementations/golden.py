"""The ops-nn test golden (``tests/assets/golden.py``): PyTorch op order in float32.

Spec section 5.  The golden is a chain of float32 PyTorch ops; the Python
scalars it mixes in (``-alpha``, ``gamma``, ``gamma + 1.0``, ``gamma*alpha``,
``gamma*(alpha-1.0)``, ``1.0-alpha``, ``1.0/(N*C)``) are Python doubles formed
in double arithmetic and rounded to float32 (RNE) when a float32 tensor op
applies them (:class:`GoldenScalars`).  Op order, every op rounding in the
compute format:

    probs  = Div0ulp(1, Exp(-x) + 1)                 # torch.sigmoid on CPU
    nadd   = 1 - probs
    pc     = max(probs, MIN_NORMAL)   qc = max(nadd, MIN_NORMAL)
    lp     = Ln(pc)                   lq = Ln(qc)
    pow_y  = Exp(g1 * lq)             dpos_front = (-a) * pow_y
    pow_v  = Exp(g * lq)              dpos_back  = ((pow_v * lp) * probs) * ga
    dpos   = dpos_front + dpos_back
    pow_n  = Exp(g * lp)              dneg_front = ((pow_n * nadd) * lq) * gam1
    pow_q  = Exp(g1 * lp)             dneg_back  = oma * pow_q
    dneg   = dneg_front + dneg_back
    raw    = dpos * (1 - t) + dneg * t
    grad   = raw [* weight] * dout [* coef]          # no multiply when absent / not mean
    store  = cast to pred dtype, RNE                 # tensor.to(float16)

Exp and Ln are the machine's no-flush modes (``ftz=False``); on the ``ieee``
model they are correctly rounded, which is what a float64-backed CPU
reference approaches (PyTorch's own float32 exp/log are within about 1 ulp).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from precision.exact.formats import RNE
from precision.operators.sigmoid_focal_loss_grad.implementations.common import (
    MIN_NORMAL_FP32,
    load_operands,
    resolve_machine,
    store_output,
    validate_inputs,
    validate_mean_count,
)
from precision.recipes.steps import Recipe, RecipeCall, Step, sum_cond

__all__ = ["GoldenScalars", "golden_scalars", "golden", "GOLDEN_RECIPE", "golden_constants", "golden_call"]


@dataclass(frozen=True)
class GoldenScalars:
    """The golden's Python-side scalars, formed in double and rounded to float32.

    Attributes
    ----------
    neg_a, g, g1, ga, gam1, oma : numpy.float32
        ``-alpha``, ``gamma``, ``gamma+1.0``, ``gamma*alpha``,
        ``gamma*(alpha-1.0)``, ``1.0-alpha``: each a double expression of the
        float32 attribute values, rounded once to float32.
    coef : numpy.float32 or None
        ``1.0/(N*C)`` in double rounded to float32 for mean; None otherwise
        (no multiply).
    """

    neg_a: np.float32
    g: np.float32
    g1: np.float32
    ga: np.float32
    gam1: np.float32
    oma: np.float32
    coef: np.float32 | None


def golden_scalars(alpha: np.float32, gamma: np.float32, reduction: str, count: int) -> GoldenScalars:
    """Form the golden's scalars in double, then round each to float32 (RNE).

    Examples
    --------
    >>> s = golden_scalars(np.float32(0.25), np.float32(2.0), "mean", 6)
    >>> float(s.coef).hex()
    '0x1.5555560000000p-3'
    """
    a, g = float(alpha), float(gamma)
    with np.errstate(over="ignore", under="ignore"):
        return GoldenScalars(
            neg_a=np.float32(-a),
            g=np.float32(g),
            g1=np.float32(g + 1.0),
            ga=np.float32(g * a),
            gam1=np.float32(g * (a - 1.0)),
            oma=np.float32(1.0 - a),
            coef=np.float32(1.0 / float(count)) if reduction == "mean" else None,
        )


@dataclass(frozen=True)
class GoldenConstants:
    """The golden's scalars on the machine (compute format); ``coef`` None when not mean."""

    one: np.ndarray
    min_normal: np.ndarray
    neg_a: np.ndarray
    g: np.ndarray
    g1: np.ndarray
    ga: np.ndarray
    gam1: np.ndarray
    oma: np.ndarray
    coef: np.ndarray | None
    pred_dtype: np.dtype
    host: GoldenScalars


def golden_constants(machine, inputs, count: int) -> GoldenConstants:
    """Form the golden's scalars for one evaluation on ``machine``."""
    m = machine
    s = golden_scalars(inputs.alpha, inputs.gamma, inputs.reduction, count)

    def scalar(v):
        return m.asarray(np.float32(v))

    return GoldenConstants(
        one=scalar(1.0), min_normal=m.asarray(MIN_NORMAL_FP32), neg_a=scalar(s.neg_a), g=scalar(s.g),
        g1=scalar(s.g1), ga=scalar(s.ga), gam1=scalar(s.gam1), oma=scalar(s.oma),
        coef=None if s.coef is None else scalar(s.coef), pred_dtype=np.dtype(inputs.pred.dtype), host=s,
    )


def _mul(name, a, b, exact, formula):
    """A product of two steps (or a step and a constant named ``c.<b>``), in the source's operand order."""
    if b.startswith("c."):
        const = b[2:]
        return Step(name, (a,), lambda m, c, k, u: m.mul(u, getattr(c, const)), "mul", exact=exact, formula=formula)
    if a.startswith("c."):
        const = a[2:]
        return Step(name, (b,), lambda m, c, k, u: m.mul(getattr(c, const), u), "mul", exact=exact, formula=formula)
    return Step(name, (a, b), lambda m, c, k, u, v: m.mul(u, v), "mul", exact=exact, formula=formula)


def _exp(name, arg, exact):
    return Step(name, (arg,), lambda m, c, k, y: m.exp(y, ftz=False), "exp", exact=exact, formula=f"Exp({arg})")


#: The golden's op order (spec section 5) as named steps.
GOLDEN_RECIPE = Recipe("golden", [
    Step("nx", ("x",), lambda m, c, k, x: m.neg(x), "exact", exact=lambda Q: -Q.x, formula="-x"),
    _exp("ex", "nx", lambda Q: Q.enx),
    Step("ex1", ("ex",), lambda m, c, k, e: m.add(e, c.one), "add", exact=lambda Q: Q.enx + 1, formula="ex + 1",
         cond=sum_cond(1.0)),
    Step("probs", ("ex1",), lambda m, c, k, e1: m.div(c.one, e1, mode="0ulp"), "div", exact=lambda Q: Q.p,
         formula="Div0ulp(1, Exp(-x) + 1)"),
    Step("nadd", ("probs",), lambda m, c, k, p: m.sub(c.one, p), "sub", exact=lambda Q: Q.q, formula="1 - probs",
         cond=sum_cond(1.0)),
    Step("pc", ("probs",), lambda m, c, k, p: m.maximum(p, c.min_normal), "clamp", exact=lambda Q: Q.p,
         formula="max(probs, MIN_NORMAL)"),
    Step("lp", ("pc",), lambda m, c, k, b: m.ln(b, ftz=False), "ln", exact=lambda Q: Q.lp, formula="Ln(pc)"),
    Step("qc", ("nadd",), lambda m, c, k, q: m.maximum(q, c.min_normal), "clamp", exact=lambda Q: Q.q,
         formula="max(nadd, MIN_NORMAL)"),
    Step("lq", ("qc",), lambda m, c, k, b: m.ln(b, ftz=False), "ln", exact=lambda Q: Q.lq, formula="Ln(qc)"),
    _mul("g1_lq", "c.g1", "lq", lambda Q: Q.g1 * Q.lq, "g1 * lq"),
    _exp("pow_y", "g1_lq", lambda Q: Q.qg1),
    _mul("dpos_front", "c.neg_a", "pow_y", lambda Q: -Q.a * Q.qg1, "(-a) * pow_y"),
    _mul("g_lq", "c.g", "lq", lambda Q: Q.g * Q.lq, "g * lq"),
    _exp("pow_v", "g_lq", lambda Q: Q.qg),
    _mul("pv_lp", "pow_v", "lp", lambda Q: Q.qg * Q.lp, "pow_v * lp"),
    _mul("pv_lp_p", "pv_lp", "probs", lambda Q: Q.qg * Q.lp * Q.p, "(pow_v * lp) * probs"),
    _mul("dpos_back", "pv_lp_p", "c.ga", lambda Q: Q.g * Q.a * Q.qg * Q.lp * Q.p, "((pow_v * lp) * probs) * ga"),
    Step("dpos", ("dpos_front", "dpos_back"), lambda m, c, k, a, b: m.add(a, b), "add", exact=lambda Q: Q.dpos,
         formula="dpos_front + dpos_back"),
    _mul("g_lp", "c.g", "lp", lambda Q: Q.g * Q.lp, "g * lp"),
    _exp("pow_n", "g_lp", lambda Q: Q.pg),
    _mul("pn_q", "pow_n", "nadd", lambda Q: Q.pg * Q.q, "pow_n * nadd"),
    _mul("pn_q_lq", "pn_q", "lq", lambda Q: Q.pg * Q.q * Q.lq, "(pow_n * nadd) * lq"),
    _mul("dneg_front", "pn_q_lq", "c.gam1", lambda Q: Q.g * (Q.a - 1) * Q.pg * Q.q * Q.lq,
         "((pow_n * nadd) * lq) * gam1"),
    _mul("g1_lp", "c.g1", "lp", lambda Q: Q.g1 * Q.lp, "g1 * lp"),
    _exp("pow_q", "g1_lp", lambda Q: Q.pg1),
    _mul("dneg_back", "c.oma", "pow_q", lambda Q: (1 - Q.a) * Q.pg1, "oma * pow_q"),
    Step("dneg", ("dneg_front", "dneg_back"), lambda m, c, k, a, b: m.add(a, b), "add", exact=lambda Q: Q.dneg,
         formula="dneg_front + dneg_back"),
    Step("omt", ("t",), lambda m, c, k, t: m.sub(c.one, t), "sub", exact=lambda Q: 1 - Q.t, formula="1 - t",
         cond=sum_cond(1.0)),
    Step("dpos_t", ("dpos", "omt"), lambda m, c, k, a, b: m.mul(a, b), "selector",
         exact=lambda Q: Q.dpos * (1 - Q.t), formula="dpos * (1 - t)"),
    Step("dneg_t", ("dneg", "t"), lambda m, c, k, a, b: m.mul(a, b), "selector", exact=lambda Q: Q.dneg * Q.t,
         formula="dneg * t"),
    Step("raw", ("dpos_t", "dneg_t"), lambda m, c, k, a, b: m.add(a, b), "add", exact=lambda Q: Q.raw,
         formula="dpos * (1 - t) + dneg * t"),
    Step("weighted", ("raw", "w"), lambda m, c, k, r, w: r if w is None else m.mul(r, w), "mul",
         exact=lambda Q: Q.weighted, formula="raw * weight (no multiply when absent)"),
    Step("scaled", ("weighted", "d"), lambda m, c, k, a, d: m.mul(a, d), "mul", exact=lambda Q: Q.scaled,
         formula="weighted * dout"),
    Step("grad", ("scaled",), lambda m, c, k, a: a if c.coef is None else m.mul(a, c.coef), "mul",
         exact=lambda Q: Q.grad, formula="scaled * coef (mean only)"),
    Step("out", ("grad",), lambda m, c, k, a: store_output(m, a, c.pred_dtype, RNE), "store",
         exact=lambda Q: Q.grad, formula="cast to pred dtype, RNE", fmt="output"),
])


def golden_call() -> RecipeCall:
    """The :class:`~precision.recipes.steps.RecipeCall` of ``golden``."""
    return RecipeCall(GOLDEN_RECIPE, GOLDEN_RECIPE.config(), golden_constants)


def golden(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="mean", *, count=None):
    """SigmoidFocalLossGrad by the ops-nn golden's PyTorch op order.

    Parameters and return value as :func:`precision.operators.sigmoid_focal_loss_grad.implementations.kernel.kernel`.

    Notes
    -----
    Differences from the kernel recipe: plain ``1/(1+exp(-x))`` sigmoid; every
    power is ``exp(k * log(clamped base))``; no correction, recovery or
    fallback; the terms are summed front + back; weight absent means no
    multiply (not ``* 1.0``); coef comes from double arithmetic.  ``count``
    overrides the mean's ``N*C`` (default: the inputs').  The op order is the
    step table :data:`GOLDEN_RECIPE`.
    """
    inputs = validate_inputs(pred, target, dout, weight, alpha, gamma, reduction)
    m = resolve_machine(machine)
    consts = golden_constants(m, inputs, validate_mean_count(count, inputs))
    out = GOLDEN_RECIPE.run(GOLDEN_RECIPE.plan(), m, consts, load_operands(m, inputs))
    return out.reshape(inputs.shape)
