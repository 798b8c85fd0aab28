"""Answers: each report's question answered in plain sentences computed from its tables.

A section returns :class:`Answer` rows (``Section.answers``); the page opens with them, grouped by
question, before any grid, and ``findings.json`` lists them under ``answers`` with every number cited
like a finding's.  This module also joins what an answer needs to the paired verdicts
(:func:`verdict_table`):

``fired``, ``exercised``
    how many of the compared points the subject's guard acted on, in the ``with`` variant (the sweep's
    ``fired_gi``, :data:`precision.implementations.kernel.FIRED_MEANING`); a guard that acted nowhere is
    *not exercised* (``not_exercised_because`` says why, from the study's points; ``exercised_in`` names
    a study whose points exercise it), never ``no_effect``;
``share_correct_with``, ``share_correct_without``
    the share of the compared points correctly rounded with and without;
the size of a change (:func:`magnitude`)
    median and largest gain and loss in bits over the changed outputs, how many became correctly
    rounded / within 1 ulp (``changed_became_*``) and how many are still over 2^20 ulp or special
    (``changed_still_garbage``).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from precision.guards import GUARD_NAMES
from precision.implementations.kernel import FIRED_COLUMNS
from precision.report.findings import cite, fmt_num

__all__ = ["Answer", "answers_json", "verdict_table", "subject_guard", "magnitude", "magnitude_text", "shown_verdict",
           "EXERCISED_BY", "NOT_EXERCISED", "variant_totals", "region_shares"]

#: A study of the project whose points exercise each guard (the pointer of a "not exercised" verdict).
EXERCISED_BY = {"G1": "guard_ablation", "G2": "guard_ablation", "G3": "guard_ablation", "G4": "guard_ablation",
                "G5": "cancellation_threshold", "G6": "guard_ablation", "G7": "subnormal_recovery",
                "G8": "guard_ablation"}
#: The verdict shown for a guard that acted on none of the compared points.
NOT_EXERCISED = "not exercised"

_GUARD = re.compile(r"^(G[1-8])\b")


@dataclass
class Answer:
    """One answer: a sentence computed from the report's tables and the numbers it cites.

    ``question`` groups answers on the page; ``subject`` .. ``region`` name the verdict cell it reads
    (empty for an answer that is not one cell's); ``magnitude`` (:func:`magnitude`) and ``mechanism``
    (``step``, ``cause``, ``where``, ``witness``, ``explain``) are empty where they do not apply;
    ``extra`` holds section-specific fields (``best_threshold``, ``best_tau_hex``); ``headline``
    marks the sentences shown on the first screen (the others are in findings.json and the section).
    """

    question: str
    sentence: str
    numbers: list = field(default_factory=list)
    subject: str = ""
    comparison: str = ""
    machine: str = ""
    format: str = ""
    region: str = "all"
    verdict: str = ""
    exercised: bool = True
    magnitude: dict = field(default_factory=dict)
    mechanism: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)
    headline: bool = True


def _enc(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        v = float(v)
        return v if np.isfinite(v) else fmt_num(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    return v


def answers_json(answers: list) -> list:
    """answers as JSON-ready dicts (non-finite numbers as ``inf``/``NaN`` strings, ``extra`` merged in)."""
    rows = []
    for a in answers:
        d = asdict(a)
        extra = d.pop("extra")
        d.update(extra)
        d["magnitude"] = {k: _enc(v) for k, v in d["magnitude"].items()}
        for n in d["numbers"]:
            n["value"] = _enc(n["value"])
            n["where"] = {k: _enc(v) for k, v in n["where"].items()}
        rows.append({k: _enc(v) if not isinstance(v, (dict, list)) else v for k, v in d.items()})
    return rows


def subject_guard(subject: str) -> str | None:
    """The guard a comparison's subject is about (``G5`` for ``G5=2^-4``); None for a declared variant pair."""
    m = _GUARD.match(str(subject))
    return m.group(1) if m else None


_TOTAL_KEYS = ["variant", "machine", "format", "profile", "region"]


def variant_totals(run) -> pd.DataFrame:
    """Per variant, machine, format, profile and region (plus ``all``: the regions the verdicts pool): the
    point count, correctly rounded outputs and every ``fired_gi`` count."""
    merged = run.stats.merge(_TOTAL_KEYS).frame
    sums = ["count", "n_correct", *[c for c in FIRED_COLUMNS.values() if c in merged.columns]]
    per = merged[_TOTAL_KEYS + sums]
    pooled = per[~per["region"].isin(list(run.separate))].groupby(_TOTAL_KEYS[:-1], sort=False, as_index=False)[
        sums].sum()
    pooled.insert(len(_TOTAL_KEYS) - 1, "region", "all")
    return pd.concat([pooled, per], ignore_index=True)


def _run_values(run, column: str) -> list:
    frame = run.stats.frame
    return list(pd.unique(frame[column])) if column in frame.columns else []


def not_exercised_reason(run, guard: str) -> str:
    """Why ``guard`` acted on none of the run's points, from the study's parameters where they decide it."""
    gammas = [float(g) for g in _run_values(run, "gamma")]
    weights = _run_values(run, "weight")
    formats = [str(f) for f in _run_values(run, "format")]
    if guard == "G5" and gammas and min(gammas) >= 0:
        return "gamma >= 0 at every point (the cancellation G5 corrects needs gamma < 0)"
    if guard == "G7" and all(w is None or (isinstance(w, float) and np.isnan(w)) or w == "none" for w in weights):
        return "no weight (G7 acts only on raw*weight)"
    if guard == "G8" and "fp16" not in formats:
        return "fp32 outputs only (G8 acts on the fp16 store)"
    if guard == "G6":
        alphas = ", ".join(fmt_num(float(a)) for a in _run_values(run, "alpha"))
        return f"1 - alpha does not round to 1 for any alpha of the study ({alphas})"
    if guard == "G2":
        return "p and q stay above MIN_NORMAL at every point (|x| < 87.3)"
    if guard == "G4":
        return "no tile holds a base or a power <= MIN_NORMAL"
    if guard == "G1":
        return "no point has x < 0"
    return "its condition holds at none of the study's points"


def verdict_table(run) -> pd.DataFrame:
    """The run's paired comparisons (comparisons.csv) with ``fired``, ``exercised``, ``not_exercised_because``,
    ``exercised_in`` and the share correctly rounded with and without, per row (module docstring)."""
    t = run.comparisons.copy()
    if t.empty:
        return t
    totals = variant_totals(run)
    keys = ["machine", "format", "profile", "region"]
    with_ = t[["with_variant", *keys]].rename(columns={"with_variant": "variant"}).merge(
        totals, on=["variant", *keys], how="left")
    without = t[["without_variant", *keys]].rename(columns={"without_variant": "variant"}).merge(
        totals, on=["variant", *keys], how="left")
    guards = t["subject"].map(subject_guard)
    fired = np.full(len(t), np.nan)
    for g, column in FIRED_COLUMNS.items():
        at = (guards == g).to_numpy()
        if at.any() and column in with_.columns:
            fired[at] = with_.loc[at, column].to_numpy(np.float64)
    exercised = guards.isna().to_numpy() | (fired > 0)
    reasons = {g: not_exercised_reason(run, g) for g in set(guards.dropna())}
    t["fired"] = pd.array(np.where(np.isnan(fired), pd.NA, fired), dtype="Int64")
    t["exercised"] = exercised
    t["not_exercised_because"] = [None if e else reasons[g] for e, g in zip(exercised, guards)]
    t["exercised_in"] = [None if e else EXERCISED_BY.get(g) for e, g in zip(exercised, guards)]
    with np.errstate(invalid="ignore", divide="ignore"):
        t["share_correct_with"] = with_["n_correct"].to_numpy(np.float64) / with_["count"].to_numpy(np.float64)
        t["share_correct_without"] = (without["n_correct"].to_numpy(np.float64)
                                      / without["count"].to_numpy(np.float64))
    return t


def shown_verdict(row) -> str:
    """The verdict a reader sees: ``not exercised`` where the guard acted nowhere, else the rule's verdict."""
    return row["verdict"] if bool(row.get("exercised", True)) else NOT_EXERCISED


#: magnitude field -> verdicts.csv column
MAGNITUDE_COLUMNS = {"changed": "changed", "better": "better", "worse": "worse",
                     "median_gain_bits": "median_gain_bits", "max_gain_bits": "max_gain_bits",
                     "median_loss_bits": "median_loss_bits", "max_loss_bits": "max_loss_bits",
                     "became_correct": "changed_became_correct", "became_le_1ulp": "changed_became_le_1ulp",
                     "still_garbage": "changed_still_garbage", "correct_share_with": "share_correct_with",
                     "correct_share_without": "share_correct_without", "specials_fixed": "specials_fixed",
                     "specials_caused": "specials_caused"}


def magnitude(row) -> dict:
    """The size of a verdict over its changed outputs (:data:`MAGNITUDE_COLUMNS`), from one verdicts.csv row."""
    return {k: _enc(row[c]) if c in row else None for k, c in MAGNITUDE_COLUMNS.items()}


def _bits(v) -> str:
    return "<1/128" if v is None or (isinstance(v, float) and np.isnan(v)) else f"{float(v):.3g}"


def magnitude_text(row) -> str:
    """The size in a grid cell: ``+med/max -med/max bits, CR +n, >2^20 n`` (notation in the grid's rule)."""
    if int(row["changed"]) == 0:
        return ""
    parts = []
    for sign, side in (("+", "gain"), ("-", "loss")):
        top = row.get(f"max_{side}_bits")
        if top is not None and not (isinstance(top, float) and np.isnan(top)):
            parts.append(f"{sign}{_bits(row.get(f'median_{side}_bits'))}/{_bits(top)} b")
    for label, column in (("CR +", "changed_became_correct"), (">2^20 ", "changed_still_garbage")):
        v = row.get(column)
        if v is not None and not (isinstance(v, float) and np.isnan(v)):  # tables of per-point outcomes lack them
            parts.append(f"{label}{fmt_num(int(v))}")
    return "; ".join(parts)


def magnitude_cites(prefix: str, table: str, t: pd.DataFrame, where: dict) -> dict:
    """Cites of the size of one verdict row: name -> :class:`Cite` (a NaN median or maximum is left out)."""
    out = {}
    for name, column in MAGNITUDE_COLUMNS.items():
        if column not in t.columns:
            continue
        c = cite(f"{prefix}{name}", table, t, where, column)
        if isinstance(c.value, float) and np.isnan(c.value):
            continue
        out[name] = c
    return out


def magnitude_sentence(c: dict, counts: bool = True) -> str:
    """The size clause of an answer from :func:`magnitude_cites` (with the changed / better / worse counts
    unless ``counts`` is False: the caller spells them)."""
    parts = []
    if counts:
        parts.append(f"{c['changed'].text} changed outputs ({c['better'].text} better, {c['worse'].text} worse)")
    for side in ("gain", "loss"):
        if f"max_{side}_bits" in c:
            med = c[f"median_{side}_bits"].text if f"median_{side}_bits" in c else "under 1/128"
            parts.append(f"{side}es" if side == "loss" else "gains")
            parts[-1] += f" median {med} bits, max {c[f'max_{side}_bits'].text}"
    if "specials_fixed" in c and (c["specials_fixed"].value or c["specials_caused"].value):
        parts.append(f"{c['specials_fixed'].text} special outputs (NaN, inf, wrong sign, lost inf) made finite, "
                     f"{c['specials_caused'].text} caused")
    if "became_correct" in c:
        parts.append(f"{c['became_correct'].text} changed outputs became correctly rounded, "
                     f"{c['became_le_1ulp'].text} within 1 ulp, {c['still_garbage'].text} are still over 2^20 ulp "
                     f"or special")
    if "correct_share_with" in c and "correct_share_without" in c:
        parts.append(f"share correctly rounded {c['correct_share_with'].text} with, "
                     f"{c['correct_share_without'].text} without")
    return "; ".join(parts)


def region_shares(per_region: pd.DataFrame, column: str, top: int = 2) -> list:
    """The regions holding most of ``column`` (better or worse outputs): [(region, count, share)], largest first,
    until they hold half of the total (at most ``top``)."""
    rows = per_region[per_region[column] > 0].sort_values(column, ascending=False, kind="stable")
    total = float(rows[column].sum())
    out, held = [], 0.0
    for r in rows.itertuples(index=False):
        n = int(getattr(r, column))
        out.append((r.region, n, n / total))
        held += n
        if held >= total / 2 or len(out) >= top:
            break
    return out


def guard_label(guard: str) -> str:
    """``G4 clamped_power_fallback``."""
    return f"{guard} {GUARD_NAMES.get(guard, '')}".strip()


__all__ += ["MAGNITUDE_COLUMNS", "magnitude_cites", "magnitude_sentence", "guard_label", "not_exercised_reason"]
