"""The certified derivation of exact values from tabled terms, compiled: :func:`derive_rows`.

:func:`precision.exact.terms.derive`'s decision per point, the same operations as its numpy definition
(:func:`precision.exact.terms.derive_reference`), bit for bit (tests/exact/test_terms.py and each operator's
oracle tests hold them to it).  Loaded on first use (numba); compiled once into the cache beside this file.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from precision.exact.double_double import U, exponent, pow2
from precision.exact.derivation_bounds import DECIDED_ABOVE, DECIDED_BELOW, ESTIMATE_REL, K_MIN

__all__ = ["derive_rows", "load"]

_JIT = dict(cache=True, nogil=True, error_model="numpy")


_SPLITTER = 134217729.0  # 2**27 + 1 (Veltkamp), as the numpy definitions in terms.py
_DECIDED_ABOVE, _DECIDED_BELOW = DECIDED_ABOVE, DECIDED_BELOW
_K_MIN = K_MIN


@numba.njit(inline="always", **_JIT)
def _split(a):
    c = _SPLITTER * a
    big = c - (c - a)
    return big, a - big


@numba.njit(inline="always", **_JIT)
def _veltkamp_prod(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@numba.njit(inline="always", **_JIT)
def _binade(v):
    """floor(log2 |v|) of a finite nonzero float64 (frexp's exponent minus one), subnormals included."""
    k = exponent(v)
    return k if k > -1023 else np.int64(math.frexp(v)[1]) - 1


@numba.njit(inline="always", **_JIT)
def _scaled(v, k):
    """v * 2**k, correctly rounded (math.ldexp's value): one multiplication while 2**k is a normal float64."""
    if -1022 <= k <= 1023:
        return v * pow2(k)
    return math.ldexp(v, k)


@numba.njit(inline="always", **_JIT)
def _round_format(v, prec, emin, emax):
    """v rounded to nearest-even into the format (prec, emin, emax): formats.round_to_format's steps."""
    if v == 0.0 or not math.isfinite(v):
        return v
    q = max(_binade(v), emin) - (prec - 1)
    r = np.rint(_scaled(v, -q))
    w = _scaled(r, q)
    if abs(w) > (2.0 - pow2(1 - prec)) * pow2(emax):
        return math.copysign(np.inf, v)
    return math.copysign(w, v)


@numba.njit(inline="always", **_JIT)
def _cell(c, prec, emin, emax):
    """(lower, upper): the float64 bounds of the RNE rounding cell of the format value c."""
    top = (2.0 - pow2(-prec)) * pow2(emax)  # max finite + half its ulp: the overflow threshold
    if c == np.inf:
        return top, np.inf
    if c == -np.inf:
        return -np.inf, -top
    tiny = pow2(emin - prec + 1)
    a = abs(c)
    if a == 0.0:
        return -0.5 * tiny, 0.5 * tiny
    q = max(_binade(a), emin) - (prec - 1)
    down_q = q - 1 if (a == pow2(q + prec - 1) and q + prec - 1 > emin) else q
    lo = (a - pow2(down_q) + a) / 2
    if a == (2.0 - pow2(1 - prec)) * pow2(emax):
        hi = top  # the largest finite value: its cell ends where rounding overflows
    else:
        hi = (a + (a + pow2(q))) / 2
    if c > 0:
        return lo, hi
    return -hi, -lo


@numba.njit(inline="always", **_JIT)
def _derive_one(c0, c1, exact_c, w, d, n, pos_hi, pos_lo, pos_ex, pos_rel, neg_hi, neg_lo, neg_ex, neg_rel, prec,
                emin, emax):
    """One point of :func:`derive_rows`: (rounded, exact_hi, exact_lo, left to the scalar oracle)."""
    exact_c = exact_c and _veltkamp_prod(w, d)[1] == 0
    wd = w * d
    if w == 0 or d == 0 or (c0 == 0 and c1 == 0):
        return 0.0, 0.0, 0.0, False
    use_pos = c0 != 0 and c1 == 0
    use_neg = c1 != 0 and c0 == 0
    if not (use_pos or use_neg) or not exact_c:
        return 0.0, 0.0, 0.0, True
    if use_pos:
        c, hi, lo, ex, rel = c0, pos_hi, pos_lo, pos_ex, pos_rel
    else:
        c, hi, lo, ex, rel = c1, neg_hi, neg_lo, neg_ex, neg_rel
    k_hi, k_lo = _veltkamp_prod(c, wd)
    if not abs(k_hi) >= _K_MIN:
        return 0.0, 0.0, 0.0, True
    p, e0 = _veltkamp_prod(hi, k_hi)
    e = e0 + (hi * k_lo + lo * k_hi)
    v_hi = p + e
    v_lo = e - (v_hi - p)
    err_mul = U * (2 * abs(hi * k_lo) + 2 * abs(lo * k_hi) + abs(e)) + abs(lo * k_lo) + 2.0**-1070
    rel_mul = err_mul / abs(v_hi)
    err_div = 0.0
    if n != 1:  # (dividing a normalized dd by 1 gives it back bit for bit)
        nf = float(n)
        q1 = v_hi / nf
        pq, eq = _veltkamp_prod(q1, nf)
        q2 = (((v_hi - pq) - eq) + v_lo) / nf
        err_div = 3 * U * abs(q2) + 2.0**-1070
        v_hi = q1 + q2
        v_lo = q2 - (v_hi - q1)
    r = rel * (1 + 2.0**-40) + (rel_mul + err_div / abs(v_hi)) * (1 + 2.0**-40)
    if not (math.isfinite(v_hi) and v_hi != 0 and r < 0.5):
        return 0.0, 0.0, 0.0, True
    binade = ex + _binade(v_hi)
    if binade > _DECIDED_ABOVE or binade < _DECIDED_BELOW:
        far = math.copysign(np.inf if binade > _DECIDED_ABOVE else 0.0, v_hi)
        return far, far, 0.0, False
    s_hi = _scaled(v_hi, ex)
    s_lo = _scaled(v_lo, ex)
    cand = _round_format(s_hi, prec, emin, emax)
    lower, upper = _cell(cand, prec, emin, emax)
    if (s_hi == lower or s_hi == upper) and s_lo != 0:  # a tie of the format: the low part picks the side
        cand = _round_format(np.nextafter(s_hi, math.copysign(np.inf, s_lo)), prec, emin, emax)
        lower, upper = _cell(cand, prec, emin, emax)
    rad = abs(s_hi) * r
    to_lower = (s_hi - lower) + s_lo
    to_upper = (upper - s_hi) - s_lo
    below_ok = to_lower == np.inf or to_lower > rad * (1 + 2.0**-50) + (abs(to_lower) + abs(s_lo)) * 2.0**-50 \
        + 2.0**-1070
    above_ok = to_upper == np.inf or to_upper > rad * (1 + 2.0**-50) + (abs(to_upper) + abs(s_lo)) * 2.0**-50 \
        + 2.0**-1070
    if below_ok and above_ok:
        return cand, s_hi, s_lo, False
    if r <= ESTIMATE_REL:  # (the ball straddles a cell's end: its centre, the rounding undecided)
        return cand, s_hi, s_lo, True
    return 0.0, 0.0, 0.0, True


@numba.njit(**_JIT)
def derive_rows(c0, c1, exact_c, w, d, n, pos_hi, pos_lo, pos_ex, pos_rel, neg_hi, neg_lo, neg_ex, neg_rel,
                prec, emin, emax, rounded, exact_hi, exact_lo, todo):
    """:func:`precision.exact.terms.derive`'s certified decision per point, compiled (the same operations, bit for
    bit as :func:`precision.exact.terms.derive_reference`).

    Writes rounded (float64 holding format values), exact_hi, exact_lo; ``todo[i]`` is True where the
    point is left to the scalar oracle: its outputs are then the ball's centre and the rounding of its
    high part where the ball was formed, its radius at most
    :data:`precision.exact.terms.ESTIMATE_REL` relative, and straddles the
    end of a rounding cell (``exact_hi != 0``), else 0.  Two points at a time (their chains interleaved).
    """
    size = c0.size
    for i in range(0, size - 1, 2):
        j = i + 1
        rounded[i], exact_hi[i], exact_lo[i], todo[i] = _derive_one(
            c0[i], c1[i], exact_c[i], w[i], d[i], n[i], pos_hi[i], pos_lo[i], pos_ex[i], pos_rel[i],
            neg_hi[i], neg_lo[i], neg_ex[i], neg_rel[i], prec, emin, emax)
        rounded[j], exact_hi[j], exact_lo[j], todo[j] = _derive_one(
            c0[j], c1[j], exact_c[j], w[j], d[j], n[j], pos_hi[j], pos_lo[j], pos_ex[j], pos_rel[j],
            neg_hi[j], neg_lo[j], neg_ex[j], neg_rel[j], prec, emin, emax)
    if size % 2:
        i = size - 1
        rounded[i], exact_hi[i], exact_lo[i], todo[i] = _derive_one(
            c0[i], c1[i], exact_c[i], w[i], d[i], n[i], pos_hi[i], pos_lo[i], pos_ex[i], pos_rel[i],
            neg_hi[i], neg_lo[i], neg_ex[i], neg_rel[i], prec, emin, emax)


def load() -> None:
    """Load the pass now (from the cache beside this file, or compiled the first time) for the argument types
    the operators give it (every binary format passes the same types)."""
    ones = np.ones(2)
    derive_rows(ones, np.zeros(2), np.ones(2, dtype=np.bool_), ones, ones, np.ones(2, dtype=np.int64),
                ones, np.zeros(2), np.zeros(2, dtype=np.int64), np.zeros(2), ones, np.zeros(2),
                np.zeros(2, dtype=np.int64), np.zeros(2), 24, -126, 127, np.empty(2), np.empty(2), np.empty(2),
                np.ones(2, dtype=np.bool_))
