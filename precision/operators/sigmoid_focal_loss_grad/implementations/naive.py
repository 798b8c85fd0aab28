"""The naive recipe: the textbook formula with none of the guards.

``naive`` is, by construction, the production recipe with every guard
switched off (:func:`precision.operators.sigmoid_focal_loss_grad.implementations.kernel.kernel` with
``guards=NO_GUARDS``), so ``naive+Gi`` (one guard added) differs from it in
exactly one step.  Op order (every op rounds in the compute format, RNE):

    p     = Div0ulp(1, Exp(-x) + 1)       # machine.div default mode "0ulp":
                                          # correctly rounded, no flush (IEEE '/')
    q     = 1 - p
    pg    = pow(p, g)    pg1 = pow(p, g1) # machine.pow(algo="intrinsic"): the
    qg    = pow(q, g)    qg1 = pow(q, g1) # ordinary library pow exp(k*ln|a|)
    lp    = Ln(p)        lq  = Ln(q)      # ordinary Ln, no flush (ftz=False)
    dpos  = ((qg*lp)*p)*ga - qg1*a
    dneg  = ((pg*q)*lq)*gam1 + pg1*oma
    raw   = dpos*(1-t) + dneg*t
    grad  = ((raw*w)*dout)*coef           # w = 1.0 when weight is absent
    store = RN (fp32) / RTZ (fp16 pred; the naive store truncates)

with the host scalars ``g1 = g+1``, ``ga = g*a``, ``gam1 = g*(a-1)``,
``oma = 1-a``, ``coef`` of :func:`precision.operators.sigmoid_focal_loss_grad.implementations.common.prepare_host_scalars`.

Note on the store: "naive" has no G8, so an fp16 pred is stored with a
truncating conversion; the spec's "cast to pred dtype RNE" of the textbook
formula is ``naive+G8``.

``naive_fp16`` runs the same recipe with every op in fp16 (the same machine
model, compute format fp16): the host scalars are prepared in float32 and
rounded to fp16 (RNE) when loaded, ``MIN_NORMAL`` is unused (no clamp), and
the fp16 result needs no store conversion.  It takes fp16 pred only.
"""

from __future__ import annotations

from precision.operators.sigmoid_focal_loss_grad.implementations.common import (
    NO_GUARDS,
    require_fp16_pred,
    validate_inputs,
    with_compute_format,
)
from precision.operators.sigmoid_focal_loss_grad.implementations.kernel import kernel

__all__ = ["naive", "naive_fp16"]


def naive(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="mean", *, count=None):
    """SigmoidFocalLossGrad by the textbook formula in the machine's compute format.

    Parameters and return value as :func:`precision.operators.sigmoid_focal_loss_grad.implementations.kernel.kernel`.

    Notes
    -----
    Identical, bit for bit, to ``kernel(..., guards=NO_GUARDS)``; the op
    order is in the module docstring.
    """
    return kernel(machine, pred, target, dout, weight, alpha, gamma, reduction, guards=NO_GUARDS, count=count)


def naive_fp16(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="mean", *, count=None):
    """The naive recipe with every op in fp16 (same machine model, compute fp16).

    Notes
    -----
    pred must be float16 (DtypeError otherwise); fp32 dout and weight are
    rounded to fp16 (RNE) on load, the scalars too.  With fp16 compute,
    ``coef = 1/(N*C)`` is the float32 host value rounded to fp16 (0 below
    2**-25).
    """
    require_fp16_pred("naive-fp16", validate_inputs(pred, target, dout, weight, alpha, gamma, reduction))
    m16 = with_compute_format(machine, "fp16")
    return kernel(m16, pred, target, dout, weight, alpha, gamma, reduction, guards=NO_GUARDS, count=count)
