"""The package's import contracts (pyproject's ``[tool.importlinter]``), checked with import-linter.

The layers of ``precision/`` (top down: entry points, the operator, products, sweep engine, analysis,
recipes, machines, exact arithmetic and files, errors) import only the layers below them, and every
top-level module is placed in one; no module imports, directly or through others, a sibling that imports
it back, at any depth.  The products and the engine never import an operator (they receive it as an
object, :mod:`precision.engine.operators`); operators never import each other; the command line reaches
one only through its package (its interface, ``precision/operators/<name>/__init__.py``).  A break fails this test (and so CI), naming
the imports that cause it.
"""

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
LAYERS = ["__main__", "cli", "operators", "products", "engine", "analysis", "recipes", "machine",
          "exact | io", "errors | layout"]


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
    assert sorted(contracts) == ["acyclic_siblings", "forbidden", "independence", "layers"]
    assert contracts["acyclic_siblings"]["ancestors"] == ["precision"]
    layers = contracts["layers"]
    assert (layers["containers"], layers["exhaustive"], layers["layers"]) == (["precision"], True, LAYERS)
    # every operator folder, present or future: the wildcards name none of them
    assert contracts["independence"]["modules"] == ["precision.operators.*"]
    interface = contracts["forbidden"]
    assert (interface["source_modules"], interface["forbidden_modules"]) == (["precision.cli"],
                                                                             ["precision.operators.*.*"])


def test_the_package_keeps_its_contracts():
    done = _lint(ROOT)
    assert done.returncode == 0 and "4 kept, 0 broken" in done.stdout, done.stdout[-2000:] + done.stderr


@pytest.mark.parametrize("edit, broken", [
    # an upward import: exact arithmetic reaching for a product (also a cycle between the two layers)
    (("exact/formats.py", "\nimport precision.products.gate\n"), "Layers"),
    # a top-level module outside every layer
    (("loose.py", '"""A module in no layer."""\n'), "Layers"),
    # a cycle inside one layer
    (("engine/executor.py", "\nimport precision.engine.sweep\n"), "No import cycles"),
    # the engine importing the operator, even its interface: it receives the operator as an object
    (("engine/executor.py", "\nimport precision.operators.sigmoid_focal_loss_grad\n"), "Layers"),
    # a product importing the operator
    (("products/gate.py", "\nfrom precision.operators.sigmoid_focal_loss_grad import get_variant\n"), "Layers"),
    # the command line reaching into the operator past its interface
    (("cli/options.py", "\nfrom precision.operators.sigmoid_focal_loss_grad.guards import get_variant\n"),
     "An operator's interface"),
    # one operator importing another
    (("operators/sigmoid_focal_loss/reduction.py",
      "\nimport precision.operators.sigmoid_focal_loss_grad.oracle\n"), "Operators are independent"),
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


def test_the_docs_are_the_protocol():
    """docs/operators.md lists every required name and every optional capability with its default, and says how
    many names the required core has; README's layout section says it too."""
    import re

    from precision.engine.operators import OPTIONAL, REQUIRED
    doc = (ROOT / "docs/operators.md").read_text()
    text = " ".join(doc.split())
    assert [int(k) for k in re.findall(r"The required core: (\d+) names", text)] == [len(REQUIRED)]
    for name in (*REQUIRED, *OPTIONAL):
        assert f"`{name}" in doc, name
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert [int(k) for k in re.findall(r"required core of (\d+) names", readme)] == [len(REQUIRED)]
