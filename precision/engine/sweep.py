"""Sweeps: a study's points through the oracle, every variant and the scoring.

The pipeline (one direction, as in DESIGN.md)::

    study -> pred values -> the operator's exact-value terms at x and -x per value of its terms
             attribute (SigmoidFocalLossGrad: focal terms A(x, g), A(-x, g); cache, else computed in chunks)
          -> tasks, one per (machine, profile, attribute values, weight, dout):
             the tensor pred[P, T] x target[P, T], every variant evaluated on it,
             the exact values derived from the terms, scored and aggregated
          -> tables (pandas) and per-point rows (Parquet) in the output folder

A task's tensor is the whole (pred x target) grid of the study, so the
results of tile-level guards (G4) depend on the study, never on the chunking
or the executor.  A streamed study (every fp32 in a range) runs in blocks
instead, each block a task's tensor and tile (:mod:`precision.engine.stream`);
the tables of both are assembled by :mod:`precision.engine.tables`.  Finished tasks are written atomically to
``OUT/chunks/<key>.safetensors`` (key: SHA-256 of the task, the study and the
package's source), so an interrupted run (Ctrl-C, kill -9) resumes without
redoing them and ends with identical tables.

Output folder (``precision run`` default: ``out/<study name>``); every
statistic is :mod:`precision.analysis.scoring`'s.  The operator's attributes
(its ``ATTRIBUTES``; SigmoidFocalLossGrad's ``alpha`` and ``gamma``, whose
names the list below uses) are key and witness columns of every table, and
its terms attribute (``TERMS_ATTRIBUTE``, ``gamma``) splits ``by_gamma.csv``:

``summary.csv``
    One row per (variant, machine, format, profile): ``count``, ``max_ulp``
    (inf when an output is special) with its witness (``witness_pred``,
    ``witness_target``, ``witness_alpha``, ``witness_gamma``,
    ``witness_weight``, ``witness_dout`` in hex; ``witness_computed`` and
    ``witness_exact``, the computed output and the exact value there),
    ``max_finite_ulp`` with the same ``finite_witness_*`` columns,
    ``mean_ulp`` (over finite errors; descriptive only), ``p50_ulp``,
    ``p99_ulp``, ``p999_ulp`` (upper bounds within 4.4 %, from mergeable
    histograms), ``mean_bits``, ``share_correct``, ``over_1ulp``, and one
    count per special class: ``nan``, ``inf``, ``wrong_sign``, ``lost_inf``.
``by_region.csv``, ``by_gamma.csv``
    The same columns, also split by pred region / by gamma.
``groups.csv``
    The finest groups (:func:`group_keys`, plus ``bracket`` with bracket
    bands), same columns.
``by_bracket.csv``
    With ``bracket_bands`` only: per (variant, machine, format, profile, gamma, bracket).
``groups_raw.parquet``, ``hist.npz``
    The fine groups' mergeable sums, maxima and witnesses, and their sparse
    ulp histograms (``row``, ``bin``, ``count``; int32 while every entry fits, as the tasks store them,
    else int64): :class:`precision.analysis.groups.GroupStats` (:func:`load_stats`).
``comparisons.csv``
    Every paired comparison of the run (:mod:`precision.operators.sigmoid_focal_loss_grad.comparisons`: guard
    pairs, G5 thresholds against never and against 1/64, declared pairs), per
    machine, format and profile, overall (region ``all``) and per region:
    ``changed``, ``better``, ``worse``, ``tied``, ``both_garbage``,
    ``specials_fixed`` (with ``fixed_correct``, ``fixed_le_1ulp``,
    ``fixed_le_2p10``, ``fixed_le_2p20``), ``specials_caused``,
    ``finite_better``, ``finite_worse``, ``p_value``, ``p_specials``,
    ``p_finite`` (exact sign tests), ``median_change_bits``,
    ``max_gain_bits``, ``max_loss_bits`` with witnesses, and ``verdict``
    (rule: :data:`precision.analysis.paired.VERDICT_RULE`).
``paired_raw.parquet``, ``paired_hist.npz``
    The fine comparisons (:func:`pair_keys`), mergeable
    (:class:`precision.analysis.paired.PairedStats`, :func:`load_paired`).
``predbins.npz``
    Max ulp per symmetric-log pred bin, per (variant, machine, profile, gamma).
``points.parquet``
    Per-point scores (selected by the study's ``per_point``), columns:
    ``pred``, ``target``, ``alpha``, ``gamma``, ``weight`` (NaN when absent),
    ``dout``, ``count`` (exact inputs as float64/int), ``variant``,
    ``machine``, ``format``, ``profile``, ``computed``, ``exact`` and
    ``exact_lo`` (the exact value as a double-double), ``rounded`` (the
    correctly rounded value), ``err_ulp``, ``err_bits``, ``class``.
``run.json``
    Study digest, seed, package versions, variants, region and bracket
    edges with their labels, counts, timings, cache use.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np
from tqdm import tqdm

from precision.exact.terms import TermTable, absent_table
from precision.analysis.scoring import COMPILED_MIN_POINTS
from precision.engine.attribution_table import write_attribution
from precision.engine.cache import ResultCache, TermCache, atomic_write_npz, default_cache_dir
from precision.engine.estimate import (EXACT_COUNT_PREDS, memory_limit as default_memory_limit, plan_study,
                                      study_variants)
from precision.errors import PrecisionError, RunNote
from precision.engine.executor import InlineExecutor, LocalExecutor, fork_aside, make_executor
from precision.engine.operators import get_operator, term_chunk
from precision.engine.points import check_point_sets, study_preds_by_term
from precision.engine.stream import run_streamed
from precision.engine.study import Study, region_labels
from precision.engine.tables import (COMPARISON_KEYS, POINTS_HELD_BYTES, RunResult, _held_part, _read_task,
                                     _write_outputs, code_digest, comparison_table, group_keys, hex_witnesses,
                                     load_paired, load_stats, make_output_folder, pair_keys, sort_table,
                                     write_run_json)
from precision.engine.task import (PRED_BIN_EDGES, TaskResult, build_tasks, machine_siblings, run_tasks, share_terms,
                                   source_digest, task_digest, variant_digest)
from precision.io.frames import frame_from_arrays, frame_to_arrays, write_csv

# (the tables' names are this module's too: a run and its tables are read together)
__all__ = ["run_study", "RunResult", "TaskResult", "code_digest", "PRED_BIN_EDGES", "region_labels", "load_stats",
           "load_paired", "sort_table", "comparison_table", "hex_witnesses", "group_keys", "pair_keys",
           "COMPARISON_KEYS"]

#: Focal-term pairs per oracle chunk: large enough to amortize process
#: start-up, small enough to balance two cores and checkpoint often.
TERM_CHUNK = 8192

#: Seconds between stores of newly computed focal terms into the cache: each store rewrites a whole shard
#: per term value (gamma), so storing after every chunk cost more than the oracle on large studies; an interrupted run
#: loses at most this much of its oracle work.
TERM_STORE_SECONDS = 20.0


@functools.lru_cache(maxsize=1)
# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

def _progress(total: int, desc: str):
    return tqdm(total=total, desc=desc, unit="chunk", disable=not sys.stderr.isatty(), leave=False)


def _compute_terms(study: Study, preds_by_term: dict, cache: TermCache, executor,
                   on_idle=None) -> tuple[dict, int, int]:
    """{term value: (pos TermTable, neg TermTable)}, the operator's terms at x and at -x, each aligned with
    that value's preds; pairs total and from cache.

    The (x, value) pairs missing from the cache are computed in chunks of x
    values that miss the same values of the terms attribute (one chunk
    computes all of them: SigmoidFocalLossGrad's focal terms share exp and
    log1p across values, and x and -x in one chunk share their parts).
    Which of x and -x a study needs is the operator's ``term_sides``.
    ``on_idle()`` is called once, when fewer chunks are left than the
    executor has workers (one of them idles from then on).
    """
    op = get_operator(study.operator)
    need_pos, need_neg = op.term_sides(dict(study.attributes), study.targets)
    values = list(study.term_values)
    xs_of, parts = {}, {v: [] for v in values}
    missing_x, missing_v = [], []
    total = cached = 0
    for vi, v in enumerate(values):
        preds = preds_by_term[v]
        xs = np.unique(np.concatenate([preds if need_pos else [], -preds if need_neg else []]).view(np.int64))
        xs_of[v] = xs = xs.view(np.float64)
        found, table = cache.lookup(v, xs)
        total += xs.size
        cached += int(found.sum())
        parts[v].append((xs[found], table))
        missing_x.append(xs[~found].view(np.int64))
        missing_v.append(np.full(int((~found).sum()), vi, dtype=np.int64))
    chunks = []
    if missing_x and sum(m.size for m in missing_x):
        bits = np.concatenate(missing_x)
        vidx = np.concatenate(missing_v)
        keys, inverse = np.unique(bits, return_inverse=True)
        wanted = np.zeros((keys.size, len(values)), dtype=bool)
        wanted[inverse, vidx] = True
        packed = np.packbits(wanted, axis=1)
        if packed.shape[1] <= 8:  # each x's values as one big-endian integer: a 1-D unique (fast), same order
            code = np.zeros((keys.size, 8), dtype=np.uint8)
            code[:, :packed.shape[1]] = packed
            codes, group = np.unique(code.view(">u8").ravel(), return_inverse=True)
            signatures = codes.astype(">u8").view(np.uint8).reshape(-1, 8)
        else:
            signatures, group = np.unique(packed, axis=0, return_inverse=True)
        group = group.ravel()
        order = np.argsort(group, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(group, minlength=len(signatures)))])
        for si in range(len(signatures)):
            x = keys[order[bounds[si]:bounds[si + 1]]].view(np.float64)
            x = x[np.argsort(np.abs(x), kind="stable")]
            want = tuple(v for v, w in zip(values, np.unpackbits(signatures[si])[:len(values)]) if w)
            chunks += [(x[i:i + TERM_CHUNK], want) for i in range(0, x.size, TERM_CHUNK)]
    if chunks:
        unstored: dict = {}  # term value -> [(x, TermTable)] computed since the last store
        stored_at = time.perf_counter()
        with _progress(len(chunks), "oracle") as bar:
            left = len(chunks)
            for i, tables in executor.map_unordered(term_chunk, [(*c, study.operator) for c in chunks]):
                left -= 1
                if on_idle is not None and left < executor.workers:
                    on_idle()
                    on_idle = None
                x = chunks[i][0]
                for v, table in tables.items():
                    unstored.setdefault(v, []).append((x, table))
                    parts[v].append((x, table))
                bar.update(1)
                if time.perf_counter() - stored_at > TERM_STORE_SECONDS:
                    _store_terms(cache, unstored)
                    stored_at = time.perf_counter()
        _store_terms(cache, unstored)
    result = {}
    for v, pieces in parts.items():
        preds = preds_by_term[v]
        absent = absent_table(preds.size)
        x_all = np.concatenate([p[0] for p in pieces])
        t_all = TermTable.concatenate([p[1] for p in pieces])
        keys, first = np.unique(x_all.view(np.int64), return_index=True)

        def lookup(values, keys=keys, first=first, t_all=t_all):
            return t_all.take(first[np.searchsorted(keys, values.view(np.int64))])
        result[v] = (lookup(preds) if need_pos else absent, lookup(-preds) if need_neg else absent)
    return result, total, cached


def _store_terms(cache: TermCache, unstored: dict) -> None:
    """Merge the terms computed since the last store into the cache (one shard write per term value); empties it."""
    for v, pieces in unstored.items():
        cache.store(v, np.concatenate([x for x, _ in pieces]),
                    TermTable.concatenate(t for _, t in pieces))
    unstored.clear()


_variants_of = study_variants


def run_study(study: Study, out_dir, *, cache_dir=None, use_cache: bool = True, scheduler: str | None = None,
              workers: int | None = None, memory_limit: tuple | None = None, on_plan=None) -> RunResult:
    """Run a study and write its tables to ``out_dir`` (see the module docstring).

    First the study is sized (:func:`precision.engine.estimate.plan_study`; ``on_plan(plan)`` is called with it)
    and refused when its memory at peak passes ``memory_limit`` ((bytes, where the bound comes from); default
    :func:`precision.engine.estimate.memory_limit`), then its points are drawn and checked
    (:func:`precision.engine.points.check_point_sets`), all before anything is written.  The workers are
    capped at the work (:attr:`~precision.engine.estimate.StudyPlan.workers`).  Notes (:class:`RunNote`
    warnings, also in :attr:`RunResult.notes`): the workers capped past the cores, preds a profile cannot
    hold, a point set empty at some attribute value.
    """
    if study.streamed:  # an exhaustive fp32 set: in blocks
        return run_streamed(study, out_dir, cache_dir=cache_dir, use_cache=use_cache, scheduler=scheduler,
                            workers=workers, memory_limit=memory_limit, on_plan=on_plan)
    started = time.perf_counter()
    out = Path(out_dir)
    chunk_dir = out / "chunks"
    plan = plan_study(study, workers, scheduler)
    limit, source = memory_limit if memory_limit is not None else default_memory_limit()
    plan.check_memory(limit, source, study.path)
    # a small study's points are drawn and checked at once (an empty set is one line with nothing printed
    # before it); a large one's plan is printed first, then its points are drawn (seconds, interruptible)
    small = plan.preds <= EXACT_COUNT_PREDS
    if small:
        preds_by_term = study_preds_by_term(study)
        notes = check_point_sets(study, preds_by_term)
    if on_plan is not None:
        on_plan(plan)
    if not small:
        preds_by_term = study_preds_by_term(study)
        notes = check_point_sets(study, preds_by_term)
    if plan.workers_note(workers):
        notes.insert(0, plan.workers_note(workers))
    for note in notes:
        warnings.warn(note, RunNote, stacklevel=2)
    variants = _variants_of(study)
    op = get_operator(study.operator)
    comparisons = op.find_comparisons(variants, study.compare)
    # a bad scheduler fails before anything is written; never more workers than the work can use
    executor = make_executor(scheduler, workers if workers == 1 else plan.workers)
    # (the compiled passes are loaded by each process that runs them, never here before the workers fork: a
    # worker running a pass its parent loaded can run it ten times slower, benchmarks/fork.py)
    terms_folder = None
    try:
        make_output_folder(out)
        cache_folder = (Path(cache_dir) if cache_dir else default_cache_dir()) if use_cache else None
        cache = TermCache(cache_folder, operator=study.operator)
        ResultCache(cache_folder)  # created here, once, before the workers use it
        # the compiled passes the tasks run (on arrays of COMPILED_MIN_POINTS or more) load where a core would
        # idle: the workers' behind the oracle's last chunks (else in their first task), this process's (the
        # tables' merges) in a thread from the first finished task (a thread loading them sooner slows the
        # building of the tasks, which the idle workers wait for)
        load = max((p.size for p in preds_by_term.values()), default=0) * len(study.targets) >= COMPILED_MIN_POINTS
        warm = functools.partial(executor.warm, _load_compiled_idly, tuple(study.machines)) if load else None
        terms, pairs, pairs_cached = _compute_terms(study, preds_by_term, cache, executor, on_idle=warm)
        tasks = build_tasks(study, preds_by_term, terms, variants, comparisons,
                             None if cache_folder is None else str(cache_folder))
        # workers on this machine write their chunk themselves; a remote Dask cluster returns it
        local = scheduler is None or scheduler == "local"
        if local and not isinstance(executor, InlineExecutor):  # each term value's terms travel once, as a file
            terms_folder = Path(tempfile.mkdtemp(dir=out, prefix=".terms-"))
            tasks = share_terms(tasks, terms_folder)
        # finished tasks live on disk (of each, memory holds what the group tables read); their integrity is
        # checked as they are read, a damaged one recomputed
        todo = [i for i, task in enumerate(tasks) if not (chunk_dir / f"{task.key}.safetensors").exists()]
        # (a task run in this process, or on a remote cluster, returns its result: written here, never read back)
        inline = isinstance(executor, InlineExecutor)
        work = [dataclasses.replace(tasks[i], chunk_file=str(chunk_dir / f"{tasks[i].key}.safetensors"))
                if local and not inline else tasks[i] for i in todo]
        # a task's machines run together in one worker: its operands, exact values and groups are built once
        siblings = machine_siblings(work)
        results_reused = results_computed = 0
        # what the tables read of each finished task's chunk, read while the others run (its kept points while
        # they fit in POINTS_HELD_BYTES in all)
        read, points_room = {}, POINTS_HELD_BYTES
        loader = None
        with _progress(len(todo), study.name) as bar:
            for g, results in executor.map_unordered(run_tasks, [[work[j] for j in group] for group in siblings]):
                if load:  # (at the first result every worker has forked: none inherits them)
                    loader = threading.Thread(target=_load_compiled, name="load compiled passes")
                    loader.start()
                    load = False
                for j, res in zip(siblings[g], results):
                    if work[j].chunk_file is None:  # (cheap to recompute: not synced, as a worker writes it)
                        atomic_write_npz(chunk_dir / f"{tasks[todo[j]].key}.safetensors", res, durable=False)
                    read[todo[j]], points_room = _held_part(res if work[j].chunk_file is None
                                                            else _read_task(tasks[todo[j]], chunk_dir), points_room)
                    results_reused += int(res["reused"])
                    results_computed += int(res["computed_pieces"])
                bar.update(len(results))
        if loader is not None:  # (no thread of this process holds an import's lock when a process is forked)
            loader.join()
        staged = [_run_stage(study, op.RUN_STAGES[name](variants), tasks, executor, cache_folder)
                  for name in study.stages]
        if study.attribution is None:  # the workers' last job is done: what their allocators hold (up to a GB
            executor.close()           # each) is returned before this process assembles the tables
        # the tables are written into a staging folder and moved into place only when all are written,
        # so a failed write (full disk, read-only folder) leaves no partial set of tables behind
        staging = Path(tempfile.mkdtemp(dir=out, prefix=".staging-"))
        try:
            # with a local pool's cores, the comparisons and kept points are written by a process of their own
            aside = fork_aside if local and isinstance(executor, LocalExecutor) and executor.workers > 1 else None
            recomputed = []
            unsupported, fallback = _write_outputs(study, staging, tasks, chunk_dir, variants, comparisons, aside,
                                                   read, points_room, recomputed)
            if study.attribution is not None:  # reads staging/points.parquet
                write_attribution(staging, study, preds_by_term=preds_by_term, executor=executor)
            for tables in staged:
                for name, frame in tables.items():
                    write_csv(frame, staging / f"{name}.csv")
            result = RunResult(out, int(sum(t.preds.size for t in tasks) * len(study.targets)), len(tasks),
                               len(tasks) - len(todo) - len(recomputed), pairs, pairs_cached, fallback,
                               time.perf_counter() - started, unsupported, results_reused, results_computed,
                               len(recomputed), executor.workers, notes)
            write_run_json(study, staging, result)
            for path in sorted(staging.iterdir()):
                os.replace(path, out / path.name)
        except OSError as exc:
            raise PrecisionError(f"--out={out}: cannot write the tables ({exc.strerror or exc}); nothing was "
                                 "written (finished tasks are kept for the next run)") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    finally:
        executor.close()  # after the attribution, which runs on it too
        if terms_folder is not None:
            shutil.rmtree(terms_folder, ignore_errors=True)
    return result


def _run_stage(study: Study, stage, tasks, executor, cache_folder) -> dict:
    """The tables of one of the operator's run stages (:class:`~precision.engine.operators.RunStage`) over the
    study's pooled regions, by table name; stored in the result cache under the tasks' inputs, the stage's
    parameters, the variants it evaluates and the code that runs it."""
    pooled = tuple(name not in study.separate for name in study.regions)
    key = hashlib.sha256(json.dumps(dict(
        kind=stage.name, tasks=[[task_digest(t), t.machine] for t in tasks], pooled=pooled,
        parameters=stage.parameters, code=source_digest(stage.run),
        variants=[variant_digest(v, study.operator) for v in stage.evaluates]), sort_keys=True).encode()).hexdigest()
    cache = ResultCache(cache_folder, create=False)
    stored = cache.get(key)
    if stored is not None:
        names = sorted(k[:-len(".values")] for k in stored if k.endswith(".values"))
        return {name: frame_from_arrays(stored, name) for name in names}
    tables = stage.run(tasks, executor, pooled)
    cache.put(key, {k: v for name, frame in tables.items() for k, v in frame_to_arrays(frame, name).items()})
    return tables


def _load_compiled(machines: tuple = ()) -> None:
    """Load the compiled passes into this process (numba: about half a second): the analysis's, and those of
    the ``machines`` (specs): the fp32 fma and select of every machine, the npu Power, the ieee exp, ln and
    pow."""
    from precision.analysis import fused
    fused.load()
    models = {spec.split("+")[0] for spec in machines}
    if models:
        from precision.machine import arith_fused
        arith_fused.load()
    if "npu" in models:
        from precision.machine import npu_fused
        npu_fused.load()
    if "ieee" in models:
        from precision.machine import ieee_fused
        ieee_fused.load()


def _load_compiled_idly(machines: tuple) -> None:
    """:func:`_load_compiled` in a thread of the lowest priority (on Linux, where a thread has its own
    niceness), so that it takes only what the other processes leave of the cores: a worker that falls idle
    while this process builds the tasks loads there without slowing it."""
    def load():
        if sys.platform == "linux":
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        _load_compiled(machines)
    loader = threading.Thread(target=load, name="load compiled passes")
    loader.start()
    loader.join()

