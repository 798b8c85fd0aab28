"""Tests of the issue-6 candidate recipe (precision/operators/sigmoid_focal_loss_grad/implementations/candidate.py).

The accuracy bound is the issue's target (fp32: <= 4 ulp outside the root
neighbourhood C >= 4 of precision.operators.sigmoid_focal_loss_grad.bracket), checked against the certified
oracle on the sample below; the full grids are the candidate study's
(studies/candidate.toml, reports/candidate).
"""

import numpy as np
import pytest

from precision.operators.sigmoid_focal_loss_grad import oracle
from precision.errors import DtypeError, ParameterError, ShapeError
from precision.operators.sigmoid_focal_loss_grad.guards import VARIANTS, evaluate
from precision.operators.sigmoid_focal_loss_grad.bracket import ROOT_NEIGHBOURHOOD_C, bracket_band
from precision.operators.sigmoid_focal_loss_grad.implementations.candidate import (
    CANDIDATE_RECIPE,
    LN_SCALE_MAX,
    candidate,
    candidate_constants,
)
from precision.operators.sigmoid_focal_loss_grad.implementations.common import load_operands, resolve_machine, validate_inputs
from precision.operators.sigmoid_focal_loss_grad.opcount import count_ops
from precision.analysis.scoring import ulp_error
from precision.operators.sigmoid_focal_loss_grad.terms import derive_gradient, focal_term_tables

GAMMAS = (-3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, 5.0, 6.0)


def _sample():
    rng = np.random.default_rng(6)
    x = np.arange(0, 0x10000, dtype=np.uint32).astype(np.uint16).view(np.float16)
    x = x[np.isfinite(x)]
    pick = rng.choice(x, 150, replace=False).astype(np.float32)
    fixed = np.float32([0.0, 1e-4, -1e-4, 0.5, -0.5, 1, -1, 8, -8, 17, -17, 60, -60, 90, -90, 104, -104, 200, -200])
    return np.concatenate([pick, fixed])


X = _sample()


def test_registered():
    row = VARIANTS["candidate"]
    assert row.family == "candidate" and row.function is candidate


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_shape_dtype(dtype):
    x = np.array([[-1.25, 0.0, 3.0], [2.0, -7.0, 0.5]], dtype)
    t = np.array([[0, 1, 0], [1, 0, 1]], np.int32)
    out = evaluate("candidate", x, t, np.ones_like(x), np.ones_like(x), machine="npu")
    assert out.dtype == dtype and out.shape == (2, 3) and np.isfinite(out).all()


def test_contract_errors_as_kernel():
    x = np.zeros((2, 2), np.float32)
    t = np.zeros((2, 2), np.int32)
    with pytest.raises(ShapeError):
        candidate("ieee", x[0], t[0], x[0])
    with pytest.raises(DtypeError):
        candidate("ieee", x, t.astype(np.int64), x)
    with pytest.raises(ShapeError):
        candidate("ieee", x, t, np.zeros((2, 3), np.float32))
    with pytest.raises(ParameterError):
        candidate("ieee", x, t, x, None, 0.25, float("nan"))
    with pytest.raises(ParameterError):
        candidate("ieee", x, t, x, None, 0.25, 2.0, "avg")


def _max_err(model, gamma, alphas=(0.25, 0.75)):
    """Max fp32 ulp error outside the root neighbourhood (C >= 4) and the NaN/inf count where exact is finite."""
    worst, bad = 0.0, 0
    for alpha in alphas:
        for sel in (0, 1):
            t = np.full(X.shape, sel, np.int32)
            hi, lo, _ = oracle.exact_gradient(X.astype(np.float64), t, alpha, gamma, 1.0, 1.0, 1)
            rounded = oracle.gradient(X.astype(np.float64), t, alpha, gamma, 1.0, 1.0, 1, "fp32")
            out = candidate(model, X[None], t[None], np.ones((1, X.size), np.float32), None, alpha, gamma, "none")[0]
            finite = np.isfinite(rounded)
            bad += int((~np.isfinite(out) & finite).sum())
            err = ulp_error(out, (hi, lo), "fp32", rounded)
            outside = bracket_band(X, t, gamma, (ROOT_NEIGHBOURHOOD_C,)) == 0
            worst = max(worst, float(err[finite & outside].max()))
    return worst, bad


@pytest.mark.parametrize("model", ["ieee", "npu"])
def test_accuracy_fp32_sample(model):
    # The issue-6 target: <= 4 ulp outside the root neighbourhood, no NaN/inf
    # where the exact value is finite.  Measured on this sample: max 3.2 ulp.
    for gamma in GAMMAS:
        worst, bad = _max_err(model, gamma)
        assert bad == 0, gamma
        assert worst <= 4.0, (gamma, worst)


@pytest.mark.parametrize("x,t,alpha,gamma,bound", [
    # large gamma * |x|: the power exp(-92.8) is subnormal; applied after the coefficient it
    # would have lost bits (3.9 ulp before the [-80, 88] clamp of the Exp argument)
    (float.fromhex("-0x1.a840000000000p+3"), 1, 0.25, 6.0, 1.0),
    (float.fromhex("-0x1.d940000000000p+3"), 1, 0.25, 5.0, 1.0),
    # gamma < -1, x = 44.375: q^(g+1) = exp(88.75) overflows fp32 but alpha * A does not
    (44.375, 0, 0.25, -3.0, 2.0),
    (88.75, 0, 0.25, -2.0, 2.0),
    # next to a root of A (C = 3771 ulp-class cancellation): finite, right sign
    (float.fromhex("-0x1.d7c0000000000p-1"), 0, 0.25, -2.0, None),
    # |x| g1 beyond float32 (|x| is clamped in the exponent): no NaN, no sign flip
    (3e38, 2, 0.25, 2.0, 0.5),
    (1e10, 1, 0.25, -1.2, 0.5),
    (-1e10, 0, 0.25, -1.2, 0.5),
])
def test_witnesses(x, t, alpha, gamma, bound):
    xs = np.float32([x])
    ts = np.int32([t])
    hi, lo, _ = oracle.exact_gradient(xs.astype(np.float64), ts, alpha, gamma, 1.0, 1.0, 1)
    rounded = oracle.gradient(xs.astype(np.float64), ts, alpha, gamma, 1.0, 1.0, 1, "fp32")
    for model in ("ieee", "npu"):
        out = candidate(model, xs[None], ts[None], np.ones((1, 1), np.float32), None, alpha, gamma, "none")[0]
        assert np.isfinite(out).all() and np.isfinite(rounded).all()
        assert np.signbit(out[0]) == np.signbit(rounded[0])
        if bound is not None:
            assert ulp_error(out, (hi, lo), "fp32", rounded)[0] <= bound, (x, model)


def test_structural_zero_no_nan():
    # alpha = 0 with t = 0 and alpha = 1 with t = 1 are exact zeros even where
    # the other term overflows (gamma < -1, huge |x|).
    x = np.float32([[-30000.0, 30000.0, -200.0, 200.0]])
    for alpha, sel in ((0.0, 0), (1.0, 1)):
        t = np.full(x.shape, sel, np.int32)
        out = candidate("npu", x, t, np.ones_like(x), None, alpha, -3.0, "none")
        assert (out == 0).all()


def test_mean_uses_exact_count():
    x = np.float32([[0.5, -0.5, 2.0]])
    t = np.int32([[0, 1, 0]])
    out = candidate("ieee", x, t, np.ones_like(x), None, 0.25, 2.0, "mean", count=7)[0]
    hi, lo, _ = oracle.exact_gradient(x[0].astype(np.float64), t[0], 0.25, 2.0, 1.0, 1.0, 7)
    assert ulp_error(out, (hi, lo), "fp32").max() <= 4.0


def test_beyond_float32_exponent_range():
    # exact values 0 (x g1 -> -inf) and +inf (x g1 -> +inf): no NaN, right sign
    x = np.float32([[3e38, -2e38, 1e10, 65504.0]])
    t = np.int32([[0, 1, 0, 0]])
    for model in ("ieee", "npu"):
        out = candidate(model, x, t, np.ones_like(x), None, 0.25, 2.0, "none")[0]
        assert out[:2].tolist() == [0.0, 0.0]
        out = candidate(model, x[:, 2:], t[:, 2:], np.ones_like(x[:, 2:]), None, 0.25, -1.2, "none")[0]
        assert np.isposinf(out).all()


@pytest.mark.parametrize("gamma", [2.0, -3.0])
def test_opcount_ratio(gamma):
    kernel_ops, _ = count_ops("kernel", gamma=gamma)
    cand_ops, per = count_ops("candidate", gamma=gamma)
    assert cand_ops == 101.0 and per["ln"] == 1.0 and per["exp"] == 4.0
    assert cand_ops / kernel_ops <= 1.5
    # built from NPU primitives only
    assert set(per) <= {"abs", "neg", "add", "sub", "mul", "fma", "div0ulp", "exp", "ln", "min", "max", "cmp",
                        "select", "cast"}


@pytest.mark.parametrize("pred,t,alpha,gamma,want_ulp", [
    # the witnesses of the fixed-scale recovery: 4.28 ulp (npu, README) and 4.153 ulp (both hunts)
    ("0x1.82895ep-1", 1, 0.25, -3.0, 1.28),
    ("-0x1.03e42ep-1", 0, 0.25, -3.0, 1.15),
    # the maximum both committed hunts found with the 2^n-scaled recovery (studies/hunts), and a
    # shorter npu hunt's
    ("0x1.b2e8d2p+3", 0, 1.0, 5.0, 3.266),
    ("0x1.be9b5cp+3", 0, 1.0, 5.0, 3.203),
])
@pytest.mark.parametrize("model", ["ieee", "npu"])
def test_hunted_witnesses_within_target(model, pred, t, alpha, gamma, want_ulp):
    xs = np.float32([float.fromhex(pred)])
    ts = np.int32([t])
    assert bracket_band(xs, ts, gamma, (ROOT_NEIGHBOURHOOD_C,))[0] == 0  # outside the root neighbourhood
    hi, lo, _ = oracle.exact_gradient(xs.astype(np.float64), ts, alpha, gamma, 1.0, 1.0, 1)
    rounded = oracle.gradient(xs.astype(np.float64), ts, alpha, gamma, 1.0, 1.0, 1, "fp32")
    out = candidate(model, xs[None], ts[None], np.ones((1, 1), np.float32), None, alpha, gamma, "none")[0]
    err = ulp_error(out, (hi, lo), "fp32", rounded)[0]
    assert err <= 4.0
    assert err == pytest.approx(want_ulp, abs=0.005)


@pytest.mark.parametrize("model", ["ieee", "npu"])
def test_e_error_recovered_to_a_quarter_u(model):
    # el = e_true - e from Ln(2^n e), n = round(|x|/ln2) <= 3: the scale is
    # exactly 2^n and what remains is Ln's rounding, |ln(2^n e)| <= ln2/2, so
    # at most u/4 (u = 2^-24) of e, plus the tiny roundings of rel and el.
    x = np.float32(np.linspace(-2.42, 2.42, 20001))
    t = np.zeros_like(x, np.int32)
    inputs = validate_inputs(x[None], t[None], np.ones((1, x.size), np.float32), None, 0.25, -3.0, "none")
    m = resolve_machine(model)
    _, env = CANDIDATE_RECIPE.run(CANDIDATE_RECIPE.plan(), m, candidate_constants(m, inputs, 1),
                                  load_operands(m, inputs), trace=True)
    n = np.rint(np.abs(x.astype(np.float64)) / np.log(2))
    assert np.array_equal(env["n"], n) and n.max() == LN_SCALE_MAX
    assert np.array_equal(env["k"], 2.0 ** n)
    e = env["e"].astype(np.float64)
    exact_el = np.exp(-np.abs(x.astype(np.float64))) - e  # float64: 2^-52 relative, far below u/4
    remaining = np.abs(exact_el - env["el"]) / e
    assert remaining.max() <= 0.26 * 2.0 ** -24
    assert np.abs(exact_el / e).max() > 0.45 * 2.0 ** -24  # there was an error to recover


#: fp16 outputs not correctly rounded by the candidate, per (machine, gamma), on the slice of
#: test_fp16_correct_share_kept.  The fixed-scale recovery (Ln(4e) / Ln(e)) missed 24 at gamma -2 and
#: 36 at gamma 2 on each machine: 8 outputs changed per machine in the whole candidate study, where its 310
#: misses per machine became 306.
FP16_MISSES = {("ieee", -2.0): 26, ("npu", -2.0): 26, ("ieee", 2.0): 30, ("npu", 2.0): 30}


@pytest.mark.slow
def test_fp16_correct_share_kept():
    # every finite fp16 pred, both selectors, gamma -2 and 2, the alpha grid, ieee and npu; the exact values
    # derived from focal terms, as a sweep does (tests/operators/sigmoid_focal_loss_grad/test_terms.py holds them to the scalar oracle)
    x = np.arange(0, 0x10000, dtype=np.uint32).astype(np.uint16).view(np.float16)
    x = x[np.isfinite(x)]
    x64 = x.astype(np.float64)
    ones = np.ones(x.size)
    tables = focal_term_tables(np.concatenate([x64, -x64]), (-2.0, 2.0))
    misses = {}
    for gamma in (-2.0, 2.0):
        pos, neg = tables[gamma].take(slice(0, x.size)), tables[gamma].take(slice(x.size, None))
        for alpha in (0.0, 0.25, 0.5, 0.75, 1.0):
            for sel in (0, 1):
                t = np.full(x.shape, sel, np.int32)
                want = derive_gradient(x64, t, alpha * ones, gamma * ones, ones, ones, np.ones(x.size, np.int64),
                                       "fp16", pos, neg).rounded
                assert not np.isnan(want).any()  # so == compares values (+0 == -0 as the scores do)
                for model in ("ieee", "npu"):
                    out = candidate(model, x[None], t[None], np.ones((1, x.size), np.float16), None, alpha, gamma,
                                    "none")[0]
                    misses[model, gamma] = misses.get((model, gamma), 0) + int((out != want).sum())
    assert misses == FP16_MISSES
