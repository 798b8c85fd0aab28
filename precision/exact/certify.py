"""Certify by escalation: raise the working precision until a result is decided.

The oracle (:func:`precision.operators.sigmoid_focal_loss_grad.oracle.round_gradient`, its exact values) and
the ieee machine's settle step (:mod:`precision.machine.ieee`) decide a
result the same way: evaluate at a working precision, test whether that
evaluation decides the result (both ends of an error ball round to the same
value, a ball is tight enough, ...), and otherwise double the precision, up
to a cap past which the caller reports the result as undecided.  This module
holds that loop once; each caller supplies the evaluation and the test.
"""

from __future__ import annotations

from typing import Callable, TypeVar

__all__ = ["escalate"]

T = TypeVar("T")


def escalate(attempt: Callable[[int], T | None], start: int, cap: int) -> T | None:
    """The first decided result of ``attempt(prec)`` for ``prec = start, 2 start, 4 start, ...``.

    Parameters
    ----------
    attempt : callable
        ``attempt(prec)`` evaluates at a working precision of ``prec`` bits
        and returns the decided result, or None when that precision does not
        decide it.  It may keep state between calls (work shared across
        precisions, midpoints already tested).
    start : int
        The first working precision, in bits (positive).
    cap : int
        The largest working precision tried, in bits.

    Returns
    -------
    object or None
        The first result that is not None; None when no precision up to
        ``cap`` decides (the caller raises or reports the point undecided:
        a result is never guessed).

    Examples
    --------
    >>> tried = []
    >>> escalate(lambda prec: tried.append(prec) or (prec if prec >= 200 else None), 64, 1024)
    256
    >>> tried
    [64, 128, 256]
    >>> escalate(lambda prec: None, 64, 100) is None
    True
    """
    prec = start
    while prec <= cap:
        result = attempt(prec)
        if result is not None:
            return result
        prec *= 2
    return None
