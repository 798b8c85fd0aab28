"""SigmoidFocalLoss's step attribution: its exact step values against the certified oracle, the causes its
report names (q = 1 - p cancels, Ln(1 + e) loses e where 1 + e rounds to 1), and ``precision explain`` of the
forward loss through the real entry point."""

from __future__ import annotations

import json

import numpy as np
import pytest

from precision.analysis.attribution import POINT_HEAD, POINT_TAIL
from precision.operators.sigmoid_focal_loss import oracle
from precision.operators.sigmoid_focal_loss.attribution import POINT_COLUMNS, attribute, describe
from precision.operators.sigmoid_focal_loss.variants import evaluate, variant_names

from cli_support import run

XS = np.float32([-40.0, -17.25, -3.0, -0.5, 0.0, 2.0**-20, 0.75, 4.0, 9.5, 16.6, 18.0, 30.0])


@pytest.mark.parametrize("gamma", [0.0, 0.5, 2.0, 2.5, 5.0])
@pytest.mark.parametrize("target", [0, 1])
def test_exact_output_is_the_oracle_rounded(gamma, target):
    """The attribution's exact output (its own mpmath quantities, certified) is the certified oracle's correct
    rounding at every point, and its computed output is the variant's evaluation, bit for bit."""
    for variant in ("kernel", "naive", "golden"):
        att = attribute(variant, XS, [target], gamma=gamma, alpha=0.25)
        p = att.points
        assert list(p.columns) == list(POINT_COLUMNS)
        want = [oracle.round_exact(float(x), target, 0.25, float(np.float32(gamma)), 1.0, fmt="fp32") for x in XS]
        assert p["exact_rounded"].tolist() == want
        out = evaluate(variant, XS.reshape(1, -1), np.full((1, XS.size), target, np.int32), gamma=gamma)
        assert p["computed"].to_numpy().tobytes() == out.astype(np.float64).ravel().tobytes()
        assert att.steps["certified"].all()


def test_the_two_causes_of_the_confident_correct_hole():
    """x = 18, t = 1, gamma 2.5 (the report's worst group): the kernel loses both Ln(1 + e) (1 + e rounds to 1)
    and q = 1 - p (p rounds to 1); each repair alone moves the top cause to the other; with both, no step loses
    more than a few ulp."""
    x = np.float32([18.0])
    top = {}
    for variant in ("kernel", "kernel_log1p", "kernel_accurate_q", "candidate"):
        att = attribute(variant, x, [1], gamma=2.5)
        top[variant] = tuple(att.points.loc[0, ["top_step", "top_cause"]])
        steps = att.steps.set_index("step")
        if variant == "kernel":
            assert steps.loc["q", "cause"] == "cancellation" and steps.loc["q", "local_ulp"] > 1e8
            assert steps.loc["lg", "cause"] == "sensitivity" and steps.loc["lg", "local_ulp"] > 1e8
            assert att.points.loc[0, "err_ulp"] > 9e6 and att.points.loc[0, "computed"] == 0.0
            assert "q = 1 - p has the same order of loss" in describe(att, 0)
        if variant == "candidate":
            assert steps["local_ulp"].max() <= 2 and att.points.loc[0, "err_ulp"] < 2
    assert top["kernel"] == ("lg", "sensitivity")
    assert top["kernel_log1p"] == ("q", "cancellation")
    assert top["kernel_accurate_q"] == ("lg", "sensitivity")
    assert top["candidate"][1] == "rounding"


def test_every_variant_is_attributed():
    for variant in variant_names():
        fp16 = variant == "third_party"
        x = XS.astype(np.float16) if fp16 else XS
        att = attribute(variant, x, [1], gamma=2.0, weight=0.5)
        assert len(att.points) == XS.size and att.points["format"].eq("fp16" if fp16 else "fp32").all()
        assert att.points["weight"].eq(0.5).all()
        assert set(POINT_HEAD) < set(att.points.columns) and set(POINT_TAIL) < set(att.points.columns)


def test_explain_prints_the_attribution(capsys):
    code, out, err = run(capsys, "explain", "kernel", "--operator", "sigmoid_focal_loss", "--pred", "18",
                         "--target", "1", "--gamma", "2.5")
    assert code == 0, err
    assert out.splitlines()[0] == "variant  kernel of sigmoid_focal_loss on ieee, fp32 pred/weight"
    assert "dout" not in out and "top cause: lg = Ln(1 + e)" in out
    code, out, err = run(capsys, "explain", "kernel_log1p", "--operator", "sigmoid_focal_loss", "--pred", "18",
                         "--target", "1", "--gamma", "2.5", "--json")
    got = json.loads(out)
    assert code == 0 and got["operator"] == "sigmoid_focal_loss" and "dout" not in got["inputs"]
    assert got["top_cause"]["step"] == "q" and got["top_cause"]["cause"] == "cancellation"
    assert got["computed"] == "0x0.0p+0" and got["exact_rounded"] == "0x1.1452b60000000p-93"
