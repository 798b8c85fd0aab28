"""precision diff (precision.products.diff): two runs of one study, point by point."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from precision.products.diff import WORDS, diff_runs
from precision.operators.sigmoid_focal_loss_grad.plugins import load_plugin, unload_plugin
from precision.engine.study import parse_study
from precision.engine.sweep import run_study

from cli_support import run, tree

ROOT = Path(__file__).resolve().parents[2]

STUDY = """
name = "d"
[pred]
kind = "grid"
format = "fp16"
start = -12
stop = 12
num = 97
[points]
target = [0, 1]
profiles = ["fp32", "fp16"]
[run]
variants = {variants}
machines = ["ieee"]
per_point = "{per_point}"
"""

#: The kernel as a plugin variant ``mk`` (run A) ...
GOOD = """
from precision import evaluate, register_variant


def mk(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="mean", *, count=None):
    return evaluate("kernel", pred, target, dout, weight, alpha=alpha, gamma=gamma, reduction=reduction,
                    machine=machine, count=count)


register_variant("mk", mk, "the kernel")
"""
#: ... and with a planted regression (run B): fp32 outputs for pred in [-4, -2) moved 1000 ulps (16 points, where
#: the kernel is within 1 ulp), and pred = -3, target 0 moved 101,000 ulps: the witness.
BAD = """
import numpy as np
from precision import evaluate, register_variant


def mk(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="mean", *, count=None):
    out = evaluate("kernel", pred, target, dout, weight, alpha=alpha, gamma=gamma, reduction=reduction,
                   machine=machine, count=count).copy()
    if out.dtype == np.float32:
        x, bits = np.asarray(pred, np.float64), out.view(np.uint32)
        bits[(x >= -4) & (x < -2)] += 1000
        bits[(x == -3.0) & (np.asarray(target) == 0)] += 100000
    return out


register_variant("mk", mk, "the kernel with a planted regression")
"""

WITNESS = "pred=-0x1.8000000000000p+1,target=0,alpha=0x1.0000000000000p-2,gamma=0x1.0000000000000p+1,weight=none," \
          "dout=0x1.0000000000000p+0,machine=ieee,profile=fp32"


def _run(folder: Path, name: str, plugin_source: str, variants='["kernel", "mk"]', per_point="all", num=97):
    plugin = folder / f"{name}.py"
    plugin.write_text(plugin_source)
    load_plugin(plugin)
    try:
        text = STUDY.format(variants=variants, per_point=per_point).replace("num = 97", f"num = {num}")
        (folder / f"{name}.toml").write_text(text)
        study = parse_study(text, str(folder / f"{name}.toml"))
        run_study(study, folder / name, use_cache=False, workers=1)
    finally:
        unload_plugin(plugin)
    return folder / name


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Run A (mk = the kernel), B (mk with the planted regression), and runs for the error cases."""
    folder = tmp_path_factory.mktemp("diff")
    return {
        "A": _run(folder, "A", GOOD),
        "B": _run(folder, "B", BAD),
        "added": _run(folder, "added", GOOD, variants='["kernel", "mk", "naive"]'),
        "other_study": _run(folder, "other_study", GOOD, num=49),
        "not_every_point": _run(folder, "not_every_point", GOOD, per_point="over_1ulp"),
    }




class TestDiffCommand:
    def test_a_run_against_itself_changes_nothing(self, runs, tmp_path, capsys):
        code, out, err = run(capsys, "diff", runs["A"], runs["A"], "--out", tmp_path / "d")
        assert (code, err) == (0, "")
        lines = out.splitlines()
        assert [ln.split()[:2] for ln in lines[:2]] == [["SAME", "kernel"], ["SAME", "mk"]]
        assert all(" changed=0 " in ln and ln.endswith("cells=none") for ln in lines[:2])
        assert lines[2].startswith("diff d: ") and lines[2].endswith("0 BETTER, 0 WORSE, 2 SAME, 0 MIXED; 0 only in "
                                                                      "RUN_A, 0 only in RUN_B; tolerance 0 bits: no "
                                                                      "variant got worse beyond it (exit 0)")
        assert lines[3] == f"diff: report -> {tmp_path / 'd' / 'report.html'}"
        table = pd.read_csv(tmp_path / "d/tables/diff.csv")
        assert set(table["verdict"]) == {"no_effect"} and (table["changed"] == 0).all()

    def test_a_planted_regression_is_worse_and_names_its_witness(self, runs, tmp_path, capsys):
        code, out, err = run(capsys, "diff", runs["A"], runs["B"], "--out", tmp_path / "d")
        assert (code, err) == (1, "")
        worse = next(ln for ln in out.splitlines() if ln.startswith("WORSE "))
        assert worse.startswith("WORSE mk changed=16 better=0 worse=16 tied=0 both_garbage=0 specials_fixed=0 "
                                "specials_caused=0 max_gain_bits=nan max_loss_bits=15.67 cells=ieee/fp32:hurts "
                                "beyond_tolerance=yes witness=")
        assert worse.endswith(f"witness={WITNESS}")
        assert out.splitlines()[0].startswith("SAME kernel changed=0 ")
        assert "1 WORSE" in out and "a variant got worse beyond it (exit 1)" in out
        worst = pd.read_csv(tmp_path / "d/tables/worst_points.csv")
        assert worst.loc[0, ["variant", "pred", "target", "profile"]].tolist() == ["mk", "-0x1.8000000000000p+1", 0,
                                                                                   "fp32"]
        assert len(worst) == 16 and (worst["loss_bits"] > 5).all()
        page = (tmp_path / "d/report.html").read_text()
        first = page.split("<nav>")[0]
        assert "id='verdict-table'" in first and "hurts 0/16" in first and "-0x1.8000000000000p+1" in first
        assert "<script" not in page and "http" not in page.split("<body>")[1]  # self-contained
        assert (tmp_path / "d/report.md").read_text().startswith("# Diff: d")
        for name in ("diff.csv", "variants.csv", "worst_points.csv", "maxima.csv"):
            assert (tmp_path / "d/tables" / name).is_file()

    @pytest.mark.parametrize("tolerance, status", [("15", 1), ("15.7", 0), ("20", 0)])
    def test_tolerance(self, runs, tmp_path, capsys, tolerance, status):
        code, out, err = run(capsys, "diff", runs["A"], runs["B"], "--out", tmp_path / "d", "--tolerance", tolerance)
        assert (code, err) == (status, "")
        assert f"beyond_tolerance={'yes' if status else 'no'}" in out

    def test_variants_in_one_run_only(self, runs, tmp_path, capsys):
        code, out, err = run(capsys, "diff", runs["A"], runs["added"], "--out", tmp_path / "d")
        assert (code, err) == (0, "")
        assert "ADDED naive (only in RUN_B)" in out.splitlines()
        code, out, err = run(capsys, "diff", runs["added"], runs["A"], "--out", tmp_path / "d")
        assert code == 0 and "REMOVED naive (only in RUN_A)" in out.splitlines()
        assert "Only in RUN_A (not compared): naive." in (tmp_path / "d/report.md").read_text()

    @pytest.mark.parametrize("other, message", [
        ("other_study", "RUN_A={A} (study d) and RUN_B={other} (study d) are not runs of the same study: 192 "
                        "points only in RUN_A, 0 only in RUN_B; diff compares two runs of one study (same points)"),
        ("not_every_point", "RUN_B={other}: points.parquet holds 128 of the 194 points of kernel on ieee fp32; diff "
                            "compares every point: rerun the study with [run] per_point = \"all\""),
    ])
    def test_bad_input_is_one_line_exit_2_nothing_written(self, runs, tmp_path, capsys, other, message):
        before = tree(tmp_path)
        code, out, err = run(capsys, "diff", runs["A"], runs[other], "--out", tmp_path / "d")
        assert (code, out) == (2, "")
        assert err == f"precision: error: {message.format(A=runs['A'], other=runs[other])}\n"
        assert tree(tmp_path) == before

    def test_missing_run_folder_and_bad_tolerance(self, runs, tmp_path, capsys):
        code, out, err = run(capsys, "diff", tmp_path / "nosuch", runs["A"], "--out", tmp_path / "d")
        assert (code, err) == (2, f"precision: error: RUN_A={tmp_path / 'nosuch'}: no such folder; expected an "
                                  "existing folder\n")
        code, out, err = run(capsys, "diff", runs["A"], runs["A"], "--tolerance", "-1", "--out", tmp_path / "d")
        assert (code, err) == (2, "precision: error: --tolerance='-1'; expected a number of bits >= 0\n")
        assert not (tmp_path / "d").exists()
        (tmp_path / "keep.txt").write_text("a file of the user's")
        code, out, err = run(capsys, "diff", runs["A"], runs["A"], "--out", tmp_path)  # replaced as a whole: refused
        assert (code, err) == (2, f"precision: error: --out={tmp_path} holds other files (no tables/diff.csv); this "
                                  "command replaces its folder as a whole: give a new folder or one it wrote before\n")
        assert (tmp_path / "keep.txt").is_file()

    def test_console_script_exit_status(self, runs, tmp_path):
        proc = subprocess.run([sys.executable, "-m", "precision.cli", "diff", str(runs["A"]), str(runs["B"]), "--out",
                               str(tmp_path / "d")], env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                              text=True, timeout=120)
        assert proc.returncode == 1 and proc.stderr == "" and f"witness={WITNESS}" in proc.stdout


class TestDiffRuns:
    def test_statistics_come_from_paired_stats(self, runs):
        r = diff_runs(runs["A"], runs["B"])
        assert r.exit_status == 1
        cell = r.comparisons[(r.comparisons["with_variant"] == "mk") & (r.comparisons["region"] == "all")
                             & (r.comparisons["profile"] == "fp32")].iloc[0]
        assert (cell["changed"], cell["worse"], cell["finite_worse"], cell["verdict"]) == (16, 16, 16, "hurts")
        assert cell["loss_witness_pred"] == "-0x1.8000000000000p+1" and cell["loss_witness_target"] == 0
        per_region = r.comparisons[(r.comparisons["with_variant"] == "mk") & (r.comparisons["profile"] == "fp32")]
        assert per_region.set_index("region").loc["[-8, 0)", "changed"] == 16
        assert np.isclose(cell["max_loss_bits"], np.log2(1 + 101000.9373071297) - np.log2(1 + 0.9373071297467277))
        maxima = r.maxima.set_index(["variant", "profile"])
        assert maxima.loc[("mk", "fp32"), "over_1ulp_b"] > maxima.loc[("mk", "fp32"), "over_1ulp_a"]
        assert set(WORDS.values()) == {"BETTER", "WORSE", "SAME", "MIXED"}

    def test_signed_zeros_are_two_points(self, tmp_path):
        text = STUDY.format(variants='["kernel"]', per_point="all").replace(
            'kind = "grid"\nformat = "fp16"\nstart = -12\nstop = 12\nnum = 97',
            'kind = "list"\nformat = "fp16"\nvalues = ["-0x0p+0", "0x0p+0", "0x1p+0"]')
        run_study(parse_study(text, str(tmp_path / "z.toml")), tmp_path / "z", use_cache=False, workers=1)
        r = diff_runs(tmp_path / "z", tmp_path / "z")
        # 3 preds x 2 targets x 2 profiles; a join that took -0.0 for 0.0 would pair the zeros crosswise (16)
        assert r.compared["count"].tolist() == [12] and r.exit_status == 0
