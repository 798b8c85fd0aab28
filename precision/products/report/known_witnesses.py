"""The witnesses a study knows of besides its own points, re-evaluated now: hunts and corpora.

The option ``hunts`` of ``[report.targets]`` names JSON files of ``precision
hunt ... --json`` (their witness and top points); ``corpus`` names pred files
(like ``studies/worst_cases.txt``, one hex float a line: each fp32 pred at
every combination of selector and attribute values of the run: SigmoidFocalLossGrad's alpha and gamma).  Paths are relative to the study
file.  Their points are re-evaluated with the current code
(:func:`precision.products.hunt.rescore`), never taken from the stored numbers,
which may come from older code.  The ``summary`` and ``targets`` sections set
the run's maxima against them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from precision.engine.operators import search_order
from precision.products.hunt import rescore
from precision.products.report.tables import short_hex
from precision.recipes.target_kinds import parse_target_text, target_json, target_text

__all__ = ["hunt_table", "hunt_points", "corpus_preds", "point_table", "known_sources", "rescored_maxima"]


def hunt_table(paths, base: Path, op) -> tuple[pd.DataFrame, list]:
    """(one row per hunt file of the operator ``op``'s variants, the files that could not be read); paths
    relative to ``base``."""
    names = list(op.ATTRIBUTES)
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
                     **{f"witness_{k}": w.get(k) for k in ("pred", "target", *names)},
                     "seconds": float(h["seconds"]), "workers": int(h["workers"]),
                     "points": int(h["points"]),
                     "seed": int(h["seed"]), "outside_neighbourhood": bool(h["outside_neighbourhood"]),
                     **{f"{a}s": (" ".join(short_hex(v) for v in h[f"{a}s"]) if f"{a}s" in h else
                                  "range [{}, {}]".format(*(f"{float.fromhex(v):g}" for v in h[f"{a}_range"])))
                        for a in search_order(op)},
                     "targets": " ".join(str(t) for t in h["targets"]), "specials": int(h["specials"]),
                     # the points drawn afresh and, of them, those not correctly rounded (hunts since Dec 2026)
                     "fresh_points": h.get("fresh_points", np.nan), "fresh_not_correct": h.get("fresh_not_correct",
                                                                                               np.nan),
                     "file": str(rel)})
    return pd.DataFrame(rows), missing


def hunt_points(path: Path, op) -> pd.DataFrame:
    """A hunt file's witness and top points: pred, target, the operator's attributes (floats)."""
    h = json.loads(path.read_text())
    names = list(op.ATTRIBUTES)
    pts = [h.get("witness") or {}] + list(h.get("top") or [])
    rows = [(float.fromhex(str(p["pred"])), parse_target_text(p["target"]),
             *(float.fromhex(str(p[a])) for a in names))
            for p in pts if p.get("pred") is not None]
    return pd.DataFrame(rows, columns=["pred", "target", *names]).drop_duplicates()


def point_table(path: Path, op) -> pd.DataFrame:
    """The points of a known-witness file: a CSV with columns pred, target and the operator ``op``'s attributes
    (hex or decimal floats; ``#`` lines are comments), as floats (pred, target, attributes)."""
    names = list(op.ATTRIBUTES)
    raw = pd.read_csv(path, comment="#", dtype=str, skipinitialspace=True)
    missing = [c for c in ("pred", "target", *names) if c not in raw.columns]
    if missing:
        raise ValueError(f"{path}: no column {', '.join(missing)}")

    def number(text):
        text = str(text).strip()
        return float.fromhex(text) if "0x" in text.lower() else float(text)
    return pd.DataFrame({"pred": [number(v) for v in raw["pred"]],
                         "target": [parse_target_text(v) for v in raw["target"]],
                         **{a: [number(v) for v in raw[a]] for a in names}})


def corpus_preds(path: Path) -> np.ndarray:
    """The fp32 preds of a corpus file (one hex or decimal float a line, ``#`` comments; others skipped)."""
    out = []
    for line in path.read_text().splitlines():
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            v = float.fromhex(text) if "0x" in text.lower() else float(text)
        except ValueError:
            continue
        if np.isfinite(v) and float(np.float32(v)) == v:
            out.append(v)
    return np.unique(np.array(out, dtype=np.float64))


def known_sources(run, variant: str, hunts: pd.DataFrame, corpora, base: Path, point_files=()) -> tuple[list, list]:
    """The witness points a study knows of for ``variant``'s fp32 output: ([(source, kind, how, points,
    {machine: stored max}), ...], unread files).

    ``hunt FILE``: the hunt's witness and top points (:func:`hunt_table`
    rows of ``variant``, fp32; a hunt over attribute ranges says them); ``corpus FILE``: each fp32 pred of the
    file at every combination of selector and attribute values of the run's fp32 rows of ``variant``;
    ``points FILE``: known points with all their inputs (:func:`point_table`), on the grid or off it.
    ``points`` has columns pred, target and the run's operator's attributes.
    """
    op = run.operator
    names = list(op.ATTRIBUTES)
    known, missing = [], []
    for _, h in hunts.iterrows():
        if h["variant"] != variant or h["format"] != "fp32":
            continue
        ranges = [f"{a} {h[f'{a}s']}" for a in search_order(op) if str(h[f"{a}s"]).startswith("range")]
        known.append((f"hunt {h['file']}", "hunted", f"hunted {int(h['points']):,} points in {h['seconds']:,.0f} s on {int(h['workers'])} "
                      f"workers on {h['machine']}, " + ("".join(f"{r}, " for r in ranges) or "on the grid, ")
                      + f"seed {int(h['seed'])}", hunt_points(base / h["file"], op),
                      {h["machine"]: float(h["max_ulp"])}))
    f = run.stats.frame
    grid = f[(f["variant"] == variant) & (f["format"] == "fp32")][["target", *names]].drop_duplicates()
    for rel in corpora:
        try:
            preds = corpus_preds(base / rel)
        except OSError:
            missing.append(str(rel))
            continue
        pts = pd.DataFrame({"pred": np.repeat(preds, len(grid))}).assign(
            **{c: np.tile(grid[c].to_numpy(), preds.size) for c in ("target", *names)})
        known.append((f"corpus {rel}", "corpus", f"{preds.size:,} fp32 preds x {len(grid):,} "
                      f"({', '.join(['selector', *names])})", pts, {}))
    for rel in point_files:
        try:
            pts = point_table(base / rel, op)
        except (OSError, ValueError):
            missing.append(str(rel))
            continue
        known.append((f"points {rel}", "known", f"{len(pts):,} known points (every input given, off the grid "
                      "too)", pts, {}))
    return known, missing


def rescored_maxima(run, variant: str, machine: str, known, outside_only: bool, finite_only: bool = False) -> list:
    """Per known source (:func:`known_sources`): one row with the largest error of ``variant`` (of the run's
    operator) on ``machine`` re-evaluated now (:func:`precision.products.hunt.rescore`), over the points outside
    the root neighbourhood when ``outside_only``, over the finite errors when ``finite_only``; witness in hex."""
    rows = []
    names = list(run.operator.ATTRIBUTES)
    for source, kind, how, pts, stored in known:
        s = rescore(variant, pts["pred"], pts["target"], *(pts[a] for a in names), machine=machine,
                    operator=run.operator_name) if len(pts) else \
            pd.DataFrame(columns=["err_ulp", "inside", "c_factor"])
        special = s[s["class"] != "ok"] if "class" in s else s.iloc[0:0]
        keep = s["err_ulp"].notna()
        if outside_only:
            keep &= ~s["inside"].astype(bool)
        if finite_only:
            keep &= np.isfinite(s["err_ulp"].astype(float))
        s = s[keep]
        top = s.loc[s["err_ulp"].astype(float).idxmax()] if len(s) else None
        rows.append({"machine": machine, "source": source, "kind": kind, "how": how, "points": len(s),
                     "max_ulp": float(top["err_ulp"]) if top is not None else np.nan,
                     "stored_max_ulp": stored.get(machine, np.nan),
                     **({f"witness_{k}": (target_json(top[k]) if k == "target" else float(top[k]).hex())
                         for k in ("pred", "target", *names)} if top is not None else {}),
                     "c_factor": float(top["c_factor"]) if top is not None else np.nan,
                     # special outputs among every point of the source, the neighbourhood included
                     "specials": len(special),
                     "special_at": "" if special.empty else " ".join(
                         f"{k}={target_text(v) if k == 'target' else short_hex(float(v))}"
                         for k, v in ((k, special.iloc[0][k]) for k in ("pred", "target", *names)))
                     + f" ({special.iloc[0]['class']})"})
    return rows
