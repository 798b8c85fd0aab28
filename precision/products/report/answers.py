"""Answers: each report's question answered in plain sentences computed from its tables.

A section returns :class:`Answer` rows (``Section.answers``); the page opens with them, grouped by
question, before any grid, and ``findings.json`` lists them under ``answers`` with every number cited
like a finding's.  This module also joins what an answer needs to the paired verdicts
(:func:`verdict_table`):

``fired``, ``exercised``
    how many of the compared points the subject's guard acted on, in the ``with`` variant (the sweep's
    ``fired_gi``, :data:`precision.operators.sigmoid_focal_loss_grad.implementations.kernel.FIRED_MEANING`); a guard that acted nowhere is
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
import tomllib
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from pathlib import Path

from precision.products.report.findings import cite, fmt_num
from precision.products.report.tables import region_text

__all__ = ["Answer", "answers_json", "verdict_table", "subject_guard", "magnitude", "magnitude_text", "shown_verdict",
           "exercising_study", "NOT_EXERCISED", "variant_totals", "region_shares"]

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
    marks the answers shown on the first screen (the others are in findings.json and the section), each as
    its ``short`` form (one or two lines, every number in it also in ``sentence``, which the page keeps
    in full under the answers).
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
    short: str = ""


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
    point count, correctly rounded outputs and every ``fired_gi`` count (the run's operator's)."""
    merged = run.stats.merge_frame(_TOTAL_KEYS)
    sums = ["count", "n_correct", *[c for c in run.operator.FIRED_COLUMNS.values() if c in merged.columns]]
    per = merged[_TOTAL_KEYS + sums]
    pooled = per[~per["region"].isin(list(run.separate))].groupby(_TOTAL_KEYS[:-1], sort=False, as_index=False)[
        sums].sum()
    pooled.insert(len(_TOTAL_KEYS) - 1, "region", "all")
    return pd.concat([pooled, per], ignore_index=True)


def _run_values(run, column: str) -> list:
    frame = run.stats.frame
    return list(pd.unique(frame[column])) if column in frame.columns else []


def _axis_values(values) -> list:
    """A study axis as floats and ``None`` (a weight's ``"none"``); a ``{random = N, low, high}`` entry gives its
    bounds."""
    out = []
    for v in values:
        if isinstance(v, dict):
            out += [_axis_values([v.get("low")])[0], _axis_values([v.get("high")])[0]]
        elif v is None or v == "none" or (isinstance(v, float) and np.isnan(v)):
            out.append(None)
        else:
            out.append(float.fromhex(v) if isinstance(v, str) and "0x" in v else float(v))
    return out


def run_axes(run) -> dict:
    """The axes of a run that decide whether a guard can act (the operator's ``guard_blocked``): each of its
    operator's attributes, ``weight`` (``None`` for absent) and ``format`` (the output formats)."""
    return {**{name: [float(v) for v in _run_values(run, name)] for name in run.operator.ATTRIBUTES},
            "weight": _axis_values(_run_values(run, "weight")), "format": [str(f) for f in _run_values(run, "format")]}


def not_exercised_reason(run, guard: str) -> str:
    """Why ``guard`` acted on none of the run's points (its operator's ``not_exercised_reason``), from the study's
    parameters where they decide it."""
    return run.operator.not_exercised_reason(guard, run_axes(run), fmt_num)


def exercising_study(study_file: str, guard: str, op) -> str | None:
    """The study that can exercise ``guard`` (one of the operator ``op``'s), for the pointer of a "not exercised"
    verdict: the first, by file name, of the reviewed studies (those with a ``[report]`` table) beside
    ``study_file`` whose variants compare the guard (a variant name holds it: ``kernel-G7``, ``naive+G7``,
    ``kernel[G5=...]``; ``all``) and whose axes allow it to act (the operator's ``guard_blocked``); None when
    there is none."""
    return _exercising_studies(str(Path(study_file).resolve().parent), op).get((Path(study_file).stem, guard))


def pointer_text(study) -> str:
    """``see the subnormal_recovery report``; ``no reviewed study exercises it`` for None."""
    return f"see the {study} report" if isinstance(study, str) and study else "no reviewed study exercises it"


_STUDIES: dict = {}


def _exercising_studies(folder: str, op) -> dict:
    """(study file stem, guard of ``op``) -> the other study that can exercise the guard (read once per folder and
    operator)."""
    paths = sorted(Path(folder).glob("*.toml"))
    key = (folder, op.__name__, tuple((p.name, p.stat().st_mtime_ns) for p in paths))
    if key in _STUDIES:
        return _STUDIES[key]
    able = []
    for path in paths:
        try:
            data = tomllib.loads(path.read_text())
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            continue
        if "report" not in data:
            continue
        points, run = data.get("points", {}), data.get("run", {})
        variants = [str(v) for v in run.get("variants", [])]
        try:
            axes = {name: _axis_values(points.get(name, list(default))) for name, default in op.ATTRIBUTES.items()}
            axes["weight"] = _axis_values(points.get("weight", ["none"]))
        except (TypeError, ValueError):
            continue
        axes["format"] = [str(f) for f in points.get("profiles", [])]
        for guard in op.GUARD_NAMES:
            named = "all" in variants or any(re.search(rf"\b{guard}\b", v) for v in variants)
            if named and op.guard_blocked(guard, axes) is None:
                able.append((path.stem, data.get("name", path.stem), guard))
    stems = [p.stem for p in paths]
    out = {}
    for stem in stems:
        for guard in op.GUARD_NAMES:
            other = next((name for s, name, g in able if g == guard and s != stem), None)
            if other is not None:
                out[(stem, guard)] = other
    _STUDIES[key] = out
    return out


def verdict_table(run) -> pd.DataFrame:
    """The run's paired comparisons (comparisons.csv) with ``fired``, ``exercised``, ``not_exercised_because``,
    ``exercised_in`` and the share correctly rounded with and without, per row (module docstring)."""
    t = run.comparisons.copy()
    if t.empty:
        return t
    op = run.operator
    totals = variant_totals(run)
    keys = ["machine", "format", "profile", "region"]
    with_ = t[["with_variant", *keys]].rename(columns={"with_variant": "variant"}).merge(
        totals, on=["variant", *keys], how="left")
    without = t[["without_variant", *keys]].rename(columns={"without_variant": "variant"}).merge(
        totals, on=["variant", *keys], how="left")
    guards = t["subject"].map(subject_guard)
    fired = np.full(len(t), np.nan)
    for g, column in op.FIRED_COLUMNS.items():
        at = (guards == g).to_numpy()
        if at.any() and column in with_.columns:
            fired[at] = with_.loc[at, column].to_numpy(np.float64)
    # a guard whose per-element decisions the operator does not keep (not in its FIRED_COLUMNS) is never called
    # "not exercised": its fired count is "not tracked" (NA), and the verdict stands
    tracked = guards.map(lambda g: isinstance(g, str) and g in op.FIRED_COLUMNS).to_numpy(bool)
    exercised = guards.isna().to_numpy() | ~tracked | (fired > 0)
    reasons = {g: not_exercised_reason(run, g) for g in set(guards.dropna())}
    t["fired"] = pd.array(np.where(np.isnan(fired), pd.NA, fired), dtype="Int64")
    t["exercised"] = exercised
    t["not_exercised_because"] = [None if e else reasons[g] for e, g in zip(exercised, guards)]
    study_file = str(run.run.get("study_file", ""))
    t["exercised_in"] = [None if e else exercising_study(study_file, g, op) for e, g in zip(exercised, guards)]
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
                     "specials_caused": "specials_caused", "garbage_made_special": "changed_garbage_made_special",
                     "garbage_made_finite": "changed_garbage_made_finite",
                     "garbage_special_changed": "changed_garbage_special_changed"}


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
    moved = [(c[k], label) for k, label in (("garbage_made_special", "made special"),
                                            ("garbage_made_finite", "made finite"),
                                            ("garbage_special_changed", "from one special class to another"))
             if k in c and c[k].value]
    if moved:
        parts.append("among outputs special or over 2^20 ulp on both sides (no evidence for the verdict) "
                     + ", ".join(f"{n.text} {label}" for n, label in moved))
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


def cells_text(cells: list, every: list) -> str:
    """(machine, profile) cells in words: ``everywhere`` when they are all of ``every``; a machine alone when
    all its profiles are there; else ``machine profile``.

    Examples
    --------
    >>> every = [("ieee", "fp16"), ("ieee", "fp32"), ("npu", "fp16"), ("npu", "fp32")]
    >>> cells_text([("npu", "fp16"), ("npu", "fp32"), ("ieee", "fp32")], every)
    'npu, ieee fp32'
    >>> cells_text(every, every)
    'everywhere'
    """
    if set(cells) == set(every):
        return "everywhere"
    words, done = [], set()
    for machine, profile in cells:
        if machine in done:
            continue
        mine = {p for m, p in every if m == machine}
        if mine and mine <= {p for m, p in cells if m == machine}:
            words.append(machine)
            done.add(machine)
        else:
            words.append(f"{machine} {profile}")
    return ", ".join(words)


def effect_short(size: dict, mech: dict, verdict: str) -> str:
    """An effect in one clause, for a first-screen answer: ``1,126 better / 17,518 worse, losses median 22 bits,
    most at x < -20 and x >= 20; cause: kernel loses bits at step pF_ln (overflow)``.

    ``size`` is :func:`magnitude_cites`' dict, ``mech`` :func:`precision.products.report.mechanism.mechanism_of`'s
    fields; the side told is the verdict's (losses and the worse outputs' regions for ``hurts``, gains and
    the better outputs' otherwise).
    """
    side, where = ("loss", "worse") if verdict == "hurts" else ("gain", "better")
    text = f"{size['better'].text} better / {size['worse'].text} worse"
    if f"median_{side}_bits" in size:
        text += f", {side}es" if side == "loss" else ", gains"
        text += f" median {size[f'median_{side}_bits'].text} bits"
    if "became_correct" in size and size["became_correct"].value:
        text += f", {size['became_correct'].text} became correctly rounded"
    regions = (mech.get("where") or {}).get(where) or []
    if regions:
        text += ", most " + " and ".join(("at " if r["region"].startswith(("x", "[")) else "") + region_text(r["region"])
                                         for r in regions)
    top = mech.get(side)
    if top and top.get("step") not in (None, "none"):
        text += f"; cause: {top['witness']['variant']} loses bits at step {top['step']} ({top['cause']})"
    return text


def merged_shorts(answers: list) -> list:
    """The first-screen lines of ``answers`` (their ``short``, else ``sentence``), where answers that differ
    only in their leading machine (``npu: ...``, ``npu fp32: ...``) say the same once for all those machines
    (``npu, npu+ftz: ...``), at the place of the first."""
    lines, at = [], {}
    for a in answers:
        text = a.short or a.sentence
        for prefix in (f"{a.machine} {a.format}: ", f"{a.machine}: "):
            if a.machine and text.startswith(prefix):
                head, body = prefix[:-2], text[len(prefix):]
                key = (head.removeprefix(a.machine), body)
                if key in at:
                    lines[at[key]][0].append(a.machine)
                else:
                    at[key] = len(lines)
                    lines.append(([a.machine], key[0], body))
                break
        else:
            lines.append(([], "", text))
    return [f"{', '.join(machines)}{tail}: {body}" if machines else body for machines, tail, body in lines]


def guard_label(guard: str, op) -> str:
    """``G4 clamped_power_fallback``: a guard of the operator ``op`` with its name."""
    return f"{guard} {op.GUARD_NAMES.get(guard, '')}".strip()


__all__ += ["MAGNITUDE_COLUMNS", "magnitude_cites", "magnitude_sentence", "guard_label", "not_exercised_reason",
            "cells_text", "effect_short", "merged_shorts", "run_axes", "pointer_text"]
