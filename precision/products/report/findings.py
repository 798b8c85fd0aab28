"""Findings: sentences computed from the report tables, each citing its numbers.

No sentence is fixed text: every number in a finding is read from a row of a
report table (:class:`Cite`: table file, the row's key values, the column) or
derived from cited numbers by a stated operation, and the verdicts ("the data
do not support ...") follow from comparisons of those numbers.  ``findings.json``
holds every finding with its citations so a test can check them against the
CSV tables.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from precision.io.numbers import fmt_num

__all__ = ["Cite", "Finding", "cite", "derive", "fmt_num", "fmt_share", "findings_json", "p_text"]


@dataclass
class Cite:
    """One number of a finding: its value, its spelling in the text, and where it comes from.

    ``table`` is a CSV file of the report's ``tables/`` folder, ``where`` the
    key columns selecting exactly one row, ``column`` the column; a derived
    number has ``op`` (``"sub"``: a - b, ``"sum"``: the sum) and ``of`` (the
    names of cited numbers of the same finding) instead.
    """

    name: str
    value: float
    text: str
    table: str | None = None
    where: dict = field(default_factory=dict)
    column: str | None = None
    op: str | None = None
    of: list = field(default_factory=list)


@dataclass
class Finding:
    """A computed sentence and the numbers it cites.

    ``rank`` orders findings for the first screen (lower first; the report
    shows at most :data:`precision.products.report.render.FIRST_SCREEN_FINDINGS` there
    and every finding in its section); ``shown`` marks a finding whose text a
    section already puts on the first screen as a block of its own (it is
    not repeated in the first screen's list).
    """

    id: str
    section: str
    text: str
    numbers: list
    rank: int = 50
    shown: bool = False


def _py(v):
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    return v


def cite(name: str, table: str, frame: pd.DataFrame, where: dict, column: str) -> Cite:
    """Cite ``frame[column]`` at the one row matching ``where`` (``table`` names the CSV)."""
    mask = np.ones(len(frame), dtype=bool)
    for k, v in where.items():
        col = frame[k]
        mask &= (col.isna() if (isinstance(v, float) and np.isnan(v)) else (col == v)).to_numpy()
    rows = frame[mask]
    if len(rows) != 1:
        raise LookupError(f"{table}: {where} selects {len(rows)} rows, expected 1")
    value = _py(rows[column].iloc[0])
    return Cite(name, value, fmt_num(value), table, {k: _py(v) for k, v in where.items()}, column)


def derive(name: str, a: Cite, b: Cite) -> Cite:
    """The difference a - b of two cited numbers (0 when they are equal, inf - inf included)."""
    value = 0.0 if a.value == b.value else float(a.value) - float(b.value)
    if isinstance(a.value, int) and isinstance(b.value, int):
        value = int(a.value - b.value)
    return Cite(name, value, fmt_num(value), op="sub", of=[a.name, b.name])


def fmt_share(share, misses=None, what: str = "not correctly rounded") -> str:
    """The one spelling of a share (of outputs correctly rounded, within a bound, ...), with its misses.

    The share by :func:`fmt_num` (exactly 1 only when nothing is missed),
    then, when ``misses`` is given and not 0, the count of outputs outside the
    share beside it: ``0.9995 (310 not correctly rounded)``.

    Examples
    --------
    >>> fmt_share(1.0, 0), fmt_share(634570 / 634880, 310), fmt_share(63487 / 63488, 1)
    ('1', '0.9995 (310 not correctly rounded)', '0.99998 (1 not correctly rounded)')
    """
    text = fmt_num(share)
    if misses is not None and int(misses):
        text += f" ({fmt_num(int(misses))} {what})"
    return text


def p_text(p: float) -> str:
    """A p-value as the findings spell it: ``p = 0.0312``, ``p < 1e-300`` when it underflows."""
    return "p < 1e-300" if p < 1e-300 else f"p = {fmt_num(float(p))}"


def findings_json(findings: list) -> list:
    """findings as JSON-ready dicts (non-finite values as the strings ``inf``, ``-inf``, ``NaN``)."""
    def enc(v):
        if isinstance(v, float) and not np.isfinite(v):
            return fmt_num(v)
        return v
    rows = []
    for f in findings:
        d = asdict(f)
        for n in d["numbers"]:
            n["value"] = enc(n["value"])
            n["where"] = {k: enc(v) for k, v in n["where"].items()}
        rows.append(d)
    return rows
