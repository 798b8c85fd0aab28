"""The one spelling of a number in the toolkit's text: reports, findings, step attributions.

Lives in the ``io`` layer so that every layer that writes text (the attribution's sentences in ``analysis``,
the findings in ``products``) spells numbers alike.
"""

from __future__ import annotations

import numpy as np

__all__ = ["fmt_num"]


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
