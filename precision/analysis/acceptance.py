"""The acceptance standards' per-point metrics (Ascend's operator precision standards, allclose).

Relative errors against a golden, the threshold standard's limits per format,
allclose tolerances, and the sums and maxima they add to group statistics
(:func:`acceptance_columns`); judged by :mod:`precision.analysis.standards`.
"""

from __future__ import annotations

import numpy as np

from precision.analysis.scoring import blank_missing
from precision.exact.formats import get_format

__all__ = [
    "RELATIVE_FLOOR", "THRESHOLD_T", "BLIND_ULP", "ALLCLOSE_PRESETS", "ACCEPTANCE_COUNTS", "ACCEPTANCE_MAXIMA",
    "SPECIAL_RULE",
    "relative_error", "standards_golden", "special_positions", "allclose_tolerances", "acceptance_parameters",
    "acceptance_columns",
]

# ---------------------------------------------------------------------------
# Acceptance standards' per-point metrics (Ascend's operator precision standards, allclose)
# ---------------------------------------------------------------------------

#: The floor in the relative error's denominator: ``r = |actual - golden| / (|golden| + 1e-7)``.
RELATIVE_FLOOR = 1e-7
#: The single-benchmark threshold T per output format: pass when MERE < T and MARE < 10 T.
THRESHOLD_T = {"fp16": 2.0 ** -10, "bf16": 2.0 ** -7, "fp32": 2.0 ** -13}
#: An output accepted element-wise (r <= 10 T) but over this many ulps wrong (or special) is ``blind``.
BLIND_ULP = 2.0 ** 10
#: allclose presets: name -> {format: (atol, rtol)}; passes when ``|a - g| <= atol + rtol |g|``.
#: ``dynamic_shape``: the operator's dynamic-shape example (every format); ``unit_test``: its kernel unit
#: test (fp16 and fp32 as the test; bf16, which it does not cover, takes the fp16 tolerances).
ALLCLOSE_PRESETS = {
    "dynamic_shape": {"fp16": (1e-3, 2e-3), "bf16": (1e-3, 2e-3), "fp32": (1e-3, 2e-3)},
    "unit_test": {"fp16": (2e-2, 2e-2), "bf16": (2e-2, 2e-2), "fp32": (8e-4, 2e-3)},
}
#: How every standard judges a position where the output or the golden is NaN or infinite (TTK's rules).
SPECIAL_RULE = (
    "A position where the output or the golden is NaN or infinite is special (the golden being the exact value, "
    "or its correct rounding into the output format where that is infinite: a correctly rounded overflow is "
    "+-inf on both sides). A special position matches when both are NaN or both the same infinity (TTK's "
    "mix_tolerance) and is then left out of every metric; any other special position is a mismatch, and one "
    "mismatch fails the threshold standard and the ratio standard before any metric (TTK's stat_rel_err). "
    "MERE, MARE and RMSE are over the positions finite on both sides; allclose counts equal infinities close "
    "and NaN never (torch.allclose without equal_nan).")
#: The acceptance counts every scored set has, in the order of the compiled pass (the allclose presets' follow).
ACCEPTANCE_COUNTS = ("acc_blind", "acc_false_alarm", "acc_special_match", "acc_special_mismatch",
                     "acc_special_mismatch_finite")
#: Maxima of the acceptance columns -> their witness prefix (see :func:`acceptance_columns`).
ACCEPTANCE_MAXIMA = {"mare": "mare_witness_", "blind_ulp": "blind_witness_", "false_alarm_r": "false_alarm_witness_"}


def relative_error(computed, golden) -> np.ndarray:
    """The standards' relative error ``|computed - golden| / (|golden| + 1e-7)`` (float64) where both are finite;
    at a special position (:data:`SPECIAL_RULE`) 0 where it matches, inf where it does not."""
    evaluated, matched, _, _, _, _, r = _relative_parts(np.asarray(computed, dtype=np.float64),
                                                       np.asarray(golden, dtype=np.float64))
    return np.where(evaluated, r, np.where(matched, 0.0, np.inf))


def _relative_parts(c: np.ndarray, g: np.ndarray) -> tuple:
    """(evaluated, matched, mismatched, c - g, |c - g|, |g|, r): the :data:`SPECIAL_RULE` masks and, at the
    evaluated positions, the difference, its size, the golden's size and the relative error (0 elsewhere): the
    pieces the relative error and the acceptance sums share."""
    evaluated, matched, mismatched = special_positions(c, g)
    with np.errstate(invalid="ignore", over="ignore"):
        d = np.where(evaluated, c - g, 0.0)
        dist, magnitude = np.abs(d), np.abs(g)
        r = np.where(evaluated, dist / (magnitude + RELATIVE_FLOOR), 0.0)
    return evaluated, matched, mismatched, d, dist, magnitude, r


def standards_golden(exact, rounded) -> np.ndarray:
    """The golden the standards compare with (float64): the exact value where its correct rounding into the
    output format (``rounded``) is finite, that rounding (+-inf, or NaN) where it is not."""
    exact, rounded = np.asarray(exact, dtype=np.float64), np.asarray(rounded, dtype=np.float64)
    return np.where(np.isfinite(rounded), exact, rounded)


def special_positions(computed, golden) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(evaluated, matched, mismatched) masks of :data:`SPECIAL_RULE`: finite on both sides; special and
    matching (both NaN, or the same infinity); special and not matching."""
    c, g = np.asarray(computed, dtype=np.float64), np.asarray(golden, dtype=np.float64)
    evaluated = np.isfinite(c) & np.isfinite(g)
    matched = ~evaluated & ((np.isnan(c) & np.isnan(g)) | (c == g))
    return evaluated, matched, ~evaluated & ~matched


def allclose_tolerances(preset: str, fmt: str) -> tuple[float, float]:
    """(atol, rtol) of an allclose preset for an output format (KeyError naming the presets if unknown)."""
    if preset not in ALLCLOSE_PRESETS:
        raise KeyError(f"{preset!r} is not an allclose preset; expected one of {', '.join(ALLCLOSE_PRESETS)}")
    return ALLCLOSE_PRESETS[preset][get_format(fmt).name]


def acceptance_parameters(fmt) -> dict:
    """The constants of the acceptance metrics for an output format: ``limit`` (10 T, the element-wise bound of
    the threshold standard), ``blind_ulp``, ``floor`` (of r's denominator), and per allclose preset its column
    name in ``names`` and its (atol, rtol) in ``tolerances``."""
    name = get_format(fmt).name
    return {"limit": 10 * THRESHOLD_T[name], "blind_ulp": BLIND_ULP, "floor": RELATIVE_FLOOR,
            "names": tuple(f"acc_allclose_{preset}" for preset in ALLCLOSE_PRESETS),
            "tolerances": tuple(allclose_tolerances(preset, name) for preset in ALLCLOSE_PRESETS)}


def acceptance_columns(grouping, computed, golden, err_ulp, fmt, witness=None) -> dict:
    """Mergeable per-group sums and maxima of the acceptance standards, per group of ``grouping`` (a
    :class:`~precision.analysis.groups.Grouping`); ``golden`` as :func:`standards_golden` gives it, special
    positions judged by :data:`SPECIAL_RULE`.

    Counts (``acc_*``): ``acc_special_match`` and ``acc_special_mismatch``
    (special positions matching or not), ``acc_special_mismatch_finite``
    (the mismatches where the golden is finite: a special output), ``acc_blind`` (finite on both sides,
    r <= 10 T and over :data:`BLIND_ULP` ulps wrong), ``acc_false_alarm``
    (correctly rounded, <= 0.5 ulp, yet r > 10 T or a special mismatch) and
    ``acc_allclose_<preset>`` per :data:`ALLCLOSE_PRESETS`.  Sums over the
    positions finite on both sides: ``acc_sum_r`` (relative errors) and
    ``acc_sum_sq`` (squared absolute errors, for RMSE).  Maxima: ``mare``
    (max r over those positions, NaN when none), ``blind_ulp`` (the largest
    ulp error among blind outputs, NaN when none), ``false_alarm_r`` (the
    largest r among false alarms, inf for a special one); each with the
    witness columns ``<prefix><name>`` of :data:`ACCEPTANCE_MAXIMA` taken
    from ``witness`` (name -> per-point array).
    """
    fmt = get_format(fmt)
    c = np.asarray(computed, dtype=np.float64).ravel()
    g = np.asarray(golden, dtype=np.float64).ravel()
    err = np.asarray(err_ulp, dtype=np.float64).ravel()
    err = np.where(np.isnan(err), np.inf, err)
    evaluated, matched, mismatched, d, dist, magnitude, r = _relative_parts(c, g)
    constants = acceptance_parameters(fmt)
    limit = constants["limit"]
    blind = evaluated & (r <= limit) & ~(err <= constants["blind_ulp"])
    false_alarm = (err <= 0.5) & ((evaluated & (r > limit)) | mismatched)
    masks = {"acc_blind": blind, "acc_false_alarm": false_alarm, "acc_special_match": matched,
             "acc_special_mismatch": mismatched, "acc_special_mismatch_finite": mismatched & np.isfinite(g)}
    equal_infinities = matched & ~np.isnan(c)
    for name, (atol, rtol) in zip(constants["names"], constants["tolerances"]):
        masks[name] = (evaluated & (dist <= atol + rtol * magnitude)) | equal_infinities
    tallied = grouping.tally(masks)
    with np.errstate(over="ignore"):
        sq = d * d
    out = {"acc_sum_r": grouping.sum(r), "acc_sum_sq": grouping.sum(sq), **tallied}
    alarm_r = np.where(evaluated, r, np.inf)
    for (col, prefix), values, where in zip(ACCEPTANCE_MAXIMA.items(), (r, err, alarm_r),
                                            (evaluated, blind, false_alarm)):
        if where.all():
            top, at = grouping.argmax(values)
        elif where.any():
            top, at = grouping.argmax(np.where(where, values, -np.inf))
        else:  # no point qualifies (the usual case): no maximum, no witness, without a pass over the groups
            top, at = np.full(grouping.ids.size, -np.inf), np.zeros(grouping.ids.size, dtype=np.int64)
        none = top == -np.inf
        out[col] = np.where(none, np.nan, top)
        for name, v in (witness or {}).items():
            out[f"{prefix}{name}"] = blank_missing(np.asarray(v).ravel()[at], none)
    return out
