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

Layout
------
:mod:`~precision.machine.context` holds the thin :class:`Machine` context
(operand conversion, the flush switches, op counting, the ops every model
shares) and :func:`get_machine`; one math-library module per model
(:mod:`~precision.machine.ieee`, :mod:`~precision.machine.numpy_lib`,
:mod:`~precision.machine.npu`, on the base
:class:`~precision.machine.library.MathLibrary`) supplies ``div``, ``exp``,
``ln`` and ``pow``, chosen once when a machine is built.
:mod:`~precision.machine.fma` is the exact fused multiply-add and
:mod:`~precision.machine.rounding` the compute-format rounding helpers.
Arrays of :data:`~precision.machine.compiled.COMPILED_MIN_POINTS` elements or
more take compiled passes equal to the numpy definitions bit for bit:
:mod:`~precision.machine.npu_fused` (the npu Power),
:mod:`~precision.machine.ieee_fused` (the ieee fp32 exp, ln and pow) and
:mod:`~precision.machine.arith_fused` (the fp32 fma, select).
Operator-free; may import only :mod:`precision.exact` and :mod:`precision.errors`.
"""

from precision.machine.context import (COMPUTE_FORMATS, DIV_MODES, MODEL_NAMES, POW_ALGOS, Machine, MachineModel,
                                       get_machine)
from precision.machine.ieee import IEEE_F64_MARGIN

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
