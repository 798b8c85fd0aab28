"""Exact values derived from tabled terms, with a certified rounding decision (any operator's oracle reuse).

An operator whose exact value at a point is a linear combination of two reusable terms,

    value = (c0 T(x) + c1 T(-x)) * weight * dout / count,

tables each term once per distinct argument (a :class:`TermTable` row: the term as a double-double
significand, its exponent and its proven relative bound) and derives every point from it here: the product
as a double-double ball whose radius covers the term's bound and every double-double rounding, decided only
when the whole ball lies strictly inside one round-to-nearest-even cell of the output format.  What the
ball does not decide goes to the operator's scalar oracle (the ``fallback`` of :func:`derive`).
SigmoidFocalLossGrad's terms are its focal terms A(x, gamma) with c0 = alpha (1 - t), c1 = -(1 - alpha) t;
SigmoidFocalLoss's are its per-class losses with c0 = (1 - alpha)(1 - t), c1 = alpha t.

Term table columns (one row per argument):

``hi``, ``lo`` (float64)
    The midpoint's significand as a double-double, ``|hi|`` in [1, 2), sign included; 0 when unresolved.
``exp`` (int64)
    Binary exponent: T = (hi + lo) * 2**exp.  An operator may store a value far outside every format's range
    as ``hi = +-1``, ``lo = 0`` and a clamped exponent (SigmoidFocalLossGrad: 2**+-2**40).
``rel`` (float64)
    Relative error bound of ``(hi + lo) * 2**exp`` against the exact T; inf when unresolved.

Only one of c0, c1 may be nonzero at a point the ball decides (a point needing both, or whose coefficients
are not exact in float64, ``exact_c`` False, goes to the fallback).  :func:`derive` runs the compiled pass
:func:`precision.exact.derive_pass.derive_rows`; :func:`derive_reference` is its numpy definition, equal bit
for bit.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from mpmath import libmp

from precision.exact.derivation_bounds import DECIDED_ABOVE, DECIDED_BELOW, ESTIMATE_REL, EXP_CLAMP, EXP_FAR, K_MIN
from precision.exact.formats import from_ordinal, get_format, round_to_format, to_ordinal

__all__ = ["TermTable", "absent_table", "ball_row", "DerivedValue", "derive", "derive_reference", "cell_bounds", "two_prod",
           "ESTIMATE_REL", "DECIDED_ABOVE", "DECIDED_BELOW", "K_MIN"]

_SPLITTER = 134217729.0  # 2**27 + 1, Veltkamp's splitting constant for float64
_U = 2.0**-53  # float64's unit roundoff


@dataclass(frozen=True)
class TermTable:
    """An operator's terms T for parallel arrays of arguments, one row each (the module docstring's columns)."""

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


def ball_row(mid: tuple, rel: float) -> tuple:
    """(hi, lo, exp, rel): the table row of a ball, its midpoint ``mid`` (a raw mpf tuple) within ``rel``
    relative; the double-double truncation adds 2**-104.  An unknown ball (zero midpoint or infinite ``rel``) is
    the unresolved row; a midpoint beyond 2**+-EXP_FAR keeps its sign and side only (exponent +-EXP_CLAMP)."""
    sign, man, e, bc = mid
    if not man or not math.isfinite(rel):
        return 0.0, 0.0, 0, math.inf
    k = e + bc - 1
    if abs(k) > EXP_FAR and rel < 0.5:
        return (-1.0 if sign else 1.0), 0.0, (EXP_CLAMP if k > 0 else -EXP_CLAMP), 2.0**-100
    normalized = (sign, man, -(bc - 1), bc)  # value in [1, 2)
    hi = libmp.to_float(normalized, rnd=libmp.round_nearest)
    lo = libmp.to_float(libmp.mpf_sub(normalized, libmp.from_float(hi), 64, libmp.round_nearest))
    return hi, lo, k, rel * (1 + 2.0**-50) + 2.0**-104


def absent_table(n: int) -> TermTable:
    """n rows standing for a term no selector uses (hi = lo = 0, rel = inf: never a decided rounding)."""
    return TermTable(np.zeros(n), np.zeros(n), np.zeros(n, np.int64), np.full(n, np.inf))


def _split(a):
    c = _SPLITTER * a
    big = c - (c - a)
    return big, a - big


def two_prod(a, b):
    """p + e == a * b exactly (no overflow or underflow assumed)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


@dataclass(frozen=True)
class DerivedValue:
    """Exact values derived for one output format.

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


def cell_bounds(cand, fmt):
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


def derive(c0, c1, exact_c, weight, dout, count, fmt, pos: TermTable, neg: TermTable, fallback: Callable,
           certify: bool = True) -> DerivedValue:
    """Certified-rounded exact values ``(c0 T(x) + c1 T(-x)) * weight * dout / count`` from tabled terms.

    Parameters
    ----------
    c0, c1 : numpy.ndarray
        The coefficients of T(x) (``pos``) and T(-x) (``neg``) per point, float64.
    exact_c : numpy.ndarray of bool
        Whether c0 and c1 are the exact coefficients (else the point goes to ``fallback``).
    weight, dout, count : numpy.ndarray
        Equal-length 1-D arrays (count integers).
    fmt : str or Format
        Output format (fp16, bf16 or fp32; an fp64 output goes to ``fallback`` whole).
    pos, neg : TermTable
        T(x) and T(-x) per point (:func:`absent_table` rows where a coefficient is zero).
    fallback : callable
        ``fallback(rows, fmt) -> (rounded, exact_hi, exact_lo)``: the operator's scalar oracle at the point
        indices ``rows`` (an undecided rounding as NaN).
    certify : bool, default True
        False: a point whose ball is formed, at most :data:`ESTIMATE_REL` (2^-40) wide relative, but straddles
        the end of a rounding cell keeps the ball's centre (``estimated``) instead of going to ``fallback``:
        its exact value is as certain as a decided point's; only which neighbour is its correct rounding is
        open.  For screening (the worst-case hunt).
    """
    from precision.exact.derive_pass import derive_rows  # numba: loaded on first use

    f = get_format(fmt)
    c0, c1, exact_c, w, d, n = _derive_inputs(c0, c1, exact_c, weight, dout, count)
    size = c0.size
    rounded, exact_hi, exact_lo = np.empty(size), np.zeros(size), np.empty(size)
    todo = np.ones(size, dtype=np.bool_)
    if f.prec <= 24:
        derive_rows(c0, c1, exact_c, w, d, n, *(np.ascontiguousarray(c) for c in (pos.hi, pos.lo, pos.exp, pos.rel)),
                    *(np.ascontiguousarray(c) for c in (neg.hi, neg.lo, neg.exp, neg.rel)),
                    f.prec, f.emin, f.emax, rounded, exact_hi, exact_lo, todo)
    estimated = None
    if not certify:
        estimated = todo & (exact_hi != 0)
        todo = todo & ~estimated
    rows = np.flatnonzero(todo)
    if rows.size:
        rounded[rows], exact_hi[rows], exact_lo[rows] = fallback(rows, f)
    return DerivedValue(rounded.astype(f.dtype), exact_hi, exact_lo, int(rows.size), estimated)


def _derive_inputs(c0, c1, exact_c, weight, dout, count):
    """The inputs of :func:`derive` as contiguous 1-D arrays of their dtypes."""
    return (np.ascontiguousarray(c0, dtype=np.float64), np.ascontiguousarray(c1, dtype=np.float64),
            np.ascontiguousarray(exact_c, dtype=np.bool_), np.ascontiguousarray(weight, dtype=np.float64),
            np.ascontiguousarray(dout, dtype=np.float64), np.ascontiguousarray(count, dtype=np.int64))


def derive_reference(c0, c1, exact_c, weight, dout, count, fmt, pos: TermTable, neg: TermTable):
    """The numpy definition of :func:`derive`'s decision: (rounded, exact_hi, exact_lo, todo).

    At the points ``todo`` marks (they go to the scalar oracle): the ball's centre and the rounding of its
    high part where the ball was formed, at most ``ESTIMATE_REL`` (2^-40) wide relative, and straddles the end
    of a rounding cell, else 0.
    """
    f = get_format(fmt)
    c0, c1, exact_c, w, d, n = _derive_inputs(c0, c1, exact_c, weight, dout, count)
    with np.errstate(all="ignore"):
        # exactness of the coefficients and of weight * dout in float64 (else: scalar fallback)
        exact_c = exact_c & (two_prod(w, d)[1] == 0)
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
        k_hi, k_lo = two_prod(c, wd)
        # a product near or below float64's underflow has no exact error term (the scalar oracle takes it)
        tiny = ~(np.abs(k_hi) >= K_MIN)
        # v = (hi + lo) K, then / count, each with its rounding bound measured on its own terms (so a value
        # a hair off a rounding boundary keeps a ball that small): the product's cross terms and sum (2u,
        # u) and its dropped lo * k_lo; the quotient's remainder term (3u of it; none for count 1)
        p, e0 = two_prod(hi, k_hi)
        e = e0 + (hi * k_lo + lo * k_hi)
        v_hi = p + e
        v_lo = e - (v_hi - p)
        err_mul = _U * (2 * np.abs(hi * k_lo) + 2 * np.abs(lo * k_hi) + np.abs(e)) + np.abs(lo * k_lo) + 2.0**-1070
        nf = n.astype(np.float64)
        q1 = v_hi / nf
        pq, eq = two_prod(q1, nf)
        q2 = (((v_hi - pq) - eq) + v_lo) / nf
        err_div = np.where(n == 1, 0.0, 3 * _U * np.abs(q2) + 2.0**-1070)
        rel_mul = err_mul / np.abs(v_hi)
        v_hi = q1 + q2
        v_lo = q2 - (v_hi - q1)
        r = rel * (1 + 2.0**-40) + (rel_mul + err_div / np.abs(v_hi)) * (1 + 2.0**-40)
        _, e_v = np.frexp(v_hi)
        binade = ex + e_v.astype(np.int64) - 1
        above = binade > DECIDED_ABOVE
        below = binade < DECIDED_BELOW
        in_range = ~above & ~below
        shift = np.where(in_range, ex, 0).astype(np.int64)
        s_hi = np.ldexp(v_hi, shift.astype(np.int32))
        s_lo = np.ldexp(v_lo, shift.astype(np.int32))
        cand = round_to_format(s_hi, f)
        lower, upper = cell_bounds(cand, f)
        # s_hi exactly on a rounding boundary (a tie of the format): the low part says on which side the value
        # lies, and the rounding of the next float64 that way is its candidate
        tie = ((s_hi == lower) | (s_hi == upper)) & (s_lo != 0)
        if tie.any():
            cand = round_to_format(np.where(tie, np.nextafter(s_hi, np.copysign(np.inf, s_lo)), s_hi), f)
            lower, upper = cell_bounds(cand, f)
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
