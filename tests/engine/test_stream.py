"""Streamed studies: every fp32 in a range, in blocks; equal to the same points run whole, resumable, bounded."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from precision.cli import main
from precision.engine.estimate import plan_study
from precision.engine.study import STREAM_BLOCK, parse_study
from precision.engine.stream import block_preds, study_blocks
from precision.engine.sweep import run_study
from precision.errors import StudyFileError
from precision.exact.formats import get_format

STREAMED = """
name = "slice"
[pred]
kind = "exhaustive"
format = "fp32"
range = [{lo}, {hi}]
{block}
[points]
target = [0, 1]
alpha = [0.25]
gamma = [2.0, -1.5]
profiles = ["fp32"]
regions = [-8, 0, 8, 16.01]
[run]
variants = {variants}
machines = ["ieee", "npu"]
per_point = "worst"
"""

TABLES = ("summary.csv", "by_region.csv", "by_gamma.csv", "groups.csv", "comparisons.csv", "standards.csv",
          "extents.csv")


def streamed(lo, hi, block="", variants='["candidate", "naive", "naive+G3"]'):
    return STREAMED.format(lo=lo, hi=hi, block=block, variants=variants)


def as_list(text: str, values) -> str:
    """The same study with its points given as a list (run whole, in memory)."""
    listed = ", ".join(f'"{float(v).hex()}"' for v in values)
    head, _, rest = text.partition("[pred]")
    pred, _, tail = rest.partition("[points]")
    return f'{head}[pred]\nkind = "list"\nformat = "fp32"\nvalues = [{listed}]\n[points]{tail}'


def tables(out: Path) -> dict:
    return {name: pd.read_csv(out / name) for name in TABLES}


def assert_tables_equal(a: dict, b: dict, exact=True):
    for name in a:
        if exact:
            pd.testing.assert_frame_equal(a[name], b[name], check_exact=True, obj=name)
        else:  # float sums added in another order: equal to 1e-12
            pd.testing.assert_frame_equal(a[name], b[name], check_exact=False, rtol=1e-12, obj=name)


# ---------------------------------------------------------------------------
# Positions of the finite values
# ---------------------------------------------------------------------------

def test_positions_enumerate_every_finite_fp16_value_in_order():
    fmt = get_format("fp16")
    every = fmt.finite_values().astype(np.float64)
    ordered = every[np.lexsort((~np.signbit(every), every))]  # ascending, -0 before +0
    assert fmt.values_at(0, fmt.finite_count).astype(np.float64).view(np.int64).tolist() == \
        ordered.view(np.int64).tolist()
    rng = np.random.default_rng(3)
    for lo, hi in [*rng.uniform(-70000, 70000, (200, 2)), (0.0, 0.0), (-0.0, 1e-9), (2.0**-24, 2.0**-24),
                   (65504.0, 1e9), (-1e9, -65504.0), (3.3, 3.3)]:
        lo, hi = min(lo, hi), max(lo, hi)
        start, stop = fmt.finite_positions(lo, hi)
        want = every[(every >= lo) & (every <= hi)]
        got = fmt.values_at(start, max(start, stop)).astype(np.float64)
        assert sorted(got.view(np.int64).tolist()) == sorted(want.view(np.int64).tolist()), (lo, hi)


def test_fp32_positions_and_blocks():
    fmt = get_format("fp32")
    assert fmt.finite_positions() == (0, 4_278_190_080)
    assert fmt.values_at(0, 1)[0] == -fmt.max_finite and fmt.values_at(4_278_190_079, 4_278_190_080)[0] == fmt.max_finite
    zeros = fmt.values_at(2_139_095_039, 2_139_095_041)
    assert zeros.view(np.uint32).tolist() == [0x80000000, 0]
    study = parse_study(streamed(-3.4e38, 3.4e38).replace("range = [-3.4e+38, 3.4e+38]", ""), "s.toml")
    blocks = study_blocks(study)
    assert len(blocks) == 2040 and all(b - a == STREAM_BLOCK for a, b in blocks)
    assert (2_139_095_040, 2_139_095_040 + STREAM_BLOCK) in blocks  # one block starts at +0: none straddles zero
    plan = plan_study(study)
    assert plan.preds == 4_278_190_080 and plan.units == 2040 and plan.tasks == 2040 * 2 * 2  # gammas x machines
    assert plan.memory_bytes < 8 << 30  # bounded by the blocks, not by the 4.3e9 preds


# ---------------------------------------------------------------------------
# The study file
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("edit, key", [
    (lambda t: t.replace('[pred]', '[[pred]]').replace('[points]', '[[pred]]\nkind = "list"\nvalues = ["1.0"]\n[points]'),
     "pred"),
    (lambda t: t.replace('profiles = ["fp32"]', 'profiles = ["fp32", "fp16"]'), "points.profiles"),
    (lambda t: t.replace('per_point = "worst"', 'per_point = "worst"\nattribution = true'), "run.attribution"),
    (lambda t: t.replace('format = "fp32"', 'format = "fp32"\nblock = 3000'), "pred.block"),
    (lambda t: t.replace('format = "fp32"', 'format = "fp16"\nblock = 4096'), "pred.block"),
])
def test_a_streamed_set_refuses_what_it_cannot_run(edit, key):
    with pytest.raises(StudyFileError) as info:
        parse_study(edit(streamed(1.0, 2.0)), "s.toml")
    assert f"s.toml: {key}" in str(info.value) and "\n" not in str(info.value)


def test_an_empty_range_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "s.toml").write_text(streamed('"0x1.0000021p+0"', '"0x1.0000029p+0"'))
    assert main(["run", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"), "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "point set is empty" in err and not (tmp_path / "o" / "summary.csv").exists()


# ---------------------------------------------------------------------------
# The same tables as the points run whole
# ---------------------------------------------------------------------------

def test_one_block_gives_the_tables_of_the_same_points_run_whole(tmp_path):
    """One block is one tile: every table equals the in-memory run's bit for bit (kernel's G4 included)."""
    text = streamed(16.0, 16.125, variants='["kernel", "candidate", "kernel-G3"]')
    study = parse_study(text, "s.toml")
    preds = block_preds(study, study_blocks(study)[0])
    assert len(study_blocks(study)) == 1 and preds.size == 65_537
    run_study(study, tmp_path / "stream", workers=2)
    run_study(parse_study(as_list(text, preds), "l.toml"), tmp_path / "whole", workers=2, use_cache=False)
    assert_tables_equal(tables(tmp_path / "stream"), tables(tmp_path / "whole"))
    ext = pd.read_csv(tmp_path / "stream" / "extents.csv")
    kernel = ext[(ext.variant == "kernel") & (ext.machine == "ieee") & (ext.target == 0) & (ext.gamma == 2)
                 & (ext.alpha == 0.25) & (ext.level_ulp == 2**20)]
    # the q-hole (q = 1 - p by subtraction) over the whole slice: every output past 2^20 ulp
    assert kernel[["over", "first_pred", "last_pred"]].values.tolist() == [[65_537, "0x1.0000000000000p+4",
                                                                             "0x1.0200000000000p+4"]]


@pytest.mark.parametrize("lo, hi", [(0.999, 1.001), (-1.001, -0.999)])
def test_blocks_fold_to_the_tables_of_the_points_run_whole(tmp_path, lo, hi):
    """Many blocks (of 1024 preds) folded in pred order: the same tables (float sums to 1e-12) for variants
    without a tile-level guard, across a binade edge, on either sign."""
    text = streamed(lo, hi, block="block = 1024")
    study = parse_study(text, "s.toml")
    blocks = study_blocks(study)
    preds = np.concatenate([block_preds(study, b) for b in blocks])
    assert len(blocks) == 26 and preds.size == 25_166
    assert preds.size == sum(b - a for a, b in blocks) and np.all(np.diff(preds) >= 0)
    run_study(study, tmp_path / "stream", workers=1)
    run_study(parse_study(as_list(text, preds), "l.toml"), tmp_path / "whole", workers=1, use_cache=False)
    assert_tables_equal(tables(tmp_path / "stream"), tables(tmp_path / "whole"), exact=False)


def test_kill_9_then_resume_gives_identical_tables(tmp_path):
    study = tmp_path / "s.toml"
    study.write_text(streamed(1.0, 1.0625, block="block = 32768", variants='["candidate", "naive"]')
                     .replace('machines = ["ieee", "npu"]', 'machines = ["ieee"]'))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "precision", "run", str(study), "--out", str(out),
                             "--workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 180
    while time.time() < deadline and len(list((out / "chunks").glob("*.safetensors"))) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(list((out / "chunks").glob("*.safetensors")))
    assert 3 <= done < 16 and not (out / "summary.csv").exists()
    assert main(["run", str(study), "--out", str(out), "--workers", "2"]) == 0
    assert json.loads((out / "run.json").read_text())["tasks_reused"] >= done * 2  # 2 tasks a block
    assert main(["run", str(study), "--out", str(tmp_path / "clean"), "--workers", "2"]) == 0
    assert_tables_equal(tables(out), tables(tmp_path / "clean"))


def test_progress_lines_on_a_log(tmp_path, monkeypatch, capsys):
    from precision.engine import stream
    monkeypatch.setattr(stream, "PROGRESS_SECONDS", 0.0)
    study = parse_study(streamed(1.0, 1.01, block="block = 16384", variants='["candidate"]'), "s.toml")
    run_study(study, tmp_path / "o", workers=1)
    lines = [line for line in capsys.readouterr().err.splitlines() if "blocks" in line]
    assert len(lines) == len(study_blocks(study)) - 1 == 5
    assert lines[0].startswith("slice: 1/6 blocks, ") and " ETA " in lines[0]


def test_the_report_gives_each_hole_its_extent(tmp_path, capsys):
    """Through the entry points: run, report; the extents section's findings cite extents.csv, and the holes
    found are those of the points: the kernel's q-hole at target 0, gamma 2 passes 2^20 ulp first at
    0x1.9bf31ep+3 (12.873427), as a run over every fp32 in [8, 16] finds it."""
    (tmp_path / "studies").mkdir()
    (tmp_path / "studies" / "slice.toml").write_text(
        streamed(12.86, 12.89, variants='["kernel", "candidate"]').replace(
            'per_point = "worst"', 'per_point = "worst"\n[report]\nsections = ["summary", "extents"]'))
    os.chdir(tmp_path)
    assert main(["run", "studies/slice.toml", "--workers", "1"]) == 0
    assert main(["report", "slice"]) == 0
    capsys.readouterr()
    folder = tmp_path / "out" / "reports" / "slice"
    extents = pd.read_csv(folder / "tables" / "extents.csv", keep_default_na=False)
    findings = [f for f in json.loads((folder / "findings.json").read_text())["findings"] if f["section"] == "extents"]
    assert findings and all(f["numbers"][0]["value"] == extents[
        (extents.variant == f["numbers"][0]["where"]["variant"]) & (extents.machine == f["numbers"][0]["where"]["machine"])
        & (extents.target == f["numbers"][0]["where"]["target"]) & (extents.alpha == f["numbers"][0]["where"]["alpha"])
        & (extents.gamma == f["numbers"][0]["where"]["gamma"])
        & (extents.level_ulp == f["numbers"][0]["where"]["level_ulp"])]["over"].item() for f in findings)
    row = extents[(extents.variant == "kernel") & (extents.machine == "ieee") & (extents.target == 0)
                  & (extents.alpha == 0.25) & (extents.gamma == 2) & (extents.level_ulp == 2**20)].iloc[0]
    assert (row.first_pred, row.last_pred) == ("0x1.9bf31e0000000p+3", "0x1.9bfa860000000p+3")
    # checked apart: the scalar kernel against the mpmath oracle at the ends and the floats beside them
    from precision.analysis.scoring import ulp_error
    from precision.operators.sigmoid_focal_loss_grad import oracle
    from precision.operators.sigmoid_focal_loss_grad.guards import evaluate
    x = np.array([float.fromhex(h) for h in ("0x1.9bf31cp+3", "0x1.9bf31ep+3", "0x1.9bfa86p+3", "0x1.9bfa88p+3")])
    out = evaluate("kernel", x.astype(np.float32)[:, None], np.zeros((4, 1), np.int32), np.ones((4, 1), np.float32),
                   None, alpha=0.25, gamma=2.0, reduction="none", machine="ieee").ravel()
    exact = np.array([oracle.gradient(v, 0, 0.25, 2.0) for v in x], dtype=np.float64).ravel()
    assert (ulp_error(out, exact, "fp32") > 2**20).tolist() == [False, True, True, False]
    page = (folder / "report.md").read_text()
    assert "## Where the holes are" in page and "gamma 2, target 0: 949 outputs more than 2^20 ulp off, the first at pred = 0x1.9bf31ep+3 (12.873427)" in page


def test_a_blocks_key_does_not_depend_on_where_the_range_starts():
    """The same block of two studies that differ only in their range is the same chunk file (a longer range
    reuses the blocks it shares), and another block or block size is another."""
    from precision.engine.estimate import study_variants
    from precision.engine.operators import get_operator
    from precision.engine.stream import _block_key, _placeholder_tasks

    def keys(lo, hi, size):
        study = parse_study(streamed(lo, hi, block=f"block = {size}"), "s.toml")
        variants = study_variants(study)
        tasks = _placeholder_tasks(study, variants, get_operator(study.operator).find_comparisons(variants, ()))
        return {b: _block_key(tasks, b, size) for b in study_blocks(study)}
    short, long_ = keys(1.0, 1.0625, 32768), keys(1.0, 1.125, 32768)
    shared = set(short) & set(long_)
    assert len(shared) == 16 and all(short[b] == long_[b] for b in shared)
    assert len(set(long_.values())) == len(long_)  # one key a block
    assert not set(keys(1.0, 1.0625, 16384).values()) & set(short.values())
