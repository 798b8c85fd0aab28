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


def fmt_num(value) -> str:
    """The one spelling of a number in report text (findings cite it verbatim).

    Two styles, each for one kind of number: a count (an integer, or a whole float below 1e6) with
    thousands separators (``1,142,784``); a measure in plain digits from 1e-3 to 1e6 (4 significant
    digits, one decimal with separators from 1e4: ``0.5012``, ``27,744.8``) and past either end in 3
    significant digits with an exponent (``8.77e+07``, ``1.7e-08``); ``inf`` and ``NaN`` as such.  A
    float that is not a whole number never reads as one: in plain digits it gets as many digits as it
    takes (a share 0.99995 is ``0.99995``, never ``1``).

    Examples
    --------
    >>> fmt_num(1142784), fmt_num(0.50123456), fmt_num(float("inf")), fmt_num(0.9999512)
    ('1,142,784', '0.5012', 'inf', '0.99995')
    >>> fmt_num(87676456.4), fmt_num(1125899898268711.5), fmt_num(5.352e44), fmt_num(27744.8)
    ('8.77e+07', '1.13e+15', '5.35e+44', '27,744.8')
    """
    if isinstance(value, str):  # a hex float or label: verbatim
        return value
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, (int, np.integer)):
        return f"{int(value):,}"
    v = float(value)
    if np.isnan(v):
        return "NaN"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    if v == 0.0:
        return "0"
    if abs(v) >= 1e6 or abs(v) < 1e-3:
        return _exponent_form(v)
    if v == int(v):
        return f"{int(v):,}"
    if abs(v) >= 1e4:  # one decimal: 16,777.9 must not read as more than 16,778
        return f"{v:,.1f}"
    digits = 4
    text = f"{v:.{digits}g}"
    while float(text) == int(float(text)) and digits < 17:  # 0.99995 is not 1, 2.99996 not 3
        digits += 1
        text = f"{v:.{digits}g}"
    return text


def _exponent_form(v: float) -> str:
    """``v`` in 3 significant digits with an exponent of at least two digits (``8.77e+07``, ``1.7e-08``)."""
    mantissa, exponent = f"{v:.2e}".split("e")
    mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{exponent}"


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
