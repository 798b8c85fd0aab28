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

from precision.operators.sigmoid_focal_loss_grad.tiling import PRODUCTION_TILE

__all__ = ["guard_blocked", "not_exercised_reason", "decision_assumption", "TILED_GUARDS"]

#: Guards whose verdict depends on the tile: guard -> (the study that runs it at the production tile, the
#: production variant per output format).  The review decides such a guard at the production tile from that
#: study and shows the whole-task-as-one-tile verdict beside it as the upper bound
#: (precision.products.report.review).
TILED_GUARDS = {"G4": ("g4_tiling", {fmt: f"kernel[tile={n}]" for fmt, n in PRODUCTION_TILE.items()})}

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


def decision_assumption(guard: str, fired: int, count: int) -> str | None:
    """The assumption a keep / drop of ``guard`` rests on when it acted on ``fired`` of ``count`` compared points,
    where the production kernel may not meet it (the review page then says ``depends``); None when there is none.

    G4's fallback runs per ``ubFormer`` tile, only in tiles holding a clamped base (spec S4); a study whose points
    form one tile (the emulation's default, ``tile=None``) runs it wherever one point anywhere is clamped, so on
    every point when one is: an upper bound on how often the fallback acts in the kernel.  The production tile
    (:data:`precision.operators.sigmoid_focal_loss_grad.tiling.PRODUCTION_TILE`) is run by the ``g4_tiling`` study
    (:data:`TILED_GUARDS`).

    >>> decision_assumption("G4", 10, 10)
    'the whole task is one tile (G4 ran on all 10 points; the kernel runs it per ubFormer tile that holds a clamped base, so this is an upper bound)'
    >>> decision_assumption("G4", 3, 10) is None, decision_assumption("G5", 10, 10) is None
    (True, True)
    """
    if guard == "G4" and count and fired == count:
        return (f"the whole task is one tile (G4 ran on all {count:,} points; the kernel runs it per ubFormer tile "
                "that holds a clamped base, so this is an upper bound)")
    return None
