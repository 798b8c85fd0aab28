"""Plugins (precision.operators.sigmoid_focal_loss_grad.plugins): a user's file of variants in studies, the gate, reports; every failure one line."""

import hashlib
import shutil
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from precision import evaluate, evaluate_variants, trace_variant
from precision.errors import PluginError
from precision.operators.sigmoid_focal_loss_grad.guards import VARIANTS, variant_names
from precision.operators.sigmoid_focal_loss_grad.plugins import (SMOKE_PRED, ensure_loaded, load_plugin, loaded_plugins,
                                                       plugin_digest, plugin_files, source_digest, unload_plugin,
                                                       variant_source)
from precision.engine.study import parse_study

from cli_support import precision, tree

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "my_kernel.py"



STUDY = """
name = "plug"
[pred]
kind = "grid"
format = "fp16"
start = -12
stop = 12
num = 49
[points]
target = [0, 1]
profiles = ["fp32", "fp16"]
[run]
variants = ["kernel", "my_kernel"]
machines = ["ieee", "npu"]
per_point = "none"
plugins = ["my_kernel.py"]
"""

#: A plugin's head and a variant function whose body is the case's.
HEAD = """import numpy as np
from precision import evaluate, register_variant
"""
FUNCTION = """
def mine(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="mean", *, count=None):
    {body}

register_variant({name!r}, mine, "a broken plugin"{extra})
"""


def plugin_source(body="return evaluate('kernel', pred, target, dout, weight, alpha=alpha, gamma=gamma, "
                       "reduction=reduction, machine=machine, count=count)", name="mine", extra=""):
    return HEAD + FUNCTION.format(body=body, name=name, extra=extra)


#: Every failure mode of the issue (and a few more), with the line's text after "plugin bad.py".
FAILURES = {
    "import_error": (HEAD + "import nosuch_module_for_precision_tests\n",
                     ": cannot import (line 3): ModuleNotFoundError: No module named "
                     "'nosuch_module_for_precision_tests'"),
    "raises_at_import": (HEAD + "raise RuntimeError('no license')\n",
                         ": raised RuntimeError at import (line 3): no license"),
    "raises_at_evaluation": (plugin_source("raise ZeroDivisionError('kernel bug')"),
                             ": variant 'mine' raised ZeroDivisionError: kernel bug"),
    "wrong_shape": (plugin_source("return np.zeros((1, 3), pred.dtype)"),
                    ": variant 'mine' returned shape (1, 3) for pred shape (1, 4); expected pred's shape"),
    "wrong_dtype": (plugin_source("return np.zeros(pred.shape, np.float64)"),
                    ": variant 'mine' returned dtype float64 for pred dtype float32; expected pred's dtype"),
    "not_an_array": (plugin_source("return pred.tolist()"),
                     ": variant 'mine' returned list; expected a numpy.ndarray of pred's dtype (float32) and shape "
                     "(1, 4)"),
    "builtin_name": (plugin_source(name="kernel"),
                     ": variant 'kernel' redefines a built-in variant; pick another name (see `precision variants`)"),
    "builtin_name_replace": (plugin_source(name="golden", extra=", replace=True"),
                             ": variant 'golden' redefines a built-in variant; pick another name (see `precision "
                             "variants`)"),
    "parsed_name": (plugin_source(name="naive+G3"),
                    ": variant 'naive+G3' redefines a built-in variant; pick another name (see `precision "
                    "variants`)"),
    "syntax_error": ("def mine(:\n", ": syntax error at line 1: "),
    "registers_nothing": ("x = 1\n", " registers no variant; expected at least one precision.register_variant(...) "
                                     "call"),
    "no_count_keyword": (HEAD + FUNCTION.replace(", *, count=None", "").format(
        body="return np.zeros(pred.shape, pred.dtype)", name="mine", extra=""),
        ": variant 'mine' raised TypeError: mine() got an unexpected keyword argument 'count'; a variant function "
        "takes the keyword count=None (docs/plugins.md)"),
}


@pytest.fixture
def clean_registry():
    """Unload every plugin a test loaded (the registry is global)."""
    before = set(VARIANTS)
    yield
    for p in loaded_plugins():
        unload_plugin(p.path)
    assert set(VARIANTS) == before


@pytest.fixture
def workdir(tmp_path):
    """A folder with the example plugin and a study naming it."""
    shutil.copy(EXAMPLE, tmp_path / "my_kernel.py")
    (tmp_path / "plug.toml").write_text(STUDY)
    return tmp_path


# ---------------------------------------------------------------------------
# The loader (in this process)
# ---------------------------------------------------------------------------

class TestLoadPlugin:
    def test_the_example_registers_a_recipe_variant(self, clean_registry):
        plugin = load_plugin(EXAMPLE)
        assert plugin.variants == ("my_kernel",) and "my_kernel" in variant_names()
        assert variant_source("my_kernel") == EXAMPLE and variant_source("kernel") is None
        assert VARIANTS["my_kernel"].source == EXAMPLE and VARIANTS["kernel"].source is None
        assert plugin_files(["kernel", "my_kernel"]) == [EXAMPLE] and plugin_files(["kernel"]) == []
        assert plugin_files(["all"]) == [EXAMPLE]
        digest = hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
        assert plugin.digest == plugin_digest(EXAMPLE) == source_digest("my_kernel") == digest
        assert source_digest("kernel") is None
        assert not (EXAMPLE.parent / "__pycache__").exists()  # no bytecode written next to a plugin

    def test_loading_is_idempotent_per_digest(self, clean_registry, tmp_path):
        path = tmp_path / "p.py"
        path.write_text(plugin_source())
        first = load_plugin(path)
        assert load_plugin(path) is first and ensure_loaded([path]) == (first,)
        path.write_text(plugin_source() + "\n# a new version\n")
        second = load_plugin(path)  # changed: imported again, re-registers its own name
        assert second.digest != first.digest and second.variants == ("mine",)
        with pytest.raises(PluginError, match="changed since the run started"):
            ensure_loaded([path], digests={path: first.digest})

    def test_a_failed_reload_keeps_the_previous_version(self, clean_registry, tmp_path):
        path = tmp_path / "p.py"
        path.write_text(plugin_source())
        load_plugin(path)
        row = VARIANTS["mine"]
        path.write_text(plugin_source("return np.zeros((1, 3), pred.dtype)"))
        with pytest.raises(PluginError, match="returned shape"):
            load_plugin(path)
        assert VARIANTS["mine"] is row and variant_source("mine") == path

    def test_another_plugins_name_is_a_clash(self, clean_registry, tmp_path):
        (tmp_path / "a.py").write_text(plugin_source())
        (tmp_path / "b.py").write_text(plugin_source())
        load_plugin(tmp_path / "a.py")
        with pytest.raises(PluginError, match=r"variant 'mine' is already registered by plugin .*a\.py"):
            load_plugin(tmp_path / "b.py")
        assert variant_source("mine") == tmp_path / "a.py"

    @pytest.mark.parametrize("case", sorted(FAILURES))
    def test_failure_leaves_the_registry_as_it_was(self, clean_registry, tmp_path, case):
        source, line = FAILURES[case]
        (tmp_path / "bad.py").write_text(source)
        before = dict(VARIANTS)
        with pytest.raises(PluginError) as exc:
            load_plugin(tmp_path / "bad.py")
        assert str(exc.value) == f"plugin {tmp_path / 'bad.py'}{line}" or (
            case == "syntax_error" and str(exc.value).startswith(f"plugin {tmp_path / 'bad.py'}{line}"))
        assert VARIANTS == before and not loaded_plugins()

    def test_recipe_steps_and_machines(self, clean_registry):
        load_plugin(EXAMPLE)
        x = np.array([[-20.0, -3.0, -0.5, 0.0, 0.5, 3.0, 10.0, 20.0]], np.float32)
        t = np.array([[0, 1, 0, 1, 0, 1, 0, 1]], np.int32)
        for machine in ("ieee", "npu", "npu+ftz", "numpy"):
            out = evaluate("my_kernel", x, t, np.ones_like(x), machine=machine)
            shared = evaluate_variants(["my_kernel", "kernel"], x, t, np.ones_like(x), machine=machine)
            assert out.dtype == np.float32 and np.array_equal(out.view(np.uint32),
                                                              shared["my_kernel"].view(np.uint32))
        tr = trace_variant("my_kernel", x, t, np.ones_like(x))
        assert tr.recipe == "my_kernel" and {"e", "L", "p", "q", "lp", "lq", "out"} <= set(tr.names)
        assert np.array_equal(tr.output.view(np.uint32), evaluate("my_kernel", x, t, np.ones_like(x)).view(np.uint32))

    def test_study_plugins_are_absolute_and_loaded(self, clean_registry, workdir):
        study = parse_study(STUDY, str(workdir / "plug.toml"))
        assert study.plugins == (workdir / "my_kernel.py",) and study.plugins[0].is_absolute()
        assert variant_source("my_kernel") == workdir / "my_kernel.py"

    def test_study_plugin_missing_names_the_study_key(self, clean_registry, tmp_path):
        with pytest.raises(Exception, match=r"plug\.toml: run\.plugins: 'my_kernel\.py': no such file"):
            parse_study(STUDY, str(tmp_path / "plug.toml"))

    def test_smoke_inputs(self):
        assert len(SMOKE_PRED) == 4


# ---------------------------------------------------------------------------
# The command line: a plugin variant in a study, the gate, a report
# ---------------------------------------------------------------------------

class TestPluginVariantEverywhere:
    def test_in_a_study_and_its_report(self, workdir):
        code, out, err = precision("run", "plug.toml", "--out", "runs/plug", "--no-cache", "--workers", "1",
                                   cwd=workdir)
        assert (code, err) == (0, "")
        summary = pd.read_csv(workdir / "runs/plug/summary.csv")
        mine = summary[summary["variant"] == "my_kernel"]
        assert set(zip(mine["machine"], mine["profile"])) == {(m, p) for m in ("ieee", "npu")
                                                             for p in ("fp16", "fp32")}
        assert (mine["count"] == 98).all() and (mine["nan"] == 0).all()
        assert not (workdir / "__pycache__").exists()
        code, out, err = precision("report", "plug", "--runs", "runs", "--out", "reports", cwd=workdir)
        assert (code, err) == (0, "")
        page = (workdir / "reports/plug/report.md").read_text()
        assert "my_kernel" in page
        assert "my_kernel" in set(pd.read_csv(workdir / "reports/plug/tables/summary.csv")["variant"])

    def test_in_a_report_of_a_study_without_the_kernel(self, workdir):
        (workdir / "only.toml").write_text(STUDY.replace('name = "plug"', 'name = "only"')
                                           .replace('["kernel", "my_kernel"]', '["my_kernel"]'))
        assert precision("run", "only.toml", "--out", "runs/only", "--no-cache", "--workers", "1",
                         cwd=workdir)[0] == 0
        code, out, err = precision("report", "only", "--runs", "runs", "--out", "reports", cwd=workdir)
        assert (code, err) == (0, "") and "my_kernel" in (workdir / "reports/only/report.md").read_text()

    @pytest.mark.parametrize("limit, status", [(1e6, 0), (1000.0, 1)])
    def test_in_the_gate(self, workdir, limit, status):
        (workdir / "budgets.toml").write_text(f"""
[gate]
study = "plug.toml"

[[budget]]
variant = "my_kernel"
format = "fp32"
machine = "npu"
max_ulp = {limit}
""")
        code, out, err = precision("gate", "--budgets", "budgets.toml", "--out", "runs/gate", "--no-cache",
                                   "--workers", "1", cwd=workdir)
        assert (code, err) == (status, "")
        line = next(ln for ln in out.splitlines() if " max_ulp " in ln)
        assert line.startswith(("PASS" if status == 0 else "FAIL") + " my_kernel fp32 npu all max_ulp observed=")

    def test_gate_with_plugin_option(self, workdir):
        (workdir / "all.toml").write_text(STUDY.replace('plugins = ["my_kernel.py"]', "")
                                          .replace('["kernel", "my_kernel"]', '["kernel", "all"]'))
        (workdir / "budgets.toml").write_text('[gate]\nstudy = "all.toml"\n\n[[budget]]\nvariant = "my_kernel"\n'
                                              'format = "fp16"\nmachine = "ieee"\nmax_ulp = 1e6\n')
        code, out, err = precision("gate", "--budgets", "budgets.toml", "--out", "runs/gate", "--no-cache",
                                   "--workers", "1", "--plugin", "my_kernel.py", cwd=workdir)
        assert (code, err) == (0, "") and "PASS my_kernel fp16 ieee all max_ulp" in out

    def test_variants_lists_it(self, workdir):
        code, out, err = precision("variants", "--plugin", "my_kernel.py", cwd=workdir)
        assert code == 0 and err == ""
        line = next(ln for ln in out.splitlines() if ln.startswith("my_kernel "))
        assert line.endswith("[plugin my_kernel.py]")

    def test_explain_shows_its_steps(self, workdir):
        code, out, err = precision("explain", "my_kernel", "--pred", "10", "--target", "0", "--plugin",
                                   "my_kernel.py", cwd=workdir)
        assert (code, err) == (0, "")
        assert "\nL " in out and out.rstrip().splitlines()[-1].startswith("top cause: L = Ln(1 + e)")


# ---------------------------------------------------------------------------
# Every failure: one line naming the file, exit 2, nothing written
# ---------------------------------------------------------------------------

class TestPluginFailures:
    # the list through the command line; every case of FAILURES is also loaded in-process above
    @pytest.mark.parametrize("case", ["import_error", "raises_at_import", "raises_at_evaluation", "wrong_shape",
                                      "wrong_dtype", "builtin_name"])
    def test_run_with_plugin_option(self, workdir, case):
        source, line = FAILURES[case]
        (workdir / "bad.py").write_text(source)
        before = tree(workdir)
        code, out, err = precision("run", "plug.toml", "--plugin", "bad.py", "--out", "runs/plug", "--no-cache",
                                   cwd=workdir)
        assert (code, out) == (2, "")
        assert err.startswith(f"precision: error: plugin bad.py{line}") and err.count("\n") == 1, err
        assert tree(workdir) == before  # nothing written: no run folder, no __pycache__

    @pytest.mark.parametrize("case", ["raises_at_evaluation", "builtin_name"])
    def test_named_by_the_study_file(self, workdir, case):
        source, line = FAILURES[case]
        (workdir / "bad.py").write_text(source)
        (workdir / "bad.toml").write_text(STUDY.replace('"my_kernel.py"', '"bad.py"')
                                          .replace('["kernel", "my_kernel"]', '["kernel"]'))
        before = tree(workdir)
        code, out, err = precision("run", "bad.toml", "--no-cache", cwd=workdir)
        assert (code, out) == (2, "") and err.startswith(f"precision: error: plugin bad.py{line}")
        assert err.count("\n") == 1 and tree(workdir) == before

    def test_a_failure_on_one_machine_only_stops_the_run_before_it_writes(self, workdir):
        (workdir / "bad.py").write_text(plugin_source(
            "if 'npu' in str(machine):\n        raise KeyError('npu')\n    "
            "return evaluate('kernel', pred, target, dout, weight, alpha=alpha, gamma=gamma, "
            "reduction=reduction, machine=machine, count=count)"))
        (workdir / "bad.toml").write_text(STUDY.replace('"my_kernel.py"', '"bad.py"')
                                          .replace('["kernel", "my_kernel"]', '["kernel", "mine"]'))
        before = tree(workdir)
        code, out, err = precision("run", "bad.toml", "--no-cache", cwd=workdir)
        assert (code, out, err) == (2, "", "precision: error: plugin bad.py: variant 'mine' raised KeyError: "
                                           "'npu'\n")
        assert tree(workdir) == before

    @pytest.mark.parametrize("command", [
        ["variants"], ["score", "--inputs", "in.npz", "--outputs", "out.npy", "--compare-with", "mine"]])
    def test_other_commands(self, workdir, command):
        (workdir / "bad.py").write_text(FAILURES["wrong_shape"][0])
        np.savez(workdir / "in.npz", pred=np.zeros((1, 2), np.float32), target=np.zeros((1, 2), np.int32))
        np.save(workdir / "out.npy", np.zeros((1, 2), np.float32))
        before = tree(workdir)
        code, out, err = precision(*command, "--plugin", "bad.py", cwd=workdir)
        assert (code, out) == (2, "") and err.startswith("precision: error: plugin bad.py: variant 'mine' returned "
                                                         "shape (1, 3)")
        assert tree(workdir) == before

    def test_missing_plugin_file(self, workdir):
        started = time.perf_counter()
        code, out, err = precision("run", "plug.toml", "--plugin", "nosuch.py", cwd=workdir)
        assert (code, out, err) == (2, "", "precision: error: --plugin=nosuch.py: no such file; expected an "
                                           "existing file\n")
        assert time.perf_counter() - started < 30
