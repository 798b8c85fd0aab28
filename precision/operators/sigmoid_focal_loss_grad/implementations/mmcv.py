"""MMCV's CUDA backward kernel (``sigmoid_focal_loss_cuda_kernel.cuh``), raw-selector form.

Spec section 5.  MMCV works per element with a dense label (``flag_p = (t == c)``,
``flag_n = (t != c)``); this operator's raw selector ``t`` weights the
positive term by ``1 - t`` and the negative one by ``t``, so here
``flag_p = 1 - t`` and ``flag_n = t`` (equal to MMCV's flags for t in {0, 1}).
Op order, every op rounding in the compute format ``T``:

    p      = 1 / (1 + Exp(-x))                                     # Div0ulp
    term_p = pow(1 - p, g) * ((1 - p) - ((g * p) * Ln(max(p, T(FLT_MIN)))))
    term_n = pow(p, g) * (((g * (1 - p)) * Ln(max(1 - p, T(FLT_MIN)))) - p)
    grad   = 0
    grad  += ((-flag_p) * a) * term_p
    grad  += ((-flag_n) * (1 - a)) * term_n
    grad  *= weight                  # when present (MMCV: weight[t], per class)
    grad  *= dout                    # PyTorch side: grad_input *= grad_output
    grad  /= T(N*C)                  # mean only; Div0ulp (MMCV: grad_input /= input.size(0))

MMCV's mean divides by N because its loss sums over classes; this operator's
mean is over all N*C elements, so the count here is N*C (rounded to ``T``).

``pow`` is the ordinary library power (``algo="intrinsic"``: CUDA ``powf``
has no double-float reconstruction); Exp and Ln do not flush.

:func:`mmcv_fp16` is the ``T = half`` instantiation: every op in fp16, and
``(T)FLT_MIN`` rounds to 0, so the log clamp is ``max(p, 0)`` and a q that
rounds to 0 gives ``Ln(0) = -inf``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from precision.exact.formats import RNE
from precision.operators.sigmoid_focal_loss_grad.implementations.common import (
    MIN_NORMAL_FP32,
    load_operands,
    prepare_host_scalars,
    require_fp16_pred,
    resolve_machine,
    store_output,
    validate_inputs,
    validate_mean_count,
    with_compute_format,
)
from precision.recipes.steps import Recipe, RecipeCall, Step, sum_cond

__all__ = ["mmcv", "mmcv_fp16", "MMCV_RECIPE", "mmcv_constants", "mmcv_call"]


@dataclass(frozen=True)
class MmcvConstants:
    """MMCV's ``T`` scalars on the machine; ``divisor`` is ``T(count)``, None unless mean."""

    zero: np.ndarray
    one: np.ndarray
    flt_min: np.ndarray
    g: np.ndarray
    a: np.ndarray
    divisor: np.ndarray | None
    pred_dtype: np.dtype
    host: object


def mmcv_constants(machine, inputs, count: int) -> MmcvConstants:
    """MMCV's scalars for one evaluation: alpha, gamma, FLT_MIN and the mean's divisor in ``T``."""
    m = machine
    host = prepare_host_scalars(inputs.alpha, inputs.gamma, inputs.reduction, inputs.count)

    def scalar(v):
        return m.asarray(np.float32(v))

    return MmcvConstants(
        zero=scalar(0.0), one=scalar(1.0), flt_min=m.asarray(MIN_NORMAL_FP32), g=scalar(host.g), a=scalar(host.a),
        divisor=m.asarray(np.float64(count)) if inputs.reduction == "mean" else None,  # RN of the count into T
        pred_dtype=np.dtype(inputs.pred.dtype), host=host,
    )


def _pow_cond(c, v, base):
    k = float(c.host.g)
    with np.errstate(all="ignore"):
        return np.maximum(abs(k), np.abs(k * np.log(np.abs(base))))


def _mul(name, a, b, exact, formula):
    return Step(name, (a, b), lambda m, c, k, u, v: m.mul(u, v), "mul", exact=exact, formula=formula)


#: MMCV's op order (module docstring) as named steps.
MMCV_RECIPE = Recipe("mmcv", [
    Step("nx", ("x",), lambda m, c, k, x: m.neg(x), "exact", exact=lambda Q: -Q.x, formula="-x"),
    Step("ex", ("nx",), lambda m, c, k, y: m.exp(y, ftz=False), "exp", exact=lambda Q: Q.enx, formula="Exp(-x)"),
    Step("ex1", ("ex",), lambda m, c, k, e: m.add(c.one, e), "add", exact=lambda Q: 1 + Q.enx, formula="1 + ex",
         cond=sum_cond(1.0)),
    Step("p", ("ex1",), lambda m, c, k, e1: m.div(c.one, e1, mode="0ulp"), "div", exact=lambda Q: Q.p,
         formula="1 / (1 + Exp(-x))"),
    Step("omp", ("p",), lambda m, c, k, p: m.sub(c.one, p), "sub", exact=lambda Q: Q.q, formula="1 - p",
         cond=sum_cond(1.0)),
    Step("pow_q", ("omp",), lambda m, c, k, b: m.pow(b, c.g, algo="intrinsic"), "pow", exact=lambda Q: Q.qg,
         formula="pow(1 - p, g)", cond=_pow_cond),
    Step("gp", ("p",), lambda m, c, k, p: m.mul(c.g, p), "mul", exact=lambda Q: Q.g * Q.p, formula="g * p"),
    Step("pc", ("p",), lambda m, c, k, p: m.maximum(p, c.flt_min), "clamp", exact=lambda Q: Q.p,
         formula="max(p, FLT_MIN)"),
    Step("lp", ("pc",), lambda m, c, k, b: m.ln(b, ftz=False), "ln", exact=lambda Q: Q.lp, formula="Ln(pc)"),
    _mul("gp_lp", "gp", "lp", lambda Q: Q.g * Q.p * Q.lp, "(g * p) * lp"),
    Step("bracket_p", ("omp", "gp_lp"), lambda m, c, k, a, b: m.sub(a, b), "sub", exact=lambda Q: -Q.A_pos / Q.qg,
         formula="(1 - p) - (g * p) * lp"),
    _mul("term_p", "pow_q", "bracket_p", lambda Q: -Q.A_pos, "pow_q * bracket_p"),
    Step("pow_p", ("p",), lambda m, c, k, b: m.pow(b, c.g, algo="intrinsic"), "pow", exact=lambda Q: Q.pg,
         formula="pow(p, g)", cond=_pow_cond),
    Step("g_omp", ("omp",), lambda m, c, k, q: m.mul(c.g, q), "mul", exact=lambda Q: Q.g * Q.q,
         formula="g * (1 - p)"),
    Step("qc", ("omp",), lambda m, c, k, q: m.maximum(q, c.flt_min), "clamp", exact=lambda Q: Q.q,
         formula="max(1 - p, FLT_MIN)"),
    Step("lq", ("qc",), lambda m, c, k, b: m.ln(b, ftz=False), "ln", exact=lambda Q: Q.lq, formula="Ln(qc)"),
    _mul("gq_lq", "g_omp", "lq", lambda Q: Q.g * Q.q * Q.lq, "(g * (1 - p)) * lq"),
    Step("bracket_n", ("gq_lq", "p"), lambda m, c, k, a, b: m.sub(a, b), "sub", exact=lambda Q: Q.A_neg / Q.pg,
         formula="(g * (1 - p)) * lq - p"),
    _mul("term_n", "pow_p", "bracket_n", lambda Q: Q.A_neg, "pow_p * bracket_n"),
    Step("flag_p", ("t",), lambda m, c, k, t: m.sub(c.one, t), "sub", exact=lambda Q: 1 - Q.t, formula="1 - t",
         cond=sum_cond(1.0)),
    Step("nflag_p", ("flag_p",), lambda m, c, k, f: m.neg(f), "exact", exact=lambda Q: Q.t - 1, formula="-flag_p"),
    Step("coef_p", ("nflag_p",), lambda m, c, k, f: m.mul(f, c.a), "mul", exact=lambda Q: (Q.t - 1) * Q.a,
         formula="(-flag_p) * a"),
    Step("grad_p", ("term_p", "coef_p"), lambda m, c, k, term, coef: m.mul(coef, term), "selector",
         exact=lambda Q: Q.dpos * (1 - Q.t), formula="coef_p * term_p"),
    Step("acc_p", ("grad_p",), lambda m, c, k, v: m.add(c.zero, v), "add", exact=lambda Q: Q.dpos * (1 - Q.t),
         formula="0 + grad_p"),
    Step("nflag_n", ("t",), lambda m, c, k, t: m.neg(t), "exact", exact=lambda Q: -Q.t, formula="-flag_n"),
    Step("oma", (), lambda m, c, k: m.sub(c.one, c.a), "sub", exact=lambda Q: 1 - Q.a, formula="1 - a",
         cond=lambda c, v: np.maximum(1.0, abs(float(c.host.a))) / np.abs(v)),
    _mul("coef_n", "nflag_n", "oma", lambda Q: -Q.t * (1 - Q.a), "(-flag_n) * (1 - a)"),
    Step("grad_n", ("term_n", "coef_n"), lambda m, c, k, term, coef: m.mul(coef, term), "selector",
         exact=lambda Q: Q.dneg * Q.t, formula="coef_n * term_n"),
    Step("raw", ("acc_p", "grad_n"), lambda m, c, k, a, b: m.add(a, b), "add", exact=lambda Q: Q.raw,
         formula="acc_p + grad_n"),
    Step("weighted", ("raw", "w"), lambda m, c, k, r, w: r if w is None else m.mul(r, w), "mul",
         exact=lambda Q: Q.weighted, formula="raw * weight (when present)"),
    Step("scaled", ("weighted", "d"), lambda m, c, k, a, d: m.mul(a, d), "mul", exact=lambda Q: Q.scaled,
         formula="weighted * dout"),
    Step("grad", ("scaled",), lambda m, c, k, a: a if c.divisor is None else m.div(a, c.divisor, mode="0ulp"),
         "div", exact=lambda Q: Q.grad, formula="scaled / T(N*C) (mean only)"),
    Step("out", ("grad",), lambda m, c, k, a: store_output(m, a, c.pred_dtype, RNE), "store",
         exact=lambda Q: Q.grad, formula="cast to pred dtype, RNE", fmt="output"),
])


def mmcv_call(fp16: bool = False) -> RecipeCall:
    """The :class:`~precision.recipes.steps.RecipeCall` of ``mmcv`` (``fp16``: of ``mmcv-fp16``)."""
    if fp16:
        return RecipeCall(MMCV_RECIPE, MMCV_RECIPE.config(), mmcv_constants, compute="fp16", fp16_only="mmcv-fp16")
    return RecipeCall(MMCV_RECIPE, MMCV_RECIPE.config(), mmcv_constants)


def mmcv(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="mean", *, count=None):
    """SigmoidFocalLossGrad by MMCV's CUDA formula, in the machine's compute format.

    Parameters and return value as :func:`precision.operators.sigmoid_focal_loss_grad.implementations.kernel.kernel`.

    Notes
    -----
    ``alpha`` and ``gamma`` enter as ``T`` values (float32 attribute values,
    rounded to fp16 RNE in the fp16 instantiation), ``FLT_MIN`` as
    ``T(2**-126)``.  The mean divisor ``N*C`` (or ``count``) is rounded to ``T`` (in fp16 a
    count above 65519 becomes inf and the mean gradient 0).  The store to
    pred's dtype is RNE.  The op order is the step table :data:`MMCV_RECIPE`.
    """
    inputs = validate_inputs(pred, target, dout, weight, alpha, gamma, reduction)
    m = resolve_machine(machine)
    consts = mmcv_constants(m, inputs, validate_mean_count(count, inputs))
    out = MMCV_RECIPE.run(MMCV_RECIPE.plan(), m, consts, load_operands(m, inputs))
    return out.reshape(inputs.shape)


def mmcv_fp16(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="mean", *, count=None):
    """MMCV's formula instantiated with ``T = half``: every op in fp16.

    Same machine model, compute format fp16; ``T(FLT_MIN) = 0``.  pred must
    be float16 (DtypeError otherwise); fp32 dout/weight are rounded to fp16.
    """
    require_fp16_pred("mmcv-fp16", validate_inputs(pred, target, dout, weight, alpha, gamma, reduction))
    m16 = with_compute_format(machine, "fp16")
    return mmcv(m16, pred, target, dout, weight, alpha, gamma, reduction, count=count)
