"""The fp32 fused multiply-add and the select of :class:`~precision.machine.Machine`, in compiled passes
(numba, cached beside this file).

* :func:`fma32_pass`: :func:`precision.machine.fma.fma32` written as numpy takes eleven passes over its
  operands (the float64 sum, the cast, the two double-rounding tests); here one: ``llvm.fma.f32`` of
  :func:`precision.exact.double_double.fma` on each lane, one rounding of the exact ``a*b + c`` to float32
  (RNE, gradual underflow, overflow to inf; the hardware instruction, or the C library's ``fmaf``), which
  is what :func:`~precision.machine.fma.fma32` emulates bit for bit.  NaN results: one NaN operand comes
  out quieted, an invalid operation (``inf*0``, ``inf - inf``) gives the default NaN, in both.  Where two
  or more NaNs meet (two NaN operands, or ``inf*0`` and a NaN ``c``), IEEE 754 leaves open whose payload
  the result carries, and numpy's own loops give no one answer: which operand wins depends on the array's
  length and the lane's place in it (the vector loop or the scalar remainder) and on whether an operand is
  a broadcast scalar; the pass returns one of the NaNs too.  The tests check every other lane bit for bit,
  single-value operands in every position included.
* :func:`select_pass`: ``numpy.where(cond, a, b)`` copies each lane's bits from ``a`` or ``b``, with a
  branch per lane that a random condition mispredicts (about 7 ns a lane); the pass copies the same bits
  (as unsigned integers of the element's width: no float operation touches them, NaN payloads and signed
  zeros included) without the branch.

Arrays of fewer than :data:`precision.machine.compiled.COMPILED_MIN_POINTS` elements keep to the numpy
definitions.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types
from numba.extending import overload

from precision.exact.double_double import fma as _fma  # one rounding of the operands' type (float32 here)
from precision.machine.compiled import frozen

__all__ = ["fma32_pass", "select_pass", "load"]


def _lane(v, j):
    """v[j] of an array, v itself of a single value (compiled only: :func:`_lane_impl`)."""
    raise NotImplementedError


@overload(_lane, inline="always")
def _lane_impl(v, j):
    if isinstance(v, types.Array):
        return lambda v, j: v[j]
    return lambda v, j: v


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _fma32(a, b, c, out):
    for j in range(out.size):
        out[j] = _fma(_lane(a, j), _lane(b, j), _lane(c, j))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _select(cond, a, b, out):
    for j in range(out.size):
        out[j] = _lane(a, j) if _lane(cond, j) else _lane(b, j)


def _operand(v, shape, dtype):
    """``v`` as the pass takes it: a 1-D C-contiguous read-only array of ``dtype`` of ``shape``'s size (``v``
    broadcast to ``shape`` if need be; the one form of array each pass is compiled for), or the single value
    (a numpy scalar: the pass is compiled for it too, and a loop over arrays only vectorizes)."""
    if np.size(v) == 1 and math.prod(shape) != 1:
        return np.asarray(v, dtype=dtype).reshape(-1)[0]
    if np.shape(v) != shape:
        v = np.broadcast_to(v, shape)
    return frozen(v, dtype).reshape(-1)


def fma32_pass(a, b, c, shape) -> np.ndarray:
    """a*b + c with one RNE rounding to float32, as a new float32 array of shape ``shape`` (the operands'
    broadcast shape); the operands are float32."""
    out = np.empty(shape, dtype=np.float32)
    _fma32(*(_operand(v, shape, np.float32) for v in (a, b, c)), out.reshape(-1))
    return out


def select_pass(cond, a, b, shape) -> np.ndarray:
    """``numpy.where(cond, a, b)`` of shape ``shape`` (the operands' broadcast shape) for a bool ``cond`` and
    ``a``, ``b`` of one dtype of 2, 4 or 8 bytes (their bits, copied)."""
    dtype = np.asarray(a).dtype
    bits = np.dtype(f"u{dtype.itemsize}")
    out = np.empty(shape, dtype=dtype)
    a, b = (_operand(v, shape, dtype) for v in (a, b))
    a, b = (v.view(bits) for v in (a, b))  # (an array's or a numpy scalar's bits)
    _select(_operand(cond, shape, np.bool_), a, b, out.reshape(-1).view(bits))
    return out


def load() -> None:
    """Load every form of the passes a machine calls (from the cache beside this file, or compiled the first
    time): each operand an array or a single value (not all single), fp32 operands for the fma, 2- and 4-byte
    elements for the select."""
    shape = (2,)
    for dtype in (np.float32, np.float16):
        values = (np.ones(2, dtype=dtype), dtype(1.0))
        conds = (np.ones(2, dtype=np.bool_), np.True_)
        for form in range(1, 8):  # bit i set: operand i is an array
            pick = [(form >> i) & 1 for i in range(3)]
            if dtype is np.float32:
                fma32_pass(*(values[0] if p else values[1] for p in pick), shape)
            select_pass(conds[0] if pick[0] else conds[1], *(values[0] if p else values[1] for p in pick[1:]),
                        shape)
