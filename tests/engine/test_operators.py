"""Tests of precision.engine.operators: the engine and the products take the operator as an object, by name.

A study names its operator (``operator = "..."``, default SigmoidFocalLossGrad); the engine resolves it,
carries the name to its tasks and records it in ``run.json``, and the reports read it back.  A sibling
operator registered under another name (here one that forwards to SigmoidFocalLossGrad's interface and counts
the evaluations it serves) runs through the same engine with no change to it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import precision.operators.sigmoid_focal_loss_grad as sfl
from precision.engine import operators
from precision.engine.operators import DEFAULT_OPERATOR, get_operator
from precision.engine.study import parse_study
from precision.engine.sweep import run_study
from precision.errors import PrecisionError, StudyFileError

from cli_support import precision, tree
from operator_support import operator_study, register
from study_support import study_with

#: A sibling operator: SigmoidFocalLossGrad's interface, its shared evaluation counted.
MIRROR = '''
from precision.operators.sigmoid_focal_loss_grad import *  # noqa: F403
from precision.operators.sigmoid_focal_loss_grad import __all__, evaluate_variants as _evaluate_variants

RESULT_SOURCES = ()
CALLS = []


def evaluate_variants(names, *args, **kwargs):
    CALLS.append(tuple(names))
    return _evaluate_variants(names, *args, **kwargs)
'''


def test_the_default_operator_is_the_package_itself():
    assert DEFAULT_OPERATOR == "sigmoid_focal_loss_grad"
    assert get_operator(DEFAULT_OPERATOR) is sfl
    # the registry is the folder precision/operators/: every folder with an __init__.py, by its name
    folder = Path(operators.__file__).resolve().parent.parent / "operators"
    assert operators.OPERATORS == {p.name: f"precision.operators.{p.name}" for p in sorted(folder.iterdir())
                                   if (p / "__init__.py").is_file()}
    assert DEFAULT_OPERATOR in operators.OPERATORS


def test_an_unknown_operator_is_one_clear_error():
    with pytest.raises(PrecisionError,
                       match=r"operator 'bce' is unknown; expected one of (\w+, )*sigmoid_focal_loss_grad"):
        get_operator("bce")


class TestStudyFile:
    def test_without_the_key_the_study_is_the_default_operators(self):
        assert parse_study(study_with()).operator == DEFAULT_OPERATOR

    def test_naming_the_default_gives_the_same_study(self):
        named = parse_study(study_with(**{'seed = 3': 'seed = 3\noperator = "sigmoid_focal_loss_grad"'}))
        assert named.operator == DEFAULT_OPERATOR

    def test_an_unknown_operator_names_the_key_and_the_choices(self):
        with pytest.raises(StudyFileError,
                           match=r"<study>: operator: 'bce'; expected one of (\w+, )*sigmoid_focal_loss_grad"):
            parse_study(study_with(**{'seed = 3': 'seed = 3\noperator = "bce"'}))

    def test_the_command_exits_2_with_one_line_and_writes_nothing(self, tmp_path):
        (tmp_path / "bad.toml").write_text(study_with(**{'seed = 3': 'seed = 3\noperator = "bce"'}))
        before = tree(tmp_path)
        code, out, err = precision("run", "bad.toml", "--out", "out", cwd=tmp_path)
        assert code == 2 and out == ""
        assert err.strip().splitlines() == [
            f"precision: error: bad.toml: operator: 'bce'; expected one of {', '.join(operators.OPERATORS)}"]
        assert tree(tmp_path) == before


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """The sibling operator ``mirror`` registered (its module on the path): its module."""
    return register(tmp_path, monkeypatch, "mirror", MIRROR)


def test_a_sibling_operator_runs_through_the_same_engine(tmp_path, mirror):
    """The study names the operator; every task evaluates through it; run.json records it; the tables are
    SigmoidFocalLossGrad's (the mirror forwards to it), and its results are its own in the shared cache."""
    cache = tmp_path / "cache"
    base = run_study(parse_study(study_with()), tmp_path / "sfl", cache_dir=cache, workers=1)
    study = parse_study(study_with(**{'seed = 3': 'seed = 3\noperator = "mirror"'}))
    assert study.operator == "mirror"
    result = run_study(study, tmp_path / "mirror", cache_dir=cache, workers=1)
    assert len(mirror.CALLS) == result.tasks == base.tasks > 0
    assert all(set(names) == {"kernel", "naive"} for names in mirror.CALLS)
    assert (result.results_reused, result.results_computed) == (0, base.results_computed)
    assert json.loads((tmp_path / "mirror" / "run.json").read_text())["operator"] == "mirror"
    assert json.loads((tmp_path / "sfl" / "run.json").read_text())["operator"] == DEFAULT_OPERATOR
    for name in sorted(p.name for p in (tmp_path / "sfl").glob("*.csv")):
        assert (tmp_path / "mirror" / name).read_bytes() == (tmp_path / "sfl" / name).read_bytes(), name


def test_a_run_stage_is_a_study_key_only_for_an_operator_that_has_it(tmp_path, monkeypatch, mirror):
    """``[run] threshold_search`` is SigmoidFocalLossGrad's stage: a sibling without stages does not know the key."""
    monkeypatch.setattr(mirror, "RUN_STAGES", {})
    text = study_with(**{'seed = 3': 'seed = 3\noperator = "mirror"', '[run]': '[run]\nthreshold_search = true'})
    with pytest.raises(StudyFileError, match=r"run.threshold_search: unknown key"):
        parse_study(text)
    assert parse_study(study_with(**{'[run]': '[run]\nthreshold_search = false'})).stages == ()


def test_two_operators_never_share_a_term_shard(tmp_path, mirror):
    """The term cache names a shard by the operator and its oracle version: the mirror (SigmoidFocalLossGrad's
    ORACLE_VERSION) finds none of SigmoidFocalLossGrad's terms, and `cache info` and `cache clear` see both."""
    import numpy as np

    from precision.engine.cache import TermCache
    x = np.array([-1.5, 0.25, 3.0])
    TermCache(tmp_path).store(2.0, x, sfl.term_tables(x, [2.0])[2.0])
    assert TermCache(tmp_path).lookup(2.0, x)[0].all()
    assert not TermCache(tmp_path, operator="mirror").lookup(2.0, x)[0].any()
    TermCache(tmp_path, operator="mirror").store(2.0, x, sfl.term_tables(x, [2.0])[2.0])
    assert TermCache(tmp_path, create=False).info()["shards"] == 2
    assert TermCache(tmp_path, create=False).clear() == 2


#: A sibling operator with other attributes: SigmoidFocalLossGrad at gamma = 2, so its one attribute is alpha and
#: it has no terms attribute (its exact-value terms depend on x alone: one table, keyed None).
FIXED_GAMMA = '''
import numpy as np

from precision.operators.sigmoid_focal_loss_grad import *  # noqa: F403
from precision.operators.sigmoid_focal_loss_grad import __all__
import precision.operators.sigmoid_focal_loss_grad as _sfl

GAMMA = 2.0
ATTRIBUTES = {"alpha": (0.25,)}
ATTRIBUTE_HELP = {"alpha": "balance attribute"}
TERMS_ATTRIBUTE = None
RESULT_SOURCES = ()
RUN_STAGES = {}
SECTION_OPTIONS = {}
REPORT_SECTIONS = {}
GLOSSARY = {}


def term_tables(x, terms):
    return {term: _sfl.term_tables(x, [GAMMA])[GAMMA] for term in terms}


def derive_exact(x, t, alpha, weight, dout, count, fmt, pos, neg, certify=True):
    return _sfl.derive_exact(x, t, alpha, np.full(np.shape(x), GAMMA), weight, dout, count, fmt, pos, neg, certify)


def selected_term_tables(x, t, alpha):
    return _sfl.selected_term_tables(x, t, alpha, GAMMA)


def evaluate_variants(names, *args, **kwargs):
    return _sfl.evaluate_variants(names, *args, gamma=GAMMA, **kwargs)


def evaluate(variant, *args, **kwargs):
    return _sfl.evaluate(variant, *args, gamma=GAMMA, **kwargs)


def bind_recipe(*args, **kwargs):
    return _sfl.bind_recipe(*args, gamma=GAMMA, **kwargs)


def attribute_bound(bound, attributes, **kwargs):
    return _sfl.attribute_bound(bound, {**attributes, "gamma": GAMMA}, **kwargs)


def check_study_variants(*args, **kwargs):
    return _sfl.check_study_variants(*args, gamma=GAMMA, **kwargs)


def variant_fired(variant, steps, machine, attributes, size):
    return _sfl.variant_fired(variant, steps, machine, {**attributes, "gamma": GAMMA}, size)


def bracket_band(pred, target, term, edges):
    return _sfl.bracket_band(pred, target, GAMMA, edges)


def selected_cancellation(x, target, term):
    return _sfl.selected_cancellation(x, target, GAMMA)


def in_neighbourhood(x, target, term):
    return _sfl.in_neighbourhood(x, target, GAMMA)


def guard_blocked(guard, axes):
    return _sfl.guard_blocked(guard, {**axes, "gamma": [GAMMA]})


def not_exercised_reason(guard, axes, number=str):
    return _sfl.not_exercised_reason(guard, {**axes, "gamma": [GAMMA]}, number)
'''


@pytest.fixture
def fixed_gamma(tmp_path, monkeypatch):
    """The sibling operator ``fixed_gamma`` (one attribute, alpha; no terms attribute) registered: its module."""
    return register(tmp_path, monkeypatch, "fixed_gamma", FIXED_GAMMA)


class TestOtherAttributes:
    """An operator declares its own attributes (its ATTRIBUTES, TERMS_ATTRIBUTE): the study file, the tasks,
    the tables, the term cache, the report and the hunt take them from it, with no change to the engine."""

    TEXT = study_with(**{'seed = 3': 'seed = 3\noperator = "fixed_gamma"', 'alpha = [0.25]': 'alpha = [0.25, 0.75]',
                         'gamma = [2.0, -1.5]\n': ''})

    def test_its_study_file_has_its_axes_only(self, fixed_gamma):
        study = parse_study(self.TEXT)
        assert study.attributes == (("alpha", (0.25, 0.75)),) and study.term_values == (None,)
        with pytest.raises(StudyFileError, match=r"points.gamma: unknown key"):
            parse_study(self.TEXT.replace("alpha = [0.25, 0.75]", "alpha = [0.25, 0.75]\ngamma = [2.0]"))

    def test_its_tables_are_sigmoid_focal_loss_grads_at_its_fixed_gamma(self, tmp_path, fixed_gamma):
        """The same points run as SigmoidFocalLossGrad at gamma = 2 give the same rows, without a gamma column
        and without by_gamma.csv; its terms go to one shard of its own."""
        import pandas as pd

        cache = tmp_path / "cache"
        result = run_study(parse_study(self.TEXT), tmp_path / "fixed", cache_dir=cache, workers=1)
        base = run_study(parse_study(self.TEXT.replace('operator = "fixed_gamma"', "").replace(
            "alpha = [0.25, 0.75]", "alpha = [0.25, 0.75]\ngamma = [2.0]")), tmp_path / "sfl", cache_dir=cache,
            workers=1)
        assert result.tasks == base.tasks == 2 and result.points == base.points == 6 * 2
        assert not (tmp_path / "fixed" / "by_gamma.csv").exists() and (tmp_path / "sfl" / "by_gamma.csv").exists()
        for name in ("summary.csv", "groups.csv", "by_region.csv", "comparisons.csv"):
            mine = pd.read_csv(tmp_path / "fixed" / name, keep_default_na=False)
            theirs = pd.read_csv(tmp_path / "sfl" / name, keep_default_na=False)
            theirs = theirs.drop(columns=[c for c in theirs.columns if c == "gamma" or c.endswith("witness_gamma")])
            assert list(mine.columns) == list(theirs.columns), name
            assert mine.equals(theirs), name
        assert "gamma" not in pd.read_parquet(tmp_path / "fixed" / "points.parquet").columns
        assert sorted(p.name for p in cache.glob("terms-fixed_gamma-*.npz")) == [
            f"terms-fixed_gamma-v{sfl.ORACLE_VERSION}-g-.npz"]

    def test_its_report_and_hunt(self, tmp_path, fixed_gamma):
        """The generic report sections and the hunt work from its attributes: no per-gamma heat map or table,
        witnesses with alpha only; the hunt searches alpha and finds what SigmoidFocalLossGrad finds at gamma 2."""
        from precision.products.hunt import hunt
        from precision.products.report import build_report

        run_study(parse_study(self.TEXT), tmp_path / "runs" / "t", cache_dir=tmp_path / "cache", workers=1)
        folder = build_report("t", tmp_path / "runs", tmp_path / "reports")
        html = (tmp_path / "reports" / "t" / "report.html").read_text()
        assert "alpha=" in html and "gamma=" not in html and "heatmap_pred" not in html, folder
        mine = hunt("kernel", fmt="fp16", alphas=[0.25, 0.75], targets=[0], workers=1, top=3, operator="fixed_gamma")
        theirs = hunt("kernel", fmt="fp16", gammas=[2.0], alphas=[0.25, 0.75], targets=[0], workers=1, top=3)
        assert mine.attributes == (("alpha", (0.25, 0.75)),) and "gamma" not in mine.top.columns
        assert mine.max_ulp == theirs.max_ulp and mine.points == theirs.points
        assert list(mine.top["pred_hex"]) == list(theirs.top["pred_hex"])
        assert set(mine.to_json()) - set(theirs.to_json()) == set() and "gammas" not in mine.to_json()
        with pytest.raises(TypeError, match="takes alphas"):
            hunt("kernel", fmt="fp16", gammas=[2.0], operator="fixed_gamma")


#: The required core and nothing else (docs/operators.md): SigmoidFocalLoss at gamma = 2.5, so its one attribute
#: is alpha and it has no terms attribute; every optional capability is the protocol's default.
MINIMAL = '''
import numpy as np

import precision.operators.sigmoid_focal_loss as _fwd

TITLE, VALUE = "MinimalLoss", "loss"
GAMMA = 2.5
ATTRIBUTES = {"alpha": (0.25,)}
ORACLE_VERSION = "minimal-1"
RESULT_SOURCES = ()
get_variant, variant_names = _fwd.get_variant, _fwd.variant_names


def validate_inputs(pred, target, dout, weight, alpha, reduction="none"):
    return _fwd.validate_inputs(pred, target, dout, weight, alpha, GAMMA, reduction)


def round_exact(x, t, alpha, weight=1.0, dout=1.0, count=1, fmt="fp32"):
    return _fwd.round_exact(x, t, alpha, GAMMA, weight, dout, count, fmt=fmt)


def exact_decimal(x, t, alpha, weight=1.0, dout=1.0, count=1, digits=40):
    return _fwd.exact_decimal(x, t, alpha, GAMMA, weight, dout, count, digits)


def term_tables(x, terms):
    return {term: _fwd.term_tables(x, [GAMMA])[GAMMA] for term in terms}


def derive_exact(x, t, alpha, weight, dout, count, fmt, pos, neg, certify=True):
    return _fwd.derive_exact(x, t, alpha, np.full(np.shape(x), GAMMA), weight, dout, count, fmt, pos, neg, certify)


def evaluate_variants(names, *args, **kwargs):
    return _fwd.evaluate_variants(names, *args, gamma=GAMMA, **kwargs)
'''

MINIMAL_STUDY = operator_study("minimal", "the required core alone", seed=2, stop=20.0, num=81)


@pytest.fixture
def minimal(tmp_path, monkeypatch):
    """An operator with the required core only, registered: its interface as get_operator completes it."""
    return register(tmp_path, monkeypatch, "minimal", MINIMAL)


def test_the_required_core_alone_runs_through_the_engine_the_report_and_the_commands(tmp_path, capsys, minimal):
    """docs/operators.md's required core is enough: the defaults stand for every optional capability (no terms
    attribute, no guards, bands, plugins, stages or attribution; list_variants, evaluate and attribute help from
    the required names), and a study of it runs, reports and is listed."""
    from precision.engine.operators import OPTIONAL, REQUIRED
    from precision.products.report import build_report

    from cli_support import run
    assert set(REQUIRED) <= set(vars(minimal)) and minimal.TERMS_ATTRIBUTE is None and minimal.GUARD_NAMES == {}
    assert minimal.ATTRIBUTE_HELP == {"alpha": "the alpha attribute"}
    assert minimal.list_variants()[0] == ("kernel", minimal.get_variant("kernel").description)
    assert set(OPTIONAL) <= set(vars(minimal))
    x, t = np.array([[16.0]], np.float32), np.array([[1]], np.int32)
    assert float(minimal.evaluate("kernel", x, t, None, alpha=0.25, machine="npu")[0, 0]).hex() == \
        "0x1.6a09e40000000p-83"
    with pytest.raises(PrecisionError, match="variant='bogus' is unknown"):
        minimal.evaluate("bogus", x, t, None, alpha=0.25)
    (tmp_path / "minimal.toml").write_text(MINIMAL_STUDY)
    result = run_study(parse_study(MINIMAL_STUDY), tmp_path / "runs" / "minimal", cache_dir=tmp_path / "c",
                       workers=1)
    assert result.tasks > 0 and json.loads((tmp_path / "runs" / "minimal" / "run.json").read_text())["operator"] \
        == "minimal"
    page = build_report("minimal", runs_dir=tmp_path / "runs", out_dir=tmp_path / "rep")
    text = (tmp_path / "rep" / "minimal" / "report.md").read_text()
    assert page.exists() and "not exercised" not in text and "--operator minimal" in text
    code, out, _ = run(capsys, "variants", "--operator", "minimal")
    assert code == 0 and out.splitlines()[0].split()[0] == "kernel"
    code, out, err = run(capsys, "explain", "kernel", "--operator", "minimal", "--pred", "1", "--target", "1")
    assert (code, out) == (2, "") and "binds no recipe" in err


def test_an_operator_without_plugins_refuses_a_plugin_file(tmp_path, capsys, minimal):
    """``--plugin`` is refused in one line for an operator without the plugin capability (the default)."""
    from cli_support import run
    (tmp_path / "p.py").write_text("x = 1\n")
    code, out, err = run(capsys, "variants", "--operator", "minimal", "--plugin", str(tmp_path / "p.py"))
    assert (code, out) == (2, "") and "--plugin: the operator 'minimal' takes no plugin files" in err
    assert err.count("\n") == 1


def test_an_interface_without_a_required_name_is_one_clear_error(tmp_path, monkeypatch):
    with pytest.raises(PrecisionError, match=r"operator 'broken' lacks ORACLE_VERSION \(the required core: "
                                             r"docs/operators.md\)"):
        register(tmp_path, monkeypatch, "broken", MINIMAL.replace("ORACLE_VERSION = \"minimal-1\"\n", ""))


def test_guards_without_per_element_decisions_are_not_tracked_never_not_exercised(tmp_path, monkeypatch, mirror):
    """An operator with guards but no kept decisions (no FIRED_COLUMNS): its guard comparisons keep their verdicts,
    the scope table says "not tracked", and no sentence says "not exercised"."""
    from precision.products.report import build_report
    monkeypatch.setattr(mirror, "FIRED_COLUMNS", {})
    monkeypatch.setattr(mirror, "FIRED_STEPS", ())
    text = study_with(**{'seed = 3': 'seed = 3\noperator = "mirror"',
                         'variants = ["kernel", "naive"]': 'variants = ["kernel", "naive", "kernel-G1", "naive+G8"]'})
    run_study(parse_study(text), tmp_path / "runs" / "t", cache_dir=tmp_path / "c", workers=1)
    build_report("t", runs_dir=tmp_path / "runs", out_dir=tmp_path / "rep")
    page = (tmp_path / "rep" / "t" / "report.md").read_text()
    assert "not exercised" not in page and "(fired: not tracked)" in page
    import pandas as pd
    verdicts = pd.read_csv(tmp_path / "rep" / "t" / "tables" / "verdicts.csv")
    guard = verdicts[verdicts["kind"] == "guard"]
    assert set(guard["comparison"]) == {"kernel vs kernel-G1", "naive+G8 vs naive"}
    assert guard["exercised"].all() and guard["fired"].isna().all()
