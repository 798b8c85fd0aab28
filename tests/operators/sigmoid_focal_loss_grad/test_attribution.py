"""Tests of precision/operators/sigmoid_focal_loss_grad/attribution.py: exact step values, Herbie's local error, causes, reachability."""

import math

import numpy as np
import pytest
from mpmath.ctx_mp import MPContext

from precision.operators.sigmoid_focal_loss_grad import oracle
from precision.operators.sigmoid_focal_loss_grad.attribution import CAUSES, POINT_COLUMNS, STEP_COLUMNS, attribute, describe
from precision.exact.formats import FP32, ordinal_distance
from precision.operators.sigmoid_focal_loss_grad.guards import evaluate
from precision.operators.sigmoid_focal_loss_grad.implementations.kernel import KERNEL_RECIPE

F = np.float32


def point(variant, x, t, **kw):
    """Attribution of one point: (points row, steps indexed by name, the Attribution)."""
    att = attribute(variant, np.array([x], kw.pop("dtype", np.float32)), [t], **kw)
    return att.points.loc[0], att.steps.set_index("step"), att


# ---------------------------------------------------------------------------
# Points whose cause is known by construction
# ---------------------------------------------------------------------------

class TestKnownCauses:
    @pytest.mark.parametrize("x", [9.0, 10.0, 12.5, 15.0])
    def test_q_cancellation_at_large_x_positive_term(self, x):
        top, steps, att = point("kernel", x, 0)
        assert (top["top_step"], top["top_cause"]) == ("q", "cancellation")
        assert steps.loc["q", "local_ulp"] > 100 and steps.loc["q", "cond"] > 1e3
        assert steps.loc["lp", "cause"] == "sensitivity"  # ln(p) inherits the same rounding of p
        assert describe(att).startswith("q = 1 - p: p rounds to 1 - ")

    @pytest.mark.parametrize("x", [-9.0, -10.0, -12.5, -15.0])
    def test_ln_of_q_near_one_negative_term(self, x):
        top, steps, _ = point("kernel", x, 1)
        assert (top["top_step"], top["top_cause"]) == ("lq", "sensitivity")
        assert steps.loc["q", "local_ulp"] <= 1  # q = 1 - p is accurate here: p is small

    def test_clamped_base(self):
        """x = -88: the exact p = 6.05e-39 is subnormal and G2's clamp moves it to 2^-126."""
        top, steps, att = point("kernel", -88.0, 1, gamma=-0.5)
        assert (top["top_step"], top["top_cause"]) == ("pF", "clamp")
        assert steps.loc["pF", "computed"] == 2.0**-126 and steps.loc["pF", "reaches_output"]
        assert top["err_ulp"] > 1e6 and "clamp" in describe(att)

    def test_clamp_at_x_17_is_not_the_local_error(self):
        """At x >= 17 the clamp of q engages on the computed q = 0, but the loss is q = 1 - p's."""
        top, steps, _ = point("kernel", 17.0, 0)
        assert steps.loc["q", "computed"] == 0 and steps.loc["qF", "computed"] == 2.0**-126
        assert steps.loc["qF", "local_ulp"] == 0  # the clamp of the exact q (normal) does nothing
        assert (top["top_step"], top["top_cause"]) == ("q", "cancellation")

    def test_flushed_product_under_ftz(self):
        """raw * weight is subnormal (weight 2^-127): npu+ftz flushes it; without G7 that reaches the output."""
        kw = dict(weight=2.0**-127, dout=2.0**30, machine="npu+ftz")
        top, steps, att = point("kernel-G7", 0.0, 0, **kw)
        assert (top["top_step"], top["top_cause"]) == ("weighted", "flush")
        assert top["computed"] == 0 and top["exact_rounded"] != 0
        assert "flushes it to zero" in describe(att)
        # with G7 the recovery runs instead: the flushed product no longer reaches the output
        top, steps, _ = point("kernel", 0.0, 0, **kw)
        assert steps.loc["weighted", "cause"] == "flush" and not steps.loc["weighted", "reaches_output"]
        assert steps.loc["recovered", "reaches_output"] and top["top_step"] != "weighted"
        assert top["err_ulp"] < 20

    @pytest.mark.parametrize("t", [0, 1])
    def test_nan_from_inf_times_zero_leaks_through_the_selector(self, t):
        """gamma = -2, x = 17: qF = 2^-126, qg = inf, lp = Ln(1) = 0, qg * lp = NaN in dpos."""
        top, steps, att = point("kernel", 17.0, t, gamma=-2.0)
        assert np.isnan(top["computed"]) and np.isfinite(top["exact_rounded"])
        assert (top["top_step"], top["top_cause"]) == ("qg_lp", "nan_propagation")
        assert steps.loc["qg_lp", "reaches_output"]  # through 0 * NaN even when t = 1
        assert steps.loc["dpos", "cause"] == "nan_propagation"
        if t == 1:
            assert "unselected term" in describe(att)

    def test_unselected_term_does_not_reach_unless_it_leaks(self):
        top, steps, _ = point("kernel", 10.0, 0)
        assert not steps.loc["lq", "reaches_output"] and not steps.loc["dneg", "reaches_output"]
        assert steps.loc["dneg_t", "reaches_output"]  # the product itself (0) does reach

    def test_naive_nan_from_zero_times_inf(self):
        top, steps, att = point("naive", 17.0, 0)  # q = 0, lq = -inf, pg * q * lq = 0 * inf
        assert (top["top_step"], top["top_cause"]) == ("pg_q_lq", "nan_propagation")
        assert "0 * NaN = NaN" in describe(att)

    def test_exact_point_has_no_top_cause(self):
        top, steps, att = point("kernel", 0.0, 0)
        assert top["err_ulp"] <= 0.5
        assert top["top_step"] is None or top["top_local_ulp"] <= 1


# ---------------------------------------------------------------------------
# Local error at ordinary points
# ---------------------------------------------------------------------------

def _amplification(row, plan_inputs):
    """A priori bound on the local error of an ieee step (correctly rounded op, inputs within 1/2 ulp).

    Each rounded input has relative error <= 2^-24 and the output's ulp is >= 2^-24 of it, so the
    local error is < 1 + (sum of the condition numbers of the rounded inputs): the count of rounded
    factors for * and /, (|a| + |b|)/|a +- b| <= 2 cond for sums, cond for exp, ln and pow.
    """
    kind, cond = row["kind"], row["cond"]
    rounded_inputs = [n for n in plan_inputs if n not in ("x", "t", "d", "w")]
    if kind in ("mul", "div", "selector"):
        return len(rounded_inputs)
    if kind in ("add", "sub"):
        return 2 * cond
    if kind in ("exp", "ln", "pow"):
        return cond
    return 0.0 if kind == "store" else 1.0


class TestLocalError:
    def test_ieee_kernel_at_ordinary_points(self):
        """x in [-4, 4], gamma 2: every step within 1 ulp unless its inputs' roundings are amplified.

        The steps that exceed 1 ulp here are those Herbie's measure charges with an amplified input
        rounding: q = 1 - p and ln(p), ln(q) (condition numbers up to 55), the powers with exponent
        3 (condition 3) and products of two rounded values (up to 2 ulp); each stays within its
        a-priori bound, and every well-conditioned single-rounding step is within 1 ulp.
        """
        rng = np.random.default_rng(1)
        x = rng.uniform(-4, 4, 300).astype(F)
        t = rng.integers(0, 2, x.size)
        att = attribute("kernel", x, t, gamma=2.0, reduction="sum")
        plan = KERNEL_RECIPE.plan()
        inputs = {s.name: s.inputs for s in plan.steps}
        rows = att.steps[att.steps["evaluated"] & att.steps["local_ulp"].notna()]
        bound = np.array([_amplification(r, inputs[r["step"]]) for _, r in rows.iterrows()])
        assert (rows["local_ulp"].to_numpy() <= np.floor(bound) + 1).all()
        simple = bound <= 1
        assert (rows["local_ulp"].to_numpy()[simple] <= 1).all()
        over = set(rows.loc[rows["local_ulp"] > 1, "step"])
        assert over <= {"q", "lp", "lq", "pg", "pg1", "qg", "qg1", "qg_lp", "qg_lp_p", "pg_q", "pg_q_lq",
                        "corr_lp", "corr_lp_p", "recon", "lhs_pos", "lhs_neg", "dpos_t", "dneg_t"}
        assert att.steps["certified"][att.steps["exact"].notna()].all()

    def test_correctly_rounded_steps_from_exact_inputs_have_zero_error(self):
        _, steps, _ = point("kernel", 0.75, 0)
        for name in ("ax", "nax", "e", "ed"):  # exp of an exact input: correctly rounded on ieee
            assert steps.loc[name, "local_ulp"] == 0


# ---------------------------------------------------------------------------
# Exact values against the oracle
# ---------------------------------------------------------------------------

def _points(n=60, seed=2):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(-30, 30, n - 6), [0.0, -0.0, 17.0, -17.0, 88.5, -90.0]]).astype(F)
    t = rng.choice([0, 1, 2, -1], x.size)
    d = (np.exp2(rng.uniform(-10, 10, x.size)) * rng.choice([-1, 1], x.size)).astype(F)
    w = np.exp2(rng.uniform(-10, 5, x.size)).astype(F)
    return x, t, d, w


class TestExactValues:
    @pytest.mark.parametrize("variant,gamma,alpha", [("kernel", 2.0, 0.25), ("golden", -2.0, 0.75),
                                                     ("mmcv", 0.5, 0.25), ("candidate", -1.5, 0.5)])
    def test_gradient_matches_the_oracle(self, variant, gamma, alpha):
        x, t, d, w = _points()
        att = attribute(variant, x, t, d, w, alpha=alpha, gamma=gamma, count=6)
        want = oracle.gradient(x.astype(np.float64), t, alpha, gamma, w.astype(np.float64), d.astype(np.float64),
                               6, fmt="fp32")
        got = att.points["exact_rounded"].to_numpy().astype(F)
        assert (ordinal_distance(got, want, "fp32") == 0).all()
        assert (att.points["computed"].to_numpy().astype(F).view(np.uint32)
                == evaluate(variant, x[None], t[None].astype(np.int32), d[None], w[None], alpha=alpha,
                            gamma=gamma, count=6).ravel().view(np.uint32)).all()

    def test_terms_and_sigmoid_match(self):
        x, t, d, w = _points(30)
        att = attribute("kernel", x, t, gamma=-2.0, alpha=0.75)
        steps = att.steps.set_index(["point", "step"])
        ctx = MPContext()
        ctx.prec = 300
        for i, xi in enumerate(x.astype(float)):
            p = 1 / (1 + ctx.exp(-ctx.mpf(xi)))
            q = 1 / (1 + ctx.exp(ctx.mpf(xi)))
            assert steps.loc[(i, "p"), "exact_rounded"] == FP32.round_mpf(p._mpf_)
            assert steps.loc[(i, "q"), "exact_rounded"] == FP32.round_mpf(q._mpf_)
            a_pos = oracle.focal_term(xi, -2.0, 200)
            a_neg = oracle.focal_term(-xi, -2.0, 200)
            dpos = ctx.mpf(0.75) * ctx.make_mpf(a_pos.mid)
            dneg = -ctx.mpf(0.25) * ctx.make_mpf(a_neg.mid)
            assert steps.loc[(i, "dpos"), "exact_rounded"] == FP32.round_mpf(dpos._mpf_)
            assert steps.loc[(i, "dneg"), "exact_rounded"] == FP32.round_mpf(dneg._mpf_)

    def test_clamp_stands_for_its_input(self):
        _, steps, _ = point("kernel", -95.0, 1)
        assert steps.loc["pF", "exact"] == steps.loc["p", "exact"] and steps.loc["p", "exact"] < 2.0**-126


# ---------------------------------------------------------------------------
# The batch API
# ---------------------------------------------------------------------------

class TestAttribute:
    def test_columns_and_shapes(self):
        x, t, d, w = _points(40)
        att = attribute("kernel", x, t, d, w, gamma=0.5)
        n_steps = len(KERNEL_RECIPE.plan().steps)
        assert tuple(att.steps.columns) == STEP_COLUMNS and tuple(att.points.columns) == POINT_COLUMNS
        assert len(att.steps) == x.size * n_steps and len(att.points) == x.size
        assert set(att.steps["cause"].astype(str)) <= set(CAUSES)
        assert set(att.points["top_cause"]) <= set(CAUSES)
        assert att.points["variant"].eq("kernel").all() and att.points["format"].eq("fp32").all()

    def test_repeated_points_give_identical_rows(self):
        att = attribute("kernel", np.array([10.0, 3.0, 10.0], F), [0, 1, 0])
        a = att.steps[att.steps["point"] == 0].drop(columns="point").reset_index(drop=True)
        b = att.steps[att.steps["point"] == 2].drop(columns="point").reset_index(drop=True)
        assert a.equals(b)

    def test_fp16_variant(self):
        x = np.array([5.0, -5.0, 0.25], np.float16)
        att = attribute("naive-fp16", x, [0, 1, 0])
        assert att.points["format"].eq("fp16").all()
        assert set(att.steps["format"].astype(str)) <= {"fp16", "bool"}

    def test_candidate_has_untracked_compensation_terms(self):
        att = attribute("candidate", np.array([1.0, -20.0], F), [0, 1], gamma=-1.5)
        steps = att.steps.set_index(["point", "step"])
        assert steps.loc[(0, "el"), "cause"] == "untracked" and math.isnan(steps.loc[(0, "el"), "local_ulp"])
        assert steps.loc[(0, "zh"), "local_ulp"] <= 1
        assert att.points["err_ulp"].max() < 4

    def test_not_a_recipe(self):
        from precision.errors import ParameterError
        from precision.operators.sigmoid_focal_loss_grad.guards import VARIANTS, register_variant
        try:
            register_variant("test-attr-fn", lambda *a, **k: None, "not a recipe")
            with pytest.raises(ParameterError):
                attribute("test-attr-fn", np.array([1.0], F), [0])
        finally:
            VARIANTS.pop("test-attr-fn", None)
