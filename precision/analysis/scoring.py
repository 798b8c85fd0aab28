"""Scores of computed values against the exact gradient, and every statistic drawn from them.

Layers, after numpy's ULP helpers: ordinals live in
:mod:`precision.exact.formats`; this module turns (computed, exact) pairs into
per-point scores (:func:`ulp_error`, :func:`bits_error`, :func:`classify`) and
offers the test-only assertion :func:`assert_max_ulp`.  Its siblings build on
it: :mod:`~precision.analysis.histograms` (mergeable log histograms of ulp
errors, for quantiles), :mod:`~precision.analysis.acceptance` (the acceptance
standards' per-point metrics, judged by :mod:`precision.analysis.standards`),
:mod:`~precision.analysis.groups` (mergeable group statistics,
:class:`~precision.analysis.groups.GroupStats`) and
:mod:`~precision.analysis.paired` (paired comparisons of two variants on the
same points and their verdicts).  The sweep, the gate and the reports all use
these; no other module defines a max, a quantile, a class count or a paired
count.

Conventions (every function of the analysis modules):

* **Which ulp.** ``ulp(exact)`` in the *output* format: the quantum of the
  binade of the exact value, clamped below at the subnormal quantum.  The
  ulp error is ``|computed - exact| / ulp(exact)``, so a correctly rounded
  result has error <= 0.5, and a faithful one < 1.
* **Bits of error** (Herbie's measure): ``log2(1 + d)`` with ``d`` the
  ordinal distance from the computed value to the correctly rounded exact
  value; 0 exactly when correctly rounded.  Paired comparisons use the
  magnitude form ``log2(1 + ulp error)`` (:func:`error_bits`), which orders
  points exactly as their ulp errors do.
* **Zeros.** -0 and +0 are the same point (ordinal 0); a zero of the wrong
  sign is not an error in ulps.
* **Special classes** (:data:`CLASS_NAMES`, one per point, in this
  precedence): ``nan`` (computed NaN, correctly rounded value not NaN);
  ``wrong_sign`` (computed and correctly rounded values nonzero with
  opposite signs, infinities included); ``inf`` (computed +-inf, correctly
  rounded value finite); ``lost_inf`` (computed finite, correctly rounded
  value +-inf: the exact value overflows the format but the output does
  not); ``ok`` otherwise.  A computed inf of the sign of an overflowing
  exact value scores 0 ulp and is ``ok``.  Every special point ranks worse
  than any finite error; NaN, inf and lost_inf score inf ulps.
* **Subnormals and FTZ.** Subnormal outputs are scored like any other value,
  so a result flushed to zero is as many ulps off as the exact value holds
  subnormal quanta.
* **Quantiles** are upper bounds read from mergeable log histograms
  (:data:`HIST_SUBBINS` bins per octave: within 4.4 % of the exact order
  statistic); maxima are exact, with the first point attaining them as the
  witness.
"""

from __future__ import annotations

import numpy as np

from precision.exact.formats import NAN_ORDINAL, get_format, round_to_format, to_ordinal, ulp
from precision.machine.compiled import COMPILED_MIN_POINTS  # (re-exported: the analysis' passes use it too)

__all__ = [
    "CLASS_OK", "CLASS_NAN", "CLASS_INF", "CLASS_WRONG_SIGN", "CLASS_LOST_INF", "CLASS_NAMES",
    "SPECIAL_CLASSES", "ulp_error", "bits_error", "error_bits", "classify", "Scorer", "blank_missing",
    "assert_max_ulp", "COMPILED_MIN_POINTS",
]


# ---------------------------------------------------------------------------
# Per-point scores
# ---------------------------------------------------------------------------

CLASS_OK, CLASS_NAN, CLASS_INF, CLASS_WRONG_SIGN, CLASS_LOST_INF = 0, 1, 2, 3, 4
#: int8 class code -> name, as written in score tables.
CLASS_NAMES = {CLASS_OK: "ok", CLASS_NAN: "nan", CLASS_INF: "inf", CLASS_WRONG_SIGN: "wrong_sign",
               CLASS_LOST_INF: "lost_inf"}
#: The special classes, in code order: one count column each in every table.
SPECIAL_CLASSES = ("nan", "inf", "wrong_sign", "lost_inf")


def _exact_parts(exact):
    """(hi, lo) float64 arrays from a float array or a (hi, lo) pair."""
    if isinstance(exact, tuple):
        hi, lo = exact[0], exact[1]
        return np.asarray(hi, dtype=np.float64), np.asarray(lo, dtype=np.float64)
    hi = np.asarray(exact, dtype=np.float64)
    return hi, np.zeros_like(hi)


def ulp_error(computed, exact, fmt, rounded=None) -> np.ndarray:
    """ulp error ``|computed - exact| / ulp(exact)`` in the output format.

    Parameters
    ----------
    computed : array_like
        Values of the output format (any float dtype holding them exactly).
    exact : array_like or tuple of two array_like
        The exact values, as float64 or as a double-double ``(hi, lo)``
        (see :func:`precision.operators.sigmoid_focal_loss_grad.oracle.exact_gradient`).
    fmt : str or Format
        The output format whose ulp is meant.
    rounded : array_like, optional
        The correctly rounded exact values; needed only to score the case of
        an exact value that overflows the format (computed of the same inf
        then scores 0).  Default None: derived from ``hi``.

    Returns
    -------
    numpy.ndarray of float64
        inf for NaN or inf results where the exact value rounds to a finite
        one, and for any result but the right inf where it rounds to +-inf;
        see the module Notes for every convention.

    Examples
    --------
    >>> float(ulp_error(np.float32(1.0), 1.0 + 2.0**-24, "fp32"))
    0.5
    """
    fmt = get_format(fmt)
    hi, lo = _exact_parts(exact)
    if rounded is None:
        rounded = round_to_format(hi, fmt)
    with np.errstate(invalid="ignore"):
        return _ulp_error(computed, hi, lo, ulp(hi, fmt), np.asarray(rounded, dtype=np.float64))


def _ulp_error(computed, hi, lo, ulp_hi, r64) -> np.ndarray:
    """The ulp error given the exact side's pieces (see :func:`ulp_error`)."""
    c = np.asarray(computed, dtype=np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs((c - hi) - lo) / ulp_hi
        special_exact = np.isinf(r64)
        err = np.where(special_exact, np.where(c == r64, 0.0, np.inf), err)
        return np.where(~np.isfinite(c) & ~special_exact, np.inf, err)


def bits_error(computed, rounded, fmt) -> np.ndarray:
    """Herbie's bits of error: log2(1 + ordinal distance to the correctly rounded value).

    A computed NaN (against a non-NaN correctly rounded value) scores the
    format's width in bits, the maximum.
    """
    fmt = get_format(fmt)
    return _bits_error(to_ordinal(np.asarray(computed, dtype=fmt.dtype), fmt),
                       to_ordinal(np.asarray(rounded, dtype=fmt.dtype), fmt), fmt)


def _bits_error(ordinal_computed, ordinal_rounded, fmt) -> np.ndarray:
    """Herbie's bits from the ordinals of the computed and correctly rounded values (see :func:`bits_error`)."""
    nan = (ordinal_computed == NAN_ORDINAL) | (ordinal_rounded == NAN_ORDINAL)
    d = np.where(nan, -1, np.abs(ordinal_computed - ordinal_rounded))
    bits = np.log2(1.0 + np.maximum(d, 0).astype(np.float64))
    return np.where(d < 0, float(fmt.width), np.minimum(bits, float(fmt.width)))


def error_bits(err_ulp) -> np.ndarray:
    """``log2(1 + ulp error)``: the error as bits, the unit of paired comparisons (inf stays inf, NaN counts as
    inf)."""
    err = np.asarray(err_ulp, dtype=np.float64)
    return np.log2(1.0 + np.where(np.isnan(err), np.inf, err))


class Scorer:
    """:func:`ulp_error`, :func:`bits_error` and :func:`classify` of many computed arrays against one exact side.

    The exact side (the ulp of each exact value, the correctly rounded
    values and their ordinals) is computed once; :meth:`score` gives the
    three per-point scores of one computed array, equal to the three
    functions called on it (they share their cores).

    Parameters
    ----------
    exact : array_like or tuple of two array_like
        The exact values (float64 or a double-double ``(hi, lo)``).
    rounded : array_like
        The correctly rounded exact values in ``fmt``.
    fmt : str or Format
        The output format.
    """

    def __init__(self, exact, rounded, fmt):
        self.fmt = get_format(fmt)
        self.hi, self.lo = _exact_parts(exact)
        self.rounded = np.asarray(rounded, dtype=self.fmt.dtype)
        self.r64 = self.rounded.astype(np.float64)
        with np.errstate(invalid="ignore"):
            self.ulp = ulp(self.hi, self.fmt)
        self.r_ordinal = to_ordinal(self.rounded, self.fmt)

    def ulp_error(self, computed) -> np.ndarray:
        return _ulp_error(computed, self.hi, self.lo, self.ulp, self.r64)

    def bits_error(self, computed) -> np.ndarray:
        return _bits_error(to_ordinal(np.asarray(computed, dtype=self.fmt.dtype), self.fmt), self.r_ordinal, self.fmt)

    def classify(self, computed) -> np.ndarray:
        return classify(computed, self.r64)

    def score(self, computed, computed_f64=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ulp error, bits of error, class) of each computed value: :meth:`score_reference` in one compiled pass
        (:func:`precision.analysis.fused.score_points`) and the bits' log2, equal to it bit for bit (from
        :data:`COMPILED_MIN_POINTS` points); ``computed_f64``: the computed values as float64, when the caller
        holds them."""
        c = np.asarray(computed, dtype=self.fmt.dtype)
        shape = np.broadcast_shapes(c.shape, self.hi.shape)
        if int(np.prod(shape)) < COMPILED_MIN_POINTS:
            return self.score_reference(computed)
        from precision.analysis.fused import score_points  # (numba, imported when first needed)
        flat = [np.ascontiguousarray(np.broadcast_to(a, shape)).ravel()
                for a in (c, self.hi, self.lo, self.ulp, self.r64, self.r_ordinal)]
        c = flat[0]
        c64 = c.astype(np.float64) if computed_f64 is None else np.asarray(computed_f64, dtype=np.float64).ravel()
        err, distance, nan_pair, cls = score_points(c64, c.view(self.fmt.uint_dtype), *flat[1:],
                                                    self.fmt.width)
        bits = np.log2(distance, out=distance)
        np.minimum(bits, float(self.fmt.width), out=bits)
        bits[nan_pair] = float(self.fmt.width)
        return err.reshape(shape), bits.reshape(shape), cls.reshape(shape)

    def score_reference(self, computed) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ulp error, bits of error, class) of each computed value, as numpy defines them."""
        return self.ulp_error(computed), self.bits_error(computed), self.classify(computed)


def classify(computed, rounded) -> np.ndarray:
    """int8 special-class code per point (see :data:`CLASS_NAMES` and the module Notes).

    Examples
    --------
    >>> classify(np.float16([1.0, np.nan, np.inf, -2.0, np.inf, 65504.0]),
    ...          np.float16([1.0, 1.0, 3.0, 2.0, -np.inf, np.inf])).tolist()
    [0, 1, 2, 3, 3, 4]
    """
    c = np.asarray(computed, dtype=np.float64)
    r = np.asarray(rounded, dtype=np.float64)
    c, r = np.broadcast_arrays(c, r)
    out = np.full(c.shape, CLASS_OK, dtype=np.int8)
    r_num = ~np.isnan(r)
    out[np.isfinite(c) & np.isinf(r)] = CLASS_LOST_INF
    out[np.isinf(c) & np.isfinite(r)] = CLASS_INF
    both = ~np.isnan(c) & r_num & (c != 0) & (r != 0)
    out[both & (np.signbit(c) != np.signbit(r))] = CLASS_WRONG_SIGN
    out[np.isnan(c) & r_num] = CLASS_NAN
    return out


def blank_missing(values: np.ndarray, none: np.ndarray) -> np.ndarray:
    """``values`` with the entries where ``none`` is true blanked (NaN, or None for text)."""
    if not none.any():
        return values
    out = values.astype(np.float64 if values.dtype.kind in "fiu" else object)
    out[none] = np.nan if out.dtype.kind == "f" else None
    return out


def assert_max_ulp(computed, exact, fmt, max_ulp: float = 1.0) -> np.ndarray:
    """Assert every ulp error is at most ``max_ulp``; return the errors (test helper)."""
    __tracebackhide__ = True
    err = ulp_error(computed, exact, fmt)
    if not np.all(err <= max_ulp):
        worst = int(np.argmax(np.where(np.isnan(err), np.inf, err)))
        c = np.asarray(computed, dtype=np.float64).ravel()[worst]
        raise AssertionError(
            f"values are not within {max_ulp:g} ulp in {get_format(fmt).name} "
            f"(max error is {err.ravel()[worst]:g} ulp at index {worst}: got {float(c).hex()})"
        )
    return err
