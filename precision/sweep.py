"""Sweeps: a study's points through the oracle, every variant and the scoring.

The pipeline (one direction, as in DESIGN.md)::

    study -> pred values -> focal terms A(x, g), A(-x, g) (cache, else computed in chunks)
          -> tasks, one per (model, profile, alpha, gamma, weight, dout):
             the tensor pred[P, T] x target[P, T], every variant evaluated on it,
             the exact values derived from the terms, scored and aggregated
          -> tables (pandas) and per-point rows (Parquet) in the output folder

A task's tensor is the whole (pred x target) grid of the study, so the
results of tile-level guards (G4) depend on the study, never on the chunking
or the executor.  Finished tasks are written atomically to
``OUT/chunks/<key>.npz`` (key: SHA-256 of the task, the study and the
package's source), so an interrupted run (Ctrl-C, kill -9) resumes without
redoing them and ends with identical tables.

Output folder (``precision run`` default: ``out/<study name>``):

``summary.csv``
    One row per (variant, model, format, profile): ``count``, ``max_ulp``
    (inf when a result is NaN or inf), ``max_finite_ulp`` (the max over finite
    errors), the witness inputs of ``max_ulp`` in hex (``witness_pred``, ``witness_target``,
    ``witness_alpha``, ``witness_gamma``, ``witness_weight``,
    ``witness_dout``), ``mean_ulp`` (over finite errors), ``p50_ulp``,
    ``p99_ulp``, ``p999_ulp`` (upper bounds within 4.4 %, from mergeable
    histograms), ``mean_bits``, ``share_correct``, ``over_1ulp``,
    ``nan``, ``inf``, ``wrong_sign``.
``by_region.csv``, ``by_gamma.csv``
    The same columns, also split by pred region / by gamma.
``groups.csv``
    The finest groups (variant, model, format, profile, alpha, gamma,
    weight, dout, target, region), same columns; ``hist.npz`` holds their
    sparse ulp histograms (``group``, ``bin``, ``count``) for re-merging.
``changes.csv``
    For every pair of variants whose guard sets differ by one guard: per
    task group, how many outputs differ in bits (``changed`` of ``count``).
``predbins.npz``
    Max ulp per symmetric-log pred bin, per (variant, model, profile, gamma).
``points.parquet``
    Per-point scores (selected by the study's ``per_point``), columns:
    ``pred``, ``target``, ``alpha``, ``gamma``, ``weight`` (NaN when absent),
    ``dout``, ``count`` (exact inputs as float64/int), ``variant``,
    ``model``, ``format``, ``profile``, ``computed``, ``exact`` and
    ``exact_lo`` (the exact value as a double-double), ``rounded`` (the
    correctly rounded value), ``err_ulp``, ``err_bits``, ``class``.
``run.json``
    Study digest, seed, package versions, counts, timings, cache use.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from precision import oracle
from precision.bracket import band_labels, bracket_band
from precision.cache import TermCache, atomic_write_npz, default_cache_dir, read_checked_npz
from precision.errors import PrecisionError
from precision.executor import make_executor
from precision.formats import get_format, round_to_format
from precision.guards import evaluate, get_variant, variant_names
from precision.scoring import (CLASS_NAMES, HIST_BINS, bin_upper_edge, bits_error, classify, histogram_bins,
                               ulp_error)
from precision.study import WORST_PER_GROUP, Profile, Study, study_pred_values
from precision.terms import TermTable, derive_gradient, focal_term_tables

__all__ = ["run_study", "RunResult", "code_digest", "PRED_BIN_EDGES", "region_labels", "merge_groups"]

#: Focal-term pairs per oracle chunk: large enough to amortize process
#: start-up, small enough to balance two cores and checkpoint often.
TERM_CHUNK = 8192

#: Symmetric-log pred bins for the per-bin maxima (plots): 0, then +-2**k.
PRED_BIN_EDGES = np.concatenate([-np.exp2(np.arange(128, -25, -0.5)), [0.0], np.exp2(np.arange(-24, 128.5, 0.5))])

_STAT_COLUMNS = ["count", "max_ulp", "max_finite_ulp", "witness_pred", "witness_target", "witness_alpha",
                 "witness_gamma",
                 "witness_weight", "witness_dout", "mean_ulp", "p50_ulp", "p99_ulp", "p999_ulp", "mean_bits",
                 "share_correct", "over_1ulp", "nan", "inf", "wrong_sign"]


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """SHA-256 of the package's source files that compute results (not the report renderer).

    Chunk keys include it, so finished tasks are never reused after a change of code.
    """
    h = hashlib.sha256()
    root = Path(__file__).parent
    for path in sorted(p for p in root.rglob("*.py") if "report" not in p.relative_to(root).parts):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def region_labels(edges) -> list:
    """Labels of the regions cut by the edges: 'x < -20', '[-20, -8)', ..., 'x >= 20'."""
    e = [f"{v:g}" for v in edges]
    labels = [f"x < {e[0]}"] + [f"[{a}, {b})" for a, b in zip(e, e[1:])] + [f"x >= {e[-1]}"]
    return labels


# ---------------------------------------------------------------------------
# Tasks
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Task:
    """One tensor evaluation: every variant on pred x target for fixed scalars (picklable)."""

    key: str
    model: str
    profile: Profile
    alpha: float
    gamma: float
    weight: float | None
    dout: float
    reduction: str
    count: int
    targets: tuple
    variants: tuple
    region_edges: tuple
    per_point: str
    preds: np.ndarray
    pos: TermTable
    neg: TermTable
    bracket_edges: tuple = ()


def _exact_input(value: float, fmt: str) -> float:
    """The value a tensor of format fmt holds for a study value (RNE)."""
    return float(round_to_format(value, fmt))


def _guard_pairs(variants) -> list:
    """(with, without, guard) index triples of variants whose guard sets differ by one guard."""
    sets = {}
    for i, v in enumerate(variants):
        row = get_variant(v)
        guards = row.guards
        if guards is not None and row.family in ("kernel", "naive") and not dict(row.params).keys() - {"guards"}:
            sets[i] = guards
    pairs = []
    for i, gi in sets.items():
        for j, gj in sets.items():
            diff = gi - gj
            if len(diff) == 1 and gj < gi:
                pairs.append((i, j, int(next(iter(diff))[1:])))
    return sorted(pairs)


def run_task(task: Task) -> dict:
    """Evaluate, score and aggregate one task; returns npz-storable arrays."""
    fmt = get_format(task.profile.pred)
    P, T = task.preds.size, len(task.targets)
    regions = np.searchsorted(np.asarray(task.region_edges), task.preds, side="right")
    R = len(task.region_edges) + 1
    B = len(task.bracket_edges) + 1
    pred2d = np.repeat(task.preds.astype(fmt.dtype)[:, None], T, axis=1)
    target2d = np.broadcast_to(np.asarray(task.targets, dtype=np.int32), (P, T)).copy()
    dout_exact = _exact_input(task.dout, task.profile.dout)
    dout2d = np.full((P, T), dout_exact, dtype=get_format(task.profile.dout).dtype)
    if task.weight is None:
        weight_exact, weight2d = 1.0, None
    else:
        weight_exact = _exact_input(task.weight, task.profile.weight)
        weight2d = np.full((P, T), weight_exact, dtype=get_format(task.profile.weight).dtype)
    count = task.count if task.reduction == "mean" else 1

    rounded = np.empty((P, T), dtype=fmt.dtype)
    exact_hi = np.empty((P, T))
    exact_lo = np.empty((P, T))
    fallback = 0
    for j, t in enumerate(task.targets):
        n = np.full(P, 1.0)
        d = derive_gradient(task.preds, np.full(P, t), np.full(P, task.alpha), np.full(P, task.gamma),
                            n * weight_exact, n * dout_exact, np.full(P, count, dtype=np.int64), fmt,
                            task.pos, task.neg)
        rounded[:, j], exact_hi[:, j], exact_lo[:, j] = d.rounded, d.exact_hi, d.exact_lo
        fallback += d.fallback

    # group id per element: (target, region, bracket band), target-major; one band without bracket_edges
    group = (np.arange(T)[None, :] * R + regions[:, None]) * B
    if B > 1:
        group = group + bracket_band(task.preds[:, None], np.asarray(task.targets)[None, :], task.gamma,
                                     task.bracket_edges)
    group = group.ravel()
    G = T * R * B
    cnt = np.bincount(group, minlength=G)
    has = cnt > 0
    perm = np.argsort(group, kind="stable")  # elements grouped, in element order within a group
    starts = np.concatenate([[0], np.cumsum(cnt)[:-1]])[has]
    flat_preds = np.repeat(task.preds, T)
    pred_bin = np.clip(np.searchsorted(PRED_BIN_EDGES, task.preds, side="right") - 1, 0, PRED_BIN_EDGES.size - 2)
    out = {k: [] for k in ("g_variant", "g_group", "g_count", "g_max", "g_max_finite", "g_witness", "g_sum_ulp",
                           "g_n_finite",
                           "g_sum_bits", "g_correct", "g_over1", "g_nan", "g_inf", "g_wrong",
                           "h_variant", "h_group", "h_bin", "h_count",
                           "p_variant", "p_index", "p_computed", "p_err", "p_bits", "p_class")}
    pb_max = np.full((len(task.variants), PRED_BIN_EDGES.size - 1), np.nan, dtype=np.float32)
    computed_bits = {}
    unsupported = []
    for vi, variant in enumerate(task.variants):
        try:
            kwargs = {"count": count} if task.reduction == "mean" else {}
            computed = evaluate(variant, pred2d, target2d, dout2d, weight2d, alpha=task.alpha, gamma=task.gamma,
                                reduction=task.reduction, machine=task.model, **kwargs)
        except PrecisionError:
            unsupported.append(vi)  # e.g. an fp16-only variant on an fp32 profile
            continue
        computed = np.asarray(computed, dtype=fmt.dtype)
        computed_bits[vi] = computed.view(fmt.uint_dtype)
        err = ulp_error(computed, (exact_hi, exact_lo), fmt, rounded).ravel()
        bits = bits_error(computed, rounded, fmt).ravel()
        cls = classify(computed, rounded).ravel()
        finite = np.isfinite(err)
        err_max = np.where(np.isnan(err), np.inf, err)
        # per group: the max and its first element (the witness), without sorting per variant
        grouped = err_max[perm]
        gmax = np.maximum.reduceat(grouped, starts)
        at_max = np.where(grouped == np.repeat(gmax, cnt[has]), np.arange(grouped.size), grouped.size)
        worst = perm[np.minimum.reduceat(at_max, starts)]
        out["g_variant"].append(np.full(int(has.sum()), vi, dtype=np.int16))
        out["g_group"].append(np.flatnonzero(has).astype(np.int32))
        out["g_count"].append(cnt[has])
        out["g_max"].append(gmax)
        out["g_max_finite"].append(np.maximum.reduceat(np.where(finite, err, -np.inf)[perm], starts))
        out["g_witness"].append(flat_preds[worst])
        out["g_sum_ulp"].append(np.bincount(group, np.where(finite, err, 0.0), G)[has])
        out["g_n_finite"].append(np.bincount(group, finite, G)[has].astype(np.int64))
        out["g_sum_bits"].append(np.bincount(group, bits, G)[has])
        out["g_correct"].append(np.bincount(group, bits == 0, G)[has].astype(np.int64))
        out["g_over1"].append(np.bincount(group, ~(err <= 1.0), G)[has].astype(np.int64))
        out["g_nan"].append(np.bincount(group, cls == 1, G)[has].astype(np.int64))
        out["g_inf"].append(np.bincount(group, cls == 2, G)[has].astype(np.int64))
        out["g_wrong"].append(np.bincount(group, cls == 3, G)[has].astype(np.int64))
        hist_keys = group.astype(np.int64) * HIST_BINS + histogram_bins(err)
        if hist_keys.size * 8 < G * HIST_BINS:  # few points: sort them
            keys, counts = np.unique(hist_keys, return_counts=True)
        else:  # many points: count densely
            dense = np.bincount(hist_keys, minlength=G * HIST_BINS)
            keys = np.flatnonzero(dense)
            counts = dense[keys]
        out["h_variant"].append(np.full(keys.size, vi, dtype=np.int16))
        out["h_group"].append((keys // HIST_BINS).astype(np.int32))
        out["h_bin"].append((keys % HIST_BINS).astype(np.int32))
        out["h_count"].append(counts.astype(np.int64))
        e2 = err_max.reshape(P, T).max(axis=1)
        mx = np.full(PRED_BIN_EDGES.size - 1, -np.inf)
        np.maximum.at(mx, pred_bin, e2)
        with np.errstate(over="ignore"):
            pb_max[vi] = np.where(mx == -np.inf, np.nan, mx)
        if task.per_point == "all":
            keep = np.ones(err.size, dtype=bool)
        elif task.per_point == "incorrect":
            keep = bits > 0
        elif task.per_point == "over_1ulp":
            keep = ~(err <= 1.0)
        elif task.per_point == "worst":
            # the WORST_PER_GROUP largest errors of each group (ties: first in element order)
            order = np.lexsort((-err_max, group))
            rank = np.arange(order.size) - np.repeat(np.concatenate([[0], np.cumsum(cnt)[:-1]]), cnt)
            keep = np.zeros(err.size, dtype=bool)
            keep[order[rank < WORST_PER_GROUP]] = True
        else:
            keep = np.zeros(err.size, dtype=bool)
        idx = np.flatnonzero(keep)
        out["p_variant"].append(np.full(idx.size, vi, dtype=np.int16))
        out["p_index"].append(idx.astype(np.int64))
        out["p_computed"].append(computed.ravel()[idx].astype(np.float64))
        out["p_err"].append(err[idx])
        out["p_bits"].append(bits[idx])
        out["p_class"].append(cls[idx])
    result = {k: (np.concatenate(v) if v else np.empty(0)) for k, v in out.items()}
    result["pb_max"] = pb_max
    # guard pairs: outputs whose bits change when one guard is added
    c_rows = []
    for with_i, without_i, guard in _guard_pairs(task.variants):
        if with_i in computed_bits and without_i in computed_bits:
            changed = (computed_bits[with_i] != computed_bits[without_i]).ravel()
            per_group = np.bincount(group, changed, G)
            cnt = np.bincount(group, minlength=G)
            for gid in np.flatnonzero(cnt):
                c_rows.append((with_i, without_i, guard, gid, int(per_group[gid]), int(cnt[gid])))
    c = np.array(c_rows, dtype=np.int64).reshape(-1, 6)
    result.update(c_with=c[:, 0], c_without=c[:, 1], c_guard=c[:, 2], c_group=c[:, 3], c_changed=c[:, 4],
                  c_count=c[:, 5])
    result["fallback"] = np.array(fallback)
    result["unsupported"] = np.array(unsupported, dtype=np.int16)
    result["exact_hi"] = exact_hi.ravel()[result["p_index"]]
    result["exact_lo"] = exact_lo.ravel()[result["p_index"]]
    result["rounded"] = rounded.ravel()[result["p_index"]].astype(np.float64)
    return result


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


def _task_key(study: Study, fields: dict) -> str:
    h = hashlib.sha256()
    h.update(code_digest().encode())
    h.update(study.digest.encode())
    h.update(json.dumps(fields, sort_keys=True, default=str).encode())
    return h.hexdigest()[:32]


def _progress(total: int, desc: str):
    from tqdm import tqdm
    return tqdm(total=total, desc=desc, unit="chunk", disable=not sys.stderr.isatty(), leave=False)


def _compute_terms(study: Study, preds: np.ndarray, cache: TermCache, executor) -> tuple[dict, int, int]:
    """{gamma: (pos TermTable, neg TermTable)} aligned with preds; pairs total and from cache."""
    need_pos = any(a * (1 - t) != 0 for a in study.alphas for t in study.targets)
    need_neg = any((1 - a) * t != 0 for a in study.alphas for t in study.targets)
    xs = np.unique(np.concatenate([preds if need_pos else [], -preds if need_neg else []]).view(np.int64))
    xs = xs.view(np.float64)
    parts: dict = {g: [] for g in study.gammas}
    missing_any = np.zeros(xs.size, dtype=bool)
    total = cached = 0
    for g in study.gammas:
        found, table = cache.lookup(g, xs)
        total += xs.size
        cached += int(found.sum())
        parts[g].append((xs[found], table))
        missing_any |= ~found
    # one chunk computes every gamma for its x values, sharing exp and log1p across them
    missing = xs[missing_any]
    order = np.argsort(np.abs(missing), kind="stable")  # x and -x in one chunk share their parts
    missing = missing[order]
    chunks = [(missing[i:i + TERM_CHUNK], tuple(study.gammas)) for i in range(0, missing.size, TERM_CHUNK)]
    if chunks:
        with _progress(len(chunks), "oracle") as bar:
            for i, tables in executor.map_unordered(_term_chunk, chunks):
                x = chunks[i][0]
                for g, table in tables.items():
                    cache.store(g, x, table)
                    parts[g].append((x, table))
                bar.update(1)
    result = {}
    nan = TermTable(*(np.full(preds.size, v) for v in (0.0, 0.0, 0, np.inf)))
    for g, pieces in parts.items():
        x_all = np.concatenate([p[0] for p in pieces])
        t_all = TermTable.concatenate([p[1] for p in pieces])
        keys, first = np.unique(x_all.view(np.int64), return_index=True)

        def lookup(values, keys=keys, first=first, t_all=t_all):
            return t_all.take(first[np.searchsorted(keys, values.view(np.int64))])
        result[g] = (lookup(preds) if need_pos else nan, lookup(-preds) if need_neg else nan)
    return result, total, cached


def _term_chunk(chunk):
    x, gammas = chunk
    return focal_term_tables(x, gammas)


def _variants_of(study: Study) -> tuple:
    names = []
    for v in study.variants:
        names.extend(variant_names() if v == "all" else [v])
    return tuple(dict.fromkeys(names))


def _build_tasks(study: Study, preds, terms, variants) -> list:
    tasks = []
    for model in study.models:
        for profile in study.profiles:
            # a tensor of the profile's pred format holds only the values exact in it
            fmt = get_format(profile.pred)
            exact = round_to_format(preds, fmt).astype(np.float64).view(np.int64) == preds.view(np.int64)
            if not exact.any():
                continue
            # the values themselves are part of the key: a file-backed pred set can change under the study
            preds_digest = hashlib.sha256(np.ascontiguousarray(preds[exact]).tobytes()).hexdigest()
            for gamma in study.gammas:
                for alpha in study.alphas:
                    for weight in study.weights:
                        for dout in study.douts:
                            fields = dict(model=model, profile=profile.name, alpha=alpha.hex(), gamma=gamma.hex(),
                                          weight=None if weight is None else weight.hex(), dout=dout.hex(),
                                          variants=variants, targets=study.targets, per_point=study.per_point,
                                          preds=preds_digest)
                            pos, neg = terms[gamma]
                            tasks.append(Task(_task_key(study, fields), model, profile, alpha, gamma, weight, dout,
                                              study.reduction, study.count, study.targets, variants,
                                              study.region_edges, study.per_point, preds[exact], pos.take(exact),
                                              neg.take(exact), study.bracket_edges))
    return tasks


def run_study(study: Study, out_dir, *, cache_dir=None, use_cache: bool = True, scheduler: str | None = None,
              workers: int | None = None) -> RunResult:
    """Run a study and write its tables to ``out_dir`` (see the module docstring)."""
    started = time.perf_counter()
    out = Path(out_dir)
    chunk_dir = out / "chunks"
    preds = study_pred_values(study)
    variants = _variants_of(study)
    executor = make_executor(scheduler, workers)  # a bad scheduler fails before anything is written
    try:
        try:
            chunk_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PrecisionError(f"--out={out}: cannot create the output folder ({exc.strerror})") from None
        if not os.access(out, os.W_OK):
            raise PrecisionError(f"--out={out}: the output folder is not writable")
        cache = TermCache((Path(cache_dir) if cache_dir else default_cache_dir()) if use_cache else None)
        terms, pairs, pairs_cached = _compute_terms(study, preds, cache, executor)
        tasks = _build_tasks(study, preds, terms, variants)
        # finished tasks live on disk only (memory stays bounded by one task's results);
        # their integrity is checked when the tables are assembled
        todo = [i for i, task in enumerate(tasks) if not (chunk_dir / f"{task.key}.npz").exists()]
        with _progress(len(todo), study.name) as bar:
            for j, res in executor.map_unordered(run_task, [tasks[i] for i in todo]):
                atomic_write_npz(chunk_dir / f"{tasks[todo[j]].key}.npz", res)
                bar.update(1)
    finally:
        executor.close()
    # the tables are written into a staging folder and moved into place only when all are written,
    # so a failed write (full disk, read-only folder) leaves no partial set of tables behind
    staging = Path(tempfile.mkdtemp(dir=out, prefix=".staging-"))
    try:
        unsupported, fallback = _write_outputs(study, staging, tasks, chunk_dir, variants)
        result = RunResult(out, int(sum(t.preds.size for t in tasks) * len(study.targets)), len(tasks),
                           len(tasks) - len(todo), pairs, pairs_cached, fallback, time.perf_counter() - started,
                           unsupported)
        _write_run_json(study, staging, result)
        for path in sorted(staging.iterdir()):
            os.replace(path, out / path.name)
    except OSError as exc:
        raise PrecisionError(f"--out={out}: cannot write the tables ({exc.strerror or exc}); nothing was "
                             "written (finished tasks are kept for the next run)") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return result


# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------

def merge_groups(groups: pd.DataFrame, hist: pd.DataFrame, by: list) -> pd.DataFrame:
    """Merge fine groups into coarser ones; quantiles from the merged histograms.

    ``groups`` has one row per fine group with the raw sums (``count``,
    ``max_ulp`` and the witness columns, ``sum_ulp``, ``n_finite``,
    ``sum_bits``, ``n_correct``, ``over_1ulp``, ``nan``, ``inf``,
    ``wrong_sign``) and a ``group`` id; ``hist`` has (``group``, ``bin``,
    ``count``).  The witness of a merged group is that of its first fine group
    attaining the max, in the fine groups' (deterministic) order.
    """
    g = groups.reset_index(drop=True)
    key = g.groupby(by, sort=True, dropna=False).ngroup()
    first_max = (g.assign(_k=key, _neg=-g["max_ulp"]).sort_values(["_k", "_neg"], kind="stable")
                 .drop_duplicates("_k"))
    sums = g.assign(_k=key).groupby("_k")[["count", "sum_ulp", "n_finite", "sum_bits", "n_correct", "over_1ulp",
                                           "nan", "inf", "wrong_sign"]].sum()
    # merged sparse histograms: one (coarse key, bin) row per nonempty bin, sorted
    codes = key.to_numpy().astype(np.int64)[hist["group"].to_numpy()] * HIST_BINS + hist["bin"].to_numpy()
    merged, inverse = np.unique(codes, return_inverse=True)
    counts = np.bincount(inverse.ravel(), weights=hist["count"].to_numpy(), minlength=merged.size)
    quantiles = _histogram_quantiles(merged // HIST_BINS, merged % HIST_BINS, counts, (0.5, 0.99, 0.999))
    first_max = first_max.set_index("_k")
    table = first_max[by].copy()
    table["count"] = sums["count"]
    table["max_ulp"] = first_max["max_ulp"]
    table["max_finite_ulp"] = g.assign(_k=key).groupby("_k")["max_finite_ulp"].max()
    for col in ("witness_pred", "witness_target", "witness_alpha", "witness_gamma", "witness_weight",
                "witness_dout"):
        table[col] = first_max[col]
    with np.errstate(invalid="ignore", divide="ignore"):
        table["mean_ulp"] = sums["sum_ulp"] / sums["n_finite"]
        table["mean_bits"] = sums["sum_bits"] / sums["count"]
        table["share_correct"] = sums["n_correct"] / sums["count"]
    q = pd.DataFrame(quantiles, columns=["p50_ulp", "p99_ulp", "p999_ulp"])
    table = table.join(q)
    for col in ("over_1ulp", "nan", "inf", "wrong_sign"):
        table[col] = sums[col]
    return table[by + _STAT_COLUMNS].reset_index(drop=True)


def _histogram_quantiles(keys, bins, counts, qs) -> np.ndarray:
    """Upper bounds of the quantiles qs of every group of a sparse histogram sorted by (key, bin).

    Vectorized :func:`precision.scoring.quantile_upper_bound`: row k of the
    result holds group k's bounds (keys are 0 .. K-1).
    """
    K = int(keys.max()) + 1 if keys.size else 0
    totals = np.bincount(keys, counts, minlength=K)
    before = np.concatenate([[0], np.cumsum(totals)[:-1]])
    cum = np.cumsum(counts)
    out = np.empty((K, len(qs)))
    for j, q in enumerate(qs):
        rank = np.maximum(1, np.ceil(q * totals))
        idx = np.searchsorted(cum, before + rank, side="left")
        out[:, j] = bin_upper_edge(bins[np.minimum(idx, bins.size - 1)])
    out[totals == 0] = np.nan
    return out


def _hex_or_none(v):
    return "none" if v is None or (isinstance(v, float) and np.isnan(v)) else float(v).hex()


def _write_outputs(study: Study, out: Path, tasks, chunk_dir: Path, variants) -> tuple[list, int]:
    """Assemble the tables from the task chunks, one chunk in memory at a time; (unsupported, fallbacks)."""
    region_names = region_labels(study.region_edges)
    R = len(region_names)
    bands = bool(study.bracket_edges)
    band_names = np.asarray(band_labels(study.bracket_edges), dtype=object)  # ["all"] without bands
    B = len(band_names)

    def decode(gid, targets):
        """(target values, region labels, band labels or None) of a task's group ids."""
        rest = gid // B
        return (np.asarray(targets)[rest // R], np.asarray(region_names, dtype=object)[rest % R],
                band_names[gid % B] if bands else None)
    g_frames, h_frames, c_frames = [], [], []
    offset = 0
    unsupported = set()
    predbins = {}
    fallback = 0
    points_tmp = out / "points.parquet.tmp"
    writer = None
    for task in tasks:
        res = read_checked_npz(chunk_dir / f"{task.key}.npz")
        if res is None:  # truncated or altered on disk (warned once): recompute it here
            res = run_task(task)
            atomic_write_npz(chunk_dir / f"{task.key}.npz", res)
        fallback += int(res["fallback"])
        fmt = task.profile.pred
        base = dict(model=task.model, format=fmt, profile=task.profile.name, alpha=task.alpha, gamma=task.gamma,
                    weight=np.nan if task.weight is None else task.weight, dout=task.dout)
        n = res["g_variant"].size
        gid = res["g_group"].astype(np.int64)
        targets, regions, brackets = decode(gid, task.targets)
        gf = pd.DataFrame({
            "variant": np.asarray(variants, dtype=object)[res["g_variant"]], **base,
            "target": targets, "region": regions, **({"bracket": brackets} if bands else {}),
            "count": res["g_count"], "max_ulp": res["g_max"],
            "max_finite_ulp": np.where(res["g_max_finite"] == -np.inf, np.nan, res["g_max_finite"]),
            "witness_pred": [float(v).hex() for v in res["g_witness"]],
            "witness_target": targets, "witness_alpha": float(task.alpha).hex(),
            "witness_gamma": float(task.gamma).hex(), "witness_weight": _hex_or_none(task.weight),
            "witness_dout": float(task.dout).hex(),
            "sum_ulp": res["g_sum_ulp"], "n_finite": res["g_n_finite"], "sum_bits": res["g_sum_bits"],
            "n_correct": res["g_correct"], "over_1ulp": res["g_over1"], "nan": res["g_nan"], "inf": res["g_inf"],
            "wrong_sign": res["g_wrong"],
        })
        gf["group"] = np.arange(offset, offset + n)
        # map (variant, group id) of histogram rows onto global group rows
        # (rows come out variant-major, group ids ascending, so the combined keys are sorted)
        g_keys = res["g_variant"].astype(np.int64) * (1 << 32) + gid
        h_keys = res["h_variant"].astype(np.int64) * (1 << 32) + res["h_group"].astype(np.int64)
        rows = offset + np.searchsorted(g_keys, h_keys)
        h_frames.append(pd.DataFrame({"group": rows, "bin": res["h_bin"], "count": res["h_count"]}))
        g_frames.append(gf)
        offset += n
        for vi in res["unsupported"].tolist():
            unsupported.add((variants[vi], task.profile.name))
        if res["c_with"].size:
            c_targets, c_regions, c_brackets = decode(res["c_group"], task.targets)
            c_frames.append(pd.DataFrame({
                "guard": ["G%d" % g for g in res["c_guard"]],
                "with_variant": np.asarray(variants, dtype=object)[res["c_with"]],
                "without_variant": np.asarray(variants, dtype=object)[res["c_without"]],
                **base, "target": c_targets, "region": c_regions, **({"bracket": c_brackets} if bands else {}),
                "changed": res["c_changed"], "count": res["c_count"]}))
        if res["p_index"].size:
            idx = res["p_index"]
            P_T = len(task.targets)
            frame = pd.DataFrame({
                "pred": task.preds[idx // P_T], "target": np.asarray(task.targets)[idx % P_T],
                "alpha": task.alpha, "gamma": task.gamma,
                "weight": np.nan if task.weight is None else _exact_input(task.weight, task.profile.weight),
                "dout": _exact_input(task.dout, task.profile.dout),
                "count": task.count if task.reduction == "mean" else 1,
                "variant": pd.Categorical(np.asarray(variants, dtype=object)[res["p_variant"]], categories=variants),
                "model": task.model, "format": fmt, "profile": task.profile.name,
                "computed": res["p_computed"], "exact": res["exact_hi"], "exact_lo": res["exact_lo"],
                "rounded": res["rounded"], "err_ulp": res["p_err"], "err_bits": res["p_bits"],
                "class": pd.Categorical(np.asarray(list(CLASS_NAMES.values()), dtype=object)[res["p_class"]],
                                        categories=list(CLASS_NAMES.values()))})
            writer = _append_parquet(writer, points_tmp, frame)
        for vi, v in enumerate(variants):
            key = (v, task.model, task.profile.name, task.gamma)
            cur = res["pb_max"][vi]
            predbins[key] = cur if key not in predbins else np.fmax(predbins[key], cur)
    groups = pd.concat(g_frames, ignore_index=True)
    hist = pd.concat(h_frames, ignore_index=True)
    tables = {
        "summary.csv": merge_groups(groups, hist, ["variant", "model", "format", "profile"]),
        "by_region.csv": merge_groups(groups, hist, ["variant", "model", "format", "profile", "region"]),
        "by_gamma.csv": merge_groups(groups, hist, ["variant", "model", "format", "profile", "gamma"]),
        "groups.csv": merge_groups(groups, hist, ["variant", "model", "format", "profile", "alpha", "gamma",
                                                  "weight", "dout", "target", "region"]
                                   + (["bracket"] if bands else [])),
    }
    if bands:
        tables["by_bracket.csv"] = merge_groups(groups, hist, ["variant", "model", "format", "profile", "gamma",
                                                                "bracket"])
    order = {v: i for i, v in enumerate(variants)}
    ranks = {"variant": order, "bracket": {b: i for i, b in enumerate(band_names)}}
    for name, table in tables.items():
        table = table.sort_values(by=[c for c in ("variant", "model", "profile", "alpha", "gamma", "weight", "dout",
                                                  "target", "region", "bracket") if c in table.columns],
                                  key=lambda s: s.map(ranks[s.name]) if s.name in ranks else s, kind="stable")
        _atomic_csv(out / name, table)
    changes = pd.concat(c_frames, ignore_index=True) if c_frames else pd.DataFrame(
        columns=["guard", "with_variant", "without_variant", "model", "format", "profile", "alpha", "gamma",
                 "weight", "dout", "target", "region"] + (["bracket"] if bands else []) + ["changed", "count"])
    _atomic_csv(out / "changes.csv", changes)
    # the fine groups' raw sums and histograms, for re-merging by reports
    atomic_write_npz(out / "hist.npz", {"group": hist["group"].to_numpy(), "bin": hist["bin"].to_numpy(),
                                        "count": hist["count"].to_numpy()})
    _atomic_csv(out / "groups_raw.csv", groups)
    keys = sorted(predbins, key=lambda k: (order[k[0]], k[1], k[2], k[3]))
    atomic_write_npz(out / "predbins.npz", {
        "edges": PRED_BIN_EDGES,
        "variant": np.array([k[0] for k in keys], dtype=str), "model": np.array([k[1] for k in keys], dtype=str),
        "profile": np.array([k[2] for k in keys], dtype=str), "gamma": np.array([k[3] for k in keys]),
        "max_ulp": np.stack([predbins[k] for k in keys]) if keys else np.empty((0, PRED_BIN_EDGES.size - 1))})
    if writer is None:
        pd.DataFrame().to_parquet(points_tmp, index=False)
    else:
        writer.close()
    os.replace(points_tmp, out / "points.parquet")
    return sorted(unsupported), fallback


def _append_parquet(writer, path: Path, frame: pd.DataFrame):
    """Append a frame to a Parquet file being written (opened on the first frame)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pa.Table.from_pandas(frame, preserve_index=False)
    if writer is None:
        writer = pq.ParquetWriter(path, table.schema)
    writer.write_table(table.cast(writer.schema))
    return writer


def _atomic_csv(path: Path, frame: pd.DataFrame) -> None:
    tmp = path.with_name(path.name + ".tmp")
    frame.to_csv(tmp, index=False, float_format="%.17g")
    os.replace(tmp, path)


def _write_run_json(study: Study, out: Path, result: RunResult) -> None:
    import importlib.metadata as md
    versions = {}
    for pkg in ("precision", "numpy", "mpmath", "gmpy2", "pandas", "ml_dtypes"):
        with contextlib.suppress(md.PackageNotFoundError):
            versions[pkg] = md.version(pkg)
    data = {
        "study": study.name, "study_file": study.path, "study_sha256": study.digest, "seed": study.seed,
        "oracle_version": oracle.ORACLE_VERSION, "code_sha256": code_digest(), "python": platform.python_version(),
        "versions": versions, "models": list(study.models),
        "pred_sets": [{"kind": p.kind, "format": p.format, "weighting": p.label} for p in study.pred_sets],
        **{k: (str(v) if isinstance(v, Path) else v) for k, v in dataclasses.asdict(result).items()
           if k != "seconds"},
    }
    tmp = out / "run.json.tmp"
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, out / "run.json")
