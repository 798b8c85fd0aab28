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

__all__ = ["Cite", "Finding", "cite", "derive", "derive_sum", "summary_findings", "ablation_findings", "threshold_findings",
           "recovery_findings", "q_findings", "candidate_findings", "CANDIDATE_TARGETS", "findings_json"]


@dataclass
class Cite:
    """One number of a finding: its value, its spelling in the text, and where it comes from.

    ``table`` is a CSV file of the report's ``tables/`` folder, ``where`` the
    key columns selecting exactly one row, ``column`` the column; a derived
    number has ``op`` (``"sub"``: a - b, ``"sum"``: the sum) and ``of`` (the
    names of cited numbers of the same finding) instead.
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


def derive_sum(name: str, parts: list) -> Cite:
    """The sum of cited numbers (``op`` ``"sum"``)."""
    vals = [p.value for p in parts]
    value = int(sum(vals)) if all(isinstance(v, int) for v in vals) else float(sum(vals))
    return Cite(name, value, fmt_num(value), op="sum", of=[p.name for p in parts])


def _ulp(c: Cite) -> str:
    return f"{c.text} ulp"


# ---------------------------------------------------------------------------
# Summary
# ---------------------------------------------------------------------------

def summary_findings(summary: pd.DataFrame) -> list:
    """kernel against naive (when both ran), and the lowest max finite error, per format and model.

    Max errors are ``max_finite_ulp`` (over finite errors) with the NaN and
    inf counts beside them: ``max_ulp`` is inf whenever one output is NaN/inf.
    """
    out = []
    T = "summary.csv"
    for (fmt, model), sub in summary.groupby(["format", "model"], sort=False):
        nums = []
        parts = []
        for v in ("kernel", "naive"):
            if v in set(sub["variant"]):
                w = {"variant": v, "format": fmt, "model": model}
                mx, mean, p99, nan, inf, cnt = (cite(f"{v}_{c}", T, summary, w, c) for c in
                                                ("max_finite_ulp", "mean_ulp", "p99_ulp", "nan", "inf", "count"))
                nums += [mx, mean, p99, nan, inf, cnt]
                parts.append(f"{v} max finite {_ulp(mx)}, mean {_ulp(mean)}, p99 <= {_ulp(p99)}, "
                             f"{nan.text} NaN and {inf.text} inf of {cnt.text} outputs")
        s = sub.assign(_m=np.where(np.isnan(sub["max_finite_ulp"]), np.inf, sub["max_finite_ulp"]),
                       _n=sub["nan"] + sub["inf"])
        best = s.sort_values(["_m", "_n", "mean_ulp"], kind="stable").iloc[0]
        wb = {"variant": best["variant"], "format": fmt, "model": model}
        bmax, bnan, binf, bmean = (cite(f"best_{c}", T, summary, wb, c) for c in
                                   ("max_finite_ulp", "nan", "inf", "mean_ulp"))
        nums += [bmax, bnan, binf, bmean]
        ties = int((s["_m"] == best["_m"]).sum())
        text = f"On {model}, {fmt} output: " + ("; ".join(parts) + ". " if parts else "")
        if ties > 1:
            text += (f"{fmt_num(ties)} variants tie at the lowest max finite error ({_ulp(bmax)}); of them "
                     f"{best['variant']} has the fewest NaN/inf, then the lowest mean ({bnan.text} NaN, "
                     f"{binf.text} inf, mean {_ulp(bmean)})")
        else:
            text += (f"Lowest max finite error: {best['variant']} ({_ulp(bmax)}, {bnan.text} NaN, {binf.text} inf, "
                     f"mean {_ulp(bmean)})")
        fewest = s.sort_values(["_n", "_m", "mean_ulp"], kind="stable").iloc[0]
        if fewest["variant"] != best["variant"] and fewest["_n"] < best["_n"]:
            wf = {"variant": fewest["variant"], "format": fmt, "model": model}
            fmax, fnan, finf = (cite(f"fewest_{c}", T, summary, wf, c) for c in ("max_finite_ulp", "nan", "inf"))
            nums += [fmax, fnan, finf]
            text += (f"; fewest NaN/inf: {fewest['variant']} ({fnan.text} NaN, {finf.text} inf, max finite "
                     f"{_ulp(fmax)})")
        out.append(Finding(f"summary/{fmt}/{model}", "summary", text + ".", nums))
    return out


# ---------------------------------------------------------------------------
# Ablation
# ---------------------------------------------------------------------------

def _key_tuple(nan_inf, max_finite, mean):
    """Order of goodness: fewer NaN/inf, then lower max finite error, then lower mean (NaN last)."""
    f = (lambda v: np.inf if v is None or (isinstance(v, float) and np.isnan(v)) else v)
    return (f(nan_inf), f(max_finite), f(mean))


def ablation_findings(ablation: pd.DataFrame, ablation_gamma: pd.DataFrame, study_has_weights: bool = True) -> list:
    """Per guard and direction: outputs changed, max finite / mean ulp and NaN / inf with and without; a verdict.

    A (model, format) cell counts as *better* with the guard when (NaN+inf,
    max finite ulp, mean ulp) is lexicographically lower with it, *worse* when
    higher.
    """
    if ablation.empty:
        return []
    T = "ablation.csv"
    out = []
    allr = ablation[ablation["region"] == "all"]
    for guard, gsub in allr.groupby("guard", sort=False):
        any_change = False
        better_all, worse_all = [], []
        for (with_v, without_v), dsub in gsub.groupby(["with_variant", "without_variant"], sort=False):
            nums, parts = [], []
            better, worse, same = [], [], []
            for _, row in dsub.iterrows():
                tag = f"{row['model']} {row['format']}"
                w = {"guard": guard, "with_variant": with_v, "without_variant": without_v, "model": row["model"],
                     "format": row["format"], "profile": row["profile"], "region": "all"}
                sfx = f"{row['model']}_{row['format']}"
                ch, cnt, m1, m0, a1, a0, n1, n0, i1, i0 = (
                    cite(f"{c}_{sfx}", T, ablation, w, c) for c in
                    ("changed", "count", "max_finite_ulp_with", "max_finite_ulp_without", "mean_ulp_with",
                     "mean_ulp_without", "nan_with", "nan_without", "inf_with", "inf_without"))
                nums += [ch, cnt, m1, m0, a1, a0, n1, n0, i1, i0]
                any_change |= ch.value > 0
                k1 = _key_tuple(n1.value + i1.value, m1.value, a1.value)
                k0 = _key_tuple(n0.value + i0.value, m0.value, a0.value)
                (better if k1 < k0 else worse if k1 > k0 else same).append(tag)
                parts.append(f"{ch.text} of {cnt.text} outputs on {tag} (max finite {m0.text} -> {m1.text} ulp, "
                             f"mean {a0.text} -> {a1.text} ulp, NaN {n0.text} -> {n1.text}, "
                             f"inf {i0.text} -> {i1.text})")
            verdict = []
            if better:
                verdict.append("better on " + ", ".join(better))
            if worse:
                verdict.append("worse on " + ", ".join(worse))
            if same:
                verdict.append("unchanged on " + ", ".join(same))
            better_all += [f"{t} ({with_v} vs {without_v})" for t in better]
            worse_all += [f"{t} ({with_v} vs {without_v})" for t in worse]
            text = (f"{guard} ({with_v} vs {without_v}; without -> with) changes " + "; ".join(parts)
                    + f". With {guard}, (NaN+inf, max finite, mean), compared in that order, is " + "; ".join(verdict) + ".")
            out.append(Finding(f"ablation/{guard}/{with_v}", "ablation", text, nums))
        if not any_change:
            text = (f"The data do not support {guard} in this study: it changes no output bit on any machine model, "
                    f"format or region here.")
            if guard == "G7" and not study_has_weights:
                text += (" This study has no weight tensor, and G7 only engages on weighted products that underflow "
                         "(see the subnormal_recovery study).")
            out.append(Finding(f"ablation/{guard}/verdict", "ablation", text, []))
            continue
        reg = ablation[(ablation["guard"] == guard) & (ablation["region"] != "all")]
        top = reg.sort_values("changed", ascending=False, kind="stable").iloc[0]
        w = {k: top[k] for k in ("guard", "with_variant", "without_variant", "model", "format", "profile",
                                 "region")}
        c = cite("top_region_changed", T, ablation, w, "changed")
        gam = ablation_gamma[ablation_gamma["guard"] == guard]
        gt = gam.sort_values("changed", ascending=False, kind="stable").iloc[0]
        wg = {k: _py(gt[k]) for k in ("guard", "with_variant", "without_variant", "model", "format", "gamma")}
        cg = cite("top_gamma_changed", "ablation_gamma.csv", ablation_gamma, wg, "changed")
        if better_all and not worse_all:
            verdict = f"the data support {guard}: it is better or unchanged in every comparison"
        elif worse_all and not better_all:
            verdict = (f"the data do not support {guard}: it is worse in {fmt_num(len(worse_all))} comparisons "
                       f"and better in none")
        elif worse_all:
            verdict = (f"the data are mixed on {guard}: better in {fmt_num(len(better_all))} comparisons, "
                       f"worse in {fmt_num(len(worse_all))} ({'; '.join(worse_all)})")
        else:
            verdict = (f"yet it changes neither the NaN/inf counts, the max finite error nor the mean anywhere: "
                       f"the data do not show {guard} buying accuracy here")
        text = (f"{guard} changes output bits; {verdict}. It changes most in region {top['region']} "
                f"({c.text} outputs, {top['with_variant']} vs {top['without_variant']} on {top['model']} "
                f"{top['format']}) and at gamma {fmt_num(gt['gamma'])} ({cg.text} outputs on {gt['model']} "
                f"{gt['format']}).")
        out.append(Finding(f"ablation/{guard}/verdict", "ablation", text, [c, cg]))
    return out


# ---------------------------------------------------------------------------
# Threshold
# ---------------------------------------------------------------------------

#: Order of the threshold subsets in the findings: where the threshold matters first.
SUBSET_ORDER = ("engaged_any", "opposite_signs", "all")


def threshold_findings(threshold: pd.DataFrame, production_k: int = 6) -> list:
    """Per model and subset: the G5 thresholds minimizing max finite error and mean error, against 1/64.

    Best by max finite ulp (ties broken by mean), best by mean ulp (ties broken
    by max finite); margins are 1/64's value minus the best value.
    """
    if threshold.empty:
        return []
    T = "threshold.csv"
    out = []
    groups = dict(list(threshold.groupby(["model", "format", "subset"], sort=False)))
    order = sorted(groups, key=lambda k: (list(dict.fromkeys(threshold["model"])).index(k[0]), k[1],
                                          SUBSET_ORDER.index(k[2]) if k[2] in SUBSET_ORDER else 9))
    for model, fmt, subset in order:
        sub = groups[(model, fmt, subset)]
        key = {"model": model, "format": fmt, "subset": subset}
        s = sub.assign(_m=np.where(np.isnan(sub["max_finite_ulp"]), np.inf, sub["max_finite_ulp"]),
                       _a=np.where(np.isnan(sub["mean_ulp"]), np.inf, sub["mean_ulp"]))
        prod = s[s["k"] == production_k]
        if prod.empty:
            continue
        prod = prod.iloc[0]
        bx = s.sort_values(["_m", "_a", "nan_inf"], kind="stable").iloc[0]
        ba = s.sort_values(["_a", "_m", "nan_inf"], kind="stable").iloc[0]

        def c(name, variant, col):
            return cite(name, T, threshold, {**key, "variant": variant}, col)
        cnt = c("count", prod["variant"], "count")
        p_max, p_mean, p_ni = (c(f"prod_{col}", prod["variant"], col) for col in
                               ("max_finite_ulp", "mean_ulp", "nan_inf"))
        eng, imp, wor = (c(f"prod_{col}", prod["variant"], col) for col in ("engages", "improves", "worsens"))
        bx_max, bx_mean, bx_ni = (c(f"bestmax_{col}", bx["variant"], col) for col in
                                  ("max_finite_ulp", "mean_ulp", "nan_inf"))
        ba_max, ba_mean, ba_ni = (c(f"bestmean_{col}", ba["variant"], col) for col in
                                  ("max_finite_ulp", "mean_ulp", "nan_inf"))
        m_max = derive("margin_max_finite_ulp", p_max, bx_max)
        m_mean = derive("margin_mean_ulp", p_mean, ba_mean)
        nums = [cnt, p_max, p_mean, p_ni, eng, imp, wor, bx_max, bx_mean, bx_ni, ba_max, ba_mean, ba_ni,
                m_max, m_mean]
        head = f"On {model} {fmt}, {subset} ({cnt.text} points): "
        n_var = len(s)
        all_tie = (s["_m"].nunique() == 1) and (s["_a"].nunique() == 1) and (s["nan_inf"].nunique() == 1)
        if all_tie:
            text = (head + f"all {fmt_num(n_var)} thresholds give the same max finite error {_ulp(p_max)}, mean "
                    f"{_ulp(p_mean)} and {p_ni.text} NaN/inf outputs: the threshold makes no difference here.")
            out.append(Finding(f"threshold/{model}/{fmt}/{subset}", "threshold", text,
                               [cnt, p_max, p_mean, p_ni]))
            continue
        ok_max = p_max.value == bx_max.value
        ok_mean = p_mean.value == ba_mean.value
        text = (head + f"lowest max finite error {_ulp(bx_max)} at {bx['variant']} (mean {bx_mean.text} ulp, "
                f"{bx_ni.text} NaN/inf); lowest mean {_ulp(ba_mean)} at {ba['variant']} (max finite "
                f"{ba_max.text} ulp, {ba_ni.text} NaN/inf); 1/64 gives max finite {_ulp(p_max)}, mean "
                f"{_ulp(p_mean)}, {p_ni.text} NaN/inf, a margin of {m_max.text} ulp in max and {m_mean.text} ulp "
                f"in mean to the best. ")
        if s["_m"].nunique() == 1:
            text += ("Every threshold ties on max finite error, so only the mean separates them: "
                     + ("1/64 attains the lowest mean." if ok_mean else
                        f"the data do not support 1/64 on mean error: {ba['variant']} has the lowest."))
        elif ok_max and ok_mean:
            text += "The data support 1/64 here: it attains both minima."
        elif ok_max:
            text += (f"The data support 1/64 on max error only: {ba['variant']} has the lower mean.")
        elif ok_mean:
            text += (f"The data support 1/64 on mean error only: {bx['variant']} has the lower max.")
        else:
            text += (f"The data do not support 1/64 here: {bx['variant']} minimizes the max error and "
                     f"{ba['variant']} the mean.")
        text += (f" At 1/64 the correction engages on {eng.text} points, improves {imp.text} and worsens "
                 f"{wor.text} (against never).")
        out.append(Finding(f"threshold/{model}/{fmt}/{subset}", "threshold", text, nums))
        nev = s[s["tau"] == 0]
        alw = s[np.isinf(s["tau"])]
        if not nev.empty and not alw.empty:
            n_max = c("never_max_finite_ulp", nev.iloc[0]["variant"], "max_finite_ulp")
            n_mean = c("never_mean_ulp", nev.iloc[0]["variant"], "mean_ulp")
            a_max = c("always_max_finite_ulp", alw.iloc[0]["variant"], "max_finite_ulp")
            a_mean = c("always_mean_ulp", alw.iloc[0]["variant"], "mean_ulp")
            a_i = c("always_improves", alw.iloc[0]["variant"], "improves")
            a_w = c("always_worsens", alw.iloc[0]["variant"], "worsens")
            text = (f"On {model} {fmt}, {subset}: without the correction (never) max finite error {_ulp(n_max)}, "
                    f"mean {_ulp(n_mean)}; with it always applied max finite {_ulp(a_max)}, mean {_ulp(a_mean)}, "
                    f"improving {a_i.text} points and worsening {a_w.text}.")
            out.append(Finding(f"threshold/{model}/{fmt}/{subset}/ends", "threshold", text,
                               [n_max, n_mean, a_max, a_mean, a_i, a_w]))
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

def recovery_findings(g7: pd.DataFrame, recovery: pd.DataFrame, by_weight: pd.DataFrame | None = None) -> list:
    """What G7 buys (raw*weight below 2^-126, 1/weight finite) and costs (1/weight = inf), per model and pair."""
    if g7.empty:
        return []
    from precision.report.tables import G7_BANDS, G7_PAIRS
    T = "recovery_g7.csv"
    out = []
    rec_band, inf_band = G7_BANDS[1], G7_BANDS[2]
    for model in dict.fromkeys(g7["model"]):
        gm = g7[g7["model"] == model]
        for with_v, without_v in G7_PAIRS:
            if not {with_v, without_v} <= set(gm["variant"]):
                continue
            nums, parts = [], []
            bought = cost = None
            for band, label in ((rec_band, "raw*weight < 2^-126 with 1/weight finite"),
                                (inf_band, "weight <= 2^-128, where the float32 Div0ulp(1, weight) overflows to "
                                           "inf")):
                if not ((gm["band"] == band) & (gm["variant"] == with_v)).any():
                    continue
                tag = "rec" if band == rec_band else "inf"
                w1 = {"model": model, "band": band, "variant": with_v}
                w0 = {"model": model, "band": band, "variant": without_v}
                cnt = cite(f"{tag}_count", T, g7, w1, "count")
                ch = cite(f"{tag}_changed", T, g7, w1, "changed_by_g7")
                l1, l0 = cite(f"{tag}_lost_with", T, g7, w1, "lost"), cite(f"{tag}_lost_without", T, g7, w0, "lost")
                o1, o0 = (cite(f"{tag}_over1_with", T, g7, w1, "over_1ulp"),
                          cite(f"{tag}_over1_without", T, g7, w0, "over_1ulp"))
                a1, a0 = (cite(f"{tag}_mean_with", T, g7, w1, "mean_ulp"),
                          cite(f"{tag}_mean_without", T, g7, w0, "mean_ulp"))
                d = derive("recovered", l0, l1) if band == rec_band else derive("extra_zeroed", l1, l0)
                nums += [cnt, ch, l1, l0, o1, o0, a1, a0, d]
                parts.append(f"where {label} ({cnt.text} outputs) G7 changes {ch.text}: outputs lost to zero "
                             f"{l0.text} -> {l1.text}, over 1 ulp {o0.text} -> {o1.text}, mean error "
                             f"{a0.text} -> {a1.text} ulp")
                if band == rec_band:
                    bought = d
                else:
                    cost = d
            if not parts:
                continue
            verdict = []
            if bought is not None:
                verdict.append(f"it recovers {bought.text} outputs from zero" if bought.value > 0 else
                               (f"it loses {fmt_num(-bought.value)} more outputs to zero where it should recover"
                                if bought.value < 0 else "it recovers no output from zero"))
            if cost is not None:
                verdict.append(f"it zeroes {cost.text} more outputs where 1/weight overflows"
                               if cost.value > 0 else
                               (f"it recovers {fmt_num(-cost.value)} outputs where 1/weight overflows"
                                if cost.value < 0 else "it changes no loss where 1/weight overflows"))
            b = bought.value if bought is not None else 0
            k = -cost.value if cost is not None else 0
            if b > 0 and k >= 0:
                overall = f"the data support G7 on {model}"
            elif b <= 0 and k < 0:
                overall = f"the data do not support G7 on {model}: it only costs here"
            elif b > 0 and k < 0:
                overall = f"the data are mixed on {model}: G7 buys and costs outputs"
            else:
                overall = f"G7 makes no difference to losses on {model}"
            said = "; ".join(verdict)
            text = (f"On {model}, {with_v} vs {without_v} (without -> with): " + "; ".join(parts) + ". "
                    + said[:1].upper() + said[1:] + ": " + overall + ".")
            out.append(Finding(f"recovery/{model}/{with_v}", "recovery", text, nums))
    # the cost in one weight: the overflowing weight where G7 loses the most more outputs
    if by_weight is not None and not by_weight.empty and {"kernel", "kernel-G7"} <= set(by_weight["variant"]):
        TW = "recovery_weight.csv"
        bw = by_weight[by_weight["recip_overflows"].astype(bool)]
        piv = bw.pivot_table(index=["model", "weight"], columns="variant", values="lost", aggfunc="first")
        piv = piv.dropna(subset=["kernel", "kernel-G7"])
        piv = piv.assign(extra=piv["kernel"] - piv["kernel-G7"]).sort_values("extra", ascending=False,
                                                                            kind="stable")
        if not piv.empty and piv["extra"].iloc[0] > 0:
            model, weight = piv.index[0]
            w1 = {"model": model, "weight": float(weight), "variant": "kernel"}
            w0 = {"model": model, "weight": float(weight), "variant": "kernel-G7"}
            lw = cite("log2_weight", TW, by_weight, w1, "log2_weight")
            cnt = cite("count", TW, by_weight, w1, "count")
            z1, z0 = cite("zero_with", TW, by_weight, w1, "zero"), cite("zero_without", TW, by_weight, w0, "zero")
            l1, l0 = cite("lost_with", TW, by_weight, w1, "lost"), cite("lost_without", TW, by_weight, w0, "lost")
            text = (f"The cost of G7 is largest on {model} at weight 2^{lw.text}: kernel returns 0 for {z1.text} of "
                    f"{cnt.text} outputs ({l1.text} of them with a nonzero correctly rounded value), kernel-G7 for "
                    f"{z0.text} ({l0.text} lost): 1/weight = 2^{fmt_num(-lw.value)} overflows float32, and G7's "
                    f"division by it zeroes the product.")
            out.append(Finding("recovery/cost", "recovery", text, [lw, cnt, z1, z0, l1, l0]))
    return out


# ---------------------------------------------------------------------------
# q = 1 - p
# ---------------------------------------------------------------------------

def _region_lo(label: str) -> float:
    """Lower edge of a region label ('x < -20' -> -inf, '[0, 8)' -> 0, 'x >= 50' -> 50)."""
    if label.startswith("x <"):
        return -np.inf
    if label.startswith("x >="):
        return float(label.split(">=")[1])
    return float(label.strip("[").split(",")[0])


def q_findings(qt: pd.DataFrame, onset: pd.DataFrame, selector: pd.DataFrame | None = None,
               gamma: float = 2.0) -> list:
    """How q = 1 - p loses accuracy as x grows, and what it does to each selector's result."""
    out = []
    if not qt.empty:
        T = "q_table.csv"
        zero = qt[qt["q_computed"] == 0]
        nums = []
        text = ""
        for x in (1.0, 4.0, 8.0, 12.0, 16.0):
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
            text += (f"from x = {cz.text} on (of the table's x), p rounds to 1 and q = 0 (exact {ce.text}), and "
                     f"ln(p) = {cl.text}")
        out.append(Finding("q/table", "q", "On npu, " + text.rstrip("; ") + ".", nums))
    if selector is not None and not selector.empty:
        T = "by_selector.csv"
        regs = [r for r in dict.fromkeys(selector["region"]) if _region_lo(r) >= 0]
        regs.sort(key=_region_lo)
        for (model, fmt, t), grp in selector.groupby(["model", "format", "target"], sort=False):
            nums, parts = [], []
            for v in dict.fromkeys(grp["variant"]):
                cells = []
                for r in regs:
                    w = {"variant": v, "model": model, "format": fmt, "target": _py(t), "region": r}
                    if not ((grp["variant"] == v) & (grp["region"] == r)).any():
                        continue
                    mx = cite(f"max_{v}_{r}", T, selector, w, "max_finite_ulp")
                    ni = [cite(f"{c}_{v}_{r}", T, selector, w, c) for c in ("nan", "inf")]
                    nums += ni
                    bad = "" if ni[0].value + ni[1].value == 0 else f" +{ni[0].text} NaN/{ni[1].text} inf"
                    if isinstance(mx.value, float) and np.isnan(mx.value):
                        cells.append(f"{r} no finite output ({ni[0].text} NaN/{ni[1].text} inf)")
                    else:
                        nums.append(mx)
                        cells.append(f"{r} {mx.text}{bad}")
                parts.append(f"{v}: " + ", ".join(cells))
            text = (f"On {model} {fmt}, selector t={t}, max finite ulp error by region of x >= 0 (all gammas): "
                    + "; ".join(parts) + ".")
            out.append(Finding(f"q/regions/{model}/{fmt}/{t}", "q", text, nums))
    if not onset.empty:
        T = "onset.csv"
        sub = onset[onset["gamma"] == gamma]
        for (model, fmt, t), grp in sub.groupby(["model", "format", "target"], sort=False):
            nums, parts = [], []
            for v in grp["variant"]:
                w = {"variant": v, "model": model, "format": fmt, "target": _py(t), "gamma": gamma}
                on = cite(f"onset_{v}", T, onset, w, "x_onset_1ulp")
                mx = cite(f"max_{v}", T, onset, w, "max_finite_ulp")
                xm = cite(f"x_at_max_{v}", T, onset, w, "x_at_max_finite")
                ni = cite(f"nan_inf_{v}", T, onset, w, "nan_inf")
                nums += [on, mx, xm, ni]
                start = "never" if np.isnan(on.value) else f"from x = {on.text}"
                parts.append(f"{v} over 1 ulp {start}, max finite {_ulp(mx)} at x = {xm.text}, "
                             f"{ni.text} NaN/inf")
            text = f"On {model} {fmt}, selector t={t}, gamma {fmt_num(gamma)}: " + "; ".join(parts) + "."
            out.append(Finding(f"q/onset/{model}/{fmt}/{t}", "q", text, nums))
    return out


# ---------------------------------------------------------------------------
# The issue-6 candidate against its targets
# ---------------------------------------------------------------------------

#: The issue's targets: fp32 max ulp outside the root neighbourhood, NaN/inf
#: where the exact value is finite, fp16 share correctly rounded and max ulp
#: (everywhere), ops per element relative to the production kernel.
CANDIDATE_TARGETS = {"fp32_max_ulp": 4.0, "nan_inf": 0, "fp16_share_correct": 0.999, "fp16_max_ulp": 1.0,
                     "ops_ratio": 1.5}


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def candidate_findings(targets: pd.DataFrame, ops: pd.DataFrame, c_threshold: float,
                       candidate: str = "candidate") -> list:
    """One finding per target of the candidate (per model and format), each with its verdict.

    ``targets``: :func:`precision.report.tables.targets_table`; ``ops``:
    :func:`precision.report.tables.opcount_table`.  The other variants of the
    table are quoted beside the candidate for comparison.
    """
    if targets.empty or candidate not in set(targets["variant"]):
        return []
    out = []
    T, K = "targets.csv", CANDIDATE_TARGETS
    cmp_variants = [v for v in dict.fromkeys(targets["variant"]) if v != candidate]
    for (model, fmt), _ in targets[targets["variant"] == candidate].groupby(["model", "format"], sort=False):
        w = {"variant": candidate, "model": model, "format": fmt}
        nan_inf, count = cite("nan_inf", T, targets, w, "nan_inf"), cite("count", T, targets, w, "count")
        nums = [nan_inf, count]
        others = []
        present = set(targets.loc[(targets["model"] == model) & (targets["format"] == fmt), "variant"])
        for v in (v for v in cmp_variants if v in present):  # fp16-only variants have no fp32 rows
            wv = {"variant": v, "model": model, "format": fmt}
            col = "max_finite_ulp_outside" if fmt == "fp32" else "max_ulp"
            mx, ni = cite(f"{v}_max", T, targets, wv, col), cite(f"{v}_nan_inf", T, targets, wv, "nan_inf")
            nums += [mx, ni]
            others.append(f"{v} {_ulp(mx)} with {ni.text} NaN/inf")
        nan_text = (f"{nan_inf.text} NaN/inf where the exact value is finite (target {K['nan_inf']}: "
                    f"{_verdict(nan_inf.value == K['nan_inf'])})")
        if fmt == "fp32":
            mx = cite("max_outside", T, targets, w, "max_ulp_outside")
            n_out = cite("outside", T, targets, w, "outside")
            n_in = cite("inside", T, targets, w, "inside")
            mx_in = cite("max_inside", T, targets, w, "max_ulp_inside")
            wit = [cite(c, T, targets, w, f"{c}_outside") for c in ("witness_pred", "witness_target",
                                                                     "witness_alpha", "witness_gamma")]
            nums += [mx, n_out, n_in, mx_in] + wit
            ok = mx.value <= K["fp32_max_ulp"]
            text = (f"On {model}, fp32 output, outside the root neighbourhood (C < {fmt_num(c_threshold)}, "
                    f"{n_out.text} outputs): {candidate} max error {_ulp(mx)} (pred {wit[0].text}, selector "
                    f"{wit[1].text}, alpha {wit[2].text}, gamma {wit[3].text}; target <= "
                    f"{fmt_num(K['fp32_max_ulp'])} ulp: {_verdict(ok)}). Inside it ({n_in.text} outputs) the max "
                    f"is {_ulp(mx_in)}. Of all {count.text} outputs, {nan_text}. Same outputs, max finite error "
                    f"outside the neighbourhood: " + "; ".join(others) + ".")
        else:
            wrong = cite("not_correct", T, targets, w, "not_correct")
            mx = cite("max_ulp", T, targets, w, "max_ulp")
            nums += [wrong, mx]
            ok_share = wrong.value <= (1.0 - K["fp16_share_correct"]) * count.value
            ok_max = mx.value <= K["fp16_max_ulp"]
            text = (f"On {model}, {fmt} output ({count.text} outputs, the root neighbourhood included): "
                    f"{candidate} is not correctly rounded on {wrong.text} of them (target: correctly rounded on "
                    f"a share >= {fmt_num(K['fp16_share_correct'])}, {_verdict(ok_share)}), max error {_ulp(mx)} (target "
                    f"<= {fmt_num(K['fp16_max_ulp'])} ulp: {_verdict(ok_max)}), {nan_text}. "
                    f"Max error of the others: " + "; ".join(others) + ".")
        out.append(Finding(f"candidate/{fmt}/{model}", "candidate", text, nums))
    if not ops.empty and candidate in set(ops["variant"]) and "kernel" in set(ops["variant"]):
        c_ops = cite("candidate_ops", "opcount.csv", ops, {"variant": candidate}, "ops")
        k_ops = cite("kernel_ops", "opcount.csv", ops, {"variant": "kernel"}, "ops")
        ratio = cite("ratio", "opcount.csv", ops, {"variant": candidate}, "ratio_to_kernel")
        out.append(Finding("candidate/ops", "candidate",
                           f"Cost: {candidate} {c_ops.text} primitive ops per element against the production "
                           f"kernel's {k_ops.text} (npu machine, standard input), a ratio of {ratio.text}; target "
                           f"<= {fmt_num(K['ops_ratio'])}: {_verdict(ratio.value <= K['ops_ratio'])}.",
                           [c_ops, k_ops, ratio]))
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
