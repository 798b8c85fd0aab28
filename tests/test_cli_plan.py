"""Issue 46 through the real entry point (``python -m precision``): every run sized and safe before it starts,
point sets that say what they are, workers, exit statuses and output a CI step can use, commands that run as
printed.  One test (or more) per row of the issue's table; each asserts the exit status, the one line (naming
the key) and, for an error, that nothing was written."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from cli_support import ENV, precision, tree

ROOT = Path(__file__).resolve().parents[1]
ERROR = "precision: error: "


def study(name: str, pred: str, points: str = "", run: str = 'variants = ["kernel"]\nmachines = ["ieee"]\n'
          'per_point = "none"', top: str = "") -> str:
    """A tiny study file's text."""
    return (f'name = "{name}"\n{top}\n[pred]\n{pred}\n[points]\ntarget = [0, 1]\n{points}\n'
            f'[run]\n{run}\n')


def refused(tmp_path, text: str, *extra, name="s.toml"):
    """Run a study file that must be refused: (stderr line, the folder unchanged)."""
    (tmp_path / name).write_text(text)
    before = tree(tmp_path)
    code, out, err = precision("run", name, "--no-cache", *extra, cwd=tmp_path)
    assert (code, out) == (2, ""), err
    assert err.count("\n") == 1 and err.startswith(ERROR) and "Traceback" not in err
    assert tree(tmp_path) == before
    return err[len(ERROR):-1]


# ---------------------------------------------------------------------------
# Row 1: seed = -1
# ---------------------------------------------------------------------------

def test_row1_negative_seed_is_one_line_naming_seed(tmp_path):
    line = refused(tmp_path, study("neg", 'kind = "uniform_real"\nformat = "fp32"\nlow = -1\nhigh = 1\ncount = 10',
                                   top="seed = -1"))
    assert line == ("s.toml: seed: -1; expected a non-negative integer (numpy's random generators take seeds "
                    ">= 0)")


# ---------------------------------------------------------------------------
# Row 2: a study too large for memory, refused before allocating, with its estimate
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("pred", [
    'kind = "stratified"\nformat = "fp32"\nper_binade = 1000000000000',
    'kind = "grid"\nformat = "fp32"\nstart = -1\nstop = 1\nnum = 1000000000000',
    'kind = "uniform_real"\nformat = "fp32"\nlow = -1\nhigh = 1\ncount = 1000000000000',
], ids=["stratified", "grid", "uniform_real"])
def test_row2_a_study_past_the_memory_bound_is_refused_with_its_estimate(tmp_path, pred):
    started = time.perf_counter()
    line = refused(tmp_path, study("huge", pred))
    assert time.perf_counter() - started < 30  # sized, never drawn
    assert re.fullmatch(r"s\.toml: pred: [\d,]+ points \([\d,]+ preds, [\d,]+ scored outputs\) need ~[\d.]+ [TP]B at "
                        r"peak, past the memory bound of [\d.]+ [MGT]B \(50% of this machine's memory\), and ~.+ here; "
                        r"run it in chunks: at least \d+ studies each with a part of pred\.range .*--scheduler.*"
                        r"--memory-limit \(or \$PRECISION_MEMORY_LIMIT\) moves the bound", line), line


def test_row2_the_memory_bound_is_an_option_and_an_environment_variable(tmp_path):
    text = study("small", 'kind = "grid"\nformat = "fp16"\nstart = -4\nstop = 4\nnum = 33')
    line = refused(tmp_path, text, "--memory-limit", "1M")
    assert "past the memory bound of 1.0 MB (--memory-limit)" in line
    (tmp_path / "s.toml").write_text(text)
    code, out, err = precision("run", "s.toml", "--no-cache", cwd=tmp_path,
                               env=dict(ENV, PRECISION_MEMORY_LIMIT="2M"))
    assert code == 2 and "past the memory bound of 2.0 MB ($PRECISION_MEMORY_LIMIT)" in err
    code, out, err = precision("run", "s.toml", "--memory-limit", "lots", cwd=tmp_path)
    assert (code, err) == (2, f"{ERROR}--memory-limit='lots' is not a size; expected a number of bytes or one like "
                              "16G, 512M, 2T\n")


# ---------------------------------------------------------------------------
# Row 3: the size and time up front; generation interruptible
# ---------------------------------------------------------------------------

def test_row3_dry_run_prints_the_plan_and_writes_nothing(tmp_path):
    before = tree(tmp_path)
    code, out, err = precision("run", str(ROOT / "studies" / "quick.toml"), "--dry-run", "--workers", "2",
                               cwd=tmp_path)
    assert (code, err) == (0, "") and tree(tmp_path) == before
    assert re.fullmatch(r"quick: plan: 325,648 points \(40,706 preds\) in 4 tasks, 7,489,904 scored outputs, 40,706 "
                        r"oracle terms before the cache; memory at peak ~[\d.]+ MB; estimated [\d.]+ s on 2 workers "
                        r"\(oracle [\d.]+ s when nothing is cached, evaluation [\d.]+ s\)\n", out), out


def test_row3_a_run_prints_its_plan_first_and_its_counts_match(tmp_path):
    (tmp_path / "s.toml").write_text(study("g", 'kind = "grid"\nformat = "fp16"\nstart = -4\nstop = 4\nnum = 33'))
    code, out, err = precision("run", "s.toml", "--no-cache", "--workers", "1", "--json", "summary.json",
                               cwd=tmp_path)
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("g: plan: 66 points (33 preds) in 1 tasks, 66 scored outputs, 34 oracle terms")
    assert lines[1].startswith("g: 66 points x variants in 1 tasks (0 reused)")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["points"] == summary["plan"]["points"] == 66 and summary["exit_status"] == 0
    assert summary["tasks"] == summary["plan"]["tasks"] == 1 and summary["notes"] == []


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_row3_ctrl_c_while_points_are_drawn_exits_130_within_a_second(tmp_path):
    """5e7 fp32 preds take seconds to draw (they took 177 s before the draw went in blocks); Ctrl-C a second
    after the plan line lands while they are drawn, and the command leaves within a second."""
    (tmp_path / "s.toml").write_text(study("big", 'kind = "stratified"\nformat = "fp32"\nper_binade = 100000'))
    proc = subprocess.Popen([sys.executable, "-m", "precision", "run", "s.toml", "--no-cache", "--memory-limit", "64G"],
                            cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_sigint)
    try:
        plan = proc.stdout.readline()
        assert plan.startswith("big: plan: 101,39")  # the size before the work: about 1e8 points
        time.sleep(1.0)
        os.killpg(proc.pid, signal.SIGINT)
        sent = time.perf_counter()
        out, err = proc.communicate(timeout=30)
        assert time.perf_counter() - sent < 1.5
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert (proc.returncode, out, err) == (130, "", "precision: interrupted; rerun the same command to resume\n")
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------
# Row 4: an empty point set
# ---------------------------------------------------------------------------

def test_row4_windows_at_gamma_2_are_an_empty_point_set(tmp_path):
    line = refused(tmp_path, study("win", 'kind = "windows"\nformat = "fp32"', 'gamma = [2.0]\nprofiles = ["fp32"]'))
    assert line == ("s.toml: pred: the point set is empty (windows need gamma < 0, where the bracket of A cancels; "
                    "gamma = [2]); expected at least one pred value: change the [pred] set or its parameters")


def test_row4_a_list_value_that_overflows_its_format_is_named(tmp_path):
    line = refused(tmp_path, study("ovf", 'kind = "list"\nformat = "fp16"\nvalues = ["1.5", "1e6"]'))
    assert line == ('s.toml: pred.values[1]: 1000000.0 overflows fp16 (largest finite 65504); expected values finite '
                    'in format = "fp16" (drop it, or set a wider format)')


def test_row4_an_empty_range_is_named(tmp_path):
    line = refused(tmp_path, study("e", 'kind = "exhaustive"\nformat = "fp16"\nrange = [0.1, 0.10001]'))
    assert line.startswith("s.toml: pred: the point set is empty (exhaustive over range [0.1, 0.10001] holds no "
                           "finite fp16 value; gamma = [2]); expected at least one pred value")


# ---------------------------------------------------------------------------
# Row 5: preds a profile's format cannot hold
# ---------------------------------------------------------------------------

def test_row5_preds_outside_the_profile_format_are_counted_in_a_note(tmp_path):
    (tmp_path / "s.toml").write_text(study("lossy", 'kind = "grid"\nformat = "fp32"\nstart = -1\nstop = 1\nnum = 10',
                                           'profiles = ["fp16"]'))
    code, out, err = precision("run", "s.toml", "--no-cache", "--workers", "1", cwd=tmp_path)
    assert code == 0 and "lossy: 4 points x variants in 1 tasks" in out
    assert err == ("note: s.toml: pred: 8 of 10 preds (fp32 values) are not fp16 values; profile fp16 runs the 2 that "
                   "are and leaves the others out (a profile of format fp32 runs them all)\n")


def test_row5_nothing_left_for_any_profile_is_refused(tmp_path):
    line = refused(tmp_path, study("none", 'kind = "list"\nformat = "fp32"\nvalues = ["0x1.000002p+0"]',
                                   'profiles = ["fp16"]'))
    assert line == ("s.toml: pred: none of the 1 preds (fp32 values) is a value of the profiles' formats (fp16), so "
                    "nothing is left to run; expected preds the profiles can hold: set pred.format to the profile's "
                    "format or add a profile of format fp32")


# ---------------------------------------------------------------------------
# Row 6: workers capped at the work, warned past the cores
# ---------------------------------------------------------------------------

def test_row6_workers_past_the_cores_are_capped_and_noted(tmp_path):
    (tmp_path / "s.toml").write_text(study("w", 'kind = "grid"\nformat = "fp16"\nstart = -4\nstop = 4\nnum = 33'))
    cores = os.cpu_count()
    code, out, err = precision("run", "s.toml", "--no-cache", "--workers", "200", "--json", "s.json", cwd=tmp_path)
    assert code == 0
    assert err == (f"note: --workers=200 is more than this machine's {cores} cores; capped at 1 (the study's 1 units "
                   "of work and its oracle chunks use no more)\n")
    assert json.loads((tmp_path / "s.json").read_text())["workers"] == 1
    assert "on 1 worker " in out.splitlines()[0]


# ---------------------------------------------------------------------------
# Row 7: an out-of-range target
# ---------------------------------------------------------------------------

def test_row7_explain_refuses_a_target_outside_int32(tmp_path):
    code, out, err = precision("explain", "kernel", "--pred", "1", "--target", "99999999999", cwd=tmp_path)
    assert (code, out) == (2, "")
    assert err == (f"{ERROR}--target='99999999999' is outside int32 [-2147483648, 2147483647]; expected a selector an "
                   "int32 target tensor holds (0 the positive term, 1 the negative)\n")


# ---------------------------------------------------------------------------
# Row 8: printed commands run as printed in bash and zsh
# ---------------------------------------------------------------------------

def _explain_lines():
    from precision.products.report.mechanism import Witness, explain_line
    from precision.products.report.sections.standards import explain_line as standards_line
    w = Witness("kernel[G5=2^-6]", "npu+ftz", "fp32", "0x1.4p+3", 0, (("alpha", "0x1p-2"), ("gamma", "0x1p+1")),
                None, "0x1p+0", 1)
    return [explain_line(w),
            standards_line("kernel[G5=2^-6]", "npu", "fp16", {"pred": 10.0, "target": 1, "alpha": 0.25,
                                                             "gamma": 2.0, "weight": float("nan"), "dout": 1.0})]


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_row8_printed_explain_lines_run_as_printed(tmp_path, shell):
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed here (CI installs it: .ci/run)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "precision").write_text(f"#!/bin/sh\nexec {sys.executable} -m precision \"$@\"\n")
    (bin_dir / "precision").chmod(0o755)
    env = dict(ENV, PATH=f"{bin_dir}{os.pathsep}{ENV['PATH']}")
    for line in _explain_lines():
        assert "'kernel[G5=2^-6]'" in line and " --operator sigmoid_focal_loss_grad " in line, line
        done = subprocess.run([shell, "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and done.stderr == "", (line, done.stderr)
        assert done.stdout.startswith("variant  kernel[G5=2^-6] on ")


# ---------------------------------------------------------------------------
# Rows 9 and 10: the gate (unbounded checks, --quiet, --propose round trip)
# ---------------------------------------------------------------------------

GATE_STUDY = study("g", 'kind = "grid"\nformat = "fp16"\nstart = -12\nstop = 12\nnum = 49',
                   'profiles = ["fp16"]', run='variants = ["kernel", "golden"]\nmachines = ["ieee"]\n'
                                              'per_point = "none"')
BUDGETS = """[gate]
study = "g.toml"
headroom = 1.25

[[budget]]
variant = "kernel"
format = "fp16"
machine = "ieee"
region = "all"
max_ulp = inf
mean_bits = 0.0

[[budget]]
variant = "golden"
format = "fp16"
machine = "ieee"
region = "all"
max_ulp = 0.1
min_share_correct = 0
"""


@pytest.fixture
def gate_files(tmp_path):
    (tmp_path / "g.toml").write_text(GATE_STUDY)
    (tmp_path / "budgets.toml").write_text(BUDGETS)
    return tmp_path


def test_row9_unbounded_checks_are_marked_and_quiet_prints_failures_and_the_summary(gate_files):
    argv = ["gate", "--budgets", "budgets.toml", "--out", "run", "--no-cache", "--workers", "1"]
    code, out, err = precision(*argv, cwd=gate_files)
    lines = out.splitlines()
    assert code == 1 and err == ""
    assert lines[0].startswith("g: plan: 98 points (49 preds) in 1 tasks")
    status = {" ".join(line.split()[1:6]): line.split()[0] for line in lines[1:-1]
              if line.split()[0] in ("PASS", "FAIL", "UNBOUNDED")}
    assert status == {"kernel fp16 ieee all max_ulp": "UNBOUNDED", "kernel fp16 ieee all mean_bits": "PASS",
                      "kernel fp16 ieee all nan": "PASS", "kernel fp16 ieee all inf": "PASS",
                      "kernel fp16 ieee all wrong_sign": "PASS", "kernel fp16 ieee all lost_inf": "PASS",
                      "golden fp16 ieee all max_ulp": "FAIL", "golden fp16 ieee all share_correct": "UNBOUNDED",
                      "golden fp16 ieee all nan": "PASS", "golden fp16 ieee all inf": "PASS",
                      "golden fp16 ieee all wrong_sign": "PASS", "golden fp16 ieee all lost_inf": "PASS"}
    assert re.fullmatch(r"gate: 12 checks of 2 budgets, 9 PASS, 1 FAIL, 0 REGRESSION, 2 UNBOUNDED \(cannot fail\), "
                        r"\d+ can tighten \(budgets\.toml, [\d.]+ s\)", lines[-1])
    code, quiet, err = precision(*argv, "--quiet", cwd=gate_files)
    assert (code, err) == (1, "")
    fail = [line for line in lines if line.startswith("FAIL")]
    assert quiet.splitlines()[:-1] == fail and quiet.splitlines()[-1].startswith("gate: 12 checks of 2 budgets, 9 PASS")


def test_row10_a_proposed_budgets_file_is_accepted_by_the_gate(gate_files):
    argv = ["--out", "run", "--no-cache", "--workers", "1"]
    code, _, err = precision("gate", "--budgets", "budgets.toml", "--propose", "proposed.toml", *argv, cwd=gate_files)
    assert code == 1 and err == ""
    text = (gate_files / "proposed.toml").read_text()
    assert 'machine = "ieee"' in text and "model =" not in text
    code, out, err = precision("gate", "--budgets", "proposed.toml", *argv, cwd=gate_files)
    assert (code, err) == (0, ""), out
    summary = out.splitlines()[-1]
    assert re.match(r"gate: \d+ checks of \d+ budgets, \d+ PASS, 0 FAIL, 0 REGRESSION", summary), summary


# ---------------------------------------------------------------------------
# Row 11: score's exit status for CI
# ---------------------------------------------------------------------------

@pytest.fixture
def device(tmp_path):
    """A stand-in device run: kernel's fp16 outputs on npu, one element made 3 ulps wrong."""
    from precision.operators.sigmoid_focal_loss_grad import evaluate
    rng = np.random.default_rng(0)
    pred = rng.uniform(-8, 8, (4, 8)).astype(np.float16)
    target = rng.integers(0, 2, (4, 8)).astype(np.int32)
    np.savez(tmp_path / "inputs.npz", pred=pred, target=target)
    grad = np.asarray(evaluate("kernel", pred, target, np.ones_like(pred), None, reduction="sum", machine="npu"))
    off = grad.copy()
    off.view(np.int16)[1, 2] += 3
    np.save(tmp_path / "grad.npy", grad)
    np.save(tmp_path / "off.npy", off)
    return tmp_path


def test_row11_score_budgets_and_fail_on_exit_1_when_they_fail(device):
    base = ["score", "--inputs", "inputs.npz", "--reduction", "sum"]
    code, out, err = precision(*base, "--outputs", "off.npy", "--budget", "max_ulp=1", "--fail-on", "specials",
                               cwd=device)
    assert (code, err) == (1, "")
    checks = [line for line in out.splitlines() if line.startswith(("PASS", "FAIL"))]
    assert checks[0].startswith("FAIL off max_ulp observed=") and checks[0].endswith(" limit=1")
    assert checks[1] == "PASS off --fail-on specials: specials=0"
    code, out, _ = precision(*base, "--outputs", "off.npy", "--budget", "max_ulp=1000", "--out", "o2", cwd=device)
    assert code == 0 and [line for line in out.splitlines() if line.startswith(("PASS", "FAIL"))][0].startswith(
        "PASS off max_ulp observed=")
    code, out, _ = precision(*base, "--outputs", "off.npy", "--compare-with", "kernel", "--fail-on", "disagree",
                             "--out", "o3", cwd=device)
    assert code == 1 and "FAIL off --fail-on disagree: disagree=1" in out.splitlines()
    code, out, _ = precision(*base, "--outputs", "grad.npy", "--compare-with", "kernel", "--fail-on", "disagree",
                             "--out", "o4", cwd=device)
    assert code == 0 and "PASS grad --fail-on disagree: disagree=0" in out.splitlines()


def test_row11_bad_budget_and_fail_on_without_comparison_are_one_line(device):
    before = tree(device)
    for argv, line in (
            (["--budget", "ulps=1"], "--budget='ulps=1'; expected METRIC=LIMIT with METRIC one of max_ulp, "),
            (["--fail-on", "hurts"], "--fail-on hurts compares with an emulated variant; add --compare-with VARIANT")):
        code, out, err = precision("score", "--inputs", "inputs.npz", "--outputs", "off.npy", *argv, cwd=device)
        assert (code, out) == (2, "") and err.startswith(ERROR + line) and err.count("\n") == 1
    assert tree(device) == before


# ---------------------------------------------------------------------------
# Row 12: a corrupt chunk: recomputed, said apart, one note line
# ---------------------------------------------------------------------------

def test_row12_a_corrupt_chunk_is_counted_apart_in_one_note(tmp_path):
    (tmp_path / "s.toml").write_text(study("c", 'kind = "grid"\nformat = "fp16"\nstart = -4\nstop = 4\nnum = 33',
                                           'dout = [1.0, 2.0, 0.5, 4.0]'))
    argv = ["run", "s.toml", "--no-cache", "--workers", "1"]
    assert precision(*argv, cwd=tmp_path)[0] == 0
    chunk = sorted((tmp_path / "out" / "c" / "chunks").glob("*.safetensors"))[1]
    data = bytearray(chunk.read_bytes())
    data[-10] ^= 0x55
    chunk.write_bytes(bytes(data))
    code, out, err = precision(*argv, cwd=tmp_path)
    assert code == 0
    assert "c: 264 points x variants in 4 tasks (3 reused, 1 recomputed: its chunk was corrupt)" in out
    assert err == (f"note: out/c/chunks/{chunk.name}: failed its integrity check (digest mismatch); recomputing it\n")


# ---------------------------------------------------------------------------
# Row 13: a closed pipe
# ---------------------------------------------------------------------------

def test_row13_a_closed_pipe_exits_quietly(tmp_path):
    """A reader gone before the command writes (``| true``: certain) and the issue's ``| head -3``: no error line,
    no traceback; the status of a program SIGPIPE ended (141) when the pipe was closed under it."""
    script = (f"{sys.executable} -m precision variants | true; echo variants=${{PIPESTATUS[0]}} >&2; "
              f"{sys.executable} -m precision oracle --pred 1 --target 0 | head -3; echo oracle=${{PIPESTATUS[0]}} >&2")
    done = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
    assert done.stdout.splitlines()[0].startswith("pred    0x1.0000000000000p+0")
    assert len(done.stdout.splitlines()) == 3
    lines = done.stderr.splitlines()
    assert lines[0] == "variants=141" and lines[1] in ("oracle=0", "oracle=141") and len(lines) == 2, done.stderr
