"""Tasks: shared evaluation equals one-by-one, content-addressed results reused and invalidated exactly.

Editing a source file is simulated by standing in edited bytes for it in
:func:`precision.engine.task._source_bytes` (the one place digests read sources),
so no file of the checkout changes; runs use one worker so the stand-in
applies.
"""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from precision import sigmoid_focal_loss_grad
from precision.operators.sigmoid_focal_loss_grad import guards

from precision.engine import task
from precision.engine.cache import CacheIntegrityWarning
from precision.engine.study import parse_study
from precision.engine.sweep import run_study

STUDY = """
name = "cached"
seed = 0
[pred]
kind = "list"
format = "fp16"
values = ["-0x1.8p+3", "-1.0", "-0x1.cp-1", "0.0", "0x1.4p+0", "3.5", "0x1.1p+4", "0x1.4p+5"]
[points]
target = [0, 1]
alpha = [0.25]
gamma = [-1.0, 2.0]
profiles = ["fp16", "fp32"]
[run]
variants = ["naive", "naive+G2", "kernel-G2", "kernel", "candidate", "golden"]
machines = ["ieee", "npu"]
per_point = "worst"
compare = [["candidate", "golden"]]
"""
TABLES = ("summary.csv", "groups.csv", "comparisons.csv")
#: 2 machines x 2 profiles x 2 gammas = 8 tasks; each 6 variants and 3 comparisons (2 guard pairs, 1 declared).
TASKS, VARIANTS, PAIRS = 8, 6, 3


def _run(tmp_path, folder, cache="cache", **kw):
    out = tmp_path / folder
    result = run_study(parse_study(STUDY, str(tmp_path / "cached.toml")), out, cache_dir=tmp_path / cache, workers=1,
                       **kw)
    return result, out


def _same_tables(a: Path, b: Path):
    for name in TABLES:
        pd.testing.assert_frame_equal(pd.read_csv(a / name), pd.read_csv(b / name), check_exact=True, obj=name)
    for name in ("groups_raw.parquet", "paired_raw.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(a / name), pd.read_parquet(b / name), check_exact=True, obj=name)


@pytest.fixture
def edited(monkeypatch):
    """edited(path relative to the package): digests see that source file with a comment appended."""
    original = task._source_bytes

    def edit(rel):
        target = (Path(task.__file__).parents[1] / rel).resolve()
        monkeypatch.setattr(task, "_source_bytes",
                            lambda p: original(p) + (b"\n# edited\n" if Path(p).resolve() == target else b""))
        task.clear_digests()
    yield edit
    monkeypatch.undo()
    task.clear_digests()


class TestResultCache:
    def test_a_new_folder_reuses_every_result(self, tmp_path):
        first, a = _run(tmp_path, "a")
        assert (first.results_computed, first.results_reused) == (TASKS * (VARIANTS + PAIRS), 0)
        again, b = _run(tmp_path, "b")
        assert (again.results_computed, again.results_reused) == (0, TASKS * (VARIANTS + PAIRS))
        run = json.loads((b / "run.json").read_text())
        assert run["results_reused"] == TASKS * (VARIANTS + PAIRS) and run["results_computed"] == 0
        _same_tables(a, b)

    def test_editing_one_variant_reruns_that_variant_and_its_comparisons(self, tmp_path, edited):
        _, a = _run(tmp_path, "a")
        edited("operators/sigmoid_focal_loss_grad/implementations/candidate.py")
        again, b = _run(tmp_path, "b")
        # candidate's piece and the candidate vs golden pair, in every task; nothing else
        assert again.results_computed == TASKS * 2
        assert again.results_reused == TASKS * (VARIANTS + PAIRS - 2)
        _same_tables(a, b)

    def test_editing_the_machine_reruns_everything(self, tmp_path, edited):
        _run(tmp_path, "a")
        edited("machine/context.py")
        again, _ = _run(tmp_path, "b")
        assert (again.results_computed, again.results_reused) == (TASKS * (VARIANTS + PAIRS), 0)

    def test_one_file_per_task_holds_every_piece(self, tmp_path):
        _run(tmp_path, "a")
        assert len(list((tmp_path / "cache").glob("results-v*/*/*.safetensors"))) == TASKS

    def test_a_corrupt_result_is_reported_once_and_recomputed(self, tmp_path):
        _, a = _run(tmp_path, "a")
        victim = sorted((tmp_path / "cache").glob("results-v*/*/*.safetensors"))[1]
        victim.write_bytes(victim.read_bytes()[:-40])  # truncated: that task's bundle, every piece of it
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            again, b = _run(tmp_path, "b")
        assert sum(issubclass(w.category, CacheIntegrityWarning) for w in caught) == 1
        assert (again.results_computed, again.results_reused) == (VARIANTS + PAIRS, (TASKS - 1) * (VARIANTS + PAIRS))
        _same_tables(a, b)

    def test_no_cache_neither_reads_nor_writes(self, tmp_path):
        _run(tmp_path, "a")
        result, _ = run_study(parse_study(STUDY, "cached.toml"), tmp_path / "b", use_cache=False, workers=1), None
        assert (result.results_computed, result.results_reused) == (TASKS * (VARIANTS + PAIRS), 0)
        _run(tmp_path, "c", cache="other", use_cache=False)
        assert not (tmp_path / "other").exists()


def test_shared_evaluation_gives_the_tables_of_one_by_one(tmp_path, monkeypatch):
    """The sweep's tables with variants evaluated together equal those with each evaluated alone."""
    _, shared = _run(tmp_path, "shared", use_cache=False)

    def one_by_one(names, *args, keep_steps=(), **kwargs):
        outputs, kept = {}, {}
        for name in names:
            out, steps = guards.evaluate_variants([name], *args, keep_steps=keep_steps, **kwargs)
            outputs[name], kept[name] = out[name], steps[name]
        return outputs, kept
    monkeypatch.setattr(sigmoid_focal_loss_grad, "evaluate_variants", one_by_one)  # the interface the tasks call
    _, alone = _run(tmp_path, "alone", use_cache=False)
    _same_tables(shared, alone)
    pts = [pd.read_parquet(p / "points.parquet") for p in (shared, alone)]
    pd.testing.assert_frame_equal(*pts, check_exact=True)


def test_decisions_are_counted_per_group(tmp_path):
    """fired_g5 counts the outputs where G5's condition held (the recipe's g5_use step), per fine group."""
    _, out = _run(tmp_path, "a", use_cache=False)
    g = pd.read_parquet(out / "groups_raw.parquet")
    assert {"fired_g4", "fired_g5", "fired_g7"} <= set(g.columns)
    kernel = g[(g["variant"] == "kernel") & (g["gamma"] == -1.0)]
    assert kernel["fired_g5"].sum() > 0 and (kernel["fired_g5"] <= kernel["count"]).all()
    assert (g.loc[g["variant"].isin(["golden", "candidate", "kernel-G2"]) & (g["gamma"] == 2.0), "fired_g5"] == 0).all()
    # a direct count: the kernel's g5_use over the same tensor
    x = np.array([-12.0, -1.0, -0.875, 0.0, 1.25, 3.5, 17.0, 40.0], np.float16)  # the study's pred values
    pred = np.repeat(x[:, None], 2, axis=1)
    tgt = np.tile(np.int32([0, 1]), (x.size, 1))
    _, kept = guards.evaluate_variants(["kernel"], pred, tgt, np.ones_like(pred), alpha=0.25, gamma=-1.0,
                                       reduction="none", machine="npu", keep_steps=("g5_use",))
    direct = int(np.asarray(kept["kernel"]["g5_use"]).sum())
    counted = g[(g["variant"] == "kernel") & (g["gamma"] == -1.0) & (g["machine"] == "npu") & (g["format"] == "fp16")]
    assert int(counted["fired_g5"].sum()) == direct


def _fired_counts(variant, pred, tgt, **kwargs):
    from precision.operators.sigmoid_focal_loss_grad.implementations.kernel import FIRED_STEPS, guard_fired
    outs, kept = guards.evaluate_variants([variant], pred, tgt, np.ones_like(pred), reduction="none",
                                          keep_steps=FIRED_STEPS, **kwargs)
    row = guards.get_variant(variant)
    fired = guard_fired(kept[variant], row.guards, kwargs.get("machine", "ieee"), kwargs.get("alpha", 0.25),
                        pred.size)
    return outs[variant].ravel(), {k: m.reshape(pred.shape) for k, m in fired.items()}


def test_every_guard_gets_a_fired_count_where_its_condition_holds():
    """fired_g1..g8 mark exactly where each guard acts: x < 0 (G1), the clamped q of x >= 17 (G2), a base in
    (0, 1) (G3), the store that rounds differently from truncation (G8: where kernel and kernel-G8 differ),
    1 - alpha == 1 (G6), a weight with raw*weight subnormal (G7); nothing for a guard that is off."""
    x = np.array([-12.0, -1.0, -0.875, 0.0, 1.25, 3.5, 17.0, 40.0], np.float16)
    pred = np.repeat(x[:, None], 2, axis=1)
    tgt = np.tile(np.int32([0, 1]), (x.size, 1))
    out, f = _fired_counts("kernel", pred, tgt, gamma=2.0, machine="npu")
    assert f["fired_g1"].sum() == 6 and (f["fired_g1"] == (pred < 0)).all()
    assert (f["fired_g2"] == (pred >= 17)).all()  # p rounds to 1 there, q = 0 is clamped to MIN_NORMAL
    assert f["fired_g3"].all()  # every point has a base in (0, 1) (qF = MIN_NORMAL where q = 0)
    assert f["fired_g6"].sum() == 0 and f["fired_g7"].sum() == 0 and f["fired_g5"].sum() == 0
    off, _ = _fired_counts("kernel-G8", pred, tgt, gamma=2.0, machine="npu")
    assert f["fired_g8"].sum() > 0 and (f["fired_g8"].ravel() == (out.view(np.uint16) != off.view(np.uint16))).all()
    _, naive = _fired_counts("naive", pred, tgt, gamma=2.0, machine="npu")
    assert all(m.sum() == 0 for m in naive.values())
    _, g6 = _fired_counts("kernel", pred, tgt, alpha=0.0, gamma=2.0)
    assert g6["fired_g6"].all()
    # G7: a weight that makes raw*weight subnormal at every point whose raw is nonzero
    w = np.full(pred.shape, 2.0**-120, np.float32)
    p32 = pred.astype(np.float32)
    from precision.operators.sigmoid_focal_loss_grad.implementations.kernel import FIRED_STEPS, guard_fired
    _, kept = guards.evaluate_variants(["kernel"], p32, tgt, np.ones_like(p32), w, gamma=2.0, reduction="none",
                                       keep_steps=FIRED_STEPS + ("g7_use",))
    fired = guard_fired(kept["kernel"], guards.get_variant("kernel").guards, "ieee", 0.25, p32.size)
    assert fired["fired_g7"].sum() > 0
    assert (fired["fired_g7"] == (np.asarray(kept["kernel"]["g7_use"]).ravel() == 1)).all()


def test_g8_count_reuses_a_truncated_store_only_for_the_same_grad_and_machine():
    """G8's count compares the output with grad stored by truncation; that store is kept for the next variant
    with the same grad bits on the same machine, and recomputed for any other."""
    import importlib
    kernel = importlib.import_module("precision.operators.sigmoid_focal_loss_grad.implementations.kernel")
    grad = np.float32([1.0 + 2.0 ** -12, -3.0, 2.0 ** -20, 70000.0])
    first = kernel._truncated_store(grad, "ieee")
    assert first.dtype == np.float16 and first.tolist() == [1.0, -3.0, float(np.float16(2.0 ** -20)), 65504.0]
    assert kernel._truncated_store(grad.copy(), "ieee") is first  # equal bits: the kept store
    other = grad.copy()
    other[0] = np.float32(1.0 + 2.0 ** -9 + 2.0 ** -12)
    assert kernel._truncated_store(other, "ieee").tolist()[0] == 1.0 + 2.0 ** -9  # one bit differs: recomputed
    assert kernel._truncated_store(grad, "npu") is not first  # another machine: its own store


def test_decision_masks_compare_values_and_are_reused_only_for_the_same_steps():
    """G2/G8's "differs" compares values (NaN equals NaN, -0 equals +0; float16 by its bits), and a decision
    mask is reused only for the very step objects it came from."""
    import importlib
    kernel = importlib.import_module("precision.operators.sigmoid_focal_loss_grad.implementations.kernel")
    bits = np.array([0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x3C00, 0xBC00, 0x0001], dtype=np.uint16)
    a, b = np.repeat(bits, bits.size).view(np.float16), np.tile(bits, bits.size).view(np.float16)
    with np.errstate(invalid="ignore"):
        by_value = ~((a.astype(np.float32) == b.astype(np.float32)) | (np.isnan(a) & np.isnan(b)))
    assert (kernel._differs(a, b) == by_value).all()
    assert int(kernel._differs(a, b).sum()) == 100 - 10 - 2 - 6  # (equal: the same bits, two zeros, two NaNs)
    x, y = np.float32([1.0, 2.0]), np.float32([1.0, 3.0])
    first = kernel._decision("t", (x, y), lambda: x != y)
    assert kernel._decision("t", (x, y), lambda: None) is first  # the same objects: the same mask
    assert kernel._decision("t", (x.copy(), y), lambda: x == y).tolist() == [True, False]  # equal values, other object
    assert not first.flags.writeable
    assert kernel._decision("u", (x, y), lambda: x == y).tolist() == [True, False]  # another name: computed
    others = [np.float32([k]) for k in range(kernel._DECISIONS_KEPT)]  # (held: their ids stay theirs)
    for other in others:  # as many masks again: the oldest, first's, is dropped, and computed anew
        kernel._decision("t", (other,), lambda: np.ones(1, dtype=bool))
    assert len(kernel._DECISIONS) == kernel._DECISIONS_KEPT
    again = kernel._decision("t", (x, y), lambda: x != y)
    assert again is not first and again.tolist() == first.tolist()


def test_g6_fires_everywhere_through_one_read_only_mask_per_size():
    """G6's mask (it acts at every element) is one read-only array for the variants of a size, so its counts
    are kept (Grouping.count); another size has its own, and so has the mask of a guard acting nowhere."""
    import importlib
    kernel = importlib.import_module("precision.operators.sigmoid_focal_loss_grad.implementations.kernel")
    a = kernel._filled(5, True)
    assert a.tolist() == [True] * 5 and not a.flags.writeable
    assert kernel._filled(5, True) is a
    b = kernel._filled(7, True)
    assert b.size == 7 and b is not a and kernel._filled(7, True) is b
    none = kernel._filled(5, False)  # (the masks of guards that act nowhere: one array too)
    assert none.tolist() == [False] * 5 and not none.flags.writeable and kernel._filled(5, False) is none


def test_every_fired_count_reaches_the_group_table(tmp_path):
    """groups_raw.parquet carries fired_g1..fired_g8; naive fires nothing, naive+G1 fires on the x < 0 points."""
    _, out = _run(tmp_path, "f", use_cache=False)
    g = pd.read_parquet(out / "groups_raw.parquet")
    cols = [f"fired_g{i}" for i in range(1, 9)]
    assert set(cols) <= set(g.columns)
    assert (g.loc[g["variant"] == "naive", cols] == 0).all().all()
    kernel = g[(g["variant"] == "kernel") & (g["machine"] == "npu") & (g["format"] == "fp16")]
    assert int(kernel["fired_g1"].sum()) == 3 * 2 * 2  # 3 negative preds x 2 targets x 2 gammas
    assert int(kernel["fired_g2"].sum()) == 2 * 2 * 2  # x = 17 and 40: q = 0 clamped


def test_a_plugin_on_flat_layout_names_depends_on_the_modules_they_became(tmp_path):
    """A plugin importing ``precision.implementations.common`` (the layout before the layers): its source
    closure, and so its results' digest, holds the module it became."""
    old = tmp_path / "old_plugin.py"
    old.write_text("from precision.implementations.common import store_output\nimport precision.steps\n")
    package = Path(task.__file__).resolve().parents[1]
    closure = task.module_closure(old)
    assert package / "operators" / "sigmoid_focal_loss_grad" / "implementations" / "common.py" in closure
    assert package / "recipes" / "steps.py" in closure
    assert package / "exact" / "formats.py" in closure  # and what those import


class TestSharedTerms:
    """A process pool receives each gamma's focal terms once, as a file, not one copy per task."""

    def test_one_file_per_gamma_and_format_and_the_same_results(self, tmp_path):
        study = parse_study(STUDY, "cached.toml")
        from precision.engine.cache import TermCache
        from precision.engine.executor import InlineExecutor
        from precision.engine.points import study_preds_by_term
        from precision.engine import sweep
        pbg = study_preds_by_term(study)
        terms, _, _ = sweep._compute_terms(study, pbg, TermCache(None), InlineExecutor())
        variants = sweep._variants_of(study)
        tasks = task.build_tasks(study, pbg, terms, variants, [], None)
        shared = task.share_terms(tasks, tmp_path)
        # 2 gammas x 2 formats: the fp16 list holds only fp16 values, so both formats share one table per gamma
        files = sorted(tmp_path.glob("terms-*.safetensors"))
        assert len(files) == 2
        assert {t.terms_file for t in shared} == {str(f) for f in files}
        assert all(t.pos is None and t.neg is None for t in shared)
        for inline, by_file in zip(tasks, shared):
            for a, b in zip(task.task_terms(inline), task.task_terms(by_file)):
                for field in ("hi", "lo", "exp", "rel"):
                    np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
            assert task.task_digest(inline) == task.task_digest(by_file)
            assert _piece_arrays(task.run_task(inline)) == _piece_arrays(task.run_task(by_file))

    def test_a_pool_run_equals_an_inline_run_and_leaves_no_term_files(self, tmp_path):
        _, inline = _run(tmp_path, "inline", use_cache=False)
        out = tmp_path / "pool"
        run_study(parse_study(STUDY, "cached.toml"), out, use_cache=False, workers=2)
        _same_tables(inline, out)
        assert not list(out.glob(".terms-*"))

    def test_a_missing_terms_file_is_one_clear_error(self, tmp_path):
        study = parse_study(STUDY, "cached.toml")
        t = task.Task("", study.operator, "ieee", study.profiles[0], (("alpha", 0.25), ("gamma", 2.0)), None, 1.0,
                      "none", 1, (0, 1),
                      ("naive",), (), "none", np.array([1.0]), None, None,
                      terms_file=str(tmp_path / "gone.safetensors"))
        with pytest.raises(task.PrecisionError, match="exact-value terms of a running study are missing"):
            task.task_terms(t)


def _piece_arrays(arrays: dict) -> dict:
    return {k: np.asarray(v).tobytes() for k, v in arrays.items() if k not in ("reused", "computed_pieces")}


def test_reducing_only_the_changed_groups_gives_the_tables_of_reducing_all(tmp_path, monkeypatch):
    """A variant's outputs that differ from outputs already scored in a few groups have only those groups
    reduced, the others' rows taken from those outputs, a machine's outputs equal to another machine's on the
    same points reuse their piece, and two outputs compared once are not compared again: the same tables, bit
    for bit, as reducing every group and comparing every pair of every task on its own (the compiled passes at
    every size; every variant, both machines and formats, bands of preds)."""
    from precision.engine import sweep
    from precision.analysis import groups, paired, scoring
    from precision.machine import npu
    for module in (scoring, groups, paired, npu, task):
        monkeypatch.setattr(module, "COMPILED_MIN_POINTS", 0)
    values = np.concatenate([-np.geomspace(40, 2.0 ** -10, 150), [0.0], np.geomspace(2.0 ** -10, 40, 150)])
    listed = ", ".join(f'"{float(v).hex()}"' for v in np.unique(values.astype(np.float16)))
    text = re.sub(r"^values = \[.*\]$", f"values = [{listed}]", STUDY, flags=re.M)
    text = re.sub(r"^variants = \[.*\]$", 'variants = ["all"]', text, flags=re.M)
    study = parse_study(text, str(tmp_path / "patch.toml"))
    patched = {"n": 0}
    original = task._patched_stats

    def counted(*args):
        patched["n"] += 1
        return original(*args)
    monkeypatch.setattr(task, "_patched_stats", counted)
    scored = {"n": 0}
    score = task.Scorer.score

    def scoring(self, *args):
        scored["n"] += 1
        return score(self, *args)
    monkeypatch.setattr(task.Scorer, "score", scoring)
    siblings, pair_piece = sweep.machine_siblings, task._pair_piece
    recalled = {"n": 0}

    def forgetting(tensor, with_scores, without_scores):  # (no pair piece recalled)
        tensor.paired.clear()
        return pair_piece(tensor, with_scores, without_scores)

    def recalling(tensor, with_scores, without_scores):
        recalled["n"] += (with_scores[0], without_scores[0]) in tensor.paired
        return pair_piece(tensor, with_scores, without_scores)
    outs, scorings = {}, {}
    for share, alone in ((0.0, True), (1.0, False)):
        monkeypatch.setattr(task, "PATCH_MAX_SHARE", share)
        # alone: each machine's task with points of its own (nothing shared between machines), every pair piece
        # computed afresh
        monkeypatch.setattr(sweep, "machine_siblings", (lambda work: [[i] for i in range(len(work))]) if alone
                            else siblings)
        monkeypatch.setattr(task, "_pair_piece", forgetting if alone else recalling)
        outs[share], scored["n"] = tmp_path / f"share{share}", 0
        run_study(study, outs[share], use_cache=False, workers=1)
        scorings[share] = scored["n"]
    assert patched["n"] > 20  # (share 1.0 patched that many outputs; share 0.0 none)
    assert recalled["n"] > 10  # (pair pieces of the same two outputs recalled)
    assert scorings[1.0] <= scorings[0.0] - 10  # (outputs of one machine equal to another's: not scored again)
    for name in ("summary.csv", "groups.csv", "comparisons.csv", "by_region.csv", "standards.csv",
                 "groups_raw.parquet", "points.parquet", "hist.npz"):
        assert (outs[0.0] / name).read_bytes() == (outs[1.0] / name).read_bytes(), name
