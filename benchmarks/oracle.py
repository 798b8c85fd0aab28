"""Certified oracle throughput: evaluations per second on one core.

20,000 random (x, gamma) pairs (x float32 uniform in [-100, 100], gamma
float32 uniform in [-3, 6], selector t in {0, 1}, alpha 0.25), each the exact
gradient certified-rounded to fp32 by ``precision.sigmoid_focal_loss_grad.oracle.gradient`` in this
one process.  Target (issue 2): >= 20,000 evaluations per second per core.

Run: ``python benchmarks/oracle.py [--points N] [--seed S]``.
"""

import argparse
import time

import numpy as np

from precision.sigmoid_focal_loss_grad import oracle

TARGET_PER_SECOND = 20_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    x = rng.uniform(-100, 100, args.points).astype(np.float32)
    gamma = rng.uniform(-3, 6, args.points).astype(np.float32)
    t = rng.integers(0, 2, args.points)
    oracle.gradient(x[:100], t[:100], 0.25, gamma[:100])  # warm up imports and caches
    start = time.perf_counter()
    values = oracle.gradient(x, t, 0.25, gamma, fmt="fp32")
    seconds = time.perf_counter() - start
    rate = args.points / seconds
    unresolved = int(np.isnan(values).sum())
    verdict = "PASS" if rate >= TARGET_PER_SECOND and unresolved == 0 else "FAIL"
    print(f"oracle fp32: {args.points} certified evaluations in {seconds:.3f} s = {rate:,.0f} per second "
          f"(one core), {unresolved} unresolved")
    print(f"{verdict} oracle throughput {rate:,.0f}/s target {TARGET_PER_SECOND:,}/s")


if __name__ == "__main__":
    main()
