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
    "RELATIVE_FLOOR", "THRESHOLD_T", "BLIND_ULP", "ALLCLOSE_PRESETS", "ACCEPTANCE_MAXIMA", "relative_error",
    "allclose_tolerances", "acceptance_parameters", "acceptance_columns",
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
#: Maxima of the acceptance columns -> their witness prefix (see :func:`acceptance_columns`).
ACCEPTANCE_MAXIMA = {"mare": "mare_witness_", "blind_ulp": "blind_witness_", "false_alarm_r": "false_alarm_witness_"}


def relative_error(computed, golden) -> np.ndarray:
    """The standards' relative error ``|computed - golden| / (|golden| + 1e-7)`` (float64).

    ``golden`` is the exact value (float64); a NaN or infinite output scores
    inf (0 when it equals an infinite golden).
    """
    return _relative_error_parts(np.asarray(computed, dtype=np.float64), np.asarray(golden, dtype=np.float64))[0]


def _relative_error_parts(c: np.ndarray, g: np.ndarray) -> tuple:
    """(relative error, c - g, |c - g|, |g|, c finite, every c finite): the error and the pieces the
    acceptance sums share with it."""
    finite = np.isfinite(c)
    all_finite = bool(finite.all())
    with np.errstate(invalid="ignore", over="ignore"):
        d = c - g
        dist, magnitude = np.abs(d), np.abs(g)
        r = dist / (magnitude + RELATIVE_FLOOR)
    if not all_finite:
        r = np.where(finite, r, np.where(c == g, 0.0, np.inf))
    return r, d, dist, magnitude, finite, all_finite


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
    :class:`~precision.analysis.groups.Grouping`).

    Sums (``acc_*``): ``acc_sum_r`` (the relative errors, inf with any
    NaN/inf output), ``acc_sum_sq`` (squared absolute errors, for RMSE),
    ``acc_blind`` (r <= 10 T and the output special or over :data:`BLIND_ULP`
    ulps), ``acc_false_alarm`` (correctly rounded, <= 0.5 ulp, and r > 10 T)
    and ``acc_allclose_<preset>`` per :data:`ALLCLOSE_PRESETS`.  Maxima:
    ``mare`` (max r), ``blind_ulp`` (the largest ulp error among blind
    outputs, NaN when none), ``false_alarm_r`` (the largest r among false
    alarms); each with the witness columns ``<prefix><name>`` of
    :data:`ACCEPTANCE_MAXIMA` taken from ``witness`` (name -> per-point array).
    """
    fmt = get_format(fmt)
    c = np.asarray(computed, dtype=np.float64).ravel()
    g = np.asarray(golden, dtype=np.float64).ravel()
    err = np.asarray(err_ulp, dtype=np.float64).ravel()
    err = np.where(np.isnan(err), np.inf, err)
    r, d, dist, magnitude, finite, all_finite = _relative_error_parts(c, g)
    with np.errstate(invalid="ignore", over="ignore"):
        sq = d * d if all_finite else np.where(finite, d * d, np.inf)
    constants = acceptance_parameters(fmt)
    limit = constants["limit"]
    blind = (r <= limit) & ~(err <= constants["blind_ulp"])
    false_alarm = (err <= 0.5) & (r > limit)
    masks = {"acc_blind": blind, "acc_false_alarm": false_alarm}
    for name, (atol, rtol) in zip(constants["names"], constants["tolerances"]):
        close = dist <= atol + rtol * magnitude
        masks[name] = close if all_finite else finite & close
    tallied = grouping.tally(masks)
    out = {"acc_sum_r": grouping.sum(r), "acc_sum_sq": grouping.sum(sq), **tallied}
    for (col, prefix), values, where in zip(ACCEPTANCE_MAXIMA.items(), (r, err, r), (None, blind, false_alarm)):
        if where is None:
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
