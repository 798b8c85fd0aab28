"""The exact quantities of a SigmoidFocalLossGrad recipe's steps at one point (mpmath).

Each named quantity of the operator's formula (``Q.e`` = exp(-|x|), ``Q.p``, ``Q.q``, the logs, the powers,
...) for one point at one working precision; :func:`exact_point` certifies every step's value into its format
with the generic loop (:func:`precision.analysis.exact_steps.certified_steps`), starting at
:data:`~precision.analysis.exact_steps.START_PREC` plus the bits of ``|gamma x| + |x|`` (the arguments of exp).
Used by :mod:`precision.operators.sigmoid_focal_loss_grad.attribution` for each step's local error.
"""

from __future__ import annotations

import functools

from precision.analysis.exact_steps import LogisticQuantities, certified_steps, start_prec
from precision.operators.sigmoid_focal_loss_grad import oracle

__all__ = ["Quantities", "exact_point"]


class Quantities(LogisticQuantities):
    """The exact quantities of one point at one working precision (lazy, mpmath local context).

    Attribute names are those the recipe tables use in ``Step.exact``:
    ``x t a g g1 w d n`` (inputs; ``g1 = g + 1`` exactly), ``ax e ed enx``
    (``|x|``, ``exp(-|x|)``, ``exp(|x|)``, ``exp(-x)``), ``p q lp lq`` and
    the powers ``pg pg1 qg qg1``, ``L z`` (``log1p(e)``, ``e / (2 + e)``),
    the focal terms ``A_pos = A(x)``, ``A_neg = A(-x)``, ``A_abs = A(|x|)``,
    ``A_nabs = A(-|x|)``, ``dpos = a A(x)``, ``dneg = -(1-a) A(-x)``, and
    ``raw weighted scaled grad`` (oracle balls), ``c0 c1 vs vb`` (the
    candidate's coefficients and terms); ``rn(v)`` rounds into the compute
    format.
    """

    def __init__(self, point: tuple, prec: int, fmt):
        xf, t, a, g, w, d, n = point
        super().__init__(xf, prec)
        ctx = self.ctx
        self.fmt = fmt
        self._point = point
        self.a, self.g = ctx.mpf(a), ctx.mpf(g)
        self.w = ctx.mpf(1 if w is None else w)
        self.d, self.t, self.n = ctx.mpf(d), ctx.mpf(t), ctx.mpf(n)

    def rn(self, v):
        """v rounded into the compute format (an mpf holding a format value)."""
        return self.ctx.mpf(self.fmt.round_mpf(self.ctx.mpf(v)._mpf_))

    def _mpf(self, raw):
        return self.ctx.make_mpf(raw)

    @functools.cached_property
    def g1(self):
        return self.g + 1

    @functools.cached_property
    def ed(self):
        return self.ctx.exp(self.ax)

    @functools.cached_property
    def z(self):
        return self.e / (2 + self.e)

    @functools.cached_property
    def pg(self):
        return self.ctx.exp(self.g * self.lp)

    @functools.cached_property
    def pg1(self):
        return self.ctx.exp(self.g1 * self.lp)

    @functools.cached_property
    def qg(self):
        return self.ctx.exp(self.g * self.lq)

    @functools.cached_property
    def qg1(self):
        return self.ctx.exp(self.g1 * self.lq)

    def _focal(self, sign):
        xf, gamma = self._point[0], self._point[3]
        return self._mpf(oracle.focal_term(sign * xf, gamma, self.prec).mid)

    @functools.cached_property
    def A_pos(self):
        return self._focal(1)

    @functools.cached_property
    def A_neg(self):
        return self._focal(-1)

    @functools.cached_property
    def A_abs(self):
        return self.A_pos if self.x >= 0 else self.A_neg

    @functools.cached_property
    def A_nabs(self):
        return self.A_neg if self.x >= 0 else self.A_pos

    @functools.cached_property
    def dpos(self):
        return self.a * self.A_pos

    @functools.cached_property
    def dneg(self):
        return -(1 - self.a) * self.A_neg

    def _ball(self, weight, dout, count):
        xf, t, a, g = self._point[:4]
        return self._mpf(oracle.gradient_ball(xf, t, a, g, weight, dout, count, self.prec).mid)

    @functools.cached_property
    def raw(self):
        return self._ball(1.0, 1.0, 1)

    @functools.cached_property
    def weighted(self):
        w = self._point[4]
        return self.raw if w is None else self._ball(w, 1.0, 1)

    @functools.cached_property
    def scaled(self):
        w = self._point[4]
        return self._ball(1.0 if w is None else w, self._point[5], 1)

    @functools.cached_property
    def grad(self):
        w = self._point[4]
        return self._ball(1.0 if w is None else w, self._point[5], self._point[6])

    @functools.cached_property
    def c0(self):
        return self.a * self.w * self.d * (1 - self.t) / self.n

    @functools.cached_property
    def c1(self):
        return -(1 - self.a) * self.w * self.d * self.t / self.n

    @functools.cached_property
    def vs(self):
        return (self.c0 if self.x >= 0 else self.c1) * self.A_abs

    @functools.cached_property
    def vb(self):
        return (self.c1 if self.x >= 0 else self.c0) * self.A_nabs


def exact_point(steps, fmts, point, compute_fmt) -> dict:
    """Step name -> (mpf value, value rounded into the step's format, certified) for one point
    ``(x, t, alpha, gamma, weight or None, dout, count)``."""
    return certified_steps(steps, fmts, lambda prec: Quantities(point, prec, compute_fmt),
                           start_prec(abs(point[3] * point[0]) + abs(point[0])))
