"""The candidate's fp32 target by sub-range of its attributes (report section ``targets``): the table pools
each sub-range's hunts over the machines its points were re-evaluated on, and the sentence says where the
target is missed (with the witness) and where no point above it was found (a lower bound, never "holds")."""

from __future__ import annotations

import numpy as np
import pandas as pd

from precision.operators.sigmoid_focal_loss_grad.report.targets import (ops_by_range, range_finding, range_table,
                                                                        range_target_findings, range_targets,
                                                                        subrange_grid)


def _hunts():
    row = {"variant": "candidate", "machine": "ieee", "format": "fp32", "kind": "hunted", "seconds": 120.0,
           "workers": 2, "seed": 0, "outside_neighbourhood": True, "targets": "0 1", "specials": 0}
    return pd.DataFrame([
        {**row, "gammas": "range [-3, -1]", "alphas": "range [0, 1]", "points": 1000, "file": "h/a.json"},
        {**row, "gammas": "range [4, 6]", "alphas": "range [0, 1]", "points": 2000, "file": "h/b.json"},
        {**row, "gammas": "range [4, 6]", "alphas": "range [0, 1]", "points": 500, "file": "h/c.json"},
        {**row, "gammas": "-0x1.8p+1 0x1p+1", "alphas": "0x1p-2", "points": 9, "file": "h/grid.json"},
    ])


def _known():
    def w(machine, source, ulp, pred):
        return {"machine": machine, "source": source, "max_ulp": ulp, "witness_pred": pred, "witness_target": 1,
                "witness_alpha": "0x1p-1", "witness_gamma": "0x1p+2"}
    return pd.DataFrame([w("ieee", "hunt h/a.json", 3.5, "0x1p+0"), w("npu", "hunt h/a.json", 3.6, "0x1p+0"),
                         w("ieee", "hunt h/b.json", 5.17, "-0x1.fc56a8p+3"), w("npu", "hunt h/c.json", 4.2, "0x1p+1"),
                         w("ieee", "hunt h/grid.json", 9.0, "0x1p+3"), w("ieee", "run", 7.0, "0x1p+4")])


def test_one_row_per_sub_range_pooled_over_hunts_and_machines():
    fp16 = _hunts().iloc[[1]].assign(format="fp16", points=10**6, file="h/fp16.json")  # another target's hunt
    whole = _hunts().iloc[[0]].assign(outside_neighbourhood=False, points=10**6, file="h/all.json")  # inside too
    t = range_table(_known(), pd.concat([_hunts(), fp16, whole]), 4.0)
    assert t["gammas"].tolist() == ["range [-3, -1]", "range [4, 6]"]  # the grid hunt is not a sub-range
    assert t["hunts"].tolist() == [1, 2] and t["points"].tolist() == [1000, 2500]
    assert t["max_ulp"].tolist() == [3.6, 5.17] and t["machine"].tolist() == ["npu", "ieee"]
    assert t["within"].tolist() == [True, False]
    assert t.loc[1, "witness_pred"] == "-0x1.fc56a8p+3"


def test_the_sentence_is_computed_from_the_table():
    t = range_table(_known(), _hunts(), 4.0)
    f, short = range_finding(t, 4.0, "candidate")
    assert short == ("missed for gamma in [4, 6]; no point above it found for gamma in [-3, -1] (3.6 ulp, "
                     "1,000 points)")
    assert "by sub-range, alpha range [0, 1] (hunted over real values; each maximum a lower bound)" in f.text
    assert "missed for gamma [4, 6] (5.17 ulp)" in f.text
    assert "no point above it found for gamma [-3, -1] (at most 3.6 ulp in 1,000 points hunted)" in f.text
    assert "The largest, 5.17 ulp on ieee, at pred=-0x1.fc56a8p+3" in f.text and "holds" not in f.text
    assert [c.value for c in f.numbers] == [3.6, 1000, 5.17, 5.17]
    # a doctored number flips the verdict
    t.loc[1, ["max_ulp", "within"]] = [3.9, True]
    assert "missed in none" in range_finding(t, 4.0, "candidate")[0].text
    assert range_finding(range_table(_known(), _hunts().iloc[3:], 4.0), 4.0, "candidate") is None


def test_a_range_containing_others_is_left_to_the_table():
    hunts = pd.concat([_hunts(), _hunts().iloc[[0]].assign(gammas="range [-3, 6]", file="h/whole.json")])
    known = pd.concat([_known(), _known().iloc[[2]].assign(source="hunt h/whole.json", max_ulp=6.0)])
    t = range_table(known, hunts, 4.0)
    assert t["gammas"].tolist() == ["range [-3, -1]", "range [4, 6]", "range [-3, 6]"]
    f, _ = range_finding(t, 4.0, "candidate")
    assert "gamma [-3, 6] (" not in f.text and "The largest, 6 ulp on ieee" in f.text


# ---------------------------------------------------------------------------
# The other targets by sub-range: special outputs, fp16 maximum and share, op count
# ---------------------------------------------------------------------------

K = {"fp32_max_ulp": 4.0, "nan_inf": 0, "fp16_share_correct": 0.999, "fp16_max_ulp": 1.0, "ops_ratio": 1.5}


def _sources():
    def s(file, gammas, fmt, outside, machine, points, ulp, specials=0, fresh=np.nan, wrong=np.nan):
        return {"file": file, "gammas": gammas, "alphas": "range [0, 1]", "targets": "0 1", "format": fmt,
                "outside": outside, "points": points, "seconds": 60.0, "fresh_points": fresh,
                "fresh_not_correct": wrong, "machine": machine, "max_ulp": ulp, "witness_pred": "0x1p+0",
                "witness_target": "1", "witness_alpha": "0x1p-1", "witness_gamma": "-0x1p+1", "specials": specials,
                "special_at": "pred=0x1p-3 target=0 alpha=0x1p-2 gamma=-0x1.8p+0 (wrong_sign)" if specials else ""}
    return pd.DataFrame([
        # gamma [-3, -1]: an outside hunt does not cover the special target there; a hunt of the whole does
        s("o.json", "range [-3, -1]", "fp32", True, "ieee", 1000, 3.5),
        s("w.json", "range [-3, -1]", "fp32", False, "ieee", 800, 9.0, specials=2),
        s("w.json", "range [-3, -1]", "fp32", False, "npu", 800, 9.0, specials=1),
        s("h.json", "range [-3, -1]", "fp16", False, "ieee", 5000, 0.51, fresh=4000, wrong=2),
        s("h.json", "range [-3, -1]", "fp16", False, "npu", 5000, 1.7, fresh=4000, wrong=2),
        # gamma [0, 2]: no neighbourhood, the outside hunt covers it
        s("p.json", "range [0, 2]", "fp32", True, "ieee", 3000, 3.9),
        s("q.json", "range [0, 2]", "fp16", False, "ieee", 6000, 0.5, fresh=5000, wrong=4),
    ])


def _ops():
    return pd.DataFrame([{"gammas": "range [-3, -1]", "alphas": "range [0, 1]", "pairs": 36, "ratio": 1.53,
                          "at_alpha": "0x1p-2", "at_gamma": "-0x1.4p+1"},
                         {"gammas": "range [0, 2]", "alphas": "range [0, 1]", "pairs": 36, "ratio": 1.49,
                          "at_alpha": "0x1p-2", "at_gamma": "0x1p+0"}])


def test_the_other_targets_pool_each_sub_range():
    t = range_targets(_sources(), _ops(), K)
    assert t["gammas"].tolist() == ["range [-3, -1]", "range [0, 2]"]
    # specials: the hunts of the whole sub-range count (fp32 800 and fp16 5,000 points; at gamma >= -1 the
    # outside hunt too), the worst machine's count
    assert t["special_points"].tolist() == [5800, 9000] and t["specials"].tolist() == [2, 0]
    assert t["special_within"].tolist() == [False, True] and "(wrong_sign)" in t.loc[0, "special_at"]
    # fp16: the largest re-evaluated error over machines; the share over the hunt's fresh points, once per hunt
    assert t["fp16_max_ulp"].tolist() == [1.7, 0.5] and t["fp16_machine"].tolist() == ["npu", "ieee"]
    assert t["fp16_max_within"].tolist() == [False, True] and t["fp16_points"].tolist() == [5000, 6000]
    assert t["fp16_fresh"].tolist() == [4000, 5000] and t["fp16_share"].tolist() == [1 - 2 / 4000, 1 - 4 / 5000]
    assert t["fp16_share_within"].tolist() == [True, True]
    assert t["ops_ratio"].tolist() == [1.53, 1.49] and t["ops_within"].tolist() == [False, True]
    # an outside hunt alone where the neighbourhood exists: the special target is not covered there
    only_outside = range_targets(_sources().iloc[[0, 5]], _ops(), K)
    assert only_outside.loc[0, "special_within"] is None and bool(only_outside.loc[1, "special_within"])


def test_each_targets_sentence_is_computed_from_the_table():
    t = range_targets(_sources(), _ops(), K)
    findings, shorts = range_target_findings(t, K, "candidate")
    text = {f.id.split("/")[-1]: f.text for f in findings}
    assert "missed for gamma [-3, -1] (2 at pred=0x1p-3 target=0" in text["special"]
    assert "nothing beyond it found for gamma [0, 2] (none in 9,000 points hunted" in text["special"]
    assert "missed for gamma [-3, -1] (1.7 ulp at pred=0x1p+0" in text["fp16"]
    assert "missed in none; within it for gamma [-3, -1] (0.9995 of 4,000 fresh points)" in text["share"]
    assert "missed for gamma [-3, -1] (1.53x at alpha=0x1p-2 gamma=-0x1.4p+1)" in text["ops"]
    assert shorts[0] == "no special output: missed for gamma in [-3, -1]"
    assert shorts[2] == "fp16 share >= 0.999: met in every sub-range"
    assert shorts[-1] == "ops <= 1.5x: missed for gamma in [-3, -1]"
    t.loc[0, ["ops_ratio", "ops_within"]] = [1.4, True]  # a doctored number flips the sentence
    findings, shorts = range_target_findings(t, K, "candidate")
    assert "missed in none" in findings[-1].text and shorts[-1] == "ops <= 1.5x: met in every sub-range"


def test_the_grid_shows_each_sub_range_and_target():
    fp32 = range_table(_known(), _hunts(), 4.0)
    grid, csv, _, style = subrange_grid(fp32, range_targets(_sources(), _ops(), K), K)
    assert csv == "ranges_targets.csv" and grid["gamma"].tolist() == ["[-3, -1]", "[4, 6]", "[0, 2]"]
    assert grid.loc[0, "fp32 <= 4 ulp outside"] == "met 3.6" and grid.loc[1, "fp32 <= 4 ulp outside"] == "MISSED 5.17"
    assert grid.loc[0, "no special output"] == "MISSED 2" and grid.loc[1, "no special output"] == "-"
    assert grid.loc[2, "ops <= 1.5x"] == "met 1.49" and style.loc[0, "ops <= 1.5x"] == "missed"


def test_the_op_count_is_sampled_over_each_sub_range():
    """On the grad's candidate: a gamma whose g + 1 is not a float32 value costs 3 more ops (its low part), and
    alpha 0 saves the kernel one; both are found at the sub-range's ends and draws."""
    from precision.engine.operators import get_operator
    op = get_operator("sigmoid_focal_loss_grad")
    t = ops_by_range(op, "candidate", [("range [2, 4]", "range [0, 1]")], samples=2)
    assert t["pairs"].tolist() == [16] and t.loc[0, "ratio"] > 1.5
    assert t.loc[0, "ratio"] == op.count_ops("candidate", gamma=float.fromhex(t.loc[0, "at_gamma"]),
                                             alpha=float.fromhex(t.loc[0, "at_alpha"]))[0] / \
        op.count_ops("kernel", gamma=float.fromhex(t.loc[0, "at_gamma"]),
                     alpha=float.fromhex(t.loc[0, "at_alpha"]))[0]
    assert op.count_ops("candidate", gamma=2.0)[0] == 101 and op.count_ops("candidate", gamma=3.3)[0] == 104
