"""The worst-case hunt over real ranges: throughput with and without screening, and how close 60 s comes.

Throughput (the default).  One worker, a fixed point budget (``--points``, default 60,000) of ``candidate``
on ieee over alpha in [0, 1] and gamma in [-3, 6], t = 1, outside the root neighbourhood, seed 0: the hunt as
it runs (screened: a point whose compiled certified ball straddles the end of a rounding cell keeps the
ball's centre) beside the same hunt certifying every point's rounding with the scalar oracle (as before
screening).  Each is run ``--repeat`` times (default 3), the fastest kept, alternating so that a noisy machine
slows both alike; it prints points per second, the points left unresolved, the maximum found (the same
points: equal maxima), and the ratio.

Quality (``--quality``).  Three ``--seconds`` (default 60) range hunts, seeds 0, 1, 2, on every core, each
against the best point known over those ranges (:data:`BEST_KNOWN`, a 300 s hunt of both targets): the
maximum found and how far below the best known it is.

Run: ``python3 benchmarks/hunt.py [--points N] [--repeat R]`` or ``python3 benchmarks/hunt.py --quality
[--seconds S]``.
"""

from __future__ import annotations

import argparse
import functools
import time

from precision.products import hunt as hunt_module

RANGES = {"alpha": (0.0, 1.0), "gamma": (-3.0, 6.0)}
#: The best known candidate point over those ranges, t = 1, outside the neighbourhood (ieee fp32, ulps):
#: studies/hunts/candidate_range_hunt_ieee.json (300 s screened, both targets, seed 0: pred -0x1.fc56a8p+3,
#: alpha 0x1.fcadfep-2, gamma 0x1.07c26ap+2), checked with Arb.
BEST_KNOWN = 5.17058


def _hunt(**kw):
    return hunt_module.hunt("candidate", machine="ieee", fmt="fp32", targets=(1,), outside_neighbourhood=True,
                            ranges=RANGES, **kw)


def throughput(points: int, repeat: int) -> None:
    _hunt(points=2000, workers=1)  # (compiled passes loaded)
    screened = hunt_module._score_points
    certified = functools.partial(screened, certify=True)
    best = {}
    for _ in range(repeat):
        for name, score in (("certified", certified), ("screened", screened)):
            hunt_module._score_points = score
            try:
                start = time.perf_counter()
                r = _hunt(points=points, workers=1, seed=0)
                seconds = time.perf_counter() - start
            finally:
                hunt_module._score_points = screened
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, r)
    for name, (seconds, r) in best.items():
        print(f"{name:10s} {r.points:,} points in {seconds:.2f} s: {r.points / seconds:,.0f} points/s, "
              f"{r.unresolved} unresolved, max {r.max_finite_ulp:.6g} ulp")
    print(f"screening: {best['certified'][0] / best['screened'][0]:.2f}x the certified hunt's rate")


def quality(seconds: float) -> None:
    for seed in (0, 1, 2):
        r = _hunt(seconds=seconds, seed=seed)
        gap = 1.0 - r.max_finite_ulp / BEST_KNOWN
        print(f"seed {seed}: {r.max_finite_ulp:.6g} ulp ({r.points:,} points, {r.points_per_second:,.0f} points/s, "
              f"{r.workers} workers), {gap:.1%} below the best known {BEST_KNOWN}; witness {r.witness}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=60_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quality", action="store_true")
    parser.add_argument("--seconds", type=float, default=60.0)
    args = parser.parse_args()
    if args.quality:
        quality(args.seconds)
    else:
        throughput(args.points, args.repeat)


if __name__ == "__main__":
    main()
