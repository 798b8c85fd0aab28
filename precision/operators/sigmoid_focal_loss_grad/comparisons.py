"""Which pairs of variants a run compares point by point, and what each pair is evidence for.

A :class:`Comparison` names a *subject* (a guard ``G8``, a G5 threshold
``G5=2^-6``, or a variant), the variant *with* it and the variant
*without* it.  Three kinds, found from the variant names of a study
(:func:`find_comparisons`):

``guard``
    Two naive/kernel variants whose guard sets differ by exactly one guard
    and which have no other parameter: ``naive+G8`` vs ``naive`` (the guard
    added to the naive recipe), ``kernel`` vs ``kernel-G8`` (the guard
    removed from the production kernel).
``threshold``
    Two kernel-family variants that differ only in the G5 threshold, one of
    them the baseline: ``kernel[G5=2^-4]`` vs ``kernel[G5=never]`` (the
    correction against no correction) and, when the production threshold
    1/64 (:data:`precision.operators.sigmoid_focal_loss_grad.implementations.kernel.G5_DEFAULT_THRESHOLD`) is
    among the variants, every other threshold against it.
``declared``
    Pairs a study file asks for (``[run] compare = [["candidate",
    "kernel"]]``): the subject is the first variant.

The paired statistics of each comparison (:class:`precision.analysis.paired.PairedStats`)
are computed by the sweep on the points both variants share.
"""

from __future__ import annotations

import math

from precision.engine.operators import Comparison, unique_comparisons
from precision.operators.sigmoid_focal_loss_grad.guards import get_variant
from precision.operators.sigmoid_focal_loss_grad.implementations.common import ALL_GUARDS, GUARD_IDS
from precision.operators.sigmoid_focal_loss_grad.implementations.kernel import G5_ALWAYS, G5_DEFAULT_THRESHOLD, G5_NEVER

__all__ = ["Comparison", "find_comparisons", "threshold_name", "g5_threshold", "is_production", "production_variant",
           "thresholds_of", "PRODUCTION_THRESHOLD",
           "ALWAYS", "NEVER"]

#: The production G5 threshold (the kernel's default, 1/64).
PRODUCTION_THRESHOLD = G5_DEFAULT_THRESHOLD
#: The G5 variants a threshold search compares every threshold with.
ALWAYS, NEVER = "kernel[G5=always]", "kernel[G5=never]"


def g5_threshold(variant) -> float | None:
    """The G5 threshold of a kernel-family variant with G5 on (0.0 = never, inf = always); None otherwise.

    A variant without a ``G5=`` parameter has the production threshold.
    """
    row = get_variant(variant)
    guards = row.guards
    if row.family not in ("kernel", "naive") or guards is None or "G5" not in guards:
        return None
    tau = dict(row.params).get("g5_threshold", G5_DEFAULT_THRESHOLD)
    return 0.0 if tau == G5_NEVER else math.inf if tau == G5_ALWAYS else float(tau)


def is_production(variant) -> bool:
    """The variant runs G5 at the production threshold (``kernel``, ``naive+G5``, ``kernel[G5=2^-6]``): the
    reference a threshold comparison is read against (not "no correction")."""
    return g5_threshold(variant) == PRODUCTION_THRESHOLD


def production_variant(variants) -> str | None:
    """The production kernel among ``variants``: ``kernel`` when present, else a variant with every guard and
    the production G5 threshold and no other parameter (``kernel[G5=2^-6]``); None when there is none."""
    if "kernel" in variants:
        return "kernel"
    production = [v for v in variants if is_production(v) and get_variant(v).guards == ALL_GUARDS
                  and set(dict(get_variant(v).params)) <= {"guards", "g5_threshold"}]
    return production[0] if production else None


def thresholds_of(variants) -> list:
    """The finite nonzero G5 thresholds among the variants' names, increasing."""
    taus = {g5_threshold(v) for v in variants}
    return sorted(t for t in taus if t is not None and 0 < t < math.inf)


def threshold_name(tau: float) -> str:
    """The spelling of a G5 threshold: ``2^-6`` for powers of two, ``never``, ``always``, else ``%g``.

    Examples
    --------
    >>> threshold_name(0.015625), threshold_name(0.0), threshold_name(math.inf), threshold_name(0.1)
    ('2^-6', 'never', 'always', '0.1')
    """
    if tau == 0:
        return "never"
    if math.isinf(tau):
        return "always"
    m, e = math.frexp(tau)
    return f"2^{e - 1}" if m == 0.5 else f"{tau:g}"


def _other_params(variant) -> tuple:
    """(guards, parameters other than the G5 threshold) of a variant."""
    row = get_variant(variant)
    return row.guards, tuple(sorted((k, v) for k, v in row.params if k not in ("guards", "g5_threshold")))


def find_comparisons(variants, declared=()) -> list:
    """Every comparison among ``variants`` (see the module docstring), in a stable order.

    Parameters
    ----------
    variants : sequence of str
        Registry names, in run order.
    declared : sequence of (str, str)
        Extra (with, without) pairs; both must be among ``variants``.

    Returns
    -------
    list of Comparison
        Guard pairs by guard (naive+Gi vs naive first), then threshold pairs
        by decreasing threshold (against never, then against 1/64), then the
        declared pairs in their order.
    """
    variants = list(dict.fromkeys(variants))
    rows = {v: get_variant(v) for v in variants}
    out = []
    plain = {v: r.guards for v, r in rows.items()
             if r.family in ("kernel", "naive") and r.guards is not None and not dict(r.params).keys() - {"guards"}}
    for g in GUARD_IDS:
        pairs = [(a, b) for a, ga in plain.items() for b, gb in plain.items() if ga - gb == {g} and gb < ga]
        # naive+Gi vs naive before kernel vs kernel-Gi
        pairs.sort(key=lambda p: (len(plain[p[0]]), variants.index(p[0])))
        out += [Comparison(g, a, b, "guard") for a, b in pairs]
    taus = {}
    canonical = set()  # a variant equal to an earlier one (kernel and kernel[G5=2^-6]) adds no comparison
    for v in variants:
        t = g5_threshold(v)
        if t is not None and (t, _other_params(v)) not in canonical:
            canonical.add((t, _other_params(v)))
            taus[v] = t
    for base_tau in (0.0, PRODUCTION_THRESHOLD):
        for v in sorted(taus, key=lambda v: (-taus[v], variants.index(v))):
            if taus[v] == base_tau:
                continue
            bases = [b for b in taus if taus[b] == base_tau and _other_params(b) == _other_params(v)]
            if bases and not (base_tau == PRODUCTION_THRESHOLD and taus[v] == 0.0):
                out.append(Comparison(f"G5={threshold_name(taus[v])}", v, bases[0], "threshold"))
    for a, b in declared:
        out.append(Comparison(a, a, b, "declared"))
    return unique_comparisons(out)
