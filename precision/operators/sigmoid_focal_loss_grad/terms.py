"""Oracle reuse: focal terms A(x, gamma) as arrays, and gradients derived from them.

The exact gradient depends on (x, gamma) only through A(x, gamma) and
A(-x, gamma) (spec section 2)::

    grad = (c0 A(x, g) + c1 A(-x, g)) * weight * dout / count,
    c0 = alpha (1 - t),   c1 = -(1 - alpha) t.

A sweep therefore evaluates each A once per distinct (x, gamma) (see
:func:`focal_term_tables`: the compiled double-double path of
:mod:`precision.operators.sigmoid_focal_loss_grad.oracle_fast` with its proven bound,
and mpmath for the rows that bound leaves above TERM_REL), keeps it (the cache), and
*derives* every (alpha, t, weight, dout, count, format) from it in vectorized
float64 double-double arithmetic (:func:`derive_gradient`), with a certified
rounding decision: the derived value is a ball whose radius covers the
focal term's own bound plus every double-double rounding, and the decision
is taken only when the whole ball lies strictly inside one rounding cell of the
output format.  The few points that the ball does not decide (near a rounding
boundary, near a root of A, or with both c0 and c1 nonzero) go back to the
scalar oracle (:func:`precision.operators.sigmoid_focal_loss_grad.oracle.round_gradient`), so every returned
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

import numpy as np

from precision.errors import OracleUndecidedError
from precision.exact.formats import get_format
from precision.exact.terms import (ESTIMATE_REL, DerivedValue, TermTable, absent_table, ball_row, derive,
                                   derive_reference)
from precision.operators.sigmoid_focal_loss_grad import oracle

#: A derivation's result (:class:`precision.exact.terms.DerivedValue`), by the name this operator gives it.
DerivedGradient = DerivedValue

__all__ = ["ESTIMATE_REL", "TermTable", "focal_term_table", "focal_term_tables", "selected_term_tables",
           "absent_table", "term_sides", "DerivedGradient", "derive_gradient", "gradient", "EXP_CLAMP", "EXP_FAR",
           "TERM_REL"]

#: Every stored term is tightened to this relative bound (or the oracle's
#: precision cap), so derived exact values carry over 60 good bits.
TERM_REL = 2.0**-62

#: Bits the focal terms start with beyond the oracle's :func:`.oracle._initial_prec`: at 64 bits
#: a ball's bound is about 2**-62.8, so two rows in three missed TERM_REL and were recomputed at twice the
#: precision; eight more bits bring every bound below it at no measurable cost per operation.
TERM_EXTRA_BITS = 8


#: The clamped exponent of a row beyond 2**+-EXP_FAR (module docstring).
EXP_CLAMP = oracle.EXP_CLAMP
EXP_FAR = oracle.EXP_FAR


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
    from precision.operators.sigmoid_focal_loss_grad.oracle_fast import focal_pair_rows  # numba: loaded on first use

    xs, gs = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(gamma, dtype=np.float64))
    xs, gs = xs.ravel(), gs.ravel()
    return _settled(xs, gs, focal_pair_rows(xs, gs))


def focal_term_tables(x, gammas) -> dict:
    """``{gamma: TermTable}`` of A(x, gamma) for every x and every gamma.

    The compiled path (:func:`precision.operators.sigmoid_focal_loss_grad.oracle_fast.focal_rows`) evaluates every
    row with its proven bound; the rows it leaves above TERM_REL (cancellation past about 2**40 near a root
    of A, or an exp argument it cannot decide) are recomputed with mpmath, doubling the precision until
    they reach it.  Either way a row's bits depend on (x, gamma) only, never on the rest of the batch.
    """
    from precision.operators.sigmoid_focal_loss_grad.oracle_fast import focal_rows  # numba: loaded on first use

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
    return ball_row(ball.mid, ball.true_rel)


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
    :func:`precision.operators.sigmoid_focal_loss_grad.oracle_fast.derive_rows`, which computes what
    :func:`_derive_reference` (the numpy definition) computes, bit for bit: the exact value as a
    double-double ball (the term's bound plus every double-double rounding), taken as decided only when
    the whole ball lies strictly inside one rounding cell of the output format.  The rest go to the
    scalar oracle.
    """
    x, t, a, g, w, d, n = _derive_inputs(x, t, alpha, gamma, weight, dout, count)
    c0, c1, exact_c = _coefficients(t, a)
    return derive(c0, c1, exact_c, w, d, n, fmt, pos, neg, _scalar_fallback(x, t, a, g, w, d, n), certify)


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


def _coefficients(t, a):
    """(c0, c1, exact): the coefficients alpha (1 - t) of A(x) and -(1 - alpha) t of A(-x) in float64, and
    whether both are exact (1 - alpha exact in float64, t small)."""
    with np.errstate(all="ignore"):
        c0 = a * (1 - t)
        one_minus_a = 1.0 - a
        c1 = -(one_minus_a * t)
        return c0, c1, ((1.0 - one_minus_a) == a) & (np.abs(t) < 2**20)


def _scalar_fallback(x, t, a, g, w, d, n):
    """The derivation's fallback: the scalar oracle's rounding and exact value at the given point indices."""
    def fallback(rows, f):
        out = np.empty((3, rows.size))
        for k, i in enumerate(rows.tolist()):
            args = (float(x[i]), int(t[i]), float(a[i]), float(g[i]), float(w[i]), float(d[i]), int(n[i]))
            try:
                out[0, k] = oracle.round_gradient(*args, fmt=f)
            except OracleUndecidedError:
                out[0, k] = np.nan
            h, l_, _ = oracle.exact_gradient(*args)
            out[1, k], out[2, k] = float(h), float(l_)
        return out[0], out[1], out[2]
    return fallback


def _derive_reference(x, t, alpha, gamma, weight, dout, count, fmt, pos: TermTable, neg: TermTable):
    """The numpy definition of :func:`derive_gradient`'s decision (:func:`precision.exact.terms.derive_reference`
    with this operator's coefficients): (rounded, exact_hi, exact_lo, todo)."""
    x, t, a, g, w, d, n = _derive_inputs(x, t, alpha, gamma, weight, dout, count)
    return derive_reference(*_coefficients(t, a), w, d, n, fmt, pos, neg)


def gradient(pred, target, alpha, gamma, weight=1.0, dout=1.0, count=1, fmt="fp32") -> np.ndarray:
    """Correctly rounded exact gradients over broadcast numpy inputs: the oracle's certified batch path.

    The same contract as :func:`precision.operators.sigmoid_focal_loss_grad.oracle.gradient` (its parameters, its
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
