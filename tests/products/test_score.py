"""precision score (precision.products.score_outputs): outputs produced elsewhere against the oracle."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from precision import evaluate

from precision.operators.sigmoid_focal_loss_grad import oracle
from precision.operators.sigmoid_focal_loss_grad.implementations.common import validate_inputs
from precision.products.score_outputs import score_outputs
from precision.engine.sweep import load_stats

from cli_support import run, tree

N, C = 16, 8
ALPHA, GAMMA = 0.25, 2.0


def make_inputs(dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    pred = rng.normal(0.0, 8.0, (N, C)).astype(dtype)
    pred[0, :4] = [0.0, -0.0, 20.0, -20.0]
    target = rng.integers(0, 2, (N, C)).astype(np.int32)
    dout = rng.normal(0.0, 2.0, (N, C)).astype(dtype)
    weight = rng.uniform(0.1, 2.0, (N, C)).astype(dtype)
    return pred, target, dout, weight


def correctly_rounded(pred, target, dout, weight, reduction="mean"):
    count = pred.size if reduction == "mean" else 1
    fmt = "fp16" if pred.dtype == np.float16 else "fp32"
    return oracle.gradient(pred.astype(np.float64), target, ALPHA, GAMMA, weight.astype(np.float64),
                           dout.astype(np.float64), count, fmt=fmt)




@pytest.fixture
def files(tmp_path, monkeypatch):
    """inputs.npz, correctly rounded outputs (cr.npy, cr.bin), one element perturbed (bad.npy), .npy inputs."""
    monkeypatch.chdir(tmp_path)
    pred, target, dout, weight = make_inputs()
    np.savez("inputs.npz", pred=pred, target=target, dout=dout, weight=weight)
    cr = correctly_rounded(pred, target, dout, weight)
    np.save("cr.npy", cr)
    cr.tofile("cr.bin")
    bad = cr.copy()
    bad.view(np.uint32)[5, 3] += 40  # 40 ulps off at (5, 3)
    np.save("bad.npy", bad)
    for name, arr in (("pred", pred), ("target", target), ("dout", dout), ("weight", weight)):
        np.save(f"{name}.npy", arr)
    return {"pred": pred, "target": target, "dout": dout, "weight": weight, "cr": cr, "bad": bad}


class TestScoreCommand:
    def test_correctly_rounded_outputs(self, files, capsys):
        code, out, err = run(capsys, "score", "--inputs", "inputs.npz", "--outputs", "cr.npy")
        assert (code, err) == (0, "")
        assert out.startswith(f"score cr fp32 {N}x{C}: max_ulp=") and " share_correct=1 not_correct=0 over_1ulp=0 nan=0 " in out
        summary = pd.read_csv("out/score/cr/summary.csv")
        row = summary.iloc[0]
        assert (row["variant"], row["machine"], row["format"], row["count"]) == ("cr", "device", "fp32", N * C)
        assert row["max_ulp"] <= 0.5 and row["share_correct"] == 1 and row["over_1ulp"] == 0
        assert all(row[c] == 0 for c in ("nan", "inf", "wrong_sign", "lost_inf"))
        assert len(pd.read_parquet("out/score/cr/points.parquet")) == 0
        assert set(pd.read_csv("out/score/cr/by_region.csv")["region"]) <= {"x < -20", "[-20, -8)", "[-8, 0)",
                                                                           "[0, 8)", "[8, 20)", "x >= 20"}
        stats = load_stats("out/score/cr")  # the mergeable tables of a run
        assert int(stats.frame["count"].sum()) == N * C
        for name in ("report.md", "report.html", "score.json", "groups.csv", "groups_raw.parquet", "hist.npz"):
            assert Path("out/score/cr", name).is_file()

    def test_fp16_outputs_from_npy_inputs(self, tmp_path, capsys, monkeypatch):
        monkeypatch.chdir(tmp_path)
        pred, target, dout, weight = make_inputs(np.float16, seed=1)
        np.save("p.npy", pred)
        np.save("t.npy", target)
        np.save("g.npy", correctly_rounded(pred, target, dout, np.ones_like(dout), reduction="sum"))
        np.save("d.npy", dout)
        code, out, err = run(capsys, "score", "--inputs", "p.npy", "--target", "t.npy", "--dout", "d.npy",
                             "--outputs", "g.npy", "--reduction", "sum", "--out", "res")
        assert (code, err) == (0, "")
        row = pd.read_csv("res/summary.csv").iloc[0]
        assert row["format"] == "fp16" and row["max_ulp"] <= 0.5 and row["share_correct"] == 1

    def test_one_perturbed_element_is_the_witness(self, files, capsys):
        code, out, err = run(capsys, "score", "--inputs", "inputs.npz", "--outputs", "bad.npy")
        assert (code, err) == (0, "")
        x = float(files["pred"][5, 3])
        assert f"witness=row=5,col=3,pred={x.hex()}," in out and " over_1ulp=1 " in out
        row = pd.read_csv("out/score/bad/summary.csv").iloc[0]
        assert (row["witness_row"], row["witness_col"], row["witness_pred"]) == (5, 3, x.hex())
        assert 39 < row["max_ulp"] < 41 and row["share_correct"] == 1 - 1 / (N * C)
        # one miss: the share never prints as 1, and the miss is counted beside it
        assert " not_correct=1 " in out and " share_correct=1 " not in out
        page = Path("out/score/bad/report.md").read_text()
        assert "(1 not correctly rounded) of the" in page and "A share 1 " not in page
        points = pd.read_parquet("out/score/bad/points.parquet")
        assert points[["row", "col"]].values.tolist() == [[5, 3]] and points.loc[0, "pred"] == x
        assert f"{x.hex()}" in (Path("out/score/bad/report.html").read_text().split("<nav>")[0])

    def test_msprobe_line(self, files, capsys):
        """msprobe's standards on the printed line: correctly rounded outputs pass its single-sided standards
        (the ULP and benchmark standards need a third party).  The element 40 ulps off is over msprobe's ulp
        cut (32, fp32), yet its value, 9.48e-11, is a small value (<= 2^-20) whose absolute error (about 3e-16)
        is below atol 2^-30: the absolute-threshold standard passes it."""
        code, out, err = run(capsys, "score", "--inputs", "inputs.npz", "--outputs", "cr.npy", "--label", "cr2")
        line = next(x for x in out.splitlines() if x.startswith("msprobe cr2: "))
        assert line.startswith("msprobe cr2: absolute=pass ratio=pass mean_ulp=") and " benchmark=" not in line
        assert " ulp_share=0 rel_err_ratio=0 " in line
        code, out, err = run(capsys, "score", "--inputs", "inputs.npz", "--outputs", "bad.npy", "--compare-with",
                             "kernel", "--machine", "ieee")
        line = next(x for x in out.splitlines() if x.startswith("msprobe bad: "))
        fields = dict(f.split("=", 1) for f in line.split(": ", 1)[1].split() if "=" in f)
        small, moved = float(files["cr"][5, 3]), float(files["bad"][5, 3])
        assert abs(small) <= 2.0 ** -20 and abs(moved - small) < 2e-15
        assert fields["absolute"] == "pass" and float(fields["ulp_share"]) == pytest.approx(1 / (N * C), rel=1e-5)
        standards = pd.read_csv("out/score/bad/standards.csv")
        row = standards[(standards["machine"] == "device") & (standards["region"] == "all")].iloc[0]
        assert line.startswith(f"msprobe bad: absolute=pass ratio={row['ms_ratio']} vs kernel@ieee: "
                               f"benchmark={row['ms_benchmark']}")
        assert row["ms_ulp_share"] == 1 / (N * C)

    def test_raw_dump_scores_like_the_npy(self, files, capsys):
        assert run(capsys, "score", "--inputs", "inputs.npz", "--outputs", "cr.npy")[0] == 0
        code, out, err = run(capsys, "score", "--inputs", "inputs.npz", "--outputs", "cr.bin", "--dtype", "float32",
                             "--shape", f"{N},{C}", "--label", "cr_raw")
        assert (code, err) == (0, "")
        a = pd.read_csv("out/score/cr/summary.csv").drop(columns="variant")
        b = pd.read_csv("out/score/cr_raw/summary.csv").drop(columns="variant")
        pd.testing.assert_frame_equal(a, b)

    def test_compare_with_an_emulated_variant(self, files, capsys):
        code, out, err = run(capsys, "score", "--inputs", "inputs.npz", "--outputs", "bad.npy", "--compare-with",
                             "kernel", "--machine", "ieee")
        assert (code, err) == (0, "")
        p, t, d, w = (files[k] for k in ("pred", "target", "dout", "weight"))
        emulated = evaluate("kernel", p, t, d, w, alpha=ALPHA, gamma=GAMMA, reduction="mean", machine="ieee")
        differ = int((emulated.view(np.uint32) != files["bad"].view(np.uint32)).sum())
        assert f"compare bad vs kernel on ieee: agree={N * C - differ}/{N * C} bit for bit, disagree={differ} " in out
        dis = pd.read_csv("out/score/bad/disagreements.csv")
        assert len(dis) == differ and [5, 3] in dis[["row", "col"]].values.tolist()
        cmp = pd.read_csv("out/score/bad/comparisons.csv")
        assert cmp.loc[0, "region"] == "all" and cmp.loc[0, "changed"] == differ
        assert cmp.loc[0, "with_variant"] == "bad" and cmp.loc[0, "without_variant"] == "kernel"
        summary = pd.read_csv("out/score/bad/summary.csv")
        assert summary[["variant", "machine"]].values.tolist() == [["bad", "device"], ["kernel", "ieee"]]


class TestScoreOutputs:
    def test_api(self, files):
        p, t, d, w = (files[k] for k in ("pred", "target", "dout", "weight"))
        inputs = validate_inputs(p, t, d, w, ALPHA, GAMMA, "mean")
        r = score_outputs(inputs, files["cr"], label="x")
        assert r.headline["max_ulp"] <= 0.5 and r.headline["share_correct"] == 1 and r.comparisons is None


MALFORMED = [
    (["--inputs", "nosuch.npz", "--outputs", "cr.npy"], "--inputs=nosuch.npz: no such file; expected an existing file"),
    (["--inputs", "no_target.npz", "--outputs", "cr.npy"],
     "--inputs=no_target.npz lacks 'target'; expected arrays named pred, target, dout, weight (pred and target "
     "required)"),
    (["--inputs", "extra.npz", "--outputs", "cr.npy"],
     "--inputs=extra.npz holds 'preds'; expected arrays named pred, target, dout, weight (pred and target required)"),
    (["--inputs", "f64.npz", "--outputs", "cr.npy"], "pred dtype=float64; expected float16 or float32"),
    (["--inputs", "t64.npz", "--outputs", "cr.npy"], "target dtype=int64; expected int32"),
    (["--inputs", "dout_shape.npz", "--outputs", "cr.npy"],
     f"dout shape=({N}, 4) differs from pred shape=({N}, {C}); expected equal shapes (no broadcasting)"),
    (["--inputs", "rank1.npz", "--outputs", "cr.npy"],
     f"pred has rank 1 (shape=({N * C},)); expected a rank-2 [N, C] array"),
    (["--inputs", "nan.npz", "--outputs", "cr.npy"],
     "pred[0, 0]=nan; the exact gradient is defined for finite inputs only (1 non-finite pred values)"),
    (["--inputs", "inputs.npz", "--outputs", "half.npy"],
     "outputs dtype=float16 but pred dtype=float32; the operator returns pred's dtype"),
    (["--inputs", "inputs.npz", "--outputs", "transposed.npy"],
     f"outputs shape=({C}, {N}) differs from pred shape=({N}, {C}); expected equal shapes"),
    (["--inputs", "inputs.npz", "--outputs", "cr.bin"],
     "--outputs=cr.bin is not a .npy; for a raw dump give --dtype float16|float32 (and --shape N,C, default pred's "
     "shape)"),
    (["--inputs", "inputs.npz", "--outputs", "cr.bin", "--dtype", "float16"],
     f"--outputs=cr.bin holds {N * C * 4:,} bytes; a {N}x{C} float16 raw dump holds {N * C * 2:,} (check --shape "
     "and --dtype)"),
    (["--inputs", "inputs.npz", "--outputs", "cr.bin", "--dtype", "float32", "--shape", "16"],
     "--shape='16'; expected N,C (two positive integers, e.g. 128,80)"),
    (["--inputs", "inputs.npz", "--outputs", "cr.npy", "--dtype", "float32"],
     "--outputs=cr.npy is a .npy (it records its shape and dtype); --shape and --dtype describe raw dumps only"),
    (["--inputs", "inputs.npz", "--outputs", "cr.bin", "--dtype", "float64"],
     "score: argument --dtype: invalid choice: 'float64' (choose from "),
    (["--inputs", "pred.npy", "--outputs", "cr.npy"],
     "--inputs=pred.npy is a .npy (pred only): give --target FILE too, or pass an .npz holding pred and target"),
    (["--inputs", "inputs.npz", "--target", "target.npy", "--outputs", "cr.npy"],
     "--inputs=inputs.npz is an .npz: it holds every input, so --target must not be given (or pass pred as a .npy)"),
    (["--inputs", "pickled.npy", "--target", "target.npy", "--outputs", "cr.npy"],
     "--inputs=pickled.npy: not a .npy or .npz file numpy can read without pickles (Object arrays cannot be loaded "
     "when allow_pickle=False)"),
    (["--inputs", "text.npz", "--outputs", "cr.npy"], "--inputs=text.npz: not a .npy or .npz file numpy can read "),
    (["--inputs", "inputs.npz", "--outputs", "cr.npy", "--machine", "npu"],
     "--machine applies to --compare-with only; add --compare-with VARIANT or drop --machine"),
    (["--inputs", "inputs.npz", "--outputs", "cr.npy", "--compare-with", "nosuch"], "variant='nosuch' is unknown; "),
    (["--inputs", "inputs.npz", "--outputs", "cr.npy", "--compare-with", "kernel", "--machine", "gpu"],
     "machine='gpu'; expected one of ieee, numpy, npu"),
    (["--inputs", "inputs.npz", "--outputs", "cr.npy", "--gamma", "inf"], "--gamma='inf'; expected a finite value"),
    (["--inputs", "inputs.npz", "--outputs", "cr.npy", "--alpha", "1e39"],
     "alpha=1e+39 is not finite in float32; expected a finite value"),
    (["--inputs", "inputs.npz", "--outputs", "cr.npy", "--label", "a b"],
     "--label='a b'; expected a name without spaces or slashes"),
    (["--inputs", "inputs.npz", "--outputs", "cr.npy", "--out", "."],
     "--out=. holds other files (no score.json); this command replaces its folder as a whole: give a new folder or "
     "one it wrote before"),
]


class TestMalformedInputs:
    @pytest.fixture
    def bad_files(self, files):
        p, t, d, w = (files[k] for k in ("pred", "target", "dout", "weight"))
        np.savez("no_target.npz", pred=p)
        np.savez("extra.npz", pred=p, target=t, preds=p)
        np.savez("f64.npz", pred=p.astype(np.float64), target=t)
        np.savez("t64.npz", pred=p, target=t.astype(np.int64))
        np.savez("dout_shape.npz", pred=p, target=t, dout=d[:, :4])
        np.savez("rank1.npz", pred=p.ravel(), target=t.ravel())
        nan = p.copy()
        nan[0, 0] = np.nan
        np.savez("nan.npz", pred=nan, target=t)
        np.save("half.npy", files["cr"].astype(np.float16))
        np.save("transposed.npy", np.ascontiguousarray(files["cr"].T))
        np.save("pickled.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
        Path("text.npz").write_text("pred,target\n1,0\n")
        return files

    @pytest.mark.parametrize("argv, line", MALFORMED, ids=[a[3] if len(a) == 4 else " ".join(a[2:]) for a, _ in
                                                            MALFORMED])
    def test_one_line_exit_2_nothing_written(self, bad_files, tmp_path, capsys, argv, line):
        before = tree(tmp_path)
        code, out, err = run(capsys, "score", *argv)
        assert (code, out) == (2, "")
        assert err.startswith(f"precision: error: {line}") and err.count("\n") == 1, err
        assert tree(tmp_path) == before
