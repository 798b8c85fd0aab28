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
from precision.exact.formats import FP32, Format
from precision.machine.compiled import COMPILED_MIN_POINTS
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
        if not self._compiled(np.size(x)):
            return self._exp_numpy(x, ftz)
        from precision.machine.ieee_fused import exp_pass  # (numba, imported when first needed)
        out, doubt = exp_pass(x, ftz, IEEE_F64_MARGIN)
        if doubt.size:
            self._settle_lanes(out, doubt, (_lanes_of(x, doubt),), _exp_of)
            if ftz:
                flat = out.reshape(-1)
                flat[doubt] = self._flush_to_plus_zero(flat[doubt])
        return out

    def ln(self, x, ftz: bool) -> np.ndarray:
        if not self._compiled(np.size(x)):
            return self._ln_numpy(x, ftz)
        from precision.machine.ieee_fused import ln_pass  # (numba, imported when first needed)
        out, doubt = ln_pass(x, ftz, IEEE_F64_MARGIN)
        self._settle_lanes(out, doubt, (_lanes_of(x, doubt),), _ln_of)  # (none is a subnormal read as 0)
        return out

    def pow(self, base, k, algo: str) -> np.ndarray:
        shape = np.broadcast_shapes(np.shape(base), np.shape(k))
        if not self._compiled(math.prod(shape)):
            return self._pow_numpy(base, k)
        from precision.machine.ieee_fused import pow_pass  # (numba, imported when first needed)
        # the base of the result's shape, the exponent too or a single value; any other broadcast spelled out
        base = base if np.shape(base) == shape else np.broadcast_to(base, shape)
        k = k if np.shape(k) == shape or np.size(k) == 1 else np.broadcast_to(k, shape)
        out, doubt = pow_pass(base, k, IEEE_F64_MARGIN)
        if doubt.size:  # (the signs of RN32(v): v's)
            signs = out.reshape(-1)[doubt].astype(np.float64)
            self._settle_pow_lanes(out, doubt, _lanes_of(base, doubt).astype(np.float64),
                                   _lanes_of(k, doubt).astype(np.float64), signs)
        return out

    # -- the numpy definitions ---------------------------------------------------

    def _compiled(self, size: int) -> bool:
        """Whether the compiled passes (:mod:`~precision.machine.ieee_fused`) compute an op of ``size`` results."""
        return self.fmt is FP32 and size >= COMPILED_MIN_POINTS

    def _exp_numpy(self, x, ftz: bool) -> np.ndarray:
        """:meth:`exp` in numpy: the definition the compiled pass equals bit for bit, and every small array's."""
        x64 = as_f64(x)
        out = self._round_settled(np.exp(x64), (x64,), _exp_of)
        return self._flush_to_plus_zero(out) if ftz else out

    def _ln_numpy(self, x, ftz: bool) -> np.ndarray:
        """:meth:`ln` in numpy (the definition)."""
        if ftz:
            x = flush(x, self.fmt)
        x64 = as_f64(x)
        return self._round_settled(np.log(x64), (x64,), _ln_of)

    def _pow_numpy(self, base, k) -> np.ndarray:
        """:meth:`pow` in numpy (the definition)."""
        base, k = np.broadcast_arrays(base, k)
        a64, b64 = as_f64(base), as_f64(k)
        # C99 special cases that libm already follows; forced here so they do
        # not depend on the float64 library.
        v = np.power(a64, b64)
        v = np.where((b64 == 0) | (a64 == 1), 1.0, v)
        v = np.where((a64 == -1) & np.isinf(b64), 1.0, v)
        # Only finite nonzero bases with finite exponents can need a settle
        # (the others give 0, inf, NaN or 1 exactly).
        settleable = np.isfinite(a64) & (a64 != 0) & np.isfinite(b64)
        out, idx = self._round_doubtful(v, settleable)
        if idx.size:
            a_idx, b_idx = a64.reshape(-1)[idx], b64.reshape(-1)[idx]
            self._settle_pow_lanes(out, idx, a_idx, b_idx, v.reshape(-1)[idx])
        return out

    def _round_settled(self, v64, inputs, exact) -> np.ndarray:
        """Round float64 results once; settle the few near a rounding boundary.

        ``v64`` approximates the exact values of the function at ``inputs``
        (a tuple of float64 arrays of one shape, the result's) with relative
        error far below :data:`IEEE_F64_MARGIN`; if the ends of
        v64*(1 -+ margin) round to different compute-format values, the point
        is settled (:meth:`_settle_lanes`).
        """
        out, idx = self._round_doubtful(v64)
        if idx.size:
            self._settle_lanes(out, idx, tuple(_lanes_of(a, idx) for a in inputs), exact)
        return out

    def _round_doubtful(self, v64, settleable=None):
        """(out, idx): the float64 values ``v64`` rounded once into the compute format (a new C-contiguous
        array), and the flat indices of the doubtful lanes: finite values whose ends v64*(1 -+ margin) round
        to different values, among the ``settleable`` lanes (a bool array; None: all)."""
        uint = np.dtype(self.fmt.uint_dtype)
        v64 = np.asarray(v64, dtype=np.float64)
        out = np.array(round_into(v64, self.fmt), order="C", copy=True)
        lo = round_into(v64 * (1.0 - IEEE_F64_MARGIN), self.fmt).view(uint)
        hi = round_into(v64 * (1.0 + IEEE_F64_MARGIN), self.fmt).view(uint)
        doubt = (lo != hi) & np.isfinite(v64)
        if settleable is not None:
            doubt &= settleable
        return out, np.flatnonzero(doubt)

    def _settle_pow_lanes(self, out, idx, a_idx, b_idx, v_idx) -> None:
        """Settle the doubtful lanes ``idx`` of a ``pow`` (bases ``a_idx``, exponents ``b_idx``, float64 values
        ``v_idx`` whose signs the settled magnitudes take; None: positive): the exact integer powers
        (:func:`_exact_integer_powers`) directly, the others with mpmath (:meth:`_settle_lanes`)."""
        exact_lanes, values = _exact_integer_powers(a_idx, b_idx)
        if exact_lanes.any():
            out.reshape(-1)[idx[exact_lanes]] = round_into(values[exact_lanes], self.fmt)
            rest = ~exact_lanes
            idx, a_idx, b_idx = idx[rest], a_idx[rest], b_idx[rest]
            v_idx = None if v_idx is None else v_idx[rest]
        self._settle_lanes(out, idx, (a_idx, b_idx), _pow_abs_of, _pow_midpoint_test_of, v_idx)

    def _settle_lanes(self, out, idx, values, exact, midpoint_test=None, signs=None) -> None:
        """Overwrite ``out`` (C-contiguous) at the flat indices ``idx`` with correctly rounded values.

        ``values`` holds, per input of the function, its float64 values at the lanes ``idx``; a lane is
        settled with ``exact(*inputs)(prec)`` (an mpmath value; of the magnitude when ``signs``, a float64
        array over ``idx`` whose signs the results then take) and ``midpoint_test(*inputs)`` (see
        :func:`_settle`).  Lanes with the same inputs are settled once: saturated sigmoids repeat a few
        values many times (a kernel's ln(1 - 2**-23), whose exact value lies next to a float32 midpoint,
        on about 4 % of its points).
        """
        if idx.size == 0:
            return
        keys = np.stack([np.asarray(v, dtype=np.float64).view(np.int64) for v in values], axis=1)
        # (one input: the plain sort of its int64 keys, ten times faster than the rows' sort of axis=0;
        # which lane stands for a key does not matter, lanes with one key having the same inputs and signs)
        keys = keys[:, 0] if keys.shape[1] == 1 else keys
        _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        settled = np.empty(first.size, dtype=np.float64)
        for j, i in enumerate(first.tolist()):
            inputs = tuple(float(v[i]) for v in values)
            test = midpoint_test(*inputs) if midpoint_test is not None else None
            value = _settle(exact(*inputs), self.fmt, test)
            if signs is not None:
                value = math.copysign(value, float(signs[i]))
            settled[j] = value
        out.reshape(-1)[idx] = settled[inverse.reshape(-1)]


def _lanes_of(a, idx) -> np.ndarray:
    """The values of ``a`` (an array of the result's shape, or a single value) at the flat indices ``idx``."""
    a = np.asarray(a)
    return a.reshape(-1)[idx] if a.size != 1 else np.repeat(a.reshape(-1), idx.size)


#: The largest integer exponent :func:`_exact_integer_powers` takes: |a|**7 of a compute-format value has
#: its lowest bit at 2**(7 * -149) >= 2**-1074 and stays below 2**(7 * 128) < 2**1024.
EXACT_POW_MAX = 7


def _exact_integer_powers(a64, b64):
    """(lanes, values): which of the powers a**b are exact float64 products, and those products.

    a64, b64: float64 arrays (one shape) of compute-format values (at most 24 significand bits, exponents
    within float32's).  A lane qualifies when b is an integer 2 <= b <= :data:`EXACT_POW_MAX` and
    ``b * L <= 53``, L the bit length of the odd part M of a's significand (a = +-M 2**e).  Then every
    partial product a**j = +-M**j 2**(e j), j <= b, has M**j < 2**(j L) <= 2**53 and its lowest bit
    2**(e j) >= 2**-1074 (and |a**j| < 2**1024): a float64, so the float64 products a*a*...*a are exact and
    ``values`` (at the qualifying lanes; the others' entries are meaningless) holds a**b itself, sign included.
    Its one RNE rounding into the compute format is then the correctly rounded power (ties to even), which
    is what the mpmath settle (with its exact midpoint test) returns: a doubtful lane's exact power needs
    no mpmath.
    """
    a64, b64 = np.asarray(a64, dtype=np.float64), np.asarray(b64, dtype=np.float64)
    with np.errstate(all="ignore"):
        lanes = (b64 == np.floor(b64)) & (b64 >= 2) & (b64 <= EXACT_POW_MAX) & np.isfinite(a64) & (a64 != 0)
        _, e = np.frexp(a64)
        significand = np.ldexp(np.abs(a64), 24 - e)  # an integer < 2**24 for every compute-format value
        odd = significand / (significand.astype(np.int64) & -significand.astype(np.int64))
        _, bit_length = np.frexp(odd)
        lanes &= b64 * bit_length <= 53
        values = a64.copy()
        for j in range(2, EXACT_POW_MAX + 1):
            values = np.where(b64 >= j, values * a64, values)
    return lanes, values


# ---------------------------------------------------------------------------
# Settling one point with mpmath
# ---------------------------------------------------------------------------


def _exp_of(x: float):
    """exp(x) as a function of the working precision (the ``exact`` of :meth:`IeeeLibrary._settle_lanes`)."""
    return lambda prec: _mpf_exp(x, prec)


def _ln_of(x: float):
    """ln(x) as a function of the working precision."""
    return lambda prec: _mpf_log(x, prec)


def _pow_abs_of(a: float, b: float):
    """|a|**b as a function of the working precision."""
    return lambda prec: _mpf_pow_abs(a, b, prec)


def _pow_midpoint_test_of(a: float, b: float):
    """Whether |a|**b equals a given dyadic (:func:`_pow_equals_dyadic`), as the ``midpoint_test``."""
    return lambda man, exp: _pow_equals_dyadic(a, b, man, exp)


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
