"""The exact quantities of a SigmoidFocalLoss recipe's steps at one point (mpmath), for step attribution.

For a point ``(x, t, alpha, gamma, weight or None)`` at one working precision, every real number a step of
:mod:`.recipes` stands for (its ``Step.exact``): ``e = exp(-|x|)``, ``u = 1 + e``, ``p = sigmoid(x)`` and
``q = 1 - p`` each without cancellation (``e / u`` or ``1 / u`` by the sign of x), ``L = log1p(e)``, the BCE
``max(x, 0) - x t + L``, the focal base ``1 - p_t = q t + p (1 - t)``, its power ``base^gamma`` (1 for gamma 0),
``a_t = t alpha + (1 - t)(1 - alpha)`` (exact: the host's RN(1 - alpha) shows as that step's local error) and
the loss.  :func:`exact_point` certifies each into its format with the generic loop
(:func:`precision.analysis.exact_steps.certified_steps`), starting at its precision plus the bits of
``|gamma x| + |x|`` (the arguments of exp).
"""

from __future__ import annotations

import functools

from precision.analysis.exact_steps import LogisticQuantities, certified_steps, start_prec

__all__ = ["Quantities", "exact_point"]


class Quantities(LogisticQuantities):
    """The exact quantities of one point at one working precision (lazy; a private mpmath context): the
    logistic function's (:class:`~precision.analysis.exact_steps.LogisticQuantities`) and the loss's."""

    def __init__(self, point: tuple, prec: int):
        x, t, a, g, w = point
        super().__init__(x, prec)
        ctx = self.ctx
        self.t, self.a, self.g = ctx.mpf(t), ctx.mpf(a), ctx.mpf(g)
        self.w = ctx.mpf(1 if w is None else w)

    @functools.cached_property
    def u(self):
        return 1 + self.e

    @functools.cached_property
    def pos(self):
        return 1 / self.u

    @functools.cached_property
    def neg(self):
        return self.e / self.u

    @functools.cached_property
    def mx(self):
        return max(self.x, self.ctx.zero)

    @functools.cached_property
    def b1(self):
        return self.mx - self.x * self.t

    @functools.cached_property
    def bce(self):
        return self.b1 + self.L

    @functools.cached_property
    def pt(self):
        """p_t = p t + q (1 - t): the probability of the true class."""
        return self.p * self.t + self.q * (1 - self.t)

    @functools.cached_property
    def base(self):
        """1 - p_t = q t + p (1 - t), without cancellation."""
        return self.q * self.t + self.p * (1 - self.t)

    @functools.cached_property
    def pw(self):
        return self.ctx.one if self.g == 0 else self.ctx.exp(self.g * self.ctx.log(self.base))

    @functools.cached_property
    def at(self):
        return self.t * self.a + (1 - self.t) * (1 - self.a)

    @functools.cached_property
    def la(self):
        return self.bce * self.at

    @functools.cached_property
    def loss(self):
        return self.la * self.pw

    @functools.cached_property
    def lw(self):
        return self.loss * self.w


def exact_point(steps, fmts, point, compute_fmt) -> dict:
    """Step name -> (mpf value, value rounded into the step's format, certified) for one point
    ``(x, t, alpha, gamma, weight or None)`` (``compute_fmt`` unused: no quantity rounds into it)."""
    x, gamma = point[0], point[3]
    return certified_steps(steps, fmts, lambda prec: Quantities(point, prec), start_prec(abs(gamma * x) + abs(x)))
