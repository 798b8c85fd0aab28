"""Streamed runs: every value of a wide format in a range (an exhaustive fp32 set), block by block.

A streamed study (:attr:`~precision.engine.study.Study.streamed`) never holds its preds: they are the finite
values of the format at positions ``[start, stop)`` of the ascending order
(:meth:`~precision.exact.formats.Format.finite_positions`), cut into blocks at the fixed positions
``k * B``, B the study's ``[pred] block`` (:attr:`~precision.engine.study.Study.stream_block`, default
:data:`~precision.engine.study.STREAM_BLOCK`).  One job per block, on a worker:

    its preds -> the operator's terms at x and -x (the compiled certified oracle, nothing cached)
              -> the study's tasks on that block (one tensor pred[block] x target per machine, profile and
                 attribute values: a block is the tile of a tile-level guard)
              -> their results in one chunk file, ``OUT/chunks/<block key>.safetensors``

The run's process folds the finished blocks in the order of their preds (so witnesses, sums and the kept
points do not depend on which worker finished first) into one set of group and comparison statistics per
task of the study, whatever the number of blocks: its memory is the tables', and each worker's one block's.
A block's key is the SHA-256 of the study's inputs, its positions, the variants' and the shared code's
digests: a run interrupted (Ctrl-C, kill -9) resumes from the blocks on disk and ends with the same tables.
Progress: a bar with its ETA on a terminal, else a line on stderr every :data:`PROGRESS_SECONDS`.
"""

from __future__ import annotations

import collections
import dataclasses
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

from precision.analysis.groups import GroupStats
from precision.analysis.paired import PairedStats
from precision.engine.cache import atomic_write_npz, read_checked_npz
from precision.engine.estimate import format_seconds, memory_limit as default_memory_limit, plan_study, study_variants
from precision.engine.executor import InlineExecutor, make_executor
from precision.engine.operators import get_operator, term_chunk
from precision.engine.study import Study
from precision.engine.tables import (Gathered, RunResult, _PointsWriter, _stack_tasks, make_output_folder,
                                     write_gathered, write_run_json)
from precision.engine.task import build_tasks, machine_siblings, run_tasks
from precision.errors import PrecisionError, RunNote
from precision.exact.formats import get_format
from precision.exact.terms import absent_table
from precision.io.frames import columns_from_arrays

__all__ = ["study_blocks", "block_preds", "run_block", "run_streamed", "PROGRESS_SECONDS", "ETA_BLOCKS"]

#: Seconds between two progress lines on stderr when it is not a terminal (a log).
PROGRESS_SECONDS = 60.0
#: The ETA reads the rate of the last this many blocks computed (not the first ones', which load the compiled
#: passes, nor those of parts of the range far cheaper or dearer than the rest).
ETA_BLOCKS = 64

#: Separates a task's index from an array's name in a block's chunk file.
_SEP = "/"


def study_blocks(study: Study) -> list:
    """The study's blocks as ``(start, stop)`` positions of its format's finite values, in ascending order:
    ``[start, stop)`` of the range cut at every multiple of its block size."""
    start, stop = get_format(study.pred.format).finite_positions(*study.pred.get("range", (None, None)))
    size = study.stream_block
    cuts = range(start // size * size + size, stop, size)
    edges = [start, *cuts, stop]
    return [(a, b) for a, b in zip(edges, edges[1:]) if b > a]


def block_preds(study: Study, block) -> np.ndarray:
    """The preds of a block (float64, ascending, exact values of the study's format)."""
    return get_format(study.pred.format).values_at(*block).astype(np.float64)


def _placeholder_tasks(study: Study, variants, comparisons) -> list:
    """The study's tasks without points (the one pred 0, no terms): the order of every block's tasks, their
    columns in the tables (:func:`precision.engine.tables._TaskColumns`) and, with a block's positions, its
    key (:func:`_block_key`)."""
    zero = np.zeros(1)
    terms = {v: (absent_table(1), absent_table(1)) for v in study.term_values}
    return build_tasks(study, {v: zero for v in study.term_values}, terms, variants, comparisons, None)


def _block_key(tasks, block, size: int) -> str:
    """The chunk file's name of a block: its positions and block size, and the keys of the study's tasks
    (:func:`precision.engine.task.task_key` of :func:`_placeholder_tasks`: every input but the preds, the
    machine, the variants' and the shared code's digests, the comparisons)."""
    h = hashlib.sha256(json.dumps([list(block), size, [t.key for t in tasks]]).encode())
    return h.hexdigest()[:32]


def _block_terms(study: Study, preds: np.ndarray) -> dict:
    """{term value: (pos, neg)}: the operator's terms at the block's preds and at their negations, computed
    in one pass of |x| ascending (x and -x next to each other share their parts)."""
    op = get_operator(study.operator)
    need_pos, need_neg = op.term_sides(dict(study.attributes), study.targets)
    n = preds.size
    order = np.arange(n) if preds[0] >= 0 else np.arange(n)[::-1]  # (a block holds values of one sign)
    sides = [s for s, need in ((1.0, need_pos), (-1.0, need_neg)) if need]
    x = np.empty(n * len(sides))
    for k, sign in enumerate(sides):
        x[k::len(sides)] = sign * preds[order]
    tables = term_chunk((x, tuple(study.term_values), study.operator))
    back = np.empty(n, dtype=np.int64)
    back[order] = np.arange(n)
    out = {}
    for v, table in tables.items():
        got = {sign: table.take(back * len(sides) + k) for k, sign in enumerate(sides)}
        out[v] = (got.get(1.0, absent_table(n)), got.get(-1.0, absent_table(n)))
    return out


def run_block(job) -> dict:
    """Run one block's tasks (a worker's job ``(study, block, variants, comparisons, chunk file or None)``).

    Returns ``{"computed_pieces": n}`` when it wrote its chunk file, else (a remote worker, this process) the
    chunk's arrays themselves."""
    study, block, variants, comparisons, path = job
    get_operator(study.operator).ensure_loaded(list(study.plugins), {})
    preds = block_preds(study, block)
    terms = _block_terms(study, preds)
    tasks = build_tasks(study, {v: preds for v in study.term_values}, terms, variants, comparisons, None)
    arrays = {}
    for group in machine_siblings(tasks):
        for ti, result in zip(group, run_tasks([tasks[i] for i in group])):
            arrays.update({f"{ti}{_SEP}{k}": v for k, v in result.items()})
    if path is None:
        return arrays
    atomic_write_npz(Path(path), arrays, durable=False)
    return {"computed_pieces": _computed_pieces(arrays)}


def _computed_pieces(arrays: dict) -> int:
    """The pieces a block's tasks computed (not taken from a cache), from its chunk's arrays."""
    return sum(int(v) for k, v in arrays.items() if k.endswith(f"{_SEP}computed_pieces"))


def _by_task(arrays: dict, n_tasks: int) -> list:
    """A block's chunk arrays split into one dict per task index."""
    out = [{} for _ in range(n_tasks)]
    for key, value in arrays.items():
        ti, sep, name = key.partition(_SEP)
        if sep:  # (the file's own entries, its digest, have none)
            out[int(ti)][name] = value
    return out


class _Fold:
    """The blocks' results folded, in the order of their preds, into one set of statistics per task."""

    def __init__(self, tasks, variants, points: _PointsWriter):
        self.tasks, self.variants, self.points = tasks, variants, points
        self.stats = GroupStats.concat([])
        self.paired = PairedStats.concat([])
        self.gathered = Gathered(None, {}, {}, {}, set(), 0)

    def add(self, preds: np.ndarray, parts: list) -> None:
        """Fold one block: its preds, its tasks' arrays (:func:`_by_task`)."""
        self.stats = self._merged(self.stats, parts, "stats", GroupStats, "variant")
        self.paired = self._merged(self.paired, parts, "paired", PairedStats, "comparison")
        for ti, arrays in enumerate(parts):
            self.gathered.add(ti, self.tasks[ti], self.variants, arrays)
            if arrays["points.values"].shape[0]:
                self.points.add(dataclasses.replace(self.tasks[ti], preds=preds), columns_from_arrays(arrays, "points"))

    @staticmethod
    def _merged(held, parts: list, prefix: str, cls, which: str):
        block = [(ti, {k: v for k, v in a.items() if k.startswith(f"{prefix}.")}) for ti, a in enumerate(parts)]
        block = [(ti, a) for ti, a in block if a[f"{prefix}.values"].shape[0]]
        if not block:
            return held
        new = _stack_tasks(block, prefix, cls)
        both = new if not len(held) else cls.concat([held, new])
        return both.merge(["task", which, "group"])


class _Progress:
    """Blocks done, preds done, elapsed time and ETA: a bar on a terminal, else a line every
    :data:`PROGRESS_SECONDS` on stderr."""

    def __init__(self, name: str, total: int, done: int, preds_total: int):
        from tqdm import tqdm
        self.name, self.total, self.preds_total = name, total, preds_total
        self.done, self.preds_done, self.preds_now = done, 0, 0
        self.started = self.printed = time.monotonic()
        self.recent = collections.deque(maxlen=ETA_BLOCKS)  # (time, preds computed by then) of the last blocks
        self.bar = tqdm(total=preds_total, desc=name, unit="pred", unit_scale=True, leave=False,
                        disable=not sys.stderr.isatty())

    def update(self, preds: int, fresh: bool) -> None:
        self.done += 1
        self.preds_done += preds
        now = time.monotonic()
        if fresh:
            self.preds_now += preds
            self.recent.append((now, self.preds_now))
        self.bar.update(preds)
        if self.bar.disable and now - self.printed >= PROGRESS_SECONDS and self.done < self.total:
            self.printed = now
            print(self.line(now), file=sys.stderr, flush=True)

    def line(self, now: float) -> str:
        elapsed = now - self.started
        left = self.preds_total - self.preds_done
        (t0, p0), (t1, p1) = (self.recent[0], self.recent[-1]) if len(self.recent) > 1 else ((self.started, 0),
                                                                                             (now, self.preds_now))
        eta = format_seconds(left * (t1 - t0) / (p1 - p0)) if p1 > p0 and left else "-"
        return (f"{self.name}: {self.done:,}/{self.total:,} blocks, {self.preds_done:,} of {self.preds_total:,} "
                f"preds ({100 * self.preds_done / max(self.preds_total, 1):.1f}%), {format_seconds(elapsed)} "
                f"elapsed, ETA {eta}")

    def close(self) -> None:
        self.bar.close()


def run_streamed(study: Study, out_dir, *, cache_dir=None, use_cache: bool = True, scheduler: str | None = None,
                 workers: int | None = None, memory_limit: tuple | None = None, on_plan=None) -> RunResult:
    """:func:`precision.engine.sweep.run_study` of a streamed study (see the module docstring); the same
    tables, run.json and notes.  ``cache_dir`` and ``use_cache`` are accepted and unused: a block's terms are
    computed where it runs and never stored (its chunk file is its cache)."""
    del cache_dir, use_cache
    started = time.perf_counter()
    out = Path(out_dir)
    chunk_dir = out / "chunks"
    plan = plan_study(study, workers, scheduler)
    limit, source = memory_limit if memory_limit is not None else default_memory_limit()
    plan.check_memory(limit, source, study.path)
    blocks = study_blocks(study)
    if not blocks:
        lo, hi = study.pred.get("range")
        raise PrecisionError(f"{study.path}: pred: the point set is empty (exhaustive over range [{lo:g}, {hi:g}] "
                             f"holds no finite {study.pred.format} value); expected at least one pred value: "
                             "change pred.range")
    notes = [plan.workers_note(workers)] if plan.workers_note(workers) else []
    for note in notes:
        warnings.warn(note, RunNote, stacklevel=2)
    if on_plan is not None:
        on_plan(plan)
    variants = study_variants(study)
    op = get_operator(study.operator)
    comparisons = op.find_comparisons(variants, study.compare)
    executor = make_executor(scheduler, workers if workers == 1 else plan.workers)
    staging = None
    try:
        make_output_folder(out)
        tasks = _placeholder_tasks(study, variants, comparisons)
        keys = [_block_key(tasks, b, study.stream_block) for b in blocks]
        paths = [chunk_dir / f"{k}.safetensors" for k in keys]
        todo = [i for i, p in enumerate(paths) if not p.exists()]
        local = scheduler is None or scheduler == "local"
        inline = isinstance(executor, InlineExecutor)
        jobs = [(study, blocks[i], variants, comparisons, str(paths[i]) if local and not inline else None)
                for i in todo]
        staging = Path(tempfile.mkdtemp(dir=out, prefix=".staging-"))
        points = _PointsWriter(staging / "points.parquet.tmp", variants)
        fold = _Fold(tasks, variants, points)
        progress = _Progress(study.name, len(blocks), 0, sum(b - a for a, b in blocks))
        fresh = set(todo)
        finished = set(range(len(blocks))) - fresh
        computed = recomputed = 0
        next_block = 0

        def fold_ready():
            nonlocal next_block, recomputed
            while next_block in finished:
                arrays = read_checked_npz(paths[next_block])
                if arrays is None:  # truncated or altered on disk (warned once): recomputed here
                    arrays = run_block((study, blocks[next_block], variants, comparisons, None))
                    atomic_write_npz(paths[next_block], arrays)
                    recomputed += 1
                fold.add(block_preds(study, blocks[next_block]), _by_task(arrays, len(tasks)))
                a, b = blocks[next_block]
                progress.update(b - a, fresh=next_block in fresh)
                next_block += 1

        fold_ready()
        for j, result in executor.map_unordered(run_block, jobs):
            i = todo[j]
            if jobs[j][4] is None:  # (returned, not written: a remote worker, or this process)
                atomic_write_npz(paths[i], result, durable=False)
                result = {"computed_pieces": _computed_pieces(result)}
            computed += int(result["computed_pieces"])
            finished.add(i)
            fold_ready()
        progress.close()
        executor.close()
        points.close()
        os.replace(staging / "points.parquet.tmp", staging / "points.parquet")
        fold.gathered.stats = fold.stats
        try:
            write_gathered(study, staging, tasks, variants, comparisons, fold.gathered, paired=fold.paired)
            result = RunResult(out, int(sum(b - a for a, b in blocks) * len(study.targets) * len(tasks)),
                               len(tasks) * len(blocks), len(tasks) * (len(blocks) - len(todo) - recomputed),
                               int(plan.terms), 0, fold.gathered.fallback, time.perf_counter() - started,
                               sorted(fold.gathered.unsupported), 0, computed, recomputed * len(tasks),
                               executor.workers, notes)
            write_run_json(study, staging, result)
            for path in sorted(staging.iterdir()):
                os.replace(path, out / path.name)
        except OSError as exc:
            raise PrecisionError(f"--out={out}: cannot write the tables ({exc.strerror or exc}); nothing was "
                                 "written (finished blocks are kept for the next run)") from None
    finally:
        executor.close()
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
    return result
