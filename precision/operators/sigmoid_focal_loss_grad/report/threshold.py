"""The G5 cancellation threshold: each threshold against no correction and against the production 1/64.

Reads the run's paired comparisons of kind ``threshold`` (:mod:`precision.operators.sigmoid_focal_loss_grad.comparisons`) and the statistics
of each ``kernel[G5=...]`` variant, per **subset** of points: ``pooled`` (every region the study pools) and
each region it keeps apart (``[points] separate``, e.g. the q-hole, where q = 1 - p has lost half its bits
and no threshold can help); a separate subset never enters the pooled verdicts.

``threshold.csv``
    One row per (machine, format, profile, subset, threshold): ``fired`` (points where the variant's G5
    test held: its ``g5_use`` step), ``changed`` (outputs whose bits differ from never's; 0 for never),
    ``count``, max finite error, mean bits, specials over the same points, then the paired counts and
    verdict against ``never`` (``*_vs_never``) and against 1/64 (``*_vs_production``).
``threshold_search.csv``, ``threshold_search_octaves.csv``
    When the run has them (``[run] threshold_search``, :mod:`precision.operators.sigmoid_focal_loss_grad.threshold_tasks`): the best float32
    threshold of the pooled points (each point's critical threshold found by bisection in float32 ordinal
    space, the split placed as Herbie's regime inference does), and the net gain of correcting per octave
    of the threshold.
``cancellation_window.csv``
    Per gamma: where the pred values were drawn (the windows where the bracket's cancellation factor
    C >= the set's ``cancellation``, :func:`precision.operators.sigmoid_focal_loss_grad.bracket.cancellation_windows`), A's roots, the points
    per subset and, per machine, how many of them 1/64 fired on.

The findings answer "is 1/64 right": which thresholds beat no correction, which are indistinguishable from
1/64, which is best and by how much (sign-test p-values), where the bisection puts the boundary; and, when the
run attributes points (``attribution_guards.csv``), whether the error of the uncorrected value is born in the
subtraction G5 corrects or upstream of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from precision.products.report.answers import Answer, magnitude_text, verdict_table
from precision.products.report.sections.verdicts import garbage_class_clause
from precision.products.report.document import Details, Heading, Image, Para, Section, Table
from precision.products.report.findings import Finding, cite, fmt_num, p_text
from precision.products.report.mechanism import effect_of
from precision.products.report.plots import draw_curves, save
from precision.products.report.tables import decimal_text, exact_text, group_table, short_hex
from precision.products.report.threshold_advice import recommend_thresholds, recommendation_sentence
from precision.analysis.scoring import SPECIAL_CLASSES

__all__ = ["build", "threshold_table", "subsets", "window_table", "plot_threshold", "POOLED"]

T = "threshold.csv"
S = "threshold_search.csv"
VT = "verdicts.csv"
POOLED = "pooled"
_PAIRED = ("changed", "better", "worse", "specials_fixed", "specials_caused", "p_value", "verdict")
_KEYS = ["machine", "format", "profile"]


def subsets(run) -> list:
    """(name, regions) of each subset: ``pooled`` (the regions the study pools), then each separate region."""
    return [(POOLED, [r for r in run.regions if r not in run.separate]), *[(r, [r]) for r in run.separate]]


def threshold_table(run) -> pd.DataFrame:
    """One row per (machine, format, profile, subset, threshold variant); empty without threshold comparisons."""
    op = run.operator
    paired = run.paired
    if not len(paired) or not (paired.frame["kind"] == "threshold").any():
        return pd.DataFrame()
    pairs = paired.frame[paired.frame["kind"] == "threshold"]
    compared = set(pairs["with_variant"]) | set(pairs["without_variant"])  # not e.g. kernel-G7 (G5 at 1/64)
    taus = {v: op.g5_threshold(v) for v in run.variants if v in compared}
    taus = {v: t for v, t in taus.items() if t is not None}
    if len(taus) < 2:
        return pd.DataFrame()
    by_pair = ["kind", "subject", "comparison", "with_variant", "without_variant", *_KEYS]
    frames = []
    for name, regions in subsets(run):
        stats = run.stats.select(run.stats.frame["region"].isin(regions).to_numpy())
        stats = stats.select(stats.frame["variant"].isin(list(taus)).to_numpy())
        s = group_table(stats.merge(["variant", *_KEYS]), ["variant", *_KEYS])
        s.insert(len(_KEYS) + 1, "subset", name)
        s["tau"] = s["variant"].map(taus)
        s["fired"] = s["fired_g5"].astype(np.int64) if "fired_g5" in s.columns else 0
        p = paired.select((paired.frame["region"].isin(regions) & (paired.frame["kind"] == "threshold")).to_numpy())
        c = p.merge(by_pair).table(by_pair)
        for label, base in (("never", 0.0), ("production", op.PRODUCTION_THRESHOLD)):
            sel = c[c["without_variant"].map(op.g5_threshold) == base].rename(
                columns={"with_variant": "variant", **{k: f"{k}_vs_{label}" for k in _PAIRED}})
            s = s.merge(sel[["variant", *_KEYS] + [f"{k}_vs_{label}" for k in _PAIRED]], on=["variant", *_KEYS],
                        how="left")
        frames.append(s)
    t = pd.concat(frames, ignore_index=True)
    with np.errstate(divide="ignore"):
        k = -np.log2(t["tau"].to_numpy(np.float64))
    t["k"] = np.where(np.isfinite(k), k, np.nan)
    t["threshold"] = t["tau"].map(op.threshold_name)
    # outputs that differ from no correction (never itself: 0)
    t["changed"] = t["changed_vs_never"].where(t["tau"] != 0.0, 0).astype("Int64")  # empty without never
    mkey = {m: i for i, m in enumerate(run.machines)}
    skey = {name: i for i, (name, _) in enumerate(subsets(run))}
    t = t.assign(_m=t["machine"].map(mkey), _s=t["subset"].map(skey), _t=-t["tau"]).sort_values(
        ["_m", "format", "profile", "_s", "_t"], kind="stable")
    cols = ["machine", "format", "profile", "subset", "threshold", "k", "tau", "variant", "count", "fired", "changed",
            "max_finite_ulp", "mean_bits", "share_correct", "not_correct", *SPECIAL_CLASSES] + [
        f"{p}_vs_{b}" for b in ("never", "production") for p in _PAIRED]
    return t[cols].reset_index(drop=True)


def window_table(run) -> pd.DataFrame:
    """Per gamma: the cancellation windows the study drew its preds from, A's roots in them, points per subset
    and the points where 1/64 fired (empty when no pred set is a ``windows`` set)."""
    sets = [p for p in run.run.get("pred_sets", []) if p.get("kind") == "windows"]
    if not sets:
        return pd.DataFrame()
    spec = sets[0]
    lo, hi = spec.get("range", (-20.0, 20.0))
    sign = -1.0 if spec.get("selector", 0) == 1 else 1.0
    s_lo, s_hi = (lo, hi) if sign > 0 else (-hi, -lo)
    op = run.operator
    prod = [v for v in run.variants if op.g5_threshold(v) == op.PRODUCTION_THRESHOLD]
    keys = ["variant", "machine", "gamma", "region"]
    by_gamma = run.stats.merge(keys).table(keys)
    machines = list(dict.fromkeys(by_gamma["machine"]))
    rows = []
    for g in sorted(run.by_term["gamma"].unique()):
        wins = [tuple(sorted((sign * a, sign * b))) for a, b in op.cancellation_windows(g, spec["cancellation"],
                                                                                         s_lo, s_hi)]
        rts = [sign * r for r in op.roots(g, s_lo, s_hi)]
        row = {"gamma": g, "windows": "; ".join(f"[{exact_text(a)}, {exact_text(b)}]" for a, b in wins) or "none",
               "roots": "; ".join(exact_text(r) for r in rts) or "none"}
        one = by_gamma[(by_gamma["gamma"] == g) & (by_gamma["variant"] == (prod[0] if prod else run.variants[0]))]
        for name, regions in subsets(run):  # the points are the same on every machine; where G5 fires is not
            part = one[one["region"].isin(regions)]
            row[f"points_{name}"] = int(part[part["machine"] == machines[0]]["count"].sum())
            if prod and "fired_g5" in part.columns:
                for m in machines:
                    row[f"fired_1/64_{m}_{name}"] = int(part[part["machine"] == m]["fired_g5"].sum())
        rows.append(row)
    return pd.DataFrame(rows)


def plot_threshold(t: pd.DataFrame, folder, op, stem: str = "threshold") -> str | None:
    """Pooled subset, per machine and format: outputs better / worse than never and than 1/64 (the operator
    ``op``'s production threshold) per threshold.

    A threshold is never compared with itself: the ``vs never`` curves have no
    point at never and the ``vs 1/64`` curves none at 1/64 (a gap, not a zero).
    The ``vs 1/64`` point at never is 1/64's own comparison with never read the
    other way (the same pairs: never is better exactly where 1/64 is worse).
    """
    t = t[t["subset"] == POOLED]
    if t.empty:
        return None
    cells = list(dict.fromkeys(zip(t["machine"], t["format"])))
    fig, axes = plt.subplots(1, len(cells), figsize=(4.2 * len(cells) + 1.8, 3.4), squeeze=False, sharey=True)
    for j, (machine, fmt) in enumerate(cells):
        ax = axes[0, j]
        sub = t[(t["machine"] == machine) & (t["format"] == fmt)].reset_index(drop=True)
        never, prod = (sub.index[sub["tau"] == tau] for tau in (0.0, op.PRODUCTION_THRESHOLD))
        if len(never) and len(prod):
            sub = sub.copy()
            for what, mirror in (("better", "worse"), ("worse", "better")):
                sub.loc[never[0], f"{what}_vs_production"] = sub.loc[prod[0], f"{mirror}_vs_never"]
        x = np.arange(len(sub), dtype=np.float64)
        curves = []
        for base, itself in (("never", 0.0), ("production", op.PRODUCTION_THRESHOLD)):
            name = "1/64" if base == "production" else base
            other = (sub["tau"] != itself).to_numpy()
            for what in ("better", "worse"):
                y = sub[f"{what}_vs_{base}"].astype("Float64").to_numpy(np.float64, na_value=np.nan)
                if np.isnan(y[other]).all():
                    continue
                curves.append((f"{what} than {name}", x[other], y[other]))
        draw_curves(ax, curves)
        prod = sub.index[sub["tau"] == op.PRODUCTION_THRESHOLD]
        if len(prod):
            ax.axvline(prod[0], color="k", lw=0.8, ls=":", label="1/64 (production)")
        ax.set_yscale("symlog", linthresh=1)
        names = ["1/64" if tau == op.PRODUCTION_THRESHOLD else n for tau, n in zip(sub["tau"], sub["threshold"])]
        ax.set_xticks(x, names, fontsize=6, rotation=60)
        ax.set_title(f"{machine}, {fmt} (pooled points)", fontsize=8)
        ax.tick_params(labelsize=6)
        ax.set_xlabel("G5 threshold tau", fontsize=7)
    top = max(ax.dataLim.y1 for ax in axes[0])
    axes[0, 0].set_ylim(0, max(top, 1.0) * 2)  # shared: room above the largest count
    axes[0, 0].set_ylabel("changed outputs (symlog)", fontsize=7)
    handles = {}
    for ax in axes[0]:  # every curve of every panel in the one legend
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    axes[0, -1].legend(handles.values(), handles.keys(), fontsize=6, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    return save(fig, folder, stem)


def _has_never(prod: pd.DataFrame, finite: pd.DataFrame) -> bool:
    """Whether the study ran kernel[G5=never] here (the *_vs_never columns are filled)."""
    return bool(len(prod) and prod["better_vs_never"].notna().all() and finite["better_vs_never"].notna().all())


def _names(rows) -> str:
    return ", ".join(rows["threshold"]) if len(rows) else "none"


@dataclass
class _Cell:
    """One machine, format and profile of the pooled points: what the answer and its grid are made of."""

    machine: str
    format: str
    profile: str
    prod: pd.Series  # the 1/64 row
    finite: pd.DataFrame  # the rows of finite nonzero thresholds
    same: pd.DataFrame  # those other than 1/64 whose verdict against it is no_effect or inconclusive
    has_never: bool  # whether the *_vs_never columns are filled
    best: pd.Series | None  # the largest net (better - worse) against never (None without never)
    best_net: int | None
    search: pd.Series | None  # the threshold_search.csv row


def _cells(t: pd.DataFrame, search: pd.DataFrame, op):
    """The :class:`_Cell` of every (machine, format, profile) whose pooled points include 1/64 (the operator
    ``op``'s production threshold)."""
    for (machine, fmt, profile), sub in t[t["subset"] == POOLED].groupby(_KEYS, sort=False):
        prod = sub[sub["tau"] == op.PRODUCTION_THRESHOLD]
        if prod.empty:
            continue
        finite = sub[(sub["tau"] > 0) & np.isfinite(sub["tau"])]
        others = finite[finite["tau"] != op.PRODUCTION_THRESHOLD]
        same = others[others["verdict_vs_production"].isin(["no_effect", "inconclusive"])]
        has_never = _has_never(prod, finite)
        best = best_net = None
        if has_never and len(finite):
            net = (finite["better_vs_never"] - finite["worse_vs_never"]).to_numpy()
            best, best_net = finite.iloc[int(np.argmax(net))], int(net.max())
        s = search[(search["machine"] == machine) & (search["format"] == fmt) & (search["profile"] == profile)] \
            if not search.empty else search
        yield _Cell(machine, fmt, profile, prod.iloc[0], finite, same, has_never, best, best_net,
                    s.iloc[0] if len(s) else None)


def _garbage_class_changes(v: pd.DataFrame, t: pd.DataFrame, c) -> tuple[str, list]:
    """What the production threshold does, against no correction, to outputs special or over 2^20 ulp both with
    and without it (no evidence for the verdict, but news for a reviewer): the class changes
    (:func:`garbage_class_clause`, cited from verdicts.csv); ``("", [])`` when there are none or no never."""
    never = t[(t["machine"] == c.machine) & (t["profile"] == c.profile) & (t["threshold"] == "never")]
    if v is None or v.empty or "changed_garbage_made_special" not in v or not len(never):
        return "", []
    w = {"with_variant": c.prod["variant"], "without_variant": never["variant"].iloc[0], "machine": c.machine,
         "profile": c.profile, "region": "all"}
    row = v
    for k, val in w.items():
        row = row[row[k] == val]
    return garbage_class_clause(VT, v, w, row.iloc[0], "prod_{col}") if len(row) == 1 else ("", [])


#: How the class changes are introduced: after the 1/64 vs never counts, and as a sentence of their own.
_GARBAGE_LEAD = "among the outputs it changes that are special or over 2^20 ulp both with and without it (no " \
                "evidence for the verdict), "
_GARBAGE_SENTENCE = "Against no correction, among the outputs 1/64 changes that are special or over 2^20 ulp both " \
                    "with and without it (no evidence for the verdict), "


def _answer(t: pd.DataFrame, search: pd.DataFrame, op, v: pd.DataFrame | None = None) -> list:
    """Per machine and format, on the pooled points: is 1/64 (``op``'s production threshold) right?  Every number
    cited (``v``: the run's verdicts, for the class changes among garbage pairs)."""
    out = []
    for c in _cells(t, search, op):
        ident = f"threshold/{c.machine}/{c.format}/{c.profile}"
        if not c.has_never:
            out.append(Finding(ident, "threshold",
                               f"{c.machine} {c.format}, pooled points: the study runs no kernel[G5=never], so no "
                               f"threshold is compared with no correction. Indistinguishable from 1/64: "
                               f"{_names(c.same)}.", [], 3, shown=True))
            continue
        key = {"machine": c.machine, "format": c.format, "profile": c.profile, "subset": POOLED}
        w = {**key, "variant": c.prod["variant"]}
        nums = [cite(f"prod_{k}", T, t, w, f"{k}_vs_never") for k in ("better", "worse", "p_value")]
        helps = c.finite[c.finite["verdict_vs_never"] == "helps"]
        hurts = c.finite[c.finite["verdict_vs_never"] == "hurts"]
        moved, moved_nums = _garbage_class_changes(v, t, c)
        nums += moved_nums
        moved = f"; {_GARBAGE_LEAD}{moved}" if moved else ""
        text = (f"{c.machine} {c.format}, pooled points: against no correction 1/64 {c.prod['verdict_vs_never']} "
                f"({nums[0].text} better, {nums[1].text} worse, {p_text(nums[2].value)}){moved}; thresholds that "
                f"help: {_names(helps)}; that hurt: {_names(hurts)}")
        text += f". Indistinguishable from 1/64: {_names(c.same)}"
        if c.best is not None and c.best["tau"] != op.PRODUCTION_THRESHOLD:
            wb = {**key, "variant": c.best["variant"]}
            b, wo, p = (cite(f"best_{k}", T, t, wb, f"{k}_vs_production") for k in ("better", "worse", "p_value"))
            nums += [b, wo, p]
            text += (f". Best against no correction: {c.best['threshold']}; against 1/64 it "
                     f"{c.best['verdict_vs_production']} ({b.text} better, {wo.text} worse, {p_text(p.value)})")
        elif c.best is not None:
            text += ". Best against no correction: 1/64 itself"
        if c.search is not None and isinstance(c.search["boundary"], str):
            ws = {"machine": c.machine, "format": c.format, "profile": c.profile}
            bt, bn, bb, bw, bp = (cite(f"search_{k}", S, search, ws, k) for k in
                                  ("boundary", "boundary_net", "better_vs_production", "worse_vs_production",
                                   "p_value_vs_production"))
            nums += [bt, bn, bb, bw, bp]
            text += (f". The best float32 threshold of these points is tau = {bt.text} "
                     f"({decimal_text(bt.value)}, net {bn.text} over never); against 1/64 it "
                     f"{c.search['verdict_vs_production']} ({bb.text} better, {bw.text} worse, {p_text(bp.value)})")
        elif c.search is not None:
            text += ". No threshold beats no correction on balance on these points"
        out.append(Finding(ident, "threshold", text + ".", nums, 3, shown=True))
    return out


#: The question the threshold section answers.
QUESTION = "Is 1/64 the right G5 threshold, what is better, and by how much?"


def _threshold_answers(run, t: pd.DataFrame, search: pd.DataFrame, octaves: pd.DataFrame) -> list:
    """Per machine and format (pooled points): whether 1/64 is right, what to use instead as one
    recommendation (:mod:`precision.products.report.threshold_advice`: the plateau, its simplest value,
    the size), what beats 1/64 and by how much (the size and mechanism of the best threshold against 1/64
    from verdicts.csv), the best float32 tau."""
    v = verdict_table(run)
    op = run.operator
    advice = {(r["machine"], r["profile"]): r
              for r in recommend_thresholds(octaves, t, v, search, str(run.run.get("study", "")))}
    out = []
    for c in _cells(t, search, op):
        # news for a reviewer though no evidence for the verdict: what 1/64 does to far-off outputs (vs never)
        moved, moved_nums = _garbage_class_changes(v, t, c)
        moved = f"{_GARBAGE_SENTENCE}{moved}." if moved else ""
        beat = c.finite[(c.finite["tau"] != op.PRODUCTION_THRESHOLD) & (c.finite["verdict_vs_production"] == "helps")]
        lose = c.finite[(c.finite["tau"] != op.PRODUCTION_THRESHOLD) & (c.finite["verdict_vs_production"] == "hurts")]
        lowest = beat.sort_values("tau").iloc[0] if len(beat) else None
        up = c.finite[(c.finite["tau"] != op.PRODUCTION_THRESHOLD) & (c.finite["tau"] >= lowest["tau"])] \
            if lowest is not None else beat
        every_up = lowest is not None and set(up["tau"]) <= set(beat["tau"])
        best = c.best
        if len(beat) and (best is None or best["tau"] not in set(beat["tau"])):  # the best of those that beat 1/64
            best = beat.iloc[int(np.argmax((beat["better_vs_production"] - beat["worse_vs_production"]).to_numpy()))]
        extra = {}
        if c.search is not None and isinstance(c.search["boundary"], str):
            extra = {"best_threshold": str(c.search["best_threshold"]), "best_tau_hex": short_hex(c.search["boundary"])}
        elif best is not None:
            extra = {"best_threshold": str(best["threshold"]), "best_tau_hex": short_hex(float(best["tau"]))}
        rec = advice.get((c.machine, c.profile))
        said = "" if rec is None else recommendation_sentence(rec, machine=False)
        if rec is not None:
            extra.update(recommendation=rec["recommendation"], plateau=rec["plateau_text"],
                         identical_to_always=rec["identical_to_always"])
        if beat.empty:
            name = "1/64" if best is None or best["tau"] == op.PRODUCTION_THRESHOLD else best["threshold"]
            said = f" {said[0].upper()}{said[1:]}" if said else ""
            text = (f"{c.machine} {c.format}: yes, no threshold of the study beats 1/64 on these points "
                    f"(best against no correction: {name}); indistinguishable from 1/64: {_names(c.same)}.{said}")
            out.append(Answer(QUESTION, f"{text} {moved}".strip(), moved_nums, subject="G5=1/64",
                              machine=c.machine, format=c.format, verdict="right", extra=extra,
                              short=f"{c.machine} {c.format}: yes, no threshold of the study beats 1/64.{said}"
                                    + (f" {moved}" if moved else "")))
            continue
        nums = []
        scope = (f"every threshold of the study from {lowest['threshold']} up beats 1/64" if every_up
                 else f"{len(beat)} thresholds beat 1/64 ({_names(beat)})")
        if len(lose):
            scope += f"; {_names(lose)} lose to 1/64"
        text = f"{c.machine} {c.format}: no: {scope}; the best is {best['threshold']}: against 1/64 it helps"
        if rec is not None:
            text = text.replace(": no: ", f": no; {said[0].upper()}{said[1:-1]}. In detail: ", 1)
        short = (f"{c.machine} {c.format}: no. " + (f"{said[0].upper()}{said[1:]} " if rec is not None else "")
                 + (f"Every threshold from {lowest['threshold']} up beats 1/64"
                                                     if every_up else f"{len(beat)} thresholds beat 1/64")
                 + (f" ({len(lose)} others lose to 1/64)" if len(lose) else "") + f"; the best, {best['threshold']}, "
                 f"against 1/64")
        row = v[(v["with_variant"] == best["variant"]) & (v["without_variant"] == c.prod["variant"])
                & (v["machine"] == c.machine) & (v["profile"] == c.profile) & (v["region"] == "all")]
        magnitude_row, mech = {}, {}
        if len(row) == 1:
            effect = effect_of(run, v, row.iloc[0], "best_")
            nums += effect.numbers
            magnitude_row, mech = effect.magnitude, effect.mechanism
            text += f" on {effect.size}" + (f". {effect.place}" if effect.place else "")
            short += f": {effect.short}"
        if extra.get("best_tau_hex") and c.search is not None and isinstance(c.search["boundary"], str):
            bn = cite("search_net", S, search, {"machine": c.machine, "format": c.format, "profile": c.profile},
                      "boundary_net")
            nums.append(bn)
            text += (f". The best float32 tau of these points is {extra['best_tau_hex']} "
                     f"({float(c.search['boundary_tau']):.9g}; net {bn.text} outputs over no correction)")
            if rec is None:  # (the recommendation names it)
                short += f". Best float32 tau: {extra['best_tau_hex']} ({float(c.search['boundary_tau']):.9g})"
        if moved:  # (text and short end without their full stop: the clause is a sentence of its own)
            nums += moved_nums
            text += f". {moved[:-1]}"
            short += f". {moved[:-1]}"
        out.append(Answer(QUESTION, text + ".", nums, subject=f"G5={best['threshold']}",
                          comparison=f"{best['variant']} vs {c.prod['variant']}", machine=c.machine,
                          format=c.format, verdict="helps", magnitude=magnitude_row, mechanism=mech, extra=extra,
                          short=short + "."))
    return out


def _size(v: pd.DataFrame | None, with_variant: str, without_variant: str, c) -> str:
    """The size of a threshold comparison (:func:`precision.products.report.answers.magnitude_text`) from verdicts.csv."""
    if v is None or v.empty:
        return ""
    row = v[(v["with_variant"] == with_variant) & (v["without_variant"] == without_variant)
            & (v["machine"] == c.machine) & (v["profile"] == c.profile) & (v["region"] == "all")]
    return f"; {magnitude_text(row.iloc[0].to_dict())}" if len(row) == 1 and int(row.iloc[0]["changed"]) else ""


def answer_grid(t: pd.DataFrame, search: pd.DataFrame, op, v: pd.DataFrame | None = None) -> pd.DataFrame:
    """The first-screen answer, one row per machine and format (pooled points): 1/64 (the operator ``op``'s
    production threshold) against never, the best threshold against never and against 1/64 (with the size from
    ``v``, :func:`verdict_table`, when given), the thresholds indistinguishable from 1/64, the bisection."""
    rows = []
    for c in _cells(t, search, op):
        if c.best is None:
            continue
        p, best, r = c.prod, c.best, c.search
        if r is not None and isinstance(r["boundary"], str):
            bis = (f"{exact_text(r['boundary'])}: {r['verdict_vs_production']} vs 1/64 "
                   f"{fmt_num(int(r['better_vs_production']))}/{fmt_num(int(r['worse_vs_production']))}")
        else:
            bis = "" if r is None else str(r["result"])
        vs = ("(is 1/64)" if best["tau"] == op.PRODUCTION_THRESHOLD else
              f"{best['verdict_vs_production']} {fmt_num(int(best['better_vs_production']))}/"
              f"{fmt_num(int(best['worse_vs_production']))}, {p_text(float(best['p_value_vs_production']))}"
              + _size(v, best["variant"], p["variant"], c))
        counts = c.finite["verdict_vs_never"].value_counts()
        rows.append({"machine": c.machine, "format": c.format, "points": fmt_num(int(p["count"])),
                     "thresholds vs never": ", ".join(f"{v} {fmt_num(int(n))}" for v, n in counts.items()),
                     "1/64 vs never": f"{p['verdict_vs_never']} {fmt_num(int(p['better_vs_never']))}/"
                                      f"{fmt_num(int(p['worse_vs_never']))}",
                     "best vs never (net)": f"{best['threshold']} ({fmt_num(c.best_net)})",
                     "best vs 1/64": vs, "indistinguishable from 1/64": _names(c.same), "best float32 tau": bis})
    return pd.DataFrame(rows)


def _separate_findings(t: pd.DataFrame, op) -> list:
    """Per separate subset and machine: how many points, where 1/64 (``op``'s production threshold) fired, and
    what the thresholds did there."""
    out = []
    for (machine, fmt, profile, subset), sub in t[t["subset"] != POOLED].groupby(_KEYS + ["subset"], sort=False):
        prod = sub[sub["tau"] == op.PRODUCTION_THRESHOLD]
        if prod.empty:
            continue
        w = {"machine": machine, "format": fmt, "profile": profile, "subset": subset, "variant": prod.iloc[0]["variant"]}
        n, f, b, wo = (cite(f"{c}", T, t, w, col) for c, col in (("count", "count"), ("fired", "fired"),
                                                                   ("better", "better_vs_never"),
                                                                   ("worse", "worse_vs_never")))
        verdicts = sorted(set(sub.loc[sub["tau"] > 0, "verdict_vs_never"].dropna()))
        out.append(Finding(f"threshold/{subset}/{machine}/{fmt}", "threshold",
                           f"{subset} on {machine} {fmt} (kept apart from the verdict): {n.text} points, 1/64 fired "
                           f"at {f.text}; against no correction 1/64 {prod.iloc[0]['verdict_vs_never']} ({b.text} "
                           f"better, {wo.text} worse); verdicts of the thresholds there: {', '.join(verdicts)}.",
                           [n, f, b, wo], 30))
    return out


def _attribution_finding(ctx, t: pd.DataFrame) -> list:
    """Where the uncorrected value's error is born at the attributed points where 1/64 changes the output."""
    path = ctx.run.folder / "attribution_guards.csv"
    if not path.is_file():
        return []
    op = ctx.run.operator
    g = pd.read_csv(path)
    g = g[(g["kind"] == "threshold") & (g["without_variant"].map(op.g5_threshold) == 0.0)
          & (g["with_variant"].map(op.g5_threshold) == op.PRODUCTION_THRESHOLD)]
    if g.empty:
        return []
    out = []
    for (machine, fmt), sub in g.groupby(["machine", "format"], sort=False):
        changed = sub[sub["changed"] > 0]
        total = int(changed["changed"].sum())
        if total == 0:
            continue
        at = changed[changed["top_step"] == "orig"]
        up = changed[changed["top_step"] != "orig"]

        def tally(rows):
            return (f"{fmt_num(int(rows['changed'].sum()))} (with 1/64: {fmt_num(int(rows['better'].sum()))} better, "
                    f"{fmt_num(int(rows['worse'].sum()))} worse)")
        steps = up.groupby("top_step")["changed"].sum().sort_values(ascending=False)
        where = ", ".join(f"{step} {fmt_num(int(n))}" for step, n in steps.items())
        out.append(Finding(f"threshold/attribution/{machine}/{fmt}", "threshold",
                           f"At the attributed points where 1/64 changes the output ({machine} {fmt}: "
                           f"{fmt_num(total)}), the uncorrected value's largest local error is born in the "
                           f"subtraction G5 corrects (orig) at {tally(at)} and elsewhere at {tally(up)}"
                           + (f" ({where})" if where else "") + " (attribution_guards.csv).", [], 12))
    return out


def build(ctx) -> Section:
    run = ctx.run
    op = run.operator
    t = threshold_table(run)
    section = Section("threshold", "G5 cancellation threshold: is 1/64 right?")
    if t.empty:
        return section
    section.tables[T] = t
    search = pd.read_csv(run.folder / S) if (run.folder / S).is_file() else pd.DataFrame()
    octaves_file = run.folder / "threshold_search_octaves.csv"
    octaves = pd.read_csv(octaves_file) if octaves_file.is_file() else pd.DataFrame()
    if not search.empty:
        section.tables[S] = search
        section.tables["threshold_search_octaves.csv"] = octaves
    window = window_table(run)
    if not window.empty:
        section.tables["cancellation_window.csv"] = window
    names = [n for n, _ in subsets(run)]
    grid = answer_grid(t, search, op, verdict_table(run))
    if not grid.empty:
        apart = [n for n in names if n != POOLED]
        section.first = [
            Heading("Is 1/64 right?", 2, "threshold-answer"),
            Table(grid, T, " (pooled points" + (f"; {', '.join(apart)} kept apart" if apart else "") + ")",
                  id="threshold-answer-table"),
            Para("Cells: verdict, then better/worse = outputs whose error falls / rises with the first threshold, "
                 "paired on the same points; best = the largest net (better - worse) against no correction; best "
                 "float32 tau: the threshold of largest net over every float32 value, from each point's critical "
                 "threshold found by bisection in ordinal space (threshold_search.csv).",
                 "rule"),
        ]
    shown = ["machine", "format", "subset", "threshold", "count", "fired", "max_finite_ulp", "mean_bits", "nan",
             "changed", "better_vs_never", "worse_vs_never", "verdict_vs_never", "changed_vs_production",
             "better_vs_production", "worse_vs_production", "p_value_vs_production", "verdict_vs_production"]
    section.body = [
        Para("Each threshold tau (G5 corrects when |orig| <= tau * max(|lhs|, |rhs|) and its range conditions "
             "hold) compared point by point with no correction (never) and with the production 1/64, on the same "
             f"points, per subset ({', '.join(names)}; only 'pooled' decides). fired: points where the test held; "
             "changed: outputs that differ from never."),
        Table(t[t["subset"] == POOLED][shown], T),
        Image(plot_threshold(t, ctx.plot_dir, op),
              "Pooled points: outputs better and worse than never and than 1/64, per threshold (no threshold compared "
              "with itself: no point at never against never nor at 1/64 against 1/64); 1/64 dotted"),
    ]
    if not search.empty:
        section.body.append(Para("Threshold search (precision.threshold_search): each point's critical threshold "
                                 "(the smallest float32 tau at which its test passes, by bisection in float32 "
                                 "ordinal space) and the outcome of correcting it; the best float32 threshold is "
                                 "where the running net (better - worse against never) is largest. A property of "
                                 "this sample of points."))
        section.body.append(Table(search.assign(boundary_tau=[exact_text(b) if isinstance(b, str) else b
                                                             for b in search["boundary"]])[[
                                          "machine", "format", "best_threshold", "best_net", "result",
                                          "boundary_tau", "boundary_net", "better_vs_production",
                                          "worse_vs_production", "p_value_vs_production", "verdict_vs_production"]],
                                  S))
        section.body.append(Details("Net gain of correcting per octave of the critical threshold",
                                    [Table(octaves, "threshold_search_octaves.csv")]))
    if len(names) > 1:
        section.body.append(Details("Separate subsets (kept out of the verdict)",
                                    [Table(t[t["subset"] != POOLED][shown], T)]))
    if not window.empty:
        section.body.append(Details("Where the pred values were drawn: the cancellation windows per gamma",
                                    [Table(window, "cancellation_window.csv")]))
    section.findings = (_answer(t, search, op, verdict_table(run)) + _attribution_finding(ctx, t)
                        + _separate_findings(t, op))
    section.answers = _threshold_answers(run, t, search, octaves)
    return section
