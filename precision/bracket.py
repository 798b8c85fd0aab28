"""Cancellation in the bracket of A and the neighbourhood of its roots.

``A(s, g) = q^g * (g*p*ln(p) - q)`` with ``p = sigmoid(s)``, ``q = sigmoid(-s)``
(spec section 2; the gradient uses ``A(x)`` for selector 0 and ``A(-x)`` for
selector 1).  For ``g < 0`` the bracket's two terms ``u = g*p*ln(p) >= 0`` and
``-q`` oppose; their **cancellation factor**

    C(s, g) = max(|u|, q) / |u - q|          (>= 1; C = 1 when nothing cancels)

is the factor by which a relative error in either term is magnified in the
bracket.  ``A`` has real roots only for ``g < -1``, where ``C`` is infinite.  An
fp32 recipe that starts from ``e = Exp(-|x|)`` inherits e's rounding error
magnified by about ``C``, so accuracy targets are stated outside the **root
neighbourhood** ``{C >= threshold}`` for ``gamma < -1`` and the errors inside it
are reported by band of ``C``.

C is evaluated in float64 (stable log-sigmoid forms); it only classifies points
into bands, so float64's own error near ``C ~ 1e15`` is irrelevant.
"""

from __future__ import annotations

import numpy as np

__all__ = ["cancellation_factor", "bracket_band", "band_labels", "neighbourhood", "ROOT_NEIGHBOURHOOD_C"]

#: The documented root neighbourhood: the bracket cancels by a factor of 4 (2 bits) or more.
ROOT_NEIGHBOURHOOD_C = 4.0


def cancellation_factor(s, gamma: float) -> np.ndarray:
    """C(s, gamma) of the module docstring, float64, for gamma < -1; 1.0 for gamma >= -1.

    For gamma >= -1 A has no roots; the toolkit's neighbourhood is about roots,
    so C is reported as 1 there (no band beyond the first).
    """
    s = np.asarray(s, dtype=np.float64)
    if gamma >= -1:
        return np.ones(s.shape)
    with np.errstate(all="ignore"):
        log_p = -np.logaddexp(0.0, -s)                    # ln sigmoid(s)
        p = np.exp(log_p)
        q = np.exp(-np.logaddexp(0.0, s))                 # sigmoid(-s)
        u = gamma * p * log_p
        c = np.maximum(np.abs(u), q) / np.abs(u - q)
    return np.where(np.isnan(c), 1.0, c)


def bracket_band(x, target, gamma: float, edges) -> np.ndarray:
    """Band index (0..len(edges)) of C for the term(s) each (x, target) selects.

    Selector 0 uses A(x), selector 1 uses A(-x); any other integer selector
    uses both (the larger C).  ``edges`` increasing; band i is
    ``edges[i-1] <= C < edges[i]``.
    """
    x = np.asarray(x, dtype=np.float64)
    target = np.asarray(target)
    c_pos = cancellation_factor(x, gamma)
    c_neg = cancellation_factor(-x, gamma)
    c = np.where(target == 0, c_pos, np.where(target == 1, c_neg, np.maximum(c_pos, c_neg)))
    return np.searchsorted(np.asarray(edges, dtype=np.float64), c, side="right")


def band_labels(edges) -> list:
    """Labels of the bands cut by the edges: 'C < 2', 'C in [2, 4)', ..., 'C >= 64'."""
    edges = [float(e) for e in edges]
    if not edges:
        return ["all"]

    def fmt(v):
        return f"{v:g}"

    return ([f"C < {fmt(edges[0])}"] + [f"C in [{fmt(a)}, {fmt(b)})" for a, b in zip(edges[:-1], edges[1:])]
            + [f"C >= {fmt(edges[-1])}"])


def neighbourhood(gamma: float, threshold: float = ROOT_NEIGHBOURHOOD_C, lo: float = -64.0, hi: float = 64.0,
                  grid: int = 1 << 16) -> list:
    """Intervals of the argument s of A where C(s, gamma) >= threshold, as (a, b) pairs.

    Found on a uniform grid of ``grid`` points over [lo, hi] and refined by 60
    bisection steps at each crossing; an interval that reaches an end of the
    scan is open there (reported as that end).  Empty for gamma >= -1.
    """
    if gamma >= -1:
        return []
    s = np.linspace(lo, hi, grid)
    inside = cancellation_factor(s, gamma) >= threshold

    def crossing(a, b):
        fa = cancellation_factor(a, gamma) >= threshold
        for _ in range(60):
            mid = 0.5 * (a + b)
            if (cancellation_factor(mid, gamma) >= threshold) == fa:
                a = mid
            else:
                b = mid
        return 0.5 * (a + b)

    out = []
    start = lo if inside[0] else None
    for i in np.flatnonzero(inside[1:] != inside[:-1]):
        edge = crossing(s[i], s[i + 1])
        if inside[i + 1]:
            start = edge
        else:
            out.append((float(start), float(edge)))
            start = None
    if start is not None:
        out.append((float(start), float(hi)))
    return out
