"""A run's tables: the tasks' results (their chunk files, or a streamed run's folded blocks) assembled into the
files of the output folder (:mod:`precision.engine.sweep` lists them and their columns), and the readers of
the mergeable ones.

The tasks' group statistics are stacked with their task index (:class:`Gathered`), decoded into key columns
once (:class:`_TaskColumns`) and merged by :class:`~precision.analysis.groups.Mergeable` into every table;
the comparisons likewise; the kept points are appended to ``points.parquet`` in batches (memory bounded).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.metadata as md
import json
import os
import platform
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from precision.analysis.acceptance import ACCEPTANCE_MAXIMA
from precision.analysis.groups import GroupStats, witness_fields
from precision.analysis.paired import PairedStats
from precision.analysis.scoring import CLASS_NAMES
from precision.analysis.standards import settings_from_options, standards_table
from precision.engine.cache import atomic_write_npz, read_checked_npz
from precision.engine.estimate import study_variants
from precision.engine.operators import get_operator, input_keys
from precision.engine.study import Study
from precision.engine.task import EXTENT_LEVELS, PRED_BIN_EDGES, exact_input, run_task
from precision.errors import PrecisionError
from precision.io.files import atomic_open
from precision.io.frames import columns_from_arrays, hex_floats, stack_arrays, write_csv
from precision.recipes.target_kinds import target_text

__all__ = ["RunResult", "Gathered", "code_digest", "make_output_folder", "write_gathered", "write_run_json", "extents_table", "load_stats",
           "load_paired", "sort_table", "comparison_table", "hex_witnesses", "group_keys", "pair_keys",
           "COMPARISON_KEYS", "POINTS_BATCH_ROWS", "POINTS_HELD_BYTES"]


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
    a group has no witness) and the ``integers`` (selectors) as integers (a column holding a real target's
    non-integral value: every value as :func:`precision.recipes.target_kinds.target_text` spells it), as every
    CSV table and report shows them.  The inputs of a family are
    :func:`precision.analysis.groups.witness_fields`'s (pred, the operator's attributes, weight, dout) held as
    floats, not the ``integers``."""
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
                spell = int if np.all(np.isnan(t) | (t == np.round(t))) else target_text  # one type a column
                out[col] = np.where(none, None, np.asarray([None if np.isnan(v) else spell(v) for v in t],
                                                           dtype=object))
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


@dataclass
class Gathered:
    """What the tables read of a run's tasks, gathered (from their chunks) or folded (a streamed run's blocks):
    ``stats``, their group statistics stacked with their ``task`` index; ``predbins``, the pred-bin maxima by
    (variant, machine, profile, term value); ``extent`` and ``extent_count``, the holes' extents by task index
    (:func:`precision.engine.task.hole_extents`, [V, T, L, 2] and [V, T, L]); the unsupported (variant,
    profile) pairs; the points whose rounding fell back to mpmath."""

    stats: GroupStats
    predbins: dict
    extent: dict
    extent_count: dict
    unsupported: set
    fallback: int

    def add(self, ti: int, task, variants, arrays: dict) -> None:
        """Add a task's (or a block's) counts, pred-bin maxima and extents to those of task index ``ti``."""
        self.fallback += int(arrays["fallback"])
        for vi in arrays["unsupported"].tolist():
            self.unsupported.add((variants[vi], task.profile.name))
        for vi, v in enumerate(variants):
            key = (v, task.machine, task.profile.name, task.term)
            cur = arrays["pred_max"][vi]
            self.predbins[key] = cur if key not in self.predbins else np.fmax(self.predbins[key], cur)
        extent, count = arrays["extent"], arrays["extent_count"]
        if ti in self.extent:  # (a later block: its preds follow the earlier ones')
            held = self.extent[ti]
            extent = np.stack([np.fmin(held[..., 0], extent[..., 0]), np.fmax(held[..., 1], extent[..., 1])], axis=-1)
            count = self.extent_count[ti] + count
        self.extent[ti], self.extent_count[ti] = extent, count


def _gather(tasks, chunk_dir: Path, variants, read: dict, points_room: int, recomputed) -> Gathered:
    """:class:`Gathered` of the finished tasks' chunks, one whole chunk in memory at a time (and every task's
    :func:`_held_part`: ``read``, by task index, completed here)."""
    stats_parts = []
    gathered = Gathered(None, {}, {}, {}, set(), 0)
    for ti, task in enumerate(tasks):
        if ti not in read:  # (a chunk of an earlier run into this folder)
            read[ti], points_room = _held_part(_read_task(task, chunk_dir, recomputed), points_room)
        arrays = read[ti]
        # numbers only here (the task's index, its group ids): the key columns are decoded once, later
        stats_parts.append((ti, {k: v for k, v in arrays.items() if k.startswith("stats.")}))
        gathered.add(ti, task, variants, arrays)
    gathered.stats = _stack_tasks(stats_parts, "stats", GroupStats)
    return gathered


def _write_outputs(study: Study, out: Path, tasks, chunk_dir: Path, variants, comparisons,
                   aside=None, read=None, points_room: int = 0, recomputed: list | None = None) -> tuple[list, int]:
    """Assemble the tables from the task chunks (:func:`_gather`, :func:`write_gathered`); (unsupported,
    fallbacks).

    ``read``: the :func:`_held_part` of tasks already read, by task index; the others are read here and their
    parts added to it, their kept points while they fit in ``points_room`` more bytes (the chunks of the others
    are read again for their comparisons and points).
    """
    read = {} if read is None else read
    gathered = _gather(tasks, chunk_dir, variants, read, points_room, recomputed)
    write_gathered(study, out, tasks, variants, comparisons, gathered, aside, (chunk_dir, read))
    return sorted(gathered.unsupported), gathered.fallback


def write_gathered(study: Study, out: Path, tasks, variants, comparisons, gathered: Gathered, aside=None,
                   chunks=None, paired: PairedStats | None = None) -> None:
    """Write every table of a run from its :class:`Gathered` statistics.

    ``tasks``: the run's tasks (for a streamed run, one per block's task index: their keys, not their preds,
    are read); the comparisons and kept points come from ``chunks`` (the chunk folder and the tasks' held
    parts: the chunks are read again for them) or, stacked already, from ``paired`` (the kept points then
    written already).

    The fine groups' table, the comparisons' tables and the kept points (:func:`_write_aside`) are written by
    ``aside`` (a function that runs a call and returns its future: :func:`precision.engine.executor.fork_aside`,
    in a process of its own, which holds the stacked statistics and the held parts by the fork) while this
    process writes the coarser group tables and the fine groups' raw statistics; by this process after them
    without it.
    """
    region_names = study.regions
    band_names = get_operator(study.operator).band_labels(study.bracket_edges)  # ["all"] without bands
    bands = len(band_names) > 1
    names = np.asarray(variants, dtype=object)
    bracket = ["bracket"] if bands else []
    fine_keys = list(group_keys(get_operator(study.operator))) + bracket
    context = _TaskColumns(tasks, region_names, band_names)
    stats = context.decoded(gathered.stats, {"variant": names[gathered.stats.frame["variant"].to_numpy(np.int64)]},
                            ("witness_", "finite_witness_", *ACCEPTANCE_MAXIMA.values()), ["group", "task"], fine_keys)
    # (the key columns of both raw tables, and the decoder of their rows: one for the groups and the pairs)
    layout = (fine_keys, list(pair_keys(get_operator(study.operator))) + bracket, context, region_names, band_names)
    # (every chunk read, a damaged one recomputed, before another process reads them)
    side = None if aside is None else aside(_write_aside, study, out, tasks, chunks, variants, comparisons, stats,
                                            layout, paired)
    try:
        # the fine groups' raw sums and histograms, for re-merging by reports and the gate, are written while the
        # tables are merged (hashing and writing them, 110 MB for fp16_exhaustive, release the interpreter's lock)
        with ThreadPoolExecutor(1) as background:
            raw_written = background.submit(_write_raw, out, stats)
            _write_tables(study, out, stats, variants, region_names, band_names, gathered.predbins)
            _atomic_csv(out / "extents.csv", extents_table(tasks, variants, study.machines, gathered))
            raw_written.result()
    finally:
        if side is not None:  # (its files are in place before the caller removes the folder on a failure)
            wait([side])
    if side is None:
        _write_aside(study, out, tasks, chunks, variants, comparisons, stats, layout, paired)
    else:
        side.result()


def extents_table(tasks, variants, machines, gathered: Gathered) -> pd.DataFrame:
    """``extents.csv``: per (variant, machine, format, profile, attributes, weight, dout, target) and error
    level (``level_ulp``, :data:`~precision.engine.task.EXTENT_LEVELS`): ``over``, the outputs more than that
    many ulp off (specials included), and ``first_pred`` / ``last_pred``, the smallest and the largest pred of
    one of them (hex; empty when none is): the hole's extent (on a streamed set, every value of the format
    between them was evaluated)."""
    rows = []
    for ti in sorted(gathered.extent):
        task, extent, count = tasks[ti], gathered.extent[ti], gathered.extent_count[ti]
        keys = {"machine": task.machine, "format": task.profile.pred, "profile": task.profile.name,
                **{name: float(v) for name, v in task.attributes},
                "weight": np.nan if task.weight is None else float(task.weight), "dout": float(task.dout)}
        for vi, v in enumerate(variants):
            if (v, task.profile.name) in gathered.unsupported:
                continue
            for j, t in enumerate(task.targets):
                for k, level in enumerate(EXTENT_LEVELS):
                    rows.append({"variant": v, **keys, "target": t, "level_ulp": level, "over": int(count[vi, j, k]),
                                 "first_pred": extent[vi, j, k, 0], "last_pred": extent[vi, j, k, 1]})
    frame = sort_table(pd.DataFrame(rows), variants, machines) if rows else pd.DataFrame(
        columns=["variant", "machine", "format", "profile", "target", "level_ulp", "over", "first_pred", "last_pred"])
    for col in ("first_pred", "last_pred"):
        values = frame[col].to_numpy(np.float64)
        frame[col] = np.where(np.isnan(values), "", hex_floats(values))
    return frame


def _write_aside(study: Study, out: Path, tasks, chunks, variants, comparisons, stats, layout,
                 paired: PairedStats | None) -> None:
    """What a process aside writes while the run's process writes the coarser group tables and the fine
    groups' raw statistics: the fine groups' table, the comparisons' tables and (from ``chunks``) the kept
    points."""
    fine_keys, paired_keys, context, region_names, band_names = layout
    _write_fine_table(study, out, stats, variants, fine_keys, region_names, band_names)
    if paired is None:
        chunk_dir, read = chunks
        paired = _paired_and_points(out, tasks, chunk_dir, variants, read)
    _write_paired(study, out, paired, variants, comparisons, context, paired_keys)


def _paired_and_points(out: Path, tasks, chunk_dir: Path, variants, read: dict) -> PairedStats:
    """The comparisons of the task chunks, stacked with their task index, and ``points.parquet`` written
    from them: their parts held in ``read`` (:func:`_held_part`, by task index), the others read here (this
    may run in a process of its own, :func:`write_gathered`)."""
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
    return _stack_tasks(paired_parts, "paired", PairedStats)


def _write_paired(study: Study, out: Path, paired: PairedStats, variants, comparisons, context: "_TaskColumns",
                  paired_keys: list) -> None:
    """``comparisons.csv``, ``paired_raw.parquet`` and ``paired_hist.npz`` from the stacked comparisons (rows
    with a task index, decoded by ``context``, keyed by ``paired_keys``)."""
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


def make_output_folder(out: Path) -> Path:
    """Create the run folder ``out`` and its ``chunks`` folder (returned), and check that both can be written:
    a one-line :class:`~precision.errors.PrecisionError` before any work otherwise."""
    chunk_dir = out / "chunks"
    try:
        chunk_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise PrecisionError(f"--out={out}: cannot create the output folder ({exc.strerror})") from None
    if not os.access(out, os.W_OK):
        raise PrecisionError(f"--out={out}: the output folder is not writable")
    return chunk_dir


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


def write_run_json(study: Study, out: Path, result: RunResult) -> None:
    op = get_operator(study.operator)
    versions = {}
    for pkg in ("precision", "numpy", "mpmath", "gmpy2", "pandas", "ml_dtypes"):
        with contextlib.suppress(md.PackageNotFoundError):
            versions[pkg] = md.version(pkg)
    data = {
        "study": study.name, "study_file": study.path, "study_sha256": study.digest, "seed": study.seed,
        "operator": study.operator, "oracle_version": op.ORACLE_VERSION, "code_sha256": code_digest(),
        "python": platform.python_version(),
        "versions": versions, "machines": list(study.machines), "variants": list(study_variants(study)),
        "region_edges": list(study.region_edges), "regions": study.regions, "separate": list(study.separate),
        "bracket_edges": list(study.bracket_edges), "brackets": op.band_labels(study.bracket_edges),
        "report": None if study.report is None else {
            "sections": list(study.report.sections),
            "options": {name: {k: (list(v) if isinstance(v, tuple) else v) for k, v in opts}
                        for name, opts in study.report.options}},
        # the grid of values every claim of the run is measured on (report: "on the grid ...")
        "grid": study.grid(),
        "pred_sets": [{"kind": p.kind, "format": p.format, "weighting": p.label,
                       **{k: (list(v) if isinstance(v, tuple) else v) for k, v in p.params if k != "values"}}
                      for p in study.pred_sets],
        **{k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(result).items()
           if k not in ("seconds", "workers", "notes")},
    }
    tmp = out / "run.json.tmp"
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, out / "run.json")
