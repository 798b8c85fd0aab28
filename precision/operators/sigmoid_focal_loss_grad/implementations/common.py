"""The operator contract and the host-side scalar preparation, shared by every variant.

Every implementation of SigmoidFocalLossGrad in this package has the signature

    f(machine, pred, target, dout, weight, alpha, gamma, reduction, **params) -> numpy.ndarray

and begins with :func:`validate_inputs` (spec section 1).  This module also
holds what the host side of the production kernel computes before launch
(:func:`prepare_host_scalars`, spec section 3), the guard identifiers
``G1``..``G8`` (their long names and the variant table live in
:mod:`precision.operators.sigmoid_focal_loss_grad.guards`, which imports the implementations), and the small
helpers that turn a machine spec into a :class:`precision.machine.Machine`.

Conventions
-----------
* Arrays have shape ``[N, C]``; pred, dout and weight are float16 or float32,
  target is int32; the output has pred's dtype and shape.
* ``alpha`` and ``gamma`` are operator attributes of type float32: a Python
  float is rounded to float32 (RNE) on the way in, exactly as the framework
  does when it builds the attribute, so ``alpha=0.1`` means
  ``float32(0.1) = 0x1.99999ap-4``.
* Host scalars are computed in IEEE float32 with round-to-nearest-even on the
  host CPU (numpy float32 scalar arithmetic), never on the emulated machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from precision.errors import DtypeError, ParameterError
from precision.recipes.operands import (FLOAT_INPUT_DTYPES, INT64_MAX, check_arrays, float32_attribute, load_operands,
                                        resolve_machine, store_output, validate_element_count, with_compute_format)

__all__ = [
    "ATTRIBUTES",
    "ATTRIBUTE_HELP",
    "TERMS_ATTRIBUTE",
    "GUARD_IDS",
    "ALL_GUARDS",
    "NO_GUARDS",
    "MIN_NORMAL_FP32",
    "MAX_FLOAT_FP32",
    "REDUCTIONS",
    "FLOAT_INPUT_DTYPES",
    "OperatorInputs",
    "HostScalars",
    "validate_inputs",
    "validate_element_count",
    "validate_mean_count",
    "require_fp16_pred",
    "float32_attribute",
    "prepare_host_scalars",
    "parse_guard_set",
    "resolve_machine",
    "with_compute_format",
    "store_output",
    "load_operands",
]

# ---------------------------------------------------------------------------
# Named constants of the operator
# ---------------------------------------------------------------------------

#: The operator's float attributes, in the order its functions take them (``derive_gradient``'s positional
#: arguments after ``target``; ``evaluate``'s keywords), each with its default values: the study file's
#: ``[points]`` axes of these names (float32 values; ``alpha = [0.25]``, ``gamma = [2.0]`` when absent), the key
#: columns of every table between ``profile`` and ``weight``.
ATTRIBUTES = {"alpha": (0.25,), "gamma": (2.0,)}
#: What each attribute is, for the command line's help (``--alpha``, ``--gamma``).
ATTRIBUTE_HELP = {"alpha": "balance attribute", "gamma": "focusing attribute; negatives allowed"}
#: The attribute the exact values' reusable terms depend on (the focal terms A(x, gamma), cached per gamma), as do
#: the bracket's cancellation and the ``windows`` pred set: a sweep's tasks are grouped by its values.
TERMS_ATTRIBUTE = "gamma"

#: The guard identifiers of spec section 4, in order.
GUARD_IDS = ("G1", "G2", "G3", "G4", "G5", "G6", "G7", "G8")
#: Every guard enabled: the production kernel.
ALL_GUARDS = frozenset(GUARD_IDS)
#: No guard enabled: the naive recipe.
NO_GUARDS = frozenset()

#: float32 smallest normal 2**-126 (``kLogEps`` / ``CONST_FP_MIN`` in the sources).
MIN_NORMAL_FP32 = np.float32(1.17549435e-38)
#: float32 largest finite (2 - 2**-23) * 2**127 (``kMaxFloat``).
MAX_FLOAT_FP32 = np.float32(3.402823466e38)

#: The accepted values of the ``reduction`` attribute.
REDUCTIONS = ("mean", "sum", "none")
#: The floating dtypes pred, dout and weight may have.


# ---------------------------------------------------------------------------
# Contract (spec section 1)
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class OperatorInputs:
    """Validated operator inputs, as the device receives them.

    Attributes
    ----------
    pred : numpy.ndarray, float16 or float32, shape [N, C]
    target : numpy.ndarray, int32, shape [N, C]
    dout : numpy.ndarray, float16 or float32, shape [N, C]
    weight : numpy.ndarray or None, float16 or float32, shape [N, C]
    alpha, gamma : numpy.float32
        The attribute values (finite float32).
    reduction : str
        One of :data:`REDUCTIONS`.
    """

    pred: np.ndarray
    target: np.ndarray
    dout: np.ndarray
    weight: np.ndarray | None
    alpha: np.float32
    gamma: np.float32
    reduction: str

    @property
    def shape(self) -> tuple[int, int]:
        """``(N, C)``."""
        return self.pred.shape

    @property
    def count(self) -> int:
        """``N * C`` as a Python int."""
        return int(self.pred.shape[0]) * int(self.pred.shape[1])


def validate_mean_count(count, inputs: "OperatorInputs") -> int:
    """The element count of the mean reduction: ``N*C`` of the inputs unless given.

    Parameters
    ----------
    count : int or None
        Override of ``N*C`` for ``coef = 1/count`` (a sweep that evaluates a
        slice of a larger tensor passes the full tensor's count).  None means
        ``inputs.count``.  Ignored for ``sum`` and ``none``.

    Raises
    ------
    ParameterError
        A count that is not an int in [1, 2**63 - 1].
    """
    if count is None:
        return inputs.count
    if isinstance(count, (bool, np.bool_)) or not isinstance(count, (int, np.integer)) \
            or not 1 <= int(count) <= INT64_MAX:
        raise ParameterError(f"count={count!r}; expected an int in [1, 2**63-1] (the mean's N*C) or None")
    return int(count)


def require_fp16_pred(variant: str, inputs: "OperatorInputs") -> None:
    """Reject a non-fp16 pred for a variant that computes entirely in fp16.

    Raises
    ------
    DtypeError
        pred is not float16.
    """
    if inputs.pred.dtype != np.float16:
        raise DtypeError(
            f"pred dtype={inputs.pred.dtype} with variant={variant}; expected float16 "
            f"(it computes in fp16; use {variant.replace('-fp16', '')} for float32 pred)"
        )


def validate_inputs(pred, target, dout, weight, alpha, gamma, reduction) -> OperatorInputs:
    """Check the operator contract of spec section 1 and return the validated inputs.

    Parameters
    ----------
    pred : array_like, float16 or float32, shape [N, C]
        Logits ``x``.
    target : array_like, int32, shape [N, C]
        Raw selector ``t`` (not checked to lie in {0, 1}).
    dout : array_like, float16 or float32, shape [N, C]
        Upstream gradient.
    weight : array_like or None, float16 or float32, shape [N, C]
        Element weight; None means absent.
    alpha, gamma : float
        Attributes, rounded to float32 (RNE); must be finite.
    reduction : str
        ``"mean"``, ``"sum"`` or ``"none"``.

    Returns
    -------
    OperatorInputs

    Raises
    ------
    ShapeError
        Rank other than 2, a dim <= 0, a shape different from pred's, or
        ``N*C`` overflowing int64.
    DtypeError
        target not int32; pred, dout or weight not float16/float32.
    ParameterError
        alpha or gamma not finite (in float32); reduction not one of the
        three strings.

    Notes
    -----
    The checks run in a fixed order (dtypes, then ranks, then shapes, then
    attributes), so an input with several faults reports the first.  Arrays
    are not copied when they already have an accepted dtype.
    """
    arrays = check_arrays({"pred": pred, "target": target, "dout": dout, "weight": weight})
    alpha32 = float32_attribute("alpha", alpha)
    gamma32 = float32_attribute("gamma", gamma)
    if not isinstance(reduction, str) or reduction not in REDUCTIONS:
        raise ParameterError(f"reduction={reduction!r}; expected one of {', '.join(repr(r) for r in REDUCTIONS)}")
    return OperatorInputs(
        pred=arrays["pred"],
        target=arrays["target"],
        dout=arrays["dout"],
        weight=arrays.get("weight"),
        alpha=alpha32,
        gamma=gamma32,
        reduction=reduction,
    )


# ---------------------------------------------------------------------------
# Host-side scalars (spec section 3)
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class HostScalars:
    """The float32 scalars the host computes before launching the kernel.

    Attributes
    ----------
    g : numpy.float32
        ``gamma``.
    a : numpy.float32
        ``alpha``.
    g1 : numpy.float32
        ``RN32(g + 1)``.
    ga : numpy.float32
        ``RN32(g * a)``.
    gam1 : numpy.float32
        ``RN32(g * RN32(a - 1))`` (two roundings).
    oma : numpy.float32
        ``RN32(1 - a)``.
    coef : numpy.float32
        ``RN32(1 / RN32(N*C))`` for mean (the count converted to float32
        first, then a correctly rounded division), else ``1.0``.
    """

    g: np.float32
    a: np.float32
    g1: np.float32
    ga: np.float32
    gam1: np.float32
    oma: np.float32
    coef: np.float32


def _int_to_float32(n: int) -> np.float32:
    """Round a non-negative Python int to float32 with one RNE rounding.

    (``np.float32(n)`` may round through float64 first, which double-rounds
    for some n above 2**53.)
    """
    n = int(n)
    excess = n.bit_length() - 24
    if excess <= 0:
        return np.float32(n)
    top, rest = n >> excess, n & ((1 << excess) - 1)
    half = 1 << (excess - 1)
    if rest > half or (rest == half and top & 1):
        top += 1
    with np.errstate(over="ignore"):
        return np.float32(math.ldexp(float(top), excess))


def prepare_host_scalars(alpha, gamma, reduction: str, count: int) -> HostScalars:
    """Compute the host scalars of spec section 3 in IEEE float32 (RNE).

    Parameters
    ----------
    alpha, gamma : float
        Attribute values (rounded to float32 RNE first).
    reduction : str
        ``"mean"`` gives ``coef = 1.0f / float32(count)``; otherwise 1.0.
    count : int
        ``N * C``.

    Examples
    --------
    >>> s = prepare_host_scalars(0.25, 2.0, "mean", 6)
    >>> float(s.coef).hex(), float(s.gam1)
    ('0x1.5555560000000p-3', -1.5)
    """
    one = np.float32(1.0)
    g = float32_attribute("gamma", gamma)
    a = float32_attribute("alpha", alpha)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        if reduction == "mean":
            coef = one / _int_to_float32(count)
        else:
            coef = one
        return HostScalars(
            g=g,
            a=a,
            g1=np.float32(g + one),
            ga=np.float32(g * a),
            gam1=np.float32(g * np.float32(a - one)),
            oma=np.float32(one - a),
            coef=np.float32(coef),
        )


# ---------------------------------------------------------------------------
# Guard sets and machines
# ---------------------------------------------------------------------------

def parse_guard_set(guards) -> frozenset:
    """Normalise a guard collection to a frozenset of ids ``G1``..``G8``.

    Accepts any iterable of ids (case-insensitive, ``"g5"`` ok) or a single
    comma-separated string; ``None`` means every guard.

    Raises
    ------
    ParameterError
        On an unknown id.
    """
    if guards is None:
        return ALL_GUARDS
    if isinstance(guards, str):
        guards = [g for g in guards.replace(" ", "").split(",") if g]
    out = set()
    for g in guards:
        gid = str(g).upper()
        if gid not in GUARD_IDS:
            raise ParameterError(f"guard={g!r}; expected one of {', '.join(GUARD_IDS)}")
        out.add(gid)
    return frozenset(out)
