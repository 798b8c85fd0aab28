"""Compute-format rounding, flushing and NaN bits: the elementwise helpers of every machine.

Pure functions of (values, :class:`~precision.exact.formats.Format`), shared by the
:class:`~precision.machine.Machine` context and the math libraries
(:mod:`~precision.machine.ieee`, :mod:`~precision.machine.numpy_lib`,
:mod:`~precision.machine.npu`).  Rounding is RNE with gradual underflow;
"subnormal" means nonzero with magnitude below the format's smallest normal.
"""

from __future__ import annotations

import numpy as np

from precision.exact.formats import BF16, Format, round_to_format

__all__ = ["round_into", "as_f64", "is_subnormal", "flush", "set_nan_bits"]


def round_into(v64, fmt: Format) -> np.ndarray:
    """RNE of float64 values into ``fmt`` (one rounding, gradual underflow, overflow to inf)."""
    with np.errstate(all="ignore"):
        if fmt is BF16:
            return round_to_format(v64, BF16)
        # numpy's float64 -> float32/float16 casts round once, RNE, into
        # subnormals (checked against round_to_format in the tests).
        return np.asarray(v64, dtype=np.float64).astype(fmt.dtype)


def as_f64(x) -> np.ndarray:
    """The values as float64 (exact for every compute format)."""
    return np.asarray(x).astype(np.float64)


def is_subnormal(x, fmt: Format) -> np.ndarray:
    """Whether each value is a nonzero subnormal of ``fmt`` (bool array)."""
    x64 = as_f64(x)
    return (np.abs(x64) < fmt.smallest_normal) & (x64 != 0)


def flush(x, fmt: Format) -> np.ndarray:
    """Subnormals of ``fmt`` -> zero of the same sign (``fmt``'s dtype in and out).

    Returns ``x`` itself when nothing flushes.
    """
    x = np.asarray(x)
    tiny = is_subnormal(x, fmt)
    if not tiny.any():
        return x
    dtype = np.dtype(fmt.dtype)
    return np.where(tiny, np.copysign(np.zeros((), dtype), x), x).astype(dtype)


def set_nan_bits(x, fmt: Format, bits: int) -> np.ndarray:
    """Every NaN of ``x`` (``fmt``'s dtype) rewritten with the bit pattern ``bits``."""
    x = np.asarray(x, dtype=fmt.dtype)
    nan = np.isnan(x.astype(np.float32))
    if nan.any():
        x = np.array(x, order="C", copy=True)
        x.view(fmt.uint_dtype)[nan] = bits
    return x
