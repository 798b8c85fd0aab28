"""The findings checker shared by the report tests: every cited number against its table cell."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from precision.products.report.tables import fmt_num

__all__ = ["check_findings"]

_SPECIAL = {"inf": "inf", "-inf": "-inf", "NaN": "nan"}


def _is_hex(v) -> bool:
    return isinstance(v, str) and v not in _SPECIAL and "0x" in v


def _value(v):
    if _is_hex(v):
        return float.fromhex(v)
    return float(v) if not isinstance(v, str) else float(_SPECIAL[v])


def _same(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)


def check_findings(folder: Path) -> int:
    """Every cited number appears in its sentence and equals its table cell; returns how many were checked."""
    data = json.loads((folder / "findings.json").read_text())
    checked = 0
    for f in data["findings"] + [{**a, "text": a["sentence"]} for a in data.get("answers", [])]:
        by_name = {n["name"]: n for n in f["numbers"]}
        for n in f["numbers"]:
            assert n["text"] in f["text"], (n, f["text"])
            if _is_hex(n["value"]):  # a hex-float witness is quoted verbatim
                assert n["text"] == n["value"]
            else:
                assert n["text"] == fmt_num(_value(n["value"]) if not isinstance(n["value"], int) else n["value"])
            if n["op"] == "sub":
                a, b = (_value(by_name[k]["value"]) for k in n["of"])
                assert _same(_value(n["value"]), 0.0 if a == b else a - b)
                continue
            if n["op"] == "sum":
                assert _same(_value(n["value"]), sum(_value(by_name[k]["value"]) for k in n["of"]))
                continue
            table = pd.read_csv(folder / "tables" / n["table"], dtype={"region": str})
            mask = np.ones(len(table), dtype=bool)
            for k, v in n["where"].items():
                col = table[k]
                if isinstance(v, str) and k not in ("variant", "machine", "format", "profile", "region", "guard",
                                                    "with_variant", "without_variant", "band", "subset",
                                                    "comparison", "subject", "kind", "bracket", "zone", "step",
                                                    "cause", "attributed", "source", "gammas", "alphas",
                                                    "targets"):
                    v = _value(v)
                mask &= (col.isna() if (isinstance(v, float) and math.isnan(v)) else (col == v)).to_numpy()
            assert mask.sum() == 1, (n["table"], n["where"])
            cell = table.loc[mask, n["column"]].iloc[0]
            assert _same(_value(cell) if _is_hex(cell) else float(cell), _value(n["value"])), n
            checked += 1
    return checked
