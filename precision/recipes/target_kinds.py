"""The kinds of target an operator takes: what a target value is in a study file, a command, an array, a table.

An operator declares its target's kind (``TARGET_KIND``, :mod:`precision.engine.operators`; default
``binary``):

* ``binary``: a class selector, an int32 per element (``0``, ``1``; the focal losses' contract).  A study's
  ``target`` values and ``--target`` are integers; the array is int32 and the device loads it with a Cast
  (RNE, counted); tables hold integers.
* ``real``: a value of the input format per element (a soft target, label smoothing).  A study's ``target``
  values and ``--target`` are numbers (decimal or hex float, e.g. ``0.75`` or ``0x1.8p-1``), each exact in
  every format the study's profiles give pred (an inexact value is refused, never rounded); the array has
  pred's dtype and the device loads it as it loads weight (exactly, not counted); tables hold float64.

Witnesses print a target with :func:`target_text` (an integer as its digits, any other value as its hex float),
so both kinds read back exactly with :func:`parse_target_text`.
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass

import numpy as np

from precision.errors import DtypeError, ParameterError
from precision.exact.formats import FP16, FP32

__all__ = ["TargetKind", "BINARY", "REAL", "TARGET_KINDS", "target_kind", "target_text", "target_json",
           "parse_target_text"]

_FORMATS = {"fp16": FP16, "fp32": FP32}


@dataclass(frozen=True)
class TargetKind:
    """One kind of target.

    Attributes
    ----------
    name : {"binary", "real"}
    words : str
        What a value is, for messages and help (``an int32 selector``, ``a float value of the input format``).
    """

    name: str
    words: str

    @property
    def real(self) -> bool:
        """Whether a target is a float value of the input format (else an int32 selector)."""
        return self.name == "real"

    def parse(self, value, name: str = "target") -> int | float:
        """A target from a study file's value (int, float or text) or a command's text: int for ``binary``
        (within int32), float for ``real`` (finite; ``0.75``, ``0x1.8p-1``).  ParameterError names ``name``."""
        if isinstance(value, str):
            text = value.strip()
            try:
                value = int(text, 0) if not self.real else float.fromhex(text) if "0x" in text.lower() \
                    else float(text)
            except ValueError:
                raise ParameterError(f"{name}={text!r}; expected {self.words}") from None
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise ParameterError(f"{name}={value!r}; expected {self.words}")
        if not self.real:
            if not isinstance(value, numbers.Integral) or not -2**31 <= value < 2**31:
                raise ParameterError(f"{name}={value!r}; expected {self.words}")
            return int(value)
        if not math.isfinite(value):
            raise ParameterError(f"{name}={value!r}; expected {self.words}")
        return float(value)

    def check_exact(self, value, formats, name: str = "target") -> None:
        """Refuse a real target that is not a value of every format in ``formats`` (names, ``fp16``/``fp32``):
        inputs are exact binary values, never rounded on the way in."""
        if not self.real:
            return
        for f in formats:
            dtype = _FORMATS[f].dtype
            if float(dtype.type(value)) != value:
                raise ParameterError(f"{name}={value!r} is not exact in {f} (it rounds to "
                                     f"{float(dtype.type(value)).hex()}); expected values exact in every format "
                                     f"pred takes")

    def dtype(self, input_dtype) -> np.dtype:
        """The target array's dtype beside inputs of ``input_dtype``: int32, or the input dtype itself."""
        return np.dtype(input_dtype) if self.real else np.dtype(np.int32)

    def array(self, values, input_dtype) -> np.ndarray:
        """``values`` as the target array beside inputs of ``input_dtype`` (exact: checked values)."""
        return np.asarray(values, dtype=self.dtype(input_dtype))

    def check_array(self, target: np.ndarray, pred_dtype) -> None:
        """Refuse a target array of another dtype than the kind's (DtypeError: int32, or pred's dtype)."""
        want = self.dtype(pred_dtype)
        if target.dtype != want:
            raise DtypeError(f"target dtype={target.dtype}; expected {want}"
                             + (" (a real target has pred's dtype)" if self.real else ""))


BINARY = TargetKind("binary", "an int32 selector (0 or 1)")
REAL = TargetKind("real", "a finite float value of the input format (decimal or hex, e.g. 0.75 or 0x1.8p-1)")
#: Kind name -> kind.
TARGET_KINDS = {k.name: k for k in (BINARY, REAL)}


def target_kind(op) -> TargetKind:
    """The kind of an operator's target (its ``TARGET_KIND``; ``binary`` when it has none)."""
    return TARGET_KINDS[getattr(op, "TARGET_KIND", "binary")]


def _number(value) -> float:
    """A target value, a number or its text (as :func:`target_text` or a table spells it), as a float."""
    return float(parse_target_text(value)) if isinstance(value, str) else float(value)


def target_text(value) -> str:
    """A target as a witness prints it: an integral value as its digits (``1``), any other as its shortest hex
    float (``0x1.8p-1``); exact, and read back by :func:`parse_target_text`.  ``value``: a number or such a
    text."""
    v = _number(value)
    return str(int(v)) if v.is_integer() else re.sub(r"\.?0+p", "p", v.hex())


def target_json(value) -> int | str:
    """A target for a JSON witness: an int when integral, else its hex float text."""
    v = _number(value)
    return int(v) if v.is_integer() else v.hex()


def parse_target_text(text) -> int | float:
    """The inverse of :func:`target_text` and :func:`target_json` (also a plain number): int or float."""
    if isinstance(text, numbers.Real) and not isinstance(text, bool):
        v = float(text)
    else:
        s = str(text).strip()
        v = float.fromhex(s) if "0x" in s.lower() else float(s)
    return int(v) if v.is_integer() else v
