"""The ieee model's float32 exp, ln and pow in compiled passes (numba, cached beside this file).

:meth:`precision.machine.ieee.IeeeLibrary.exp` (and ``ln``, ``pow``) written as numpy takes some ten passes
over 2 million-point arrays, in float64: the widening, the float64 function, its rounding into float32, two
more roundings and compares for the margin test, the special cases.  Here, chunk by chunk
(:data:`CHUNK_POINTS`, so the float64 values stay in the cache), numpy's own float64 ufunc computes the
values (``numpy.exp``, ``numpy.log``, ``numpy.power`` on the widened float32 operands, called as the numpy
definition calls them), and one compiled pass does the rest element by element: ``RN32(v)``, the margin
test of :meth:`~precision.machine.ieee.IeeeLibrary._round_doubtful` (``RN32(v (1 - m))`` against
``RN32(v (1 + m))``, ``m`` = :data:`~precision.machine.ieee.IEEE_F64_MARGIN`, which the caller passes; one
float64 product and one cast each, as numpy computes them), the C99 values the definition forces on
``pow``, and the ``ftz`` flushes.  Each pass returns the rounded values and the flat indices of the
doubtful lanes, which the caller settles with the definition's own code.

Why the float32 results equal the numpy definitions' on every lane
------------------------------------------------------------------
The float64 values are numpy's, computed by the same ufunc on the same operands; the casts (``cvtsd2ss``:
RNE, gradual underflow, overflow to inf, a NaN keeps its sign and the top of its payload) and the float64
products are the same IEEE operations, none contracted or reordered (no ``fastmath``).  So each lane gets
the definition's value, margin test and settle.

The result would not change even where a float64 value differed in its last bits (a ufunc's SIMD loop
treats a chunk's last lanes differently, a library changes): both values are within a few float64 ulps of
the exact value ``y`` (relative error below ``2**-50``), far inside ``m = 2**-45``, which the definition
already assumes.  For either value ``v``:

* if ``RN32(v (1 - m)) == RN32(v (1 + m))`` (not doubtful), RN32 is constant on ``[v (1 - m), v (1 + m)]``
  (it is monotone), which holds both ``v`` and ``y``; so ``RN32(v) == RN32(y)``, the correctly rounded value
  (``y`` is no float32 midpoint: one strictly inside the interval would split it);
* if doubtful, the lane is settled: the correctly rounded value too.

The float64 extremes keep this: a ``pow`` value beyond float64's range is inf, and ``y`` then rounds to inf
in float32 too; one in float64's subnormal range (below ``2**-1022``, where the relative error is not
bounded) rounds to a zero with ``y``, far below float32's smallest subnormal.

Arrays of fewer than :data:`precision.machine.compiled.COMPILED_MIN_POINTS` elements keep to the numpy
definitions; :func:`load` loads the passes.
"""

from __future__ import annotations

import numba
import numpy as np

from precision.machine.compiled import frozen

__all__ = ["CHUNK_POINTS", "exp_pass", "ln_pass", "pow_pass", "load"]

#: Points per chunk: the float64 operands and values of one chunk (3 x 256 KiB) stay in the L2 cache between
#: numpy's ufunc and the compiled pass; the Python loop's cost per chunk (about 10 us) stays below 1 %.
CHUNK_POINTS = 1 << 15

_FLT_MIN = np.float32(2.0**-126)
_INF32, _ZERO32 = np.float32(np.inf), np.float32(0.0)


@numba.njit(inline="always", cache=True, nogil=True, error_model="numpy")
def _doubtful(v, lo, hi):
    """Whether RN32(v lo) != RN32(v hi) for a finite v (lo = 1 - m, hi = 1 + m: both ends have v's sign and
    are no NaN, so float32 != is the bits' != of the numpy definition).  (Bitwise & and |, no branch: the
    loops below vectorize.)"""
    return np.isfinite(v) & (np.float32(v * lo) != np.float32(v * hi))


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _exp_round(v, ftz, lo, hi, out, doubt):
    doubtful = 0
    for j in range(v.size):
        r = np.float32(v[j])
        d = _doubtful(v[j], lo, hi)
        # with ftz, a subnormal result -> +0 (a doubtful lane's after its settle)
        flush = ftz & (not d) & (r != _ZERO32) & (abs(r) < _FLT_MIN)
        out[j] = _ZERO32 if flush else r
        doubt[j] = d
        doubtful += d
    return doubtful


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _ln_round(x, v, ftz, lo, hi, out, doubt):
    doubtful = 0
    for j in range(v.size):
        flushed = ftz & (x[j] != _ZERO32) & (abs(x[j]) < _FLT_MIN)  # read as +-0: ln = -inf
        d = (not flushed) & _doubtful(v[j], lo, hi)
        out[j] = -_INF32 if flushed else np.float32(v[j])
        doubt[j] = d
        doubtful += d
    return doubtful


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _pow_round(a, b, v, lo, hi, out, doubt):
    doubtful = 0
    for j in range(v.size):
        x, y = a[j], b[j]
        # C99 special cases forced as the numpy definition forces them
        one = (y == 0.0) | (x == 1.0) | ((x == -1.0) & np.isinf(y))
        vj = 1.0 if one else v[j]
        # only finite nonzero bases with finite exponents can need a settle
        d = _doubtful(vj, lo, hi) & np.isfinite(x) & (x != 0.0) & np.isfinite(y)
        out[j] = np.float32(vj)
        doubt[j] = d
        doubtful += d
    return doubtful


def _flat(a) -> np.ndarray:
    """``a`` as a 1-D C-contiguous read-only float32 array (the one form each pass is compiled for)."""
    return frozen(a, np.float32).reshape(-1)


def _chunks(n: int):
    for start in range(0, n, CHUNK_POINTS):
        yield slice(start, min(start + CHUNK_POINTS, n))


def _result(out, doubt, doubtful: int, shape):
    """(out in ``shape``, the flat indices of the doubtful lanes)."""
    return out.reshape(shape), (np.flatnonzero(doubt) if doubtful else np.empty(0, dtype=np.intp))


def exp_pass(x, ftz: bool, margin: float):
    """(out, doubt) of float32 ``x``: ``out`` the rounded ``numpy.exp`` of float64 ``x`` (``x``'s shape; with
    ``ftz`` a subnormal result is +0, except on doubtful lanes) and ``doubt`` the flat indices of the lanes
    whose rounding the margin ``margin`` leaves in doubt (to be settled, then flushed when ``ftz``)."""
    shape = np.shape(x)
    x = _flat(x)
    out, doubt = np.empty(x.size, dtype=np.float32), np.empty(x.size, dtype=np.bool_)
    v = np.empty(min(x.size, CHUNK_POINTS))
    doubtful = 0
    for c in _chunks(x.size):
        vc = v[: c.stop - c.start]
        vc[...] = x[c]  # (exact)
        np.exp(vc, out=vc)
        doubtful += _exp_round(vc, bool(ftz), 1.0 - margin, 1.0 + margin, out[c], doubt[c])
    return _result(out, doubt, doubtful, shape)


def ln_pass(x, ftz: bool, margin: float):
    """(out, doubt) of float32 ``x``: the rounded ``numpy.log`` of float64 ``x`` (``ftz``: a subnormal input
    reads as +-0, so -inf), and the doubtful lanes (none of them a flushed input)."""
    shape = np.shape(x)
    x = _flat(x)
    out, doubt = np.empty(x.size, dtype=np.float32), np.empty(x.size, dtype=np.bool_)
    v = np.empty(min(x.size, CHUNK_POINTS))
    doubtful = 0
    for c in _chunks(x.size):
        vc = v[: c.stop - c.start]
        vc[...] = x[c]
        np.log(vc, out=vc)
        doubtful += _ln_round(x[c], vc, bool(ftz), 1.0 - margin, 1.0 + margin, out[c], doubt[c])
    return _result(out, doubt, doubtful, shape)


def pow_pass(a, b, margin: float):
    """(out, doubt) of float32 bases ``a`` and exponents ``b`` (``a``'s shape, or one value): the rounded
    ``numpy.power`` of float64 ``a`` and ``b`` (both as arrays of ``a``'s length, as the numpy definition
    calls it) with the C99 values the definition forces, and the doubtful lanes (finite nonzero bases,
    finite exponents)."""
    shape = np.shape(a)
    a, b = _flat(a), _flat(b)
    out, doubt = np.empty(a.size, dtype=np.float32), np.empty(a.size, dtype=np.bool_)
    n = min(a.size, CHUNK_POINTS)
    a64, b64, v = np.empty(n), np.empty(n), np.empty(n)
    if b.size == 1:
        b64[...] = b[0]
    doubtful = 0
    for c in _chunks(a.size):
        m = c.stop - c.start
        ac, bc, vc = a64[:m], b64[:m], v[:m]
        ac[...] = a[c]  # (exact)
        if b.size > 1:
            bc[...] = b[c]
        np.power(ac, bc, out=vc)
        doubtful += _pow_round(ac, bc, vc, 1.0 - margin, 1.0 + margin, out[c], doubt[c])
    return _result(out, doubt, doubtful, shape)


def load() -> None:
    """Load every pass now (from the cache beside this file, or compiled the first time)."""
    one = np.ones(1, dtype=np.float32)
    for ftz in (False, True):
        exp_pass(one, ftz, 2.0**-45)
        ln_pass(one, ftz, 2.0**-45)
    pow_pass(one, one, 2.0**-45)
