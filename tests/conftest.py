"""Shared fixtures: the reference points computed independently of mpmath (Arb)."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


def load_reference_points():
    """Rows of tests/data/oracle_points.csv with floats parsed from hex."""
    with open(DATA / "oracle_points.csv") as fh:
        lines = [line for line in fh if not line.startswith("#")]
    rows = []
    for rec in csv.DictReader(lines):
        row = dict(rec)
        for key in ("x", "alpha", "gamma", "weight", "dout", "fp32", "fp16", "bf16"):
            row[key] = float.fromhex(rec[key])
        row["t"] = int(rec["t"])
        row["count"] = int(rec["count"])
        rows.append(row)
    return rows


@pytest.fixture(scope="session")
def reference_points():
    return load_reference_points()


#: The longest tests, longest first (seconds in CI on a 2-core machine, from ``--durations``): started
#: before everything else, so that the two test processes share them and none starts last while the other
#: process sits idle.  Scheduling only (pyproject's ``--dist load --maxschedchunk 2`` hands tests out in
#: this order, two at a time); a name missing here or there changes no result.
LONGEST_FIRST = (
    "test_committed_report_matches_fresh_run[guard_ablation]",          # ~70 s
    "test_readme_shell_blocks_run_as_printed",                          # ~38 s
    "test_every_command_has_examples_that_run",                         # ~28 s
    "test_committed_report_matches_fresh_run[subnormal_recovery]",      # ~28 s
    "test_committed_report_matches_fresh_run[q_precision]",             # ~20 s
    "test_committed_report_matches_fresh_run[cancellation_threshold]",  # ~19 s
    "test_committed_report_matches_fresh_run[candidate]",               # ~18 s
    "test_committed_report_matches_a_slice_of_fresh_blocks",            # ~14 s (4 blocks of fp32_exhaustive)
    "test_slice_check_passes_on_a_fresh_report_and_fails_on_a_doctored_one",  # ~13 s (its fixture's run)
    "test_sweep_benchmark_prints_both_ratios",                          # ~8 s
    "test_full_sweep_benchmark_times_each_run_and_checks_the_tables",   # ~8 s
    "test_kill_9_then_resume_gives_identical_results",                  # ~8 s
)


def pytest_collection_modifyitems(config, items):
    rank = {name: k for k, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.name, len(rank)))  # stable: the rest keep pytest's order


#: The compiled passes (numba, cached beside their modules), in two sets of about equal compile time
#: (about 11 s each on a cold checkout): loaded once, by two processes side by side, before the test
#: processes start.  Without this every test process and every worker a sweep starts compiles the same
#: passes at once on a fresh checkout (CI's): the committed-report reruns took 72 to 107 s there, 20 to
#: 25 s once the cache exists.
COMPILED_SETS = (
    "from precision.analysis import fused; fused.load()",
    "from precision.machine import arith_fused, ieee_fused, npu_fused; "
    "from precision.operators.sigmoid_focal_loss_grad import oracle_fast; "
    "[m.load() for m in (arith_fused, ieee_fused, npu_fused, oracle_fast)]",
)


def pytest_sessionstart(session):
    """Load (on a fresh checkout: compile) the compiled passes in the controlling process, before pytest-xdist
    starts the test processes (its own sessionstart hook runs after this one); a failure to compile fails
    here, once, with the compiler's message."""
    if hasattr(session.config, "workerinput"):  # a test process: the controller has loaded them
        return
    loaders = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True)
               for code in COMPILED_SETS]
    for code, loader in zip(COMPILED_SETS, loaders):
        _, err = loader.communicate()
        if loader.returncode:
            raise RuntimeError(f"loading the compiled passes failed ({code}):\n{err}")
