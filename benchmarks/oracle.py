"""The certified oracle: the fast path's throughput beside the mpmath path's, and their bits compared.

Throughput (the default).  One process, one core.  For each fp32 study of ``studies/`` (its fp32 profile's
points: every pred x selector x alpha x gamma x weight x dout), the oracle's work as a sweep asks for it:
the focal terms once per distinct (x, gamma) (:func:`precision.operators.sigmoid_focal_loss_grad.terms.focal_term_tables`,
the compiled double-double path, mpmath for the rows it leaves above TERM_REL), then every point's
certified rounding to fp32 (:func:`~precision.operators.sigmoid_focal_loss_grad.terms.derive_gradient`); the sweep's
gathering of each point's terms between the two is not timed (``benchmarks/sweep.py`` times the stage).  Then
real-valued attributes: fp32 preds with alpha uniform in [0, 1] and gamma uniform in [-3, 6] (float32
values), every point its own term (:func:`precision.operators.sigmoid_focal_loss_grad.terms.gradient`).  Each line
prints certified points per second, the mpmath path's rate on a sample of the same points
(:func:`precision.operators.sigmoid_focal_loss_grad.oracle.gradient`), and the share of terms and points deferred to
mpmath.  Each row is timed ``--repeat`` times (default 3) and the fastest kept, as timeit does.  Target
(issue 44): at least 5,000,000 certified points per second per core.

Identity (``--identity N``).  N points of six classes (the fp32 studies' points; roots of A and their
neighbourhoods; outputs near rounding midpoints; subnormal and overflowing outputs; every special input
class; real-valued alpha and gamma), each rounded to fp32 by both paths (fp16 and bf16 on a tenth of them),
the mpmath path on every core: the counts of differing bits must be 0.

Run: ``python benchmarks/oracle.py [--points N] [--seed S]`` or ``python benchmarks/oracle.py --identity
1000000 [--workers W]``.
"""

from __future__ import annotations

import argparse
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from precision.engine.points import study_preds_by_term
from precision.engine.study import load_study
from precision.exact.formats import get_format
from precision.operators.sigmoid_focal_loss_grad import bracket, oracle, terms
from precision.operators.sigmoid_focal_loss_grad.oracle_fast import focal_rows

TARGET_PER_SECOND = 5_000_000
STUDIES = Path(__file__).resolve().parent.parent / "studies"
FP32_STUDIES = ("cancellation_threshold", "q_precision", "fp32_stratified_1m", "subnormal_recovery", "candidate")
#: Points per study (and of real-valued attributes) timed on the mpmath path.
MPMATH_SAMPLE = 3000


def _f32(values):
    return np.asarray(values, dtype=np.float32).astype(np.float64)


def _weight_values(study):
    return [1.0 if w is None else w for w in study.weights]


def _study_points(name):
    """{gamma: preds} and the (alpha, t, weight, dout) combinations of a study's fp32 profile."""
    study = load_study(STUDIES / f"{name}.toml")
    preds = {g: p[p == _f32(p)] for g, p in study_preds_by_term(study).items()}  # values of fp32 tensors
    combos = [(a, t, w, d) for a in study.values("alpha") for t in study.targets
              for w in _weight_values(study) for d in study.douts]
    return study, preds, combos


def time_study(name, seed):
    """(points, seconds, terms, terms deferred, points deferred, mpmath rate) of one study's oracle stage."""
    study, preds, combos = _study_points(name)
    count = study.count if study.reduction == "mean" else 1
    need_pos, need_neg = terms.term_sides(dict(study.attributes), study.targets)
    points = n_terms = deferred_terms = deferred_points = 0
    seconds = 0.0
    for g, x in preds.items():
        xs = np.unique(np.concatenate([x if need_pos else [], -x if need_neg else []]))
        xs = xs[np.argsort(np.abs(xs), kind="stable")]
        start = time.perf_counter()
        table = terms.focal_term_tables(xs, [g])[g]
        seconds += time.perf_counter() - start
        # (the sweep's gather of each point's terms is its own bookkeeping: benchmarks/sweep.py times it)
        keys = xs.view(np.int64)
        order = np.argsort(keys)
        pos = table.take(order[np.searchsorted(keys[order], x.view(np.int64))]) if need_pos else \
            terms.absent_table(x.size)
        neg = table.take(order[np.searchsorted(keys[order], (-x).view(np.int64))]) if need_neg else \
            terms.absent_table(x.size)
        columns = [(np.full(x.size, t), np.full(x.size, a), np.full(x.size, g), np.full(x.size, w),
                    np.full(x.size, d), np.full(x.size, count)) for a, t, w, d in combos]
        start = time.perf_counter()
        for column in columns:
            got = terms.derive_gradient(x, *column, "fp32", pos, neg)
            deferred_points += got.fallback
        seconds += time.perf_counter() - start
        points += x.size * len(combos)
        n_terms += xs.size
        deferred_terms += int((~(focal_rows(xs, [g])[3] <= terms.TERM_REL)).sum())
    # the mpmath path on a sample of the same points
    rng = np.random.default_rng(seed)
    gs = list(preds)
    pick_g = rng.choice(len(gs), MPMATH_SAMPLE)
    xs = np.array([rng.choice(preds[gs[k]]) for k in pick_g])
    combo = [combos[k] for k in rng.integers(0, len(combos), MPMATH_SAMPLE)]
    a, t, w, d = (np.array([c[i] for c in combo]) for i in range(4))
    start = time.perf_counter()
    oracle.gradient(xs, t, a, np.array([gs[k] for k in pick_g]), w, d, count, fmt="fp32")
    mp_rate = MPMATH_SAMPLE / (time.perf_counter() - start)
    return points, seconds, n_terms, deferred_terms, deferred_points, mp_rate


def _stratified_fp32(n, rng, lo=-100.0, hi=100.0):
    """n fp32 values drawn per binade (every binade up to |hi| alike), both signs, within [lo, hi]."""
    top = math.frexp(max(abs(lo), abs(hi)))[1]
    x = _f32(np.ldexp(rng.uniform(1, 2, n), rng.integers(-149, top, n)) * rng.choice([-1, 1], n))
    return x[(x >= lo) & (x <= hi)]


def time_real_valued(n, seed):
    """(points, seconds, points deferred, mpmath rate) with real-valued alpha and gamma."""
    rng = np.random.default_rng(seed)
    x = _stratified_fp32(n, rng)
    t = rng.integers(0, 2, x.size)
    a, g = _f32(rng.uniform(0, 1, x.size)), _f32(rng.uniform(-3, 6, x.size))
    terms.gradient(x[:100], t[:100], a[:100], g[:100])
    start = time.perf_counter()
    terms.gradient(x, t, a, g, fmt="fp32")
    seconds = time.perf_counter() - start
    with np.errstate(all="ignore"):
        pos, neg = terms.focal_term_table(x, g), terms.focal_term_table(-x, g)
    deferred = terms.derive_gradient(x, t, a, g, np.ones(x.size), np.ones(x.size), np.ones(x.size, np.int64),
                                     "fp32", pos, neg).fallback
    k = min(MPMATH_SAMPLE, x.size)
    start = time.perf_counter()
    oracle.gradient(x[:k], t[:k], a[:k], g[:k], fmt="fp32")
    return x.size, seconds, deferred, k / (time.perf_counter() - start)


def throughput(args) -> int:
    terms.gradient(np.array([1.0]), 0, 0.25, 2.0)  # load the compiled passes
    failed = False
    def fastest(timing):  # the run of least seconds of args.repeat (index 1 of each result: its seconds)
        return min((timing() for _ in range(args.repeat)), key=lambda r: r[1])
    rows = [(name, fastest(lambda: time_study(name, args.seed))) for name in FP32_STUDIES]
    rows.append(("real-valued alpha, gamma", None))
    for name, result in rows:
        if result is None:
            points, seconds, deferred_points, mp_rate = fastest(lambda: time_real_valued(args.points, args.seed))
            terms_line = "every point its own term"
        else:
            points, seconds, n_terms, deferred_terms, deferred_points, mp_rate = result
            terms_line = f"{n_terms:,} terms, {deferred_terms:,} to mpmath ({deferred_terms / n_terms:.2e})"
        rate = points / seconds
        failed |= rate < TARGET_PER_SECOND
        print(f"{name:<26} {points:>11,} fp32 points in {seconds:6.2f} s = {rate / 1e6:5.2f} M/s one core; "
              f"mpmath {mp_rate:,.0f}/s ({rate / mp_rate:,.0f}x); {terms_line}; "
              f"{deferred_points:,} points to mpmath ({deferred_points / points:.2e})")
    verdict = "FAIL" if failed else "PASS"
    print(f"{verdict} certified oracle throughput: every row at least {TARGET_PER_SECOND / 1e6:.0f} M points/s "
          "per core")
    return 1 if failed else 0


# ---------------------------------------------------------------------------
# Identity: the fast path against the mpmath path, bit for bit
# ---------------------------------------------------------------------------

def _identity_classes(n, seed):
    """{class: (x, t, alpha, gamma, weight, dout, count)} of about n points in all."""
    rng = np.random.default_rng(seed)
    k = n // 6
    out = {}
    # 1. the fp32 studies' points
    parts = []
    for name in FP32_STUDIES:
        study, preds, combos = _study_points(name)
        gs = list(preds)
        m = k // len(FP32_STUDIES)
        g = np.array(gs)[rng.integers(0, len(gs), m)]
        x = np.array([rng.choice(preds[v]) for v in g])
        c = [combos[i] for i in rng.integers(0, len(combos), m)]
        parts.append((x, *(np.array([cc[i] for cc in c]) for i in (1, 0)), g,
                      *(np.array([cc[i] for cc in c]) for i in (2, 3))))
    columns = tuple(np.concatenate([p[i] for p in parts]) for i in range(6))
    out["study points"] = columns + (np.ones(columns[0].size, np.int64),)
    # 2. roots of A and their neighbourhoods (gamma < -1: x at each root, and -x for the other selector)
    xs, gs = [], []
    for g in _f32(np.linspace(-3.0, -1.0625, 32)):
        for r in bracket.roots(float(g)):
            centre = np.abs(np.float32(r)).view(np.int32).astype(np.int64)
            offsets = np.unique(np.concatenate([np.arange(-64, 65),
                                                np.round(np.geomspace(65, 2**20, 200)).astype(np.int64),
                                                -np.round(np.geomspace(65, 2**20, 200)).astype(np.int64)]))
            v = math.copysign(1.0, r) * np.abs(centre + offsets).astype(np.int32).view(np.float32).astype(np.float64)
            xs.append(v)
            gs.append(np.full(v.size, g))
    x, g = np.concatenate(xs), np.concatenate(gs)
    pick = rng.integers(0, x.size, k)
    t = rng.integers(0, 2, k)
    out["roots and neighbourhoods"] = (np.where(t == 0, x[pick], -x[pick]), t, _f32(rng.choice([0.25, 0.6], k)),
                                       g[pick], np.ones(k), np.ones(k), np.ones(k, np.int64))
    # 3. outputs near fp32 rounding midpoints: the closest of a pool 20 times as large
    pool = 20 * k
    x = _stratified_fp32(pool, rng, -60, 60)
    t = rng.integers(0, 2, x.size)
    a, g = _f32(rng.uniform(0, 1, x.size)), _f32(rng.uniform(-3, 6, x.size))
    pos, neg = terms.focal_term_table(x, g), terms.focal_term_table(-x, g)
    d = terms.derive_gradient(x, t, a, g, np.ones(x.size), np.ones(x.size), np.ones(x.size, np.int64), "fp32",
                              pos, neg)
    f = get_format("fp32")
    from precision.exact.formats import ulp
    with np.errstate(all="ignore"):
        frac = np.abs(((d.exact_hi - d.rounded.astype(np.float64)) + d.exact_lo) / ulp(d.exact_hi, f))
    near = np.argsort(np.abs(np.nan_to_num(frac, nan=9.0) - 0.5))[:k]
    out["near midpoints"] = (x[near], t[near], a[near], g[near], np.ones(k), np.ones(k), np.ones(k, np.int64))
    # 4. subnormal and overflowing outputs
    x = _stratified_fp32(k, rng, -40, 40)
    m = x.size
    g = _f32(rng.choice([-3.0, -2.0, -1.0, 0.5, 2.0], m))
    w = _f32(rng.choice([2.0**-140, 2.0**-149, 2.0**-126, 1e38, 3e38], m))
    dd = _f32(rng.choice([1.0, 2.0**-20, 3e38, -6e4], m))
    out["subnormal and overflowing outputs"] = (x, rng.integers(0, 2, m), _f32(rng.uniform(0, 1, m)), g, w, dd,
                                                np.ones(m, np.int64))
    # 5. every special input class
    specials = _f32([0.0, -0.0, 2.0**-149, -(2.0**-149), 2.0**-126, 3.4e38, -3.4e38, 1e-30, 88.0, -104.0, 17.0])
    x = np.where(rng.random(k) < 0.5, rng.choice(specials, k), _f32(rng.uniform(-30, 30, k)))
    out["special input classes"] = (
        x, rng.choice([0, 1, 2, -3, 7], k), _f32(rng.choice([0.0, 1.0, 0.25, 1e-8], k)),
        _f32(rng.choice([0.0, -1.0, 2.0**-149, -(2.0**-149), 1e6, -1e6, -1.0 - 2.0**-23, 2.0], k)),
        _f32(rng.choice([1.0, 0.0, 2.0**-149, 65504.0], k)), _f32(rng.choice([1.0, 0.0, -0.0, 2.0**-130], k)),
        rng.choice([1, 3, 2**24 + 1, 1000000007], k))
    # 6. real-valued alpha and gamma
    x = _stratified_fp32(k, rng)
    m = x.size
    out["real-valued alpha, gamma"] = (x, rng.integers(0, 2, m), _f32(rng.uniform(0, 1, m)),
                                       _f32(rng.uniform(-3, 6, m)), np.ones(m), np.ones(m), np.ones(m, np.int64))
    return out


def _mpmath_chunk(job):
    args, fmt = job
    return oracle.gradient(*args, fmt=fmt)


def identity(args) -> int:
    classes = _identity_classes(args.identity, args.seed)
    total = differ = 0
    workers = args.workers or os.cpu_count() or 1
    with ProcessPoolExecutor(workers) as pool:
        for name, pts in classes.items():
            for fmt, share in (("fp32", 1), ("fp16", 10), ("bf16", 10)):
                sub = tuple(np.asarray(p)[::share] for p in pts)
                f = get_format(fmt)
                start = time.perf_counter()
                fast = terms.gradient(*sub, fmt=fmt)
                fast_s = time.perf_counter() - start
                start = time.perf_counter()
                chunks = np.array_split(np.arange(sub[0].size), max(1, 4 * workers))
                slow = np.concatenate(list(pool.map(_mpmath_chunk, [(tuple(p[c] for p in sub), fmt)
                                                                    for c in chunks])))
                slow_s = time.perf_counter() - start
                bad = int((fast.view(f.uint_dtype) != slow.astype(f.dtype).view(f.uint_dtype)).sum())
                total += sub[0].size
                differ += bad
                print(f"{name:<34} {fmt}: {sub[0].size:>9,} points, {bad} differing "
                      f"(fast {fast_s:6.2f} s, mpmath {slow_s:7.2f} s on {workers} workers)")
    verdict = "PASS" if differ == 0 else "FAIL"
    print(f"{verdict} fast path against mpmath: {total:,} points, {differ} with differing bits")
    return 0 if differ == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1_000_000, help="real-valued points (default 1,000,000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3,
                        help="time each row this many times and keep the fastest (default 3: a row of 0.1 to 0.3 s "
                             "moves by a third on a machine doing other work)")
    parser.add_argument("--identity", type=int, default=0, metavar="N",
                        help="compare the two paths' bits on about N points instead of timing")
    parser.add_argument("--workers", type=int, default=0, help="processes for the mpmath path (default: cores)")
    args = parser.parse_args()
    return identity(args) if args.identity else throughput(args)


if __name__ == "__main__":
    raise SystemExit(main())
