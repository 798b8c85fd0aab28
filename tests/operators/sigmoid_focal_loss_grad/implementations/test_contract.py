"""Contract of spec section 1 (precision/operators/sigmoid_focal_loss_grad/implementations/common.py): every rule rejected with its class."""

import numpy as np
import pytest

from precision.errors import DtypeError, ParameterError, PrecisionError, ShapeError
from precision.operators.sigmoid_focal_loss_grad.guards import evaluate
from precision.operators.sigmoid_focal_loss_grad.implementations.common import (
    prepare_host_scalars,
    validate_element_count,
    validate_inputs,
)

VARIANTS_UNDER_TEST = ["kernel", "naive", "golden", "mmcv", "naive-fp16", "mmcv-fp16"]


def good_inputs(shape=(2, 3), pred_dtype=np.float32):
    pred = np.zeros(shape, pred_dtype)
    target = np.zeros(shape, np.int32)
    dout = np.ones(shape, np.float32)
    weight = np.ones(shape, np.float16)
    return pred, target, dout, weight


def assert_one_line(err, *fragments):
    msg = str(err.value)
    assert "\n" not in msg
    for fragment in fragments:
        assert fragment in msg, msg


class TestValidateInputs:
    def test_accepts_all_profiles(self):
        for p in (np.float16, np.float32):
            for d in (np.float16, np.float32):
                for w in (None, np.float16, np.float32):
                    pred = np.zeros((1, 2), p)
                    weight = None if w is None else np.ones((1, 2), w)
                    out = validate_inputs(pred, np.zeros((1, 2), np.int32), np.ones((1, 2), d), weight,
                                          0.25, 2.0, "sum")
                    assert out.count == 2 and out.alpha == np.float32(0.25)

    @pytest.mark.parametrize("name", ["pred", "target", "dout", "weight"])
    def test_rank_not_2(self, name):
        pred, target, dout, weight = good_inputs()
        arrays = dict(pred=pred, target=target, dout=dout, weight=weight)
        arrays[name] = arrays[name].reshape(-1)
        with pytest.raises(ShapeError) as err:
            validate_inputs(arrays["pred"], arrays["target"], arrays["dout"], arrays["weight"], 0.25, 2.0, "mean")
        assert_one_line(err, name, "rank 1", "rank-2")

    @pytest.mark.parametrize("shape", [(0, 3), (3, 0)])
    def test_empty_dim(self, shape):
        pred, target, dout, weight = good_inputs(shape)
        with pytest.raises(ShapeError) as err:
            validate_inputs(pred, target, dout, weight, 0.25, 2.0, "mean")
        assert_one_line(err, "pred", "> 0")

    @pytest.mark.parametrize("name", ["target", "dout", "weight"])
    def test_shape_differs_from_pred(self, name):
        pred, target, dout, weight = good_inputs()
        arrays = dict(target=target, dout=dout, weight=weight)
        arrays[name] = np.resize(arrays[name], (3, 2))
        with pytest.raises(ShapeError) as err:
            validate_inputs(pred, arrays["target"], arrays["dout"], arrays["weight"], 0.25, 2.0, "mean")
        assert_one_line(err, name, "(3, 2)", "(2, 3)")

    def test_no_broadcasting(self):
        pred, target, dout, weight = good_inputs()
        with pytest.raises(ShapeError):
            validate_inputs(pred, target, dout[:1], weight, 0.25, 2.0, "mean")

    @pytest.mark.parametrize("dtype", [np.int64, np.uint32, np.float32, np.int16])
    def test_target_not_int32(self, dtype):
        pred, target, dout, weight = good_inputs()
        with pytest.raises(DtypeError) as err:
            validate_inputs(pred, target.astype(dtype), dout, weight, 0.25, 2.0, "mean")
        assert_one_line(err, "target", f"dtype={np.dtype(dtype)}", "int32")

    @pytest.mark.parametrize("name", ["pred", "dout", "weight"])
    @pytest.mark.parametrize("dtype", [np.float64, np.int32, np.bool_])
    def test_float_inputs_bad_dtype(self, name, dtype):
        pred, target, dout, weight = good_inputs()
        arrays = dict(pred=pred, dout=dout, weight=weight)
        arrays[name] = arrays[name].astype(dtype)
        with pytest.raises(DtypeError) as err:
            validate_inputs(arrays["pred"], target, arrays["dout"], arrays["weight"], 0.25, 2.0, "mean")
        assert_one_line(err, name, f"dtype={np.dtype(dtype)}", "float16 or float32")

    def test_bfloat16_rejected(self):
        ml_dtypes = pytest.importorskip("ml_dtypes")
        pred, target, dout, weight = good_inputs()
        with pytest.raises(DtypeError):
            validate_inputs(pred.astype(ml_dtypes.bfloat16), target, dout, weight, 0.25, 2.0, "mean")

    @pytest.mark.parametrize("name", ["alpha", "gamma"])
    @pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 1e39, -3.5e38])
    def test_attribute_not_finite(self, name, value):
        pred, target, dout, weight = good_inputs()
        attrs = dict(alpha=0.25, gamma=2.0)
        attrs[name] = value
        with pytest.raises(ParameterError) as err:
            validate_inputs(pred, target, dout, weight, attrs["alpha"], attrs["gamma"], "mean")
        assert_one_line(err, f"{name}=", "finite")

    @pytest.mark.parametrize("value", ["0.25", None, True, [0.25]])
    def test_attribute_not_a_number(self, value):
        pred, target, dout, weight = good_inputs()
        with pytest.raises(ParameterError) as err:
            validate_inputs(pred, target, dout, weight, value, 2.0, "mean")
        assert_one_line(err, "alpha=")

    @pytest.mark.parametrize("reduction", ["Mean", "avg", "", None, 0])
    def test_reduction(self, reduction):
        pred, target, dout, weight = good_inputs()
        with pytest.raises(ParameterError) as err:
            validate_inputs(pred, target, dout, weight, 0.25, 2.0, reduction)
        assert_one_line(err, f"reduction={reduction!r}", "'mean', 'sum', 'none'")

    def test_errors_are_builtin_catchable(self):
        pred, target, dout, weight = good_inputs()
        with pytest.raises(ValueError):
            validate_inputs(pred[0], target, dout, weight, 0.25, 2.0, "mean")
        with pytest.raises(TypeError):
            validate_inputs(pred, target.astype(np.int64), dout, weight, 0.25, 2.0, "mean")


class TestElementCount:
    def test_in_range(self):
        assert validate_element_count((2**31, 2**31)) == 2**62
        assert validate_element_count((2**63 - 1, 1)) == 2**63 - 1

    @pytest.mark.parametrize("shape", [(2**32, 2**31), (2**62, 2), (2**63 - 1, 2)])
    def test_overflow(self, shape):
        with pytest.raises(ShapeError) as err:
            validate_element_count(shape)
        assert_one_line(err, f"N*C={shape[0]}*{shape[1]}", "int64")


class TestHostScalars:
    def test_spec_products(self):
        s = prepare_host_scalars(0.1, 2.5, "mean", 3)
        a, g = np.float32(0.1), np.float32(2.5)
        assert s.a == a and s.g == g
        assert s.g1 == np.float32(g + np.float32(1))
        assert s.ga.tobytes() == np.float32(g * a).tobytes()
        # g*(a-1): two roundings, not one
        assert s.gam1.tobytes() == np.float32(g * np.float32(a - np.float32(1))).tobytes()
        assert s.oma == np.float32(np.float32(1) - a)
        assert float(s.coef) == float(np.float32(1) / np.float32(3))

    def test_gam1_two_roundings_differ_from_one(self):
        # a = 2^-30: a-1 rounds to -1 in float32, so gam1 = -g, while g*(a-1) in double is not -g
        s = prepare_host_scalars(2.0**-30, 3.0, "sum", 1)
        assert float(s.gam1) == -3.0

    @pytest.mark.parametrize("reduction", ["sum", "none"])
    def test_coef_one(self, reduction):
        assert float(prepare_host_scalars(0.25, 2.0, reduction, 12345).coef) == 1.0

    def test_coef_count_rounded_to_float32_first(self):
        # N*C = 2^24 + 1 rounds to 2^24 in float32 before the division
        s = prepare_host_scalars(0.25, 2.0, "mean", 2**24 + 1)
        assert float(s.coef) == 2.0**-24
        # the single-rounding int -> float32 (no detour through float64): 2^54 + 2^30 + 1 -> up
        s = prepare_host_scalars(0.25, 2.0, "mean", 2**54 + 2**30 + 1)
        assert float(np.float32(1) / np.float32(s.coef)) == float(np.float32(2.0**54 + 2**31))

    def test_attribute_rounded_to_float32(self):
        assert float(prepare_host_scalars(0.1, 2.0, "sum", 1).a).hex() == "0x1.99999a0000000p-4"


class TestFp16OnlyVariants:
    @pytest.mark.parametrize("variant", ["naive-fp16", "mmcv-fp16"])
    def test_fp32_pred_rejected(self, variant):
        pred, target, dout, weight = good_inputs()
        with pytest.raises(DtypeError) as err:
            evaluate(variant, pred, target, dout, weight)
        assert_one_line(err, "pred dtype=float32", f"variant={variant}", "float16")
        got = evaluate(variant, pred.astype(np.float16), target, dout, weight)
        assert got.dtype == np.float16


class TestEveryVariantChecksTheContract:
    @pytest.mark.parametrize("variant", VARIANTS_UNDER_TEST)
    def test_rejections(self, variant):
        pred, target, dout, weight = good_inputs()
        with pytest.raises(ShapeError):
            evaluate(variant, pred[0], target, dout, weight)
        with pytest.raises(DtypeError):
            evaluate(variant, pred, target.astype(np.int64), dout, weight)
        with pytest.raises(ParameterError):
            evaluate(variant, pred, target, dout, weight, gamma=float("nan"))
        with pytest.raises(ParameterError):
            evaluate(variant, pred, target, dout, weight, reduction="avg")
        with pytest.raises(PrecisionError):
            evaluate(variant, pred, target, dout.astype(np.float64), weight)
