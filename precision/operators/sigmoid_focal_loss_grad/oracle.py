"""The certified oracle: the exact SigmoidFocalLossGrad gradient, rounded correctly.

The mathematics (spec section 2).  With p = sigmoid(x), q = 1 - p::

    A(x, g) = g * p * q**g * ln(p) - q**(g+1) = q**g * S(x, g),
    S(x, g) = g * p * ln(p) - q                      (the bracket)
    B(x, g) = -A(-x, g)
    grad    = (alpha*(1-t)*A(x, g) + (1-alpha)*t*B(x, g)) * weight * dout / count

for any integer selector t (raw-selector semantics).  Every input is an exact
binary value: pred, weight and dout as given, alpha and gamma as float32
values, 1/count as the exact rational.

How a value is computed (the scalar core, on mpmath's raw ``libmp`` tuples,
never touching the global ``mpmath.mp``).  Let e = exp(-|x|) and
L = log1p(e).  Then, without ever forming 1 - p::

    x >= 0:  p = 1/(1+e),  q = e/(1+e),  ln p = -L,        ln q = -(|x| + L)
    x <  0:  p = e/(1+e),  q = 1/(1+e),  ln p = -(|x| + L), ln q = -L

and q**g = exp(g * ln q).  Each intermediate is carried as a *ball*: a
midpoint (an mpf at working precision ``prec``) and an upper bound on its
relative error (a float64, rounded up by a safety factor).  The bounds follow
the standard first-order-free analysis: mpmath's +, -, *, / are correctly
rounded (relative error <= 2**-prec), exp and log are taken to be within
:data:`FUNCTION_ULPS` ulps; the sum of two balls carries
(|a| r_a + |b| r_b) / |a + b|, which is where cancellation (the roots of A for
gamma < -1, or t outside {0, 1}) shows up.

Certified rounding: the final ball [m (1 - r), m (1 + r)] is rounded into the
target format at both ends; if both ends round to the same value (sign of zero
included) the result is decided.  Otherwise the working precision is doubled,
up to :data:`MAX_PREC` bits, after which the point is reported as unresolved
(NaN from the batch API, :class:`~precision.errors.OracleUndecidedError` from
the scalar API), never returned wrong.  Structural zeros (alpha = 0 with t = 0,
alpha = 1 with t = 1, weight = 0, dout = 0, and the combination of both
selector coefficients vanishing) are returned as exact +0.

Representations returned:

* :func:`gradient` -- correctly rounded values in a format's numpy dtype.
* :func:`exact_gradient` -- the exact value as a double-double ``(hi, lo)``
  pair of float64 arrays with ``|hi + lo - exact| <= 2**-EXACT_BITS |exact|``
  (EXACT_BITS = 64, i.e. 40 bits beyond fp32), plus an int8 ``range_flag``:
  0 in float64's normal range; 1 below it (``hi + lo`` is then within
  2**-1074 absolutely, far below any fp32/fp16 ulp); 2 above it (``hi`` is
  +-inf); 3 unresolved (``hi`` is NaN).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np
from mpmath import libmp

from precision.exact.certify import escalate
from precision.exact.derivation_bounds import EXP_CLAMP as _EXP_CLAMP, EXP_FAR as _EXP_FAR
from precision.errors import OracleUndecidedError, ParameterError
from precision.exact.formats import Format, get_format

__all__ = [
    "ORACLE_VERSION",
    "Ball",
    "focal_term",
    "gradient_ball",
    "round_gradient",
    "gradient",
    "exact_gradient",
    "exact_decimal",
    "broadcast_inputs",
    "RANGE_NORMAL",
    "RANGE_BELOW",
    "RANGE_ABOVE",
    "RANGE_UNRESOLVED",
    "EXP_FAR",
    "EXP_CLAMP",
]

# ---------------------------------------------------------------------------
# Tuning parameters
# ---------------------------------------------------------------------------

#: Bumped whenever a change could alter any returned bit (cache keys use it).
#: 2: focal terms are computed at each (x, gamma)'s own starting
#: precision, so their bits no longer depend on which gammas share a batch.
#: 3: focal terms start TERM_EXTRA_BITS (8) bits above that precision (fewer recomputations).
#: 4: focal terms from the compiled double-double path (oracle_fast), mpmath for the rows it leaves
#: above TERM_REL; rows beyond 2**+-EXP_FAR keep their sign only.
ORACLE_VERSION = "4"

#: First working precision in bits: 40 bits beyond fp32's 24 decide all but
#: about one point in 2**30 away from cancellation.
START_PREC = 64

#: Working precision after which a point is reported unresolved (bits).  The
#: roots of A need about log2(1/relative distance to the root) extra bits; a
#: value a factor 1 - exp(-|x|) off a rounding midpoint needs about 1.44 |x|.
MAX_PREC = 1 << 16

#: Bound on the error of mpmath's exp and log at working precision, in ulps of
#: that precision.  mpmath evaluates them with guard bits and rounds once, so
#: its error is below 1 ulp; 2 leaves a margin.
FUNCTION_ULPS = 2.0

#: Relative safety factor applied to every float64 error-bound computation, so
#: that rounding in the bound arithmetic itself cannot make a bound too small.
BOUND_SAFETY = 1.0 + 2.0**-30

#: Bits of relative accuracy of the exact values returned by exact_gradient.
EXACT_BITS = 64

RANGE_NORMAL, RANGE_BELOW, RANGE_ABOVE, RANGE_UNRESOLVED = 0, 1, 2, 3

#: Focal terms beyond 2**+-EXP_FAR are kept as their sign and side only, with the exponent +-EXP_CLAMP (the term
#: tables' convention, :mod:`precision.exact.derivation_bounds`).
EXP_FAR, EXP_CLAMP = _EXP_FAR, _EXP_CLAMP

_RN, _RF, _RC = libmp.round_nearest, libmp.round_floor, libmp.round_ceiling
_ZERO, _ONE = libmp.fzero, libmp.fone
_FLOAT64_NORMAL_MIN_EXP = -1022  # 2**-1022
_FLOAT64_MAX_EXP = 1024          # values >= 2**1024 overflow float64


# ---------------------------------------------------------------------------
# Balls: an mpf midpoint and a float64 bound on its relative error
# ---------------------------------------------------------------------------

class Ball(NamedTuple):
    """An mpf midpoint (raw libmp tuple) with a relative error bound.

    The exact value v satisfies |v - mid| <= rel * 2**-scale * |mid|: the
    bound is a float64 in units of 2**-scale, so that it can go far below
    float64's range at high working precision (``scale`` is
    :func:`_scale` of the precision, 0 up to 960 bits).  ``rel`` may be +inf
    when nothing is known (then the sign is not known either).
    """

    mid: tuple
    rel: float
    scale: int = 0

    @property
    def true_rel(self) -> float:
        """The relative bound as a float (for comparisons; tiny bounds round up to 2**-1074)."""
        r = math.ldexp(self.rel, -self.scale)
        return r if r or not self.rel else 5e-324

    def to_mpf_bounds(self, prec: int | None = None):
        """Lower and upper bound of the exact value as raw mpf tuples.

        Rounded outward at ``prec`` bits plus 10 (default: the midpoint's own
        bit count, at least 64), so the bounds keep every bit the working
        precision resolved.
        """
        if not math.isfinite(self.rel):
            return libmp.fninf, libmp.finf
        if prec is None:
            prec = max(64, self.mid[3])
        rad = libmp.mpf_mul(libmp.mpf_abs(self.mid), libmp.from_float(self.rel, 53, _RC), prec, _RC)
        rad = libmp.mpf_shift(rad, -self.scale)
        lo = libmp.mpf_sub(self.mid, rad, prec + 10, _RF)
        hi = libmp.mpf_add(self.mid, rad, prec + 10, _RC)
        return lo, hi


#: Working precisions up to this many bits keep their bounds in plain float64.
_SCALE_FREE_BITS = 960


def _scale(prec: int) -> int:
    """The exponent scale of the bounds at working precision ``prec`` (see :class:`Ball`)."""
    return max(0, prec - _SCALE_FREE_BITS)


def _unit(prec: int) -> float:
    """Relative error bound of one correctly rounded mpmath operation, in units of 2**-_scale(prec)."""
    return math.ldexp(1.0, _scale(prec) - prec)


def _up(x: float) -> float:
    return x * BOUND_SAFETY


def _mul_rel(ra: float, rb: float, u: float, scale: int = 0) -> float:
    """Relative error of a rounded product of two balls (all in units of 2**-scale)."""
    cross = math.ldexp(ra * rb, -scale)
    return _up(ra + rb + cross + u * (1.0 + math.ldexp(ra + rb + cross, -scale)))


def _ratio(a: tuple, b: tuple) -> float:
    """|a| / |b| as a float64 rounded up (inf when b is zero or the ratio overflows)."""
    if not b[1]:  # zero
        return math.inf
    r = libmp.mpf_div(libmp.mpf_abs(a), libmp.mpf_abs(b), 30, _RC)
    return _up(libmp.to_float(r, rnd=_RC)) if r[2] + r[3] < 1000 else math.inf


def _sum_ball(a: tuple, ra: float, b: tuple, rb: float, prec: int, u: float) -> Ball:
    """Rounded sum of two balls; the bound grows with cancellation."""
    scale = _scale(prec)
    s = libmp.mpf_add(a, b, prec, _RN)
    if ra == 0.0 and rb == 0.0:
        # both exact: only the rounding of the sum
        return Ball(s, 0.0 if s == _ZERO else u, scale)
    if s == _ZERO:
        return Ball(s, math.inf, scale)
    rel = 0.0
    if ra:
        rel += _ratio(a, s) * ra
    if rb:
        rel += _ratio(b, s) * rb
    return Ball(s, _up(rel * (1.0 + u) + u), scale)


# ---------------------------------------------------------------------------
# The scalar core
# ---------------------------------------------------------------------------

def _log1p_ball(e: tuple, re: float, prec: int) -> Ball:
    """L = log(1 + e) for 0 < e <= 1 given as a ball, without losing e's bits."""
    u = _unit(prec)
    uf = FUNCTION_ULPS * u
    scale = _scale(prec)
    mag = e[2] + e[3]  # e < 2**mag
    if mag < -(prec + 4):
        # log1p(e) = e (1 - e/2 + ...): relative gap to e below e/2 < 2**-(prec+5)
        gap = math.ldexp(1.0, max(mag - 1 + scale, -1070))
        return Ball(e, _up(re + gap + re * math.ldexp(1.0, max(mag, -1070))), scale)
    s = libmp.mpf_add(_ONE, e, 0)  # 1 + e, exact (at most 2 prec + 8 bits)
    L = libmp.mpf_log(s, prec, _RN)
    # s inherits the relative error rho = e re / (1 + e) of e, so |log(s (1 + d)) - log s| <=
    # rho / (1 - rho) absolutely; relative to L >= e / (1 + e) that is at most re / (1 - rho)
    rho_true = math.ldexp(re, -scale)
    if rho_true >= 0.5:
        return Ball(L, math.inf, scale)
    return Ball(L, _up(re / (1.0 - rho_true) * (1.0 + math.ldexp(uf, -scale)) + uf), scale)


#: Below this e, D = log1p(e) - e is summed as its alternating series.
_SERIES_BELOW_EXP = -8


def _log1p_minus_ball(e: tuple, re: float, L: Ball, prec: int) -> Ball:
    """D = log(1 + e) - e (negative, about -e**2/2) as a ball, for 0 < e <= 1.

    For e < 2**-8 the series -e**2/2 + e**3/3 - ... is summed at ``prec + 8``
    bits until the first omitted term is below 2**-(prec+4) |D| (its error
    bound, the series being alternating with decreasing terms); e's relative
    error enters about twice (D ~ e**2).  Otherwise D = L - e directly (a
    cancellation of at most 10 bits, which the ball bound records).
    """
    u = _unit(prec)
    scale = _scale(prec)
    mag = e[2] + e[3]
    if mag >= _SERIES_BELOW_EXP:
        return _sum_ball(L.mid, L.rel, libmp.mpf_neg(e), re, prec, u)
    wp = prec + 8
    power = libmp.mpf_mul(e, e, wp, _RN)  # e**k
    total = libmp.mpf_neg(libmp.mpf_shift(power, -1))
    k = 2
    limit = -(prec + 4) + 2 * mag - 2  # |D| >= e**2 / 3 > 2**(2 mag - 3)
    while True:
        k += 1
        power = libmp.mpf_mul(power, e, wp, _RN)
        if power[2] + power[3] - (k.bit_length() - 1) < limit:
            break
        term = libmp.mpf_div(power, libmp.from_int(k), wp, _RN)
        total = libmp.mpf_add(total, term if k % 2 else libmp.mpf_neg(term), wp, _RN)
    # truncation <= 2**-(prec+4) |D|; roundings: 3 per term at wp on terms summing to < 2 |D|
    rounding = 6.0 * k * math.ldexp(1.0, scale - wp) + math.ldexp(1.0, scale - prec - 4)
    return Ball(total, _up(2.0 * re * (1.0 + 2.0 * math.ldexp(re, -scale)) + rounding), scale)


class _SigmoidParts:
    """What A(x, g) and A(-x, g) share for every g: e = exp(-|x|), L = log1p(e), 1 + e."""

    __slots__ = ("ax", "e", "re", "L", "one_plus_e", "r_div", "prec", "u", "scale", "_D")

    def __init__(self, ax: tuple, prec: int):
        self.prec = prec
        self.u = u = _unit(prec)
        self.scale = scale = _scale(prec)
        self.ax = ax
        self.e = libmp.mpf_exp(libmp.mpf_neg(ax), prec, _RN)  # rel <= FUNCTION_ULPS u
        self.re = FUNCTION_ULPS * u
        self.L = _log1p_ball(self.e, self.re, prec)
        self.one_plus_e = libmp.mpf_add(_ONE, self.e, prec, _RN)
        r1e = _up(self.re + u)  # relative error of 1 + e: e re / (1 + e) + u
        r1e_true = math.ldexp(r1e, -scale)
        self.r_div = r1e / (1.0 - r1e_true) if r1e_true < 0.5 else math.inf  # of 1 / (1 + e), before rounding
        self._D = None

    @property
    def D(self) -> Ball:
        if self._D is None:
            self._D = _log1p_minus_ball(self.e, self.re, self.L, self.prec)
        return self._D


def _focal_from_parts(parts: _SigmoidParts, nonnegative: bool, G: tuple, gamma: float) -> Ball:
    """A(x, g) from the shared parts of |x|; ``nonnegative`` is x >= 0."""
    prec, u, scale = parts.prec, parts.u, parts.scale
    uf = FUNCTION_ULPS * u
    ax, e, re, Lb = parts.ax, parts.e, parts.re, parts.L
    # ln q = -(|x| + L) for x >= 0, -L for x < 0 (a same-sign sum: its bound is L's plus rounding)
    if nonnegative:
        lnq = libmp.mpf_neg(libmp.mpf_add(ax, Lb.mid, prec, _RN))
        r_lnq = _up(Lb.rel + u)
    else:
        lnq, r_lnq = libmp.mpf_neg(Lb.mid), Lb.rel

    # q**g = exp(g ln q)
    y = libmp.mpf_mul(G, lnq, prec, _RN)
    if y == _ZERO:
        qg, r_qg = _ONE, 0.0
    else:
        # the argument's absolute error dy (in units of 2**-scale) becomes the relative error
        # expm1(dy) of exp; expm1(d) <= d (1 + d) for d <= 1
        dy = _up(libmp.to_float(libmp.mpf_abs(y), rnd=_RC) * _up(r_lnq + u + math.ldexp(r_lnq * u, -scale)))
        dy_true = math.ldexp(dy, -scale)
        qg = libmp.mpf_exp(y, prec, _RN)
        if dy_true <= 2.0**-30:
            r_qg = _up(dy * (1.0 + dy_true) + uf)
        elif dy_true < 700:
            r_qg = _up(math.ldexp(math.expm1(dy_true), scale) + uf)
        else:
            r_qg = math.inf

    # the bracket's numerator N, so that S = N / (1 + e)
    if G == _ZERO:
        # S = -q: N = -e (x >= 0) or -1 (x < 0)
        N = Ball(libmp.mpf_neg(e), re, scale) if nonnegative else Ball(libmp.mpf_neg(_ONE), 0.0, scale)
    elif nonnegative:
        if gamma > 0:
            gL = libmp.mpf_mul(G, Lb.mid, prec, _RN)
            s = libmp.mpf_add(gL, e, prec, _RN)  # both positive
            N = Ball(libmp.mpf_neg(s), _up(max(Lb.rel, re) + 2 * u), scale)
        else:
            D = parts.D
            gD = libmp.mpf_mul(G, D.mid, prec, _RN)
            g1e = libmp.mpf_mul(libmp.mpf_add(G, _ONE, 0), e, prec, _RN)
            total = _sum_ball(gD, _up(D.rel + u), g1e, _up(re + u), prec, u)
            N = Ball(libmp.mpf_neg(total.mid), total.rel, scale)
    else:
        lnp = libmp.mpf_neg(libmp.mpf_add(ax, Lb.mid, prec, _RN))
        r_lnp = _up(Lb.rel + u)
        t1 = libmp.mpf_mul(libmp.mpf_mul(G, e, prec, _RN), lnp, prec, _RN)
        N = _sum_ball(t1, _mul_rel(_up(re + u), r_lnp, u, scale), libmp.mpf_neg(_ONE), 0.0, prec, u)
    S = libmp.mpf_div(N.mid, parts.one_plus_e, prec, _RN)
    r_S = _mul_rel(N.rel, parts.r_div, u, scale)
    A = libmp.mpf_mul(qg, S, prec, _RN)
    return Ball(A, _mul_rel(r_qg, r_S, u, scale), scale)


def focal_term(x: float, gamma: float, prec: int) -> Ball:
    """A(x, gamma) = q**gamma * (gamma p ln p - q) as a ball at ``prec`` bits.

    Parameters
    ----------
    x, gamma : float
        Exact binary values (gamma is a float32 value in the operator).
    prec : int
        Working precision in bits.

    Returns
    -------
    Ball
        Midpoint and relative error bound of A(x, gamma).  B(x, g) is
        ``-A(-x, g)``.

    Notes
    -----
    With e = exp(-|x|) and L = log1p(e), the bracket S = g p ln p - q is
    formed without a cancellation the mathematics does not have:

    * x >= 0: S = -N / (1 + e) with N = g L + e; for g < 0 this is rewritten
      N = g D + (g + 1) e with D = L - e (about -e**2/2, see
      :func:`_log1p_minus_ball`), whose two terms share a sign unless
      g < -1, where A has a true root;
    * x < 0: S = (g e ln p - 1) / (1 + e) with ln p = -(|x| + L).
    """
    parts = _SigmoidParts(libmp.mpf_abs(libmp.from_float(x)), prec)
    return _focal_from_parts(parts, x >= 0, libmp.from_float(gamma), gamma)


@functools.lru_cache(maxsize=4096)
def _selector_coefficients(alpha: float, t: int) -> tuple[tuple, tuple]:
    """Exact c0 = alpha (1 - t) and c1 = -(1 - alpha) t, so grad ~ c0 A(x) + c1 A(-x)."""
    a = libmp.from_float(alpha)
    T = libmp.from_int(int(t))
    c0 = libmp.mpf_mul(a, libmp.mpf_sub(_ONE, T, 0), 0)
    c1 = libmp.mpf_neg(libmp.mpf_mul(libmp.mpf_sub(_ONE, a, 0), T, 0))
    return c0, c1


def gradient_ball(x: float, t: int, alpha: float, gamma: float, weight: float = 1.0,
                  dout: float = 1.0, count: int = 1, prec: int = START_PREC,
                  terms: dict | None = None) -> Ball:
    """The exact gradient at one point as a ball at ``prec`` bits.

    ``terms`` optionally maps ``(sign, prec)`` to precomputed
    ``focal_term(sign * x, gamma, prec)`` balls (reuse across alpha, t, weight,
    dout, count).  Structural zeros come back as ``Ball(fzero, 0.0)``.
    """
    u = _unit(prec)
    c0, c1 = _selector_coefficients(alpha, t)
    wd = libmp.mpf_mul(libmp.from_float(weight), libmp.from_float(dout), 0)
    if wd == _ZERO or (c0 == _ZERO and c1 == _ZERO):
        return Ball(_ZERO, 0.0)
    parts = []
    for sign, c in ((1, c0), (-1, c1)):
        if c == _ZERO:
            continue
        key = (sign, prec)
        if terms is not None and key in terms:
            term = terms[key]
        else:
            term = focal_term(sign * x, gamma, prec)
            if terms is not None:
                terms[key] = term
        parts.append(Ball(libmp.mpf_mul(c, term.mid, prec, _RN), _up(term.rel * (1.0 + u) + u), term.scale))
    if len(parts) == 1:
        raw = parts[0]
    else:
        raw = _sum_ball(parts[0].mid, parts[0].rel, parts[1].mid, parts[1].rel, prec, u)
    scaled = libmp.mpf_mul(raw.mid, wd, prec, _RN)
    r = _up(raw.rel * (1.0 + u) + u)
    if count != 1:
        scaled = libmp.mpf_div(scaled, libmp.from_int(int(count)), prec, _RN)
        r = _up(r * (1.0 + u) + u)
    return Ball(scaled, r, _scale(prec))


def _decided(ball: Ball, fmt: Format):
    """The correctly rounded value if the ball decides it, else None."""
    if ball.rel == 0.0:
        return fmt.round_mpf(ball.mid)
    if not (ball.true_rel < 0.5):
        return None
    lo, hi = ball.to_mpf_bounds()
    a, b = fmt.round_mpf(lo), fmt.round_mpf(hi)
    if a == b and math.copysign(1.0, a) == math.copysign(1.0, b):
        return a
    return None


def _initial_prec(x: float, gamma: float) -> int:
    """Start with enough bits to absorb |gamma x| in the argument of exp."""
    big = abs(gamma * x) + abs(x)
    extra = math.frexp(big)[1] if big >= 1 else 0
    return START_PREC + max(0, extra)


def round_gradient(x: float, t: int, alpha: float, gamma: float, weight: float = 1.0,
                   dout: float = 1.0, count: int = 1, fmt="fp32", terms: dict | None = None) -> float:
    """The exact gradient at one point, correctly rounded (RNE) into ``fmt``.

    ``terms`` optionally shares focal terms between calls with the same
    (x, gamma) (see :func:`gradient_ball`).

    Raises
    ------
    OracleUndecidedError
        When the rounding is still undecided at :data:`MAX_PREC` bits.
    """
    fmt = get_format(fmt)
    terms = {} if terms is None else terms

    def attempt(prec):
        return _decided(gradient_ball(x, t, alpha, gamma, weight, dout, count, prec, terms), fmt)

    value = escalate(attempt, _initial_prec(x, gamma), MAX_PREC)
    if value is None:
        raise OracleUndecidedError(
            f"rounding to {fmt.name} undecided at {MAX_PREC} bits for x={float(x).hex()}, "
            f"t={t}, alpha={float(alpha).hex()}, gamma={float(gamma).hex()}, "
            f"weight={float(weight).hex()}, dout={float(dout).hex()}, count={count}"
        )
    return value


def _exact_ball(x, t, alpha, gamma, weight, dout, count) -> Ball | None:
    """A ball with relative error below 2**-EXACT_BITS, or None at the cap."""
    terms: dict = {}

    def attempt(prec):
        ball = gradient_ball(x, t, alpha, gamma, weight, dout, count, prec, terms)
        if ball.rel <= math.ldexp(1.0, ball.scale - EXACT_BITS):
            return ball
        # a value far outside float64's range only needs its range decided
        if ball.true_rel < 0.5 and ball.mid != _ZERO:
            mag = ball.mid[2] + ball.mid[3]
            if mag > _FLOAT64_MAX_EXP + 1 or mag < -1100:
                return ball
        return None

    return escalate(attempt, _initial_prec(x, gamma) + EXACT_BITS - 40, MAX_PREC)


def exact_decimal(x: float, t: int, alpha: float, gamma: float, weight: float = 1.0,
                  dout: float = 1.0, count: int = 1, digits: int = 40) -> str:
    """The exact gradient to ``digits`` significant decimal digits (for display).

    The ball is tightened until its relative error is below 10**-(digits+2),
    so the printed digits are those of the exact value up to the last one.
    """
    terms: dict = {}

    def attempt(prec):
        ball = gradient_ball(x, t, alpha, gamma, weight, dout, count, prec, terms)
        if ball.rel == 0.0 and ball.mid == _ZERO:
            return "0"
        if ball.true_rel <= 10.0 ** -(digits + 2):
            return libmp.to_str(ball.mid, digits)
        return None

    text = escalate(attempt, _initial_prec(x, gamma) + int(digits * 3.33) + 16, MAX_PREC)
    if text is None:
        raise OracleUndecidedError(f"exact value undecided at {MAX_PREC} bits for x={float(x).hex()}")
    return text


# ---------------------------------------------------------------------------
# Batch API over numpy arrays
# ---------------------------------------------------------------------------

def broadcast_inputs(pred, target, alpha, gamma, weight, dout, count):
    """Broadcast and validate the batch inputs of an oracle.

    Returns (x, t, alpha, gamma, weight, dout, count) arrays: float64 holding
    the exact inputs (alpha and gamma rounded to float32 first), int64 for t
    and count.  Raises ParameterError naming the first bad input.
    """
    x = np.asarray(pred)
    if x.dtype.kind != "f":
        raise ParameterError(f"pred dtype={x.dtype}; expected a float dtype holding exact values")
    t = np.asarray(target)
    if t.dtype.kind not in "iub":
        if t.dtype.kind == "f" and np.all(np.isfinite(t)) and np.all(t == np.trunc(t)):
            t = t.astype(np.int64)
        else:
            raise ParameterError(f"target dtype={t.dtype}; expected integer selector values")
    with np.errstate(over="ignore"):
        a32 = np.asarray(alpha, dtype=np.float32)
        g32 = np.asarray(gamma, dtype=np.float32)
    w = np.asarray(weight)
    d = np.asarray(dout)
    n = np.asarray(count)
    if n.dtype.kind not in "iu" and not (n.dtype.kind == "f" and np.all(n == np.trunc(n))):
        raise ParameterError(f"count={count!r}; expected a positive integer (N*C for mean, 1 otherwise)")
    for name, arr in (("weight", w), ("dout", d)):
        if arr.dtype.kind not in "fiub":
            raise ParameterError(f"{name} dtype={arr.dtype}; expected float values")
    arrays = np.broadcast_arrays(
        x.astype(np.float64), t.astype(np.int64), a32.astype(np.float64), g32.astype(np.float64),
        w.astype(np.float64), d.astype(np.float64), n.astype(np.int64))
    names = ("pred", "target", "alpha", "gamma", "weight", "dout", "count")
    for name, arr in zip(names, arrays):
        if arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            bad = arr[~np.isfinite(arr)].flat[0]
            raise ParameterError(f"{name} holds {bad}; the exact gradient is defined for finite inputs only")
    if np.any(arrays[6] <= 0):
        raise ParameterError(f"count={arrays[6][arrays[6] <= 0].flat[0]}; expected a positive integer")
    return arrays


def gradient(pred, target, alpha, gamma, weight=1.0, dout=1.0, count=1, fmt="fp32") -> np.ndarray:
    """Correctly rounded exact gradients over broadcast numpy inputs.

    Parameters
    ----------
    pred, weight, dout : array_like of float
        Exact binary values (any float dtype: fp16, bf16, fp32 or fp64).
    target : array_like of int
        Raw selectors (any integers).
    alpha, gamma : float or array_like
        Attribute values; converted to float32 (RNE), which defines them.
    count : int or array_like of int
        N*C for reduction "mean" (coef = exact 1/count), 1 for "sum"/"none".
    fmt : {"fp16", "bf16", "fp32", "fp64"}
        Output format.

    Returns
    -------
    numpy.ndarray
        In ``fmt``'s dtype, shaped like the broadcast inputs: the exact
        gradient rounded to nearest-even with gradual underflow and overflow
        to inf; a value rounding to zero keeps the exact value's sign, an
        exact (structural) zero is +0; a point undecided at MAX_PREC bits is
        NaN (never a wrong value).

    Notes
    -----
    Points sharing (x, gamma, t) reuse their focal terms; one Python-level
    evaluation per distinct point (the oracle is the one place with a loop).
    """
    fmt = get_format(fmt)
    x, t, a, g, w, d, n = broadcast_inputs(pred, target, alpha, gamma, weight, dout, count)
    out = np.empty(x.shape, dtype=np.float64)
    flat = [arr.ravel() for arr in (x, t, a, g, w, d, n)]
    keys = np.stack([arr.view(np.int64) if arr.dtype == np.float64 else arr for arr in flat], axis=1)
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    values = np.empty(len(uniq), dtype=np.float64)
    columns = [np.ascontiguousarray(uniq[:, k]) for k in range(7)]
    columns = [c.view(np.float64).tolist() if k not in (1, 6) else c.tolist() for k, c in enumerate(columns)]
    term_cache: dict = {}
    for i, (xi, ti, ai, gi, wi, di, ni) in enumerate(zip(*columns)):
        try:
            values[i] = round_gradient(xi, ti, ai, gi, wi, di, ni, fmt, term_cache.setdefault((xi, gi), {}))
        except OracleUndecidedError:
            values[i] = np.nan
    out.ravel()[:] = values[inverse.ravel()]
    return out.astype(fmt.dtype)


def exact_gradient(pred, target, alpha, gamma, weight=1.0, dout=1.0, count=1):
    """Exact gradients as double-double ``(hi, lo, range_flag)`` float64/int8 arrays.

    ``hi + lo`` is within 2**-64 relative of the exact value when
    ``range_flag == RANGE_NORMAL``; see the module docstring for the flags.
    ``hi`` is the exact value rounded to nearest float64 and
    ``lo`` the float64 nearest to the remainder.
    """
    x, t, a, g, w, d, n = broadcast_inputs(pred, target, alpha, gamma, weight, dout, count)
    hi = np.empty(x.shape, dtype=np.float64)
    lo = np.empty(x.shape, dtype=np.float64)
    flag = np.empty(x.shape, dtype=np.int8)
    for idx in np.ndindex(x.shape):
        ball = _exact_ball(float(x[idx]), int(t[idx]), float(a[idx]), float(g[idx]),
                           float(w[idx]), float(d[idx]), int(n[idx]))
        if ball is None:
            hi[idx], lo[idx], flag[idx] = np.nan, np.nan, RANGE_UNRESOLVED
            continue
        h = libmp.to_float(ball.mid, rnd=_RN)
        mag = ball.mid[2] + ball.mid[3] if ball.mid != _ZERO else -10**9
        if math.isinf(h) or mag > _FLOAT64_MAX_EXP:
            hi[idx], lo[idx], flag[idx] = (-math.inf if ball.mid[0] else math.inf), 0.0, RANGE_ABOVE
            continue
        rest = libmp.mpf_sub(ball.mid, libmp.from_float(h), 64, _RN)
        hi[idx], lo[idx] = h, libmp.to_float(rest, rnd=_RN)
        flag[idx] = RANGE_BELOW if (ball.mid != _ZERO and mag - 1 < _FLOAT64_NORMAL_MIN_EXP) else RANGE_NORMAL
        if ball.mid == _ZERO:
            hi[idx] = 0.0
    return hi, lo, flag
