"""Operator inputs as a device receives them: the checks every operator's contract shares, and the operands.

An operator's ``validate_inputs`` checks its own contract with these (dtypes, ranks, shapes, the element
count, float32 attributes) and its recipes load and store through :func:`load_operands` and
:func:`store_output`, on a machine resolved by :func:`resolve_machine`.  Arrays are ``[N, C]``; pred, dout
and weight float16 or float32, target int32 (a real target, :mod:`precision.recipes.target_kinds`: pred's
dtype); attributes are float32 values (a Python float is rounded to float32, RNE, as the framework builds the
attribute).
"""

from __future__ import annotations

import dataclasses
import math
import numbers

import numpy as np

from precision.errors import DtypeError, ParameterError, ShapeError
from precision.exact.formats import FP16, FP32
from precision.machine import Machine, get_machine
from precision.recipes.target_kinds import BINARY, TargetKind

__all__ = ["FLOAT_INPUT_DTYPES", "INT64_MAX", "check_arrays", "check_rank2", "validate_element_count",
           "float32_attribute",
           "resolve_machine", "with_compute_format", "store_output", "load_operands"]

#: The float inputs' accepted dtypes.
FLOAT_INPUT_DTYPES = (np.dtype(np.float16), np.dtype(np.float32))
INT64_MAX = np.iinfo(np.int64).max


def check_rank2(name: str, arr: np.ndarray) -> None:
    """Reject an array of rank other than 2 or with an empty dimension (ShapeError naming it)."""
    if arr.ndim != 2:
        raise ShapeError(f"{name} has rank {arr.ndim} (shape={arr.shape}); expected a rank-2 [N, C] array")
    if arr.shape[0] <= 0 or arr.shape[1] <= 0:
        raise ShapeError(f"{name} has shape={arr.shape}; expected both dims > 0 (empty inputs are rejected)")


def check_arrays(arrays: dict, target_kind: TargetKind = BINARY) -> dict:
    """The operands as arrays, checked in a fixed order (dtypes, then ranks, then shapes, then the element count),
    so that operands with several faults report the first: ``target`` int32 (a ``real`` target kind: pred's
    dtype, :mod:`precision.recipes.target_kinds`), every other float16 or float32, each rank 2 ``[N, C]`` with
    N, C > 0, every shape pred's (no broadcasting), ``N * C`` within int64.

    ``arrays``: name -> array_like (``pred`` first); None values are left out.  Arrays already of an accepted
    dtype are not copied.

    Raises
    ------
    DtypeError, ShapeError
        Naming the operand and what was expected.
    """
    arrays = {name: np.asarray(a) for name, a in arrays.items() if a is not None}
    for name, arr in arrays.items():
        if name == "target":
            target_kind.check_array(arr, arrays["pred"].dtype)
        elif arr.dtype not in FLOAT_INPUT_DTYPES:
            raise DtypeError(f"{name} dtype={arr.dtype}; expected float16 or float32")
    for name, arr in arrays.items():
        check_rank2(name, arr)
    pred_shape = arrays["pred"].shape
    for name, arr in arrays.items():
        if arr.shape != pred_shape:
            raise ShapeError(f"{name} shape={arr.shape} differs from pred shape={pred_shape}; expected equal shapes "
                             "(no broadcasting)")
    validate_element_count(pred_shape)
    return arrays


def validate_element_count(shape) -> int:
    """Return ``N * C`` for a rank-2 shape, rejecting a product that overflows int64.

    Parameters
    ----------
    shape : tuple of int
        ``(N, C)``; the dims are Python ints of any size.

    Returns
    -------
    int
        ``N * C``.

    Raises
    ------
    ShapeError
        When ``N * C > 2**63 - 1`` (the host computes the count in int64).
    """
    n, c = (int(d) for d in shape)
    if c <= 0 or n > INT64_MAX // c:
        raise ShapeError(f"N*C={n}*{c} overflows int64 (max {INT64_MAX}); expected N*C <= 2**63-1")
    return n * c


def float32_attribute(name: str, value) -> np.float32:
    """Round an attribute value to float32 (RNE) and check it is finite.

    Raises
    ------
    ParameterError
        When the value is not a real number, or is NaN/inf before or after
        the rounding to float32 (e.g. ``1e39`` overflows float32).
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        if not (isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "fiu"):
            raise ParameterError(f"{name}={value!r} is not a real number; expected a finite float32 value")
    as_float = float(value)
    with np.errstate(over="ignore"):
        as_fp32 = np.float32(as_float)
    if not math.isfinite(as_float) or not np.isfinite(as_fp32):
        raise ParameterError(f"{name}={as_float!r} is not finite in float32; expected a finite value")
    return as_fp32


def resolve_machine(machine):
    """Return a :class:`precision.machine.Machine` for a spec string, model or machine."""

    if isinstance(machine, Machine):
        return machine
    return get_machine(machine)


def with_compute_format(machine, fmt_name: str):
    """The same machine model with another compute format (``"fp16"``, ``"fp32"``).

    A fresh machine is built from ``dataclasses.replace(model, compute=fmt_name)``;
    when the machine already computes in that format it is returned as is.
    """

    m = resolve_machine(machine)
    if m.fmt.name == fmt_name:
        return m
    return get_machine(dataclasses.replace(m.model, compute=fmt_name))


def store_output(machine, values, pred_dtype, rounding: str):
    """Convert compute-format values to pred's dtype (the S9 store).

    Parameters
    ----------
    machine : Machine
    values : numpy.ndarray in the compute dtype
    pred_dtype : numpy.dtype, float16 or float32
    rounding : str
        Rounding mode of a narrowing conversion (``RNE`` = CAST_RINT,
        ``RTZ`` = CAST_TRUNC).  No saturation: overflow becomes inf.

    Returns
    -------
    numpy.ndarray of pred_dtype (a widening conversion is exact).
    """
    target_fmt = FP16 if np.dtype(pred_dtype) == np.float16 else FP32
    if values.dtype == target_fmt.dtype:
        return values
    return np.asarray(machine.cast(values, target_fmt, rounding=rounding), dtype=target_fmt.dtype)


def load_operands(machine, inputs) -> dict:
    """The operands as the device loads them: ``x``, ``t``, ``d``, ``w`` (1-D, row-major).

    pred, dout and weight are converted to the compute format (exactly from
    narrower formats, RNE from wider ones; not counted as ops); the int32
    target is converted with RNE (a hardware Cast, counted), a real one (a
    float target, :mod:`precision.recipes.target_kinds`) as weight is.  ``w``
    is None when weight is absent.
    """
    m = machine
    t = inputs.target.reshape(-1)
    return {
        "x": m.asarray(inputs.pred.reshape(-1)),
        "t": m.asarray(t) if t.dtype.kind == "f" else m.from_int32(t),
        "d": m.asarray(inputs.dout.reshape(-1)) if inputs.dout is not None else None,
        "w": m.asarray(inputs.weight.reshape(-1)) if inputs.weight is not None else None,
    }
