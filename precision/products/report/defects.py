"""The production kernel's defects on a run's points: special outputs and errors over 2^20 ulp, by input class.

:func:`defect_table` writes ``defects.csv``, one row per machine, format and input class of the run's
subject variant (:data:`SUBJECT`, the production kernel), columns:

``machine``, ``format``, ``inputs``
    the cell; ``inputs`` is one of :data:`INPUT_CLASSES`: realistic inputs first (the operator's terms
    attribute, gamma, at least 0 and logits inside +-:data:`MODERATE_LOGIT`), then gamma >= 0 at large
    logits, then gamma < 0 (a run without a terms attribute has the logit classes only);
``count``, ``special``, ``nan``, ``inf``, ``wrong_sign``, ``lost_inf``, ``over_1ulp``
    outputs of the class and how many are special (NaN, inf, wrong sign, lost inf) or over 1 ulp;
``max_finite_ulp`` and ``witness_*``
    the largest finite error and the point where it is (hex inputs);
``special_witness_*``
    a point with a special output (the worst), when there is one;
``step``, ``cause``, ``explain``
    where that defect is born (the step and cause ``precision explain`` shows at the special witness when
    there are special outputs, else at the largest finite error) and the line that shows it;
``fix_variant``, ``fix_special``, ``fix_max_finite_ulp``
    the candidate's special outputs and largest finite error on the same class, when the run has it
    (what would fix the defect), else empty.

A class is a defect when it has special outputs or a finite error over :data:`DEFECT_ULP`
(:func:`defect_rows`).  The report's answers open with these (:func:`defect_lines`), before the guards.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from precision.analysis.paired import GARBAGE_ULP
from precision.products.report.findings import fmt_num
from precision.products.report.mechanism import attribute_witness, explain_line, witness_at
from precision.products.report.tables import region_bounds
from precision.recipes.target_kinds import target_text

__all__ = ["SUBJECT", "FIX_VARIANT", "MODERATE_LOGIT", "DEFECT_ULP", "INPUT_CLASSES", "defect_table", "defect_rows",
           "defect_lines", "input_class_text"]

#: The variant whose defects a report lists: the production kernel.
SUBJECT = "kernel"
#: The variant that may fix them.
FIX_VARIANT = "candidate"
#: Logits inside +-this are moderate (realistic: a sigmoid input past 20 is saturated in float32 anyway).
MODERATE_LOGIT = 20.0
#: A finite error over this many ulp is a defect (the verdicts' garbage bound).
DEFECT_ULP = GARBAGE_ULP
#: The input classes, realistic first.
INPUT_CLASSES = ("realistic", "large_logits", "negative_gamma")

_COUNTS = ["count", "nan", "inf", "wrong_sign", "lost_inf", "over_1ulp"]
_WITNESS = ["pred", "target", "weight", "dout"]


def input_class_text(inputs: str, term: str | None = "gamma") -> str:
    """The words of an input class: ``gamma >= 0, |x| < 20`` (realistic)."""
    m = fmt_num(MODERATE_LOGIT)
    if term is None:
        return {"realistic": f"|x| < {m}", "large_logits": f"|x| >= {m}"}.get(inputs, inputs)
    return {"realistic": f"{term} >= 0, |x| < {m}", "large_logits": f"{term} >= 0, |x| >= {m}",
            "negative_gamma": f"{term} < 0"}[inputs]


def _moderate(run) -> dict:
    """region label -> whether the region lies inside +-MODERATE_LOGIT (from the run's region edges)."""
    return {r: lo >= -MODERATE_LOGIT and hi <= MODERATE_LOGIT for r, (lo, hi) in region_bounds(run).items()}


def _classes(run, variant: str) -> pd.DataFrame:
    """The variant's fine rows (machine, format, profile, region, term) with their input class."""
    term = run.operator.TERMS_ATTRIBUTE
    keys = ["variant", "machine", "format", "profile", "region", *([term] if term else [])]
    merged = run.stats.merge_frame(keys)
    rows = merged[(merged["variant"] == variant) & ~merged["region"].isin(list(run.separate))].copy()
    if rows.empty:
        return rows
    moderate = rows["region"].map(_moderate(run)).fillna(False).astype(bool).to_numpy()
    negative = (rows[term].to_numpy(np.float64) < 0) if term else np.zeros(len(rows), bool)
    rows["inputs"] = np.where(negative, "negative_gamma", np.where(moderate, "realistic", "large_logits"))
    return rows


def _worst(rows: pd.DataFrame, column: str):
    values = rows[column].to_numpy(np.float64)
    if not len(values) or np.all(np.isnan(values)):
        return None
    return rows.iloc[int(np.nanargmax(values))]


def defect_table(run) -> pd.DataFrame:
    """``defects.csv`` of a run (module docstring); empty when the run has no :data:`SUBJECT` variant."""
    if SUBJECT not in run.variants:
        return pd.DataFrame()
    rows = _classes(run, SUBJECT)
    fix = _classes(run, FIX_VARIANT) if FIX_VARIANT in run.variants else pd.DataFrame()
    attrs = list(run.operator.ATTRIBUTES)
    out = []
    for (machine, fmt, profile), cell in rows.groupby(["machine", "format", "profile"], sort=False):
        for inputs in INPUT_CLASSES:
            part = cell[cell["inputs"] == inputs]
            if part.empty:
                continue
            rec = {"machine": machine, "format": fmt, "profile": profile, "inputs": inputs,
                   **{c: int(part[c].sum()) for c in _COUNTS}}
            rec["special"] = rec["nan"] + rec["inf"] + rec["wrong_sign"] + rec["lost_inf"]
            top = _worst(part, "max_finite_ulp")
            rec["max_finite_ulp"] = float(top["max_finite_ulp"]) if top is not None else math.nan
            for k in (*_WITNESS, *attrs):
                rec[f"witness_{k}"] = top[f"finite_witness_{k}"] if top is not None else None
            special = part[part["max_ulp"].to_numpy(np.float64) == np.inf] if rec["special"] else part.iloc[:0]
            sp = special.iloc[0] if len(special) else None
            for k in (*_WITNESS, *attrs):
                rec[f"special_witness_{k}"] = sp[f"witness_{k}"] if sp is not None else None
            step = cause = explain = None
            source, prefix = (sp, "witness_") if sp is not None else (top, "finite_witness_")
            if source is not None and (sp is not None or rec["max_finite_ulp"] > DEFECT_ULP):
                w = witness_at(run, SUBJECT, source, prefix, profile)
                if w is not None:
                    step, cause = attribute_witness(w, run.operator)
                    explain = explain_line(w)
            rec.update(step=step, cause=cause, explain=explain)
            mine = fix[(fix["machine"] == machine) & (fix["profile"] == profile) & (fix["inputs"] == inputs)] \
                if len(fix) else fix
            rec["fix_variant"] = FIX_VARIANT if len(mine) else None
            rec["fix_special"] = int(mine[["nan", "inf", "wrong_sign", "lost_inf"]].to_numpy().sum()) \
                if len(mine) else None
            rec["fix_max_finite_ulp"] = float(mine["max_finite_ulp"].max()) if len(mine) else None
            out.append(rec)
    frame = pd.DataFrame(out)
    if len(frame):
        frame["fix_special"] = frame["fix_special"].astype("Int64")
    return frame


def defect_rows(t: pd.DataFrame) -> pd.DataFrame:
    """The rows of ``defects.csv`` that are defects (special outputs, or a finite error over :data:`DEFECT_ULP`),
    realistic inputs first, then by how many outputs are special, then by the largest finite error."""
    if t is None or t.empty:
        return pd.DataFrame()
    d = t[(t["special"] > 0) | (t["max_finite_ulp"] > DEFECT_ULP)].copy()
    d["_class"] = d["inputs"].map({c: i for i, c in enumerate(INPUT_CLASSES)})
    return d.sort_values(["_class", "special", "max_finite_ulp"], ascending=[True, False, False],
                         kind="stable").drop(columns="_class")


def _hexdec(h) -> str:
    if h is None or (isinstance(h, float) and math.isnan(h)):
        return "?"
    v = float.fromhex(h) if isinstance(h, str) and "0x" in h else float(h)
    return f"{fmt_num(v)}"


def _fix(r) -> str:
    """What fixes a defect: the candidate when it has no special output and no error over DEFECT_ULP there."""
    if not isinstance(r.get("fix_variant"), str):
        return "nothing measured in this study (no candidate run)"
    sp, mx = int(r["fix_special"]), float(r["fix_max_finite_ulp"])
    size = f"{fmt_num(sp)} special outputs, max {fmt_num(mx)} ulp there"
    return f"the candidate ({size})" if not sp and mx <= DEFECT_ULP else f"nothing yet (the candidate: {size})"


def defect_lines(t: pd.DataFrame, term: str | None = "gamma") -> list:
    """One line per defect (:func:`defect_rows`) with its size, place, step, cause and fix; machines whose
    defect reads the same (same counts, place and cause) share one line (``ieee, npu fp32, ...``)."""
    lines, at = [], {}
    for r in defect_rows(t).to_dict("records"):
        what = []
        if r["special"]:
            kinds = [f"{fmt_num(int(r[k]))} {k.replace('_', ' ')}" for k in ("nan", "wrong_sign", "inf", "lost_inf")
                     if r[k]]
            what.append(f"{' and '.join(kinds).replace('nan', 'NaN')} of {fmt_num(int(r['count']))} outputs "
                        f"(first at pred={_hexdec(r['special_witness_pred'])}"
                        + (f" {term}={_hexdec(r.get(f'special_witness_{term}'))}" if term else "") + ")")
        if r["max_finite_ulp"] > DEFECT_ULP:
            what.append(f"finite errors up to {fmt_num(float(r['max_finite_ulp']))} ulp (at pred="
                        f"{_hexdec(r['witness_pred'])}" + (f" {term}={_hexdec(r.get(f'witness_{term}'))}" if term
                                                           else "") + f" t={target_text(r['witness_target'])})")
        born = f"born at step {r['step']} ({r['cause']})" if r.get("step") else "step not attributed"
        body = f"{'; '.join(what)}; {born}; fixed by: {_fix(r)}"
        key = (r["format"], r["inputs"], body)
        if key in at:
            lines[at[key]][0].append(r["machine"])
        else:
            at[key] = len(lines)
            lines.append(([r["machine"]], r["format"], r["inputs"], body))
    return [f"{', '.join(m)} {fmt}, {input_class_text(inputs, term)}: {body}" for m, fmt, inputs, body in lines]
