"""The oracle's fast certified path: focal terms A(x, gamma) in compiled double-double arithmetic.

The same mathematics as :mod:`precision.operators.sigmoid_focal_loss_grad.oracle` (its module docstring), rewritten
so that no division is needed.  With a = |x|, e = exp(-a), L = log1p(e), D = L - e, R = D / e**2 and
g1 = gamma + 1 (exact in float64: gamma is a float32)::

    x >= 0:  A = -(g1 e + gamma D) exp(-(gamma a + g1 L))     (regime 1: e >= 2**-7)
             A = -(g1 + gamma e R) exp(-g1 (a + L))            (regimes 2, 3)
    x <  0:  A = -(1 + gamma e (a + L)) exp(-g1 L)

(``q**(g+1) = exp((g+1) ln q)`` with ``ln q = -(a + L)`` for x >= 0 and ``-L`` for x < 0, and
``A = q**g * S = -(N / e) q**(g+1)`` resp. ``-(1 + T) q**(g+1)`` with the bracket's numerators
N = g1 e + gamma D and 1 + T.)  The brackets cancel only where A has a root (gamma < -1, or
gamma e (a + L) near -1); their bound then grows by the cancellation factor, as the mpmath balls' do.

How each quantity is computed, with its bound (u = 2**-53; the dd operations and exp as proven in
:mod:`precision.exact.double_double`; a bound is relative unless it says absolute):

* :func:`_parts`, per a = |x| (shared by both signs and every gamma):

  - regime 1, a < A_SERIES = 7 ln 2 (e >= 2**-7): for a < A_TAYLOR = 2**-20, e and L from their Taylor
    series in a (``1 - a + a**2/2 - a**3/6 + a**4/24``, remainder below ``a**5/100``; ``ln 2 - a/2 + a**2/8
    - a**4/192``, alternating, remainder below ``a**6/2000``), the float64 tails with ``4u`` each; above,
    e by ``dd_exp`` and L by ``log1p_newton`` (its absolute bound).  D = L - e is a dd sum (cancellation at
    most 2**9, carried by the bound).
  - regime 2, a <= A_PLAIN = 600 (e >= 2**-866, so every dd product with e keeps a normal low part):
    e by ``dd_exp``; R = -1/2 + e/3 - e**2/4 + ... by its alternating series (:func:`_series_R`: its first
    orders in dd, the rest in float64 with ``16u``, as many as the size of e needs), or ``-1/2 + e/3``
    for e < 2**-60 (the rest below ``e**2/4``); then e R, L = e (1 + e R), a + L and e (a + L) as dd
    products and sums.
  - regime 3, a > A_PLAIN: e < 2**-865 is negligible: e R, L and e (a + L) are taken as 0 with the
    absolute bound 2**-730 (|gamma| and a are below 2**129).  Only gamma = -1, where A = e R itself, needs
    e: kept as a significand and exponent (``dd_exp``), or far below every format past EXP_ARG_MAX.
* :func:`_term`, per (x, gamma): the bracket M as dd products and one sum (absolute errors carried; a
  dd operation's low part that underflows adds at most 2**-1068), exp's argument y as dd with its absolute
  error d (exp turns it into a relative error at most ``1.01 d``; a row with d > 2**-20 is left), then
  ``A = -M exp(y)`` and its bound ``(rel_M + rel_E + rel_M rel_E + 8u**2) (1 + 2**-30)`` (the last factor
  covers the rounding of the bound arithmetic itself).

A row whose value lies beyond 2**+-EXP_FAR (4096) is stored with its exponent clamped to +-EXP_CLAMP and
its significand reduced to its sign (:mod:`precision.operators.sigmoid_focal_loss_grad.terms`: no float64
weight, dout and count bring such a value back into any format's range); the side is decided from y
when |y| exceeds EXP_ARG_MAX, with 8 binades of margin.  A row the path cannot bound comes back with
``rel = inf`` and :func:`precision.operators.sigmoid_focal_loss_grad.terms.focal_term_tables` computes it with
mpmath, as it does every row whose bound exceeds TERM_REL (2**-62).

The certified derivation of gradients from these rows is the toolkit's, not this operator's:
:mod:`precision.exact.terms` (its compiled pass :mod:`precision.exact.derive_pass`).

What is proven and what is measured: every bound above follows from IEEE binary64 arithmetic (round to
nearest, gradual underflow, no contraction into FMA: numba compiles without fast-math) and the proven
bounds of :mod:`precision.exact.double_double`; the C library's ``log1p`` only seeds a Newton step whose
size the bound measures.  The bounds are checked against the mpmath core at 400 bits in
``tests/operators/sigmoid_focal_loss_grad/test_oracle_fast.py``, and the outputs against the mpmath and Arb oracles
by ``benchmarks/oracle.py --identity`` and ``precision oracle --check``.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from precision.exact.double_double import (
    ADD_FP_REL, ADD_REL, EXP_ARG_MAX, EXP_REL, MUL_FP_REL, MUL_REL, U, dd_add, dd_add_fp, dd_exp, dd_mul,
    dd_mul_fp, exp_rel, exponent, log1p_newton, pow2, two_sum)

from precision.exact import derive_pass
from precision.operators.sigmoid_focal_loss_grad.oracle import EXP_CLAMP, EXP_FAR

__all__ = ["focal_rows", "focal_pair_rows", "SAFETY"]
#: Factor on every final bound: covers the rounding of the float64 bound arithmetic itself.
SAFETY = 1.0 + 2.0**-30

#: The regimes of a = |x| (module docstring): e = exp(-a) >= 2**-7 below A_SERIES (L by a Newton step, or
#: by its Taylor series in a below A_TAYLOR); R's series up to A_PLAIN; beyond it e is negligible.
A_TAYLOR = 2.0**-20
A_SERIES = 7 * math.log(2.0)
A_PLAIN = 600.0
#: e below 2**-60 takes R = -1/2 + e/3 (the rest below e**2/4).
_E_TINY = 2.0**-60
#: Absolute error allowed per dd operation for an underflowing low part (results far below every bound).
_UNDERFLOW = 2.0**-1068
#: A bound on |e R|, |L| and |e (a + L)| past A_PLAIN (e < 2**-865, a and gamma below 2**129).
_NEGLIGIBLE = 2.0**-730
#: The exponent standing for e past EXP_ARG_MAX: far below anything kept.
_NEGLIGIBLE_KE = -(1 << 30)
_INV_LN2 = 1.0 / math.log(2.0)


def _constants():
    """ln 2 as a dd, and R's series coefficients (-1)**(k+1) / (k+2): orders 0..3 as dd, 4..17 in float64."""
    import mpmath

    with mpmath.workprec(200):
        ln2 = mpmath.log(2)
        coefficients = [mpmath.mpf((-1) ** (k + 1)) / (k + 2) for k in range(18)]
        hi = np.array([float(c) for c in coefficients])
        lo = np.array([float(c - float(c)) for c in coefficients])
        return float(ln2), float(ln2 - float(ln2)), hi, lo


_LN2_HI, _LN2_LO, _R_HI, _R_LO = _constants()

_JIT = dict(cache=True, nogil=True, error_model="numpy")


@numba.njit(inline="always", **_JIT)
def _series_R(eh, el, rel_e):
    """R = D / e**2 = -1/2 + e/3 - e**2/4 + ... for 2**-60 <= e < 2**-7, with its relative bound.

    Orders 0..k-1 in dd (2k operations), k..m in float64 (relative error below 16u of their sum), k and m
    by the size of e so that the alternating series' first omitted term ``e**(m+1)/(m+3)`` stays below
    2**-107: m = 17, 8, 4 and k = 4, 3, 2 from e = 2**-7, 2**-12, 2**-24 down.
    """
    if eh >= 2.0**-12:
        k, m = 4, 17
    elif eh >= 2.0**-24:
        k, m = 3, 8
    else:
        k, m = 2, 4
    t = _R_HI[m]
    for j in range(m - 1, k - 1, -1):
        t = t * eh + _R_HI[j]
    Rh, Rl = dd_mul_fp(eh, el, t)
    ek = eh
    for j in range(k - 1, -1, -1):
        Rh, Rl = dd_add(Rh, Rl, _R_HI[j], _R_LO[j])
        if j:
            Rh, Rl = dd_mul(Rh, Rl, eh, el)
            ek *= eh
    rel = (ek * abs(t) * 16.0 * U + 2.0 * k * MUL_REL + 2.0**-107) * 2.1 + rel_e * eh
    return Rh, Rl, rel


@numba.njit(**_JIT)
def _parts(a):
    """What every gamma and both signs of x share at a = |x| >= 0 (see the module docstring).

    Returns ``(regime, P, aP, Q, aQ, S, aS, ES, aES, L, aL, e, ke, rel_e)`` with each dd as two
    floats and each ``a*`` an absolute error bound: the bracket's parts P (e in regime 1, else 1) and Q
    (D in regime 1, e R else), S = a + L, ES = e S, L; and e = (eh + el) 2**ke with its relative bound.
    """
    if a > A_PLAIN:
        if a > EXP_ARG_MAX:
            eh, el, ke = 1.0, 0.0, _NEGLIGIBLE_KE
        else:
            eh, el, ke = dd_exp(-a, 0.0)
        return (3, 1.0, 0.0, 0.0, 0.0, 0.0, _NEGLIGIBLE, a, 0.0, _NEGLIGIBLE, 0.0, 0.0, _NEGLIGIBLE,
                0.0, 0.0, _NEGLIGIBLE, eh, el, ke, EXP_REL)
    if a < A_TAYLOR:
        # e = 1 - a + a**2/2 - a**3/6 + a**4/24 (rest below a**5/120),
        # L = ln2 - a/2 + a**2/8 - a**4/192 (alternating, rest below a**6/2880)
        a2 = a * a
        eh, el = two_sum(1.0, -a)
        qe = a2 * (0.5 - a * (1.0 / 6.0 - a * (1.0 / 24.0)))
        eh, el = dd_add_fp(eh, el, qe)
        ae = a2 * a2 * a * (1.0 / 100.0) + 4.0 * U * qe + 2.0 * ADD_FP_REL
        Lh, Ll = dd_add_fp(_LN2_HI, _LN2_LO, -0.5 * a)
        qL = a2 * (0.125 - a2 * (1.0 / 192.0))
        Lh, Ll = dd_add_fp(Lh, Ll, qL)
        aL = a2 * a2 * a2 * (1.0 / 2000.0) + 4.0 * U * qL + 3.0 * ADD_FP_REL + U * U
        rel_e = ae / eh
    elif a < A_SERIES:
        eh, el, ke = dd_exp(-a, 0.0)
        scale = pow2(ke)
        eh, el = eh * scale, el * scale
        rel_e = exp_rel(0.0)
        ae = eh * rel_e
        Lh, Ll, aL = log1p_newton(eh, el, rel_e, math.log1p(eh))
    else:
        eh, el, ke = dd_exp(-a, 0.0)
        scale = pow2(ke)
        eh, el = eh * scale, el * scale
        rel_e = exp_rel(0.0)
        if eh < _E_TINY:
            Rh, Rl = -0.5, eh * (1.0 / 3.0)          # a normalized dd: |e/3| < 2**-61
            rel_R = 2.0**-118
        else:
            Rh, Rl, rel_R = _series_R(eh, el, rel_e)
        Qh, Ql = dd_mul(eh, el, Rh, Rl)
        aQ = abs(Qh) * (rel_e + rel_R + MUL_REL) * (1.0 + 2.0**-40) + _UNDERFLOW
        oh, ol = dd_add_fp(Qh, Ql, 1.0)
        Lh, Ll = dd_mul(eh, el, oh, ol)
        aL = Lh * (rel_e + aQ + ADD_FP_REL + MUL_REL) * (1.0 + 2.0**-40) + _UNDERFLOW
        Sh, Sl = dd_add_fp(Lh, Ll, a)
        aS = aL + Sh * ADD_FP_REL
        ESh, ESl = dd_mul(eh, el, Sh, Sl)
        aES = ESh * (rel_e + aS / Sh + MUL_REL) * (1.0 + 2.0**-40) + _UNDERFLOW
        return (2, 1.0, 0.0, 0.0, Qh, Ql, aQ, Sh, Sl, aS, ESh, ESl, aES, Lh, Ll, aL, eh, el, 0, rel_e)
    # regime 1: P = e, Q = D = L - e
    Dh, Dl = dd_add(Lh, Ll, -eh, -el)
    aD = (aL + ae) * (1.0 + 2.0**-40) + abs(Dh) * ADD_REL
    Sh, Sl = dd_add_fp(Lh, Ll, a)
    aS = aL + Sh * ADD_FP_REL
    ESh, ESl = dd_mul(eh, el, Sh, Sl)
    aES = ESh * (rel_e + aS / Sh + MUL_REL) * (1.0 + 2.0**-40)
    return (1, eh, el, ae, Dh, Dl, aD, Sh, Sl, aS, ESh, ESl, aES, Lh, Ll, aL, eh, el, 0, rel_e)


@numba.njit(inline="always", **_JIT)
def _far(yh, Mh, rel_M, kM):
    """The side (-1 below, +1 above) of -M exp(y) 2**kM when y decides it beyond EXP_FAR, else 0."""
    if not (rel_M < 0.5) or Mh == 0.0:
        return 0
    if yh < 0:
        if yh * _INV_LN2 + exponent(Mh) + 2 + kM < -(EXP_FAR + 8):
            return -1
    elif yh * _INV_LN2 + exponent(Mh) - 2 + kM > EXP_FAR + 8:
        return 1
    return 0


@numba.njit(**_JIT)
def _term(a, positive, g, p):
    """A(x, g) for x = +-a (``positive``: x >= 0) from the parts ``p`` of a: (hi, lo, exp, rel)."""
    (regime, Ph, Pl, aP, Qh, Ql, aQ, Sh, Sl, aS, ESh, ESl, aES, Lh, Ll, aL, eh, el, ke, rel_e) = p
    g1 = g + 1.0
    kM = 0
    if positive:
        if regime == 3 and g1 == 0.0:
            # A = e R = -(e/2)(1 - 2e/3 + ...): M = e/2 scaled, y = 0
            Mh, Ml, kM = 0.5 * eh, 0.5 * el, ke
            errM = Mh * (rel_e + 2.0**-800)
            yh, yl, ay = 0.0, 0.0, 0.0
        else:
            # M = g1 P + g Q
            th, tl = dd_mul_fp(Qh, Ql, g)
            errM = abs(g) * aQ + abs(th) * MUL_FP_REL + _UNDERFLOW
            if regime == 1:
                uh, ul = dd_mul_fp(Ph, Pl, g1)
                Mh, Ml = dd_add(uh, ul, th, tl)
                errM += abs(g1) * aP + abs(uh) * MUL_FP_REL + abs(Mh) * ADD_REL
            else:
                Mh, Ml = dd_add_fp(th, tl, g1)
                errM += abs(Mh) * ADD_FP_REL
            # y = -g1 S (+ a in regime 1)
            crude = -g1 * Sh + (a if regime == 1 else 0.0)
            if not abs(crude) < EXP_ARG_MAX - 1.0:
                yh, yl, ay = crude, 0.0, np.inf
            else:
                yh, yl = dd_mul_fp(Sh, Sl, -g1)
                ay = abs(g1) * aS + abs(yh) * MUL_FP_REL + _UNDERFLOW
                if regime == 1:
                    yh, yl = dd_add_fp(yh, yl, a)
                    ay += abs(yh) * ADD_FP_REL
    else:
        # M = 1 + T, T = g e S
        th, tl = dd_mul_fp(ESh, ESl, g)
        aT = abs(g) * aES + abs(th) * MUL_FP_REL + _UNDERFLOW if g != 0.0 else 0.0
        Mh, Ml = dd_add_fp(th, tl, 1.0)
        errM = aT + abs(Mh) * ADD_FP_REL
        # y = -g1 L
        crude = -g1 * Lh
        if not abs(crude) < EXP_ARG_MAX - 1.0:
            yh, yl, ay = crude, 0.0, np.inf
        else:
            yh, yl = dd_mul_fp(Lh, Ll, -g1)
            ay = abs(g1) * aL + abs(yh) * MUL_FP_REL + _UNDERFLOW
            if abs(th) < 2.0**-60 and abs(yh) < 2.0**-60:
                # near -1 (x far below 0): A = -(1 + T)(1 + y + y**2/2 + ...) = -(1 + low), low summed in
                # float64 (four roundings of terms below 2**-58: 4u (|T| + |y|)), the rest below |y|**3 / 5;
                # its bound scales with T and y, so an exact value a hair off a rounding boundary is decided
                low = ((th + yh) + (tl + yl)) + (th * yh + 0.5 * (yh * yh))
                rel = (aT + ay * 1.01 + 4.0 * U * (abs(th) + abs(yh)) + abs(yh * yh * yh) / 5 + 2.0**-1060) * SAFETY
                return -1.0, -low, 0, rel
    if Mh == 0.0:
        return 0.0, 0.0, 0, np.inf
    rel_M = errM * (1.0 + 2.0**-40) / abs(Mh)
    if not abs(yh) < EXP_ARG_MAX:
        side = _far(yh, Mh, rel_M, kM)
        if side == 0:
            return 0.0, 0.0, 0, np.inf
        return (-1.0 if Mh > 0 else 1.0), 0.0, side * EXP_CLAMP, 2.0**-100
    if not ay <= 2.0**-20:
        return 0.0, 0.0, 0, np.inf
    if yh == 0.0:
        Eh, El, kE, rel_E = 1.0, 0.0, 0, ay * 1.01
    else:
        Eh, El, kE = dd_exp(yh, yl)
        rel_E = exp_rel(yl) + ay * 1.01 * (1.0 + exp_rel(yl))
    Ah, Al = dd_mul(Mh, Ml, Eh, El)
    rel = (rel_M + rel_E + rel_M * rel_E + MUL_REL) * SAFETY
    ex = exponent(Ah)
    s = pow2(-ex)
    k = kM + kE + ex
    if k > EXP_FAR or k < -EXP_FAR:
        return (-1.0 if Ah > 0 else 1.0), 0.0, (EXP_CLAMP if k > 0 else -EXP_CLAMP), 2.0**-100
    return -Ah * s, -Al * s, k, rel


@numba.njit(**_JIT)
def _rows(x, gammas, hi, lo, ex, rel):
    """Fill rows [j, i] with A(x[i], gammas[j, i or 0]): ``gammas`` is (m, 1) (every gamma at every x) or
    (1, n) (each x its own).  Consecutive x of equal |x| share their parts; two x at a time, their terms
    interleaved (independent chains the processor overlaps: about 1.2x).
    """
    n = x.size
    own = gammas.shape[1] > 1
    p1 = _parts(0.0)
    last = -1.0
    for i in range(0, n, 2):
        a0 = abs(x[i])
        p0 = p1 if a0 == last else _parts(a0)
        pos0 = x[i] >= 0.0
        k0 = i if own else 0
        if i + 1 < n:
            a1 = abs(x[i + 1])
            p1 = p0 if a1 == a0 else _parts(a1)
            last = a1
            pos1 = x[i + 1] >= 0.0
            k1 = i + 1 if own else 0
            for j in range(gammas.shape[0]):
                hi[j, i], lo[j, i], ex[j, i], rel[j, i] = _term(a0, pos0, gammas[j, k0], p0)
                hi[j, i + 1], lo[j, i + 1], ex[j, i + 1], rel[j, i + 1] = _term(a1, pos1, gammas[j, k1], p1)
        else:
            for j in range(gammas.shape[0]):
                hi[j, i], lo[j, i], ex[j, i], rel[j, i] = _term(a0, pos0, gammas[j, k0], p0)


def _run(x, gammas):
    """(hi, lo, exp, rel) arrays [m, n] of :func:`_rows` (x: n values; gammas: (m, 1) or (1, n))."""
    shape = (gammas.shape[0], x.size)
    hi, lo, ex, rel = np.empty(shape), np.empty(shape), np.empty(shape, dtype=np.int64), np.empty(shape)
    _rows(x, gammas, hi, lo, ex, rel)
    return hi, lo, ex, rel


def focal_rows(x, gammas):
    """Term-table columns (hi, lo, exp, rel) of A(x, g) for every g in ``gammas``: arrays ``[g, x]``.

    ``x``: exact values (float64; order them by |x| so that x and -x share their parts); ``gammas``:
    float64 values (float32 values in the operator).  ``rel`` is inf where the fast path does not bound
    the row (the caller computes it with mpmath).
    """
    x = np.ascontiguousarray(x, dtype=np.float64).ravel()
    return _run(x, np.array(gammas, dtype=np.float64).reshape(-1, 1))


def focal_pair_rows(x, g):
    """Term-table columns (hi, lo, exp, rel) of A(x[i], g[i]) for broadcast arrays (flattened)."""
    x, g = np.broadcast_arrays(np.asarray(x, dtype=np.float64), np.asarray(g, dtype=np.float64))
    x, g = np.array(x.ravel(), order="C"), np.array(g.ravel(), order="C")  # writable copies (numba's types)
    return tuple(c.ravel() for c in _run(x, g.reshape(1, -1)))  # (one x: (1, 1), the same row either way)


def load() -> None:
    """Load every pass now (from the cache beside this file, or compiled the first time), for the argument
    types the oracle gives them: the term rows of a gamma list and of (x, gamma) pairs, and the derivation
    into a binary format (fp32's precision and exponent range; every format passes the same types)."""
    x = np.array([0.5, 30.0])
    hi, lo, ex, rel = focal_rows(x, [2.0])
    focal_pair_rows(x, x)
    derive_pass.load()
