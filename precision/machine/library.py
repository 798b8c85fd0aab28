"""The math library of a machine: what differs between the ieee, numpy and npu models.

A :class:`MathLibrary` subclass per model (:mod:`~precision.machine.ieee`,
:mod:`~precision.machine.numpy_lib`, :mod:`~precision.machine.npu`) supplies
division, ``exp``, ``ln`` and ``pow`` for one compute format.  The
:class:`~precision.machine.Machine` context builds its library once, from its
:class:`~precision.machine.MachineModel`, and forwards those four ops to it;
everything else (operand conversion, the ``ftz``/``daz`` switches of the
Mul/Add class, op counting, argument checks) stays in the context.

Contract of every method: operands are arrays of the compute dtype (already
converted by the context; ``div`` operands broadcast); the call runs inside
``np.errstate(all="ignore")``; the result has the compute dtype (``pow`` may
return float32 that the context converts).
"""

from __future__ import annotations

import numpy as np

from precision.exact.formats import FP32, Format
from precision.machine.rounding import as_f64, is_subnormal, round_into

__all__ = ["MathLibrary"]


class MathLibrary:
    """Division, exp, ln and pow of one machine model in one compute format.

    Parameters
    ----------
    model : MachineModel
        The machine (its name selects the subclass; the npu library also
        reads ``power_subnormal_fix``).
    fmt : Format
        The compute format.

    Attributes
    ----------
    ufunc_arith : bool
        True when ``+ - * /`` are numpy's ufuncs in the compute dtype: always
        for the numpy model (:attr:`DTYPE_UFUNCS`), and for fp32 on every
        model (numpy float32 arithmetic is IEEE correctly rounded with
        gradual underflow).  False: exact float64 operation, one rounding.
    """

    #: The model computes + - * / with the compute dtype's own ufuncs.
    DTYPE_UFUNCS = False

    def __init__(self, model, fmt: Format):
        self.model = model
        self.fmt = fmt
        self.dtype = np.dtype(fmt.dtype)
        self.ufunc_arith = self.DTYPE_UFUNCS or fmt is FP32

    def div(self, a, b, mode: str) -> np.ndarray:
        """a / b correctly rounded (both modes; the npu library overrides ``"default"``).

        fp16/bf16 quotients are rounded once from the float64 quotient, which
        is correctly rounded because 53 >= 2q + 2 (Figueroa 1995).
        """
        if self.ufunc_arith:
            return np.asarray(np.divide(a, b), dtype=self.dtype)
        return round_into(as_f64(a) / as_f64(b), self.fmt)

    def exp(self, x, ftz: bool) -> np.ndarray:
        """e**x (see :meth:`precision.machine.Machine.exp`)."""
        raise NotImplementedError

    def ln(self, x, ftz: bool) -> np.ndarray:
        """Natural log (see :meth:`precision.machine.Machine.ln`)."""
        raise NotImplementedError

    def pow(self, base, k, algo: str) -> np.ndarray:
        """base ** k (see :meth:`precision.machine.Machine.pow`)."""
        raise NotImplementedError

    def _flush_to_plus_zero(self, out) -> np.ndarray:
        """Subnormal results -> +0 (the ``ftz=True`` exp of the ieee and numpy models)."""
        return np.where(is_subnormal(out, self.fmt), np.zeros((), self.dtype), out).astype(self.dtype)
