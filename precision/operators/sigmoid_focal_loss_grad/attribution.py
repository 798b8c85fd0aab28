"""Error attribution for SigmoidFocalLossGrad: which step of a recipe loses the bits, and why.

The machinery is the toolkit's (:mod:`precision.analysis.attribution`: local errors, condition numbers,
causes, reachability, the top cause and its sentence); this module binds a batch of the operator's points
(pred, target, alpha, gamma, weight, dout, count) and gives their exact step values
(:mod:`.step_values`: the focal terms and the raw and scaled gradient come from the certified oracle).  The
G4 tile decision can be imposed (``g4_tile``): the decision the tensor the points came from took.

``points`` columns: :data:`POINT_COLUMNS` (``weight`` NaN when absent).
"""

from __future__ import annotations

import numpy as np

from precision.analysis.attribution import (CAUSES, COND_THRESHOLD, POINT_HEAD, POINT_TAIL, STEP_COLUMNS,
                                            TOP_TIE_RATIO, Attribution, describe, operand_values, top_causes)
from precision.analysis.attribution import attribute_bound as attribute_steps
from precision.analysis.exact_steps import CHECK_BITS, MAX_PREC, START_PREC
from precision.errors import ParameterError
from precision.operators.sigmoid_focal_loss_grad.guards import bind_recipe
from precision.operators.sigmoid_focal_loss_grad.step_values import exact_point
from precision.recipes.steps import BoundRecipe

__all__ = ["CAUSES", "COND_THRESHOLD", "TOP_TIE_RATIO", "START_PREC", "CHECK_BITS", "MAX_PREC", "STEP_COLUMNS",
           "POINT_COLUMNS", "Attribution", "attribute", "attribute_bound", "top_causes", "describe"]

#: The operator's input columns of :attr:`Attribution.points` ...
INPUT_COLUMNS = ("pred", "target", "alpha", "gamma", "weight", "dout", "count")
#: ... and every column, in order.
POINT_COLUMNS = POINT_HEAD + INPUT_COLUMNS + POINT_TAIL


def attribute_bound(bound: BoundRecipe, *, attributes: dict, g4_tile=None, exact_cache: dict | None = None
                    ) -> Attribution:
    """Attribute a bound recipe's evaluation (see :func:`attribute`); ``attributes`` names the batch.

    ``attributes`` holds ``alpha``, ``gamma``, ``count`` (Python scalars),
    ``machine`` (spec string) and optionally ``target`` (the int32 selectors,
    flattened; default: the loaded float values) for the exact values and the
    points table.  ``g4_tile`` (bool, or bool per point) replaces the G4 tile
    decision the batch would take (:func:`attribute`).  ``exact_cache`` (a
    dict the caller keeps between calls) reuses the exact values of a point
    already attributed with the same recipe configuration and formats (the
    exact values do not depend on the machine).
    """
    n = int(np.prod(bound.shape))
    ops = operand_values(bound)
    alpha, gamma, count = float(attributes["alpha"]), float(attributes["gamma"]), int(attributes["count"])
    xs, ds = ops["x"], ops["d"]
    ts = np.asarray(attributes["target"] if "target" in attributes else ops["t"]).reshape(-1).astype(np.int64)
    absent = bound.operands.get("w") is None
    ws = ops["w"]
    keys = [(float(xs[i]), int(ts[i]), alpha, gamma, None if absent else float(ws[i]), float(ds[i]), count)
            for i in range(n)]
    if g4_tile is not None and "g4_tile" not in bound.plan.names:
        raise ParameterError(f"g4_tile={g4_tile!r} given, but this recipe has no G4 tile decision (G4 is off)")
    columns = {"pred": xs, "target": ts, "alpha": alpha, "gamma": gamma, "weight": ws, "dout": ds, "count": count}
    return attribute_steps(bound, keys=keys, columns=columns, machine=attributes["machine"],
                           exact_point=exact_point, decisions=None if g4_tile is None else {"g4_tile": g4_tile},
                           exact_cache=exact_cache)


def attribute(variant, pred, target, dout=1.0, weight=None, *, alpha=0.25, gamma=2.0, reduction="mean",
              count=None, machine="ieee", g4_tile=None) -> Attribution:
    """Attribute the error of a variant at a batch of points to the steps of its recipe.

    Parameters
    ----------
    variant : str
        A registered variant that is a recipe (every fixed row; kernel[...]).
    pred : array_like, float16 or float32
        The points' logits (any shape; flattened).  Its dtype is the profile.
    target : array_like of int
        Raw selectors, broadcast to pred.
    dout, weight : array_like or float, optional
        Broadcast to pred and converted to pred's dtype (RNE); weight None
        means absent.  Default dout 1.
    alpha, gamma, reduction, count, machine
        As :func:`precision.operators.sigmoid_focal_loss_grad.guards.evaluate` (count: the mean's N*C;
        default the batch size).
    g4_tile : bool or array_like of bool, optional
        The G4 tile decision to use instead of the batch's own (broadcast to
        the points): the decision the tensor the points came from took, e.g.
        a sweep task's (:mod:`precision.engine.attribution_table`).  Default None:
        the batch decides.  A variant without G4 rejects it.

    Returns
    -------
    Attribution
        ``steps`` and ``points`` DataFrames (module docstring).

    Notes
    -----
    The points are evaluated as one ``[1, n]`` tensor, so tile-level
    decisions (G4 with the default one tile) see the whole batch, as a
    sweep's task does; use ``kernel[tile=1]`` to decide per point, or
    ``g4_tile`` to impose the decision of a larger tensor the points were
    taken from (a point whose power is subnormal gets the fallback only in a
    flagged tile, so a subset can compute other bits than its task did).  Cost:
    one exact evaluation per distinct point in Python (about 1 ms of CPU for
    the kernel: 10,000 points in 10 s), the rest vectorized.

    Examples
    --------
    >>> a = attribute("kernel", np.float32([10.0]), [0])
    >>> a.points.loc[0, ["top_step", "top_cause"]].tolist()
    ['q', 'cancellation']
    """

    x = np.asarray(pred)
    dtype = x.dtype if x.dtype in (np.float16, np.float32) else np.dtype(np.float32)
    x = x.reshape(1, -1)
    with np.errstate(over="ignore"):
        t = np.broadcast_to(np.asarray(target), x.shape[1:]).astype(np.int32).reshape(1, -1)
        d = np.broadcast_to(np.asarray(dout, dtype=np.float64), x.shape[1:]).astype(dtype).reshape(1, -1)
        w = None if weight is None else \
            np.broadcast_to(np.asarray(weight, dtype=np.float64), x.shape[1:]).astype(dtype).reshape(1, -1)
    bound = bind_recipe(variant, x, t, d, w, alpha=alpha, gamma=gamma, reduction=reduction, machine=machine,
                        count=count)
    a32, g32 = float(np.float32(alpha)), float(np.float32(gamma))
    n_mean = bound.count if reduction == "mean" else 1
    spec = machine if isinstance(machine, str) else bound.machine.model.spec
    return attribute_bound(bound, attributes={"alpha": a32, "gamma": g32, "count": n_mean, "machine": spec,
                                              "target": t.reshape(-1)}, g4_tile=g4_tile)
