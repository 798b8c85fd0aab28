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


@pytest.mark.slow
def test_full_sweep_benchmark_times_each_run_and_checks_the_tables():
    """``--full`` on a small study, twice: each figure a median with its spread, the three runs' tables
    byte-identical (a real check: cold, warm and edited runs must agree bit for bit)."""
    study = BENCH.parent / "studies" / "quick.toml"
    out = _run("sweep.py", "--full", "--study", str(study), "--repeat", "2")
    for name in ("cold", "warm", "edited"):
        assert re.search(rf"^(PASS|FAIL) quick {name} [0-9.]+ s \(median of 2: [0-9.]+ \.\. [0-9.]+ s\) "
                         rf"target <= [0-9]+ s \(fp16_exhaustive's\)$", out, re.M), out
    assert re.search(r"^PASS tables byte-identical across cold, warm and edited$", out, re.M), out
    assert re.search(r"^(PASS|FAIL) overhead ratio \(quick, cold\) [0-9.]+ target <= 1.5 \(end to end [0-9.]+ s / "
                     r"\(oracle [0-9.]+ s \+ shared evaluation( on [0-9]+ workers)? [0-9.]+ s\)\)$", out, re.M), out
    assert re.search(r"^ +the shared evaluation on one core: [0-9.]+ s, split ideally over [0-9]+ workers [0-9.]+ s "
                     r"\(the ratio against it: [0-9.]+\)$", out, re.M), out


def test_full_sweep_benchmark_refuses_a_bad_repeat():
    proc = subprocess.run([sys.executable, str(BENCH / "sweep.py"), "--full", "--repeat", "0"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "--repeat=0; expected a positive integer" in proc.stderr


def test_implementations_benchmark_runs():
    out = _run("implementations.py", "--points", "2000", "--repeat", "1", "--variants", "kernel,naive",
               "--models", "ieee,npu")
    assert re.search(r"^(PASS|FAIL) ", out, re.M), out


def test_fork_benchmark_times_each_pass_three_ways():
    out = _run("fork.py", "--points", "20000", "--repeat", "3")
    for name in ("top_k_groups", "reduce_error_groups", "npu power_c_terms"):
        assert re.search(rf"^{name} +[0-9.]+ +[0-9.]+ +[0-9.]+$", out, re.M), out
    assert re.search(r"^(PASS|FAIL) self-loading child [0-9.]+x the parent at worst, target <= 1.25x", out, re.M), out


def test_fork_benchmark_refuses_bad_sizes():
    proc = subprocess.run([sys.executable, str(BENCH / "fork.py"), "--repeat", "0"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2 and "--repeat=0" in proc.stderr


EXHAUSTIVE_SLICE = """
name = "slice"
[pred]
kind = "exhaustive"
format = "fp32"
range = [1.0, 1.002]
block = 1024
[points]
target = [0, 1]
alpha = [0.25]
gamma = [2.0]
profiles = ["fp32"]
[run]
variants = ["kernel", "candidate"]
machines = ["ieee", "npu"]
per_point = "worst"
"""


def test_exhaustive_benchmark_projects_the_whole_study(tmp_path):
    """Two blocks of a 17-block slice timed both ways, projected to the slice on 2 workers, PASS (seconds)."""
    (tmp_path / "s.toml").write_text(EXHAUSTIVE_SLICE)
    out = _run("exhaustive.py", "--study", str(tmp_path / "s.toml"), "--blocks", "2", "--workers", "2")
    assert re.search(r"^# slice: kernel, candidate on ieee; 17 blocks of up to 1,024 preds x 2 selectors; 2 timed",
                     out, re.M), out
    rows = re.findall(r"^ +\S+ +\S+ +([0-9,]+) +([0-9.]+) +([0-9.]+) +([0-9.]+)$", out, re.M)
    assert [r[0] for r in rows] == ["1,024", "394"], out  # the first block and the last (cut by the range)
    assert re.search(r"^projected whole study on 2 workers: .+ \(evaluation limit .+; ratio to the evaluation limit "
                     r"[0-9.]+\)$", out, re.M), out
    assert re.search(r"^PASS projected .+ target 30.0 min$", out, re.M), out


def test_exhaustive_benchmark_refuses_zero_blocks():
    proc = subprocess.run([sys.executable, str(BENCH / "exhaustive.py"), "--blocks", "0"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr == "exhaustive.py: --blocks=0; expected a positive integer\n"



@pytest.mark.slow
def test_oracle_benchmark_prints_a_rate_per_study_and_the_verdict():
    """A row per fp32 study and one for real-valued attributes, none deferred to mpmath, and the verdict line
    (the exit status is the verdict's, so it is not asserted here: rates depend on the machine)."""
    proc = subprocess.run([sys.executable, str(BENCH / "oracle.py"), "--points", "20000", "--repeat", "1"],
                          capture_output=True, text=True, timeout=300)
    rows = re.findall(r"^(\S.*?)\s+([0-9,]+) fp32 points in .* M/s one core; mpmath [0-9,]+/s .* ([0-9,]+) points to "
                      r"mpmath", proc.stdout, re.M)
    assert len(rows) >= 6 and all(deferred == "0" for _, _, deferred in rows), proc.stdout
    assert re.search(r"^(PASS|FAIL) certified oracle throughput: every row at least 5 M points/s per core$",
                     proc.stdout, re.M), proc.stdout
    assert proc.returncode == (0 if "PASS certified" in proc.stdout else 1)


def test_hunt_benchmark_prints_both_rates_and_their_ratio():
    out = _run("hunt.py", "--points", "4000", "--repeat", "1")
    lines = out.splitlines()
    assert lines[0].startswith("certified  4,000 points in ") and lines[1].startswith("screened   4,000 points in ")
    assert "points/s" in lines[0] and "0 unresolved" in lines[1]
    assert lines[0].split("max ")[1] == lines[1].split("max ")[1]  # the same points, the same maximum
    assert lines[2].startswith("screening: ") and lines[2].endswith("x the certified hunt's rate")
