"""Tests of precision.engine.operators: the engine and the products take the operator as an object, by name.

A study names its operator (``operator = "..."``, default SigmoidFocalLossGrad); the engine resolves it,
carries the name to its tasks and records it in ``run.json``, and the reports read it back.  A sibling
operator registered under another name (here one that forwards to SigmoidFocalLossGrad's interface and counts
the evaluations it serves) runs through the same engine with no change to it.
"""

from __future__ import annotations

import json

import pytest

import precision.sigmoid_focal_loss_grad as sfl
from precision.engine import operators
from precision.engine.operators import DEFAULT_OPERATOR, get_operator
from precision.engine.study import parse_study
from precision.engine.sweep import run_study
from precision.errors import PrecisionError, StudyFileError

from cli_support import precision, tree
from study_support import study_with

#: A sibling operator: SigmoidFocalLossGrad's interface, its shared evaluation counted.
MIRROR = '''
from precision.sigmoid_focal_loss_grad import *  # noqa: F403
from precision.sigmoid_focal_loss_grad import __all__, evaluate_variants as _evaluate_variants

RESULT_SOURCES = ()
CALLS = []


def evaluate_variants(names, *args, **kwargs):
    CALLS.append(tuple(names))
    return _evaluate_variants(names, *args, **kwargs)
'''


def test_the_default_operator_is_the_package_itself():
    assert DEFAULT_OPERATOR == "sigmoid_focal_loss_grad"
    assert get_operator(DEFAULT_OPERATOR) is sfl
    assert set(operators.OPERATORS) == {"sigmoid_focal_loss_grad"}


def test_an_unknown_operator_is_one_clear_error():
    with pytest.raises(PrecisionError, match=r"operator 'bce' is unknown; expected one of sigmoid_focal_loss_grad"):
        get_operator("bce")


class TestStudyFile:
    def test_without_the_key_the_study_is_the_default_operators(self):
        assert parse_study(study_with()).operator == DEFAULT_OPERATOR

    def test_naming_the_default_gives_the_same_study(self):
        named = parse_study(study_with(**{'seed = 3': 'seed = 3\noperator = "sigmoid_focal_loss_grad"'}))
        assert named.operator == DEFAULT_OPERATOR

    def test_an_unknown_operator_names_the_key_and_the_choices(self):
        with pytest.raises(StudyFileError, match=r"<study>: operator: 'bce'; expected one of sigmoid_focal_loss_grad"):
            parse_study(study_with(**{'seed = 3': 'seed = 3\noperator = "bce"'}))

    def test_the_command_exits_2_with_one_line_and_writes_nothing(self, tmp_path):
        (tmp_path / "bad.toml").write_text(study_with(**{'seed = 3': 'seed = 3\noperator = "bce"'}))
        before = tree(tmp_path)
        code, out, err = precision("run", "bad.toml", "--out", "out", cwd=tmp_path)
        assert code == 2 and out == ""
        assert err.strip().splitlines() == [
            "precision: error: bad.toml: operator: 'bce'; expected one of sigmoid_focal_loss_grad"]
        assert tree(tmp_path) == before


@pytest.fixture
def mirror(tmp_path, monkeypatch):
    """The sibling operator ``mirror`` registered (its module on the path): its module."""
    folder = tmp_path / "operators"
    folder.mkdir()
    (folder / "mirror_operator.py").write_text(MIRROR)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setitem(operators.OPERATORS, "mirror", "mirror_operator")
    return get_operator("mirror")


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
    TermCache(tmp_path).store(2.0, x, sfl.focal_term_tables(x, [2.0])[2.0])
    assert TermCache(tmp_path).lookup(2.0, x)[0].all()
    assert not TermCache(tmp_path, operator="mirror").lookup(2.0, x)[0].any()
    TermCache(tmp_path, operator="mirror").store(2.0, x, sfl.focal_term_tables(x, [2.0])[2.0])
    assert TermCache(tmp_path, create=False).info()["shards"] == 2
    assert TermCache(tmp_path, create=False).clear() == 2
