"""The suite's schedule: every test conftest's LONGEST_FIRST starts first exists under that name.

A renamed or removed long test would otherwise silently fall back to pytest's order, and might start last
while the other test process sits idle (CI time).
"""

from pathlib import Path

import pytest

from conftest import LONGEST_FIRST


def test_longest_first_names_collected_tests(request):
    items = request.session.items
    every_file = set(Path(__file__).parent.rglob("test_*.py"))
    if not every_file <= {Path(item.path) for item in items}:
        pytest.skip("only part of the suite was collected")
    names = {item.name for item in items}
    assert [name for name in LONGEST_FIRST if name not in names] == []
    # and they do start first, in their order
    assert [item.name for item in items[:len(LONGEST_FIRST)]] == list(LONGEST_FIRST)
