"""The review page: one decision per guard and machine across the reports (``index.md``, ``index.html``,
``review.json``).

``precision report --all`` writes it beside the report folders, from what they hold (their
``findings.json`` and ``tables/*.csv``; nothing is recomputed from a run).  The page, in order:

1. the **decision table**: a row per guard, a column per machine model, each cell ``keep``, ``drop``,
   ``change`` (to what) or ``depends`` (on what) with its effect word, one line of reason and a link to
   the report section behind it (:mod:`precision.analysis.decision` is the rule; its thresholds are
   printed under the table); which machine model stands for which device
   (:mod:`precision.machine.devices`) and the decision for the production device in words;
1b. for a guard whose verdict depends on the tile (G4, the operator's ``TILED_GUARDS``), the decision at the
   production tile (the ``g4_tiling`` report: ``kernel[tile=ubFormer] vs kernel-G4``) with the whole task as
   one tile beside it as the upper bound, each with its numbers, and a table of both per region
   (:func:`tile_rows`); machines the tiling study did not run keep the one-tile verdict, labelled;
2. the **G5 threshold** as one recommendation (:func:`threshold_recommendation`): the plateau of
   thresholds whose net cannot be told from the best, its simplest value and the size of the change;
3. the kernel's **defects** (every report's ``defects.csv``), realistic inputs first;
4. the **candidate** against its targets and against the team's standards, reconciled;
5. the standards' **blind spots**, one witness each;
6. **scope**: what no report covered; and links to every report.

Links are relative (``guard_ablation/report.html#verdicts``), so the page works in ``reports/`` and in
a fresh ``out/reports/`` alike; :func:`page_links` lists them for a test.

``review.json`` holds every decision with the evidence rows it rests on, the thresholds of the rule,
the devices, the threshold recommendation, the defects, the candidate's status and the links.
"""

from __future__ import annotations

import html
import json
import math
import re
from dataclasses import asdict, replace
from pathlib import Path

import pandas as pd

from precision.analysis.decision import THRESHOLDS, Evidence, decide_cell, rule_text
from precision.engine.operators import DEFAULT_OPERATOR, get_operator
from precision.machine.devices import DEVICES, PRODUCTION_MODEL, SWITCHES, device_of
from precision.products.report.defects import DEFECT_ULP, defect_rows, input_class_text
from precision.products.report.document import CSS
from precision.products.report.findings import fmt_num
from precision.products.report.threshold_advice import recommend_thresholds, recommendation_sentence

__all__ = ["build_review", "review_data", "threshold_recommendation", "page_links", "REVIEW_FILES"]

#: The files the review page writes into the reports folder.
REVIEW_FILES = ("index.md", "index.html", "review.json")
#: The variant whose guards are decided.
KERNEL = "kernel"
#: Base machine models first, in this order; composite ones after, as the reports list them.
_MACHINE_ORDER = ("ieee", "numpy", "npu")
#: At most this many defects in the ranked table.
MAX_DEFECTS = 12

_GUARD = re.compile(r"^(G\d+)")


# ---------------------------------------------------------------------------
# Reading the reports
# ---------------------------------------------------------------------------

def _reports(out: Path, operator: str | None = DEFAULT_OPERATOR) -> dict:
    """study -> its report folder, for every folder of ``out`` holding a findings.json (sorted by name): the reports
    of ``operator`` (its findings.json's ``operator``, the default when absent), or of every operator (None)."""
    folders = {p.name: p for p in sorted(Path(out).iterdir()) if p.is_dir() and (p / "findings.json").is_file()}
    return {s: p for s, p in folders.items()
            if operator is None or json.loads((p / "findings.json").read_text()).get("operator", DEFAULT_OPERATOR)
            == operator}


def _table(folder: Path, name: str) -> pd.DataFrame:
    path = folder / "tables" / name
    if not path.is_file() or path.stat().st_size == 0:  # (a table without rows or columns: none)
        return pd.DataFrame()
    return pd.read_csv(path, keep_default_na=True, dtype={"region": str})


def _int(v) -> int:
    try:
        return 0 if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)
    except (TypeError, ValueError):
        return 0


def _guard_rows(study: str, v: pd.DataFrame, op) -> list:
    """The Evidence rows of one report's verdicts.csv: kernel against kernel without the guard."""
    if v.empty:
        return []
    v = v[v["region"] == "all"]
    rows = []
    for r in v.to_dict("records"):
        g = _GUARD.match(str(r["subject"]))
        if not g or r["with_variant"] != KERNEL or r["without_variant"] != f"{KERNEL}-{g.group(1)}":
            continue
        assume = getattr(op, "decision_assumption", None)
        assumption = assume(g.group(1), _int(r.get("fired")), _int(r.get("count"))) if assume else None
        rows.append(_evidence(study, r, g.group(1), None, assumption))
    return rows


def _evidence(study, r, guard, alternative, assumption, anchor="verdicts") -> Evidence:
    return Evidence(guard, r["machine"], r["format"], study, r["comparison"], r["verdict"],
                    bool(r.get("exercised", True)) if not isinstance(r.get("exercised"), str)
                    else r["exercised"] == "True", _int(r.get("count")), _int(r.get("fired")), _int(r.get("changed")),
                    _int(r.get("better")), _int(r.get("worse")), _int(r.get("specials_fixed")),
                    _int(r.get("specials_caused")), float(r["median_change_bits"])
                    if r.get("median_change_bits") is not None else math.nan, alternative, assumption,
                    r.get("not_exercised_because") if isinstance(r.get("not_exercised_because"), str) else None,
                    f"{study}/report.html#{anchor}")


# ---------------------------------------------------------------------------
# Guards whose verdict depends on the tile (G4): the production tile against the upper bound
# ---------------------------------------------------------------------------

def _tiled(op) -> dict:
    """guard -> (study, {format: production variant}) of the operator's tile-dependent guards."""
    return dict(getattr(op, "TILED_GUARDS", {}) or {})


def _tile_of(variant: str) -> str:
    m = re.search(r"tile=(\d+)", variant)
    return f"{int(m.group(1)):,}" if m else "one tile"


def tile_rows(reports: dict, op) -> dict:
    """guard -> the rows of its tiling study's verdicts.csv at the production tile and as one tile.

    Each entry: ``study``, ``tiles`` ({format: production variant}), ``production`` (Evidence at the
    production tile, region ``all``, per machine and format: ``kernel[tile=N] vs kernel-Gi``), ``upper``
    (the same study's ``kernel vs kernel-Gi`` rows: the whole task as one tile, without the assumption
    label, which they are the measure of) and ``regions`` (every region's row of both, for the page's table).
    Guards whose study has no report are left out.
    """
    out = {}
    for guard, (study, variants) in _tiled(op).items():
        folder = reports.get(study)
        if folder is None:
            continue
        v = _table(folder, "verdicts.csv")
        if v.empty:
            continue
        prod, upper, regions = [], [], []
        for r in v.to_dict("records"):
            fmt = r["format"]
            tile = variants.get(fmt)
            if r["without_variant"] != f"{KERNEL}-{guard}":
                continue
            if r["with_variant"] == tile:
                which = "production"
            elif r["with_variant"] == KERNEL:
                which = "upper"
            else:
                continue
            regions.append({"guard": guard, "machine": r["machine"], "format": fmt, "assumption": which,
                            "tile": _tile_of(r["with_variant"]), "region": r["region"],
                            "comparison": r["comparison"], "count": _int(r.get("count")),
                            "changed": _int(r.get("changed")), "better": _int(r.get("better")),
                            "worse": _int(r.get("worse")), "specials_fixed": _int(r.get("specials_fixed")),
                            "specials_caused": _int(r.get("specials_caused")),
                            "median_change_bits": None if pd.isna(r.get("median_change_bits"))
                            else float(r["median_change_bits"]), "verdict": r["verdict"]})
            if r["region"] != "all":
                continue
            e = _evidence(study, r, guard, None, None)
            if which == "production":
                # the tile row is a declared comparison, without the guard's fired count: the points it was
                # compared on stand in (a no_effect row then reads 'acted on ... points' as 'compared on')
                prod.append(replace(e, fired=e.count))
            else:
                upper.append(e)
        out[guard] = {"study": study, "tiles": {f: _tile_of(n) for f, n in variants.items()},
                      "production": prod, "upper": upper, "regions": regions}
    return out


def _tile_words(tiles: dict) -> str:
    """'3,008 (fp32) / 3,200 (fp16) elements'."""
    return " / ".join(f"{n} ({f})" for f, n in sorted(tiles.items(), reverse=True)) + " elements"


def _tiled_cell(guard: str, machine: str, tiled: dict, upper_rows: list):
    """The decision of a tile-dependent guard on one machine: at the production tile (the cell's decision), with
    the whole-task-as-one-tile decision beside it as the upper bound; None when its study did not run there."""
    t = tiled.get(guard)
    prod = [e for e in (t["production"] if t else []) if e.machine == machine]
    if not prod:
        return None
    at_tile = decide_cell(prod)
    at_tile = replace(at_tile, reason=at_tile.reason.replace("acted on ", "compared on "))
    # the upper bound: every one-tile row of the guard on this machine (other studies and the tiling study's
    # own), decided as measured (without the label that makes a keep or drop 'depends')
    bound_rows = [replace(e, assumption=None) for e in upper_rows + [e for e in t["upper"] if e.machine == machine]]
    upper = decide_cell(bound_rows) if bound_rows else None
    tiles = _tile_words(t["tiles"])
    reason = f"at the production tile ({tiles}, {t['study']}): {at_tile.word}: {at_tile.reason}"
    if upper is not None:
        reason += f"; whole task as one tile (upper bound): {upper.word}: {upper.reason}"
    per = [{"assumption": f"production tile ({tiles})", "word": at_tile.word, "decision": at_tile.decision,
            "reason": at_tile.reason, "study": t["study"],
            "link": at_tile.basis.link if at_tile.basis is not None else ""}]
    if upper is not None:
        studies = list(dict.fromkeys(e.study for e in bound_rows))
        by_study = {st: decide_cell([e for e in bound_rows if e.study == st]) for st in studies}
        short = "; ".join(f"{st}: {d.word}, {d.reason}" for st, d in by_study.items()) if len(studies) > 1 \
            else upper.reason
        per.append({"assumption": "whole task as one tile (upper bound)", "word": upper.word,
                    "decision": upper.decision, "reason": short,
                    "study": upper.basis.study if upper.basis is not None else "",
                    "link": upper.basis.link if upper.basis is not None else ""})
    return at_tile, reason, per, tuple(prod) + tuple(bound_rows)


# ---------------------------------------------------------------------------
# The G5 threshold as one recommendation
# ---------------------------------------------------------------------------

def threshold_recommendation(study: str, folder: Path) -> list:
    """Per machine: the G5 threshold to use (:func:`precision.products.report.threshold_advice.recommend_thresholds`),
    from a cancellation-threshold report's tables."""
    octaves, t, v, search = (_table(folder, n) for n in ("threshold_search_octaves.csv", "threshold.csv",
                                                         "verdicts.csv", "threshold_search.csv"))
    return recommend_thresholds(octaves, t, v, search, study)


# ---------------------------------------------------------------------------
# The review's content
# ---------------------------------------------------------------------------

def _machines(evidence: list) -> list:
    seen = list(dict.fromkeys(e.machine for e in evidence))
    base = [m for m in _MACHINE_ORDER if m in seen]
    return base + [m for m in seen if m not in base]


def _cell_link(d, guard: str) -> str:
    """The link of the row a decision's reason reads (its basis)."""
    return d.basis.link if d.basis is not None else ""


def _defects(reports: dict, term: str | None) -> list:
    rows = []
    for study, folder in reports.items():
        t = _table(folder, "defects.csv")
        for r in defect_rows(t).to_dict("records"):
            rows.append({**r, "study": study})
    if not rows:
        return []
    order = {"realistic": 0, "large_logits": 1, "negative_gamma": 2}
    merged, at = [], {}
    for r in rows:
        key = (r["study"], r["format"], r["inputs"], r["special"], r["nan"], r["wrong_sign"], r["count"],
               r["max_finite_ulp"], r.get("step"), r.get("cause"))
        if key in at:
            merged[at[key]]["machines"].append(r["machine"])
            continue
        at[key] = len(merged)
        merged.append({**r, "machines": [r["machine"]]})
    merged.sort(key=lambda r: (order.get(r["inputs"], 9), -int(r["special"]), -float(r["max_finite_ulp"])))
    out = []
    for r in merged[:MAX_DEFECTS]:
        size = []
        if r["special"]:
            size.append(" + ".join(f"{fmt_num(int(r[k]))} {k.replace('_', ' ').replace('nan', 'NaN')}"
                                   for k in ("nan", "wrong_sign", "inf", "lost_inf") if r[k])
                        + f" of {fmt_num(int(r['count']))} outputs per machine")
        if r["max_finite_ulp"] > DEFECT_ULP:
            size.append(f"errors up to {fmt_num(r['max_finite_ulp'])} ulp")
        pre = "special_witness_" if r["special"] else "witness_"
        place = f"pred={_dec(r.get(pre + 'pred'))}" + (f" {term}={_dec(r.get(pre + term))}" if term else "")
        fix = r.get("fix_variant")
        if isinstance(fix, str):
            ok = int(r["fix_special"]) == 0 and float(r["fix_max_finite_ulp"]) <= DEFECT_ULP
            fix_text = (f"candidate (max {fmt_num(float(r['fix_max_finite_ulp']))} ulp, "
                        f"{fmt_num(int(r['fix_special']))} special)" if ok else
                        f"nothing yet (candidate: max {fmt_num(float(r['fix_max_finite_ulp']))} ulp, "
                        f"{fmt_num(int(r['fix_special']))} special)")
        else:
            fix_text = "not measured here"
        out.append({"study": r["study"], "machines": r["machines"], "format": r["format"], "inputs": r["inputs"],
                    "inputs_text": input_class_text(r["inputs"], term), "special": int(r["special"]),
                    "nan": int(r["nan"]), "wrong_sign": int(r["wrong_sign"]), "count": int(r["count"]),
                    "max_finite_ulp": float(r["max_finite_ulp"]), "size": "; ".join(size), "place": place,
                    "step": r.get("step") if isinstance(r.get("step"), str) else None,
                    "cause": r.get("cause") if isinstance(r.get("cause"), str) else None,
                    "explain": r.get("explain") if isinstance(r.get("explain"), str) else None,
                    "fix": fix_text, "link": f"{r['study']}/report.html#answers"})
    return out


def _dec(h) -> str:
    if h is None or (isinstance(h, float) and math.isnan(h)):
        return "?"
    v = float.fromhex(h) if isinstance(h, str) and "0x" in h else float(h)
    return f"{v:.6g}"


def _candidate(reports: dict) -> dict | None:
    """The candidate's targets and its standards, reconciled (from the candidate report)."""
    folder = reports.get("candidate")
    if folder is None:
        return None
    fj = json.loads((folder / "findings.json").read_text())
    targets = next((a for a in fj.get("answers", []) if a.get("question", "").startswith("Which of its targets")),
                   None)
    std = _table(folder, "standards.csv")
    lines = []
    if not std.empty:
        c = std[(std["variant"] == "candidate") & (std["region"] == "all")]
        for fmt, part in c.groupby("format", sort=False):
            passed = int(part["threshold_pass"].astype(str).eq("True").sum())
            fa = int(part["false_alarm"].fillna(0).sum())
            blind = int(part["blind"].fillna(0).sum())
            wit = next((w for w in part["false_alarm_witness"] if isinstance(w, str) and w), "")
            lines.append({"format": fmt, "cells": len(part), "threshold_pass": passed, "false_alarm": fa,
                          "blind": blind, "false_alarm_witness": wit,
                          "special_mismatch": int(part["special_mismatch"].fillna(0).sum())
                          if "special_mismatch" in part else 0})
    tgt = _table(folder, "targets.csv")
    inside = {}
    if not tgt.empty:
        for r in tgt[tgt["variant"] == "candidate"].to_dict("records"):
            inside[(r["machine"], r["format"])] = (float(r["max_ulp_outside"]), float(r["max_ulp_inside"]))
    return {"targets": (targets or {}).get("short") or (targets or {}).get("sentence"), "standards": lines,
            "inside_outside": {f"{m} {f}": v for (m, f), v in inside.items()},
            "link": "candidate/report.html#targets", "standards_link": "candidate/report.html#standards"}


def _candidate_words(c: dict) -> list:
    out = [f"Targets: {c['targets']}"] if c.get("targets") else []
    for s in c["standards"]:
        io = [v for k, v in c["inside_outside"].items() if k.endswith(s["format"])]
        root = ""
        if io:
            outside, inside = max(v[0] for v in io), max(v[1] for v in io)
            root = (f"; its largest error on the run's points (the study's grid) is {fmt_num(outside)} ulp outside "
                    f"the root neighbourhood of A and {fmt_num(inside)} ulp inside it, which the targets exempt and "
                    "the standards do not")
        out.append(f"Standards, {s['format']}: the threshold standard passes {s['threshold_pass']} of its "
                   f"{s['cells']} cells; they reject {fmt_num(s['false_alarm'])} of its outputs that are "
                   f"correctly rounded (e.g. {s['false_alarm_witness'] or 'none'}) and accept "
                   f"{fmt_num(s['blind'])} over 1,024 ulp{root}"
                   + (f"; {fmt_num(s['special_mismatch'])} of its outputs are special where the exact value is not "
                      "(or the other way round)" if s.get("special_mismatch") else "")
                   + (". The standards and the ULP measure agree on every other output." if s['false_alarm']
                      or s['blind'] else ". The standards and the ULP measure agree on every output."))
    return out


def _blind_spots(reports: dict) -> list:
    out, seen = [], set()
    for study, folder in reports.items():
        t = _table(folder, "standards_blind.csv")
        for r in t.to_dict("records"):
            if r["kind"] in seen:
                continue
            seen.add(r["kind"])
            what = ("accepted although far off" if r["kind"] == "blind" else "rejected although correctly rounded")
            out.append({"kind": r["kind"], "what": what, "study": study, "machine": r["machine"],
                        "format": r["format"], "pred": r["pred"], "computed": r["computed"], "exact": r["exact"],
                        "worst": r["worst"], "worst_unit": r["worst_unit"], "explain": r["explain"],
                        "link": f"{study}/report.html#standards"})
    return out


def _scope(reports: dict, tiled: dict | None = None) -> list:
    lines = []
    for study, folder in reports.items():
        s = _table(folder, "scope.csv")
        if s.empty:
            continue
        missing = s[~s["exercised"].astype(str).eq("True")]
        for r in missing.to_dict("records"):
            lines.append(f"{study}: {r['guard']} not exercised ({r['why not']})")
    t = (tiled or {}).get("G4")
    if t is None:
        lines.append("G4 at the production tiling: every study runs the whole task as one tile, so G4's fallback acts "
                     "wherever a base is clamped anywhere; the per-ubFormer-tile behaviour of the kernel is not "
                     "measured (an upper bound).")
    else:
        lines.append(f"G4 at the production tiling: measured by {t['study']} only (tile {_tile_words(t['tiles'])}, "
                     "the UB split of the Ascend 950's 248 KiB UB), on sorted preds, where the clamped bases fill as "
                     "few tiles as they can; every other study runs the whole task as one tile (an upper bound); a "
                     "task too small to fill the cores has a smaller tile (its per-core block), not measured.")
    lines += [
        "Device outputs: no report scores outputs of a real Ascend device; the npu model's Exp, Ln and Div are "
        "proxies within their documented 1 ulp (npu_math.md §7).",
        "Verdicts on a grid: alpha, gamma, weight and dout are measured on each study's grid of values, not "
        "between them.",
    ]
    return lines


def review_data(out) -> dict:
    """The review's content from the report folders under ``out`` (what review.json holds)."""
    out = Path(out)
    reports = _reports(out)
    op = get_operator(DEFAULT_OPERATOR)
    term = op.TERMS_ATTRIBUTE
    evidence = []
    for study, folder in reports.items():
        evidence += _guard_rows(study, _table(folder, "verdicts.csv"), op)
    thresholds = []
    for study, folder in reports.items():
        thresholds += threshold_recommendation(study, folder)
    for r in thresholds:  # the recommendation against the production setting is G5's change row
        v = _table(reports[r["study"]], "verdicts.csv")
        v = v[(v["region"] == "all") & (v["machine"] == r["machine"]) & (v["with_variant"] == r["recommended_variant"])
              & (v["without_variant"] == r["production_variant"])]
        for row in v.to_dict("records"):
            g = _GUARD.match(str(row["subject"]))
            evidence.append(_evidence(r["study"], row, g.group(1) if g else "G5", r["recommendation"], None,
                                      "threshold"))
    machines = _machines(evidence)
    guards = list(op.GUARD_NAMES)
    decisions = []
    tiled = tile_rows(reports, op)
    for g in guards:
        for m in machines:
            rows = [e for e in evidence if e.guard == g and e.machine == m]
            d = decide_cell(rows)
            reason, per_tile = d.reason, None
            cell = _tiled_cell(g, m, tiled, [e for e in rows if e.study != tiled.get(g, {}).get("study")])
            if cell is not None:
                at_tile, reason, per_tile, used = cell
                d = replace(at_tile, reason=reason, evidence=used)
            decisions.append({"guard": g, "name": op.GUARD_NAMES[g], "machine": m, "decision": d.decision,
                              "effect": d.effect, "to": d.to, "on": d.on, "word": d.word, "reason": d.reason,
                              "link": _cell_link(d, g), "per_tile": per_tile,
                              "evidence": [{"study": e.study, "comparison": e.comparison, "format": e.format,
                                            "verdict": e.verdict, "exercised": e.exercised, "better": e.better,
                                            "worse": e.worse, "changed": e.changed,
                                            "median_change_bits": None if math.isnan(e.median_change_bits)
                                            else e.median_change_bits, "alternative": e.alternative,
                                            "assumption": e.assumption} for e in d.evidence]})
    devices = {m: {"device": device_of(m), **({"behaviour": DEVICES[m.split("+")[0]].behaviour,
                                               "source": DEVICES[m.split("+")[0]].source}
                                              if m.split("+")[0] in DEVICES else {})} for m in machines}
    # (the decisions read the default operator's reports; the list links every operator's)
    return {"reports": {s: f"{s}/report.html" for s in _reports(out, None)}, "machines": machines, "devices": devices,
            "production_model": PRODUCTION_MODEL, "thresholds": asdict(THRESHOLDS), "rule": rule_text(),
            "decisions": decisions, "production": _production_words(decisions),
            "threshold": thresholds, "defects": _defects(reports, term), "candidate": _candidate(reports),
            "blind_spots": _blind_spots(reports), "scope": _scope(reports, tiled),
            "tiling": [{"guard": g, "study": t["study"], "tiles": t["tiles"], "rows": t["regions"]}
                       for g, t in tiled.items()]}


def _production_words(decisions: list) -> str:
    mine = [d for d in decisions if d["machine"] == PRODUCTION_MODEL]
    if not mine:
        return f"No report measured the production device's model ({PRODUCTION_MODEL})."
    parts = []
    for kind in ("keep", "change", "drop", "depends"):
        ds = [d for d in mine if d["decision"] == kind]
        if not ds:
            continue
        if kind == "change":
            parts.append("change " + ", ".join(f"{d['guard']} to {d['to']}" for d in ds))
        elif kind == "depends":
            parts.append("undecided: " + ", ".join(f"{d['guard']} (on {d['on']})" for d in ds))
        else:
            parts.append(f"{kind} " + ", ".join(d["guard"] + (f" ({d['effect']})" if d["effect"] not in ("none",)
                                                              else "") + (" at the production tile"
                                                                          if d.get("per_tile") else "")
                                                for d in ds))
    return (f"On the production device, {device_of(PRODUCTION_MODEL)} (machine model {PRODUCTION_MODEL}): "
            + "; ".join(parts) + ".")


def _tile_label(assumption: str) -> str:
    """'production tile (3,008 (fp32) / ...)' -> 'at tile 3,008 / 3,200'; the upper bound -> 'one tile (bound)'."""
    if assumption.startswith("production tile"):
        return "at tile " + " / ".join(re.findall(r"(\d[\d,]*) \(", assumption))
    return "one tile (upper bound)"


def _tile_cell(r) -> str:
    """One region's row of a tile assumption: 'hurts: 133 better / 289 worse of 1,850 changed, median -11 b'."""
    if r is None:
        return "not run"
    if r["verdict"] == "no_effect":
        return f"no effect (0 of {r['count']:,} changed)"
    med = r["median_change_bits"]
    text = f"{r['verdict']}: {r['better']:,} better / {r['worse']:,} worse of {r['changed']:,} changed"
    if med is not None and math.isfinite(med):
        text += f", median {med:+.2g} b"
    if r["specials_fixed"] or r["specials_caused"]:
        text += f", specials {r['specials_fixed']:,} fixed / {r['specials_caused']:,} caused"
    return text


def _short(reason: str, n: int = 90) -> str:
    return reason if len(reason) <= n else reason[:n - 1].rstrip() + "…"


# ---------------------------------------------------------------------------
# Writing the page
# ---------------------------------------------------------------------------

_EXTRA_CSS = ("table.decide{white-space:normal;table-layout:fixed;width:100%}table.decide td{vertical-align:top;"
              "font-size:11px}table.decide thead th:first-child{width:11em}table.decide tbody th{text-align:left;word-break:break-word}td.keep{background:#c8ecc8}"
              "td.drop{background:#f5c0c0}td.change{background:#f9dca4}td.depends{background:#e8e8e8}"
              "td .w{font-weight:bold;font-size:12px}td.prod,th.prod{outline:2px solid #035}"
              ".lead{font-size:15px;margin:.4em 0}table.wrap{white-space:normal}")


def _md_link(text: str, href: str) -> str:
    return f"[{text}]({href.replace('report.html#', 'report.md#').replace(' ', '%20')})" if href else text


def _gh_slug(text: str) -> str:
    """The anchor GitHub gives a Markdown heading (lowercase, punctuation dropped, spaces to hyphens)."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _md_href(href: str, reports_dir: Path) -> str:
    """``study/report.html#id`` as a link into ``study/report.md``: the heading whose HTML id is ``id``, by the
    anchor GitHub gives it."""
    if "#" not in href:
        return href.replace("report.html", "report.md")
    page, ident = href.split("#", 1)
    md = reports_dir / page.replace("report.html", "report.md")
    htm = reports_dir / page
    heading = None
    if htm.is_file():
        m = re.search(rf"<h[1-6] id='{re.escape(ident)}'>(.*?)</h[1-6]>", htm.read_text())
        heading = html.unescape(m.group(1)) if m else None
    target = page.replace("report.html", "report.md")
    return f"{target}#{_gh_slug(heading)}" if heading and md.is_file() else target


def _render(data: dict, reports_dir: Path) -> tuple[str, str]:
    """(index.md, index.html) of the review data."""
    md, h = [], []
    esc = html.escape
    title = "Precision review: SigmoidFocalLossGrad"
    md.append(f"# {title}\n")
    h.append(f"<h1>{esc(title)}</h1>")
    md.append(f"**{data['production']}**\n")
    h.append(f"<p class='lead'><b>{esc(data['production'])}</b></p>")

    # decision table
    machines = data["machines"]
    md.append("## Decisions: one per guard and machine\n")
    h.append("<h2 id='decisions'>Decisions: one per guard and machine</h2>")
    md.append("| guard | " + " | ".join(machines) + " |")
    md.append("|---|" + "---|" * len(machines))
    head = "".join(f"<th{' class=prod' if m == data['production_model'] else ''}>{esc(m)}</th>" for m in machines)
    rows_h = []
    by = {(d["guard"], d["machine"]): d for d in data["decisions"]}
    guards = list(dict.fromkeys(d["guard"] for d in data["decisions"]))
    for g in guards:
        name = next(d["name"] for d in data["decisions"] if d["guard"] == g)
        cells_md, cells_h = [], []
        for m in machines:
            d = by[(g, m)]
            reason = _short(d["reason"])
            if d.get("per_tile"):  # a tile-dependent guard: one short line per tile assumption
                reason = "; ".join(f"{_tile_label(p['assumption'])}: {p['word']}, {_short(p['reason'], 170)}"
                                   for p in d["per_tile"])
            cells_md.append(f"**{d['word']}**: {reason} " + _md_link("→", _md_href(d["link"], reports_dir))
                            if d["link"] else f"**{d['word']}**: {reason}")
            link = f" <a href='{esc(d['link'], quote=True)}'>→ {esc(d['link'].split('/')[0])}</a>" if d["link"] else ""
            prod = " prod" if m == data["production_model"] else ""
            cells_h.append(f"<td class='{d['decision']}{prod}' title='{esc(d['reason'], quote=True)}'>"
                           f"<span class='w'>{esc(d['word'])}</span><br>{esc(reason)}{link}</td>")
        md.append(f"| {g} {name} | " + " | ".join(c.replace("|", "\\|") for c in cells_md) + " |")
        rows_h.append(f"<tr><th>{esc(g)} {esc(name)}</th>{''.join(cells_h)}</tr>")
    md.append("")
    h.append(f"<table class='decide'><thead><tr><th>guard</th>{head}</tr></thead><tbody>{''.join(rows_h)}"
             "</tbody></table>")
    dev_md = ["| machine model | device it stands for | behaviour | source |", "|---|---|---|---|"]
    dev_h = []
    for m in machines:
        d = data["devices"][m]
        dev_md.append(f"| {m} | {d['device']} | {d.get('behaviour', '')} | {d.get('source', '')} |")
        dev_h.append(f"<tr><td>{esc(m)}</td><td>{esc(d['device'])}</td><td>{esc(d.get('behaviour', ''))}</td>"
                     f"<td>{esc(d.get('source', ''))}</td></tr>")
    rule = f"Rule: {data['rule']}"
    md += ["Which machine model stands for which device (the production device's column is outlined):\n",
           "\n".join(dev_md) + "\n", rule + "\n"]
    h.append("<p class='note'>Which machine model stands for which device (the production device's column is "
             "outlined):</p><table class='wrap'><thead><tr><th>machine model</th><th>device it stands for</th>"
             f"<th>behaviour</th><th>source</th></tr></thead><tbody>{''.join(dev_h)}</tbody></table>"
             f"<p class='rule'>{esc(rule)}</p>")

    # tile-dependent guards (G4): the decision per tile assumption, region by region
    for t in data.get("tiling", []):
        title_t = f"{t['guard']} per tile assumption: the production tile and the one-tile upper bound"
        anchor_t = f"tiling-{t['guard'].lower()}"
        intro = (f"{t['guard']} acts per tile (the kernel's ubFormer: {_tile_words(t['tiles'])}, from the "
                 "operator's UB split on the Ascend 950); the decision above is the one at that tile, from "
                 f"{t['study']}; every other study runs the whole task as one tile, an upper bound on where it acts. "
                 "Region by region (common: a clamped base on most points; rare: none of the region's own), "
                 "better / worse outputs with the guard against without it, and the median change in bits.")
        md.append(f"## {title_t}\n")
        md.append(intro + "\n")
        h.append(f"<h2 id='{anchor_t}'>{html.escape(title_t)}</h2><p class='note'>{html.escape(intro)}</p>")
        cols = ["machine", "format", "region", "production tile", "one tile (upper bound)"]
        md.append("| " + " | ".join(cols) + " |")
        md.append("|" + "---|" * len(cols))
        keyed = {}
        for r in t["rows"]:
            keyed.setdefault((r["machine"], r["format"], r["region"]), {})[r["assumption"]] = r
        rows_t = []
        for (m, f, region), both in keyed.items():
            vals = [m, f, region, _tile_cell(both.get("production")), _tile_cell(both.get("upper"))]
            md.append("| " + " | ".join(v.replace("|", "\\|") for v in vals) + " |")
            rows_t.append("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in vals) + "</tr>")
        md.append(f"\n{_md_link(t['study'] + ' report', _md_href(t['study'] + '/report.html#verdicts', reports_dir))}\n")
        h.append("<details><summary>every region, both tile assumptions</summary><table class='wrap'><thead><tr>"
                 + "".join(f"<th>{html.escape(c)}</th>" for c in cols) + f"</tr></thead><tbody>{''.join(rows_t)}"
                 f"</tbody></table></details><p><a href='{html.escape(t['study'], quote=True)}/report.html#verdicts'>"
                 f"{html.escape(t['study'])} report</a></p>")

    # threshold
    if data["threshold"]:
        md.append("## G5's threshold: one recommendation\n")
        h.append("<h2 id='threshold'>G5's threshold: one recommendation</h2><ul>")
        for r in data["threshold"]:
            s = recommendation_sentence(r)
            md.append(f"- {s} " + _md_link("(threshold section)", _md_href(r["link"], reports_dir)))
            h.append(f"<li>{esc(s)} <a href='{esc(r['link'], quote=True)}'>threshold section</a></li>")
        md.append("")
        h.append("</ul>")

    # defects
    md.append("## The kernel's defects, ranked\n")
    h.append("<h2 id='defects'>The kernel's defects, ranked</h2>")
    intro = ("Special outputs (NaN, inf, wrong sign, lost inf) and finite errors over 2^20 ulp of the production "
             "kernel, realistic inputs (gamma >= 0, |x| < 20) first, then by how many outputs they ruin; machines "
             "with the same figures share a row.")
    md.append(intro + "\n")
    h.append(f"<p class='note'>{esc(intro)}</p>")
    cols = ["#", "inputs", "machines, format", "size", "place", "born at (cause)", "fixed by", "report"]
    md.append("| " + " | ".join(cols) + " |")
    md.append("|" + "---|" * len(cols))
    rows_h = []
    for i, r in enumerate(data["defects"], 1):
        born = f"{r['step']} ({r['cause']})" if r["step"] else "not attributed"
        vals = [str(i), r["inputs_text"], f"{', '.join(r['machines'])} {r['format']}", r["size"], r["place"], born,
                r["fix"]]
        md.append("| " + " | ".join(v.replace("|", "\\|") for v in vals) + " | "
                  + _md_link(r["study"], _md_href(r["link"], reports_dir)) + " |")
        rows_h.append("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in vals)
                      + f"<td><a href='{esc(r['link'], quote=True)}'>{esc(r['study'])}</a></td></tr>")
    md.append("")
    h.append("<table class='wrap'><thead><tr>" + "".join(f"<th>{esc(c)}</th>" for c in cols)
             + f"</tr></thead><tbody>{''.join(rows_h)}</tbody></table>")

    # candidate
    c = data["candidate"]
    if c:
        md.append("## The candidate: its targets and the team's standards\n")
        h.append("<h2 id='candidate'>The candidate: its targets and the team's standards</h2><ul>")
        for s in _candidate_words(c):
            md.append(f"- {s}")
            h.append(f"<li>{esc(s)}</li>")
        md.append(f"- {_md_link('targets', _md_href(c['link'], reports_dir))}, "
                  f"{_md_link('standards', _md_href(c['standards_link'], reports_dir))}\n")
        h.append(f"<li><a href='{esc(c['link'], quote=True)}'>targets</a>, "
                 f"<a href='{esc(c['standards_link'], quote=True)}'>standards</a></li></ul>")

    # blind spots
    if data["blind_spots"]:
        md.append("## The standards' blind spots\n")
        h.append("<h2 id='blind-spots'>The standards' blind spots</h2><ul>")
        for b in data["blind_spots"]:
            s = (f"{b['kind']} ({b['what']}): {b['machine']} {b['format']} pred={b['pred']} computed={b['computed']} "
                 f"exact={b['exact']} ({fmt_num(b['worst'])} {b['worst_unit']})")
            md.append(f"- {s}; `{b['explain']}` " + _md_link(b["study"], _md_href(b["link"], reports_dir)))
            h.append(f"<li>{esc(s)}; <code>{esc(b['explain'])}</code> "
                     f"<a href='{esc(b['link'], quote=True)}'>{esc(b['study'])}</a></li>")
        md.append("")
        h.append("</ul>")

    # scope and reports
    md.append("## Scope: what no report covers\n")
    h.append("<h2 id='scope'>Scope: what no report covers</h2><ul>")
    for s in data["scope"]:
        md.append(f"- {s}")
        h.append(f"<li>{esc(s)}</li>")
    md.append("")
    h.append("</ul>")
    md.append("## Reports\n")
    h.append("<h2 id='reports'>Reports</h2><ul>")
    for study, href in data["reports"].items():
        md.append(f"- {_md_link(study, href.replace('report.html', 'report.md'))} "
                  f"([HTML]({href}))")
        h.append(f"<li><a href='{esc(href, quote=True)}'>{esc(study)}</a></li>")
    md.append("")
    h.append("</ul>")
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{esc(title)}</title><style>{CSS}{_EXTRA_CSS}</style></head><body>"
            + "\n".join(h) + "</body></html>\n")
    return "\n".join(md) + "\n", page


def page_links(page: str) -> list:
    """The relative links of a review page (HTML ``href='...'`` or Markdown ``](...)``), anchors included."""
    links = re.findall(r"href='([^']+)'", page) + re.findall(r"\]\(([^)\s]+)\)", page)
    return [html.unescape(x) for x in links if not x.startswith(("http:", "https:", "#", "mailto:"))]


def build_review(out) -> Path:
    """Write ``index.md``, ``index.html`` and ``review.json`` into the reports folder ``out``; returns index.html."""
    out = Path(out)
    data = review_data(out)
    md, page = _render(data, out)

    def enc(v):
        if isinstance(v, float) and not math.isfinite(v):
            return fmt_num(v)
        if isinstance(v, dict):
            return {k: enc(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [enc(x) for x in v]
        return v

    for name, text in (("index.md", md), ("index.html", page),
                       ("review.json", json.dumps(enc(data), indent=1, sort_keys=True, default=str) + "\n")):
        tmp = out / f".{name}.tmp"
        tmp.write_text(text)
        tmp.replace(out / name)
    return out / "index.html"
