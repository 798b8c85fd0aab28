"""The exact value of every step of a SigmoidFocalLossGrad recipe at one point (mpmath), certified.

Each named quantity of the operator's formula (``Q.e`` = exp(-|x|), ``Q.p``,
``Q.q``, the logs, the powers, ...) is computed at :data:`START_PREC` bits and
again at :data:`CHECK_BITS` more; a step is certified when both round alike in
its format, else the precision doubles up to :data:`MAX_PREC`.  Used by
:mod:`precision.operators.sigmoid_focal_loss_grad.attribution` for each step's local error.
"""

from __future__ import annotations

import functools
import math

from mpmath import libmp
from mpmath.ctx_mp import MPContext

from precision.operators.sigmoid_focal_loss_grad import oracle

__all__ = ["START_PREC", "CHECK_BITS", "MAX_PREC", "exact_point", "low_part", "mpf_to_float"]


#: First working precision of the exact values (bits; plus those of |gamma x| + |x|).
START_PREC = 80
#: The second evaluation's extra bits: both must round alike.
CHECK_BITS = 32
#: Working precision after which a step is reported uncertified.
MAX_PREC = 1 << 12


@functools.lru_cache(maxsize=32)
def _context(prec: int) -> MPContext:
    """A private mpmath context at ``prec`` bits (never the global ``mpmath.mp``); reused, not mutated."""
    ctx = MPContext()
    ctx.prec = prec
    return ctx


class _Quantities:
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
        self.ctx = ctx = _context(prec)
        self.prec = prec
        self.fmt = fmt
        xf, t, a, g, w, d, n = point
        self._point = point
        self.x, self.a, self.g = ctx.mpf(xf), ctx.mpf(a), ctx.mpf(g)
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
    def ax(self):
        return abs(self.x)

    @functools.cached_property
    def e(self):
        return self.ctx.exp(-self.ax)

    @functools.cached_property
    def ed(self):
        return self.ctx.exp(self.ax)

    @functools.cached_property
    def enx(self):
        return self.ctx.exp(-self.x)

    @functools.cached_property
    def L(self):
        return self.ctx.log1p(self.e)

    @functools.cached_property
    def z(self):
        return self.e / (2 + self.e)

    @functools.cached_property
    def p(self):
        return 1 / (1 + self.e) if self.x >= 0 else self.e / (1 + self.e)

    @functools.cached_property
    def q(self):
        return self.e / (1 + self.e) if self.x >= 0 else 1 / (1 + self.e)

    @functools.cached_property
    def lp(self):
        return -self.L if self.x >= 0 else -(self.ax + self.L)

    @functools.cached_property
    def lq(self):
        return -(self.ax + self.L) if self.x >= 0 else -self.L

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


def _start_prec(x: float, gamma: float) -> int:
    big = abs(gamma * x) + abs(x)
    return START_PREC + (math.frexp(big)[1] if big >= 1 else 0)


def _value(step, Q):
    """The step's exact value as an mpf (inf for a division by an exact zero)."""
    try:
        v = step.exact(Q)
    except ZeroDivisionError:
        return Q.ctx.inf
    return v if hasattr(v, "_mpf_") else Q.ctx.mpf(v)


def _round(fmt, v) -> float:
    """An exact value rounded (RNE) into ``fmt`` (infinities and NaN pass through)."""
    raw = v._mpf_
    if raw in (libmp.finf, libmp.fninf, libmp.fnan):
        return mpf_to_float(v)
    return fmt.round_mpf(raw)


def _same(a: float, b: float) -> bool:
    return (a == b and math.copysign(1.0, a) == math.copysign(1.0, b)) or (a != a and b != b)


def exact_point(steps, fmts, point, compute_fmt) -> dict:
    """Step name -> (mpf value, value rounded into the step's format, certified) for one point."""
    out = {}
    pending = [s for s in steps if s.exact is not None]
    prec = _start_prec(point[0], point[3])
    while pending:
        lo, hi = _Quantities(point, prec, compute_fmt), _Quantities(point, prec + CHECK_BITS, compute_fmt)
        still = []
        for s in pending:
            v1, v2 = _value(s, lo), _value(s, hi)
            r1, r2 = _round(fmts[s.name], v1), _round(fmts[s.name], v2)
            if _same(r1, r2):
                out[s.name] = (v2, r2, True)
            elif prec * 2 > MAX_PREC:
                out[s.name] = (v2, r2, False)
            else:
                still.append(s)
        pending = still
        prec *= 2
    return out


def low_part(v, hi: float) -> float:
    """``v - hi`` rounded to float64 (0 when ``hi`` is not finite): the exact value as hi + lo."""
    return mpf_to_float(v - v.context.mpf(hi)) if math.isfinite(hi) else 0.0


def mpf_to_float(v) -> float:
    raw = v._mpf_
    if raw == libmp.finf:
        return math.inf
    if raw == libmp.fninf:
        return -math.inf
    if raw == libmp.fnan:
        return math.nan
    return libmp.to_float(raw, rnd=libmp.round_nearest)
