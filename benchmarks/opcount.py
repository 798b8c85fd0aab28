"""Primitive-op counts per element of `kernel` and `candidate` (Machine(count_ops=True)).

Usage: python benchmarks/opcount.py [--model npu] [--gamma 2.0]

Input: every finite fp16 pred (as fp32), both selectors, weight present,
reduction mean.  The kernel's data-dependent paths (G4 fallback, G7
recovery) are counted where they run on this input; op names as in
precision.machine (a library exp/ln/pow/div counts as one op).
"""

from __future__ import annotations

import argparse

import numpy as np

from precision.guards import get_variant
from precision.machine import Machine, MachineModel


def inputs():
    x = np.arange(0, 0x10000, dtype=np.uint32).astype(np.uint16).view(np.float16)
    x = x[np.isfinite(x)].astype(np.float32)
    x = np.concatenate([x, x])
    t = np.concatenate([np.zeros(x.size // 2, np.int32), np.ones(x.size // 2, np.int32)])
    return x[None], t[None], np.ones_like(x)[None], np.full_like(x, 0.5)[None]


def count_ops(variant: str, model: str = "npu", gamma: float = 2.0, alpha: float = 0.25):
    """(total ops per element, Counter of ops per element) for one variant."""
    x, t, d, w = inputs()
    m = Machine(MachineModel(model), count_ops=True)
    get_variant(variant)(m, x, t, d, w, alpha, gamma, "mean")
    n = x.size
    per = {k: v / n for k, v in sorted(m.counts.items())}
    return sum(per.values()), per


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="npu")
    ap.add_argument("--gamma", type=float, default=2.0)
    args = ap.parse_args(argv)
    totals = {}
    for name in ("kernel", "candidate"):
        total, per = count_ops(name, args.model, args.gamma)
        totals[name] = total
        print(f"{name:10s} {total:7.2f} ops/element  " + " ".join(f"{k}={v:.2f}" for k, v in per.items()))
    print(f"ratio candidate/kernel = {totals['candidate'] / totals['kernel']:.3f}")


if __name__ == "__main__":
    main()
