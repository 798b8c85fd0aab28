"""The benchmarks run: each, on a few points, prints its figures and a PASS/FAIL line per target.

The figures themselves are measured by running the scripts (README, Benchmarks); here only that the scripts
work with the package as it is, so an interface change cannot leave them broken.
"""

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _run(script: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.slow
def test_sweep_benchmark_prints_both_ratios():
    out = _run("sweep.py", "--preds", "10")
    assert re.search(r"^(PASS|FAIL) oracle ratio [0-9.]+x target 10x$", out, re.M), out
    assert re.search(r"^(PASS|FAIL) end-to-end ratio [0-9.]+x target 4x \(bound", out, re.M), out
    assert re.search(r"^(PASS|FAIL) overhead ratio \(slice\) [0-9.]+ target <= 1.5 \(end to end ", out, re.M), out


def test_implementations_benchmark_runs():
    out = _run("implementations.py", "--points", "2000", "--repeat", "1", "--variants", "kernel,naive",
               "--models", "ieee,npu")
    assert re.search(r"^(PASS|FAIL) ", out, re.M), out
