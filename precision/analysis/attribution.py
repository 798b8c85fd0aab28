"""Error attribution: which step of a recipe loses the bits, and why.

For one variant on a batch of points, every named step of its recipe
(:mod:`precision.recipes.steps`) gets

``computed``
    its value on the machine (from the trace of the ordinary evaluation);
``exact``
    the exact real value of the quantity it stands for (``Step.exact``),
    computed with mpmath at a working precision that decides its rounding into
    the step's format (below);
``local_ulp``
    **Herbie's local error**: the step's op evaluated in the machine's
    arithmetic on the *correctly rounded exact values of its inputs*, against
    the correctly rounded exact value of its output, as the number of
    representable steps between the two in the step's format (the compute
    format; pred's dtype for the store).  0 means the step is correctly
    rounded given correctly rounded inputs; a step that amplifies the
    rounding of its inputs (a subtraction that cancels, ``ln`` near 1) shows
    the amplification here, where it happens;
``cond``
    the step's condition number where it applies (NaN elsewhere), Herbie's
    definitions: ``max(|a|, |b|) / |a +- b|`` for a sum, ``|y|`` for
    ``exp(y)``, ``1 / |ln y|`` for ``ln(y)``, ``max(|k|, |k ln b|)`` for
    ``b**k``;
``cause``
    one tag from :data:`CAUSES`;
``reaches_output``
    whether the step's value flows into the output at this point (data flow
    through the computed decisions: a select passes its taken branch, a
    ``where`` step exists only where it ran, the selector multiply passes the
    unselected term only when it is NaN or inf, which leaks through
    ``0 * inf = NaN``; a decision reaches when the select it steers does, its
    inputs only through data).

and each point gets a **top cause** (:func:`top_causes`).

The causes (a fixed list; the first that applies, in this order)
-----------------------------------------------------------------
``nan_propagation``
    the computed value is NaN where the exact value is not (made here from
    an inf or a 0, as ``inf * 0``, or carried from an input);
``overflow``
    the computed or locally evaluated value is +-inf where the exact value
    rounds to a finite one, or an input's exact value exceeds the format
    (rounds to inf) and the step loses bits because of it;
``clamp``
    a clamp (``max(p, MIN_NORMAL)``) moved its exact input (the clamp stands
    for that input, so any change is its local error);
``flush``
    a well-conditioned step returns zero where its exact value rounds to a
    nonzero subnormal (flush to zero), or a subnormal input is read as zero
    (``daz``);
``underflow``
    more than 1 ulp lost because an input's exact value is subnormal or
    rounds to zero (it kept too few bits);
``cancellation``
    a sum, difference or fma losing more than 1 ulp with a condition number
    above :data:`COND_THRESHOLD` (the roundings of its inputs amplified);
``sensitivity``
    exp, ln or pow losing more than 1 ulp with a condition number above
    :data:`COND_THRESHOLD` (ln near 1, exp or pow of a large argument);
``rounding``
    any other nonzero local error (ordinary ulp-level rounding, the host
    rounding of a constant, a library op that is not correctly rounded);
``none``
    local error 0;
``not_evaluated``
    a ``where`` step that did not run at this point (the guard's path was not
    taken); its ``local_ulp`` is still reported (what the path would lose);
``decision``
    a boolean step (guard or branch decision): ``exact`` is the decision
    taken on the correctly rounded exact inputs, ``local_ulp`` is NaN;
``untracked``
    a step without an exact counterpart (an error-compensation term or a
    constant selection of the candidate); ``local_ulp`` is NaN, and steps
    reading it use its computed value as their input.

Exact values (a precision that decides the rounding)
----------------------------------------------------
The operator gives each point's exact step values, certified into each step's
format (:func:`precision.analysis.exact_steps.certified_steps` with its own
quantities: SigmoidFocalLossGrad's
:mod:`precision.operators.sigmoid_focal_loss_grad.step_values`, SigmoidFocalLoss's
:mod:`precision.operators.sigmoid_focal_loss.step_values`).  A clamp's exact value
is that of its input; a constant's is None.

Outputs
-------
:func:`attribute_bound` returns an :class:`Attribution` with two DataFrames.

``steps`` (one row per point and step, in step order):
    ``point`` (int, index into the batch), ``order`` (int, the step's
    position), ``step``, ``kind``, ``format`` (``fp32``/``fp16``/``bool``),
    ``evaluated`` (bool: a ``where`` step ran here), ``computed`` (float64;
    decisions 0/1; NaN where not evaluated), ``exact`` (float64 nearest the
    exact value; NaN when untracked), ``exact_rounded`` (float64 holding the
    exact value rounded into ``format``), ``certified`` (bool), ``local``
    (float64, the local evaluation), ``local_ulp`` (float64), ``cond``
    (float64), ``cause`` (str), ``reaches_output`` (bool).
``points`` (one row per point):
    ``point``, ``variant``, ``machine``, ``format`` (output), the operator's
    input columns (SigmoidFocalLossGrad: ``pred``, ``target``, ``alpha``,
    ``gamma``, ``weight`` (NaN when absent), ``dout``, ``count``),
    ``computed`` (the output), ``exact_rounded`` (the correctly rounded exact
    value), ``err_ulp`` (:func:`precision.analysis.scoring.ulp_error`),
    ``top_step``, ``top_cause``, ``top_local_ulp``, ``top_cond``.

Cost: the exact values are one Python evaluation per distinct point (about
1 ms of CPU for the grad kernel's 73 steps: 10,000 points in 10 s); the local
evaluation, causes and reachability are vectorized.  An operator's
``attribute`` binds a batch of its points and calls :func:`attribute_bound`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from precision.analysis.exact_steps import low_part, mpf_to_float
from precision.analysis.scoring import ulp_error
from precision.errors import ParameterError
from precision.exact.formats import get_format, ordinal_distance
from precision.io.numbers import fmt_num
from precision.machine import Machine
from precision.recipes.steps import RECIPE_INPUTS, BoundRecipe

__all__ = ["CAUSES", "COND_THRESHOLD", "TOP_TIE_RATIO", "STEP_COLUMNS", "POINT_HEAD", "POINT_TAIL", "Attribution",
           "attribute_bound", "operand_values", "top_causes", "describe"]


# ---------------------------------------------------------------------------
# Tuning parameters
# ---------------------------------------------------------------------------

#: The cause tags, in the priority order they are tested (module docstring).
CAUSES = ("nan_propagation", "overflow", "clamp", "flush", "underflow", "cancellation", "sensitivity",
          "rounding", "none", "not_evaluated", "decision", "untracked")

#: Condition number above which a lossy sum is "cancellation" and a lossy
#: function "sensitivity": input roundings (<= 0.5 ulp each) then become more
#: than 8 ulp.  Herbie uses 100 for a certain and 32 for a possible
#: explanation of float64 errors above 16 ulps; here the step must also lose
#: more than 1 ulp, which the condition number alone does not guarantee.
COND_THRESHOLD = 16.0

#: Top cause: the earliest reaching step whose local error is within this
#: factor of the largest (upstream losses explain downstream ones: q = 1 - p
#: before ln(p), which inherits the same rounding of p).
TOP_TIE_RATIO = 0.5


#: Columns of :attr:`Attribution.steps`.
STEP_COLUMNS = ("point", "order", "step", "kind", "format", "evaluated", "computed", "exact", "exact_rounded",
                "certified", "local", "local_ulp", "cond", "cause", "reaches_output")
#: Columns of :attr:`Attribution.points` before the operator's input columns ...
POINT_HEAD = ("point", "variant", "machine", "format")
#: ... and after them.
POINT_TAIL = ("computed", "exact_rounded", "err_ulp", "top_step", "top_cause", "top_local_ulp", "top_cond")


# ---------------------------------------------------------------------------
# Local error, causes, reachability (vectorized over points)
# ---------------------------------------------------------------------------

def _f64(v, n: int) -> np.ndarray:
    """A step value as float64 [n] (decisions 0/1, None as NaN, scalars broadcast)."""
    if v is None:
        return np.full(n, np.nan)
    a = np.asarray(v)
    if a.dtype == bool:
        a = a.astype(np.float64)
    return np.broadcast_to(np.asarray(a, dtype=np.float64), (n,)).copy() if a.ndim == 0 else \
        np.asarray(a, dtype=np.float64).reshape(-1)


def _default_cond(step, v, ins):
    """Herbie's condition numbers by kind (NaN where none applies)."""
    with np.errstate(all="ignore"):
        if step.kind in ("add", "sub") and ins:
            return np.max(np.abs(np.stack(ins)), axis=0) / np.abs(v)
        if step.kind == "fma" and len(ins) == 3:
            return np.maximum(np.abs(ins[0] * ins[1]), np.abs(ins[2])) / np.abs(v)
        if step.kind == "exp" and ins:
            return np.abs(ins[0])
        if step.kind == "ln":
            return 1.0 / np.abs(v)
    return np.full(v.shape, np.nan)


def _uses(step, ins, n: int) -> list:
    """Per input, where its value can reach this step (bool [n]); control inputs of decisions: nowhere."""
    every = np.ones(n, bool)
    if step.uses is not None:
        return [every if u is None else np.broadcast_to(np.asarray(u, bool), (n,)) for u in step.uses(*ins)]
    if step.kind == "bool":
        return [np.zeros(n, bool) for _ in ins]
    if step.kind == "select" and len(ins) == 3:
        cond = np.asarray(ins[0], bool)
        return [every, cond, ~cond]
    if step.kind == "patch":
        mask = np.zeros(n, bool) if ins[2] is None else np.asarray(ins[2], bool)
        return [~mask, mask, every]
    if step.kind == "selector":
        term, coef = _f64(ins[0], n), _f64(ins[1], n)
        return [(coef != 0) | ~np.isfinite(term), every]
    return [every for _ in ins]


def _nonfinite_origin(plan, env, n, pick):
    """Per point, the index of the earliest step whose computed value is ``pick`` (NaN or inf)
    while none of its computed step inputs is (-1 where none)."""
    origin = np.full(n, -1)
    bad_prev = {}
    for i, s in enumerate(plan.steps):
        v = _f64(env[s.name], n) if s.fmt != "bool" else np.zeros(n)
        bad = pick(v)
        if s.where is not None:  # NaN where the step did not run is not a value
            mask = env[s.where]
            bad &= np.zeros(n, bool) if mask is None else np.asarray(mask, bool)
        inherited = np.zeros(n, bool)
        for name in s.inputs:
            if name in bad_prev:
                inherited |= bad_prev[name]
        born = bad & ~inherited
        origin = np.where((origin < 0) & born, i, origin)
        bad_prev[s.name] = bad
    return origin


@dataclass(frozen=True)
class Attribution:
    """Per-step and per-point attribution of one variant on a batch (module docstring for the columns).

    Attributes
    ----------
    steps : pandas.DataFrame
        One row per (point, step); columns :data:`STEP_COLUMNS`.
    points : pandas.DataFrame
        One row per point; columns :data:`POINT_HEAD`, the operator's inputs, :data:`POINT_TAIL`.
    formulas : dict
        Step name -> formula text.
    inputs : dict
        Step name -> tuple of its input names.
    exact_values : list of dict
        Per point, step name -> exact value (mpf), for display with more
        digits than float64 holds.
    operands : dict
        The recipe's operands (:data:`~precision.recipes.steps.RECIPE_INPUTS`) as loaded, float64 per point
        (NaN for an absent one).
    """

    steps: pd.DataFrame
    points: pd.DataFrame
    formulas: dict
    inputs: dict
    exact_values: list
    operands: dict


def operand_values(bound: BoundRecipe) -> dict:
    """The bound recipe's operands as float64 per point (``[n]``; an absent one, a None weight, as NaN)."""
    n = int(np.prod(bound.shape))
    return {name: np.full(n, np.nan) if bound.operands.get(name) is None else _f64(bound.operands[name], n)
            for name in RECIPE_INPUTS}


def _decision_memo(plan, decisions: dict | None, n: int) -> dict | None:
    """A shared-evaluation memo that makes each decision step of ``decisions`` (name -> bool, or bool per
    point) return the given values instead of its own (None: no override)."""
    if not decisions:
        return None
    memo = {}
    for name, values in decisions.items():
        if name not in plan.names:
            raise ParameterError(f"{name}={values!r} given, but this recipe has no {name} decision")
        memo[plan.keys[plan.names.index(name)]] = np.broadcast_to(np.asarray(values, dtype=bool), (n,)).copy()
    return memo


def attribute_bound(bound: BoundRecipe, *, keys: list, columns: dict, machine: str, exact_point: Callable,
                    decisions: dict | None = None, exact_cache: dict | None = None) -> Attribution:
    """Attribute a bound recipe's evaluation on a batch of ``n`` points to the steps of its recipe.

    Parameters
    ----------
    bound : BoundRecipe
        The variant's recipe bound to the batch (the operator's ``bind_recipe``).
    keys : list of hashable, length n
        Per point, what its exact values depend on (the operator's point: pred, target, attributes, ...).
    columns : dict
        The points table's input columns (name -> array [n] or scalar), in order.
    machine : str
        The machine's spec, for the points table.
    exact_point : callable
        ``exact_point(steps, fmts, key, compute_fmt) -> {step: (mpf, rounded, certified)}``: the operator's
        certified exact step values of one point (:func:`precision.analysis.exact_steps.certified_steps`).
    decisions : dict, optional
        Decision step name -> bool (or bool per point) to take instead of the batch's own (a tile-level
        decision of the tensor the points came from).
    exact_cache : dict, optional
        Kept by the caller between calls: reuses the exact values of a point already attributed with the same
        recipe configuration and formats (the exact values do not depend on the machine).
    """
    plan, m, c = bound.plan, bound.machine, bound.constants
    n = int(np.prod(bound.shape))
    ops = bound.operands
    override = _decision_memo(plan, decisions, n)
    out, env = bound.run(trace=True, memo=override, keep=set())
    compute_fmt = m.fmt
    out_fmt = get_format("fp16" if np.dtype(getattr(c, "pred_dtype", np.float32)) == np.float16 else "fp32")
    fmts = {s.name: (out_fmt if s.fmt == "output" else compute_fmt) for s in plan.steps}

    # exact values per distinct point
    context = (plan.recipe.name, plan.config, compute_fmt.name, out_fmt.name)
    cache: dict = {} if exact_cache is None else exact_cache.setdefault(context, {})
    per_point = []
    for key in keys:
        if key not in cache:
            cache[key] = exact_point(plan.steps, fmts, key, compute_fmt)
        per_point.append(cache[key])

    # exact columns per step
    exact64, rounded, certified = {}, {}, {}
    for s in plan.steps:
        if s.exact is None:
            continue
        vals = [pp[s.name] for pp in per_point]
        exact64[s.name] = np.array([mpf_to_float(v[0]) for v in vals])
        rounded[s.name] = np.array([v[1] for v in vals])
        certified[s.name] = np.array([v[2] for v in vals])

    # local evaluation on the correctly rounded exact inputs
    lm = Machine(m.model)
    local, local_ulp, cond, cause = {}, {}, {}, {}
    with np.errstate(all="ignore"):
        for i, s in enumerate(plan.steps):
            args = []
            for name in s.inputs:
                if name in RECIPE_INPUTS:
                    args.append(ops[name])
                elif name in rounded:
                    args.append(np.asarray(rounded[name], dtype=fmts[name].dtype))
                else:  # decisions, constants, untracked: the machine's own values
                    args.append(env[name])
            value = s.op(lm, c, plan.views[i], *args)
            if decisions and s.name in decisions:  # a tile's decision, not the point's
                value = env[s.name]
            local[s.name] = value
            if s.fmt == "bool":
                continue
            lv = _f64(value, n)
            if s.name not in rounded:
                continue
            r = rounded[s.name]
            fmt = fmts[s.name]
            dist = ordinal_distance(lv.astype(fmt.dtype), r.astype(fmt.dtype), fmt).astype(np.float64)
            dist = np.where(np.isnan(lv) & ~np.isnan(r), np.inf, dist)
            dist = np.where(np.isnan(r), np.nan, dist)
            local_ulp[s.name] = dist
            ins = [_input_exact(name, exact64, ops, env, n) for name in s.inputs]
            k = s.cond(c, exact64[s.name], *ins) if s.cond is not None else _default_cond(s, exact64[s.name], ins)
            cond[s.name] = np.broadcast_to(np.asarray(k, np.float64), (n,))
            cause[s.name] = _causes(s, lv, _f64(env[s.name], n), r, dist, cond[s.name], fmt,
                                    [rounded[nm] if nm in rounded else None for nm in s.inputs], m)

    # reachability, backwards through the computed decisions
    reach = {s.name: np.zeros(n, bool) for s in plan.steps}
    reach[plan.recipe.output] = np.ones(n, bool)
    for s in reversed(plan.steps):
        r = reach[s.name]
        if s.where is not None:
            mask = env[s.where]
            r = r & (np.zeros(n, bool) if mask is None else np.asarray(mask, bool))
            reach[s.name] = r
        if not r.any():
            continue
        ins = [env[name] for name in s.inputs]
        for name, use in zip(s.inputs, _uses(s, ins, n)):
            if name in reach:
                reach[name] |= r & use

    # tables
    per_step: dict = {}  # name -> one array per step, in step order
    for i, s in enumerate(plan.steps):
        computed = _f64(env[s.name], n)
        evaluated = np.ones(n, bool) if s.where is None else (
            np.zeros(n, bool) if env[s.where] is None else np.asarray(env[s.where], bool))
        fmt_name = "bool" if s.fmt == "bool" else fmts[s.name].name
        if s.fmt == "bool":
            lv = _f64(local[s.name], n)
            row_exact, row_rounded, row_cert = lv, lv, np.ones(n, bool)
            row_local, row_ulp, row_cond = lv, np.full(n, np.nan), np.full(n, np.nan)
            row_cause = np.full(n, "decision", dtype=object)
        elif s.name not in rounded:
            row_exact = row_rounded = np.full(n, np.nan)
            row_cert = np.zeros(n, bool)
            row_local = _f64(local[s.name], n)
            row_ulp, row_cond = np.full(n, np.nan), np.full(n, np.nan)
            row_cause = np.full(n, "untracked", dtype=object)
        else:
            row_exact, row_rounded, row_cert = exact64[s.name], rounded[s.name], certified[s.name]
            row_local, row_ulp, row_cond = _f64(local[s.name], n), local_ulp[s.name], cond[s.name]
            row_cause = cause[s.name]
        row_cause = np.where(evaluated, row_cause, "not_evaluated" if s.fmt != "bool" else "decision")
        row = {"point": np.arange(n), "order": np.full(n, i), "step": np.full(n, s.name, dtype=object),
               "kind": np.full(n, s.kind, dtype=object), "format": np.full(n, fmt_name, dtype=object),
               "evaluated": evaluated, "computed": np.where(evaluated, computed, np.nan), "exact": row_exact,
               "exact_rounded": row_rounded, "certified": row_cert, "local": row_local, "local_ulp": row_ulp,
               "cond": row_cond, "cause": row_cause, "reaches_output": reach[s.name] & evaluated}
        for name, values in row.items():
            per_step.setdefault(name, []).append(np.asarray(values))
    # one frame, rows point-major then in step order (the step-major stack, transposed)
    point_major = np.arange(len(plan.steps) * n).reshape(len(plan.steps), n).T.ravel()
    steps_df = pd.DataFrame({name: np.concatenate(parts)[point_major] for name, parts in per_step.items()})
    for col in ("step", "kind", "format", "cause"):
        steps_df[col] = steps_df[col].astype("category")

    # the output and the top causes
    out64 = _f64(out, n)
    name_out = plan.recipe.output
    exact_out = exact64[name_out]
    lo = np.array([low_part(pp[name_out][0], exact_out[j]) for j, pp in enumerate(per_point)])
    err = ulp_error(out64.astype(out_fmt.dtype), (exact_out, lo), out_fmt, rounded[name_out])
    top = top_causes(steps_df, plan, env, n, rounded[name_out], out64)
    points_df = pd.DataFrame({
        "point": np.arange(n), "variant": bound.variant, "machine": machine, "format": out_fmt.name, **columns,
        "computed": out64, "exact_rounded": rounded[name_out], "err_ulp": err, **top,
    })
    points_df["top_step"] = pd.Series(top["top_step"], dtype=object)  # None (not NaN) where no step
    formulas = {s.name: s.formula for s in plan.steps}
    inputs = {s.name: s.inputs for s in plan.steps}
    exact_values = [{k: v[0] for k, v in pp.items()} for pp in per_point]
    return Attribution(steps_df, points_df, formulas, inputs, exact_values, operand_values(bound))


def _input_exact(name, exact64, ops, env, n):
    if name in RECIPE_INPUTS:
        return _f64(ops[name], n) if ops[name] is not None else np.ones(n)
    if name in exact64:
        return exact64[name]
    return _f64(env[name], n)


def _causes(step, local, computed, r, dist, cond, fmt, input_rounded, m) -> np.ndarray:
    """The cause tag per point (module docstring), lowest priority first, overridden upward."""
    n = local.size
    tiny = fmt.smallest_normal
    out = np.where(dist == 0, "none", "rounding").astype(object)
    lossy = dist > 1
    with np.errstate(all="ignore"):
        if step.kind in ("add", "sub", "fma"):
            out = np.where(lossy & (cond > COND_THRESHOLD), "cancellation", out)
        if step.kind in ("exp", "ln", "pow"):
            out = np.where(lossy & (cond > COND_THRESHOLD), "sensitivity", out)
        sub_in = np.zeros(n, bool)
        inf_in = np.zeros(n, bool)
        for ri in input_rounded:
            if ri is None:
                continue
            sub_in |= (np.abs(ri) < tiny)
            inf_in |= np.isinf(ri)
        out = np.where(lossy & sub_in, "underflow", out)
        # a well-conditioned op returning 0 for a nonzero subnormal result flushed it (an
        # ill-conditioned one, like ln(1) for ln(1 - 6e-39), lost it to its input's rounding)
        flushed = (local == 0) & (r != 0) & (np.abs(r) < tiny) & ~(cond > COND_THRESHOLD)
        if m.model.daz:
            flushed |= (dist > 0) & np.array([(np.abs(ri) < tiny) & (ri != 0) for ri in input_rounded
                                              if ri is not None] or [np.zeros(n, bool)]).any(axis=0)
        out = np.where((dist > 0) & flushed, "flush", out)
        if step.kind == "clamp":
            out = np.where(dist > 0, "clamp", out)
        finite_r = np.isfinite(r)
        over = finite_r & (np.isinf(local) | np.isinf(computed) | ((dist > 0) & inf_in))
        out = np.where(over, "overflow", out)
        out = np.where(np.isnan(computed) & ~np.isnan(r), "nan_propagation", out)
    return out


def top_causes(steps_df: pd.DataFrame, plan, env, n: int, exact_out, out64) -> dict:
    """The top cause per point: a dict of ``top_step``, ``top_cause``, ``top_local_ulp``, ``top_cond`` arrays.

    Rules, in order:

    1. the output is NaN where the exact value is not: the reaching step where
       that NaN was born (computed NaN from non-NaN inputs), cause
       ``nan_propagation``;
    2. the output is +-inf where the exact value rounds to a finite one: the
       reaching step where the inf was born, cause ``overflow``;
    3. otherwise the step with the largest local error among those that reach
       the output; of the steps within :data:`TOP_TIE_RATIO` of it, the
       earliest (an upstream loss explains the downstream ones it feeds).
       No step: ``top_step`` None and cause ``none`` (every local error 0).

    Herbie's local error cannot see a NaN or inf made from upstream errors
    (each step is re-run on correct inputs), hence rules 1 and 2.
    """
    names = plan.names
    ulp = steps_df["local_ulp"].to_numpy().reshape(n, len(names))
    reach = steps_df["reaches_output"].to_numpy().reshape(n, len(names))
    causes = steps_df["cause"].astype(object).to_numpy().reshape(n, len(names))
    conds = steps_df["cond"].to_numpy().reshape(n, len(names))
    score = np.where(reach & ~np.isnan(ulp), ulp, -1.0)
    best = score.max(axis=1)
    within = (score >= TOP_TIE_RATIO * best[:, None]) & (score > 0)
    idx = np.where(within.any(axis=1), within.argmax(axis=1), -1)
    cause_of = np.where(idx >= 0, causes[np.arange(n), np.maximum(idx, 0)], "none").astype(object)
    with np.errstate(invalid="ignore"):
        nan_out = np.isnan(out64) & ~np.isnan(exact_out)
        inf_out = np.isinf(out64) & np.isfinite(exact_out)
    for mask, pick, tag in ((nan_out, np.isnan, "nan_propagation"), (inf_out, np.isinf, "overflow")):
        if mask.any():
            origin = _nonfinite_origin(plan, env, n, pick)
            ok = mask & (origin >= 0) & reach[np.arange(n), np.maximum(origin, 0)]
            idx = np.where(ok, origin, idx)
            cause_of = np.where(ok, tag, cause_of)
    rows = np.arange(n)
    safe = np.maximum(idx, 0)
    return {
        "top_step": np.where(idx >= 0, np.asarray(names, dtype=object)[safe], None),
        "top_cause": cause_of,
        "top_local_ulp": np.where(idx >= 0, ulp[rows, safe], 0.0),
        "top_cond": np.where(idx >= 0, conds[rows, safe], np.nan),
    }


# ---------------------------------------------------------------------------
# One sentence for the top cause
# ---------------------------------------------------------------------------

def _near_one(v: float, fmt) -> str | None:
    """``1 - k ulp(1)`` for a value within 2^-8 of 1."""
    if not math.isfinite(v) or abs(v - 1.0) >= 2.0**-8 or v == 1.0:
        return None
    k = (1.0 - v) / math.ldexp(1.0, 1 - fmt.prec)
    return f"1 {'-' if k > 0 else '+'} {abs(k):g} ulp(1)"


def describe(att: Attribution, point: int = 0) -> str:
    """One sentence on a point's top cause, e.g. ``q = 1 - p: p rounds to 1 - 2 ulp(1) ...``."""
    rows = att.steps[att.steps["point"] == point].set_index("step", drop=False)
    top = att.points.loc[point]
    step = top["top_step"]
    if not isinstance(step, str):
        return "every step that reaches the output is correctly rounded from correctly rounded inputs (local error 0)"
    row = rows.loc[step]
    head = f"{step} = {att.formulas[step]}"
    lu = float(row["local_ulp"])
    cause = top["top_cause"]
    fmt = get_format(row["format"]) if row["format"] != "bool" else get_format("fp32")
    ins = [n for n in att.inputs[step] if n in rows.index]

    def said(name):
        r = rows.loc[name]
        near = _near_one(float(r["exact_rounded"]), fmt)
        return f"{name} rounds to {near}" if near else \
            f"{name} rounds to {float(r['exact_rounded']):.9g} (exact {float(r['exact']):.9g})"

    if cause == "nan_propagation":
        bits = ", ".join(f"{n} = {float(rows.loc[n, 'computed']):g}" for n in ins)
        text = f"{head} is NaN ({bits})"
        leaks = rows[(rows["kind"] == "selector") & rows["reaches_output"]]
        for name in leaks.index:
            term, coef = att.inputs[name]
            coef_value = rows.loc[coef, "computed"] if coef in rows.index else att.operands[coef][point]
            if np.isnan(rows.loc[term, "computed"]) and coef_value == 0:
                text += (f" in the unselected term: {name} = {att.formulas[name]} has coefficient 0, "
                         f"and 0 * NaN = NaN reaches the output")
                break
        return text
    if cause == "overflow":
        return (f"{head} overflows to {float(row['computed']):g} where the exact value is "
                f"{float(row['exact']):.6g}" + (f" ({', '.join(said(n) for n in ins)})" if ins else ""))
    if cause == "cancellation":
        text = (f"{head}: {', '.join(said(n) for n in ins) or 'its inputs are exact'}; "
                f"{step} loses {fmt_num(lu)} ulp (condition number {fmt_num(float(row['cond']))})")
    elif cause == "sensitivity":
        text = (f"{head}: condition number {fmt_num(float(row['cond']))}, so the rounding of its input "
                f"({', '.join(said(n) for n in ins) or 'a constant'}) becomes {fmt_num(lu)} ulp")
    elif cause == "clamp":
        text = (f"{head}: the exact value {float(row['exact']):.6g} lies beyond the clamp's bound; the clamp "
                f"moves it by {fmt_num(lu)} ulp")
    elif cause == "flush":
        text = (f"{head}: the exact result {float(row['exact']):.6g} is subnormal and the machine flushes it "
                f"to zero ({fmt_num(lu)} ulp)")
    elif cause == "underflow":
        small = [n for n in ins if abs(float(rows.loc[n, "exact_rounded"])) < fmt.smallest_normal]
        text = (f"{head}: {', '.join(said(n) for n in small)} (subnormal or zero) keeps too few bits; "
                f"{fmt_num(lu)} ulp lost")
    else:
        text = f"{head}: {fmt_num(lu)} ulp of {cause}"
    others = rows[(rows["reaches_output"]) & (rows.index != step) & (rows["local_ulp"] >= TOP_TIE_RATIO * lu)
                  & rows["cause"].isin(["cancellation", "sensitivity", "clamp", "flush", "underflow", "overflow"])]
    for name in list(others.index)[:2]:
        loss = fmt_num(float(others.loc[name, "local_ulp"]))
        text += f"; {name} = {att.formulas[name]} has the same order of loss ({loss} ulp, {others.loc[name, 'cause']})"
    return text
