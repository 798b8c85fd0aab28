"""SigmoidFocalLoss's implementations as step tables (spec: shared/spec/sigmoid_focal_loss.md).

Every recipe reads the loaded operands x (pred in the compute format), t (target, cast), w (weight or None)
and stores the loss in pred's dtype (RNE).  Host constants are float32 (RNE): alpha, RN(1 - alpha), gamma.

``LOSS_RECIPE``, the production kernel's element recipe and its variations (configuration keys):

    e    = Exp(-|x|)                pos = Div(1, 1 + e)       neg = e * pos       p = x >= 0 ? pos : neg
    bce  = max(x, 0) - x t + Ln(1 + e)                                  [log = "ln"]
           max(x, 0) - x t + log1p(e), log1p(e) = Ln(u) e / (u - 1), u = 1 + e (e where u = 1)  [log = "log1p"]
    q    = 1 - p                                                        [q = "subtract"]
           x >= 0 ? neg : pos  (the 1 - p the kernel computes and discards)           [q = "accurate"]
    base = q t + p (1 - t)          (1 - p_t, the focal base)
    pw   = base^2, (base^2)^2 base, 1 for gamma 2, 5, 0 (multiplies only); otherwise
           max(Power(base, gamma), FLT_MIN)  (DOUBLE_FLOAT_TECH, clamp after)          [path = "none"]
           Exp(gamma Ln(max(base, FLT_MIN)))  (clamp first, hardware Ln and Exp)        [path = "sum"]
    a_t  = t alpha + (1 - t) RN(1 - alpha)       loss = bce a_t pw [* w]

``kernel`` is path none (reduction none), ``kernel_sum_path`` the element recipe the kernel runs under sum and
mean (the same element, another pow and another clamp placement), ``candidate`` keeps the accurate 1 - p and
log1p.  ``NAIVE_RECIPE``: the textbook formula, p = Div(1, 1 + Exp(-x)), p_t by selection,
-a_t Exp(gamma Ln(1 - p_t)) Ln(p_t), no clamp.  ``GOLDEN_RECIPE``: the operator test's torch chain
(``tests/assets/golden.py``): stable BCE max(x, 0) - x t + log1p(exp(-|x|)) (log1p correctly rounded, as a
CPU's), p = sigmoid(x), 1 - p_t by subtraction, pow(max(1 - p_t, FLT_MIN), gamma) (the machine's Power: on
``ieee`` correctly rounded, as a CPU's powf approaches), a_t (1 - p_t)^gamma bce; fp32 (``golden``) or in the
input dtype (``third_party``, fp16 inputs).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from precision.exact.formats import RNE, round_to_format
from precision.recipes.operands import load_operands, store_output
from precision.recipes.steps import Recipe, RecipeCall, Step

__all__ = ["LossConstants", "loss_constants", "LOSS_RECIPE", "NAIVE_RECIPE", "GOLDEN_RECIPE", "loss_call",
           "naive_call", "golden_call", "load_operands", "MIN_NORMAL_FP32"]

MIN_NORMAL_FP32 = np.float32(2.0**-126)


@dataclass(frozen=True)
class LossConstants:
    """The host's scalars on the machine; ``gamma_case`` the kernel's host-side branch (0, 2, 5 or None)."""

    one: np.ndarray
    zero: np.ndarray
    min_normal: np.ndarray
    alpha: np.ndarray
    oma: np.ndarray
    gamma: np.ndarray
    gamma_case: float | None
    pred_dtype: np.dtype


def loss_constants(m, inputs, count=None) -> LossConstants:
    """The constants of one evaluation: alpha, RN(1 - alpha) and gamma as float32 on the host."""
    a, g = np.float32(inputs.alpha), np.float32(inputs.gamma)
    case = float(g) if float(g) in (0.0, 2.0, 5.0) else None
    return LossConstants(one=m.asarray(np.float32(1)), zero=m.asarray(np.float32(0)),
                         min_normal=m.asarray(MIN_NORMAL_FP32), alpha=m.asarray(a),
                         oma=m.asarray(np.float32(1) - a), gamma=m.asarray(g), gamma_case=case,
                         pred_dtype=np.dtype(inputs.pred.dtype))


def _special_power(m, c, base):
    """gamma 0, 2, 5: the kernel's multiplies; None for any other gamma."""
    if c.gamma_case == 0.0:
        return m.add(m.mul(base, c.zero), c.one)  # 1 on every lane (NaN stays NaN)
    if c.gamma_case == 2.0:
        return m.mul(base, base)
    if c.gamma_case == 5.0:
        b2 = m.mul(base, base)
        return m.mul(m.mul(b2, b2), base)
    return None


def _power_none(m, c, base):
    special = _special_power(m, c, base)
    return special if special is not None else m.maximum(m.pow(base, c.gamma, algo="double_float"), c.min_normal)


def _power_sum(m, c, base):
    special = _special_power(m, c, base)
    if special is not None:
        return special
    return m.exp(m.mul(c.gamma, m.ln(m.maximum(base, c.min_normal), ftz=False)), ftz=False)


def _log1p(m, c, e, u):
    """log1p(e) from u = RN(1 + e): Ln(u) e / (u - 1), e where u rounds to 1 (Goldberg's identity)."""
    um1 = m.sub(u, c.one)
    with np.errstate(all="ignore"):
        ratio = m.div(e, m.select(um1 == 0, c.one, um1))
    return m.select(um1 == 0, e, m.mul(m.ln(u, ftz=False), ratio))


def _store(m, c, v):
    return store_output(m, v, c.pred_dtype, RNE)


def _weighted(m, c, k, v, w):
    return v if w is None else m.mul(v, w)


def _weighted_store() -> list:
    """Every recipe's last two steps: the weight (no multiply when absent), then the RNE store in pred's dtype."""
    return [
        Step("lw", ("loss", "w"), _weighted, "mul", exact=lambda Q: Q.lw,
             formula="loss * weight (no multiply when absent)"),
        Step("out", ("lw",), lambda m, c, k, v: _store(m, c, v), "store", exact=lambda Q: Q.lw,
             formula="cast to pred dtype, RNE", fmt="output"),
    ]


#: The production kernel's element recipe and its variations (module docstring).
LOSS_RECIPE = Recipe("loss", [
    Step("ax", ("x",), lambda m, c, k, x: m.abs(x), "exact", exact=lambda Q: Q.ax, formula="|x|"),
    Step("nax", ("ax",), lambda m, c, k, a: m.neg(a), "exact", exact=lambda Q: -Q.ax, formula="-|x|"),
    Step("e", ("nax",), lambda m, c, k, y: m.exp(y, ftz=False), "exp", exact=lambda Q: Q.e, formula="Exp(-|x|)"),
    Step("u", ("e",), lambda m, c, k, e: m.add(c.one, e), "add", exact=lambda Q: Q.u, formula="1 + e"),
    Step("pos", ("u",), lambda m, c, k, u: m.div(c.one, u, mode="0ulp"), "div", exact=lambda Q: Q.pos,
         formula="Div(1, 1 + e)"),
    Step("neg", ("e", "pos"), lambda m, c, k, e, p: m.mul(e, p), "mul", exact=lambda Q: Q.neg, formula="e * pos"),
    Step("p", ("x", "pos", "neg"), lambda m, c, k, x, a, b: m.select(m.ge(x, c.zero), a, b), "select",
         exact=lambda Q: Q.p, formula="x >= 0 ? pos : neg"),
    Step("mx", ("x",), lambda m, c, k, x: m.maximum(x, c.zero), "clamp", exact=lambda Q: Q.mx, formula="max(x, 0)"),
    Step("xt", ("x", "t"), lambda m, c, k, x, t: m.mul(x, t), "selector", exact=lambda Q: Q.x * Q.t, formula="x * t"),
    Step("b1", ("mx", "xt"), lambda m, c, k, a, b: m.sub(a, b), "sub", exact=lambda Q: Q.b1, formula="max(x, 0) - x t"),
    Step("lg", ("u",), lambda m, c, k, u: m.ln(u, ftz=False), "ln", exact=lambda Q: Q.L,
         formula="Ln(1 + e)", reads=("log",), when=lambda k: k["log"] == "ln"),
    Step("lg", ("e", "u"), lambda m, c, k, e, u: _log1p(m, c, e, u), "ln", exact=lambda Q: Q.L,
         formula="log1p(e) = Ln(u) e / (u - 1)", reads=("log",), when=lambda k: k["log"] == "log1p"),
    Step("bce", ("b1", "lg"), lambda m, c, k, a, b: m.add(a, b), "add", exact=lambda Q: Q.bce,
         formula="max(x, 0) - x t + log"),
    Step("q", ("p",), lambda m, c, k, p: m.sub(c.one, p), "sub", exact=lambda Q: Q.q, formula="1 - p", reads=("q",),
         when=lambda k: k["q"] == "subtract"),
    Step("q", ("x", "pos", "neg"), lambda m, c, k, x, a, b: m.select(m.ge(x, c.zero), b, a), "select",
         exact=lambda Q: Q.q, formula="x >= 0 ? neg : pos", reads=("q",), when=lambda k: k["q"] == "accurate"),
    Step("omt", ("t",), lambda m, c, k, t: m.sub(c.one, t), "sub", exact=lambda Q: 1 - Q.t, formula="1 - t"),
    Step("qt", ("q", "t"), lambda m, c, k, q, t: m.mul(q, t), "selector", exact=lambda Q: Q.q * Q.t, formula="q t"),
    Step("pomt", ("p", "omt"), lambda m, c, k, p, o: m.mul(p, o), "selector", exact=lambda Q: Q.p * (1 - Q.t),
         formula="p (1 - t)"),
    Step("base", ("qt", "pomt"), lambda m, c, k, a, b: m.add(a, b), "add", exact=lambda Q: Q.base,
         formula="q t + p (1 - t)"),
    Step("pw", ("base",), lambda m, c, k, b: _power_none(m, c, b), "pow", exact=lambda Q: Q.pw,
         formula="gamma 0/2/5: multiplies; else max(Power(base, gamma), FLT_MIN)", reads=("path",),
         when=lambda k: k["path"] == "none"),
    Step("pw", ("base",), lambda m, c, k, b: _power_sum(m, c, b), "pow", exact=lambda Q: Q.pw,
         formula="gamma 0/2/5: multiplies; else Exp(gamma Ln(max(base, FLT_MIN)))", reads=("path",),
         when=lambda k: k["path"] == "sum"),
    Step("ta", ("t",), lambda m, c, k, t: m.mul(t, c.alpha), "mul", exact=lambda Q: Q.t * Q.a, formula="t alpha"),
    Step("oa", ("omt",), lambda m, c, k, o: m.mul(o, c.oma), "mul", exact=lambda Q: (1 - Q.t) * (1 - Q.a),
         formula="(1 - t) RN(1 - alpha)"),
    Step("at", ("ta", "oa"), lambda m, c, k, a, b: m.add(a, b), "add", exact=lambda Q: Q.at, formula="a_t"),
    Step("la", ("bce", "at"), lambda m, c, k, a, b: m.mul(a, b), "mul", exact=lambda Q: Q.la, formula="bce a_t"),
    Step("loss", ("la", "pw"), lambda m, c, k, a, b: m.mul(a, b), "mul", exact=lambda Q: Q.loss, formula="bce a_t pw"),
    *_weighted_store(),
], defaults={"path": "none", "q": "subtract", "log": "ln"})

#: The textbook formula, no guard (module docstring).
NAIVE_RECIPE = Recipe("naive", [
    Step("nx", ("x",), lambda m, c, k, x: m.neg(x), "exact", exact=lambda Q: -Q.x, formula="-x"),
    Step("e", ("nx",), lambda m, c, k, y: m.exp(y, ftz=False), "exp", exact=lambda Q: Q.enx, formula="Exp(-x)"),
    Step("p", ("e",), lambda m, c, k, e: m.div(c.one, m.add(c.one, e), mode="0ulp"), "div",
         exact=lambda Q: Q.p, formula="Div(1, 1 + Exp(-x))"),
    Step("q", ("p",), lambda m, c, k, p: m.sub(c.one, p), "sub", exact=lambda Q: Q.q, formula="1 - p"),
    Step("pt", ("t", "p", "q"), lambda m, c, k, t, p, q: m.select(t == 1, p, q), "select", exact=lambda Q: Q.pt,
         formula="t ? p : 1 - p"),
    Step("base", ("t", "p", "q"), lambda m, c, k, t, p, q: m.select(t == 1, q, p), "select",
         exact=lambda Q: Q.base, formula="1 - p_t, by selection"),
    Step("pw", ("base",), lambda m, c, k, b: m.exp(m.mul(c.gamma, m.ln(b, ftz=False)), ftz=False), "pow",
         exact=lambda Q: Q.pw, formula="Exp(gamma Ln(1 - p_t))"),
    Step("nl", ("pt",), lambda m, c, k, p: m.neg(m.ln(p, ftz=False)), "ln", exact=lambda Q: -Q.ctx.log(Q.pt),
         formula="-Ln(p_t)"),
    Step("at", ("t",), lambda m, c, k, t: m.select(t == 1, c.alpha, c.oma), "select", exact=lambda Q: Q.at,
         formula="a_t"),
    Step("loss", ("at", "pw", "nl"), lambda m, c, k, a, p, n: m.mul(m.mul(a, p), n), "mul",
         exact=lambda Q: Q.loss, formula="a_t pw (-Ln p_t)"),
    *_weighted_store(),
])


def _cpu_log1p(m, e):
    """log1p correctly rounded into the compute format (a CPU library's, from float64: 53 >= 2 * 24 + 2)."""
    return np.asarray(round_to_format(np.log1p(np.asarray(e, dtype=np.float64)), m.fmt), dtype=m.dtype)


#: The operator test's torch chain (module docstring).
GOLDEN_RECIPE = Recipe("golden", [
    Step("mx", ("x",), lambda m, c, k, x: m.maximum(x, c.zero), "clamp", exact=lambda Q: Q.mx, formula="max(x, 0)"),
    Step("xt", ("x", "t"), lambda m, c, k, x, t: m.mul(x, t), "selector", exact=lambda Q: Q.x * Q.t, formula="x * t"),
    Step("e", ("x",), lambda m, c, k, x: m.exp(m.neg(m.abs(x)), ftz=False), "exp", exact=lambda Q: Q.e,
         formula="exp(-|x|)"),
    Step("l1p", ("e",), lambda m, c, k, e: _cpu_log1p(m, e), "ln", exact=lambda Q: Q.L, formula="log1p(exp(-|x|))"),
    Step("bce", ("mx", "xt", "l1p"), lambda m, c, k, a, b, l: m.add(m.sub(a, b), l), "add",
         exact=lambda Q: Q.bce, formula="max(x, 0) - x t + log1p(exp(-|x|))"),
    Step("p", ("x",), lambda m, c, k, x: m.div(c.one, m.add(c.one, m.exp(m.neg(x), ftz=False)), mode="0ulp"),
         "div", exact=lambda Q: Q.p, formula="sigmoid(x) = 1 / (1 + exp(-x))"),
    Step("pt", ("p", "t"), lambda m, c, k, p, t: m.add(m.mul(p, t), m.mul(m.sub(c.one, p), m.sub(c.one, t))),
         "add", exact=lambda Q: Q.pt, formula="p t + (1 - p)(1 - t)"),
    Step("base", ("pt",), lambda m, c, k, p: m.maximum(m.sub(c.one, p), c.min_normal), "clamp",
         exact=lambda Q: Q.base, formula="clamp_min(1 - p_t, FLT_MIN)"),
    Step("pw", ("base",), lambda m, c, k, b: m.pow(b, c.gamma, algo="double_float"), "pow",
         exact=lambda Q: Q.pw, formula="pow(base, gamma)"),
    Step("at", ("t",), lambda m, c, k, t: m.add(m.mul(c.alpha, t), m.mul(c.oma, m.sub(c.one, t))), "add",
         exact=lambda Q: Q.at, formula="alpha t + (1 - alpha)(1 - t)"),
    Step("loss", ("at", "pw", "bce"), lambda m, c, k, a, p, b: m.mul(m.mul(a, p), b), "mul",
         exact=lambda Q: Q.loss, formula="a_t pw bce"),
    *_weighted_store(),
])


def loss_call(**config) -> RecipeCall:
    """The kernel family's call: ``path`` none or sum, ``q`` subtract or accurate, ``log`` ln or log1p."""
    return RecipeCall(LOSS_RECIPE, LOSS_RECIPE.config(**config), loss_constants)


def naive_call() -> RecipeCall:
    return RecipeCall(NAIVE_RECIPE, NAIVE_RECIPE.config(), loss_constants)


def golden_call(fp16: bool = False) -> RecipeCall:
    """The test golden in fp32, or its third party (the same chain in fp16, for fp16 inputs only)."""
    return RecipeCall(GOLDEN_RECIPE, GOLDEN_RECIPE.config(), loss_constants, compute="fp16" if fp16 else "fp32",
                      fp16_only="third_party" if fp16 else None)
