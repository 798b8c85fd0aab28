"""The ieee model's math library: correctly rounded exp, ln and pow.

A float64 evaluation (numpy's ``exp``/``log``, libm's ``pow``) is rounded
once into the compute format; the rare points whose float64 value lies
within a relative margin (:data:`IEEE_F64_MARGIN`) of a rounding boundary are
settled with mpmath at a working precision raised until the rounding is
decided (:func:`precision.exact.certify.escalate`).  Exact midpoints of ``pow``,
which no precision decides, are recognised with integer arithmetic and
rounded to even.  Division is the correctly rounded default of
:class:`~precision.machine.library.MathLibrary`.
"""

from __future__ import annotations

import math

import gmpy2
import numpy as np
from mpmath import libmp

from precision.exact.certify import escalate
from precision.errors import OracleUndecidedError
from precision.exact.formats import Format
from precision.machine.library import MathLibrary
from precision.machine.rounding import as_f64, flush, round_into

__all__ = ["IEEE_F64_MARGIN", "IeeeLibrary"]

# ---------------------------------------------------------------------------
# Tuning of the correct rounding
# ---------------------------------------------------------------------------

#: Relative half-width of the interval assumed to hold the exact value around
#: a float64 exp/log/pow result.  numpy's float64 exp/log and libm pow are
#: within a few float64 ulps (2**-52 relative each); 2**-45 is 128 times that,
#: and still makes a settle rare (about 2**-20 of fp32 points).
IEEE_F64_MARGIN = 2.0**-45
#: First mpmath working precision (bits) of a settle; doubled until decided.
SETTLE_START_PREC = 96
#: Precision cap (bits): beyond it the rounding is reported undecided.  Only
#: exact midpoints never decide, and those are detected exactly beforehand.
SETTLE_MAX_PREC = 1 << 15
#: Guard bits: an mpmath result at prec p is taken as exact within
#: 2**(SETTLE_ERROR_BITS - p) relative (mpmath's own error is a few ulps).
SETTLE_ERROR_BITS = 8


# ---------------------------------------------------------------------------
# The library
# ---------------------------------------------------------------------------


class IeeeLibrary(MathLibrary):
    """exp, ln and pow correctly rounded (RNE, gradual underflow, overflow to inf).

    ``ftz=True`` of ``exp`` flushes a subnormal result to +0; of ``ln``, reads
    a subnormal input as a zero of its sign (-> -inf).  ``pow`` follows C99's
    special values (pow(x, ±0) = 1 even for NaN x, pow(1, y) = 1,
    pow(-1, ±inf) = 1, pow(±0, y<0) = ±inf or +inf, pow(x<0, non-integer) =
    NaN) for both ``algo`` values.
    """

    def exp(self, x, ftz: bool) -> np.ndarray:
        x64 = as_f64(x)

        def exact(i):
            xi = float(x64.flat[i])
            return lambda p: _mpf_exp(xi, p)

        out = self._round_settled(np.exp(x64), (x64,), exact)
        return self._flush_to_plus_zero(out) if ftz else out

    def ln(self, x, ftz: bool) -> np.ndarray:
        if ftz:
            x = flush(x, self.fmt)
        x64 = as_f64(x)

        def exact(i):
            xi = float(x64.flat[i])
            return lambda p: _mpf_log(xi, p)

        return self._round_settled(np.log(x64), (x64,), exact)

    def pow(self, base, k, algo: str) -> np.ndarray:
        base, k = np.broadcast_arrays(base, k)
        a64, b64 = as_f64(base), as_f64(k)
        # C99 special cases that libm already follows; forced here so they do
        # not depend on the float64 library.
        v = np.power(a64, b64)
        v = np.where((b64 == 0) | (a64 == 1), 1.0, v)
        v = np.where((a64 == -1) & np.isinf(b64), 1.0, v)

        def exact(i):
            ai, bi = float(a64.flat[i]), float(b64.flat[i])
            return lambda p: _mpf_pow_abs(ai, bi, p)

        def midpoint_test(i):
            ai, bi = float(a64.flat[i]), float(b64.flat[i])
            return lambda man, exp: _pow_equals_dyadic(ai, bi, man, exp)

        # Only finite nonzero bases with finite exponents can need a settle
        # (the others give 0, inf, NaN or 1 exactly).
        settleable = np.isfinite(a64) & (a64 != 0) & np.isfinite(b64)
        return self._round_settled(v, (a64, b64), exact, midpoint_test, settleable, signed=True)

    def _round_settled(self, v64, inputs, exact, midpoint_test=None, settleable=None, signed=False) -> np.ndarray:
        """Round float64 results once; settle the few near a rounding boundary.

        ``v64`` approximates the exact values of the function at ``inputs``
        (a tuple of float64 arrays of one shape, the result's) with relative
        error far below :data:`IEEE_F64_MARGIN`; if the ends of
        v64*(1 -+ margin) round to different compute-format values, the point
        is settled with ``exact(i)(prec)`` (an mpmath value of the magnitude
        when ``signed``, whose sign is then taken from v64) and
        ``midpoint_test(i)`` (see :func:`_settle`), ``i`` its flat index.
        Points with the same inputs are settled once: saturated sigmoids
        repeat a few values many times (a kernel's ln(1 - 2**-23), whose
        exact value lies next to a float32 midpoint, on about 4 % of its
        points).
        """
        shape = np.shape(inputs[0])
        uint = np.dtype(self.fmt.uint_dtype)
        v64 = np.asarray(v64, dtype=np.float64).reshape(shape)
        out = np.array(round_into(v64, self.fmt), order="C", copy=True)
        lo = round_into(v64 * (1.0 - IEEE_F64_MARGIN), self.fmt).view(uint)
        hi = round_into(v64 * (1.0 + IEEE_F64_MARGIN), self.fmt).view(uint)
        doubt = (lo != hi) & np.isfinite(v64)
        if settleable is not None:
            doubt &= settleable
        idx = np.flatnonzero(doubt)
        if idx.size == 0:
            return out
        keys = np.stack([np.asarray(a, dtype=np.float64).reshape(-1)[idx].view(np.int64) for a in inputs], axis=1)
        _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        values = np.empty(first.size, dtype=np.float64)
        for j, i in enumerate(idx[first].tolist()):
            test = midpoint_test(i) if midpoint_test is not None else None
            value = _settle(exact(i), self.fmt, test)
            if signed:
                value = math.copysign(value, float(v64.flat[i]))
            values[j] = value
        out.reshape(-1)[idx] = values[inverse.reshape(-1)]
        return out


# ---------------------------------------------------------------------------
# Settling one point with mpmath
# ---------------------------------------------------------------------------


def _mpf_exp(x: float, prec: int):
    return libmp.mpf_exp(libmp.from_float(x), prec, libmp.round_nearest)


def _mpf_log(x: float, prec: int):
    return libmp.mpf_log(libmp.from_float(x), prec, libmp.round_nearest)


def _mpf_pow_abs(a: float, b: float, prec: int):
    """|a|**b at ``prec`` bits (a finite nonzero, b finite)."""
    s, t = libmp.from_float(abs(a)), libmp.from_float(b)
    if b == int(b) and abs(b) < 2**24:
        return libmp.mpf_pow_int(s, int(b), prec, libmp.round_nearest)
    return libmp.mpf_pow(s, t, prec, libmp.round_nearest)


def _widen(y, prec: int):
    """Exact bounds [lo, hi] of y * (1 -+ 2**(SETTLE_ERROR_BITS - prec))."""
    if y[1] == 0:  # zero, inf or nan: already exact
        return y, y
    delta = libmp.mpf_shift(libmp.mpf_abs(y), SETTLE_ERROR_BITS - prec)
    return libmp.mpf_sub(y, delta), libmp.mpf_add(y, delta)


def _odd_part(value: float):
    """(M, e) with |value| = M * 2**e, M odd; value finite nonzero."""
    num, den = abs(value).as_integer_ratio()
    twos = (num & -num).bit_length() - 1
    return num >> twos, twos - (den.bit_length() - 1)


def _pow_equals_dyadic(a: float, b: float, m_man: int, m_exp: int) -> bool:
    """Whether |a|**b equals m_man * 2**m_exp exactly (m_man odd > 0).

    a finite nonzero, b finite.  With |a| = A*2**ea (A odd) and b = N/2**k in
    lowest terms, |a|**b is a dyadic rational only if 2**k divides ea*N and A
    is a perfect 2**k-th power c**(2**k); then |a|**b = c**N * 2**(ea*N/2**k),
    and for N < 0 the odd part 1/c**|N| is an odd integer only when c = 1.
    """
    big_a, ea = _odd_part(a)
    if b == 0:
        return m_man == 1 and m_exp == 0
    n, k_exp = _odd_part(b)
    n = int(math.copysign(n, b))
    k = max(0, -k_exp)
    if k == 0:
        n = n << k_exp
    elif (ea * n) % (1 << k) != 0:
        return False
    if k > 0:
        if k > 6:  # A < 2**26 is a 2**k-th power only if A == 1
            c, exact = 1, big_a == 1
        else:
            c, exact = gmpy2.iroot(big_a, 1 << k)
            c = int(c)
        if not exact:
            return False
    else:
        c = big_a
    if (ea * n) >> k != m_exp:
        return False
    if n < 0:
        return c == 1 and m_man == 1
    if c > 1 and n * (c.bit_length() - 1) > m_man.bit_length():
        return False
    return c**n == m_man


def _settle(mpf_of_prec, fmt: Format, exact_midpoint_test=None) -> float:
    """Correctly round (RNE) an exact value given as ``mpf_of_prec(prec)``.

    The working precision starts at :data:`SETTLE_START_PREC` and doubles
    (:func:`~precision.exact.certify.escalate`) until both ends of the error
    interval round to the same ``fmt`` value.  ``exact_midpoint_test(m_man,
    m_exp)`` (optional) says whether the exact value *is* the midpoint
    m_man * 2**m_exp met while undecided; if so the tie is rounded to even.
    Raises OracleUndecidedError past :data:`SETTLE_MAX_PREC`.
    """
    tested = set()

    def attempt(prec):
        lo, hi = _widen(mpf_of_prec(prec), prec)
        r_lo, r_hi = fmt.round_mpf(lo), fmt.round_mpf(hi)
        if r_lo == r_hi:
            return r_lo
        if exact_midpoint_test is not None and math.isfinite(r_hi) and math.isfinite(r_lo):
            mid = libmp.mpf_shift(libmp.mpf_add(libmp.from_float(r_lo), libmp.from_float(r_hi)), -1)
            sign, man, exp, _ = mid
            if man and (man, exp) not in tested:
                tested.add((man, exp))
                if exact_midpoint_test(man, exp):
                    return fmt.round_mpf(mid)
        return None

    value = escalate(attempt, SETTLE_START_PREC, SETTLE_MAX_PREC)
    if value is None:
        raise OracleUndecidedError(
            f"rounding to {fmt.name} undecided at prec={SETTLE_MAX_PREC} bits; raise SETTLE_MAX_PREC"
        )
    return value
