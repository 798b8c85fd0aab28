"""Check a committed exhaustive-fp32 report against a fresh run of a few of its blocks (a slice).

The blocks rerun are those holding the largest maximum's witness of each variant (the production
variant's first) and the first and last pred of the production variant's widest hole, at most ``most``
blocks in that order; each is run as a study of its own whose range is exactly that block (same positions, so the same
tile).  A maximum whose witness lies in a rerun block must come out equal, at the same witness; an extent
edge (first or last pred past a level) lying in a rerun block must come out equal too.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from precision.engine.study import load_study
from precision.engine.stream import block_preds, study_blocks
from precision.engine.sweep import run_study
from precision.exact.formats import get_format

KEYS = ["variant", "machine", "format", "profile"]


def _block_of(blocks, fmt, pred: float) -> tuple:
    position = fmt.finite_positions(pred, pred)[0]
    starts = np.array([a for a, _ in blocks])
    return blocks[int(np.searchsorted(starts, position, side="right")) - 1]


def slice_blocks(study, summary: pd.DataFrame, extents: pd.DataFrame, production: str, most: int = 3) -> list:
    """The blocks (positions) to rerun, in the order they are wanted."""
    fmt = get_format(study.pred.format)
    blocks = study_blocks(study)
    preds = []
    ranked = summary.sort_values("max_finite_ulp", ascending=False, kind="stable")
    for _, r in pd.concat([ranked[ranked["variant"] == production], ranked[ranked["variant"] != production]]).iterrows():
        if isinstance(r["witness_pred"], str) and r["witness_pred"] and r["variant"] not in {v for v, _ in preds}:
            preds.append((r["variant"], float.fromhex(r["witness_pred"])))
    holes = extents[(extents["variant"] == production) & (extents["over"] > 0)]
    if len(holes):
        widest = holes.sort_values(["level_ulp", "over"], ascending=[False, False], kind="stable").iloc[0]
        preds += [("hole", float.fromhex(widest["first_pred"])), ("hole", float.fromhex(widest["last_pred"]))]
    chosen = []
    for _, p in preds:
        b = _block_of(blocks, fmt, p)
        if b not in chosen:
            chosen.append(b)
    return chosen[:most]


def block_study_text(study_text: str, lo: float, hi: float) -> str:
    """The study's text with its pred range set to [lo, hi] (one block) and its name marked."""
    text = re.sub(r'(?m)^range\s*=.*\n', "", study_text)
    text = re.sub(r'(?m)^(\[pred\]\s*\n)', rf'\1range = ["{lo.hex()}", "{hi.hex()}"]\n', text, count=1)
    return re.sub(r'(?m)^name\s*=\s*"([^"]*)"', r'name = "\1_slice"', text, count=1)


def check_slice(report: Path, study_path: Path, work: Path, production: str = "kernel", most: int = 3) -> dict:
    """Rerun the slice's blocks and compare them with the committed tables; returns what was checked."""
    study = load_study(study_path)
    summary = pd.read_csv(report / "tables" / "summary.csv")
    extents = pd.read_csv(report / "tables" / "extents.csv", keep_default_na=False)
    extents = extents[extents["first_pred"] != ""]
    work.mkdir(parents=True, exist_ok=True)
    checked = {"blocks": 0, "maxima": 0, "edges": 0}
    for k, block in enumerate(slice_blocks(study, summary, extents, production, most)):
        preds = block_preds(study, block)
        lo, hi = float(preds[0]), float(preds[-1])
        path = work / f"block{k}.toml"
        path.write_text(block_study_text(Path(study_path).read_text(), lo, hi))
        sub = load_study(path)
        assert study_blocks(sub) == [block], (study_blocks(sub)[:2], block)
        out = work / f"run{k}"
        run_study(sub, out, cache_dir=work / "cache", workers=1)
        fresh = pd.read_csv(out / "summary.csv").set_index(KEYS)
        for _, r in summary.iterrows():
            w = r["witness_pred"]
            if not (isinstance(w, str) and w) or not lo <= float.fromhex(w) <= hi:
                continue
            f = fresh.loc[tuple(r[KEYS])]
            assert f["max_finite_ulp"] == r["max_finite_ulp"], (tuple(r[KEYS]), f["max_finite_ulp"], r["max_finite_ulp"])
            assert float.fromhex(f["witness_pred"]) == float.fromhex(w), (tuple(r[KEYS]), f["witness_pred"], w)
            checked["maxima"] += 1
        fx = pd.read_csv(out / "extents.csv", keep_default_na=False)
        keys = [c for c in extents.columns if c not in ("over", "first_pred", "last_pred")]
        fx = fx.set_index(keys)
        for _, r in extents.iterrows():
            for edge in ("first_pred", "last_pred"):
                if lo <= float.fromhex(r[edge]) <= hi:
                    assert fx.loc[tuple(r[keys]), edge] == r[edge], (tuple(r[keys]), edge)
                    checked["edges"] += 1
        checked["blocks"] += 1
    return checked
