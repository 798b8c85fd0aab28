"""One task of a sweep: every variant on one tensor, scored and aggregated, each result content-addressed.

A :class:`Task` is the tensor pred[P] x target[T] (every pred value of the
study that its profile's format holds, every selector) for one (machine,
profile, value of each of the operator's attributes, weight, dout).  :func:`run_task` evaluates its
variants together (:func:`precision.operators.sigmoid_focal_loss_grad.guards.evaluate_variants`: each step of
a shared recipe once per distinct configuration), scores them against the
exact values derived from the oracle's focal terms, and aggregates per fine
group (selector, region, bracket band) with :mod:`precision.analysis.scoring`.

The result is assembled from pieces, all of a task's pieces in one bundle of
the :class:`~precision.engine.cache.ResultCache` (one read and at most one write per
task), each piece under a key made of what determines it:

* a **variant piece** (its :class:`~precision.analysis.groups.GroupStats` rows, the
  kept per-point rows, its max error per pred bin): the task's inputs
  (:func:`task_digest`), the machine, the variant's name and the digest of
  its implementation's source and every module of the package it imports
  (:func:`variant_digest`);
* a **pair piece** (the :class:`~precision.analysis.paired.PairedStats` rows of one
  comparison): the task's inputs, the machine and both variants' names and
  digests.

Every key also holds :func:`shared_digest` (the scoring, the exact values,
the recipe machinery and this module) and the oracle and layout versions.
So a run into a new folder reuses every piece whose inputs and code have not
changed; editing ``implementations/candidate.py`` reruns ``candidate`` (and
the comparisons it takes part in, which evaluate their other variant
again); editing ``machine/`` reruns everything.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import inspect
import itertools
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from precision.layout import moved_name
from precision.engine.cache import RESULTS_VERSION, ResultCache, atomic_write_npz, read_checked_npz
from precision.errors import PluginError, PrecisionError
from precision.exact.formats import get_format, round_to_format
from precision.exact.terms import TermTable
from precision.io.frames import frame_from_arrays, frame_to_arrays, stack_arrays
from precision.analysis.acceptance import standards_golden
from precision.analysis.groups import GroupStats, Grouping, packed_histogram
from precision.analysis.msprobe import bench_in_format
from precision.analysis.paired import PairedStats
from precision.analysis.scoring import COMPILED_MIN_POINTS, Scorer
from precision.engine.operators import get_operator
from precision.engine.study import WORST_PER_GROUP, Profile, Study
from precision.recipes.target_kinds import target_kind

__all__ = ["Task", "TaskResult", "build_tasks", "task_key", "run_task", "run_tasks", "machine_siblings", "share_terms", "task_terms",
           "exact_input", "PRED_BIN_EDGES", "EXTENT_LEVELS", "hole_extents", "variant_digest", "shared_digest", "task_digest", "source_digest",
           "module_closure"]

#: Error levels (ulp) of the holes' extents: per variant and selector, the first and the last pred whose output
#: is more than this many ulp off (a special output counts as past every level).
EXTENT_LEVELS = (1.0, 2.0**10, 2.0**20)

#: Symmetric-log pred bins for the per-bin maxima (plots): 0, then +-2**k.
PRED_BIN_EDGES = np.concatenate([-np.exp2(np.arange(128, -25, -0.5)), [0.0], np.exp2(np.arange(-24, 128.5, 0.5))])

_PACKAGE = Path(__file__).resolve().parents[1]  # precision/
#: Modules every result depends on beyond a variant's own: the scoring, the recipe machinery, the exact
#: formats, this module; with the operator's own (its ``RESULT_SOURCES``: its exact values and the registry
#: that binds its variants to the recipes).
SHARED_SOURCES = ("engine/task.py", "analysis/scoring.py", "analysis/histograms.py", "analysis/acceptance.py",
                  "analysis/groups.py", "analysis/paired.py", "analysis/fused.py", "exact/formats.py",
                  "recipes/steps.py", "recipes/registry.py", "recipes/shared.py", "recipes/operands.py", "errors.py",
                  "exact/certify.py", "exact/double_double.py", "engine/cache.py", "exact/terms.py",
                  "exact/derive_pass.py", "exact/derivation_bounds.py")


# ---------------------------------------------------------------------------
# What determines a result
# ---------------------------------------------------------------------------

def _module_file(name: str) -> Path | None:
    """The source file of a module of the package (``precision.machine`` -> machine/__init__.py; a flat-layout
    name such as ``precision.oracle``, as an old plugin may import it, -> the module it became)."""
    parts = (moved_name(name) or name).split(".")
    if parts[0] != "precision":
        return None
    base = _PACKAGE.joinpath(*parts[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


@functools.lru_cache(maxsize=None)
def _imported_files(path: Path) -> tuple:
    """The files of the package's modules that one source file imports (its ``import`` statements)."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [_module_file(a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # from M import a: the submodule M.a when a is one, else M itself (its attribute a)
            found += [_module_file(f"{node.module}.{a.name}") or _module_file(node.module) for a in node.names]
    return tuple(f.resolve() for f in found if f is not None)


@functools.lru_cache(maxsize=None)
def module_closure(path: Path) -> frozenset:
    """The file and every module of the package it imports, transitively (from its ``import`` statements;
    each file parsed once per process, whichever closures it belongs to)."""
    seen, todo = set(), [Path(path).resolve()]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        todo += _imported_files(current)
    return frozenset(seen)


def _digest_files(paths) -> str:
    h = hashlib.sha256()
    for path in sorted(Path(p).resolve() for p in paths):
        rel = path.relative_to(_PACKAGE) if path.is_relative_to(_PACKAGE) else path
        h.update(str(rel).encode())
        h.update(_source_bytes(path))
    return h.hexdigest()


def _source_bytes(path: Path) -> bytes:
    """A source file's bytes (one place to read them, so tests can stand in an edited file)."""
    return Path(path).read_bytes()


@functools.lru_cache(maxsize=None)
def shared_digest(operator: str) -> str:
    """SHA-256 of :data:`SHARED_SOURCES` and the operator's ``RESULT_SOURCES``: the code every result depends on
    besides its variant's own."""
    op = get_operator(operator)
    package = Path(op.__file__).resolve().parent
    return _digest_files([*(_PACKAGE / name for name in SHARED_SOURCES),
                          *(package / name for name in op.RESULT_SOURCES)])


@functools.lru_cache(maxsize=None)
def variant_digest(name: str, operator: str) -> str:
    """SHA-256 of the source of a variant's implementation and every module of the package it imports.

    The implementation is the file defining the variant's function (a
    plugin's file for a plugin variant, see :attr:`precision.operators.sigmoid_focal_loss_grad.guards.Variant.source`
    when it is set).
    """
    row = get_operator(operator).get_variant(name)
    source = getattr(row, "source", None) or inspect.getsourcefile(row.function)
    return _closure_digest(Path(source).resolve())


def source_digest(function) -> str:
    """SHA-256 of the file defining ``function`` and every module of the package it imports (e.g. the code of
    an operator's run stage)."""
    return _closure_digest(Path(inspect.getsourcefile(function)).resolve())


@functools.lru_cache(maxsize=None)
def _closure_digest(path: Path) -> str:
    return _digest_files(module_closure(path))


def clear_digests() -> None:
    """Forget the digests computed so far (after source files change within one process)."""
    _imported_files.cache_clear()
    module_closure.cache_clear()
    shared_digest.cache_clear()
    variant_digest.cache_clear()
    _closure_digest.cache_clear()


# ---------------------------------------------------------------------------
# Tasks
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Task:
    """One tensor evaluation: every variant on pred x target for fixed scalars (picklable).

    ``operator`` is the operator's name (:func:`precision.engine.operators.get_operator`);
    ``attributes`` holds ``(name, value)`` of each of its attributes (its ``ATTRIBUTES``, in order);
    ``comparisons`` holds (with, without) index pairs into ``variants``;
    ``result_cache`` is the cache folder of the pieces (None: no cache);
    ``pos`` and ``neg`` hold the operator's exact-value terms at ``preds``
    and at their negations (its ``TermTable``s; SigmoidFocalLossGrad's focal
    terms A(x, gamma) and A(-x, gamma)), or are None when ``terms_file``
    names the file holding them (:func:`share_terms`: the tasks of one value
    of the terms attribute on this machine share one file instead of each
    carrying a copy to its worker);
    ``chunk_file``, when set, is where :func:`run_task` writes the task's
    result itself (a worker sharing the run folder's file system) instead of
    returning it; ``plugins`` are loaded first (a worker that did not fork
    from the run, e.g. Dask's).
    """

    key: str
    operator: str
    machine: str
    profile: Profile
    attributes: tuple
    weight: float | None
    dout: float
    reduction: str
    count: int
    targets: tuple
    variants: tuple
    region_edges: tuple
    per_point: str
    preds: np.ndarray
    pos: object | None  # the operator's TermTable
    neg: object | None
    bracket_edges: tuple = ()
    comparisons: tuple = ()
    result_cache: str | None = None
    chunk_file: str | None = None
    plugins: tuple = ()  # (path, digest) of each plugin file its variants need (precision.operators.sigmoid_focal_loss_grad.plugins)
    golden: str = "exact"  # the acceptance standards' golden: the exact value, or its rounding to the format
    terms_file: str | None = None  # where pos and neg are when they are None (share_terms)

    @property
    def attribute_values(self) -> dict:
        """{attribute name: value} of the task (its operator's ``ATTRIBUTES``, in order)."""
        return dict(self.attributes)

    @property
    def term(self) -> float | None:
        """The task's value of its operator's terms attribute (``TERMS_ATTRIBUTE``; None when it has none)."""
        name = get_operator(self.operator).TERMS_ATTRIBUTE
        return None if name is None else self.attribute_values[name]


def share_terms(tasks: list, folder: Path) -> list:
    """The tasks with their focal terms moved into files of ``folder``, one per distinct pair of tables.

    The tasks of one value of the terms attribute and format hold the same terms (the same objects);
    each would otherwise carry its own copy to a worker process (4 MB per
    task of ``fp16_exhaustive``).  For workers sharing this file system.
    """
    out, written = [], {}
    for task in tasks:
        if task.pos is None:
            out.append(task)
            continue
        ident = (id(task.pos), id(task.neg))
        if ident not in written:
            path = folder / f"terms-{uuid.uuid4().hex}.safetensors"  # unique: a path is read once per process
            atomic_write_npz(path, {f"{side}.{column}": values for side, table in (("pos", task.pos), ("neg", task.neg))
                                    for column, values in table.as_arrays().items()}, durable=False)
            written[ident] = str(path)
        out.append(dataclasses.replace(task, pos=None, neg=None, terms_file=written[ident]))
    return out


@functools.lru_cache(maxsize=2)
def _read_terms(path: str, operator: str) -> tuple:
    arrays = read_checked_npz(Path(path))
    if arrays is None:
        raise PrecisionError(f"{path}: the exact-value terms of a running study are missing or corrupt; run it again")
    return tuple(TermTable.from_arrays({name.partition(".")[2]: values for name, values in arrays.items()
                                    if name.startswith(f"{side}.")}) for side in ("pos", "neg"))


def task_terms(task: Task) -> tuple:
    """(pos, neg): the task's exact-value terms, read from its ``terms_file`` when it does not carry them."""
    if task.pos is not None:
        return task.pos, task.neg
    return _read_terms(task.terms_file, task.operator)


def task_digest(task: Task) -> str:
    """SHA-256 of a task's inputs (not its variants): the points, the scalars, the grouping, the code shared by
    every result, the oracle and layout versions."""
    h = hashlib.sha256()
    h.update(np.ascontiguousarray(task.preds, dtype=np.float64).tobytes())
    h.update(json.dumps(dict(profile=task.profile.name, **{name: float(v).hex() for name, v in task.attributes},
                             weight=None if task.weight is None else float(task.weight).hex(),
                             dout=float(task.dout).hex(), reduction=task.reduction, count=task.count,
                             targets=list(task.targets), regions=[float(e).hex() for e in task.region_edges],
                             brackets=[float(e).hex() for e in task.bracket_edges], per_point=task.per_point,
                             golden=task.golden, operator=task.operator,
                             oracle=get_operator(task.operator).ORACLE_VERSION, layout=RESULTS_VERSION,
                             shared=shared_digest(task.operator)),
                        sort_keys=True).encode())
    return h.hexdigest()


def task_key(task: Task) -> str:
    """The chunk file's name: the task's inputs, machine, variants with their source digests, comparisons."""
    h = hashlib.sha256()
    h.update(json.dumps(dict(inputs=task_digest(task), machine=task.machine,
                             variants=[(v, variant_digest(v, task.operator)) for v in task.variants],
                             comparisons=[list(c) for c in task.comparisons]), sort_keys=True).encode())
    return h.hexdigest()[:32]


def build_tasks(study: Study, preds_by_term: dict, terms, variants, comparisons, result_cache) -> list:
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
                            tasks.append(dataclasses.replace(task, key=task_key(task)))
    return tasks


def _key(*parts) -> str:
    return hashlib.sha256("\0".join(str(p) for p in parts).encode()).hexdigest()


def exact_input(value: float, fmt: str) -> float:
    """The value a tensor of format fmt holds for a study value (RNE)."""
    return float(round_to_format(value, fmt))


@dataclass
class TaskResult:
    """What one task produces: group statistics per variant, paired counts per comparison, kept points.

    ``stats`` has key columns ``variant`` (index into the task's variants)
    and ``group`` (the task's group id); ``paired`` has ``comparison``
    (index into the task's comparisons) and ``group``.  ``points`` holds the
    kept per-point rows (numeric columns: ``variant``, ``index`` into the
    flattened pred x target tensor, ``computed``, ``err_ulp``, ``err_bits``,
    ``class``, ``exact_hi``, ``exact_lo``, ``rounded``).  ``pred_max`` is the
    max ulp error per variant and symmetric-log pred bin (:data:`PRED_BIN_EDGES`); ``extent`` and
    ``extent_count`` the holes' extents per variant (:func:`hole_extents`: [V, T, L, 2] and [V, T, L]).
    ``reused`` counts the pieces taken from the result cache, ``computed_pieces``
    those computed.
    """

    stats: GroupStats
    paired: PairedStats
    points: pd.DataFrame
    pred_max: np.ndarray
    fallback: int
    unsupported: np.ndarray
    extent: np.ndarray
    extent_count: np.ndarray
    reused: int = 0
    computed_pieces: int = 0

    def to_arrays(self) -> dict:
        """npz-storable arrays (the chunk file of a finished task)."""
        return {**self.stats.to_arrays("stats"), **self.paired.to_arrays("paired"),
                **frame_to_arrays(self.points[list(_POINT_COLUMNS)], "points"),
                "pred_max": self.pred_max, "extent": self.extent, "extent_count": self.extent_count,
                "fallback": np.array(self.fallback),
                "unsupported": np.asarray(self.unsupported, dtype=np.int16), "reused": np.array(self.reused),
                "computed_pieces": np.array(self.computed_pieces)}

    @classmethod
    def from_arrays(cls, arrays: dict) -> "TaskResult":
        return cls(GroupStats.from_arrays(arrays, "stats"), PairedStats.from_arrays(arrays, "paired"),
                   frame_from_arrays(arrays, "points"), arrays["pred_max"],
                   int(arrays["fallback"]), arrays["unsupported"], arrays["extent"], arrays["extent_count"],
                   int(arrays["reused"]),
                   int(arrays["computed_pieces"]))


_POINT_COLUMNS = ("variant", "index", "computed", "err_ulp", "err_bits", "class", "exact_hi", "exact_lo", "rounded")


def _kept_points(per_point: str, err, bits, grouping: Grouping) -> np.ndarray:
    """Indices of the per-point rows a task keeps (the study's ``per_point``)."""
    if per_point == "all":
        return np.arange(err.size)
    if per_point == "incorrect":
        return np.flatnonzero(bits > 0)
    if per_point == "over_1ulp":
        return np.flatnonzero(~(err <= 1.0))
    if per_point == "worst":
        # the WORST_PER_GROUP largest errors of each group (ties: first in element order)
        return grouping.top_k(err, WORST_PER_GROUP)
    return np.empty(0, dtype=np.int64)


# ---------------------------------------------------------------------------
# Evaluating and scoring
# ---------------------------------------------------------------------------

class _Tensor:
    """The task's operands, exact values and groups (built only when some piece must be computed)."""

    def __init__(self, task: Task):
        op = get_operator(task.operator)
        self.fmt = fmt = get_format(task.profile.pred)
        P, T = task.preds.size, len(task.targets)
        self.P, self.T = P, T
        self.pred2d = np.repeat(task.preds.astype(fmt.dtype)[:, None], T, axis=1)
        self.target2d = np.broadcast_to(target_kind(op).array(task.targets, fmt.dtype), (P, T)).copy()
        dout_exact = exact_input(task.dout, task.profile.dout)
        self.dout2d = np.full((P, T), dout_exact, dtype=get_format(task.profile.dout).dtype)
        if task.weight is None:
            weight_exact, self.weight2d = 1.0, None
        else:
            weight_exact = exact_input(task.weight, task.profile.weight)
            self.weight2d = np.full((P, T), weight_exact, dtype=get_format(task.profile.weight).dtype)
        self.count = task.count if task.reduction == "mean" else 1
        rounded = np.empty((P, T), dtype=fmt.dtype)
        exact_hi, exact_lo = np.empty((P, T)), np.empty((P, T))
        self.fallback = 0
        terms = task_terms(task)
        attributes = [np.full(P, v) for _, v in task.attributes]
        for j, t in enumerate(task.targets):
            n = np.full(P, 1.0)
            d = op.derive_exact(task.preds, np.full(P, t), *attributes, n * weight_exact, n * dout_exact,
                                   np.full(P, self.count, dtype=np.int64), fmt, *terms)
            rounded[:, j], exact_hi[:, j], exact_lo[:, j] = d.rounded, d.exact_hi, d.exact_lo
            self.fallback += d.fallback
        self.exact = (exact_hi.ravel(), exact_lo.ravel())
        self.rounded = rounded.ravel()
        self.scorer = Scorer(self.exact, self.rounded, fmt)
        # the acceptance standards' golden: the exact value (a correctly rounded overflow as its +-inf), or its
        # correct rounding (msprobe's bench: that golden before its special values, float64, and as msprobe casts
        # it to the output format)
        self.bench = self.exact[0] if task.golden == "exact" else self.scorer.r64
        self.golden = standards_golden(self.bench, self.scorer.r64)
        self.bench_cast = bench_in_format(self.bench, fmt)
        # group id per element: (target, region, bracket band), target-major; one band without bracket_edges
        R, B = len(task.region_edges) + 1, len(task.bracket_edges) + 1
        regions = np.searchsorted(np.asarray(task.region_edges), task.preds, side="right")
        group = (np.arange(T)[None, :] * R + regions[:, None]) * B
        if B > 1:
            group = group + op.bracket_band(task.preds[:, None], np.asarray(task.targets)[None, :], task.term,
                                            task.bracket_edges)
        self.grouping = Grouping(group.ravel(), T * R * B)
        self.flat_preds = np.repeat(task.preds, T)
        # the pred-bin segments of the (ascending) preds, for the per-bin maxima
        pred_bin = np.clip(np.searchsorted(PRED_BIN_EDGES, task.preds, side="right") - 1, 0, PRED_BIN_EDGES.size - 2)
        order = np.argsort(pred_bin, kind="stable")
        self.bin_order = order
        self.bin_ids, self.bin_starts = np.unique(pred_bin[order], return_index=True)
        self.unchanged_pair = None  # the pair piece of two variants with the same outputs (_pair_piece)
        self.paired = {}  # the pair pieces of two distinct outputs, by their numbers (_pair_piece)
        # the outputs scored on these points, on any machine (_variant_piece's ``seen``): a piece depends on the
        # outputs, the exact values and the groups only, so a machine's outputs equal to another's reuse its
        # piece (their decision counts their own), and a machine's outputs near another's are reduced where they
        # differ only
        self.scored = {}


def _fired(task: Task, tensor: _Tensor, variant: str, steps: dict) -> dict:
    """The per-point masks of where each guard of ``variant`` acted (all false for a guard it lacks)."""
    return get_operator(task.operator).variant_fired(variant, steps, task.machine, task.attribute_values,
                                                     tensor.P * tensor.T)


def _variant_piece(task: Task, tensor: _Tensor, computed: np.ndarray, fired: dict,
                   seen: dict) -> tuple[dict, tuple]:
    """(the stored arrays of one variant's piece, its per-point scores for comparisons).

    ``seen`` holds the outputs already scored on this task's points (any machine), with their
    (piece, scores), by a key of their bits: a variant whose outputs
    equal another's bit for bit (``naive+G1`` and ``naive``, most guards
    where they do not engage) reuses them, only its decision counts computed
    afresh.  The scores start with the outputs' number among the distinct
    ones of the task (equal numbers, equal outputs).
    """
    fmt, grouping = tensor.fmt, tensor.grouping
    computed = np.asarray(computed, dtype=fmt.dtype).ravel()
    raw = computed.view(fmt.uint_dtype)
    key = hash(raw[::_KEY_STRIDE].tobytes())  # (equal outputs, equal samples; then compared in full)
    same = next((s for s in seen.get(key, ()) if np.array_equal(s[1][1], raw)), None)
    if same is not None:  # the same outputs: the same statistics, but this variant's own decision counts
        piece, scores = same
        values = _with_decisions(piece, piece["stats.values"].copy(), grouping.tally(fired))
        return {**piece, "stats.values": values}, scores
    c64 = computed.astype(np.float64)
    err, bits, cls = tensor.scorer.score(computed, c64)
    # only the groups where these outputs differ from the nearest ones already scored are reduced; the others'
    # rows are those outputs' (a group's figures depend on its points only, its decision counts aside): most
    # variants of a task differ from another in a few regions
    near = _nearest_scored(seen, raw, grouping) if err.size >= COMPILED_MIN_POINTS else None
    if near is not None and near.points > PATCH_MAX_SHARE * err.size:
        near = None
    reduced = grouping if near is None else grouping.restricted(near.rows)
    stats = GroupStats.reduce_to_arrays(reduced, err, bits, cls, "stats", counts=fired,
                                        witness={"pred": tensor.flat_preds, "computed": c64, "exact": tensor.exact[0]},
                                        acceptance=(c64, tensor.golden, fmt, tensor.bench, tensor.bench_cast))
    if near is not None:
        stats = _patched_stats(near.piece, stats, near.rows, grouping.tally(fired))
    worst = np.where(np.isnan(err), np.inf, err)  # (NaN as inf: what the maxima read)
    per_point = worst.reshape(tensor.P, tensor.T)
    per_pred = per_point[:, 0].copy()
    for j in range(1, tensor.T):  # (a max over the short axis 1 costs ten times more)
        np.maximum(per_pred, per_point[:, j], out=per_pred)
    pred_max = np.full(PRED_BIN_EDGES.size - 1, np.nan, dtype=np.float32)
    with np.errstate(over="ignore"):
        pred_max[tensor.bin_ids] = np.maximum.reduceat(per_pred[tensor.bin_order], tensor.bin_starts)
    if near is not None and task.per_point == "worst":  # the nearest outputs' worst points where nothing changed
        held = _points_index(near.piece)
        idx = np.union1d(held[~near.changed[grouping.group[held]]], reduced.top_k(err, WORST_PER_GROUP))
    else:
        idx = _kept_points(task.per_point, err, bits, grouping)
    points = {"index": idx.astype(np.int64), "computed": c64[idx], "err_ulp": err[idx], "err_bits": bits[idx],
              "class": cls[idx], "exact_hi": tensor.exact[0][idx], "exact_lo": tensor.exact[1][idx],
              "rounded": tensor.rounded[idx].astype(np.float64)}
    first_last, over = hole_extents(task.preds, per_point)
    piece = {**stats, **frame_to_arrays(points, "points"), "pred_max": pred_max, "extent": first_last,
             "extent_count": over, "unsupported": np.array(0)}
    number = sum(len(held) for held in seen.values())
    scored = piece, (number, raw, np.isnan(computed), err, cls)
    seen.setdefault(key, []).append(scored)
    return scored


def hole_extents(preds: np.ndarray, worst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first and last pred, count) of the outputs past each of :data:`EXTENT_LEVELS`, per selector.

    ``preds``: the task's preds, ascending; ``worst``: errors [P, T] in ulp, NaN read as inf (a special output
    is past every level).  Returns float64 [T, L, 2] (NaN where no output passes a level) and int64 [T, L].
    """
    T, L = worst.shape[1], len(EXTENT_LEVELS)
    first_last = np.full((T, L, 2), np.nan)
    over = np.zeros((T, L), dtype=np.int64)
    for j in range(T):
        column = worst[:, j]
        for k, level in enumerate(EXTENT_LEVELS):
            where = np.flatnonzero(column > level)
            over[j, k] = where.size
            if where.size:
                first_last[j, k] = preds[where[0]], preds[where[-1]]
    return first_last, over


#: Every how many elements a task's outputs are sampled for the key that finds equal outputs (a key, not a proof:
#: outputs with equal keys are compared in full).
_KEY_STRIDE = 61


#: A task's outputs whose differences from outputs it has already scored fall in groups holding at most this
#: share of its points are reduced in those groups only (:func:`_variant_piece`).
PATCH_MAX_SHARE = 0.6


class _Nearest(NamedTuple):
    """An output already scored and where another differs from it."""

    points: int  # the points of the groups holding a difference
    piece: dict  # its piece
    rows: np.ndarray  # those groups' positions in the grouping's ids
    changed: np.ndarray  # bool over every group id: those groups


def _nearest_scored(seen: dict, raw: np.ndarray, grouping: Grouping) -> "_Nearest | None":
    """Of the outputs in ``seen`` (:func:`_variant_piece`), the one differing from ``raw`` (bits) in the fewest
    elements (counted on every 16th), and where it differs; None when ``seen`` is empty."""
    nearest, fewest = None, None
    for held in seen.values():
        for piece, scores in held:
            n = int(np.count_nonzero(scores[1][::16] != raw[::16]))
            if fewest is None or n < fewest:
                nearest, fewest = (piece, scores[1]), n
    if nearest is None:
        return None
    changed = np.zeros(grouping.n_groups, dtype=bool)
    changed[grouping.group[np.flatnonzero(nearest[1] != raw)]] = True
    rows = np.flatnonzero(changed[grouping.ids])
    return _Nearest(int(grouping.counts[rows].sum()), nearest[0], rows, changed)


def _patched_stats(piece: dict, part: dict, rows: np.ndarray, decisions: dict) -> dict:
    """The ``stats.*`` arrays of ``piece`` with the groups at ``rows`` replaced by ``part``'s (those groups'
    reduction, rows in the same order) and the decision counts ``decisions`` (every group's) written in."""
    stats = {k: v for k, v in piece.items() if k.startswith("stats.")}
    if any(not np.array_equal(stats[f"stats.{k}"], part[f"stats.{k}"]) for k in ("columns", "dtypes", "order")) \
            or any(k.startswith("stats.text.") for k in part):  # (one reduction's columns: not met)
        raise ValueError("_patched_stats: the two reductions' columns differ")
    values = stats["stats.values"].copy()
    values[rows] = part["stats.values"]
    values = _with_decisions(stats, values, decisions)
    held, new = stats["stats.hist"].astype(np.int64), part["stats.hist"].astype(np.int64)
    held = held[:, ~np.isin(held[0], rows)]
    new = np.stack([rows[new[0]], new[1], new[2]]) if new.shape[1] else new.reshape(3, 0)
    both = np.concatenate([held, new], axis=1)
    both = both[:, np.argsort(both[0], kind="stable")]  # (row, bin) order: each row's entries from one side
    return {**stats, "stats.values": values, "stats.hist": packed_histogram(both)}


def _with_decisions(piece: dict, values: np.ndarray, decisions: dict) -> np.ndarray:
    """``values`` (rows of ``piece``'s ``stats.*`` columns; written in place) with the decision counts
    ``decisions`` (name -> one count per group) written in."""
    names = piece["stats.columns"].tolist()
    for column, counts in decisions.items():
        values[:, names.index(column)] = counts
    return values


def _points_index(piece: dict) -> np.ndarray:
    """The flat indices of a piece's kept points."""
    return piece["points.values"][:, list(piece["points.columns"]).index("index")].astype(np.int64)


def _pair_piece(tensor: _Tensor, with_scores, without_scores) -> dict:
    """The stored arrays of one comparison's piece, from both variants' per-point scores.

    Outputs equal bit for bit (the same number among the task's distinct
    outputs, or no element that differs other than in a NaN payload) give
    the piece of no change, computed once per task: most guard pairs change
    nothing on most tasks.  Two distinct outputs compared once on these
    points (by another comparison, or on another machine) give that piece
    again: it depends on the two outputs' scores only.
    """
    same_w, raw_w, nan_w, err_w, cls_w = with_scores
    same_o, raw_o, nan_o, err_o, cls_o = without_scores
    if (same_w, same_o) in tensor.paired:
        return dict(tensor.paired[same_w, same_o])
    changed = None if same_w == same_o else (raw_w != raw_o) & ~(nan_w & nan_o)
    if changed is not None and changed.any():
        piece = PairedStats.compare_to_arrays(tensor.grouping, err_w, cls_w, err_o, cls_o, changed, "paired",
                                              witness={"pred": tensor.flat_preds})
        tensor.paired[same_w, same_o] = piece
        return dict(piece)
    if tensor.unchanged_pair is None:
        tensor.unchanged_pair = PairedStats.compare_to_arrays(
            tensor.grouping, err_w, cls_w, err_o, cls_o, np.zeros(err_w.size, dtype=bool), "paired",
            witness={"pred": tensor.flat_preds})
    return dict(tensor.unchanged_pair)


_UNSUPPORTED = {"unsupported": np.array(1)}


def run_tasks(tasks) -> list:
    """:func:`run_task` on each of ``tasks``, which differ in their machine only (one point set, as
    :func:`machine_siblings` groups them): the operands, exact values and groups are built once, by the first
    task that computes a piece, and serve the others (none of it depends on the machine)."""
    shared = {}

    def tensor_of(task):
        if "tensor" not in shared:
            shared["tensor"] = _Tensor(task)
        return shared["tensor"]
    return [run_task(task, tensor_of) for task in tasks]


def machine_siblings(tasks) -> list:
    """Indices of ``tasks`` grouped by point set: the tasks of one (profile, attribute values, weight, dout)
    on every machine, in their order; the groups in the order of their first task."""
    groups = {}
    for i, task in enumerate(tasks):
        groups.setdefault((task.operator, task.profile, task.attributes, task.weight, task.dout), []).append(i)
    return list(groups.values())


def run_task(task: Task, tensor_of=None) -> dict:
    """Evaluate, score and aggregate one task, reusing stored pieces.

    Returns the npz-storable arrays of its :class:`TaskResult`, or, when the
    task names a ``chunk_file``, writes them there (atomically) and returns
    only the counts ``reused`` and ``computed_pieces``.  ``tensor_of(task)``,
    when given, supplies the task's :class:`_Tensor` (shared by :func:`run_tasks`).
    """
    op = get_operator(task.operator)
    op.ensure_loaded([p for p, _ in task.plugins], dict(task.plugins))
    cache = ResultCache(task.result_cache, create=False)
    base = task_digest(task)
    digests = [variant_digest(v, task.operator) for v in task.variants]
    vkeys = [_key("variant", base, task.machine, v, d) for v, d in zip(task.variants, digests)]
    pkeys = [_key("pair", base, task.machine, task.variants[w], digests[w], task.variants[o], digests[o])
             for w, o in task.comparisons]
    bundle_key = _key("task", base, task.machine)
    bundle = cache.get_bundle(bundle_key)  # every piece stored for this task, by piece key
    pieces = {i: bundle.get(k) for i, k in enumerate(vkeys)}
    pairs = {i: bundle.get(k) for i, k in enumerate(pkeys)}
    reused = sum(p is not None for p in pieces.values()) + sum(p is not None for p in pairs.values())
    need = {i for i, p in pieces.items() if p is None}
    for ci, (w, o) in enumerate(task.comparisons):
        if pairs[ci] is None:
            need |= {w, o}
    fallback = 0
    computed_pieces = 0
    if need:
        tensor = _Tensor(task) if tensor_of is None else tensor_of(task)
        fallback = tensor.fallback
        names = [task.variants[i] for i in sorted(need)]
        kwargs = {"count": tensor.count} if task.reduction == "mean" else {}
        # the guards' decision steps, kept where the operator tracks them (evaluate_variants then returns them too)
        kept = tuple(op.FIRED_STEPS)
        evaluated = op.evaluate_variants(names, tensor.pred2d, tensor.target2d, tensor.dout2d, tensor.weight2d,
                                         **task.attribute_values, reduction=task.reduction, machine=task.machine,
                                         keep_steps=kept, **kwargs)
        outputs, decided = evaluated if kept else (evaluated, {name: {} for name in names})
        scores, seen = {}, tensor.scored
        for i in sorted(need):
            out = outputs[task.variants[i]]
            if isinstance(out, PluginError):  # a plugin that breaks mid-run stops the run: never a silent gap
                raise out
            if isinstance(out, PrecisionError):  # e.g. an fp16-only variant on an fp32 profile
                piece = _UNSUPPORTED
            else:
                fired = _fired(task, tensor, task.variants[i], decided[task.variants[i]])
                piece, scores[i] = _variant_piece(task, tensor, out, fired, seen)
            if pieces[i] is None:
                pieces[i] = bundle[vkeys[i]] = piece
                computed_pieces += 1
        for ci, (w, o) in enumerate(task.comparisons):
            if pairs[ci] is None and w in scores and o in scores:
                pairs[ci] = bundle[pkeys[ci]] = _pair_piece(tensor, scores[w], scores[o])
                computed_pieces += 1
        if computed_pieces:
            cache.put_bundle(bundle_key, bundle)  # one write: the pieces found and the new ones
    arrays = _assemble(task, pieces, pairs, fallback, reused, computed_pieces)
    if task.chunk_file is None:
        return arrays
    atomic_write_npz(Path(task.chunk_file), arrays, durable=False)
    return {"reused": arrays["reused"], "computed_pieces": arrays["computed_pieces"]}


def _assemble(task: Task, pieces: dict, pairs: dict, fallback: int, reused: int, computed: int) -> dict:
    """The task's result (the arrays of its :class:`TaskResult`) from its variant and pair pieces, in the
    task's variant and comparison order; stacked as packed arrays, no frame built."""
    supported = [i for i in range(len(task.variants)) if not int(pieces[i]["unsupported"])]
    pred_max = np.full((len(task.variants), PRED_BIN_EDGES.size - 1), np.nan, dtype=np.float32)
    extent = np.full((len(task.variants), len(task.targets), len(EXTENT_LEVELS), 2), np.nan)
    extent_count = np.zeros(extent.shape[:3], dtype=np.int64)
    for i in supported:
        pred_max[i] = pieces[i]["pred_max"]
        extent[i], extent_count[i] = pieces[i]["extent"], pieces[i]["extent_count"]
    compared = [ci for ci in range(len(task.comparisons)) if pairs[ci] is not None]
    points = stack_arrays([pieces[i] for i in supported], "points", "variant", supported)
    if not supported:  # every variant unsupported here: no kept rows, with the columns they would have
        points = frame_to_arrays(pd.DataFrame({c: np.empty(0) for c in _POINT_COLUMNS}), "points")
    return {**stack_arrays([pieces[i] for i in supported], "stats", "variant", supported, hist=True),
            **stack_arrays([pairs[ci] for ci in compared], "paired", "comparison", compared, hist=True),
            **points, "pred_max": pred_max, "extent": extent, "extent_count": extent_count,
            "fallback": np.array(fallback),
            "unsupported": np.asarray([i for i in range(len(task.variants)) if i not in supported], dtype=np.int16),
            "reused": np.array(reused), "computed_pieces": np.array(computed)}
