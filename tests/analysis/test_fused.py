"""The compiled one-pass group statistics equal numpy's definitions bit for bit."""

import numpy as np
import pytest

from precision.analysis.fused import COUNTS, reduce_error_groups
from precision.analysis.groups import GroupStats, Grouping
from precision.analysis.histograms import HIST_BINS, histogram_bins
from precision.analysis.scoring import CLASS_NAMES, SPECIAL_CLASSES, Scorer
from precision.exact.formats import get_format, round_to_format
from precision.io.frames import frame_to_arrays
from precision.machine.compiled import COMPILED_MIN_POINTS

@pytest.fixture(autouse=True)
def compiled_at_every_size(monkeypatch):
    """The compiled passes for arrays of any size (the library keeps small ones to the numpy definitions)."""
    from precision.analysis import groups, paired, scoring
    from precision.machine import npu
    for module in (scoring, groups, paired, npu):
        monkeypatch.setattr(module, "COMPILED_MIN_POINTS", 0)


# values that break careless reductions: signed zeros, NaN, both infinities, ties, subnormals, huge
_NASTY = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1.0, 1.0, 0.5, 2.0 ** -1074, 1e300, 3.0, 1024.0, 1025.0])


def _points(rng, n, fmt, nasty):
    """Random scores of n points with the rare values planted at a share ``nasty`` of them."""
    err = rng.exponential(2.0, n) * rng.choice([0.0, 1.0], n, p=[0.3, 0.7])
    plant = rng.random(n) < nasty
    err[plant] = rng.choice(_NASTY, n)[plant]
    err = np.abs(err)  # ulp errors are >= 0 or NaN
    bits = np.log2(1.0 + np.round(np.where(np.isnan(err), 16.0, np.minimum(err, 1e6))))
    classes = rng.choice(np.array(list(CLASS_NAMES), dtype=np.int8), n, p=[0.8, 0.05, 0.05, 0.05, 0.05])
    golden = rng.normal(0, 1e-3, n) * rng.choice([1.0, 1e-6, 1e3], n)
    computed = (golden * (1 + rng.normal(0, 1e-3, n))).astype(get_format(fmt).dtype).astype(np.float64)
    plant = rng.random(n) < nasty
    computed[plant] = rng.choice(_NASTY * rng.choice([1, -1], _NASTY.size), n)[plant]
    plant = rng.random(n) < nasty / 4
    golden[plant] = rng.choice(np.array([np.inf, -np.inf, 0.0, np.nan]), n)[plant]
    plant = rng.random(n) < 0.05
    computed[plant] = golden[plant]  # exact hits, and inf == inf
    return err, bits, classes, computed, golden


def _same(a: dict, b: dict):
    """Arrays equal bit for bit (NaN payloads included), names and order too."""
    assert list(a) == list(b)
    for name in a:
        x, y = np.asarray(a[name]), np.asarray(b[name])
        assert x.dtype == y.dtype and x.shape == y.shape, name
        if x.dtype.kind in "fc":
            assert x.tobytes() == y.tobytes(), name
        else:
            assert x.tolist() == y.tolist(), name


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("fmt", ["fp16", "fp32"])
def test_reduce_equals_the_numpy_definition(seed, fmt):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    nasty = (0.0, 0.01, 0.3)[seed % 3]
    err, bits, classes, computed, golden = _points(rng, n, fmt, nasty)
    n_groups = int(rng.integers(1, 12))
    grouping = Grouping(rng.integers(0, n_groups, n) * (seed % 4 != 0), n_groups + 2)  # empty groups too
    decisions = {f"fired_g{k}": rng.random(n) < p for k, p in enumerate((0.0, 0.5, 0.001)[: seed % 4])}
    witness = {"pred": rng.normal(size=n), "computed": computed, "exact": golden}
    acceptance = (computed, golden, fmt) if seed % 2 == 0 else None
    if seed % 4 == 0:  # with msprobe's bench: near the golden, huge, tiny, zero and special
        bench = golden * (1 + rng.normal(0, 1e-5, n))
        plant = rng.random(n) < max(nasty, 0.05)
        bench[plant] = rng.choice(np.array([1e301, -1e301, 0.0, 2.0 ** -20, 2.0 ** -140, np.inf, np.nan]), n)[plant]
        with np.errstate(over="ignore"):
            acceptance = (computed, golden, fmt, bench, bench.astype(get_format(fmt).dtype).astype(np.float64))
    got = GroupStats._reduce_columns(grouping, err, bits, classes, witness, decisions, acceptance)
    want = GroupStats._reduce_columns_reference(grouping, err, bits, classes, witness, decisions, acceptance)
    _same(got[0], want[0])
    for x, y in zip(got[1], want[1]):
        assert np.array_equal(x, y)
    # as a task stores them
    _same(frame_to_arrays(got[0], "s"), frame_to_arrays(want[0], "s"))


def test_sums_add_in_element_order():
    # 1 then sixteen 2**-53: in element order (np.bincount's) each tiny term is lost; numpy's pairwise sum keeps them
    err = np.array([1.0] + [2.0 ** -53] * 16)
    group = np.zeros(err.size, dtype=np.int64)
    g = Grouping(group, 1)
    counts, sums, top, at, hist = reduce_error_groups(g.perm, g.starts, g.counts, err, err, np.zeros(err.size, np.int8),
                                                      np.log2(err))
    assert sums[0, 0] == sums[0, 1] == np.bincount(group, err)[0] == 1.0
    assert np.sum(err) != 1.0


def test_first_point_attaining_each_maximum():
    err = np.array([np.nan, 5.0, 5.0, np.inf, 7.0, -0.0, 0.0])
    group = np.array([0, 0, 0, 0, 1, 2, 2])
    bins = histogram_bins(err)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = Grouping(group, 4)  # group 3 has no point: no row
        counts, sums, top, at, hist = reduce_error_groups(g.perm, g.starts, g.counts, err, np.zeros(7),
                                                          np.zeros(7, np.int8), np.log2(err))
    # max_ulp takes NaN as inf: its first point is the NaN; the finite maximum's is the first 5.0
    assert top[:, 0].tolist() == [np.inf, 7.0, 0.0] and at[:, 0].tolist() == [0, 4, 5]
    assert top[:, 1].tolist() == [5.0, 7.0, 0.0] and at[:, 1].tolist() == [1, 4, 5]
    assert counts[:, COUNTS.index("n_finite")].tolist() == [2, 1, 2]
    assert counts[:, COUNTS.index("over_1ulp")].tolist() == [4, 1, 0]
    # the sparse histogram: (group, bin, count) of every nonzero cell, sorted
    inf_bin, zero_bin = HIST_BINS - 1, 0
    assert [tuple(map(int, cell)) for cell in zip(*hist)] == sorted(
        [(0, inf_bin, 2), (0, int(bins[1]), 2), (1, int(bins[4]), 1), (2, zero_bin, 2)])


def test_no_points():
    empty = np.zeros(0)
    g = Grouping(np.zeros(0, np.int64), 2)
    counts, sums, top, at, hist = reduce_error_groups(g.perm, g.starts, g.counts, empty, empty, np.zeros(0, np.int8),
                                                      empty)
    assert counts.shape == (0, 7) and at.shape == (0, 2)
    assert [h.size for h in hist] == [0, 0, 0]


def test_counts_follow_the_class_codes():
    from precision.analysis.acceptance import ACCEPTANCE_MAXIMA
    from precision.analysis.fused import MAXIMA
    assert COUNTS[3:] == SPECIAL_CLASSES and MAXIMA[2:] == tuple(ACCEPTANCE_MAXIMA)
    assert [CLASS_NAMES[c] for c in range(1, 5)] == list(SPECIAL_CLASSES)


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp32"])
@pytest.mark.parametrize("seed", range(4))
def test_scores_equal_the_numpy_definitions(fmt, seed):
    """Scorer.score (one compiled pass and numpy's log2) against ulp_error, bits_error and classify."""
    f = get_format(fmt)
    rng = np.random.default_rng(seed)
    n = 5000
    hi = rng.normal(0, 1, n) * np.exp2(rng.integers(-30, 20, n).astype(np.float64))
    plant = rng.random(n) < 0.05
    hi[plant] = rng.choice(np.array([0.0, -0.0, 1e300, -1e300, 2.0 ** -1074, 65520.0, -65520.0]), n)[plant]
    lo = hi * 2.0 ** -60 * rng.normal(size=n)
    lo[~np.isfinite(lo)] = 0.0
    rounded = round_to_format(hi, f)
    # outputs: the rounded value, a few ulps off, garbage, specials
    computed = rounded.astype(np.float64) * (1 + rng.normal(0, 2.0 ** -f.prec * 4, n))
    plant = rng.random(n) < 0.1
    computed[plant] = rng.choice(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0]), n)[plant]
    computed = computed.astype(f.dtype).reshape(50, 100)
    scorer = Scorer((hi.reshape(50, 100), lo.reshape(50, 100)), rounded.reshape(50, 100), f)
    for got, want in zip(scorer.score(computed), scorer.score_reference(computed)):
        assert got.shape == want.shape == (50, 100) and got.dtype == want.dtype
        assert got.tobytes() == want.tobytes()
    classes = scorer.score(computed)[2]
    assert len(np.unique(classes)) >= 4  # every kind of point was met (ok, nan, inf, wrong sign at least)


def test_bad_groups_or_classes_are_refused():
    g = Grouping(np.zeros(3, np.int64), 1)
    err = np.zeros(3)
    with pytest.raises(ValueError, match="class code"):
        reduce_error_groups(g.perm, g.starts, g.counts, err, err, np.array([0, 5, 0], np.int8), err)
    with pytest.raises(ValueError, match="do not index"):
        reduce_error_groups(np.array([0, 1, 3]), g.starts, g.counts, err, err, np.zeros(3, np.int8), err)


@pytest.mark.parametrize("seed", range(10))
def test_top_k_equals_the_partition_per_group(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 400))
    # few distinct values: many ties, which keep the first points
    values = rng.choice(np.array([0.0, 1.0, 2.0, 3.0, np.nan, np.inf, 0.5]), n) if seed % 2 else rng.normal(size=n)
    grouping = Grouping(rng.integers(0, 5, n), 7)
    for k in (1, 3, 8, 50):
        got = grouping.top_k(values, k)
        assert got.dtype == np.int64
        assert got.tolist() == grouping.top_k_reference(values, k).tolist()


def test_top_k_keeps_the_first_of_ties():
    grouping = Grouping(np.array([0, 0, 0, 0, 1, 1]), 2)
    assert grouping.top_k(np.array([1.0, 2.0, 2.0, 2.0, np.nan, 5.0]), 2).tolist() == [1, 2, 4, 5]


@pytest.mark.parametrize("seed", range(12))
def test_paired_comparison_equals_the_numpy_definition(seed):
    """PairedStats' compiled pass against compare_points and the reduction of the changed points."""
    from precision.analysis.fused import PAIR_COUNTS
    from precision.analysis.paired import CHANGED_QUALITIES, PAIR_SUMS, PairedStats
    assert PAIR_COUNTS == PAIR_SUMS[1:] + CHANGED_QUALITIES
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    values = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 3.0, 1024.0, 2000.0, 2.0 ** 20, 2.0 ** 21, np.inf, np.nan])
    err_w, err_o = (rng.choice(values, n) * rng.choice([1.0, 1.5], n) for _ in range(2))
    cls_w, cls_o = (np.where(np.isfinite(e), 0, rng.choice(np.arange(1, 5, dtype=np.int8), n)).astype(np.int8)
                    for e in (err_w, err_o))
    cls_w[rng.random(n) < 0.05] = 3  # wrong sign with a finite error
    changed = rng.random(n) < (0.0, 0.02, 0.6)[seed % 3]
    grouping = Grouping(rng.integers(0, 6, n) * (seed % 4 != 0), 8)
    witness = {"pred": rng.normal(size=n), "name": np.array([f"p{i}" for i in range(n)], dtype=object)}
    got = PairedStats._compare_columns(grouping, err_w, cls_w, err_o, cls_o, changed, witness)
    want = PairedStats._compare_columns_reference(grouping, err_w, cls_w, err_o, cls_o, changed, witness)
    assert list(got[0]) == list(want[0])
    for name in got[0]:
        x, y = np.asarray(got[0][name]), np.asarray(want[0][name])
        assert x.dtype == y.dtype, name
        if x.dtype.kind == "f":
            assert x.tobytes() == y.tobytes(), name
        else:
            assert x.tolist() == y.tolist(), name
    for x, y in zip(got[1], want[1]):
        assert np.asarray(x).tolist() == np.asarray(y).tolist()


def test_a_zero_ulp_divides_as_numpy_does():
    # an ulp of 0 (no format has one, but the definitions allow it): inf or NaN, never an exception
    hi = np.array([1.0, 0.0, 2.0])
    scorer = Scorer((hi, np.zeros(3)), hi.astype(np.float16), "fp16")
    scorer.ulp = np.zeros(3)
    computed = np.float16([1.5, 0.0, 2.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        for got, want in zip(scorer.score(computed), scorer.score_reference(computed)):
            assert got.tobytes() == want.tobytes()


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("dense_cells", [1 << 24, 0])
def test_histogram_merge_equals_the_numpy_definition(seed, dense_cells, monkeypatch):
    """Mergeable's histogram merge (rows re-keyed, counts summed per key and bin) against numpy's two ways."""
    from precision.analysis import groups
    rng = np.random.default_rng(seed)
    n_rows, n_bins = int(rng.integers(1, 50)), (18244, 7)[seed % 2]
    rows, bins = [], []
    for r in rng.permutation(n_rows)[: int(rng.integers(0, n_rows + 1))]:  # each row one run, rows in any order
        b = np.sort(rng.choice(n_bins, int(rng.integers(1, min(n_bins, 30) + 1)), replace=False))
        rows += [r] * b.size
        bins += b.tolist()
    rows, bins = np.array(rows, dtype=np.int32), np.array(bins, dtype=np.int32)
    counts = rng.integers(1, 2 ** 20, rows.size).astype(np.int32 if seed % 3 else np.int64)
    key = rng.integers(0, max(1, n_rows // 3), n_rows)
    monkeypatch.setattr(groups, "_DENSE_CELLS", dense_cells)  # numpy's dense count, or its sort
    got = groups._merge_sparse(key, rows, bins, counts, n_bins)
    want = groups._merge_sparse_reference(key, rows, bins, counts, n_bins)
    assert got.dtype == want.dtype == np.int64 and got.tolist() == want.tolist()


@pytest.mark.parametrize("seed", range(8))
def test_histogram_quantiles_equal_the_numpy_definition(seed):
    """The compiled quantile pass against numpy's running sum: keys' blocks in any order, a key met in two
    blocks, zero counts, keys without entries, a block's total far from the rank; int32 and int64 counts."""
    from precision.analysis.groups import histogram_quantiles
    from precision.analysis.histograms import histogram_quantiles as histogram_quantiles_reference
    rng = np.random.default_rng(seed)
    blocks = []
    for k in rng.permutation(int(rng.integers(1, 40)))[: int(rng.integers(1, 30))]:
        blocks.append((k, np.sort(rng.choice(HIST_BINS, int(rng.integers(1, 60)), replace=False))))
    if seed % 2:
        blocks.append(blocks[0])  # (a key met again: its last block counts, as numpy's assignment keeps)
    keys = np.concatenate([np.full(b.size, k) for k, b in blocks])
    bins = np.concatenate([b for _, b in blocks]).astype(np.int32)
    counts = rng.integers(0, 3, keys.size) * rng.integers(1, 2 ** (10 + 2 * seed), keys.size)  # (< 2**26 each)
    counts = counts.astype(np.int32 if seed % 3 else np.int64)
    qs = (0.0, 0.5, 0.99, 0.999, 1.0)
    got, want = histogram_quantiles(keys, bins, counts, qs), histogram_quantiles_reference(keys, bins, counts, qs)
    assert got.shape == want.shape and got.tobytes() == want.tobytes()
    assert np.isnan(want).any() == any(counts[keys == k].sum() == 0 for k in range(want.shape[0]))


def test_a_row_in_two_runs_is_merged_by_numpy():
    from precision.analysis import groups
    from precision.analysis.fused import merge_histogram
    rows, bins, counts = np.array([0, 1, 0]), np.array([2, 2, 3]), np.array([1, 1, 1])
    assert merge_histogram(np.array([0, 0]), rows, bins, counts, 5) is None
    assert groups._merge_sparse(np.array([0, 0]), rows, bins, counts, 5).tolist() == [[0, 0], [2, 3], [2, 1]]



def test_a_run_uses_only_the_forms_load_compiles(tmp_path):
    """Every compiled pass a run calls takes arguments of a type `load` compiles and caches (a new type would
    compile in each worker, seconds each, on a fresh machine); a run with a weight, a mean reduction and both
    formats."""
    from precision.analysis import fused
    from precision.engine.study import parse_study
    from precision.engine.sweep import run_study
    from precision.machine import arith_fused, ieee_fused, npu_fused
    fused.load()
    for module in (npu_fused, ieee_fused, arith_fused):
        module.load()
    kernels = [getattr(module, name) for module in (fused, npu_fused, ieee_fused, arith_fused) for name in dir(module)
               if name.startswith("_") and hasattr(getattr(module, name), "signatures")]
    loaded = {k.py_func.__name__: len(k.signatures) for k in kernels}
    assert {"_score", "_reduce", "_top_k", "_compare", "_merge_runs", "_terms", "_finish", "_special_cases"} <= \
        set(loaded)
    study = parse_study("""
name = "forms"
[pred]
kind = "list"
format = "fp16"
values = ["-0x1.8p+3", "0.0", "0x1.4p+0", "0x1.1p+4"]
[points]
target = [0, 1]
alpha = [0.25]
gamma = [-1.0, 2.0]
weight = [0.5]
reduction = "mean"
profiles = ["fp16", "fp32"]
[run]
variants = ["naive", "naive+G2", "kernel", "kernel-G8", "golden"]
machines = ["ieee", "npu"]
per_point = "worst"
""", str(tmp_path / "forms.toml"))
    run_study(study, tmp_path / "out", cache_dir=tmp_path / "cache", workers=1)
    assert {k.py_func.__name__: len(k.signatures) for k in kernels} == loaded


def _two_variant_study(name: str, values: str, profile: str, machine: str) -> str:
    """A study of naive and kernel on listed fp16 preds (``values``: the TOML list's items), one selector pair,
    one alpha and gamma, one profile and machine."""
    return f"""
name = "{name}"
[pred]
kind = "list"
format = "fp16"
values = [{values}]
[points]
target = [0, 1]
alpha = [0.25]
gamma = [2.0]
profiles = ["{profile}"]
[run]
variants = ["naive", "kernel"]
machines = ["{machine}"]
"""


def test_a_run_loads_no_compiled_pass_before_its_workers_fork(tmp_path):
    """The workers load the compiled passes themselves: the run's process has loaded none when it hands out
    the first work (a worker that inherits a loaded pass can run it ten times slower, benchmarks/fork.py), and
    the run's tasks, of COMPILED_MIN_POINTS points, do run them (in the workers), which loaded them behind the
    oracle's last chunk, before their first task (:meth:`LocalExecutor.warm`).  Its own load, in a thread,
    is over before it forks the process that writes the comparisons (a fork while another thread imports
    leaves that import's lock held in the child for ever: the child hangs)."""
    import subprocess
    import sys
    script = f"""
import numpy as np
from precision.analysis import fused
from precision.machine import npu_fused
from precision.engine import executor, sweep
from precision.engine.study import parse_study
kernels = [getattr(m, n) for m in (fused, npu_fused) for n in dir(m) if hasattr(getattr(m, n), "signatures")]
handed = []
original = executor.LocalExecutor.map_unordered
def map_unordered(self, function, tasks):
    handed.append(sum(len(k.signatures) for k in kernels))
    return original(self, function, tasks)
executor.LocalExecutor.map_unordered = map_unordered
import threading, time
loading_at_fork = []
fork_aside, load_compiled = sweep.fork_aside, sweep._load_compiled
def aside(*args):
    loading_at_fork.append(any(t.name == "load compiled passes" for t in threading.enumerate()))
    return fork_aside(*args)
def slow_load(*args):
    time.sleep(2.0)
    load_compiled(*args)
sweep.fork_aside, sweep._load_compiled = aside, slow_load
import os
run_tasks = sweep.run_tasks
def recording_run_tasks(tasks):  # (in a worker: the passes it holds when a task begins)
    with open({str(tmp_path)!r} + f"/began-{{os.getpid()}}-{{time.monotonic_ns()}}", "w") as f:
        f.write(str(sum(len(k.signatures) for k in kernels)))
    return run_tasks(tasks)
sweep.run_tasks = recording_run_tasks
magnitudes = np.arange(0x2000, 0x4400, dtype=np.uint16).view(np.float16).astype(float)  # 2**-7 .. 4
values = ", ".join('"' + float(v).hex() + '"' for v in np.concatenate([-magnitudes[::-1], magnitudes]))
study = parse_study(open({str(tmp_path / "big.toml")!r}).read().replace("VALUES", values), "big.toml")
result = sweep.run_study(study, {str(tmp_path / "out")!r}, cache_dir={str(tmp_path / "cache")!r}, workers=2)
print(loading_at_fork)
print(handed, result.points)
"""
    (tmp_path / "big.toml").write_text(_two_variant_study("big", "VALUES", "fp32", "npu"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-2] == "[False]"  # (forked once, the load over)
    handed, points = done.stdout.strip().splitlines()[-1].rsplit(" ", 1)
    assert int(points) >= COMPILED_MIN_POINTS  # (the tasks take the compiled passes)
    assert handed.strip("[]").split(", ") and all(int(n) == 0 for n in handed.strip("[]").split(", ")), handed
    began = sorted(tmp_path.glob("began-*"))
    assert len(began) == 1 and int(began[0].read_text()) > 0  # (its one task, in a worker that had loaded them)


def test_a_small_run_keeps_to_numpy(tmp_path):
    """A run whose tasks hold fewer than COMPILED_MIN_POINTS points never loads the compiled scoring passes (their
    load would cost more than they save); the same study's tables are the same either way (the other tests).
    Numba itself is loaded by the oracle, whose certified path is compiled at every size (a term's bits must not
    depend on the size of the batch it was computed in)."""
    import subprocess
    import sys
    script = f"""
import sys
from precision.engine.study import parse_study
from precision.engine.sweep import run_study
study = parse_study(open({str(tmp_path / "small.toml")!r}).read(), "small.toml")
run_study(study, {str(tmp_path / "out")!r}, cache_dir={str(tmp_path / "cache")!r}, workers=1)
print(any(m in sys.modules for m in ("precision.analysis.fused", "precision.machine.npu_fused",
                                     "precision.machine.ieee_fused", "precision.machine.arith_fused")))
"""
    (tmp_path / "small.toml").write_text(_two_variant_study("small", '"-1.0", "0.0", "0x1.4p+0"', "fp16", "ieee"))
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "False"
