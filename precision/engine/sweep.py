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
or the executor.  Finished tasks are written atomically to
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
    Every paired comparison of the run (:mod:`precision.sigmoid_focal_loss_grad.comparisons`: guard
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

import contextlib
import dataclasses
import functools
import hashlib
import importlib.metadata as md
import itertools
import json
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from precision.engine.cache import ResultCache, TermCache, atomic_write_npz, default_cache_dir, read_checked_npz
from precision.errors import PrecisionError, RunNote
from precision.engine.executor import InlineExecutor, LocalExecutor, fork_aside, make_executor
from precision.engine.operators import get_operator, input_keys, term_chunk
from precision.io.files import atomic_open
from precision.exact.formats import get_format, round_to_format
from precision.engine.attribution_table import write_attribution
from precision.analysis.standards import settings_from_options, standards_table
from precision.analysis.acceptance import ACCEPTANCE_MAXIMA
from precision.analysis.groups import GroupStats, witness_fields
from precision.analysis.paired import PairedStats
from precision.analysis.scoring import CLASS_NAMES, COMPILED_MIN_POINTS
from precision.engine.study import Study, region_labels
from precision.engine.estimate import (EXACT_COUNT_PREDS, memory_limit as default_memory_limit, plan_study,
                                      study_variants)
from precision.engine.points import check_point_sets, study_preds_by_term
from precision.io.frames import columns_from_arrays, frame_from_arrays, frame_to_arrays, hex_floats, stack_arrays
from precision.engine.task import (PRED_BIN_EDGES, Task, TaskResult, exact_input, machine_siblings, run_task,
                                   run_tasks, share_terms, source_digest, task_digest, variant_digest)
from precision.io.frames import write_csv

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
def code_digest() -> str:
    """SHA-256 of the package's source files that compute results (not the report renderer), for run.json.

    Results are keyed by finer digests (:func:`precision.engine.task.variant_digest`,
    :func:`precision.engine.task.shared_digest`).
    """
    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]  # precision/
    for path in sorted(p for p in root.rglob("*.py") if "report" not in p.relative_to(root).parts):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

@dataclass
class RunResult:
    """What a run wrote and measured (also saved as run.json)."""

    out_dir: Path
    points: int
    tasks: int
    tasks_reused: int
    term_pairs: int
    term_pairs_cached: int
    oracle_fallback: int
    seconds: float
    unsupported: list
    results_reused: int = 0  # variant and pair results taken from the result cache by the tasks run now
    results_computed: int = 0  # and computed (then stored)
    tasks_recomputed: int = 0  # tasks whose chunk was there but corrupt: recomputed (not counted as reused)
    workers: int = 1  # worker processes used (the requested, capped at the work; StudyPlan.workers)
    notes: list = dataclasses.field(default_factory=list)  # the run's notes (RunNote), one line each


def _task_key(task: Task) -> str:
    """The chunk file's name: the task's inputs, machine, variants with their source digests, comparisons."""
    h = hashlib.sha256()
    h.update(json.dumps(dict(inputs=task_digest(task), machine=task.machine,
                             variants=[(v, variant_digest(v, task.operator)) for v in task.variants],
                             comparisons=[list(c) for c in task.comparisons]), sort_keys=True).encode())
    return h.hexdigest()[:32]


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
        absent = op.absent_table(preds.size)
        x_all = np.concatenate([p[0] for p in pieces])
        t_all = op.TermTable.concatenate([p[1] for p in pieces])
        keys, first = np.unique(x_all.view(np.int64), return_index=True)

        def lookup(values, keys=keys, first=first, t_all=t_all):
            return t_all.take(first[np.searchsorted(keys, values.view(np.int64))])
        result[v] = (lookup(preds) if need_pos else absent, lookup(-preds) if need_neg else absent)
    return result, total, cached


def _store_terms(cache: TermCache, unstored: dict) -> None:
    """Merge the terms computed since the last store into the cache (one shard write per term value); empties it."""
    for v, pieces in unstored.items():
        cache.store(v, np.concatenate([x for x, _ in pieces]),
                    get_operator(cache.operator).TermTable.concatenate(t for _, t in pieces))
    unstored.clear()


_variants_of = study_variants


def _build_tasks(study: Study, preds_by_term: dict, terms, variants, comparisons, result_cache) -> list:
    """The study's tasks: per machine and profile, per value of the terms attribute (sharing its terms), per
    combination of the other attributes' values (in the operator's order), weight and dout."""
    op = get_operator(study.operator)
    term_name = op.TERMS_ATTRIBUTE
    others = [(name, values) for name, values in study.attributes if name != term_name]
    index = {v: i for i, v in enumerate(variants)}
    pairs = tuple((index[c.with_variant], index[c.without_variant]) for c in comparisons)
    plugins = tuple((str(p), get_operator(study.operator).plugin_digest(p)) for p in study.plugins)
    golden = (study.report.options_of("standards") if study.report is not None else {}).get("golden", "exact")
    tasks = []
    for machine in study.machines:
        for profile in study.profiles:
            fmt = get_format(profile.pred)
            for term in study.term_values:
                # a tensor of the profile's pred format holds only the values exact in it
                preds = preds_by_term[term]
                exact = round_to_format(preds, fmt).astype(np.float64).view(np.int64) == preds.view(np.int64)
                if not exact.any():
                    continue
                pos, neg = terms[term]
                if not exact.all():  # (all exact: the tasks share the tables themselves)
                    preds, pos, neg = preds[exact], pos.take(exact), neg.take(exact)
                for combination in itertools.product(*(values for _, values in others)):
                    given = {term_name: term, **dict(zip((name for name, _ in others), combination))}
                    attributes = tuple((name, given[name]) for name in op.ATTRIBUTES)
                    for weight in study.weights:
                        for dout in study.douts:
                            task = Task("", study.operator, machine, profile, attributes, weight, dout,
                                        study.reduction, study.count, study.targets, variants, study.region_edges,
                                        study.per_point, preds, pos, neg, study.bracket_edges, pairs,
                                        result_cache, plugins=plugins, golden=golden)
                            tasks.append(dataclasses.replace(task, key=_task_key(task)))
    return tasks


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
    if workers is not None and workers > plan.cores:
        notes.insert(0, f"--workers={workers} is more than this machine's {plan.cores} cores; capped at "
                        f"{plan.workers} (the study's {plan.units} units of work and its oracle chunks use no more)"
                        + (", the rest sharing cores" if plan.workers > plan.cores else ""))
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
        try:
            chunk_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PrecisionError(f"--out={out}: cannot create the output folder ({exc.strerror})") from None
        if not os.access(out, os.W_OK):
            raise PrecisionError(f"--out={out}: the output folder is not writable")
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
        tasks = _build_tasks(study, preds_by_term, terms, variants, comparisons,
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
            _write_run_json(study, staging, result)
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


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------

def group_keys(op) -> tuple:
    """Key columns of the fine groups of ``groups_raw.parquet`` for the operator ``op`` (``bracket`` only with
    bracket bands)."""
    return ("variant", "machine", "format", "profile", *input_keys(op), "region")


def pair_keys(op) -> tuple:
    """Key columns of the fine comparisons of ``paired_raw.parquet`` (``bracket`` only with bracket bands)."""
    return ("kind", "subject", "comparison", "with_variant", "without_variant", "machine", "format", "profile",
            *input_keys(op), "region")


#: Witness families of the raw tables (the prefixes of their columns) and the inputs each names.
WITNESS_PREFIXES = ("witness_", "finite_witness_", "gain_witness_", "loss_witness_", *ACCEPTANCE_MAXIMA.values())


def hex_witnesses(table: pd.DataFrame, integers=("target",)) -> pd.DataFrame:
    """A table with its witness inputs spelled as exact hex floats (``none`` for an absent weight; empty where
    a group has no witness) and the ``integers`` (selectors) as integers, as every CSV table and report shows
    them.  The inputs of a family are :func:`precision.analysis.groups.witness_fields`'s (pred, the operator's
    attributes, weight, dout) held as floats, not the ``integers``."""
    out = table.copy()
    for prefix in WITNESS_PREFIXES:
        pred = f"{prefix}pred"
        if pred not in out.columns or out[pred].dtype.kind != "f":
            continue
        none = out[pred].isna().to_numpy()
        for name in witness_fields(out.columns, prefix, inputs_only=True):
            col = f"{prefix}{name}"
            if name in integers or out[col].dtype.kind != "f":
                continue
            values = out[col].to_numpy(np.float64)
            text = np.where(np.isnan(values), "none", hex_floats(values))
            out[col] = np.where(none, None, text.astype(object))
        for name in integers:
            col = f"{prefix}{name}"
            if col in out.columns:
                t = pd.to_numeric(out[col], errors="coerce").to_numpy(np.float64)
                out[col] = np.where(none, None, np.asarray([None if np.isnan(v) else int(v) for v in t], dtype=object))
    return out


def _read_task(task, chunk_dir: Path, recomputed: list | None = None) -> dict:
    """The arrays of a finished task's :class:`TaskResult` (its chunk file); a chunk missing or corrupt is
    recomputed here (its key appended to ``recomputed``)."""
    arrays = read_checked_npz(chunk_dir / f"{task.key}.safetensors")
    if arrays is None:  # truncated or altered on disk (warned once): recompute it here
        arrays = run_task(task)
        atomic_write_npz(chunk_dir / f"{task.key}.safetensors", arrays)
        if recomputed is not None:
            recomputed.append(task.key)
    return arrays


def _stack_tasks(parts: list, prefix: str, cls):
    """One :class:`~precision.analysis.groups.Mergeable` of the tasks' rows, with their ``task`` index.

    ``parts``: (task index, arrays under ``prefix``).  Packed frames with the
    same numeric columns stack as arrays (one frame built); others (a task
    whose every variant is unsupported, text columns) go through frames.
    """
    if not parts:
        return cls.concat([])
    first = parts[0][1]

    def packed_alike(a):
        return (a[f"{prefix}.values"].shape[0] > 0 and np.array_equal(a[f"{prefix}.order"], a[f"{prefix}.columns"])
                and np.array_equal(a[f"{prefix}.columns"], first[f"{prefix}.columns"])
                and np.array_equal(a[f"{prefix}.dtypes"], first[f"{prefix}.dtypes"]))
    if all(packed_alike(a) for _, a in parts):
        stacked = stack_arrays([a for _, a in parts], prefix, "task", [ti for ti, _ in parts], hist=True)
        return cls.from_arrays(stacked, prefix)
    return cls.concat(cls.from_arrays(a, prefix).with_columns(task=ti) for ti, a in parts)


class _TaskColumns:
    """The key columns of rows that carry a task index and a group id, decoded for many rows at once."""

    def __init__(self, tasks, region_names, band_names):
        self.tasks = tasks
        self.regions = np.asarray(region_names, dtype=object)
        self.bands = np.asarray(band_names, dtype=object)
        self.targets = np.asarray(tasks[0].targets) if tasks else np.empty(0, dtype=np.int64)
        weight = [np.nan if t.weight is None else float(t.weight) for t in tasks]
        names = [name for name, _ in tasks[0].attributes] if tasks else []
        self.numbers = {**{name: np.array([t.attribute_values[name] for t in tasks], dtype=np.float64)
                           for name in names},
                        "weight": np.array(weight, dtype=np.float64),
                        "dout": np.array([t.dout for t in tasks], dtype=np.float64)}
        self.text = {"machine": np.array([t.machine for t in tasks], dtype=object),
                     "format": np.array([t.profile.pred for t in tasks], dtype=object),
                     "profile": np.array([t.profile.name for t in tasks], dtype=object)}

    def keys(self, frame: pd.DataFrame) -> dict:
        """machine, format, profile, the attributes, weight, dout, target, region[, bracket] of each row."""
        ti = frame["task"].to_numpy(np.int64)
        gid = frame["group"].to_numpy(np.int64)
        B, R = len(self.bands), len(self.regions)
        rest = gid // B
        out = {name: values[ti] for name, values in self.text.items()}
        out.update({name: values[ti] for name, values in self.numbers.items()})
        out["target"] = self.targets[rest // R]
        out["region"] = self.regions[rest % R]
        if B > 1:
            out["bracket"] = self.bands[gid % B]
        return out

    def decoded(self, merged, columns: dict, prefixes, drop: list, keys: list):
        """``merged`` (a :class:`~precision.analysis.groups.Mergeable` of rows carrying a task index and a group
        id) with ``columns`` and its key columns (:meth:`keys`) and the inputs of its witness families
        ``prefixes`` (:meth:`witness_inputs`) written in, the columns ``drop`` dropped, ``keys`` first."""
        f = merged.frame
        cols = {**columns, **self.keys(f)}
        for prefix in prefixes:
            cols.update(self.witness_inputs(f, prefix, cols["target"]))
        frame = f.drop(columns=drop).assign(**cols)
        return type(merged)(frame[list(keys) + [c for c in frame.columns if c not in keys]], merged.hist)

    def witness_inputs(self, frame: pd.DataFrame, prefix: str, targets) -> dict:
        """The inputs of one witness family as numbers: the frame's pred, the row's task constants and
        selector; NaN where a group has no witness (:func:`hex_witnesses` spells them for the tables)."""
        preds = frame[f"{prefix}pred"].to_numpy(np.float64)
        none = np.isnan(preds)
        ti = frame["task"].to_numpy(np.int64)
        out = {f"{prefix}pred": preds,
               f"{prefix}target": np.where(none, np.nan, np.asarray(targets, dtype=np.float64))}
        for name, values in self.numbers.items():
            out[f"{prefix}{name}"] = np.where(none, np.nan, values[ti])
        return out


def sort_table(table: pd.DataFrame, variants, machines=None, regions=None, bands=None, attributes=()) -> pd.DataFrame:
    """Rows in run order: variant (or comparison) as in the study, machine as in the study, then the other keys
    (``attributes``: the operator's, its ``ATTRIBUTES``, between profile and weight)."""
    ranks = {"variant": {v: i for i, v in enumerate(variants)},
             "with_variant": {v: i for i, v in enumerate(variants)},
             "machine": {m: i for i, m in enumerate(machines or ())},
             "region": {r: i for i, r in enumerate(regions or ())},
             "bracket": {b: i for i, b in enumerate(bands or ())},
             "kind": {"guard": 0, "threshold": 1, "declared": 2}}
    cols = [c for c in ("kind", "subject", "variant", "with_variant", "without_variant", "machine", "format",
                        "profile", *attributes, "weight", "dout", "target", "region", "bracket")
            if c in table.columns]

    def key(s):
        r = ranks.get(s.name)
        return s.map(r).fillna(len(r)) if r else s
    if "subject" in cols:  # comparisons keep their discovery order, not the subject's spelling
        cols.remove("subject")
    return table.sort_values(cols, key=key, kind="stable").reset_index(drop=True)


def _load_mergeable(run_dir, stats_class, raw: str, hist: str):
    """Mergeable statistics of a run folder: the frame of ``raw`` (parquet) and the histogram of ``hist`` (npz)."""
    run_dir = Path(run_dir)
    arrays = read_checked_npz(run_dir / hist)
    if arrays is None:
        raise PrecisionError(f"{run_dir}/{hist} is missing or corrupt; run the study again")
    frame = _read_raw(run_dir / raw)
    return stats_class(frame, pd.DataFrame({c: arrays[c] for c in ("row", "bin", "count")}))


def load_stats(run_dir) -> GroupStats:
    """The fine group statistics of a run folder (``groups_raw.parquet`` and ``hist.npz``)."""
    return _load_mergeable(run_dir, GroupStats, "groups_raw.parquet", "hist.npz")


def load_paired(run_dir) -> PairedStats:
    """The fine paired comparisons of a run folder (``paired_raw.parquet`` and ``paired_hist.npz``)."""
    return _load_mergeable(run_dir, PairedStats, "paired_raw.parquet", "paired_hist.npz")


#: Kept points gathered before one append to ``points.parquet`` (few appends; memory stays bounded).
POINTS_BATCH_ROWS = 1 << 20


#: Bytes of kept points the run's process holds of the chunks it reads while the tasks run (their points are read
#: again from the chunk files beyond it).
POINTS_HELD_BYTES = 256 << 20


def _held_part(arrays: dict, points_room: int) -> tuple[dict, int]:
    """(what the tables read of a task's chunk, the room left for points): its group statistics, comparisons,
    fallbacks, unsupported variants and pred-bin maxima, and its kept points when they fit in ``points_room``
    bytes."""
    part = {k: v for k, v in arrays.items() if not k.startswith("points.")}
    points = {k: v for k, v in arrays.items() if k.startswith("points.")}
    size = sum(v.nbytes for v in points.values())
    if size <= points_room:
        part.update(points)
        points_room -= size
    return part, points_room


def _write_outputs(study: Study, out: Path, tasks, chunk_dir: Path, variants, comparisons,
                   aside=None, read=None, points_room: int = 0, recomputed: list | None = None) -> tuple[list, int]:
    """Assemble the tables from the task chunks, one whole chunk in memory at a time (and every task's
    :func:`_held_part`); (unsupported, fallbacks).

    ``read``: the :func:`_held_part` of tasks already read, by task index; the others are read here and their
    parts added to it, their kept points while they fit in ``points_room`` more bytes (the chunks of the others
    are read again for their comparisons and points).

    The fine groups' table, the comparisons' tables and the kept points (:func:`_write_aside`) are written by
    ``aside`` (a function that runs a call and returns its future: :func:`precision.engine.executor.fork_aside`,
    in a process of its own, which holds the stacked statistics and ``read`` by the fork) while this process
    writes the coarser group tables and the fine groups' raw statistics; by this process after them without
    it.
    """
    region_names = study.regions
    band_names = get_operator(study.operator).band_labels(study.bracket_edges)  # ["all"] without bands
    bands = len(band_names) > 1
    stats_parts = []
    unsupported = set()
    predbins = {}
    fallback = 0
    names = np.asarray(variants, dtype=object)
    read = {} if read is None else read
    for ti, task in enumerate(tasks):
        if ti not in read:  # (a chunk of an earlier run into this folder)
            read[ti], points_room = _held_part(_read_task(task, chunk_dir, recomputed), points_room)
        arrays = read[ti]
        fallback += int(arrays["fallback"])
        # numbers only here (the task's index, its group ids): the key columns are decoded once, below
        stats_parts.append((ti, {k: v for k, v in arrays.items() if k.startswith("stats.")}))
        for vi in arrays["unsupported"].tolist():
            unsupported.add((variants[vi], task.profile.name))
        for vi, v in enumerate(variants):
            key = (v, task.machine, task.profile.name, task.term)
            cur = arrays["pred_max"][vi]
            predbins[key] = cur if key not in predbins else np.fmax(predbins[key], cur)
    bracket = ["bracket"] if bands else []
    fine_keys = list(group_keys(get_operator(study.operator))) + bracket
    context = _TaskColumns(tasks, region_names, band_names)
    stats = _stack_tasks(stats_parts, "stats", GroupStats)
    stats = context.decoded(stats, {"variant": names[stats.frame["variant"].to_numpy(np.int64)]},
                            ("witness_", "finite_witness_", *ACCEPTANCE_MAXIMA.values()), ["group", "task"], fine_keys)
    # (the key columns of both raw tables, and the decoder of their rows: one for the groups and the pairs)
    layout = (fine_keys, list(pair_keys(get_operator(study.operator))) + bracket, context, region_names, band_names)
    # (every chunk read, a damaged one recomputed, before another process reads them)
    side = None if aside is None else aside(_write_aside, study, out, tasks, chunk_dir, variants, comparisons, stats,
                                            layout, read)
    try:
        # the fine groups' raw sums and histograms, for re-merging by reports and the gate, are written while the
        # tables are merged (hashing and writing them, 110 MB for fp16_exhaustive, release the interpreter's lock)
        with ThreadPoolExecutor(1) as background:
            raw_written = background.submit(_write_raw, out, stats)
            _write_tables(study, out, stats, variants, region_names, band_names, predbins)
            raw_written.result()
    finally:
        if side is not None:  # (its files are in place before the caller removes the folder on a failure)
            wait([side])
    if side is None:
        _write_aside(study, out, tasks, chunk_dir, variants, comparisons, stats, layout, read)
    else:
        side.result()
    return sorted(unsupported), fallback


def _write_aside(study: Study, out: Path, tasks, chunk_dir: Path, variants, comparisons, stats, layout,
                 read) -> None:
    """What a process aside writes while the run's process writes the coarser group tables and the fine
    groups' raw statistics: the fine groups' table, the comparisons' tables and the kept points."""
    fine_keys, paired_keys, context, region_names, band_names = layout
    _write_fine_table(study, out, stats, variants, fine_keys, region_names, band_names)
    _write_paired_and_points(study, out, tasks, chunk_dir, variants, comparisons, read, context, paired_keys)


def _write_paired_and_points(study: Study, out: Path, tasks, chunk_dir: Path, variants, comparisons,
                             read: dict, context: "_TaskColumns", paired_keys: list) -> None:
    """``comparisons.csv``, ``paired_raw.parquet``, ``paired_hist.npz`` and ``points.parquet`` from the task
    chunks: their parts held in ``read`` (:func:`_held_part`, by task index), the others read here (this may
    run in a process of its own, :func:`_write_outputs`); their rows decoded by ``context``, keyed by
    ``paired_keys``."""
    paired_parts = []
    points_tmp = out / "points.parquet.tmp"
    points = _PointsWriter(points_tmp, variants)
    for ti, task in enumerate(tasks):
        arrays = read.get(ti)
        if arrays is None or "points.values" not in arrays:
            arrays = _read_task(task, chunk_dir)
        if arrays["paired.values"].shape[0]:
            paired_parts.append((ti, {k: v for k, v in arrays.items() if k.startswith("paired.")}))
        if arrays["points.values"].shape[0]:
            points.add(task, columns_from_arrays(arrays, "points"))
    points.close()
    os.replace(points_tmp, out / "points.parquet")
    paired = _stack_tasks(paired_parts, "paired", PairedStats)
    if len(paired):
        which = paired.frame["comparison"].to_numpy(np.int64)
        cols = {name: np.asarray([getattr(c, attr) for c in comparisons], dtype=object)[which]
                for name, attr in (("kind", "kind"), ("subject", "subject"), ("comparison", "name"),
                                   ("with_variant", "with_variant"), ("without_variant", "without_variant"))}
        paired = context.decoded(paired, cols, ("gain_witness_", "loss_witness_"), ["group", "task", "comparison"],
                                 paired_keys)
    table = comparison_table(paired, variants, study.machines, study.regions, separate=study.separate)
    _atomic_csv(out / "comparisons.csv", hex_witnesses(table))
    atomic_write_npz(out / "paired_hist.npz", {c: paired.hist[c].to_numpy(np.int64) for c in ("row", "bin", "count")})
    _atomic_parquet(out / "paired_raw.parquet", paired.frame if len(paired) else pd.DataFrame(columns=paired_keys))


class _PointsWriter:
    """``points.parquet``: the tasks' kept points with their inputs, appended in batches of
    :data:`POINTS_BATCH_ROWS` rows (memory stays bounded), each batch one frame built from its tasks' columns."""

    def __init__(self, path: Path, variants):
        self.path, self.variants = path, list(variants)
        self.writer, self.parts, self.rows = None, [], 0

    def add(self, task, pts: dict) -> None:
        """A task's kept points (the columns of its ``points`` frame, :class:`~precision.engine.task.TaskResult`)."""
        idx = pts["index"].astype(np.int64)
        n, T = idx.size, len(task.targets)

        def repeated(value, dtype=None):
            return np.full(n, value, dtype=dtype)
        self.parts.append({
            "pred": task.preds[idx // T], "target": np.asarray(task.targets)[idx % T],
            **{name: repeated(value) for name, value in task.attribute_values.items()},
            "weight": repeated(np.nan if task.weight is None else exact_input(task.weight, task.profile.weight)),
            "dout": repeated(exact_input(task.dout, task.profile.dout)),
            "count": repeated(task.count if task.reduction == "mean" else 1),
            "variant": pts["variant"].astype(np.int64),
            "machine": repeated(task.machine, object), "format": repeated(task.profile.pred, object),
            "profile": repeated(task.profile.name, object),
            "computed": pts["computed"], "exact": pts["exact_hi"], "exact_lo": pts["exact_lo"],
            "rounded": pts["rounded"], "err_ulp": pts["err_ulp"], "err_bits": pts["err_bits"],
            "class": pts["class"].astype(np.int64)})
        self.rows += n
        if self.rows >= POINTS_BATCH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if not self.parts:
            return
        columns = {name: np.concatenate([part[name] for part in self.parts]) for name in self.parts[0]}
        columns["variant"] = pd.Categorical.from_codes(columns["variant"], categories=self.variants)
        columns["class"] = pd.Categorical.from_codes(columns["class"], categories=list(CLASS_NAMES.values()))
        self.writer = _append_parquet(self.writer, self.path, pd.DataFrame(columns))
        self.parts, self.rows = [], 0

    def close(self) -> None:
        """Write what is held; an empty table when no task kept a point."""
        self._flush()
        if self.writer is None:
            pd.DataFrame().to_parquet(self.path, index=False)
        else:
            self.writer.close()


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


def _write_raw(out: Path, stats: GroupStats) -> None:
    atomic_write_npz(out / "hist.npz", {c: stats.hist[c].to_numpy() for c in ("row", "bin", "count")})
    _atomic_parquet(out / "groups_raw.parquet", stats.frame)


def _group_table(study, merged: GroupStats, by, variants, region_names, band_names) -> pd.DataFrame:
    """The table of merged group statistics by the keys ``by``, in the run's order."""
    return sort_table(merged.table(by), variants, study.machines, region_names, band_names,
                      get_operator(study.operator).ATTRIBUTES)


def _write_fine_table(study, out, stats, variants, fine_keys, region_names, band_names) -> None:
    """``groups.csv``: the finest groups' table from the stacked statistics."""
    _atomic_csv(out / "groups.csv", hex_witnesses(_group_table(study, stats.merge(fine_keys), fine_keys, variants,
                                                               region_names, band_names)))


def _write_tables(study, out, stats, variants, region_names, band_names, predbins) -> None:
    """The run's coarser group tables (every one but ``groups.csv``), its standards and pred-bin maxima from
    the stacked statistics."""
    op = get_operator(study.operator)
    term = op.TERMS_ATTRIBUTE  # by_<term>.csv (by_gamma.csv); none when the operator has no terms attribute
    terms = [term] if term is not None else []

    def table(merged, by):
        return _group_table(study, merged, by, variants, region_names, band_names)
    run_keys = ["variant", "machine", "format", "profile"]
    # the fine histogram is merged once, by term and region; by_region, by_<term> and summary re-merge smaller ones
    by_term_region = stats.merge(run_keys + terms + ["region"])
    by_region = stats.merge(run_keys + ["region"], within=by_term_region)
    tables = {
        "summary.csv": table(stats.merge(run_keys, within=by_region), run_keys),
        "by_region.csv": table(by_region, run_keys + ["region"]),
    }
    if terms:
        tables[f"by_{term}.csv"] = table(stats.merge(run_keys + terms, within=by_term_region), run_keys + terms)
    if len(band_names) > 1:
        by = run_keys + terms + ["bracket"]
        tables["by_bracket.csv"] = table(stats.merge(by), by)
    for name, t in tables.items():
        _atomic_csv(out / name, hex_witnesses(t))
    options = study.report.options_of("standards") if study.report is not None else {}
    _atomic_csv(out / "standards.csv", standards_table(stats, settings_from_options(options), variants, region_names))
    vorder = {v: i for i, v in enumerate(variants)}
    keys = sorted(predbins, key=lambda k: (vorder[k[0]], k[1], k[2], k[3]))
    atomic_write_npz(out / "predbins.npz", {
        "edges": PRED_BIN_EDGES,
        "variant": np.array([k[0] for k in keys], dtype=str), "machine": np.array([k[1] for k in keys], dtype=str),
        "profile": np.array([k[2] for k in keys], dtype=str), term or "term": np.array([np.nan if k[3] is None else k[3] for k in keys], dtype=np.float64),
        "max_ulp": np.stack([predbins[k] for k in keys]) if keys else np.empty((0, PRED_BIN_EDGES.size - 1))})


#: Key columns of ``comparisons.csv`` (region ``all`` = every region of the run).
COMPARISON_KEYS = ("kind", "subject", "comparison", "with_variant", "without_variant", "machine", "format",
                   "profile", "region")


def comparison_table(paired: PairedStats, variants, machines, regions, by=COMPARISON_KEYS,
                     separate=()) -> pd.DataFrame:
    """The paired statistics and verdict per comparison, machine, format and profile: pooled over the regions
    (region ``all``; the ``separate`` regions, a study's labelled subsets, are left out of it) and per region."""
    by = list(by)
    if not len(paired):
        return pd.DataFrame(columns=by)
    per_region = paired.merge(by).table(by)
    pooled = paired.select(~paired.frame["region"].isin(list(separate)).to_numpy()) if separate else paired
    rest = [c for c in by if c != "region"]
    overall = pooled.merge(rest).table(rest)
    overall.insert(by.index("region"), "region", "all")
    t = pd.concat([overall, per_region], ignore_index=True)
    order = {c: i for i, c in enumerate(dict.fromkeys(paired.frame["comparison"]))}
    t = sort_table(t, variants, machines, ["all", *regions])
    return t.assign(_c=t["comparison"].map(order)).sort_values("_c", kind="stable").drop(columns="_c").reset_index(
        drop=True)


def _append_parquet(writer, path: Path, frame: pd.DataFrame):
    """Append a frame to a Parquet file being written (opened on the first frame)."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    if writer is None:
        writer = pq.ParquetWriter(path, table.schema)
    writer.write_table(table.cast(writer.schema))
    return writer


def _read_raw(path: Path) -> pd.DataFrame:
    """A raw (mergeable) table of a run folder, missing file as a one-line error."""
    if not path.is_file():
        raise PrecisionError(f"{path} is missing; run the study again")
    frame = pd.read_parquet(path)
    for col in frame.columns:  # text columns as plain Python strings (None where empty), not Arrow strings
        if frame[col].dtype == object or str(frame[col].dtype).startswith(("string", "large_string")):
            frame[col] = frame[col].astype(object).where(frame[col].notna(), None)
    return frame


def _atomic_parquet(path: Path, frame: pd.DataFrame) -> None:
    """A raw table as Parquet (exact float64, typed, fast), written atomically."""
    with atomic_open(path, "wb") as fh:
        frame.to_parquet(fh, index=False)


def _atomic_csv(path: Path, frame: pd.DataFrame) -> None:
    write_csv(frame, path)


def _write_run_json(study: Study, out: Path, result: RunResult) -> None:
    op = get_operator(study.operator)
    versions = {}
    for pkg in ("precision", "numpy", "mpmath", "gmpy2", "pandas", "ml_dtypes"):
        with contextlib.suppress(md.PackageNotFoundError):
            versions[pkg] = md.version(pkg)
    data = {
        "study": study.name, "study_file": study.path, "study_sha256": study.digest, "seed": study.seed,
        "operator": study.operator, "oracle_version": op.ORACLE_VERSION, "code_sha256": code_digest(),
        "python": platform.python_version(),
        "versions": versions, "machines": list(study.machines), "variants": list(_variants_of(study)),
        "region_edges": list(study.region_edges), "regions": study.regions, "separate": list(study.separate),
        "bracket_edges": list(study.bracket_edges), "brackets": op.band_labels(study.bracket_edges),
        "report": None if study.report is None else {
            "sections": list(study.report.sections),
            "options": {name: {k: (list(v) if isinstance(v, tuple) else v) for k, v in opts}
                        for name, opts in study.report.options}},
        "pred_sets": [{"kind": p.kind, "format": p.format, "weighting": p.label,
                       **{k: (list(v) if isinstance(v, tuple) else v) for k, v in p.params if k != "values"}}
                      for p in study.pred_sets],
        **{k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(result).items()
           if k not in ("seconds", "workers", "notes")},
    }
    tmp = out / "run.json.tmp"
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, out / "run.json")
