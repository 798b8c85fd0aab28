"""Tests of precision/operators/sigmoid_focal_loss_grad/implementations/naive.py: naive is the kernel with every guard off."""

import numpy as np
import pytest

from precision.exact.formats import FP16, RNE, RTZ, ordinal_distance, round_to_format
from precision.operators.sigmoid_focal_loss_grad.guards import evaluate, get_variant
from precision.operators.sigmoid_focal_loss_grad.implementations.common import GUARD_IDS, NO_GUARDS
from precision.operators.sigmoid_focal_loss_grad.implementations.kernel import kernel
from precision.operators.sigmoid_focal_loss_grad.implementations.naive import naive, naive_fp16
from precision.machine import get_machine

MODELS = ["ieee", "numpy", "npu"]


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    u = np.dtype(f"u{a.dtype.itemsize}")
    return (a.dtype == b.dtype) and bool(((a.view(u) == b.view(u)) | (np.isnan(a) & np.isnan(b))).all())


def sweep(rng, shape, pred_dtype=np.float32, weight_dtype=np.float32):
    x = rng.uniform(-120, 120, shape).astype(pred_dtype)
    x.ravel()[:8] = [0.0, 100.0, -110.0, 16.0, -30.0, 88.7, -88.7, 9.5]
    t = rng.integers(0, 2, shape).astype(np.int32)
    d = rng.standard_normal(shape).astype(np.float32)
    w = None if weight_dtype is None else (rng.standard_normal(shape) * 2.0 ** rng.uniform(-130, 2, shape)).astype(weight_dtype)
    return x, t, d, w


class TestNaiveIsKernelWithoutGuards:
    @pytest.mark.parametrize("model", MODELS)
    @pytest.mark.parametrize("weight_dtype", [None, np.float16, np.float32])
    @pytest.mark.parametrize("pred_dtype", [np.float16, np.float32])
    def test_bit_identical(self, model, pred_dtype, weight_dtype):
        rng = np.random.default_rng(11)
        x, t, d, w = sweep(rng, (16, 32), pred_dtype, weight_dtype)
        for alpha, gamma in [(0.25, 2.0), (0.75, -1.5), (1.0, 0.0), (-0.5, 5.5)]:
            a = naive(model, x, t, d, w, alpha, gamma, "mean")
            b = kernel(model, x, t, d, w, alpha, gamma, "mean", guards=NO_GUARDS)
            c = evaluate("naive", x, t, d, w, alpha=alpha, gamma=gamma, machine=model)
            assert same_bits(a, b) and same_bits(a, c), (alpha, gamma)

    @pytest.mark.parametrize("guard", GUARD_IDS)
    def test_naive_plus_guard_is_kernel_with_that_guard(self, guard):
        rng = np.random.default_rng(12)
        x, t, d, w = sweep(rng, (8, 64), np.float16)
        for model in ("ieee", "npu"):
            a = evaluate(f"naive+{guard}", x, t, d, w, gamma=-1.5, machine=model)
            b = kernel(model, x, t, d, w, 0.25, -1.5, "mean", guards={guard})
            assert same_bits(a, b)
            assert get_variant(f"naive+{guard}").guards == frozenset({guard})

    def test_kernel_minus_everything_is_naive(self):
        name = "kernel" + "".join(f"-{g}" for g in GUARD_IDS)
        assert get_variant(name).guards == NO_GUARDS
        rng = np.random.default_rng(13)
        x, t, d, w = sweep(rng, (4, 64))
        assert same_bits(evaluate(name, x, t, d, w, machine="npu"), evaluate("naive", x, t, d, w, machine="npu"))

    def test_naive_differs_from_kernel_somewhere(self):
        rng = np.random.default_rng(14)
        x, t, d, w = sweep(rng, (8, 64))
        for model in MODELS:
            assert not same_bits(evaluate("naive", x, t, d, w, machine=model),
                                 evaluate("kernel", x, t, d, w, machine=model))


class TestNaiveStore:
    def test_fp16_store_truncates(self):
        # naive has no G8: the fp16 store is RTZ; naive+G8 stores RNE
        rng = np.random.default_rng(15)
        x = rng.uniform(-6, 6, (4, 64)).astype(np.float16)
        t = rng.integers(0, 2, (4, 64)).astype(np.int32)
        d = rng.uniform(-1, 1, (4, 64)).astype(np.float16)
        wide = evaluate("naive", x.astype(np.float32), t, d, machine="ieee").astype(np.float64)
        assert same_bits(evaluate("naive", x, t, d, machine="ieee"), round_to_format(wide, FP16, RTZ))
        assert same_bits(evaluate("naive+G8", x, t, d, machine="ieee"), round_to_format(wide, FP16, RNE))


class TestNaiveFp16:
    @pytest.mark.parametrize("model", MODELS)
    def test_runs_in_fp16(self, model):
        x = np.array([[-1.25, -1.0, -0.75], [-0.5, -0.25, 0.0]], np.float16)
        t = np.array([[0, 1, 0], [1, 0, 1]], np.int32)
        d = np.array([[-1.5, -1.0, -0.5], [0.0, 0.5, 1.0]], np.float16)
        got = naive_fp16(model, x, t, d, None, 0.25, 2.0, "mean")
        assert got.dtype == np.float16
        fp32 = evaluate("kernel", x, t, d, machine=model)
        # same function, much coarser arithmetic: within a few fp16 ulp on this benign example
        assert ordinal_distance(got, fp32, "fp16").max() <= 8

    def test_is_kernel_without_guards_on_an_fp16_machine(self):
        rng = np.random.default_rng(16)
        x = rng.uniform(-10, 10, (4, 16)).astype(np.float16)
        t = rng.integers(0, 2, (4, 16)).astype(np.int32)
        d = rng.uniform(-1, 1, (4, 16)).astype(np.float16)
        m16 = get_machine("ieee+fp16")
        assert m16.fmt.name == "fp16"
        assert same_bits(naive_fp16("ieee", x, t, d, None, 0.25, 2.0, "sum"),
                         kernel(m16, x, t, d, None, 0.25, 2.0, "sum", guards=NO_GUARDS))

    def test_fp16_q_underflow_nan(self):
        # in fp16, p rounds to 1 already at x = 8.5 (1 + exp(-8.5) = 1 + 2.0e-4 -> 1 + 2^-12... q tiny);
        # at x = 12 q = 1 - p = 0 and Ln(0) = -inf: the unguarded fp16 recipe gives NaN, fp32 does not
        x = np.array([[12.0]], np.float16)
        t = np.array([[1]], np.int32)
        d = np.ones((1, 1), np.float16)
        assert np.isnan(naive_fp16("ieee", x, t, d, None, 0.25, 2.0, "sum")).all()
        assert np.isfinite(evaluate("naive", x, t, d, reduction="sum")).all()
