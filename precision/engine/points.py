"""The pred values of a study: each ``[pred]`` axis (stratified, grid, list, random, windows) drawn
exactly and reproducibly from the study's seed, per gamma where the windows depend on it."""

from __future__ import annotations

import math

import numpy as np

from precision.errors import ParameterError
from precision.sigmoid_focal_loss_grad import cancellation_windows, roots
from precision.exact.formats import from_ordinal, get_format, round_to_format, to_ordinal
from precision.engine.study import PredAxis, Study

__all__ = ["pred_values", "study_pred_values", "study_preds_by_gamma", "window_values", "window_preds"]


def _in_range(values: np.ndarray, axis: PredAxis) -> np.ndarray:
    r = axis.get("range")
    if r is None:
        return values
    lo, hi = r
    return values[(values >= lo) & (values <= hi)]


def _stratified(axis: PredAxis, rng: np.random.Generator) -> np.ndarray:
    """N values per binade of the format, both signs, uniform over the binade's floats."""
    fmt = get_format(axis.format)
    n = axis.get("per_binade")
    lo, hi = axis.get("range", (-fmt.max_finite, fmt.max_finite))
    out = [np.zeros(1)]
    width = fmt.prec - 1
    for e in range(fmt.emin - 1, fmt.emax + 1):  # emin - 1 stands for the subnormals
        base = math.ldexp(1.0, e if e >= fmt.emin else fmt.emin)
        quantum = math.ldexp(1.0, (e if e >= fmt.emin else fmt.emin) - width)
        start = base if e >= fmt.emin else 0.0
        top = 2 * base if e >= fmt.emin else base
        for sign in (1.0, -1.0):
            a, b = sorted((sign * start, sign * top))
            if b < lo or a > hi:
                continue
            k = rng.integers(1 if e < fmt.emin else 0, 1 << width, n)
            vals = sign * (start + k * quantum)
            out.append(vals[(vals >= lo) & (vals <= hi)])
    return np.concatenate(out)


def _unique_sorted(values: np.ndarray) -> np.ndarray:
    """Unique by bits (-0 and +0 are two inputs, as the kernel sees them), sorted by value."""
    values = np.unique(np.asarray(values, dtype=np.float64).view(np.int64)).view(np.float64)
    return values[np.argsort(values, kind="stable")]


def study_pred_values(study: "Study", gamma: float | None = None) -> np.ndarray:
    """The union of a study's pred sets at one gamma (float64, unique by bits, sorted; -0 kept).

    Set i draws its random values from seed ``study.seed + i``.  A set that
    depends on gamma (``windows``) contributes its values at ``gamma``; with
    ``gamma=None``, its values at every gamma of the study.
    """
    parts = []
    for i, axis in enumerate(study.pred_sets):
        if axis.per_gamma:
            parts += [pred_values(axis, study.seed + i, g) for g in (study.gammas if gamma is None else [gamma])]
        else:
            parts.append(pred_values(axis, study.seed + i))
    return _unique_sorted(np.concatenate(parts))


def study_preds_by_gamma(study: "Study") -> dict:
    """{gamma: pred values at that gamma} (:func:`study_pred_values`); one shared array when no set depends
    on gamma."""
    if not any(axis.per_gamma for axis in study.pred_sets):
        shared = study_pred_values(study)
        return {g: shared for g in study.gammas}
    return {g: study_pred_values(study, g) for g in study.gammas}


def window_values(axis: PredAxis, seed: int, gamma: float) -> np.ndarray:
    """The ``windows`` pred set at one gamma (:func:`window_preds` with the axis' parameters)."""
    return window_preds(axis.format, *axis.get("range"), axis.get("selector"), axis.get("cancellation"),
                        axis.get("per_window"), axis.get("core"), seed, gamma)


def window_preds(fmt, lo: float, hi: float, selector: int, cancellation: float, per_window: int, core: int,
                 seed: int, gamma: float) -> np.ndarray:
    """Points where the bracket of A cancels, at one gamma (float64, exact in the format ``fmt``).

    The windows are the intervals of x in ``[lo, hi]`` where the cancellation
    factor ``C >= cancellation`` (:func:`precision.sigmoid_focal_loss_grad.bracket.cancellation_windows`;
    for selector 1, A(-x): the windows mirrored).  A window with no more
    floats than ``per_window`` is taken whole.  Otherwise it gets about
    ``per_window`` distinct points: uniform over the reals of the window, or,
    when roots of A lie in it (:func:`precision.sigmoid_focal_loss_grad.bracket.roots`), half so and
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


def pred_values(axis: PredAxis, seed: int, gamma: float | None = None) -> np.ndarray:
    """The exact pred values of one set (float64, unique by bits, sorted, finite; -0 kept).

    ``gamma`` is required by the sets that depend on it (``windows``) and ignored by the others.
    """
    fmt = get_format(axis.format)
    rng = np.random.default_rng(seed)
    if axis.per_gamma:
        if gamma is None:
            raise ParameterError(f"pred kind={axis.kind!r} depends on gamma; pass one")
        values = window_values(axis, seed, gamma)
    elif axis.kind == "exhaustive":
        values = _in_range(fmt.finite_values().astype(np.float64), axis)
    elif axis.kind == "stratified":
        values = _stratified(axis, rng)
    elif axis.kind == "grid":
        start, stop, num = axis.get("start"), axis.get("stop"), axis.get("num")
        values = (np.geomspace if axis.get("spacing") == "log" else np.linspace)(start, stop, num)
    elif axis.kind in ("list", "file"):
        values = np.array(axis.get("values"), dtype=np.float64)
    elif axis.kind == "normal":
        values = rng.normal(axis.get("mean"), axis.get("sigma"), axis.get("count"))
    elif axis.kind == "uniform_real":
        values = rng.uniform(axis.get("low"), axis.get("high"), axis.get("count"))
    else:  # pragma: no cover - parse_study admits only PRED_KINDS
        raise ParameterError(f"pred kind={axis.kind!r}")
    values = round_to_format(values, fmt).astype(np.float64)
    return _unique_sorted(values[np.isfinite(values)])
