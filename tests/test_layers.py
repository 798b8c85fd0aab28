"""The package's import contracts (pyproject's ``[tool.importlinter]``), checked with import-linter.

The layers of ``precision/`` (top down: entry points, products, sweep engine, the operator, analysis,
recipes, machines, exact arithmetic and files, errors) import only the layers below them, and every
top-level module is placed in one; no module imports, directly or through others, a sibling that imports
it back, at any depth.  A break fails this test (and so CI), naming the imports that cause it.
"""

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
LAYERS = ["__main__", "cli", "products", "engine", "sigmoid_focal_loss_grad", "analysis", "recipes", "machine",
          "exact | io", "errors"]


def _lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([LINT, "--no-cache"], cwd=root, capture_output=True, text=True)


def _copy(tmp_path: Path) -> Path:
    """A copy of the package and its contracts, to break on purpose."""
    shutil.copytree(ROOT / "precision", tmp_path / "precision", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_contracts_cover_the_whole_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert config["root_package"] == "precision"
    contracts = {c["type"]: c for c in config["contracts"]}
    assert sorted(contracts) == ["acyclic_siblings", "layers"]
    assert contracts["acyclic_siblings"]["ancestors"] == ["precision"]
    layers = contracts["layers"]
    assert (layers["containers"], layers["exhaustive"], layers["layers"]) == (["precision"], True, LAYERS)


def test_the_package_keeps_its_contracts():
    done = _lint(ROOT)
    assert done.returncode == 0 and "2 kept, 0 broken" in done.stdout, done.stdout[-2000:] + done.stderr


@pytest.mark.parametrize("edit, broken", [
    # an upward import: exact arithmetic reaching for a product (also a cycle between the two layers)
    (("exact/formats.py", "\nimport precision.products.gate\n"), "Layers"),
    # a top-level module outside every layer
    (("loose.py", '"""A module in no layer."""\n'), "Layers"),
    # a cycle inside one layer
    (("engine/executor.py", "\nimport precision.engine.sweep\n"), "No import cycles"),
])
def test_a_break_fails_the_lint(tmp_path, edit, broken):
    root = _copy(tmp_path)
    path, text = edit
    target = root / "precision" / path
    target.write_text((target.read_text() if target.exists() else "") + text)
    done = _lint(root)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr
    report = done.stdout.split("Broken contracts", 1)[-1]  # each broken contract's name, then its imports
    assert done.stdout.count("Broken contracts") == 1 and broken in report, done.stdout[-3000:]
