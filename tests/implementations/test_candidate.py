"""Tests of the issue-6 candidate recipe (precision/implementations/candidate.py).

Accuracy bounds are the values measured against the certified oracle on the
samples below (fp32 output), with no headroom beyond the measured maxima
rounded up; see the module docstring of the candidate for the ingredients.
"""

import numpy as np
import pytest

from precision import oracle
from precision.errors import DtypeError, ParameterError, ShapeError
from precision.guards import VARIANTS, evaluate
from precision.implementations.candidate import candidate
from precision.scoring import ulp_error

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


def _near_root(xs, gamma):
    """The documented root neighbourhood of A for gamma < -1: the bracket
    g*p*ln(p) - q cancels more than 4 bits (float64 estimate)."""
    if gamma >= -1:
        return np.zeros(xs.shape, bool)
    with np.errstate(all="ignore"):
        p, q = 1 / (1 + np.exp(-xs)), 1 / (1 + np.exp(xs))
        u = gamma * p * np.log(p)
        return np.abs(u - q) < np.maximum(np.abs(u), q) / 16


def _max_err(model, gamma, alphas=(0.25, 0.75)):
    worst, nan_where_finite = 0.0, 0
    for alpha in alphas:
        for sel in (0, 1):
            t = np.full(X.shape, sel, np.int32)
            hi, lo, _ = oracle.exact_gradient(X.astype(np.float64), t, alpha, gamma, 1.0, 1.0, 1)
            rounded = oracle.gradient(X.astype(np.float64), t, alpha, gamma, 1.0, 1.0, 1, "fp32")
            out = candidate(model, X[None], t[None], np.ones((1, X.size), np.float32), None, alpha, gamma, "none")[0]
            finite = np.isfinite(rounded)
            # Known limit: an intermediate Exp overflows where the exact value
            # is finite but within a factor |g+1|/alpha of FLT_MAX (gamma < -1).
            edge = np.isinf(out) & finite & (np.abs(rounded) > 2.0**124)
            finite &= ~edge
            nan_where_finite += int((~np.isfinite(out) & finite).sum())
            err = ulp_error(out, (hi, lo), "fp32", rounded)
            keep = finite & ~_near_root(X.astype(np.float64) * (1 - 2 * sel), gamma)
            worst = max(worst, float(err[keep].max()))
    return worst, nan_where_finite


@pytest.mark.parametrize("model", ["ieee", "npu"])
def test_accuracy_fp32_sample(model):
    # Measured maxima on this sample (ieee = npu), outside the 1/16 root
    # neighbourhood: gamma -3: 5.19, -2: 4.61, 6: 5.10, 5: 4.34, others <= 3.94.
    # On the exhaustive fp16 grid the maxima are higher (gamma 6: 7.5, 5: 5.63).
    bounds = {-3.0: 5.5, -2.0: 5.0, 6.0: 5.5, 5.0: 4.5}
    for gamma in GAMMAS:
        worst, bad = _max_err(model, gamma)
        assert bad == 0, gamma
        assert worst <= bounds.get(gamma, 4.0), (gamma, worst)


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


def test_opcount_ratio():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "opcount.py"
    spec = importlib.util.spec_from_file_location("opcount", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    count_ops = module.count_ops
    kernel_ops, _ = count_ops("kernel")
    cand_ops, _ = count_ops("candidate")
    assert cand_ops / kernel_ops <= 1.5
