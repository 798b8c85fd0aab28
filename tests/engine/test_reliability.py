"""Reliability: failed writes leave nothing partial, concurrent runs share a cache, and a
catalogue of bad inputs across every entry point is rejected with one line and exit 2."""

import errno
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from precision import PrecisionError, evaluate
from precision.exact.formats import BF16
from precision.cli import main

STUDIES = Path(__file__).resolve().parents[2] / "studies"

TINY = """
name = "tiny"
[pred]
kind = "grid"
format = "fp16"
start = -12
stop = 12
num = 97
[points]
target = [0, 1]
alpha = [0.25]
gamma = [2.0, -1.5]
[run]
variants = ["kernel", "naive"]
machines = ["ieee"]
per_point = "all"
"""


def test_a_full_disk_in_the_process_writing_the_comparisons_is_the_same_one_line(tmp_path, monkeypatch, capsys):
    """With a pool of workers, the comparisons and kept points are written by a process of their own while the
    run's process writes the group tables: a full disk there (and only there) is the run's one-line error, and
    no table is left behind."""
    import os
    from precision.engine import tables
    study = tmp_path / "tiny.toml"
    study.write_text(TINY)
    run = os.getpid()
    real = tables._atomic_parquet

    def full_elsewhere(path, frame):
        if os.getpid() != run and Path(path).name == "paired_raw.parquet":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(path, frame)
    monkeypatch.setattr(tables, "_atomic_parquet", full_elsewhere)
    out = tmp_path / "out"
    assert main(["run", str(study), "--out", str(out), "--no-cache", "--workers", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err
    assert not any(p.suffix in (".csv", ".parquet") for p in out.iterdir())
    assert not any(p.name.startswith(".staging") for p in out.iterdir())
    assert main(["run", str(study), "--out", str(out), "--no-cache", "--workers", "1"]) == 0  # (here: one process)


def test_fork_aside_runs_a_call_in_another_process_and_hands_back_its_result_or_error():
    import os
    from precision.engine.executor import fork_aside
    assert fork_aside(os.getpid).result() != os.getpid()
    assert fork_aside(divmod, 7, 2).result() == (3, 1)
    with pytest.raises(ZeroDivisionError):
        fork_aside(divmod, 1, 0).result()
    with pytest.raises(ChildProcessError, match="status 3"):  # (ended without a word)
        fork_aside(os._exit, 3).result()
    with pytest.raises(RuntimeError, match="cannot be sent back"):  # (a result that cannot be pickled)
        fork_aside(lambda: (lambda: None)).result()
    held = np.arange(5)  # (the child's by the fork, never pickled)
    assert fork_aside(lambda: int(held.sum())).result() == 10


def _mark_warm(folder):
    import os
    Path(folder, f"warm-{os.getpid()}").write_text("")


def _worker_and_warm(args):
    import os
    import time
    folder, seconds = args
    time.sleep(seconds)
    return os.getpid(), Path(folder, f"warm-{os.getpid()}").exists()


def test_warm_runs_once_per_worker_behind_the_work_handed_out(tmp_path):
    """A local pool's ``warm`` call runs in the workers after the work already queued (first in, first out),
    yields nothing to the caller, and a worker's next work finds it done; an inline executor runs nothing."""
    from precision.engine.executor import InlineExecutor, LocalExecutor
    pool = LocalExecutor(2)
    try:
        first = []
        for _, (pid, warm) in pool.map_unordered(_worker_and_warm, [(tmp_path, 0.3), (tmp_path, 0.3)]):
            first.append(warm)
            if len(first) == 1:
                pool.warm(_mark_warm, tmp_path)
        assert first == [False, False]  # (queued behind the work: none ran before it)
        after = [warm for _, (pid, warm) in pool.map_unordered(_worker_and_warm, [(tmp_path, 0.1)] * 4)]
        assert len(after) == 4 and any(after)
        assert 1 <= len(list(tmp_path.glob("warm-*"))) <= 2
    finally:
        pool.close()
    InlineExecutor().warm(_mark_warm, tmp_path / "none")  # (no folder: it would fail if it ran)


def test_the_idle_load_lowers_its_own_thread_only(tmp_path):
    """The workers' load behind the oracle's chunks runs at the lowest priority in a thread of its own: the
    process's own priority is unchanged after it, and the passes are loaded."""
    import subprocess
    import sys
    script = """
import os
from precision.analysis import fused
from precision.engine import sweep
before = os.getpriority(os.PRIO_PROCESS, 0)
sweep._load_compiled_idly(("ieee", "npu"))
print(before, os.getpriority(os.PRIO_PROCESS, 0), len(fused._reduce.signatures) > 0)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    before, after, loaded = done.stdout.split()
    assert before == after and loaded == "True"


def test_full_disk_leaves_no_partial_tables(tmp_path, monkeypatch, capsys):
    from precision.engine import tables
    study = tmp_path / "tiny.toml"
    study.write_text(TINY)
    real = tables._atomic_csv

    def failing(path, frame):
        if path.name == "by_gamma.csv":
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, frame)
    monkeypatch.setattr(tables, "_atomic_csv", failing)
    out = tmp_path / "out"
    assert main(["run", str(study), "--out", str(out), "--no-cache", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err and "nothing was written" in err
    assert sorted(p.name for p in out.iterdir()) == ["chunks"]  # no table, no staging folder
    monkeypatch.setattr(tables, "_atomic_csv", real)
    assert main(["run", str(study), "--out", str(out), "--no-cache", "--workers", "1"]) == 0
    assert (out / "summary.csv").exists() and (out / "by_gamma.csv").exists()


def test_a_full_disk_while_the_raw_tables_are_written_beside_the_others_is_the_same_one_line(tmp_path, monkeypatch,
                                                                                             capsys):
    """hist.npz and groups_raw.parquet are written on a thread while the tables are merged: its failure is the
    run's own one line, nothing written, the next run whole."""
    from precision.engine import cache, tables
    study = tmp_path / "tiny.toml"
    study.write_text(TINY)
    real = cache.atomic_write_npz

    def failing(path, arrays, durable=True):
        if Path(path).name == "hist.npz":
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, arrays, durable)
    monkeypatch.setattr(tables, "atomic_write_npz", failing)
    out = tmp_path / "out"
    assert main(["run", str(study), "--out", str(out), "--no-cache", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No space left on device" in err and "nothing was written" in err
    assert sorted(p.name for p in out.iterdir()) == ["chunks"]
    monkeypatch.setattr(tables, "atomic_write_npz", real)
    assert main(["run", str(study), "--out", str(out), "--no-cache", "--workers", "1"]) == 0
    assert (out / "hist.npz").exists() and (out / "groups_raw.parquet").exists() and (out / "summary.csv").exists()


def test_read_only_output_folder_leaves_no_partial_tables(tmp_path, monkeypatch, capsys):
    # (root ignores permission bits, so the read-only folder is simulated where the tables move in)
    from precision.engine import sweep
    study = tmp_path / "tiny.toml"
    study.write_text(TINY)
    real = sweep.os.replace

    def read_only(src, dst):
        if Path(dst).parent.name == "out" and Path(dst).name.endswith(".csv"):
            raise OSError(errno.EROFS, "Read-only file system")
        return real(src, dst)
    monkeypatch.setattr(sweep.os, "replace", read_only)
    out = tmp_path / "out"
    assert main(["run", str(study), "--out", str(out), "--no-cache", "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Read-only file system" in err
    assert not any(p.suffix == ".csv" for p in out.iterdir())
    assert not any(p.name.startswith(".staging") for p in out.iterdir())


def test_two_concurrent_runs_share_a_cache(tmp_path):
    study = tmp_path / "tiny.toml"
    study.write_text(TINY)
    cache = tmp_path / "cache"
    procs = [subprocess.Popen([sys.executable, "-m", "precision.cli", "run", str(study), "--out",
                               str(tmp_path / f"o{i}"), "--cache-dir", str(cache), "--workers", "1"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for i in range(2)]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    assert main(["run", str(study), "--out", str(tmp_path / "ref"), "--no-cache", "--workers", "1"]) == 0
    for i in range(2):
        for name in ("summary.csv", "groups.csv"):
            pd.testing.assert_frame_equal(pd.read_csv(tmp_path / f"o{i}" / name),
                                          pd.read_csv(tmp_path / "ref" / name), check_exact=True)
    from precision.engine.cache import TermCache
    assert TermCache(cache).info()["entries"] > 0


# ---------------------------------------------------------------------------
# The catalogue of bad inputs
# ---------------------------------------------------------------------------

def _study(edit):
    return edit(TINY)


BAD_STUDIES = {
    "syntax error": lambda t: t.replace('name = "tiny"', 'name = "tiny'),
    "unknown key": lambda t: t.replace("[run]", "[run]\ncolor = 1"),
    "wrong type": lambda t: t.replace("num = 97", 'num = "97"'),
    "empty axis": lambda t: t.replace("gamma = [2.0, -1.5]", "gamma = []"),
    "unknown variant": lambda t: t.replace('"naive"]', '"naïve"]'),
    "unknown machine": lambda t: t.replace('machines = ["ieee"]', 'machines = ["tpu"]'),
    "NaN gamma": lambda t: t.replace("gamma = [2.0, -1.5]", "gamma = [nan]"),
    "inf alpha": lambda t: t.replace("alpha = [0.25]", "alpha = [inf]"),
    "invalid reduction": lambda t: t.replace("[points]", '[points]\nreduction = "avg"'),
    "count <= 0": lambda t: t.replace("[points]", '[points]\nreduction = "mean"\ncount = 0'),
    "hex that does not parse": lambda t: t.replace('kind = "grid"', 'kind = "list"\nvalues = ["0x1.zp+0"]')
                                          .replace("start = -12\nstop = 12\nnum = 97\n", ""),
    "missing pred": lambda t: t.replace("[pred]", "[other]"),
    "bad profile": lambda t: t.replace("[points]", '[points]\nprofiles = ["fp64"]'),
    "bad per_point": lambda t: t.replace('per_point = "all"', 'per_point = "some"'),
    "name escaping the output folder": lambda t: t.replace('name = "tiny"', 'name = "../tiny"'),
}


@pytest.mark.parametrize("case", sorted(BAD_STUDIES))
def test_bad_study_files(case, tmp_path, capsys):
    study = tmp_path / "s.toml"
    study.write_text(_study(BAD_STUDIES[case]))
    out = tmp_path / "out"
    assert main(["run", str(study), "--out", str(out), "--no-cache"]) == 2, case
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("precision: error:") and "Traceback" not in err
    assert str(study) in err and not out.exists()


BAD_CLI = [
    ["oracle", "--pred", "0x1.gp+0", "--target", "0"],
    ["oracle", "--pred", "1", "--target", "0", "--weight", "inf"],
    ["oracle", "--pred", "1", "--target", "0.5"],
    ["oracle", "--pred", "1", "--target", "0", "--count", "-3"],
    ["run"],
    ["run", "/nonexistent/study.toml"],
    ["run", str(STUDIES / "quick.toml"), "--workers", "0"],
    ["run", str(STUDIES / "quick.toml"), "--scheduler", "udp://nowhere"],
    ["gate", "--budgets", "/nonexistent/budgets.toml"],
    ["cache", "wipe"],
    ["report", "no_such_study", "--runs", "/nonexistent"],
    ["frobnicate"],
]


@pytest.mark.parametrize("argv", BAD_CLI, ids=[" ".join(a) for a in BAD_CLI])
def test_bad_command_lines(argv, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("precision: error:") and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # nothing written


def _ok():
    x = np.float32([[0.5, -1.0]])
    return dict(pred=x, target=np.int32([[0, 1]]), dout=np.ones_like(x))


BAD_CALLS = {
    "rank 1": dict(pred=np.float32([0.5, 1.0]), target=np.int32([0, 1]), dout=np.float32([1, 1])),
    "mismatched shapes": dict(dout=np.ones((2, 2), np.float32)),
    "float64 pred": dict(pred=np.float64([[0.5, -1.0]])),
    "int64 target": dict(target=np.int64([[0, 1]])),
    "empty tensor": dict(pred=np.zeros((0, 2), np.float32), target=np.zeros((0, 2), np.int32),
                         dout=np.zeros((0, 2), np.float32)),
    "bf16 weight": dict(weight=np.ones((1, 2), dtype=BF16.dtype)),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_operator_calls(case):
    args = _ok()
    args.update(BAD_CALLS[case])
    with pytest.raises(PrecisionError) as info:
        evaluate("kernel", args["pred"], args["target"], args["dout"], args.get("weight"))
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("kwargs", [dict(alpha=float("nan")), dict(gamma=float("inf")), dict(reduction="avg"),
                                    dict(machine="gpu")])
def test_bad_operator_attributes(kwargs):
    a = _ok()
    with pytest.raises(PrecisionError) as info:
        evaluate("kernel", a["pred"], a["target"], a["dout"], **kwargs)
    assert "\n" not in str(info.value)


def test_catalogue_size():
    assert len(BAD_STUDIES) + len(BAD_CLI) + len(BAD_CALLS) + 4 >= 30


def test_no_pickle_anywhere():
    root = Path(__file__).resolve().parents[2] / "precision"
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert "allow_pickle=True" not in text and "import pickle" not in text, path


def _write_slowly(path: str) -> None:
    """A pool worker's life until the parent stops it: mid-write of a file (the initializer's handlers set)."""
    import time

    from precision.engine.executor import _worker_signals
    from precision.io.files import atomic_open
    _worker_signals()
    with atomic_open(path, "wb") as fh:
        fh.write(b"partial")
        fh.flush()
        time.sleep(60)


def test_a_worker_stopped_mid_write_leaves_no_temporary_file(tmp_path):
    """The parent's Ctrl-C stops its workers with SIGTERM: one that is writing a cache entry or chunk removes
    its temporary file and exits 128 + 15; the target is never created."""
    import multiprocessing
    import os
    import signal
    import time
    target = tmp_path / "entry.safetensors"
    worker = multiprocessing.get_context("fork").Process(target=_write_slowly, args=(str(target),))
    worker.start()
    deadline = time.time() + 30
    while time.time() < deadline and not list(tmp_path.glob("*.tmp")):
        time.sleep(0.01)
    assert len(list(tmp_path.glob("*.tmp"))) == 1  # writing
    os.kill(worker.pid, signal.SIGTERM)
    worker.join(30)
    assert worker.exitcode == 128 + signal.SIGTERM
    assert list(tmp_path.iterdir()) == []
