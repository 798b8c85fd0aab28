"""Where the G5 threshold belongs: every threshold's paired evidence from two evaluations, and the best
float32 threshold of a study's points, found in float32 ordinal space.

S5 of the kernel computes ``dpos = use ? corr : orig`` with ``use = admissible & |orig| <= fl(big*tau)``,
where ``admissible`` (big, q, qg1 in range) is the whole of ``use`` for ``kernel[G5=always]``.  Nothing
after S5 depends on tau, so at every point, bit for bit (tested),

    kernel[G5=tau] = admissible & (|orig| <= fl(big*tau)) ? kernel[G5=always] : kernel[G5=never]

and the two evaluations that :func:`evidence_arrays` turns into a :class:`ThresholdEvidence` (always and
never, their S5 steps kept) give the outputs, errors and classes of every threshold (the sweep engine runs
them on its tasks: :mod:`precision.operators.sigmoid_focal_loss_grad.threshold_tasks`).  The paired comparison of two thresholds is then
:meth:`precision.analysis.paired.PairedStats.compare` over the points where their tests differ (one definition of
better, worse and the verdict, as the sweep's).

:func:`search_thresholds`, per machine, format and profile, over the points a study pools (its separate regions, such
as the q-hole, left out), places the threshold the way Herbie's regime inference places a branch
(``src/core/regimes.rkt`` and ``bsearch.rkt``): two regimes, "correct" (kernel[G5=always]) and "keep"
(kernel[G5=never]), split on the test's variable.

1. Each point's **critical threshold**, the smallest float32 tau at which its test passes (the test is
   monotone in tau: ``fl(big*tau)`` never decreases, flushed or not), found by bisection in float32 ordinal
   space, every point at once, with the machine's own multiply (inf where it never passes).
2. The points sorted by critical threshold; ``net(tau)`` = better - worse of kernel[G5=tau] against
   kernel[G5=never] is the prefix sum of the outcome of correcting each point (+1 better, -1 worse, 0 tied
   or both garbage).  The **boundary** is the smallest critical threshold where net is largest: the best
   float32 threshold of these points (any tau up to the next critical value gives the same outputs).
3. ``net`` at each power of two ``2^-k`` (the study's thresholds among them) and per octave
   ``(2^-(k+1), 2^-k]`` (``threshold_search_octaves.csv``): where correcting stops paying, if it does.

The boundary is a property of the study's points (a sample), not of all inputs; its paired comparisons with
1/64, never and the best of the study's thresholds come with sign-test p-values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from precision.operators.sigmoid_focal_loss_grad.comparisons import ALWAYS, NEVER, PRODUCTION_THRESHOLD, threshold_name
from precision.operators.sigmoid_focal_loss_grad.implementations.common import resolve_machine
from precision.operators.sigmoid_focal_loss_grad.implementations.kernel import g5_big, g5_cancels
from precision.exact.formats import from_ordinal, to_ordinal
from precision.analysis.groups import Grouping
from precision.analysis.paired import PairedStats, compare_points, outputs_changed

__all__ = ["ThresholdEvidence", "EVIDENCE_STEPS", "evidence_arrays", "search_thresholds", "SEARCH_COLUMNS",
           "OCTAVE_COLUMNS", "OCTAVES"]

#: The S5 steps kept from kernel[G5=always]: its terms, their difference and the admissible part of ``use``.
EVIDENCE_STEPS = ("lhs_pos", "rhs_pos", "orig", "g5_use")

SEARCH_COLUMNS = ("machine", "format", "profile", "points", "admissible", "best_threshold", "best_tau",
                  "best_net", "result", "boundary", "boundary_tau", "boundary_net",
                  *(f"{c}_vs_{b}" for b in ("production", "never", "best")
                    for c in ("changed", "better", "worse", "p_value", "verdict")))
OCTAVE_COLUMNS = ("machine", "format", "profile", "k", "tau_lo", "tau_hi", "points", "better", "worse", "net",
                  "net_at_tau_hi")
#: The octaves reported: (2^-(k+1), 2^-k] for k = 0..OCTAVES-1, then everything at or below 2^-OCTAVES.
OCTAVES = 16


@dataclass
class ThresholdEvidence:
    """One machine, format and profile: the pooled points' S5 quantities and both extreme variants' scores.

    ``big``, ``orig`` are float32 (S5's values under kernel[G5=always]); ``admissible`` is its ``use``;
    ``err_*``, ``cls_*`` the scores of kernel[G5=always] (``a``) and kernel[G5=never] (``n``);
    ``changed`` whether their output bits differ (NaN against NaN unchanged).
    """

    machine: str
    format: str
    profile: str
    big: np.ndarray
    orig: np.ndarray
    admissible: np.ndarray
    err_a: np.ndarray
    cls_a: np.ndarray
    err_n: np.ndarray
    cls_n: np.ndarray
    changed: np.ndarray

    def __len__(self) -> int:
        return self.big.size

    def fires(self, tau: float) -> np.ndarray:
        """Where kernel[G5=tau] takes the corrected value (0 = never, inf = always)."""
        if tau == 0:
            return np.zeros(self.big.size, dtype=bool)
        if math.isinf(tau):
            return self.admissible.copy()
        m = resolve_machine(self.machine)
        return self.admissible & np.asarray(g5_cancels(m, self.big, self.orig, tau), dtype=bool)

    def critical(self) -> np.ndarray:
        """Each point's smallest float32 threshold whose test passes (float64; inf where none up to 2 does).

        A bisection in float32 ordinal space on every point at once, with the
        machine's multiply: the test ``|orig| <= fl(big*tau)`` is monotone in tau.
        """
        m = resolve_machine(self.machine)
        top = int(to_ordinal(np.float32([2.0]), "fp32")[0])  # |orig| <= big < 2*big: passes wherever admissible
        lo = np.zeros(self.big.size, dtype=np.int64)  # ordinal 0 (tau = 0): the test is not taken
        hi = np.full(self.big.size, top, dtype=np.int64)
        passes_top = self.fires(2.0)
        while True:
            open_ = hi - lo > 1
            if not open_.any():
                break
            mid = (lo + hi) // 2
            tau = from_ordinal(mid, "fp32")
            ok = np.asarray(g5_cancels(m, self.big, self.orig, tau), dtype=bool)
            hi = np.where(open_ & ok, mid, hi)
            lo = np.where(open_ & ~ok, mid, lo)
        return np.where(passes_top, from_ordinal(hi, "fp32").astype(np.float64), np.inf)

    def outcome(self) -> np.ndarray:
        """+1 where correcting (always against never) makes the error smaller, -1 larger, 0 otherwise."""
        row = np.zeros(self.big.size, dtype=np.int64)
        at = np.flatnonzero(self.changed)
        o, _, _ = compare_points(self.err_a[at], self.cls_a[at], self.err_n[at], self.cls_n[at],
                                 np.ones(at.size, dtype=bool))
        row[at] = np.where(o == 1, 1, np.where(o == 2, -1, 0))
        return row

    def scores(self, fires: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(ulp error, class) at each point of the threshold whose test passes where ``fires``."""
        return np.where(fires, self.err_a, self.err_n), np.where(fires, self.cls_a, self.cls_n)

    def compare(self, tau_with: float, tau_without: float, band=None) -> pd.Series:
        """The paired comparison (one :meth:`PairedStats.table` row) of two thresholds, optionally restricted to
        a band of points."""
        fw, fo = self.fires(tau_with), self.fires(tau_without)
        changed = (fw != fo) & self.changed
        if band is not None:
            changed &= band
        one = Grouping(np.zeros(self.big.size, dtype=np.int64), 1)
        return PairedStats.compare(one, *self.scores(fw), *self.scores(fo), changed).table([]).iloc[0]


def evidence_arrays(outputs: dict, kept: dict, scorer, fmt, machine, pooled) -> dict:
    """The arrays of a :class:`ThresholdEvidence` from one evaluation of kernel[G5=always] and kernel[G5=never].

    ``outputs`` maps both names to their outputs; ``kept`` holds kernel[G5=always]'s :data:`EVIDENCE_STEPS`;
    ``scorer`` (:class:`precision.analysis.scoring.Scorer`) scores outputs in the format ``fmt``; ``pooled``
    (one bool per output element, in ravel order) selects the elements kept.
    """
    m = resolve_machine(machine)
    out_a, out_n = (np.asarray(outputs[v], dtype=fmt.dtype).ravel() for v in (ALWAYS, NEVER))
    err_a, _, cls_a = scorer.score(out_a)
    err_n, _, cls_n = scorer.score(out_n)
    changed = outputs_changed(out_a, out_n)
    lhs, rhs, orig = (np.asarray(kept[s], dtype=np.float32).ravel() for s in EVIDENCE_STEPS[:3])
    return {"big": np.asarray(g5_big(m, lhs, rhs), np.float32)[pooled], "orig": orig[pooled],
            "admissible": (np.asarray(kept["g5_use"]).ravel() == 1)[pooled],
            "err_a": err_a[pooled], "cls_a": cls_a[pooled], "err_n": err_n[pooled], "cls_n": cls_n[pooled],
            "changed": changed[pooled]}


def _net(row) -> int:
    return int(row["better"]) - int(row["worse"])


def search_thresholds(evidence: ThresholdEvidence, thresholds) -> tuple[dict, list]:
    """(the row of ``threshold_search.csv``, the rows of ``threshold_search_octaves.csv``) for one evidence."""
    taus = sorted(thresholds)
    nets = {t: _net(evidence.compare(t, 0.0)) for t in taus}
    octaves = {t: abs(math.log2(t / PRODUCTION_THRESHOLD)) for t in taus}
    best = max(taus, key=lambda t: (nets[t], -octaves[t], t))
    keys = {"machine": evidence.machine, "format": evidence.format, "profile": evidence.profile}
    row = {**keys, "points": len(evidence), "admissible": int(evidence.admissible.sum()),
           "best_threshold": threshold_name(best), "best_tau": best, "best_net": nets[best]}
    critical = evidence.critical()
    gain = evidence.outcome()
    order = np.argsort(critical, kind="stable")
    c_sorted, prefix = critical[order], np.cumsum(gain[order])
    finite = np.isfinite(c_sorted)
    # net at a critical value: every point at or below it; the last of a run of equal values counts them all
    last = np.flatnonzero(finite & np.append(c_sorted[1:] != c_sorted[:-1], True))
    if last.size == 0 or prefix[last].max() <= 0:
        row.update(result="never helps", boundary=None, boundary_tau=np.nan, boundary_net=0)
        boundary = 0.0
    else:
        j = last[int(np.argmax(prefix[last]))]  # the first (smallest tau) of the largest net
        boundary = float(c_sorted[j])
        row.update(result="boundary", boundary=float(np.float32(boundary)).hex(), boundary_tau=boundary,
                   boundary_net=int(prefix[j]))
    for label, base in (("production", PRODUCTION_THRESHOLD), ("never", 0.0), ("best", best)):
        r = evidence.compare(boundary, base)
        row.update({f"{c}_vs_{label}": r[c] for c in ("changed", "better", "worse", "p_value", "verdict")})
    rows = []
    edges = [2.0 ** -k for k in range(OCTAVES + 1)]
    for k in range(OCTAVES + 1):
        hi_tau = edges[k]
        lo_tau = edges[k + 1] if k < OCTAVES else 0.0
        band = (critical > lo_tau) & (critical <= hi_tau)
        b, w = int((band & (gain > 0)).sum()), int((band & (gain < 0)).sum())
        rows.append({**keys, "k": k, "tau_lo": lo_tau, "tau_hi": hi_tau, "points": int(band.sum()), "better": b,
                     "worse": w, "net": b - w, "net_at_tau_hi": int(gain[critical <= hi_tau].sum())})
    return row, rows
