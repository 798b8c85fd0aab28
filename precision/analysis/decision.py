"""Decisions: paired verdicts, their sizes and exercise counts turned into keep / drop / change / depends.

A verdict (:data:`precision.analysis.paired.VERDICT_RULE`) says whether a guard helps or hurts; a
reviewer needs what to do with it.  This module is that rule, as data:

:class:`Thresholds`
    every threshold of the rule in one place (:data:`THRESHOLDS`, shown on the review page by
    :func:`rule_text`);
:class:`Evidence`
    one paired verdict row (one comparison on one machine, format and study): the verdict, the
    counts behind it and the assumption its points rest on;
:func:`effect_word`
    the size of a change in one word: ``none``, ``slightly``, ``clearly``, ``strongly``;
:func:`decide`
    one row's decision;
:func:`decide_cell`
    one (guard, machine) cell's decision from all its rows (formats, studies).

The decisions (:data:`DECISIONS`):

``keep``
    the guard, as the production kernel has it, helps on the points measured;
``drop``
    it changes no output where it acts (no effect), or it hurts and fixes no special output;
``change``
    another setting of the guard (a threshold, a placement) beats the production one, or the guard
    fixes special outputs but costs finite ones (``mixed``, or ``hurts`` with specials fixed: its
    condition needs narrowing);
``depends``
    the answer turns on something the points do not settle: the guard acted on none of them
    (not exercised), the difference is not significant (inconclusive), the rows disagree across
    formats or studies, or the verdict rests on an assumption (:attr:`Evidence.assumption`, such as
    a tile size) that the production setting may not meet.

Pure: no I/O; inputs are plain values (a report's ``verdicts.csv`` row gives them).

Examples
--------
>>> g3 = Evidence("G3", "npu", "fp32", verdict="helps", count=1264590, fired=1264590, changed=156200,
...               better=90486, worse=60952, median_change_bits=0.15625)
>>> d = decide(g3)
>>> d.decision, d.effect
('keep', 'slightly')
>>> decide(Evidence("G1", "npu", "fp32", verdict="no_effect", count=100, fired=50)).decision
'drop'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from precision.analysis.paired import SIGNIFICANCE, sign_test

__all__ = ["Thresholds", "THRESHOLDS", "DECISIONS", "EFFECTS", "Evidence", "Decision", "effect_word", "decide",
           "decide_cell", "rule_text", "plateau"]

#: The decision words, in the order the review page explains them.
DECISIONS = ("keep", "drop", "change", "depends")
#: The effect-size words, smallest first.
EFFECTS = ("none", "slightly", "clearly", "strongly")


@dataclass(frozen=True)
class Thresholds:
    """The thresholds of the decision rule (one place; :func:`rule_text` prints them).

    Parameters
    ----------
    slight_bits : float
        A median change (over the changed outputs, in bits) under this many bits, with a small net,
        is ``slightly``.  Default 1: under one bit is about the rounding of the last place.
    small_net : float
        The net ``|better - worse| / changed`` under this share is small.  Default 0.25: three
        changed outputs get worse for every five that get better.
    strong_bits : float
        A median change of at least this many bits is ``strongly``.  Default 8: a quarter of fp32's
        significand, an error a reviewer sees in any test.
    rare_share : float
        A change on fewer than this share of the points the guard acted on is called rare in the
        reason.  Default 1e-3.
    """

    slight_bits: float = 1.0
    small_net: float = 0.25
    strong_bits: float = 8.0
    rare_share: float = 1e-3

    def __post_init__(self):
        if not (0 < self.slight_bits < self.strong_bits):
            raise ValueError(f"slight_bits={self.slight_bits}, strong_bits={self.strong_bits}; expected "
                             "0 < slight_bits < strong_bits")
        if not (0 < self.small_net <= 1 and 0 < self.rare_share <= 1):
            raise ValueError(f"small_net={self.small_net}, rare_share={self.rare_share}; expected shares in (0, 1]")


#: The thresholds the review page uses.
THRESHOLDS = Thresholds()


def _nan(v) -> float:
    if v is None:
        return math.nan
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


@dataclass(frozen=True)
class Evidence:
    """One paired verdict row, as a decision reads it.

    Parameters
    ----------
    guard, machine, format : str
        The guard (``G5``), machine model (``npu``) and output format (``fp32``).
    study, comparison : str
        The study (report) and comparison (``kernel vs kernel-G5``) the row comes from.
    verdict : str
        The paired verdict (:data:`precision.analysis.paired.VERDICTS`).
    exercised : bool
        False when the guard acted on none of the compared points (``not_exercised_because`` says why).
    count, fired, changed, better, worse, specials_fixed, specials_caused : int
        Compared points, points the guard acted on, changed, better and worse outputs, special outputs
        made finite and caused.
    median_change_bits : float
        Median change in bits over the better/worse/tied outputs (positive: better), NaN when only
        special outputs changed.
    alternative : str or None
        For a comparison of another setting of the guard against the production one (``kernel[G5=always]
        vs kernel[G5=2^-6]``): that setting (``always``); None for a guard-on against guard-off row.
    assumption : str or None
        An assumption the row's points rest on that the production kernel may not meet (``the whole
        task as one tile``); a keep or drop resting on it becomes ``depends``.
    not_exercised_because : str or None
        Why the guard did not act, for a row that is not exercised.
    link : str
        Where the row is shown (a relative link, for the page).
    """

    guard: str
    machine: str
    format: str
    study: str = ""
    comparison: str = ""
    verdict: str = "no_effect"
    exercised: bool = True
    count: int = 0
    fired: int = 0
    changed: int = 0
    better: int = 0
    worse: int = 0
    specials_fixed: int = 0
    specials_caused: int = 0
    median_change_bits: float = math.nan
    alternative: str | None = None
    assumption: str | None = None
    not_exercised_because: str | None = None
    link: str = ""


@dataclass(frozen=True)
class Decision:
    """A decision with its effect word, its one-line reason and the rows it rests on.

    ``to`` is what a ``change`` changes the guard to, ``on`` what a ``depends`` depends on (a few words),
    ``basis`` the row the reason reads, ``weak`` marks a decision that carries no evidence either way (a row
    not exercised, or inconclusive), which a cell overrides with any decisive row.
    """

    decision: str
    effect: str
    reason: str
    evidence: tuple = field(default_factory=tuple)
    to: str | None = None
    on: str | None = None
    basis: Evidence | None = None
    weak: bool = False

    @property
    def word(self) -> str:
        """``keep``, ``keep (slightly)``, ``change to always``: the cell's first line."""
        text = self.decision + (f" to {self.to}" if self.to else "")
        return text + (f" ({self.effect})" if self.effect not in ("none", "") and self.decision != "depends" else "")


def effect_word(e: Evidence, t: Thresholds = THRESHOLDS) -> str:
    """The size of a row's change in one word (:data:`EFFECTS`).

    ``none`` when nothing changed; ``strongly`` when special outputs fixed (or caused) outnumber half
    the net of the finite ones, or the median change is at least ``t.strong_bits``; ``slightly`` when
    the median change is under ``t.slight_bits`` and the net ``|better - worse| / changed`` is under
    ``t.small_net``; ``clearly`` otherwise.

    Examples
    --------
    >>> effect_word(Evidence("G7", "npu+ftz", "fp32", verdict="helps", changed=18215, better=17391,
    ...                      median_change_bits=19.64))
    'strongly'
    >>> effect_word(Evidence("G5", "npu", "fp32", verdict="helps", changed=478, better=287, worse=162,
    ...                      median_change_bits=1.05))
    'clearly'
    """
    if int(e.changed) == 0:
        return "none"
    specials = abs(int(e.specials_fixed) - int(e.specials_caused))
    net = abs(int(e.better) - int(e.worse))
    med = _nan(e.median_change_bits)
    if specials and specials >= 0.5 * max(net, 1):
        return "strongly"
    if not math.isnan(med) and abs(med) >= t.strong_bits:
        return "strongly"
    small_net = net / max(int(e.changed), 1) < t.small_net
    if (math.isnan(med) or abs(med) < t.slight_bits) and small_net:
        return "slightly"
    return "clearly"


def _counts(e: Evidence) -> str:
    text = f"{e.better:,} better / {e.worse:,} worse"
    med = _nan(e.median_change_bits)
    if math.isfinite(med):
        text += f", median {med:+.2g} b"
    if e.specials_fixed or e.specials_caused:
        text += f", {e.specials_fixed:,} specials fixed" + (f", {e.specials_caused:,} caused"
                                                          if e.specials_caused else "")
    return text


def decide(e: Evidence, t: Thresholds = THRESHOLDS) -> Decision:
    """The decision for one verdict row (module docstring; thresholds ``t``).

    Examples
    --------
    >>> decide(Evidence("G7", "ieee", "fp32", exercised=False, not_exercised_because="no weight")).word
    'depends'
    >>> decide(Evidence("G5", "npu", "fp32", verdict="helps", changed=262502, better=167523, worse=94979,
    ...                 median_change_bits=0.56, alternative="always")).word
    'change to always (clearly)'
    """
    effect = effect_word(e, t)
    fmt = f" {e.format}" if e.format else ""
    if not e.exercised:
        why = e.not_exercised_because or "its condition held at none of the points"
        return Decision("depends", "none", f"not exercised{fmt} ({why})", (e,), on="inputs that exercise it",
                        basis=e, weak=True)
    if e.alternative is not None:
        if e.verdict == "helps":
            return Decision("change", effect, f"{e.alternative} beats the production setting{fmt}: {_counts(e)}",
                            (e,), to=e.alternative, basis=e)
        return Decision("keep", "none", f"{e.alternative} does not beat the production setting{fmt} "
                        f"({e.verdict.replace('_', ' ')})", (e,), basis=e)
    rare = e.fired and e.changed / max(int(e.fired), 1) < t.rare_share
    where = f" (on {e.changed:,} of {e.fired:,} points it acted on)" if rare else ""
    changed = max(int(e.changed), 1)
    if e.verdict == "no_effect":
        decision = Decision("drop", "none", f"acted on {e.fired:,} points{fmt}, changed no output", (e,), basis=e)
    elif e.verdict == "helps" or (e.verdict == "mixed" and e.worse + e.specials_caused < t.rare_share * changed):
        rare_loss = f"; {e.worse:,} worse (rare)" if e.verdict == "mixed" else ""
        decision = Decision("keep", effect, f"helps{fmt}: {_counts(e)}{where}{rare_loss}", (e,), basis=e)
    elif e.verdict in ("hurts", "mixed") and (not e.specials_fixed or e.better < t.rare_share * changed):
        decision = Decision("drop", effect, f"{e.verdict}{fmt}: {_counts(e)}{where}", (e,), basis=e)
    elif e.verdict in ("hurts", "mixed"):
        decision = Decision("change", effect, f"{e.verdict}{fmt}: fixes specials but costs finite outputs "
                            f"({_counts(e)}); narrow its condition", (e,), to="a narrower condition", basis=e)
    else:
        return Decision("depends", "none", f"no significant difference{fmt}: {_counts(e)}", (e,),
                        on="more points (no significant difference)", basis=e, weak=True)
    if e.assumption and decision.decision in ("keep", "drop"):
        return Decision("depends", effect, f"{decision.decision} only if {e.assumption} holds: "
                        f"{decision.reason}", (e,), on="an assumption: " + e.assumption.split(" (")[0], basis=e)
    return decision


_ORDER = {w: i for i, w in enumerate(EFFECTS)}


def decide_cell(rows, t: Thresholds = THRESHOLDS) -> Decision:
    """The decision for one (guard, machine) cell from all its verdict rows (formats, studies).

    Rules, in order: no row gives ``depends`` (nothing measured); a weak row (not exercised,
    inconclusive) counts only when no row carries evidence; any ``change`` wins (another setting beats the production one: the best
    effect's); rows that all agree give that decision (the strongest effect's reason); rows that
    disagree give ``depends`` on what they differ by (format or study), each side named.

    Examples
    --------
    >>> fp16 = Evidence("G8", "npu", "fp16", verdict="helps", changed=306179, better=303229, worse=1601,
    ...                 median_change_bits=0.5)
    >>> fp32 = Evidence("G8", "npu", "fp32", exercised=False, not_exercised_because="fp32 output")
    >>> decide_cell([fp16, fp32]).decision
    'keep'
    """
    rows = list(rows)
    if not rows:
        return Decision("depends", "none", "not measured on this machine", on="a study on this machine",
                        weak=True)
    decisions = [decide(e, t) for e in rows]
    strong = [d for d in decisions if not d.weak]
    if not strong:
        first = next((d for d in decisions if d.basis.exercised), decisions[0])
        return Decision("depends", "none", first.reason, tuple(rows), on=first.on, basis=first.basis, weak=True)
    changes = [d for d in strong if d.decision == "change"]
    if changes:
        best = max(changes, key=lambda d: _ORDER[d.effect])
        return Decision("change", best.effect, best.reason, tuple(rows), to=best.to, basis=best.basis)
    kinds = list(dict.fromkeys(d.decision for d in strong))
    if len(kinds) == 1:
        best = max(strong, key=lambda d: _ORDER[d.effect])
        return Decision(kinds[0], best.effect, best.reason, tuple(rows), on=best.on, basis=best.basis)
    used = [d.basis for d in strong]
    by = "format" if len({e.format for e in used}) > 1 and len({e.study for e in used}) == 1 else "study"
    sides = []
    for kind in kinds:
        mine = [d for d in strong if d.decision == kind]
        names = list(dict.fromkeys(d.basis.format if by == "format" else d.basis.study for d in mine))
        sides.append(f"{kind} for {', '.join(names)} ({mine[0].reason})")
    return Decision("depends", "none", f"on the {by}: " + "; ".join(sides), tuple(rows), on=f"the {by}",
                    basis=strong[0].basis)


def rule_text(t: Thresholds = THRESHOLDS) -> str:
    """The decision rule in words, with its thresholds (the review page prints it)."""
    return (
        "Per verdict row: not exercised or inconclusive -> depends (no evidence either way); no_effect -> drop; "
        "helps -> keep; hurts -> drop; mixed, or hurts while fixing special outputs -> change (narrow its "
        f"condition), unless its losing side is under {t.rare_share:g} of the changed outputs (then the winning "
        "side decides); a row comparing another setting with the production one -> change to that setting when "
        "it helps, else keep; a keep or drop resting on an assumption the production kernel may not meet -> "
        "depends. Per cell (guard x machine): rows with evidence override rows without; any change wins; rows "
        "that agree give their decision; rows that disagree give depends, on the format or the study. Effect: "
        "strongly when special outputs fixed "
        f"or caused outnumber half the net, or the median change is at least {t.strong_bits:g} bits; slightly "
        f"when the median change is under {t.slight_bits:g} bit and the net |better - worse| / changed is under "
        f"{t.small_net:g}; clearly otherwise; a change on under {t.rare_share:g} of the points the guard acted "
        "on is called rare in the reason.")


def plateau(tau_lo, tau_hi, better, worse, level: float = SIGNIFICANCE):
    """The interval of thresholds whose net is indistinguishable from the best, from octaves of tau.

    The octaves (``tau_lo[i] < tau <= tau_hi[i]``, largest first) hold the points whose decision
    changes between their bounds, with how many get better and worse when tau rises through them.
    Walking down from the top, an octave whose better/worse split is not significant (two-sided
    exact sign test at ``level``) cannot be told from the one above; the walk stops at the first
    that can.  Returns ``(lo, hi)``: every tau in ``[lo, hi]`` is on the plateau.

    Examples
    --------
    >>> plateau([0.5, 0.25, 0.125], [1.0, 0.5, 0.25], [1, 48197, 21684], [0, 30901, 12764])
    (0.5, 1.0)
    """
    p = sign_test(better, worse)
    lo = hi = float(tau_hi[0])
    for a, p_value in zip(tau_lo, p):
        if p_value < level:
            break
        lo = float(a)
    return lo, hi
