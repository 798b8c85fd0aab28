"""An example plugin: a SigmoidFocalLossGrad recipe of your own, scored like the built-in variants.

Use it with any command that takes ``--plugin`` (or ``[run] plugins =
["my_kernel.py"]`` in a study file, relative to the study file)::

    precision variants --plugin examples/my_kernel.py
    precision explain my_kernel --pred 10 --target 0 --plugin examples/my_kernel.py

The recipe: the sigmoid from e = exp(-|x|) only (p and q as 1/(1+e) and
e/(1+e), never 1 - p), ln p and ln q from ln(1+e) (never ln of a rounded p or
q), the powers as exp(k * ln), the two focal terms, the selector, weight,
dout and the mean's coefficient, one store.  Every op is a primitive of the
machine ``m`` (``m.exp``, ``m.ln``, ``m.div``, ``m.mul``, ...), so the ``npu``
machine runs it with its own exp, ln and division, and ``+ftz`` flushes its
multiplications' subnormal results, as for the built-in variants.

The table of named steps (``MY_RECIPE``) is the implementation:
``my_kernel`` is :func:`precision.operators.sigmoid_focal_loss_grad.plugins.recipe_function` of it, and
``recipe=`` hands the same table to ``precision explain`` (one row per step,
with its local error and cause).  Each step's ``exact`` names the real
number it stands for, from the point's exact quantities ``Q``
(:class:`precision.operators.sigmoid_focal_loss_grad.attribution`): ``Q.e`` = exp(-|x|), ``Q.p``, ``Q.q``,
``Q.lp`` = ln p, ``Q.lq`` = ln q, ``Q.L`` = ln(1 + e), ``Q.pg`` = p^gamma,
``Q.qg1`` = q^(gamma+1), ``Q.dpos``, ``Q.dneg``, ``Q.raw``, ``Q.weighted``,
``Q.scaled``, ``Q.grad``, and the inputs ``Q.x Q.t Q.a Q.g Q.g1 Q.w Q.d Q.n``.
"""

from dataclasses import dataclass

import numpy as np

from precision import RNE, register_variant
from precision.operators.sigmoid_focal_loss_grad.implementations.common import prepare_host_scalars, store_output
from precision.operators.sigmoid_focal_loss_grad.plugins import recipe_function
from precision.recipes.steps import Recipe, RecipeCall, Step, sum_cond


@dataclass(frozen=True)
class Constants:
    """Host scalars on the machine (its compute format), computed once per call."""

    zero: np.ndarray
    one: np.ndarray
    g: np.ndarray      # gamma
    g1: np.ndarray     # gamma + 1, rounded once to float32 on the host
    a: np.ndarray      # alpha
    oma: np.ndarray    # 1 - alpha
    coef: np.ndarray   # 1 / (N*C) for mean, else 1
    pred_dtype: np.dtype


def my_constants(m, inputs, count):
    """``prepare(machine, validated inputs, mean count) -> constants`` (see precision.recipes.steps.RecipeCall)."""
    h = prepare_host_scalars(inputs.alpha, inputs.gamma, inputs.reduction, count)  # float32 host arithmetic
    return Constants(m.asarray(np.float32(0)), m.asarray(np.float32(1)), m.asarray(h.g), m.asarray(h.g1),
                     m.asarray(h.a), m.asarray(h.oma), m.asarray(h.coef), np.dtype(inputs.pred.dtype))


def _mul(name, a, b, exact, formula, kind="mul"):
    """A product of two earlier steps."""
    return Step(name, (a, b), lambda m, c, k, u, v: m.mul(u, v), kind, exact=exact, formula=formula)


MY_RECIPE = Recipe("my_kernel", [
    # the sigmoid from e = exp(-|x|): p, q and their logs without 1 - p
    Step("ax", ("x",), lambda m, c, k, x: m.abs(x), "exact", exact=lambda Q: Q.ax, formula="|x|"),
    Step("nax", ("ax",), lambda m, c, k, ax: m.neg(ax), "exact", exact=lambda Q: -Q.ax, formula="-|x|"),
    Step("e", ("nax",), lambda m, c, k, y: m.exp(y), "exp", exact=lambda Q: Q.e, formula="Exp(-|x|)"),
    Step("e1", ("e",), lambda m, c, k, e: m.add(e, c.one), "add", exact=lambda Q: Q.e + 1, formula="1 + e",
         cond=sum_cond(1.0)),
    Step("r", ("e1",), lambda m, c, k, e1: m.div(c.one, e1, mode="0ulp"), "div", exact=lambda Q: 1 / (Q.e + 1),
         formula="Div0ulp(1, 1 + e)"),
    Step("er", ("e", "r"), lambda m, c, k, e, r: m.mul(e, r), "mul", exact=lambda Q: Q.e / (Q.e + 1),
         formula="e * r"),
    Step("L", ("e1",), lambda m, c, k, e1: m.ln(e1), "ln", exact=lambda Q: Q.L, formula="Ln(1 + e)"),
    Step("nL", ("L",), lambda m, c, k, v: m.neg(v), "exact", exact=lambda Q: -Q.L, formula="-L"),
    Step("nL_ax", ("nL", "ax"), lambda m, c, k, v, ax: m.sub(v, ax), "sub", exact=lambda Q: -Q.L - Q.ax,
         formula="-L - |x|"),
    Step("x_nonneg", ("x",), lambda m, c, k, x: m.ge(x, c.zero), "bool", formula="x >= 0", fmt="bool"),
    Step("p", ("x_nonneg", "r", "er"), lambda m, c, k, s, a, b: m.select(s, a, b), "select",
         exact=lambda Q: Q.p, formula="x >= 0 ? r : e*r"),
    Step("q", ("x_nonneg", "er", "r"), lambda m, c, k, s, a, b: m.select(s, a, b), "select",
         exact=lambda Q: Q.q, formula="x >= 0 ? e*r : r"),
    Step("lp", ("x_nonneg", "nL", "nL_ax"), lambda m, c, k, s, a, b: m.select(s, a, b), "select",
         exact=lambda Q: Q.lp, formula="x >= 0 ? -L : -L - |x|"),
    Step("lq", ("x_nonneg", "nL_ax", "nL"), lambda m, c, k, s, a, b: m.select(s, a, b), "select",
         exact=lambda Q: Q.lq, formula="x >= 0 ? -L - |x| : -L"),
    # powers as exp(k * ln)
    Step("g_lq", ("lq",), lambda m, c, k, v: m.mul(c.g, v), "mul", exact=lambda Q: Q.g * Q.lq, formula="g * lq"),
    Step("qg", ("g_lq",), lambda m, c, k, v: m.exp(v), "exp", exact=lambda Q: Q.qg, formula="Exp(g * lq)"),
    Step("g1_lq", ("lq",), lambda m, c, k, v: m.mul(c.g1, v), "mul", exact=lambda Q: Q.g1 * Q.lq,
         formula="g1 * lq"),
    Step("qg1", ("g1_lq",), lambda m, c, k, v: m.exp(v), "exp", exact=lambda Q: Q.qg1, formula="Exp(g1 * lq)"),
    Step("g_lp", ("lp",), lambda m, c, k, v: m.mul(c.g, v), "mul", exact=lambda Q: Q.g * Q.lp, formula="g * lp"),
    Step("pg", ("g_lp",), lambda m, c, k, v: m.exp(v), "exp", exact=lambda Q: Q.pg, formula="Exp(g * lp)"),
    Step("g1_lp", ("lp",), lambda m, c, k, v: m.mul(c.g1, v), "mul", exact=lambda Q: Q.g1 * Q.lp,
         formula="g1 * lp"),
    Step("pg1", ("g1_lp",), lambda m, c, k, v: m.exp(v), "exp", exact=lambda Q: Q.pg1, formula="Exp(g1 * lp)"),
    # A(x) = g p q^g ln p - q^(g+1);  dpos = a A(x)
    _mul("qg_lp", "qg", "lp", lambda Q: Q.qg * Q.lp, "qg * lp"),
    _mul("p_qg_lp", "p", "qg_lp", lambda Q: Q.p * Q.qg * Q.lp, "p * (qg * lp)"),
    Step("gp_qg_lp", ("p_qg_lp",), lambda m, c, k, v: m.mul(c.g, v), "mul", exact=lambda Q: Q.g * Q.p * Q.qg * Q.lp,
         formula="g * p * qg * lp"),
    Step("A_pos", ("gp_qg_lp", "qg1"), lambda m, c, k, u, v: m.sub(u, v), "sub", exact=lambda Q: Q.A_pos,
         formula="g p qg lp - qg1"),
    Step("dpos", ("A_pos",), lambda m, c, k, v: m.mul(c.a, v), "mul", exact=lambda Q: Q.dpos, formula="a * A(x)"),
    # A(-x) = g q p^g ln q - p^(g+1);  dneg = -(1 - a) A(-x)
    _mul("pg_lq", "pg", "lq", lambda Q: Q.pg * Q.lq, "pg * lq"),
    _mul("q_pg_lq", "q", "pg_lq", lambda Q: Q.q * Q.pg * Q.lq, "q * (pg * lq)"),
    Step("gq_pg_lq", ("q_pg_lq",), lambda m, c, k, v: m.mul(c.g, v), "mul", exact=lambda Q: Q.g * Q.q * Q.pg * Q.lq,
         formula="g * q * pg * lq"),
    Step("A_neg", ("gq_pg_lq", "pg1"), lambda m, c, k, u, v: m.sub(u, v), "sub", exact=lambda Q: Q.A_neg,
         formula="g q pg lq - pg1"),
    Step("oma_A", ("A_neg",), lambda m, c, k, v: m.mul(c.oma, v), "mul", exact=lambda Q: (1 - Q.a) * Q.A_neg,
         formula="(1 - a) * A(-x)"),
    Step("dneg", ("oma_A",), lambda m, c, k, v: m.neg(v), "exact", exact=lambda Q: Q.dneg,
         formula="-(1 - a) * A(-x)"),
    # the selector, weight, dout, coefficient and the store
    Step("omt", ("t",), lambda m, c, k, t: m.sub(c.one, t), "sub", exact=lambda Q: 1 - Q.t, formula="1 - t",
         cond=sum_cond(1.0)),
    _mul("dpos_t", "dpos", "omt", lambda Q: Q.dpos * (1 - Q.t), "dpos * (1 - t)", kind="selector"),
    _mul("dneg_t", "dneg", "t", lambda Q: Q.dneg * Q.t, "dneg * t", kind="selector"),
    Step("raw", ("dpos_t", "dneg_t"), lambda m, c, k, u, v: m.add(u, v), "add", exact=lambda Q: Q.raw,
         formula="dpos (1 - t) + dneg t"),
    Step("weighted", ("raw", "w"), lambda m, c, k, r, w: r if w is None else m.mul(r, w), "mul",
         exact=lambda Q: Q.weighted, formula="raw * weight (no multiply when absent)"),
    Step("scaled", ("weighted", "d"), lambda m, c, k, u, d: m.mul(u, d), "mul", exact=lambda Q: Q.scaled,
         formula="weighted * dout"),
    Step("grad", ("scaled",), lambda m, c, k, u: m.mul(u, c.coef), "mul", exact=lambda Q: Q.grad,
         formula="scaled * coef"),
    Step("out", ("grad",), lambda m, c, k, g: store_output(m, g, c.pred_dtype, RNE), "store",
         exact=lambda Q: Q.grad, formula="cast to pred dtype, RNE", fmt="output"),
])

#: How the variant runs as a recipe: the table, its configuration, its constants.
MY_CALL = RecipeCall(MY_RECIPE, MY_RECIPE.config(), my_constants)

my_kernel = recipe_function(MY_CALL)

register_variant("my_kernel", my_kernel, "example plugin: p, q, ln p, ln q from exp(-|x|) and ln(1+e), powers "
                 "as exp(k ln), fp32", family="plugin", recipe=MY_CALL)
