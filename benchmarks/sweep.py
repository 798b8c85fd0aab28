"""The sweep pipeline against the naive scorer a user would write.

A slice of ``studies/fp16_exhaustive.toml`` (its first 2,000 pred values, with
all its alphas, gammas, selectors, variants, machines and formats) is scored two
ways in this one process:

1. the pipeline (``precision.engine.sweep.run_study``, cold oracle cache, one worker):
   focal terms once per (x, gamma), derived certified roundings;
2. the naive scorer: mpmath at 200 bits once per distinct
   (pred, target, alpha, gamma), the float64 of that value taken as exact,
   every variant scored against it.

Both evaluate the same variants on the same tensors; the script prints the
oracle time of each (the pipeline's: focal terms from a cold cache plus every
certified derivation, one process; the naive one: its mpmath evaluations), the
end-to-end time of each, and both ratios.  Targets: the oracle stage >= 10x faster,
end to end (every variant, machine and format evaluated, scored and aggregated, cold caches, one worker)
>= 4x faster.  Both sides evaluate the same variants, so the end-to-end ratio is bounded by
(naive oracle + naive evaluation) / (pipeline oracle + shared evaluation); the script prints that bound.

It also prints the **overhead ratio** of the pipeline: end to end divided by
(oracle + shared evaluation of the variants), all on one worker; target <= 1.5.

``--full`` times the whole ``fp16_exhaustive`` study (or ``--study FILE``) instead (default workers),
``--repeat N`` times each, judging the median: cold (empty caches),
warm into a new folder, and after a comment appended to
``operators/sigmoid_focal_loss_grad/implementations/candidate.py`` (seen by the source digests only; the file is not
touched), checks the three runs' tables are byte-identical, and prints PASS/FAIL against cold <= 40 s,
warm <= 6 s, edited <= 10 s, and the overhead ratio of the cold run: its oracle (focal terms timed on the run's
workers, certified derivations as on the slice, split over them) and its shared evaluation timed on the run's
workers at once, each evaluating its share of the tasks, as a run's workers do (two evaluations at once on
this machine's two cores can each run slower than one alone, by 0-6 % on 2026-12-05: a cost of the machines,
not of the pipeline); the ratio against the evaluation on one core, split ideally over the workers, is printed
beside it.

Run: ``python benchmarks/sweep.py [--preds N] [--full [--study FILE] [--repeat N]]``.
"""

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import mpmath
import numpy as np

from precision.engine.cache import TermCache
from precision.engine.executor import InlineExecutor, make_executor
from precision.operators.sigmoid_focal_loss_grad.guards import evaluate, evaluate_variants
from precision.engine.task import _Tensor, build_tasks
from precision.operators.sigmoid_focal_loss_grad import FIRED_STEPS
from precision.operators.sigmoid_focal_loss_grad.terms import derive_gradient
from precision.engine.study import load_study
from precision.engine.points import pred_values
from precision.engine import sweep

STUDY = Path(__file__).resolve().parents[1] / "studies" / "fp16_exhaustive.toml"
OVERHEAD_TARGET = 1.5


def naive_exact(x, t, alpha, gamma):
    """The exact gradient as a careful user would write it: 200-bit mpmath, textbook formula."""
    with mpmath.workprec(200):
        X, a, g = mpmath.mpf(x), mpmath.mpf(alpha), mpmath.mpf(gamma)
        p = 1 / (1 + mpmath.exp(-X))
        q = 1 / (1 + mpmath.exp(X))
        A = g * p * q**g * mpmath.log(p) - q ** (g + 1)
        B = p ** (g + 1) - g * p**g * q * mpmath.log(q)
        return float(a * (1 - t) * A + (1 - a) * t * B)


def naive_scorer(study, preds, variants):
    """(oracle seconds, variant seconds) of the naive way."""
    t0 = time.perf_counter()
    exact = {}
    for g in study.values("gamma"):
        for a in study.values("alpha"):
            for t in study.targets:
                exact[(g, a, t)] = np.array([naive_exact(x, t, a, g) for x in preds.tolist()])
    oracle_seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    T = len(study.targets)
    for machine in study.machines:
        for prof in study.profiles:
            dtype = np.float16 if prof.pred == "fp16" else np.float32
            pred2d = np.repeat(preds.astype(dtype)[:, None], T, axis=1)
            tgt = np.broadcast_to(np.int32(study.targets), pred2d.shape).copy()
            for g in study.values("gamma"):
                for a in study.values("alpha"):
                    ex = np.stack([exact[(g, a, t)] for t in study.targets], axis=1)
                    with np.errstate(all="ignore"):
                        spacing = np.abs(np.spacing(ex.astype(dtype))).astype(np.float64)
                    for v in variants:
                        try:
                            c = evaluate(v, pred2d, tgt, np.ones_like(pred2d), None, alpha=a, gamma=g,
                                         reduction="none", machine=machine)
                        except Exception:
                            continue
                        with np.errstate(all="ignore"):
                            _ = np.abs(c.astype(np.float64) - ex) / spacing
    return oracle_seconds, time.perf_counter() - t0


def _derivation_seconds(study, preds, terms) -> float:
    """Seconds of the oracle's certified derivations (every point's gradient rounded into each format, from
    the focal terms), one process: the oracle's share of the tasks."""
    t0 = time.perf_counter()
    n = np.ones(preds.size)
    for g in study.values("gamma"):
        pos, neg = terms[g]
        for a in study.values("alpha"):
            for t in study.targets:
                for prof in study.profiles:
                    derive_gradient(preds, (t * n).astype(np.int64), a * n, g * n, n, n,
                                    n.astype(np.int64), prof.pred, pos, neg)
    return time.perf_counter() - t0


def _shared_evaluation_seconds(study, preds, terms, variants) -> float:
    """Seconds of the pipeline's variant evaluation alone (every task's variants together, no scoring)."""
    return _evaluation_seconds(build_tasks(study, {g: preds for g in study.values("gamma")}, terms, variants,
                                                  [], None))


def _evaluation_seconds(tasks) -> float:
    """Seconds of ``evaluate_variants`` over ``tasks``, as ``run_task`` calls it (their operands built untimed)."""
    seconds = 0.0
    for task in tasks:
        tensor = _Tensor(task)
        t0 = time.perf_counter()
        evaluate_variants(list(task.variants), tensor.pred2d, tensor.target2d, tensor.dout2d, tensor.weight2d,
                          **task.attribute_values, reduction=task.reduction, machine=task.machine,
                          keep_steps=FIRED_STEPS)  # as run_task keeps them
        seconds += time.perf_counter() - t0
    return seconds


#: The tasks whose evaluation the workers time (:func:`_evaluation_share`; theirs by the fork).
_SHARED_TASKS: list = []


def _evaluation_share(indices) -> float:
    """:func:`_evaluation_seconds` of these of :data:`_SHARED_TASKS`, in a worker, its compiled passes loaded
    first (once per process, as a run's worker loads them: not the machines' cost)."""
    sweep._load_compiled(("ieee", "npu"))
    return _evaluation_seconds([_SHARED_TASKS[i] for i in indices])


def _evaluation_on_workers(tasks, workers: int) -> float:
    """Seconds of the variants' evaluation over ``tasks`` when ``workers`` processes share it at once, as a run's
    workers do (each its share of the tasks, all concurrently): the sum of their evaluation times divided by
    ``workers``.  Two concurrent evaluations on this machine's two cores can each take longer than one alone
    (they share caches and memory bandwidth): what the machines cost in a run."""
    _SHARED_TASKS[:] = tasks
    executor = make_executor(None, workers)  # (forked now: each worker holds the tasks)
    try:
        shares = [list(range(w, len(tasks), workers)) for w in range(workers)]
        return sum(seconds for _, seconds in executor.map_unordered(_evaluation_share, shares)) / workers
    finally:
        executor.close()
        _SHARED_TASKS.clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preds", type=int, default=2000)
    parser.add_argument("--full", action="store_true", help="time the whole fp16_exhaustive study instead")
    parser.add_argument("--study", type=Path, default=STUDY, help="with --full: the study to time")
    parser.add_argument("--repeat", type=int, default=1,
                        help="with --full: runs of each (cold, warm, edited), each from an empty cache; the median "
                             "is judged")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat={args.repeat}; expected a positive integer")
    if args.full:
        full_study_figures(args.study, args.repeat)
        return
    full = load_study(STUDY)
    preds = pred_values(full.pred, full.seed)[: args.preds]
    values = ", ".join(f'"{float(v).hex()}"' for v in preds)
    text = full.source.replace('kind = "exhaustive"', f"kind = \"list\"\nvalues = [{values}]")
    from precision.engine.study import parse_study
    study = parse_study(text, "slice")
    variants = sweep._variants_of(study)
    points = preds.size * len(study.targets) * len(study.values("alpha")) * len(study.values("gamma"))
    print(f"slice: {preds.size} preds x {len(study.targets)} selectors x {len(study.values('alpha'))} alphas x "
          f"{len(study.values('gamma'))} gammas = {points:,} distinct points; {len(variants)} variants x "
          f"{len(study.machines)} machines x {len(study.profiles)} formats")

    with tempfile.TemporaryDirectory() as tmp:
        # the pipeline's oracle stage alone: focal terms (cold cache) and every derived rounding
        t0 = time.perf_counter()
        terms, _, _ = sweep._compute_terms(study, {g: preds for g in study.values("gamma")}, TermCache(Path(tmp) / "c0"),
                                           InlineExecutor())
        pipe_oracle = time.perf_counter() - t0 + _derivation_seconds(study, preds, terms)
        shared_eval = _shared_evaluation_seconds(study, preds, terms, variants)
        t0 = time.perf_counter()
        sweep.run_study(dataclasses.replace(study, per_point="none"), Path(tmp) / "full",
                        cache_dir=Path(tmp) / "c1", workers=1)
        pipe_total = time.perf_counter() - t0
    naive_oracle, naive_variants = naive_scorer(study, preds, variants)
    naive_total = naive_oracle + naive_variants
    print(f"pipeline  oracle (terms + certified derivations):  {pipe_oracle:8.2f} s")
    print(f"naive     oracle (200-bit mpmath per point):       {naive_oracle:8.2f} s")
    print(f"pipeline  end to end (every variant, machine, format): {pipe_total:6.2f} s")
    print(f"pipeline  shared evaluation of the variants alone:  {shared_eval:8.2f} s")
    print(f"naive     end to end:                               {naive_total:7.2f} s "
          f"(variants and scoring {naive_variants:.2f} s)")
    r_oracle, r_total = naive_oracle / pipe_oracle, naive_total / pipe_total
    print(f"{'PASS' if r_oracle >= 10 else 'FAIL'} oracle ratio {r_oracle:.1f}x target 10x")
    print(f"{'PASS' if r_total >= 4 else 'FAIL'} end-to-end ratio {r_total:.1f}x target 4x "
          f"(bound with free scoring and aggregation: {naive_total / (pipe_oracle + shared_eval):.1f}x)")
    _print_overhead("slice", pipe_total, pipe_oracle, shared_eval)


def _print_overhead(what: str, total: float, oracle_seconds: float, shared: float, workers: int = 1) -> None:
    ratio = total / (oracle_seconds + shared)
    on = f" on {workers} workers" if workers > 1 else ""
    print(f"{'PASS' if ratio <= OVERHEAD_TARGET else 'FAIL'} overhead ratio ({what}) {ratio:.2f} target "
          f"<= {OVERHEAD_TARGET} (end to end {total:.2f} s / (oracle {oracle_seconds:.2f} s + shared evaluation"
          f"{on} {shared:.2f} s))")


def _tables(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(folder.glob("*.csv"))}


def full_study_figures(path: Path = STUDY, repeat: int = 1) -> None:
    """A whole study (default fp16_exhaustive): cold, warm into a new folder, one variant edited, each
    ``repeat`` times from an empty cache; the median of each against its target, and the overhead ratio."""
    from precision.engine import task
    study = load_study(path)
    preds = pred_values(study.pred, study.seed)
    preds_by_gamma = {g: preds for g in study.values("gamma")}
    variants = sweep._variants_of(study)
    seconds = {"cold": [], "warm": [], "edited": []}
    same = True
    original = task._source_bytes
    package = Path(task.__file__).resolve().parents[1]
    target = package / "operators" / "sigmoid_focal_loss_grad" / "implementations" / "candidate.py"
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            cache = Path(tmp) / "cache"
            try:
                for name in seconds:
                    if name == "edited":
                        task._source_bytes = lambda p: original(p) + (
                            b"\n# edited\n" if Path(p).resolve() == target else b"")
                        task.clear_digests()
                    t0 = time.perf_counter()
                    sweep.run_study(study, Path(tmp) / name, cache_dir=cache)
                    seconds[name].append(time.perf_counter() - t0)
            finally:
                task._source_bytes = original
                task.clear_digests()
            same &= _tables(Path(tmp) / "cold") == _tables(Path(tmp) / "warm") == _tables(Path(tmp) / "edited")
    with tempfile.TemporaryDirectory() as tmp:
        executor = make_executor(None, None)
        workers = executor.workers
        try:
            t0 = time.perf_counter()
            terms, _, _ = sweep._compute_terms(study, preds_by_gamma, TermCache(Path(tmp) / "c0"), executor)
            oracle_seconds = time.perf_counter() - t0
        finally:
            executor.close()
    # the shared evaluation on the run's workers, concurrently, as the run evaluates (the oracle's focal terms
    # are timed on them too); its certified derivations run in the tasks, so split over the workers, as on the
    # slice.  For reference: the evaluation on one core, split ideally over the workers.
    tasks = build_tasks(study, preds_by_gamma, terms, variants, [], None)
    shared = _evaluation_on_workers(tasks, workers)
    one_core = _evaluation_seconds(tasks)
    oracle_seconds += _derivation_seconds(study, preds, terms) / workers
    median = {name: float(np.median(values)) for name, values in seconds.items()}
    for name, goal in (("cold", 40.0), ("warm", 6.0), ("edited", 10.0)):
        spread = (f" (median of {repeat}: {min(seconds[name]):.1f} .. {max(seconds[name]):.1f} s)"
                  if repeat > 1 else "")
        whose = "" if study.name == "fp16_exhaustive" else " (fp16_exhaustive's)"
        print(f"{'PASS' if median[name] <= goal else 'FAIL'} {study.name} {name} {median[name]:.1f} s{spread} "
              f"target <= {goal:.0f} s{whose}")
    print(f"{'PASS' if same else 'FAIL'} tables byte-identical across cold, warm and edited")
    _print_overhead(f"{study.name}, cold", median["cold"], oracle_seconds, shared, workers)
    print(f"     the shared evaluation on one core: {one_core:.2f} s, split ideally over {workers} workers "
          f"{one_core / workers:.2f} s (the ratio against it: "
          f"{median['cold'] / (oracle_seconds + one_core / workers):.2f})")


if __name__ == "__main__":
    main()
