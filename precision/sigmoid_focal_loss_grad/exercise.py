"""Why a guard of SigmoidFocalLossGrad acts on no point of a study: what the report says instead of "no effect".

A guard that changed no output may simply never have had a chance to act.
:func:`guard_blocked` names the study axes that rule it out (no point of the
study can meet its condition: the reviewer must look at another study);
:func:`not_exercised_reason` names, for a run where it acted nowhere, why
(the axes, else where its condition would hold).  ``axes`` maps the study's
attributes (``alpha``, ``gamma``), ``weight`` (``None`` for absent) and
``format`` (the output formats) to their values.
"""

from __future__ import annotations

__all__ = ["guard_blocked", "not_exercised_reason"]

#: Where a guard's condition would hold, for a run whose axes allow it but whose points never meet it.
_CONDITION = {
    "G2": "p and q stay above MIN_NORMAL at every point (|x| < 87.3)",
    "G4": "no tile holds a base or a power <= MIN_NORMAL",
    "G1": "no point has x < 0",
}


def guard_blocked(guard: str, axes: dict) -> str | None:
    """Why ``guard`` cannot act on any point of a study with these axes; None where the axes allow it (it may
    still act nowhere: the points decide)."""
    gammas = [g for g in axes.get("gamma", []) if g is not None]
    weights = axes.get("weight", [])
    formats = axes.get("format", [])
    if guard == "G5" and gammas and min(gammas) >= 0:
        return "gamma >= 0 at every point (the cancellation G5 corrects needs gamma < 0)"
    if guard == "G7" and all(w is None for w in weights):
        return "no weight (G7 acts only on raw*weight)"
    if guard == "G8" and formats and "fp16" not in formats:
        return "fp32 outputs only (G8 acts on the fp16 store)"
    return None


def not_exercised_reason(guard: str, axes: dict, number=str) -> str:
    """Why ``guard`` acted on none of a run's points, from its axes where they decide it (``number`` spells a
    value, as the report prints numbers)."""
    reason = guard_blocked(guard, axes)
    if reason:
        return reason
    if guard == "G6":
        alphas = ", ".join(number(float(a)) for a in axes.get("alpha", []))
        return f"1 - alpha does not round to 1 for any alpha of the study ({alphas})"
    return _CONDITION.get(guard, "its condition holds at none of the study's points")
