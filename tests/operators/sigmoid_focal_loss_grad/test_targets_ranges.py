"""The candidate's fp32 target by sub-range of its attributes (report section ``targets``): the table pools
each sub-range's hunts over the machines its points were re-evaluated on, and the sentence says where the
target is missed (with the witness) and where no point above it was found (a lower bound, never "holds")."""

from __future__ import annotations

import pandas as pd

from precision.operators.sigmoid_focal_loss_grad.report.targets import range_finding, range_table


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
    t = range_table(_known(), _hunts(), 4.0)
    assert t["gammas"].tolist() == ["range [-3, -1]", "range [4, 6]"]  # the grid hunt is not a sub-range
    assert t["hunts"].tolist() == [1, 2] and t["points"].tolist() == [1000, 2500]
    assert t["max_ulp"].tolist() == [3.6, 5.17] and t["machine"].tolist() == ["npu", "ieee"]
    assert t["within"].tolist() == [True, False]
    assert t.loc[1, "witness_pred"] == "-0x1.fc56a8p+3"


def test_the_sentence_is_computed_from_the_table():
    t = range_table(_known(), _hunts(), 4.0)
    f, short = range_finding(t, 4.0, "candidate")
    assert short == ("by sub-range, alpha range [0, 1], hunted: missed for gamma in [4, 6]; no point above it "
                     "found for gamma in [-3, -1] (3.6 ulp, 1,000 points)")
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
