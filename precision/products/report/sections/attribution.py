"""Where the error is born: the run's attribution of its kept points to the steps of each recipe.

Reads the run's ``attribution.csv`` and ``attribution_guards.csv`` (written by
:mod:`precision.engine.attribution_table` when the study asks for ``[run] attribution``); a run
without them has no such section, and "what dominates the error" then describes its
witnesses instead.  Tables:

``attribution_causes.csv``
    Per (variant, machine, format) and top cause (``step``, ``cause``): ``points`` (attributed
    points with this top cause), ``share`` (of the (variant, machine, format)'s attributed points),
    ``over_1ulp`` (of them, scored over 1 ulp or special), ``predicted``, ``max_err_ulp`` with its
    witness (``witness_target``, ``witness_region``, ``witness_gamma``, ``witness_pred``) and the
    top step's ``witness_cond`` there, ``mismatched``.
``attribution_confusion.csv``
    Herbie's check of the causes, per (variant, machine, format): predicted erroneous (a top cause
    in :data:`precision.engine.attribution_table.PREDICTED_CAUSES`) against actually over 1 ulp or special:
    ``tp``, ``fp``, ``fn``, ``tn``, ``precision``, ``recall`` (:func:`precision.engine.attribution_table.confusion_table`).
``attribution_guards.csv``
    Per guard or G5-threshold comparison, attributed variant and format (over machines and
    profiles): ``points``, ``differ`` (a step's value differs between the two variants),
    ``changed`` (the output differs), ``acts`` (the guard changes the top-cause step),
    ``upstream`` (the top step lies before the first difference), ``better``, ``worse``, the most
    frequent ``first_step`` where they differ (``first_points``) and the most frequent top cause
    there (``top_step``, ``top_cause``, ``top_points``).

:func:`dominant_causes` serves the dominant section: the causes per (variant, format, selector,
region) over the machines.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from precision.engine.attribution_table import confusion_table
from precision.products.report.document import Details, Para, Section, Table
from precision.products.report.findings import Cite, Finding, cite, fmt_num
from precision.products.report.tables import ordered

__all__ = ["build", "read_attribution", "dominant_causes", "cause_table", "guard_summary", "step_formula"]

T_CAUSES = "attribution_causes.csv"
T_CONFUSION = "attribution_confusion.csv"
T_GUARDS = "attribution_guards.csv"


def _csv(path):
    return pd.read_csv(path, dtype={"region": str, "step": str, "top_step": str, "first_step": str},
                       keep_default_na=False, na_values=["", "NaN", "nan"])


def read_attribution(run) -> tuple:
    """(``attribution.csv``, ``attribution_guards.csv``) of a run folder; None for a missing file."""
    out = []
    for name in ("attribution.csv", "attribution_guards.csv"):
        path = run.folder / name
        out.append(_csv(path) if path.is_file() else None)
    return tuple(out)


def step_formula(variant: str, step: str, op) -> str:
    """``q = 1 - p``: a step of the recipe of a variant of the operator ``op`` with its formula (the name alone if
    unknown)."""
    try:
        call = op.recipe_call(variant)
        return f"{step} = {call.recipe.plan(call.config).step(step).formula}"
    except (KeyError, ValueError, AttributeError):
        return step


def _witness_rows(frame: pd.DataFrame, keys: list) -> pd.DataFrame:
    """Per ``keys`` group, the row with the largest error (first in table order on ties)."""
    e = frame["max_err_ulp"].fillna(np.inf)
    return frame.assign(_e=e).sort_values("_e", ascending=False, kind="stable").groupby(
        keys, sort=False, dropna=False).head(1).drop(columns="_e")


def _witness_terms(run) -> list:
    """The operator's terms attribute (gamma), as a witness column of the cause tables; none without one."""
    term = run.operator.TERMS_ATTRIBUTE
    return [term] if term is not None else []


def _aggregate(causes: pd.DataFrame, keys: list, terms: list) -> pd.DataFrame:
    """The run's cause rows summed over everything but ``keys`` (+ step, cause), with the worst witness
    (``terms``: the terms attribute, :func:`_witness_terms`)."""
    by = keys + ["step", "cause"]
    t = causes.groupby(by, sort=False, dropna=False).agg(
        points=("points", "sum"), over_1ulp=("over_1ulp", "sum"), predicted=("predicted", "first"),
        max_err_ulp=("max_err_ulp", "max"), mismatched=("mismatched", "sum")).reset_index()
    w = _witness_rows(causes, by).set_index(by)
    idx = pd.MultiIndex.from_frame(t[by])
    for src, dst in (("machine", "witness_machine"), ("target", "witness_target"), ("region", "witness_region"),
                     *((term, f"witness_{term}") for term in terms), ("witness_pred", "witness_pred"),
                     ("witness_cond", "witness_cond"), ("witness_local_ulp", "witness_local_ulp")):
        if src not in keys:
            t[dst] = w.loc[idx, src].to_numpy()
    t["group_points"] = t.groupby(keys, sort=False, dropna=False)["points"].transform("sum")
    t["group_over_1ulp"] = t.groupby(keys, sort=False, dropna=False)["over_1ulp"].transform("sum")
    t = t.assign(_o=-t["over_1ulp"], _p=-t["points"], _e=-t["max_err_ulp"].fillna(np.inf))
    return t


def cause_table(run, causes: pd.DataFrame) -> pd.DataFrame:
    """``attribution_causes.csv``: per (variant, machine, format) and top cause, over the groups."""
    keys = ["variant", "machine", "format"]
    terms = _witness_terms(run)
    t = _aggregate(causes, keys, terms)
    t["share"] = t["points"] / t["group_points"]
    variants = {v: i for i, v in enumerate(run.variants)}
    machines = {m: i for i, m in enumerate(run.machines)}
    t = t.assign(_v=t["variant"].map(variants), _m=t["machine"].map(machines))
    t = t.sort_values(["_v", "_m", "format", "_o", "_p", "_e"], kind="stable")
    cols = keys + ["step", "cause", "predicted", "points", "share", "over_1ulp", "max_err_ulp", "witness_target",
                   "witness_region", *(f"witness_{term}" for term in terms), "witness_pred", "witness_cond",
                   "mismatched"]
    return t[cols].reset_index(drop=True)


def dominant_causes(run, variants) -> pd.DataFrame:
    """Per (variant, format, selector, region) of the variants and top cause, over the machines and gammas.

    Columns: the keys, ``step``, ``cause``, ``predicted``, ``points``, ``over_1ulp``, ``share_pct``
    (of the group's attributed points over 1 ulp, in percent, one decimal), ``max_err_ulp``,
    ``witness_machine``, ``witness_gamma``, ``witness_pred``, ``witness_cond``,
    ``witness_local_ulp``, ``group_points``, ``group_over_1ulp``; rows by group, then by points
    over 1 ulp (most first).  Empty without ``attribution.csv``.
    """
    causes, _ = read_attribution(run)
    if causes is None or causes.empty:
        return pd.DataFrame()
    causes = causes[causes["variant"].isin(variants)]
    if causes.empty:
        return pd.DataFrame()
    keys = ["variant", "format", "target", "region"]
    terms = _witness_terms(run)
    t = _aggregate(causes, keys, terms)
    with np.errstate(invalid="ignore", divide="ignore"):
        t["share_pct"] = np.where(t["group_over_1ulp"] > 0,
                                  np.round(100.0 * t["over_1ulp"] / t["group_over_1ulp"].clip(lower=1), 1), np.nan)
    t = t.sort_values(["_o", "_p", "_e"], kind="stable")
    cols = keys + ["step", "cause", "predicted", "points", "over_1ulp", "share_pct", "max_err_ulp", "witness_machine",
                   *(f"witness_{term}" for term in terms), "witness_pred", "witness_cond", "witness_local_ulp",
                   "group_points", "group_over_1ulp"]
    return t[cols].reset_index(drop=True)


def guard_summary(run, guards: pd.DataFrame) -> pd.DataFrame:
    """``attribution_guards.csv`` of the report: per comparison, attributed variant and format."""
    keys = ["kind", "subject", "comparison", "with_variant", "without_variant", "attributed", "format"]
    rows = []
    for key, g in guards.groupby(keys, sort=False):
        d = g[g["first_step"] != "none"]
        first = d.groupby("first_step", sort=False)["points"].sum()
        tops = d.groupby(["top_step", "top_cause"], sort=False)["points"].sum()
        f_name, f_n = (first.idxmax(), int(first.max())) if len(first) else ("none", 0)
        (t_step, t_cause), t_n = (tops.idxmax(), int(tops.max())) if len(tops) else (("none", "none"), 0)
        rows.append({**dict(zip(keys, key)), "points": int(g["points"].sum()), "differ": int(d["points"].sum()),
                     "changed": int(g["changed"].sum()), "acts": int(g["acts"].sum()),
                     "upstream": int(g.loc[g["relation"] == "upstream", "points"].sum()),
                     "better": int(g["better"].sum()), "worse": int(g["worse"].sum()), "first_step": f_name,
                     "first_points": f_n, "top_step": t_step, "top_cause": t_cause, "top_points": t_n})
    t = pd.DataFrame(rows)
    return t if t.empty else t.reset_index(drop=True)


def _confusion_finding(c: pd.DataFrame, i: int) -> Finding:
    r = c.iloc[i]
    w = {"variant": r["variant"], "machine": r["machine"], "format": r["format"]}
    n = {k: cite(k, T_CONFUSION, c, w, k) for k in ("points", "flagged", "tp", "fp", "fn", "tn", "precision",
                                                     "recall")}
    unflagged = Cite("unflagged", int(r["fn"] + r["tn"]), fmt_num(int(r["fn"] + r["tn"])), op="sum", of=["fn", "tn"])
    text = (f"{r['variant']} on {r['machine']}, {r['format']}: of {n['points'].text} attributed points, "
            f"{n['flagged'].text} have a top cause that predicts an error, {n['tp'].text} of them over 1 ulp (TP) "
            f"and {n['fp'].text} within (FP); of the {unflagged.text} others, {n['fn'].text} are over 1 ulp (FN) "
            f"and {n['tn'].text} within (TN)")
    nums = [n["points"], n["flagged"], n["tp"], n["fp"], unflagged, n["fn"], n["tn"]]
    stats = []
    if r["flagged"]:
        stats.append(f"precision {n['precision'].text}")
        nums.append(n["precision"])
    if r["tp"] + r["fn"]:
        stats.append(f"recall {n['recall'].text}")
        nums.append(n["recall"])
    return Finding(f"attribution/confusion/{i}", "attribution", text + (": " + ", ".join(stats) if stats else "")
                   + ".", nums, 70 + i)


def _guard_finding(g: pd.DataFrame, i: int) -> Finding:
    r = g.iloc[i]
    w = {"comparison": r["comparison"], "attributed": r["attributed"], "format": r["format"]}
    n = {k: cite(k, T_GUARDS, g, w, k) for k in ("points", "differ", "first_points", "top_points", "acts",
                                                  "upstream", "changed", "better", "worse")}
    head = f"{r['subject']} ({r['comparison']}), {r['format']}"
    acts = ("the guard never changes the top-cause step itself" if r["acts"] == 0 else
            f"the guard changes the top-cause step itself at {n['acts'].text}")
    text = (f"{head}: at {n['differ'].text} of the {n['points'].text} attributed {r['attributed']} points a step "
            f"differs, first at {r['first_step']} ({n['first_points'].text}); there the error is born mostly at "
            f"{r['top_step']} ({r['top_cause']}, {n['top_points'].text} points); the top-cause step comes before the "
            f"first difference (the same value with and without) at {n['upstream'].text}, and {acts}; the output "
            f"changes at {n['changed'].text} ({n['better'].text} better, {n['worse'].text} worse).")
    nums = [n[k] for k in ("differ", "points", "first_points", "top_points", "upstream", "changed", "better", "worse")]
    if r["acts"]:
        nums.append(n["acts"])
    return Finding(f"attribution/guard/{i}", "attribution", text, nums, 80 + i)


def build(ctx) -> Section:
    run = ctx.run
    causes, guards = read_attribution(run)
    section = Section("attribution", "Where the error is born: attribution of the kept points")
    if causes is None or causes.empty:
        return section
    ct = cause_table(run, causes)
    conf = confusion_table(causes)
    conf = ordered(conf, run).reset_index(drop=True)
    section.tables[T_CAUSES] = ct
    section.tables[T_CONFUSION] = conf
    variants = list(dict.fromkeys(causes["variant"]))
    total = int(causes["points"].sum())
    mismatched = int(causes["mismatched"].sum())
    section.body = [
        Para(f"{', '.join(variants)}: {total:,} kept points attributed to the steps of their recipe "
             "(precision.attribution: each step re-run on the correctly rounded exact values of its inputs, Herbie's "
             "local error, tagged with a cause; the top cause of a point is where a NaN or inf was born, else the "
             "earliest reaching step within a factor 2 of the largest local error). Local errors are in ulps of the "
             "compute format (fp32); an fp16 output can absorb them."),
        Para("Every attributed output reproduces the run's bits (G4's tile decision taken from the run's task tensor)."
             if mismatched == 0 else
             f"Warning: {mismatched:,} attributed outputs differ in bits from the run's (column mismatched): their "
             "attribution describes another evaluation than the one scored.", "note"),
        Table(conf, T_CONFUSION, note=" (predicted erroneous: a top cause among nan_propagation, overflow, clamp, "
              "flush, underflow, cancellation, sensitivity; actual: scored over 1 ulp or special)"),
        Details("Top causes per variant, machine and format", [Table(ct, T_CAUSES)]),
    ]
    section.findings = [_confusion_finding(conf, i) for i in range(len(conf))]
    if guards is not None and not guards.empty:
        gs = guard_summary(run, guards)
        section.tables[T_GUARDS] = gs
        section.findings += [_guard_finding(gs, i) for i in range(len(gs)) if gs["differ"].iloc[i] > 0]
        silent = gs[gs["differ"] == 0]
        if len(silent):
            names = [f"{r['subject']} ({r['comparison']}, {r['format']})" for _, r in silent.iterrows()]
            section.findings.append(Finding("attribution/guard/silent", "attribution",
                                            "No step differs at the attributed points for " + "; ".join(names) + ".",
                                            [], 80 + len(gs)))
        section.body.append(Details(
            "Guards: where each guard changes a step, against where the error is born",
            [Para("Both variants of each comparison of one recipe traced on the attributed points of one of them "
                  "(the without variant when attributed): differ, the points where a step's value differs; "
                  "first_step, the first such step in recipe order (most frequent); top_step and top_cause, the "
                  "attributed variant's top cause there (most frequent); acts, the points where the guard changes "
                  "the top-cause step itself; upstream, where the top-cause step comes before the first difference "
                  "(its value is the same with and without: the guard can at most route around it"
                  + (f", {run.operator.PHRASES['routes_around']}" if "routes_around" in run.operator.PHRASES else "")
                  + ")."), Table(gs, T_GUARDS)]))
    return section
