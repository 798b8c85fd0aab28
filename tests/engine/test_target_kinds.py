"""Tests of the target kinds (precision.recipes.target_kinds): an operator with a real (soft) target.

``SoftBCE`` below is an operator registered for the test only: the alpha-weighted binary cross-entropy with a
soft target t in [0, 1] (label smoothing), loss = a_t ((1 - t) softplus(x) + t softplus(-x)) w with
a_t = t alpha + (1 - t)(1 - alpha).  It declares ``TARGET_KIND = "real"`` and runs SigmoidFocalLoss's own
recipes at gamma 0 (their bce = max(x, 0) - x t + Ln(1 + e) and a_t are the soft formulas), with its own
certified oracle.  Its target goes through the study file, the engine's tensors and tables, the witnesses, the
report's explain lines and the commands as the exact value it is, never as an integer.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from mpmath import mp, mpf

from precision.errors import DtypeError, ParameterError, PrecisionError, StudyFileError
from precision.recipes.target_kinds import (BINARY, REAL, parse_target_text, target_json, target_kind,
                                            target_text)

from cli_support import run
from operator_support import operator_study, register

SOFT = '''
from fractions import Fraction

import numpy as np
from mpmath import libmp, mp, mpf

import precision.operators.sigmoid_focal_loss as _fwd
from precision.exact.certify import escalate
from precision.exact.terms import derive
from precision.operators.sigmoid_focal_loss import inputs as _inputs, oracle as _oracle, variants as _variants
from precision.errors import OracleUndecidedError, ParameterError
from precision.recipes.operands import check_arrays, float32_attribute, load_operands
from precision.recipes.shared import evaluate_rows
from precision.recipes.steps import BoundRecipe
from precision.recipes.target_kinds import REAL

TITLE, VALUE = "SoftBCE", "loss"
TARGET_KIND = "real"
INPUTS = ("target", "weight")
ATTRIBUTES = {"alpha": (0.25,)}
ORACLE_VERSION = "soft-bce-1"
RESULT_SOURCES = ()
get_variant = _fwd.get_variant


def variant_names():
    return ["kernel", "candidate"]


def validate_inputs(pred, target, dout, weight, alpha, reduction="none"):
    arrays = check_arrays({"pred": pred, "target": target, "weight": weight}, REAL)
    if not ((arrays["target"] >= 0) & (arrays["target"] <= 1)).all():
        raise ParameterError("target holds values outside [0, 1]; expected a soft target")
    a32 = float32_attribute("alpha", alpha)
    return _inputs.LossInputs(arrays["pred"], arrays["target"], arrays.get("weight"), a32, np.float32(0),
                              reduction)


def _coefficients(t, alpha):
    T, A = Fraction(float(t)), Fraction(float(alpha))
    a_t = T * A + (1 - T) * (1 - A)
    return a_t * (1 - T), a_t * T


def _ball(x, t, alpha, weight, prec):
    with mp.workprec(prec):
        total, rel = mpf(0), 0.0
        for c, s in zip(_coefficients(t, alpha), (x, -x)):
            if c:
                mid, r = _oracle.term_ball(s, 0.0, prec)
                total += mpf(c.numerator) / c.denominator * mid
                rel = max(rel, r)
        return total * mpf(weight), rel + 2.0 ** (4 - prec)


def _fraction(v):
    sign, man, exp, _ = v._mpf_
    return (-1) ** sign * Fraction(int(man)) * Fraction(2) ** exp if man else Fraction(0)


def round_exact(x, t, alpha, weight=1.0, dout=1.0, count=1, fmt="fp32"):
    def attempt(prec):
        mid, rel = _ball(x, t, alpha, weight, prec)
        return _oracle.round_within(_fraction(mid), rel, fmt)
    value = escalate(attempt, 96, 4096)
    if value is None:
        raise OracleUndecidedError("undecided")
    return value


def exact_decimal(x, t, alpha, weight=1.0, dout=1.0, count=1, digits=40):
    value = _ball(x, t, alpha, weight, int(digits * 3.33) + 96)[0]
    return "0" if value == 0 else libmp.to_str(value._mpf_, digits)


def term_tables(x, terms):
    return {term: _oracle.term_tables(x, [0.0])[0.0] for term in terms}


def derive_exact(x, t, alpha, weight, dout, count, fmt, pos, neg, certify=True):
    x, t, a = (np.asarray(v, np.float64).ravel() for v in (x, t, alpha))
    coefficients = [_coefficients(tv, av) for tv, av in zip(t.tolist(), a.tolist())]
    c0 = np.array([float(c) for c, _ in coefficients])
    c1 = np.array([float(c) for _, c in coefficients])
    exact_c = np.array([float(p) == p and float(q) == q for p, q in coefficients])
    w = np.asarray(weight, np.float64)

    def fallback(rows, f):
        out = np.empty((3, rows.size))
        for k, i in enumerate(rows.tolist()):
            out[0, k] = round_exact(float(x[i]), float(t[i]), float(a[i]), float(w[i]), fmt=f)
            v = _ball(float(x[i]), float(t[i]), float(a[i]), float(w[i]), 160)[0]
            out[1, k] = float(v)
            out[2, k] = float(v - mpf(float(v)))
        return out[0], out[1], out[2]
    return derive(c0, c1, exact_c, w, dout, count, fmt, pos, neg, fallback, certify)


def _machine_of(machine, inputs):
    return lambda call: _variants._prepared(call, machine, inputs)


def evaluate_variants(names, pred, target, dout=None, weight=None, *, alpha=0.25, reduction="none",
                      machine="ieee", count=None, keep_steps=()):
    inputs = validate_inputs(pred, target, dout, weight, alpha, reduction)
    return evaluate_rows(list(names), _variants.TABLE, inputs, _machine_of(machine, inputs), None, inputs.count,
                         load_operands, keep_steps)


def bind_recipe(variant, pred, target, dout=None, weight=None, *, alpha=0.25, reduction="none", machine="ieee",
                count=None):
    row = get_variant(variant)
    call = _variants.recipe_call(row)
    inputs = validate_inputs(pred, target, dout, weight, alpha, reduction)
    m = _machine_of(machine, inputs)(call)
    return BoundRecipe(row.name, call, call.recipe.plan(call.config), m, call.prepare(m, inputs),
                       load_operands(m, inputs), inputs.shape, inputs.count)
'''

SOFT_STUDY = operator_study("soft", "a soft target", seed=4, stop=30.0, num=61,
                            targets='[0, 0.25, "0x1.8p-1", 1]')


@pytest.fixture
def soft(tmp_path, monkeypatch):
    """The soft-target operator ``soft`` registered: its interface."""
    return register(tmp_path, monkeypatch, "soft", SOFT)


def by_hand(x: float, t: float, alpha: float) -> mpf:
    """The soft loss at 200 bits, straight from its formula (no term tables, no balls)."""
    with mp.workprec(200):
        x, t, a = mpf(x), mpf(t), mpf(alpha)
        a_t = t * a + (1 - t) * (1 - a)
        return a_t * ((1 - t) * mp.log1p(mp.exp(x)) + t * mp.log1p(mp.exp(-x)))


class TestKinds:
    def test_binary_is_an_int32_selector(self):
        assert BINARY.parse("1") == 1 and BINARY.parse(0) == 0 and BINARY.dtype(np.float16) == np.int32
        for bad in ("0.5", 0.5, 2**31, True, "x"):
            with pytest.raises(ParameterError, match="expected an int32 selector"):
                BINARY.parse(bad)
        BINARY.check_exact(0.1, ["fp16"])  # a selector has no format
        with pytest.raises(DtypeError, match=r"^target dtype=float32; expected int32$"):
            BINARY.check_array(np.zeros(2, np.float32), np.float32)

    def test_real_is_an_exact_value_of_the_input_format(self):
        assert REAL.parse("0x1.8p-1") == 0.75 and REAL.parse("0.25") == 0.25 and REAL.parse(1) == 1.0
        assert REAL.dtype(np.float16) == np.float16 and REAL.array([0, 0.75], np.float32).dtype == np.float32
        for bad in ("inf", "nan", "x", True):
            with pytest.raises(ParameterError, match="expected a finite float value"):
                REAL.parse(bad)
        REAL.check_exact(0.75, ["fp16", "fp32"])
        with pytest.raises(ParameterError, match=r"target=0.1 is not exact in fp16 \(it rounds to "
                                                 r"0x1.9980000000000p-4\)"):
            REAL.check_exact(0.1, ["fp16", "fp32"])
        REAL.check_exact(float(np.float32(0.1)), ["fp32"])
        with pytest.raises(DtypeError, match="expected float16 \\(a real target has pred's dtype\\)"):
            REAL.check_array(np.zeros(2, np.float32), np.float16)

    def test_witness_text_reads_back_exactly(self):
        assert [target_text(v) for v in (0, 1.0, np.int64(1), 0.75, 0.25, "0x1.8000000000000p-1")] == \
            ["0", "1", "1", "0x1.8p-1", "0x1p-2", "0x1.8p-1"]
        assert [target_json(v) for v in (1.0, 0.75)] == [1, "0x1.8000000000000p-1"]
        for v in (0, 1, 0.75, float(np.float32(0.1)), 2.0**-149):
            assert parse_target_text(target_text(v)) == v and parse_target_text(target_json(v)) == v
        assert isinstance(parse_target_text("1"), int) and parse_target_text(0.5) == 0.5

    def test_an_operator_declares_its_kind_default_binary(self, tmp_path, monkeypatch):
        from precision.engine.operators import get_operator
        assert target_kind(get_operator("sigmoid_focal_loss_grad")) is BINARY
        assert target_kind(get_operator("sigmoid_focal_loss")) is BINARY
        with pytest.raises(PrecisionError, match=r"operator 'odd' has TARGET_KIND='soft'; expected one of "
                                                 r"binary, real"):
            register(tmp_path, monkeypatch, "odd", SOFT.replace('TARGET_KIND = "real"', 'TARGET_KIND = "soft"'))


class TestSoftOperator:
    def test_its_oracle_is_the_formula(self, soft):
        for x, t in ((1.5, 0.75), (-3.0, 0.25), (20.0, float(np.float32(0.1))), (0.0, 0.5)):
            assert soft.round_exact(x, t, 0.25) == float(np.float32(by_hand(x, t, 0.25)))
            assert soft.exact_decimal(x, t, 0.25, digits=30) == mp.nstr(by_hand(x, t, 0.25), 30, strip_zeros=False)

    def test_a_real_target_loads_as_its_value_and_a_whole_one_as_the_selector_did(self, soft):
        x = np.array([[-4.0, 0.5, 9.0]], np.float32)
        import precision.operators.sigmoid_focal_loss as fwd
        for t in (0, 1):
            soft_out = soft.evaluate("kernel", x, np.full(x.shape, t, np.float32), None, alpha=0.25, machine="npu")
            binary = fwd.evaluate("kernel", x, np.full(x.shape, t, np.int32), None, alpha=0.25, gamma=0.0,
                                  machine="npu")
            assert soft_out.tobytes() == binary.tobytes()
        out = soft.evaluate("kernel", x, np.full(x.shape, 0.75, np.float32), None, alpha=0.25, machine="ieee")
        exact = [soft.round_exact(float(v), 0.75, 0.25) for v in x[0]]
        assert np.max(np.abs(out[0].view(np.int32) - np.array(exact, np.float32).view(np.int32))) <= 4
        with pytest.raises(DtypeError, match="target dtype=int32; expected float32"):
            soft.evaluate("kernel", x, np.ones(x.shape, np.int32), None, alpha=0.25)

    def test_a_study_of_it_runs_and_reports_with_its_values(self, tmp_path, capsys, soft):
        from precision.engine.study import parse_study
        from precision.engine.sweep import run_study
        from precision.products.report import build_report
        study = parse_study(SOFT_STUDY)
        assert study.targets == (0.0, 0.25, 0.75, 1.0)
        run_study(study, tmp_path / "runs" / "soft", cache_dir=tmp_path / "c", workers=1)
        groups = pd.read_csv(tmp_path / "runs" / "soft" / "groups.csv")
        assert sorted(set(groups["target"])) == [0.0, 0.25, 0.75, 1.0]
        points = pd.read_parquet(tmp_path / "runs" / "soft" / "points.parquet")
        soft_points = points[points["target"] == 0.75].head(5)
        assert len(soft_points)
        for r in soft_points.itertuples():
            assert float(np.float32(r.rounded)) == soft.round_exact(float(r.pred), 0.75, 0.25)
        build_report("soft", runs_dir=tmp_path / "runs", out_dir=tmp_path / "rep")
        text = (tmp_path / "rep" / "soft" / "report.md").read_text()
        assert "fp32, t=0x1p-2, any x, kernel" in text and "fp32, t=0x1.8p-1, any x, kernel" in text
        lines = [ln for ln in text.split("`") if ln.startswith("precision explain") and "--target 0x1" in ln]
        assert lines and all(w in ("--target 0x1p-2", "--target 0x1.8p-1") for ln in lines
                             for w in [ln[ln.index("--target"):].split(" --")[0]])
        code, out, _ = run(capsys, *lines[0].split()[1:])  # the printed line runs (in this process: the operator
        assert code == 0 and "target   0x1" in out       # is registered for the test only)

    def test_an_inexact_target_in_a_study_is_one_clear_error(self, soft):
        from precision.engine.study import parse_study
        with pytest.raises(StudyFileError, match=r"points.target.*0.1 is not exact in fp32"):
            parse_study(SOFT_STUDY.replace('"0x1.8p-1"', "0.1"))
        with pytest.raises(StudyFileError, match="points.target"):
            parse_study(SOFT_STUDY.replace('"0x1.8p-1"', '"half"'))

    def test_its_commands_take_and_print_the_value(self, capsys, soft):
        code, out, _ = run(capsys, "oracle", "--operator", "soft", "--pred", "1.5", "--target", "0.75")
        assert code == 0 and "target  0x1.8p-1" in out
        assert f"fp32    {soft.round_exact(1.5, 0.75, 0.25).hex()}" in out
        code, out, _ = run(capsys, "explain", "kernel", "--operator", "soft", "--pred", "1.5", "--target", "0x1.8p-1",
                           "--json")
        got = json.loads(out)
        assert code == 0 and got["inputs"]["target"] == "0x1.8000000000000p-1"
        assert got["exact_rounded"] == soft.round_exact(1.5, 0.75, 0.25).hex()
        code, out, err = run(capsys, "explain", "kernel", "--operator", "soft", "--pred", "1", "--target", "0.1",
                             "--format", "fp16")
        assert (code, out) == (2, "") and "--target=0.1 is not exact in fp16" in err and err.count("\n") == 1
        code, out, _ = run(capsys, "hunt", "kernel", "--operator", "soft", "--target", "0.75", "0.25", "--points",
                           "3000", "--workers", "1", "--json")
        hunted = json.loads(out)
        assert code == 0 and hunted["targets"] == ["0x1.8000000000000p-1", "0x1.0000000000000p-2"]
        assert hunted["witness"]["target"] in hunted["targets"]
        code, out, err = run(capsys, "explain", "kernel", "--pred", "1", "--target", "0.5")
        assert (code, out) == (2, "") and "--target='0.5' is not an integer" in err


    def test_score_reads_a_real_target_array(self, tmp_path, capsys, soft):
        x = np.linspace(-8, 8, 64, dtype=np.float32).reshape(8, 8)
        np.savez(tmp_path / "in.npz", pred=x, target=np.full(x.shape, 0.75, np.float32))
        np.save(tmp_path / "out.npy", soft.evaluate("kernel", x, np.full(x.shape, 0.75, np.float32), None,
                                                     alpha=0.25, machine="npu"))
        code, out, _ = run(capsys, "score", "--operator", "soft", "--inputs", str(tmp_path / "in.npz"), "--outputs",
                           str(tmp_path / "out.npy"), "--out", str(tmp_path / "score"))
        assert code == 0 and ",target=0x1.8p-1," in out.splitlines()[0]
        assert "mare_witness=" in out and ",target=0x1.8p-1," in out.split("mare_witness=")[1]
        np.savez(tmp_path / "int.npz", pred=x, target=np.ones(x.shape, np.int32))
        code, out, err = run(capsys, "score", "--operator", "soft", "--inputs", str(tmp_path / "int.npz"),
                             "--outputs", str(tmp_path / "out.npy"), "--out", str(tmp_path / "score2"))
        assert (code, out) == (2, "") and "target dtype=int32; expected float32" in err
        assert not (tmp_path / "score2").exists()
