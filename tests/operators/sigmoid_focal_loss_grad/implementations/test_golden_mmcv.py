"""Tests of precision/operators/sigmoid_focal_loss_grad/implementations/golden.py and mmcv.py (spec section 5)."""

import numpy as np
import pytest

from precision.exact.formats import ordinal_distance
from precision.operators.sigmoid_focal_loss_grad.guards import evaluate
from precision.operators.sigmoid_focal_loss_grad.implementations.golden import golden, golden_scalars
from precision.operators.sigmoid_focal_loss_grad.implementations.mmcv import mmcv, mmcv_fp16
from precision.machine import get_machine

F = np.float32
MIN_NORMAL = F(2.0**-126)
MODELS = ["ieee", "numpy", "npu"]


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    u = np.dtype(f"u{a.dtype.itemsize}")
    return a.dtype == b.dtype and bool(((a.view(u) == b.view(u)) | (np.isnan(a) & np.isnan(b))).all())



class Scalar:
    """float32 scalar ops plus the ieee machine's Exp/Ln/Power on one element."""

    def __init__(self, model="ieee"):
        self.m = get_machine(model)

    def exp(self, v):
        return F(self.m.exp(np.array([v], F), ftz=False)[0])

    def ln(self, v):
        return F(self.m.ln(np.array([v], F), ftz=False)[0])

    def pow(self, b, k):
        return F(self.m.pow(np.array([b], F), np.asarray(k, F), algo="intrinsic")[0])


def golden_scalar(s, x, t, d, w, alpha, gamma, reduction, n):
    """The ops-nn golden, statement by statement, in float32 scalars (double-formed constants)."""
    a, g = float(F(alpha)), float(F(gamma))
    one = F(1)
    with np.errstate(all="ignore"):
        probs = one / F(s.exp(-x) + one)
        nadd = F(one - probs)
        lp, lq = s.ln(np.maximum(probs, MIN_NORMAL)), s.ln(np.maximum(nadd, MIN_NORMAL))
        dpos = F(F(F(-a) * s.exp(F(F(g + 1.0) * lq))) + F(F(F(s.exp(F(F(g) * lq)) * lp) * probs) * F(g * a)))
        dneg = F(F(F(F(s.exp(F(F(g) * lp)) * nadd) * lq) * F(g * (a - 1.0))) + F(F(1.0 - a) * s.exp(F(F(g + 1.0) * lp))))
        raw = F(F(dpos * F(one - F(t))) + F(dneg * F(t)))
        if w is not None:
            raw = F(raw * F(w))
        raw = F(raw * F(d))
        if reduction == "mean":
            raw = F(raw * F(1.0 / n))
    return raw


def mmcv_scalar(s, x, t, d, w, alpha, gamma, reduction, n):
    """MMCV's CUDA backward, statement by statement, raw-selector flags."""
    one, zero = F(1), F(0)
    a, g = F(alpha), F(gamma)
    with np.errstate(all="ignore"):
        p = one / F(one + s.exp(-x))
        term_p = F(s.pow(F(one - p), g) * F(F(one - p) - F(F(g * p) * s.ln(np.maximum(p, MIN_NORMAL)))))
        term_n = F(s.pow(p, g) * F(F(F(g * F(one - p)) * s.ln(np.maximum(F(one - p), MIN_NORMAL))) - p))
        fp, fn = F(one - F(t)), F(t)
        out = F(zero + F(F(-fp * a) * term_p))
        out = F(out + F(F(-fn * F(one - a)) * term_n))
        if w is not None:
            out = F(out * F(w))
        out = F(out * F(d))
        if reduction == "mean":
            out = F(out / F(n))
    return out


def random_points(seed, n=96):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-100, 100, n).astype(np.float32)
    x[:6] = [0.0, 16.0, 100.0, -100.0, 88.5, -104.0]
    t = rng.choice(np.array([0, 1, 2, -1], np.int32), n, p=[0.45, 0.45, 0.05, 0.05])
    d = rng.standard_normal(n).astype(np.float32)
    w = rng.uniform(0.1, 3, n).astype(np.float32)
    return x.reshape(8, -1), t.reshape(8, -1), d.reshape(8, -1), w.reshape(8, -1)


def scalar_reference(scalar_fn, x, t, d, w, alpha, gamma, reduction):
    """The scalar re-derivation ``scalar_fn`` at every element, float32, shaped like x."""
    s = Scalar()
    weights = w.ravel() if w is not None else [None] * x.size
    return np.array([scalar_fn(s, *v, alpha, gamma, reduction, x.size)
                     for v in zip(x.ravel(), t.ravel(), d.ravel(), weights)], np.float32).reshape(x.shape)

class TestGolden:
    def test_scalars_formed_in_double(self):
        # g*(a-1) in double, rounded once, differs from the kernel's two float32 roundings
        s = golden_scalars(F(0.1), F(3.0), "mean", 3)
        assert float(s.gam1).hex() == "-0x1.59999a0000000p+1"
        kernel_gam1 = F(F(3.0) * F(F(0.1) - F(1)))
        assert float(kernel_gam1).hex() == "-0x1.5999980000000p+1"
        assert float(s.coef) == float(F(1 / 3))
        assert golden_scalars(F(0.25), F(2.0), "sum", 3).coef is None

    @pytest.mark.parametrize("alpha,gamma,reduction", [(0.25, 2.0, "mean"), (0.6, -1.5, "sum"), (1.25, 4.5, "none")])
    @pytest.mark.parametrize("with_weight", [False, True])
    def test_matches_scalar_op_order(self, alpha, gamma, reduction, with_weight):
        x, t, d, w = random_points(21)
        w = w if with_weight else None
        got = golden("ieee", x, t, d, w, alpha, gamma, reduction)
        want = scalar_reference(golden_scalar, x, t, d, w, alpha, gamma, reduction)
        assert same_bits(got, want)

    def test_fp16_pred_casts_rne(self):
        x, t, d, _ = random_points(22)
        wide = golden("ieee", x.astype(np.float16).astype(np.float32), t, d, None, 0.25, 2.0, "mean")
        narrow = golden("ieee", x.astype(np.float16), t, d, None, 0.25, 2.0, "mean")
        assert same_bits(narrow, wide.astype(np.float16))

    @pytest.mark.parametrize("model", MODELS)
    def test_finite_where_naive_is_nan(self, model):
        x = np.array([[100.0, -110.0]], np.float32)
        t = np.array([[0, 1]], np.int32)
        assert np.isfinite(evaluate("golden", x, t, np.ones_like(x), machine=model)).all()


class TestMmcv:
    @pytest.mark.parametrize("alpha,gamma,reduction", [(0.25, 2.0, "mean"), (0.6, -1.5, "sum"), (1.25, 4.5, "none")])
    @pytest.mark.parametrize("with_weight", [False, True])
    def test_matches_scalar_op_order(self, alpha, gamma, reduction, with_weight):
        x, t, d, w = random_points(23)
        w = w if with_weight else None
        got = mmcv("ieee", x, t, d, w, alpha, gamma, reduction)
        want = scalar_reference(mmcv_scalar, x, t, d, w, alpha, gamma, reduction)
        assert same_bits(got, want)

    def test_same_function_as_kernel_on_benign_points(self):
        rng = np.random.default_rng(24)
        x = rng.uniform(-6, 6, (8, 32)).astype(np.float32)
        t = rng.integers(0, 2, (8, 32)).astype(np.int32)
        d = rng.uniform(0.5, 1, (8, 32)).astype(np.float32)
        a = evaluate("mmcv", x, t, d, reduction="sum")
        b = evaluate("kernel", x, t, d, reduction="sum")
        assert ordinal_distance(a, b, "fp32").max() <= 64

    def test_fp16_flt_min_rounds_to_zero(self):
        # In half, T(FLT_MIN) = 0: at x = 12, 1 - p rounds to 0 in fp16 and log(max(0, 0)) = -inf;
        # term_n = pow(p, g) * (g*(1-p)*(-inf) - p) = 1 * (0*(-inf) - 1) = NaN.  fp32 MMCV is finite.
        x = np.array([[12.0, 12.0]], np.float16)
        t = np.array([[1, 0]], np.int32)
        d = np.ones((1, 2), np.float16)
        got16 = mmcv_fp16("ieee", x, t, d, None, 0.25, 2.0, "sum")
        assert got16.dtype == np.float16
        assert np.isnan(got16).all()  # t = 0 too: 0 * NaN leaks
        assert np.isfinite(mmcv("ieee", x, t, d, None, 0.25, 2.0, "sum")).all()
        m16 = get_machine("ieee+fp16")
        assert float(m16.asarray(MIN_NORMAL)) == 0.0

    @pytest.mark.parametrize("model", MODELS)
    def test_fp16_variant_example(self, model):
        x = np.array([[-1.25, -1.0, -0.75], [-0.5, -0.25, 0.0]], np.float16)
        t = np.array([[0, 1, 0], [1, 0, 1]], np.int32)
        d = np.array([[-1.5, -1.0, -0.5], [0.0, 0.5, 1.0]], np.float16)
        got = evaluate("mmcv-fp16", x, t, d, machine=model)
        ref = evaluate("kernel", x, t, d, machine=model)
        assert ordinal_distance(got, ref, "fp16").max() <= 8
