"""Sweeps end to end: determinism across executors, oracle reuse, cache, resume after kill -9."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from precision.operators.sigmoid_focal_loss_grad import oracle
from precision.cli import main
from precision.operators.sigmoid_focal_loss_grad.guards import evaluate
from precision.analysis.scoring import ulp_error
from precision.engine.study import parse_study
from precision.engine.points import pred_values
from precision.engine.sweep import load_stats, run_study

TABLES = ("summary.csv", "by_region.csv", "by_gamma.csv", "groups.csv", "comparisons.csv")

SMALL = """
name = "small"
seed = 1
[pred]
kind = "list"
format = "fp16"
values = [{values}]
[points]
target = [0, 1]
alpha = [0.25, 1.0]
gamma = [2.0, -1.5]
profiles = ["fp16", "fp32"]
[run]
variants = ["kernel", "kernel-G2", "naive", "naive+G2", "golden"]
machines = ["ieee", "npu"]
per_point = "all"
"""


def small_study(n=120, seed=0):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.uniform(-40, 40, n), [0.0, -0.0, 65504.0, -65504.0, 2.0**-24, 11.0, -11.0]])
    values = ", ".join(f'"{float(v).hex()}"' for v in np.float16(x).astype(np.float64))
    return parse_study(SMALL.format(values=values), "small.toml")


def read_tables(out):
    tables = {name: pd.read_csv(Path(out) / name) for name in TABLES}
    tables.update({name: pd.read_parquet(Path(out) / name) for name in ("groups_raw.parquet", "paired_raw.parquet")})
    return tables


def assert_same_tables(a, b):
    for name in a:
        pd.testing.assert_frame_equal(a[name], b[name], check_exact=True, obj=name)


def _count_chunk_reads(monkeypatch, folder):
    """Count the chunk reads (``tables._read_task``, which the run reads through too) of this process and of those
    it forks: one empty file per read in ``folder``; returns a function giving the keys of the tasks read, sorted,
    one per read."""
    from precision.engine import sweep, tables
    folder.mkdir()
    real_read = tables._read_task

    def read_task(task, chunk_dir, *recomputed):
        (folder / f"{task.key}-{os.getpid()}-{len(list(folder.iterdir()))}").write_text("")
        return real_read(task, chunk_dir, *recomputed)
    monkeypatch.setattr(sweep, "_read_task", read_task)
    monkeypatch.setattr(tables, "_read_task", read_task)
    return lambda: sorted(p.name.split("-")[0] for p in folder.iterdir())


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("ref")
    result = run_study(small_study(), out, cache_dir=tmp_path_factory.mktemp("cache"), workers=1)
    return out, result


class TestPipeline:
    def test_points_match_direct_oracle_and_variants(self, reference_run):
        out, result = reference_run
        pts = pd.read_parquet(out / "points.parquet")
        n = pred_values(small_study().pred, 1).size
        assert result.points == n * 2 * 16 and len(pts) == result.points * 5
        for fmt, dtype in (("fp16", np.float16), ("fp32", np.float32)):
            sel = pts[(pts["format"] == fmt) & (pts["variant"] == "kernel") & (pts["machine"] == "npu")]
            direct = oracle.gradient(sel["pred"].to_numpy(), sel["target"].to_numpy(), sel["alpha"].to_numpy(),
                                     sel["gamma"].to_numpy(), fmt=fmt)
            np.testing.assert_array_equal(sel["rounded"].to_numpy().astype(dtype).view(np.uint16 if fmt == "fp16"
                                                                                         else np.uint32),
                                          direct.view(np.uint16 if fmt == "fp16" else np.uint32))
            err = ulp_error(sel["computed"].to_numpy().astype(dtype),
                            (sel["exact"].to_numpy(), sel["exact_lo"].to_numpy()), fmt, sel["rounded"].to_numpy())
            np.testing.assert_array_equal(err, sel["err_ulp"].to_numpy())
        # computed values are what evaluate() returns for that tensor
        one = pts[(pts["format"] == "fp32") & (pts["variant"] == "naive") & (pts["machine"] == "ieee")
                  & (pts["alpha"] == 0.25) & (pts["gamma"] == -1.5)].sort_values(["pred", "target"], kind="stable")
        preds = np.unique(one["pred"].to_numpy().view(np.int64)).view(np.float64)
        preds = preds[np.argsort(preds, kind="stable")]
        pred2d = np.repeat(preds.astype(np.float32)[:, None], 2, axis=1)
        tgt = np.tile(np.int32([0, 1]), (preds.size, 1))
        got = evaluate("naive", pred2d, tgt, np.ones_like(pred2d), None, alpha=0.25, gamma=-1.5, reduction="none",
                       machine="ieee")
        by_point = {(p, t): c for p, t, c in zip(one["pred"], one["target"], one["computed"])}
        for i, p in enumerate(preds):
            for j in (0, 1):
                c = by_point[(p, j)]
                assert (np.isnan(c) and np.isnan(got[i, j])) or c == got[i, j]

    def test_summary_columns_and_witness(self, reference_run):
        out, _ = reference_run
        s = pd.read_csv(out / "summary.csv")
        assert len(s) == 5 * 2 * 2
        k = s[(s["variant"] == "kernel") & (s["machine"] == "ieee") & (s["format"] == "fp16")].iloc[0]
        n = pred_values(small_study().pred, 1).size
        assert k["count"] == n * 2 * 4 and 0 <= k["share_correct"] <= 1
        assert float.fromhex(k["witness_pred"]) == float(np.float16(float.fromhex(k["witness_pred"])))
        for cls in ("nan", "inf", "wrong_sign", "lost_inf"):
            assert cls in s.columns and (s[cls] >= 0).all()
        g = pd.read_csv(out / "groups.csv")
        assert g["count"].sum() == n * 2 * 4 * 5 * 2 * 2

    def test_comparisons_pair_guards_and_count_from_points(self, reference_run):
        """The paired counts of comparisons.csv against a direct count on the per-point rows."""
        out, _ = reference_run
        c = pd.read_csv(out / "comparisons.csv")
        assert set(zip(c["with_variant"], c["without_variant"], c["subject"])) == {
            ("kernel", "kernel-G2", "G2"), ("naive+G2", "naive", "G2")}
        allr = c[c["region"] == "all"]
        assert (allr["changed"] == allr["better"] + allr["worse"] + allr["tied"] + allr["both_garbage"]).all()
        pts = pd.read_parquet(out / "points.parquet")
        pts["variant"] = pts["variant"].astype(str)
        pts["pred_bits"] = pts["pred"].to_numpy().view(np.int64)  # -0.0 and 0.0 are two points
        keys = ["machine", "format", "alpha", "gamma", "target", "pred_bits"]
        checked = 0
        for r in allr.itertuples(index=False):
            sel = pts[(pts["machine"] == r.machine) & (pts["format"] == r.format)]
            j = sel[sel["variant"] == r.with_variant].merge(sel[sel["variant"] == r.without_variant], on=keys,
                                                            suffixes=("_w", "_o"))
            cw, co = j["computed_w"].to_numpy(), j["computed_o"].to_numpy()
            changed = (cw.view(np.int64) != co.view(np.int64)) & ~(np.isnan(cw) & np.isnan(co))
            sw, so = (j["class_w"].astype(str) != "ok").to_numpy(), (j["class_o"].astype(str) != "ok").to_numpy()
            ew = np.where(sw, np.inf, j["err_ulp_w"].to_numpy())
            eo = np.where(so, np.inf, j["err_ulp_o"].to_numpy())
            # the verdict rule: special or over 2^20 ulp on both sides is no evidence
            garbage = changed & (sw | (ew > 2.0**20)) & (so | (eo > 2.0**20))
            assert r.count == len(j) and r.changed == changed.sum() and r.both_garbage == garbage.sum()
            assert r.better == (changed & ~garbage & (ew < eo)).sum()
            assert r.worse == (changed & ~garbage & (ew > eo)).sum()
            assert r.specials_fixed == (changed & ~garbage & so & ~sw).sum()
            assert r.specials_caused == (changed & ~garbage & sw & ~so).sum()
            checked += int(r.changed > 0)
        assert checked >= 4  # G2 changes outputs in both directions of the pair on some machine/format


class TestDeterminism:
    def test_hist_npz_is_stored_int32_and_remerges_to_the_summary(self, reference_run):
        out, _ = reference_run
        with np.load(out / "hist.npz") as hist:
            assert all(hist[c].dtype == np.int32 for c in ("row", "bin", "count"))
        stats = load_stats(out)
        by = ["variant", "machine", "format", "profile"]
        summary = pd.read_csv(out / "summary.csv")
        merged = stats.merge(by).table(by)
        merged = summary[by].merge(merged, on=by, how="left")  # summary.csv's row order
        for column in ("count", "p50_ulp", "p99_ulp", "p999_ulp", "over_1ulp"):
            np.testing.assert_array_equal(merged[column].to_numpy(), summary[column].to_numpy(), err_msg=column)

    def test_pool_and_reuse_give_identical_tables(self, reference_run, tmp_path):
        out, _ = reference_run
        run_study(small_study(), tmp_path / "pool", cache_dir=tmp_path / "c", workers=2)
        assert_same_tables(read_tables(out), read_tables(tmp_path / "pool"))
        # rerun into the same folder: every task reused, the oracle entirely from cache
        again = run_study(small_study(), tmp_path / "pool", cache_dir=tmp_path / "c", workers=2)
        assert again.tasks_reused == again.tasks and again.term_pairs_cached == again.term_pairs
        assert_same_tables(read_tables(out), read_tables(tmp_path / "pool"))

    def test_chunk_size_does_not_matter(self, reference_run, tmp_path, monkeypatch):
        from precision.engine import sweep
        monkeypatch.setattr(sweep, "TERM_CHUNK", 7)
        run_study(small_study(), tmp_path / "o", use_cache=False, workers=2)
        assert_same_tables(read_tables(reference_run[0]), read_tables(tmp_path / "o"))

    def test_points_written_in_small_batches_are_the_same_rows(self, reference_run, tmp_path, monkeypatch):
        import pyarrow.parquet as pq
        from precision.engine import tables
        monkeypatch.setattr(tables, "POINTS_BATCH_ROWS", 100)
        run_study(small_study(), tmp_path / "o", cache_dir=tmp_path / "c", workers=1)
        batched, whole = (pq.ParquetFile(Path(d) / "points.parquet") for d in (tmp_path / "o", reference_run[0]))
        assert batched.metadata.num_row_groups > whole.metadata.num_row_groups
        assert batched.metadata.num_rows == whole.metadata.num_rows > 100
        pd.testing.assert_frame_equal(batched.read().to_pandas(), whole.read().to_pandas(), check_exact=True)

    @pytest.mark.parametrize("share", [0.0, 0.5])
    def test_points_held_or_read_again_give_the_same_tables(self, reference_run, tmp_path, monkeypatch, share):
        """The kept points of the chunks read while the tasks run are held up to POINTS_HELD_BYTES in all, the
        others' read again from their chunk files (in the process aside): the same tables either way, and the
        chunks read again are exactly those whose points were not held."""
        from precision.engine import sweep, tables
        from precision.engine.cache import read_checked_npz
        sizes = sorted(sum(v.nbytes for k, v in read_checked_npz(f).items() if k.startswith("points."))
                       for f in (reference_run[0] / "chunks").glob("*.safetensors"))
        monkeypatch.setattr(sweep, "POINTS_HELD_BYTES", sum(sizes[:int(share * len(sizes))]))
        held, real_held = [], sweep._held_part

        def held_part(arrays, points_room):
            part, left = real_held(arrays, points_room)
            held.append("points.values" in part)
            return part, left
        monkeypatch.setattr(sweep, "_held_part", held_part)
        monkeypatch.setattr(tables, "_held_part", held_part)
        reads = _count_chunk_reads(monkeypatch, tmp_path / "reads")
        result = run_study(small_study(), tmp_path / "o", cache_dir=tmp_path / "c", workers=2)
        assert_same_tables(read_tables(reference_run[0]), read_tables(tmp_path / "o"))
        assert len(held) == result.tasks and (0 < held.count(True) < result.tasks if share else not any(held))
        assert len(reads()) == result.tasks + held.count(False)  # (read once as it ended, some again)

    @pytest.mark.parametrize("workers", [1, 2])
    def test_a_run_into_a_folder_holding_its_chunks_reads_each_once(self, reference_run, tmp_path, monkeypatch,
                                                                     workers):
        """Run again into the same folder, every task is found finished: each chunk is read once in all (in this
        process or the one aside), its kept points held for the comparisons and points; the same tables."""
        out = tmp_path / "o"
        run_study(small_study(), out, cache_dir=tmp_path / "c", workers=workers)
        reads = _count_chunk_reads(monkeypatch, tmp_path / "reads")
        result = run_study(small_study(), out, cache_dir=tmp_path / "c", workers=workers)
        assert result.tasks_reused == result.tasks > 0
        assert reads() == sorted(p.stem for p in (out / "chunks").glob("*.safetensors"))
        assert_same_tables(read_tables(reference_run[0]), read_tables(out))

    def test_an_inline_run_writes_each_chunk_and_reads_none_back(self, tmp_path, monkeypatch):
        """One worker in this process: each task's result is written as its chunk, never read back from it;
        the chunks are those a pool's workers write, byte for byte."""
        reads = _count_chunk_reads(monkeypatch, tmp_path / "reads")
        result = run_study(small_study(), tmp_path / "inline", cache_dir=tmp_path / "c1", workers=1)
        assert reads() == []
        run_study(small_study(), tmp_path / "pool", cache_dir=tmp_path / "c2", workers=2)
        inline = sorted((tmp_path / "inline" / "chunks").glob("*.safetensors"))
        assert len(inline) == result.tasks == len(list((tmp_path / "pool" / "chunks").iterdir()))
        for chunk in inline:
            assert chunk.read_bytes() == (tmp_path / "pool" / "chunks" / chunk.name).read_bytes(), chunk.name

    def test_dask_local_cluster(self, reference_run, tmp_path):
        pytest.importorskip("dask.distributed")
        run_study(small_study(), tmp_path / "d", use_cache=False, scheduler="local", workers=2)
        assert_same_tables(read_tables(reference_run[0]), read_tables(tmp_path / "d"))

    def test_no_cache_writes_nothing(self, tmp_path):
        result = run_study(small_study(n=10), tmp_path / "o", cache_dir=tmp_path / "cache", use_cache=False,
                           workers=1)
        assert result.term_pairs_cached == 0 and not (tmp_path / "cache").exists()


RESUME = """
name = "resume"
[pred]
kind = "exhaustive"
format = "fp16"
range = [-16, 16]
[points]
target = [0, 1]
alpha = [0.25, 0.75]
gamma = [2.0, 0.5, -1.5, -0.5, 3.0]
profiles = ["fp32"]
[run]
variants = ["kernel", "naive", "golden", "mmcv"]
machines = ["ieee", "npu"]
per_point = "none"
"""


@pytest.mark.parametrize("attribution", [False, True])
def test_workers_are_released_before_the_tables_are_assembled(tmp_path, monkeypatch, attribution):
    """The pool is closed once its last job is done: before the assembly (its memory back to the machine),
    or, with an attribution to run on it, only after that."""
    from precision.engine import sweep
    from precision.engine.executor import InlineExecutor
    events = []

    class Recording(InlineExecutor):
        def close(self):
            events.append("close")

    def recorded(name):
        real = getattr(sweep, name)

        def call(*args, **kwargs):
            events.append(name)
            return real(*args, **kwargs)
        monkeypatch.setattr(sweep, name, call)
    monkeypatch.setattr(sweep, "make_executor", lambda scheduler, workers: Recording())
    recorded("_write_outputs")
    recorded("write_attribution")
    text = SMALL.format(values='"0x1.0p+0", "-0x1.8p+1"')
    if attribution:
        text = text.replace('per_point = "all"', 'per_point = "all"\nattribution = { variants = ["kernel"], points = 2 }')
    run_study(parse_study(text, "small.toml"), tmp_path / "out", cache_dir=tmp_path / "cache", workers=2)
    if attribution:
        assert events.index("_write_outputs") < events.index("write_attribution") < events.index("close")
    else:
        assert events.index("close") < events.index("_write_outputs") and "write_attribution" not in events


def test_kill_9_then_resume_gives_identical_results(tmp_path):
    study = tmp_path / "resume.toml"
    study.write_text(RESUME)
    out = tmp_path / "out"
    env = dict(os.environ, PRECISION_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.Popen([sys.executable, "-m", "precision.cli", "run", str(study), "--out", str(out),
                             "--workers", "1"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and len(list((out / "chunks").glob("*.safetensors"))) < 3:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(list((out / "chunks").glob("*.safetensors")))
    assert 3 <= done < 20 and not (out / "summary.csv").exists()
    code = main(["run", str(study), "--out", str(out), "--workers", "2", "--cache-dir", str(tmp_path / "cache")])
    assert code == 0
    clean = tmp_path / "clean"
    assert main(["run", str(study), "--out", str(clean), "--workers", "2", "--no-cache"]) == 0
    assert_same_tables(read_tables(out), read_tables(clean))
    import json
    assert json.loads((out / "run.json").read_text())["tasks_reused"] >= done


class TestRunCommand:
    def test_bad_study_exit_2_one_line(self, tmp_path, capsys):
        bad = tmp_path / "bad.toml"
        bad.write_text(SMALL.format(values='"1.0"').replace('alpha = [0.25, 1.0]', "alpha = []"))
        assert main(["run", str(bad), "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "points.alpha" in err and str(bad) in err
        assert not (tmp_path / "o").exists()

    def test_unwritable_out(self, tmp_path, capsys):
        study = tmp_path / "s.toml"
        study.write_text(SMALL.format(values='"1.0"'))
        blocker = tmp_path / "file"
        blocker.write_text("x")
        assert main(["run", str(study), "--out", str(blocker / "o"), "--no-cache"]) == 2
        assert "cannot create" in capsys.readouterr().err

    def test_cache_info_and_clear(self, tmp_path, capsys):
        study = tmp_path / "s.toml"
        study.write_text(SMALL.format(values='"1.0", "2.0"'))
        assert main(["run", str(study), "--out", str(tmp_path / "o"), "--cache-dir", str(tmp_path / "c"),
                     "--workers", "1"]) == 0
        capsys.readouterr()
        assert main(["cache", "info", "--cache-dir", str(tmp_path / "c")]) == 0
        info = capsys.readouterr().out
        # 16 tasks (2 machines x 2 profiles x 2 alphas x 2 gammas): one file each, holding 5 variants' and
        # 2 comparisons' pieces
        assert "terms   2 shards" in info and "results 16 files" in info
        assert main(["cache", "clear", "--cache-dir", str(tmp_path / "c")]) == 0
        assert "removed 2 term shards and 16 result files" in capsys.readouterr().out
        assert main(["cache", "info", "--cache-dir", str(tmp_path / "c")]) == 0
        assert "results 0 files, 0 bytes" in capsys.readouterr().out


def test_profile_tensors_hold_only_their_exact_values(tmp_path):
    text = SMALL.format(values='"1.0", "0x1.0002p+0", "3.0"')  # 1 + 2^-15 is fp32 but not fp16
    text = text.replace('format = "fp16"', 'format = "fp32"')
    out = tmp_path / "o"
    run_study(parse_study(text, "s.toml"), out, use_cache=False, workers=1)
    pts = pd.read_parquet(out / "points.parquet")
    assert set(pts[pts["format"] == "fp16"]["pred"]) == {1.0, 3.0}
    assert set(pts[pts["format"] == "fp32"]["pred"]) == {1.0, 1.0 + 2.0**-15, 3.0}


def test_per_point_worst_keeps_each_groups_worst(tmp_path):
    text = SMALL.format(values=", ".join(f'"{float(v).hex()}"' for v in np.float16(np.linspace(-30, 30, 301))))
    out = tmp_path / "o"
    run_study(parse_study(text.replace('per_point = "all"', 'per_point = "worst"'), "s.toml"), out,
              use_cache=False, workers=1)
    pts = pd.read_parquet(out / "points.parquet")
    groups = pd.read_csv(out / "groups.csv")
    pts["region"] = pd.cut(pts["pred"], [-np.inf, -20, -8, 0, 8, 20, np.inf], right=False,
                           labels=["x < -20", "[-20, -8)", "[-8, 0)", "[0, 8)", "[8, 20)", "x >= 20"]).astype(str)
    keys = ["variant", "machine", "format", "alpha", "gamma", "target", "region"]
    sizes = pts.groupby(keys, observed=True).size()
    assert sizes.max() == 8
    worst = pts.groupby(keys, observed=True)["err_ulp"].max().reset_index()
    merged = worst.merge(groups, on=keys)
    assert len(merged) == len(worst)
    np.testing.assert_array_equal(merged["err_ulp"].to_numpy(), merged["max_ulp"].to_numpy())


def test_altered_chunk_is_detected_and_recomputed(reference_run, tmp_path):
    import warnings

    from precision.engine.cache import CacheIntegrityWarning
    out = tmp_path / "o"
    run_study(small_study(), out, use_cache=False, workers=1)
    chunk = sorted((out / "chunks").glob("*.safetensors"))[3]
    data = bytearray(chunk.read_bytes())
    # a byte of the arrays' data: safetensors puts an 8-byte header length and the JSON header before it
    start = 8 + int.from_bytes(data[:8], "little")
    data[start + (len(data) - start) // 2] ^= 0x55
    chunk.write_bytes(bytes(data))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = run_study(small_study(), out, use_cache=False, workers=1)
    # the file existed; its content failed the check: counted apart from the reused (issue 46)
    assert (again.tasks_reused, again.tasks_recomputed) == (again.tasks - 1, 1)
    assert sum(issubclass(w.category, CacheIntegrityWarning) for w in caught) == 1
    assert_same_tables(read_tables(reference_run[0]), read_tables(out))


BANDED = """
name = "banded"
seed = 0
[pred]
kind = "list"
format = "fp32"
values = ["-0x1.d7c0000000000p-1", "-0x1.8p-1", "0.0", "0x1.8p+0", "-0x1.cp+1", "0x1.4p+3"]
[points]
target = [0, 1]
alpha = [0.25]
gamma = [-2.0, 2.0]
profiles = ["fp32"]
bracket_bands = [4, 64]
[run]
variants = ["candidate", "kernel"]
machines = ["ieee"]
per_point = "all"
"""


def test_bracket_bands_split_the_tables(reference_run, tmp_path):
    from precision.operators.sigmoid_focal_loss_grad.bracket import bracket_band
    out = tmp_path / "banded"
    run_study(parse_study(BANDED, "banded.toml"), out, cache_dir=tmp_path / "cache", workers=1)
    by_bracket = pd.read_csv(out / "by_bracket.csv")
    summary = pd.read_csv(out / "summary.csv")
    groups = pd.read_csv(out / "groups.csv")
    assert "bracket" in groups.columns and "bracket" not in summary.columns
    # every point in exactly one band: band counts add up to the summary's
    sums = by_bracket.groupby(["variant", "machine", "format"])["count"].sum()
    assert (sums.to_numpy() == summary.set_index(["variant", "machine", "format"]).loc[sums.index, "count"]).all()
    # the band counts equal a direct classification of the points
    x = np.array([float.fromhex(v) for v in ["-0x1.d7c0000000000p-1", "-0x1.8p-1", "0.0", "0x1.8p+0",
                                              "-0x1.cp+1", "0x1.4p+3"]])
    labels = ["C < 4", "C in [4, 64)", "C >= 64"]
    for gamma in (-2.0, 2.0):
        bands = np.concatenate([bracket_band(x, np.zeros(6, int), gamma, (4, 64)),
                                bracket_band(x, np.ones(6, int), gamma, (4, 64))])
        rows = by_bracket[(by_bracket["variant"] == "kernel") & (by_bracket["gamma"] == gamma)]
        got = dict(zip(rows["bracket"], rows["count"]))
        want = {labels[b]: int(n) for b, n in zip(*np.unique(bands, return_counts=True))}
        assert got == want
    # gamma = -2, pred -0x1.d7cp-1 with selector 0 sits next to a root of A: C >= 64
    assert "C >= 64" in set(by_bracket.loc[by_bracket["gamma"] == -2.0, "bracket"])
    # a study without bracket_bands has no bracket column and no by_bracket table
    ref_out, _ = reference_run
    assert not (Path(ref_out) / "by_bracket.csv").exists()
    assert "bracket" not in pd.read_csv(Path(ref_out) / "groups.csv").columns


@pytest.mark.parametrize("prefix", ["stats", "paired"])
def test_task_results_stack_as_arrays_as_they_do_as_frames(reference_run, prefix):
    """The tables' assembly stacks the tasks' packed arrays; equal to building and concatenating frames, also
    when a task has no rows (the frame path then serves)."""
    from precision.analysis.groups import GroupStats
    from precision.analysis.paired import PairedStats
    from precision.engine.cache import read_checked_npz
    from precision.engine.tables import _stack_tasks
    cls = {"stats": GroupStats, "paired": PairedStats}[prefix]
    chunks = sorted((reference_run[0] / "chunks").glob("*.safetensors"))
    parts = [(ti, read_checked_npz(p)) for ti, p in enumerate(chunks)]
    parts = [(ti, a) for ti, a in parts if a[f"{prefix}.values"].shape[0]]
    assert len(parts) >= 8

    def by_frames(parts):
        return cls.concat(cls.from_arrays(a, prefix).with_columns(task=ti) for ti, a in parts)
    for chosen in (parts, parts[:3] + [(99, {**parts[0][1], f"{prefix}.values": parts[0][1][f"{prefix}.values"][:0],
                                                f"{prefix}.hist": np.empty((3, 0), dtype=np.int64)})]):
        fast, slow = _stack_tasks(chosen, prefix, cls), by_frames(chosen)
        pd.testing.assert_frame_equal(fast.frame[list(slow.frame.columns)], slow.frame, check_exact=True)
        pd.testing.assert_frame_equal(fast.hist, slow.hist, check_exact=True, check_dtype=False)
