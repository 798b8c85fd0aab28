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

from precision.formats import RNE
from precision.implementations.common import (
    MIN_NORMAL_FP32,
    resolve_machine,
    store_output,
    validate_inputs,
    validate_mean_count,
)

__all__ = ["GoldenScalars", "golden_scalars", "golden"]


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


def golden(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="mean", *, count=None):
    """SigmoidFocalLossGrad by the ops-nn golden's PyTorch op order.

    Parameters and return value as :func:`precision.implementations.kernel.kernel`.

    Notes
    -----
    Differences from the kernel recipe: plain ``1/(1+exp(-x))`` sigmoid; every
    power is ``exp(k * log(clamped base))``; no correction, recovery or
    fallback; the terms are summed front + back; weight absent means no
    multiply (not ``* 1.0``); coef comes from double arithmetic.  ``count``
    overrides the mean's ``N*C`` (default: the inputs').
    """
    inputs = validate_inputs(pred, target, dout, weight, alpha, gamma, reduction)
    m = resolve_machine(machine)
    s = golden_scalars(inputs.alpha, inputs.gamma, inputs.reduction, validate_mean_count(count, inputs))

    def scalar(v):
        return m.asarray(np.float32(v))

    one, min_normal = scalar(1.0), m.asarray(MIN_NORMAL_FP32)
    neg_a, g, g1, ga, gam1, oma = (scalar(v) for v in (s.neg_a, s.g, s.g1, s.ga, s.gam1, s.oma))
    x = m.asarray(inputs.pred.reshape(-1))
    t = m.from_int32(inputs.target.reshape(-1))
    d = m.asarray(inputs.dout.reshape(-1))

    with np.errstate(all="ignore"):
        probs = m.div(one, m.add(m.exp(m.neg(x), ftz=False), one), mode="0ulp")
        nadd = m.sub(one, probs)
        lp = m.ln(m.maximum(probs, min_normal), ftz=False)
        lq = m.ln(m.maximum(nadd, min_normal), ftz=False)
        dpos_front = m.mul(neg_a, m.exp(m.mul(g1, lq), ftz=False))
        dpos_back = m.mul(m.mul(m.mul(m.exp(m.mul(g, lq), ftz=False), lp), probs), ga)
        dpos = m.add(dpos_front, dpos_back)
        dneg_front = m.mul(m.mul(m.mul(m.exp(m.mul(g, lp), ftz=False), nadd), lq), gam1)
        dneg_back = m.mul(oma, m.exp(m.mul(g1, lp), ftz=False))
        dneg = m.add(dneg_front, dneg_back)
        raw = m.add(m.mul(dpos, m.sub(one, t)), m.mul(dneg, t))
        if inputs.weight is not None:
            raw = m.mul(raw, m.asarray(inputs.weight.reshape(-1)))
        grad = m.mul(raw, d)
        if s.coef is not None:
            grad = m.mul(grad, scalar(s.coef))
        out = store_output(m, grad, inputs.pred.dtype, RNE)
    return out.reshape(inputs.shape)
