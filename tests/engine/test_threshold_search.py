"""Tests of precision.engine.threshold_search: every threshold from two evaluations, bit for bit; the bisection.

The identity the search rests on (kernel[G5=tau] is kernel[G5=always] where the test passes and
kernel[G5=never] elsewhere) is checked against the kernel itself on points where G5 fires, on machines with
and without flushing, for powers of two and for a threshold that is not one; the paired counts of the search
equal the sweep's comparisons on the same points; and the bisection finds a planted boundary.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from precision.sigmoid_focal_loss_grad.guards import evaluate_variants
from precision.analysis.scoring import CLASS_OK
from precision.engine.study import load_study
from precision.engine.points import study_pred_values
from precision.engine.sweep import run_study
from precision.engine.threshold_search import ALWAYS, NEVER, ThresholdEvidence, search_thresholds

STUDY = """
name = "ts"
seed = 0
[pred]
kind = "windows"
format = "fp32"
per_window = 1500
core = 32
range = [-8.0, 18.0]
[points]
target = [0]
alpha = [0.25]
gamma = [-2.0, -1.25, -1.0]
profiles = ["fp32"]
regions = [8.317766166719343]
region_names = ["outside the q-hole", "q-hole"]
separate = ["q-hole"]
[run]
variants = ["kernel[G5=2^-2]", "kernel[G5=2^-4]", "kernel[G5=2^-6]", "kernel[G5=never]", "kernel[G5=always]"]
machines = ["ieee", "npu+ftz"]
per_point = "none"
threshold_search = true
"""


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    base = tmp_path_factory.mktemp("ts")
    (base / "ts.toml").write_text(STUDY)
    study = load_study(base / "ts.toml")
    run_study(study, base / "out", cache_dir=base / "cache", workers=1)
    return study, base / "out"


@pytest.mark.parametrize("machine", ["ieee", "npu", "npu+ftz"])
def test_a_threshold_is_always_where_its_test_passes_and_never_elsewhere(searched, machine):
    from precision.sigmoid_focal_loss_grad.implementations.common import resolve_machine
    from precision.sigmoid_focal_loss_grad.implementations.kernel import g5_big, g5_cancels
    study, _ = searched
    for gamma in study.gammas:
        x = study_pred_values(study, gamma).astype(np.float32)[:, None]
        t, d = np.zeros(x.shape, np.int32), np.ones(x.shape, np.float32)
        taus = (0.25, 2.0 ** -6, 0.3, 2.0 ** -12)
        names = [f"kernel[G5={tau!r}]" for tau in taus]
        out, kept = evaluate_variants([ALWAYS, NEVER, *names], x, t, d, None, alpha=0.25, gamma=gamma,
                                      reduction="none", machine=machine,
                                      keep_steps=("lhs_pos", "rhs_pos", "orig", "g5_use"))
        k = kept[ALWAYS]
        m = resolve_machine(machine)
        big = g5_big(m, k["lhs_pos"], k["rhs_pos"])
        admissible = np.asarray(k["g5_use"]) == 1
        fired = 0
        for tau, name in zip(taus, names):
            fires = admissible & np.asarray(g5_cancels(m, big, k["orig"], tau), dtype=bool)
            fired += int(fires.sum())
            rebuilt = np.where(fires, out[ALWAYS], out[NEVER])
            assert np.array_equal(rebuilt.view(np.uint32), np.asarray(out[name]).view(np.uint32)), (gamma, tau)
        assert fired > 0  # the points are where G5 acts


def test_the_search_counts_equal_the_sweeps_comparisons(searched):
    """net(tau) of the search = better - worse of the run's kernel[G5=tau] vs never, pooled (q-hole apart)."""
    _, out = searched
    s = pd.read_csv(out / "threshold_search.csv")
    c = pd.read_csv(out / "comparisons.csv")
    assert set(s["machine"]) == {"ieee", "npu+ftz"}
    for _, row in s.iterrows():
        pooled = c[(c["region"] == "all") & (c["machine"] == row["machine"])
                   & (c["comparison"] == f"kernel[G5={row['best_threshold']}] vs {NEVER}")]
        assert len(pooled) == 1
        assert row["best_net"] == int(pooled["better"].iloc[0]) - int(pooled["worse"].iloc[0])
        nets = {}
        for tau in ("2^-2", "2^-4", "2^-6"):
            r = c[(c["region"] == "all") & (c["machine"] == row["machine"])
                  & (c["comparison"] == f"kernel[G5={tau}] vs {NEVER}")].iloc[0]
            nets[tau] = int(r["better"]) - int(r["worse"])
        assert row["best_net"] == max(nets.values())
        # the q-hole is kept out: the pooled count is the outside region's
        outside = c[(c["region"] == "outside the q-hole") & (c["machine"] == row["machine"])
                    & (c["comparison"] == f"kernel[G5=2^-6] vs {NEVER}")]
        assert row["points"] == int(outside["count"].iloc[0])
        pooled_all = c[(c["region"] == "all") & (c["machine"] == row["machine"])
                       & (c["comparison"] == f"kernel[G5=2^-6] vs {NEVER}")]
        assert int(pooled_all["count"].iloc[0]) == row["points"]  # region "all" pools every region but the q-hole


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
