"""Compiled passes in forked workers: loaded by the parent before the fork, or by the worker itself.

A sweep's workers are forked from the run's process.  This script times three of the compiled passes
(``top_k_groups`` and ``reduce_error_groups`` of :mod:`precision.analysis.fused`, the npu Power of
:mod:`precision.machine.npu_fused`) on task-sized arrays (127,000 points, 12 groups) three ways, each the
median of ``--repeat`` calls:

1. in this process, which loaded them;
2. in a forked child that inherits them, loaded (the parent loaded them before the fork);
3. in a forked child forked before the parent loaded anything, which loads them itself.

On this machine (2 cores, Linux, numba 0.68) the inheriting child runs ``top_k_groups`` about ten times
slower than its parent (the other two as fast), the self-loading child every pass as fast: so
``precision.engine.sweep.run_study`` never loads the passes before its workers fork.  Target: the
self-loading child within 1.25x of the parent on every pass.

Run: ``python benchmarks/fork.py [--points N] [--repeat N]``.
"""

import argparse
import multiprocessing
import time

import numpy as np

from precision.analysis.groups import Grouping

TARGET = 1.25


def _operands(n: int):
    rng = np.random.default_rng(0)
    grouping = Grouping(np.repeat(np.arange(12), n // 12 + 1)[:n], 12)
    err = rng.random(n)
    bits = np.log2(1 + err)
    cls = np.zeros(n, dtype=np.int8)
    base = rng.uniform(0.01, 1.0, n).astype(np.float32)
    return grouping, err, bits, cls, base


def _seconds(repeat: int, points: int) -> dict:
    """Median seconds per call of each pass in this process (loading them first if needed)."""
    from precision.analysis import fused
    from precision.machine import npu_fused
    grouping, err, bits, cls, base = _operands(points)
    calls = {
        "top_k_groups": lambda: fused.top_k_groups(grouping.perm, grouping.starts, grouping.counts, err, 8),
        "reduce_error_groups": lambda: fused.reduce_error_groups(grouping.perm, grouping.starts, grouping.counts,
                                                                 err, bits, cls, np.log2(err)),
        "npu power_c_terms": lambda: npu_fused.power_c_terms(base, np.float32(2.0), True),
    }
    out = {}
    for name, call in calls.items():
        call()
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        out[name] = float(np.median(times))
    return out


def _in_child(repeat: int, points: int) -> dict:
    context = multiprocessing.get_context("fork")
    with context.Pool(1) as pool:
        return pool.apply(_seconds, (repeat, points))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=126_976)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    if args.points < 12 or args.repeat < 1:
        parser.error(f"--points={args.points} --repeat={args.repeat}; expected at least 12 points and 1 repeat")
    self_loading = _in_child(args.repeat, args.points)  # forked before this process loads anything
    parent = _seconds(args.repeat, args.points)
    inheriting = _in_child(args.repeat, args.points)  # forked after: inherits the loaded passes
    print(f"{'pass':22s} {'parent':>10s} {'inheriting child':>18s} {'self-loading child':>19s}  (ms per call, "
          f"{args.points:,} points, median of {args.repeat})")
    for name in parent:
        print(f"{name:22s} {parent[name] * 1e3:10.3f} {inheriting[name] * 1e3:18.3f} {self_loading[name] * 1e3:19.3f}")
    worst = max(self_loading[name] / parent[name] for name in parent)
    slowest = max(inheriting[name] / parent[name] for name in parent)
    print(f"{'PASS' if worst <= TARGET else 'FAIL'} self-loading child {worst:.2f}x the parent at worst, target "
          f"<= {TARGET}x (an inheriting child: {slowest:.1f}x at worst)")


if __name__ == "__main__":
    main()
