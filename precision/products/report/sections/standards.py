"""Acceptance standards: the verdicts of the standards kernel teams use, beside the ULP verdict, and their blind spots.

Per variant, machine and output format over all the run's points
(:func:`precision.analysis.standards.standards_table`, region ``all``): MERE, MARE,
RMSE, the threshold standard's pass, the highest ratio level against the
third party, the allclose share, beside the ULP verdict (max ulp error <=
the option ``max_ulp``, no special output).  ``standards.csv`` holds every
row, per region too; ``standards_summary.csv`` counts the cells per format
(the answer sentence cites it); ``standards_blind.csv`` lists what the
standards cannot see: outputs they accept element-wise while over 2^10 ulps
wrong (``blind``), and correctly rounded outputs they reject
(``false_alarm``), each with its worst witness in hex and a ``precision
explain`` line.  msprobe's four pre-check standards (:mod:`precision.analysis.msprobe`) follow in a table of
their own, with what msprobe's own bench (the fp32 chain of the third party, for fp16 outputs) gets wrong
against the exact value.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from precision.engine.operators import DEFAULT_OPERATOR
from precision.products.report.answers import Answer
from precision.products.report.document import Details, Heading, Para, Section, Table
from precision.products.report.findings import Finding, cite, fmt_num
from precision.products.report.mechanism import explain_command
from precision.products.report.tables import maximum_label
from precision.analysis.acceptance import ALLCLOSE_PRESETS, ACCEPTANCE_MAXIMA, BLIND_ULP, SPECIAL_RULE, THRESHOLD_T
from precision.analysis.groups import witness_attributes, witness_fields
from precision.analysis.msprobe import MSPROBE_VERDICTS
from precision.analysis.scoring import SPECIAL_CLASSES
from precision.analysis.standards import RATIO_LEVELS, StandardsSettings, standards_table, settings_from_options
from precision.recipes.target_kinds import parse_target_text, target_json

__all__ = ["build", "verdict_table", "summary_table", "msprobe_table", "blind_table", "explain_line"]

T, S, B = "standards.csv", "standards_summary.csv", "standards_blind.csv"
_KEYS = ["variant", "machine", "format"]


def explain_line(variant: str, machine: str, fmt: str, w: dict, operator: str = DEFAULT_OPERATOR) -> str:
    """The ``precision explain`` command for a witness of ``operator`` (its inputs as exact hex floats; ``w`` holds
    pred, target, the operator's attributes, weight and dout, as :func:`precision.analysis.groups.witness_fields`
    names them)."""
    weight = None if np.isnan(float(w["weight"])) else float(w["weight"]).hex()
    return explain_command(operator, variant, machine, fmt, float(w["pred"]).hex(), parse_target_text(w["target"]),
                           [(k, float(w[k]).hex()) for k in witness_attributes(w)], weight,
                           float(w["dout"]).hex() if "dout" in w else None)


def verdict_table(standards: pd.DataFrame, summary: pd.DataFrame, max_ulp: float) -> pd.DataFrame:
    """Region ``all`` of ``standards.csv`` beside the ULP verdict (max ulp <= ``max_ulp``, no special output)."""
    s = standards[standards["region"] == "all"]
    ulp = summary.groupby(_KEYS, sort=False).agg(max_ulp=("max_ulp", "max")).reset_index()
    ulp["specials"] = summary.groupby(_KEYS, sort=False)[list(SPECIAL_CLASSES)].sum().sum(axis=1).to_numpy()
    t = s.merge(ulp, on=_KEYS, how="left")
    t["ulp_pass"] = (t["max_ulp"] <= max_ulp) & (t["specials"] == 0)
    return t[_KEYS + ["count", "max_ulp", "specials", "ulp_pass", "special_match", "special_mismatch", "mere", "mare",
                      "rmse", "threshold_pass", "mare_ratio", "mere_ratio", "rmse_ratio", "level",
                      "allclose_share", "blind", "false_alarm"]].reset_index(drop=True)


def summary_table(verdicts: pd.DataFrame, standards: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per output format: how many (variant, machine) cells each standard passes, and what they let through (with
    ``standards``, msprobe's standards too: ``ms_<standard>_<verdict>``)."""
    rows = []
    for fmt, v in verdicts.groupby("format", sort=False):
        ms = (standards[(standards["region"] == "all") & (standards["format"] == fmt)]
              if standards is not None and "ms_absolute" in standards.columns else pd.DataFrame())
        rows.append({"format": fmt, "cells": len(v), "ulp_pass": int(v["ulp_pass"].sum()),
                     "threshold_pass": int(v["threshold_pass"].sum()),
                     **{f"level_{name}": int((v["level"] == name).sum())
                        for name in (*RATIO_LEVELS, "none", "special_mismatch", "third_party_special", "not_evaluable",
                                     "unpaired")},
                     "cells_special_mismatch": int((v["special_mismatch"] > 0).sum()),
                     "special_mismatch": int(v["special_mismatch"].sum()),
                     "special_match": int(v["special_match"].sum()),
                     "ratio_ties": int((v["level"].isin([*RATIO_LEVELS, "none"]) & (v["mare_ratio"] == 1)
                                        & (v["mere_ratio"] == 1) & (v["rmse_ratio"] == 1)).sum()),
                     "allclose_all": int((v["allclose_share"] == 1.0).sum()),
                     "threshold_pass_ulp_fail": int((v["threshold_pass"] & ~v["ulp_pass"]).sum()),
                     "ulp_pass_threshold_fail": int((~v["threshold_pass"] & v["ulp_pass"]).sum()),
                     "cells_blind": int((v["blind"] > 0).sum()), "blind": int(v["blind"].sum()),
                     "cells_false_alarm": int((v["false_alarm"] > 0).sum()),
                     "false_alarm": int(v["false_alarm"].sum()),
                     # msprobe's: the cells each standard passes (the benchmark and ULP standards of the cells
                     # with a third party, ms_judged), and the ratio standard's warnings
                     **({"ms_judged": int((ms["ms_benchmark"] != "not judged").sum()),
                         **{f"{name}_pass": int((ms[name] == "pass").sum())
                            for name in MSPROBE_VERDICTS},
                         "ms_ratio_warning": int((ms["ms_ratio"] == "warning").sum())} if len(ms) else {})})
    return pd.DataFrame(rows)


#: The columns of the msprobe table (region all), after the keys.
MSPROBE_SHOWN = ("ms_benchmark", "ms_rmse_ratio", "ms_max_rel_ratio", "ms_mean_rel_ratio", "ms_ulp", "ms_mean_ulp",
                 "ms_ulp_share", "ms_ulp_share_ratio", "ms_absolute", "ms_rel_err_ratio", "ms_ratio", "ms_thousandth")


def msprobe_table(standards: pd.DataFrame) -> pd.DataFrame:
    """Region ``all`` of ``standards.csv``: msprobe's four standards per (variant, machine, format)."""
    s = standards[standards["region"] == "all"]
    return s[_KEYS + ["count", *MSPROBE_SHOWN]].reset_index(drop=True)


def blind_table(stats, variants, operator: str = DEFAULT_OPERATOR) -> pd.DataFrame:
    """One row per (kind, machine, format, witness), numbered (``row``): the variants sharing it, their count, the
    worst witness (hex inputs, output, exact value, its ulp error or r) and its ``precision explain`` line."""
    merged = stats.merge_frame(_KEYS)
    rows = []
    for kind, count_col, top_col in (("blind", "acc_blind", "blind_ulp"),
                                     ("false_alarm", "acc_false_alarm", "false_alarm_r")):
        prefix = ACCEPTANCE_MAXIMA[top_col]
        for r in merged[merged[count_col] > 0].to_dict("records"):
            w = {k: r[f"{prefix}{k}"] for k in witness_fields(r.keys(), prefix)}
            rows.append({"kind": kind, "variant": r["variant"], "machine": r["machine"], "format": r["format"],
                         "count": int(r[count_col]), "worst": float(r[top_col]),
                         "worst_unit": "ulp" if kind == "blind" else "r",
                         "pred": float(w["pred"]).hex(), "target": target_json(w["target"]),
                         "computed": float(w["computed"]).hex(), "exact": float(w["exact"]).hex(),
                         "explain": explain_line(r["variant"], r["machine"], r["format"], w,
                                                 operator)})
    cols = ["row", "kind", "variants", "machine", "format", "count", "worst", "worst_unit", "pred", "target",
            "computed", "exact", "explain"]
    if not rows:
        return pd.DataFrame(columns=cols)
    t = pd.DataFrame(rows)
    rank = {v: i for i, v in enumerate(variants)}
    t = t.assign(_v=t["variant"].map(rank)).sort_values(["kind", "format", "machine", "_v"], kind="stable")
    same = ["kind", "machine", "format", "count", "worst", "worst_unit", "pred", "target", "computed", "exact"]
    out = t.groupby(same, sort=False).agg(variants=("variant", " ".join), explain=("explain", "first")).reset_index()
    out = out.sort_values(["kind", "format", "count"], ascending=[True, True, False], kind="stable")
    return out.assign(row=np.arange(1, len(out) + 1))[cols].reset_index(drop=True)


def _passing(verdicts: pd.DataFrame, fmt: str, mask) -> str:
    """The variants whose every machine passes (``mask`` per row of ``verdicts``), in run order; ``none``."""
    v = verdicts.assign(_ok=np.asarray(mask, dtype=bool))
    v = v[v["format"] == fmt]
    names = [name for name, rows in v.groupby("variant", sort=False) if rows["_ok"].all()]
    return ", ".join(names) if names else "none"


def _answer(summary: pd.DataFrame, blind: pd.DataFrame, verdicts: pd.DataFrame, settings, fmt: str,
            label: str) -> tuple[Finding, str]:
    """One sentence per output format: which cells and variants pass each standard and what they let through;
    and its short form for the first screen."""
    w = {"format": fmt}
    applies = not (verdicts.loc[verdicts["format"] == fmt, "level"] == "no_third_party").all()
    n = {c: cite(c, S, summary, w, c) for c in ("cells", "ulp_pass", "threshold_pass", "allclose_all",
                                                "threshold_pass_ulp_fail", "blind", "cells_blind", "false_alarm",
                                                "cells_false_alarm", "special_mismatch", "cells_special_mismatch",
                                                "special_match")
         + (("level_L2", "level_none", "ratio_ties", "level_special_mismatch", "level_third_party_special",
             "level_not_evaluable", "level_unpaired") if applies else ())}
    nums = list(n.values())
    row = summary.loc[summary["format"] == fmt].iloc[0]
    specials = ""
    if row["special_mismatch"] or row["special_match"]:
        specials = (f"; special values (NaN, inf) judged as TTK does: {n['special_match'].text} outputs match the "
                    f"exact value's special (left out of the metrics), {n['special_mismatch'].text} in "
                    f"{n['cells_special_mismatch'].text} cells are special mismatches (each fails the threshold and "
                    "ratio standards before any metric)")
    ratio_text = ""
    if applies:
        ratio_text = (f"the ratio standard against {settings.label} reaches L2 in {n['level_L2'].text} "
                      f"({n['ratio_ties'].text} of them tie it on all three metrics) and no level in "
                      f"{n['level_none'].text}")
        if row["level_special_mismatch"]:
            ratio_text += f", fails on the variant's special mismatches in {n['level_special_mismatch'].text}"
        if row["level_third_party_special"]:
            ratio_text += (f", fails in {n['level_third_party_special'].text} because {settings.label} gives NaN or "
                           "inf where the exact value is finite and the variant, right there, does not equal it "
                           "(cross_check's rule)")
        judged = [(k, why) for k, why in (("level_not_evaluable", "special mismatches on both sides, which "
                                           "cross_check judges position by position"),
                                          ("level_unpaired", "the third party covers other points"))
                  if row[k]]
        if judged:
            ratio_text += ", and cannot be judged in " + " and ".join(f"{n[k].text} ({why})" for k, why in judged)
        ratio_text += "; "
    else:
        ratio_text = f"the ratio standard does not apply ({settings.label} is not in the run); "
    text = (f"{fmt} outputs ({label}): of {n['cells'].text} (variant, machine) cells, the ULP verdict passes "
            f"{n['ulp_pass'].text}; the threshold standard (T = {fmt_num(THRESHOLD_T[fmt])}) passes "
            f"{n['threshold_pass'].text}, of which {n['threshold_pass_ulp_fail'].text} fail the ULP verdict "
            f"(variants passing it on every machine: {_passing(verdicts, fmt, verdicts['threshold_pass'])}); "
            + ratio_text + f"allclose ({settings.allclose}) passes every output in "
            f"{n['allclose_all'].text}{specials}. The standards accept {n['blind'].text} outputs over "
            f"{fmt_num(BLIND_ULP)} ulps wrong, in {n['cells_blind'].text} cells")
    b = blind[(blind["kind"] == "blind") & (blind["format"] == fmt)]
    if len(b):
        top = b.sort_values("worst", ascending=False, kind="stable").iloc[0]
        where = {"row": int(top["row"])}
        worst = cite("worst_blind_ulp", B, blind, where, "worst")
        nums.append(worst)
        text += (f" (worst {worst.text} ulp: {top['variants'].split()[0]} on {top['machine']} gives "
                 f"{top['computed']} for {top['exact']} at pred={top['pred']})")
    text += (f", and reject {n['false_alarm'].text} correctly rounded outputs in {n['cells_false_alarm'].text} "
             "cells.")
    ms = _msprobe_clause(summary, fmt, settings, verdicts)
    if ms is not None:
        text += " " + ms[0]
        nums += ms[1]
    short = (f"{fmt} ({label.split(':')[0]}): of {n['cells'].text} cells the ULP verdict passes {n['ulp_pass'].text}, "
             f"the threshold standard {n['threshold_pass'].text}"
             + (f", the ratio standard reaches L2 in {n['level_L2'].text}" if applies else "")
             + f", allclose ({settings.allclose}) {n['allclose_all'].text}; they accept {n['blind'].text} outputs "
             f"over {fmt_num(BLIND_ULP)} ulps wrong and reject {n['false_alarm'].text} correctly rounded ones"
             + (f"; {n['special_mismatch'].text} outputs are special mismatches"
                if row["special_mismatch"] else "") + "." + (f" {ms[2]}" if ms is not None else ""))
    return Finding(f"standards/answer/{fmt}", "standards", text, nums, 12), short


def _msprobe_clause(summary: pd.DataFrame, fmt: str, settings, verdicts: pd.DataFrame) -> tuple | None:
    """(the sentence on msprobe's standards in one output format, its numbers, its short form), None without
    them."""
    if "ms_absolute_pass" not in summary.columns or "ms_absolute" not in verdicts.columns:
        return None
    row = summary.loc[summary["format"] == fmt].iloc[0]
    w = {"format": fmt}
    n = {c: cite(c, S, summary, w, c) for c in summary.columns
         if c.startswith("ms_") and (row[c] or c.endswith("_pass"))}
    judged = ""
    if row["ms_judged"]:
        judged = (f"of the {n['ms_judged'].text} cells with a third party, the benchmark standard (against "
                  f"{settings.label}) passes {n['ms_benchmark_pass'].text} and the ULP standard "
                  f"{n['ms_ulp_pass'].text}; ")
    ratio = f"the ratio standard {n['ms_ratio_pass'].text}"
    if row["ms_ratio_warning"]:
        ratio += f" (a warning in {n['ms_ratio_warning'].text})"
    passing = verdicts[list(MSPROBE_VERDICTS)].isin(["pass"]).all(axis=1)
    text = (f"msprobe's pre-check standards, as its code computes them with the exact value as bench: {judged}"
            f"the absolute-threshold standard passes {n['ms_absolute_pass'].text}, {ratio} (variants passing all "
            f"four on every machine: {_passing(verdicts, fmt, passing)}).")
    short = ("msprobe passes "
             + (f"{n['ms_benchmark_pass'].text} (benchmark), {n['ms_ulp_pass'].text} (ULP), " if row["ms_judged"]
                else "")
             + f"{n['ms_absolute_pass'].text} (absolute threshold), {n['ms_ratio_pass'].text} (ratio) cells"
             + ("" if row["ms_judged"] else "; its benchmark and ULP standards need a third party") + ".")
    return text, list(n.values()), short


#: The question the section answers.
QUESTION = "Would the team's acceptance standards pass these variants, and what do they let through?"


def _blind_count(summary: pd.DataFrame, fmt: str) -> int:
    """Outputs the standards accept while over the blind threshold, in one output format."""
    return int(summary.loc[summary["format"] == fmt, "blind"].sum())


def _msprobe_infinities(standards: pd.DataFrame, verdicts: pd.DataFrame) -> str:
    """What msprobe's ulp error makes of correct infinities, from the cells without a special output: those
    whose every output over its cut is correctly rounded (an overflow: the output +-inf, its ulp error inf), and
    those whose mean ulp error is NaN (the bench beyond float64's range)."""
    ms = standards.loc[standards["region"] == "all", _KEYS + ["ms_ulp_over", "ms_ulp_nan"]]
    v = verdicts[_KEYS + ["max_ulp", "specials"]].merge(ms, on=_KEYS, how="left")
    cut = np.where(v["format"] == "fp32", 32.0, 1.0)
    clean = (v["specials"] == 0).to_numpy()
    over = v[clean & (v["ms_ulp_over"] > 0).to_numpy() & (v["max_ulp"].to_numpy(np.float64) <= cut)]
    nan = v[clean & (v["ms_ulp_nan"] > 0).to_numpy()]
    if not len(over) and not len(nan):
        return ""
    parts = []
    if len(over):
        top = over.sort_values("ms_ulp_over", ascending=False, kind="stable").iloc[0]
        parts.append(f"in {len(over)} cells without a special output and within msprobe's ulp cut everywhere "
                     f"else, every output over the cut is a correctly rounded infinity (most: {top['variant']} on "
                     f"{top['machine']} {top['format']}, {int(top['ms_ulp_over']):,} outputs)")
    if len(nan):
        top = nan.sort_values("ms_ulp_nan", ascending=False, kind="stable").iloc[0]
        parts.append(f"its mean ulp error is NaN in {len(nan)} cells without a NaN output, where the exact value "
                     f"exceeds float64's range (most: {top['variant']} on {top['machine']} {top['format']}, "
                     f"{int(top['ms_ulp_nan']):,} outputs)")
    return ("msprobe's ulp error of a correctly rounded overflow is inf (the bench finite beyond the format) or "
            "NaN (the bench beyond float64): " + "; ".join(parts) + ".")


def _msprobe_body(standards: pd.DataFrame, verdicts: pd.DataFrame, settings) -> list:
    """The msprobe subsection: its rules, its table, and what its own golden gets wrong against the exact value."""
    if "ms_absolute" not in standards.columns or standards["ms_absolute"].isna().all():
        return []
    table = msprobe_table(standards)
    mine = (verdicts["variant"] == settings.third_party) & (verdicts["machine"] == settings.third_party_machine)
    third = verdicts[mine].merge(standards.loc[standards["region"] == "all", _KEYS + ["special_mismatch_finite"]],
                                 on=_KEYS, how="left")
    notes = []  # (one paragraph each: msprobe's own bench, the benchmark standard's errors, correct infinities)
    cells = {r.format: r for r in third.itertuples()}

    def off_by(r, unit: str) -> str:
        special = f"{int(r.special_mismatch_finite):,} NaN or inf outputs where the exact value is finite"
        return (f"is off by up to {fmt_num(r.max_ulp)} {unit} ulps, with {special}" if np.isfinite(r.max_ulp)
                else f"gives {special}")

    if "fp32" in cells and settings.third_party == StandardsSettings().third_party:  # (the ops-nn golden)
        golden = (f"msprobe's own bench is the operator on the CPU one precision step up: for fp16 outputs the fp32 "
                  f"chain {settings.label} computes. Against the exact value that chain "
                  f"{off_by(cells['fp32'], 'fp32')} (its fp32 cell)")
        if "fp16" in cells:
            golden += f"; rounded to fp16 it {off_by(cells['fp16'], 'fp16')} (its fp16 cell)"
        notes.append(golden + ". For fp32 outputs msprobe's bench is a float64 chain, not computed here.")
    errs = standards[(standards["region"] == "all") & (standards["ms_benchmark"] == "error")]
    if len(errs):
        errors = ("The benchmark standard errs " + "; ".join(
            f"{r.variant} on {r.machine} {r.format} ({r.ms_benchmark_failed})" for r in errs.itertuples()) + ".")
        tp_special = {f: int(c.special_mismatch_finite) for f, c in cells.items() if c.special_mismatch_finite > 0}
        if set(errs["format"]) & set(tp_special):
            errors += (f" Where {settings.label} gives NaN or inf and the exact value is finite ("
                       + ", ".join(f"{n:,} outputs in {f}" for f, n in tp_special.items())
                       + "), those positions leave its metrics while a variant's finite outputs there stay in its "
                       "(RMSE is absolute: the largest values weigh most), so a variant finite and right where the "
                       "third party overflows can be judged worse.")
        notes.append(errors)
    infinities = _msprobe_infinities(standards, verdicts)
    if infinities:
        notes.append(infinities)
    return [
        Heading("msprobe's pre-check standards", 3),
        Para("As msprobe's code (mindstudio-probe 26.2.0, api_accuracy_checker) computes them, with the oracle's "
             "exact value as its bench (float64) and "
             + (f"{settings.label} as the third party" if len(third) else
                f"no third party ({settings.label} is not in the run: the benchmark and ULP standards are not "
                "judged)")
             + ": the benchmark standard (small-value error ratio, RMSE, max and mean relative error, error "
             "balance; each over the third party's, floored at minimum_err; error over 2, 2, 10, 2; the error "
             "balance shown, not judged, as in its code), the ULP standard (fp32: mean < 64 ulp, or share over 32 "
             "ulp < 0.05, or that share's ratio < 1; fp16: share over 1 ulp < 0.001 or its ratio < 1), the "
             "absolute-threshold standard (no inf/NaN "
             "mismatch, no relative error over rtol among normal values, no absolute error over atol among small "
             "ones) and the ratio standard (shares within 1/100, 1/1000, 1/10000; its cosine gate not evaluated). "
             "Small values: |bench| <= 2^-10 (fp16) or 2^-20 (fp32), as its code has them."),
        *(Para(note) for note in notes),
        Table(table.dropna(axis=1, how="all"), T, note=" (region all; every region in standards.csv)"),
    ]


def build(ctx) -> Section:
    run = ctx.run
    section = Section("standards", "Acceptance standards")
    if "acc_sum_r" not in run.stats.frame.columns:
        return section
    settings = settings_from_options({k: ctx.option("standards", k) for k in ("third_party", "third_party_machine",
                                                                            "allclose", "ratio_floor", "golden")})
    max_ulp = float(ctx.option("standards", "max_ulp"))
    standards = standards_table(run.stats, settings, run.variants, run.regions)
    verdicts = verdict_table(standards, run.summary, max_ulp)
    ms = standards.loc[standards["region"] == "all", _KEYS + [c for c in MSPROBE_VERDICTS if c in standards.columns]]
    judged = verdicts.merge(ms, on=_KEYS, how="left")  # (msprobe's verdicts beside, for the sentences)
    summary = summary_table(verdicts, standards)
    blind = blind_table(run.stats, run.variants, run.operator_name)
    section.tables.update({T: standards, S: summary, B: blind})
    answered = [_answer(summary, blind, judged, settings, fmt, maximum_label(run, fmt)) for fmt in summary["format"]]
    findings = [f for f, _ in answered]
    section.findings = findings
    tol = "; ".join(f"{fmt} atol {fmt_num(a)} rtol {fmt_num(r)}"
                    for fmt, (a, r) in ALLCLOSE_PRESETS[settings.allclose].items() if fmt in set(summary["format"]))
    levels = "; ".join(f"{name}: MARE <= {fmt_num(v['mare'])}, MERE <= {fmt_num(v['mere'])}, RMSE <= "
                       f"{fmt_num(v['rmse'])}, at least {fmt_num(v['min_count'])} cases"
                       for name, v in RATIO_LEVELS.items())
    # the sentences open the page with the other answers (render: the answers block), not a second time here
    section.answers = [Answer(QUESTION, f.text, f.numbers, subject="acceptance standards",
                              comparison=f"threshold, ratio vs {settings.label}, allclose ({settings.allclose})",
                              format=fmt, verdict="blind" if _blind_count(summary, fmt) else "sees every error",
                              short=short)
                       for (f, short), fmt in zip(answered, summary["format"])]
    for f in findings:
        f.shown = True
    section.body = [
        Para("Per element r = |actual - golden| / (|golden| + 1e-7), golden = "
             + ("the oracle's exact value" if settings.golden == "exact" else
                "the exact value correctly rounded to the output format") + "; MERE = mean "
             "r, MARE = max r, RMSE = sqrt(mean((actual - golden)^2)), over the outputs finite on both sides. "
             + SPECIAL_RULE + " Threshold standard: MERE < T and MARE < 10 T (T = "
             + ", ".join(f"{k} {fmt_num(v)}" for k, v in THRESHOLD_T.items())
             + f"). Ratio standard: MARE, MERE, RMSE over those of {settings.label} on the same points ({levels}; "
             "0/0 counts as 1, x/0 as inf). allclose: |a - g| <= atol + rtol |g| "
             f"(preset {settings.allclose}: {tol}). ULP verdict: max ulp error <= {fmt_num(max_ulp)} and no special "
             "output."),
        # (columns empty in every row, e.g. the ratios without a third party, are left off the page)
        Table(verdicts.dropna(axis=1, how="all"), T, note=" (region all; standards.csv has every region; maxima "
              "(max_ulp, MARE): "
              + "; ".join(f"{f} outputs: {maximum_label(run, f)}" for f in summary["format"]) + ")"),
        Heading("What the standards cannot see", 3),
        Para(f"blind: outputs accepted element-wise (r <= 10 T) while over {fmt_num(BLIND_ULP)} ulps "
             "wrong (worst in ulps); false_alarm: correctly rounded outputs (<= 0.5 ulp) with r > 10 T or a special "
             "mismatch (worst r). "
             "Variants sharing the same worst witness share a row; the explain line replays it step by step."),
        Table(blind, B) if len(blind) else Para("None: no output was blind or a false alarm."),
        *_msprobe_body(standards, verdicts, settings),
        # (one column per format: the counts read down, the page keeps its width)
        Details("Cells per format (standards_summary.csv)",
                [Table(summary.set_index("format").T.rename_axis("count").reset_index(), S)]),
    ]
    return section
