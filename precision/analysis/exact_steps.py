"""The exact value of every step of a recipe at one point, certified into the step's format (mpmath).

An operator describes the exact quantities its recipes' steps stand for (``Step.exact``, a function of a
*quantities* object: ``Q.e``, ``Q.p``, ...) and builds that object for one point at a working precision;
:func:`certified_steps` evaluates every step at ``P`` and again at ``P +`` :data:`CHECK_BITS` bits and accepts
a step when both round alike (RNE) into its format, else doubles ``P`` up to :data:`MAX_PREC` (then the step is
reported uncertified).  Local mpmath contexts only (:func:`context`): the global ``mpmath.mp`` is never touched.
Used by :mod:`precision.analysis.attribution` for each step's local error.
"""

from __future__ import annotations

import functools
import math
from typing import Callable

from mpmath import libmp
from mpmath.ctx_mp import MPContext

from precision.exact.certify import escalate

__all__ = ["START_PREC", "CHECK_BITS", "MAX_PREC", "context", "start_prec", "certified_steps", "low_part",
           "mpf_to_float", "LogisticQuantities"]

#: First working precision of the exact values (bits; an operator adds those its arguments need).
START_PREC = 80
#: The second evaluation's extra bits: both must round alike.
CHECK_BITS = 32
#: Working precision after which a step is reported uncertified.
MAX_PREC = 1 << 12


@functools.lru_cache(maxsize=32)
def context(prec: int) -> MPContext:
    """A private mpmath context at ``prec`` bits (never the global ``mpmath.mp``); reused, not mutated."""
    ctx = MPContext()
    ctx.prec = prec
    return ctx


def start_prec(largest_exp_argument: float) -> int:
    """The first working precision: :data:`START_PREC` plus the bits of the largest argument of exp the point's
    quantities take (an absolute error there is a relative one after exp)."""
    big = abs(largest_exp_argument)
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


def certified_steps(steps, fmts: dict, quantities: Callable, start_prec: int) -> dict:
    """Step name -> (mpf value, value rounded into the step's format, certified) for one point.

    ``steps``: the plan's steps (those with ``exact``); ``fmts``: step name -> its format; ``quantities(prec)``:
    the operator's quantities of the point at ``prec`` bits (with a ``ctx`` attribute, its mpmath context);
    ``start_prec``: the first working precision.  The escalation is :func:`precision.exact.certify.escalate`'s;
    a step still undecided at the last precision (past :data:`MAX_PREC` / 2) is reported uncertified.
    """
    out: dict = {}
    pending = [s for s in steps if s.exact is not None]
    cap = max(MAX_PREC, start_prec)

    def attempt(prec: int):
        lo, hi = quantities(prec), quantities(prec + CHECK_BITS)
        last = prec * 2 > cap
        still = []
        for s in pending:
            v1, v2 = _value(s, lo), _value(s, hi)
            r1, r2 = _round(fmts[s.name], v1), _round(fmts[s.name], v2)
            if _same(r1, r2) or last:
                out[s.name] = (v2, r2, _same(r1, r2))
            else:
                still.append(s)
        pending[:] = still
        return out if not pending else None

    return escalate(attempt, start_prec, cap) if pending else out


def low_part(v, hi: float) -> float:
    """``v - hi`` rounded to float64 (0 when ``hi`` is not finite): the exact value as hi + lo."""
    return mpf_to_float(v - v.context.mpf(hi)) if math.isfinite(hi) else 0.0


def mpf_to_float(v) -> float:
    """An mpf rounded to the nearest float64 (infinities and NaN as such)."""
    raw = v._mpf_
    if raw == libmp.finf:
        return math.inf
    if raw == libmp.fninf:
        return -math.inf
    if raw == libmp.fnan:
        return math.nan
    return libmp.to_float(raw, rnd=libmp.round_nearest)


class LogisticQuantities:
    """The exact quantities of the logistic function at one logit ``x`` at ``prec`` bits, lazily (a private
    mpmath context): ``ax = |x|``, ``e = exp(-|x|)``, ``enx = exp(-x)``, ``L = log1p(e)``, ``p = sigmoid(x)``
    and ``q = 1 - p`` (each without cancellation: ``1 / (1 + e)`` or ``e / (1 + e)`` by the sign of x),
    ``lp = ln p``, ``lq = ln q``.  The base of a sigmoid-based operator's step quantities."""

    def __init__(self, x: float, prec: int):
        self.ctx = context(prec)
        self.prec = prec
        self.x = self.ctx.mpf(x)

    @functools.cached_property
    def ax(self):
        return abs(self.x)

    @functools.cached_property
    def e(self):
        return self.ctx.exp(-self.ax)

    @functools.cached_property
    def enx(self):
        return self.ctx.exp(-self.x)

    @functools.cached_property
    def L(self):
        return self.ctx.log1p(self.e)

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
