"""Primitive-op counts per element of a variant (``Machine(count_ops=True)``).

The standard input (:func:`standard_input`): every finite fp16 pred as fp32,
both selectors, weight present (0.5), dout 1, reduction mean.  Data-dependent
paths (the kernel's G4 fallback and G7 recovery) are counted where they run on
this input.  Op names as in :mod:`precision.machine`; a library exp, ln, pow or
div counts as one op, and so do neg, abs, compares, selects and casts.
"""

from __future__ import annotations

import numpy as np

from precision.operators.sigmoid_focal_loss_grad.guards import get_variant
from precision.machine import Machine, MachineModel

__all__ = ["standard_input", "count_ops"]


def standard_input():
    """(pred, target, dout, weight) float32/int32 arrays of shape (1, 2 * 63,488)."""
    x = np.arange(0, 0x10000, dtype=np.uint32).astype(np.uint16).view(np.float16)
    x = x[np.isfinite(x)].astype(np.float32)
    t = np.concatenate([np.zeros(x.size, np.int32), np.ones(x.size, np.int32)])
    x = np.concatenate([x, x])
    return x[None], t[None], np.ones_like(x)[None], np.full_like(x, 0.5)[None]


def count_ops(variant: str, machine: str = "npu", gamma: float = 2.0, alpha: float = 0.25) -> tuple:
    """(total ops per element, {op name: ops per element}) of one variant on the standard input."""
    x, t, d, w = standard_input()
    m = Machine(MachineModel(machine), count_ops=True)
    get_variant(variant)(m, x, t, d, w, alpha, gamma, "mean")
    per = {k: v / x.size for k, v in sorted(m.counts.items())}
    return float(sum(per.values())), per
