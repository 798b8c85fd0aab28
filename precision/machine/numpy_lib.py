"""The numpy model's math library: numpy's own ufuncs in the compute dtype.

``np.exp``, ``np.log`` and ``np.power`` on arrays of the compute dtype (as a
CPU reference written with numpy would run), and ``+ - * /`` with the dtype's
ufuncs too (:attr:`NumpyLibrary.DTYPE_UFUNCS`).  numpy has no fma ufunc: the
machine's ``fma`` stays the exact fused operation.
"""

from __future__ import annotations

import numpy as np

from precision.machine.library import MathLibrary
from precision.machine.rounding import flush

__all__ = ["NumpyLibrary"]


class NumpyLibrary(MathLibrary):
    """``np.exp``, ``np.log``, ``np.power`` and ``np.divide`` in the compute dtype.

    ``ftz=True`` of ``exp`` flushes a subnormal result to +0; of ``ln``, reads
    a subnormal input as a zero of its sign (-> -inf).  Both ``pow``
    algorithms are ``np.power``; both ``div`` modes are ``np.divide``.
    """

    DTYPE_UFUNCS = True

    def exp(self, x, ftz: bool) -> np.ndarray:
        out = np.asarray(np.exp(x), dtype=self.dtype)
        return self._flush_to_plus_zero(out) if ftz else out

    def ln(self, x, ftz: bool) -> np.ndarray:
        if ftz:
            x = flush(x, self.fmt)
        return np.asarray(np.log(x), dtype=self.dtype)

    def pow(self, base, k, algo: str) -> np.ndarray:
        base, k = np.broadcast_arrays(base, k)
        return np.asarray(np.power(base, k), dtype=self.dtype)
