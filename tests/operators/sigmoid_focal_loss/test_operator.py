"""SigmoidFocalLoss (forward) as the second operator: its oracle against two independent evaluations, its recipes'
bits, its contract, and its path through the engine, the report and the command line (``--operator``)."""

from __future__ import annotations

import json
import math
import shlex

import numpy as np
import pandas as pd
import pytest
from mpmath import mp, mpf

from precision.engine.operators import OPERATORS, get_operator
from precision.errors import ParameterError, PrecisionError
from precision.exact.formats import get_format
from precision.operators.sigmoid_focal_loss import oracle, reductions
from precision.operators.sigmoid_focal_loss.variants import evaluate, evaluate_variants, variant_names

from cli_support import precision, run

OP = "sigmoid_focal_loss"
XS = [-100.0, -30.0, -16.6, -8.0, -3.0, -0.5, -2.0**-30, 0.0, 2.0**-30, 0.5, 3.0, 8.0, 12.0, 16.0, 16.6, 20.0,
      30.0, 87.5, 100.0, 65504.0, -65504.0]
GAMMAS = [0.0, 0.5, 1.0, 2.0, 2.5, 5.0]


def direct(x: float, t: int, alpha: float, gamma: float) -> mpf:
    """The spec's formula as written, a_t (1 - p_t)^gamma (-ln p_t), with bits enough for 1 - p at |x|
    (600 + 1.5 |x|)."""
    with mp.workprec(600 + int(1.5 * abs(x))):
        p = 1 / (1 + mp.exp(-mpf(x)))
        pt = p if t == 1 else 1 - p
        at = mpf(alpha) if t == 1 else 1 - mpf(alpha)
        return at * (1 - pt) ** mpf(gamma) * (-mp.log(pt))


def arb_rounded(x: float, t: int, alpha: float, gamma: float, fmt) -> float | None:
    """An independent certified rounding with Arb balls (python-flint): log1p / exp of softplus, both ends rounded."""
    flint = pytest.importorskip("flint")
    f = get_format(fmt)
    for prec in (128, 512, 2048):
        flint.ctx.prec = prec
        s = flint.arb(-x if t == 1 else x)
        coef = flint.arb(alpha) if t == 1 else 1 - flint.arb(alpha)
        soft_pos = (s.exp() + 1).log() if s < 0 else s + ((-s).exp() + 1).log()
        soft_neg = ((-s).exp() + 1).log() if s > 0 else -s + (s.exp() + 1).log()
        value = coef * (-(flint.arb(gamma) * soft_neg)).exp() * soft_pos
        a, b = (f.round_mpf(mpf(tuple(int(v) for v in end.man_exp()))) for end in (value.lower(), value.upper()))
        if a == b:
            return a
    return None


class TestOracle:
    @pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp32"])
    def test_round_exact_is_the_direct_formula_rounded(self, fmt):
        f = get_format(fmt)
        for x in XS:
            for t in (0, 1):
                for g in (0.0, 2.5, 5.0):
                    want = f.round_mpf(direct(x, t, 0.25, g)._mpf_)
                    got = oracle.round_exact(x, t, 0.25, g, fmt=fmt)
                    assert math.copysign(1, got) == math.copysign(1, want) and (got == want), (x, t, g, got, want)

    def test_round_exact_agrees_with_an_arb_oracle(self):
        rng = np.random.default_rng(7)
        xs = np.concatenate([rng.normal(0, 10, 60), rng.uniform(-120, 120, 40)]).astype(np.float32)
        for i, x in enumerate(xs.tolist()):
            t, g = i % 2, GAMMAS[i % len(GAMMAS)]
            want = arb_rounded(x, t, 0.25, g, "fp32")
            assert want is not None and oracle.round_exact(x, t, 0.25, g, fmt="fp32") == want, (x, t, g)

    @pytest.mark.parametrize("fmt", ["fp16", "fp32"])
    def test_the_derivation_from_term_tables_gives_the_scalar_oracles_bits(self, fmt):
        x = np.array(XS * 2)
        t = np.repeat([0, 1], len(XS))
        n = x.size
        for g in GAMMAS:
            pos, neg = oracle.selected_term_tables(x, t, 0.25, g)
            d = oracle.derive_exact(x, t, np.full(n, 0.25), np.full(n, g), np.ones(n), np.ones(n),
                                    np.ones(n, np.int64), fmt, pos, neg)
            want = np.array([oracle.round_exact(a, b, 0.25, g, fmt=fmt) for a, b in zip(x, t)])
            assert np.array_equal(d.rounded.astype(np.float64), want), g
            assert d.fallback == 0

    @pytest.mark.parametrize("reduction", ["sum", "mean"])
    def test_the_exact_sum_and_mean_are_the_direct_formulas_rounded(self, reduction):
        rng = np.random.default_rng(3)
        x = rng.normal(0, 8, 40).astype(np.float32).astype(np.float64)
        t = rng.integers(0, 2, 40)
        for g in (0.5, 2.5):
            with mp.workprec(2000):
                total = mp.fsum(direct(float(a), int(b), 0.25, g) for a, b in zip(x, t))
                want = get_format("fp32").round_mpf((total / (len(x) if reduction == "mean" else 1))._mpf_)
            assert oracle.round_reduction(x, t, 0.25, g, reduction=reduction) == want

    def test_terms_sides_follow_the_coefficients(self):
        assert oracle.term_sides({"alpha": [0.25]}, [0, 1]) == (True, True)
        assert oracle.term_sides({"alpha": [1.0]}, [0, 1]) == (False, True)  # (1 - alpha)(1 - t) is 0
        assert oracle.term_sides({"alpha": [0.0]}, [0, 1]) == (True, False)


class TestRecipes:
    X = np.array([[2.0, -1.0, 10.0, 12.0, 16.0, 20.0, -16.0, 0.0]], np.float32)
    T = np.array([[1, 0, 1, 1, 1, 1, 0, 1]], np.int32)

    def test_the_kernels_q_hole_at_x_16(self):
        """t = 1, x = 16: q = 1 - p by subtraction is 2^-23 (exact 1.125e-7): 2.17e6 ulp off; the candidate's
        accurate 1 - p is within an ulp."""
        x, t = np.array([[16.0]], np.float32), np.array([[1]], np.int32)
        exact = oracle.round_exact(16.0, 1, 0.25, 2.5, fmt="fp32")
        assert float(exact).hex() == "0x1.27ec400000000p-83"
        assert float(evaluate("kernel", x, t, gamma=2.5, machine="npu")[0, 0]).hex() == "0x1.6a09e40000000p-83"
        cand = evaluate("candidate", x, t, gamma=2.5, machine="npu")[0, 0]
        assert abs(float(cand) - exact) <= float(np.spacing(np.float32(exact)))

    def test_the_two_element_recipes_agree_for_gamma_0_2_5_only(self):
        for g in (0.0, 2.0, 5.0):
            a = evaluate("kernel", self.X, self.T, gamma=g, machine="npu")
            b = evaluate("kernel_sum_path", self.X, self.T, gamma=g, machine="npu")
            assert a.tobytes() == b.tobytes(), g
        a = evaluate("kernel", self.X, self.T, gamma=2.5, machine="npu")
        b = evaluate("kernel_sum_path", self.X, self.T, gamma=2.5, machine="npu")
        assert a.tobytes() != b.tobytes()

    @pytest.mark.parametrize("machine", ["ieee", "npu"])
    def test_shared_evaluation_is_each_variant_alone(self, machine):
        x16 = self.X.astype(np.float16)
        for x in (self.X, x16):
            out = evaluate_variants(variant_names(), x, self.T, None, gamma=2.5, machine=machine)
            for name in variant_names():
                if isinstance(out[name], PrecisionError):
                    assert name == "third_party" and x.dtype == np.float32
                    continue
                assert out[name].tobytes() == evaluate(name, x, self.T, gamma=2.5, machine=machine).tobytes()

    def test_the_naive_formula_makes_inf_where_p_rounds_to_1(self):
        """x = 20, t = 0: p rounds to 1, so -ln(1 - p) = inf where the loss is 0.75 * 20 = 15; x = -20, t = 1 (p
        tiny, 1 - p = 1) is fine."""
        out = evaluate("naive", np.array([[20.0, -20.0]], np.float32), np.array([[0, 1]], np.int32), gamma=2.5)
        assert out[0, 0] == np.inf and out[0, 1] == np.float32(oracle.round_exact(-20.0, 1, 0.25, 2.5))
        assert oracle.round_exact(20.0, 0, 0.25, 2.5) == np.float32(15.0)

    @pytest.mark.parametrize("kwargs, message", [
        ({"target": np.array([[2]], np.int32)}, "target holds values other than 0 and 1"),
        ({"gamma": 6.0}, r"gamma=6.0; expected a value in \[0, 5\]"),
        ({"alpha": 1.5}, r"alpha=1.5; expected a value in \[0, 1\]"),
        ({"dout": np.array([[2.0]], np.float32)}, "no upstream gradient"),
        ({"reduction": "sum"}, "reduction='sum'; the element recipes are evaluated for 'none'"),
    ])
    def test_the_contract_is_one_clear_error(self, kwargs, message):
        args = {"target": np.array([[1]], np.int32), "dout": None, "gamma": 2.0, "alpha": 0.25,
                "reduction": "none", **kwargs}
        with pytest.raises(ParameterError, match=message):
            evaluate("kernel", np.array([[1.0]], np.float32), args["target"], args["dout"], alpha=args["alpha"],
                     gamma=args["gamma"], reduction=args["reduction"])


class TestReductionStage:
    CASES = [("confident", 2.5, n, c) for n in (1, 9, 11873) for c in (1, 64)] + [("balanced", 2.0, 1000, 64)]

    def test_within_the_bound_and_reproducible(self):
        a = reductions.reduction_rows(self.CASES)
        b = reductions.reduction_rows(self.CASES)
        assert a.equals(b)
        assert len(a) == len(self.CASES) and a["certified"].all()
        assert (a["reduction_rel"] <= a["bound_rel"]).all()
        # the confident region: the elements' own error dominates the summation's
        conf = a[a["distribution"] == "confident"]
        assert conf["elements_rel"].max() > 100 * conf["reduction_rel"].max()

    def test_the_production_chunk_is_the_tilings(self):
        assert reductions.production_chunk(11872) == 11872
        assert reductions.production_chunk(11879) == 11872  # rMax 11,878 aligned down to 8
        assert reductions.production_chunk(10**7, dtype_bytes=2) == 11872


def test_the_operator_is_registered_by_its_folder():
    assert OPERATORS[OP] == f"precision.operators.{OP}"
    op = get_operator(OP)
    assert (op.TITLE, op.VALUE, op.INPUTS, op.TERMS_ATTRIBUTE) == ("SigmoidFocalLoss", "loss", ("target", "weight"),
                                                                   "gamma")
    # capabilities it lacks take the protocol's defaults
    assert op.GUARD_NAMES == {} and op.FIRED_COLUMNS == {}
    assert op.band_labels([2, 4]) == ["all"]


class TestCommandLine:
    def test_variants(self, capsys):
        code, out, _ = run(capsys, "variants", "--operator", OP)
        assert code == 0 and [line.split()[0] for line in out.splitlines()] == variant_names()

    def test_oracle(self, capsys):
        code, out, _ = run(capsys, "oracle", "--operator", OP, "--pred", "16", "--target", "1", "--gamma", "2.5")
        assert code == 0
        assert "fp32    0x1.27ec400000000p-83" in out and "dout" not in out and "count" not in out

    @pytest.mark.parametrize("argv, message", [
        (["oracle", "--pred", "1", "--target", "1", "--dout", "2"], "--dout: the operator 'sigmoid_focal_loss' has no "
                                                                   "dout input"),
        (["oracle", "--check"], "oracle --check: the Arb cross-check is sigmoid_focal_loss_grad's"),
        (["explain", "kernel", "--pred", "1", "--target", "1", "--count", "3"], "--count: the operator"),
        # the grad's example plugin: its variant is the grad's, not this operator's (tests/.../test_plugins.py)
        (["variants", "--plugin", "examples/my_kernel.py"], "plugin examples/my_kernel.py: variant 'my_kernel' is "
                                                            "registered for the operator sigmoid_focal_loss_grad"),
    ])
    def test_inputs_it_lacks_are_one_line_and_exit_2(self, tmp_path, argv, message):
        from cli_support import ROOT
        code, out, err = precision(*argv, "--operator", OP, cwd=ROOT)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and message in err, err

    def test_hunt_finds_the_q_hole(self, capsys):
        """t = 1 near x = 16.6, where q = 1 - p by subtraction is a multiple of 2^-24: the kernel's loss is some
        8.6e7 ulp off; the witness carries the forward's inputs only (no dout)."""
        code, out, err = run(capsys, "hunt", "kernel", "--operator", OP, "--gamma", "2.5", "--target", "1",
                             "--points", "3000", "--workers", "1", "--json")
        got = json.loads(out)
        assert code == 0, err
        assert got["max_ulp"] > 1e7 and 16 < float.fromhex(got["witness"]["pred"]) < 17
        assert "dout" not in got["witness"] and "dout" not in got["top"][0]

    def test_score_outputs_of_the_forward_loss(self, tmp_path, capsys):
        """Outputs made elsewhere (here the kernel's, on npu) scored against the exact loss: the same maximum as a
        hunt's witness region; compared with the emulated kernel, bit for bit."""
        x = np.linspace(-20, 20, 64, dtype=np.float32).reshape(8, 8)
        t = (np.arange(64) % 2).astype(np.int32).reshape(8, 8)
        np.savez(tmp_path / "in.npz", pred=x, target=t)
        np.save(tmp_path / "out.npy", evaluate("kernel", x, t, gamma=2.5, machine="npu"))
        code, out, err = run(capsys, "score", "--operator", OP, "--inputs", tmp_path / "in.npz", "--outputs",
                             tmp_path / "out.npy", "--reduction", "none", "--gamma", "2.5", "--out",
                             tmp_path / "score", "--compare-with", "kernel", "--machine", "npu")
        assert code == 0, err
        assert "agree=64/64 bit for bit" in out
        summary = (tmp_path / "score" / "summary.csv").read_text()
        assert "kernel" not in summary.splitlines()[0] and len(summary.splitlines()) >= 2

    def test_it_takes_the_reductions_it_declares(self, tmp_path, capsys):
        """REDUCTIONS = ("none",): score defaults to none and refuses mean in one line, writing nothing; a study
        asking for mean is one error line at parse time (its sum and mean are the reduction stage's)."""
        from cli_support import ROOT
        from precision.engine.study import parse_study
        from precision.errors import StudyFileError
        x = np.linspace(-4, 4, 16, dtype=np.float32).reshape(4, 4)
        t = (np.arange(16) % 2).astype(np.int32).reshape(4, 4)
        np.savez(tmp_path / "in.npz", pred=x, target=t)
        np.save(tmp_path / "out.npy", evaluate("kernel", x, t, machine="npu"))
        code, out, err = run(capsys, "score", "--operator", OP, "--inputs", tmp_path / "in.npz", "--outputs",
                             tmp_path / "out.npy", "--out", tmp_path / "none")
        assert code == 0, err
        assert "--reduction none" in json.loads((tmp_path / "none" / "score.json").read_text())["command"]
        code, out, err = run(capsys, "score", "--operator", OP, "--inputs", tmp_path / "in.npz", "--outputs",
                             tmp_path / "out.npy", "--out", tmp_path / "mean", "--reduction", "mean")
        assert (code, out) == (2, "") and err.count("\n") == 1
        assert "--reduction=mean: the operator 'sigmoid_focal_loss' takes none (its REDUCTIONS)" in err
        assert not (tmp_path / "mean" / "score.json").exists()
        text = (ROOT / "studies" / "sigmoid_focal_loss.toml").read_text()
        assert 'reduction = "none"' in text
        with pytest.raises(StudyFileError, match=r"points.reduction: 'mean'; expected one of none$"):
            parse_study(text.replace('reduction = "none"', 'reduction = "mean"'))

    def test_explain_shows_the_steps_and_the_error(self, capsys):
        code, out, _ = run(capsys, "explain", "kernel", "--operator", OP, "--pred", "16", "--target", "1",
                           "--gamma", "2.5", "--machine", "npu", "--json")
        got = json.loads(out)
        assert code == 0 and got["computed"] == "0x1.6a09e40000000p-83"
        assert got["exact_rounded"] == "0x1.27ec400000000p-83"
        # |computed - exact| / ulp(exact), the reports' ulp error: (1.46e-25 - 1.195e-25) / 2^-106
        assert got["err_ulp"] == pytest.approx((1.4622624027206462e-25 - 1.1952228174574954e-25) / 2.0**-106, rel=1e-9)
        assert [s["step"] for s in got["steps"]][:3] == ["ax", "nax", "e"]

    def test_a_study_runs_and_its_reports_explain_lines_run_as_printed(self, tmp_path):
        study = tmp_path / "fwd.toml"
        study.write_text(STUDY)
        code, out, err = precision("run", str(study), "--out", str(tmp_path / "runs" / "fwd"), "--report",
                                   "--report-out", str(tmp_path / "rep"), cwd=tmp_path, timeout=600)
        assert code == 0, err
        assert json.loads((tmp_path / "runs" / "fwd" / "run.json").read_text())["operator"] == OP
        page = (tmp_path / "rep" / "fwd" / "report.md").read_text()
        lines = sorted({line for line in _explain_lines(page)})
        assert lines and all("--operator sigmoid_focal_loss" in line and "--dout" not in line for line in lines)
        code, out, err = precision(*shlex.split(lines[0])[1:], cwd=tmp_path)
        assert code == 0, err
        assert "exact gradient" not in page and "1/64" not in page
        # the kept points attributed to the kernel's steps: the attribution reproduces the run's bits, and the
        # confident-correct group (t = 1, x >= 8) loses its bits in Ln(1 + e) and q = 1 - p
        att = pd.read_csv(tmp_path / "runs" / "fwd" / "attribution.csv")
        assert len(att) and att["mismatched"].sum() == 0
        hole = att[(att["target"] == 1) & (att["region"] == "x >= 8") & (att["max_err_ulp"] > 1e6)]
        assert set(hole["step"]) <= {"lg", "q"} and len(hole)


def _explain_lines(text: str) -> list:
    import re
    return re.findall(r"`(precision explain \S+ --[^`]+)`", text)


STUDY = '''
name = "fwd"
operator = "sigmoid_focal_loss"
description = "a small forward study"
seed = 1

[[pred]]
kind = "grid"
format = "fp32"
start = -20.0
stop = 20.0
num = 201
spacing = "linear"

[points]
target = [0, 1]
alpha = [0.25]
gamma = [2.5]
weight = ["none"]
dout = [1.0]
reduction = "none"
profiles = ["fp32"]
regions = [-8, 0, 8]

[run]
variants = ["kernel", "kernel_sum_path", "golden", "candidate"]
machines = ["npu"]
per_point = "worst"
attribution = { variants = ["kernel"], points = "kept" }

[report]
sections = ["verdicts", "dominant", "attribution", "summary", "standards"]
'''


@pytest.mark.parametrize("kernel, repaired, start", [
    (0.9, {}, "keep the kernel's element recipe"),
    (8.5e7, {"kernel_accurate_q": 1.6e7, "kernel_log1p": 4.0e7, "candidate": 4.047},
     "change the kernel: both repairs are needed, together they bring its worst group from 8.5e+07 to 4.047 ulp"),
    (8.5e7, {"kernel_accurate_q": 3.0, "kernel_log1p": 4.0e7, "candidate": 2.0},
     "change the kernel: the accurate 1 - p alone brings its worst group from 8.5e+07 to 3 ulp"),
    (8.5e7, {"kernel_accurate_q": 1e6, "kernel_log1p": 1e6, "candidate": 5e3},
     "change the kernel; no repair tested brings its worst group within 1,024 ulp"),
])
def test_the_accuracy_sections_decision(kernel, repaired, start):
    from precision.operators.sigmoid_focal_loss.report.accuracy import decision
    assert decision(kernel, repaired).startswith(start)
