"""Tests of precision/engine/attribution_table.py: a real small run's kept points attributed, counted and checked."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from precision.operators.sigmoid_focal_loss_grad.attribution import attribute
from precision.engine.executor import LocalExecutor
from precision.engine.attribution_table import (GUARD_COLUMNS, PREDICTED_CAUSES, attribution_tables, cause_columns,
                                                confusion_table, select_points, write_attribution)
from precision.products.report import build_report
from precision.engine.study import load_study, parse_study
from precision.engine.sweep import run_study

STUDY = """
name = "attr_tiny"
seed = 0
[pred]
kind = "list"
format = "fp32"
# q = 1 - p cancels at 9..15 (t = 0); G5 engages at these x near -0.93 (gamma -2, t = 0)
values = ["9", "10", "12", "12.5", "15", "-0.955", "-0.951", "-0.941", "-0.921", "-0.919", "-3", "0.5", "40"]
[points]
target = [0, 1]
alpha = [0.25]
gamma = [-2.0, 2.0]
profiles = ["fp32", "fp16"]
regions = [-20, -8, 0, 8.5, 16, 20]
[run]
variants = ["kernel", "kernel-G5", "kernel-G8", "naive"]
machines = ["ieee", "npu"]
per_point = "all"
attribution = { variants = ["kernel"] }
[report]
sections = ["verdicts", "dominant", "attribution", "summary"]
"""

# guard G4 on npu: at x = -34.5 and -34 (t = 1, gamma 2) the power p^2 is subnormal; the fallback runs only in a
# tile with a clamped base, as x = -100's p is in the run's task, not in a batch of the two points alone
G4_STUDY = """
name = "attr_g4"
[pred]
kind = "list"
format = "fp32"
values = ["-34.5", "-34", "-100"]
[points]
target = [1]
gamma = [2.0]
regions = [-50]
[run]
variants = ["kernel", "kernel[tile=2]"]
machines = ["npu"]
per_point = "all"
attribution = true
"""


def _run(base: Path, text: str):
    path = base / "study.toml"
    path.write_text(text)
    study = load_study(path)
    run_dir = base / "runs" / study.name
    run_study(study, run_dir, cache_dir=base / "cache", workers=1)
    return study, run_dir


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    base = tmp_path_factory.mktemp("attr")
    study, run_dir = _run(base, STUDY)
    tables = write_attribution(run_dir, study, progress=False)
    return study, run_dir, tables


class TestAttributionTables:
    def test_columns_and_files(self, tiny):
        study, run_dir, tables = tiny
        assert tuple(tables.causes.columns[:10]) == ("variant", "machine", "format", "profile", "alpha", "gamma",
                                                    "weight", "dout", "target", "region")
        assert tuple(tables.causes.columns) == cause_columns(study) and tuple(tables.guards.columns) == GUARD_COLUMNS
        back = pd.read_csv(run_dir / "attribution.csv", keep_default_na=False, na_values=["", "NaN"])
        assert len(back) == len(tables.causes) and (back["points"] == tables.causes["points"]).all()
        assert (run_dir / "attribution_guards.csv").is_file()
        assert set(tables.points["variant"]) == {"kernel"}

    def test_every_kept_point_once(self, tiny):
        study, run_dir, tables = tiny
        kept = pd.read_parquet(run_dir / "points.parquet")
        assert len(tables.points) == (kept["variant"].astype(str) == "kernel").sum()
        assert tables.causes["points"].sum() == len(tables.points)
        groups = tables.causes.groupby(["machine", "profile", "gamma", "target", "region"])
        assert (groups["points"].sum() == groups["group_points"].first()).all()
        assert np.allclose(groups["share"].sum(), 1.0)

    def test_q_cancellation_group(self, tiny):
        """t = 0, x in [9, 15], gamma 2: every point is born at q = 1 - p, by cancellation."""
        _, _, tables = tiny
        c = tables.causes
        for machine in ("ieee", "npu"):
            g = c[(c["machine"] == machine) & (c["format"] == "fp32") & (c["target"] == 0) & (c["gamma"] == 2.0)
                  & (c["region"] == "[8.5, 16)")]
            assert g[["step", "cause"]].values.tolist() == [["q", "cancellation"]]
            assert int(g["points"].iloc[0]) == 5 == int(g["group_points"].iloc[0])
            assert g["predicted"].all() and g["witness_cond"].iloc[0] > 1e3

    def test_matches_a_direct_attribution(self, tiny):
        """A row's witness, attributed alone, has the same top cause and output."""
        _, _, tables = tiny
        p = tables.points
        row = p[(p["machine"] == "ieee") & (p["profile"] == "fp32") & (p["pred"] == 12.5) & (p["target"] == 0)
                & (p["gamma"] == 2.0)].iloc[0]
        att = attribute("kernel", np.float32([12.5]), [0], alpha=0.25, gamma=2.0, reduction="none")
        top = att.points.iloc[0]
        assert (top["top_step"], top["top_cause"]) == (row["top_step"], row["top_cause"])
        assert top["computed"] == row["computed"] and top["top_local_ulp"] == row["top_local_ulp"]

    def test_a_pool_of_workers_gives_the_same_tables(self, tiny):
        """The jobs (one per recipe configuration) on two worker processes: the same tables, the same rows in
        the same order, as in one process."""
        study, run_dir, tables = tiny
        executor = LocalExecutor(2)
        try:
            pooled = attribution_tables(pd.read_parquet(run_dir / "points.parquet"), study, progress=False,
                                        executor=executor)
        finally:
            executor.close()
        pd.testing.assert_frame_equal(pooled.causes, tables.causes)
        pd.testing.assert_frame_equal(pooled.guards, tables.guards)
        pd.testing.assert_frame_equal(pooled.points, tables.points)
        # machines x gammas x selectors x (13 fp32 preds + the 8 of them exact in fp16)
        assert len(tables.points) == 2 * 2 * 2 * (13 + 8)

    def test_outputs_reproduce_the_run(self, tiny):
        _, _, tables = tiny
        assert tables.causes["mismatched"].sum() == 0 and not tables.points["mismatched"].any()

    def test_confusion_matrix_adds_up(self, tiny):
        _, _, tables = tiny
        m = confusion_table(tables.causes)
        assert (m["tp"] + m["fp"] + m["fn"] + m["tn"] == m["points"]).all()
        assert m["points"].sum() == len(tables.points)
        p = tables.points
        flagged = p["top_cause"].isin(PREDICTED_CAUSES)
        assert m["tp"].sum() == (flagged & p["over_1ulp"]).sum() and m["fn"].sum() == (~flagged & p["over_1ulp"]).sum()
        ok = m["tp"] + m["fp"] > 0
        assert np.allclose(m.loc[ok, "precision"], m.loc[ok, "tp"] / (m.loc[ok, "tp"] + m.loc[ok, "fp"]))

    def test_guard_table_names_the_differing_steps(self, tiny):
        _, _, tables = tiny
        g = tables.guards
        assert (g["attributed"] == "kernel").all()
        g5 = g[(g["subject"] == "G5") & (g["first_step"] != "none")]
        assert set(g5["first_step"]) == {"dpos"} and g5["changed"].sum() > 0
        g8 = g[(g["subject"] == "G8") & (g["first_step"] != "none")]
        assert set(g8["first_step"]) == {"out"} and set(g8["format"]) == {"fp16"}
        assert not len(g[(g["subject"] == "G8") & (g["format"] == "fp32") & (g["first_step"] != "none")])
        # G8 acts only where the error is born at the store: upstream causes are out of its reach
        assert (g8.loc[g8["relation"] == "upstream", "acts"] == 0).all()
        for name, rows in g.groupby(["comparison", "machine", "profile"]):
            assert rows["points"].sum() == (tables.points.groupby(["machine", "profile"]).size()[name[1:]])

    def test_cap_per_group(self, tiny):
        study, run_dir, _ = tiny
        capped = parse_study(study.source.replace('attribution = { variants = ["kernel"] }',
                                                  'attribution = { variants = ["kernel"], points = 2 }'))
        pts = select_points(pd.read_parquet(run_dir / "points.parquet"), capped)
        sizes = pts.groupby(["machine", "profile", "gamma", "target", "region"]).size()
        assert sizes.max() == 2
        full = select_points(pd.read_parquet(run_dir / "points.parquet"), study)
        for key, rows in full.groupby(["machine", "profile", "gamma", "target", "region"]):
            err = np.where(rows["class"] != "ok", np.inf, rows["err_ulp"].fillna(np.inf))
            kept = pts.set_index(["machine", "profile", "gamma", "target", "region"]).loc[[key]]
            assert np.sort(np.where(kept["class"] != "ok", np.inf, kept["err_ulp"].fillna(np.inf)))[0] >= \
                np.sort(err)[-min(2, err.size)]

    def test_no_attribution_asked(self, tiny):
        study, run_dir, _ = tiny
        plain = parse_study(study.source.replace('attribution = { variants = ["kernel"] }', ""))
        assert write_attribution(run_dir, plain) is None


class TestG4TileDecision:
    def test_batch_decision_differs_and_is_counted(self, tmp_path):
        """A batch without x = -100 decides G4 otherwise: with the task's decision the bits match again."""
        study, run_dir = _run(tmp_path, G4_STUDY)
        points = pd.read_parquet(run_dir / "points.parquet")
        subset = points[points["pred"] > -50]
        batch = attribution_tables(subset, study, task_tiles=False, progress=False)
        assert batch.causes["mismatched"].sum() > 0  # reported, never dropped
        assert batch.points["mismatched"].sum() == batch.causes["mismatched"].sum()
        task = attribution_tables(subset, study, progress=False)
        assert task.causes["mismatched"].sum() == 0
        assert (task.points["attributed_computed"].to_numpy() == subset["computed"].to_numpy()).all()

    def test_tiles_of_two_elements(self, tmp_path):
        """kernel[tile=2]: the tensor [-100, -34.5 | -34] flags only the first tile; each point gets its own tile's."""
        study, run_dir = _run(tmp_path, G4_STUDY)
        points = pd.read_parquet(run_dir / "points.parquet")
        p = attribution_tables(points[points["pred"] > -50], study, progress=False).points
        assert not p["mismatched"].any()
        out = p.set_index(["variant", "pred"])["attributed_computed"]
        assert out[("kernel", -34.5)] == out[("kernel[tile=2]", -34.5)] > 0  # fallback in both
        assert out[("kernel", -34.0)] > 0 == out[("kernel[tile=2]", -34.0)]  # its tile has no clamped base


class TestReport:
    def test_dominant_lines_read_the_attribution(self, tiny):
        from report_support import check_findings  # tests/ is on the path (its conftest)
        study, run_dir, _ = tiny
        folder = build_report(study.name, run_dir.parent, run_dir.parent.parent / "reports")
        for name in ("dominant_causes.csv", "attribution_causes.csv", "attribution_confusion.csv",
                     "attribution_guards.csv"):
            assert (folder / "tables" / name).is_file(), name
        md = (folder / "report.md").read_text()
        first = md[md.index("## What dominates the error"):md.index("## Headline maxima")]
        assert "attributed points" in first and "born" in first and "q = 1 - p (cancellation" in first
        assert check_findings(folder) > 20
        conf = pd.read_csv(folder / "tables" / "attribution_confusion.csv")
        assert (conf["tp"] + conf["fp"] + conf["fn"] + conf["tn"] == conf["points"]).all()
