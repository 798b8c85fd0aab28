"""The machine context: a model, a compute format, flush switches, op counting.

:class:`Machine` is a thin context in the style of mpmath's ``MPContext``:
it converts operands to the compute dtype, applies the ``ftz``/``daz``
switches of the Mul/Add class, counts ops, and does the elementwise
arithmetic every model shares (``+ - * fma``, compares, select, casts).
Division, ``exp``, ``ln`` and ``pow`` go to the model's math library
(:mod:`~precision.machine.ieee`, :mod:`~precision.machine.numpy_lib`,
:mod:`~precision.machine.npu`), chosen once when the machine is built.  See
:mod:`precision.machine` for the models and the conventions.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass

import numpy as np

from precision.errors import ParameterError
from precision.exact.formats import FP32, RNE, Format, get_format, round_to_format
from precision.machine.compiled import COMPILED_MIN_POINTS
from precision.machine.fma import fma32, fma_round_to_odd
from precision.machine.ieee import IeeeLibrary
from precision.machine.library import MathLibrary
from precision.machine.npu import NpuLibrary
from precision.machine.numpy_lib import NumpyLibrary
from precision.machine.rounding import as_f64, flush, round_into

__all__ = [
    "MODEL_NAMES",
    "COMPUTE_FORMATS",
    "DIV_MODES",
    "POW_ALGOS",
    "SPEC_SUFFIXES",
    "MachineModel",
    "Machine",
    "get_machine",
]

# ---------------------------------------------------------------------------
# Closed sets of names
# ---------------------------------------------------------------------------

#: The math library of each model, looked up once per machine.
LIBRARIES: dict[str, type[MathLibrary]] = {"ieee": IeeeLibrary, "numpy": NumpyLibrary, "npu": NpuLibrary}
MODEL_NAMES = tuple(LIBRARIES)
COMPUTE_FORMATS = ("fp32", "fp16", "bf16")
DIV_MODES = ("0ulp", "default")
POW_ALGOS = ("double_float", "intrinsic")
#: Suffixes accepted by :func:`get_machine` after the model name.
SPEC_SUFFIXES = ("ftz", "daz", "release", "fp32", "fp16", "bf16")


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
        :attr:`counts` (see :mod:`precision.machine` for the names).  Default
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
        self._lib = LIBRARIES[model.name](model, self.fmt)

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
        return round_into(arr.astype(np.float64), self.fmt)

    def _daz(self, x) -> np.ndarray:
        return flush(x, self.fmt) if self.model.daz else x

    def _ftz(self, x) -> np.ndarray:
        return flush(x, self.fmt) if self.model.ftz else x

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
        out = round_into(arr.astype(np.int32).astype(np.float64), self.fmt)
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
            :data:`~precision.exact.formats.RNE` (default, CAST_RINT),
            :data:`~precision.exact.formats.RNA` (CAST_ROUND, half away from zero),
            :data:`~precision.exact.formats.RTZ` (CAST_TRUNC), RUP, RDN.

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
            if self._lib.ufunc_arith:
                # numpy float32 + - * are IEEE correctly rounded with gradual
                # underflow; the numpy model uses the dtype's own ufunc.
                out = ufunc(a, b)
            else:
                # fp16: exact in float64, then one rounding.  bf16: float64 is
                # inexact only for far-apart sums, where RN64 then RN-bf16 is
                # innocuous (53 >= 2*8 + 2, Figueroa 1995); this equals the
                # npu's "compute in float32, round to bf16".
                out = round_into(ufunc(as_f64(a), as_f64(b)), self.fmt)
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

        Emulated exactly: fp32 by :func:`~precision.machine.fma.fma32` (float64 sum, one cast, the
        rare double-rounding lanes redone by round-to-odd); fp16/bf16 by
        float64 TwoSum plus round-to-odd, then one cast (see
        :func:`~precision.machine.fma.fma_round_to_odd` for the proof sketch).  The npu's
        Axpy/MulAddDst/MulDstAdd are assumed to keep subnormals (npu_math
        §7.2); ``ftz``/``daz`` apply as for ``mul``.
        """
        a, b, c = (self._daz(self._in(v)) for v in (a, b, c))
        if self.fmt is FP32:
            out = np.asarray(fma32(a, b, c))
        else:
            a, b, c = np.broadcast_arrays(as_f64(a), as_f64(b), as_f64(c))
            out = round_into(fma_round_to_odd(a, b, c), self.fmt)
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
        cond, a, b = np.asarray(cond, dtype=bool), self._in(a), self._in(b)
        shape = np.broadcast_shapes(cond.shape, a.shape, b.shape)
        if math.prod(shape) >= COMPILED_MIN_POINTS:  # the same bits, without numpy's branch per lane
            from precision.machine.arith_fused import select_pass  # (numba, imported when first needed)
            out = select_pass(cond, a, b, shape)
        else:
            out = np.asarray(np.where(cond, a, b), dtype=self.dtype)
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
            out = self._lib.div(a, b, mode)
        self._count("div0ulp" if mode == "0ulp" else "div", out)
        return out

    # -- the math library ------------------------------------------------------

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
        with np.errstate(all="ignore"):
            out = self._lib.exp(x, ftz)
        self._count("exp", out)
        return out

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
        with np.errstate(all="ignore"):
            out = self._lib.ln(x, ftz)
        self._count("ln", out)
        return out

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
        base, k = self._in(base), self._in(k)
        with np.errstate(all="ignore"):
            out = self._lib.pow(base, k, algo)
        out = np.asarray(out, dtype=self.dtype)
        self._count("pow", out)
        return out
