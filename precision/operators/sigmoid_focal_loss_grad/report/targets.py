"""A candidate against its accuracy targets, on the first screen.

The targets are the section's options (the study file's ``[report.targets]``):
fp32 max error outside the root neighbourhood (gamma < -1 and C >= 4,
:mod:`precision.operators.sigmoid_focal_loss_grad.bracket`), no special output anywhere, fp16 share correctly
rounded and fp16 max error everywhere, primitive ops per element relative to
the production kernel (:mod:`precision.operators.sigmoid_focal_loss_grad.opcount`).  ``targets.csv`` has the
figures of every variant of the run (the others for comparison), each
maximum with its witness; ``opcount.csv`` the op counts.  Each maximum is
labelled exhaustive or sampled (:func:`precision.products.report.tables.maximum_label`).

The fp32 figure outside the root neighbourhood is the largest over every
witness the study knows of, each labelled with its source
(``witnesses.csv``, one row per machine and source): the run (sampled), the
hunts named by the option ``hunts`` (JSON files of ``precision hunt ...
--json``: their witness and top points) and the corpora named by the option
``corpus`` (pred files like ``studies/worst_cases.txt``, one hex float a line:
each fp32 pred at every (selector, alpha, gamma) of the run).  Hunt and corpus
points are re-evaluated with the current code (:func:`precision.products.hunt.rescore`),
never taken from the stored numbers, which may come from older code; paths
are relative to the study file.  ``hunts.csv`` keeps what each hunt covered
and its budget (CPU seconds = seconds x workers).  The target is met only if
the largest figure is within it.  The op target is judged at every (alpha,
gamma) of the study's grid (``opcount_grid.csv``: the count depends on them).

Over the attributes' real ranges, by sub-range (the hunts over ranges, every
format and zone, re-evaluated on every machine of the run: ``ranges_sources.csv``):
the fp32 target (``ranges.csv``) and the others (``ranges_targets.csv``: special
outputs where the hunts covered the root neighbourhood, fp16 maximum, fp16 share
over the hunts' freshly drawn points, the op count at each sub-range's ends and
seeded draws), as a grid on the first screen and one sentence per target.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from precision.products.report.answers import Answer
from precision.products.report.document import Heading, Para, Section, Table
from precision.products.report.findings import Finding, cite, fmt_num, fmt_share
from precision.products.hunt import rescore
from precision.products.report.known_witnesses import hunt_points, hunt_table, known_sources, rescored_maxima
from precision.products.report.sections.standards import explain_line
from precision.products.report.tables import inputs_text, maximum_label, ordered, short_hex
from precision.recipes.target_kinds import target_text
from precision.analysis.scoring import SPECIAL_CLASSES
from precision.engine.sweep import hex_witnesses
from precision.operators.sigmoid_focal_loss_grad.implementations.common import ATTRIBUTES

__all__ = ["build", "targets_table", "opcount_table", "assess_targets", "witness_table", "range_table",
           "range_finding", "range_sources", "ops_by_range", "opcount_grid", "range_targets", "range_target_findings"]

T = "targets.csv"
TW = "witnesses.csv"
TR = "ranges.csv"
TT = "ranges_targets.csv"
TO = "opcount_grid.csv"
TS = "ranges_sources.csv"


def targets_table(run, c_threshold: float) -> pd.DataFrame:
    """Per (variant, machine, format): errors outside and inside the root neighbourhood, specials, correct share.

    Empty without bracket bands, or when no band edge is ``c_threshold``
    (the points of a band straddling it could not be placed).
    """
    if "bracket" not in run.stats.frame.columns or c_threshold not in run.bracket_edges:
        return pd.DataFrame()
    lo = {label: a for label, (a, _) in zip(run.brackets, run.operator.band_ranges(run.bracket_edges))}
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
    t["not_correct"] = (allz["count"] - stats.merge_frame(keys).set_index(keys)["n_correct"]).astype(np.int64)
    t["over_1ulp"] = allz["over_1ulp"]
    t["max_ulp"] = allz["max_ulp"]
    return ordered(t.reset_index(), run)


def opcount_table(variants, op, reference: str = "kernel") -> pd.DataFrame:
    """Primitive ops per element of variants of the operator ``op`` on the npu machine
    (:func:`precision.operators.sigmoid_focal_loss_grad.opcount.count_ops`) and the ratio to ``reference``."""
    names = list(dict.fromkeys([reference, *variants]))
    counts = {v: op.count_ops(v) for v in names}
    rows = [(v, counts[v][0], counts[v][0] / counts[reference][0],
             " ".join(f"{k}={n:.2f}" for k, n in counts[v][1].items())) for v in names]
    return pd.DataFrame(rows, columns=["variant", "ops", "ratio_to_kernel", "per_op"])


def opcount_grid(op, candidate: str, grid: dict, reference: str = "kernel") -> pd.DataFrame:
    """Primitive ops per element of ``candidate`` and ``reference`` at every (alpha, gamma) of a run's ``grid``
    (attribute -> values), and their ratio: the count depends on the attributes (e.g. the kernel takes one op
    fewer at alpha 0), so a target on it holds on the grid only if it holds at every pair."""
    rows = []
    for alpha in grid.get("alpha", (0.25,)):
        for gamma in grid.get("gamma", (2.0,)):
            c, k = (op.count_ops(v, gamma=float(gamma), alpha=float(alpha))[0] for v in (candidate, reference))
            rows.append({"alpha": float(alpha), "gamma": float(gamma), f"{candidate}_ops": c, f"{reference}_ops": k,
                         "ratio": c / k})
    return pd.DataFrame(rows)


def witness_table(run, t: pd.DataFrame, candidate: str, hunts: pd.DataFrame, corpora, base: Path,
                  label: str, points=()) -> tuple[pd.DataFrame, list]:
    """The candidate's fp32 maximum outside the root neighbourhood per machine and source: (table, unread files).

    Sources: ``run`` (the run's maximum, labelled ``label``) and every
    :func:`known_sources` source re-scored on every machine of the run
    (:func:`rescored_maxima`).  Columns: machine, source, kind
    (``sampled``/``exhaustive``, ``hunted``, ``corpus``), how (the label),
    points (scored outside the neighbourhood), max_ulp, stored_max_ulp (the
    hunt file's own figure on its machine), the witness (hex) and its C.
    """
    known, missing = known_sources(run, candidate, hunts, corpora, base, points)
    rows = []
    for machine in run.machines:
        r = t[(t["variant"] == candidate) & (t["machine"] == machine) & (t["format"] == "fp32")]
        if r.empty:
            continue
        r = r.iloc[0]
        rows.append({"machine": machine, "source": "run", "kind": label.split(":")[0], "how": label,
                     "points": int(r["outside"]), "max_ulp": float(r["max_ulp_outside"]), "stored_max_ulp": np.nan,
                     **{f"witness_{k}": r.get(f"witness_{k}_outside") for k in ("pred", "target", "alpha", "gamma")},
                     "c_factor": np.nan})
        rows += rescored_maxima(run, candidate, machine, known, outside_only=True)
    out = pd.DataFrame(rows)
    if len(out) and run.grid:  # whether each witness's attribute values are among the run's grid or off it
        grid = {a: set(run.grid[a]) for a in run.operator.ATTRIBUTES}
        out["on_grid"] = [all(not isinstance(r.get(f"witness_{a}"), str)
                              or float.fromhex(r[f"witness_{a}"]) in grid[a] for a in grid)
                          for r in out.to_dict("records")]
    return out, missing


def range_table(known: pd.DataFrame, hunts: pd.DataFrame, limit: float) -> pd.DataFrame:
    """The fp32 target over sub-ranges of the attributes: one row per sub-range hunted over real-valued ranges
    (an fp32 hunt file whose gammas or alphas are a ``range``, of points outside the root neighbourhood), pooled
    over the hunts of that sub-range and the machines its points were re-evaluated on (``witnesses.csv``): the
    points hunted, the largest re-evaluated error with its machine and witness, and whether it is within
    ``limit`` ulp.  A hunted maximum is a lower bound: a row within the target says no point above it was found,
    not that none exists."""
    cols = ["gammas", "alphas", "targets", "hunts", "points", "seconds", "max_ulp", "machine", "witness_pred",
            "witness_target", "witness_alpha", "witness_gamma", "within"]
    if hunts.empty or known.empty:
        return pd.DataFrame(columns=cols)
    ranged = hunts[(hunts["gammas"].str.startswith("range") | hunts["alphas"].str.startswith("range"))
                   & (hunts["format"] == "fp32")]
    # its points are all outside the neighbourhood: a hunt restricted to it, or one where there is none (gamma >= -1)
    ranged = ranged[ranged["outside_neighbourhood"].astype(bool).to_numpy()
                    | np.array([(_interval(g) or (-np.inf,))[0] >= -1 for g in ranged["gammas"]], dtype=bool)]
    rows = []
    for (gammas, alphas, targets), group in ranged.groupby(["gammas", "alphas", "targets"], sort=False):
        rescored = known[known["source"].isin([f"hunt {f}" for f in group["file"]])]
        if rescored.empty:
            continue
        worst = rescored.loc[rescored["max_ulp"].idxmax()]
        rows.append({"gammas": gammas, "alphas": alphas, "targets": targets, "hunts": len(group),
                     "points": int(group["points"].sum()), "seconds": float(group["seconds"].sum()),
                     "max_ulp": float(worst["max_ulp"]), "machine": worst["machine"],
                     **{f"witness_{k}": worst[f"witness_{k}"] for k in ("pred", "target", "alpha", "gamma")},
                     "within": bool(worst["max_ulp"] <= limit)})
    return pd.DataFrame(rows, columns=cols)


def _interval(text: str):
    """``range [lo, hi]`` -> (lo, hi); a grid's values -> None."""
    if not text.startswith("range ["):
        return None
    lo, hi = text.removeprefix("range [").removesuffix("]").split(",")
    return float(lo), float(hi)


def _contains(outer, inner) -> bool:
    """Whether the sub-range row ``outer`` contains the row ``inner`` (every attribute's interval) and differs."""
    pairs = [(_interval(outer[k]), _interval(inner[k])) for k in ("gammas", "alphas")]
    return (outer["gammas"], outer["alphas"]) != (inner["gammas"], inner["alphas"]) and all(
        o is not None and i is not None and o[0] <= i[0] and i[1] <= o[1] for o, i in pairs)


def range_finding(ranges: pd.DataFrame, limit: float, candidate: str) -> tuple[Finding, str] | None:
    """One sentence over the sub-ranges (:func:`range_table`, a row containing others left to the table):
    where the fp32 target is missed (each sub-range's largest error), where no point above it was found (with the
    points hunted), and the largest error of all with its witness; and its short form for the first screen (the
    sub-ranges only)."""
    if ranges.empty:
        return None
    rows = [r for _, r in ranges.iterrows()]
    subs = [r for r in rows if not any(_contains(r, other) for other in rows)]
    alphas = {r["alphas"] for r in subs}
    common = f", alpha {next(iter(alphas))}" if len(alphas) == 1 else ""
    nums, missed, held, short_missed, short_held = [], [], [], [], []
    for r in subs:
        where = {"gammas": r["gammas"], "alphas": r["alphas"], "targets": r["targets"]}
        top = cite(f"range_{r['gammas']}_{r['alphas']}_max", TR, ranges, where, "max_ulp")
        nums.append(top)
        place = f"gamma {r['gammas'].removeprefix('range ')}" + (f", alpha {r['alphas']}" if not common else "")
        if r["within"]:
            n = cite(f"range_{r['gammas']}_{r['alphas']}_points", TR, ranges, where, "points")
            nums.append(n)
            held.append(f"{place} (at most {top.text} ulp in {n.text} points hunted)")
            short_held.append(f"{r['gammas'].removeprefix('range ')} ({top.text} ulp, {n.text} points)")
        else:
            missed.append(f"{place} ({top.text} ulp)")
            short_missed.append(r["gammas"].removeprefix("range "))
    worst = ranges.loc[ranges["max_ulp"].idxmax()]
    top = cite("range_largest", TR, ranges, {k: worst[k] for k in ("gammas", "alphas", "targets")}, "max_ulp")
    nums.append(top)
    text = (f"{candidate}'s fp32 target (<= {fmt_num(limit)} ulp outside the root neighbourhood) by sub-range"
            f"{common} (hunted over real values; each maximum a lower bound): "
            + ("missed for " + "; ".join(missed) if missed else "missed in none")
            + ("; no point above it found for " + "; ".join(held) + " (evidence, not proof)" if held else "")
            + f". The largest, {top.text} ulp on {worst['machine']}, at pred={worst['witness_pred']} "
            f"t={worst['witness_target']} alpha={worst['witness_alpha']} gamma={worst['witness_gamma']} "
            f"({TR} has every sub-range's witness).")
    short = ("missed for gamma in " + (", ".join(short_missed) or "none")
             + ("; no point above it found for gamma in " + ", ".join(short_held) if short_held else ""))
    return Finding("targets/ranges", "targets", text, nums, 3), short


def range_sources(run, candidate: str, hunts: pd.DataFrame, base: Path) -> pd.DataFrame:
    """Every hunt of ``candidate`` over real-valued sub-ranges (its gammas or alphas a ``range``), in any format
    and zone, its witness and top points re-evaluated now on each machine of the run in the hunt's own format
    (:func:`precision.products.hunt.rescore`): one row per (hunt, machine).

    Columns: the hunt's file, gammas, alphas, targets, format, outside (hunted outside the root neighbourhood
    only), points, seconds, fresh_points and fresh_not_correct (its own counts, on its own machine), the machine
    re-evaluated on, max_ulp (the largest finite error of the re-evaluated points in the hunt's zone) with its
    witness (hex), specials (re-evaluated points with a special output: NaN, inf, wrong sign, lost inf; the
    neighbourhood included) and special_at (the first of them).
    """
    cols = ["file", "gammas", "alphas", "targets", "format", "outside", "points", "seconds", "fresh_points",
            "fresh_not_correct", "machine", "max_ulp", "witness_pred", "witness_target", "witness_alpha",
            "witness_gamma", "specials", "special_at"]
    if hunts.empty:
        return pd.DataFrame(columns=cols)
    ranged = hunts[(hunts["variant"] == candidate) & (hunts["gammas"].str.startswith("range")
                                                      | hunts["alphas"].str.startswith("range"))]
    rows = []
    for _, h in ranged.iterrows():
        pts = hunt_points(base / h["file"], run.operator)
        for machine in run.machines:
            s = rescore(candidate, pts["pred"], pts["target"], *(pts[a] for a in ATTRIBUTES), machine=machine,
                        fmt=h["format"], operator=run.operator_name)
            special = s[s["class"] != "ok"]
            zone = s[~s["inside"].astype(bool)] if h["outside_neighbourhood"] else s
            zone = zone[np.isfinite(zone["err_ulp"].astype(float))]
            top = zone.loc[zone["err_ulp"].astype(float).idxmax()] if len(zone) else None
            rows.append({**{k: h[k] for k in ("file", "gammas", "alphas", "targets", "format", "points", "seconds",
                                              "fresh_points", "fresh_not_correct")},
                         "outside": bool(h["outside_neighbourhood"]), "machine": machine,
                         "max_ulp": float(top["err_ulp"]) if top is not None else np.nan,
                         **{f"witness_{k}": (None if top is None else target_text(top[k]) if k == "target"
                                             else float(top[k]).hex()) for k in ("pred", "target", *ATTRIBUTES)},
                         "specials": len(special),
                         "special_at": "" if special.empty else " ".join(
                             f"{k}={target_text(v) if k == 'target' else short_hex(float(v))}"
                             for k, v in ((k, special.iloc[0][k]) for k in ("pred", "target", *ATTRIBUTES)))
                         + f" ({special.iloc[0]['class']})"})
    return pd.DataFrame(rows, columns=cols)


def ops_by_range(op, candidate: str, subranges, samples: int = 4, seed: int = 0,
                 reference: str = "kernel") -> pd.DataFrame:
    """The primitive-ops ratio to ``reference`` over sub-ranges ``(gammas, alphas)`` (``range [lo, hi]`` texts):
    at each sub-range's ends and ``samples`` seeded float32 values drawn uniformly inside it, for every pair of
    gamma and alpha values (the count depends on the attributes: e.g. a gamma whose g + 1 is not a float32
    value makes the candidate carry its low part), each counted by :func:`opcount_grid`.  One row per sub-range:
    pairs counted, the largest ratio and the (alpha, gamma) where it is reached (the first, in draw order)."""
    rng = np.random.default_rng(seed)
    rows = []
    for gammas, alphas in subranges:
        axes = []
        for text in (gammas, alphas):
            lo, hi = _interval(text)
            drawn = np.float32(rng.uniform(lo, hi, samples)).astype(np.float64)
            axes.append([float(np.float32(lo)), float(np.float32(hi)), *drawn.tolist()])
        counted = opcount_grid(op, candidate, {"alpha": axes[1], "gamma": axes[0]}, reference)  # alpha-major rows
        G, A = len(axes[0]), len(axes[1])
        in_draw_order = counted.iloc[np.argsort([(i % G) * A + i // G for i in range(len(counted))])]
        best = in_draw_order.loc[in_draw_order["ratio"].idxmax()]  # the first largest, gamma by gamma
        rows.append({"gammas": gammas, "alphas": alphas, "pairs": len(counted), "ratio": best["ratio"],
                     "at_alpha": float(best["alpha"]).hex(), "at_gamma": float(best["gamma"]).hex()})
    return pd.DataFrame(rows, columns=["gammas", "alphas", "pairs", "ratio", "at_alpha", "at_gamma"])


def range_targets(sources: pd.DataFrame, ops: pd.DataFrame, K: dict) -> pd.DataFrame:
    """The candidate's other targets by sub-range (the fp32 one is :func:`range_table`'s): one row per sub-range
    of ``sources`` (:func:`range_sources`), pooled over its hunts and machines.

    - no special output: ``special_points``, the points hunted over the whole sub-range (a hunt outside the root
      neighbourhood covers it only where it has none: gamma >= -1), ``specials`` among the re-evaluated points
      (the largest over the machines) and the first, ``special_at``;
    - fp16 max error: ``fp16_points`` hunted, ``fp16_max_ulp`` re-evaluated, its machine and witness;
    - fp16 share correctly rounded: over the fp16 hunts' fresh points (drawn afresh, not the local search's),
      ``fp16_fresh``, ``fp16_fresh_not_correct``, ``fp16_share``;
    - primitive ops: ``ops_pairs`` counted, ``ops_ratio`` (the largest) at ``ops_at`` (:func:`ops_by_range`).

    Each ``*_within`` says whether the figure is within its target (K, the section's options); a hunted figure
    within it is a lower bound's (no point beyond it found), a missed one has its witness.
    """
    cols = ["gammas", "alphas", "targets", "special_points", "specials", "special_at", "special_within",
            "fp16_points", "fp16_max_ulp", "fp16_machine", "fp16_witness", "fp16_max_within", "fp16_fresh",
            "fp16_fresh_not_correct", "fp16_share", "fp16_share_within", "ops_pairs", "ops_ratio", "ops_at",
            "ops_within"]
    rows = []
    for (gammas, alphas, targets), g in sources.groupby(["gammas", "alphas", "targets"], sort=False):
        gamma_lo = _interval(gammas)[0] if _interval(gammas) else -np.inf
        whole = g[~g["outside"] | (gamma_lo >= -1)]  # the neighbourhood needs gamma < -1
        per_hunt = whole.drop_duplicates("file")
        spec = whole.sort_values("specials", ascending=False, kind="stable")
        specials = int(spec["specials"].iloc[0]) if len(spec) else 0
        f16 = g[g["format"] == "fp16"]
        f16_hunts = f16.drop_duplicates("file")
        top = f16.loc[f16["max_ulp"].astype(float).idxmax()] if f16["max_ulp"].notna().any() else None
        fresh = float(f16_hunts["fresh_points"].sum()) if f16_hunts["fresh_points"].notna().all() else np.nan
        wrong = float(f16_hunts["fresh_not_correct"].sum()) if f16_hunts["fresh_not_correct"].notna().all() \
            else np.nan
        share = 1.0 - wrong / fresh if fresh and fresh == fresh else np.nan
        o = ops[(ops["gammas"] == gammas) & (ops["alphas"] == alphas)] if len(ops) else ops
        rows.append({
            "gammas": gammas, "alphas": alphas, "targets": targets,
            "special_points": int(per_hunt["points"].sum()) if len(per_hunt) else 0, "specials": specials,
            "special_at": spec["special_at"].iloc[0] if specials else "",
            "special_within": (specials <= K["nan_inf"]) if len(per_hunt) else None,
            "fp16_points": int(f16_hunts["points"].sum()),
            "fp16_max_ulp": float(top["max_ulp"]) if top is not None else np.nan,
            "fp16_machine": top["machine"] if top is not None else "",
            "fp16_witness": "" if top is None else (f"pred={top['witness_pred']} t={top['witness_target']} "
                                                    f"alpha={top['witness_alpha']} gamma={top['witness_gamma']}"),
            "fp16_max_within": bool(top["max_ulp"] <= K["fp16_max_ulp"]) if top is not None else None,
            "fp16_fresh": fresh, "fp16_fresh_not_correct": wrong, "fp16_share": share,
            "fp16_share_within": bool(share >= K["fp16_share_correct"]) if share == share else None,
            "ops_pairs": int(o["pairs"].iloc[0]) if len(o) else 0,
            "ops_ratio": float(o["ratio"].iloc[0]) if len(o) else np.nan,
            "ops_at": f"alpha={o['at_alpha'].iloc[0]} gamma={o['at_gamma'].iloc[0]}" if len(o) else "",
            "ops_within": bool(o["ratio"].iloc[0] <= K["ops_ratio"]) if len(o) else None})
    return pd.DataFrame(rows, columns=cols)


def range_target_findings(table: pd.DataFrame, K: dict, candidate: str) -> tuple[list, list]:
    """One sentence per target over the sub-ranges of :func:`range_targets` (a row containing others left to the
    table): where it is missed (the figure and the first witness) and where nothing beyond it was found (with
    the evidence); and their short forms for the first screen."""
    if table.empty:
        return [], []
    rows = [r for _, r in table.iterrows()]
    subs = [r for r in rows if not any(_contains(r, other) for other in rows)]
    alphas = {r["alphas"] for r in subs}
    common = f", alpha {next(iter(alphas))}" if len(alphas) == 1 else ""
    specs = [  # (key, target, column, within, missed text, held text, evidence column, short name)
        ("special", "no special output (NaN, inf, wrong sign, lost inf)", "specials", "special_within",
         lambda r, c: (f"{c.text} at {r['special_at']}" if r["specials"] else c.text),
         lambda r, c, n: f"none in {n.text} points hunted, the neighbourhood included", "special_points",
         "no special output"),
        ("fp16", f"fp16 max error <= {fmt_num(K['fp16_max_ulp'])} ulp", "fp16_max_ulp", "fp16_max_within",
         lambda r, c: f"{c.text} ulp at {r['fp16_witness']}",
         lambda r, c, n: f"at most {c.text} ulp in {n.text} points hunted", "fp16_points",
         f"fp16 <= {fmt_num(K['fp16_max_ulp'])} ulp"),
        ("share", f"fp16 correctly rounded on a share >= {fmt_num(K['fp16_share_correct'])}", "fp16_share",
         "fp16_share_within", lambda r, c: f"{c.text} of {fmt_num(r['fp16_fresh'])} fresh points",
         lambda r, c, n: f"{c.text} of {n.text} fresh points", "fp16_fresh",
         f"fp16 share >= {fmt_num(K['fp16_share_correct'])}"),
        ("ops", f"primitive ops <= {fmt_num(K['ops_ratio'])}x the kernel's", "ops_ratio", "ops_within",
         lambda r, c: f"{c.text}x at {r['ops_at']}",
         lambda r, c, n: f"at most {c.text}x at {n.text} (alpha, gamma) pairs counted", "ops_pairs",
         f"ops <= {fmt_num(K['ops_ratio'])}x"),
    ]
    findings, shorts = [], []
    for key, target, column, within, missed_text, held_text, evidence, short_name in specs:
        missed, held, nums, short_missed = [], [], [], []
        for r in subs:
            if r[within] is None or (isinstance(r[within], float) and np.isnan(r[within])):
                continue
            where = {"gammas": r["gammas"], "alphas": r["alphas"], "targets": r["targets"]}
            c = cite(f"range_{key}_{r['gammas']}_{r['alphas']}", TT, table, where, column)
            place = f"gamma {r['gammas'].removeprefix('range ')}" + (f", alpha {r['alphas']}" if not common else "")
            nums.append(c)
            if r[within]:
                n = cite(f"range_{key}_{r['gammas']}_{r['alphas']}_n", TT, table, where, evidence)
                nums.append(n)
                held.append(f"{place} ({held_text(r, c, n)})")
            else:
                missed.append(f"{place} ({missed_text(r, c)})")
                short_missed.append(r["gammas"].removeprefix("range "))
        if not nums:
            continue
        how = {"ops": "counted at the sub-range's ends and seeded draws inside it",
               "share": "over the fp16 hunts' freshly drawn points (pred: the hunt's sampling mix; alpha, gamma "
                        "uniform), not every fp16 pred"}.get(key, "hunted over real values, each figure a lower "
                                                              "bound")
        text = (f"{candidate}'s target '{target}' by sub-range{common} ({how}): "
                + ("missed for " + "; ".join(missed) if missed else "missed in none")
                + (("; within it for " if key in ("share", "ops") else "; nothing beyond it found for ")
                   + "; ".join(held) + " (evidence, not proof)" if held else "")
                + f" ({TT}).")
        findings.append(Finding(f"targets/ranges/{key}", "targets", text, nums, 3))
        shorts.append(f"{short_name}: " + (f"missed for gamma in {', '.join(short_missed)}" if short_missed
                                           else "met in every sub-range"))
    return findings, shorts


#: How the sub-range grid's figures were found (the note under it).
SUBRANGE_NOTE = ("Each cell: met or MISSED and the figure, pooled over the sub-range's hunts (alpha and gamma "
                 "searched as real values, every reported point re-evaluated on every machine of the run) and "
                 "machines. A hunted figure within its target is a lower bound of the maximum (no point beyond it "
                 "found), not a proof; the fp16 share is over the hunts' freshly drawn points; the op count at the "
                 "sub-range's ends and seeded draws inside it; '-' where no hunt covers the target there (the "
                 "special-output target needs the root neighbourhood hunted, for gamma < -1). Witnesses: "
                 f"{TR}, {TT}.")


def subrange_grid(fp32: pd.DataFrame, others: pd.DataFrame, K: dict):
    """The targets by sub-range as a grid for the page: (table, its CSV name, caption, cell styles) or None.
    Rows: the sub-ranges (gamma, alpha); columns: the targets; cells: ``met 3.901`` or ``MISSED 4.441``."""
    if fp32.empty and others.empty:
        return None
    keys = list(dict.fromkeys([*zip(fp32["gammas"], fp32["alphas"]), *zip(others["gammas"], others["alphas"])]))
    columns = {f"fp32 <= {fmt_num(K['fp32_max_ulp'])} ulp outside": (fp32, "max_ulp", "within"),
               "no special output": (others, "specials", "special_within"),
               f"fp16 <= {fmt_num(K['fp16_max_ulp'])} ulp": (others, "fp16_max_ulp", "fp16_max_within"),
               f"fp16 share >= {fmt_num(K['fp16_share_correct'])}": (others, "fp16_share", "fp16_share_within"),
               f"ops <= {fmt_num(K['ops_ratio'])}x": (others, "ops_ratio", "ops_within")}
    grid = pd.DataFrame({"gamma": [g.removeprefix("range ") for g, _ in keys],
                         "alpha": [a.removeprefix("range ") for _, a in keys]})
    style = pd.DataFrame("", index=grid.index, columns=list(grid.columns) + list(columns))
    for name, (frame, value, within) in columns.items():
        cells = []
        for i, (g, a) in enumerate(keys):
            r = frame[(frame["gammas"] == g) & (frame["alphas"] == a)] if len(frame) else frame
            ok = r[within].iloc[0] if len(r) else None
            if ok is None or (isinstance(ok, float) and np.isnan(ok)):
                cells.append("-")
                style.loc[i, name] = "na"
                continue
            cells.append(f"{_verdict(bool(ok))} {fmt_num(r[value].iloc[0])}")
            style.loc[i, name] = "met" if ok else "missed"
        grid[name] = cells
    return grid, TT, "", style


def _verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def assess_targets(t: pd.DataFrame, ops: pd.DataFrame, K: dict, candidate: str, labels,
                   known: pd.DataFrame | None = None, ops_grid: pd.DataFrame | None = None) -> tuple[dict, list]:
    """The candidate's verdict on every target: (grid cells {(target, column): (text, css)}, findings).

    ``t``: :func:`targets_table`; ``ops``: :func:`opcount_table`; ``K``: the
    targets (the section's options); ``labels``: how the maxima were found,
    per format (a dict, or one string for every format); ``known``:
    :func:`witness_table` (the fp32 maximum outside the neighbourhood is then
    the largest over the run and every known witness, named with its source);
    ``ops_grid``: :func:`opcount_grid` (the op target is then judged at every
    pair of the grid, else at the standard input of ``ops``).
    """
    known = known if known is not None else pd.DataFrame()
    def label(fmt):
        return labels.get(fmt, "") if isinstance(labels, dict) else labels
    cells, findings = {}, []
    for _, r in t[t["variant"] == candidate].iterrows():
        w = {"variant": candidate, "machine": r["machine"], "format": r["format"]}
        col = f"{r['machine']} {r['format']}"
        special, count = cite("special", T, t, w, "special"), cite("count", T, t, w, "count")
        ok_special = special.value <= K["nan_inf"]
        shown_special = special.text
        ks = known[(known["machine"] == r["machine"]) & (known["source"] != "run") & (known["specials"] > 0)] \
            if r["format"] == "fp32" and not known.empty and "specials" in known else pd.DataFrame()
        if len(ks):  # special outputs at known points (the neighbourhood included): the target is missed there
            top = ks.iloc[0]
            kc = cite(f"specials_{top['source']}", TW, known, {"machine": r["machine"], "source": top["source"]},
                      "specials")
            ok_special = False
            shown_special = f"{special.text} in the run, {kc.text} at known points (first: {top['special_at']})"
            findings.append(Finding(f"targets/{r['machine']}/special", "targets",
                                    f"On {r['machine']}, fp32 output: {candidate} gives a special output at "
                                    f"{kc.text} known points of {top['source']} (first: {top['special_at']}), "
                                    f"re-evaluated with the current code; the run's own points have "
                                    f"{special.text}.", [special, kc], 3))
        cells[("no special output (NaN, inf, wrong sign, lost inf)", col)] = (
            f"{_verdict(ok_special)} {shown_special}", "met" if ok_special else "missed")
        if r["format"] == "fp32":
            mx = cite("max_outside", T, t, w, "max_ulp_outside")
            sampled = f"{mx.text} ulp ({label('fp32')}) at {inputs_text(r, 'witness_', '_outside', ATTRIBUTES)}"
            nums = [mx, special, count]
            k = known[(known["machine"] == r["machine"]) & (known["source"] != "run")
                      & known["max_ulp"].notna()] if not known.empty else known
            target_row = f"fp32 max error <= {fmt_num(K['fp32_max_ulp'])} ulp outside the root neighbourhood"
            if len(k):
                cited = [(kr, cite(f"max_{i}", TW, known, {"machine": r["machine"], "source": kr["source"]},
                                   "max_ulp")) for i, (_, kr) in enumerate(k.iterrows())]
                nums += [c for _, c in cited]
                top_row, top = max(cited, key=lambda rc: float(rc[1].value))
                figure = max(float(mx.value), float(top.value))
                ok = figure <= K["fp32_max_ulp"]
                if float(top.value) > float(mx.value):
                    off = "" if bool(top_row.get("on_grid", True)) else ", off the study's grid"
                    shown, source = top.text, f"{top_row['source']}, re-evaluated{off}"
                    at = inputs_text(top_row, attributes=ATTRIBUTES)
                else:
                    shown, source, at = mx.text, f"run, {label('fp32').split(':')[0]}", \
                        inputs_text(r, "witness_", "_outside", ATTRIBUTES)
                cells[(target_row, col)] = (f"{_verdict(ok)} {shown} ({source})", "met" if ok else "missed")
                others = "; ".join(f"{kr['source']} {c.text} ulp ({kr['how']}, {kr['points']:,} points)"
                                   for kr, c in cited)
                text = (f"On {r['machine']}, fp32 output, outside the root neighbourhood: {candidate} max error "
                        f"{shown} ulp at {at} ({source}), the largest over every known witness re-evaluated with "
                        f"the current code: run {sampled}; {others}. Target <= {fmt_num(K['fp32_max_ulp'])}: "
                        f"{_verdict(ok)}; {special.text} special outputs of {count.text}.")
                if float(top.value) > float(mx.value):  # the known witness, step by step
                    w = {k: float.fromhex(top_row[f"witness_{k}"]) for k in ("pred", *ATTRIBUTES)}
                    w.update(target=int(top_row["witness_target"]), weight=np.nan, dout=1.0)
                    text += f" See it step by step: `{explain_line(candidate, r['machine'], 'fp32', w)}`."
            else:
                ok = mx.value <= K["fp32_max_ulp"]
                cells[(target_row, col)] = (f"{_verdict(ok)} {mx.text}", "met" if ok else "missed")
                text = (f"On {r['machine']}, fp32 output, outside the root neighbourhood: {candidate} max error "
                        f"{sampled} (target <= {fmt_num(K['fp32_max_ulp'])}: {_verdict(ok)}; no hunt or corpus); "
                        f"{special.text} special outputs of {count.text}.")
            findings.append(Finding(f"targets/{r['machine']}/fp32", "targets", text, nums, 3))
        else:
            wrong = cite("not_correct", T, t, w, "not_correct")
            mx = cite("max_ulp", T, t, w, "max_ulp")
            ok_share = wrong.value <= (1.0 - K["fp16_share_correct"]) * count.value
            ok_max = mx.value <= K["fp16_max_ulp"]
            cells[(f"{r['format']} correctly rounded on a share >= {fmt_num(K['fp16_share_correct'])}", col)] = (
                f"{_verdict(ok_share)} {fmt_share(1 - wrong.value / count.value, wrong.value)}",
                "met" if ok_share else "missed")
            cells[(f"{r['format']} max error <= {fmt_num(K['fp16_max_ulp'])} ulp", col)] = (
                f"{_verdict(ok_max)} {mx.text}", "met" if ok_max else "missed")
            text = (f"On {r['machine']}, {r['format']} output ({count.text} outputs, the neighbourhood included): "
                    f"{candidate} is not correctly rounded on {wrong.text} (target share >= "
                    f"{fmt_num(K['fp16_share_correct'])}: {_verdict(ok_share)}), max error {mx.text} ulp ({label(r['format'])}; "
                    f"target <= {fmt_num(K['fp16_max_ulp'])}: {_verdict(ok_max)}).")
            findings.append(Finding(f"targets/{r['machine']}/{r['format']}", "targets", text, [wrong, count, mx], 3))
    if ops_grid is not None and len(ops_grid):
        worst = ops_grid.loc[ops_grid["ratio"].idxmax()]
        at = {"alpha": worst["alpha"], "gamma": worst["gamma"]}
        ratio = cite("ratio", TO, ops_grid, at, "ratio")
        ok = ratio.value <= K["ops_ratio"]
        where = f"alpha={short_hex(at['alpha'])} gamma={short_hex(at['gamma'])}"
        over = int((ops_grid["ratio"] > K["ops_ratio"]).sum())
        cells[(f"primitive ops <= {fmt_num(K['ops_ratio'])}x the kernel's", "npu (op count)")] = (
            f"{_verdict(ok)} {ratio.text} (at {where})", "met" if ok else "missed")
        findings.append(Finding("targets/ops", "targets", f"Cost: {candidate} takes up to {ratio.text} times the "
                                f"production kernel's primitive ops per element (npu) over the study's grid of "
                                f"{len(ops_grid)} (alpha, gamma) pairs, at {where}; over the target in {over} of "
                                f"them (target <= {fmt_num(K['ops_ratio'])}: {_verdict(ok)}; {TO}).", [ratio], 4))
    elif "kernel" in set(ops["variant"]) and candidate in set(ops["variant"]):
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
    op = run.operator
    section = Section("targets", "The candidate against its targets")
    candidate = ctx.option("targets", "variant")
    t = targets_table(run, op.ROOT_NEIGHBOURHOOD_C)
    if t.empty or candidate not in set(t["variant"]):
        return section
    K = {k: ctx.option("targets", k) for k in ("fp32_max_ulp", "nan_inf", "fp16_share_correct", "fp16_max_ulp",
                                              "ops_ratio")}
    ops = opcount_table([v for v in run.variants if v == candidate], op)
    section.tables.update({T: t, "opcount.csv": ops})
    labels = {f: maximum_label(run, f) for f in dict.fromkeys(t["format"])}
    base = Path(run.run.get("study_file", ".")).parent
    hunts, missing = hunt_table(ctx.option("targets", "hunts"), base, op)
    if not hunts.empty:
        section.tables["hunts.csv"] = hunts
    sources = []
    known, unread = witness_table(run, t, candidate, hunts, ctx.option("targets", "corpus"), base,
                                  labels.get("fp32", ""), ctx.option("targets", "points"))
    missing += unread
    if not known.empty:
        section.tables[TW] = known
        sources = [s for s in dict.fromkeys(known["source"]) if s != "run"]
    has_ops = op.count_ops is not None and {"kernel", candidate} <= set(ops["variant"])
    ops_grid = opcount_grid(op, candidate, run.grid or {}) if has_ops else None
    if ops_grid is not None:
        section.tables[TO] = ops_grid
    cells, findings = assess_targets(t, ops, K, candidate, labels, known, ops_grid)
    ranges = range_table(known, hunts, K["fp32_max_ulp"])
    by_range = range_finding(ranges, K["fp32_max_ulp"], candidate)
    if by_range is not None:
        section.tables[TR] = ranges
        findings.append(by_range[0])
    hunted = range_sources(run, candidate, hunts, base)
    subranges = [k for k in dict.fromkeys(zip(hunted["gammas"], hunted["alphas"]))
                 if _interval(k[0]) and _interval(k[1])]
    ops_ranges = (ops_by_range(op, candidate, subranges) if op.count_ops is not None and subranges
                  else pd.DataFrame(columns=["gammas", "alphas", "pairs", "ratio", "at_alpha", "at_gamma"]))
    other_ranges = range_targets(hunted, ops_ranges, K)
    range_findings, range_shorts = range_target_findings(other_ranges, K, candidate)
    if not other_ranges.empty:
        section.tables.update({TS: hunted, TT: other_ranges})
        findings += range_findings
    shorts = ([f"fp32 <= {fmt_num(K['fp32_max_ulp'])} ulp outside: {by_range[1]}"]
              if by_range is not None else []) + range_shorts
    alphas = set(other_ranges["alphas"]) | set(ranges["alphas"])
    over = (f"alpha in {next(iter(alphas)).removeprefix('range ')}, " if len(alphas) == 1 else "") + \
        "gamma by sub-range; hunted maxima are lower bounds"
    sub_grid = subrange_grid(ranges, other_ranges, K)
    if missing:
        findings.append(Finding("targets/hunts-missing", "targets", "Hunt or corpus files named by the study but "
                                "not found: " + ", ".join(missing) + "; their witnesses are not counted.", [], 2))
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
                          + ("; fp32 outside the neighbourhood: the largest over the run and the known witnesses, "
                             "re-evaluated with the current code (" + ", ".join(sources) + ", witnesses.csv)"
                             if sources else "")
                          + f". Root neighbourhood: gamma < -1 and the bracket's cancellation factor "
                          f"C >= {op.ROOT_NEIGHBOURHOOD_C:g}.", "note")]
    if sub_grid is not None:
        section.first += [Heading(f"{candidate}'s targets by sub-range of the attributes", 3, "targets-ranges"),
                          Table(*sub_grid), Para(SUBRANGE_NOTE, "note")]
    shown = t.assign(inputs=[inputs_text(r, "witness_", "_outside", run.operator.ATTRIBUTES) for _, r in t.iterrows()])
    section.body = [Table(shown[["variant", "machine", "format", "count", "outside", "max_ulp_outside", "inputs",
                                 "inside", "max_ulp_inside", "special", "share_correct", "not_correct"]], T),
                    *([Para("The fp32 maximum outside the root neighbourhood per machine and source: the run's, "
                            "and each hunt's and corpus's witnesses re-evaluated with the current code (points: "
                            "those scored outside the neighbourhood; stored_max_ulp: the hunt file's own figure)."),
                       Table(known, TW)] if not known.empty and (known["source"] != "run").any() else []),
                    *([Para("The fp32 target by sub-range of the attributes, hunted over real values (pooled "
                            "over the sub-range's hunts and machines, re-evaluated; a hunted maximum is a lower "
                            "bound):"), Table(ranges, TR)] if by_range is not None else []),
                    Para("Primitive ops per element (precision.opcount: every finite fp16 pred, both selectors, "
                         "weight present, reduction mean, gamma 2, npu machine; a library exp/ln/pow/div counts "
                         "as one op):"),
                    Table(ops, "opcount.csv")]
    section.findings = findings
    section.answers = _target_answers(cells, findings, candidate, f"({over}): " + "; ".join(shorts) if shorts
                                      else None)
    return section


def _target_answers(cells: dict, findings: list, candidate: str, by_range: str | None = None) -> list:
    """Which targets the candidate meets: one headline sentence from the grid's cells (met on every column, or
    missed where) and the fp32 target by sub-range (``by_range``, :func:`range_finding`'s short form), then each
    target finding as an answer of its own (its numbers cited)."""
    question = f"Which of its targets does {candidate} meet?"
    by_target: dict = {}
    for (target, col), (text, css) in cells.items():
        by_target.setdefault(target, []).append((col, css, text))
    met = [t for t, cs in by_target.items() if all(c == "met" for _, c, _ in cs)]
    # where each is missed, and the first missed cell's figure with its evidence (run, hunt, known point...)
    missed = [f"{t} (missed on {', '.join(col for col, c, _ in cs if c != 'met')}: "
              f"{next(x for _, c, x in cs if c != 'met').removeprefix('MISSED ')})"
              for t, cs in by_target.items() if t not in met]
    text = (f"{candidate} meets {len(met)} of its {len(by_target)} targets"
            + (f": {'; '.join(met)}" if met else "") + (f". It misses: {'; '.join(missed)}" if missed else "") + "."
            + (f" Over the attributes' ranges {by_range}." if by_range else ""))
    out = [Answer(question, text, [], subject=candidate, verdict="met" if not missed else "missed")]
    out += [Answer(question, f.text, f.numbers, subject=candidate, headline=False) for f in findings]
    return out
