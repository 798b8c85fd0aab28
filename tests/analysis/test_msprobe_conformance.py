"""Our msprobe standards against msprobe's own functions (the optional ``conformance`` extra).

msprobe (``mindstudio-probe``) and the CPU build of torch are imported from
the extra; where they cannot be installed the module is skipped with the
reason.  On a fixture of normal, small, subnormal and special values (fp16
and fp32, a device and a third party against one float64 bench) every metric
of :mod:`precision.analysis.msprobe` equals msprobe's to 1e-12 relative (the
fp16 mean ulp error, which msprobe sums in float32, to its float32 rounding)
and every verdict is msprobe's.
"""

from __future__ import annotations

import types

import numpy as np
import pandas as pd
import pytest

from precision.analysis.groups import Grouping
from precision.analysis.msprobe import (MSPROBE_PARAMETERS, msprobe_columns, msprobe_metrics, msprobe_point_values,
                                        msprobe_verdicts)
from precision.exact.formats import get_format

torch = pytest.importorskip("torch", reason="the conformance extra (pip install -e '.[conformance]') is not installed")
pytest.importorskip("msprobe", reason="the conformance extra (mindstudio-probe) is not installed")

from msprobe.core.common.const import CompareConst  # noqa: E402
from msprobe.pytorch.api_accuracy_checker.compare import algorithm  # noqa: E402
from msprobe.pytorch.api_accuracy_checker.compare.api_precision_compare import \
    get_absolute_threshold_result  # noqa: E402
from msprobe.pytorch.api_accuracy_checker.compare.compare import Comparator  # noqa: E402
from msprobe.pytorch.api_accuracy_checker.compare.compare_input import CompareInput, PrecisionCompareInput  # noqa: E402
from msprobe.pytorch.api_accuracy_checker.compare.compare_utils import ApiPrecisionCompareColumn as Col  # noqa: E402
from msprobe.pytorch.api_accuracy_checker.precision_standard.absolute_threshold import \
    AbsolutethdCompare  # noqa: E402
from msprobe.pytorch.api_accuracy_checker.precision_standard.benchmark_compare import (  # noqa: E402
    BenchmarkCompare, BenchmarkPrecisionCompare)
from msprobe.pytorch.api_accuracy_checker.precision_standard.ulp_compare import (  # noqa: E402
    UlpCompare, UlpPrecisionCompare)

TORCH_DTYPE = {"fp16": torch.float16, "fp32": torch.float32}


def _fixture(fmt: str, seed: int, scale: float, specials: bool):
    """(bench float64, device outputs in the format): normal, small, subnormal, zero and special values."""
    f = get_format(fmt)
    rng = np.random.default_rng(seed)
    tiny = 2.0 ** (f.emin - f.prec + 1)  # the least subnormal
    bench = np.concatenate([
        rng.uniform(-4, 4, 600),  # normal
        rng.uniform(-1, 1, 150) * MSPROBE_PARAMETERS[fmt]["small_value"],  # small
        rng.integers(1, 40, 60) * tiny,  # subnormal in the format
        [0.0, -0.0, 1e-300, 2.0 ** -20, 2.0 ** -10, 1.0, 0.5, 3.0 * tiny],
        [1e301, -1e301, 7e4, -1e39] if specials else [],  # overflow in the format (fp16 for 7e4)
    ])
    with np.errstate(over="ignore"):
        device = bench.astype(f.dtype)
    bits = device.view(f.uint_dtype).astype(np.int64)
    sign = bits & (1 << (8 * f.dtype.itemsize - 1))
    magnitude = bits - sign
    top = np.asarray(np.finfo(f.dtype).max, dtype=f.dtype).view(f.uint_dtype).astype(np.int64)
    step = np.where(rng.random(bench.size) < 0.3, rng.integers(-3, 4, bench.size) * scale, 0).astype(np.int64)
    moved = np.where(np.isfinite(device) & (magnitude > 0), np.clip(magnitude + step, 1, top), magnitude)
    device = (moved + sign).astype(f.uint_dtype).view(f.dtype).copy()
    if specials:
        device[5], device[17], device[33] = np.nan, np.inf, -device[33]  # NaN, inf, wrong sign
        device[-4:] = np.asarray([np.inf, -np.inf, np.inf, np.nan], dtype=f.dtype)
    return bench, device


def _ours(bench, device, fmt):
    f = get_format(fmt)
    with np.errstate(over="ignore"):
        cast = bench.astype(f.dtype).astype(np.float64)
    g = Grouping(np.zeros(bench.size, dtype=np.int64), 1)
    cols = msprobe_columns(g, device.astype(np.float64), bench, cast, fmt)
    frame = pd.DataFrame({"count": [bench.size], "format": [fmt], **{k: v for k, v in cols.items()}})
    return msprobe_metrics(frame).iloc[0], frame


def _theirs(bench, device, fmt):
    dtype = TORCH_DTYPE[fmt]
    out = {}
    for cls in (BenchmarkCompare, UlpCompare, AbsolutethdCompare):
        column = {}
        with np.errstate(all="ignore"):
            cls(CompareInput(bench, device, column, dtype)).compare()
        out.update(column)
    with np.errstate(all="ignore"):
        _, eps_bench = algorithm.get_abs_bench_with_eps(bench, dtype)
        rel = algorithm.get_rel_err_origin(algorithm.get_abs_err(bench, device), eps_bench)
        for name, cut in (("hundredth", CompareConst.HUNDRED_RATIO_THRESHOLD),
                          ("thousandth", CompareConst.THOUSAND_RATIO_THRESHOLD),
                          ("ten_thousandth", CompareConst.TEN_THOUSAND_RATIO_THRESHOLD)):
            out[name] = algorithm.get_rel_err_ratio(rel, cut)[0]
        out["max_abs"] = algorithm.get_max_abs_err(algorithm.get_abs_err(bench, device))[0]
        out["ulp_err"] = algorithm.get_ulp_err(bench, device, dtype)
    return out


CASES = [("fp32", 0, 1, True), ("fp32", 1, 40, False), ("fp32", 2, 4000, True), ("fp16", 3, 1, True),
         ("fp16", 4, 3, False), ("fp16", 5, 30, True)]


@pytest.mark.parametrize("fmt,seed,scale,specials", CASES)
def test_metrics_equal_msprobe(fmt, seed, scale, specials):
    bench, device = _fixture(fmt, seed, scale, specials)
    ours, _ = _ours(bench, device, fmt)
    theirs = _theirs(bench, device, fmt)
    pairs = {"small_value": "small_value_err_ratio", "rmse": "rmse", "max_rel": "max_rel_error",
             "mean_rel": "mean_rel_error", "eb": "eb", "max_ulp": "max_ulp_error", "ulp_share": "ulp_error_proportion",
             "inf_nan_error_ratio": "inf_nan_error_ratio", "rel_err_ratio": "rel_err_ratio",
             "abs_err_ratio": "abs_err_ratio", "hundredth": "hundredth", "thousandth": "thousandth",
             "ten_thousandth": "ten_thousandth", "max_abs": "max_abs"}
    for mine, name in pairs.items():
        np.testing.assert_allclose(float(ours[mine]), float(theirs[name]), rtol=1e-12, atol=0, equal_nan=True,
                                   err_msg=mine)
    # per element, the ulp error is theirs bit for bit; the mean pools it in float64 (msprobe's np.mean over
    # float32 for fp16: to its rounding)
    with np.errstate(over="ignore"):
        mine_ulp = msprobe_point_values(device, bench, bench.astype(get_format(fmt).dtype), fmt)["ulp"]
    np.testing.assert_array_equal(mine_ulp, np.asarray(theirs["ulp_err"], dtype=np.float64))
    rtol = 1e-12 if fmt == "fp32" else 1e-6
    np.testing.assert_allclose(float(ours["mean_ulp"]), float(theirs["mean_ulp_error"]), rtol=rtol, equal_nan=True)
    assert (theirs["inf_nan_error_ratio"] > 0) == specials  # (the fixture has special values where it says)


def _their_verdicts(npu: dict, gpu: dict, fmt: str) -> dict:
    dtype = str(TORCH_DTYPE[fmt])

    def row(m):
        return {Col.DEVICE_DTYPE: dtype, Col.SMALL_VALUE_ERROR_RATE: m["small_value_err_ratio"], Col.RMSE: m["rmse"],
                Col.MAX_REL_ERR: m["max_rel_error"], Col.MEAN_REL_ERR: m["mean_rel_error"], Col.EB: m["eb"],
                Col.MEAN_ULP_ERR: m["mean_ulp_error"], Col.ULP_ERR_PROPORTION: m["ulp_error_proportion"],
                Col.INF_NAN_ERROR_RATIO: m["inf_nan_error_ratio"], Col.REL_ERR_RATIO: m["rel_err_ratio"],
                Col.ABS_ERR_RATIO: m["abs_err_ratio"]}

    out = {}
    for name, cls in (("benchmark", BenchmarkPrecisionCompare), ("ulp", UlpPrecisionCompare)):
        column = {}
        out[name] = cls(PrecisionCompareInput(row(npu), row(gpu), dtype, column)).compare()
        out[f"{name}_columns"] = column
    out["absolute"] = get_absolute_threshold_result(row(npu))["absolute_threshold_result"]
    return out


def _their_ratio_verdict(bench, device, fmt) -> tuple[str, str]:
    """(msprobe's verdict of its ratio standard, its message), the new standards' dispatch left out."""
    comparator = object.__new__(Comparator)  # (its constructor wants result files; the method reads none)
    comparator._perform_comparison = lambda *args: None
    column = types.SimpleNamespace()
    with np.errstate(all="ignore"):
        status, _, message = comparator._compare_float_tensor("api", bench, device, column,
                                                              {"dtype": TORCH_DTYPE[fmt], "in_dtype": TORCH_DTYPE[fmt]})
    return status, message


@pytest.mark.parametrize("fmt,seed,scale,specials", CASES)
@pytest.mark.parametrize("third_scale", [1, 100])
def test_verdicts_equal_msprobe(fmt, seed, scale, specials, third_scale):
    bench, device = _fixture(fmt, seed, scale, specials)
    _, third_device = _fixture(fmt, seed, third_scale, specials)
    own, _ = _ours(bench, device, fmt)
    third, _ = _ours(bench, third_device, fmt)
    verdict = msprobe_verdicts(pd.DataFrame([own]), pd.DataFrame([third]), [fmt]).iloc[0]
    theirs = _their_verdicts(_theirs(bench, device, fmt), _theirs(bench, third_device, fmt), fmt)
    assert verdict["ms_benchmark"] == theirs["benchmark"]
    assert verdict["ms_ulp"] == theirs["ulp"]
    assert verdict["ms_absolute"] == theirs["absolute"]
    columns = theirs["benchmark_columns"]
    for mine, name in (("ms_small_value_ratio", CompareConst.SMALL_VALUE_ERR_RATIO), ("ms_rmse_ratio", "rmse_ratio"),
                       ("ms_max_rel_ratio", "max_rel_err_ratio"), ("ms_mean_rel_ratio", "mean_rel_err_ratio"),
                       ("ms_eb_ratio", "eb_ratio")):
        np.testing.assert_allclose(float(verdict[mine]), float(columns[name]), rtol=1e-12, equal_nan=True,
                                   err_msg=mine)
    status, message = _their_ratio_verdict(bench, device, fmt)
    assert "Cosine similarity is less than 0.99" not in message  # (the gate ours does not evaluate)
    assert verdict["ms_ratio"] == status
    share_ratio = theirs["ulp_columns"][CompareConst.ULP_ERR_PROPORTION_RATIO]
    np.testing.assert_allclose(float(verdict["ms_ulp_share_ratio"]), float(share_ratio), rtol=1e-12, equal_nan=True)


def test_fixture_reaches_every_verdict():
    """The fixture is not all passes: across the cases each standard both passes and errs."""
    seen = {"ms_benchmark": set(), "ms_ulp": set(), "ms_absolute": set(), "ms_ratio": set()}
    for fmt, seed, scale, specials in CASES:
        bench, device = _fixture(fmt, seed, scale, specials)
        for third_scale in (1, 100):
            own, _ = _ours(bench, device, fmt)
            third, _ = _ours(bench, _fixture(fmt, seed, third_scale, specials)[1], fmt)
            v = msprobe_verdicts(pd.DataFrame([own]), pd.DataFrame([third]), [fmt]).iloc[0]
            for k in seen:
                seen[k].add(v[k])
    assert {"pass", "error"} <= seen["ms_benchmark"] and {"pass", "error"} <= seen["ms_ulp"]
    assert "error" in seen["ms_absolute"] and len(seen["ms_ratio"]) >= 2
