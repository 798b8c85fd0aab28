"""The committed exhaustive fp32 report checked by a slice: its maxima and its holes' edges rerun block by block.

reports/fp32_exhaustive comes from every finite fp32 pred (58.7 minutes on 2 cores); CI reruns at most four of its
2,040 blocks (tests/streamed_slice.py): those holding the largest maxima's witnesses and the edges of the
production kernel's widest hole.  The checker itself is tested on a small streamed report, where a doctored
maximum must fail it.
"""

from pathlib import Path

import pandas as pd
import pytest

from precision.engine.study import load_study
from precision.engine.sweep import run_study
from precision.products.report.render import build_report
from streamed_slice import check_slice

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "reports" / "fp32_exhaustive"

SMALL = """
name = "small_exhaustive"
seed = 0
[pred]
kind = "exhaustive"
format = "fp32"
range = ["0x1.0p+3", "0x1.0p+5"]
block = 1048576
[points]
target = [0, 1]
alpha = [0.25]
gamma = [2.0]
weight = ["none"]
dout = [1.0]
reduction = "none"
profiles = ["fp32"]
[run]
variants = ["kernel", "candidate"]
machines = ["ieee"]
compare = [["candidate", "kernel"]]
per_point = "worst"
[report]
sections = ["summary", "extents", "verdicts"]
"""


@pytest.fixture(scope="module")
def small_report(tmp_path_factory):
    base = tmp_path_factory.mktemp("exh")
    study = base / "small_exhaustive.toml"
    study.write_text(SMALL)
    run_study(load_study(study), base / "runs" / "small_exhaustive", cache_dir=base / "cache", workers=1)
    return study, build_report("small_exhaustive", base / "runs", base / "reports")


def test_slice_check_passes_on_a_fresh_report_and_fails_on_a_doctored_one(small_report, tmp_path):
    study, report = small_report
    checked = check_slice(report, study, tmp_path / "ok", most=3)
    assert checked["blocks"] == 3 and checked["maxima"] >= 2 and checked["edges"] >= 1
    summary = pd.read_csv(report / "tables" / "summary.csv")
    doctored = summary.copy()
    doctored.loc[0, "max_finite_ulp"] = doctored.loc[0, "max_finite_ulp"] * 2 + 1
    fake = tmp_path / "fake"
    (fake / "tables").mkdir(parents=True)
    doctored.to_csv(fake / "tables" / "summary.csv", index=False)
    (fake / "tables" / "extents.csv").write_text((report / "tables" / "extents.csv").read_text())
    with pytest.raises(AssertionError):
        check_slice(fake, study, tmp_path / "bad", most=3)


@pytest.mark.slow
def test_committed_report_matches_a_slice_of_fresh_blocks(tmp_path):
    if not COMMITTED.is_dir():
        pytest.skip("reports/fp32_exhaustive not committed")
    checked = check_slice(COMMITTED, ROOT / "studies" / "fp32_exhaustive.toml", tmp_path, most=4)
    assert checked["blocks"] >= 1 and checked["maxima"] >= 1 and checked["edges"] >= 1
    # every maximum of the committed tables is exhaustive, and says so
    text = (COMMITTED / "report.md").read_text()
    assert "exhaustive: every fp32 pred" in text and "sampled" not in text.split("## ")[1]
