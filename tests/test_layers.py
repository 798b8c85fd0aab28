"""The package's import contracts (pyproject's ``[tool.importlinter]``), checked with import-linter.

No module imports, directly or through others, a sibling that imports it back, at any depth of the
package: a cycle fails this test (and so CI), naming the imports that would break it.
"""

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_contract_covers_the_whole_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    assert config["root_package"] == "precision"
    assert [(c["type"], c["ancestors"]) for c in config["contracts"]] == [("acyclic_siblings", ["precision"])]


def test_no_import_cycles():
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or "lint-imports"
    done = subprocess.run([lint, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and "1 kept, 0 broken" in done.stdout, done.stdout[-2000:] + done.stderr
