"""Binary floating-point formats: fp16, bf16, fp32, fp64.

A :class:`Format` knows its precision ``prec`` (significand bits, the hidden
bit included), its normal exponent range ``[emin, emax]`` and its numpy dtype.
On top of that this module gives, for every format:

* the ulp of an exact value (the quantum of the exact value's binade in the
  format, clamped below at the subnormal quantum 2**(emin - prec + 1));
* correct rounding of an exact mpmath value (:meth:`Format.round_mpf`) and of
  exact float64 arrays (:func:`round_to_format`), in one of the closed set of
  rounding modes :data:`RNE` (default), :data:`RNA`, :data:`RTZ`,
  :data:`RUP`, :data:`RDN`, with gradual underflow and IEEE overflow;
* sign-magnitude ordinals in int64 with -0 and +0 both 0, so that the ordinal
  distance of two values is the number of representable values between them
  (numpy's ``nulp_diff`` computes this in the format's own integer width and
  wraps around for float16);
* enumeration of every finite value of the 16-bit formats.

Conventions: NaN has no ordinal (its ordinal is reported as the int64
minimum, see :func:`to_ordinal`); +-inf sit one step beyond the largest
finite value.
"""

from __future__ import annotations

import functools
import importlib
import math
from dataclasses import dataclass

import numpy as np
from mpmath import libmp

from precision.errors import ParameterError

__all__ = [
    "Format",
    "FP16",
    "BF16",
    "FP32",
    "FP64",
    "FORMATS",
    "RNE",
    "RNA",
    "RTZ",
    "RUP",
    "RDN",
    "ROUNDING_MODES",
    "get_format",
    "round_to_format",
    "to_ordinal",
    "from_ordinal",
    "ordinal_distance",
    "ulp",
]

# ---------------------------------------------------------------------------
# Rounding modes: one closed set of names, used everywhere in the package.
# ---------------------------------------------------------------------------

RNE = "RNE"  #: round to nearest, ties to even (IEEE default; CAST_RINT)
RNA = "RNA"  #: round to nearest, ties away from zero (CAST_ROUND)
RTZ = "RTZ"  #: round toward zero (CAST_TRUNC)
RUP = "RUP"  #: round toward +infinity
RDN = "RDN"  #: round toward -infinity (CAST_FLOOR)
ROUNDING_MODES = (RNE, RNA, RTZ, RUP, RDN)

#: NaN's ordinal: no finite or infinite value maps here.
NAN_ORDINAL = np.iinfo(np.int64).min


@dataclass(frozen=True)
class Format:
    """A binary floating-point format with gradual underflow.

    Parameters
    ----------
    name : str
        One of ``fp16``, ``bf16``, ``fp32``, ``fp64``.
    prec : int
        Significand precision in bits, the hidden bit included (11, 8, 24, 53).
    emin, emax : int
        Exponents of the smallest and largest normal binades.
    storage : str
        The numpy dtype that stores the format: a numpy type name (``"float16"``), or ``"module:name"``
        of a type imported on first use of :attr:`dtype` (bf16's ``ml_dtypes:bfloat16``, whose
        extension takes most of a second to load, so that only work in bf16 pays for it).
    uint_dtype : numpy.dtype
        The unsigned integer dtype of the same width (for bit views).
    """

    name: str
    prec: int
    emin: int
    emax: int
    storage: str
    uint_dtype: np.dtype

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype that stores the format."""
        return _storage_dtype(self.storage)

    @property
    def width(self) -> int:
        """Storage width in bits."""
        return np.dtype(self.uint_dtype).itemsize * 8

    @property
    def subnormal_quantum_exp(self) -> int:
        """Exponent q of the smallest subnormal 2**q (also the smallest ulp)."""
        return self.emin - self.prec + 1

    @property
    def smallest_subnormal(self) -> float:
        return math.ldexp(1.0, self.subnormal_quantum_exp)

    @property
    def smallest_normal(self) -> float:
        return math.ldexp(1.0, self.emin)

    @property
    def max_finite(self) -> float:
        return math.ldexp(2.0 - math.ldexp(1.0, 1 - self.prec), self.emax)

    @property
    def finite_count(self) -> int:
        """Number of finite values, both zeros counted."""
        return 2 * (((self.emax - self.emin + 2) << (self.prec - 1)))

    def __repr__(self) -> str:
        return f"Format({self.name})"

    # -- exact values --------------------------------------------------------

    def quantum_exp(self, binade_exp: int) -> int:
        """Exponent of the ulp in the binade [2**e, 2**(e+1)), clamped at subnormals."""
        return max(binade_exp, self.emin) - self.prec + 1

    def round_mpf(self, value, rounding: str = RNE) -> float:
        """Correctly round an exact mpmath value (``mpf`` or raw tuple) to this format.

        Returns a Python float holding the format value exactly (-0.0 kept,
        +-inf on overflow as IEEE 754 prescribes for the mode).  Values far
        below the subnormal range are decided from their exponent alone, so a
        value like exp(-3.4e38) never builds a giant integer.
        """
        mpf = _as_mpf_tuple(value)
        sign, man, exp, bc = mpf
        if not man:
            return _SPECIAL_FLOATS.get(mpf, math.nan)
        qexp = self.quantum_exp(exp + bc - 1)
        shift = qexp - exp
        if shift <= 0:
            n = _check_overflow(man << (-shift), qexp, self, sign, rounding)
            return _compose(sign, n, qexp)
        # man * 2**exp = (n + f) * 2**qexp with 0 <= f < 1; decide f against 1/2.
        if shift > bc + 1:
            n, half, above_half, inexact = 0, False, False, True
        else:
            n = man >> shift
            rem = man - (n << shift)
            halfway = 1 << (shift - 1)
            half = rem == halfway
            above_half = rem > halfway
            inexact = rem != 0
        n = _round_integer(n, sign, half, above_half, inexact, rounding)
        n = _check_overflow(n, qexp, self, sign, rounding)
        return _compose(sign, n, qexp)

    # -- enumeration ---------------------------------------------------------

    def finite_positions(self, lo: float | None = None, hi: float | None = None) -> tuple[int, int]:
        """``[start, stop)``: the positions of the finite values in ``[lo, hi]`` among every finite value in
        ascending order, -0 just before +0 (position 0 is the most negative finite value,
        ``finite_count - 1`` the largest); ``lo``/``hi`` None: unbounded.  An empty range gives start >= stop.

        Examples
        --------
        >>> get_format("fp32").finite_positions()
        (0, 4278190080)
        >>> get_format("fp16").finite_positions(0.0, 1.0)   # -0, +0 and the 15,360 values in (0, 1]
        (31743, 47105)
        """
        half = self.finite_count // 2
        start = 0 if lo is None else self._position(lo, up=True)
        stop = self.finite_count if hi is None else self._position(hi, up=False) + 1
        return max(0, min(start, 2 * half)), max(0, min(stop, 2 * half))

    def _position(self, value: float, up: bool) -> int:
        """The position (:meth:`finite_positions`) of the smallest finite value >= ``value`` (``up``), else of
        the largest <= it; past either end: -1 or finite_count."""
        half = self.finite_count // 2
        if value > self.max_finite:
            return 2 * half
        if value < -self.max_finite:
            return -1
        r = float(round_to_format(np.float64(value), self))
        ordinal = int(to_ordinal(np.float64(r), self))
        if up and r < value:
            ordinal += 1
        elif not up and r > value:
            ordinal -= 1
        if ordinal == 0:  # a zero: -0 is the first value >= a lo in (-tiny, 0], +0 the last <= a hi in [0, tiny)
            return half - 1 if up else half
        return half + ordinal if ordinal > 0 else half - 1 + ordinal

    def values_at(self, start: int, stop: int) -> np.ndarray:
        """The finite values at positions ``[start, stop)`` (:meth:`finite_positions`), ascending, in the
        format's dtype.

        Examples
        --------
        >>> [float(v).hex() for v in get_format("fp32").values_at(2139095038, 2139095042)]
        ['-0x1.0000000000000p-149', '-0x0.0p+0', '0x0.0p+0', '0x1.0000000000000p-149']
        """
        half = self.finite_count // 2
        p = np.arange(start, stop, dtype=np.int64)
        sign_bit = np.int64(1) << np.int64(self.width - 1)
        bits = np.where(p < half, (half - 1 - p) | sign_bit, p - half)
        return bits.astype(self.uint_dtype).view(self.dtype)

    def finite_values(self) -> np.ndarray:
        """Every finite value of a 16-bit format, in ascending bit-pattern order.

        Both zeros are included (63,488 values for fp16).  32- and 64-bit
        formats have too many values to enumerate and raise ParameterError.
        """
        if self.width > 16:
            raise ParameterError(
                f"format={self.name} has {self.finite_count} finite values; "
                "enumeration is only offered for fp16 and bf16 (use a stratified sample)"
            )
        bits = np.arange(1 << self.width, dtype=np.uint32).astype(self.uint_dtype)
        values = bits.view(self.dtype)
        return values[np.isfinite(values.astype(np.float32))]


#: mpmath's special raw values; a negative zero (1, 0, 0, 0) exists in mpmath 1.3 (``fnzero``) but not 1.4.
_NEGATIVE_ZERO = (1, libmp.MPZ_ZERO, 0, 0)
_SPECIAL_FLOATS = {libmp.fzero: 0.0, _NEGATIVE_ZERO: -0.0, libmp.finf: math.inf, libmp.fninf: -math.inf}


def _as_mpf_tuple(value):
    if isinstance(value, tuple):
        return value
    return value._mpf_


def _round_integer(n: int, sign: int, half: bool, above_half: bool, inexact: bool, rounding: str) -> int:
    """Round the magnitude n + f (f described by the flags) to an integer."""
    if not inexact:
        return n
    if rounding == RNE:
        return n + 1 if above_half or (half and n & 1) else n
    if rounding == RNA:
        return n + 1 if above_half or half else n
    if rounding == RTZ:
        return n
    if rounding == RUP:
        return n + 1 if not sign else n
    if rounding == RDN:
        return n + 1 if sign else n
    raise ParameterError(f"rounding={rounding!r}; expected one of {', '.join(ROUNDING_MODES)}")


def _check_overflow(n: int, qexp: int, fmt: Format, sign: int, rounding: str):
    """Return n, or the marker None for infinity, or the max finite significand."""
    if n.bit_length() + qexp <= fmt.emax + 1:
        return n
    to_infinity = rounding in (RNE, RNA) or (rounding == RUP and not sign) or (rounding == RDN and sign)
    if to_infinity:
        return None
    return (1 << fmt.prec) - 1, fmt.emax - fmt.prec + 1


def _compose(sign: int, n, qexp: int) -> float:
    if n is None:
        return -math.inf if sign else math.inf
    if isinstance(n, tuple):
        n, qexp = n
    x = math.ldexp(float(n), qexp)
    return -x if sign else x


@functools.cache
def _storage_dtype(storage: str) -> np.dtype:
    """The numpy dtype named by a :attr:`Format.storage` (its module imported on first use)."""
    module, _, name = storage.rpartition(":")
    return np.dtype(getattr(importlib.import_module(module), name) if module else storage)


FP16 = Format("fp16", 11, -14, 15, "float16", np.dtype(np.uint16))
BF16 = Format("bf16", 8, -126, 127, "ml_dtypes:bfloat16", np.dtype(np.uint16))
FP32 = Format("fp32", 24, -126, 127, "float32", np.dtype(np.uint32))
FP64 = Format("fp64", 53, -1022, 1023, "float64", np.dtype(np.uint64))

#: Every supported format by name, narrowest first.
FORMATS = {f.name: f for f in (FP16, BF16, FP32, FP64)}


def get_format(fmt) -> Format:
    """Return the Format for a name (``"fp32"``), a Format, or a numpy dtype."""
    if isinstance(fmt, Format):
        return fmt
    if isinstance(fmt, str) and fmt in FORMATS:
        return FORMATS[fmt]
    # by the numpy type's name ("bfloat16" too, which numpy knows only once ml_dtypes is loaded); a dtype of
    # another format never loads ml_dtypes
    by_name = {f.storage.rpartition(":")[2]: f for f in FORMATS.values()}
    if isinstance(fmt, str) and fmt in by_name:
        return by_name[fmt]
    try:
        dt = np.dtype(fmt)
    except TypeError:
        dt = None
    if dt is not None and dt.name in by_name and dt == by_name[dt.name].dtype:
        return by_name[dt.name]
    raise ParameterError(f"format={fmt!r}; expected one of {', '.join(FORMATS)}")


# ---------------------------------------------------------------------------
# Vectorized rounding of exact float64 values
# ---------------------------------------------------------------------------

def round_to_format(values, fmt, rounding: str = RNE) -> np.ndarray:
    """Correctly round exact float64 values into ``fmt``; returns fmt's dtype.

    Parameters
    ----------
    values : array_like of float
        Exact values (any float dtype; converted to float64 exactly).
    fmt : str or Format
        Target format.
    rounding : str
        One of :data:`ROUNDING_MODES`; default :data:`RNE`.

    Notes
    -----
    A single rounding straight from the float64 value (never via float32):
    the value is scaled by the quantum of its binade (clamped at the subnormal
    quantum) so that rounding to an integer is exact in float64, then rounded
    with the mode and scaled back.  Overflow gives +-inf for the nearest modes
    and for the directed mode that points outward, else +-max finite.  NaN
    stays NaN; +-0 and +-inf keep their sign.
    """
    fmt = get_format(fmt)
    v = np.asarray(values, dtype=np.float64)
    if fmt is FP64:
        return v.copy()
    with np.errstate(invalid="ignore", over="ignore"):
        finite = np.isfinite(v) & (v != 0)
        _, e = np.frexp(np.where(finite, v, 1.0))
        qexp = np.maximum(e.astype(np.int64) - 1, fmt.emin) - (fmt.prec - 1)
        scaled = np.ldexp(np.where(finite, v, 0.0), (-qexp).astype(np.int32))
        if rounding == RNE:
            n = np.rint(scaled)
        elif rounding == RTZ:
            n = np.trunc(scaled)
        elif rounding == RUP:
            n = np.ceil(scaled)
        elif rounding == RDN:
            n = np.floor(scaled)
        elif rounding == RNA:
            t = np.trunc(scaled)
            n = t + np.sign(scaled) * (np.abs(scaled - t) >= 0.5)
        else:
            raise ParameterError(f"rounding={rounding!r}; expected one of {', '.join(ROUNDING_MODES)}")
        rounded = np.ldexp(n, qexp.astype(np.int32))
        over = np.abs(rounded) > fmt.max_finite
        if rounding in (RNE, RNA):
            outward = over
        elif rounding == RTZ:
            outward = np.zeros_like(over)
        elif rounding == RUP:
            outward = over & (v > 0)
        else:
            outward = over & (v < 0)
        rounded = np.where(over, np.copysign(np.where(outward, np.inf, fmt.max_finite), v), rounded)
        # keep the sign of values that round to zero, and pass through zeros, inf, NaN
        rounded = np.where(finite, np.copysign(rounded, v), v)
    return rounded.astype(fmt.dtype)


# ---------------------------------------------------------------------------
# Ordinals and ulps (vectorized)
# ---------------------------------------------------------------------------

def _values_in(values, fmt: Format) -> np.ndarray:
    arr = np.asarray(values)
    if arr.dtype != fmt.dtype:
        arr = round_to_format(arr.astype(np.float64), fmt)
        # the caller passed values of another dtype: they must already be exact
        # values of fmt (a silent rounding here would hide a bug)
        if not np.array_equal(arr.astype(np.float64), np.asarray(values, dtype=np.float64), equal_nan=True):
            raise ParameterError(f"values are not exact {fmt.name} values; round them first")
    return arr


def to_ordinal(values, fmt) -> np.ndarray:
    """Sign-magnitude ordinal of each value as int64; -0 and +0 are both 0.

    Consecutive representable values have consecutive ordinals; +inf is one
    past the largest finite value.  NaN maps to the int64 minimum.  ``values``
    must be exact values of ``fmt`` (any float dtype holding them).
    """
    fmt = get_format(fmt)
    arr = _values_in(values, fmt)
    bits = arr.view(fmt.uint_dtype).astype(np.uint64)
    sign_bit = np.uint64(1) << np.uint64(fmt.width - 1)
    magnitude = (bits & (sign_bit - np.uint64(1))).astype(np.int64)
    ordinal = np.where((bits & sign_bit) != 0, -magnitude, magnitude)
    isnan = np.isnan(arr.astype(np.float64))
    return np.where(isnan, NAN_ORDINAL, ordinal)


def from_ordinal(ordinals, fmt) -> np.ndarray:
    """Inverse of :func:`to_ordinal` (ordinal 0 gives +0)."""
    fmt = get_format(fmt)
    o = np.asarray(ordinals, dtype=np.int64)
    sign_bit = np.uint64(1) << np.uint64(fmt.width - 1)
    bits = np.where(o < 0, np.abs(o).astype(np.uint64) | sign_bit, o.astype(np.uint64))
    return bits.astype(fmt.uint_dtype).view(fmt.dtype)


def ordinal_distance(a, b, fmt=None) -> np.ndarray:
    """Number of representable steps between a and b, as int64 (never wraps).

    ``fmt`` defaults to the common dtype of the inputs.  NaN against anything
    gives -1 (no distance).

    Examples
    --------
    >>> int(ordinal_distance(np.float16(1000), np.float16(-1000)))
    51104
    """
    a = np.asarray(a)
    b = np.asarray(b)
    fmt = get_format(fmt if fmt is not None else np.result_type(a, b))
    oa, ob = to_ordinal(a, fmt), to_ordinal(b, fmt)
    nan = (oa == NAN_ORDINAL) | (ob == NAN_ORDINAL)
    return np.where(nan, -1, np.abs(oa - ob))


def ulp(values, fmt) -> np.ndarray:
    """ulp in ``fmt`` of exact float64 values: the quantum of each value's binade.

    Clamped below at the subnormal quantum (so ulp(0) is the smallest
    subnormal); above the largest binade the quantum keeps growing.  inf and
    NaN give NaN.  The input need not be representable in ``fmt``.
    """
    fmt = get_format(fmt)
    v = np.asarray(values, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        finite = np.isfinite(v)
        _, e = np.frexp(np.where(finite & (v != 0), v, 1.0))
        binade = np.where(v == 0, fmt.emin, e.astype(np.int64) - 1)
        q = np.ldexp(1.0, (np.maximum(binade, fmt.emin) - fmt.prec + 1).astype(np.int32))
    return np.where(finite, q, np.nan)
