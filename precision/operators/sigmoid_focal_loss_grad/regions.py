"""The operator's domain in a study: its default pred regions and the ``windows`` pred set.

The regions cut pred where SigmoidFocalLossGrad changes behaviour (sigmoid saturated or not, the sign of x);
the windows are the intervals of pred where the bracket of A cancels (:mod:`.bracket`), sampled per gamma.
The sweep engine reads both through the operator's interface (the study file's ``[points] regions``
default and its ``[pred] kind = "windows"``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from precision.operators.sigmoid_focal_loss_grad.bracket import cancellation_windows, roots
from precision.exact.formats import from_ordinal, get_format, round_to_format, to_ordinal

__all__ = ["DEFAULT_REGION_EDGES", "window_preds", "PRED_SETS", "PredSet"]

#: Default pred region edges: x < -20, [-20, -8), [-8, 0), [0, 8), [8, 20), x >= 20.
DEFAULT_REGION_EDGES = (-20.0, -8.0, 0.0, 8.0, 20.0)


def window_preds(fmt, lo: float, hi: float, selector: int, cancellation: float, per_window: int, core: int,
                 seed: int, gamma: float) -> np.ndarray:
    """Points where the bracket of A cancels, at one gamma (float64, exact in the format ``fmt``).

    The windows are the intervals of x in ``[lo, hi]`` where the cancellation
    factor ``C >= cancellation`` (:func:`precision.operators.sigmoid_focal_loss_grad.bracket.cancellation_windows`;
    for selector 1, A(-x): the windows mirrored).  A window with no more
    floats than ``per_window`` is taken whole.  Otherwise it gets about
    ``per_window`` distinct points: uniform over the reals of the window, or,
    when roots of A lie in it (:func:`precision.operators.sigmoid_focal_loss_grad.bracket.roots`), half so and
    half at ordinal distances ``round(2**u)`` (u uniform) on either side of
    each root, plus every float within ``core`` ordinals of each root.
    Random draws come from the seed ``(seed, float32 bits of gamma)``.
    Empty where nothing cancels (gamma >= 0).
    """
    fmt = get_format(fmt)
    sign = -1.0 if selector == 1 else 1.0
    s_lo, s_hi = (lo, hi) if sign > 0 else (-hi, -lo)
    rng = np.random.default_rng([seed, int(np.float32(gamma).view(np.uint32))])
    n = per_window
    centres = [sign * r for r in roots(gamma, s_lo, s_hi)]
    parts = [np.empty(0)]
    for a, b in cancellation_windows(gamma, cancellation, s_lo, s_hi):
        a, b = sorted((sign * a, sign * b))
        oa, ob = (int(o) for o in to_ordinal(round_to_format(np.array([a, b]), fmt), fmt))
        if ob - oa + 1 <= n:
            parts.append(from_ordinal(np.arange(oa, ob + 1, dtype=np.int64), fmt).astype(np.float64))
            continue
        inside = [c for c in centres if a <= c <= b]
        uniform = n - (n // 2 if inside else 0)
        parts.append(rng.uniform(a, b, uniform))
        for c in inside:
            oc = int(to_ordinal(round_to_format(np.array([c]), fmt), fmt)[0])
            reach = max(ob - oc, oc - oa, 1)
            quota = (n // 2) // len(inside)
            ords = np.unique(np.clip(np.arange(oc - core, oc + core + 1, dtype=np.int64), oa, ob))
            target = ords.size + quota
            for _ in range(16):  # small distances repeat: draw until the quota of distinct floats is met
                missing = target - ords.size
                if missing <= 0:
                    break
                d = np.rint(np.exp2(rng.uniform(0.0, np.log2(reach), missing))).astype(np.int64)
                ords = np.unique(np.clip(np.concatenate([ords, oc + np.where(rng.integers(0, 2, d.size) == 1, d, -d)]),
                                         oa, ob))
            parts.append(from_ordinal(ords, fmt).astype(np.float64))
    values = round_to_format(np.concatenate(parts), fmt).astype(np.float64)
    return values[np.isfinite(values) & (values >= lo) & (values <= hi)]


# ---------------------------------------------------------------------------
# The pred sets it adds to the study file ([pred] kind = "windows")
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class PredSet:
    """A kind of pred set an operator adds to the study file (``[pred] kind = "<name>"``), drawn at each value of
    its terms attribute.

    ``label``: what it samples (run.json's ``weighting``); ``keys``: its keys besides ``kind``, ``format`` and
    ``range``; ``parse(reader, params)``: its parameters into ``params`` (the reader's ``number`` and ``error``
    give the study file's one-line errors); ``values(fmt, params, seed, term)``: its exact pred values at one
    value of the terms attribute.  Optional: ``size(fmt, params, term)``, an upper bound of the number of values
    without drawing them (the study's plan, :mod:`precision.engine.estimate`); ``empty_reason(params, term)``,
    why the set is empty at ``term`` (the one-line error of an empty point set).
    """

    label: str
    keys: frozenset
    parse: Callable
    values: Callable
    size: Callable | None = None
    empty_reason: Callable | None = None


def _parse_windows(reader, params: dict) -> None:
    params["cancellation"] = float(reader.number("cancellation", default=2.0))
    if not params["cancellation"] > 1:
        raise reader.error("cancellation", f"{params['cancellation']!r}; expected a factor C > 1")
    params["per_window"] = reader.number("per_window", default=100000, integer=True, positive=True)
    params["core"] = reader.number("core", default=2048, integer=True)
    if params["core"] < 0:
        raise reader.error("core", f"{params['core']!r}; expected a count >= 0")
    params["selector"] = reader.number("selector", default=0, integer=True)
    if params["selector"] not in (0, 1):
        raise reader.error("selector", f"{params['selector']!r}; expected 0 (A(x)) or 1 (A(-x))")
    params.setdefault("range", (-20.0, 20.0))


def _window_values(fmt, params: dict, seed: int, gamma: float) -> np.ndarray:
    return window_preds(fmt, *params["range"], params["selector"], params["cancellation"], params["per_window"],
                        params["core"], seed, gamma)


def _window_size(fmt, params: dict, gamma: float) -> int:
    """An upper bound of :func:`_window_values`' count without drawing: per window, ``per_window`` (or its floats
    when fewer), plus ``2 core + 1`` floats around each root (no window at gamma >= 0)."""
    fmt = get_format(fmt)
    lo, hi = params["range"]
    sign = -1.0 if params["selector"] == 1 else 1.0
    s_lo, s_hi = (lo, hi) if sign > 0 else (-hi, -lo)
    total = 0
    for a, b in cancellation_windows(gamma, params["cancellation"], s_lo, s_hi):
        oa, ob = (int(o) for o in to_ordinal(round_to_format(np.array(sorted((sign * a, sign * b))), fmt), fmt))
        total += min(ob - oa + 1, params["per_window"])
    centres = roots(gamma, s_lo, s_hi)
    return total + len(centres) * (2 * params["core"] + 1 + params["per_window"] // 2)


def _window_empty_reason(params: dict, gamma: float) -> str:
    if gamma >= 0:
        return "windows need gamma < 0, where the bracket of A cancels"
    return (f"no window in range {list(params['range'])} has cancellation >= {params['cancellation']:g} at "
            f"gamma={gamma:g} (lower cancellation or widen range)")


#: The pred sets of this operator's studies: ``windows``, where the bracket of A cancels, per gamma
#: (:func:`window_preds`; cancellation = C (default 2), per_window = N (default 100000), core = K (default 2048),
#: range = [lo, hi] (default [-20, 20]), selector = 0 | 1 (A(x) or A(-x))).
PRED_SETS = {"windows": PredSet("cancellation windows per gamma",
                                frozenset({"cancellation", "per_window", "core", "selector"}), _parse_windows,
                                _window_values, _window_size, _window_empty_reason)}
