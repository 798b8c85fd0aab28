"""Registering an operator for one test (a module text put on the path, its name added to the registry), and a
small study of it."""

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


def operator_study(operator: str, description: str, *, seed: int, stop: float, num: int,
                   targets: str = "[0, 1]") -> str:
    """A small study of the registered ``operator`` (named after it): a linear fp32 pred grid over
    [-stop, stop], the ``targets`` (TOML), alpha 0.25, its kernel and candidate on npu compared, four sections."""
    return f'''
name = "{operator}"
operator = "{operator}"
description = "{description}"
seed = {seed}

[[pred]]
kind = "grid"
format = "fp32"
start = {-stop!r}
stop = {stop!r}
num = {num}
spacing = "linear"

[points]
target = {targets}
alpha = [0.25]
weight = ["none"]
dout = [1.0]
reduction = "none"
profiles = ["fp32"]

[run]
variants = ["kernel", "candidate"]
machines = ["npu"]
compare = [["candidate", "kernel"]]

[report]
sections = ["verdicts", "dominant", "summary", "standards"]
'''
