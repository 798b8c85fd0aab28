"""SigmoidFocalLoss's exact value: mpmath balls of its per-class terms, tabled per (x, gamma), and derived.

With p = sigmoid(x), softplus(s) = ln(1 + e^s) = -ln(sigmoid(-s)), the exact loss of one element is

    loss = (1 - alpha) T(x, gamma) w     (t = 0: p_t = 1 - p, (1 - p_t)^gamma = p^gamma, -ln p_t = softplus(x))
    loss = alpha T(-x, gamma) w          (t = 1: p_t = p, (1 - p_t)^gamma = sigmoid(-x)^gamma, -ln p = softplus(-x))
    T(s, gamma) = sigmoid(s)^gamma softplus(s) = exp(-gamma softplus(-s)) softplus(s),

so, as SigmoidFocalLossGrad's gradient, it is ``(c0 T(x) + c1 T(-x)) w`` with c0 = (1 - alpha)(1 - t) and
c1 = alpha t: a sweep tables each T once per distinct (x, gamma) and derives every point with the toolkit's
certified derivation (:func:`precision.exact.terms.derive`).

The ball of T at working precision P (every mpmath operation rounds to P bits, error at most 2^(2-P)
relative, a bound twice mpmath's): e = exp(-|s|) and log1p(e) (condition at most 1) give softplus(+-s) =
max(+-s, 0) + log1p(e) within 3 * 2^(2-P) (a sum of nonnegative terms); y = gamma softplus(-s) within
|y| 4 * 2^(2-P) absolute, so exp(-y) within (4 |y| + 1) 2^(2-P); the product adds one rounding.  The ball's
relative radius is therefore (4 |y| + 6) 2^(2-P) at most, doubled for safety: ``_radius``.  T is positive for
every finite s and gamma >= 0 (no cancellation anywhere: the loss is well conditioned), so the precision
only has to cover |y|; it starts at 80 bits plus the bits of |y| and doubles until the rounding is decided.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
from mpmath import libmp, mp, mpf

from precision.errors import OracleUndecidedError, ParameterError
from precision.exact.certify import escalate
from precision.exact.formats import get_format
from precision.exact.terms import TermTable, absent_table, ball_row, derive
from precision.operators.sigmoid_focal_loss.reduction import exact_sum
from precision.operators.sigmoid_focal_loss.reduction import round_exact as round_rational

__all__ = ["ORACLE_VERSION", "TERM_REL", "MAX_PREC", "term_ball", "term_tables", "selected_term_tables",
           "term_sides", "derive_exact", "loss_ball", "round_exact", "exact_decimal", "exact_loss", "REDUCTION_REL",
           "exact_reduction", "round_within", "round_reduction"]

#: Part of every cache key: bump when an exact value could change.
ORACLE_VERSION = "sigmoid_focal_loss-1"
#: Every tabled term is tightened to this relative bound.
TERM_REL = 2.0**-62
#: The working precision past which a rounding is reported undecided (never guessed).
MAX_PREC = 1 << 14


def _softplus(s: mpf) -> mpf:
    """ln(1 + e^s) at the context's precision: max(s, 0) + log1p(e^-|s|)."""
    return max(s, mpf(0)) + mp.log1p(mp.exp(-abs(s)))


def _radius(y: float, prec: int) -> float:
    """The ball's relative radius at ``prec`` bits for an exponent argument of magnitude ``y`` (module doc)."""
    return 2 * (4 * y + 6) * math.ldexp(1.0, 2 - prec)


def _start_prec(s: float, gamma: float) -> int:
    y = abs(gamma) * (abs(s) + 1)
    return 80 + (math.frexp(y)[1] if y >= 1 else 0)


def term_ball(s: float, gamma: float, prec: int) -> tuple:
    """(mid, rel): T(s, gamma) at ``prec`` bits as an mpf and its relative radius."""
    with mp.workprec(prec):
        sp_pos = _softplus(mpf(s))
        if gamma == 0:
            return sp_pos, _radius(0.0, prec)
        y = mpf(gamma) * _softplus(-mpf(s))
        return mp.exp(-y) * sp_pos, _radius(float(min(y, mpf(2.0**1000))), prec)


def _tight_row(s: float, gamma: float) -> tuple:
    prec = _start_prec(s, gamma)
    mid, rel = term_ball(s, gamma, prec)
    while rel > TERM_REL and prec < MAX_PREC:
        prec *= 2
        mid, rel = term_ball(s, gamma, prec)
    return ball_row(mid._mpf_, rel)


def term_tables(x, gammas) -> dict:
    """``{gamma: TermTable}`` of T(x, gamma) for every x and every gamma (each distinct x once)."""
    xs = np.asarray(x, dtype=np.float64).ravel()
    keys, inverse = np.unique(xs, return_inverse=True)
    out = {}
    for g in gammas:
        rows = np.array([_tight_row(float(v), float(g)) for v in keys.tolist()],
                        dtype=np.float64).reshape(-1, 4)
        table = TermTable(rows[:, 0].copy(), rows[:, 1].copy(), rows[:, 2].astype(np.int64), rows[:, 3].copy())
        out[float(g) if g is not None else None] = table.take(inverse)
    return out


def term_sides(attributes: dict, targets) -> tuple:
    """(T(x) needed, T(-x) needed) over every combination of the attribute values and targets: T(x) where some
    (1 - alpha)(1 - t) is nonzero, T(-x) where some alpha t is."""
    alphas = attributes["alpha"]
    return (any((1 - a) * (1 - t) != 0 for a in alphas for t in targets),
            any(a * t != 0 for a in alphas for t in targets))


def selected_term_tables(x, t, alpha, gamma: float) -> tuple:
    """(T(x), T(-x)) for scattered points, each only where its coefficient is nonzero (absent rows elsewhere)."""
    x = np.asarray(x, dtype=np.float64)
    t = np.asarray(t)
    need_pos = (1 - np.asarray(alpha)) * (1 - t) != 0
    need_neg = np.asarray(alpha) * t != 0
    args = np.concatenate([x[need_pos], -x[need_neg]])
    if args.size == 0:
        return absent_table(x.size), absent_table(x.size)
    table = term_tables(args, [gamma])[float(gamma)]
    pos, neg = absent_table(x.size).as_arrays(), absent_table(x.size).as_arrays()
    n_pos = int(need_pos.sum())
    for f, column in table.as_arrays().items():
        pos[f][need_pos] = column[:n_pos]
        neg[f][need_neg] = column[n_pos:]
    return TermTable.from_arrays(pos), TermTable.from_arrays(neg)


def _coefficients(t, alpha):
    """(c0, c1, exact): (1 - alpha)(1 - t) and alpha t in float64, and whether 1 - alpha is exact there."""
    t = np.asarray(t, dtype=np.int64)
    a = np.asarray(alpha, dtype=np.float64)
    with np.errstate(all="ignore"):
        one_minus_a = 1.0 - a
        return one_minus_a * (1 - t), a * t, (1.0 - one_minus_a) == a


def derive_exact(x, t, alpha, gamma, weight, dout, count, fmt, pos: TermTable, neg: TermTable, certify=True):
    """Certified-rounded losses ``(c0 T(x) + c1 T(-x)) * weight`` from tabled terms (dout and count are the
    engine's operands: 1 for a forward loss).  Returns :class:`precision.exact.terms.DerivedValue`."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    t = np.ascontiguousarray(t, dtype=np.int64)
    a, g = np.broadcast_to(np.asarray(alpha, np.float64), x.shape), np.broadcast_to(np.asarray(gamma, np.float64),
                                                                                    x.shape)
    w = np.broadcast_to(np.asarray(weight, np.float64), x.shape)
    c0, c1, exact_c = _coefficients(t, a)

    def fallback(rows, f):
        out = np.empty((3, rows.size))
        for k, i in enumerate(rows.tolist()):
            args = (float(x[i]), int(t[i]), float(a[i]), float(g[i]), float(w[i]))
            try:
                out[0, k] = round_exact(*args, fmt=f)
            except OracleUndecidedError:
                out[0, k] = np.nan
            v = exact_loss(*args)
            out[1, k], out[2, k] = float(v), float(v - mpf(float(v))) if math.isfinite(float(v)) else 0.0
        return out[0], out[1], out[2]

    return derive(c0, c1, exact_c, w, dout, count, fmt, pos, neg, fallback, certify)


def loss_ball(x: float, t: int, alpha: float, gamma: float, weight: float, prec: int) -> tuple:
    """(mid, rel): the exact loss of one element at ``prec`` bits, with its relative radius."""
    s, coef = (-x, mpf(alpha)) if t == 1 else (x, 1 - mpf(alpha))
    mid, rel = term_ball(s, gamma, prec)
    with mp.workprec(prec):
        value = mid * coef * mpf(weight)
    return value, rel + 3 * math.ldexp(1.0, 2 - prec)


def _decided(mid: mpf, rel: float, fmt):
    if mid == 0:
        return fmt.round_mpf(mid)
    lo, hi = sorted((mid * (1 - mpf(rel)), mid * (1 + mpf(rel))))
    a, b = fmt.round_mpf(lo), fmt.round_mpf(hi)
    return a if a == b and math.copysign(1.0, a) == math.copysign(1.0, b) else None


def round_exact(x: float, t: int, alpha: float, gamma: float, weight: float = 1.0, dout: float = 1.0,
                count: int = 1, fmt="fp32") -> float:
    """The exact loss of one element, correctly rounded (RNE) into ``fmt`` (escalating precision).

    Raises
    ------
    OracleUndecidedError
        Still undecided at :data:`MAX_PREC` bits.

    Examples
    --------
    >>> float(round_exact(2.0, 1, 0.25, 2.0)).hex()
    '0x1.d8cb0e0000000p-12'
    """
    f = get_format(fmt)

    def attempt(prec):
        with mp.workprec(prec + 20):
            return _decided(*loss_ball(x, t, alpha, gamma, weight, prec), f)

    value = escalate(attempt, _start_prec(x, gamma), MAX_PREC)
    if value is None:
        raise OracleUndecidedError(f"rounding to {f.name} undecided at {MAX_PREC} bits for x={float(x).hex()}, "
                                   f"t={t}, alpha={float(alpha).hex()}, gamma={float(gamma).hex()}")
    return value


def exact_loss(x: float, t: int, alpha: float, gamma: float, weight: float = 1.0, bits: int = 64) -> mpf:
    """The exact loss to ``bits`` bits of relative accuracy (an mpf)."""
    prec = _start_prec(x, gamma) + bits
    mid, rel = loss_ball(x, t, alpha, gamma, weight, prec)
    while rel > math.ldexp(1.0, -bits) and prec < MAX_PREC:
        prec *= 2
        mid, rel = loss_ball(x, t, alpha, gamma, weight, prec)
    return mid


def exact_decimal(x: float, t: int, alpha: float, gamma: float, weight: float = 1.0, dout: float = 1.0,
                  count: int = 1, digits: int = 40) -> str:
    """The exact loss to ``digits`` significant decimal digits (for display)."""
    value = exact_loss(x, t, alpha, gamma, weight, bits=int(digits * 3.33) + 16)
    return "0" if value == 0 else libmp.to_str(value._mpf_, digits)


#: The relative bound of :func:`exact_reduction`: each derived loss is within the term bound (2^-62) plus the
#: derivation's roundings of the exact one, and a sum of nonnegative terms is within the largest relative bound
#: of its terms; 2^-60 covers both.
REDUCTION_REL = 2.0**-60


def exact_reduction(x, t, alpha: float, gamma: float, weight=None, reduction: str = "sum") -> Fraction:
    """The exact sum (or mean: the sum over n, exact) of the exact losses of the elements (x, t), within
    :data:`REDUCTION_REL` relative: each loss as the derivation's double-double (``exact_hi + exact_lo``), summed
    exactly (:func:`.reduction.exact_sum`).  ``weight`` None means no weight."""
    if reduction not in ("sum", "mean"):
        raise ParameterError(f"reduction={reduction!r}; expected 'sum' or 'mean'")
    x = np.ascontiguousarray(x, dtype=np.float64).ravel()
    t = np.ascontiguousarray(t, dtype=np.int64).ravel()
    n = x.size
    w = np.ones(n) if weight is None else np.asarray(weight, dtype=np.float64).ravel()
    pos, neg = selected_term_tables(x, t, alpha, gamma)
    d = derive_exact(x, t, np.full(n, alpha), np.full(n, gamma), w, np.ones(n), np.ones(n, np.int64), "fp32",
                     pos, neg)
    total = exact_sum(d.exact_hi) + exact_sum(d.exact_lo)
    return total / n if reduction == "mean" and n else total


def round_within(value: Fraction, rel: float, fmt) -> float | None:
    """The correct rounding (RNE) into ``fmt`` of a value known as ``value`` within ``rel`` relative, or None when
    the two ends of that bound round apart."""
    name = get_format(fmt).name
    a = round_rational(value * (1 - Fraction(rel)), name)
    b = round_rational(value * (1 + Fraction(rel)), name)
    return a if a == b else None


def round_reduction(x, t, alpha: float, gamma: float, weight=None, reduction: str = "sum", fmt="fp32") -> float:
    """:func:`exact_reduction` correctly rounded into ``fmt`` (RNE), certified: both ends of its bound round alike.

    Raises
    ------
    OracleUndecidedError
        The bound straddles a rounding edge (the value within 2^-60 of a midpoint of the format).
    """
    rounded = round_within(exact_reduction(x, t, alpha, gamma, weight, reduction), REDUCTION_REL, fmt)
    if rounded is None:
        raise OracleUndecidedError(f"the exact {reduction} of {np.size(x)} losses is within 2^-60 of a rounding edge "
                                   f"of {get_format(fmt).name}; undecided")
    return rounded
