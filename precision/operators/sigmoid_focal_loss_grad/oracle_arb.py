"""A second, independent certified oracle on Arb ball arithmetic (python-flint).

Same interface as :mod:`precision.operators.sigmoid_focal_loss_grad.oracle` (the mpmath oracle), written
independently of it: it shares no code with that module, only the
mathematics of spec section 2 and the :class:`~precision.exact.formats.Format`
descriptions (precision and exponent range).  Install with
``pip install 'precision[arb]'`` (python-flint >= 0.6).

The mathematics.  With p = sigmoid(x), q = 1 - p, for any integer selector t::

    A(x, g) = g p q**g ln p - q**(g+1)
    grad    = (alpha (1 - t) A(x, g) - (1 - alpha) t A(-x, g)) * weight * dout / count

(B(x, g) = -A(-x, g)).  Let a = |x|, e = exp(-a) and L = log1p(e); then
without forming 1 - p, and with A = q**g * N / (1 + e)::

    x >= 0:  ln q = -(a + L),  N = -(g L + e)
    x <  0:  ln q = -L,        N = -g e (a + L) - 1
    q**g = exp(g ln q)

and for x >= 0, g < 0 the sum g L + e (which cancels down to ~e**2 at
g = -1) is rewritten ``g (L - e) + (g + 1) e``; D = L - e = log1p(e) - e is
summed as its alternating series -e**2/2 + e**3/3 - ... when e < 2**-8
(tail bounded by the first omitted term and added to the ball's radius), so
that no cancellation the mathematics does not have is left.  Arb carries a
rigorous enclosure through every operation (exp(-3.4e38) included: Arb's
exponents are arbitrary-size integers).

Certified rounding: at working precision ``prec`` the gradient is a ball
[lo, hi] (Arb's outward-rounded bounds).  Both ends are rounded exactly into
the format (nearest-even, gradual underflow, overflow to inf, the sign of a
value rounding to zero kept) with integer arithmetic on their mantissa and
exponent, deciding far-below-subnormal and far-above-overflow from the
exponent alone.  If both ends give the same value, sign of zero included,
that is the answer; otherwise the precision is doubled, up to
:data:`MAX_PREC` bits, after which the point is unresolved (NaN from
:func:`gradient`, :class:`~precision.errors.OracleUndecidedError` from
:func:`round_gradient`).  Structural zeros (weight = 0, dout = 0, alpha = 0
with t = 0, alpha = 1 with t = 1) are exact +0.

The cross-check (:func:`crosscheck`, ``precision oracle --check``) compares
this oracle and the mpmath one bit for bit on random points and a list of
hard cases.

Thread safety: python-flint's working precision ``flint.ctx.prec`` is
process-global; the functions here set it and restore it, so do not call them
from several threads at once.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import mpmath
import numpy as np

try:
    from flint import arb, ctx
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "precision.operators.sigmoid_focal_loss_grad.oracle_arb needs python-flint: pip install 'precision[arb]' "
        "(or pip install 'python-flint>=0.6')"
    ) from exc

from precision.operators.sigmoid_focal_loss_grad import oracle as mp_oracle  # compared with in crosscheck only
from precision.operators.sigmoid_focal_loss_grad.terms import gradient as fast_gradient  # and the fast certified path
from precision.errors import OracleUndecidedError
from precision.exact.formats import FORMATS, Format, get_format
from precision.operators.sigmoid_focal_loss_grad.oracle import (broadcast_inputs)  # input validation only; the mathematics is independent

__all__ = [
    "START_PREC",
    "MAX_PREC",
    "gradient",
    "round_gradient",
    "round_gradient_formats",
    "gradient_arb",
    "round_exact",
    "CheckCase",
    "CheckReport",
    "random_cases",
    "hard_cases",
    "crosscheck",
    "referee_round",
]

#: First working precision (bits), raised by the size of |gamma x| + |x|.
START_PREC = 64

#: Working precision after which a point is reported unresolved (bits).
MAX_PREC = 1 << 16

#: Below e = 2**SERIES_EXP, log1p(e) - e is summed as its series.
SERIES_EXP = -8


# ---------------------------------------------------------------------------
# Exact conversions
# ---------------------------------------------------------------------------

def _exact(v) -> arb:
    """An exact arb holding the binary value of a float (or an int)."""
    if isinstance(v, (int, np.integer)):
        return arb(int(v))
    num, den = float(v).as_integer_ratio()
    return arb((num, -(den.bit_length() - 1)))


def _top_exp(man: int, exp: int) -> int:
    """k with 2**k <= |man * 2**exp| < 2**(k+1) (man != 0)."""
    return exp + abs(man).bit_length() - 1


def round_exact(man: int, exp: int, fmt) -> float:
    """Round the exact value man * 2**exp into ``fmt``: nearest-even, gradual
    underflow, overflow to +-inf, a value rounding to zero keeps its sign.

    ``exp`` may be astronomically large or small (exp(-3.4e38) has an exponent
    of about -4.9e38): overflow and underflow far outside the format are
    decided from the exponent alone, never by shifting a giant integer.
    """
    fmt = get_format(fmt)
    man, exp = int(man), int(exp)
    if man == 0:
        return 0.0
    neg = man < 0
    m = -man if neg else man
    top = exp + m.bit_length() - 1
    if top > fmt.emax + 1:  # >= 2**(emax+2): far above overflow
        return -math.inf if neg else math.inf
    qmin = fmt.emin - fmt.prec + 1  # the smallest subnormal is 2**qmin
    if top < qmin - 1:  # < 2**(qmin-1), half the smallest subnormal: rounds to 0
        return -0.0 if neg else 0.0
    qexp = max(top, fmt.emin) - fmt.prec + 1  # quantum of the value's binade
    shift = qexp - exp
    if shift <= 0:
        n = m << (-shift)
    else:
        n = m >> shift
        rem = m - (n << shift)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and (n & 1)):
            n += 1
    if n.bit_length() + qexp > fmt.emax + 1:  # rounded up to 2**(emax+1) or beyond
        return -math.inf if neg else math.inf
    v = math.ldexp(float(n), qexp)
    return -v if neg else v


def _round_bound(b: arb, fmt: Format) -> float:
    man, exp = b.man_exp()
    return round_exact(int(man), int(exp), fmt)


def _same(a: float, b: float) -> bool:
    return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)


def _decide(ball, fmt: Format):
    """The correctly rounded value if the ball decides it, else None.

    ``ball`` None is a structural zero (+0)."""
    if ball is None:
        return 0.0
    if not ball.is_finite():
        return None
    lo = _round_bound(ball.lower(), fmt)
    hi = _round_bound(ball.upper(), fmt)
    return lo if _same(lo, hi) else None


# ---------------------------------------------------------------------------
# The gradient as a ball
# ---------------------------------------------------------------------------

def _exp_bits(b: arb) -> int:
    """An integer k with |b| < 2**k (b finite, nonzero upper bound)."""
    man, exp = b.abs_upper().man_exp()
    return _top_exp(int(man), int(exp)) + 1


def _log1p_minus_e(e: arb, L: arb) -> arb:
    """D = log1p(e) - e for 0 < e <= 1, free of the cancellation of L - e."""
    if not (e.upper() < arb((1, SERIES_EXP))):
        return L - e  # cancels at most ~9 bits; the ball records it
    man, exp = e.abs_lower().man_exp()
    if int(man) == 0:  # cannot happen for exp of a finite ball; be safe
        return L - e
    lo_bits = _top_exp(int(man), int(exp))  # e >= 2**lo_bits
    hi_bits = _exp_bits(e)                  # e <  2**hi_bits
    # |D| >= e**2/2 - e**3/3 > e**2/3 > 2**(2 lo_bits - 2); stop once the
    # first omitted term e**k/k < 2**(k hi_bits) is below 2**-(prec+8) |D|
    limit = 2 * lo_bits - 2 - (ctx.prec + 8)
    e2 = e * e
    total = -(e2 / 2)
    power = e2
    k = 2
    while True:
        k += 1
        power = power * e
        if k * hi_bits < limit:
            break
        term = power / k
        total = total + term if k % 2 else total - term
    # alternating series with decreasing terms: |tail| <= e**k / k
    tail = (power / k).abs_upper()
    return total + arb(0, tail)


class _Shared:
    """What A(x, g) and A(-x, g) share at one precision: a = |x|, e, L, 1 + e."""

    __slots__ = ("a", "e", "L", "one_plus_e", "_D")

    def __init__(self, x: float):
        self.a = _exact(abs(x))
        self.e = (-self.a).exp()
        self.L = self.e.log1p()
        self.one_plus_e = 1 + self.e
        self._D = None

    @property
    def D(self) -> arb:
        if self._D is None:
            self._D = _log1p_minus_e(self.e, self.L)
        return self._D


def _focal(sh: _Shared, nonnegative: bool, g: arb, gamma: float) -> arb:
    """A(s x, g) where ``nonnegative`` tells whether s x >= 0."""
    a, e, L = sh.a, sh.e, sh.L
    if nonnegative:
        lnq = -(a + L)
        if gamma >= 0:
            N = -(g * L + e)  # both terms >= 0
        else:
            N = -(g * sh.D + (g + 1) * e)  # g D >= 0; (g+1) e < 0 only if g < -1 (true roots)
    else:
        lnq = -L
        N = -(g * e * (a + L)) - 1  # cancels only near the true roots (g < -1/ln 2)
    qg = (g * lnq).exp() if gamma != 0 else arb(1)
    return qg * N / sh.one_plus_e


def _selector(alpha: float, t: int) -> tuple[arb | None, arb | None]:
    """c0 = alpha (1 - t) and c1 = -(1 - alpha) t, or None where structurally zero."""
    c0 = None if (alpha == 0 or t == 1) else _exact(alpha) * (1 - int(t))
    c1 = None if (alpha == 1 or t == 0) else -((1 - _exact(alpha)) * int(t))
    return c0, c1


def _start_prec(x: float, gamma: float) -> int:
    big = abs(gamma * x) + abs(x) if math.isfinite(gamma * x) else math.inf
    if math.isinf(big):
        extra = 2 * 1024
    else:
        extra = math.frexp(big)[1] if big >= 1 else 0
    return START_PREC + extra


def gradient_arb(x: float, t: int, alpha: float, gamma: float, weight: float = 1.0,
                 dout: float = 1.0, count: int = 1, prec: int = START_PREC,
                 terms: dict | None = None):
    """The gradient at one point as an Arb ball at ``prec`` bits.

    Returns None for a structural zero (exact +0).  ``terms`` optionally caches
    ``(sign, prec) -> A(sign x, gamma)`` balls across calls at the same
    (x, gamma).  Sets ``flint.ctx.prec`` for the duration of the call.
    """
    c0, c1 = _selector(alpha, t)
    if weight == 0 or dout == 0 or (c0 is None and c1 is None):
        return None
    old = ctx.prec
    try:
        ctx.prec = prec
        # selector coefficients again at this precision (exact for float32 alpha)
        c0, c1 = _selector(alpha, t)
        g = _exact(gamma)
        sh = None
        total = None
        for sign, c in ((1, c0), (-1, c1)):
            if c is None:
                continue
            key = (sign, prec)
            term = terms.get(key) if terms is not None else None
            if term is None:
                if sh is None:
                    sh = _Shared(x)
                term = _focal(sh, sign * x >= 0, g, gamma)
                if terms is not None:
                    terms[key] = term
            part = c * term
            total = part if total is None else total + part
        wd = _exact(weight) * _exact(dout)
        total = total * wd
        if count != 1:
            total = total / int(count)
        return total
    finally:
        ctx.prec = old


def _undecided_message(fmt_name, x, t, alpha, gamma, weight, dout, count) -> str:
    return (f"rounding to {fmt_name} undecided at {MAX_PREC} bits (Arb) for x={float(x).hex()}, "
            f"t={t}, alpha={float(alpha).hex()}, gamma={float(gamma).hex()}, "
            f"weight={float(weight).hex()}, dout={float(dout).hex()}, count={count}")


def round_gradient_formats(x: float, t: int, alpha: float, gamma: float, weight: float = 1.0,
                           dout: float = 1.0, count: int = 1, fmts=tuple(FORMATS),
                           terms: dict | None = None) -> dict:
    """Correctly rounded values in several formats from one sequence of balls.

    Returns ``{format name: float}``, NaN for a format still undecided at
    :data:`MAX_PREC` bits.
    """
    fmts = [get_format(f) for f in fmts]
    out: dict = {}
    if terms is None:
        terms = {}
    prec = _start_prec(x, gamma)
    old = ctx.prec
    try:
        while True:
            ball = gradient_arb(x, t, alpha, gamma, weight, dout, count, prec, terms)
            ctx.prec = prec  # the ball's bounds are rounded outward at this precision
            for f in fmts:
                if f.name not in out:
                    v = _decide(ball, f)
                    if v is not None:
                        out[f.name] = v
            if len(out) == len(fmts) or prec >= MAX_PREC:
                break
            prec = min(2 * prec, MAX_PREC)
    finally:
        ctx.prec = old
    for f in fmts:
        out.setdefault(f.name, math.nan)
    return out


def round_gradient(x: float, t: int, alpha: float, gamma: float, weight: float = 1.0,
                   dout: float = 1.0, count: int = 1, fmt="fp32") -> float:
    """The exact gradient at one point, correctly rounded (RNE) into ``fmt``.

    Inputs are exact binary values taken as given (the batch :func:`gradient`
    rounds alpha and gamma to float32 first, as the operator does).

    Raises
    ------
    OracleUndecidedError
        When the rounding is still undecided at :data:`MAX_PREC` bits.
    """
    f = get_format(fmt)
    v = round_gradient_formats(float(x), int(t), float(alpha), float(gamma), float(weight),
                               float(dout), int(count), (f,))[f.name]
    if math.isnan(v):
        raise OracleUndecidedError(_undecided_message(f.name, x, t, alpha, gamma, weight, dout, count))
    return v


def gradient(pred, target, alpha, gamma, weight=1.0, dout=1.0, count=1, fmt="fp32") -> np.ndarray:
    """Correctly rounded exact gradients over broadcast numpy inputs (Arb backend).

    Same contract as :func:`precision.operators.sigmoid_focal_loss_grad.oracle.gradient`: pred, weight and dout
    are exact binary values, target raw integer selectors, alpha and gamma are
    rounded to float32, count is N*C for mean (coef = exact 1/count).  Returns
    ``fmt``'s dtype shaped like the broadcast inputs; a point undecided at
    :data:`MAX_PREC` bits is NaN, never a wrong value.
    """
    f = get_format(fmt)
    x, t, a, g, w, d, n = broadcast_inputs(pred, target, alpha, gamma, weight, dout, count)
    out = np.empty(x.shape, dtype=np.float64)
    cache: dict = {}
    done: dict = {}
    for idx in np.ndindex(x.shape):
        key = (float(x[idx]), int(t[idx]), float(a[idx]), float(g[idx]),
               float(w[idx]), float(d[idx]), int(n[idx]))
        if key not in done:
            terms = cache.setdefault((key[0], key[3]), {})
            done[key] = round_gradient_formats(*key, fmts=(f,), terms=terms)[f.name]
        out[idx] = done[key]
    return out.astype(f.dtype)


# ---------------------------------------------------------------------------
# The cross-check against the mpmath oracle
# ---------------------------------------------------------------------------

class CheckCase(NamedTuple):
    """One input point of the cross-check (exact binary values)."""

    category: str
    x: float
    t: int
    alpha: float
    gamma: float
    weight: float = 1.0
    dout: float = 1.0
    count: int = 1

    def describe(self) -> str:
        return (f"x={self.x.hex()} t={self.t} alpha={self.alpha.hex()} gamma={self.gamma.hex()} "
                f"weight={self.weight.hex()} dout={self.dout.hex()} count={self.count}")


@dataclass
class CategoryResult:
    points: int = 0
    comparisons: int = 0
    disagreements: int = 0  # conflicting values + decided by one oracle only
    conflicts: int = 0      # both decided, different values: one oracle is wrong
    one_sided: int = 0      # one oracle NaN (undecided at its cap), the other a value
    undecided: int = 0      # both oracles NaN (undecided at their caps)


@dataclass
class Disagreement:
    case: CheckCase
    fmt: str
    mpmath_value: float  # (the value of ``oracle``: the mpmath oracle, or the fast path)
    arb_value: float
    referee: float | None = None  # third evaluation (referee_round), when computed
    oracle: str = "mpmath"

    @property
    def conflict(self) -> bool:
        return not (math.isnan(self.mpmath_value) or math.isnan(self.arb_value))

    def line(self) -> str:
        kind = "values differ" if self.conflict else "decided by one oracle only"
        ref = "" if self.referee is None else f" referee={_hex(self.referee)}"
        return (f"DISAGREE [{self.case.category}] {self.fmt} {self.case.describe()}: "
                f"{self.oracle}={_hex(self.mpmath_value)} arb={_hex(self.arb_value)}{ref} ({kind})")


@dataclass
class CheckReport:
    categories: dict = field(default_factory=dict)  # name -> CategoryResult
    disagreements: list = field(default_factory=list)
    seconds: float = 0.0
    seconds_mpmath: float = 0.0
    seconds_arb: float = 0.0
    formats: tuple = tuple(FORMATS)
    #: the fast certified path (terms.gradient) against Arb, on the same points and formats
    fast_comparisons: int = 0
    fast_disagreements: list = field(default_factory=list)
    seconds_fast: float = 0.0

    @property
    def total_disagreements(self) -> int:
        return sum(r.disagreements for r in self.categories.values())

    @property
    def total_conflicts(self) -> int:
        return sum(r.conflicts for r in self.categories.values())

    @property
    def passed(self) -> bool:
        return self.total_disagreements == 0 and not self.fast_disagreements

    def lines(self) -> list[str]:
        width = max((len(c) for c in self.categories), default=8)
        out = []
        for name, r in self.categories.items():
            out.append(f"{name:<{width}}  {r.points:>6,} points x {len(self.formats)} formats = "
                       f"{r.comparisons:>7,} comparisons, {r.disagreements} disagreements "
                       f"({r.conflicts} conflicting values, {r.one_sided} decided by one oracle only), "
                       f"{r.undecided} undecided by both")
        out.extend(d.line() for d in self.disagreements)
        out.append(f"fast path against Arb: {self.fast_comparisons:,} comparisons, "
                   f"{len(self.fast_disagreements)} disagreements ({self.seconds_fast:.1f} s)")
        out.extend(d.line() for d in self.fast_disagreements)
        total_pts = sum(r.points for r in self.categories.values())
        total_cmp = sum(r.comparisons for r in self.categories.values())
        verdict = "PASS" if self.passed else "FAIL"
        out.append(f"{verdict}: {self.total_disagreements} disagreements ({self.total_conflicts} conflicting "
                   f"values) in {total_cmp:,} comparisons "
                   f"({total_pts:,} points; mpmath {self.seconds_mpmath:.1f} s, arb {self.seconds_arb:.1f} s, "
                   f"total {self.seconds:.1f} s)")
        return out


def _hex(v: float) -> str:
    return "nan" if math.isnan(v) else float(v).hex()


def _f32(v) -> float:
    with np.errstate(over="ignore"):
        return float(np.float32(v))


def _f32_neighbours(v: float, k: int) -> list[float]:
    """float32(v) and its k neighbours on each side."""
    c = np.float32(v)
    out = [float(c)]
    lo = hi = c
    for _ in range(k):
        lo = np.nextafter(lo, np.float32(-np.inf))
        hi = np.nextafter(hi, np.float32(np.inf))
        out += [float(lo), float(hi)]
    return out


def _f64_neighbours(v: float, k: int) -> list[float]:
    out = [float(v)]
    lo = hi = float(v)
    for _ in range(k):
        lo, hi = math.nextafter(lo, -math.inf), math.nextafter(hi, math.inf)
        out += [lo, hi]
    return out


def random_cases(n: int, seed: int = 0) -> list[CheckCase]:
    """``n`` random points spread over the regimes of every input."""
    rng = np.random.default_rng(seed)
    special_alpha = np.array([0.0, 1.0, 0.25, -0.5, 1.5, 0.5, 0.75])
    special_gamma = np.array([0.0, 0.5, 1.0, 2.0, 3.0, 5.0, -1.0, -0.5, -1.5, -2.0, -4.0])

    def pick(*choices):
        probs = np.array([p for p, _ in choices])
        which = rng.choice(len(choices), size=n, p=probs / probs.sum())
        out = np.empty(n)
        for i, (_, gen) in enumerate(choices):
            sel = which == i
            out[sel] = gen(int(sel.sum()))
        return out

    sign = lambda m: rng.choice([-1.0, 1.0], size=m)  # noqa: E731
    x = pick((0.45, lambda m: rng.uniform(-30, 30, m)),
             (0.2, lambda m: sign(m) * np.exp2(rng.uniform(-30, 7, m))),
             (0.1, lambda m: rng.uniform(80, 110, m) * sign(m)),
             (0.1, lambda m: sign(m) * np.exp2(rng.uniform(7, 128, m))),
             (0.05, lambda m: rng.integers(-40, 41, m) / 2.0),
             (0.1, lambda m: rng.uniform(-8, 8, m).astype(np.float16).astype(np.float64)))
    x = np.where(rng.random(n) < 0.5, x.astype(np.float32).astype(np.float64), x)
    t = rng.choice([0, 1, -1, 2, 3], size=n, p=[0.4, 0.4, 0.08, 0.08, 0.04])
    alpha = pick((0.6, lambda m: rng.uniform(0, 1, m)),
                 (0.4, lambda m: rng.choice(special_alpha, m)))
    gamma = pick((0.35, lambda m: rng.uniform(-3, 6, m)),
                 (0.3, lambda m: rng.choice(special_gamma, m)),
                 (0.15, lambda m: rng.uniform(-1.6, -0.4, m)),
                 (0.1, lambda m: -np.exp2(rng.uniform(0, 12, m))),
                 (0.1, lambda m: np.exp2(rng.uniform(-12, 6, m))))

    def scale(m):
        return pick((0.6, lambda k: np.ones(k)),
                    (0.2, lambda k: rng.uniform(-2, 2, k)),
                    (0.2, lambda k: sign(k) * np.exp2(rng.uniform(-170, 150, k))))[:m]

    weight, dout = scale(n), scale(n)
    count = np.where(rng.random(n) < 0.7, 1, rng.integers(2, 1 << 20, n))
    return [CheckCase("random", float(x[i]), int(t[i]), _f32(alpha[i]), _f32(gamma[i]),
                      float(weight[i]), float(dout[i]), int(count[i])) for i in range(n)]


def _root_of_A(gamma: float):
    """The real root x of A(x, gamma) for gamma < -1 (one root), to 200 bits."""
    with mpmath.workprec(200):
        g = mpmath.mpf(gamma)
        if -g < 1 / mpmath.log(2):
            # x >= 0: g log1p(e) + e = 0 for some e in (0, 1); solve in u = log(e)
            f = lambda u: g * mpmath.log1p(mpmath.exp(u)) + mpmath.exp(u)  # noqa: E731
            lo, hi = mpmath.mpf(-200), mpmath.mpf(0)
            u = _bisect(f, lo, hi)
            return -u
        # x < 0: g e (a + log1p(e)) = -1 with a = -x, e = exp(-a)
        f = lambda a: g * mpmath.exp(-a) * (a + mpmath.log1p(mpmath.exp(-a))) + 1  # noqa: E731
        a = _bisect(f, mpmath.mpf(0), mpmath.mpf(200))
        return -a


def _bisect(f, lo, hi):
    """A sign change of f in [lo, hi], refined by findroot (anderson) to full precision."""
    flo = f(lo)
    for _ in range(60):
        mid = (lo + hi) / 2
        fm = f(mid)
        if (fm < 0) == (flo < 0):
            lo, flo = mid, fm
        else:
            hi = mid
    return mpmath.findroot(f, (lo, hi), solver="anderson")


def _approx_value(x: float, t: int, alpha: float, gamma: float) -> float:
    """The unscaled gradient to ~30 digits by the textbook formula (for building targets)."""
    with mpmath.workprec(200):
        X, g, a = mpmath.mpf(x), mpmath.mpf(gamma), mpmath.mpf(alpha)
        p = 1 / (1 + mpmath.exp(-X))
        q = 1 / (1 + mpmath.exp(X))
        A = g * p * q**g * mpmath.log(p) - q ** (g + 1)
        B = p ** (g + 1) - g * p**g * q * mpmath.log(q)
        return float(a * (1 - t) * A + (1 - a) * t * B)


def hard_cases() -> list[CheckCase]:
    """The hard-case list, by category (see ``precision oracle --check``)."""
    cases: list[CheckCase] = []
    add = cases.append
    F32_MAX = float(np.finfo(np.float32).max)

    # near the roots of A for gamma < -1 (float32 and float64 neighbours of the root)
    root_gammas = [-1 - 2.0**-23, -1 - 2.0**-20, -1 - 2.0**-12, -1.1, -1.25, -1.4,
                   -1 / math.log(2), -1.45, -1.5, -2.0, -3.0, -5.0, -10.0, -100.0, -1e4, -1e6]
    for g in root_gammas:
        g = _f32(g)
        r = _root_of_A(g)
        xs = set(_f32_neighbours(float(r), 4)) | set(_f64_neighbours(float(r), 2))
        for xr in sorted(xs):
            for t, sx in ((0, 1), (1, -1)):
                add(CheckCase("roots", sx * xr, t, 0.25, g))
            add(CheckCase("roots", xr, 0, 0.5, g, 1.0, -1.5, 3))
            add(CheckCase("roots", xr, 2, 0.25, g))
            add(CheckCase("roots", -xr, -1, 0.75, g))

    # gamma near -1 (float32 neighbours of -1), over a wide range of x
    gammas = _f32_neighbours(-1.0, 4)
    xs = [0.0, 0.5, 1.0, 4.0, 10.0, 15.25, 16.0, 20.0, 30.0, 50.0, 88.7, 100.0, 700.0, 1e3,
          1e4, 1e30, F32_MAX]
    for g in gammas:
        for xv in xs:
            for s in (1.0, -1.0):
                for t in (0, 1, -1, 2):
                    add(CheckCase("gamma~-1", _f32(s * xv), t, 0.25, g))

    # |x| near 88.7 and 104 (float32 neighbours): exp overflow / underflow edges of fp32
    centres = [math.log(F32_MAX), -math.log(2.0**-126), -math.log(2.0**-149), 88.0, 89.0, 104.0]
    for c in centres:
        for xv in _f32_neighbours(c, 3):
            for s in (1.0, -1.0):
                for g in (0.0, 0.5, 1.0, 2.0, 3.0, -0.5, -1.0, -2.0):
                    for t in (0, 1):
                        add(CheckCase("x~88.7/104", s * xv, t, 0.25, g))

    # subnormal and overflowing results: weight and dout drive the value to targets
    bases = [(-1.25, 0, 0.25, 2.0), (0.75, 1, 0.25, 2.0), (3.0, 0, 0.6, 0.5), (-2.0, 1, 0.1, -0.5),
             (0.1, 2, 0.25, 1.0), (-0.3, 0, 0.9, 0.0), (5.0, 1, 0.25, 3.0)]
    for x0, t0, a0, g0 in bases:
        a0, g0 = _f32(a0), _f32(g0)
        v = _approx_value(x0, t0, a0, g0)
        for f in FORMATS.values():
            tiny, normal, big = f.smallest_subnormal, f.smallest_normal, f.max_finite
            sub_targets = [(tiny, k) for k in (0.25, 0.5, 0.5 + 2.0**-20, 0.75, 1.0, 1.5, 2.5, 3.0, 1023.5)]
            sub_targets += [(normal, 1 - 2.0**-12), (normal, 1 - 2.0**-(f.prec + 1)), (normal, 1.0)]
            over_targets = [(big, k) for k in (1 - 2.0**-30, 1.0, 1 + 2.0**-(f.prec + 1),
                                                1 + 2.0**-(f.prec + 1) - 2.0**-50,
                                                1 + 2.0**-(f.prec + 1) + 2.0**-50, 1.01)]
            for cat, targets in (("subnormal", sub_targets), ("overflow", over_targets)):
                for base, factor in targets:
                    for sgn in (1.0, -1.0):
                        # weight * dout ~ sgn * factor * base / v, split so both stay finite
                        e0 = math.frexp(base)[1]
                        mant, e1 = math.frexp(sgn * factor * math.ldexp(base, -e0) / v)
                        k = (e0 + e1) // 2
                        w, d = math.ldexp(1.0, k), math.ldexp(mant, e0 + e1 - k)
                        add(CheckCase(cat, x0, t0, a0, g0, w, d))
                        add(CheckCase(cat, x0, t0, a0, g0, d, w, 1))
                        add(CheckCase(cat, x0, t0, a0, g0, w, d * 3, 3))

    # weight / dout at the underflow thresholds of the formats (and zero, both signs)
    thresholds = []
    for f in FORMATS.values():
        for base in (f.smallest_subnormal, f.smallest_normal):
            thresholds += _f64_neighbours(base, 1)
    thresholds += [0.0, -0.0, 2.0**-1074 * 3, 2.0**-600]
    partners = [1.0, -1.0, 0.5, 2.0**-149, 2.0**-24, 2.0**100, 2.0**1000]
    for x0, t0, a0, g0 in bases[:4]:
        for w in thresholds:
            for d in partners:
                for n in (1, 7):
                    add(CheckCase("weight/dout-threshold", x0, t0, _f32(a0), _f32(g0), w, d, n))
                    add(CheckCase("weight/dout-threshold", x0, t0, _f32(a0), _f32(g0), d, -w, n))

    # rounding ties: the exact value is (a midpoint of the format) * (1 +- tiny), the
    # tiny part being exp(-|x|)-sized; both oracles must raise precision until it shows
    tie_coefs = [(0.5, 1 + 2.0**-p) for p in (8, 11, 24)] + [(0.5, 1 + 3 * 2.0**-p) for p in (8, 11, 24)]
    tie_coefs += [(0.75, 1 + 2.0**-52), (0.75, 1 - 2.0**-53)]
    for alpha, w in tie_coefs:
        for xv in (20.0, 30.0, 45.0, 60.0, 90.0, 150.0, 300.0, 600.0):
            for g in (0.0, 0.5, 2.0, -0.5, -2.0):
                add(CheckCase("ties", -xv, 0, alpha, g, w))          # alpha A(x):   -alpha w (1 +- tiny)
                add(CheckCase("ties", xv, 1, 1 - alpha, g, w))       # -(1-alpha') A(-x): same coefficient
    for alpha in (_f32(0.4), _f32(0.1), _f32(0.3)):                  # 1 - alpha: a 25-bit fp32 midpoint
        for xv in (30.0, 60.0, 90.0, 300.0):
            for g in (0.0, 2.0, -0.5):
                add(CheckCase("ties", xv, 1, alpha, g))

    # huge |x|
    for xv in (F32_MAX, 1e30, 65504.0, 1e10, 2.0**100):
        for s in (1.0, -1.0):
            for g in (0.0, 0.5, 1.0, 2.0, 5.0, 1e-3, 1e4, -1e-3, -0.5, -1.0, -1.5, -2.0, -5.0, -1e4):
                for t in (0, 1, -1, 2):
                    add(CheckCase("huge-x", s * xv, t, 0.25, _f32(g)))
                add(CheckCase("huge-x", s * xv, 0, 0.25, _f32(g), 2.0**-140, -3.0, 5))
                add(CheckCase("huge-x", s * xv, 1, 0.25, _f32(g), 2.0**120, 2.0**100))

    # both selectors, t in {-1, 2}, alpha in {0, 1, 0.25, -0.5, 1.5} (structural zeros included)
    for alpha in (0.0, 1.0, 0.25, -0.5, 1.5):
        for t in (0, 1, -1, 2):
            for xv in (0.0, -0.0, 0.5, -0.5, 2.0, -2.0, 9.0, -9.0, 40.0, -40.0, 200.0, -200.0):
                for g in (0.0, 2.0, -0.5, -2.0, -1.0):
                    add(CheckCase("selectors/alpha", xv, t, alpha, g))
                    add(CheckCase("selectors/alpha", xv, t, alpha, g, -0.75, 1.5, 4))
    return cases


def _compare(cases: list[CheckCase], formats, report: CheckReport, oracle_mod) -> None:
    if not cases:
        return
    cols = [np.array([getattr(c, name) for c in cases]) for name in CheckCase._fields[1:]]
    x, t, a, g, w, d, n = cols
    x, a, g, w, d = (c.astype(np.float64) for c in (x, a, g, w, d))
    t, n = t.astype(np.int64), n.astype(np.int64)
    for fmt in formats:
        f = get_format(fmt)
        t0 = time.perf_counter()
        mp_vals = np.asarray(oracle_mod.gradient(x, t, a, g, w, d, n, fmt=f.name)).astype(np.float64)
        t1 = time.perf_counter()
        arb_vals = np.asarray(gradient(x, t, a, g, w, d, n, fmt=f.name)).astype(np.float64)
        t2 = time.perf_counter()
        fast_vals = np.asarray(fast_gradient(x, t, a, g, w, d, n, fmt=f.name)).astype(np.float64)
        report.seconds_fast += time.perf_counter() - t2
        report.seconds_mpmath += t1 - t0
        report.seconds_arb += t2 - t1
        report.fast_comparisons += len(cases)
        differ = [not (_same(u, v) or (math.isnan(u) and math.isnan(v))) for u, v in zip(fast_vals, arb_vals)]
        for i in np.flatnonzero(differ).tolist():
            report.fast_disagreements.append(Disagreement(cases[i], f.name, float(fast_vals[i]),
                                                          float(arb_vals[i]), oracle="fast"))
        for i, case in enumerate(cases):
            res = report.categories.setdefault(case.category, CategoryResult())
            res.comparisons += 1
            u, v = mp_vals[i], arb_vals[i]
            if math.isnan(u) and math.isnan(v):
                res.undecided += 1
            elif not _same(u, v):
                res.disagreements += 1
                dis = Disagreement(case, f.name, float(u), float(v))
                if dis.conflict:
                    res.conflicts += 1
                else:
                    res.one_sided += 1
                report.disagreements.append(dis)
    for case in cases:
        report.categories[case.category].points += 1


def crosscheck(points: int = 10_000, seed: int = 0, formats=tuple(FORMATS), hard: bool = True,
               progress: Callable[[str], None] | None = None, referee: int = 10) -> CheckReport:
    """Compare the mpmath and Arb oracles bit for bit, and the fast certified path with Arb.

    ``points`` random points (seed ``seed``) plus, if ``hard``, the
    :func:`hard_cases`, each in every format of ``formats``, through both
    oracles' batch ``gradient``.  A disagreement is any pair of results that
    differ in value or sign of zero, or where exactly one oracle is undecided
    (NaN); both undecided is counted apart.  The first ``referee``
    disagreements also get a third evaluation (:func:`referee_round`).  The
    fast path (:func:`precision.operators.sigmoid_focal_loss_grad.terms.gradient`) is
    compared with Arb on the same points; any difference is listed and fails
    the check.
    """
    start = time.perf_counter()
    report = CheckReport(formats=tuple(get_format(f).name for f in formats))
    groups: dict = {}
    if points:
        groups["random"] = random_cases(points, seed)
    if hard:
        for case in hard_cases():
            groups.setdefault(case.category, []).append(case)
    for name, cases in groups.items():
        _compare(cases, report.formats, report, mp_oracle)
        if progress is not None:
            r = report.categories[name]
            progress(f"{name}: {r.points} points, {r.disagreements} disagreements")
    for dis in report.disagreements[:referee]:
        try:
            dis.referee = referee_round(dis.case, dis.fmt) if abs(dis.case.x) <= 1e5 else None
        except (ArithmeticError, ValueError):  # a textbook evaluation that overflows is no referee
            dis.referee = None
    report.seconds = time.perf_counter() - start
    return report


def referee_round(case: CheckCase, fmt, bits: int | None = None) -> float:
    """A third evaluation for diagnosing a disagreement: mpmath's high-level
    textbook formula (p and q from exp, logs by log1p) at ``bits`` bits
    (default 4000 + 2 |x| / ln 2, capped at 400,000), rounded with
    :meth:`Format.round_mpf`.  Not certified: trust it only where the
    cancellation it meets (about |x| / ln 2 bits at gamma = -1 or next to a
    rounding tie, plus the roots of A) is well below ``bits``.
    """
    if bits is None:
        bits = 4000 + int(min(2 * abs(case.x) / math.log(2), 400_000))
    with mpmath.workprec(bits):
        X, g, a = mpmath.mpf(case.x), mpmath.mpf(case.gamma), mpmath.mpf(case.alpha)
        p = 1 / (1 + mpmath.exp(-X))
        q = 1 / (1 + mpmath.exp(X))
        lnp = -mpmath.log1p(mpmath.exp(-X))
        lnq = -mpmath.log1p(mpmath.exp(X))
        A = g * p * q**g * lnp - q ** (g + 1)
        B = p ** (g + 1) - g * p**g * q * lnq
        t = case.t
        raw = a * (1 - t) * A + (1 - a) * t * B
        value = raw * mpmath.mpf(case.weight) * mpmath.mpf(case.dout) / case.count
        return get_format(fmt).round_mpf(value)
