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

import numpy as np

from precision.formats import RNE
from precision.implementations.common import (
    MIN_NORMAL_FP32,
    prepare_host_scalars,
    require_fp16_pred,
    resolve_machine,
    store_output,
    validate_inputs,
    validate_mean_count,
    with_compute_format,
)

__all__ = ["mmcv", "mmcv_fp16"]


def mmcv(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="mean", *, count=None):
    """SigmoidFocalLossGrad by MMCV's CUDA formula, in the machine's compute format.

    Parameters and return value as :func:`precision.implementations.kernel.kernel`.

    Notes
    -----
    ``alpha`` and ``gamma`` enter as ``T`` values (float32 attribute values,
    rounded to fp16 RNE in the fp16 instantiation), ``FLT_MIN`` as
    ``T(2**-126)``.  The mean divisor ``N*C`` (or ``count``) is rounded to ``T`` (in fp16 a
    count above 65519 becomes inf and the mean gradient 0).  The store to
    pred's dtype is RNE.
    """
    inputs = validate_inputs(pred, target, dout, weight, alpha, gamma, reduction)
    m = resolve_machine(machine)
    host = prepare_host_scalars(inputs.alpha, inputs.gamma, inputs.reduction, inputs.count)

    def scalar(v):
        return m.asarray(np.float32(v))

    zero, one = scalar(0.0), scalar(1.0)
    flt_min = m.asarray(MIN_NORMAL_FP32)
    g, a = scalar(host.g), scalar(host.a)
    divisor = m.asarray(np.float64(validate_mean_count(count, inputs)))  # RN of the count into T
    x = m.asarray(inputs.pred.reshape(-1))
    t = m.from_int32(inputs.target.reshape(-1))
    d = m.asarray(inputs.dout.reshape(-1))

    with np.errstate(all="ignore"):
        p = m.div(one, m.add(one, m.exp(m.neg(x), ftz=False)), mode="0ulp")
        omp = m.sub(one, p)
        term_p = m.mul(
            m.pow(omp, g, algo="intrinsic"),
            m.sub(omp, m.mul(m.mul(g, p), m.ln(m.maximum(p, flt_min), ftz=False))),
        )
        term_n = m.mul(
            m.pow(p, g, algo="intrinsic"),
            m.sub(m.mul(m.mul(g, omp), m.ln(m.maximum(omp, flt_min), ftz=False)), p),
        )
        flag_p, flag_n = m.sub(one, t), t
        grad = m.add(zero, m.mul(m.mul(m.neg(flag_p), a), term_p))
        grad = m.add(grad, m.mul(m.mul(m.neg(flag_n), m.sub(one, a)), term_n))
        if inputs.weight is not None:
            grad = m.mul(grad, m.asarray(inputs.weight.reshape(-1)))
        grad = m.mul(grad, d)
        if inputs.reduction == "mean":
            grad = m.div(grad, divisor, mode="0ulp")
        out = store_output(m, grad, inputs.pred.dtype, RNE)
    return out.reshape(inputs.shape)


def mmcv_fp16(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="mean", *, count=None):
    """MMCV's formula instantiated with ``T = half``: every op in fp16.

    Same machine model, compute format fp16; ``T(FLT_MIN) = 0``.  pred must
    be float16 (DtypeError otherwise); fp32 dout/weight are rounded to fp16.
    """
    require_fp16_pred("mmcv-fp16", validate_inputs(pred, target, dout, weight, alpha, gamma, reduction))
    m16 = with_compute_format(machine, "fp16")
    return mmcv(m16, pred, target, dout, weight, alpha, gamma, reduction, count=count)
