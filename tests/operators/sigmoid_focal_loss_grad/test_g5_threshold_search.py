"""Tests of precision.operators.sigmoid_focal_loss_grad.threshold_search on planted evidence: the bisection finds a
planted boundary, the critical threshold is the smallest that passes (on a flushing machine too), and a
search without a switch or where correcting never helps says so.  On a sweep's own points:
tests/engine/test_threshold_search.py.
"""

from __future__ import annotations

import numpy as np

from precision.analysis.scoring import CLASS_OK
from precision.operators.sigmoid_focal_loss_grad.threshold_search import ThresholdEvidence, search_thresholds


def _planted(boundary: float, n: int = 4000) -> ThresholdEvidence:
    """Points whose ratio |orig| / big is uniform in [0, 1); correcting helps below ``boundary``, hurts above."""
    rng = np.random.default_rng(3)
    ratio = np.sort(rng.uniform(0, 1, n)).astype(np.float32)
    helps = ratio < boundary
    return ThresholdEvidence("ieee", "fp32", "fp32", big=np.ones(n, np.float32), orig=ratio,
                    admissible=np.ones(n, bool), err_a=np.where(helps, 1.0, 3.0), cls_a=np.full(n, CLASS_OK, np.int8),
                    err_n=np.full(n, 2.0), cls_n=np.full(n, CLASS_OK, np.int8), changed=np.ones(n, bool))


def test_the_boundary_is_found_where_a_planted_preference_switches():
    ev = _planted(0.3)
    row, octaves = search_thresholds(ev, [2.0 ** -k for k in range(0, 7)])
    assert row["best_threshold"] == "2^-2" and row["result"] == "boundary"
    ratio = ev.orig
    below = ratio[ratio < 0.3].max()
    # the smallest float32 threshold that corrects every helping point and no hurting one
    assert row["boundary_tau"] == below
    assert row["boundary_net"] == int((ratio < 0.3).sum())
    assert row["verdict_vs_never"] == "helps" and row["verdict_vs_best"] == "helps"
    assert row["better_vs_best"] == int(((ratio > 0.25) & (ratio < 0.3)).sum()) and row["worse_vs_best"] == 0
    # the octaves: (1/2, 1] and (1/4, 1/2] hold the hurting points
    by_k = {r["k"]: r for r in octaves}
    assert by_k[0]["net"] == -int((ratio > 0.5).sum())
    assert by_k[1]["better"] == int(((ratio > 0.25) & (ratio < 0.3)).sum())
    assert by_k[1]["worse"] == int(((ratio >= 0.3) & (ratio <= 0.5)).sum())
    assert sum(r["points"] for r in octaves) == ratio.size - int((ratio == 0).sum())


def test_the_critical_threshold_is_the_smallest_that_passes():
    """On a flushing machine too: below the critical value the test fails, at it the test passes."""
    rng = np.random.default_rng(5)
    n = 2000
    big = np.exp2(rng.uniform(-130, 10, n)).astype(np.float32)
    orig = (big * rng.uniform(0, 1, n)).astype(np.float32)
    for machine in ("ieee", "npu+ftz"):
        ev = ThresholdEvidence(machine, "fp32", "fp32", big, orig, np.ones(n, bool), *(np.zeros(n),) * 4,
                      changed=np.zeros(n, bool))
        crit = ev.critical()
        finite = np.isfinite(crit)
        assert finite.mean() > 0.5
        from precision.exact.formats import from_ordinal, to_ordinal
        below = from_ordinal(to_ordinal(crit[finite].astype(np.float32), "fp32") - 1, "fp32")
        for i, c, b in zip(np.flatnonzero(finite)[:200], crit[finite][:200], below[:200]):
            assert ev.fires(float(c))[i] and not ev.fires(float(b))[i]


def test_no_switch_and_never_helps_are_said_plainly():
    row, _ = search_thresholds(_planted(2.0), [2.0 ** -k for k in range(0, 4)])  # correcting always helps
    assert (row["best_threshold"], row["result"]) == ("2^0", "boundary")
    assert row["boundary_tau"] == _planted(2.0).orig[_planted(2.0).orig > 0].max()
    row, _ = search_thresholds(_planted(-1.0), [2.0 ** -k for k in range(0, 4)])  # never helps
    assert row["result"] == "never helps" and row["best_net"] < 0
