"""SigmoidFocalLoss's plugins (precision.operators.sigmoid_focal_loss.plugins, the generic loader of
precision.recipes.plugins over the forward's table): a plugin file's variants evaluated bit for bit as what they
wrap, in a study run through the command line; a broken one refused in one line with exit status 2."""

import hashlib

import numpy as np
import pandas as pd
import pytest

from precision.engine.operators import get_operator
from precision.errors import PluginError
from precision.operators.sigmoid_focal_loss.plugins import (load_plugin, loaded_plugins, plugin_digest, plugin_files,
                                                           unload_plugin, variant_source)
from precision.operators.sigmoid_focal_loss.variants import (VARIANTS, evaluate, evaluate_variants, recipe_call,
                                                            variant_names)

from cli_support import precision, tree

OP = "sigmoid_focal_loss"

#: A plugin of the forward loss: the kernel with the accurate 1 - p as a recipe under another name, the test
#: golden as a function of its own, and the fp16 third party (a variant that takes fp16 pred only).
PLUGIN = '''"""A forward plugin for the tests."""
from precision.operators.sigmoid_focal_loss import register_variant
from precision.operators.sigmoid_focal_loss.plugins import recipe_function
from precision.operators.sigmoid_focal_loss.recipes import loss_call
from precision.operators.sigmoid_focal_loss.variants import evaluate

CALL = loss_call(path="none", q="accurate")
register_variant("my_loss", recipe_function(CALL), "the kernel with the accurate 1 - p, as a plugin recipe",
                 family="plugin", recipe=CALL)


def my_golden(machine, pred, target, dout=None, weight=None, alpha=0.25, gamma=2.0, reduction="none", *,
              count=None):
    return evaluate("golden", pred, target, dout, weight, alpha=alpha, gamma=gamma, reduction=reduction,
                    machine=machine)


def my_third(machine, pred, target, dout=None, weight=None, alpha=0.25, gamma=2.0, reduction="none", *,
             count=None):
    return evaluate("third_party", pred, target, dout, weight, alpha=alpha, gamma=gamma, reduction=reduction,
                    machine=machine)


register_variant("my_golden", my_golden, "the test golden, as a plugin function", family="plugin")
register_variant("my_third", my_third, "the third party, as a plugin function (fp16 pred only)", family="plugin")
'''

HEAD = "import numpy as np\nfrom precision.operators.sigmoid_focal_loss import register_variant\n"
FUNCTION = '''
def mine(machine, pred, target, dout=None, weight=None, alpha=0.25, gamma=2.0, reduction="none", *, count=None):
    {body}

register_variant({name!r}, mine, "a broken plugin")
'''

#: Broken plugins and the line after "plugin bad.py".
FAILURES = {
    "wrong_shape": (HEAD + FUNCTION.format(body="return np.zeros((1, 3), pred.dtype)", name="mine"),
                    ": variant 'mine' returned shape (1, 3) for pred shape (1, 4); expected pred's shape"),
    "raises_at_evaluation": (HEAD + FUNCTION.format(body="raise ZeroDivisionError('loss bug')", name="mine"),
                             ": variant 'mine' raised ZeroDivisionError: loss bug"),
    "builtin_name": (HEAD + FUNCTION.format(body="return pred", name="kernel_log1p"),
                     ": variant 'kernel_log1p' redefines a built-in variant; pick another name (see `precision "
                     "variants`)"),
    "the_grads_register_variant": (
        "import numpy as np\nfrom precision import register_variant\n"
        + FUNCTION.format(body="return pred", name="mine"),
        ": variant 'mine' is registered for the operator sigmoid_focal_loss_grad but the plugin is loaded for "
        "sigmoid_focal_loss; register it with sigmoid_focal_loss's register_variant, or load the plugin for "
        "sigmoid_focal_loss_grad (--operator sigmoid_focal_loss_grad)"),
}

STUDY = '''
name = "fwdplug"
operator = "sigmoid_focal_loss"
seed = 1

[[pred]]
kind = "grid"
format = "fp16"
start = -20.0
stop = 20.0
num = 81

[points]
target = [0, 1]
alpha = [0.25]
gamma = [2.5]
weight = ["none"]
dout = [1.0]
reduction = "none"
profiles = ["fp32", "fp16"]

[run]
variants = ["kernel_accurate_q", "my_loss", "golden", "my_golden", "third_party", "my_third"]
machines = ["ieee", "npu"]
per_point = "none"
plugins = ["my_loss.py"]
'''


def same_bits(a, b) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a.view(f"u{a.itemsize}"),
                                                                        b.view(f"u{b.itemsize}"))


@pytest.fixture
def clean_registry():
    """Unload every forward plugin a test loaded (the table is global)."""
    before = dict(VARIANTS)
    yield
    for p in loaded_plugins():
        unload_plugin(p.path)
    assert VARIANTS == before


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "my_loss.py").write_text(PLUGIN)
    (tmp_path / "fwdplug.toml").write_text(STUDY)
    return tmp_path


class TestLoader:
    def test_its_variants_are_bit_identical_to_what_they_wrap(self, clean_registry, workdir):
        path = workdir / "my_loss.py"
        plugin = load_plugin(path)
        assert plugin.variants == ("my_loss", "my_golden", "my_third") and variant_names()[-3:] == list(plugin.variants)
        assert variant_source("my_loss") == path and variant_source("kernel") is None
        assert VARIANTS["my_golden"].source == path and plugin_files(["all"]) == [path]
        assert plugin.digest == plugin_digest(path) == hashlib.sha256(path.read_bytes()).hexdigest()
        assert recipe_call("my_loss") is not None and recipe_call("my_golden") is None
        op = get_operator(OP)
        assert op.variant_source("my_loss") == path and ("my_loss", VARIANTS["my_loss"].description) in \
            op.list_variants()
        rng = np.random.default_rng(5)
        for dtype in (np.float32, np.float16):
            x = np.concatenate([rng.normal(0, 12, 300), np.linspace(-30, 30, 300)]).astype(dtype).reshape(3, -1)
            t = rng.integers(0, 2, x.shape).astype(np.int32)
            for machine in ("ieee", "npu"):
                for gamma in (0.0, 2.5, 5.0):
                    kw = dict(alpha=0.25, gamma=gamma, machine=machine)
                    together = evaluate_variants(["kernel_accurate_q", "my_loss", "golden", "my_golden",
                                                  "third_party", "my_third"], x, t, None, None, **kw)
                    for mine, built_in in (("my_loss", "kernel_accurate_q"), ("my_golden", "golden")):
                        alone = evaluate(mine, x, t, **kw)
                        assert same_bits(alone, evaluate(built_in, x, t, **kw))
                        assert same_bits(together[mine], alone) and same_bits(op.evaluate(mine, x, t, None, **kw),
                                                                              alone)
                    if dtype == np.float16:
                        assert same_bits(together["my_third"], together["third_party"])
                    else:  # its own contract: does not take fp32 pred, as the built-in it wraps
                        assert type(together["my_third"]) is type(together["third_party"])
        assert load_plugin(path) is plugin  # idempotent while unchanged

    @pytest.mark.parametrize("case", sorted(FAILURES))
    def test_a_broken_plugin_leaves_the_table_as_it_was(self, clean_registry, tmp_path, case):
        import precision.operators.sigmoid_focal_loss_grad.guards as grad
        source, line = FAILURES[case]
        (tmp_path / "bad.py").write_text(source)
        before, grad_before = dict(VARIANTS), dict(grad.VARIANTS)
        with pytest.raises(PluginError) as exc:
            load_plugin(tmp_path / "bad.py")
        assert str(exc.value) == f"plugin {tmp_path / 'bad.py'}{line}"
        assert VARIANTS == before and grad.VARIANTS == grad_before and not loaded_plugins()


class TestCommandLine:
    def test_a_study_with_the_plugin_runs(self, workdir):
        code, out, err = precision("run", "fwdplug.toml", "--out", "runs/fwdplug", "--no-cache", "--workers", "1",
                                   cwd=workdir, timeout=300)
        assert (code, err) == (0, ""), err
        summary = pd.read_csv(workdir / "runs/fwdplug/summary.csv")
        assert not (workdir / "__pycache__").exists()
        for mine, built_in in (("my_loss", "kernel_accurate_q"), ("my_golden", "golden"), ("my_third", "third_party")):
            a = summary[summary["variant"] == mine].drop(columns="variant").reset_index(drop=True)
            b = summary[summary["variant"] == built_in].drop(columns="variant").reset_index(drop=True)
            assert len(a) == len(b) > 0
            pd.testing.assert_frame_equal(a, b)
        assert set(summary[summary["variant"] == "my_third"]["profile"]) == {"fp16"}
        # the report loads the run's plugins with the run's operator
        code, out, err = precision("report", "fwdplug", "--runs", "runs", "--out", "reports", cwd=workdir)
        assert (code, err) == (0, "") and "my_loss" in (workdir / "reports/fwdplug/report.md").read_text()

    def test_variants_lists_them_and_the_grad_refuses_them(self, workdir):
        code, out, err = precision("variants", "--operator", OP, "--plugin", "my_loss.py", cwd=workdir)
        assert (code, err) == (0, "")
        line = next(ln for ln in out.splitlines() if ln.startswith("my_loss "))
        assert line.endswith("[plugin my_loss.py]")
        code, out, err = precision("variants", "--plugin", "my_loss.py", cwd=workdir)  # the default operator's loader
        assert (code, out) == (2, "") and err.count("\n") == 1
        assert err.startswith("precision: error: plugin my_loss.py: variant 'my_loss' is registered for the operator "
                              "sigmoid_focal_loss but the plugin is loaded for sigmoid_focal_loss_grad")

    @pytest.mark.parametrize("case", ["wrong_shape", "builtin_name", "the_grads_register_variant"])
    def test_a_broken_plugin_is_one_line_and_exit_2(self, workdir, case):
        source, line = FAILURES[case]
        (workdir / "bad.py").write_text(source)
        before = tree(workdir)
        code, out, err = precision("variants", "--operator", OP, "--plugin", "bad.py", cwd=workdir)
        assert (code, out, err) == (2, "", f"precision: error: plugin bad.py{line}\n")
        assert tree(workdir) == before

    def test_a_run_with_a_broken_plugin_writes_nothing(self, workdir):
        source, line = FAILURES["raises_at_evaluation"]
        (workdir / "bad.py").write_text(source)
        (workdir / "bad.toml").write_text(STUDY.replace('"my_loss.py"', '"bad.py"')
                                          .replace('"my_loss", "golden", "my_golden", "third_party", "my_third"',
                                                   '"mine"'))
        before = tree(workdir)
        for argv in (["bad.toml"], ["fwdplug.toml", "--plugin", "bad.py"]):
            code, out, err = precision("run", *argv, "--no-cache", cwd=workdir)
            assert (code, out, err) == (2, "", f"precision: error: plugin bad.py{line}\n")
        assert tree(workdir) == before
