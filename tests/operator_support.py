"""Registering an operator for one test: a module text put on the path, its name added to the registry."""

from __future__ import annotations

from precision.engine import operators
from precision.engine.operators import get_operator


def register(tmp_path, monkeypatch, name: str, source: str):
    """The operator ``name`` registered from the module text ``source`` (put on the path for this test only):
    ``get_operator(name)``."""
    folder = tmp_path / f"{name}_operator"
    folder.mkdir()
    (folder / f"{name}_operator.py").write_text(source)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setitem(operators.OPERATORS, name, f"{name}_operator")
    return get_operator(name)
