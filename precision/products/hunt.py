"""The worst-case hunt: a black-box search for the inputs of largest ulp error.

In the spirit of Zimmermann's accuracy work on libm: when a format is too
large to exhaust, seed a search with random inputs, then search locally, in
ordinal space, around the worst points found so far.  The public entry point
is :func:`hunt`; it returns a :class:`HuntResult`.

The search space
----------------
A point is ``(pred, attribute values, target)``: pred any finite value of the
format, the values of the operator's attributes (its ``ATTRIBUTES``; for
SigmoidFocalLossGrad gamma and alpha, the names used below) and the target
one combination of the given lists (attributes as float32 values), in the
order: the terms attribute (gamma) first, then the others in the operator's
order, then the target.  ``weight`` is absent, ``dout = 1`` and the
reduction is ``none`` (the coefficient 1), so the error is that of the
gradient itself.  With ``outside_neighbourhood`` the points inside the
operator's root neighbourhood (its ``in_neighbourhood``; SigmoidFocalLossGrad:
``gamma < -1`` and cancellation factor ``C >= ROOT_NEIGHBOURHOOD_C``,
:mod:`precision.operators.sigmoid_focal_loss_grad.bracket`; the selected term's C: ``A(x)`` for target 0,
``A(-x)`` for target 1, the larger for other selectors) are never sampled
nor scored, exactly as the reports' "outside" zone.

fp16 (63,488 finite preds) is **exhausted**: every pred for every
combination, the variant evaluated on the whole [preds, targets] tensor per
(gamma, alpha), as a study does (``kind = "exhaustive"``).  fp32 is
**hunted** (``kind = "hunted"``) by independent *streams*, each with its own
generator ``numpy.random.default_rng([seed, stream])``:

1. *fresh samples* (the restarts), each point drawn in one of four equally
   likely ways: an ordinal uniform over every finite value of the format
   (uniform over floats: tiny, huge and overflowing arguments); an ordinal
   uniform over the values with ``|x| <= SAMPLE_RANGE`` (uniform over
   floats where the function varies); a real uniform over
   ``[-SAMPLE_RANGE, SAMPLE_RANGE]`` rounded to the format (twice: uniform
   over the reals, where most inputs of a model live); the combination
   uniform over the list;
2. *local search*: the stream keeps its ``TOP_KEPT`` worst points with a
   finite error; each batch spends ``LOCAL_SHARE`` of its points on the
   neighbours of the least-expanded of them (ties: the worst first) at
   ordinal distances ``+-1, +-2, +-4, ..., +-2**LADDER_BITS`` (same
   combination); a point expanded before gets one random neighbour in each
   octave ``[2**j, 2**(j+1))``, ``j >= 1``, instead, so repeated expansions
   keep finding new points.  A neighbour that enters the kept points is
   expanded next: the search climbs in ordinal space, halving its distance
   to a local maximum at each step.

Real ranges.  An attribute searched as a range (``ranges``; ``--gamma-range -3 6``) takes any float32 value
between its ends, not only a study's grid values.  Each combination of attribute values costs one evaluation of
the variant, so a batch (:data:`RANGED_BATCH` points) holds few: its fresh points share :data:`FRESH_COMBOS`
combination drawn afresh (each range value uniform over its reals, rounded to float32, or one of its ends), and
its local points go to one kept point, its pred ladder and :data:`ATTRIBUTE_MOVES` moves in the ranged
attributes (one attribute, a random distance in a random octave of float32 ordinals; at the kept pred, its
nearest ordinals and random octaves around it): the search climbs in pred and in the attributes.  Such a hunt
is hunted in fp16 too.

Each batch (``BATCH`` points) is scored at once: the exact values from the
oracle's focal terms (:func:`precision.operators.sigmoid_focal_loss_grad.terms.focal_term_tables`, the
certified oracle, shared between x and -x and across alphas and targets;
:func:`precision.operators.sigmoid_focal_loss_grad.terms.derive_gradient` gives the correctly rounded value and
the exact value as a double-double, exactly as a sweep scores), the variant
through :func:`precision.operators.sigmoid_focal_loss_grad.guards.evaluate` on an ``[n, 1]`` tensor per
(gamma, alpha) of the batch, the errors through
:func:`precision.analysis.scoring.ulp_error` against the exact value (so a correctly
rounded result scores up to 0.5, as in every table of the project).

Screening.  A point is scored by the oracle's compiled certified path (its double-double ball, proven
bounds), never by the scalar oracle's escalation where that ball is formed but straddles the end of a
rounding cell: the ball's centre is the exact value within 2^-40 relative, so the ulp error is as certain
as elsewhere, and only which neighbour is the correct rounding stays open (an exact value a hair off a
midpoint, ``1 - alpha`` at a huge |x| over a real alpha range: the scalar oracle spends seconds on it or
fails at 65,536 bits).  The reported points' correct rounding (``rounded``) is then decided by the scalar
oracle (NaN where it cannot).

Ranking.  A NaN or inf where the correctly rounded value is finite (or a
finite value where the exact value overflows) scores inf ulps and ranks above
every finite error; such *special* points are kept apart (the first
``TOP_KEPT`` by combination and pred), so the local search keeps climbing the
finite errors.  Points whose exact value the oracle cannot decide at its
precision cap are counted as ``unresolved`` and not ranked.  The merged
result is sorted by (error descending, combination, pred ordinal): ties are
broken the same way on every run.

Tile context (guard G4).  The kernel's clamped-power fallback is decided per
tile, by default the whole tensor: a point's computed value can depend on the
other points of its tensor.  A hunted batch is evaluated as its own tensor
per (gamma, alpha) (an fp16 hunt: the whole [preds, targets] tensor), and the
errors are those of that context; the ``err_ulp_alone`` column of
:attr:`HuntResult.top` re-evaluates each reported point alone (a [1, 1]
tensor, as ``precision oracle`` and a one-point study see it).  For variants
without tile-level behaviour the two agree.

Budgets and reproducibility
---------------------------
``seconds`` (the default, 60): the wall time of the whole :func:`hunt` call,
from its entry to its return (worker start-up, search, merge, the alone
re-evaluation; not the interpreter's start-up and imports).  One stream per
worker; a stream starts no batch it expects to overrun the deadline (its
estimate: the longest of its last three batches), so the call returns within
about one batch (tens of milliseconds) of the budget.  The result is
reproducible only up to how far each stream got.

``points``: every stream evaluates its share of exactly that many points
(``POINT_STREAMS`` streams whatever the worker count); with a fixed seed the
result is identical on every run, machine and worker count.

An fp16 hunt is exhaustive: ``seconds`` and ``points`` do not limit it (its
time is reported).

:attr:`HuntResult.top` columns
------------------------------
``rank`` (1 = worst), ``err_ulp`` (float64; inf for special points),
``err_ulp_alone`` (the point evaluated alone, see above), ``class`` (``ok``,
``nan``, ``inf``, ``wrong_sign``, as :data:`precision.analysis.scoring.CLASS_NAMES`),
``pred``, ``target``, ``alpha``, ``gamma`` (the exact inputs, float64/int64),
``weight`` (always NaN: absent), ``dout`` (1.0), ``computed``, ``rounded``
(the correctly rounded value), ``exact`` and ``exact_lo`` (the exact value as
a double-double), ``c_factor`` (the selected term's cancellation factor C),
and the hex spellings ``pred_hex``, ``alpha_hex``, ``gamma_hex``,
``computed_hex``, ``rounded_hex``.  Special points come first (at most
``SPECIALS_SHOWN``), then the worst finite errors.
"""

from __future__ import annotations

import math
import os
import time
from collections import deque
from dataclasses import dataclass

import numpy as np
import pandas as pd

from precision.errors import ParameterError, PrecisionError
from precision.engine.executor import make_executor
from precision.engine.operators import DEFAULT_OPERATOR, get_operator, search_order, term_chunk
from precision.exact.formats import from_ordinal, get_format, round_to_format, to_ordinal
from precision.exact.terms import TermTable
from precision.machine import get_machine
from precision.analysis.scoring import CLASS_NAMES, classify, ulp_error
from precision.products.hunt_result import HuntResult
from precision.recipes.target_kinds import target_json, target_kind

__all__ = ["HuntResult", "hunt", "rescore", "KINDS", "BATCH", "TOP_KEPT", "LOCAL_SHARE", "LADDER_BITS", "SAMPLE_RANGE",
           "POINT_STREAMS", "FRESH_COMBOS", "RANGE_END_SHARE", "ATTRIBUTE_MOVES", "RANGED_BATCH", "SPECIALS_SHOWN",
           "DEFAULT_SECONDS"]

# ---------------------------------------------------------------------------
# Tuning parameters
# ---------------------------------------------------------------------------

#: Points per scored batch: about 15 ms of oracle work on one core, so a
#: stream stops within a few percent of a one-second budget, while the fixed
#: cost of a batch (one variant call per (gamma, alpha)) stays small.
BATCH = 512

#: Worst finite points each stream keeps and expands (and special points it keeps).
TOP_KEPT = 16

#: Share of a batch spent on neighbours of kept points once there are any
#: (the rest are fresh samples: the restarts).
LOCAL_SHARE = 0.5

#: Largest neighbour distance is 2**LADDER_BITS ordinals: a factor of about
#: 8 in value for fp32, so the ladder reaches the neighbouring binades.
LADDER_BITS = 25

#: Bound of the "interesting" range of the fresh samples (|x| <= 128: every
#: sigmoid, ln and power of the recipes changes regime inside it).
SAMPLE_RANGE = 128.0

#: Streams of a hunt with a point budget, whatever the worker count, so that
#: the result does not depend on the machine.
POINT_STREAMS = 4

#: Combinations of attribute values drawn afresh per batch when an attribute is searched as a range (each
#: combination is one evaluation of the variant, so a batch holds few).
FRESH_COMBOS = 1

#: Share of the fresh values of a range that are one of its ends.
RANGE_END_SHARE = 0.125

#: Moves in the ranged attributes per expansion of a kept point (each one combination).
ATTRIBUTE_MOVES = 2

#: Points per batch when an attribute is searched as a range: a batch holds 1 + 1 + ATTRIBUTE_MOVES combinations
#: (the fresh one, a kept point's, its moves), each one evaluation of the variant, so batches are larger.
RANGED_BATCH = 2048

#: Special points (NaN/inf where the exact value is finite) listed before the finite ones.
SPECIALS_SHOWN = 3

#: Default time budget in seconds.
DEFAULT_SECONDS = 60.0

#: What a maximum is: every point of the space scored, a fixed sample (a study), or a hunt.
KINDS = ("exhaustive", "sampled", "hunted")

#: Seconds kept for the merge and the alone re-evaluation after the streams stop.
_FINISH_RESERVE = 0.05

_FIELDS = ("ordinal", "combo", "err", "computed", "rounded", "exact_hi", "exact_lo", "cls", "c_factor")


# ---------------------------------------------------------------------------
# The search space
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _Space:
    """What is searched: a variant of an operator on a machine, one pred format, the combinations of its
    attributes' values and the targets.

    ``axes`` holds, per attribute in search order (the terms attribute first), ``(name, values, lo, hi)``: a
    list of float32 values (``lo = hi = 0``), or a real range (``values = None``) as the float32 ordinals
    ``lo .. hi`` of its ends.  A combination is a number in mixed radix over the axes then the targets (the
    first axis most significant): for lists alone, its index in ``itertools.product`` of the lists and targets.
    """

    variant: object  # registry name (picklable) or Variant
    machine: str
    fmt: str
    axes: tuple  # ((name, values or None, lo ordinal, hi ordinal), ...) in search order
    target_values: tuple  # the selectors, in order
    outside: bool
    operator: str = DEFAULT_OPERATOR  # its name (picklable); the object is op

    @property
    def op(self):
        """The operator (:func:`precision.engine.operators.get_operator`)."""
        return get_operator(self.operator)

    @property
    def names(self) -> tuple:
        """The operator's attributes, in its order."""
        return tuple(self.op.ATTRIBUTES)

    @property
    def ranged(self) -> bool:
        """Some attribute is searched as a real range."""
        return any(values is None for _, values, _, _ in self.axes)

    @property
    def sizes(self) -> tuple:
        """The number of values on each axis, then of targets."""
        return (*((len(v) if v is not None else hi - lo + 1) for _, v, lo, hi in self.axes), len(self.target_values))

    @property
    def n_combos(self) -> int:
        return math.prod(self.sizes)

    def digits(self, combo) -> list:
        """Each axis' index (and the target's, last) of each combination."""
        combo = np.asarray(combo, dtype=np.int64)
        out = []
        for size in reversed(self.sizes):
            out.append(combo % size)
            combo = combo // size
        return out[::-1]

    def combine(self, digits) -> np.ndarray:
        """The inverse of :meth:`digits`."""
        combo = np.zeros(np.shape(digits[0]), dtype=np.int64)
        for d, size in zip(digits, self.sizes):
            combo = combo * size + np.asarray(d, dtype=np.int64)
        return combo

    def attribute_of(self, name: str, combo) -> np.ndarray:
        """The value of the attribute ``name`` of each combination (float64 holding float32 values)."""
        k = [a[0] for a in self.axes].index(name)
        _, values, lo, _ = self.axes[k]
        d = self.digits(combo)[k]
        if values is not None:
            return np.asarray(values, dtype=np.float64)[d]
        return from_ordinal(lo + d, get_format("fp32")).astype(np.float64)

    def terms_of(self, combo) -> np.ndarray:
        """Each combination's value of the terms attribute (NaN when the operator has none)."""
        name = self.op.TERMS_ATTRIBUTE
        return self.attribute_of(name, combo) if name is not None else np.full(np.shape(combo), np.nan)

    def targets_of(self, combo) -> np.ndarray:
        """Each combination's target: int64 selectors, or float64 values of a real target."""
        return np.asarray(self.target_values)[self.digits(combo)[-1]]

    def attributes(self, combo: int) -> dict:
        """{name: value} of one combination."""
        return {name: float(self.attribute_of(name, np.array([combo]))[0]) for name in self.names}


def _term_groups(space: _Space, combo):
    """(term value, indices into ``combo``) per distinct value of the terms attribute, ascending (one group,
    value None, when the operator has none)."""
    if space.op.TERMS_ATTRIBUTE is None:
        return [(None, np.arange(np.asarray(combo).size))]
    t_of = space.terms_of(combo)
    return [(v, np.flatnonzero(t_of == v)) for v in np.unique(t_of).tolist()]


def _c_factors(space: _Space, x, combo) -> np.ndarray:
    """The operator's conditioning factor of each point's selected term(s) (its ``selected_cancellation``)."""
    out = np.ones(x.size)
    t_of = space.targets_of(combo)
    for term, sel in _term_groups(space, combo):
        out[sel] = space.op.selected_cancellation(x[sel], t_of[sel], term)
    return out


def _inside(space: _Space, x, combo) -> np.ndarray:
    """True where a point lies in the operator's root neighbourhood (its ``in_neighbourhood``)."""
    inside = np.zeros(x.size, dtype=bool)
    t_of = space.targets_of(combo)
    for term, sel in _term_groups(space, combo):
        inside[sel] = space.op.in_neighbourhood(x[sel], t_of[sel], term)
    return inside


# ---------------------------------------------------------------------------
# Scoring a batch
# ---------------------------------------------------------------------------

def _evaluate(space: _Space, preds, targets, attributes: dict) -> np.ndarray:
    """The variant on the tensor pred[P, T] x target[P, T] (dout 1, no weight, reduction none)."""
    return space.op.evaluate(space.variant, preds, targets, np.ones(preds.shape, dtype=preds.dtype), None,
                             **attributes, reduction="none", machine=space.machine)


def _attribute_args(space: _Space, columns: dict, term) -> list:
    """The attribute arguments of the operator's term and gradient functions (its ``ATTRIBUTES`` order): each
    point's values, the terms attribute as the one value ``term``."""
    name = space.op.TERMS_ATTRIBUTE
    return [term if n == name else columns[n] for n in space.names]


def _score_points(space: _Space, ordinal, combo, certify: bool = False) -> dict:
    """Score a batch of points; the variant sees one [n, 1] tensor per combination of attribute values of the
    batch.

    Returns the arrays of ``_FIELDS`` (``err`` NaN where the oracle cannot bound the exact value).  The exact
    value is the oracle's certified one; where its compiled ball straddles the end of a rounding cell, the ball's
    centre, within its proven bound, with ``rounded`` the rounding of its high part, undecided between two
    neighbours (``certify``: decided by the scalar oracle, NaN where it cannot).
    """
    fmt = get_format(space.fmt)
    op = space.op
    n = ordinal.size
    preds = from_ordinal(ordinal, fmt)
    x = preds.astype(np.float64)
    t_of = space.targets_of(combo)
    columns = {name: space.attribute_of(name, combo) for name in space.names}
    out = {"ordinal": ordinal, "combo": combo, "err": np.empty(n), "computed": np.empty(n),
           "rounded": np.empty(n), "exact_hi": np.empty(n), "exact_lo": np.empty(n),
           "cls": np.empty(n, dtype=np.int8), "c_factor": _c_factors(space, x, combo)}
    for term, sel in _term_groups(space, combo):
        xs, ts = x[sel], t_of[sel]
        mine = {name: v[sel] for name, v in columns.items()}
        m = sel.size
        pos, neg = op.selected_term_tables(xs, ts, *_attribute_args(space, mine, term))
        d = op.derive_exact(xs, ts, *[np.full(m, v) if np.isscalar(v) else v
                                         for v in _attribute_args(space, mine, term)],
                               np.ones(m), np.ones(m), np.ones(m, dtype=np.int64), fmt, pos, neg, certify=certify)
        computed = np.empty(m, dtype=fmt.dtype)
        rows = np.stack([mine[name] for name in space.names], axis=1)
        for values in np.unique(rows, axis=0):
            k = np.flatnonzero((rows == values).all(axis=1))
            given = {name: float(v) for name, v in zip(space.names, values)}
            t = target_kind(op).array(ts[k], preds.dtype)[:, None]
            computed[k] = _evaluate(space, preds[sel[k]][:, None], t, given)[:, 0]
        err = ulp_error(computed, (d.exact_hi, d.exact_lo), fmt, d.rounded)
        err = np.where(np.isnan(d.rounded.astype(np.float64)), np.nan, np.where(np.isnan(err), np.inf, err))
        out["err"][sel] = err
        out["computed"][sel] = computed.astype(np.float64)
        out["rounded"][sel] = d.rounded.astype(np.float64)
        out["exact_hi"][sel] = d.exact_hi
        out["exact_lo"][sel] = d.exact_lo
        out["cls"][sel] = classify(computed, d.rounded)
    return out


# ---------------------------------------------------------------------------
# Kept points
# ---------------------------------------------------------------------------

def _take(points: dict, index) -> dict:
    return {k: v[index] for k, v in points.items()}


def _concat(parts) -> dict:
    parts = [p for p in parts if p is not None]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def _empty(with_expansions: bool = True) -> dict:
    out = {k: np.empty(0, dtype=np.int64 if k in ("ordinal", "combo") else np.int8 if k == "cls" else np.float64)
           for k in _FIELDS}
    if with_expansions:
        out["expansions"] = np.empty(0, dtype=np.int64)
    return out


def _worst_finite(points: dict, k: int) -> dict:
    """The k points of largest finite error, deduplicated (first occurrence kept), in rank order."""
    keep = np.isfinite(points["err"])
    p = _take(points, np.flatnonzero(keep))
    p = _dedupe(p)
    order = np.lexsort((p["ordinal"], p["combo"], -p["err"]))
    return _take(p, order[:k])


def _first_specials(points: dict, k: int) -> dict:
    """The k special points (inf error) first in (combination, pred ordinal) order, deduplicated."""
    p = _take(points, np.flatnonzero(points["err"] == np.inf))
    p = _dedupe(p)
    order = np.lexsort((p["ordinal"], p["combo"]))
    return _take(p, order[:k])


def _dedupe(points: dict) -> dict:
    key = np.stack([points["combo"], points["ordinal"]], axis=1)
    _, first = np.unique(key, axis=0, return_index=True)
    return _take(points, np.sort(first))


# ---------------------------------------------------------------------------
# A stream: fresh samples, then local search around the kept points
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class _StreamJob:
    space: _Space
    seed: int
    index: int
    points: int | None  # budget in points, or None
    deadline: float | None  # time.monotonic() value, or None


def _sample(rng, space: _Space, n: int):
    """n fresh (ordinal, combo) points (see the module docstring), outside the neighbourhood if asked."""
    fmt = get_format(space.fmt)
    max_ord = int(to_ordinal(np.array([fmt.max_finite]), fmt)[0])
    range_ord = int(to_ordinal(round_to_format(np.array([SAMPLE_RANGE]), fmt), fmt)[0])
    got_o, got_c = [], []
    have = 0
    for _ in range(1000):
        m = 2 * (n - have) + 8
        how = rng.integers(0, 4, m)
        o = np.where(how == 0, rng.integers(-max_ord, max_ord + 1, m), rng.integers(-range_ord, range_ord + 1, m))
        reals = round_to_format(rng.uniform(-SAMPLE_RANGE, SAMPLE_RANGE, m), fmt)
        o = np.where(how >= 2, to_ordinal(reals, fmt), o).astype(np.int64)
        if space.ranged:  # a few combinations per batch (the variant is evaluated once per combination)
            c = _fresh_combos(rng, space, FRESH_COMBOS)[rng.integers(0, FRESH_COMBOS, m)]
        else:
            c = rng.integers(0, space.n_combos, m).astype(np.int64)
        if space.outside:
            keep = ~_inside(space, from_ordinal(o, fmt).astype(np.float64), c)
            o, c = o[keep], c[keep]
        got_o.append(o[:n - have])
        got_c.append(c[:n - have])
        have += got_o[-1].size
        if have >= n:
            break
    return np.concatenate(got_o), np.concatenate(got_c)


def _fresh_combos(rng, space: _Space, k: int) -> np.ndarray:
    """k combinations drawn afresh: a listed value uniformly; a value of a range uniform over its reals (rounded
    to float32), or with probability :data:`RANGE_END_SHARE` one of its two ends; a target uniformly.  (Uniform
    over the float32 values would mostly draw values near 0, e.g. alphas of 1e-30, which no model uses.)"""
    f32 = get_format("fp32")
    digits = []
    for _, values, lo, hi in space.axes:
        if values is not None:
            digits.append(rng.integers(0, len(values), k))
            continue
        ends = from_ordinal(np.array([lo, hi]), f32).astype(np.float64)
        real = to_ordinal(round_to_format(rng.uniform(ends[0], ends[1], k), f32), f32).astype(np.int64) - lo
        end = rng.integers(0, 2, k) * (hi - lo)
        digits.append(np.where(rng.random(k) < RANGE_END_SHARE, end, np.clip(real, 0, hi - lo)))
    digits.append(rng.integers(0, len(space.target_values), k))
    return space.combine(digits)


def _attribute_moves(rng, space: _Space, combo: int, ordinal: int, max_ord: int, n: int):
    """About n points near one kept point moved in its ranged attributes: :data:`ATTRIBUTE_MOVES` moves, each of
    one ranged attribute (chosen at random) by a random distance in a random octave ``[2**j, 2**(j+1))`` of
    float32 ordinals, ``0 <= j <= LADDER_BITS``, either way (clipped to the range); each move at the kept pred,
    its ordinal neighbours at +-1, +-2, +-4, +-8 and the rest at random distances in random octaves of pred
    ordinals (one combination per move: one evaluation of the variant)."""
    ranged = [k for k, (_, values, _, _) in enumerate(space.axes) if values is None]
    base = space.digits(np.array([combo]))
    near = np.array([0, 1, -1, 2, -2, 4, -4, 8, -8], dtype=np.int64)
    per_move = max(near.size, n // ATTRIBUTE_MOVES)
    out_o, out_c = [], []
    for _ in range(ATTRIBUTE_MOVES):
        k = ranged[int(rng.integers(0, len(ranged)))]
        j = int(rng.integers(0, LADDER_BITS + 1))
        step = ((1 << j) + int(rng.integers(0, 1 << j))) * (1 if rng.integers(0, 2) else -1)
        digits = [d.copy() for d in base]
        digits[k] = np.clip(digits[k] + step, 0, space.sizes[k] - 1)
        octave = np.left_shift(1, rng.integers(0, LADDER_BITS + 1, per_move - near.size))
        far = (octave + rng.integers(0, octave)) * rng.choice(np.array([-1, 1]), octave.size)
        preds = ordinal + np.concatenate([near, far])
        preds = preds[np.abs(preds) <= max_ord]
        out_o.append(preds)
        out_c.append(np.full(preds.size, int(space.combine(digits)[0]), dtype=np.int64))
    return np.concatenate(out_o), np.concatenate(out_c)


def _neighbours(rng, space: _Space, kept: dict, n: int):
    """About n neighbours of the least-expanded kept points (ties: worst first); expansions counted in ``kept``."""
    fmt = get_format(space.fmt)
    max_ord = int(to_ordinal(np.array([fmt.max_finite]), fmt)[0])
    if kept["ordinal"].size == 0 or n <= 0:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    per_center = 2 * (LADDER_BITS + 1)
    centers = 1 if space.ranged else max(1, n // per_center)  # (ranged: one, and its attribute moves)
    order = np.lexsort((kept["ordinal"], kept["combo"], -kept["err"], kept["expansions"]))[:centers]
    js = np.arange(LADDER_BITS + 1, dtype=np.int64)
    out_o, out_c = [], []
    for i in order.tolist():
        if kept["expansions"][i] == 0:
            dist = np.left_shift(1, js)  # the ladder 1, 2, 4, ..., 2**LADDER_BITS
        else:
            base = np.left_shift(1, js[1:])
            dist = base + rng.integers(0, base)  # one random distance in each octave [2**j, 2**(j+1))
        o = kept["ordinal"][i] + np.concatenate([dist, -dist])
        o = o[np.abs(o) <= max_ord]
        out_o.append(o)
        out_c.append(np.full(o.size, kept["combo"][i], dtype=np.int64))
        if space.ranged:
            o, c = _attribute_moves(rng, space, int(kept["combo"][i]), int(kept["ordinal"][i]), max_ord,
                                    n - per_center)
            out_o.append(o)
            out_c.append(c)
        kept["expansions"][i] += 1
    o, c = np.concatenate(out_o), np.concatenate(out_c)
    if space.outside:
        keep = ~_inside(space, from_ordinal(o, fmt).astype(np.float64), c)
        o, c = o[keep], c[keep]
    return o, c


def _merge_kept(kept: dict, scored: dict) -> dict:
    """Kept points updated with a scored batch: the TOP_KEPT worst finite ones, expansions carried over."""
    new = dict(scored)
    new["expansions"] = np.zeros(scored["ordinal"].size, dtype=np.int64)
    return _worst_finite(_concat([kept, new]), TOP_KEPT)  # kept first: a re-scored point keeps its count


def _run_stream(job: _StreamJob) -> dict:
    """One stream of a hunt (runs in a worker process): its kept points and counts."""
    space = job.space
    rng = np.random.default_rng([job.seed, job.index])
    kept = _empty()
    specials = _empty(with_expansions=False)
    evaluated = unresolved = special = fresh = fresh_wrong = 0
    recent = deque(maxlen=3)
    batch = RANGED_BATCH if space.ranged else BATCH
    while True:
        started = time.monotonic()
        if job.points is not None:
            size = min(batch, job.points - evaluated)
            if size <= 0:
                break
        else:
            if started + (max(recent) if recent else 0.0) > job.deadline:
                break
            size = batch
        local = int(size * LOCAL_SHARE) if kept["ordinal"].size else 0
        o1, c1 = _neighbours(rng, space, kept, local)
        o1, c1 = o1[:size], c1[:size]
        o2, c2 = _sample(rng, space, size - o1.size)
        scored = _score_points(space, np.concatenate([o1, o2]), np.concatenate([c1, c2]))
        evaluated += scored["ordinal"].size
        unresolved += int(np.isnan(scored["err"]).sum())
        n, wrong = _not_correct(scored, o1.size)
        fresh, fresh_wrong = fresh + n, fresh_wrong + wrong
        kept = _merge_kept(kept, scored)
        n_special = int(np.sum(scored["err"] == np.inf))
        if n_special:
            special += n_special
            specials = _first_specials(_concat([specials, scored]), TOP_KEPT)
        recent.append(time.monotonic() - started)
    kept.pop("expansions")
    return {"kept": kept, "specials": specials, "evaluated": evaluated, "unresolved": unresolved,
            "special": special, "fresh": fresh, "fresh_not_correct": fresh_wrong}


def _not_correct(scored: dict, start: int = 0) -> tuple[int, int]:
    """(decided points, of them not correctly rounded) among the scored points from ``start`` on (the fresh ones
    of a batch: its local-search points come first)."""
    err = scored["err"][start:]
    decided = ~np.isnan(err)
    wrong = decided & ~(scored["computed"][start:] == scored["rounded"][start:])
    return int(decided.sum()), int(wrong.sum())


# ---------------------------------------------------------------------------
# fp16: exhaust
# ---------------------------------------------------------------------------

def _exhaust(space: _Space, executor, top: int) -> tuple:
    """Every finite pred of the format for every combination.

    Returns (worst finite points, first special points, points scored, unresolved, special points, (decided
    points, of them not correctly rounded)).
    """
    fmt = get_format(space.fmt)
    op = space.op
    values = fmt.finite_values()
    x = values.astype(np.float64)
    xs = np.unique(np.concatenate([x, -x]).view(np.int64)).view(np.float64)
    xs = xs[np.argsort(np.abs(xs), kind="stable")]  # x and -x in one chunk share exp and log1p
    term_name = op.TERMS_ATTRIBUTE
    combos = np.arange(space.n_combos)  # (a grid's: each of them)
    terms = sorted(set(space.terms_of(combos).tolist())) if term_name is not None else [None]
    chunk = -(-xs.size // (4 * max(1, executor.workers)))
    jobs = [(xs[i:i + chunk], tuple(terms), space.operator) for i in range(0, xs.size, chunk)]
    pieces = {}
    for i, tables in executor.map_unordered(term_chunk, jobs):
        pieces[i] = tables
    order = [pieces[i] for i in range(len(jobs))]
    keys = np.concatenate([j[0] for j in jobs]).view(np.int64)
    sort = np.argsort(keys)
    keys = keys[sort]
    ordinals = to_ordinal(values, fmt).astype(np.int64)
    worst, specials = [], []
    points = unresolved = special = fresh = fresh_wrong = 0
    rows = np.stack([space.attribute_of(name, combos) for name in space.names], axis=1)
    P = values.size
    for term, of_term in _term_groups(space, combos):
        table = TermTable.concatenate([p[term] for p in order]).take(sort)
        pos = table.take(np.searchsorted(keys, x.view(np.int64)))
        neg = table.take(np.searchsorted(keys, (-x).view(np.int64)))
        for given in np.unique(rows[of_term], axis=0):  # each combination of the attributes' values, ascending
            mine = of_term[(rows[of_term] == given).all(axis=1)]
            attributes = {name: float(v) for name, v in zip(space.names, given)}
            targets = space.targets_of(mine)
            T = targets.size
            computed = _evaluate(space, np.repeat(values[:, None], T, axis=1),
                                 np.broadcast_to(target_kind(op).array(targets, values.dtype), (values.size, T)).copy(),
                                 attributes)
            for j, ci in enumerate(mine.tolist()):
                d = op.derive_exact(x, np.full(P, targets[j]), *[np.full(P, v) for v in attributes.values()],
                                       np.ones(P), np.ones(P), np.ones(P, dtype=np.int64), fmt, pos, neg)
                c = computed[:, j]
                err = ulp_error(c, (d.exact_hi, d.exact_lo), fmt, d.rounded)
                err = np.where(np.isnan(d.rounded.astype(np.float64)), np.nan,
                               np.where(np.isnan(err), np.inf, err))
                combo = np.full(P, ci, dtype=np.int64)
                scored = {"ordinal": ordinals, "combo": combo, "err": err, "computed": c.astype(np.float64),
                          "rounded": d.rounded.astype(np.float64), "exact_hi": d.exact_hi, "exact_lo": d.exact_lo,
                          "cls": classify(c, d.rounded), "c_factor": _c_factors(space, x, combo)}
                if space.outside:
                    scored = _take(scored, np.flatnonzero(~_inside(space, x, combo)))
                points += scored["ordinal"].size
                unresolved += int(np.isnan(scored["err"]).sum())
                special += int(np.sum(scored["err"] == np.inf))
                n, wrong = _not_correct(scored)
                fresh, fresh_wrong = fresh + n, fresh_wrong + wrong
                finite = np.flatnonzero(np.isfinite(scored["err"]))
                k = min(top, finite.size)
                if k:
                    best = finite[np.argpartition(-scored["err"][finite], k - 1)[:k]] if k < finite.size else finite
                    # every point tying the k-th error too, so the final order does not depend on argpartition
                    kth = np.min(scored["err"][best])
                    worst.append(_take(scored, np.flatnonzero(scored["err"] >= kth)))
                specials.append(_first_specials(scored, SPECIALS_SHOWN))
    worst_all = _worst_finite(_concat(worst), top) if worst else _empty(False)
    specials_all = _first_specials(_concat(specials), SPECIALS_SHOWN) if specials else _empty(False)
    return worst_all, specials_all, points, unresolved, special, (fresh, fresh_wrong)


# ---------------------------------------------------------------------------
# The result's points (HuntResult: precision.products.hunt_result)
# ---------------------------------------------------------------------------

def _alone(space: _Space, rows: dict) -> np.ndarray:
    """err_ulp of each point evaluated alone, as a [1, 1] tensor, against its stored exact value."""
    fmt = get_format(space.fmt)
    out = np.empty(rows["ordinal"].size)
    for i in range(out.size):
        ci = int(rows["combo"][i])
        pred = from_ordinal(rows["ordinal"][i:i + 1], fmt)[:, None]
        t = target_kind(space.op).array(space.targets_of(np.array([[ci]])), pred.dtype)
        c = _evaluate(space, pred, t, space.attributes(ci))[:, 0]
        e = ulp_error(c, (rows["exact_hi"][i:i + 1], rows["exact_lo"][i:i + 1]), fmt, rows["rounded"][i:i + 1])
        out[i] = np.inf if np.isnan(e[0]) else e[0]
    return out


def _frame(space: _Space, rows: dict) -> pd.DataFrame:
    fmt = get_format(space.fmt)
    combo = rows["combo"].astype(np.int64)
    pred = from_ordinal(rows["ordinal"], fmt).astype(np.float64)
    attributes = {name: space.attribute_of(name, combo) for name in space.names}
    hexes = lambda arr: [float(v).hex() for v in arr]  # noqa: E731
    return pd.DataFrame({
        "rank": np.arange(1, combo.size + 1, dtype=np.int64),
        "err_ulp": rows["err"],
        "err_ulp_alone": _alone(space, rows),
        "class": [CLASS_NAMES[int(c)] for c in rows["cls"]],
        "pred": pred, "target": space.targets_of(combo), **attributes,
        "weight": np.full(combo.size, np.nan), "dout": np.ones(combo.size),
        "computed": rows["computed"], "rounded": rows["rounded"], "exact": rows["exact_hi"],
        "exact_lo": rows["exact_lo"], "c_factor": rows["c_factor"],
        "pred_hex": hexes(pred), **{f"{name}_hex": hexes(v) for name, v in attributes.items()},
        "computed_hex": hexes(rows["computed"]), "rounded_hex": hexes(rows["rounded"]),
    })


# ---------------------------------------------------------------------------
# The entry point
# ---------------------------------------------------------------------------

def _float32_list(values, name: str) -> tuple:
    out = []
    for v in values:
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise ParameterError(f"{name}={v!r} is not a number; expected finite float32 values") from None
        with np.errstate(over="ignore"):
            f32 = float(np.float32(f))
        if not math.isfinite(f32):
            raise ParameterError(f"{name}={v!r}; expected finite float32 values (|v| < 3.4e38)")
        out.append(f32)
    if not out:
        raise ParameterError(f"{name}=[] is empty; give at least one value")
    return tuple(dict.fromkeys(out))


def _ranges(ranges: dict, op, attribute_values: dict) -> dict:
    """{attribute: (lo, hi) as float32 ordinals} of the attributes searched as real ranges (one-line errors for an
    unknown attribute, a range given with the attribute's list, ends that are not finite float32 numbers or out of
    order)."""
    out = {}
    for name, ends in ranges.items():
        if name not in op.ATTRIBUTES:
            raise ParameterError(f"range of {name!r}: not an attribute of the operator; expected one of "
                                 f"{', '.join(op.ATTRIBUTES)}")
        if f"{name}s" in attribute_values:
            raise ParameterError(f"{name}: give its values or its range, not both")
        try:
            lo, hi = (float(v) for v in ends)
        except (TypeError, ValueError):
            raise ParameterError(f"{name} range={ends!r}; expected two numbers LO HI") from None
        with np.errstate(over="ignore"):
            lo32, hi32 = np.float32(lo), np.float32(hi)
        if not (np.isfinite(lo32) and np.isfinite(hi32)):
            raise ParameterError(f"{name} range={ends!r}; expected finite float32 ends (|v| < 3.4e38)")
        if not lo32 <= hi32:
            raise ParameterError(f"{name} range={ends!r}; expected LO <= HI")
        f32 = get_format("fp32")
        out[name] = tuple(int(v) for v in to_ordinal(np.array([lo32, hi32]), f32))
    return out


def _target_list(values, kind, fmt: str) -> tuple:
    """The hunted targets, distinct, in order: int32 selectors, or a real target's values exact in ``fmt``."""
    out = []
    for v in values:
        if kind.real:
            value = kind.parse(v.item() if isinstance(v, np.generic) else v, "target")
            kind.check_exact(value, [fmt], "target")
            out.append(value)
            continue
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not -2**31 <= int(v) < 2**31:
            raise ParameterError(f"target={v!r}; expected int32 selectors (0 positive term, 1 negative)")
        out.append(int(v))
    if not out:
        raise ParameterError("target=[] is empty; give at least one " + ("value" if kind.real else "selector"))
    return tuple(dict.fromkeys(out))


def hunt(variant, *, machine: str = "npu", fmt: str = "fp32", targets=(0, 1), outside_neighbourhood: bool = False,
         seconds: float | None = None, points: int | None = None, seed: int = 0, workers: int | None = None,
         top: int = 10, operator: str = DEFAULT_OPERATOR, ranges: dict | None = None,
         **attribute_values) -> HuntResult:
    """Search for the inputs where a variant's ulp error is largest.

    Parameters
    ----------
    variant : str
        A registry name (:func:`precision.operators.sigmoid_focal_loss_grad.guards.list_variants`); a name
        registered with :func:`precision.operators.sigmoid_focal_loss_grad.guards.register_variant` works in the
        worker processes too (they are forked).
    machine : str, optional
        Machine spec (``ieee``, ``numpy``, ``npu``, suffixes like ``+ftz``).
        Default ``"npu"``, the production hardware model.
    fmt : {"fp32", "fp16"}, optional
        Format of pred and of the output.  Default ``"fp32"`` (hunted);
        ``"fp16"`` is exhausted.
    **attribute_values : sequence of float, optional
        The values searched of each of the operator's attributes, by the
        attribute's name in the plural (SigmoidFocalLossGrad: ``gammas``,
        ``alphas``), rounded to float32.  Defaults: the operator's
        (``ATTRIBUTES``; gamma 2 and alpha 0.25).
    ranges : dict, optional
        Attributes searched as real ranges instead of lists: ``{name: (lo, hi)}``
        (SigmoidFocalLossGrad: ``{"alpha": (0, 1), "gamma": (-3, 6)}``), the
        ends rounded to float32; every float32 value between them can be
        drawn (module docstring, "Real ranges").  Not together with the
        attribute's list.  A hunt with a range is hunted, in fp16 too.
    targets : sequence of int, optional
        Raw selectors.  Default ``(0, 1)``.
    outside_neighbourhood : bool, optional
        Only points outside the operator's root neighbourhood (its ``in_neighbourhood``; SigmoidFocalLossGrad:
        gamma < -1 and C >= :data:`precision.operators.sigmoid_focal_loss_grad.bracket.ROOT_NEIGHBOURHOOD_C`).  Default
        False.
    seconds : float, optional
        Wall-time budget of the call (fp32).  Default :data:`DEFAULT_SECONDS`
        unless ``points`` is given.
    points : int, optional
        Point budget instead (fp32): reproducible for a fixed seed on any
        machine and worker count.  Not together with ``seconds``.
    seed : int, optional
        Seed of the streams (stream i uses ``default_rng([seed, i])``).  Default 0.
    workers : int, optional
        Worker processes (default: every core; 1 runs in this process).
    top : int, optional
        Finite points reported in :attr:`HuntResult.top` (default 10).
    operator : str, optional
        The name of the operator whose variant is hunted (:func:`precision.engine.operators.get_operator`).
        Default :data:`~precision.engine.operators.DEFAULT_OPERATOR`.

    Returns
    -------
    HuntResult

    Raises
    ------
    ParameterError
        An unknown variant or machine, a format other than fp16/fp32, a
        variant that does not take the format, non-finite attributes, a
        budget that is not positive, or both budgets.

    Notes
    -----
    The errors are ulps of the exact value's binade in the output format
    (:func:`precision.analysis.scoring.ulp_error`); NaN/inf where the exact value is
    finite rank above every finite error.  See the module docstring for the
    search, the tile context of guard G4 and what is reproducible.

    Examples
    --------
    >>> r = hunt("candidate", gammas=[2.0], points=2048, workers=1, top=1)  # doctest: +SKIP
    >>> r.kind, r.witness["pred"]  # doctest: +SKIP
    ('hunted', '0x1.9a1d4e0000000p-3')
    """
    started = time.monotonic()
    if fmt not in ("fp16", "fp32"):
        raise ParameterError(f"format={fmt!r}; expected fp32 (hunted) or fp16 (exhausted)")
    name = variant if isinstance(variant, str) else getattr(variant, "name", variant)
    op = get_operator(operator)
    op.get_variant(variant)
    get_machine(machine)
    unknown = sorted(set(attribute_values) - {f"{a}s" for a in op.ATTRIBUTES})
    if unknown:
        raise TypeError(f"hunt() got unexpected keyword arguments {unknown}; the operator {operator!r} takes "
                        f"{', '.join(f'{a}s' for a in op.ATTRIBUTES)}")
    # the terms attribute first (the search's outer order), then the others in the operator's order
    order = search_order(op)
    spans = _ranges(ranges or {}, op, attribute_values)
    lists = {a: _float32_list(attribute_values.get(f"{a}s", op.ATTRIBUTES[a]), a) for a in order if a not in spans}
    targets = _target_list(targets, target_kind(op), fmt)
    if seconds is not None and points is not None:
        raise ParameterError("give seconds or points, not both (points makes the hunt reproducible)")
    if seconds is not None and not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        raise ParameterError(f"seconds={seconds!r}; expected a positive number of seconds")
    if points is not None and (isinstance(points, bool) or not isinstance(points, (int, np.integer)) or points < 1):
        raise ParameterError(f"points={points!r}; expected a positive integer")
    if isinstance(top, bool) or not isinstance(top, (int, np.integer)) or top < 1:
        raise ParameterError(f"top={top!r}; expected a positive integer")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ParameterError(f"seed={seed!r}; expected a non-negative integer")
    if workers is None:
        workers = os.cpu_count() or 1
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise ParameterError(f"workers={workers!r}; expected a positive integer")
    if (fmt == "fp32" or spans) and seconds is None and points is None:
        seconds = DEFAULT_SECONDS
    space = _Space(name if isinstance(variant, str) else variant, machine, fmt,
                   tuple((a, lists[a], 0, 0) if a not in spans else (a, None, *spans[a]) for a in order), targets,
                   bool(outside_neighbourhood), operator)
    if space.n_combos >= 2 ** 62:
        raise ParameterError(f"{space.n_combos:,} combinations of attribute values and targets; expected fewer "
                             "than 2^62")
    dtype = get_format(fmt).dtype
    try:  # the variant takes this format (e.g. naive-fp16 takes fp16 pred only)
        _evaluate(space, np.zeros((1, 1), dtype=dtype), target_kind(op).array([[targets[0]]], dtype),
                  space.attributes(0))
    except PrecisionError as exc:
        raise ParameterError(f"variant={name!r} cannot be hunted in {fmt}: {exc}") from None

    executor = make_executor(workers=workers)
    try:
        if fmt == "fp16" and not space.ranged:
            kind, streams, budget_seconds, budget_points = "exhaustive", 0, None, None
            worst, specials, n_points, unresolved, n_special, (fresh, fresh_wrong) = _exhaust(space, executor, top)
        else:
            kind, budget_seconds, budget_points = "hunted", seconds, points
            if points is not None:
                streams = POINT_STREAMS
                shares = [points // streams + (i < points % streams) for i in range(streams)]
                jobs = [_StreamJob(space, int(seed), i, shares[i], None) for i in range(streams)]
            else:
                streams = workers
                deadline = started + seconds - min(_FINISH_RESERVE, 0.1 * seconds)
                jobs = [_StreamJob(space, int(seed), i, None, deadline) for i in range(streams)]
            results = [None] * len(jobs)
            for i, res in executor.map_unordered(_run_stream, jobs):
                results[i] = res
            worst = _worst_finite(_concat([r["kept"] for r in results]), top)
            specials = _first_specials(_concat([r["specials"] for r in results]), SPECIALS_SHOWN)
            n_points = sum(r["evaluated"] for r in results)
            unresolved = sum(r["unresolved"] for r in results)
            n_special = sum(r["special"] for r in results)
            fresh = sum(r["fresh"] for r in results)
            fresh_wrong = sum(r["fresh_not_correct"] for r in results)
    finally:
        executor.close()
    rows = _concat([specials, worst])
    if kind == "hunted" and rows["ordinal"].size:  # the reported points' correct rounding, certified
        rows["rounded"] = _score_points(space, rows["ordinal"], rows["combo"], certify=True)["rounded"]
    frame = _frame(space, rows)
    max_finite = float(worst["err"][0]) if worst["err"].size else float("nan")
    max_ulp = math.inf if specials["err"].size else max_finite
    witness = {}
    if len(frame):
        r = frame.iloc[0]
        witness = {"pred": r["pred_hex"], "target": target_json(r["target"]),
                   **{a: r[f"{a}_hex"] for a in op.ATTRIBUTES}, "weight": "none",
                   **({"dout": (1.0).hex()} if "dout" in op.INPUTS else {})}
    return HuntResult(
        variant=str(name), machine=machine, fmt=fmt, kind=kind, max_ulp=max_ulp, max_finite_ulp=max_finite,
        witness=witness, top=frame, points=int(n_points), specials=int(n_special), unresolved=int(unresolved),
        seconds=time.monotonic() - started, budget_seconds=budget_seconds, budget_points=budget_points,
        seed=int(seed), workers=int(workers), streams=int(streams), attributes=tuple(lists.items()), targets=targets,
        outside_neighbourhood=bool(outside_neighbourhood), operator=operator,
        ranges=tuple((a, *(float(v) for v in from_ordinal(np.array(spans[a]), get_format("fp32")))) for a in order
                     if a in spans), fresh=int(fresh), fresh_not_correct=int(fresh_wrong))


def rescore(variant, pred, target, *attributes, machine: str = "npu", fmt: str = "fp32",
            operator: str = DEFAULT_OPERATOR) -> pd.DataFrame:
    """Score given points with the current code, as a hunt scores its own (dout 1, no weight, reduction none).

    For known witnesses (a hunt file's, a corpus's) whose stored errors may
    come from older code.  ``pred`` are exact ``fmt`` values; ``target`` and
    each of ``attributes`` (the operator's, in its ``ATTRIBUTES`` order:
    SigmoidFocalLossGrad's ``alpha, gamma``; float32 values) one per point.
    Each combination of attribute values is evaluated as one [n, 1] tensor;
    ``operator`` names the variant's operator
    (:func:`precision.engine.operators.get_operator`).

    Returns one row per point, in order: ``pred``, ``target``, the
    attributes, ``err_ulp`` (ulps of the exact value's binade; inf for a
    special output, NaN where the oracle is undecided), ``class``,
    ``computed``, ``rounded``, ``c_factor`` and ``inside`` (in the
    operator's root neighbourhood, its ``in_neighbourhood``).
    """
    op = get_operator(operator)
    names = list(op.ATTRIBUTES)
    if len(attributes) != len(names):
        raise TypeError(f"rescore() takes the values of {', '.join(names)} (the operator {operator!r}'s "
                        f"attributes); got {len(attributes)}")
    pred = np.asarray(pred, dtype=np.float64)
    cols = [np.asarray(v, dtype=np.float64).ravel() * np.ones(pred.size) for v in (*attributes, target)]
    by_name = dict(zip(names, cols[:-1]))
    axes = tuple((a, tuple(np.unique(by_name[a]).tolist()), 0, 0) for a in search_order(op))
    targets = tuple(float(t) if target_kind(op).real else int(t) for t in np.unique(cols[-1]))
    space = _Space(variant, machine, fmt, axes, targets, False, operator)
    combo = space.combine([np.searchsorted(values, by_name[a]) for a, values, _, _ in axes]
                          + [np.searchsorted(space.target_values, cols[-1])])
    if pred.size == 0:
        return pd.DataFrame(columns=["pred", "target", *names, "err_ulp", "class", "computed", "rounded",
                                     "c_factor", "inside"])
    rows = _score_points(space, to_ordinal(pred.astype(get_format(fmt).dtype), fmt), combo.ravel().astype(np.int64))
    return pd.DataFrame({"pred": pred, "target": cols[-1].astype(np.int64), **dict(zip(names, cols)),
                         "err_ulp": rows["err"], "class": [CLASS_NAMES[int(c)] for c in rows["cls"]],
                         "computed": rows["computed"], "rounded": rows["rounded"], "c_factor": rows["c_factor"],
                         "inside": _inside(space, pred, combo.ravel().astype(np.int64))})
