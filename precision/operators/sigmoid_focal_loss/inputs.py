"""SigmoidFocalLoss's contract: its attributes and the inputs every implementation validates.

Spec (shared/spec/sigmoid_focal_loss.md, "Contract"): pred [N, C] fp16 or fp32; target int32, 0 or 1; an
optional weight of pred's dtype; alpha in [0, 1], gamma in [0, 5], both finite float32 values.  The forward
loss has no upstream gradient: the engine's ``dout`` operand must be absent or all ones.  The element recipes
are scored element by element (reduction ``none``); the kernel's sum and mean are scored by the reduction
stage (:mod:`.reductions`), against the exact sum and mean of the exact elements.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from precision.errors import DtypeError, ParameterError
from precision.recipes.operands import check_arrays, float32_attribute

__all__ = ["ATTRIBUTES", "ATTRIBUTE_HELP", "TERMS_ATTRIBUTE", "REDUCTIONS", "GAMMA_RANGE", "LossInputs",
           "validate_inputs"]

#: The float attributes, in the order the operator's functions take them, with their default values.
ATTRIBUTES = {"alpha": (0.25,), "gamma": (2.0,)}
ATTRIBUTE_HELP = {"alpha": "balance attribute, in [0, 1]", "gamma": "focusing attribute, in [0, 5]"}
#: The exact loss depends on (x, gamma) through its per-class terms, tabled per value of gamma.
TERMS_ATTRIBUTE = "gamma"
#: The reductions of the operator; its element recipes are evaluated for ``none``.
REDUCTIONS = ("none", "sum", "mean")
#: The kernel's contract for gamma (its host-side check).
GAMMA_RANGE = (0.0, 5.0)


@dataclass(frozen=True)
class LossInputs:
    """Validated inputs: pred, target (int32, 0 or 1), weight (None when absent), alpha and gamma (float32)."""

    pred: np.ndarray
    target: np.ndarray
    weight: np.ndarray | None
    alpha: np.float32
    gamma: np.float32
    reduction: str
    dout: None = None

    @property
    def shape(self) -> tuple:
        return self.pred.shape

    @property
    def count(self) -> int:
        return int(self.pred.shape[0]) * int(self.pred.shape[1])


def validate_inputs(pred, target, dout, weight, alpha, gamma, reduction="none") -> LossInputs:
    """Check the contract and return the inputs; errors name the input and what was expected.

    Raises
    ------
    DtypeError, ShapeError, ParameterError
        A dtype, rank or shape off the contract; a target outside {0, 1}; alpha outside [0, 1] or gamma
        outside [0, 5] (after rounding to float32); a ``dout`` that is not all ones; a reduction other than
        ``none`` for an element evaluation.
    """
    arrays = check_arrays({"pred": pred, "target": target, "weight": weight})
    if "weight" in arrays and arrays["weight"].dtype != arrays["pred"].dtype:
        raise DtypeError(f"weight dtype={arrays['weight'].dtype}; expected pred's dtype {arrays['pred'].dtype}")
    if not np.isin(arrays["target"], (0, 1)).all():
        raise ParameterError("target holds values other than 0 and 1; expected a binary target")
    if dout is not None and not np.all(np.asarray(dout) == 1):
        raise ParameterError("dout given; SigmoidFocalLoss is a forward loss with no upstream gradient "
                             "(expected dout = 1 or absent)")
    a32, g32 = float32_attribute("alpha", alpha), float32_attribute("gamma", gamma)
    if not 0 <= a32 <= 1:
        raise ParameterError(f"alpha={float(a32)!r}; expected a value in [0, 1]")
    if not GAMMA_RANGE[0] <= g32 <= GAMMA_RANGE[1]:
        raise ParameterError(f"gamma={float(g32)!r}; expected a value in [0, 5] (the kernel's contract)")
    if reduction != "none":
        raise ParameterError(f"reduction={reduction!r}; the element recipes are evaluated for 'none' (the sum and "
                             "mean are scored by the reduction stage, [run] reductions = true)")
    return LossInputs(arrays["pred"], arrays["target"], arrays.get("weight"), a32, g32, reduction)
