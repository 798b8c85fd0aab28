"""The pred values of a study: each ``[pred]`` axis (stratified, grid, list, random, windows) drawn
exactly and reproducibly from the study's seed, per value of the operator's terms attribute where the set
depends on it (the ``windows``: SigmoidFocalLossGrad's cancellation windows at each gamma)."""

from __future__ import annotations

import math

import numpy as np

from precision.errors import ParameterError, StudyFileError
from precision.engine.operators import DEFAULT_OPERATOR, get_operator
from precision.exact.formats import get_format, round_to_format
from precision.engine.study import PredAxis, Study

__all__ = ["pred_values", "study_pred_values", "study_preds_by_term", "check_point_sets"]


def _in_range(values: np.ndarray, axis: PredAxis) -> np.ndarray:
    r = axis.get("range")
    if r is None:
        return values
    lo, hi = r
    return values[(values >= lo) & (values <= hi)]


#: Values handled by one numpy call while a point set is drawn, rounded, sorted and deduplicated: a Ctrl-C
#: waits at most for one such call (a few hundredths of a second), so generation is interruptible.
BLOCK = 1 << 20

_LOW_BITS = np.int64(0x7FFFFFFFFFFFFFFF)


def _keys(values: np.ndarray) -> np.ndarray:
    """int64 keys of float64 values: one per bit pattern, in the order of the values, -0 just below +0 (its
    own inverse: :func:`_values` turns keys back into values)."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.int64)
    return np.where(bits < 0, bits ^ _LOW_BITS, bits)


def _values(keys: np.ndarray) -> np.ndarray:
    return np.where(keys < 0, keys ^ _LOW_BITS, keys).view(np.float64)


def _merge_unique(blocks: list) -> np.ndarray:
    """The sorted distinct keys of sorted, distinct key blocks: merged two by two (each merge a stable sort of
    two sorted runs, linear), so no single numpy call sorts everything at once."""
    blocks = [b for b in blocks if b.size]
    if not blocks:
        return np.empty(0, dtype=np.int64)
    while len(blocks) > 1:
        merged = []
        for a, b in zip(blocks[::2], blocks[1::2]):
            m = np.concatenate([a, b])
            m.sort(kind="stable")
            keep = np.empty(m.size, dtype=bool)
            keep[0] = True
            np.not_equal(m[1:], m[:-1], out=keep[1:])
            merged.append(m[keep])
        if len(blocks) % 2:
            merged.append(blocks[-1])
        blocks = merged
    return blocks[0]


def _unique_keys(keys: np.ndarray) -> np.ndarray:
    """Sorted distinct keys, in blocks of :data:`BLOCK` (interruptible between them)."""
    return _merge_unique([np.unique(keys[i:i + BLOCK]) for i in range(0, keys.size, BLOCK)])


def _stratified(axis: PredAxis, rng: np.random.Generator) -> np.ndarray:
    """N values per binade of the format, both signs, uniform over the binade's floats; as keys (:func:`_keys`),
    sorted and distinct.

    The draws are made binade by binade in the order of the exponent, positive first (the seed's stream), and
    each binade's values sorted and deduplicated on its own; the binades, disjoint, are then laid end to end in
    the order of their values (no sort of the whole set)."""
    fmt = get_format(axis.format)
    n = axis.get("per_binade")
    lo, hi = axis.get("range", (-fmt.max_finite, fmt.max_finite))
    width = fmt.prec - 1
    parts = {(0.0, 0): _keys(np.zeros(1))}
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
            blocks = []
            for i in range(0, n, BLOCK):
                vals = sign * (start + k[i:i + BLOCK] * quantum)
                blocks.append(np.unique(_keys(vals[(vals >= lo) & (vals <= hi)])))
            del k
            parts[sign, e] = _merge_unique(blocks)
    if not (lo <= 0.0 <= hi):
        del parts[0.0, 0]
    order = sorted(parts, key=lambda se: (se[0], se[1] if se[0] > 0 else -se[1]))
    return np.concatenate([parts[se] for se in order])


def _unique_sorted(values: np.ndarray) -> np.ndarray:
    """Unique by bits (-0 and +0 are two inputs, as the kernel sees them), sorted by value (-0 before +0)."""
    return _values(_unique_keys(_keys(np.asarray(values, dtype=np.float64))))


def study_pred_values(study: "Study", term: float | None = None) -> np.ndarray:
    """The union of a study's pred sets at one value of its operator's terms attribute (float64, unique by
    bits, sorted; -0 kept).

    Set i draws its random values from seed ``study.seed + i``.  A set that
    depends on the terms attribute (``windows``) contributes its values at
    ``term``; with ``term=None``, its values at every such value of the study.
    """
    parts = []
    for i, axis in enumerate(study.pred_sets):
        if axis.per_term:
            parts += [pred_values(axis, study.seed + i, v, study.operator)
                      for v in (study.term_values if term is None else [term])]
        else:
            parts.append(pred_values(axis, study.seed + i, operator=study.operator))
    if len(parts) == 1:  # (each set is unique and sorted already)
        return parts[0]
    return _values(_merge_unique([_keys(p) for p in parts]))


def study_preds_by_term(study: "Study") -> dict:
    """{value of the terms attribute (:attr:`~precision.engine.study.Study.term_values`): pred values there}
    (:func:`study_pred_values`); one shared array when no set depends on it."""
    if not any(axis.per_term for axis in study.pred_sets):
        shared = study_pred_values(study)
        return {v: shared for v in study.term_values}
    return {v: study_pred_values(study, v) for v in study.term_values}


def pred_values(axis: PredAxis, seed: int, term: float | None = None,
                operator: str = DEFAULT_OPERATOR) -> np.ndarray:
    """The exact pred values of one set (float64, unique by bits, sorted, finite; -0 kept).

    ``term``, a value of the operator's terms attribute, is required by the sets that depend on it
    (the ``operator``'s own, its ``PRED_SETS``: ``windows``) and ignored by the others.
    """
    fmt = get_format(axis.format)
    rng = np.random.default_rng(seed)
    if axis.per_term:
        if term is None:
            name = get_operator(operator).TERMS_ATTRIBUTE
            raise ParameterError(f"pred kind={axis.kind!r} depends on {name}; pass one")
        values = get_operator(operator).PRED_SETS[axis.kind].values(axis.format, dict(axis.params), seed, term)
    elif axis.kind == "exhaustive":
        values = _in_range(fmt.finite_values().astype(np.float64), axis)
    elif axis.kind == "stratified":  # exact in the format, finite, distinct and sorted as drawn
        return _values(_stratified(axis, rng))
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
    blocks = []
    for i in range(0, values.size, BLOCK):
        block = round_to_format(values[i:i + BLOCK], fmt).astype(np.float64)
        blocks.append(np.unique(_keys(block[np.isfinite(block)])))
    return _values(_merge_unique(blocks))


# ---------------------------------------------------------------------------
# What a point set is: empty, or partly outside a profile's format
# ---------------------------------------------------------------------------

def _empty_reason(study: "Study", term) -> str:
    """Why the study's pred sets hold no value at ``term`` (a value of the terms attribute), in a few words."""
    op = get_operator(study.operator)
    reasons = []
    for axis in study.pred_sets:
        own = op.PRED_SETS.get(axis.kind) if axis.per_term else None
        why = getattr(own, "empty_reason", None)
        if why is not None:
            reasons.append(why(dict(axis.params), term))
        elif axis.get("range") is not None:
            lo, hi = axis.get("range")
            reasons.append(f"{axis.kind} over range [{lo:g}, {hi:g}] holds no finite {axis.format} value")
        else:
            reasons.append(f"{axis.kind} draws no value finite in {axis.format}")
    return "; ".join(dict.fromkeys(reasons))


def check_point_sets(study: "Study", preds_by_term: dict) -> list:
    """Check that the study's points are what it says; the notes a run prints (one line each).

    Raises :class:`~precision.errors.StudyFileError` (one line naming ``pred``) when nothing is left to run:
    the point set is empty at every value of the terms attribute, or no pred is a value of any profile's
    format.  Notes: the values of the terms attribute where the set is empty (no task runs there), and per
    profile how many preds its format cannot hold (a tensor of that format holds only its values: the
    others are left out of that profile's tasks).
    """
    op = get_operator(study.operator)
    name = op.TERMS_ATTRIBUTE or "the attributes"
    where = f"{study.path}: pred"
    empty = [t for t, p in preds_by_term.items() if p.size == 0]
    if len(empty) == len(preds_by_term):
        values = ", ".join(f"{t:g}" for t in preds_by_term if t is not None)
        at = f"; {name} = [{values}]" if values else ""
        raise StudyFileError(f"{where}: the point set is empty ({_empty_reason(study, empty[0])}{at}); expected at "
                             "least one pred value: change the [pred] set or its parameters")
    notes = [f"{where}: the point set is empty at {name}={t:g} ({_empty_reason(study, t)}); no task runs there"
             for t in empty]
    total = sum(p.size for p in preds_by_term.values())
    formats = ", ".join(dict.fromkeys(axis.format for axis in study.pred_sets))
    kept_by_profile = {}
    for profile in study.profiles:
        fmt = get_format(profile.pred)
        kept = 0
        for p in preds_by_term.values():
            for i in range(0, p.size, BLOCK):
                block = p[i:i + BLOCK]
                kept += int(np.count_nonzero(round_to_format(block, fmt).astype(np.float64).view(np.int64)
                                             == block.view(np.int64)))
        kept_by_profile[profile.name] = kept
    if not any(kept_by_profile.values()):
        raise StudyFileError(
            f"{where}: none of the {total:,} preds ({formats} values) is a value of the profiles' formats "
            f"({', '.join(kept_by_profile)}), so nothing is left to run; expected preds the profiles can hold: "
            f"set pred.format to the profile's format or add a profile of format {formats}")
    for profile, kept in kept_by_profile.items():
        if kept == total:
            continue
        fate = ("its tasks are skipped" if kept == 0 else
                f"profile {profile} runs the {kept:,} that are and leaves the others out")
        pred_format = profile.split("/")[0]
        wider = ", ".join(f for f in dict.fromkeys(axis.format for axis in study.pred_sets) if f != pred_format)
        notes.append(f"{where}: {total - kept:,} of {total:,} preds ({formats} values) are not {pred_format} values; "
                     f"{fate} (a profile of format {wider or formats} runs them all)")
    return notes
