"""Acceptance standards: MERE / MARE / RMSE, threshold and ratio levels, allclose, blind spots and false alarms."""

import math

import numpy as np
import pandas as pd
import pytest

from precision.operators.sigmoid_focal_loss_grad.guards import evaluate
from precision.operators.sigmoid_focal_loss_grad.oracle import exact_gradient, gradient
from precision.analysis.acceptance import (BLIND_ULP, THRESHOLD_T, acceptance_columns, relative_error,
                                          special_positions, standards_golden)
from precision.analysis.groups import GroupStats, Grouping
from precision.analysis.scoring import bits_error, classify, ulp_error
from precision.analysis.standards import (LEVEL_RANK, RATIO_LEVELS, ROW_LEVEL_RANK, STANDARDS_COLUMNS,
                                          StandardsSettings, ratio, ratio_level, standards_table)
from precision.engine.study import parse_study
from precision.engine.sweep import run_study

# the kernel's fp32 q-hole (pred 16.625, selector 0): about 8.8e7 ulp off, yet r ~ 1e-14
Q_HOLE = 16.625
# fp16 outputs near the subnormal range, correctly rounded to 0 or -2^-24, with r ~ 0.23
FP16_TINY = (-6.046875, 1), (5.67578125, 0)


def _scores(variant, preds, targets, fmt, machine, alpha=0.25, gamma=2.0):
    dtype = np.float16 if fmt == "fp16" else np.float32
    x = np.asarray(preds, dtype=dtype).reshape(1, -1)
    t = np.asarray(targets, dtype=np.int32).reshape(1, -1)
    out = evaluate(variant, x, t, np.ones_like(x), alpha=alpha, gamma=gamma, reduction="none",
                   machine=machine).ravel()
    hi, lo, _ = exact_gradient(x.astype(np.float64).ravel(), t.ravel(), alpha, gamma)
    rounded = gradient(x.astype(np.float64).ravel(), t.ravel(), alpha, gamma, fmt=fmt)
    return out, hi, lo, rounded


def _reduce(out, hi, lo, rounded, fmt, group=None, **keys):
    group = np.zeros(out.size, dtype=np.int64) if group is None else np.asarray(group)
    grouping = Grouping(group, int(group.max()) + 1)
    err = ulp_error(out, (hi, lo), fmt, rounded)
    c64 = out.astype(np.float64)
    stats = GroupStats.reduce(grouping, err, bits_error(out, rounded, fmt), classify(out, rounded),
                              witness={"pred": np.arange(out.size, dtype=np.float64), "computed": c64, "exact": hi},
                              acceptance=(c64, hi, fmt))
    return stats.with_columns(format=fmt, region="r0", **keys), err


class TestMetricsByHand:
    def test_relative_error(self):
        r = relative_error([1.0, np.nan, np.inf, 0.0, -np.inf], [1.5, 1.0, 1.0, 1e-7, -np.inf])
        assert r[0] == 0.5 / (1.5 + 1e-7)
        assert r[1] == np.inf and r[2] == np.inf
        assert r[3] == 1e-7 / 2e-7
        assert r[4] == 0.0
        # matches (NaN and NaN, the same infinity) score 0; opposite infinities and inf against NaN inf
        r = relative_error([np.nan, np.inf, np.inf, np.inf], [np.nan, np.inf, -np.inf, np.nan])
        assert r.tolist() == [0.0, 0.0, np.inf, np.inf]

    def test_acceptance_columns(self):
        c = np.array([1.0, 2.0, 3.0, np.nan, 0.0])
        g = np.array([1.0, 2.5, 3.0 + 1e-3, 1.0, 2.0 ** -30])
        err = np.array([0.0, 5e3, 0.3, np.inf, 0.5])  # ulp errors, given
        grouping = Grouping([0, 0, 0, 1, 1], 2)
        out = acceptance_columns(grouping, c, g, err, "fp32", {"pred": np.arange(5.0)})
        r = np.abs(c - g) / (np.abs(g) + 1e-7)
        assert out["acc_sum_r"][0] == pytest.approx(r[:3].sum(), rel=1e-15)
        # point 3 (NaN against 1.0) is a special mismatch, out of the sums: group 1 sums point 4 alone
        assert out["acc_sum_r"][1] == r[4]
        assert list(out["acc_special_mismatch"]) == [0, 1] and list(out["acc_special_match"]) == [0, 0]
        assert out["acc_sum_sq"][0] == pytest.approx(0.25 + 1e-6, rel=1e-12)
        assert out["mare"][0] == r[1] and out["mare_witness_pred"][0] == 1.0
        # 10 T in fp32 = 10 * 2^-13 = 0.00122: point 1 (r = 0.2, 5e3 ulp) is not accepted, so not blind
        assert list(out["acc_blind"]) == [0, 0]
        # point 4: 0.5 ulp, r = 2^-30 / (2^-30 + 1e-7) ~ 0.0092 > 10 T: a false alarm
        assert list(out["acc_false_alarm"]) == [0, 1]
        assert out["false_alarm_witness_pred"][1] == 4.0 and np.isnan(out["false_alarm_r"][0])
        # unit_test fp32: atol 8e-4, rtol 2e-3; point 2 is off by 1e-3 <= 8e-4 + 2e-3 * 3.001
        assert list(out["acc_allclose_unit_test"]) == [2, 1]
        # dynamic_shape: atol 1e-3, rtol 2e-3 (point 4 passes on atol)
        assert list(out["acc_allclose_dynamic_shape"]) == [2, 1]

    def test_blind_needs_acceptance_and_a_large_error(self):
        g = np.array([1e-21, 1e-21, 1.0])
        c = np.array([7e-21, -7e-21, 1.0 + 2 ** -20])
        err = np.array([BLIND_ULP * 2, BLIND_ULP * 2, BLIND_ULP])  # the last is exactly 2^10: not over
        out = acceptance_columns(Grouping([0, 0, 0], 1), c, g, err, "fp32")
        assert list(out["acc_blind"]) == [2]
        assert out["blind_ulp"][0] == BLIND_ULP * 2

    def test_standards_table_metrics(self):
        c = np.array([1.0, 2.0, 4.0], dtype=np.float32)
        hi = np.array([1.0, 2.0 + 2 ** -10, 4.0])
        stats, _ = _reduce(c, hi, np.zeros(3), hi.astype(np.float32), "fp32", variant="v", machine="ieee")
        t = standards_table(stats, StandardsSettings(third_party="v"))
        assert list(t.columns) == list(STANDARDS_COLUMNS)
        row = t.iloc[0]
        r1 = 2 ** -10 / (2.0 + 2 ** -10 + 1e-7)
        assert row["count"] == 3
        assert row["mere"] == pytest.approx(r1 / 3, rel=1e-14)
        assert row["mare"] == pytest.approx(r1, rel=1e-14)
        assert row["rmse"] == pytest.approx(math.sqrt(2 ** -20 / 3), rel=1e-14)
        # MERE = 1.6e-4 >= T = 1.22e-4: the threshold standard fails
        assert row["threshold_T"] == THRESHOLD_T["fp32"] and not row["threshold_pass"]
        assert row["mare_witness"].startswith("pred=0x1.0000000000000p+0,")  # the second point (index 1)
        # against itself every ratio is 1, and that is no verdict
        assert (row["mare_ratio"], row["mere_ratio"], row["rmse_ratio"]) == (1.0, 1.0, 1.0)
        assert row["level"] == "third_party"


class TestSpecialValues:
    """TTK's special-value rules (acceptance.SPECIAL_RULE) on every standard."""

    def test_a_correctly_rounded_overflow_is_its_rounding(self):
        exact = np.array([-1e301, 1.0, 7e38, np.nan])
        rounded = np.array([-np.inf, 1.0, np.inf, np.nan])  # fp32's correct roundings
        assert standards_golden(exact, rounded).tolist()[:3] == [-np.inf, 1.0, np.inf]
        assert np.isnan(standards_golden(exact, rounded)[3])

    def test_special_positions(self):
        c = np.array([np.nan, np.inf, -np.inf, np.inf, 1.0, np.nan, 2.0])
        g = np.array([np.nan, np.inf, np.inf, 3.0, np.inf, 1.0, 2.5])
        evaluated, matched, mismatched = special_positions(c, g)
        assert evaluated.tolist() == [False] * 6 + [True]
        assert matched.tolist() == [True, True] + [False] * 5
        assert mismatched.tolist() == [False, False, True, True, True, True, False]

    def _table(self, outputs, settings=None):
        """standards.csv of variants (name -> fp32 outputs) on three points whose exact values are -1e301
        (fp32: -inf), 1.0 and 2.0."""
        hi, lo = np.array([-1e301, 1.0, 2.0]), np.zeros(3)
        rounded = np.array([-np.inf, 1.0, 2.0], dtype=np.float32)
        parts = []
        for name, out in outputs.items():
            out = np.asarray(out, dtype=np.float32)
            err = ulp_error(out, (hi, lo), "fp32", rounded)
            c64 = out.astype(np.float64)
            parts.append(GroupStats.reduce(Grouping(np.zeros(3, np.int64), 1), err, bits_error(out, rounded, "fp32"),
                                           classify(out, rounded), witness={"pred": np.arange(3.0)},
                                           acceptance=(c64, standards_golden(hi, rounded), "fp32"))
                         .with_columns(variant=name, machine="ieee", format="fp32", region="r0"))
        t = standards_table(GroupStats.concat(parts), settings or StandardsSettings(third_party="tp"))
        return t[t["region"] == "all"].set_index("variant")

    def test_a_correct_infinity_passes_and_leaves_the_metrics(self):
        t = self._table({"v": [-np.inf, 1.0, 2.0], "tp": [-np.inf, 1.0, 2.0]})
        row = t.loc["v"]
        assert (row["evaluated"], row["special_match"], row["special_mismatch"]) == (2, 1, 0)
        assert row["mere"] == 0.0 and row["mare"] == 0.0 and row["rmse"] == 0.0 and row["threshold_pass"]
        assert row["allclose_share"] == 1.0 and row["false_alarm"] == 0
        assert (row["mare_ratio"], row["mere_ratio"], row["rmse_ratio"]) == (1.0, 1.0, 1.0)
        assert row["level_note"] == ""

    def test_a_mismatch_fails_the_threshold_and_the_ratio_standard(self):
        # v: a finite value where the exact value overflows (and a NaN where it is 2): mismatches
        t = self._table({"v": [-3e38, 1.0, np.nan], "tp": [-np.inf, 1.0, 2.0]})
        row = t.loc["v"]
        assert (row["evaluated"], row["special_match"], row["special_mismatch"]) == (1, 0, 2)
        assert row["mere"] == 0.0 and not row["threshold_pass"]
        assert row["level"] == "special_mismatch" and row["level_note"].startswith("2 special mismatches")
        assert row["allclose_share"] == pytest.approx(1 / 3)
        assert ROW_LEVEL_RANK[row["level"]] == 0 and row["level"] not in LEVEL_RANK  # (no budget names it)

    def test_the_third_party_s_specials_judged_as_cross_check_does(self):
        # the third party's NaN where the exact value overflows: the variant matches the golden there (rule 2)
        t = self._table({"v": [-np.inf, 1.0, 2.0], "tp": [np.nan, 1.0, 2.0]})
        assert t.loc["v", "level"] == "none" and t.loc["v", "level_note"] == ""  # judged: 3 cases, below L0
        assert (t.loc["v", "mere_ratio"], t.loc["v", "mare_ratio"]) == (1.0, 1.0)
        # its NaN where the exact value is 1.0: the variant, right there, does not equal it (rule 1): fails
        t = self._table({"v": [-np.inf, 1.0, 2.0], "tp": [-np.inf, np.nan, 2.0]})
        assert t.loc["v", "level"] == "third_party_special" and t.loc["v", "threshold_pass"]
        assert t.loc["v", "level_note"].startswith("the third party gives 1 special outputs where the exact")
        assert ROW_LEVEL_RANK["third_party_special"] == 0
        # the third party against itself is no verdict
        assert t.loc["tp", "level"] == "third_party"
        # mismatches on both sides: only a position-by-position comparison decides
        t = self._table({"v": [-np.inf, np.nan, 2.0], "tp": [-np.inf, 1.0, np.inf]})
        assert t.loc["v", "level"] == "not_evaluable"
        assert "1 here, 1 in the third party" in t.loc["v", "level_note"]
        assert t.loc["v", "level"] not in ROW_LEVEL_RANK  # not judged: a gate reads NaN


class TestRatioLevels:
    def test_ratio_conventions(self):
        np.testing.assert_array_equal(ratio([0.0, 1.0, 3.0, 1.0], [0.0, 0.0, 2.0, 0.0], 0.0), [1.0, np.inf, 1.5,
                                                                                               np.inf])
        assert ratio([1.0], [0.0], 0.5)[0] == 2.0

    @pytest.mark.parametrize("name", list(RATIO_LEVELS))
    def test_levels_flip_at_their_limits(self, name):
        lim = RATIO_LEVELS[name]
        order = list(RATIO_LEVELS)
        below = order[order.index(name) - 1] if order.index(name) else "none"
        n = lim["min_count"]
        at = ratio_level([lim["mare"]], [lim["mere"]], [lim["rmse"]], [n])[0]
        assert at == name  # at every limit, with the minimum count: passes
        for m in ("mare", "mere", "rmse"):
            v = {k: lim[k] for k in ("mare", "mere", "rmse")}
            v[m] = np.nextafter(v[m], np.inf)
            assert ratio_level([v["mare"]], [v["mere"]], [v["rmse"]], [n])[0] == below, m
        assert ratio_level([lim["mare"]], [lim["mere"]], [lim["rmse"]], [n - 1])[0] == below
        assert ratio_level([np.nan], [1.0], [1.0], [n])[0] == "unpaired"


class TestOperatorPoints:
    @pytest.mark.parametrize("machine", ["ieee", "npu"])
    def test_kernel_fp32_q_hole_is_blind(self, machine):
        out, hi, lo, rounded = _scores("kernel", [Q_HOLE, 1.0], [0, 0], "fp32", machine)
        stats, err = _reduce(out, hi, lo, rounded, "fp32", variant="kernel", machine=machine)
        assert err[0] > 8e7 and err[1] < BLIND_ULP  # pred 1: a few ulps, accepted and not blind
        r = relative_error(out.astype(np.float64), hi)
        assert r[0] < 1e-13  # the 1e-7 floor hides a 7x wrong output
        f = stats.frame
        assert int(f["acc_blind"].iloc[0]) == 1
        assert f["blind_witness_pred"].iloc[0] == 0.0  # the witness index: the q-hole point
        assert f["blind_ulp"].iloc[0] == err[0]
        t = standards_table(stats, StandardsSettings(third_party="kernel", third_party_machine=machine))
        assert bool(t["threshold_pass"].iloc[0]) and t["blind"].iloc[0] == 1
        witness = t["blind_witness"].iloc[0]
        assert witness.startswith("pred=0x0.0p+0,computed=") and witness.endswith("p-70,exact=-0x1.8c53af1ab020bp-73")

    @pytest.mark.parametrize("variant", ["kernel", "golden"])
    def test_fp16_correctly_rounded_tiny_outputs_are_false_alarms(self, variant):
        preds, targets = zip(*FP16_TINY)
        out, hi, lo, rounded = _scores(variant, preds, targets, "fp16", "npu")
        stats, err = _reduce(out, hi, lo, rounded, "fp16", variant=variant, machine="npu")
        assert np.all(err <= 0.5) and out.view(np.uint16).tolist() == rounded.view(np.uint16).tolist()
        r = relative_error(out.astype(np.float64), hi)
        assert np.all(r > 10 * THRESHOLD_T["fp16"]) and r.max() > 0.2
        assert int(stats.frame["acc_false_alarm"].iloc[0]) == 2
        assert stats.frame["false_alarm_r"].iloc[0] == r.max()
        t = standards_table(stats, StandardsSettings(third_party=variant, third_party_machine="npu"))
        assert not t["threshold_pass"].iloc[0] and t["false_alarm"].iloc[0] == 2 and t["blind"].iloc[0] == 0


STUDY = """
name = "std"
seed = 0
[pred]
kind = "list"
format = "fp16"
values = ["0x1.0ap+4", "0x1p+0", "-0x1.83p+2", "0x1.6b4p+2", "-0x1p+1"]
[points]
target = [0, 1]
alpha = [0.25]
gamma = [2.0]
profiles = ["fp16", "fp32"]
[run]
variants = ["kernel", "golden", "naive"]
machines = ["ieee", "npu"]
per_point = "none"
[report]
sections = ["standards"]
[report.standards]
third_party = "golden"
allclose = "dynamic_shape"
"""


def test_run_writes_standards_csv(tmp_path):
    out = tmp_path / "run"
    run_study(parse_study(STUDY, str(tmp_path / "std.toml")), out, cache_dir=tmp_path / "cache", workers=1)
    t = pd.read_csv(out / "standards.csv", dtype={"region": str})
    assert list(t.columns) == list(STANDARDS_COLUMNS)
    a = t[t["region"] == "all"].set_index(["variant", "machine", "format"])
    assert a.loc[("kernel", "ieee", "fp32"), "blind"] == 1
    assert a.loc[("kernel", "ieee", "fp32"), "blind_witness"].startswith("pred=0x1.0a00000000000p+4,target=0,")
    assert a.loc[("golden", "ieee", "fp16"), "false_alarm"] >= 2
    g = a.loc[("golden", "ieee", "fp32")]
    assert (g["mare_ratio"], g["mere_ratio"], g["rmse_ratio"]) == (1.0, 1.0, 1.0) and g["level"] == "third_party"
    assert (t["third_party"] == "golden@ieee").all()
    # 10 points per format: every other cell is below L0's 5,000 cases
    assert set(a["level"]) == {"none", "third_party"}
    again = tmp_path / "again"
    run_study(parse_study(STUDY, str(tmp_path / "std.toml")), again, cache_dir=tmp_path / "cache", workers=1)
    assert (out / "standards.csv").read_bytes() == (again / "standards.csv").read_bytes()


BUDGETS = """
[gate]
study = "std.toml"

[[budget]]
variant = "kernel"
format = "fp32"
machine = "ieee"
mere = {mere}
mare = 1e-4
rmse = 1e-6
min_allclose_share = 1.0
blind = {blind}
min_level = "{level}"
"""


@pytest.mark.parametrize("blind, level, failing", [(1, "none", set()), (0, "none", {"blind"}),
                                                    (1, "L0", {"level"})])
def test_gate_budgets_on_the_standards(tmp_path, blind, level, failing):
    from precision.products.gate import run_gate
    (tmp_path / "std.toml").write_text(STUDY)
    budgets = tmp_path / "budgets.toml"
    budgets.write_text(BUDGETS.format(mere=1e-3, blind=blind, level=level))
    result = run_gate(budgets, out_dir=tmp_path / "run", cache_dir=tmp_path / "cache", workers=1)
    status = {line.metric: line.status for line in result.lines}
    assert {"mere", "mare", "rmse", "allclose_share", "blind", "level"} <= set(status)
    assert {m for m, s in status.items() if s == "FAIL"} == failing
    observed = {line.metric: line.observed for line in result.lines}
    assert observed["blind"] == 1.0 and observed["level"] == 0.0  # 10 points: below L0's 5,000 cases
    assert result.exit_status == (1 if failing else 0)


def test_gate_rejects_an_unknown_level(tmp_path):
    from precision.errors import StudyFileError
    from precision.products.gate import load_budgets
    budgets = tmp_path / "budgets.toml"
    budgets.write_text(BUDGETS.format(mere=1e-3, blind=0, level="L3"))
    with pytest.raises(StudyFileError, match="min_level: 'L3'; expected one of 'none', 'L0', 'L1', 'L2'"):
        load_budgets(budgets)


def test_score_judges_a_device_dump_by_the_standards_and_by_ulp():
    from precision.operators.sigmoid_focal_loss_grad.implementations.common import validate_inputs
    from precision.products.score_outputs import score_outputs
    pred = np.array([[Q_HOLE, 1.0, -2.0, 3.0]], dtype=np.float32)
    target = np.zeros(pred.shape, dtype=np.int32)
    dout = np.ones(pred.shape, dtype=np.float32)
    inputs = validate_inputs(pred, target, dout, None, 0.25, 2.0, "none")
    device = evaluate("kernel", pred, target, dout, alpha=0.25, gamma=2.0, reduction="none", machine="npu")
    alone = score_outputs(inputs, device, label="dev")
    s = alone.tables["standards.csv"]
    row = s[(s["machine"] == "device") & (s["region"] == "all")].iloc[0]
    assert row["blind"] == 1 and row["third_party"] == "none" and row["level"] == "no_third_party"
    assert "row=0,col=0" in row["blind_witness"]
    line = [ln for ln in alone.lines() if ln.startswith("standards dev:")]
    assert len(line) == 1 and "blind=1 " in line[0] and "level=" not in line[0]
    paired = score_outputs(inputs, device, label="dev", compare_with="kernel", machine="npu")
    s = paired.tables["standards.csv"]
    row = s[(s["machine"] == "device") & (s["region"] == "all")].iloc[0]
    # the device is the emulation bit for bit: every ratio is 1, a tie; 4 cases reach no level
    assert row["third_party"] == "kernel@npu"
    assert (row["mare_ratio"], row["mere_ratio"], row["rmse_ratio"]) == (1.0, 1.0, 1.0) and row["level"] == "none"
    assert "vs kernel@npu: mare_ratio=1 mere_ratio=1 rmse_ratio=1 level=none" in "\n".join(paired.lines())


def test_unit_test_case_example_shows_what_the_test_cannot_see():
    """The example replays the published cases as they are (12 dtype profiles at 129 elements, the 257-element
    weighted mean and the 2,050-element unweighted case in fp32, inputs built in float32 arithmetic) and shows
    what their allclose cannot see."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "examples" / "unit_test_case.py"
    spec = importlib.util.spec_from_file_location("unit_test_case", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # the weights as the test builds them, in float32: 93 of the 257 differ by an ulp from float64-built ones
    i = np.arange(257)
    *_, weight = module.unit_test_inputs(257, (), 7)
    assert np.count_nonzero(weight[0] != (-0.75 + (i % 11) * 0.2).astype(np.float32)) == 93
    t = module.replay()
    assert len(t) == 14 * 3 and t["count"].value_counts().to_dict() == {129: 36, 257: 3, 2050: 3}
    big = t[t["count"] > 129]
    assert set(big["profile"]) == {"fp32/fp32/fp32", "fp32/fp32/none"}  # the two large cases run in fp32 only
    kernel = t[t["implementation"] == "kernel"]
    assert set(kernel["test_verdict"]) == {"pass"}  # the test passes every case on ieee and npu
    fp32 = t[t["profile"].str.startswith("fp32")]
    # ... while the kernel and the test's golden are both over 100 ulp from the exact value in fp32
    assert (fp32["max_ulp"] > 100).all() and fp32["threshold_pass"].all()
    # in fp16 the kernel is correctly rounded everywhere, yet the threshold standard fails it (false alarms)
    fp16 = kernel[kernel["profile"].str.startswith("fp16")]
    assert len(fp16) == 12 and (fp16["max_ulp"] <= 0.5).all() and (~fp16["threshold_pass"]).all()
    assert (fp16["false_alarm"] > 0).all()


@pytest.mark.parametrize("edit, words", [
    (('allclose = "dynamic_shape"', 'allclose = "loose"'),
     "report.standards.allclose: 'loose' is not an allclose preset"),
    (('third_party = "golden"', 'third_party = "nosuch"'), "report.standards.third_party: variant='nosuch' is unknown"),
    (('allclose = "dynamic_shape"', 'ratio_floor = -1.0'),
     "report.standards.ratio_floor: -1.0; expected a non-negative"),
])
def test_study_rejects_bad_standards_settings(edit, words):
    from precision.errors import StudyFileError
    with pytest.raises(StudyFileError) as info:
        parse_study(STUDY.replace(*edit), "std.toml")
    assert words in str(info.value) and "\n" not in str(info.value)


def test_standards_section_cites_its_tables(tmp_path):
    from precision.products.report.render import build_report
    from report_support import check_findings
    import json
    run_study(parse_study(STUDY, str(tmp_path / "std.toml")), tmp_path / "runs" / "std", cache_dir=tmp_path / "cache",
              workers=1)
    folder = build_report("std", tmp_path / "runs", tmp_path / "reports")
    tables = folder / "tables"
    summary = pd.read_csv(tables / "standards_summary.csv")
    # 3 variants x 2 machines per format; the kernel's q-hole point is the one blind output per fp32 kernel cell
    assert list(summary["format"]) == ["fp16", "fp32"] and set(summary["cells"]) == {6}
    blind = pd.read_csv(tables / "standards_blind.csv")
    b = blind[(blind["kind"] == "blind") & (blind["format"] == "fp32")]
    assert "kernel" in " ".join(b["variants"]) and (b["pred"] == "0x1.0a00000000000p+4").all()
    assert b["explain"].str.startswith("precision explain ").all() and b["explain"].str.contains("--format fp32").all()
    fa = blind[(blind["kind"] == "false_alarm")]
    assert (fa["format"] == "fp16").all() and (fa["worst"] > 10 * THRESHOLD_T["fp16"]).all()
    findings = [f for f in json.loads((folder / "findings.json").read_text())["findings"]
                if f["section"] == "standards"]
    assert [f["id"] for f in findings] == ["standards/answer/fp16", "standards/answer/fp32"]
    assert "golden@ieee" in findings[1]["text"] and "0x1.0a00000000000p+4" in findings[1]["text"]
    assert check_findings(folder) >= 2 * 11


def test_standards_answer_without_the_third_party_says_the_ratio_standard_does_not_apply(tmp_path):
    from precision.products.report.render import build_report
    from report_support import check_findings
    import json
    text = STUDY.replace('third_party = "golden"', 'third_party = "mmcv"')
    run_study(parse_study(text, str(tmp_path / "std.toml")), tmp_path / "runs" / "std", cache_dir=tmp_path / "cache",
              workers=1)
    t = pd.read_csv(tmp_path / "runs" / "std" / "standards.csv")
    assert set(t["level"]) == {"no_third_party"} and set(t["third_party"]) == {"none"}
    folder = build_report("std", tmp_path / "runs", tmp_path / "reports")
    findings = [f for f in json.loads((folder / "findings.json").read_text())["findings"]
                if f["section"] == "standards"]
    assert all("the ratio standard does not apply (mmcv@ieee is not in the run)" in f["text"] for f in findings)
    assert check_findings(folder) > 0


def test_rounded_golden_setting_turns_false_alarms_off(tmp_path):
    text = STUDY.replace('allclose = "dynamic_shape"', 'allclose = "dynamic_shape"\ngolden = "rounded"')
    run_study(parse_study(text, str(tmp_path / "std.toml")), tmp_path / "rounded", cache_dir=tmp_path / "cache",
              workers=1)
    run_study(parse_study(STUDY, str(tmp_path / "std.toml")), tmp_path / "exact", cache_dir=tmp_path / "cache",
              workers=1)
    rounded = pd.read_csv(tmp_path / "rounded" / "standards.csv", dtype={"region": str})
    exact = pd.read_csv(tmp_path / "exact" / "standards.csv", dtype={"region": str})
    # a correctly rounded output is exactly its golden when the golden is rounded: r = 0, never a false alarm
    assert rounded["false_alarm"].sum() == 0 and exact["false_alarm"].sum() > 0
    k = (rounded["variant"] == "kernel") & (rounded["format"] == "fp32") & (rounded["region"] == "all")
    assert (rounded.loc[k, "blind"] == 1).all()  # the q-hole output stays blind either way


def test_gate_fails_a_special_mismatch_before_any_metric(tmp_path):
    """At pred 25, gamma -3 the exact value is finite (2.59e21 at target 0) and the kernel (and the golden) give NaN
    at both targets: special mismatches, so a budget on MERE, MARE or RMSE fails (observed inf) whatever its finite
    positions give, and the ratio level, not judged (the third party mismatches too), is observed as NaN and
    fails."""
    from precision.products.gate import run_gate
    study = STUDY.replace('"-0x1p+1"]', '"-0x1p+1", "0x1.9p+4"]').replace("gamma = [2.0]", "gamma = [-3.0]")
    (tmp_path / "std.toml").write_text(study)
    budgets = tmp_path / "budgets.toml"
    budgets.write_text(BUDGETS.format(mere=1.0, blind=100, level="L0").replace("mare = 1e-4", "mare = 1e300")
                       .replace("rmse = 1e-6", "rmse = 1e300").replace("min_allclose_share = 1.0",
                                                                        "min_allclose_share = 0.0"))
    result = run_gate(budgets, out_dir=tmp_path / "run", cache_dir=tmp_path / "cache", workers=1)
    lines = {line.metric: line for line in result.lines}
    assert all(lines[m].status == "FAIL" and lines[m].observed == np.inf for m in ("mere", "mare", "rmse"))
    assert lines["level"].status == "FAIL" and np.isnan(lines["level"].observed)
    standards = pd.read_csv(tmp_path / "run" / "standards.csv")
    k = standards[(standards["variant"] == "kernel") & (standards["machine"] == "ieee")
                  & (standards["format"] == "fp32") & (standards["region"] == "all")].iloc[0]
    assert k["special_mismatch"] == 2 and not k["threshold_pass"] and k["level"] == "not_evaluable"
    assert result.exit_status == 1


class TestMsprobeColumns:
    """msprobe's standards in standards.csv, worked by hand on four fp32 points whose exact values are -1e301
    (fp32: -inf), 1, 2 and 1e-7 (a small value: <= 2^-20)."""

    def _table(self, outputs):
        hi, lo = np.array([-1e301, 1.0, 2.0, 1e-7]), np.zeros(4)
        rounded = np.array([-np.inf, 1.0, 2.0, 1e-7], dtype=np.float32)
        parts = []
        for name, out in outputs.items():
            out = np.asarray(out, dtype=np.float32)
            c64 = out.astype(np.float64)
            with np.errstate(over="ignore"):
                cast = hi.astype(np.float32).astype(np.float64)
            err = ulp_error(out, (hi, lo), "fp32", rounded)
            parts.append(GroupStats.reduce(Grouping(np.zeros(4, np.int64), 1), err,
                                           bits_error(out, rounded, "fp32"), classify(out, rounded),
                                           witness={"pred": np.arange(4.0)},
                                           acceptance=(c64, standards_golden(hi, rounded), "fp32", hi, cast))
                         .with_columns(variant=name, machine="ieee", format="fp32", region="r0"))
        t = standards_table(GroupStats.concat(parts), StandardsSettings(third_party="tp"))
        return t[t["region"] == "all"].set_index("variant")

    def test_by_hand(self):
        t = self._table({"v": [-np.inf, 1.0 + 2 ** -10, 2.0, 1e-7], "tp": [-np.inf, 1.0, 2.0, 1e-7]})
        v, tp = t.loc["v"], t.loc["tp"]
        # the third party against itself: no benchmark or ULP verdict; the single-sided standards judge it
        assert tp["ms_benchmark"] == "not judged" and tp["ms_ulp"] == "not judged" and tp["ms_absolute"] == "pass"
        # absolute threshold: -inf against a bench rounding to -inf is no inf/NaN error; 1 + 2^-10 is a normal
        # value 2^-10 off (> rtol 2^-20): 1 of the 2 normal values
        assert (v["ms_inf_nan_error_ratio"], v["ms_rel_err_ratio"], v["ms_abs_err_ratio"]) == (0.0, 0.5, 0.0)
        assert v["ms_absolute"] == "error"
        # benchmark: RMSE over the normal values (0 elsewhere), 4 points, 2 masked (the inf and the small value);
        # the third party's RMSE is 0, floored at minimum_err 2^-14
        rmse = math.sqrt(2.0 ** -20 / 4 * (4 / (2 + 1e-4) + 1e-4))
        assert v["ms_rmse_ratio"] == pytest.approx(rmse / 2.0 ** -14, rel=1e-14)
        assert v["ms_small_value_ratio"] == 0.0 and v["ms_benchmark"] == "error"
        # ULP: -inf - (-1e301) is -inf: the mean is inf on both sides (consistent); 2^-10 is 8192 ulps; share over
        # 32 ulps 2/4 against 1/4: ratio 2, no pass
        assert v["ms_mean_ulp"] == np.inf and v["ms_ulp_share"] == 0.5 and v["ms_ulp_share_ratio"] == 2.0
        assert v["ms_max_ulp"] == np.inf and v["ms_ulp"] == "error"
        assert (v["ms_ulp_over"], v["ms_ulp_nan"]) == (2, 0)  # (the correct -inf counts as an infinite ulp error)
        # ratio standard: relative errors inf, 2^-10/(1 + eps), 0, ~1e-9: 3 of 4 within 1/1000, 2 within 1/10000
        assert (v["ms_hundredth"], v["ms_thousandth"], v["ms_ten_thousandth"]) == (0.75, 0.75, 0.5)
        assert v["ms_max_abs_err"] == np.inf and v["ms_ratio"] == "error"

    def test_a_pass(self):
        t = self._table({"v": [-np.inf, 1.0, 2.0, 1e-7], "tp": [-np.inf, 1.0 + 2 ** -10, 2.0, 1e-7]})
        v = t.loc["v"]
        assert v["ms_benchmark"] == "pass" and v["ms_rmse_ratio"] == 0.0
        assert v["ms_ulp_share_ratio"] == pytest.approx(0.25 / 0.5) and v["ms_ulp"] == "pass"
        assert v["ms_absolute"] == "pass"


def test_gate_budgets_on_msprobe_standards(tmp_path):
    """kernel fp32 on ieee, on the study's 10 points: msprobe's benchmark and ratio standards pass, its ULP standard
    errs (3 of 10 outputs over 32 ulps, as many as the third party's: share ratio 1, not < 1), its absolute-threshold
    standard errs (1 of 7 normal values off by more than 2^-20); the third party's own row is not judged (NaN)."""
    from precision.errors import StudyFileError
    from precision.products.gate import load_budgets, run_gate
    (tmp_path / "std.toml").write_text(STUDY)
    budgets = tmp_path / "budgets.toml"
    budgets.write_text('[gate]\nstudy = "std.toml"\n\n[[budget]]\nvariant = "kernel"\nformat = "fp32"\n'
                       'machine = "ieee"\nms_benchmark = "pass"\nms_ulp = "pass"\nms_absolute = "warning"\n'
                       'ms_ratio = "pass"\n\n[[budget]]\nvariant = "golden"\nformat = "fp32"\nmachine = "ieee"\n'
                       'ms_benchmark = "warning"\nms_ratio = "error"\n')
    result = run_gate(budgets, out_dir=tmp_path / "run", cache_dir=tmp_path / "cache", workers=1)
    got = {(line.budget.variant, line.metric): (line.status, line.observed) for line in result.lines
           if line.metric.startswith("ms_")}
    assert got[("kernel", "ms_benchmark")] == ("PASS", 2.0) and got[("kernel", "ms_ratio")] == ("PASS", 2.0)
    assert got[("kernel", "ms_ulp")] == ("FAIL", 0.0) and got[("kernel", "ms_absolute")] == ("FAIL", 0.0)
    status, observed = got[("golden", "ms_benchmark")]
    assert status == "FAIL" and np.isnan(observed)
    assert got[("golden", "ms_ratio")][0] == "UNBOUNDED"  # ("error" accepts any verdict)
    assert result.exit_status == 1
    t = pd.read_csv(tmp_path / "run" / "standards.csv", dtype={"region": str})
    k = t[(t["variant"] == "kernel") & (t["machine"] == "ieee") & (t["format"] == "fp32") & (t["region"] == "all")]
    assert k["ms_ulp_share"].iloc[0] == 0.3 and k["ms_ulp_share_ratio"].iloc[0] == 1.0
    assert k["ms_rel_err_ratio"].iloc[0] == 1 / 7
    budgets.write_text(budgets.read_text().replace('ms_ulp = "pass"', 'ms_ulp = "ok"'))
    with pytest.raises(StudyFileError, match="ms_ulp: 'ok'; expected one of 'error', 'warning', 'pass'"):
        load_budgets(budgets)
