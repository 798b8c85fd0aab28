"""The committed fp32_exhaustive report, checked on a slice: the blocks that hold its maxima and its holes' first
and last preds are run again and must give the committed figures there.

The whole study (every finite fp32 pred, 2,040 blocks) takes over an hour on two cores; a block holding a
witness gives, alone, that witness's error and (the block being the tile) the same kernel outputs, so the
maxima, their witnesses and the holes' ends of the committed tables are reproduced from a few blocks.
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from precision.cli import main
from precision.engine.study import load_study
from precision.engine.stream import block_preds, study_blocks
from precision.exact.formats import get_format

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "reports" / "fp32_exhaustive"
STUDY = ROOT / "studies" / "fp32_exhaustive.toml"
#: The blocks run again at the most (CI time: about 5 s a block on two machines).
MAX_BLOCKS = 3


def _block_of(study, pred: float):
    """The block (start, stop positions) holding an fp32 pred (-0 and +0 apart)."""
    half = get_format("fp32").finite_count // 2
    bits = int(np.float32(pred).view(np.uint32))
    position = half - 1 - (bits & 0x7FFFFFFF) if bits >> 31 else half + bits
    return next(b for b in study_blocks(study) if b[0] <= position < b[1])


def _slice_study(text: str, block, study) -> str:
    lo, hi = block_preds(study, (block[0], block[0] + 1))[0], block_preds(study, (block[1] - 1, block[1]))[0]
    assert "[points]" in text and "range" not in text
    return text.replace('format = "fp32"\n', f'format = "fp32"\nrange = ["{lo.hex()}", "{hi.hex()}"]\n', 1)


@pytest.fixture(scope="module")
def committed():
    assert REPORT.is_dir(), "reports/fp32_exhaustive is committed"
    summary = pd.read_csv(REPORT / "tables" / "summary.csv")
    extents = pd.read_csv(REPORT / "tables" / "extents.csv", keep_default_na=False)
    return summary, extents


@pytest.fixture(scope="module")
def slices(committed, tmp_path_factory):
    """{block: run folder} of the blocks holding the kernel's and the candidate's fp32 maxima and the kernel's
    2^20-ulp hole's first pred, run again with the current code."""
    summary, extents = committed
    study = load_study(STUDY)
    preds = [float.fromhex(p) for p in summary["finite_witness_pred"]]
    hole = extents[(extents["variant"] == "kernel") & (extents["level_ulp"] == 2**20) & (extents["over"] > 0)]
    preds += [float.fromhex(p) for p in hole["first_pred"]]
    blocks = list(dict.fromkeys(_block_of(study, p) for p in preds))[:MAX_BLOCKS]
    text = STUDY.read_text()
    base = tmp_path_factory.mktemp("fp32_slices")
    out = {}
    for k, block in enumerate(blocks):
        (base / f"s{k}.toml").write_text(_slice_study(text, block, study))
        assert main(["run", str(base / f"s{k}.toml"), "--out", str(base / f"o{k}"), "--workers", "2"]) == 0
        out[block] = base / f"o{k}"
    return study, out


def test_each_maximum_is_reproduced_by_its_block(committed, slices):
    summary, _ = committed
    study, runs = slices
    checked = 0
    for _, row in summary.iterrows():
        block = _block_of(study, float.fromhex(row["finite_witness_pred"]))
        if block not in runs:
            continue
        fresh = pd.read_csv(runs[block] / "summary.csv")
        got = fresh[(fresh["variant"] == row["variant"]) & (fresh["machine"] == row["machine"])].iloc[0]
        # the block's max is the study's (the witness lies in it), at the same witness
        assert got["max_finite_ulp"] == pytest.approx(row["max_finite_ulp"], rel=1e-12)
        assert got["finite_witness_pred"] == row["finite_witness_pred"]
        assert got["finite_witness_target"] == row["finite_witness_target"]
        checked += 1
    assert checked >= 2


def test_the_kernels_hole_starts_where_committed(committed, slices):
    _, extents = committed
    study, runs = slices
    hole = extents[(extents["variant"] == "kernel") & (extents["level_ulp"] == 2**20) & (extents["over"] > 0)]
    checked = 0
    for _, row in hole.iterrows():
        block = _block_of(study, float.fromhex(row["first_pred"]))
        if block not in runs:
            continue
        fresh = pd.read_csv(runs[block] / "extents.csv", keep_default_na=False)
        got = fresh[(fresh["variant"] == "kernel") & (fresh["machine"] == row["machine"])
                    & (fresh["target"] == row["target"]) & (fresh["level_ulp"] == 2**20)].iloc[0]
        assert got["first_pred"] == row["first_pred"]  # (the block holds the study's first such pred)
        checked += 1
    assert checked >= 1


def test_the_committed_maxima_are_exhaustive(committed):
    summary, extents = committed
    page = (REPORT / "report.md").read_text()
    assert "exhaustive: every fp32 pred" in page
    # every finite fp32 and both selectors, per variant and machine
    assert (summary["count"] == 2 * get_format("fp32").finite_count).all()
    assert np.isin(extents["level_ulp"], [1, 2**10, 2**20]).all()
