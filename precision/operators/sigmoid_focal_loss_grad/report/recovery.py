"""Subnormal recovery (G7): paired verdicts by subset and band of |raw*weight|, outputs rescued and zeroed.

G7 re-derives ``raw*weight*dout`` by reciprocal divisions when ``raw*weight``
underflows below 2^-126.  Its bands (disjoint; ``rw = |exact| / |dout|``, the
exact ``|raw*weight|``): ``rw >= 2^-126`` (G7 cannot engage),
``rw < 2^-126, 1/w finite`` (it can recover), ``rw < 2^-126, 1/w = inf``
(weight <= 2^-128: the float32 reciprocal overflows and the division by it
gives 0).  Its subsets of (weight, dout): ``powers of two`` (both are; every
reciprocal is exact) and ``random mantissas`` (either is not).  The
comparisons (``kernel`` vs ``kernel-G7``, ``naive+G7`` vs ``naive``) are
paired on the run's per-point rows and scored by
:func:`precision.analysis.paired.compare_points`, grouped by (machine, subset, band)
and by (machine, weight); ``rescued`` counts outputs that are 0 without G7
and not with it where the correctly rounded value is not 0, ``zeroed`` the
reverse.  The first screen answers "does G7 earn its place, and on which
machines" from ``kernel`` vs ``kernel-G7`` in the band where G7 can recover.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from precision.products.report.answers import Answer, magnitude_text, verdict_table
from precision.products.report.document import Details, Heading, Image, Para, Section, Table
from precision.products.report.mechanism import effect_of
from precision.products.report.findings import Finding, cite, fmt_num
from precision.products.report.plots import draw_curves, error_axis, save, special_level
from precision.analysis.groups import GroupStats, Grouping
from precision.analysis.paired import PairedStats, compare_points, outputs_changed
from precision.analysis.scoring import CLASS_NAMES

__all__ = ["build", "G7_PAIRS", "G7_BANDS", "SUBSETS", "recovery_points", "paired_by", "plot_recovery",
           "answer_grid"]

#: Variant pairs (with G7, without G7) whose difference is guard G7.
G7_PAIRS = (("kernel", "kernel-G7"), ("naive+G7", "naive"))
#: Bands of |raw*weight|: where G7 cannot engage, where it can recover, where its reciprocal overflows.
G7_BANDS = ("rw >= 2^-126", "rw < 2^-126, 1/w finite", "rw < 2^-126, 1/w = inf")
MIN_NORMAL_FP32 = 2.0 ** -126
#: Subsets of (weight, dout): both powers of two (exact reciprocals), or not.
SUBSETS = ("random mantissas", "powers of two")
_CODES = {name: code for code, name in CLASS_NAMES.items()}
_KEYS = ["machine", "format", "alpha", "gamma", "weight", "dout", "target", "pred_bits"]  # -0.0 and 0.0 differ


def _recip_overflows(weight) -> np.ndarray:
    """1/weight overflows float32 (the kernel's Div0ulp(1, weight) is inf): |weight| <= 2^-128."""
    w = np.abs(np.asarray(weight, dtype=np.float64))
    with np.errstate(divide="ignore", over="ignore"):
        return ~np.isfinite((np.float64(1.0) / w).astype(np.float32)) & (w > 0)


def _power_of_two(v) -> np.ndarray:
    m, _ = np.frexp(np.abs(np.asarray(v, dtype=np.float64)))
    return m == 0.5


def recovery_points(run) -> pd.DataFrame:
    """Weighted per-point rows with ``rw`` (exact |raw*weight|), ``band``, ``subset`` and ``log2_rw``."""
    pts = run.points(["pred", "target", "alpha", "gamma", "weight", "dout", "variant", "machine", "format",
                      "computed", "exact", "rounded", "err_ulp", "err_bits", "class"])
    pts = pts[pts["weight"].notna()].reset_index(drop=True)
    if pts.empty:
        return pts
    pts["pred_bits"] = pts["pred"].to_numpy().view(np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        rw = np.abs(pts["exact"].to_numpy()) / np.abs(pts["dout"].to_numpy())
        pts["log2_rw"] = np.floor(np.log2(rw))
    pts["rw"] = rw
    small = rw < MIN_NORMAL_FP32
    pts["band"] = np.where(~small, G7_BANDS[0], np.where(_recip_overflows(pts["weight"]), G7_BANDS[2], G7_BANDS[1]))
    exact = _power_of_two(pts["weight"]) & _power_of_two(pts["dout"])
    pts["subset"] = np.where(exact, SUBSETS[1], SUBSETS[0])
    return pts


def _grouped(frame: pd.DataFrame, by: list) -> tuple[Grouping, pd.DataFrame]:
    """The rows of ``frame`` grouped by the columns ``by`` (sorted keys), and one row of keys per group."""
    codes = frame.groupby(by, sort=True, dropna=False).ngroup().to_numpy()
    grouping = Grouping(codes, int(codes.max()) + 1)
    return grouping, frame.iloc[grouping.perm[grouping.starts]][by].reset_index(drop=True)


def paired_by(pts: pd.DataFrame, by) -> pd.DataFrame:
    """G7's paired comparisons (:data:`G7_PAIRS`) on the same points, grouped by ``by``, with rescued/zeroed."""
    frames = []
    for with_v, without_v in G7_PAIRS:
        a = pts[pts["variant"] == with_v]
        b = pts[pts["variant"] == without_v][_KEYS + ["computed", "err_ulp", "class"]]
        j = a.merge(b, on=_KEYS, suffixes=("", "_o"))
        if j.empty:
            continue
        cw, co = j["computed"].to_numpy(np.float64), j["computed_o"].to_numpy(np.float64)
        changed = outputs_changed(cw, co)
        outcome, fix, delta = compare_points(j["err_ulp"], j["class"].map(_CODES), j["err_ulp_o"],
                                             j["class_o"].map(_CODES), changed)
        grouping, keys = _grouped(j, list(by))
        stats = PairedStats.reduce(grouping, outcome, fix, delta, changed).with_columns(**{c: keys[c].to_numpy()
                                                                                       for c in by})
        t = stats.table(list(by))
        nonzero = j["rounded"].to_numpy() != 0
        t["rescued"] = grouping.count((co == 0) & (cw != 0) & nonzero)
        t["zeroed"] = grouping.count((cw == 0) & (co != 0) & nonzero)
        t.insert(0, "comparison", f"{with_v} vs {without_v}")
        frames.append(t)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _binade_table(pts: pd.DataFrame) -> pd.DataFrame:
    """Error statistics per (machine, variant, binade of rw)."""
    p = pts[np.isfinite(pts["log2_rw"])]
    by = ["machine", "variant", "format", "log2_rw"]
    grouping, keys = _grouped(p, by)
    lost = (p["computed"].to_numpy() == 0) & (p["rounded"].to_numpy() != 0)
    t = GroupStats.reduce(grouping, p["err_ulp"], p["err_bits"], p["class"].map(_CODES)).table([])
    t = pd.concat([keys, t], axis=1)
    t["lost"] = grouping.count(lost)
    return t


def plot_recovery(binades: pd.DataFrame, folder, stem: str = "recovery") -> str | None:
    """Max finite ulp and outputs lost to zero per binade of |raw*weight|: a panel column per group of machines
    with the same figures (titled with all of them), a line per variant (identical ones merged)."""
    if binades.empty:
        return None
    groups = {}  # machines whose binade figures are identical share a column
    for machine, sub in binades.groupby("machine", sort=False):
        key = sub.drop(columns="machine").sort_values(["variant", "log2_rw"]).to_csv(index=False)
        groups.setdefault(key, []).append(machine)
    columns = list(groups.values())
    level = special_level(binades["max_finite_ulp"])
    fig, axes = plt.subplots(2, len(columns), figsize=(4.6 * len(columns) + 2.2, 5.6), squeeze=False,
                             sharey="row", sharex=True)
    for j, machines in enumerate(columns):
        ax, bx = axes[0, j], axes[1, j]
        sub = binades[binades["machine"] == machines[0]]
        parts = list(sub.groupby("variant", sort=False))
        draw_curves(ax, [(v, g["log2_rw"].to_numpy(np.float64), g["max_finite_ulp"].to_numpy(np.float64))
                         for v, g in parts], level)
        draw_curves(bx, [(v, g["log2_rw"].to_numpy(np.float64), g["lost"].to_numpy(np.float64)) for v, g in parts])
        for a in (ax, bx):
            a.axvline(-126, color="r", lw=0.8, ls=":")
            a.axvline(-149, color="0.4", lw=0.8, ls=":")
            a.tick_params(labelsize=6)
        error_axis(ax, level, "max finite error (ulp)" if j == 0 else "")
        bx.set_xlabel("log2 |raw*weight| (binade; dotted: 2^-126, 2^-149)", fontsize=7)
        ax.set_title(f"{', '.join(machines)}: max finite error", fontsize=8)
        bx.set_title(f"{', '.join(machines)}: outputs lost to zero", fontsize=8)
        for a in (ax, bx):  # each column its own legend: which variants coincide differs between machines
            a.legend(fontsize=6, loc="best", framealpha=0.85)
    axes[1, 0].set_ylabel("outputs", fontsize=7)
    fig.tight_layout()
    return save(fig, folder, stem)


def _machine_findings(bands: pd.DataFrame) -> list:
    """On which machines G7 (kernel vs kernel-G7) helps, hurts or does nothing where it can recover."""
    k = bands[(bands["comparison"] == f"{G7_PAIRS[0][0]} vs {G7_PAIRS[0][1]}") & (bands["band"] == G7_BANDS[1])]
    if k.empty:
        return []
    parts = []
    for subset, rows in k.groupby("subset", sort=False):
        by = {v: ", ".join(rows.loc[rows["verdict"] == v, "machine"]) for v in dict.fromkeys(rows["verdict"])}
        parts.append(f"{subset}: " + "; ".join(f"{v} on {m}" for v, m in by.items()))
    return [Finding("recovery/machines", "recovery",
                    f"Where G7 can recover (band {G7_BANDS[1]}), kernel against kernel-G7: " + "; ".join(parts)
                    + " (each cell's counts in recovery_g7.csv).", [], 4)]


#: The question the recovery section answers.
QUESTION = "On which machines does G7 earn its place, and where does it cost?"


def _recovery_answers(run, bands: pd.DataFrame) -> list:
    """Per machine, kernel vs kernel-G7: the verdict where G7 can recover and where 1/w overflows, per subset,
    with rescued / zeroed outputs, then the size and mechanism over all points (verdicts.csv)."""
    comparison = f"{G7_PAIRS[0][0]} vs {G7_PAIRS[0][1]}"
    k = bands[bands["comparison"] == comparison]
    v = verdict_table(run)
    out = []
    for machine in [m for m in run.machines if (k["machine"] == m).any()]:
        nums, parts, shorts = [], [], []
        for band, label in ((G7_BANDS[1], "where it can recover"), (G7_BANDS[2], "where 1/w overflows")):
            rows = k[(k["machine"] == machine) & (k["band"] == band)]
            cells, brief = [], []
            for _, r in rows.iterrows():
                w = {"comparison": comparison, "machine": machine, "subset": r["subset"], "band": band}
                tag = f"{machine}_{r['subset']}_{band}_"
                b, wo, rs, z = (cite(f"{tag}{c}", "recovery_g7.csv", bands, w, c)
                                for c in ("better", "worse", "rescued", "zeroed"))
                nums += [b, wo, rs, z]
                cells.append(f"{r['subset']}: {r['verdict']} ({b.text} better, {wo.text} worse, {rs.text} rescued "
                             f"from zero, {z.text} zeroed)")
                counts = [f"{c.text} {word}" for c, word in ((b, "better"), (wo, "worse"), (rs, "rescued from zero"),
                                                             (z, "zeroed")) if c.value]
                brief.append(f"{r['verdict']} on {r['subset']}" + (f" ({', '.join(counts)})" if counts else ""))
            if cells:
                parts.append(f"{label} ({band}): " + "; ".join(cells))
                shorts.append(f"{label[0].upper()}{label[1:]}: " + "; ".join(brief))
        verdicts = set(k[k["machine"] == machine]["verdict"])
        earns = "earns its place" if "helps" in verdicts and not verdicts & {"hurts", "mixed"} else \
            "costs as well as helps" if verdicts & {"hurts", "mixed"} and "helps" in verdicts else \
            "costs" if verdicts & {"hurts", "mixed"} else "changes nothing decisive"
        text = f"{machine}: G7 {earns}: " + ". ".join(parts)
        row = v[(v["comparison"] == comparison) & (v["machine"] == machine) & (v["region"] == "all")]
        magnitude_row, mech = {}, {}
        if len(row) == 1 and int(row.iloc[0]["changed"]) > 0:
            effect = effect_of(run, v, row.iloc[0], f"{machine}_")
            nums += effect.numbers
            magnitude_row, mech = effect.magnitude, effect.mechanism
            text += f". Over all its points: {effect.size}" + (f". {effect.place}" if effect.place else "")
        out.append(Answer(QUESTION, text + ".", nums, subject="G7", comparison=comparison, machine=machine,
                          format=str(row.iloc[0]["format"]) if len(row) else "", verdict=earns,
                          magnitude=magnitude_row, mechanism=mech,
                          short=f"{machine}: G7 {earns}. " + ". ".join(shorts) + "."))
    return out


def answer_grid(bands: pd.DataFrame, machines) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(cells, CSS classes): kernel vs kernel-G7, one row per (machine, subset), one column per band."""
    k = bands[bands["comparison"] == f"{G7_PAIRS[0][0]} vs {G7_PAIRS[0][1]}"]
    cols = [band for band in G7_BANDS if (k["band"] == band).any()]
    rows = [(m, sub) for m in machines for sub in SUBSETS if ((k["machine"] == m) & (k["subset"] == sub)).any()]
    text = pd.DataFrame("", index=range(len(rows)), columns=["machine", "subset"] + cols)
    style = pd.DataFrame("", index=text.index, columns=text.columns)
    for i, (m, sub) in enumerate(rows):
        text.loc[i, "machine"], text.loc[i, "subset"] = m, sub
        for r in k[(k["machine"] == m) & (k["subset"] == sub)].itertuples(index=False):
            cell = "no_effect" if r.verdict == "no_effect" else \
                f"{r.verdict} {fmt_num(int(r.better))}/{fmt_num(int(r.worse))}"
            if r.rescued or r.zeroed:
                cell += f"; rescued {fmt_num(int(r.rescued))}, zeroed {fmt_num(int(r.zeroed))}"
            size = magnitude_text(r._asdict())
            cell += f"; {size}" if size else ""
            text.loc[i, r.band], style.loc[i, r.band] = cell, r.verdict
    style = style.where(text != "", "na")
    style[["machine", "subset"]] = ""
    return text, style


def build(ctx) -> Section:
    run = ctx.run
    section = Section("recovery", "Subnormal recovery (G7)")
    pts = recovery_points(run)
    if pts.empty or not set(pts["variant"]) & {v for pair in G7_PAIRS for v in pair}:
        return section
    bands = paired_by(pts, ["machine", "subset", "band"])
    weights = paired_by(pts, ["machine", "weight"])
    binades = _binade_table(pts)
    if bands.empty:
        return section
    bkey = {b: i for i, b in enumerate(G7_BANDS)}
    mkey = {m: i for i, m in enumerate(run.machines)}
    skey = {b: i for i, b in enumerate(SUBSETS)}
    bands = bands.assign(_m=bands["machine"].map(mkey), _s=bands["subset"].map(skey), _b=bands["band"].map(bkey)
                         ).sort_values(["_m", "_s", "_b"], kind="stable").drop(columns=["_m", "_s", "_b"]
                                                                            ).reset_index(drop=True)
    weights = weights.assign(log2_weight=np.log2(np.abs(weights["weight"].to_numpy(np.float64))),
                             recip_overflows=_recip_overflows(weights["weight"]))
    section.tables.update({"recovery_g7.csv": bands, "recovery_weight.csv": weights, "recovery.csv": binades})
    cols = ["comparison", "machine", "subset", "band", "count", "changed", "better", "worse", "rescued", "zeroed",
            "specials_fixed", "specials_caused", "p_value", "verdict"]
    text, style = answer_grid(bands, run.machines)
    section.first = [
        Heading("Does G7 earn its place?", 2, "recovery-answer"),
        Table(text, "recovery_g7.csv", " (kernel vs kernel-G7, paired on the same points; naive+G7 vs naive there too)",
              style, id="recovery-answer-table"),
        Para("Cell: verdict, then better/worse = outputs whose error falls / rises with G7; rescued: 0 without G7, "
             "nonzero with it, where the correctly rounded value is nonzero; zeroed: the reverse; +median/max bits "
             "gained, -median/max bits lost over the changed outputs. Bands of the "
             "exact rw = |raw*weight|; subsets: weight and dout both powers of two, or not.", "rule"),
    ]
    section.body = [
        Para("Per machine, subset and band of the exact |raw*weight| (rw = |exact| / |dout|): G7's comparisons "
             "paired on the same points. rescued: 0 without G7, nonzero with it, where the correctly rounded value "
             "is nonzero; zeroed: the reverse."),
        Table(bands[cols], "recovery_g7.csv"),
        Image(plot_recovery(binades, ctx.plot_dir), "Max finite ulp error and outputs lost to zero per binade of "
                                                    "|raw*weight|, per variant"),
        Details("Per weight", [Table(weights[["comparison", "machine", "weight", "log2_weight", "recip_overflows",
                                              "count", "changed", "better", "worse", "rescued", "zeroed",
                                              "verdict"]], "recovery_weight.csv")]),
    ]
    findings = []
    T = "recovery_g7.csv"
    for (comparison, machine, subset), rows in bands.groupby(["comparison", "machine", "subset"], sort=False):
        nums, parts = [], []
        for _, r in rows.iterrows():
            w = {"comparison": comparison, "machine": machine, "subset": subset, "band": r["band"]}
            tag = f"{skey[subset]}_{bkey[r['band']]}"
            cnt, b, wo, rs, z = (cite(f"{c}_{tag}", T, bands, w, c) for c in
                                 ("count", "better", "worse", "rescued", "zeroed"))
            nums += [cnt, b, wo, rs, z]
            parts.append(f"{r['band']} ({cnt.text} outputs): {r['verdict']}, {b.text} better, {wo.text} worse, "
                         f"{rs.text} rescued from zero, {z.text} zeroed")
        verdicts = set(rows["verdict"]) - {"no_effect"}
        production = comparison == f"{G7_PAIRS[0][0]} vs {G7_PAIRS[0][1]}"
        rank = (8 if production else 14) if verdicts & {"helps", "hurts", "mixed"} else 35
        findings.append(Finding(f"recovery/{comparison}/{machine}/{subset}", "recovery",
                                f"G7 on {machine}, {subset} ({comparison}): " + "; ".join(parts) + ".", nums, rank,
                                shown=production))
    findings += _machine_findings(bands)
    section.findings = findings
    section.answers = _recovery_answers(run, bands)
    return section
