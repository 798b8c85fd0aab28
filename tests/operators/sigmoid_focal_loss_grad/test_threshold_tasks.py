"""Tests of precision.operators.sigmoid_focal_loss_grad.threshold_tasks: every threshold from two evaluations, bit for bit, on a sweep.

The identity the search rests on (kernel[G5=tau] is kernel[G5=always] where the test passes and
kernel[G5=never] elsewhere) is checked against the kernel itself on points where G5 fires, on machines with
and without flushing, for powers of two and for a threshold that is not one; and the paired counts of the
search equal the sweep's comparisons on the same points.  The search on planted evidence:
tests/operators/sigmoid_focal_loss_grad/test_g5_threshold_search.py.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from precision.operators.sigmoid_focal_loss_grad.guards import evaluate_variants
from precision.engine.study import load_study
from precision.engine.points import study_pred_values
from precision.engine.sweep import run_study
from precision.operators.sigmoid_focal_loss_grad.comparisons import ALWAYS, NEVER

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
    from precision.operators.sigmoid_focal_loss_grad.implementations.common import resolve_machine
    from precision.operators.sigmoid_focal_loss_grad.implementations.kernel import g5_big, g5_cancels
    study, _ = searched
    for gamma in study.values("gamma"):
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


def test_the_stage_is_cached_and_reruns_when_its_code_changes(tmp_path, monkeypatch):
    """The operator's run stage (RUN_STAGES["threshold_search"]): a run into a new folder takes its tables from
    the result cache, byte for byte; an edit to the stage's module reruns it."""
    from precision.engine import task
    from precision.operators.sigmoid_focal_loss_grad import threshold_tasks

    calls = []
    collect = threshold_tasks.collect
    monkeypatch.setattr(threshold_tasks, "collect", lambda *a, **k: calls.append(1) or collect(*a, **k))
    (tmp_path / "ts.toml").write_text(STUDY.replace("per_window = 1500", "per_window = 300"))
    study = load_study(tmp_path / "ts.toml")
    assert study.stages == ("threshold_search",)
    names = ("threshold_search.csv", "threshold_search_octaves.csv")
    run_study(study, tmp_path / "a", cache_dir=tmp_path / "cache", workers=1)
    run_study(study, tmp_path / "b", cache_dir=tmp_path / "cache", workers=1)
    assert len(calls) == 1
    for name in names:
        assert (tmp_path / "b" / name).read_bytes() == (tmp_path / "a" / name).read_bytes()
    original, stage_file = task._source_bytes, Path(threshold_tasks.__file__).resolve()
    monkeypatch.setattr(task, "_source_bytes",
                        lambda p: original(p) + (b"\n# edited\n" if Path(p).resolve() == stage_file else b""))
    task.clear_digests()
    try:
        run_study(study, tmp_path / "c", cache_dir=tmp_path / "cache", workers=1)
    finally:
        monkeypatch.setattr(task, "_source_bytes", original)
        task.clear_digests()
    assert len(calls) == 2
    for name in names:
        assert (tmp_path / "c" / name).read_bytes() == (tmp_path / "a" / name).read_bytes()
