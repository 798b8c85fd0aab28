"""Findings: sentences computed from the report tables, each citing its numbers.

No sentence is fixed text: every number in a finding is read from a row of a
report table (:class:`Cite`: table file, the row's key values, the column) or
derived from cited numbers by a stated operation, and the verdicts ("the data
do not support ...") follow from comparisons of those numbers.  ``findings.json``
holds every finding with its citations so a test can check them against the
CSV tables.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from precision.report.tables import fmt_num

__all__ = ["Cite", "Finding", "cite", "derive", "summary_findings", "ablation_findings", "threshold_findings",
           "recovery_findings", "q_findings", "findings_json"]


@dataclass
class Cite:
    """One number of a finding: its value, its spelling in the text, and where it comes from.

    ``table`` is a CSV file of the report's ``tables/`` folder, ``where`` the
    key columns selecting exactly one row, ``column`` the column; a derived
    number has ``op`` (``"sub"``) and ``of`` (the names of cited numbers) instead.
    """

    name: str
    value: float
    text: str
    table: str | None = None
    where: dict = field(default_factory=dict)
    column: str | None = None
    op: str | None = None
    of: list = field(default_factory=list)


@dataclass
class Finding:
    """A computed sentence and the numbers it cites."""

    id: str
    section: str
    text: str
    numbers: list


def _py(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    return v


def cite(name: str, table: str, frame: pd.DataFrame, where: dict, column: str) -> Cite:
    """Cite ``frame[column]`` at the one row matching ``where`` (``table`` names the CSV)."""
    mask = np.ones(len(frame), dtype=bool)
    for k, v in where.items():
        col = frame[k]
        mask &= (col.isna() if (isinstance(v, float) and np.isnan(v)) else (col == v)).to_numpy()
    rows = frame[mask]
    if len(rows) != 1:
        raise LookupError(f"{table}: {where} selects {len(rows)} rows, expected 1")
    value = _py(rows[column].iloc[0])
    return Cite(name, value, fmt_num(value), table, {k: _py(v) for k, v in where.items()}, column)


def derive(name: str, a: Cite, b: Cite) -> Cite:
    """The difference a - b of two cited numbers (0 when they are equal, inf - inf included)."""
    value = 0.0 if a.value == b.value else float(a.value) - float(b.value)
    if isinstance(a.value, int) and isinstance(b.value, int):
        value = int(a.value - b.value)
    return Cite(name, value, fmt_num(value), op="sub", of=[a.name, b.name])


def _ulp(c: Cite) -> str:
    return f"{c.text} ulp"


# ---------------------------------------------------------------------------
# Summary
# ---------------------------------------------------------------------------

def summary_findings(summary: pd.DataFrame) -> list:
    """kernel against naive (when both ran), and the best variant by max ulp, per format and model."""
    out = []
    T = "summary.csv"
    for (fmt, model), sub in summary.groupby(["format", "model"], sort=False):
        nums = []
        parts = []
        for v in ("kernel", "naive"):
            if v in set(sub["variant"]):
                w = {"variant": v, "format": fmt, "model": model}
                mx, mean, p99, ni, cnt = (cite(f"{v}_{c}", T, summary, w, c)
                                          for c in ("max_ulp", "mean_ulp", "p99_ulp", "nan_inf", "count"))
                nums += [mx, mean, p99, ni, cnt]
                parts.append(f"{v} max {_ulp(mx)} (witness pred {sub.loc[sub['variant'] == v, 'witness_pred'].iloc[0]}),"
                             f" mean {_ulp(mean)}, p99 <= {_ulp(p99)}, {ni.text} NaN/inf of {cnt.text}")
        finite = sub.assign(_m=np.where(np.isnan(sub["max_ulp"]), np.inf, sub["max_ulp"]))
        best = finite.sort_values(["_m", "mean_ulp"], kind="stable").iloc[0]
        bmax = cite("best_max_ulp", T, summary, {"variant": best["variant"], "format": fmt, "model": model},
                    "max_ulp")
        nums.append(bmax)
        text = (f"On {model}, {fmt} output: " + ("; ".join(parts) + ". " if parts else "")
                + f"Lowest max error: {best['variant']} ({_ulp(bmax)}).")
        out.append(Finding(f"summary/{fmt}/{model}", "summary", text, nums))
    return out


# ---------------------------------------------------------------------------
# Ablation
# ---------------------------------------------------------------------------

def ablation_findings(ablation: pd.DataFrame, ablation_gamma: pd.DataFrame) -> list:
    """Per guard and direction: outputs changed, max ulp and NaN with/without, per model and format; a verdict."""
    if ablation.empty:
        return []
    T = "ablation.csv"
    out = []
    allr = ablation[ablation["region"] == "all"]
    for guard, gsub in allr.groupby("guard", sort=False):
        any_change = False
        any_effect = False
        for (with_v, without_v), dsub in gsub.groupby(["with_variant", "without_variant"], sort=False):
            nums, parts = [], []
            for _, row in dsub.iterrows():
                w = {"guard": guard, "with_variant": with_v, "without_variant": without_v, "model": row["model"],
                     "format": row["format"], "profile": row["profile"], "region": "all"}
                ch, cnt, m1, m0, n1, n0 = (cite(f"{c}_{row['model']}_{row['format']}", T, ablation, w, c) for c in
                                           ("changed", "count", "max_ulp_with", "max_ulp_without", "nan_with",
                                            "nan_without"))
                nums += [ch, cnt, m1, m0, n1, n0]
                any_change |= ch.value > 0
                any_effect |= (m1.value != m0.value) or (n1.value != n0.value)
                parts.append(f"{ch.text} of {cnt.text} outputs on {row['model']} {row['format']} "
                             f"(max {m0.text} -> {m1.text} ulp, NaN {n0.text} -> {n1.text})")
            text = f"{guard} ({with_v} vs {without_v}) changes " + "; ".join(parts) + "."
            out.append(Finding(f"ablation/{guard}/{with_v}", "ablation", text, nums))
        if not any_change:
            text = (f"The data do not support {guard} in this study: it changes no output bit on any machine model, "
                    f"format or region here.")
            out.append(Finding(f"ablation/{guard}/verdict", "ablation", text, []))
        else:
            reg = ablation[(ablation["guard"] == guard) & (ablation["region"] != "all")]
            top = reg.sort_values("changed", ascending=False, kind="stable").iloc[0]
            w = {k: top[k] for k in ("guard", "with_variant", "without_variant", "model", "format", "profile",
                                     "region")}
            c = cite("top_region_changed", T, ablation, w, "changed")
            gam = ablation_gamma[ablation_gamma["guard"] == guard]
            gt = gam.sort_values("changed", ascending=False, kind="stable").iloc[0]
            wg = {k: _py(gt[k]) for k in ("guard", "with_variant", "without_variant", "model", "format", "gamma")}
            cg = cite("top_gamma_changed", "ablation_gamma.csv", ablation_gamma, wg, "changed")
            verdict = ("it moves max ulp or NaN counts" if any_effect else
                       "yet it changes neither the max ulp nor the NaN count anywhere: the data do not show it "
                       "buying accuracy here")
            text = (f"{guard} changes output bits; {verdict}. It changes most in region {top['region']} "
                    f"({c.text} outputs, {top['with_variant']} vs {top['without_variant']} on {top['model']} "
                    f"{top['format']}) and at gamma {fmt_num(gt['gamma'])} ({cg.text} outputs on {gt['model']} "
                    f"{gt['format']}).")
            out.append(Finding(f"ablation/{guard}/verdict", "ablation", text, [c, cg]))
    return out


# ---------------------------------------------------------------------------
# Threshold
# ---------------------------------------------------------------------------

def threshold_findings(threshold: pd.DataFrame, production_k: int = 6) -> list:
    """Best G5 threshold by max ulp (then mean) against the production 2^-6, per model and subset."""
    if threshold.empty:
        return []
    T = "threshold.csv"
    out = []
    for (model, fmt, subset), sub in threshold.groupby(["model", "format", "subset"], sort=False):
        key = {"model": model, "format": fmt, "subset": subset}
        s = sub.assign(_m=np.where(np.isnan(sub["max_finite_ulp"]), np.inf, sub["max_finite_ulp"]))
        best = s.sort_values(["_m", "mean_ulp"], kind="stable").iloc[0]
        prod = s[s["k"] == production_k]
        if prod.empty:
            continue
        prod = prod.iloc[0]
        b_max = cite("best_max_ulp", T, threshold, {**key, "variant": best["variant"]}, "max_finite_ulp")
        b_mean = cite("best_mean_ulp", T, threshold, {**key, "variant": best["variant"]}, "mean_ulp")
        p_max = cite("prod_max_ulp", T, threshold, {**key, "variant": prod["variant"]}, "max_finite_ulp")
        p_mean = cite("prod_mean_ulp", T, threshold, {**key, "variant": prod["variant"]}, "mean_ulp")
        eng, imp, wor, cnt = (cite(f"prod_{c}", T, threshold, {**key, "variant": prod["variant"]}, c)
                              for c in ("engages", "improves", "worsens", "count"))
        margin = derive("margin_max_ulp", p_max, b_max)
        ties = s[s["_m"] == best["_m"]]["variant"].tolist()
        nums = [b_max, b_mean, p_max, p_mean, margin, eng, imp, wor, cnt]
        head = f"On {model} {fmt}, {subset} ({cnt.text} points; max over finite errors): "
        nan_b = cite("best_nan_inf", T, threshold, {**key, "variant": best["variant"]}, "nan_inf")
        nan_p = cite("prod_nan_inf", T, threshold, {**key, "variant": prod["variant"]}, "nan_inf")
        nums += [nan_b, nan_p]
        if p_max.value == b_max.value:
            verdict = (f"1/64 attains the lowest max error ({_ulp(p_max)}, mean {p_mean.text} ulp, NaN/inf outputs "
                       f"{nan_p.text}; the best by mean has {nan_b.text}); "
                       f"{fmt_num(len(ties))} thresholds attain it: {', '.join(ties)}.")
        else:
            verdict = (f"the data do not support 1/64 as the best threshold: {best['variant']} gives max "
                       f"{_ulp(b_max)} (mean {b_mean.text}) against {_ulp(p_max)} (mean {p_mean.text}) at 1/64, "
                       f"a margin of {_ulp(margin)} (NaN/inf outputs {nan_b.text} against {nan_p.text}).")
        text = (head + verdict + f" At 1/64 the correction engages on {eng.text} points, improves {imp.text} "
                f"and worsens {wor.text} (against never).")
        out.append(Finding(f"threshold/{model}/{fmt}/{subset}", "threshold", text, nums))
        nev = s[s["tau"] == 0]
        alw = s[np.isinf(s["tau"])]
        if not nev.empty and not alw.empty:
            n_max = cite("never_max_ulp", T, threshold, {**key, "variant": nev.iloc[0]["variant"]},
                         "max_finite_ulp")
            a_max = cite("always_max_ulp", T, threshold, {**key, "variant": alw.iloc[0]["variant"]},
                         "max_finite_ulp")
            a_w = cite("always_worsens", T, threshold, {**key, "variant": alw.iloc[0]["variant"]}, "worsens")
            text = (f"On {model} {fmt}, {subset}: without the correction (never) max finite error {_ulp(n_max)}; with it always "
                    f"applied max {_ulp(a_max)}, worsening {a_w.text} points.")
            out.append(Finding(f"threshold/{model}/{fmt}/{subset}/ends", "threshold", text, [n_max, a_max, a_w]))
    return out


def window_findings(window: pd.DataFrame) -> list:
    """Where the dpos terms have opposite signs and cancel to within 1/64."""
    if window.empty:
        return []
    T = "cancellation_window.csv"
    out = []
    neg = window[window["gamma"] < 0]
    pos = window[window["gamma"] >= 0]
    nums = []
    if not pos.empty:
        g0 = pos.iloc[0]
        c = cite("opposite_gamma_nonneg", T, window, {"gamma": _py(g0["gamma"])}, "opposite")
        nums.append(c)
    if not neg.empty:
        g1 = neg.iloc[-1]
        c1 = cite("opposite_gamma_neg", T, window, {"gamma": _py(g1["gamma"])}, "opposite")
        cn = cite("count", T, window, {"gamma": _py(g1["gamma"])}, "count")
        nums += [c1, cn]
    cancel = window[window["cancel_64"] > 0]
    text = "The two terms of dpos have opposite signs "
    if not neg.empty:
        text += f"at {c1.text} of {cn.text} pred values for gamma {fmt_num(g1['gamma'])}"
    if not pos.empty:
        text += f" and at {c.text} for gamma {fmt_num(g0['gamma'])}"
    text += "."
    if not cancel.empty:
        parts = []
        for _, r in cancel.iterrows():
            lo = cite(f"x_lo_{r['gamma']}", T, window, {"gamma": _py(r["gamma"])}, "x_lo_64")
            hi = cite(f"x_hi_{r['gamma']}", T, window, {"gamma": _py(r["gamma"])}, "x_hi_64")
            nums += [lo, hi]
            parts.append(f"gamma {fmt_num(r['gamma'])}: x in [{lo.text}, {hi.text}]")
        text += " They cancel to within 1/64 only for " + "; ".join(parts) + "."
    else:
        text += " They never cancel to within 1/64 on this grid."
    out.append(Finding("threshold/window", "threshold", text, nums))
    return out


# ---------------------------------------------------------------------------
# Recovery
# ---------------------------------------------------------------------------

def recovery_findings(g7: pd.DataFrame, recovery: pd.DataFrame) -> list:
    """What G7 buys below 2^-126 per model: kernel against kernel-G7 (and naive+G7 against naive)."""
    if g7.empty:
        return []
    T = "recovery_g7.csv"
    out = []
    band = "rw < 2^-126"
    for model in dict.fromkeys(g7["model"]):
        for with_v, without_v in (("kernel", "kernel-G7"), ("naive+G7", "naive")):
            have = set(g7[(g7["model"] == model) & (g7["band"] == band)]["variant"])
            if not {with_v, without_v} <= have:
                continue
            w1 = {"model": model, "band": band, "variant": with_v}
            w0 = {"model": model, "band": band, "variant": without_v}
            cnt = cite("count", T, g7, w1, "count")
            ch = cite("changed_by_g7", T, g7, w1, "changed_by_g7")
            m1, m0 = cite("mean_with", T, g7, w1, "mean_ulp"), cite("mean_without", T, g7, w0, "mean_ulp")
            l1, l0 = cite("lost_with", T, g7, w1, "lost"), cite("lost_without", T, g7, w0, "lost")
            o1, o0 = cite("over1_with", T, g7, w1, "over_1ulp"), cite("over1_without", T, g7, w0, "over_1ulp")
            if l1.value < l0.value and o1.value <= o0.value:
                verdict = "G7 recovers outputs here"
            elif l1.value > l0.value or o1.value > o0.value:
                verdict = "the data do not support G7 here: it loses more outputs than it recovers"
            else:
                verdict = "G7 makes no difference to losses or to outputs over 1 ulp here"
            text = (f"On {model}, with |raw*weight| < 2^-126 ({cnt.text} points), {with_v} vs {without_v}: G7 "
                    f"changes {ch.text} outputs; outputs lost to zero {l0.text} -> {l1.text}, over 1 ulp "
                    f"{o0.text} -> {o1.text}, mean error {m0.text} -> {m1.text} ulp: {verdict}.")
            out.append(Finding(f"recovery/{model}/{with_v}", "recovery", text, [cnt, ch, m1, m0, l1, l0, o1, o0]))
    # which binades G7 helps or hurts (kernel vs kernel-G7, first model with flushing if any)
    r = recovery[recovery["variant"].isin(["kernel", "kernel-G7"])]
    if not r.empty:
        piv = r.pivot_table(index=["model", "log2_rw"], columns="variant", values="lost", aggfunc="first").dropna()
        if {"kernel", "kernel-G7"} <= set(piv.columns):
            worse = piv[piv["kernel"] > piv["kernel-G7"]].reset_index()
            better = piv[piv["kernel"] < piv["kernel-G7"]].reset_index()
            for label, rows in (("more", worse), ("fewer", better)):
                if rows.empty:
                    continue
                row = rows.iloc[0]
                lo = cite(f"first_binade_{label}", "recovery.csv", recovery,
                          {"model": row["model"], "variant": "kernel", "log2_rw": int(row["log2_rw"])}, "log2_rw")
                text = (f"kernel loses {label} outputs to zero than kernel-G7 in {fmt_num(len(rows))} "
                        f"(model, binade) cells, the first on {row['model']} at |raw*weight| in "
                        f"[2^{lo.text}, 2^{fmt_num(lo.value + 1)}).")
                out.append(Finding(f"recovery/binades/{label}", "recovery", text, [lo]))
    return out


# ---------------------------------------------------------------------------
# q = 1 - p
# ---------------------------------------------------------------------------

def q_findings(qt: pd.DataFrame, onset: pd.DataFrame, gamma: float = 2.0) -> list:
    """Where q = 1 - p loses its accuracy, and where each variant's error passes 1 ulp, per selector."""
    out = []
    if not qt.empty:
        T = "q_table.csv"
        zero = qt[qt["q_computed"] == 0]
        nums = []
        text = ""
        for x in (8.0, 12.0, 16.0):
            if (qt["x"] == x).any():
                c = cite(f"q_rel_err_{x:g}", T, qt, {"x": x}, "q_rel_err")
                nums.append(c)
                text += f"at x = {fmt_num(x)} the float32 q = 1 - p has relative error {c.text}; "
        if not zero.empty:
            z = zero.iloc[0]
            cz = cite("q_zero_x", T, qt, {"x": _py(z["x"])}, "x")
            ce = cite("q_exact_at_zero", T, qt, {"x": _py(z["x"])}, "q_exact")
            cl = cite("lnp_at_zero", T, qt, {"x": _py(z["x"])}, "lnp_computed")
            nums += [cz, ce, cl]
            text += (f"from x = {cz.text} on, p rounds to 1 and q = 0 (exact {ce.text}), and ln(p) = {cl.text}")
        out.append(Finding("q/table", "q", "On npu, " + text.rstrip("; ") + ".", nums))
    if not onset.empty:
        T = "onset.csv"
        sub = onset[onset["gamma"] == gamma]
        for (model, fmt, t), grp in sub.groupby(["model", "format", "target"], sort=False):
            nums, parts = [], []
            for v in grp["variant"]:
                w = {"variant": v, "model": model, "format": fmt, "target": _py(t), "gamma": gamma}
                on = cite(f"onset_{v}", T, onset, w, "x_onset_1ulp")
                mx = cite(f"max_{v}", T, onset, w, "max_ulp")
                xm = cite(f"x_at_max_{v}", T, onset, w, "x_at_max")
                nums += [on, mx, xm]
                start = "never" if np.isnan(on.value) else f"from x = {on.text}"
                parts.append(f"{v} over 1 ulp {start}, max {_ulp(mx)} at x = {xm.text}")
            text = f"On {model} {fmt}, selector t={t}, gamma {fmt_num(gamma)}: " + "; ".join(parts) + "."
            out.append(Finding(f"q/onset/{model}/{fmt}/{t}", "q", text, nums))
    return out


def findings_json(findings: list) -> list:
    """findings as JSON-ready dicts (non-finite values as the strings ``inf``, ``-inf``, ``NaN``)."""
    def enc(v):
        if isinstance(v, float) and not np.isfinite(v):
            return fmt_num(v)
        return v
    rows = []
    for f in findings:
        d = asdict(f)
        for n in d["numbers"]:
            n["value"] = enc(n["value"])
            n["where"] = {k: enc(v) for k, v in n["where"].items()}
        rows.append(d)
    return rows
