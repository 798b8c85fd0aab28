"""Error attribution for SigmoidFocalLoss: which step of a recipe loses the bits, and why.

The machinery is the toolkit's (:mod:`precision.analysis.attribution`); this module binds a batch of the
operator's points (pred, target, alpha, gamma, weight) and gives their exact step values (:mod:`.step_values`).
``points`` columns: :data:`POINT_COLUMNS` (``weight`` NaN when absent).
"""

from __future__ import annotations

import numpy as np

from precision.analysis.attribution import POINT_HEAD, POINT_TAIL, Attribution, describe, operand_values
from precision.analysis.attribution import attribute_bound as attribute_steps
from precision.errors import ParameterError
from precision.operators.sigmoid_focal_loss.step_values import exact_point
from precision.operators.sigmoid_focal_loss.variants import bind_recipe
from precision.recipes.steps import BoundRecipe

__all__ = ["POINT_COLUMNS", "attribute", "attribute_bound", "describe"]

#: The operator's input columns of :attr:`Attribution.points` ...
INPUT_COLUMNS = ("pred", "target", "alpha", "gamma", "weight")
#: ... and every column, in order.
POINT_COLUMNS = POINT_HEAD + INPUT_COLUMNS + POINT_TAIL


def attribute_bound(bound: BoundRecipe, *, attributes: dict, g4_tile=None, exact_cache: dict | None = None
                    ) -> Attribution:
    """Attribute a bound recipe's evaluation on a batch of points (see :func:`attribute`).

    ``attributes`` holds ``alpha``, ``gamma`` (Python floats), ``machine`` (spec string) and optionally
    ``target`` (the int32 targets, flattened); ``exact_cache`` as
    :func:`precision.analysis.attribution.attribute_bound`.  The operator's recipes take no tile-level decision:
    ``g4_tile`` must be None.
    """
    if g4_tile is not None:
        raise ParameterError(f"g4_tile={g4_tile!r} given, but SigmoidFocalLoss's recipes have no tile decision")
    n = int(np.prod(bound.shape))
    ops = operand_values(bound)
    alpha, gamma = float(attributes["alpha"]), float(attributes["gamma"])
    xs, ws = ops["x"], ops["w"]
    ts = np.asarray(attributes["target"] if "target" in attributes else ops["t"]).reshape(-1).astype(np.int64)
    absent = bound.operands.get("w") is None
    keys = [(float(xs[i]), int(ts[i]), alpha, gamma, None if absent else float(ws[i])) for i in range(n)]
    columns = {"pred": xs, "target": ts, "alpha": alpha, "gamma": gamma, "weight": ws}
    return attribute_steps(bound, keys=keys, columns=columns, machine=attributes["machine"],
                           exact_point=exact_point, exact_cache=exact_cache)


def attribute(variant, pred, target, dout=None, weight=None, *, alpha=0.25, gamma=2.0, reduction="none",
              count=None, machine="ieee") -> Attribution:
    """Attribute the error of a variant at a batch of points to the steps of its recipe.

    Parameters
    ----------
    variant : str
        A variant of :mod:`.variants` (every one is a recipe).
    pred : array_like, float16 or float32
        The points' logits (any shape; flattened; its dtype is the profile).
    target : array_like of int
        0 or 1, broadcast to pred.
    dout : None
        The forward loss has no upstream gradient; accepted for the protocol's signature.
    weight : array_like or float, optional
        Broadcast to pred, converted to pred's dtype (RNE); None means absent.
    alpha, gamma, machine
        As :func:`.variants.evaluate`.
    reduction, count
        Ignored: the element recipe is attributed (the reductions have a stage of their own).

    Examples
    --------
    >>> a = attribute("kernel", np.float32([18.0]), [1], gamma=2.5)
    >>> a.points.loc[0, ["top_step", "top_cause"]].tolist()
    ['lg', 'sensitivity']
    >>> attribute("kernel_log1p", np.float32([18.0]), [1], gamma=2.5).points.loc[0, "top_step"]
    'q'
    """
    x = np.asarray(pred)
    dtype = x.dtype if x.dtype in (np.float16, np.float32) else np.dtype(np.float32)
    x = x.reshape(1, -1)
    with np.errstate(over="ignore"):
        t = np.broadcast_to(np.asarray(target), x.shape[1:]).astype(np.int32).reshape(1, -1)
        w = None if weight is None else \
            np.broadcast_to(np.asarray(weight, dtype=np.float64), x.shape[1:]).astype(dtype).reshape(1, -1)
    bound = bind_recipe(variant, x.astype(dtype), t, None, w, alpha=alpha, gamma=gamma, machine=machine)
    spec = machine if isinstance(machine, str) else bound.machine.model.spec
    return attribute_bound(bound, attributes={"alpha": float(np.float32(alpha)), "gamma": float(np.float32(gamma)),
                                              "machine": spec, "target": t.reshape(-1)})
