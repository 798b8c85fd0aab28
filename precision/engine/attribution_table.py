"""Attribution of a run's kept points: which step of its recipe each error is born at, as tables.

A study that asks for it (``[run] attribution``, :class:`precision.engine.study.AttributionSpec`) has, once the
sweep has written ``points.parquet``, the kept points of the named variants attributed to the steps of
their recipe (:mod:`precision.operators.sigmoid_focal_loss_grad.attribution`: Herbie's local error of every step, a cause tag, a top cause
per point), and two tables written beside the run's others (:func:`write_attribution`).

``attribution.csv`` (:func:`cause_columns`)
    One row per fine group and top cause.  Keys: ``variant``, ``machine``, ``format``, ``profile``,
    the operator's attributes (SigmoidFocalLossGrad: ``alpha``, ``gamma``), ``weight`` (NaN when absent),
    ``dout``, ``target``, ``region`` (the fine groups
    of ``groups.csv``), then ``step`` (the top step: ``none`` where every step that reaches the output
    is correctly rounded from correctly rounded inputs) and ``cause``
    (:data:`precision.operators.sigmoid_focal_loss_grad.attribution.CAUSES`).  Columns: ``group_points`` (the group's attributed points),
    ``predicted`` (the cause predicts an error, as Herbie's explanations do: one of
    :data:`PREDICTED_CAUSES`), ``points`` (the group's attributed points with this top cause),
    ``share`` (``points / group_points``), ``over_1ulp`` (of those, outputs over 1 ulp or special, as
    the run scored them), ``max_err_ulp`` (their largest error; inf for a special output) with its
    witness ``witness_pred`` (hex), ``witness_err_ulp`` (= ``max_err_ulp``), the top step's local error
    and condition number there (``witness_local_ulp``, ``witness_cond``; NaN where none applies),
    ``max_local_ulp`` (the largest local error of the top step among them) and ``mismatched`` (points
    whose attributed output differs in bits from the run's ``computed``, NaN payloads aside: 0 unless
    the attribution does not reproduce the sweep, below).

    Herbie's check of its explanations, a confusion matrix of "predicted erroneous" (a top cause in
    :data:`PREDICTED_CAUSES`) against "error over 1 ulp or special", is a sum of these rows
    (:func:`confusion_table`).

``attribution_guards.csv`` (:data:`GUARD_COLUMNS`)
    For each comparison of the run (:mod:`precision.operators.sigmoid_focal_loss_grad.comparisons`: guard pairs, G5 thresholds, declared
    pairs) whose two variants are the same recipe table and one of whose variants is attributed (the
    ``without`` variant, else the ``with``: ``attributed``), both variants are traced on that
    variant's attributed points (:func:`precision.operators.sigmoid_focal_loss_grad.guards.trace_variant`'s mode, with the run's G4
    tile decisions), and the points are counted per ``kind``, ``subject``, ``comparison``,
    ``with_variant``, ``without_variant``, ``attributed``, ``machine``, ``format``, ``profile``,
    ``first_step`` (the first step both variants compute, in the attributed variant's recipe order,
    whose value differs between them: ``none`` when none does), ``top_step``, ``top_cause`` (the
    attributed variant's top cause) and ``relation`` (where the top step lies: ``upstream`` of
    ``first_step``, its value the same with and without the guard, which can at most route around
    it, as G5 selects ``corr`` instead of ``orig``; ``at`` it; ``downstream`` of it; ``replaced``, a
    step of the attributed variant the other one does not have; ``none``, nothing differs or no top
    step).  Columns:
    ``points``, ``changed`` (output bits differ, NaN payloads aside), ``acts`` (the guard acts on the
    step that dominates the error: some step differs, and the top step's value is among the values
    that differ, or the other variant replaces the step), ``better``
    and ``worse`` (the ``with`` variant's error smaller / larger, :func:`precision.analysis.paired.compare_points`).

The points (:class:`~precision.engine.study.AttributionSpec` ``points``): every kept row of each attributed
variant, or at most N per fine group (the largest errors, special outputs first).  They are attributed
in batches of one (variant, machine, profile, attribute values, weight, dout, count): one
:func:`precision.operators.sigmoid_focal_loss_grad.attribution.attribute_bound` call each, with the inputs in the profile's formats,
as the sweep's task holds them.

G4 and the task's tensor: the sweep evaluates each task as one ``[P, T]`` tensor (every pred of the
profile's format x every selector) and guard G4 decides per tile of it (one tile by default), from
``min(pF, qF)``, which depends on pred alone.  A batch of kept points is a different tensor and can
decide otherwise (a point with a subnormal power gets the fallback only in a flagged tile).  So the
decision is taken from the task's tensor: G4's ``g4_tile`` step is evaluated once per (variant
configuration, machine, profile) on the task's ``[P, T]`` tensor and each attributed point gets its
element's decision (:func:`precision.operators.sigmoid_focal_loss_grad.attribution.attribute`'s ``g4_tile``).  The attributed outputs are
then compared with the run's ``computed`` bits, and any difference is counted in ``mismatched``, never
dropped.

Cost: the exact values are about 1 ms of CPU per distinct point and recipe configuration (shared
between the machines of a run); the rest is vectorized.  The batches of one recipe configuration (its
machines) make one job, and the jobs run on the sweep's executor, so the attribution uses every worker.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
from tqdm import tqdm

from precision.errors import ParameterError
from precision.engine.executor import InlineExecutor
from precision.exact.formats import get_format, round_to_format
from precision.analysis.paired import compare_points
from precision.analysis.scoring import CLASS_NAMES, classify, ulp_error
from precision.engine.operators import get_operator, input_keys
from precision.engine.study import Study
from precision.engine.points import study_preds_by_term
from precision.io.frames import write_csv
from precision.recipes.target_kinds import target_kind

__all__ = ["PREDICTED_CAUSES", "group_keys", "cause_columns", "GUARD_COLUMNS", "AttributionTables",
           "attribution_tables", "write_attribution", "confusion_table", "select_points"]

#: Causes that predict an error over 1 ulp (Herbie's "erroneous" explanations); ``rounding``,
#: ``none`` and the rows without a local error do not.
PREDICTED_CAUSES = ("nan_propagation", "overflow", "clamp", "flush", "underflow", "cancellation", "sensitivity")



def group_keys(study: Study) -> list:
    """The fine groups of a run of the study (``groups.csv``), the keys of ``attribution.csv``."""
    return ["variant", "machine", "format", "profile", *input_keys(get_operator(study.operator)), "region"]


def cause_columns(study: Study) -> tuple:
    """Columns of ``attribution.csv`` of a run of the study."""
    return (*group_keys(study), "group_points", "step", "cause", "predicted", "points", "share", "over_1ulp",
            "max_err_ulp", "witness_pred", "witness_err_ulp", "witness_local_ulp", "witness_cond", "max_local_ulp",
            "mismatched")


#: Columns of ``attribution_guards.csv``.
GUARD_COLUMNS = ("kind", "subject", "comparison", "with_variant", "without_variant", "attributed", "machine",
                 "format", "profile", "first_step", "top_step", "top_cause", "relation", "points", "changed", "acts",
                 "better", "worse")


def _batch_keys(study: Study) -> list:
    """One batch of the operator's ``attribute_bound``: the scalars of a sweep task."""
    return ["variant", "machine", "profile", *get_operator(study.operator).ATTRIBUTES, "weight", "dout", "count"]


_CLASS_CODES = {name: code for code, name in CLASS_NAMES.items()}


@dataclass(frozen=True)
class AttributionTables:
    """What :func:`attribution_tables` computes.

    Attributes
    ----------
    causes : pandas.DataFrame
        ``attribution.csv`` (:func:`cause_columns`).
    guards : pandas.DataFrame
        ``attribution_guards.csv`` (:data:`GUARD_COLUMNS`).
    points : pandas.DataFrame
        One row per attributed point: the run's row (inputs, ``variant``, ``machine``, ``format``,
        ``profile``, ``computed``, ``err_ulp``, ``class``) plus ``region``, ``attributed_computed``,
        ``mismatched``, ``over_1ulp``, ``top_step``, ``top_cause``, ``top_local_ulp``, ``top_cond``,
        ``predicted``.
    seconds : float
        Wall time of the attribution.
    """

    causes: pd.DataFrame
    guards: pd.DataFrame
    points: pd.DataFrame
    seconds: float


def _study_variants(study: Study) -> list:
    """The run's variants in run order ("all" expanded, as the sweep does)."""
    names = []
    for v in study.variants:
        names.extend(get_operator(study.operator).variant_names() if v == "all" else [v])
    return list(dict.fromkeys(names))


def _attributed_variants(study: Study) -> list:
    spec = study.attribution
    run = _study_variants(study)
    chosen = run if not spec.variants else [v for v in run if v in spec.variants]
    return [v for v in chosen if get_operator(study.operator).recipe_call(v) is not None]


def _region_labels(study: Study) -> list:
    return study.regions


def _same_bits(a, b) -> np.ndarray:
    """Equal values with equal signs, or both NaN (payloads aside); float64 arrays of format values."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(invalid="ignore"):
        return ((a == b) & (np.signbit(a) == np.signbit(b))) | (np.isnan(a) & np.isnan(b))


def select_points(points: pd.DataFrame, study: Study) -> pd.DataFrame:
    """The rows of ``points.parquet`` to attribute (the study's ``[run] attribution``), with ``region``.

    Every kept row of each attributed variant, or at most ``points = N`` per fine group: the largest
    errors first (NaN errors and special outputs first), ties in the run's row order.
    """
    spec = study.attribution
    if spec is None or points.empty or "variant" not in points.columns:
        return points.iloc[0:0].assign(region=pd.Series(dtype=object))
    frame = points.assign(variant=points["variant"].astype(str), **{"class": points["class"].astype(str)})
    frame = frame[frame["variant"].isin(_attributed_variants(study))]
    labels = np.asarray(_region_labels(study), dtype=object)
    frame = frame.assign(region=labels[np.searchsorted(np.asarray(study.region_edges), frame["pred"].to_numpy(),
                                                       side="right")])
    if spec.points != "kept" and len(frame):
        err = frame["err_ulp"].to_numpy(np.float64)
        special = frame["class"].to_numpy() != "ok"
        key = np.where(np.isnan(err) | special, np.inf, err)
        ranked = frame.assign(_k=-key, _i=np.arange(len(frame)))
        ranked = ranked.sort_values(["_k", "_i"], kind="stable")
        rank = ranked.groupby(group_keys(study), sort=False, dropna=False).cumcount()
        frame = ranked[rank.to_numpy() < spec.points].sort_values("_i").drop(columns=["_k", "_i"])
    return frame.reset_index(drop=True)


class _Tensors:
    """The sweep's task tensors, for G4's tile decision (see the module docstring)."""

    def __init__(self, study: Study, preds_by_term=None):
        self.study = study
        self._preds = preds_by_term
        self.profiles = {p.name: p for p in study.profiles}
        self._task_preds: dict = {}
        self._flags: dict = {}

    def profile(self, name: str):
        return self.profiles[name]

    def task_preds(self, profile, term: float | None) -> np.ndarray:
        """The pred values of a task of this profile and value of the terms attribute: those exact in its pred
        format, sorted as the run's."""
        key = (profile.name, term)
        if key not in self._task_preds:
            if self._preds is None:
                self._preds = study_preds_by_term(self.study)
            preds, fmt = self._preds[term], get_format(profile.pred)
            exact = round_to_format(preds, fmt).astype(np.float64).view(np.int64) == preds.view(np.int64)
            self._task_preds[key] = preds[exact]
        return self._task_preds[key]

    @property
    def per_term(self) -> bool:
        """The study's pred values depend on the terms attribute (a ``windows`` set): so do its tensors."""
        return any(axis.per_term for axis in self.study.pred_sets)

    def operands(self, profile, pred, target, weight: float, dout: float):
        """pred, target, dout, weight arrays ``[1, n]`` in the profile's formats (weight None when absent)."""
        n = pred.size
        x = np.asarray(pred, np.float64).astype(get_format(profile.pred).dtype).reshape(1, n)
        t = target_kind(get_operator(self.study.operator)).array(target, x.dtype).reshape(1, n)
        d = np.full((1, n), dout, np.float64).astype(get_format(profile.dout).dtype)
        w = None if np.isnan(weight) else np.full((1, n), weight, np.float64).astype(get_format(profile.weight).dtype)
        return x, t, d, w

    def g4_flags(self, variant, machine, profile, batch: dict, pred, target):
        """The task tensor's G4 tile decision at each point (None for a variant without G4)."""
        call = get_operator(self.study.operator).recipe_call(variant)
        plan = call.recipe.plan(call.config)
        if "g4_tile" not in plan.names:
            return None
        term = _batch_term(self.study, batch)
        key = (machine, call.compute, profile.name, term if self.per_term else None,
               plan.keys[plan.names.index("g4_tile")])
        if key not in self._flags:  # g4_tile reads pF and qF only: one evaluation per configuration and profile
            preds = self.task_preds(profile, term)
            targets = np.asarray(self.study.targets)
            P, T = preds.size, targets.size
            x, t, d, w = self.operands(profile, np.repeat(preds, T), np.tile(targets, P), batch["weight"],
                                       batch["dout"])
            bound = _bind(variant, x, t, d, w, self.study, machine, batch)
            memo: dict = {}
            bound.run(memo=memo, keep={key[-1]})
            bits = preds.view(np.int64)
            by_bits = np.argsort(bits, kind="stable")  # rows of the tensor, looked up by the bits of pred
            self._flags[key] = (bits[by_bits], by_bits, np.asarray(memo[key[-1]], bool).reshape(-1))
        bits, rows, flags = self._flags[key]
        wanted = np.asarray(pred, np.float64).view(np.int64)
        k = np.minimum(np.searchsorted(bits, wanted), bits.size - 1)
        order = {t: c for c, t in enumerate(self.study.targets)}
        if not np.array_equal(bits[k], wanted) or not set(np.asarray(target).tolist()) <= set(order):
            raise ParameterError(f"points of variant={variant!r}, profile={profile.name!r} are not elements of the "
                                 f"study's task tensor; pass the points.parquet of a run of study {self.study.name!r}")
        j = np.array([order[v] for v in np.asarray(target).tolist()], dtype=np.int64)
        return flags[rows[k] * len(self.study.targets) + j]


def _batch_term(study: Study, batch: dict) -> float | None:
    """A batch's value of the operator's terms attribute (None when it has none)."""
    name = get_operator(study.operator).TERMS_ATTRIBUTE
    return None if name is None else float(batch[name])


def _batch_attributes(study: Study, batch: dict) -> dict:
    """A batch's attribute values, by name (the operator's ``ATTRIBUTES``)."""
    return {name: batch[name] for name in get_operator(study.operator).ATTRIBUTES}


def _bind(variant, x, t, d, w, study: Study, machine, batch):
    kwargs = {"count": int(batch["count"])} if study.reduction == "mean" else {}
    return get_operator(study.operator).bind_recipe(variant, x, t, d, w, **_batch_attributes(study, batch),
                                                    reduction=study.reduction, machine=machine, **kwargs)


def _progress(total: int, desc: str, progress):
    disable = (not sys.stderr.isatty()) if progress is None else not progress
    return tqdm(total=total, desc=desc, unit="batch", disable=disable, leave=False)


def _batches(frame: pd.DataFrame, study: Study):
    keys = _batch_keys(study)
    for key, rows in frame.groupby(keys, sort=False, dropna=False, observed=True):
        yield dict(zip(keys, key)), rows


def _attribution_jobs(frame: pd.DataFrame, study: Study) -> list:
    """The batches grouped by what shares exact values (variant, profile and scalars: the machines of one
    configuration), each group one job, in the frame's order."""
    jobs: dict = {}
    for batch, rows in (_batches(frame, study) if len(frame) else []):
        key = (batch["variant"], batch["profile"], *_batch_attributes(study, batch).values(),
               None if np.isnan(batch["weight"]) else batch["weight"], batch["dout"], batch["count"])
        jobs.setdefault(key, []).append((batch, rows))
    return list(jobs.values())


@dataclass(frozen=True)
class _Job:
    """One job of :func:`_attribute_job` (plain data: it crosses a process boundary)."""

    study: Study
    preds_by_term: dict | None  # the job's term value only (None: the study's, computed where needed)
    task_tiles: bool
    batches: list  # [(batch scalars, rows of points)]


def _attribute_job(job: _Job) -> list:
    """The attributed rows of each batch of one job (its machines share exact values, kept only meanwhile)."""
    op = get_operator(job.study.operator)
    op.ensure_loaded(job.study.plugins)  # a worker of a remote cluster has not loaded the study's plugins
    study, tensors = job.study, _Tensors(job.study, job.preds_by_term)
    exact_cache: dict = {}
    parts = []
    for batch, rows in job.batches:
        profile = tensors.profile(batch["profile"])
        pred, target = rows["pred"].to_numpy(), rows["target"].to_numpy()
        x, t, d, w = tensors.operands(profile, pred, target, batch["weight"], batch["dout"])
        bound = _bind(batch["variant"], x, t, d, w, study, batch["machine"], batch)
        flags = tensors.g4_flags(batch["variant"], batch["machine"], profile, batch, pred, target) \
            if job.task_tiles else None
        n_mean = int(batch["count"]) if study.reduction == "mean" else 1
        att = op.attribute_bound(bound, attributes={**{k: float(v) for k, v in _batch_attributes(study, batch).items()},
                                                    "count": n_mean, "machine": batch["machine"],
                                                    "target": t.reshape(-1)},
                                 g4_tile=flags, exact_cache=exact_cache)
        p = att.points
        computed = p["computed"].to_numpy()
        parts.append(rows.assign(
            attributed_computed=computed, mismatched=~_same_bits(computed, rows["computed"].to_numpy()),
            top_step=p["top_step"].fillna("none").to_numpy(object), top_cause=p["top_cause"].to_numpy(object),
            top_local_ulp=p["top_local_ulp"].to_numpy(np.float64), top_cond=p["top_cond"].to_numpy(np.float64)))
    return parts


def _attribute_points(frame: pd.DataFrame, study: Study, preds_by_term, task_tiles: bool, progress,
                      executor=None) -> pd.DataFrame:
    """Per attributed point: the top cause and whether the attribution reproduces the run's output.

    The jobs (:func:`_attribution_jobs`) run on ``executor`` (:mod:`precision.engine.executor`; None: in this
    process); the rows come back in the run's order whatever order the jobs finish in.
    """
    def preds_of(batches):  # the job's term value's preds (one value per job: the batches share their scalars)
        term = _batch_term(study, batches[0][0])
        return None if preds_by_term is None else {term: preds_by_term[term]}
    jobs = [_Job(study, preds_of(b), task_tiles, b) for b in _attribution_jobs(frame, study)]
    parts = []
    with _progress(sum(len(j.batches) for j in jobs), "attribution", progress) as bar:
        for i, job_parts in (executor or InlineExecutor()).map_unordered(_attribute_job, jobs):
            parts += job_parts
            bar.update(len(jobs[i].batches))
    if not parts:
        return frame.assign(attributed_computed=np.nan, mismatched=False, top_step="none", top_cause="none",
                            top_local_ulp=np.nan, top_cond=np.nan, over_1ulp=False, predicted=False).iloc[0:0]
    out = pd.concat(parts).sort_index()  # the run's row order
    err = out["err_ulp"].to_numpy(np.float64)
    over = ~(err <= 1.0) | (out["class"].to_numpy() != "ok")
    return out.assign(over_1ulp=over, predicted=out["top_cause"].isin(PREDICTED_CAUSES).to_numpy())


def _cause_table(pts: pd.DataFrame, study: Study) -> pd.DataFrame:
    keys = group_keys(study) + ["step", "cause"]
    if pts.empty:
        return pd.DataFrame(columns=list(cause_columns(study)))
    err = pts["err_ulp"].to_numpy(np.float64)
    special = pts["class"].to_numpy() != "ok"
    frame = pts.assign(step=pts["top_step"], cause=pts["top_cause"],
                       _err=np.where(np.isnan(err) | special, np.inf, err))
    grouped = frame.groupby(keys, sort=False, dropna=False)
    t = grouped.agg(points=("pred", "size"), over_1ulp=("over_1ulp", "sum"), max_err_ulp=("_err", "max"),
                    max_local_ulp=("top_local_ulp", "max"), mismatched=("mismatched", "sum")).reset_index()
    worst = frame.loc[frame.sort_values("_err", ascending=False, kind="stable")
                      .groupby(keys, sort=False, dropna=False).head(1).index]
    worst = worst.set_index(keys)
    idx = pd.MultiIndex.from_frame(t[keys])
    t["witness_pred"] = [float(v).hex() for v in worst.loc[idx, "pred"].to_numpy()]
    t["witness_err_ulp"] = t["max_err_ulp"]
    t["witness_local_ulp"] = worst.loc[idx, "top_local_ulp"].to_numpy()
    t["witness_cond"] = worst.loc[idx, "top_cond"].to_numpy()
    t["group_points"] = t.groupby(group_keys(study), sort=False, dropna=False)["points"].transform("sum")
    t["share"] = t["points"] / t["group_points"]
    t["predicted"] = t["cause"].isin(PREDICTED_CAUSES)
    for c in ("points", "over_1ulp", "mismatched", "group_points"):
        t[c] = t[c].astype(np.int64)
    return t[list(cause_columns(study))]


def _same_recipe(a: str, b: str, op) -> bool:
    """Both variants are the same recipe table of the operator ``op`` (so their steps can be compared by name)."""
    ca, cb = op.recipe_call(a), op.recipe_call(b)
    return ca is not None and cb is not None and ca.recipe is cb.recipe and ca.compute == cb.compute


def _trace_env(variant, x, t, d, w, study, machine, batch, flags, memo: dict):
    """(plan, {step: float64 or bool values [n]}, output) of one variant on a batch, G4 as the task decided.

    ``memo`` is shared between the variants of one recipe on one batch (:meth:`precision.recipes.steps.Recipe.run`):
    a step whose plan key is already there is not recomputed (the same key, the same value).
    """
    bound = _bind(variant, x, t, d, w, study, machine, batch)
    plan, n = bound.plan, x.size
    if flags is not None:
        memo[plan.keys[plan.names.index("g4_tile")]] = np.asarray(flags, bool)
    out, env = bound.run(trace=True, memo=memo)
    values = {}
    for s in plan.steps:
        v = env[s.name]
        if v is None:
            v = np.zeros(n, bool) if s.fmt == "bool" else np.full(n, np.nan)
        v = np.asarray(v).astype(bool if s.fmt == "bool" else np.float64)
        values[s.name] = np.broadcast_to(v.reshape(-1) if v.ndim else v, (n,))
    return plan, values, np.asarray(out, np.float64).reshape(-1)


def _first_differences(plan_b, env_b, plan_o, env_o, top) -> tuple:
    """Per point: the first common step whose value differs, whether the top step differs, the relation."""
    names = plan_b.names
    keys_o = dict(zip(plan_o.names, plan_o.keys))
    n = len(top)
    diff = np.zeros((len(names), n), bool)
    common = np.zeros(len(names), bool)
    for k, (name, key) in enumerate(zip(names, plan_b.keys)):
        if name not in keys_o:
            diff[k] = True  # replaced: the other variant has no such step
        else:
            common[k] = True
            if keys_o[name] != key:  # equal plan keys compute equal values
                diff[k] = ~_same_bits(env_b[name], env_o[name])
    cdiff = diff & common[:, None]
    any_c = cdiff.any(axis=0)
    first_k = np.where(any_c, cdiff.argmax(axis=0), -1)
    first = np.where(any_c, np.asarray(names, dtype=object)[np.maximum(first_k, 0)], "none")
    pos = {s: k for k, s in enumerate(names)}
    top_k = np.array([pos.get(s, -1) for s in top], dtype=np.int64)
    # a guard acts at a point only where it changes a value both variants compute
    replaced = any_c & (top_k >= 0) & ~common[np.maximum(top_k, 0)]
    acts = any_c & (top_k >= 0) & diff[np.maximum(top_k, 0), np.arange(n)]
    relation = np.where(replaced, "replaced",
                        np.where((top_k < 0) | (first_k < 0), "none",
                                 np.where(top_k < first_k, "upstream",
                                          np.where(top_k == first_k, "at", "downstream"))))
    return first, acts, relation


def _guard_table(pts: pd.DataFrame, study: Study, tensors: _Tensors, task_tiles: bool) -> pd.DataFrame:
    attributed = set(pts["variant"]) if len(pts) else set()
    op = get_operator(study.operator)
    comparisons = [c for c in op.find_comparisons(_study_variants(study), study.compare)
                   if (c.without_variant in attributed or c.with_variant in attributed)
                   and _same_recipe(c.with_variant, c.without_variant, op)]
    by_base: dict = {}
    for c in comparisons:
        base = c.without_variant if c.without_variant in attributed else c.with_variant
        by_base.setdefault(base, []).append(c)
    counts: dict = {}  # the GUARD_COLUMNS keys -> [points, changed, acts, better, worse]
    order = {c.name: i for i, c in enumerate(comparisons)}
    for base, cmps in by_base.items():
        for batch, sub in _batches(pts[pts["variant"] == base], study):
            profile = tensors.profile(batch["profile"])
            machine = batch["machine"]
            pred, target = sub["pred"].to_numpy(), sub["target"].to_numpy()
            x, t, d, w = tensors.operands(profile, pred, target, batch["weight"], batch["dout"])
            memo: dict = {}
            flags = tensors.g4_flags(base, machine, profile, batch, pred, target) if task_tiles else None
            plan_b, env_b, out_b = _trace_env(base, x, t, d, w, study, machine, batch, flags, memo)
            top = sub["top_step"].to_numpy(object)
            fmt = get_format(sub["format"].iloc[0])
            exact = (sub["exact"].to_numpy(np.float64), sub["exact_lo"].to_numpy(np.float64))
            rounded = sub["rounded"].to_numpy(np.float64).astype(fmt.dtype)
            err_b = sub["err_ulp"].to_numpy(np.float64)
            cls_b = np.array([_CLASS_CODES[v] for v in sub["class"]], dtype=np.int8)
            for c in cmps:
                other = c.with_variant if base == c.without_variant else c.without_variant
                flags_o = tensors.g4_flags(other, machine, profile, batch, pred, target) if task_tiles else None
                plan_o, env_o, out_o = _trace_env(other, x, t, d, w, study, machine, batch, flags_o, memo)
                first, acts, relation = _first_differences(plan_b, env_b, plan_o, env_o, top)
                err_o = ulp_error(out_o.astype(fmt.dtype), exact, fmt, rounded)
                cls_o = classify(out_o, rounded)
                changed = ~_same_bits(out_b, out_o)
                if base == c.with_variant:
                    outcome, _, _ = compare_points(err_b, cls_b, err_o, cls_o, changed)
                else:
                    outcome, _, _ = compare_points(err_o, cls_o, err_b, cls_b, changed)
                head = (c.kind, c.subject, c.name, c.with_variant, c.without_variant, base, machine, fmt.name,
                        profile.name)
                for key in zip(first, top, sub["top_cause"].to_numpy(object), relation, changed, acts,
                               outcome == 1, outcome == 2):
                    row = counts.setdefault(head + key[:4], [0, 0, 0, 0, 0])
                    row[0] += 1
                    for k in range(4):
                        row[k + 1] += bool(key[4 + k])
    if not counts:
        return pd.DataFrame(columns=list(GUARD_COLUMNS))
    t = pd.DataFrame([k + tuple(v) for k, v in counts.items()], columns=list(GUARD_COLUMNS))
    # comparisons in the run's order, then machines as in the study (the rest as first met)
    machines = {m: i for i, m in enumerate(study.machines)}
    t = t.assign(_c=t["comparison"].map(order), _m=t["machine"].map(machines)).sort_values(
        ["_c", "_m"], kind="stable").drop(columns=["_c", "_m"])
    return t[list(GUARD_COLUMNS)].reset_index(drop=True)


def attribution_tables(points: pd.DataFrame, study: Study, *, preds_by_term=None, progress=None,
                       task_tiles: bool = True, executor=None) -> AttributionTables:
    """Attribute a run's kept points (the study's ``[run] attribution``) and tabulate the top causes.

    Parameters
    ----------
    points : pandas.DataFrame
        The run's ``points.parquet`` (columns: :mod:`precision.engine.sweep`).
    study : precision.engine.study.Study
        The study the run ran (its ``attribution``, variants, targets, reduction, regions, profiles).
    preds_by_term : dict, optional
        The study's pred values per value of the terms attribute (:func:`precision.engine.points.study_preds_by_term`),
        if the caller has them.
    progress : bool, optional
        Show a progress bar (default: on a terminal).
    task_tiles : bool
        Take G4's tile decision from the sweep's task tensor (default); False lets each batch decide
        (the plain :func:`precision.operators.sigmoid_focal_loss_grad.attribution.attribute`), which ``mismatched`` then shows.
    executor : optional
        Where the points are attributed, one job per recipe configuration (:mod:`precision.engine.executor`, as
        the sweep's tasks; default: in this process).  The tables do not depend on it.

    Returns
    -------
    AttributionTables
        Empty tables when the study asks for no attribution or keeps no point of its variants.
    """
    started = time.perf_counter()
    frame = select_points(points, study)
    if preds_by_term is None and task_tiles and len(frame):
        preds_by_term = study_preds_by_term(study)  # once here, not in every job
    tensors = _Tensors(study, preds_by_term)
    pts = _attribute_points(frame, study, preds_by_term, task_tiles, progress, executor)
    causes = _sorted(_cause_table(pts, study), study)
    guards = _guard_table(pts, study, tensors, task_tiles)
    return AttributionTables(causes, guards, pts.reset_index(drop=True),
                             time.perf_counter() - started)


def _sorted(causes: pd.DataFrame, study: Study) -> pd.DataFrame:
    """Rows in run order (variant, machine, then the other keys; regions by x), then by points, most first."""
    if causes.empty:
        return causes
    ranks = {"variant": _study_variants(study), "machine": list(study.machines),
             "profile": [p.name for p in study.profiles], "region": _region_labels(study)}
    keys = {c: causes[c].map({v: i for i, v in enumerate(r)}) for c, r in ranks.items()}
    inputs = list(input_keys(get_operator(study.operator)))
    order = pd.DataFrame({**keys, **{c: causes[c] for c in ("format", *inputs)},
                          "_p": -causes["points"], "_e": -causes["max_err_ulp"].fillna(np.inf)})
    cols = ["variant", "machine", "format", "profile", *inputs, "region", "_p", "_e"]
    idx = order.sort_values(cols, kind="stable").index
    return causes.loc[idx].reset_index(drop=True)


def confusion_table(causes: pd.DataFrame, by=("variant", "machine", "format")) -> pd.DataFrame:
    """Herbie's check of the causes: predicted erroneous against error over 1 ulp, per ``by``.

    A point is *predicted erroneous* when its top cause is one of :data:`PREDICTED_CAUSES` and
    *actually erroneous* when the run scored it over 1 ulp or special.  Columns: the ``by`` keys,
    ``points``, ``flagged`` (predicted erroneous), ``over_1ulp`` (actually), ``tp`` (predicted and
    over 1 ulp), ``fp`` (predicted, within 1 ulp), ``fn`` (over 1 ulp, not predicted), ``tn``,
    ``precision`` (tp / (tp + fp), NaN when nothing is predicted), ``recall`` (tp / (tp + fn), NaN
    when no point is over 1 ulp) and ``mismatched``.

    Examples
    --------
    >>> causes = pd.DataFrame({"variant": "kernel", "machine": "ieee", "format": "fp32",
    ...                        "predicted": [True, False], "points": [5, 3], "over_1ulp": [4, 1], "mismatched": 0})
    >>> confusion_table(causes)[["tp", "fp", "fn", "tn", "precision", "recall"]].to_dict("records")
    [{'tp': 4, 'fp': 1, 'fn': 1, 'tn': 2, 'precision': 0.8, 'recall': 0.8}]
    """
    by = list(by)
    cols = by + ["points", "flagged", "over_1ulp", "tp", "fp", "fn", "tn", "precision", "recall", "mismatched"]
    if causes.empty:
        return pd.DataFrame(columns=cols)
    pred = causes["predicted"].astype(bool).to_numpy()
    pts = causes["points"].to_numpy(np.int64)
    over = causes["over_1ulp"].to_numpy(np.int64)
    frame = causes[by].assign(points=pts, tp=np.where(pred, over, 0), fp=np.where(pred, pts - over, 0),
                              fn=np.where(pred, 0, over), tn=np.where(pred, 0, pts - over),
                              mismatched=causes["mismatched"].to_numpy(np.int64))
    t = frame.groupby(by, sort=False).sum().reset_index()
    t["flagged"], t["over_1ulp"] = t["tp"] + t["fp"], t["tp"] + t["fn"]
    with np.errstate(invalid="ignore", divide="ignore"):
        t["precision"] = np.where(t["tp"] + t["fp"] > 0, t["tp"] / (t["tp"] + t["fp"]).clip(lower=1), np.nan)
        t["recall"] = np.where(t["tp"] + t["fn"] > 0, t["tp"] / (t["tp"] + t["fn"]).clip(lower=1), np.nan)
    return t[cols]


def write_attribution(out_dir, study: Study, *, points: pd.DataFrame | None = None, preds_by_term=None,
                      progress=None, executor=None) -> AttributionTables | None:
    """Write ``attribution.csv`` and ``attribution_guards.csv`` into a run folder (atomically each).

    Parameters
    ----------
    out_dir : str or Path
        The run folder (or the sweep's staging folder) holding ``points.parquet``.
    study : precision.engine.study.Study
    points : pandas.DataFrame, optional
        ``points.parquet`` if already read.
    preds_by_term, progress, executor
        As :func:`attribution_tables`.

    Returns
    -------
    AttributionTables or None
        None (nothing written) when the study asks for no attribution.
    """
    if study.attribution is None:
        return None
    out = Path(out_dir)
    if points is None:
        path = out / "points.parquet"
        names = set(pq.read_schema(path).names)
        # only the attributed variants' rows are read (a run keeps every variant's)
        points = pd.read_parquet(path, filters=[("variant", "in", _attributed_variants(study))]) \
            if "variant" in names else pd.read_parquet(path)
    tables = attribution_tables(points, study, preds_by_term=preds_by_term, progress=progress, executor=executor)
    for name, frame in (("attribution.csv", tables.causes), ("attribution_guards.csv", tables.guards)):
        write_csv(frame, out / name)
    return tables
