"""Oracle reuse: focal terms A(x, gamma) as arrays, and gradients derived from them.

The exact gradient depends on (x, gamma) only through A(x, gamma) and
A(-x, gamma) (spec section 2)::

    grad = (c0 A(x, g) + c1 A(-x, g)) * weight * dout / count,
    c0 = alpha (1 - t),   c1 = -(1 - alpha) t.

A sweep therefore evaluates each A once per distinct (x, gamma) (see
:func:`focal_term_tables`: the compiled double-double path of
:mod:`precision.sigmoid_focal_loss_grad.oracle_fast` with its proven bound,
and mpmath for the rows that bound leaves above TERM_REL), keeps it (the cache), and
*derives* every (alpha, t, weight, dout, count, format) from it in vectorized
float64 double-double arithmetic (:func:`derive_gradient`), with a certified
rounding decision: the derived value is a ball whose radius covers the
focal term's own bound plus every double-double rounding, and the decision
is taken only when the whole ball lies strictly inside one rounding cell of the
output format.  The few points that the ball does not decide (near a rounding
boundary, near a root of A, or with both c0 and c1 nonzero) go back to the
scalar oracle (:func:`precision.sigmoid_focal_loss_grad.oracle.round_gradient`), so every returned
value is the certified correct rounding.

Term table columns (:class:`TermTable`, one row per (x, gamma)):

``hi``, ``lo`` (float64)
    The midpoint's significand as a double-double, ``|hi|`` in [1, 2), sign
    included; 0 when unresolved.
``exp`` (int64)
    Binary exponent: A = (hi + lo) * 2**exp.  A value beyond 2**+-EXP_FAR
    (4096) is stored as ``hi = +-1``, ``lo = 0``, ``exp = +-EXP_CLAMP``
    (2**40): only its sign and side are kept, since no float64 weight, dout
    and count (their product within 2**+-2100) brings it back into any
    format's range.
``rel`` (float64)
    Relative error bound of ``(hi + lo) * 2**exp`` against the exact A; inf
    when unresolved.
"""

from __future__ import annotations

import math
import dataclasses
from dataclasses import dataclass

import numpy as np
from mpmath import libmp

from precision.sigmoid_focal_loss_grad import oracle
from precision.errors import OracleUndecidedError
from precision.exact.formats import from_ordinal, get_format, round_to_format, to_ordinal

__all__ = ["ESTIMATE_REL", "TermTable", "focal_term_table", "focal_term_tables", "selected_term_tables",
           "absent_table", "term_sides", "DerivedGradient", "derive_gradient", "gradient", "EXP_CLAMP", "EXP_FAR",
           "TERM_REL"]

#: Every stored term is tightened to this relative bound (or the oracle's
#: precision cap), so derived exact values carry over 60 good bits.
TERM_REL = 2.0**-62

#: Bits the focal terms start with beyond the oracle's :func:`precision.sigmoid_focal_loss_grad.oracle._initial_prec`: at 64 bits
#: a ball's bound is about 2**-62.8, so two rows in three missed TERM_REL and were recomputed at twice the
#: precision; eight more bits bring every bound below it at no measurable cost per operation.
TERM_EXTRA_BITS = 8


#: Binade exponents beyond which a derived value is decided as inf / 0 for
#: every sweep format (fp16, bf16, fp32; their ranges end at 2**128 and 2**-149).
_DECIDED_ABOVE = 1000
_DECIDED_BELOW = -1000

_SPLITTER = 134217729.0  # 2**27 + 1, Veltkamp's splitting constant for float64
#: The smallest |c * weight * dout| the derivation takes: its product's error term is then a normal float64.
_K_MIN = 2.0**-960
_U = 2.0**-53  # float64's unit roundoff


@dataclass(frozen=True)
class TermTable:
    """Focal terms A(x, gamma) for parallel arrays of x and gamma (see module docstring)."""

    hi: np.ndarray
    lo: np.ndarray
    exp: np.ndarray
    rel: np.ndarray

    def __len__(self) -> int:
        return self.hi.size

    def take(self, index) -> "TermTable":
        return TermTable.from_arrays(self.as_arrays(), index)

    @staticmethod
    def concatenate(tables) -> "TermTable":
        columns = [t.as_arrays() for t in tables]
        return TermTable.from_arrays({f: np.concatenate([c[f] for c in columns]) for f in _TERM_FIELDS})

    def as_arrays(self) -> dict:
        """The columns by field name: the layout of the term cache's shards and of the shared term files."""
        return {f: getattr(self, f) for f in _TERM_FIELDS}

    @classmethod
    def from_arrays(cls, arrays, rows=slice(None)) -> "TermTable":
        """The inverse of :meth:`as_arrays` (``rows`` of each column: an index or a mask)."""
        return cls(**{f: np.asarray(arrays[f])[rows] for f in _TERM_FIELDS})


_TERM_FIELDS = tuple(f.name for f in dataclasses.fields(TermTable))


def _ball_to_row(ball: oracle.Ball):
    """(hi, lo, exp, rel) of a ball; the double-double truncation adds 2**-104."""
    sign, man, e, bc = ball.mid
    if not man or not math.isfinite(ball.rel):
        return 0.0, 0.0, 0, math.inf
    k = e + bc - 1
    if abs(k) > oracle.EXP_FAR and ball.true_rel < 0.5:
        return (-1.0 if sign else 1.0), 0.0, (EXP_CLAMP if k > 0 else -EXP_CLAMP), 2.0**-100
    normalized = (sign, man, -(bc - 1), bc)  # value in [1, 2)
    hi = libmp.to_float(normalized, rnd=libmp.round_nearest)
    lo = libmp.to_float(libmp.mpf_sub(normalized, libmp.from_float(hi), 64, libmp.round_nearest))
    return hi, lo, k, ball.true_rel * (1 + 2.0**-50) + 2.0**-104


#: The clamped exponent of a row beyond 2**+-EXP_FAR (module docstring).
EXP_CLAMP = oracle.EXP_CLAMP
EXP_FAR = oracle.EXP_FAR
ESTIMATE_REL = oracle.ESTIMATE_REL


def _settled(x, g, rows) -> TermTable:
    """The fast path's rows (hi, lo, exp, rel) of A(x[i], g[i]), those it leaves above TERM_REL from mpmath."""
    hi, lo, ex, rel = rows
    for i in np.flatnonzero(~(rel <= TERM_REL)).tolist():
        hi[i], lo[i], ex[i], rel[i] = _tight_row(float(x[i]), float(g[i]), None)
    return TermTable(hi, lo, ex, rel)


def focal_term_table(x, gamma) -> TermTable:
    """A(x, gamma) for each pair (broadcast, flattened), to relative accuracy TERM_REL (2**-62).

    Consecutive pairs of equal |x| share exp and log1p (order them so, when they repeat).
    """
    from precision.sigmoid_focal_loss_grad.oracle_fast import focal_pair_rows  # numba: loaded on first use

    xs, gs = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(gamma, dtype=np.float64))
    xs, gs = xs.ravel(), gs.ravel()
    return _settled(xs, gs, focal_pair_rows(xs, gs))


def focal_term_tables(x, gammas) -> dict:
    """``{gamma: TermTable}`` of A(x, gamma) for every x and every gamma.

    The compiled path (:func:`precision.sigmoid_focal_loss_grad.oracle_fast.focal_rows`) evaluates every
    row with its proven bound; the rows it leaves above TERM_REL (cancellation past about 2**40 near a root
    of A, or an exp argument it cannot decide) are recomputed with mpmath, doubling the precision until
    they reach it.  Either way a row's bits depend on (x, gamma) only, never on the rest of the batch.
    """
    from precision.sigmoid_focal_loss_grad.oracle_fast import focal_rows  # numba: loaded on first use

    xs = np.asarray(x, dtype=np.float64).ravel()
    gammas = [float(g) for g in gammas]
    magnitude = np.abs(xs)
    order = None if np.all(magnitude[1:] >= magnitude[:-1]) else np.argsort(magnitude, kind="stable")
    xo = xs if order is None else xs[order]
    hi, lo, ex, rel = focal_rows(xo, gammas)
    if order is not None:
        back = np.empty_like(order)
        back[order] = np.arange(order.size)
    tables = {}
    for j, g in enumerate(gammas):
        table = _settled(xo, np.full(xo.size, g), (hi[j], lo[j], ex[j], rel[j]))
        tables[g] = table if order is None else table.take(back)
    return tables


def absent_table(n: int) -> TermTable:
    """n rows standing for a term no selector uses (hi = lo = 0, rel = inf: never a decided rounding)."""
    return TermTable(np.zeros(n), np.zeros(n), np.zeros(n, np.int64), np.full(n, np.inf))


def term_sides(attributes: dict, targets) -> tuple[bool, bool]:
    """(A(x) needed, A(-x) needed) by a sweep over every combination of these attribute values
    (``{"alpha": values, "gamma": values}``) and selectors: A(x) where some ``alpha * (1 - t)`` is nonzero,
    A(-x) where some ``(1 - alpha) * t`` is (the coefficients of :func:`derive_gradient`)."""
    alphas = attributes["alpha"]
    return (any(a * (1 - t) != 0 for a in alphas for t in targets),
            any((1 - a) * t != 0 for a in alphas for t in targets))


def selected_term_tables(x, t, alpha, gamma: float) -> tuple[TermTable, TermTable]:
    """(pos, neg): A(x, gamma) and A(-x, gamma) for scattered points, each computed only where its coefficient
    (``alpha*(1-t)`` for A(x), ``(1-alpha)*t`` for A(-x)) is nonzero and once per distinct argument; the
    :func:`absent_table` row elsewhere.  ``x``, ``t``, ``alpha``: equal-length arrays (alpha may be a scalar);
    the two tables feed :func:`derive_gradient`."""
    x = np.asarray(x, dtype=np.float64)
    need_pos = alpha * (1 - t) != 0
    need_neg = (1 - alpha) * t != 0
    args = np.concatenate([x[need_pos], -x[need_neg]])
    if args.size == 0:
        return absent_table(x.size), absent_table(x.size)
    keys, first = np.unique(args.view(np.int64), return_index=True)
    table = focal_term_tables(args[first], [gamma])[gamma]

    def lookup(values, need):
        got = table.take(np.minimum(np.searchsorted(keys, values.view(np.int64)), keys.size - 1))
        absent = absent_table(values.size).as_arrays()
        return TermTable(**{f: np.where(need, v, absent[f]) for f, v in got.as_arrays().items()})

    return lookup(x, need_pos), lookup(-x, need_neg)


def _tight_row(x: float, g: float, ball):
    """The row of A(x, g), recomputed at doubled precision until rel <= TERM_REL (or the cap)."""
    prec = oracle._initial_prec(x, g) + TERM_EXTRA_BITS
    if ball is None:
        ball = oracle.focal_term(x, g, prec)
    while not ball.true_rel <= TERM_REL and prec < oracle.MAX_PREC:
        prec *= 2  # cancellation in the bracket (near the roots of A for g < -1)
        ball = oracle.focal_term(x, g, prec)
    return _ball_to_row(ball)


# ---------------------------------------------------------------------------
# Double-double helpers (Dekker, Veltkamp), vectorized
# ---------------------------------------------------------------------------

def _split(a):
    c = _SPLITTER * a
    big = c - (c - a)
    return big, a - big


def _two_prod(a, b):
    """p + e == a * b exactly (no overflow or underflow assumed)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


@dataclass(frozen=True)
class DerivedGradient:
    """Gradients derived for one output format.

    ``rounded`` holds correctly rounded values in the format's dtype;
    ``exact_hi``/``exact_lo`` the exact value as a double-double (float64;
    +-inf above float64's range, +-0 far below every format's range);
    ``fallback`` counts the points sent back to the scalar oracle; ``estimated``
    (with ``certify = False``) marks the points whose exact value is the
    compiled ball's centre, within its proven bound (at most
    :data:`ESTIMATE_REL`, 2^-40, relative), and whose correct rounding is
    undecided: ``rounded`` holds the rounding of ``exact_hi``, one of the two
    values next to the exact one.
    """

    rounded: np.ndarray
    exact_hi: np.ndarray
    exact_lo: np.ndarray
    fallback: int
    estimated: np.ndarray | None = None


def _cell_bounds(cand, fmt):
    """Float64 bounds (lower, upper) of the RNE rounding cell of each format value."""
    o = to_ordinal(cand, fmt)
    with np.errstate(invalid="ignore", over="ignore"):
        prev = from_ordinal(o - 1, fmt).astype(np.float64)
        nxt = from_ordinal(o + 1, fmt).astype(np.float64)
        c = cand.astype(np.float64)
        top = np.abs(c) == np.inf
        half_gap = (fmt.max_finite + math.ldexp(1.0, fmt.emax - fmt.prec)) * np.sign(c)
        # the largest finite values' cells end where rounding overflows (their neighbour is inf)
        lower = np.where((top & (c > 0)) | np.isinf(prev), half_gap, (prev + c) / 2)
        upper = np.where((top & (c < 0)) | np.isinf(nxt), half_gap, (c + nxt) / 2)
        lower = np.where(top & (c < 0), -np.inf, lower)
        upper = np.where(top & (c > 0), np.inf, upper)
    return lower, upper


def derive_gradient(x, t, alpha, gamma, weight, dout, count, fmt, pos: TermTable, neg: TermTable,
                    certify: bool = True) -> DerivedGradient:
    """Certified-rounded gradients from precomputed focal terms.

    Parameters
    ----------
    x, t, alpha, gamma, weight, dout, count : numpy.ndarray
        Equal-length 1-D arrays of exact inputs (alpha, gamma float32 values;
        t and count integers); x and gamma only serve the scalar fallback.
    fmt : str or Format
        Output format (fp16, bf16 or fp32; fp64 output always uses the
        scalar oracle).
    pos, neg : TermTable
        A(x, gamma) and A(-x, gamma) for each point.
    certify : bool, default True
        False: a point whose compiled ball is formed but straddles the end of
        a rounding cell keeps the ball's centre (``estimated``) instead of
        going to the scalar oracle, which can spend seconds deciding it (an
        exact value a hair off a midpoint: ``1 - alpha`` at a huge |x|) or
        fail.  Its exact value is as certain as a decided point's (the same
        proven bound, at most :data:`ESTIMATE_REL` = 2^-40 relative; a wider
        ball goes to the scalar oracle); only which neighbour is its correct
        rounding is open.  For screening (the worst-case hunt).

    Returns
    -------
    DerivedGradient

    Notes
    -----
    Each point is decided by the compiled pass
    :func:`precision.sigmoid_focal_loss_grad.oracle_fast.derive_rows`, which computes what
    :func:`_derive_reference` (the numpy definition) computes, bit for bit: the exact value as a
    double-double ball (the term's bound plus every double-double rounding), taken as decided only when
    the whole ball lies strictly inside one rounding cell of the output format.  The rest go to the
    scalar oracle.
    """
    from precision.sigmoid_focal_loss_grad.oracle_fast import derive_rows  # numba: loaded on first use

    f = get_format(fmt)
    x, t, a, g, w, d, n = _derive_inputs(x, t, alpha, gamma, weight, dout, count)
    size = x.size
    rounded, exact_hi, exact_lo = np.empty(size), np.zeros(size), np.empty(size)
    todo = np.ones(size, dtype=np.bool_)
    if f.prec <= 24:
        derive_rows(t, a, w, d, n, *(np.ascontiguousarray(c) for c in (pos.hi, pos.lo, pos.exp, pos.rel)),
                    *(np.ascontiguousarray(c) for c in (neg.hi, neg.lo, neg.exp, neg.rel)),
                    f.prec, f.emin, f.emax, rounded, exact_hi, exact_lo, todo)
    estimated = None
    if not certify:
        estimated = todo & (exact_hi != 0)
        todo = todo & ~estimated
    out = _with_fallback(x, t, a, g, w, d, n, f, rounded, exact_hi, exact_lo, todo)
    return out if estimated is None else dataclasses.replace(out, estimated=estimated)


def _derive_inputs(x, t, alpha, gamma, weight, dout, count):
    """The inputs of :func:`derive_gradient` as contiguous 1-D arrays of their dtypes."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    t = np.ascontiguousarray(t, dtype=np.int64)
    a = np.ascontiguousarray(alpha, dtype=np.float64)
    g = np.ascontiguousarray(gamma, dtype=np.float64)
    w = np.ascontiguousarray(weight, dtype=np.float64)
    d = np.ascontiguousarray(dout, dtype=np.float64)
    n = np.ascontiguousarray(count, dtype=np.int64)
    return x, t, a, g, w, d, n


def _with_fallback(x, t, a, g, w, d, n, f, rounded, exact_hi, exact_lo, todo) -> DerivedGradient:
    """The scalar oracle's value and exact value at the points ``todo`` marks; the result as DerivedGradient."""
    rows = np.flatnonzero(todo)
    for i in rows.tolist():
        args = (float(x[i]), int(t[i]), float(a[i]), float(g[i]), float(w[i]), float(d[i]), int(n[i]))
        try:
            rounded[i] = oracle.round_gradient(*args, fmt=f)
        except OracleUndecidedError:
            rounded[i] = np.nan
        h, l_, _ = oracle.exact_gradient(*args)
        exact_hi[i], exact_lo[i] = float(h), float(l_)
    return DerivedGradient(rounded.astype(f.dtype), exact_hi, exact_lo, int(rows.size))


def _derive_reference(x, t, alpha, gamma, weight, dout, count, fmt, pos: TermTable, neg: TermTable):
    """The numpy definition of :func:`derive_gradient`'s decision: (rounded, exact_hi, exact_lo, todo).

    At the points ``todo`` marks (they go to the scalar oracle): the ball's centre and the rounding of its
    high part where the ball was formed, at most ``ESTIMATE_REL`` (2^-40) wide relative, and straddles the end
    of a rounding cell, else 0.
    """
    f = get_format(fmt)
    x, t, a, g, w, d, n = _derive_inputs(x, t, alpha, gamma, weight, dout, count)
    with np.errstate(all="ignore"):
        c0 = a * (1 - t)
        one_minus_a = 1.0 - a
        c1 = -(one_minus_a * t)
        # exactness of the coefficients and of weight * dout in float64 (else: scalar fallback)
        exact_c = ((1.0 - one_minus_a) == a) & (np.abs(t) < 2**20) & (_two_prod(w, d)[1] == 0)
        wd = w * d
        structural_zero = (w == 0) | (d == 0) | ((c0 == 0) & (c1 == 0))
        use_pos = (c0 != 0) & (c1 == 0)
        use_neg = (c1 != 0) & (c0 == 0)
        c = np.where(use_pos, c0, c1)
        hi = np.where(use_pos, pos.hi, neg.hi)
        lo = np.where(use_pos, pos.lo, neg.lo)
        ex = np.where(use_pos, pos.exp, neg.exp)
        rel = np.where(use_pos, pos.rel, neg.rel)
        # K = c * w * d exactly as a double-double, then times the term, over count
        k_hi, k_lo = _two_prod(c, wd)
        # a product near or below float64's underflow has no exact error term (the scalar oracle takes it)
        tiny = ~(np.abs(k_hi) >= _K_MIN)
        # v = (hi + lo) K, then / count, each with its rounding bound measured on its own terms (so a value
        # a hair off a rounding boundary keeps a ball that small): the product's cross terms and sum (2u,
        # u) and its dropped lo * k_lo; the quotient's remainder term (3u of it; none for count 1)
        p, e0 = _two_prod(hi, k_hi)
        e = e0 + (hi * k_lo + lo * k_hi)
        v_hi = p + e
        v_lo = e - (v_hi - p)
        err_mul = _U * (2 * np.abs(hi * k_lo) + 2 * np.abs(lo * k_hi) + np.abs(e)) + np.abs(lo * k_lo) + 2.0**-1070
        nf = n.astype(np.float64)
        q1 = v_hi / nf
        pq, eq = _two_prod(q1, nf)
        q2 = (((v_hi - pq) - eq) + v_lo) / nf
        err_div = np.where(n == 1, 0.0, 3 * _U * np.abs(q2) + 2.0**-1070)
        rel_mul = err_mul / np.abs(v_hi)
        v_hi = q1 + q2
        v_lo = q2 - (v_hi - q1)
        r = rel * (1 + 2.0**-40) + (rel_mul + err_div / np.abs(v_hi)) * (1 + 2.0**-40)
        _, e_v = np.frexp(v_hi)
        binade = ex + e_v.astype(np.int64) - 1
        above = binade > _DECIDED_ABOVE
        below = binade < _DECIDED_BELOW
        in_range = ~above & ~below
        shift = np.where(in_range, ex, 0).astype(np.int64)
        s_hi = np.ldexp(v_hi, shift.astype(np.int32))
        s_lo = np.ldexp(v_lo, shift.astype(np.int32))
        cand = round_to_format(s_hi, f)
        lower, upper = _cell_bounds(cand, f)
        # s_hi exactly on a rounding boundary (a tie of the format): the low part says on which side the value
        # lies, and the rounding of the next float64 that way is its candidate
        tie = ((s_hi == lower) | (s_hi == upper)) & (s_lo != 0)
        if tie.any():
            cand = round_to_format(np.where(tie, np.nextafter(s_hi, np.copysign(np.inf, s_lo)), s_hi), f)
            lower, upper = _cell_bounds(cand, f)
        # the distances to the cell's ends, each computed with two roundings (at most 2u |D| + u |s_lo|):
        # decided when the ball's radius and that error fit inside both
        rad = np.abs(s_hi) * r
        to_lower = (s_hi - lower) + s_lo
        to_upper = (upper - s_hi) - s_lo
        below_ok = (to_lower == np.inf) | (to_lower > rad * (1 + 2.0**-50) + (np.abs(to_lower) + np.abs(s_lo))
                                           * 2.0**-50 + 2.0**-1070)
        above_ok = (to_upper == np.inf) | (to_upper > rad * (1 + 2.0**-50) + (np.abs(to_upper) + np.abs(s_lo))
                                           * 2.0**-50 + 2.0**-1070)
        decided = in_range & below_ok & above_ok & (r < 0.5)
        sign = np.sign(v_hi)
        far = (above | below) & (r < 0.5)
        far_value = np.where(above, sign * np.inf, sign * 0.0)
        ball = (use_pos | use_neg) & exact_c & ~structural_zero & ~tiny & np.isfinite(v_hi) & (v_hi != 0)
        ok = ball & (decided | far)
    # a ball formed but straddling a cell's end keeps its centre (an estimate: the rounding is undecided); every
    # other point left to the scalar oracle holds 0
    formed = ball & (r <= ESTIMATE_REL) & in_range
    rounded = np.where(far, far_value, cand.astype(np.float64))
    exact_hi = np.where(far, far_value, s_hi)
    exact_lo = np.where(far, 0.0, s_lo)
    blank = structural_zero | (~ok & ~formed)
    rounded = np.where(blank, 0.0, rounded)
    exact_hi = np.where(blank, 0.0, exact_hi)
    exact_lo = np.where(blank, 0.0, exact_lo)
    return rounded, exact_hi, exact_lo, ~ok & ~structural_zero


def gradient(pred, target, alpha, gamma, weight=1.0, dout=1.0, count=1, fmt="fp32") -> np.ndarray:
    """Correctly rounded exact gradients over broadcast numpy inputs: the oracle's certified batch path.

    The same contract as :func:`precision.sigmoid_focal_loss_grad.oracle.gradient` (its parameters, its
    conventions for zeros, overflow and undecided points), the same bits: each distinct (x, gamma) term
    once, from the compiled double-double path (:func:`focal_term_table`), every output rounded by
    :func:`derive_gradient`'s certified test, and mpmath for whatever either leaves undecided.  fp64
    outputs, which a double-double term cannot always decide, take the mpmath path whole.

    Examples
    --------
    >>> float(gradient(10.0, 0, 0.25, 2.0, fmt="fp32")).hex()
    '-0x1.3c064a0000000p-44'
    """
    f = get_format(fmt)
    if f.name == "fp64":
        return oracle.gradient(pred, target, alpha, gamma, weight, dout, count, fmt=f)
    x, t, a, g, w, d, n = oracle.broadcast_inputs(pred, target, alpha, gamma, weight, dout, count)
    shape = x.shape
    x, t, a, g, w, d, n = (arr.ravel() for arr in (x, t, a, g, w, d, n))
    # each point's one term: A(-x) where only the negative selector's coefficient is nonzero, else A(x) (a
    # point needing both, t outside {0, 1}, goes to the scalar oracle; a structural zero needs none)
    with np.errstate(all="ignore"):
        only_neg = (a * (1 - t) == 0) & ((1 - a) * t != 0)
    table = focal_term_table(np.where(only_neg, -x, x), g)
    derived = derive_gradient(x, t, a, g, w, d, n, f, table, table)
    return derived.rounded.reshape(shape)
