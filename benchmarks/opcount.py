"""Primitive-op counts per element of `kernel` and `candidate` (precision.operators.sigmoid_focal_loss_grad.opcount).

Usage: python benchmarks/opcount.py [--machine npu] [--gamma 2.0]

Input: every finite fp16 pred (as fp32), both selectors, weight present,
reduction mean (precision.operators.sigmoid_focal_loss_grad.opcount.standard_input).
"""

from __future__ import annotations

import argparse

from precision.operators.sigmoid_focal_loss_grad.opcount import count_ops


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--machine", default="npu")
    ap.add_argument("--gamma", type=float, default=2.0)
    args = ap.parse_args(argv)
    totals = {}
    for name in ("kernel", "candidate"):
        total, per = count_ops(name, args.machine, args.gamma)
        totals[name] = total
        print(f"{name:10s} {total:7.2f} ops/element  " + " ".join(f"{k}={v:.2f}" for k, v in per.items()))
    print(f"ratio candidate/kernel = {totals['candidate'] / totals['kernel']:.3f}")


if __name__ == "__main__":
    main()
