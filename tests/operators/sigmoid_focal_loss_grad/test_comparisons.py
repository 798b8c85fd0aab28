"""Paired comparisons: which pairs a run compares, the verdict rule on real variant pairs, an independent recount.

The study below holds every fp16 pred in [-1, -0.8] (where G5 changes a
handful of fp16 outputs at gamma -2: noise) plus a stratified fp16 set
reaching |x| = 65504 (where the naive recipe returns NaN that G2's clamp
removes).  The verdicts of four real guard pairs are pinned: G1 changes
nothing, G2 fixes NaN, G8 rounds better, G5's few changes are noise.  The
better/worse counts of G8 are then recounted on its changed points with the
independent Arb oracle (:mod:`precision.operators.sigmoid_focal_loss_grad.oracle_arb`), comparing
|computed - exact| in exact arithmetic.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from precision.operators.sigmoid_focal_loss_grad.comparisons import find_comparisons, threshold_name
from precision.engine.study import parse_study
from precision.engine.sweep import run_study

PAIRS = """
name = "pairs"
seed = 3
[[pred]]
kind = "exhaustive"
format = "fp16"
range = [-1, -0.8]
[[pred]]
kind = "stratified"
format = "fp16"
per_binade = 24
[points]
target = [0, 1]
alpha = [0.25, 0.5, 0.75, 1.0]
gamma = [-2.0, 2.0]
profiles = ["fp16"]
[run]
variants = ["naive", "naive+G1", "naive+G2", "kernel", "kernel-G5", "kernel-G8"]
machines = ["ieee"]
per_point = "all"
"""


class TestFindComparisons:
    def test_guard_threshold_and_declared_pairs(self):
        got = find_comparisons(["naive", "naive+G2", "kernel-G2", "kernel", "kernel[G5=never]", "kernel[G5=2^-6]",
                                "kernel[G5=2^-3]", "candidate", "golden"], declared=[("candidate", "golden")])
        assert [(c.kind, c.subject, c.name) for c in got] == [
            ("guard", "G2", "naive+G2 vs naive"), ("guard", "G2", "kernel vs kernel-G2"),
            ("threshold", "G5=2^-3", "kernel[G5=2^-3] vs kernel[G5=never]"),
            ("threshold", "G5=2^-6", "kernel vs kernel[G5=never]"),   # kernel[G5=2^-6] is kernel: not twice
            ("threshold", "G5=2^-3", "kernel[G5=2^-3] vs kernel"),
            ("declared", "candidate", "candidate vs golden")]

    def test_no_pairs_among_unrelated_variants(self):
        assert find_comparisons(["golden", "mmcv", "candidate"]) == []

    def test_threshold_names(self):
        assert [threshold_name(t) for t in (1.0, 0.5, 2.0**-12, 0.0, float("inf"), 0.3)] == [
            "2^0", "2^-1", "2^-12", "never", "always", "0.3"]


@pytest.fixture(scope="module")
def pairs_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("pairs")
    run_study(parse_study(PAIRS, "pairs.toml"), out, cache_dir=tmp_path_factory.mktemp("cache"), workers=1)
    return out


def _row(out, comparison):
    t = pd.read_csv(out / "comparisons.csv", dtype={"region": str})
    rows = t[(t["comparison"] == comparison) & (t["region"] == "all")]
    assert len(rows) == 1, comparison
    return rows.iloc[0]


class TestVerdictsOnRealPairs:
    def test_a_guard_that_changes_nothing(self, pairs_run):
        r = _row(pairs_run, "naive+G1 vs naive")
        assert r["changed"] == 0 and r["verdict"] == "no_effect"

    def test_a_guard_that_fixes_nan(self, pairs_run):
        r = _row(pairs_run, "naive+G2 vs naive")
        assert r["specials_fixed"] > 500 and r["specials_caused"] == 0 and r["p_specials"] < 1e-100
        assert r["verdict"] == "helps"

    def test_a_guard_that_rounds_better(self, pairs_run):
        r = _row(pairs_run, "kernel vs kernel-G8")
        # besides rounding, the nearest-even store turns 65504 back into the inf the exact value rounds to
        assert r["specials_caused"] == 0 and r["specials_fixed"] == r["fixed_correct"]
        assert r["finite_better"] > 20 * r["finite_worse"] and r["p_finite"] < 1e-100 and r["verdict"] == "helps"

    def test_a_guard_whose_changes_are_noise(self, pairs_run):
        r = _row(pairs_run, "kernel vs kernel-G5")
        assert 0 < r["changed"] <= 8 and r["p_value"] > 0.01 and r["verdict"] == "inconclusive"


def _special(c: float, exact, overflows: bool) -> bool:
    """The special classes, restated: NaN; nonzero of the wrong sign; inf where the exact value rounds to a
    finite fp16; finite where it rounds to inf."""
    if np.isnan(c):
        return True
    if c != 0 and not exact.is_zero() and ((c < 0) != (exact < 0)):
        return True
    return bool(np.isinf(c)) != overflows


def test_g8_counts_agree_with_the_arb_oracle(pairs_run):
    """Recount G8's comparison on its changed points from the definitions, with exact values from Arb."""
    flint = pytest.importorskip("flint")
    from precision.operators.sigmoid_focal_loss_grad.oracle_arb import gradient_arb
    pts = pd.read_parquet(pairs_run / "points.parquet")
    pts["variant"] = pts["variant"].astype(str)
    pts["pred_bits"] = pts["pred"].to_numpy().view(np.int64)
    keys = ["alpha", "gamma", "target", "pred_bits"]
    j = pts[pts["variant"] == "kernel"].merge(pts[pts["variant"] == "kernel-G8"], on=keys, suffixes=("_w", "_o"))
    cw, co = j["computed_w"].to_numpy(), j["computed_o"].to_numpy()
    changed = j[(cw.view(np.int64) != co.view(np.int64)) & ~(np.isnan(cw) & np.isnan(co))]
    counts = dict(better=0, worse=0, tied=0, both_garbage=0)
    for r in changed.itertuples(index=False):
        ball = gradient_arb(float(r.pred_w), int(r.target), float(r.alpha), float(r.gamma), prec=200)
        exact = flint.arb(0) if ball is None else ball
        overflows = bool(abs(exact) >= 65520)  # rounds to +-inf in fp16 (RNE): |exact| >= 65504 + 16
        sw, so = _special(r.computed_w, exact, overflows), _special(r.computed_o, exact, overflows)
        if sw or so:
            counts["both_garbage" if sw and so else "worse" if sw else "better"] += 1
            continue
        # every finite fp16 output here is at most 2^20 ulp off: no finite pair is garbage
        dw, do = abs(flint.arb(float(r.computed_w)) - exact), abs(flint.arb(float(r.computed_o)) - exact)
        counts["better" if dw < do else "worse" if do < dw else "tied"] += 1
    row = _row(pairs_run, "kernel vs kernel-G8")
    assert counts == {k: row[k] for k in counts} and sum(counts.values()) == row["changed"]


class TestOneVerdictRule:
    """The rule the reports print is the rule the code applies: a changed output that is special or over 2^20 ulp
    both with and without is both_garbage, whichever side is the special one."""

    def test_wrong_sign_against_a_garbage_zero_is_no_evidence(self):
        # cancellation_threshold, ieee, gamma -1.005 near the root of the bracket at x ~ 4.60: G5=never stores 0
        # (millions of ulps off), 1/64 stores -2^-25 (wrong sign). Neither is evidence for the other.
        from precision import evaluate
        from precision.operators.sigmoid_focal_loss_grad.oracle import exact_gradient, gradient
        from precision.analysis.paired import OUTCOME_NAMES, compare_points, outputs_changed
        from precision.analysis.scoring import CLASS_WRONG_SIGN, Scorer

        x = np.array([[float.fromhex("0x1.269fe8p+2")]], np.float32)
        t, d = np.zeros((1, 1), np.int32), np.ones((1, 1), np.float32)
        args = dict(alpha=0.25, gamma=-1.005, reduction="none", machine="ieee")
        with_, without = evaluate("kernel", x, t, d, **args), evaluate("kernel[G5=never]", x, t, d, **args)
        assert float(with_[0, 0]) == -2.0 ** -25 and float(without[0, 0]) == 0.0
        hi, lo, _ = exact_gradient(x.astype(np.float64), 0, 0.25, -1.005)
        scorer = Scorer((hi, lo), gradient(x.astype(np.float64), 0, 0.25, -1.005, fmt="fp32"), "fp32")
        ew, _, cw = scorer.score(with_)
        eo, _, co = scorer.score(without)
        assert int(cw[0, 0]) == CLASS_WRONG_SIGN                                   # with: a special
        assert int(co[0, 0]) == 0 and eo[0, 0] > 2.0 ** 20                         # without: finite, over 2^20 ulp
        outcome, fix, delta = compare_points(ew, cw, eo, co, outputs_changed(with_, without))
        assert OUTCOME_NAMES[int(outcome[0])] == "both_garbage" and fix[0] == 0 and np.isnan(delta[0])
