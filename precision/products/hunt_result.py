"""What a worst-case hunt found (:class:`HuntResult`): its maxima with hex witnesses, their labels
(exhaustive or hunted), the points it kept, and its text and JSON forms (``precision hunt --json``)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from precision.engine.operators import DEFAULT_OPERATOR, get_operator
from precision.recipes.target_kinds import target_json, target_text

__all__ = ["HuntResult"]


@dataclass(frozen=True)
class HuntResult:
    """What a hunt found.

    Attributes
    ----------
    variant, machine, fmt : str
        What was hunted (``fmt``: the pred and output format).
    kind : {"exhaustive", "hunted"}
        How the maximum was found (see :data:`precision.products.hunt.KINDS`).
    max_ulp : float
        The largest error found (inf when a special point was found).
    max_finite_ulp : float
        The largest finite error found (NaN when none).
    witness : dict
        Inputs of ``max_ulp`` in hex: ``pred``, ``target`` (int), the operator's attributes
        (SigmoidFocalLossGrad: ``alpha``, ``gamma``), ``weight`` (``"none"``), ``dout``; empty when no point
        was scored.
    top : pandas.DataFrame
        The reported points (columns in the module docstring).
    points : int
        Points scored (outside the neighbourhood only, when restricted).
    specials : int
        Special points scored (NaN/inf where the exact value is finite, or a
        finite value where it overflows); ``max_ulp`` is inf when nonzero.
    unresolved : int
        Points the oracle could not decide (not ranked).
    fresh, fresh_not_correct : int
        The points drawn afresh (the seeded sampling, not the local search around the worst; every point of an
        exhaustive hunt) and, of them, those not correctly rounded (special outputs included; undecided ones
        left out of both): their share is a sample's, where the worst points' neighbours are not.
    seconds : float
        Wall time of the hunt.
    budget_seconds, budget_points : float or int or None
        The budget given (None for the other, and for both when exhaustive).
    seed : int
    workers, streams : int
    attributes : tuple
        ``(name, values)`` of each of the operator's attributes searched as a list (float32 values), in search
        order (the terms attribute first).
    ranges : tuple
        ``(name, lo, hi)`` of each attribute searched as a real range (float32 ends), in search order.
    targets : tuple
        The selectors searched.
    outside_neighbourhood : bool
    operator : str
        The name of the operator hunted (:func:`precision.engine.operators.get_operator`).
    """

    variant: str
    machine: str
    fmt: str
    kind: str
    max_ulp: float
    max_finite_ulp: float
    witness: dict
    top: pd.DataFrame = field(repr=False)
    points: int
    specials: int
    unresolved: int
    seconds: float
    budget_seconds: float | None
    budget_points: int | None
    seed: int
    workers: int
    streams: int
    attributes: tuple
    targets: tuple
    outside_neighbourhood: bool
    operator: str = DEFAULT_OPERATOR
    ranges: tuple = ()
    fresh: int = 0
    fresh_not_correct: int = 0

    @property
    def label(self) -> str:
        """How the maximum was found, for a report: ``hunted (2,345,678 points in 60.0 s, seed 0)``."""
        if self.kind == "exhaustive":
            return f"exhaustive ({self.points:,} points)"
        budget = (f"budget {self.budget_points:,} points" if self.budget_points is not None
                  else f"budget {self.budget_seconds:g} s")
        return f"hunted ({self.points:,} points in {self.seconds:.1f} s, {budget}, seed {self.seed})"

    def values(self, attribute: str) -> tuple:
        """The values searched of one attribute."""
        return dict(self.attributes)[attribute]

    @property
    def points_per_second(self) -> float:
        return self.points / self.seconds if self.seconds > 0 else float("nan")

    def corpus_preds(self) -> list:
        """Preds of the reported points that are not correctly rounded (err > 0.5 ulp), worst first."""
        rows = self.top[~(self.top["err_ulp"] <= 0.5)]
        return list(dict.fromkeys(float(v) for v in rows["pred"]))

    def lines(self) -> list:
        """Human-readable output: one line per reported point (fixed field order), then the summary line."""
        out = []
        op = get_operator(self.operator)
        for r in self.top.to_dict("records"):
            attributes = " ".join(f"{a}={r[f'{a}_hex']}" for a in op.ATTRIBUTES)
            dout = f" dout={(1.0).hex()}" if "dout" in op.INPUTS else ""  # (the operator's inputs: its INPUTS)
            cancellation = f" C={r['c_factor']:.4g}" if op.ROOT_NEIGHBOURHOOD_C is not None else ""
            out.append(
                f"{r['rank']:>3} err={_ulps(r['err_ulp'])} ulp alone={_ulps(r['err_ulp_alone'])} class={r['class']} "
                f"pred={r['pred_hex']} ({r['pred']!r}) target={target_text(r['target'])} {attributes} "
                f"weight=none{dout} got={r['computed_hex']} "
                f"want={r['rounded_hex']}{cancellation}")
        c_threshold = op.ROOT_NEIGHBOURHOOD_C
        zone = f" outside the root neighbourhood (C < {c_threshold:g})" if self.outside_neighbourhood else ""
        w = " ".join(f"{k}={v}" for k, v in self.witness.items())
        zone += "".join(f", {name} in [{lo:g}, {hi:g}]" for name, lo, hi in self.ranges)
        out.append(f"hunt {self.variant} {self.fmt} {self.machine}{zone}: max_ulp={_ulps(self.max_ulp)} "
                   f"max_finite_ulp={_ulps(self.max_finite_ulp)} {self.label}, {self.workers} workers, "
                   f"{self.points_per_second:,.0f} points/s, {self.specials} special, {self.unresolved} unresolved; "
                   f"witness {w}")
        return out

    def to_json(self) -> dict:
        """A JSON-ready dict: ``max_ulp``, ``witness`` (hex inputs), ``kind``, ``seconds``, ``points``, ``top``, ...

        Non-finite numbers are written as the strings ``"inf"`` / ``"nan"`` (strict JSON has no inf).
        """
        top = []
        op = get_operator(self.operator)
        names = list(op.ATTRIBUTES)
        for r in self.top.to_dict("records"):
            top.append({
                "rank": int(r["rank"]), "err_ulp": _json_num(r["err_ulp"]),
                "err_ulp_alone": _json_num(r["err_ulp_alone"]),
                "class": r["class"], "pred": r["pred_hex"], "target": target_json(r["target"]),
                **{a: r[f"{a}_hex"] for a in names}, "weight": "none",
                **({"dout": (1.0).hex()} if "dout" in op.INPUTS else {}), "computed": r["computed_hex"],
                "rounded": r["rounded_hex"], "exact": _json_num(r["exact"]), "c_factor": _json_num(r["c_factor"]),
                "pred_decimal": repr(float(r["pred"])),
            })
        return {
            "variant": self.variant, "machine": self.machine, "format": self.fmt, "kind": self.kind,
            "label": self.label, "max_ulp": _json_num(self.max_ulp), "max_finite_ulp": _json_num(self.max_finite_ulp),
            "witness": dict(self.witness), "seconds": round(self.seconds, 3), "points": self.points,
            "points_per_second": _json_num(round(self.points_per_second, 1)),
            "budget": {"seconds": self.budget_seconds, "points": self.budget_points},
            "seed": self.seed, "workers": self.workers, "streams": self.streams,
            **{f"{a}s": [float(v).hex() for v in values] for a, values in self.attributes},
            **{f"{a}_range": [float(lo).hex(), float(hi).hex()] for a, lo, hi in self.ranges},
            "targets": [target_json(t) for t in self.targets], "outside_neighbourhood": self.outside_neighbourhood,
            "specials": self.specials, "unresolved": self.unresolved, "fresh_points": self.fresh,
            "fresh_not_correct": self.fresh_not_correct, "top": top,
        }


def _ulps(v: float) -> str:
    return "inf" if v == math.inf else "nan" if math.isnan(v) else f"{v:.6g}"


def _json_num(v):
    v = float(v)
    return v if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
