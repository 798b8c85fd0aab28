"""Shared fixtures: the reference points computed independently of mpmath (Arb)."""

import csv
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


def load_reference_points():
    """Rows of tests/data/oracle_points.csv with floats parsed from hex."""
    with open(DATA / "oracle_points.csv") as fh:
        lines = [line for line in fh if not line.startswith("#")]
    rows = []
    for rec in csv.DictReader(lines):
        row = dict(rec)
        for key in ("x", "alpha", "gamma", "weight", "dout", "fp32", "fp16", "bf16"):
            row[key] = float.fromhex(rec[key])
        row["t"] = int(rec["t"])
        row["count"] = int(rec["count"])
        rows.append(row)
    return rows


@pytest.fixture(scope="session")
def reference_points():
    return load_reference_points()
