"""The emulated machine: a compute format, a math-library model, flush switches.

A :class:`Machine` offers every primitive operation the kernel recipes use
(``add``, ``mul``, ``fma``, ``div``, ``exp``, ``ln``, ``pow``, compares,
select, casts), vectorized over numpy arrays, each with the rounding of the
machine it models.  A :class:`MachineModel` names the machine:

``ieee``
    The ideal IEEE 754 machine.  ``+ - * / fma`` are correctly rounded (RNE)
    in the compute format with gradual underflow; ``exp``, ``ln`` and ``pow``
    are correctly rounded too: a float64 evaluation is rounded once, and the
    rare points whose float64 value lies within a relative margin
    (:data:`IEEE_F64_MARGIN`) of a rounding boundary are settled with mpmath
    at a working precision raised until the rounding is decided (exact
    midpoints of ``pow`` are recognised with integer arithmetic).
``numpy``
    numpy's own ufuncs in the compute dtype (``np.exp`` on float32 arrays and
    so on), as a CPU reference would run.  numpy has no fma ufunc; ``fma`` is
    the exact fused operation.
``npu``
    The Ascend 950 (arch 3510) vector unit as described in
    ``shared/spec/npu_math.md``: plain Add/Sub/Mul keep subnormals; Exp and
    Ln in their 1-ulp modes with and without flush to zero; the default
    (``vdiv``, DAZ+FTZ) and the 0-ulp Div; the float32 ``Power`` with
    ``DOUBLE_FLOAT_TECH`` (algorithm C, bit-level except the hardware
    reciprocal and exp) and the default ``INTRINSIC`` Power.

Conventions
-----------
* Every function returns arrays of the compute dtype (``float32``,
  ``float16`` or ``ml_dtypes.bfloat16``); compares return ``bool`` arrays.
  Inputs that are not of the compute dtype are first converted with
  :meth:`Machine.asarray` (exact from narrower formats, RNE from wider ones).
* Rounding is round-to-nearest-even (RNE) unless stated.  Underflow is
  gradual unless a flush applies.
* Flush switches (``sigmoid_focal_loss_grad.md`` §7: "flush subnormal
  results of Mul/Add"): ``ftz`` makes a subnormal *result* of ``add``,
  ``sub``, ``mul`` and ``fma`` a zero of the same sign; ``daz`` reads a
  subnormal *input* of those four ops as a zero of the same sign.  They
  touch nothing else: ``div`` (both modes), ``exp``, ``ln`` and ``pow`` keep
  exactly the flushing their own model and mode define (npu vdiv DAZ+FTZ in
  ``div(mode="default")``, the ``ftz=`` argument of ``exp``/``ln``, vexp's
  flush inside Power, ...), so ``div(mode="0ulp")`` still produces and
  accepts subnormals on a ``+ftz``/``+daz`` machine, as the npu's
  Div PRECISION_0ULP_FTZ_FALSE does; neg, abs, max, min, compares, select
  and casts never flush (compares see subnormals exactly, npu_math §7.3).
* Hardware ops whose algorithm is not public are *proxies* (marked
  ``# PROXY:`` in the code): ``vexp``, ``vln`` and ``vdiv`` are modelled as
  the compute-format RNE rounding of the float64 result, with the flushing
  the documentation states.  They are within the documented 1 ulp but are
  not claimed to be bit-exact.
* NaN payloads: the ``pow`` special cases write the quiet NaN 0x7FC00000
  (fp32; 0x7E00 fp16, 0x7FC0 bf16); the npu default Div writes 0x7FFFFFFF
  (fp16/bf16: 0x7FFF) for every NaN it returns.  Other NaNs are whatever
  numpy produces.
* Op counting (``count_ops=True``): each primitive call adds the number of
  elements it produced to ``counts[name]`` with names ``add sub mul div
  div0ulp fma neg abs max min cmp select exp ln pow cast``.  ``asarray``
  (loading data) is not counted; ``from_int32`` and ``cast`` count as
  ``cast``.  A library routine (exp, ln, pow) counts as one op per element.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass

import gmpy2
import numpy as np
from mpmath import libmp

from precision.errors import OracleUndecidedError, ParameterError
from precision.formats import BF16, FP32, RNE, Format, get_format, round_to_format

__all__ = [
    "MODEL_NAMES",
    "COMPUTE_FORMATS",
    "DIV_MODES",
    "POW_ALGOS",
    "IEEE_F64_MARGIN",
    "MachineModel",
    "Machine",
    "get_machine",
]

# ---------------------------------------------------------------------------
# Closed sets of names
# ---------------------------------------------------------------------------

MODEL_NAMES = ("ieee", "numpy", "npu")
COMPUTE_FORMATS = ("fp32", "fp16", "bf16")
DIV_MODES = ("0ulp", "default")
POW_ALGOS = ("double_float", "intrinsic")
#: Suffixes accepted by :func:`get_machine` after the model name.
SPEC_SUFFIXES = ("ftz", "daz", "release", "fp32", "fp16", "bf16")

# ---------------------------------------------------------------------------
# Tuning of the ieee model's correct rounding
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
# npu constants (bit patterns as hex; npu_math.md section numbers)
# ---------------------------------------------------------------------------

#: Quiet NaN written by the pow special cases (§2.4), per compute format.
POW_NAN_BITS = {"fp32": 0x7FC00000, "fp16": 0x7E00, "bf16": 0x7FC0}
#: NaN returned by the default (vdiv) Div (§6 doc example), per format.
VDIV_NAN_BITS = {"fp32": 0x7FFFFFFF, "fp16": 0x7FFF, "bf16": 0x7FFF}
#: Largest subnormal bit pattern per format: Exp/Ln FTZ_FALSE compare against
#: it (§6: 0x007FFFFF float, 0x03FF half).
MAX_SUBNORMAL_BITS = {"fp32": 0x007FFFFF, "fp16": 0x03FF}

# Algorithm C (§2), float32 bit patterns / exact values.
POW_FLT_MIN = np.float32(2.0**-126)  # 0x00800000, R0 subnormal test literal 1.175494351e-38f
POW_SUBNORMAL_SCALE = np.float32(2.0**23)  # 0x4B000000, R0 Muls scale (exact)
POW_SUBNORMAL_SHIFT = np.float32(-23.0)  # R0 i0 for scaled inputs
POW_SQRT_HALF_BITS = np.int32(0x3F3504F3)  # R1: 0.70710678f ~ sqrt(1/2)
POW_EXPONENT_MASK = np.int32(-0x00800000)  # R1: 0xFF800000 as int32
POW_TWO_M23 = np.float32(2.0**-23)  # R3: 1.19209290e-7f = 0x34000000
POW_LOG_POLY = (  # L10 Horner coefficients, highest order first
    np.float32(0.129394531),  # 0x3E048000
    np.float32(0.141957462),  # 0x3E115D4C
    np.float32(0.200015724),  # 0x3E4CD0EC
    np.float32(0.333333254),  # 0x3EAAAAA8
)
POW_LN2_HI = np.float32(0.693147182)  # 0x3F317218, 21 significant bits
POW_LN2_LO = np.float32(-1.90465421e-9)  # 0xB102E308 = ln2 - LN2_HI (negative; the source's LOG2_LO)
POW_EXP_OVERFLOW = np.float32(88.7228390)  # 0x42B17218 = 88.72283935546875 (source name EXP_MIN_F)
POW_EXP_UNDERFLOW = np.float32(-104.0)  # 0xC2D00000 (source name EXP_OVFL_UNFL_F)

# Ln FTZ_FALSE (§6): scale 2**23 (half: 2**10), offset -ln(2**23) rounded.
LN_SUBNORMAL_SCALE_LOG2 = {"fp32": 23, "fp16": 10}
LN_SUBNORMAL_OFFSET_FP32 = np.float32(-15.9423851528787421)  # 0xC17F1402 = -15.942384719848633


# ---------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MachineModel:
    """Which machine to emulate.

    Parameters
    ----------
    name : str
        ``"ieee"``, ``"numpy"`` or ``"npu"`` (see the module docstring).
    compute : str
        Compute format: ``"fp32"`` (default), ``"fp16"`` or ``"bf16"``.
    ftz : bool
        Flush to zero: a subnormal result of ``add``, ``sub``, ``mul`` or
        ``fma`` (the Mul/Add class, including the fused ops) becomes a zero
        of the same sign, after the op's one rounding (so a result that
        rounds up to the smallest normal is kept).  Default False.
    daz : bool
        Denormals are zero: a subnormal input of ``add``, ``sub``, ``mul``
        or ``fma`` reads as a zero of the same sign.  Default False.

    Notes
    -----
    Neither switch acts on ``div`` (either mode), ``exp``, ``ln`` or
    ``pow``: they keep the flushing their model and mode define and nothing
    more.  On npu that is vdiv's DAZ+FTZ in ``div(mode="default")``, Exp/Ln
    with ``ftz=True`` (INTRINSIC) and the vexp flush inside Power, while
    ``div(mode="0ulp")`` (Div PRECISION_0ULP_FTZ_FALSE), Exp/Ln
    ``ftz=False`` and the Power's own subnormal handling keep subnormals; on
    ieee and numpy only the ``ftz=True`` argument of ``exp``/``ln`` flushes.
    In particular the Div0ulp quotient chain of guard G7 keeps a subnormal
    result on a ``+ftz`` machine, where ``mul`` flushes it.  neg, abs,
    max, min, compares, select and casts never flush.
    power_subnormal_fix : bool
        npu Power algorithm C: True is master 9e7fba1b9 (subnormal bases are
        scaled by 2**23 before range reduction); False reproduces releases
        9.0.0/9.1.0, where range reduction still reads the unscaled bits
        (npu_math §2.5).  Ignored by the other models.  Default True.

    Raises
    ------
    ParameterError
        On a field outside its allowed values.
    """

    name: str
    compute: str = "fp32"
    ftz: bool = False
    daz: bool = False
    power_subnormal_fix: bool = True

    def __post_init__(self):
        _check_choice("name", self.name, MODEL_NAMES)
        _check_choice("compute", self.compute, COMPUTE_FORMATS)
        for field in ("ftz", "daz", "power_subnormal_fix"):
            value = getattr(self, field)
            if not isinstance(value, (bool, np.bool_)):
                raise ParameterError(f"MachineModel {field}={value!r}; expected True or False")

    @property
    def spec(self) -> str:
        """Canonical spec string, e.g. ``"npu+ftz+daz"``, accepted by :func:`get_machine`."""
        parts = [self.name]
        if self.ftz:
            parts.append("ftz")
        if self.daz:
            parts.append("daz")
        if self.name == "npu" and not self.power_subnormal_fix:
            parts.append("release")
        if self.compute != "fp32":
            parts.append(self.compute)
        return "+".join(parts)


def _check_choice(argument: str, value, choices) -> None:
    if not isinstance(value, str) or value not in choices:
        raise ParameterError(f"{argument}={value!r}; expected one of {', '.join(choices)}")


def get_machine(spec) -> "Machine":
    """Return a :class:`Machine` for a spec.

    Parameters
    ----------
    spec : Machine, MachineModel or str
        A machine (returned as is), a model, or a string: a model name
        (``"ieee"``, ``"numpy"``, ``"npu"``) optionally followed by ``+``
        suffixes ``ftz``, ``daz``, ``release`` (npu only: Power without the
        subnormal fix), ``fp16``/``bf16``/``fp32`` (compute format), e.g.
        ``"npu+ftz+daz"``.

    Raises
    ------
    ParameterError
        On an unknown model name or suffix, a repeated or conflicting suffix,
        or ``release`` on a model other than npu.

    Examples
    --------
    >>> get_machine("npu+ftz+fp16").model
    MachineModel(name='npu', compute='fp16', ftz=True, daz=False, power_subnormal_fix=True)
    """
    if isinstance(spec, Machine):
        return spec
    if isinstance(spec, MachineModel):
        return Machine(spec)
    if not isinstance(spec, str):
        raise ParameterError(f"machine={spec!r}; expected a Machine, a MachineModel or a string like 'npu+ftz'")
    name, *suffixes = spec.strip().split("+")
    if name not in MODEL_NAMES:
        raise ParameterError(
            f"machine={spec!r}; expected one of {', '.join(MODEL_NAMES)} optionally followed by "
            f"+{', +'.join(SPEC_SUFFIXES)} (e.g. 'npu+ftz+daz')"
        )
    fields = {"name": name}
    for suffix in suffixes:
        if suffix not in SPEC_SUFFIXES:
            raise ParameterError(
                f"machine={spec!r}: unknown suffix '+{suffix}'; expected +{', +'.join(SPEC_SUFFIXES)}"
            )
        key, value = {
            "ftz": ("ftz", True),
            "daz": ("daz", True),
            "release": ("power_subnormal_fix", False),
        }.get(suffix, ("compute", suffix))
        if key in fields:
            raise ParameterError(f"machine={spec!r}: '+{suffix}' repeats or conflicts with another suffix")
        fields[key] = value
    if "power_subnormal_fix" in fields and name != "npu":
        raise ParameterError(f"machine={spec!r}: '+release' applies to the npu model only")
    return Machine(MachineModel(**fields))


# ---------------------------------------------------------------------------
# Exact fused multiply-add
# ---------------------------------------------------------------------------


def _fma_round_to_odd(a64, b64, c64):
    """a*b + c rounded to odd at float64 precision (53 bits).

    Preconditions: a, b, c are float64 arrays holding values of a format with
    at most 26 significand bits and exponents within float32's (fp32, fp16,
    bf16), so that ``a*b`` is exact in float64 and no float64 result is
    subnormal or overflows.

    Method (npu_math §1; Boldo & Melquiond, "Emulation of FMA and
    correctly rounded sums: proved algorithms using rounding to odd", IEEE TC
    2008): ``p = a*b`` is exact; Knuth's TwoSum gives ``s = RN(p + c)`` and
    the exact error ``e``; round-to-odd of the exact sum is ``s`` if
    ``e == 0``, else ``s`` truncated toward zero with its last bit set.  A
    round-to-odd value with p >= q + 2 bits rounds to nearest into q bits
    exactly as the exact value does, so a single RNE cast to fp32 (q = 24),
    fp16 or bf16 afterwards is the correctly rounded fma.  Subnormal targets
    only lower q.  Non-finite sums (inf, NaN operands, inf*0) take IEEE's
    float64 ``p + c`` unchanged; an exact zero sum keeps IEEE's sign rule.
    """
    with np.errstate(all="ignore"):
        p = np.asarray(a64 * b64)
        s = np.asarray(p + c64)
        z = s - p
        e = (p - (s - z)) + (c64 - z)
        inexact = (e != 0) & np.isfinite(s)
        toward_zero = inexact & ((s > 0) != (e > 0))
    bits = np.asarray(s.view(np.int64) - toward_zero.astype(np.int64))
    bits |= inexact.astype(np.int64)
    return bits.view(np.float64)


# ---------------------------------------------------------------------------
# ieee model: correct rounding of exp / ln / pow
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
    until both ends of the error interval round to the same ``fmt`` value.
    ``exact_midpoint_test(m_man, m_exp)`` (optional) says whether the exact
    value *is* the midpoint m_man * 2**m_exp met while undecided; if so the
    tie is rounded to even.  Raises OracleUndecidedError past the cap.
    """
    prec = SETTLE_START_PREC
    tested = set()
    while prec <= SETTLE_MAX_PREC:
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
        prec *= 2
    raise OracleUndecidedError(
        f"rounding to {fmt.name} undecided at prec={SETTLE_MAX_PREC} bits; raise SETTLE_MAX_PREC"
    )


# ---------------------------------------------------------------------------
# npu Power, algorithm C (npu_math §2), float32 bit level
# ---------------------------------------------------------------------------


#: float64 bit masks of the fast fp32 fma: the 29 low significand bits of a
#: float64 hold what an RNE cast to a normal float32 drops; 0x10000000 there is
#: a float32 rounding midpoint.
_F64_LOW29 = np.int64(0x1FFFFFFF)
_F64_LOW29_MID = np.int64(0x10000000)


def _fma32(a, b, c):
    """Fused a*b + c on float32 operands, one RNE rounding to float32 (exact).

    a, b, c: float32 arrays or scalars (broadcast).  Bit-identical to
    ``_fma_round_to_odd(a, b, c).astype(float32)`` (the reference, kept for
    the rare lanes below and for the tests), at a fraction of the cost.

    Fast path.  ``p = a*b`` is exact in float64 (two 24-bit significands,
    exponents within [-298, 256]) and ``s = RN64(p + c)``; the result is
    ``RN32(s)``.  Let ``v = p + c`` be the exact sum.  ``RN32(s) == RN32(v)``
    unless ``s`` is itself a float32 rounding boundary (a midpoint between
    consecutive float32 values, or the overflow threshold 2**128 - 2**103)
    and ``s != v``:

    * if ``s == v`` there is nothing to prove;
    * otherwise, say ``v < s``.  RN32 is monotone, so RN32(v) != RN32(s)
      needs a boundary ``m`` with ``v <= m <= s``.  Every boundary is a
      float64 number.  ``m == v`` would make ``v`` a float64, so ``s == v``;
      ``v < m < s`` contradicts ``s`` being the float64 nearest to ``v``
      (``|v - m| < |v - s|``).  Hence ``m == s``.  (Symmetric for v > s.)

    Which ``s`` can be a boundary (float64 ``s = 1.f * 2**E``, 52-bit f):

    * ``E >= -126`` (the float32 grid there is 2**(E-23)): the boundaries are
      exactly the ``s`` whose 29 low bits of f equal 0x10000000 (this
      includes 2**128 - 2**103, f = 2**52 - 2**28).  Test T1.
    * ``E <= -127`` (float32 subnormal grid 2**-149): boundaries are odd
      multiples of 2**-150.  Such an ``s`` with ``|s| <= 2**-150`` rounds to
      a float32 zero, and then ``v`` is exact: ``|v| < 2**-149`` with c != 0
      needs ``|p| >= 2**-151``, so ``p`` (48 significant bits) is a multiple
      of 2**-199 and so is ``v``, which then fits in 50 bits; with c == 0,
      ``v = p``.  Otherwise ``2**-150 < |s| < 2**-126`` and RN32(s) is a
      nonzero float32 of magnitude <= 2**-126 (0 < |bits| <= 0x00800000).
      Test T2 flags every such lane (a superset of the boundaries).

    Lanes flagged by T1 or T2 (about 2**-29 of random lanes, plus the rare
    subnormal results) are recomputed with the round-to-odd reference; a
    lane that is flagged but exact gets the same value either way.
    Non-finite sums: inf keeps the low bits zero and NaN is NaN in both
    paths; a zero sum is exact, so IEEE's sign rule of ``p + c`` applies in
    both.
    """
    shape = np.broadcast_shapes(np.shape(a), np.shape(b), np.shape(c))
    with np.errstate(all="ignore"):
        # s = RN64(a*b + c), operands in this order (NaN payloads as before);
        # in place in one fresh float64 buffer (cheaper than mixed-dtype ufuncs).
        if np.shape(a) == shape:
            s = np.asarray(a).astype(np.float64)
        else:
            s = np.empty(shape, dtype=np.float64)
            s[...] = a
        np.multiply(s, b, out=s)
        np.add(s, c, out=s)
        out = s.astype(np.float32)
        # T1: s on a normal float32 midpoint (29 low bits == 0x10000000).
        low = s.view(np.int64)
        np.bitwise_and(low, _F64_LOW29, out=low)  # s is not needed any more
        risky = low == _F64_LOW29_MID
        # T2: 0 < |RN32(s)| <= 2**-126: 2*bits - 2 (uint32, sign shifted out,
        # zero wraps to 0xFFFFFFFE) <= 2*0x00800000 - 2.
        twice = np.add(out.view(np.uint32), out.view(np.uint32))
        twice -= np.uint32(2)
        risky |= twice <= np.uint32(0x00FFFFFE)
        if risky.any():
            _fma32_settle(a, b, c, out, np.flatnonzero(risky))
    return out


def _fma32_settle(a, b, c, out, idx):
    """Overwrite ``out`` (float32, C-contiguous) at flat indices ``idx`` with the round-to-odd fma."""
    shape = out.shape
    sub = [np.broadcast_to(np.asarray(v, dtype=np.float32), shape).reshape(-1)[idx].astype(np.float64)
           for v in (a, b, c)]
    out.reshape(-1)[idx] = _fma_round_to_odd(*sub).astype(np.float32)


#: Elements per block of the npu Power emulation.  The few dozen temporaries
#: of one block stay in the CPU cache; multi-megabyte temporaries of a whole
#: tensor cost a page fault per 4 KiB on every allocation.  Blocking changes
#: no bit (every step is elementwise).
POW_BLOCK = 1 << 15


def _vexp_intrinsic_fp32(x):
    # PROXY: hardware vexp (Exp INTRINSIC / PRECISION_1ULP_FTZ_TRUE), algorithm
    # not public, documented <= 1 ulp without subnormals.  Modelled as RN32 of
    # the float64 exp; subnormal inputs read as 0 (exp = 1 either way) and
    # subnormal results are flushed to +0 (npu_math §1, §6).
    with np.errstate(all="ignore"):
        e = np.exp(x.astype(np.float64)).astype(np.float32)
        np.putmask(e, e < POW_FLT_MIN, np.float32(0.0))
    return e


def _npu_pow_log(x, subnormal_fix: bool = True):
    """Double-float ln(x) of npu Power algorithm C: steps R0-R5, L6-L18.

    Parameters
    ----------
    x : ndarray of float32
        |base|, non-negative (zero, inf and NaN give meaningless values that
        the special cases of :func:`_npu_pow_c` replace).
    subnormal_fix : bool
        True: master 9e7fba1b9 (R1/R2 read the scaled bits); False: the
        9.0.0/9.1.0 bug (they read the unscaled bits, §2.5).

    Returns
    -------
    lhi, llo : ndarray of float32
        lhi + llo ~ ln(x) (relative error about 2**-29 with the fix).
    """
    shape = np.shape(x)
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    lhi = np.empty_like(x)
    llo = np.empty_like(x)
    for start in range(0, x.size, POW_BLOCK):
        block = slice(start, start + POW_BLOCK)
        lhi[block], llo[block] = _npu_pow_log_block(x[block], subnormal_fix)
    return lhi.reshape(shape), llo.reshape(shape)


def _npu_pow_log_block(x, subnormal_fix: bool):
    """:func:`_npu_pow_log` on one contiguous 1-D float32 block."""
    f32 = np.float32
    with np.errstate(all="ignore"):
        # R0: subnormals scaled by 2**23 (Muls, exact); i0 compensates.
        small = x < POW_FLT_MIN
        any_small = bool(small.any())
        xs = np.where(small, x * POW_SUBNORMAL_SCALE, x) if any_small and subnormal_fix else x
        bits = xs.view(np.int32)
        # R1/R2: m in [sqrt(1/2), sqrt(2)), x = m * 2**k, e = k * 2**23.
        e = (bits - POW_SQRT_HALF_BITS) & POW_EXPONENT_MASK
        m = (bits - e).view(np.float32)
        # R3: i = fma(float(e), 2**-23, i0) = k + i0, computed without the fma:
        # e = k * 2**23 with |k| <= 256, so float(e) and float(e) * 2**-23 = k
        # are exact, k + i0 (i0 in {0, -23}) is an exact small integer, and
        # e >> 23 == k.  Zeros: k = 0 gives +0 both ways, and k + i0 = 0 is
        # an exact zero sum of opposite signs, +0 in both (RNE).
        i = (e >> 23).astype(np.float32)
        if any_small:
            i += np.where(small, POW_SUBNORMAL_SHIFT, f32(0.0))
        # R4
        p = m + f32(1.0)
        m1 = m - f32(1.0)
        # PROXY: (R5) hardware vdiv (Div INTRINSIC) of 1/p, <= 1 ulp; modelled as
        # RN32(1/p) (numpy float32 division is correctly rounded).  p is in
        # [1.7, 2.42], so no flushing is involved.
        r = f32(1.0) / p
        # L6-L8: q = (m-1)/(m+1) as qhi + qlo.
        qhi = m1 * r
        t = m1 + qhi * f32(-2.0)
        qhi1 = _fma32(-m1, qhi, t)
        qlo = r * qhi1
        # L9-L11: u ~ q^2/3 + q^4/5 + ...
        s = qhi * qhi
        c3, c2, c1, c0 = POW_LOG_POLY
        u = _fma32(c3, s, c2)
        u = _fma32(u, s, c1)
        u = _fma32(u, s, c0)
        u *= s
        # L12: 2q as a double-float (exact doublings).
        qh2 = qhi + qhi
        ql2 = qlo + qlo
        # L13-L14: i*ln2_hi + 2qhi and its rounding error (Muls then Add: two roundings).
        fhi = i * POW_LN2_HI + qh2
        t2 = _fma32(i, -POW_LN2_HI, fhi)
        flo = qh2 - t2
        # L15-L17
        second = _fma32(qh2, u, flo)
        last = _fma32(ql2 * f32(3.0), u, ql2)
        last = _fma32(i, POW_LN2_LO, last)
        total = last + second
        # L18: quick-two-sum.
        lhi = fhi + total
        llo = (fhi - lhi) + total
    return lhi, llo


def _odd_integer_fp32(b):
    """Algorithm C's odd-integer test fma(floor(0.5*b), -2, b) == 1 (False for inf, NaN, |b| >= 2**24).

    Quirk kept: the fma rounds, so b = -(1 - 2**-24) (2 + b = 1 + 2**-24,
    a tie that goes to 1) also counts as odd.
    """
    with np.errstate(all="ignore"):
        return _fma32(np.floor(b * np.float32(0.5)), np.float32(-2.0), b) == np.float32(1.0)


def _pow_special_cases(a, b, res, nan_bits: int, uint_dtype):
    """npu_math §2.4 fix-ups (ProcessSpecialCaseForPowF), in source order.

    a, res are arrays of one float dtype (float32 or float16) and one shape;
    b has that shape or is a single value (broadcast).  Values of ``res``
    where no special case applies are kept.  ``a == 0`` is an exact compare
    (a subnormal base is not zero).  ``res`` is updated in place when it is
    writeable and returned.

    Only lanes with a base that is not finite positive, a == 1, b == 0 or a
    NaN b can meet a case (steps 3-5 need a <= 0, inf or NaN); the steps run
    on those lanes only.
    """
    zero = np.zeros((), dtype=res.dtype)
    with np.errstate(all="ignore"):
        plain = (a > zero) & (a < np.array(np.inf, dtype=res.dtype)) & (a != np.ones((), dtype=res.dtype))
        plain &= (b != zero) & (b == b)
    if plain.all():
        return res
    res = np.array(res, order="C", copy=not (res.flags.writeable and res.flags.c_contiguous))
    idx = np.flatnonzero(~plain)
    a_sub = np.reshape(a, -1)[idx]
    b_sub = np.broadcast_to(b, res.shape).reshape(-1)[idx] if np.size(b) != 1 else np.reshape(b, ())
    res.reshape(-1)[idx] = _pow_special_cases_lanes(a_sub, b_sub, res.reshape(-1)[idx], nan_bits, uint_dtype)
    return res


def _pow_special_cases_lanes(a, b, res, nan_bits: int, uint_dtype):
    """The §2.4 steps on every lane (a, res 1-D; b the same shape or 0-d)."""
    one = np.ones((), dtype=res.dtype)
    zero = np.zeros((), dtype=res.dtype)
    inf = np.array(np.inf, dtype=res.dtype)
    with np.errstate(all="ignore"):
        odd = _odd_integer_fp32(b.astype(np.float32))
        a_nan_or_b_nan = np.isnan(a) | np.isnan(b)
        a_zero_or_inf = (a == zero) | np.isinf(a)
        # Step 3: r12 = b < 0 ? bits(a) ^ 0x7F800000 : bits(a) swaps 0 and inf keeping the sign.
        swapped = np.copysign(np.where(a == zero, inf, zero), a)
        r12 = np.where(b < zero, swapped, a)
        r12 = np.where(odd, r12, np.abs(r12))
        # Step 4: negative finite base.
        negative = a < zero
        non_integer = b != np.floor(b)
        res = np.where(negative & odd, -res, res)
        nan_mask = negative & non_integer & ~a_zero_or_inf
        res = np.where(a_zero_or_inf, r12, res)
        nan_mask = (nan_mask | a_nan_or_b_nan) & ~((b == zero) | (a == one))
        res = np.where((b == zero) | (a == one), one, res)
        res = np.where((a == -one) & np.isinf(b), one, res)
    res = np.array(res, order="C", copy=True)
    res.view(uint_dtype)[nan_mask] = nan_bits
    return res


def _npu_pow_c(a, b, subnormal_fix: bool = True):
    """npu float32 Power, DOUBLE_FLOAT_TECH algorithm C (npu_math §2).

    Parameters
    ----------
    a, b : array_like of float32 (broadcast together)
        Base and exponent.

    Returns
    -------
    ndarray of float32
        Bit-level emulation of R0-R5, L6-L18, E1-E5 and the §2.4 special
        cases, except R5 (vdiv) and E3 (vexp), which are proxies.  Computed
        in blocks of :data:`POW_BLOCK` elements; a single exponent value is
        kept a scalar (elementwise, so neither changes a bit).
    """
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    shape = np.broadcast_shapes(a.shape, b.shape)
    a = np.ascontiguousarray(np.broadcast_to(a, shape)).reshape(-1)
    b = b.reshape(()) if b.size == 1 else np.ascontiguousarray(np.broadcast_to(b, shape)).reshape(-1)
    out = np.empty(a.size, dtype=np.float32)
    for start in range(0, a.size, POW_BLOCK):
        block = slice(start, start + POW_BLOCK)
        out[block] = _npu_pow_c_block(a[block], b if b.ndim == 0 else b[block], subnormal_fix)
    return out.reshape(shape)


def _npu_pow_c_block(a, b, subnormal_fix: bool):
    """:func:`_npu_pow_c` on one contiguous 1-D block (b: same length or 0-d)."""
    f32 = np.float32
    lhi, llo = _npu_pow_log_block(np.abs(a), subnormal_fix)
    with np.errstate(all="ignore"):
        # E1/E2: b * ln|a| as phi + plo.
        phi = lhi * b
        plo = _fma32(llo, b, _fma32(lhi, b, -phi))
        # PROXY: (E3) hardware vexp in INTRINSIC mode (see _vexp_intrinsic_fp32).
        big_e = _vexp_intrinsic_fp32(phi)
        # E4: exp(phi) * (1 + plo).
        res = _fma32(plo, big_e, big_e)
        # E5: clamps on phi (not on phi + plo).
        np.putmask(res, phi >= POW_EXP_OVERFLOW, f32(np.inf))
        np.putmask(res, phi < POW_EXP_UNDERFLOW, f32(0.0))
    return _pow_special_cases(a, b, res, POW_NAN_BITS["fp32"], np.uint32)


def _vln_fp32(x):
    # PROXY: hardware vln (Ln INTRINSIC / PRECISION_1ULP_FTZ_TRUE), algorithm
    # not public, documented <= 1 ulp without subnormals.  Modelled as RN32 of
    # the float64 log, subnormal inputs read as signed zero (-> -inf).
    x = np.asarray(x, dtype=np.float32)
    flushed = np.where(np.abs(x) < POW_FLT_MIN, np.copysign(np.float32(0.0), x), x)
    with np.errstate(all="ignore"):
        return np.log(flushed.astype(np.float64)).astype(np.float32)


def _npu_pow_intrinsic(a, b):
    """npu float32 Power, default INTRINSIC (npu_math §5, GetPowFIntrinsicCore).

    ``vexp(RN(b * vln(|a|)))`` with the hardware ops in their default FTZ
    modes (proxies), then the §2.4 special cases.  a, b: float32 arrays.
    """
    shape = np.shape(a)
    a = np.asarray(a, dtype=np.float32).reshape(-1)
    b = np.asarray(b, dtype=np.float32).reshape(-1)
    with np.errstate(all="ignore"):
        res = _vexp_intrinsic_fp32(b * _vln_fp32(np.abs(a)))
    return _pow_special_cases(a, b, res, POW_NAN_BITS["fp32"], np.uint32).reshape(shape)


# ---------------------------------------------------------------------------
# The machine
# ---------------------------------------------------------------------------


class Machine:
    """An emulated machine: a compute format, a math-library model, flush switches.

    Parameters
    ----------
    model : MachineModel
        What to emulate.
    count_ops : bool
        If True, every primitive call adds its element count to
        :attr:`counts` (see the module docstring for the names).  Default
        False (no cost).

    Attributes
    ----------
    model : MachineModel
    fmt : Format
        The compute format.
    dtype : numpy.dtype
        The compute dtype.
    counts : collections.Counter
        Op name -> number of elementwise ops executed (when counting).
    """

    def __init__(self, model: MachineModel, count_ops: bool = False):
        if not isinstance(model, MachineModel):
            raise ParameterError(f"model={model!r}; expected a MachineModel (use get_machine for strings)")
        self.model = model
        self.fmt: Format = get_format(model.compute)
        self.dtype = np.dtype(self.fmt.dtype)
        self.counts = collections.Counter()
        self._count_ops = bool(count_ops)
        self._uint = np.dtype(self.fmt.uint_dtype)

    def __repr__(self) -> str:
        return f"Machine({self.model.spec!r}, count_ops={self._count_ops})"

    # -- bookkeeping -----------------------------------------------------------

    def _count(self, name: str, result) -> None:
        if self._count_ops:
            self.counts[name] += int(np.size(result))

    def _in(self, x) -> np.ndarray:
        """Operand in the compute dtype (uncounted asarray)."""
        arr = np.asarray(x)
        if arr.dtype == self.dtype:
            return arr
        return self._round(arr.astype(np.float64))

    def _round(self, v64) -> np.ndarray:
        """RNE of float64 values into the compute format (single rounding, gradual underflow)."""
        with np.errstate(all="ignore"):
            if self.fmt is BF16:
                return round_to_format(v64, BF16)
            # numpy's float64 -> float32/float16 casts round once, RNE, into
            # subnormals (checked against round_to_format in the tests).
            return np.asarray(v64, dtype=np.float64).astype(self.dtype)

    def _f64(self, x) -> np.ndarray:
        return np.asarray(x).astype(np.float64)

    def _is_subnormal(self, x) -> np.ndarray:
        x64 = self._f64(x)
        return (np.abs(x64) < self.fmt.smallest_normal) & (x64 != 0)

    def _flush(self, x) -> np.ndarray:
        """Subnormals -> zero of the same sign (compute dtype in, compute dtype out)."""
        x = np.asarray(x)
        tiny = self._is_subnormal(x)
        if not tiny.any():
            return x
        return np.where(tiny, np.copysign(np.zeros((), self.dtype), x), x).astype(self.dtype)

    def _daz(self, x) -> np.ndarray:
        return self._flush(x) if self.model.daz else x

    def _ftz(self, x) -> np.ndarray:
        return self._flush(x) if self.model.ftz else x

    def _set_nan_bits(self, x, bits: int) -> np.ndarray:
        x = np.asarray(x, dtype=self.dtype)
        nan = np.isnan(x.astype(np.float32))
        if nan.any():
            x = np.array(x, order="C", copy=True)
            x.view(self._uint)[nan] = bits
        return x

    # -- conversions -----------------------------------------------------------

    def asarray(self, x) -> np.ndarray:
        """Convert to the compute dtype: exact from narrower formats, RNE from wider.

        Python scalars and integers go through float64 (integers exact below
        2**53).  Not counted.
        """
        return self._in(x)

    def from_int32(self, t) -> np.ndarray:
        """Convert int32 values to the compute format with RNE (a hardware Cast).

        Raises ParameterError on non-integer input.  Counted as ``cast``.
        """
        arr = np.asarray(t)
        if arr.dtype.kind not in "iub":
            raise ParameterError(f"t.dtype={arr.dtype}; expected an integer array (int32)")
        out = self._round(arr.astype(np.int32).astype(np.float64))
        self._count("cast", out)
        return out

    def cast(self, x, fmt, rounding=RNE) -> np.ndarray:
        """Convert to ``fmt``'s dtype with one rounding in the given mode.

        Parameters
        ----------
        x : array_like
            Values (converted to float64 exactly when of a float format).
        fmt : str or Format
            Target format (``fp16``, ``bf16``, ``fp32``, ``fp64``).
        rounding : str
            :data:`~precision.formats.RNE` (default, CAST_RINT),
            :data:`~precision.formats.RNA` (CAST_ROUND, half away from zero),
            :data:`~precision.formats.RTZ` (CAST_TRUNC), RUP, RDN.

        Notes
        -----
        Overflow gives ±inf in the nearest modes (no saturation); gradual
        underflow; ±0 and NaN pass through.  Counted as ``cast``.
        """
        target = get_format(fmt)
        out = np.asarray(round_to_format(np.asarray(x).astype(np.float64), target, rounding), dtype=target.dtype)
        self._count("cast", out)
        return out

    # -- arithmetic ------------------------------------------------------------

    def _binary(self, name: str, ufunc, a, b) -> np.ndarray:
        a, b = self._daz(self._in(a)), self._daz(self._in(b))
        with np.errstate(all="ignore"):
            if self.model.name == "numpy" or self.fmt is FP32:
                # numpy float32 + - * are IEEE correctly rounded with gradual
                # underflow; the numpy model uses the dtype's own ufunc.
                out = ufunc(a, b)
            else:
                # fp16: exact in float64, then one rounding.  bf16: float64 is
                # inexact only for far-apart sums, where RN64 then RN-bf16 is
                # innocuous (53 >= 2*8 + 2, Figueroa 1995); this equals the
                # npu's "compute in float32, round to bf16".
                out = self._round(ufunc(self._f64(a), self._f64(b)))
        out = self._ftz(np.asarray(out, dtype=self.dtype))
        self._count(name, out)
        return out

    def add(self, a, b) -> np.ndarray:
        """a + b, one RNE rounding in the compute format (see module Notes for ftz/daz)."""
        return self._binary("add", np.add, a, b)

    def sub(self, a, b) -> np.ndarray:
        """a - b, one RNE rounding (npu: Add(a, Neg(b)), the same value)."""
        return self._binary("sub", np.subtract, a, b)

    def mul(self, a, b) -> np.ndarray:
        """a * b, one RNE rounding; subnormal results kept unless ftz."""
        return self._binary("mul", np.multiply, a, b)

    def fma(self, a, b, c) -> np.ndarray:
        """a*b + c with ONE RNE rounding in the compute format (all models).

        Emulated exactly: fp32 by :func:`_fma32` (float64 sum, one cast, the
        rare double-rounding lanes redone by round-to-odd); fp16/bf16 by
        float64 TwoSum plus round-to-odd, then one cast (see
        :func:`_fma_round_to_odd` for the proof sketch).  The npu's
        Axpy/MulAddDst/MulDstAdd are assumed to keep subnormals (npu_math
        §7.2); ``ftz``/``daz`` apply as for ``mul``.
        """
        a, b, c = (self._daz(self._in(v)) for v in (a, b, c))
        if self.fmt is FP32:
            out = np.asarray(_fma32(*np.broadcast_arrays(a, b, c)))
        else:
            a, b, c = np.broadcast_arrays(self._f64(a), self._f64(b), self._f64(c))
            out = self._round(_fma_round_to_odd(a, b, c))
        out = self._ftz(out)
        self._count("fma", out)
        return out

    def neg(self, a) -> np.ndarray:
        """-a: flips the sign bit (NaN and zeros included); no flushing."""
        out = np.asarray(np.negative(self._in(a)), dtype=self.dtype)
        self._count("neg", out)
        return out

    def abs(self, a) -> np.ndarray:
        """|a|: clears the sign bit; no flushing."""
        out = np.asarray(np.abs(self._in(a)), dtype=self.dtype)
        self._count("abs", out)
        return out

    def maximum(self, a, b) -> np.ndarray:
        """Elementwise max (numpy semantics: NaN propagates); no flushing."""
        out = np.asarray(np.maximum(self._in(a), self._in(b)), dtype=self.dtype)
        self._count("max", out)
        return out

    def minimum(self, a, b) -> np.ndarray:
        """Elementwise min (numpy semantics: NaN propagates); no flushing."""
        out = np.asarray(np.minimum(self._in(a), self._in(b)), dtype=self.dtype)
        self._count("min", out)
        return out

    def _compare(self, ufunc, a, b) -> np.ndarray:
        out = np.asarray(ufunc(self._in(a), self._in(b)))
        self._count("cmp", out)
        return out

    def lt(self, a, b) -> np.ndarray:
        """a < b as bool (exact: subnormals compared as they are; NaN -> False)."""
        return self._compare(np.less, a, b)

    def le(self, a, b) -> np.ndarray:
        """a <= b as bool (exact)."""
        return self._compare(np.less_equal, a, b)

    def gt(self, a, b) -> np.ndarray:
        """a > b as bool (exact)."""
        return self._compare(np.greater, a, b)

    def ge(self, a, b) -> np.ndarray:
        """a >= b as bool (exact)."""
        return self._compare(np.greater_equal, a, b)

    def eq(self, a, b) -> np.ndarray:
        """a == b as bool (exact; -0 == +0; NaN != NaN)."""
        return self._compare(np.equal, a, b)

    def select(self, cond, a, b) -> np.ndarray:
        """cond ? a : b elementwise (np.where); no arithmetic, bits kept."""
        out = np.asarray(np.where(np.asarray(cond, dtype=bool), self._in(a), self._in(b)), dtype=self.dtype)
        self._count("select", out)
        return out

    # -- division --------------------------------------------------------------

    def div(self, a, b, mode="0ulp") -> np.ndarray:
        """a / b.

        Parameters
        ----------
        a, b : array_like
            Dividend and divisor.
        mode : str
            ``"0ulp"`` (default): correctly rounded, gradual underflow (npu:
            Div PRECISION_0ULP_FTZ_FALSE, emulated as IEEE division; the
            hardware's residual risk of double rounding on subnormal results,
            npu_math §6, is not modelled).  ``"default"``: on npu the vdiv
            intrinsic (<= 1 ulp, DAZ+FTZ; proxy: RN of the float64 quotient,
            subnormal inputs read as signed zero, subnormal results flushed to
            signed zero, every NaN returned with bits 0x7FFFFFFF), so
            1/(-5e-39) = -inf and subnormal/subnormal = NaN.  On ieee and
            numpy ``"default"`` is the same as ``"0ulp"``.

        Notes
        -----
        Counted as ``div0ulp`` or ``div``.  fp16/bf16 quotients are rounded
        once from the float64 quotient, which is correctly rounded because
        53 >= 2q + 2 (Figueroa 1995).  The model's ``ftz``/``daz`` switches
        do not apply (only the mode's own flushing does): a ``"0ulp"``
        quotient keeps subnormal operands and results on any machine.
        """
        _check_choice("mode", mode, DIV_MODES)
        a, b = np.broadcast_arrays(self._in(a), self._in(b))
        with np.errstate(all="ignore"):
            if mode == "default" and self.model.name == "npu":
                out = self._vdiv(a, b)
            elif self.model.name == "numpy" or self.fmt is FP32:
                out = np.asarray(np.divide(a, b), dtype=self.dtype)
            else:
                out = self._round(self._f64(a) / self._f64(b))
        self._count("div0ulp" if mode == "0ulp" else "div", out)
        return out

    def _vdiv(self, a, b) -> np.ndarray:
        # PROXY: hardware vdiv (Div INTRINSIC / PRECISION_1ULP_FTZ_TRUE),
        # algorithm not public, documented <= 1 ulp with DAZ/FTZ.  Modelled as
        # the compute-format RN of the float64 quotient (correctly rounded),
        # inputs and results flushed to signed zero, NaNs as 0x7FFFFFFF
        # (npu_math §6 doc examples).  bf16 is computed as fp32 then rounded.
        a64 = self._f64(self._flush(a))
        b64 = self._f64(self._flush(b))
        q = self._round(self._round_native(a64 / b64))
        q = self._flush(q)
        return self._set_nan_bits(q, VDIV_NAN_BITS[self.fmt.name])

    def _native_fmt(self) -> Format:
        """Format the npu math library computes in: bf16 work is done in fp32."""
        return FP32 if self.fmt is BF16 else self.fmt

    def _round_native(self, v64) -> np.ndarray:
        """RNE of float64 values into the npu native format, back as float64."""
        with np.errstate(all="ignore"):
            return v64.astype(self._native_fmt().dtype).astype(np.float64)

    def _flush_native(self, v64, positive_zero: bool = False) -> np.ndarray:
        """Nonzero subnormals of the native format -> +0 or signed zero (float64 in, out).

        Returns ``v64`` itself when nothing flushes (callers do not write to it).
        """
        fmt = self._native_fmt()
        tiny = np.abs(v64) < fmt.smallest_normal
        if not tiny.any():
            return v64
        tiny &= v64 != 0  # zeros keep their sign
        out = np.array(v64, dtype=np.float64, copy=True)
        out[tiny] = 0.0 if positive_zero else np.copysign(0.0, out[tiny])
        return out

    # -- exp ---------------------------------------------------------------------

    def exp(self, x, ftz=False) -> np.ndarray:
        """e**x in the compute format.

        Parameters
        ----------
        x : array_like
        ftz : bool
            npu: False = Exp PRECISION_1ULP_FTZ_FALSE (a 0 or subnormal
            vexp(x) is replaced by RN(vexp(x/2)**2), so tiny results are
            subnormal, not 0); True = INTRINSIC (vexp; subnormal results
            +0).  ieee and numpy: True flushes a subnormal result to +0 (and
            reads subnormal inputs as 0, which cannot change exp).

        Notes
        -----
        ieee: correctly rounded (RNE, gradual underflow, overflow to +inf).
        numpy: ``np.exp`` in the compute dtype.  exp(-inf) = +0, exp(NaN) =
        NaN.  Only the ``ftz`` argument flushes; the model's ``ftz``/``daz``
        switches do not apply.  Counted as ``exp``.
        """
        x = self._in(x)
        name = self.model.name
        with np.errstate(all="ignore"):
            if name == "ieee":
                out = self._ieee_exp(x)
            elif name == "numpy":
                out = np.asarray(np.exp(x), dtype=self.dtype)
            elif ftz:
                out = self._round(self._vexp(self._f64(x)))
            else:
                out = self._round(self._npu_exp_precise(self._f64(x)))
            if ftz and name != "npu":
                out = np.where(self._is_subnormal(out), np.zeros((), self.dtype), out).astype(self.dtype)
        self._count("exp", out)
        return out

    def _vexp(self, x64) -> np.ndarray:
        # PROXY: hardware vexp (Exp INTRINSIC / PRECISION_1ULP_FTZ_TRUE),
        # algorithm not public, documented <= 1 ulp without subnormal
        # support.  Modelled as RN of the float64 exp in the native format
        # (fp32, or fp16 for half), subnormal inputs read as 0 and subnormal
        # results flushed to +0.  Returns float64 holding native values.
        x64 = self._flush_native(x64)
        return self._flush_native(self._round_native(np.exp(x64)), positive_zero=True)

    def _npu_exp_precise(self, x64) -> np.ndarray:
        """Exp PRECISION_1ULP_FTZ_FALSE (ExpImpl + ExpPrecision, npu_math §6)."""
        native = self._native_fmt()
        e = self._vexp(x64)
        max_subnormal = float(
            np.array(MAX_SUBNORMAL_BITS[native.name], dtype=native.uint_dtype).view(native.dtype)
        )
        tiny = e <= max_subnormal
        if tiny.any():  # the x/2 path on those lanes only (elementwise: same bits)
            # x/2 by vdiv is exact here; the square is a plain Mul (gradual underflow).
            half = self._vexp(x64[tiny] * 0.5)
            e = np.array(e, copy=True)
            e[tiny] = self._round_native(half * half)
        return e

    def _ieee_exp(self, x) -> np.ndarray:
        x64 = self._f64(x)

        def exact(i):
            xi = float(x64.flat[i])
            return lambda p: _mpf_exp(xi, p)

        return self._ieee_round(np.exp(x64), exact, None, x64.shape)

    # -- ln ----------------------------------------------------------------------

    def ln(self, x, ftz=False) -> np.ndarray:
        """Natural log in the compute format.

        Parameters
        ----------
        x : array_like
        ftz : bool
            npu: False = Ln PRECISION_1ULP_FTZ_FALSE: inputs strictly below
            the largest-subnormal bit pattern (0x007FFFFF; half 0x03FF) go
            through RN(vln(x*2**23) - 23 ln 2) (half: 2**10), so subnormal
            inputs give accurate finite logs, while 0x007FFFFF itself takes
            the hardware path and gives -inf (the strict-< quirk); True =
            vln with DAZ (subnormal input -> -inf).  ieee and numpy: True
            reads subnormal inputs as +-0 (-> -inf); False is exact input.

        Notes
        -----
        ieee: correctly rounded.  numpy: ``np.log``.  ln(±0) = -inf,
        ln(x<0) = NaN, ln(+inf) = +inf.  Only the ``ftz`` argument flushes;
        the model's ``ftz``/``daz`` switches do not apply.  Counted as ``ln``.
        """
        x = self._in(x)
        name = self.model.name
        if ftz and name != "npu":
            x = self._flush(x)
        with np.errstate(all="ignore"):
            if name == "ieee":
                out = self._ieee_ln(x)
            elif name == "numpy":
                out = np.asarray(np.log(x), dtype=self.dtype)
            elif ftz:
                out = self._round(self._vln(self._f64(x)))
            else:
                out = self._round(self._npu_ln_precise(self._f64(x)))
        self._count("ln", out)
        return out

    def _vln(self, x64) -> np.ndarray:
        # PROXY: hardware vln (Ln INTRINSIC / PRECISION_1ULP_FTZ_TRUE),
        # algorithm not public, documented <= 1 ulp without subnormal
        # support.  Modelled as RN of the float64 log in the native format,
        # subnormal inputs read as signed zero (-> -inf).  Returns float64.
        return self._round_native(np.log(self._flush_native(x64)))

    def _npu_ln_precise(self, x64) -> np.ndarray:
        """Ln PRECISION_1ULP_FTZ_FALSE (LnCompute, npu_math §6)."""
        native = self._native_fmt()
        max_subnormal = float(
            np.array(MAX_SUBNORMAL_BITS[native.name], dtype=native.uint_dtype).view(native.dtype)
        )
        shift = LN_SUBNORMAL_SCALE_LOG2[native.name]
        if native is FP32:
            offset = np.float64(LN_SUBNORMAL_OFFSET_FP32)
        else:  # half: -ln(2**10) rounded to half (the constant's exact spelling is not public)
            offset = self._round_native(np.float64(-shift * math.log(2.0)))
        low = x64 < max_subnormal  # strict: 0x007FFFFF itself stays on vln
        out = self._vln(x64)
        if low.any():  # the scaled path on those lanes only (elementwise: same bits)
            scaled = self._vln(self._round_native(x64[low] * 2.0**shift)) + offset
            out = np.array(out, copy=True)
            out[low] = self._round_native(scaled)
        return out

    def _ieee_ln(self, x) -> np.ndarray:
        x64 = self._f64(x)

        def exact(i):
            xi = float(x64.flat[i])
            return lambda p: _mpf_log(xi, p)

        return self._ieee_round(np.log(x64), exact, None, x64.shape)

    # -- pow ---------------------------------------------------------------------

    def pow(self, base, k, algo="double_float") -> np.ndarray:
        """base ** k in the compute format.

        Parameters
        ----------
        base, k : array_like
            Base and exponent (broadcast).
        algo : str
            npu: ``"double_float"`` = Power DOUBLE_FLOAT_TECH algorithm C
            (npu_math §2; fp16/bf16 operands are cast exactly to fp32 and the
            result is rounded back with RNE; ``power_subnormal_fix`` selects
            master or release behaviour for subnormal bases);
            ``"intrinsic"`` = vexp(RN(k * vln(|base|))) in fp32 with FTZ and
            the same §2.4 special cases, fp16 operands cast to fp32 and back
            (bf16 rejected, as the library's static_assert does).  ieee: correctly rounded for both.
            numpy: ``np.power`` in the compute dtype for both.

        Notes
        -----
        ieee special values follow C99 (pow(x, ±0) = 1 even for NaN x,
        pow(1, y) = 1, pow(-1, ±inf) = 1, pow(±0, y<0) = ±inf or +inf,
        pow(x<0, non-integer) = NaN).  npu special values follow §2.4 (NaN
        results have bits 0x7FC00000); results below 2**-126 are +0 when
        vexp's input is below -87.34, and phi >= 88.7228 gives +inf.  The
        model's ``ftz``/``daz`` switches do not apply (npu subnormal bases and
        results follow the algorithm).  Counted as ``pow``.

        Examples
        --------
        A point where the npu's two roundings (vexp, then the fma) lose 1.2 ulp:

        >>> a, b = np.float32(float.fromhex("0x1.107142p+4")), np.float32(float.fromhex("0x1.77915ap+2"))
        >>> float(get_machine("npu").pow(a, b)).hex()
        '0x1.ffffe20000000p+23'
        >>> float(get_machine("ieee").pow(a, b)).hex()
        '0x1.ffffe40000000p+23'
        """
        _check_choice("algo", algo, POW_ALGOS)
        name = self.model.name
        if name == "npu" and algo == "intrinsic" and self.fmt is BF16:
            raise ParameterError(
                "algo='intrinsic' with compute=bf16; the npu INTRINSIC Power rejects bf16 "
                "(static_assert): use algo='double_float' or compute fp16/fp32"
            )
        base, k = self._in(base), self._in(k)
        with np.errstate(all="ignore"):
            if name == "npu" and algo == "double_float":
                # Both npu algorithms load half/bf16 operands as exact fp32,
                # compute in fp32 and store with CAST_RINT (power_3510_impl.h).
                # _npu_pow_c broadcasts itself (keeping a single exponent scalar).
                a32, b32 = np.asarray(base, dtype=np.float32), np.asarray(k, dtype=np.float32)
                out = _npu_pow_c(a32, b32, self.model.power_subnormal_fix)
            else:
                base, k = np.broadcast_arrays(base, k)
                if name == "ieee":
                    out = self._ieee_pow(base, k)
                elif name == "numpy":
                    out = np.asarray(np.power(base, k), dtype=self.dtype)
                else:
                    out = _npu_pow_intrinsic(base.astype(np.float32), k.astype(np.float32))
            if name == "npu" and self.fmt is not FP32:
                out = self._set_nan_bits(self._round(out.astype(np.float64)), POW_NAN_BITS[self.fmt.name])
        out = np.asarray(out, dtype=self.dtype)
        self._count("pow", out)
        return out

    def _ieee_pow(self, base, k) -> np.ndarray:
        a64, b64 = self._f64(base), self._f64(k)
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
        return self._ieee_round(v, exact, midpoint_test, a64.shape, settleable, signed=True)

    def _ieee_round(self, v64, exact, midpoint_test, shape, settleable=None, signed=False) -> np.ndarray:
        """Round float64 results once; settle the few near a rounding boundary.

        ``v64`` approximates the exact values with relative error far below
        :data:`IEEE_F64_MARGIN`; if the ends of v64*(1 -+ margin) round to
        different compute-format values, the point is settled with
        ``exact(i)(prec)`` (an mpmath value of the magnitude when ``signed``,
        whose sign is then taken from v64).
        """
        v64 = np.asarray(v64, dtype=np.float64).reshape(shape)
        out = np.array(self._round(v64), order="C", copy=True)
        lo = self._round(v64 * (1.0 - IEEE_F64_MARGIN)).view(self._uint)
        hi = self._round(v64 * (1.0 + IEEE_F64_MARGIN)).view(self._uint)
        doubt = (lo != hi) & np.isfinite(v64)
        if settleable is not None:
            doubt &= settleable
        for i in np.flatnonzero(doubt):
            test = midpoint_test(i) if midpoint_test is not None else None
            value = _settle(exact(i), self.fmt, test)
            if signed:
                value = math.copysign(value, float(v64.flat[i]))
            out.flat[i] = value
        return out
