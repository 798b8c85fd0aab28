"""The G5 threshold search over a sweep's tasks: this operator's stage of a run.

Each task's two evaluations (kernel[G5=always] and kernel[G5=never], their S5
steps kept) on its own tensor, on the run's executor, turned into the evidence
of :mod:`precision.operators.sigmoid_focal_loss_grad.threshold_search` (where the search
itself, and why two evaluations decide every threshold, are written), pooled
per machine, format and profile.  The sweep engine runs it through the
operator's interface (:data:`RUN_STAGES`: :func:`threshold_search_stage`)
when a study asks for it (``[run] threshold_search = true``).
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from precision.engine.operators import RunStage
from precision.engine.task import _Tensor
from precision.errors import PrecisionError
from precision.operators.sigmoid_focal_loss_grad.comparisons import ALWAYS, NEVER, thresholds_of
from precision.operators.sigmoid_focal_loss_grad.guards import evaluate_variants
from precision.operators.sigmoid_focal_loss_grad.threshold_search import (EVIDENCE_STEPS, OCTAVE_COLUMNS, SEARCH_COLUMNS,
                                                                ThresholdEvidence, evidence_arrays, search_thresholds)

__all__ = ["task_evidence", "collect", "threshold_search_stage", "RUN_STAGES"]


def task_evidence(task, pooled_regions=None) -> dict:
    """The arrays of one sweep task's :class:`ThresholdEvidence`, or {} when its variants lack kernel[G5=always]
    and kernel[G5=never].

    ``pooled_regions`` holds one bool per region of the task (its ``region_edges`` cut them): only the
    elements of pooled regions are kept (default: every element).
    """
    if ALWAYS not in task.variants or NEVER not in task.variants:
        return {}
    tensor = _Tensor(task)
    outputs, steps = evaluate_variants([ALWAYS, NEVER], tensor.pred2d, tensor.target2d, tensor.dout2d,
                                       tensor.weight2d, **task.attribute_values,
                                       reduction=task.reduction, machine=task.machine, keep_steps=EVIDENCE_STEPS,
                                       **({"count": tensor.count} if task.reduction == "mean" else {}))
    regions = np.searchsorted(np.asarray(task.region_edges), task.preds, side="right")
    keep = np.ones(len(task.region_edges) + 1, dtype=bool) if pooled_regions is None else np.asarray(pooled_regions)
    pooled = np.repeat(keep[regions], len(task.targets))
    return evidence_arrays(outputs, steps[ALWAYS], tensor.scorer, tensor.fmt, task.machine, pooled)


def collect(tasks, executor, pooled_regions=None) -> list:
    """:class:`ThresholdEvidence` per (machine, format, profile) from a study's tasks (run on the executor), over
    the elements of the pooled regions (:func:`task_evidence`)."""
    parts: dict = {}
    for i, arrays in executor.map_unordered(functools.partial(task_evidence, pooled_regions=pooled_regions),
                                            list(tasks)):
        if arrays:
            t = tasks[i]
            parts.setdefault((t.machine, t.profile.pred, t.profile.name), []).append((i, arrays))
    out = []
    for (machine, fmt, profile), pieces in parts.items():
        pieces.sort(key=lambda p: p[0])  # task order: the evidence does not depend on completion order
        cols = {k: np.concatenate([p[1][k] for p in pieces]) for k in pieces[0][1]}
        out.append(ThresholdEvidence(machine, fmt, profile, **cols))
    order = {(t.machine, t.profile.name): i for i, t in enumerate(tasks)}
    return sorted(out, key=lambda e: order[(e.machine, e.profile)])


def threshold_search_stage(variants) -> RunStage:
    """The threshold search as a stage of a run of ``variants``: the tables ``threshold_search`` (the best float32
    threshold per machine, format and profile) and ``threshold_search_octaves`` (the net gain per octave).

    Raises
    ------
    precision.errors.PrecisionError
        The variants lack kernel[G5=always], kernel[G5=never] or every finite threshold kernel[G5=2^-k].
    """
    taus = thresholds_of(variants)
    missing = [v for v in (ALWAYS, NEVER) if v not in variants]
    if missing or not taus:
        raise PrecisionError(f"needs {ALWAYS}, {NEVER} and some kernel[G5=2^-k] among the variants"
                             + (f"; {missing[0]} is missing" if missing else ""))

    def run(tasks, executor, pooled_regions) -> dict:
        rows, octaves = [], []
        for evidence in collect(tasks, executor, pooled_regions):
            row, per_octave = search_thresholds(evidence, taus)
            rows.append(row)
            octaves += per_octave
        return {"threshold_search": pd.DataFrame(rows, columns=list(SEARCH_COLUMNS)),
                "threshold_search_octaves": pd.DataFrame(octaves, columns=list(OCTAVE_COLUMNS))}
    return RunStage("threshold_search", (ALWAYS, NEVER), {"taus": [float(t).hex() for t in taus]}, run)


#: The stages this operator adds to a run, by the study file's switch (``[run] threshold_search = true``).
RUN_STAGES = {"threshold_search": threshold_search_stage}
