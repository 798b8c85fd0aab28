"""Mechanism and place of a verdict: where its better and worse outputs lie, and why, from its witnesses.

For a verdict row of ``verdicts.csv`` (one comparison, machine, format and profile, pooled regions):

``where``
    the regions holding most of its better and of its worse outputs (from the per-region rows);
``gain`` / ``loss``
    the witness of the largest gain and of the largest loss in bits (the sweep's ``gain_witness_*`` /
    ``loss_witness_*``), attributed (:func:`precision.operators.sigmoid_focal_loss_grad.attribution.attribute`) on the variant whose error
    it is: at the largest gain the ``without`` variant (what goes wrong without the subject), at the
    largest loss the ``with`` variant (what the subject does wrong); each with its top step and cause
    and the ready ``precision explain`` command line that shows it step by step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from precision.products.report.answers import (effect_short, magnitude, magnitude_cites, magnitude_sentence,
                                               region_shares)
from precision.products.report.findings import cite
from precision.products.report.tables import region_text
from precision.engine.operators import DEFAULT_OPERATOR, get_operator
from precision.io.shell import shell_join
from precision.recipes.target_kinds import parse_target_text, target_text

__all__ = ["Witness", "witness_of", "explain_command", "explain_line", "attribute_witness", "task_counts",
           "mechanism_of", "witness_at", "effect_of", "Effect"]


@dataclass(frozen=True)
class Witness:
    """One point of a run: the variant to explain and its inputs (hex strings, ``weight`` None when absent;
    ``attributes``: ``(name, hex)`` of each of the operator's attributes, in its order)."""

    variant: str
    machine: str
    format: str
    pred: str
    target: int
    attributes: tuple
    weight: str | None
    dout: str
    count: int
    operator: str = DEFAULT_OPERATOR

    def as_dict(self) -> dict:
        """The fields by name, the attributes among them (as findings.json records a witness)."""
        return {"variant": self.variant, "machine": self.machine, "format": self.format, "pred": self.pred,
                "target": self.target, **dict(self.attributes), "weight": self.weight, "dout": self.dout,
                "count": self.count}


def _hex(v) -> str | None:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, str):
        if v == "none":
            return None
        v = float.fromhex(v) if "0x" in v else float(v)
    v = float(v)
    mant, exp = v.hex().split("p")
    return f"{mant.rstrip('0').rstrip('.')}p{exp}"


_COUNTS: dict = {}


def task_counts(run) -> pd.DataFrame:
    """The mean reduction's count of each task of the run (machine, profile, attribute values, weight, dout),
    from points.parquet (read once per run folder)."""
    path = run.folder / "points.parquet"
    key = (str(path), path.stat().st_mtime_ns)
    if key not in _COUNTS:
        cols = ["machine", "profile", *run.operator.ATTRIBUTES, "weight", "dout", "count"]
        _COUNTS[key] = run.points(cols).drop_duplicates().reset_index(drop=True)
    return _COUNTS[key]


def _same(col: pd.Series, value) -> np.ndarray:
    h = _hex(value)
    return col.map(_hex).eq(h).to_numpy() if h is not None else col.map(_hex).isna().to_numpy()


def witness_at(run, variant: str, row, prefix: str, profile: str | None = None) -> Witness | None:
    """The point named by ``row``'s ``<prefix>pred``, ``<prefix>target`` .. ``<prefix>dout`` columns (and its
    ``machine``, ``format``, ``profile``), as a :class:`Witness` of ``variant`` with its task's count."""
    pred = row.get(f"{prefix}pred")
    if pred is None or (isinstance(pred, float) and math.isnan(pred)):
        return None
    profile = profile or row.get("profile") or row["format"]
    counts = task_counts(run)
    sel = counts[(counts["machine"] == row["machine"]) & (counts["profile"] == profile)]
    names = list(run.operator.ATTRIBUTES)
    for k in (*names, "weight", "dout"):
        sel = sel[_same(sel[k], row.get(f"{prefix}{k}"))]
    count = int(sel["count"].iloc[0]) if len(sel) else 1
    return Witness(variant, row["machine"], row["format"], _hex(pred), parse_target_text(row[f"{prefix}target"]),
                   tuple((k, _hex(row[f"{prefix}{k}"])) for k in names), _hex(row.get(f"{prefix}weight")),
                   _hex(row[f"{prefix}dout"]), count, run.operator_name)


def witness_of(run, row, side: str) -> Witness | None:
    """The witness of the largest ``gain`` or ``loss`` of a verdict row, on the variant whose error it is."""
    variant = row["without_variant"] if side == "gain" else row["with_variant"]
    return witness_at(run, variant, row, f"{side}_witness_")


def explain_command(operator: str, variant: str, machine: str, fmt: str, pred: str, target: int, attributes,
                    weight: str | None, dout: str | None, count: int | None = None) -> str:
    """The ``precision explain`` command line of one point of ``operator`` (named, so that it runs that operator
    whatever the default), with the inputs that operator has (its ``INPUTS``; ``count`` when given).  Inputs are
    hex strings; ``attributes``: ``(name, hex)`` pairs in the operator's order."""
    inputs = get_operator(operator).INPUTS
    words = ["precision", "explain", variant, "--operator", operator, "--pred", pred, "--target", target_text(target)]
    words += [word for name, value in attributes for word in (f"--{name}", value)]
    words += ["--weight", weight] if weight is not None else []
    words += ["--dout", dout] if "dout" in inputs and dout is not None else []
    words += ["--count", count] if "count" in inputs and count is not None else []
    return shell_join([*words, "--machine", machine, "--format", fmt])


def explain_line(w: Witness) -> str:
    """The ``precision explain`` command line that shows the witness step by step (:func:`explain_command`)."""
    return explain_command(w.operator, w.variant, w.machine, w.format, w.pred, w.target, w.attributes, w.weight,
                           w.dout, w.count)


_MEMO: dict = {}


def attribute_witness(w: Witness, op) -> tuple[str, str]:
    """(top step, top cause) of the witness, a point of the operator ``op``, as ``precision explain`` shows them
    (``none`` when no step loses bits); (None, None) for an operator without step attribution."""
    if op.attribute is None:
        return None, None
    key = (op.__name__, w)
    if key in _MEMO:
        return _MEMO[key]
    dtype = np.dtype(np.float16 if w.format == "fp16" else np.float32)
    with np.errstate(over="ignore"):
        attributes = {name: float(np.float32(float.fromhex(value))) for name, value in w.attributes}
        weight = None if w.weight is None else dtype.type(float.fromhex(w.weight))
        point_inputs = {**({"dout": dtype.type(float.fromhex(w.dout))} if "dout" in op.INPUTS else {}),
                        **({"count": w.count} if "count" in op.INPUTS else {})}
        att = op.attribute(w.variant, np.array([float.fromhex(w.pred)], dtype), [w.target], weight=weight,
                           **attributes, **point_inputs, machine=w.machine)
    point = att.points.loc[0]
    step = point["top_step"] if isinstance(point["top_step"], str) else "none"
    _MEMO[key] = (step, str(point["top_cause"]))
    return _MEMO[key]


def mechanism_of(run, t: pd.DataFrame, row, table: str = "verdicts.csv") -> tuple[dict, str, list]:
    """(the mechanism fields of an answer, its clause, the numbers the clause cites from ``table``, ``t``'s CSV)
    of a verdict row at region ``all``: the regions holding most of the better and worse outputs, and the top
    step and cause at the largest gain (on the ``without`` variant) and at the largest loss (on the ``with``
    variant), each with its ``precision explain`` line."""
    per = t[(t["comparison"] == row["comparison"]) & (t["machine"] == row["machine"])
            & (t["profile"] == row["profile"]) & (t["region"] != "all")
            & ~t["region"].isin(list(run.separate))]
    where, clauses, nums = {}, [], []
    tag = f"{row['comparison']}_{row['machine']}_{row['profile']}"
    for side, column in (("better", "better"), ("worse", "worse")):
        shares = region_shares(per, column)
        where[side] = [{"region": r, "outputs": n, "share": round(sh, 4)} for r, n, sh in shares]
        if shares:
            key = {"comparison": row["comparison"], "machine": row["machine"], "profile": row["profile"]}
            total = cite(f"{tag}_{side}_all", table, t, {**key, "region": "all"}, column)
            held = [cite(f"{tag}_{side}_{r}", table, t, {**key, "region": r}, column) for r, _, _ in shares]
            nums += [total, *held]
            clauses.append(f"{side} outputs by region: " + " and ".join(
                f"{region_text(r)} ({c.text} of {total.text})" for (r, _, _), c in zip(shares, held)))
    mech = {"where": where}
    for side, label in (("gain", "largest gain"), ("loss", "largest loss")):
        w = witness_of(run, row, side)
        if w is None:
            continue
        step, cause = attribute_witness(w, run.operator)
        mech[side] = {"step": step, "cause": cause, "witness": w.as_dict(), "explain": explain_line(w)}
        term = run.operator.TERMS_ATTRIBUTE  # the attribute a reader tells points apart by (gamma)
        at = f" {term}={dict(w.attributes)[term]}" if term is not None else ""
        lost = f"{w.variant} loses it at step {step} ({cause}); " if step is not None else ""
        clauses.append(f"{label} at pred={w.pred} t={w.target}{at}: {lost}`{explain_line(w)}`")
    top = mech.get("loss" if row["verdict"] == "hurts" else "gain") or mech.get("loss") or {}
    mech.update({"step": top.get("step"), "cause": top.get("cause"), "witness": top.get("witness"),
                 "explain": top.get("explain")})
    return mech, "; ".join(clauses), nums


@dataclass(frozen=True)
class Effect:
    """The size, place and cause of one verdict row's effect, for an answer (:func:`effect_of`).

    ``size`` and ``place`` are sentences for the full answer, ``short`` the one clause of the first screen
    (:func:`precision.products.report.answers.effect_short`); ``numbers`` are what they cite; ``magnitude`` and
    ``mechanism`` the answer's fields.
    """

    size: str
    place: str
    short: str
    numbers: list
    magnitude: dict
    mechanism: dict


def effect_of(run, t: pd.DataFrame, row, prefix: str, table: str = "verdicts.csv") -> Effect:
    """The :class:`Effect` of one verdict row (region ``all``); ``prefix`` keeps the citation ids apart."""
    w = {"comparison": row["comparison"], "machine": row["machine"], "profile": row["profile"], "region": "all"}
    size = magnitude_cites(prefix, table, t, w)
    mech, clause, where = mechanism_of(run, t, row, table)
    return Effect(magnitude_sentence(size), f"{clause[0].upper()}{clause[1:]}" if clause else "",
                  effect_short(size, mech, row["verdict"]), [*size.values(), *where], magnitude(row), mech)
