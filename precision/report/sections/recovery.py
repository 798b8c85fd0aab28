"""Subnormal recovery (G7): paired verdicts by band of |raw*weight|, outputs rescued from zero and zeroed.

G7 re-derives ``raw*weight*dout`` by reciprocal divisions when ``raw*weight``
underflows below 2^-126.  Its bands (disjoint; ``rw = |exact| / |dout|``, the
exact ``|raw*weight|``): ``rw >= 2^-126`` (G7 cannot engage),
``rw < 2^-126, 1/w finite`` (it can recover), ``rw < 2^-126, 1/w = inf``
(weight <= 2^-128: the float32 reciprocal overflows and the division by it
gives 0).  The comparisons (``kernel`` vs ``kernel-G7``, ``naive+G7`` vs
``naive``) are paired on the run's per-point rows and scored by
:func:`precision.scoring.compare_points`, grouped by (machine, band) and by
(machine, weight); ``rescued`` counts outputs that are 0 without G7 and not
with it where the correctly rounded value is not 0, ``zeroed`` the reverse.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from precision.report.document import Details, Image, Para, Section, Table
from precision.report.findings import Finding, cite
from precision.report.plots import clip_errors, save
from precision.scoring import CLASS_NAMES, GroupStats, Grouping, PairedStats, compare_points

__all__ = ["build", "G7_PAIRS", "G7_BANDS", "recovery_points", "paired_by", "plot_recovery"]

#: Variant pairs (with G7, without G7) whose difference is guard G7.
G7_PAIRS = (("kernel", "kernel-G7"), ("naive+G7", "naive"))
#: Bands of |raw*weight|: where G7 cannot engage, where it can recover, where its reciprocal overflows.
G7_BANDS = ("rw >= 2^-126", "rw < 2^-126, 1/w finite", "rw < 2^-126, 1/w = inf")
MIN_NORMAL_FP32 = 2.0 ** -126
_CODES = {name: code for code, name in CLASS_NAMES.items()}
_KEYS = ["machine", "format", "alpha", "gamma", "weight", "dout", "target", "pred_bits"]  # -0.0 and 0.0 differ


def _recip_overflows(weight) -> np.ndarray:
    """1/weight overflows float32 (the kernel's Div0ulp(1, weight) is inf): |weight| <= 2^-128."""
    w = np.abs(np.asarray(weight, dtype=np.float64))
    with np.errstate(divide="ignore", over="ignore"):
        return ~np.isfinite((np.float64(1.0) / w).astype(np.float32)) & (w > 0)


def recovery_points(run) -> pd.DataFrame:
    """Weighted per-point rows with ``rw`` (exact |raw*weight|), ``band`` and ``log2_rw``."""
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
    return pts


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
        changed = (cw.view(np.int64) != co.view(np.int64)) & ~(np.isnan(cw) & np.isnan(co))
        outcome, fix, delta = compare_points(j["err_ulp"], j["class"].map(_CODES), j["err_ulp_o"],
                                             j["class_o"].map(_CODES), changed)
        codes = j.groupby(list(by), sort=True, dropna=False).ngroup().to_numpy()
        grouping = Grouping(codes, int(codes.max()) + 1)
        keys = j.iloc[grouping.perm[grouping.starts]][list(by)].reset_index(drop=True)  # one row per group
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
    codes = p.groupby(by, sort=True).ngroup().to_numpy()
    grouping = Grouping(codes, int(codes.max()) + 1)
    keys = p.iloc[grouping.perm[grouping.starts]][by].reset_index(drop=True)
    lost = (p["computed"].to_numpy() == 0) & (p["rounded"].to_numpy() != 0)
    t = GroupStats.reduce(grouping, p["err_ulp"], p["err_bits"], p["class"].map(_CODES)).table([])
    t = pd.concat([keys, t], axis=1)
    t["lost"] = grouping.count(lost)
    return t


def plot_recovery(binades: pd.DataFrame, folder, stem: str = "recovery") -> str | None:
    """Max finite ulp and outputs lost to zero per binade of |raw*weight|, one panel column per machine."""
    if binades.empty:
        return None
    machines = list(dict.fromkeys(binades["machine"]))
    fig, axes = plt.subplots(2, len(machines), figsize=(3.8 * len(machines), 5.4), squeeze=False, sharey="row",
                             sharex=True)
    for j, machine in enumerate(machines):
        ax, bx = axes[0, j], axes[1, j]
        for v, sub in binades[binades["machine"] == machine].groupby("variant", sort=False):
            line, = ax.plot(sub["log2_rw"], clip_errors(sub["max_finite_ulp"]), marker=".", ms=3, lw=0.9, label=v)
            bx.plot(sub["log2_rw"], sub["lost"], lw=0.9, color=line.get_color(), label=v)
        for a in (ax, bx):
            a.axvline(-126, color="r", lw=0.8, ls=":")
            a.axvline(-149, color="0.4", lw=0.8, ls=":")
            a.tick_params(labelsize=6)
        ax.set_yscale("log")
        bx.set_xlabel("log2 |raw*weight| (binade; dotted: 2^-126, 2^-149)", fontsize=7)
        ax.set_title(f"{machine}: max finite error", fontsize=8)
        bx.set_title(f"{machine}: outputs lost to zero", fontsize=8)
    axes[0, 0].set_ylabel("ulp (log)", fontsize=7)
    axes[1, 0].set_ylabel("outputs", fontsize=7)
    axes[0, -1].legend(fontsize=6, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    return save(fig, folder, stem)


def build(ctx) -> Section:
    run = ctx.run
    section = Section("recovery", "Subnormal recovery (G7)")
    pts = recovery_points(run)
    if pts.empty or not set(pts["variant"]) & {v for pair in G7_PAIRS for v in pair}:
        return section
    bands = paired_by(pts, ["machine", "band"])
    weights = paired_by(pts, ["machine", "weight"])
    binades = _binade_table(pts)
    if bands.empty:
        return section
    bkey = {b: i for i, b in enumerate(G7_BANDS)}
    mkey = {m: i for i, m in enumerate(run.machines)}
    bands = bands.assign(_m=bands["machine"].map(mkey), _b=bands["band"].map(bkey)).sort_values(
        ["_m", "_b"], kind="stable").drop(columns=["_m", "_b"]).reset_index(drop=True)
    weights = weights.assign(log2_weight=np.log2(np.abs(weights["weight"].to_numpy(np.float64))),
                             recip_overflows=_recip_overflows(weights["weight"]))
    section.tables.update({"recovery_g7.csv": bands, "recovery_weight.csv": weights, "recovery.csv": binades})
    cols = ["comparison", "machine", "band", "count", "changed", "better", "worse", "rescued", "zeroed",
            "specials_fixed", "specials_caused", "p_value", "verdict"]
    section.body = [
        Para("Per machine and band of the exact |raw*weight| (rw = |exact| / |dout|): G7's comparisons paired on "
             "the same points. rescued: 0 without G7, nonzero with it, where the correctly rounded value is "
             "nonzero; zeroed: the reverse."),
        Table(bands[cols], "recovery_g7.csv"),
        Image(plot_recovery(binades, ctx.plot_dir), "Max finite ulp error and outputs lost to zero per binade of "
                                                    "|raw*weight|, per variant"),
        Details("Per weight", [Table(weights[["comparison", "machine", "weight", "log2_weight", "recip_overflows",
                                              "count", "changed", "better", "worse", "rescued", "zeroed",
                                              "verdict"]], "recovery_weight.csv")]),
    ]
    findings = []
    T = "recovery_g7.csv"
    for (comparison, machine), rows in bands.groupby(["comparison", "machine"], sort=False):
        nums, parts = [], []
        for _, r in rows.iterrows():
            w = {"comparison": comparison, "machine": machine, "band": r["band"]}
            cnt, b, wo, rs, z = (cite(f"{c}_{bkey[r['band']]}", T, bands, w, c) for c in
                                 ("count", "better", "worse", "rescued", "zeroed"))
            nums += [cnt, b, wo, rs, z]
            parts.append(f"{r['band']} ({cnt.text} outputs): {r['verdict']}, {b.text} better, {wo.text} worse, "
                         f"{rs.text} rescued from zero, {z.text} zeroed")
        verdicts = set(rows["verdict"]) - {"no_effect"}
        rank = 8 if verdicts & {"helps", "hurts", "mixed"} else 35
        findings.append(Finding(f"recovery/{comparison}/{machine}", "recovery",
                                f"G7 on {machine} ({comparison}): " + "; ".join(parts) + ".", nums, rank))
    section.findings = findings
    return section
