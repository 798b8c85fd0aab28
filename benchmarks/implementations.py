"""Throughput of every variant on every machine model: points per second, one process.

Usage::

    python3 benchmarks/implementations.py [--points 1000000] [--repeat 1]
        [--variants kernel,naive,...] [--models ieee,numpy,npu] [--profile] [--shared]

Each line: ``variant model points seconds points_per_s`` for one call of
:func:`precision.operators.sigmoid_focal_loss_grad.guards.evaluate` on float32 inputs of shape
``[points // 1000, 1000]`` (pred uniform in [-20, 20], selectors 0/1, dout and
weight normal), alpha 0.25, gamma 2.0, reduction "mean".  The best of
``--repeat`` runs is reported.  The target of the production recipe is
``kernel`` on ``npu`` >= 2e6 points/s on one core.  ``--profile`` prints the
per-op time of ``kernel`` on ``npu`` (cProfile, top 15 by cumulative time).

``--shared`` adds, per model, the time of every registered variant evaluated
one by one (:func:`precision.operators.sigmoid_focal_loss_grad.guards.evaluate`) against all of them together
(:func:`precision.operators.sigmoid_focal_loss_grad.guards.evaluate_variants`, each shared step computed once)
on the same points, and their ratio (one run each; fp32 inputs, so the
fp16-only variants are skipped by both).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import time

import numpy as np

from precision.operators.sigmoid_focal_loss_grad.guards import evaluate, evaluate_variants, variant_names

__all__ = ["make_inputs", "time_variant", "time_shared", "main"]

#: Seed of the benchmark inputs (fixed so runs compare).
SEED = 20240611
#: Default variants and models.
DEFAULT_VARIANTS = ("kernel", "naive", "naive+G3", "kernel-G3", "golden", "mmcv", "naive-fp16", "mmcv-fp16")
DEFAULT_MODELS = ("ieee", "numpy", "npu")
#: The production target (points per second) for kernel on npu.
TARGET_POINTS_PER_S = 2e6


def make_inputs(points: int, seed: int = SEED):
    """fp32 benchmark inputs of shape [points // 1000, 1000] (at least one row)."""
    rng = np.random.default_rng(seed)
    cols = min(points, 1000)
    rows = max(1, points // cols)
    shape = (rows, cols)
    pred = rng.uniform(-20, 20, shape).astype(np.float32)
    target = rng.integers(0, 2, shape).astype(np.int32)
    dout = rng.standard_normal(shape).astype(np.float32)
    weight = rng.standard_normal(shape).astype(np.float32)
    return pred, target, dout, weight


def time_variant(variant: str, model: str, inputs, repeat: int = 1) -> float:
    """Best wall time (s) of ``repeat`` calls of evaluate(variant, ...)."""
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        evaluate(variant, *inputs, alpha=0.25, gamma=2.0, reduction="mean", machine=model)
        best = min(best, time.perf_counter() - start)
    return best


def time_shared(model: str, inputs) -> tuple:
    """(seconds one by one, seconds shared) for every registered variant on ``inputs``."""
    names = variant_names()
    start = time.perf_counter()
    for name in names:
        try:
            evaluate(name, *inputs, alpha=0.25, gamma=2.0, reduction="mean", machine=model)
        except Exception:  # fp16-only variants on fp32 inputs  # noqa: BLE001
            pass
    alone = time.perf_counter() - start
    start = time.perf_counter()
    evaluate_variants(names, *inputs, alpha=0.25, gamma=2.0, reduction="mean", machine=model)
    return alone, time.perf_counter() - start


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS))
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--shared", action="store_true", help="also time evaluate_variants vs one by one")
    args = parser.parse_args(argv)
    inputs = make_inputs(args.points)
    n = inputs[0].size
    print(f"# {n} points, fp32 inputs, pid {os.getpid()}, numpy {np.__version__}")
    print(f"{'variant':<14} {'model':<6} {'points':>9} {'seconds':>8} {'points_per_s':>13}")
    status = 0
    target_rate = None
    for model in args.models.split(","):
        for variant in args.variants.split(","):
            # fp16-only variants (naive-fp16, mmcv-fp16) take the same values as fp16 tensors
            args_v = tuple(a.astype(np.float16) if a.dtype == np.float32 else a for a in inputs) \
                if variant.endswith("-fp16") else inputs
            seconds = time_variant(variant, model, args_v, args.repeat)
            rate = n / seconds
            if variant == "kernel" and model == "npu":
                target_rate = rate
            print(f"{variant:<14} {model:<6} {n:>9} {seconds:>8.3f} {rate:>13.3e}")
    if target_rate is not None:
        print(f"{'PASS' if target_rate >= TARGET_POINTS_PER_S else 'FAIL'} kernel on npu {target_rate:.3e} points/s "
              f"target {TARGET_POINTS_PER_S:.0e}")
    if args.shared:
        print(f"\n{'all variants':<14} {'model':<6} {'points':>9} {'one_by_one':>10} {'shared':>8} {'ratio':>6}")
        for model in args.models.split(","):
            alone, shared = time_shared(model, inputs)
            print(f"{len(variant_names()):<14} {model:<6} {n:>9} {alone:>10.3f} {shared:>8.3f} {alone / shared:>6.2f}")
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        evaluate("kernel", *inputs, machine="npu")
        prof.disable()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(15)
        print(out.getvalue())
    return status


if __name__ == "__main__":
    raise SystemExit(main())
