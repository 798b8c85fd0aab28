"""Tests of precision/operators/sigmoid_focal_loss_grad/guards.py: guard names, the variant table, name parsing, evaluate()."""

import math

import numpy as np
import pytest

import precision.operators.sigmoid_focal_loss_grad.guards as guards_module
from precision.errors import ParameterError
from precision.operators.sigmoid_focal_loss_grad.guards import (
    GUARD_IDS,
    GUARD_NAMES,
    VARIANTS,
    Variant,
    evaluate,
    get_variant,
    guard_set_name,
    list_variants,
    register_variant,
    variant_names,
)
from precision.operators.sigmoid_focal_loss_grad.implementations.common import ALL_GUARDS, NO_GUARDS
from precision.operators.sigmoid_focal_loss_grad.implementations.kernel import kernel

X = np.array([[-1.25, -1.0, -0.75], [-0.5, -0.25, 0.0]], np.float32)
T = np.array([[0, 1, 0], [1, 0, 1]], np.int32)
D = np.array([[-1.5, -1.0, -0.5], [0.0, 0.5, 1.0]], np.float32)


def same_bits(a, b):
    return a.dtype == b.dtype and bool(((a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))).all())


class TestGuardNames:
    def test_ids_and_long_names(self):
        assert GUARD_IDS == ("G1", "G2", "G3", "G4", "G5", "G6", "G7", "G8")
        assert GUARD_NAMES == {
            "G1": "stable_sigmoid", "G2": "log_clamp", "G3": "high_precision_power",
            "G4": "clamped_power_fallback", "G5": "cancellation_correction", "G6": "alpha_one_select",
            "G7": "subnormal_recovery", "G8": "rint_output",
        }

    def test_guard_set_name(self):
        assert guard_set_name(NO_GUARDS) == "naive"
        assert guard_set_name(ALL_GUARDS) == "kernel"
        assert guard_set_name({"G3"}) == "naive+G3"
        assert guard_set_name(ALL_GUARDS - {"G5"}) == "kernel-G5"
        assert guard_set_name({"G4", "G2"}) == "naive+G2+G4"


class TestTable:
    def test_fixed_rows(self):
        names = variant_names()
        expected = (["naive"] + [f"naive+G{i}" for i in range(1, 9)] + ["kernel"]
                    + [f"kernel-G{i}" for i in range(1, 9)] + ["naive-fp16", "golden", "mmcv", "mmcv-fp16"])
        assert names[:len(expected)] == expected
        for name in expected:
            row = VARIANTS[name]
            assert row.name == name and row.description and callable(row.function)

    def test_guard_sets_of_rows(self):
        assert VARIANTS["naive"].guards == NO_GUARDS
        assert VARIANTS["kernel"].guards == ALL_GUARDS
        for g in GUARD_IDS:
            assert VARIANTS[f"naive+{g}"].guards == {g}
            assert VARIANTS[f"kernel-{g}"].guards == ALL_GUARDS - {g}
        assert VARIANTS["golden"].guards is None

    def test_list_variants_rows(self):
        rows = list_variants()
        assert all(isinstance(n, str) and isinstance(d, str) and d for n, d in rows)
        assert ("kernel", VARIANTS["kernel"].description) in rows
        assert any(n.startswith("kernel[G5=") for n, _ in rows)
        assert any(n.startswith("kernel[tile=") for n, _ in rows)


class TestParsing:
    def test_multiple_guards(self):
        assert get_variant("naive+G2+G4").guards == {"G2", "G4"}
        assert get_variant("kernel-G5-G7").guards == ALL_GUARDS - {"G5", "G7"}
        assert get_variant("naive+g3").guards == {"G3"}

    @pytest.mark.parametrize("spelling,value", [
        ("1/16", 0.0625), ("2^-4", 0.0625), ("2**-4", 0.0625), ("2^(-4)", 0.0625), ("0.0625", 0.0625),
        ("0x1p-4", 0.0625), ("1/64", 0.015625), ("0.1", 0.1), ("0", 0.0),
        ("never", "never"), ("always", "always"), ("inf", "always"),
    ])
    def test_g5_threshold(self, spelling, value):
        params = dict(get_variant(f"kernel[G5={spelling}]").params)
        assert params["g5_threshold"] == value
        assert params["guards"] == ALL_GUARDS

    def test_tile(self):
        assert dict(get_variant("kernel[tile=64]").params)["tile"] == 64
        params = dict(get_variant("kernel-G5[tile=8]").params)
        assert params["tile"] == 8 and "G5" not in params["guards"]
        params = dict(get_variant("kernel[G5=2^-4, tile=512]").params)
        assert params == {"guards": ALL_GUARDS, "g5_threshold": 0.0625, "tile": 512}
        assert dict(get_variant("naive+G4[tile=2]").params)["tile"] == 2

    @pytest.mark.parametrize("name", [
        "kernal", "naive+G9", "kernel+G2", "naive-G2", "kernel-G5-G5", "kernel[G5=]", "kernel[G5=-1/16]",
        "kernel[G5=1/0]", "kernel[G5=abc]", "kernel[tile=0]", "kernel[tile=x]", "kernel[tile=1.5]",
        "kernel[foo=1]", "kernel[G5=1/16,G5=1/8]", "kernel-G5[G5=1/16]", "kernel-G4[tile=8]",
        "naive[G5=1/16]", "golden[tile=4]", "", "KERNEL", "kernel[G5=nan]",
    ])
    def test_rejected(self, name):
        with pytest.raises(ParameterError) as err:
            get_variant(name)
        assert "\n" not in str(err.value) and "variant=" in str(err.value)

    def test_unknown_lists_valid_names(self):
        with pytest.raises(ParameterError) as err:
            get_variant("kernal")
        msg = str(err.value)
        for name in ("naive", "kernel", "kernel-G5", "golden", "mmcv-fp16", "naive-fp16"):
            assert name in msg

    def test_not_a_string(self):
        with pytest.raises(ParameterError):
            get_variant(42)


class TestEvaluate:
    def test_parsed_variant_runs_its_parameters(self):
        x = np.linspace(-2.5, 0.5, 3001, dtype=np.float32).reshape(1, -1)
        t = np.zeros_like(x, dtype=np.int32)
        d = np.ones_like(x)
        a = evaluate("kernel[G5=1/4]", x, t, d, gamma=-2.0, reduction="sum")
        b = kernel("ieee", x, t, d, None, 0.25, -2.0, "sum", g5_threshold=0.25)
        assert same_bits(a, b)
        assert not same_bits(a, evaluate("kernel", x, t, d, gamma=-2.0, reduction="sum"))

    def test_defaults(self):
        a = evaluate("kernel", X, T, D)
        b = kernel("ieee", X, T, D, None, 0.25, 2.0, "mean")
        assert same_bits(a, b)

    def test_keyword_only(self):
        with pytest.raises(TypeError):
            evaluate("kernel", X, T, D, None, 0.25)

    def test_variant_object(self):
        assert same_bits(evaluate(VARIANTS["naive"], X, T, D), evaluate("naive", X, T, D))

    def test_bad_machine(self):
        with pytest.raises(ParameterError):
            evaluate("kernel", X, T, D, machine="gpu")


class TestRegisterVariant:
    def test_register_and_evaluate(self):
        def doubled(machine, pred, target, dout, weight, alpha, gamma, reduction, factor=2.0):
            out = kernel(machine, pred, target, dout, weight, alpha, gamma, reduction)
            return (out * np.float32(factor)).astype(out.dtype)

        try:
            row = register_variant("test-doubled", doubled, "kernel times a factor", params={"factor": 4.0})
            assert isinstance(row, Variant) and row.family == "candidate"
            assert ("test-doubled", "kernel times a factor") in list_variants()
            got = evaluate("test-doubled", X, T, D)
            assert same_bits(got, (evaluate("kernel", X, T, D) * np.float32(4)).astype(np.float32))
            with pytest.raises(ParameterError):
                register_variant("test-doubled", doubled, "again")
            register_variant("test-doubled", doubled, "replaced", replace=True)
            assert VARIANTS["test-doubled"].description == "replaced"
        finally:
            VARIANTS.pop("test-doubled", None)

    @pytest.mark.parametrize("name", ["kernel", "naive+G2", "kernel-G3", "kernel[tile=4]", "", "a b"])
    def test_collisions_and_bad_names(self, name):
        with pytest.raises(ParameterError):
            register_variant(name, kernel, "x")

    def test_not_callable(self):
        with pytest.raises(ParameterError):
            register_variant("test-x", 3, "x")


def test_all_matches_public_names():
    assert set(guards_module.__all__) == {n for n in guards_module.__all__ if hasattr(guards_module, n)}
    assert math.isfinite(float(evaluate("golden", X, T, D)[0, 0]))
