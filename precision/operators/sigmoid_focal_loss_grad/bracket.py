"""Cancellation in the bracket of A and the neighbourhood of its roots.

``A(s, g) = q^g * (g*p*ln(p) - q)`` with ``p = sigmoid(s)``, ``q = sigmoid(-s)``
(spec section 2; the gradient uses ``A(x)`` for selector 0 and ``A(-x)`` for
selector 1).  For ``g < 0`` the bracket's two terms ``u = g*p*ln(p) >= 0`` and
``-q`` oppose; their **cancellation factor**

    C(s, g) = max(|u|, q) / |u - q|          (>= 1; C = 1 when nothing cancels)

is the factor by which a relative error in either term is magnified in the
bracket.  ``A`` has real roots only for ``g < -1``, where ``C`` is infinite;
for ``-1 <= g < 0`` C is finite but can be large (it grows without bound at
``g = -1`` as s grows, where the terms agree to ``O(e^-s)``).  An fp32 recipe
that starts from ``e = Exp(-|x|)`` inherits e's rounding error magnified by
about ``C`` unless it removes the cancellation algebraically (as the
candidate does at ``g = -1``), so accuracy targets are stated outside the
**root neighbourhood** ``{gamma < -1 and C >= threshold}`` and the errors
inside it are reported by band of ``C``.

C is evaluated in float64 through the ratio of the two terms (no term
underflows, for any finite s); it only classifies points into bands, so
float64's own error near ``C ~ 1e15`` is irrelevant.  The roots and the
windows' edges are printed and drawn from, so they must not depend on the
platform's float64 exp and log1p (whose last bits differ between numpy
releases): a crossing found on the float64 grid is refined by bisection on the
ratio evaluated in mpmath (:func:`_ratio_exact`, 96 bits), which decides every
midpoint's side the same way everywhere.
"""

from __future__ import annotations

import numpy as np
from mpmath import mp, mpf

__all__ = ["cancellation_factor", "selected_cancellation", "in_neighbourhood", "bracket_band", "band_labels", "band_ranges",
           "neighbourhood", "roots", "cancellation_windows", "ROOT_NEIGHBOURHOOD_C"]

#: The documented root neighbourhood: the bracket cancels by a factor of 4 (2 bits) or more.
ROOT_NEIGHBOURHOOD_C = 4.0


def cancellation_factor(s, gamma: float) -> np.ndarray:
    """C(s, gamma) of the module docstring, float64; 1.0 where the terms do not oppose (gamma >= 0).

    Evaluated through the ratio ``r = u/q`` (``r = -g log1p(e)/e`` for
    ``s >= 0``, ``r = g e (s - log1p(e))`` for ``s < 0``, ``e = exp(-|s|)``), so
    no term underflows: ``C = max(r, 1) / |r - 1|``, which tends to
    ``|g| / |g + 1|`` as s grows.
    """
    s = np.asarray(s, dtype=np.float64)
    if gamma >= 0:
        return np.ones(s.shape)
    r = _bracket_ratio(s, gamma)
    with np.errstate(all="ignore"):
        c = np.maximum(r, 1.0) / np.abs(r - 1.0)
    return np.where(np.isnan(c), 1.0, c)


def bracket_band(x, target, gamma: float, edges) -> np.ndarray:
    """Band index (0..len(edges)) of C for the term(s) each (x, target) selects.

    Selector 0 uses A(x), selector 1 uses A(-x); any other integer selector
    uses both (the larger C).  ``edges`` increasing; band i is
    ``edges[i-1] <= C < edges[i]``.
    """
    return np.searchsorted(np.asarray(edges, dtype=np.float64), selected_cancellation(x, target, gamma), side="right")


def selected_cancellation(x, target, gamma: float) -> np.ndarray:
    """C of the term(s) each (x, target) selects: A(x) for selector 0, A(-x) for 1, the larger for any other."""
    x = np.asarray(x, dtype=np.float64)
    target = np.asarray(target)
    c_pos = cancellation_factor(x, gamma)
    c_neg = cancellation_factor(-x, gamma)
    return np.where(target == 0, c_pos, np.where(target == 1, c_neg, np.maximum(c_pos, c_neg)))


def in_neighbourhood(x, target, gamma: float) -> np.ndarray:
    """True where (x, target) lies in the root neighbourhood of the term(s) it selects: ``gamma < -1`` (A has
    roots) and ``C >= ROOT_NEIGHBOURHOOD_C`` (:func:`selected_cancellation`); the zone the reports and
    ``precision hunt --outside-neighbourhood`` set apart."""
    x = np.asarray(x, dtype=np.float64)
    if not gamma < -1:
        return np.zeros(x.shape, dtype=bool)
    return selected_cancellation(x, target, gamma) >= ROOT_NEIGHBOURHOOD_C


def band_labels(edges) -> list:
    """Labels of the bands cut by the edges: 'C < 2', 'C in [2, 4)', ..., 'C >= 64'."""
    edges = [float(e) for e in edges]
    if not edges:
        return ["all"]

    def fmt(v):
        return f"{v:.10g}"

    return ([f"C < {fmt(edges[0])}"] + [f"C in [{fmt(a)}, {fmt(b)})" for a, b in zip(edges[:-1], edges[1:])]
            + [f"C >= {fmt(edges[-1])}"])


def band_ranges(edges) -> list:
    """(lower, upper) edges of each band of :func:`band_labels`, in the same order (C >= 1 always).

    Examples
    --------
    >>> band_ranges([2, 4])
    [(1.0, 2.0), (2.0, 4.0), (4.0, inf)]
    """
    edges = [float(e) for e in edges]
    bounds = [1.0, *edges, float("inf")]
    return list(zip(bounds[:-1], bounds[1:]))


def _bracket_ratio(s, gamma: float) -> np.ndarray:
    """``r = u / q`` of :func:`cancellation_factor` (float64): the bracket vanishes where r = 1."""
    s = np.asarray(s, dtype=np.float64)
    with np.errstate(all="ignore"):
        e = np.exp(-np.abs(s))
        l1p = np.log1p(e)
        log1p_over_e = np.where(e == 0, 1.0, l1p / np.where(e == 0, 1.0, e))
        return np.where(s >= 0, -gamma * log1p_over_e, gamma * e * (s - l1p))


def _refine(f, a: float, b: float, steps: int = 60) -> float:
    """The crossing of the boolean f between a and b (f(a) != f(b)), by bisection in float64."""
    fa = f(a)
    for _ in range(steps):
        mid = 0.5 * (a + b)
        if f(mid) == fa:
            a = mid
        else:
            b = mid
    return 0.5 * (a + b)


def _ratio_exact(s: float, gamma: float) -> mpf:
    """The ratio r of :func:`_bracket_ratio` at one float64 s, in mpmath at 96 bits (platform independent)."""
    with mp.workprec(96):
        v, g = mpf(float(s)), mpf(float(gamma))
        e = mp.exp(-abs(v))
        l1p = mp.log1p(e)
        return -g * l1p / e if v >= 0 else g * e * (v - l1p)


def _cancellation_exact(s: float, gamma: float) -> mpf:
    """C(s, gamma) of the module docstring from :func:`_ratio_exact` (inf at a root)."""
    r = _ratio_exact(s, gamma)
    return mp.inf if r == 1 else max(r, mpf(1)) / abs(r - 1)


def roots(gamma: float, lo: float = -64.0, hi: float = 64.0, grid: int = 1 << 16) -> list:
    """The roots of A(s, gamma) in [lo, hi] (float64, increasing): where the bracket's terms cancel exactly.

    A has roots only for gamma < -1 (empty otherwise); they are located as
    sign changes of ``r - 1`` on a uniform grid and refined by bisection (the ratio in mpmath).
    """
    if gamma >= -1:
        return []
    s = np.linspace(lo, hi, grid)
    above = _bracket_ratio(s, gamma) > 1.0
    return [_refine(lambda v: bool(_ratio_exact(v, gamma) > 1), s[i], s[i + 1])
            for i in np.flatnonzero(above[1:] != above[:-1])]


def cancellation_windows(gamma: float, threshold: float, lo: float = -64.0, hi: float = 64.0,
                         grid: int = 1 << 16) -> list:
    """Intervals of s in [lo, hi] where C(s, gamma) >= threshold, as (a, b) pairs, for any gamma.

    Found on a uniform grid of ``grid`` points and refined by 60 bisection
    steps at each crossing (C in mpmath); an interval that reaches an end of [lo, hi] is
    cut there.  Empty for gamma >= 0 (nothing cancels).  For -1 <= gamma < 0
    there is no root, but C grows towards ``|g| / |g + 1|`` as s grows (without
    bound at gamma = -1), so the interval can start anywhere and reach hi.
    """
    if gamma >= 0:
        return []
    s = np.linspace(lo, hi, grid)
    inside = cancellation_factor(s, gamma) >= threshold

    def test(v):
        return bool(_cancellation_exact(v, gamma) >= threshold)

    out = []
    start = lo if inside[0] else None
    for i in np.flatnonzero(inside[1:] != inside[:-1]):
        edge = _refine(test, s[i], s[i + 1])
        if inside[i + 1]:
            start = edge
        else:
            out.append((float(start), float(edge)))
            start = None
    if start is not None:
        out.append((float(start), float(hi)))
    return out


def neighbourhood(gamma: float, threshold: float = ROOT_NEIGHBOURHOOD_C, lo: float = -64.0, hi: float = 64.0,
                  grid: int = 1 << 16) -> list:
    """Intervals of the argument s of A where C(s, gamma) >= threshold, as (a, b) pairs (gamma < -1).

    :func:`cancellation_windows` for gamma < -1, with open ends: an interval
    reaching ``hi`` ends at +inf when C's limit ``|g| / |g + 1|`` is at least
    the threshold (C is monotone there), else at ``hi``; likewise ``lo`` and
    -inf (C -> 1 as s -> -inf).  Empty for gamma >= -1 (no roots).
    """
    if gamma >= -1:
        return []
    out = []
    for a, b in cancellation_windows(gamma, threshold, lo, hi, grid):
        if a == lo:
            a = -np.inf if threshold <= 1 else lo
        if b == hi and abs(gamma) / abs(gamma + 1.0) >= threshold:
            b = np.inf
        out.append((float(a), float(b)))
    return out
