"""Tests of the precision command line (exit codes, output, one-line errors)."""

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import precision as precision_module
from precision.cli import _build_parser, main

from cli_support import ENV, precision, run, tree



class TestOracleCommand:
    def test_reference_example(self, capsys):
        code, out, err = run(capsys, "oracle", "--pred", "-0x1.4p+0", "--target", "0", "--alpha", "0.25",
                             "--gamma", "2", "--dout", "-0x1.8p+0", "--count", "6")
        assert code == 0 and err == ""
        lines = dict(line.split(None, 1) for line in out.splitlines())
        assert lines["exact"] == "0.05461392877887468806393589751893640399408"
        assert lines["fp32"].split()[0] == "0x1.bf65b60000000p-5"
        assert lines["fp16"].split()[0] == "0x1.bf80000000000p-5"
        assert lines["bf16"].split()[0] == "0x1.c000000000000p-5"
        assert lines["fp64"].split()[0] == "0x1.bf65b5c05ce5bp-5"

    @pytest.mark.parametrize("argv,word", [
        (["oracle", "--pred", "abc", "--target", "0"], "--pred"),
        (["oracle", "--target", "0"], "--pred"),
        (["oracle", "--pred", "1", "--target", "0", "--count", "0"], "--count"),
        (["oracle", "--pred", "nan", "--target", "0"], "finite"),
        (["oracle", "--pred", "1", "--target", "x"], "--target"),
        (["oracle", "--pred", "0x1.gp+0", "--target", "0"], "hex"),
        (["oracle", "--pred", "1", "--target", "0", "--gamma", "1e39"], "float32"),
        (["nosuchcommand"], "invalid choice"),
    ])
    def test_bad_arguments_one_line_exit_2(self, capsys, argv, word):
        code, out, err = run(capsys, *argv)
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and word in err and "Traceback" not in err

    def test_console_script_exit_status(self, tmp_path):
        code, out, err = precision("oracle", "--pred", "bad", "--target", "0", cwd=tmp_path)
        assert (code, out) == (2, "") and err == ("precision: error: --pred='bad' is not a number; expected a hex "
                                                  "float like -0x1.4p+0 or a decimal\n")


# ---------------------------------------------------------------------------
# The real entry point: one line, exit 2, nothing written (issue 17)
# ---------------------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]

TINY = """
name = "tiny"
[pred]
kind = "grid"
format = "fp16"
start = -12
stop = 12
num = 49
[points]
target = [0, 1]
alpha = [0.25]
gamma = [2.0]
profiles = ["fp32"]
[run]
variants = ["kernel", "naive"]
machines = ["ieee"]
per_point = "none"
"""




@pytest.fixture
def workdir(tmp_path):
    """A working folder holding a file named FILE (where a folder is expected) and a tiny study."""
    (tmp_path / "FILE").write_text("not a folder\n")
    (tmp_path / "tiny.toml").write_text(TINY)
    return tmp_path


class TestPathsCheckedUpFront:
    """Each case the issue lists: exit 2, the one line, no traceback, nothing written."""

    FILE_AS_FOLDER = "is a file; expected a folder (give a folder path or move the file)"

    CASES = [
        (["report", "quick", "--out", "FILE"], f"--out=FILE {FILE_AS_FOLDER}"),
        (["report", "--all", "--out", "FILE"], f"--out=FILE {FILE_AS_FOLDER}"),
        (["run", "tiny.toml", "--cache-dir", "FILE"], f"--cache-dir=FILE {FILE_AS_FOLDER}"),
        (["cache", "info", "--cache-dir", "FILE"], f"--cache-dir=FILE {FILE_AS_FOLDER}"),
        (["cache", "clear", "--cache-dir", "FILE"], f"--cache-dir=FILE {FILE_AS_FOLDER}"),
        (["run", "tiny.toml", "--out", "FILE"], f"--out=FILE {FILE_AS_FOLDER}"),
        (["run", "tiny.toml", "--out", "FILE/tiny"],
         "--out=FILE/tiny: cannot create the folder, {cwd}/FILE is a file; expected a folder path"),
        (["report", "tiny", "--runs", "FILE"], f"--runs=FILE {FILE_AS_FOLDER}"),
        (["gate", "--update-baseline"],
         "--update-baseline needs --baseline FILE, the file to write (e.g. --baseline gate_baseline.json)"),
        (["gate", "--budgets", "FILE", "--junit", "nowhere/gate.xml"],
         "--junit=nowhere/gate.xml: the folder nowhere does not exist; create it or give another path"),
        (["gate", "--budgets", "nosuch.toml"], "--budgets=nosuch.toml: no such file; expected an existing file"),
        (["oracle", "--check", "--pred", "1"],
         "oracle --check takes no point (--pred given); it checks random points and hard cases: drop --check to "
         "evaluate one point"),
        (["oracle", "--pred", "1", "--target", "0", "--seed", "3"],
         "oracle: --seed applies to --check only; add --check or drop it"),
        # outputs where no file can be created although the permission bits say yes (root, /proc): a probe
        (["report", "quick", "--out", "/proc/x"], "--out=/proc/x: cannot create the folder, /proc is not writable"),
        (["diff", ".", ".", "--out", "/proc/x"], "--out=/proc/x: cannot create the folder, /proc is not writable"),
        (["score", "--inputs", "tiny.toml", "--outputs", "tiny.toml", "--out", "/proc/x"],
         "--out=/proc/x: cannot create the folder, /proc is not writable"),
        (["gate", "--budgets", "FILE", "--json", "/proc/x.json"],
         "--json=/proc/x.json: cannot write there (permission denied)"),
        (["hunt", "candidate", "--points", "100", "--corpus", "/proc/c.txt"],
         "--corpus=/proc/c.txt: cannot write there (permission denied)"),
        (["gate", "--budgets", "FILE", "--baseline", "gate_baseline.json"],
         "--baseline=gate_baseline.json: no such file; write it once with 'precision gate --baseline "
         "gate_baseline.json --update-baseline' (on the main branch) and commit it"),
        (["run", "tiny.toml", "--report", "--out", "elsewhere"],
         "--report with --out=elsewhere: the report reads RUNS/tiny, so the run folder must be named tiny; use "
         "--out DIR/tiny or drop --out"),
    ]

    @pytest.mark.parametrize("argv, line", CASES, ids=[" ".join(argv) for argv, _ in CASES])
    def test_one_line_exit_2_nothing_written(self, workdir, argv, line):
        before = tree(workdir)
        started = time.perf_counter()
        code, out, err = precision(*argv, cwd=workdir)
        assert (code, out, err) == (2, "", f"precision: error: {line.format(cwd=workdir)}\n")
        assert tree(workdir) == before
        assert time.perf_counter() - started < 60  # report --all no longer runs a study before failing

    def test_cache_env_variable_naming_a_file(self, workdir):
        code, out, err = precision("cache", "info", cwd=workdir, env=dict(ENV, PRECISION_CACHE_DIR="FILE"))
        assert (code, out) == (2, "")
        assert err == f"precision: error: $PRECISION_CACHE_DIR=FILE {self.FILE_AS_FOLDER}\n"

    def test_cache_info_and_clear_never_create_the_folder(self, workdir):
        for action in ("info", "clear"):
            code, out, err = precision("cache", action, "--cache-dir", "new/cache", cwd=workdir)
            assert code == 0 and err == "" and not (workdir / "new").exists()
        assert "terms   0 shards" in precision("cache", "info", "--cache-dir", "new/cache", cwd=workdir)[1]


class TestUsage:
    COMMANDS = tuple(_build_parser().commands)  # every command, each held to the same standard

    def test_start_up_leaves_out_what_few_commands_need(self):
        """The command line starts without ml_dtypes (bf16 only, 0.8 s to import) and scipy (the sign test
        only, 0.15 s): every ``precision`` call, test and worker pays its imports."""
        code = "import sys, precision.cli; print(sorted({'ml_dtypes', 'scipy'} & {m.split('.')[0] for m in sys.modules}))"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV)
        assert (done.returncode, done.stdout) == (0, "[]\n"), done.stderr

    def test_no_command(self, tmp_path):
        code, out, err = precision(cwd=tmp_path)
        assert (code, out) == (2, "")
        assert {"oracle", "run", "gate", "report", "hunt", "cache"} <= set(self.COMMANDS)
        assert err == (f"precision: error: no command; expected one of {', '.join(self.COMMANDS)} "
                       "(see 'precision --help')\n")

    def test_subcommand_usage_error_has_one_prefix_and_a_hint(self, tmp_path):
        code, out, err = precision("run", cwd=tmp_path)
        assert (code, out) == (2, "")
        assert err == ("precision: error: run: the following arguments are required: STUDY.toml "
                       "(see 'precision run --help')\n")

    def test_version(self, tmp_path):
        assert precision("--version", cwd=tmp_path) == (0, f"precision {precision_module.__version__}\n", "")

    def test_top_level_help_lists_every_command_with_an_example(self, capsys):
        with pytest.raises(SystemExit) as exc:
            main(["--help"])
        out = capsys.readouterr().out
        assert exc.value.code == 0
        assert all(f"\n    {name} " in out for name in self.COMMANDS)
        assert "examples:\n  precision run studies/quick.toml && precision report quick" in out

    @pytest.mark.parametrize("command", COMMANDS)
    def test_every_command_has_a_description_an_example_and_its_defaults(self, command, capsys):
        with pytest.raises(SystemExit) as exc:
            main([command, "--help"])
        page = capsys.readouterr().out
        assert exc.value.code == 0
        usage, description = page.split("\n\n")[:2]
        assert usage.startswith(f"usage: precision {command}") and len(description) > 80
        examples = page.split("examples:\n", 1)[1].split("\n\n")[0].splitlines()  # a setup note may follow
        assert examples and all(line.startswith(f"  precision {command}") for line in examples)
        parser = _build_parser().commands[command]
        for action in parser._actions:
            if not action.option_strings or action.nargs == 0:  # positionals, flags, --help
                continue
            shown = parser.formatter_class("x")._get_help_string(action)  # the text --help prints
            assert "default" in shown or "required" in shown, (command, action.dest)

    def test_oracle_shows_its_point_defaults(self, capsys):
        with pytest.raises(SystemExit):
            main(["oracle", "--help"])
        page = capsys.readouterr().out
        for option, default in (("--alpha ALPHA", "0.25"), ("--gamma GAMMA", "2.0"), ("--weight WEIGHT", "1.0"),
                                ("--dout DOUT", "1.0"), ("--count N", "1"), ("--points N", "10000"),
                                ("--seed SEED", "0")):
            assert option_help(page, option).endswith(f"(default: {default})"), option


def option_help(page: str, option: str) -> str:
    """An option's help text in a --help page, its wrapped lines joined."""
    lines = page.splitlines()
    i = next(i for i, line in enumerate(lines) if line.startswith(f"  {option}"))
    text = [lines[i]] + list(itertools.takewhile(lambda line: line.startswith("    "), lines[i + 1:]))
    return " ".join(" ".join(text).split())


class TestOracleNotes:
    def test_unrepresentable_pred_gets_a_note(self, capsys):
        code, out, err = run(capsys, "oracle", "--pred", "1e40", "--target", "0")
        assert code == 0 and err == ""
        assert out.splitlines()[-1] == ("note: pred=1e+40 overflows fp16, bf16, fp32; the values above are for "
                                        "this float64 pred, which an fp16/bf16/fp32 tensor cannot hold")

    def test_inexact_dout_gets_a_note(self, capsys):
        code, out, _ = run(capsys, "oracle", "--pred", "2", "--target", "1", "--dout", "0.1")
        notes = [line for line in out.splitlines() if line.startswith("note:")]
        assert code == 0 and notes == ["note: dout=0.1 is not exact in fp16, bf16, fp32; the values above are "
                                       "for this float64 dout, which an fp16/bf16/fp32 tensor cannot hold"]

    def test_exact_inputs_get_no_note(self, capsys):
        code, out, _ = run(capsys, "oracle", "--pred", "-0x1.4p+0", "--target", "0", "--dout", "70000")
        assert code == 0 and [line for line in out.splitlines() if line.startswith("note:")] == [
            "note: dout=70000.0 overflows fp16 and is not exact in bf16; the values above are for this float64 "
            "dout, which an fp16/bf16 tensor cannot hold"]
        code, out, _ = run(capsys, "oracle", "--pred", "-0x1.4p+0", "--target", "0")
        assert "note:" not in out


class TestRunAndReportOutputs:
    def test_run_names_its_tables_and_the_report_command(self, workdir, monkeypatch, capsys):
        monkeypatch.chdir(workdir)
        assert main(["run", "tiny.toml", "--no-cache", "--workers", "1"]) == 0
        last = capsys.readouterr().out.splitlines()[-1]
        assert last == "tiny: tables -> out/tiny/summary.csv (review report: precision report tiny)"

    def test_run_with_report_ends_naming_report_html(self, workdir, monkeypatch, capsys):
        monkeypatch.chdir(workdir)
        assert main(["run", "tiny.toml", "--no-cache", "--workers", "1", "--report"]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[-2:] == ["tiny: tables -> out/tiny/summary.csv", "tiny: report -> out/reports/tiny/report.html"]
        assert (workdir / "out/reports/tiny/report.html").is_file()
        assert not (workdir / "reports").exists()
        # the report command's default output is out/reports too, never the committed reports/
        assert main(["report", "tiny"]) == 0
        assert capsys.readouterr().out == "tiny: report -> out/reports/tiny/report.html\n"
        assert not (workdir / "reports").exists()


# ---------------------------------------------------------------------------
# Ctrl-C
# ---------------------------------------------------------------------------

SIGINT_STUDY = """
name = "sigint"
[pred]
kind = "exhaustive"
format = "fp16"
range = [-12, 12]
[points]
target = [0, 1]
alpha = [0.25]
gamma = [2.0]
dout = [1.0, 0.5, 2.0, 0.25, 4.0, 0.125, 8.0, 3.0]
profiles = ["fp32"]
[run]
variants = ["kernel", "naive", "golden", "mmcv"]
machines = ["ieee", "npu"]
per_point = "none"
"""


def _default_sigint():  # the child handles Ctrl-C even if this test runs with SIGINT ignored
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("workers", ["1", "2"])
def test_ctrl_c_exits_130_with_one_line_and_the_rerun_resumes(tmp_path, workers):
    (tmp_path / "sigint.toml").write_text(SIGINT_STUDY)
    argv = [sys.executable, "-m", "precision", "run", "sigint.toml", "--cache-dir", "cache", "--workers", workers]
    # a session of its own, signalled as a whole: what Ctrl-C on a terminal does (workers included)
    proc = subprocess.Popen(argv, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=_default_sigint)
    chunks = tmp_path / "out" / "sigint" / "chunks"
    deadline = time.time() + 240
    while time.time() < deadline and proc.poll() is None and not list(chunks.glob("*.safetensors")):
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (130, "precision: interrupted; rerun the same command to resume\n")
    assert len(out.splitlines()) == 1 and out.startswith("sigint: plan: 1,212,480 points (37,890 preds) in 16 tasks")
    done = list(chunks.glob("*.safetensors"))
    assert 1 <= len(done) < 16  # interrupted while working, with finished tasks kept
    leftovers = [p for p in tmp_path.rglob("*")
                 if p.name.endswith(".tmp") or p.name.startswith((".staging", ".terms-"))]
    assert leftovers == [] and not (tmp_path / "out" / "sigint" / "summary.csv").exists()
    rerun = subprocess.run(argv, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=240)
    assert rerun.returncode == 0 and rerun.stderr == ""
    assert json.loads((tmp_path / "out" / "sigint" / "run.json").read_text())["tasks_reused"] == len(done)
    assert (tmp_path / "out" / "sigint" / "summary.csv").is_file()


@pytest.fixture
def immutable(tmp_path):
    """A folder nobody may write into, root included (chattr +i); skipped where the file system has no such flag."""
    folder = tmp_path / "locked"
    folder.mkdir()
    if subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not available here")
    yield folder
    subprocess.run(["chattr", "-i", str(folder)], check=True)


class TestOutputsProbedBeforeWork:
    """An output path is checked by creating a file there before any work, and an OSError that still comes later
    is one line and exit 2."""

    def test_hunt_corpus_in_an_immutable_folder(self, workdir, immutable):
        started = time.perf_counter()
        code, out, err = precision("hunt", "candidate", "--seconds", "30", "--corpus", str(immutable / "c.txt"),
                                   cwd=workdir)
        assert (code, out) == (2, "") and err == (f"precision: error: --corpus={immutable}/c.txt: cannot write "
                                                  "there (permission denied)\n")
        assert time.perf_counter() - started < 20  # refused before the 30-second hunt

    def test_report_into_an_immutable_folder(self, workdir, immutable):
        code, out, err = precision("report", "quick", "--out", str(immutable), cwd=workdir)
        assert (code, out) == (2, "")
        assert err == f"precision: error: --out={immutable}: the folder is not writable; expected a folder you can " \
                      "write to\n"

    def test_a_later_os_error_is_one_line_exit_2(self, capsys, monkeypatch):
        """A path that passes its check and fails during the work (a disk filled meanwhile)."""
        def full(*args, **kwargs):
            raise OSError(28, "No space left on device", "out/x")
        monkeypatch.setattr("precision.operators.sigmoid_focal_loss_grad.round_exact", full)
        code, out, err = run(capsys, "oracle", "--pred", "1", "--target", "0")
        assert (code, err) == (2, "precision: error: out/x: No space left on device\n")


@pytest.mark.parametrize("delay", [0.25, 0.3])
def test_ctrl_c_during_start_up_is_one_line_and_130(tmp_path, delay):
    """Ctrl-C while the modules still load (about 0.5 s of imports): the same one line, no traceback, nothing
    written (test_ctrl_c_exits_130_with_one_line_and_the_rerun_resumes interrupts a run that has begun).

    Not before 0.25 s: earlier, on a loaded machine, the signal can arrive while the interpreter itself
    starts (importing ``site``), before any line of the program runs.  Not at 0.4 s: on an idle machine the
    imports can be done by then and the run begun (it writes its folder), which the other test covers."""
    proc = subprocess.Popen([sys.executable, "-m", "precision", "run", str(ROOT / "studies" / "quick.toml"),
                             "--out", str(tmp_path / "x"), "--no-cache"], cwd=tmp_path, env=ENV,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=_default_sigint)
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, out, err) == (130, "", "precision: interrupted; rerun the same command to resume\n")
    assert not (tmp_path / "x").exists()
