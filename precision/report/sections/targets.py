"""A candidate against its accuracy targets, on the first screen.

The targets are the section's options (the study file's ``[report.targets]``):
fp32 max error outside the root neighbourhood (gamma < -1 and C >= 4,
:mod:`precision.bracket`), no special output anywhere, fp16 share correctly
rounded and fp16 max error everywhere, primitive ops per element relative to
the production kernel (:mod:`precision.opcount`).  ``targets.csv`` has the
figures of every variant of the run (the others for comparison), each
maximum with its witness; ``opcount.csv`` the op counts.  Each maximum is
labelled exhaustive or sampled (:func:`precision.report.tables.maximum_label`).

The option ``hunts`` names JSON files written by ``precision hunt ... --json``
(paths relative to the study file).  A hunt of the candidate on a machine's
fp32 output outside the root neighbourhood makes that target's figure the
larger of the run's sampled maximum and the hunted one, labelled "hunted"
with its budget (CPU seconds = seconds x workers) and what it covered
(``hunts.csv``); the target is met only if that figure is within it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from precision.bracket import ROOT_NEIGHBOURHOOD_C, band_ranges
from precision.opcount import count_ops
from precision.report.answers import Answer
from precision.report.document import Heading, Para, Section, Table
from precision.report.findings import Finding, cite, fmt_num
from precision.report.tables import inputs_text, maximum_label, ordered, short_hex
from precision.scoring import SPECIAL_CLASSES
from precision.sweep import hex_witnesses

__all__ = ["build", "targets_table", "opcount_table", "assess_targets", "hunt_table"]

T = "targets.csv"


def targets_table(run, c_threshold: float) -> pd.DataFrame:
    """Per (variant, machine, format): errors outside and inside the root neighbourhood, specials, correct share.

    Empty without bracket bands, or when no band edge is ``c_threshold``
    (the points of a band straddling it could not be placed).
    """
    if "bracket" not in run.stats.frame.columns or c_threshold not in run.bracket_edges:
        return pd.DataFrame()
    lo = {label: a for label, (a, _) in zip(run.brackets, band_ranges(run.bracket_edges))}
    f = run.stats.frame
    zone = np.where((f["bracket"].map(lo) >= c_threshold) & (f["gamma"] < -1), "inside", "outside")
    stats = run.stats.with_columns(zone=zone)
    keys = ["variant", "machine", "format"]
    allz = stats.merge(keys).table(keys).set_index(keys)
    zoned = hex_witnesses(stats.merge(keys + ["zone"]).table(keys + ["zone"]))
    out = zoned[zoned["zone"] == "outside"].set_index(keys)
    ins = zoned[zoned["zone"] == "inside"].set_index(keys)
    t = pd.DataFrame(index=allz.index)
    t["count"] = allz["count"]
    t["outside"] = out["count"]
    t["max_ulp_outside"] = out["max_ulp"]
    t["max_finite_ulp_outside"] = out["max_finite_ulp"]
    for col in (c for c in out.columns if c.startswith("witness_")):
        t[f"{col}_outside"] = out[col]
    t["inside"] = ins["count"].reindex(t.index).fillna(0).astype(np.int64)
    t["max_ulp_inside"] = ins["max_ulp"].reindex(t.index)
    t["special"] = allz[list(SPECIAL_CLASSES)].sum(axis=1).astype(np.int64)
    for c in SPECIAL_CLASSES:
        t[c] = allz[c]
    t["share_correct"] = allz["share_correct"]
    t["not_correct"] = (allz["count"] - stats.merge(keys).frame.set_index(keys)["n_correct"]).astype(np.int64)
    t["over_1ulp"] = allz["over_1ulp"]
    t["max_ulp"] = allz["max_ulp"]
    return ordered(t.reset_index(), run)


def opcount_table(variants, reference: str = "kernel") -> pd.DataFrame:
    """Primitive ops per element on the npu machine (:func:`precision.opcount.count_ops`) and the ratio to ``reference``."""
    names = list(dict.fromkeys([reference, *variants]))
    counts = {v: count_ops(v) for v in names}
    rows = [(v, counts[v][0], counts[v][0] / counts[reference][0],
             " ".join(f"{k}={n:.2f}" for k, n in counts[v][1].items())) for v in names]
    return pd.DataFrame(rows, columns=["variant", "ops", "ratio_to_kernel", "per_op"])


def hunt_table(paths, base: Path) -> tuple[pd.DataFrame, list]:
    """(one row per hunt file, the files that could not be read); paths relative to ``base``."""
    rows, missing = [], []
    for rel in paths:
        path = base / rel
        try:
            h = json.loads(path.read_text())
        except (OSError, ValueError):
            missing.append(str(rel))
            continue
        w = h.get("witness") or {}
        rows.append({"variant": h["variant"], "machine": h["machine"], "format": h["format"], "kind": h["kind"],
                     "max_ulp": float(h["max_ulp"]), "max_finite_ulp": float(h["max_finite_ulp"]),
                     **{f"witness_{k}": w.get(k) for k in ("pred", "target", "alpha", "gamma")},
                     "seconds": float(h["seconds"]), "workers": int(h["workers"]),
                     "cpu_seconds": float(h["seconds"]) * int(h["workers"]), "points": int(h["points"]),
                     "seed": int(h["seed"]), "outside_neighbourhood": bool(h["outside_neighbourhood"]),
                     "gammas": " ".join(short_hex(g) for g in h["gammas"]),
                     "alphas": " ".join(short_hex(a) for a in h["alphas"]),
                     "targets": " ".join(str(t) for t in h["targets"]), "specials": int(h["specials"]),
                     "file": str(rel)})
    return pd.DataFrame(rows), missing


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def assess_targets(t: pd.DataFrame, ops: pd.DataFrame, K: dict, candidate: str, labels,
                   hunts: pd.DataFrame | None = None) -> tuple[dict, list]:
    """The candidate's verdict on every target: (grid cells {(target, column): (text, css)}, findings).

    ``t``: :func:`targets_table`; ``ops``: :func:`opcount_table`; ``K``: the
    targets (the section's options); ``labels``: how the maxima were found,
    per format (a dict, or one string for every format); ``hunts``:
    :func:`hunt_table` (the fp32 maximum outside the neighbourhood is then
    the larger of the sampled and the hunted one).
    """
    hunts = hunts if hunts is not None else pd.DataFrame()
    def label(fmt):
        return labels.get(fmt, "") if isinstance(labels, dict) else labels
    cells, findings = {}, []
    for _, r in t[t["variant"] == candidate].iterrows():
        w = {"variant": candidate, "machine": r["machine"], "format": r["format"]}
        col = f"{r['machine']} {r['format']}"
        special, count = cite("special", T, t, w, "special"), cite("count", T, t, w, "count")
        ok_special = special.value <= K["nan_inf"]
        cells[("no special output (NaN, inf, wrong sign, lost inf)", col)] = (
            f"{_verdict(ok_special)} {special.text}", "met" if ok_special else "missed")
        if r["format"] == "fp32":
            mx = cite("max_outside", T, t, w, "max_ulp_outside")
            h = hunts[(hunts["variant"] == candidate) & (hunts["machine"] == r["machine"]) & (hunts["format"] == "fp32")
                      & hunts["outside_neighbourhood"]] if not hunts.empty else hunts
            sampled = (f"{mx.text} ulp ({label('fp32')}) at {inputs_text(r, 'witness_', '_outside')}")
            nums = [mx, special, count]
            if len(h):
                hw = {"variant": candidate, "machine": r["machine"], "format": "fp32", "outside_neighbourhood": True}
                hx, cpu = cite("hunted", "hunts.csv", hunts, hw, "max_ulp"), cite("cpu", "hunts.csv", hunts, hw,
                                                                                  "cpu_seconds")
                nums += [hx, cpu]
                hr = h.iloc[0]
                figure = max(float(mx.value), float(hx.value))
                ok = figure <= K["fp32_max_ulp"]
                shown = hx.text if float(hx.value) >= float(mx.value) else mx.text
                how = f"hunted, {cpu.text} CPU-s" if float(hx.value) >= float(mx.value) else "sampled"
                cells[(f"fp32 max error <= {fmt_num(K['fp32_max_ulp'])} ulp outside the root neighbourhood",
                       col)] = (f"{_verdict(ok)} {shown} ({how})", "met" if ok else "missed")
                text = (f"On {r['machine']}, fp32 output, outside the root neighbourhood: {candidate} max error "
                        f"{hx.text} ulp hunted ({cpu.text} CPU seconds, seed {int(hr['seed'])}, {int(hr['points']):,} "
                        f"points over gamma {hr['gammas']}, alpha {hr['alphas']}, selectors {hr['targets']}) at "
                        f"pred={short_hex(hr['witness_pred'])} t={hr['witness_target']} "
                        f"alpha={short_hex(hr['witness_alpha'])} gamma={short_hex(hr['witness_gamma'])}; the run's "
                        f"{sampled}; target <= {fmt_num(K['fp32_max_ulp'])}: {_verdict(ok)}; {special.text} special "
                        f"outputs of {count.text}.")
            else:
                ok = mx.value <= K["fp32_max_ulp"]
                cells[(f"fp32 max error <= {fmt_num(K['fp32_max_ulp'])} ulp outside the root neighbourhood",
                       col)] = (f"{_verdict(ok)} {mx.text}", "met" if ok else "missed")
                text = (f"On {r['machine']}, fp32 output, outside the root neighbourhood: {candidate} max error "
                        f"{sampled} (target <= {fmt_num(K['fp32_max_ulp'])}: {_verdict(ok)}; no hunt); "
                        f"{special.text} special outputs of {count.text}.")
            findings.append(Finding(f"targets/{r['machine']}/fp32", "targets", text, nums, 3))
        else:
            wrong = cite("not_correct", T, t, w, "not_correct")
            mx = cite("max_ulp", T, t, w, "max_ulp")
            ok_share = wrong.value <= (1.0 - K["fp16_share_correct"]) * count.value
            ok_max = mx.value <= K["fp16_max_ulp"]
            cells[(f"{r['format']} correctly rounded on a share >= {fmt_num(K['fp16_share_correct'])}", col)] = (
                f"{_verdict(ok_share)} {100 * (1 - wrong.value / count.value):.4f} %", "met" if ok_share else "missed")
            cells[(f"{r['format']} max error <= {fmt_num(K['fp16_max_ulp'])} ulp", col)] = (
                f"{_verdict(ok_max)} {mx.text}", "met" if ok_max else "missed")
            text = (f"On {r['machine']}, {r['format']} output ({count.text} outputs, the neighbourhood included): "
                    f"{candidate} is not correctly rounded on {wrong.text} (target share >= "
                    f"{fmt_num(K['fp16_share_correct'])}: {_verdict(ok_share)}), max error {mx.text} ulp ({label(r['format'])}; "
                    f"target <= {fmt_num(K['fp16_max_ulp'])}: {_verdict(ok_max)}).")
            findings.append(Finding(f"targets/{r['machine']}/{r['format']}", "targets", text, [wrong, count, mx], 3))
    if "kernel" in set(ops["variant"]) and candidate in set(ops["variant"]):
        ratio = cite("ratio", "opcount.csv", ops, {"variant": candidate}, "ratio_to_kernel")
        ok = ratio.value <= K["ops_ratio"]
        cells[(f"primitive ops <= {fmt_num(K['ops_ratio'])}x the kernel's", "npu (op count)")] = (
            f"{_verdict(ok)} {ratio.text}", "met" if ok else "missed")
        findings.append(Finding("targets/ops", "targets", f"Cost: {candidate} takes {ratio.text} times the "
                                f"production kernel's primitive ops per element (npu; target <= "
                                f"{fmt_num(K['ops_ratio'])}: {_verdict(ok)}).", [ratio], 4))
    return cells, findings


def build(ctx) -> Section:
    run = ctx.run
    section = Section("targets", "The candidate against its targets")
    candidate = ctx.option("targets", "variant")
    t = targets_table(run, ROOT_NEIGHBOURHOOD_C)
    if t.empty or candidate not in set(t["variant"]):
        return section
    K = {k: ctx.option("targets", k) for k in ("fp32_max_ulp", "nan_inf", "fp16_share_correct", "fp16_max_ulp",
                                              "ops_ratio")}
    ops = opcount_table([v for v in run.variants if v == candidate])
    section.tables.update({T: t, "opcount.csv": ops})
    labels = {f: maximum_label(run, f) for f in dict.fromkeys(t["format"])}
    hunts, missing = hunt_table(ctx.option("targets", "hunts"), Path(run.run.get("study_file", ".")).parent)
    if not hunts.empty:
        section.tables["hunts.csv"] = hunts
        hunted = hunts[hunts["variant"] == candidate]
        if len(hunted):
            labels["fp32"] = (f"{labels.get('fp32', '')}; outside the neighbourhood hunted "
                              + ", ".join(f"{m}: {c:,.0f} CPU-s" for m, c in zip(hunted["machine"],
                                                                                  hunted["cpu_seconds"])))
    cells, findings = assess_targets(t, ops, K, candidate, labels, hunts)
    if missing:
        findings.append(Finding("targets/hunts-missing", "targets", "Hunt files named by the study but not found: "
                                + ", ".join(missing) + "; those maxima are the run's sampled ones.", [], 2))
    rows = list(dict.fromkeys(k[0] for k in cells))
    cols = list(dict.fromkeys(k[1] for k in cells))
    grid = pd.DataFrame("", index=range(len(rows)), columns=["target"] + cols)
    style = pd.DataFrame("", index=grid.index, columns=grid.columns)
    for (row, col), (text, css) in cells.items():
        i = rows.index(row)
        grid.loc[i, "target"], grid.loc[i, col], style.loc[i, col] = row, text, css
    style = style.where(grid != "", "na")
    style["target"] = ""
    section.first = [Heading(f"{candidate} against its targets", 2, "targets-grid"), Table(grid, T, "", style),
                     Para("Maxima: " + "; ".join(f"{f} {lab}" for f, lab in labels.items())
                          + f". Root neighbourhood: gamma < -1 and the bracket's cancellation factor "
                          f"C >= {ROOT_NEIGHBOURHOOD_C:g}.", "note")]
    shown = t.assign(inputs=[inputs_text(r, "witness_", "_outside") for _, r in t.iterrows()])
    section.body = [Table(shown[["variant", "machine", "format", "count", "outside", "max_ulp_outside", "inputs",
                                 "inside", "max_ulp_inside", "special", "share_correct", "not_correct"]], T),
                    Para("Primitive ops per element (precision.opcount: every finite fp16 pred, both selectors, "
                         "weight present, reduction mean, gamma 2, npu machine; a library exp/ln/pow/div counts "
                         "as one op):"),
                    Table(ops, "opcount.csv")]
    section.findings = findings
    section.answers = _target_answers(cells, findings, candidate)
    return section


def _target_answers(cells: dict, findings: list, candidate: str) -> list:
    """Which targets the candidate meets: one headline sentence from the grid's cells (met on every column, or
    missed where), then each target finding as an answer of its own (its numbers cited)."""
    question = f"Which of its targets does {candidate} meet?"
    by_target: dict = {}
    for (target, col), (_, css) in cells.items():
        by_target.setdefault(target, []).append((col, css))
    met = [t for t, cs in by_target.items() if all(c == "met" for _, c in cs)]
    missed = [f"{t} (missed on {', '.join(col for col, c in cs if c != 'met')})" for t, cs in by_target.items()
              if t not in met]
    text = (f"{candidate} meets {len(met)} of its {len(by_target)} targets"
            + (f": {'; '.join(met)}" if met else "") + (f". It misses: {'; '.join(missed)}" if missed else "") + ".")
    out = [Answer(question, text, [], subject=candidate, verdict="met" if not missed else "missed")]
    out += [Answer(question, f.text, f.numbers, subject=candidate, headline=False) for f in findings]
    return out
