"""Tests of precision/recipes/steps.py and the recipe tables: plans, shared evaluation, traces."""

import numpy as np
import pytest

from precision.errors import DtypeError, ParameterError
from precision.operators.sigmoid_focal_loss_grad.guards import (
    bind_recipe,
    evaluate,
    evaluate_variants,
    recipe_call,
    register_variant,
    trace_variant,
    VARIANTS,
    variant_names,
)
from precision.operators.sigmoid_focal_loss_grad.implementations.candidate import CANDIDATE_RECIPE
from precision.operators.sigmoid_focal_loss_grad.implementations.golden import GOLDEN_RECIPE
from precision.operators.sigmoid_focal_loss_grad.implementations.kernel import KERNEL_RECIPE, kernel
from precision.operators.sigmoid_focal_loss_grad.implementations.mmcv import MMCV_RECIPE
from precision.machine import Machine, MachineModel
from precision.recipes.steps import KINDS, Recipe, Step, patch

#: Every machine and flush switch (bit-identity of shared evaluation is checked on each).
MACHINES = ["ieee", "numpy", "npu", "npu+ftz", "npu+daz", "npu+ftz+daz", "npu+release", "ieee+ftz", "numpy+daz"]

#: The kernel family's names of spec section 3 (issue 13), plus the guard decisions.
SPEC_NAMES = ("e pos ed neg p q pF qF pg pg1 qg qg1 lp lhs_pos rhs_pos orig recon corr dpos lq lhs_neg rhs_neg "
              "dneg raw weighted scaled out g5_use g7_use g4_tile").split()


def fp16_preds():
    x = np.arange(0, 0x10000, dtype=np.uint32).astype(np.uint16).view(np.float16)
    return x[np.isfinite(x)]


def same_bits(a, b):
    """Bitwise equality, NaN payloads included."""
    a, b = np.asarray(a), np.asarray(b)
    u = np.dtype(f"u{a.dtype.itemsize}")
    return a.dtype == b.dtype and a.shape == b.shape and bool((a.view(u) == b.view(u)).all())


def tensor(preds, dtype, weight=False, seed=0):
    """preds x targets {0, 1, 2}: pred [P, 3], target, dout, weight (optional) of ``dtype``."""
    rng = np.random.default_rng(seed)
    p = np.repeat(np.asarray(preds, np.float32)[:, None], 3, axis=1).astype(dtype)
    t = np.tile(np.array([0, 1, 2], np.int32), (p.shape[0], 1))
    d = (np.exp2(rng.uniform(-20, 6, p.shape)) * rng.choice([-1, 1], p.shape)).astype(dtype)
    w = (np.exp2(rng.uniform(-24 if dtype == np.float16 else -140, 6, p.shape))).astype(dtype) if weight else None
    return p, t, d, w


class TestPlans:
    @pytest.mark.parametrize("name", variant_names())
    def test_every_registered_variant_is_a_recipe(self, name):
        call = recipe_call(name)
        assert call is not None
        plan = call.recipe.plan(call.config)
        assert len(set(plan.names)) == len(plan.names) and plan.names[-1] == "out"
        assert all(s.kind in KINDS for s in plan.steps)

    def test_kernel_exposes_the_spec_names(self):
        plan = KERNEL_RECIPE.plan()
        missing = [n for n in SPEC_NAMES if n not in plan.names]
        assert not missing

    def test_naive_plan_has_no_guard_steps(self):
        plan = KERNEL_RECIPE.plan(recipe_call("naive").config)
        assert not {"g4_tile", "g5_use", "g7_use", "recon", "corr", "ed", "neg"} & set(plan.names)
        assert {"p", "q", "pF", "qF", "lp", "lq", "dpos", "dneg", "raw", "out"} <= set(plan.names)

    def test_keys_differ_only_below_the_switch(self):
        """kernel-G8 shares every key with kernel except the store; kernel-G7 from S8 on."""
        k = KERNEL_RECIPE.plan(recipe_call("kernel").config)
        g8 = KERNEL_RECIPE.plan(recipe_call("kernel-G8").config)
        assert [n for n, a, b in zip(k.names, k.keys, g8.keys) if a != b] == ["out"]
        g7 = KERNEL_RECIPE.plan(recipe_call("kernel-G7").config)
        differ = {n for n, key in zip(g7.names, g7.keys) if key not in set(k.keys)}
        assert differ == {"scaled_g7", "grad", "out"}
        g5 = KERNEL_RECIPE.plan(recipe_call("kernel-G5").config)
        assert {n for n, key in zip(g5.names, g5.keys) if key not in set(k.keys)} == {
            "dpos", "dpos_t", "raw", "weighted", "scaled", "g7_use", "w_recip", "d_recip", "raw_w", "recovered",
            "scaled_g7", "grad", "out"}  # where-steps depend on their mask

    def test_undeclared_configuration_read_fails(self):
        bad = Recipe("bad", [Step("out", ("x",), lambda m, c, k, x: x if k["G1"] else x, "exact")],
                     defaults={"G1": True})
        with pytest.raises(KeyError):
            bad.run(bad.plan(), None, None, {"x": np.zeros(2), "t": None, "d": None, "w": None})

    def test_rows_read_before_defined_are_rejected(self):
        with pytest.raises(ValueError):
            Recipe("bad", [Step("out", ("later",), lambda m, c, k, v: v, "exact"),
                           Step("later", ("x",), lambda m, c, k, v: v, "exact")]).plan()

    def test_patch(self):
        base = np.arange(4.0)
        assert patch(base, None, None) is base
        assert patch(base, np.full(4, 9.0), np.zeros(4, bool)) is base
        out = patch(base, np.array([np.nan, 9.0, np.nan, np.nan]), np.array([False, True, False, False]))
        assert out.tolist() == [0.0, 9.0, 2.0, 3.0] and base[1] == 1.0

    def test_recipes_have_exact_values_for_their_main_steps(self):
        for recipe in (KERNEL_RECIPE, GOLDEN_RECIPE, MMCV_RECIPE):
            for s in recipe.steps:
                assert s.exact is not None or s.kind in ("bool", "const"), (recipe.name, s.name)
        exact = {s.name for s in CANDIDATE_RECIPE.steps if s.exact is not None}
        assert {"e", "zh", "lh", "t1", "vs", "vb", "total", "out"} <= exact


class TestEvaluateVariants:
    @pytest.mark.parametrize("machine", MACHINES)
    def test_bit_identical_to_one_by_one_fast(self, machine):
        preds = fp16_preds()[::61]
        for dtype, weight in ((np.float32, True), (np.float16, False)):
            p, t, d, w = tensor(preds, dtype, weight)
            for alpha, gamma in ((0.25, 2.0), (0.5, -2.0)):
                names = variant_names() + ["kernel[G5=1/16,tile=64]", "kernel[G5=always]", "naive+G4[tile=8]"]
                shared = evaluate_variants(names, p, t, d, w, alpha=alpha, gamma=gamma, reduction="mean",
                                           machine=machine)
                assert list(shared) == names
                for name in names:
                    try:
                        alone = evaluate(name, p, t, d, w, alpha=alpha, gamma=gamma, reduction="mean",
                                         machine=machine)
                    except DtypeError:
                        assert isinstance(shared[name], DtypeError)
                        continue
                    assert same_bits(shared[name], alone), (machine, name, dtype, gamma)

    def test_kept_steps_are_one_read_only_array_per_step_value(self):
        p, t, d, _ = tensor(fp16_preds()[::97], np.float32)
        names = ["kernel", "kernel-G8", "kernel-G2"]
        _, kept = evaluate_variants(names, p, t, d, gamma=-1.0, machine="npu", keep_steps=("p", "pF", "g5_use"))
        assert kept["kernel"]["p"] is kept["kernel-G8"]["p"] is kept["kernel-G2"]["p"]  # one value, one array
        assert kept["kernel"]["pF"] is kept["kernel-G8"]["pF"]
        assert kept["kernel"]["pF"] is not kept["kernel-G2"]["pF"]  # without the clamp: another value
        assert not kept["kernel"]["p"].flags.writeable
        for name in names:  # each equal to the variant evaluated alone
            _, alone = evaluate_variants([name], p, t, d, gamma=-1.0, machine="npu", keep_steps=("p", "pF", "g5_use"))
            for step, value in alone[name].items():
                assert same_bits(kept[name][step], value), (name, step)

    def test_errors_are_returned_per_variant(self):
        p, t, d, _ = tensor([0.5, -3.0], np.float32)
        out = evaluate_variants(["kernel", "nope", "naive-fp16"], p, t, d)
        assert isinstance(out["nope"], ParameterError) and isinstance(out["naive-fp16"], DtypeError)
        assert same_bits(out["kernel"], evaluate("kernel", p, t, d))
        bad = evaluate_variants(["kernel", "golden"], p, t.astype(np.int64), d)
        assert all(isinstance(v, DtypeError) for v in bad.values())

    def test_registered_function_falls_back(self):
        def doubled(machine, pred, target, dout, weight, alpha, gamma, reduction, count=None):
            return (kernel(machine, pred, target, dout, weight, alpha, gamma, reduction) * 2).astype(pred.dtype)

        try:
            register_variant("test-steps-doubled", doubled, "twice the kernel")
            p, t, d, _ = tensor([0.5, -3.0], np.float32)
            out = evaluate_variants(["kernel", "test-steps-doubled"], p, t, d)
            assert same_bits(out["test-steps-doubled"], evaluate("test-steps-doubled", p, t, d))
            assert recipe_call("test-steps-doubled") is None
        finally:
            VARIANTS.pop("test-steps-doubled", None)

    def test_results_are_distinct_arrays(self):
        p, t, d, _ = tensor([0.5, -3.0], np.float32)
        out = evaluate_variants(["kernel", "kernel-G8", "kernel-G1"], p, t, d)
        assert not np.shares_memory(out["kernel"], out["kernel-G8"])
        out["kernel"][:] = 0
        assert same_bits(out["kernel-G8"], evaluate("kernel-G8", p, t, d))

    def test_shared_steps_run_once(self):
        """kernel + kernel-G8 on fp16 pred cost kernel's ops plus one store (a cast per element)."""
        p, t, d, w = tensor(fp16_preds()[::97], np.float16, weight=True)
        alone = Machine(MachineModel("npu"), count_ops=True)
        evaluate("kernel", p, t, d, w, machine=alone)
        both = Machine(MachineModel("npu"), count_ops=True)
        evaluate_variants(["kernel", "kernel-G8"], p, t, d, w, machine=both)
        extra = both.counts - alone.counts
        assert dict(extra) == {"cast": p.size}

    @pytest.mark.slow
    @pytest.mark.parametrize("machine", MACHINES)
    def test_bit_identical_fp16_exhaustive(self, machine):
        """Every registered variant, every machine, every finite fp16 pred x t in {0, 1, 2}."""
        for dtype, weight, alpha, gamma in ((np.float16, False, 0.25, 2.0), (np.float32, True, 0.75, -1.5),
                                            (np.float16, True, 2.0**-30, 0.5)):
            p, t, d, w = tensor(fp16_preds(), dtype, weight, seed=3)
            shared = evaluate_variants(variant_names(), p, t, d, w, alpha=alpha, gamma=gamma, reduction="mean",
                                       machine=machine)
            for name in variant_names():
                try:
                    alone = evaluate(name, p, t, d, w, alpha=alpha, gamma=gamma, reduction="mean",
                                     machine=machine)
                except DtypeError:
                    assert isinstance(shared[name], DtypeError)
                    continue
                assert same_bits(shared[name], alone), (machine, name, np.dtype(dtype).name, gamma)


class TestTrace:
    @pytest.mark.parametrize("name", ["kernel", "naive", "golden", "mmcv", "candidate", "kernel[tile=2]"])
    def test_output_and_steps(self, name):
        p, t, d, w = tensor([-90.0, -17.0, -3.0, 0.0, 0.5, 17.0, 90.0], np.float32, weight=True)
        tr = trace_variant(name, p, t, d, w, gamma=-2.0)
        assert same_bits(tr.output, evaluate(name, p, t, d, w, gamma=-2.0))
        assert same_bits(tr.values["out"], tr.output) and tr.names[-1] == "out"
        assert all(tr.values[n].shape in (p.shape, ()) for n in tr.names)

    def test_kernel_values(self):
        p, t, d, _ = tensor([10.0, -10.0, 0.5], np.float32)
        tr = trace_variant("kernel", p, t, d)
        one = np.float32(1)
        assert same_bits(tr.values["q"], (one - tr.values["p"]).astype(np.float32))
        assert same_bits(tr.values["pF"], np.maximum(tr.values["p"], np.float32(2.0**-126)))
        assert tr.values["x_nonneg"].dtype == bool and tr.values["g5_use"].dtype == bool
        assert not tr.evaluated["w_recip"].any()  # no weight: no recovery anywhere

    def test_where_steps_run_only_where_needed(self):
        """G4 fallback at x = 17 (q rounds to 0: the clamped base) only, with one tile per element."""
        p, t, d, _ = tensor([17.0, 0.5], np.float32)
        tr = trace_variant("kernel[tile=1]", p, t, d, gamma=2.0)
        assert tr.evaluated["qF_ln"][0].all() and not tr.evaluated["qF_ln"][1].any()
        assert np.isnan(tr.values["qF_ln"][1]).all() and tr.values["g4_tile"][0].all()

    def test_not_a_recipe_and_fp16_only(self):
        p, t, d, _ = tensor([0.5], np.float32)
        with pytest.raises(DtypeError):
            trace_variant("naive-fp16", p, t, d)
        try:
            register_variant("test-steps-fn", lambda *a, **k: None, "not a recipe")
            with pytest.raises(ParameterError):
                bind_recipe("test-steps-fn", p, t, d)
        finally:
            VARIANTS.pop("test-steps-fn", None)
