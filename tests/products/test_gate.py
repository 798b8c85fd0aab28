"""The regression gate: committed budgets pass; a worse kernel, a tighter budget, a regression fail."""

import json
import os
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from precision.cli import main
from precision.products.gate import append_to_corpus, load_budgets

STUDIES = Path(__file__).resolve().parents[2] / "studies"


def umask_mode() -> int:
    """The mode an ordinary open() gives a new file in this process: 0o666 less the umask."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


@pytest.fixture(scope="module")
def gate_dir(tmp_path_factory):
    """A copy of the committed gate files (the gate appends to its corpus) and a shared cache."""
    root = tmp_path_factory.mktemp("gate")
    for name in ("budgets.toml", "gate.toml", "worst_cases.txt"):
        shutil.copy(STUDIES / name, root / name)
    return root


def gate(capsys, root, *extra, budgets="budgets.toml"):
    code = main(["gate", "--budgets", str(root / budgets), "--out", str(root / "run"),
                 "--cache-dir", str(root / "cache"), *extra])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_committed_budgets_pass_with_junit_and_json(gate_dir, capsys):
    code, lines, err = gate(capsys, gate_dir, "--junit", str(gate_dir / "j.xml"), "--json", str(gate_dir / "g.json"))
    _, budgets = load_budgets(gate_dir / "budgets.toml")
    checks = [line for line in lines if line.startswith(("PASS", "FAIL", "UNBOUNDED"))]
    assert code == 0, [line for line in lines if not line.startswith(("PASS", "UNBOUNDED"))]
    assert lines[0].startswith("gate: plan: ")
    assert len(checks) == sum(len(b.limits) for b in budgets) and all(c.startswith(("PASS ", "UNBOUNDED "))
                                                                      for c in checks)
    # the checks that cannot fail (limit=inf) are marked and counted apart: the committed budgets hold 56
    free = [c for c in checks if c.startswith("UNBOUNDED ")]
    infinite = sum(limit == float("inf") for b in budgets for _, limit in b.limits)
    assert infinite == 56 and len(free) == infinite and all(" limit=inf " in c for c in free)
    passed = len(checks) - len(free)
    assert lines[-1].startswith(f"gate: {len(checks)} checks of {len(budgets)} budgets, {passed} PASS, 0 FAIL, "
                                f"0 REGRESSION, {len(free)} UNBOUNDED (cannot fail), ")
    suite = ET.parse(gate_dir / "j.xml").getroot()
    assert suite.get("failures") == "0" and int(suite.get("tests")) == len(checks)
    assert int(suite.get("skipped")) == len(free) and len(suite.findall("testcase/skipped")) == len(free)
    data = json.loads((gate_dir / "g.json").read_text())
    assert data["failed"] == 0 and data["passed"] == passed and data["unbounded"] == len(free)
    # every line is parseable: status, variant, format, machine, region, metric, observed, limit, witness
    fields = checks[0].split(" ")
    assert len(fields) == 9 and fields[6].startswith("observed=") and fields[8].startswith("witness=pred=")
    # every file the gate and its run wrote has the mode open() gives under this umask (no 0600 temporary files)
    written = [gate_dir / "j.xml", gate_dir / "g.json", gate_dir / "worst_cases.txt",
               *(p for p in (gate_dir / "run").rglob("*") if p.is_file())]
    assert any(p.suffix == ".npz" for p in written)
    assert {p.name: oct(p.stat().st_mode & 0o777) for p in written} == {p.name: oct(umask_mode()) for p in written}


def test_tightened_budget_fails_with_its_line(gate_dir, capsys):
    text = (gate_dir / "budgets.toml").read_text()
    block = re.search(r'\[\[budget\]\]\nvariant = "kernel"\nformat = "fp32"\nmachine = "npu"\nregion = "\[-8, 0\)"\n'
                      r'max_ulp = ([^\n]+)\n', text)
    assert block, "the committed budgets hold a kernel fp32 npu [-8, 0) budget"
    observed = float(re.search(r"observed = \{ max_ulp = ([^,]+),", text[block.end():]).group(1))
    tight = text[:block.start(1)] + repr(observed * 0.99) + text[block.end(1):]
    (gate_dir / "tight.toml").write_text(tight)
    code, lines, _ = gate(capsys, gate_dir, budgets="tight.toml")
    fails = [line for line in lines if line.startswith("FAIL")]
    assert code == 1 and len(fails) == 1
    assert fails[0].startswith("FAIL kernel fp32 npu [-8, 0) max_ulp observed=") and re.search(r"witness=pred=-?0x", fails[0])


def test_worse_implementation_fails_against_kernel_budgets(gate_dir, capsys):
    # kernel-G2 (no log clamp) judged by the full kernel's budgets
    text = (gate_dir / "budgets.toml").read_text().replace('variant = "kernel"', 'variant = "kernel-G2"')
    (gate_dir / "worse.toml").write_text(text)
    study = (gate_dir / "gate.toml").read_text().replace('variants = ["kernel", ', 'variants = ["kernel-G2", ')
    assert 'variants = ["kernel-G2", ' in study
    (gate_dir / "worse_study.toml").write_text(study.replace('name = "gate"', 'name = "gate_worse"'))
    code = main(["gate", "--budgets", str(gate_dir / "worse.toml"), "--study", str(gate_dir / "worse_study.toml"),
                 "--out", str(gate_dir / "worse_run"), "--cache-dir", str(gate_dir / "cache")])
    lines = capsys.readouterr().out.splitlines()
    fails = [line for line in lines if line.startswith("FAIL")]
    assert code == 1 and fails
    assert all(line.startswith("FAIL kernel-G2 ") for line in fails)
    assert any(" nan observed=" in line and re.search(r"witness=pred=-?0x", line) for line in fails)


def test_baseline_regression_and_tighten(gate_dir, capsys):
    base = gate_dir / "base.json"
    code, _, _ = gate(capsys, gate_dir, "--baseline", str(base), "--update-baseline")
    assert code == 0 and base.exists() and base.stat().st_mode & 0o777 == umask_mode()
    code, lines, _ = gate(capsys, gate_dir, "--baseline", str(base))
    assert code == 0 and not any(line.startswith("REGRESSION") for line in lines)
    data = json.loads(base.read_text())
    key = next(k for k in data if k.startswith("kernel fp16 ieee all mean_bits"))
    data[key] = data[key] / 2  # pretend the previous kernel was twice as good
    base.write_text(json.dumps(data))
    code, lines, _ = gate(capsys, gate_dir, "--baseline", str(base))
    regressions = [line for line in lines if line.startswith("REGRESSION")]
    assert code == 1 and len(regressions) == 1 and regressions[0].startswith("REGRESSION kernel fp16 ieee all mean_bits")
    # a budget far above its observed value can tighten (exit status unchanged)
    loose = re.sub(r'(variant = "kernel"\nformat = "fp16"\nmachine = "ieee"\nregion = "\[-8, 0\)"\nmax_ulp = )[^\n]+',
                   r"\g<1>1000000.0", (gate_dir / "budgets.toml").read_text())
    (gate_dir / "loose.toml").write_text(loose)
    code, lines, _ = gate(capsys, gate_dir, budgets="loose.toml")
    tighten = [line for line in lines if line.startswith("TIGHTEN")]
    assert code == 0 and any(line.startswith("TIGHTEN kernel fp16 ieee [-8, 0) max_ulp") and "can tighten to" in line
                             for line in tighten)


@pytest.mark.parametrize("edit,words", [
    (lambda t: t.replace('variant = "kernel"', 'variant = 3', 1), ["budget[", ".variant", "expected a string"]),
    (lambda t: t.replace("nan = 0", "nan = -1", 1), [".nan", "count"]),
    (lambda t: t.replace("[gate]", "[gate]\ncolour = 1"), ["gate.colour", "unknown key"]),
    (lambda t: t.replace('study = "gate.toml"', ""), ["gate.study", "missing"]),
    (lambda t: t + "\n[[budget]]\nvariant = ", ["TOML syntax"]),
    (lambda t: t.replace("mean_bits =", "mean_bitz =", 1), ["mean_bitz", "unknown key"]),
])
def test_malformed_budgets_exit_2_one_line(gate_dir, capsys, edit, words):
    (gate_dir / "bad.toml").write_text(edit((gate_dir / "budgets.toml").read_text()))
    code, lines, err = gate(capsys, gate_dir, budgets="bad.toml")
    assert code == 2 and lines == [] and err.count("\n") == 1 and "bad.toml" in err
    for w in words:
        assert w in err


def test_corpus_append_is_deduplicated(tmp_path):
    corpus = tmp_path / "c.txt"
    assert append_to_corpus(corpus, [1.5, -0.0, 1.5], "t") == 2
    assert append_to_corpus(corpus, [1.5, 0.0, -0.0], "t") == 1  # +0 is new, -0 is known
    values = [line.split()[0] for line in corpus.read_text().splitlines() if not line.startswith("#")]
    assert values == ["0x1.8000000000000p+0", "-0x0.0p+0", "0x0.0p+0"]
