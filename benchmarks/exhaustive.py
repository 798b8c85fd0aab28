"""Every fp32 pred: the time of ``studies/fp32_exhaustive.toml`` for the kernel and the candidate on ieee.

The whole study is 2,040 blocks of 2^21 preds (x 2 selectors).  By default this script times a sample of
them, spread evenly over the positions of the fp32 values (so over every binade, both signs, the
subnormals), each two ways in this one process:

1. the pipeline's job for the block (:func:`precision.engine.stream.run_block`: its preds, the oracle's terms
   at x and -x, the certified roundings, both variants evaluated, scored and aggregated, its chunk's arrays)
   and the run's fold of it (:class:`precision.engine.stream._Fold`);
2. the evaluation alone: both variants on the block's tensor (``evaluate_variants``), the limit no pipeline
   can beat.

It prints each block's two times, then the projection of the whole study on this machine's cores (the sum
over the sample scaled to every block, divided by the workers: the blocks are independent jobs), the same
projection of the evaluation alone, their ratio (the pipeline's overhead over the evaluation limit) and
PASS/FAIL against the target: the whole study in 30 minutes or less.  ``--full`` runs the whole study instead
(``precision run``; hours) and prints its wall time beside the projection.

Run: ``python3 benchmarks/exhaustive.py [--blocks N] [--machine ieee] [--workers N] [--full]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from precision.engine.estimate import format_seconds, study_variants
from precision.engine.operators import get_operator
from precision.engine.study import load_study
from precision.engine.stream import _Fold, _by_task, _placeholder_tasks, block_preds, run_block, study_blocks
from precision.engine.tables import _PointsWriter

STUDY = Path(__file__).resolve().parents[1] / "studies" / "fp32_exhaustive.toml"
#: The target: the whole study, kernel and candidate on ieee, in this many seconds on this machine.
TARGET_SECONDS = 30 * 60


def _time_block(study, block, variants, comparisons, tasks, folder: Path) -> tuple[float, float]:
    """(pipeline seconds, evaluation seconds) of one block."""
    op = get_operator(study.operator)
    preds = block_preds(study, block)
    start = time.perf_counter()
    arrays = run_block((study, block, variants, comparisons, None))
    fold = _Fold(tasks, variants, _PointsWriter(folder / "points.parquet", variants))
    fold.add(preds, _by_task(arrays, len(tasks)))
    pipeline = time.perf_counter() - start
    T = len(study.targets)
    pred2d = np.repeat(preds.astype(np.float32)[:, None], T, axis=1)
    target2d = np.broadcast_to(np.asarray(study.targets, dtype=np.int32), pred2d.shape).copy()
    dout2d = np.ones(pred2d.shape, dtype=np.float32)
    (alpha,), (gamma,) = study.values("alpha"), study.values("gamma")  # (the study's one value of each)
    start = time.perf_counter()
    for machine in study.machines:
        op.evaluate_variants(list(variants), pred2d, target2d, dout2d, None, alpha=alpha, gamma=gamma,
                             reduction="none", machine=machine, keep_steps=op.FIRED_STEPS)
    return pipeline, time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", default=str(STUDY))
    parser.add_argument("--blocks", type=int, default=24, help="blocks timed, spread over the range (default 24)")
    parser.add_argument("--machine", default="ieee", help="the machine model (default ieee)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="the run's workers (default: cores)")
    parser.add_argument("--full", action="store_true", help="run the whole study (hours) and time it")
    args = parser.parse_args()
    for name in ("blocks", "workers"):
        if getattr(args, name) < 1:
            print(f"exhaustive.py: --{name}={getattr(args, name)}; expected a positive integer", file=sys.stderr)
            return 2
    study = dataclasses.replace(load_study(args.study), machines=(args.machine,))
    variants = study_variants(study)
    comparisons = get_operator(study.operator).find_comparisons(variants, study.compare)
    blocks = study_blocks(study)
    tasks = _placeholder_tasks(study, variants, comparisons)
    picked = [blocks[i] for i in np.linspace(0, len(blocks) - 1, min(args.blocks, len(blocks))).round().astype(int)]
    warm = (picked[0][0], picked[0][0] + 20_000)  # (the compiled passes loaded once, not in the first block's time)
    run_block((study, warm, variants, comparisons, None))
    print(f"# {study.name}: {', '.join(variants)} on {args.machine}; {len(blocks):,} blocks of up to "
          f"{study.stream_block:,} preds x {len(study.targets)} selectors; {len(picked)} timed, one process, pid "
          f"{os.getpid()}")
    print(f"{'first pred':>16} {'last pred':>16} {'preds':>9} {'pipeline_s':>10} {'evaluation_s':>12} {'ratio':>6}")
    total_p = total_e = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for block in picked:
            p, e = _time_block(study, block, variants, comparisons, tasks, Path(tmp))
            total_p, total_e = total_p + p, total_e + e
            lo, hi = block_preds(study, (block[0], block[0] + 1))[0], block_preds(study, (block[1] - 1, block[1]))[0]
            print(f"{lo:>16.7g} {hi:>16.7g} {block[1] - block[0]:>9,} {p:>10.2f} {e:>12.2f} {p / e:>6.2f}")
    scale = len(blocks) / len(picked) / args.workers
    whole, limit = total_p * scale, total_e * scale
    print(f"projected whole study on {args.workers} workers: {format_seconds(whole)} (evaluation limit "
          f"{format_seconds(limit)}; ratio to the evaluation limit {whole / limit:.2f})")
    status = 0 if whole <= TARGET_SECONDS else 1
    print(f"{'PASS' if status == 0 else 'FAIL'} projected {format_seconds(whole)} target "
          f"{format_seconds(TARGET_SECONDS)}")
    if args.full:
        with tempfile.TemporaryDirectory() as tmp:
            text = Path(args.study).read_text().replace('machines = ["ieee", "npu"]', f'machines = ["{args.machine}"]')
            study_file = Path(tmp) / "study.toml"
            study_file.write_text(text)
            start = time.perf_counter()
            code = subprocess.call([sys.executable, "-m", "precision", "run", str(study_file), "--out",
                                    str(Path(tmp) / "out"), "--workers", str(args.workers)])
            wall = time.perf_counter() - start
        print(f"whole study: {format_seconds(wall)} wall (exit {code}); ratio to the evaluation limit "
              f"{wall / limit:.2f}")
        status = status if code == 0 and wall <= TARGET_SECONDS else 1
    return status


if __name__ == "__main__":
    raise SystemExit(main())
