"""q = 1 - p, ln p and the powers as x grows: where each variant's error opens up, per selector.

Two holes: for selector 0 the positive term needs q = 1 - p, which loses its
relative accuracy as x grows (p rounds towards 1); for selector 1 the
negative term needs ln(q) = ln(1 - p) at large negative x, where p is tiny.
``onset.csv`` gives, per (variant, machine, format, selector, gamma), on the
hole's side of zero (t = 0: x > 0; t = 1: x < 0; other selectors: both), the
smallest |x| where the error first exceeds 1, 10, 1e3 and 2^20 ulp
(``first_*``; special outputs count as infinite), and the |x| from which every
point exceeds it (``from_*``: where the hole is open for good), from the
run's per-point rows.  ``q_table.csv`` evaluates the kernel's own q, ln p
and q^gamma on a machine at the section's x values (options ``x``,
``gamma``, ``machine``) against mpmath: the only values a report computes.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import mpmath
import numpy as np
import pandas as pd

from precision.exact.formats import ulp
from precision.machine import get_machine
from precision.products.report.answers import Answer
from precision.products.report.document import Details, Heading, Image, Para, Section, Table
from precision.products.report.findings import Finding, cite, fmt_num
from precision.products.report.plots import (FLOOR, curve_style, draw_curves, error_axis, merge_identical, save,
                                             special_level)

__all__ = ["build", "q_table", "onset_table", "onset_grid", "ONSET_LEVELS", "plot_onset"]

#: Error levels (ulp) of the onsets, with their column suffixes.
ONSET_LEVELS = {"1ulp": 1.0, "10ulp": 10.0, "1e3ulp": 1e3, "2p20ulp": 2.0 ** 20}
MIN_NORMAL_FP32 = 2.0 ** -126


def q_table(xs, gamma: float, machine: str) -> pd.DataFrame:
    """q = 1 - p, ln(p) and q**gamma in float32 as the kernel computes them, against the exact values.

    The kernel's steps S1-S3 for x >= 0 on ``machine``: ``p = Div0ulp(1,
    Exp(-|x|) + 1)``, ``q = 1 - p``, ``ln(max(p, 2^-126))`` and
    ``Power_hp(max(q, 2^-126), gamma)``; exact values from mpmath at 200 bits
    (``q = 1/(1+e^x)``, ``ln p = -log1p(e^-x)``).

    Returns
    -------
    pandas.DataFrame
        Columns of ``q_table.csv``; relative errors ``|computed - exact| / exact``,
        ``q_err_ulp`` in fp32 ulps of the exact q.
    """
    m = get_machine(machine)
    x = np.asarray(xs, dtype=np.float32)
    one = np.float32(1.0)
    floor = np.float32(MIN_NORMAL_FP32)
    e = m.exp(m.neg(m.abs(x)))
    p = m.div(np.full_like(x, one), m.add(e, np.full_like(x, one)), mode="0ulp")
    q = m.sub(np.full_like(x, one), p)
    lp = m.ln(m.maximum(p, np.full_like(x, floor)))
    qg = m.pow(m.maximum(q, np.full_like(x, floor)), np.full_like(x, np.float32(gamma)), algo="double_float")
    ctx = mpmath.mp.clone()
    ctx.prec = 200
    exact = [(float(1 / (1 + ctx.exp(ctx.mpf(float(v))))), float(-ctx.log1p(ctx.exp(-ctx.mpf(float(v))))),
              float((1 / (1 + ctx.exp(ctx.mpf(float(v))))) ** ctx.mpf(gamma))) for v in x]
    qe, lpe, qge = (np.array(c) for c in zip(*exact))

    def rel(a, b):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.abs(np.asarray(a, np.float64) - b) / np.abs(b)
    return pd.DataFrame({
        "x": x.astype(np.float64), "q_computed": q.astype(np.float64), "q_exact": qe, "q_rel_err": rel(q, qe),
        "q_err_ulp": np.abs(q.astype(np.float64) - qe) / ulp(qe, "fp32"),
        "lnp_computed": lp.astype(np.float64), "lnp_exact": lpe, "lnp_rel_err": rel(lp, lpe),
        "qg_computed": qg.astype(np.float64), "qg_exact": qge, "qg_rel_err": rel(qg, qge)})


def _hole_side(pred, target) -> np.ndarray:
    """Points on their selector's hole side: t = 0 with x > 0, t = 1 with x < 0, any other selector."""
    pred, target = np.asarray(pred), np.asarray(target)
    return np.where(target == 0, pred > 0, np.where(target == 1, pred < 0, True))


def onset_table(run) -> pd.DataFrame:
    """Per variant, machine, format, selector and gamma: the onsets of each error level on the hole's side.

    Columns: variant, machine, format, target, gamma, count (points on the
    side), max_finite_ulp, x_at_max (the pred), special (special outputs),
    then ``first_<level>`` and ``from_<level>`` for each of
    :data:`ONSET_LEVELS` (|x|; NaN: never exceeded / not open at the last point).
    """
    pts = run.points(["pred", "target", "gamma", "variant", "machine", "format", "err_ulp", "class"])
    if pts.empty:
        return pd.DataFrame()
    pts = pts[_hole_side(pts["pred"], pts["target"])].copy()
    err = pts["err_ulp"].to_numpy(np.float64)
    pts["err"] = np.where((pts["class"] != "ok").to_numpy() | np.isnan(err), np.inf, err)
    pts["ax"] = np.abs(pts["pred"].to_numpy())
    keys = ["variant", "machine", "format", "target", "gamma"]
    pts = pts.sort_values(keys + ["ax"], kind="stable")
    rows = []
    for key, g in pts.groupby(keys, sort=False):
        e, ax = g["err"].to_numpy(), g["ax"].to_numpy()
        finite = np.isfinite(e)
        row = dict(zip(keys, key), count=len(g), special=int((~finite).sum()))
        if finite.any():
            i = int(np.argmax(np.where(finite, e, -np.inf)))
            row.update(max_finite_ulp=float(e[i]), x_at_max=float(g["pred"].iloc[i]))
        else:
            row.update(max_finite_ulp=np.nan, x_at_max=np.nan)
        for name, level in ONSET_LEVELS.items():
            over = e > level
            row[f"first_{name}"] = float(ax[np.argmax(over)]) if over.any() else np.nan
            # the hole is open for good from the first point after the last one at or under the level
            under = np.flatnonzero(~over)
            start = 0 if under.size == 0 else under[-1] + 1
            row[f"from_{name}"] = float(ax[start]) if start < ax.size else np.nan
        rows.append(row)
    t = pd.DataFrame(rows)
    vkey = {v: i for i, v in enumerate(run.variants)}
    mkey = {m: i for i, m in enumerate(run.machines)}
    return t.assign(_v=t["variant"].map(vkey), _m=t["machine"].map(mkey)).sort_values(
        ["_v", "_m", "format", "target", "gamma"], kind="stable").drop(columns=["_v", "_m"]).reset_index(drop=True)


def plot_onset(points: pd.DataFrame, onset: pd.DataFrame, folder, gamma: float, stem: str = "error_vs_x") -> str | None:
    """ulp error against x at one gamma: small multiples, a column per variant and a row per machine and
    selector, the other variants in grey behind (their curves lie almost on top of each other); each
    variant's 2^20-ulp persistent onset dotted; special outputs as ``x`` on the band above the axis break."""
    p = points[points["gamma"] == gamma]
    if p.empty:
        return None
    machines = list(dict.fromkeys(p["machine"]))
    targets = sorted(p["target"].unique())
    variants = list(dict.fromkeys(p["variant"]))
    rows = [(m, t) for m in machines for t in targets]
    level = special_level(p["err_ulp"].where(p["class"] == "ok"))
    fig, axes = plt.subplots(len(rows), len(variants), figsize=(2.9 * len(variants) + 0.6, 2.0 * len(rows) + 0.4),
                             squeeze=False, sharex=True, sharey=True)
    for i, (machine, t) in enumerate(rows):
        curves = []
        for v, sub in p[(p["machine"] == machine) & (p["target"] == t)].groupby("variant", sort=False):
            sub = sub.sort_values("pred")
            curves.append((v, sub["pred"].to_numpy(np.float64),
                           np.where(sub["class"].to_numpy() != "ok", np.inf, sub["err_ulp"].to_numpy())))
        same = {label: label.split(" = ") for label, _, _ in merge_identical(curves)}
        for j, v in enumerate(variants):
            ax = axes[i, j]
            for w, x, y in curves:
                if w != v:
                    ax.plot(x, np.clip(np.where(np.isfinite(y), y, level), FLOOR, None), lw=0.4, color="0.8",
                            zorder=1)
            mine = [c for c in curves if c[0] == v]
            if mine:
                drawn = len(ax.get_lines())
                draw_curves(ax, mine, level, lw=0.7, ms=2.5, marks=10)
                for line in ax.get_lines()[drawn:]:  # the column's colour, its special marks included
                    line.set_color(curve_style(j)["color"])
            o = onset[(onset["variant"] == v) & (onset["machine"] == machine) & (onset["target"] == t)
                      & (onset["gamma"] == gamma)]
            if len(o) and np.isfinite(o["from_2p20ulp"].iloc[0]):
                ax.axvline(o["from_2p20ulp"].iloc[0] * (1 if t == 0 else -1), color="k", lw=0.6, ls=":")
            error_axis(ax, level, f"{machine}, t={t}: ulp error" if j == 0 else "")
            ax.axhline(1.0, color="k", lw=0.4, ls=":")
            twins = next((g for g in same.values() if v in g and len(g) > 1), [])
            ax.set_title(v + (f" (= {', '.join(w for w in twins if w != v)})" if twins else "")
                         + f", {machine}, t={t}", fontsize=7)
            ax.tick_params(labelsize=6)
            if i == len(rows) - 1:
                ax.set_xlabel(f"x = pred (gamma {gamma:g})", fontsize=7)
    fig.tight_layout()
    return save(fig, folder, stem)


def _onset_findings(onset: pd.DataFrame, gamma: float) -> list:
    out = []
    T = "onset.csv"
    sub = onset[onset["gamma"] == gamma]
    for (machine, fmt, t), grp in sub.groupby(["machine", "format", "target"], sort=False):
        nums, parts = [], []
        for _, r in grp.iterrows():
            w = {"variant": r["variant"], "machine": machine, "format": fmt, "target": int(t), "gamma": gamma}
            cells = []
            for name in ("1e3ulp", "2p20ulp"):
                c = cite(f"from_{name}_{r['variant']}", T, onset, w, f"from_{name}")
                if np.isnan(c.value):
                    cells.append(f"never over {name.replace('ulp', '').replace('2p20', '2^20')} ulp for good")
                else:
                    nums.append(c)
                    cells.append(f"over {name.replace('ulp', '').replace('2p20', '2^20')} ulp from |x| = {c.text}")
            parts.append(f"{r['variant']} " + ", ".join(cells))
        side = "x > 0" if t == 0 else "x < 0" if t == 1 else "both signs"
        out.append(Finding(f"q/onset/{machine}/{fmt}/{t}", "q",
                           f"On {machine} {fmt}, selector t={int(t)} ({side}), gamma {fmt_num(gamma)}: "
                           + "; ".join(parts) + ".", nums, 12))
    return out


def _span(values) -> str:
    """'a' or 'a-b' (the range over gammas of an onset |x|); 'never' where no gamma's hole opens."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return "never"
    lo, hi = float(v.min()), float(v.max())
    text = f"{lo:.4g}" if lo == hi else f"{lo:.4g}-{hi:.4g}"
    return text if v.size == len(values) else f"{text} ({v.size} of {len(values)} gammas)"


def onset_grid(onset: pd.DataFrame) -> pd.DataFrame:
    """The first-screen answer, one row per (variant, machine, format): per hole (t = 0 at x > 0, t = 1 at
    x < 0), the |x| from which every point is over 1 ulp and over 2^20 ulp, as its range over the gammas."""
    rows = []
    for (variant, machine, fmt), sub in onset[onset["target"].isin([0, 1])].groupby(
            ["variant", "machine", "format"], sort=False):
        row = {"variant": variant, "machine": machine, "format": fmt}
        for t, side in ((0, "t=0 (x > 0)"), (1, "t=1 (x < 0)")):
            part = sub[sub["target"] == t]
            for level, name in (("1ulp", "> 1 ulp"), ("2p20ulp", "> 2^20 ulp")):
                row[f"{side} {name} from |x|"] = _span(part[f"from_{level}"]) if len(part) else ""
        rows.append(row)
    return pd.DataFrame(rows)


def build(ctx) -> Section:
    run = ctx.run
    section = Section("q", "q = 1 - p and ln p as |x| grows: where the holes open")
    onset = onset_table(run)
    if onset.empty:
        return section
    gamma = float(ctx.option("q", "gamma"))
    qt = q_table(ctx.option("q", "x"), gamma, ctx.option("q", "machine"))
    section.tables.update({"onset.csv": onset, "q_table.csv": qt})
    points = run.points(["pred", "target", "gamma", "variant", "machine", "err_ulp", "class"])
    shown = onset[onset["gamma"] == gamma]
    grid = onset_grid(onset)
    if not grid.empty:
        section.first = [
            Heading("Where do the holes open?", 2, "q-answer"),
            Table(grid, "onset.csv", " (per hole: the |x| from which every point is over the level; range over "
                  "the gammas)", id="q-answer-table"),
            Para("Cell: the smallest |x| on the hole's side of zero from which every point of the grid is over "
                 "1 ulp (or over 2^20 ulp, or a special output), as its range over the study's gammas; 'never': "
                 "no gamma's hole opens on the grid. first_* in onset.csv gives where it is first exceeded.",
                 "rule"),
        ]
    section.body = [
        Para("Per variant, machine, selector and gamma, on the selector's hole side: the smallest |x| where the "
             "error first exceeds 1, 10, 1e3 and 2^20 ulp (first_*), and the |x| from which every point exceeds "
             "it (from_*). Shown for gamma " + fmt_num(gamma) + "; onset.csv has every gamma."),
        Table(shown, "onset.csv"),
        Image(plot_onset(points, onset, ctx.plot_dir, gamma), f"ulp error against x, gamma {fmt_num(gamma)}: a column "
                                                              "per variant (the others grey behind), a row per machine "
                                                              "and selector; dotted: where the variant's error stays "
                                                              "over 2^20 ulp; x on the band: special outputs"),
        Details("The kernel's q = 1 - p, ln p and q^gamma on " + str(ctx.option("q", "machine")), [
            Para("The kernel's float32 steps (p = Div0ulp(1, Exp(-|x|) + 1), q = 1 - p, Ln(max(p, 2^-126)), "
                 "Power_hp(max(q, 2^-126), gamma)) against mpmath at 200 bits."),
            Table(qt, "q_table.csv")]),
    ]
    findings = _onset_findings(onset, gamma)
    zero = qt[qt["q_computed"] == 0]
    if not zero.empty:
        z = zero.iloc[0]
        cz = cite("q_zero_x", "q_table.csv", qt, {"x": float(z["x"])}, "x")
        cl = cite("lnp_at_zero", "q_table.csv", qt, {"x": float(z["x"])}, "lnp_computed")
        findings.append(Finding("q/table", "q", f"On {ctx.option('q', 'machine')}, from x = {cz.text} on (of the "
                                f"table's x), the float32 p rounds to 1: q = 1 - p = 0 and ln(p) = {cl.text}.",
                                [cz, cl], 45))
    section.findings = findings
    section.answers = _hole_answers(onset, gamma, findings)
    return section


def _hole_answers(onset: pd.DataFrame, gamma: float, findings: list) -> list:
    """Where the holes open: per machine, format and selector, the |x| from which each variant's error stays
    over 1e3 and 2^20 ulp (for good), else the |x| where it first exceeds them (not for good), else that it
    never does; variants with the same onsets share a clause; cited from onset.csv.  The onset findings
    follow as answers of their own."""
    question = "Where do the holes open: from which |x| on is the error of each variant over 1e3 and over 2^20 ulp?"
    levels = (("1e3ulp", "1e3 ulp"), ("2p20ulp", "2^20 ulp"))
    out = []
    sub = onset[onset["gamma"] == gamma]
    for (machine, fmt, t), grp in sub.groupby(["machine", "format", "target"], sort=False):
        clauses, nums = {}, []
        for _, r in grp.iterrows():
            w = {"variant": r["variant"], "machine": machine, "format": fmt, "target": int(t), "gamma": gamma}
            tag = f"{r['variant']}_{machine}_{fmt}_{int(t)}_"
            phrases = []
            for name, label in levels:
                c = cite(f"{tag}{name}", "onset.csv", onset, w, f"from_{name}")
                f = cite(f"{tag}first_{name}", "onset.csv", onset, w, f"first_{name}")
                if not np.isnan(c.value):
                    nums.append(c)
                    phrases.append(f"over {label} for good from |x| = {c.text}")
                elif not np.isnan(f.value):
                    nums.append(f)
                    phrases.append(f"over {label} first at |x| = {f.text} (not for good)")
            clauses.setdefault(", ".join(phrases) or "never over 1e3 ulp", []).append(r["variant"])
        side = "x > 0" if t == 0 else "x < 0"
        text = (f"{machine} {fmt}, t={int(t)} ({side}), gamma {fmt_num(gamma)}: "
                + "; ".join(f"{', '.join(v)} {c}" for c, v in clauses.items()) + ".")
        holes = any("for good from" in c for c in clauses)
        out.append(Answer(question, text, nums, subject=", ".join(grp["variant"]), machine=machine, format=fmt,
                          verdict="holes" if holes else "none"))
    out += [Answer(question, f.text, f.numbers, headline=False) for f in findings if f.id.startswith("q/onset")]
    return out
