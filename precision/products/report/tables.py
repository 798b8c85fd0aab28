"""Helpers every report section shares: statistic tables from the run, row order, witnesses, labels.

The statistics themselves are :mod:`precision.analysis.scoring`'s (:class:`GroupStats`
and :class:`PairedStats` merged by the keys a table needs); this module only
selects, orders and spells them.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from precision.exact.formats import get_format
from precision.products.report.findings import fmt_num
from precision.engine.sweep import COMPARISON_KEYS, comparison_table, hex_witnesses, sort_table
from precision.recipes.target_kinds import target_text

__all__ = ["stat_table", "group_table", "paired_table", "ordered", "region_bounds", "region_text", "short_hex", "exact_text", "decimal_text", "inputs_text", "maximum_label", "describe_error",
           "error_kind"]


def ordered(frame: pd.DataFrame, run) -> pd.DataFrame:
    """Rows in run order (variants and machines as in the study, regions by x, bracket bands by C)."""
    return sort_table(frame, run.variants, run.machines, ["all", *run.regions], run.brackets, run.operator.ATTRIBUTES)


def group_table(merged, by) -> pd.DataFrame:
    """``merged.table(by)`` (a merged :class:`~precision.analysis.groups.GroupStats`) with ``not_correct`` beside
    ``share_correct``: the outputs not correctly rounded, the count every printed share carries."""
    t = merged.table(list(by))
    f = merged.frame
    t.insert(t.columns.get_loc("share_correct") + 1, "not_correct",
             (f["count"] - f["n_correct"]).to_numpy().astype("int64"))
    return t


def stat_table(run, by) -> pd.DataFrame:
    """:class:`~precision.analysis.groups.GroupStats` of the run merged by the columns ``by``, in run order (witness
    inputs in hex; ``not_correct`` beside ``share_correct``, :func:`group_table`)."""
    by = list(by)
    return hex_witnesses(ordered(group_table(run.stats.merge(by), by), run))


def paired_table(run, by=COMPARISON_KEYS) -> pd.DataFrame:
    """The run's paired comparisons merged by ``by`` (must include ``region``; rows ``all`` added)."""
    return hex_witnesses(comparison_table(run.paired, run.variants, run.machines, run.regions, by,
                                          separate=run.separate))


def region_bounds(run) -> dict:
    """Region label -> its (lower, upper) edges of x, from the run's region edges (numbers, never parsed from the
    labels; the outer regions open to -inf and +inf)."""
    edges = [float(e) for e in run.region_edges]
    bounds = [-math.inf, *edges, math.inf]
    return dict(zip(run.regions, zip(bounds[:-1], bounds[1:])))


def region_text(label: str) -> str:
    """A region label in a sentence: ``x in [8, 20)``, ``x >= 20``."""
    return f"x in {label}" if label.startswith("[") else label


def short_hex(v) -> str:
    """A hex float without trailing zero digits (``0x1.4p+4``); exact, like :meth:`float.hex`.

    Examples
    --------
    >>> short_hex(20.0), short_hex(-0.25), short_hex(float("nan"))
    ('0x1.4p+4', '-0x1p-2', 'nan')
    """
    if isinstance(v, str):
        if "0x" not in v:
            return v
        v = float.fromhex(v)
    v = float(v)
    if not math.isfinite(v):
        return repr(v)
    h = v.hex()
    mant, exp = h.split("p")
    mant = mant.rstrip("0").rstrip(".")
    return f"{mant}p{exp}"


def exact_text(v) -> str:
    """An exact constant as a reader copies it: the hex float, the shortest decimal that reads back to it beside
    (float32's when the value is a float32, else float64's).

    Examples
    --------
    >>> exact_text(float.fromhex("0x1.000002p-1")), exact_text(0.015625), exact_text(0.1)
    ('0x1.000002p-1 (0.50000006)', '0x1p-6 (0.015625)', '0x1.999999999999ap-4 (0.1)')
    """
    v = float.fromhex(v) if isinstance(v, str) and "0x" in v else float(v)
    if not math.isfinite(v):
        return repr(v)
    return f"{short_hex(v)} ({decimal_text(v)})"


def decimal_text(v) -> str:
    """The shortest decimal that reads back to ``v``: float32's when ``v`` is a float32, else float64's.

    Examples
    --------
    >>> decimal_text("0x1.000002p-1"), decimal_text(0.1)
    ('0.50000006', '0.1')
    """
    v = float.fromhex(v) if isinstance(v, str) and "0x" in v else float(v)
    with np.errstate(over="ignore"):
        single = np.float32(v)
    return str(single) if math.isfinite(v) and float(single) == v else repr(v)


def inputs_text(row, prefix: str = "witness_", suffix: str = "", attributes=(), dout: bool = True) -> str:
    """One cell for a witness's inputs: ``pred=0x1.4p+4 (20) t=0 alpha=0x1p-2 gamma=-0x1p+1 w=none dout=0x1p+0``
    (pred exact in hex, its shortest decimal beside, :func:`decimal_text`; ``attributes``: the names of the run's
    operator's attributes, its ``ATTRIBUTES``, SigmoidFocalLossGrad's alpha and gamma here).

    The columns are ``<prefix><input><suffix>`` (``witness_pred``, ``finite_witness_pred``, ``witness_pred_outside``);
    ``dout`` False leaves out the upstream gradient (an operator without one: its ``INPUTS``).
    """
    def get(k):
        v = row[f"{prefix}{k}{suffix}"] if f"{prefix}{k}{suffix}" in row else None
        return None if v is None or (isinstance(v, float) and math.isnan(v)) else v
    if get("pred") is None:  # a maximum no point attained: no witness
        return ""
    parts = [f"pred={short_hex(get('pred'))} ({decimal_text(get('pred'))})"]
    if get("target") is not None:
        parts.append(f"t={target_text(get('target'))}")
    for key, name in (*((a, a) for a in attributes), ("weight", "w"), *((("dout", "dout"),) if dout else ())):
        v = get(key)
        if v is not None:
            parts.append(f"{name}={short_hex(v)}")
    return " ".join(parts)


def grid_scope(run) -> str:
    """The grid a run's claims hold on, in words: ``on the grid alpha 0.25, gamma 2`` (one value each),
    ``on the grid of 2 alpha x 13 gamma values`` or ``on the grid of 2 gamma values at alpha 0.25``; weight and
    dout only where the study varies them.  Empty
    for a run folder written before run.json held its grid.

    Its claims say nothing of attribute values off the grid (``precision hunt`` searches between them).
    """
    grid = run.grid
    if not grid:
        return ""
    shown = {k: v for k, v in grid.items() if k not in ("weight", "dout") or len(v) > 1}
    fixed = ", ".join(f"{k} {fmt_num(v[0])}" for k, v in shown.items() if len(v) == 1)
    varied = " x ".join(f"{fmt_num(len(v))} {k}" for k, v in shown.items() if len(v) > 1)
    if not varied:
        return f"on the grid {fixed}"
    return f"on the grid of {varied} values" + (f" at {fixed}" if fixed else "")


def maximum_label(run, fmt: str) -> str:
    """How a maximum over the run's ``fmt`` outputs relates to the max over the inputs they stand for.

    ``exhaustive`` when a pred set of the run enumerates every float of
    ``fmt`` (in its range): the max is then the max over those preds at the
    study's grid of attributes and selectors (:func:`grid_scope`, said);
    otherwise ``sampled (a lower bound)``.
    """
    grid = grid_scope(run)
    grid = f", {grid}" if grid else ""
    for p in run.run.get("pred_sets", []):
        if p.get("kind") == "exhaustive" and p.get("format") == fmt:
            lo, hi = p.get("range") or (None, None)
            where = f" in [{fmt_num(lo)}, {fmt_num(hi)}]" if lo is not None else ""
            return f"exhaustive: every {fmt} pred{where}{grid}"
    return f"sampled: a lower bound of the max over the pred range{grid}"


def error_kind(max_ulp, computed, exact, fmt) -> str:
    """The kind of a witness's error: ``special``, ``lost_to_zero``, ``spurious`` (the exact value rounds to
    zero or is subnormal and the output is far larger), ``off_by_factor`` (relative error >= 1), ``rounding``
    (within 1 ulp) or ``inaccurate``."""
    f = get_format(fmt)
    c, e = float(computed), float(exact)
    if not math.isfinite(max_ulp) or not math.isfinite(c):
        return "special"
    if c == 0 and e != 0:
        return "lost_to_zero"
    if e == 0 or abs(e) < 2.0 ** f.emin:
        return "spurious" if max_ulp > 1 else "rounding"
    if max_ulp <= 1:
        return "rounding"
    return "off_by_factor" if abs(c - e) >= abs(e) else "inaccurate"


def describe_error(max_ulp, computed, exact, fmt) -> str:
    """One line saying what an error of ``max_ulp`` ulp at (computed, exact) is, with its numbers.

    Explains saturated figures: an exact value below the format's normal
    range has the subnormal quantum as its ulp, so an O(1) output scores
    about 2^149 ulp in fp32 (2^24 in fp16).
    """
    f = get_format(fmt)
    c, e = float(computed), float(exact)
    kind = error_kind(max_ulp, c, e, f)
    if kind == "special":
        return "a NaN or inf output" if not math.isfinite(c) else "an output where the exact value overflows"
    if kind == "lost_to_zero":
        return f"the output is 0 where the exact value is {fmt_num(e)}"
    quantum = 2.0 ** (f.emin - f.prec + 1)
    if kind == "spurious":
        exact = "the exact value (0, or below float64's range)" if e == 0 else f"the exact value {fmt_num(e)}"
        where = "rounds to 0" if abs(e) < quantum / 2 else "is subnormal"
        return (f"{exact} {where} in {f.name}, whose ulp there is 2^{f.emin - f.prec + 1}; "
                f"the output {fmt_num(c)} is {fmt_num(abs(c) / quantum)} quanta")
    if kind == "rounding":
        return "within an ulp of the exact value: rounding error only"
    rel = abs(c - e) / abs(e)
    if kind == "off_by_factor":
        return f"the output {fmt_num(c)} is {fmt_num(c / e)} times the exact {fmt_num(e)}"
    bits = max(0.0, f.prec - math.log2(max(max_ulp, 1.0)))
    return f"relative error {fmt_num(rel)}: about {bits:.0f} of {f.prec} bits correct"

