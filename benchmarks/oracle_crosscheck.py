"""Cross-check of the two certified oracles: counts, disagreements and time.

Runs :func:`precision.operators.sigmoid_focal_loss_grad.oracle_arb.crosscheck` -- the mpmath oracle
(``precision.operators.sigmoid_focal_loss_grad.oracle``) against the Arb oracle (``precision.operators.sigmoid_focal_loss_grad.oracle_arb``,
python-flint), bit for bit in fp16, bf16, fp32 and fp64 -- on N random points
(default 10,000) plus the hard-case list, and prints one line per category,
the per-oracle time and the per-evaluation cost of each oracle.

Run: ``python benchmarks/oracle_crosscheck.py [--points N] [--seed S] [--no-hard]``.
Needs python-flint (``pip install 'precision[arb]'``).
"""

import argparse
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-hard", action="store_true", help="random points only")
    args = parser.parse_args()
    try:
        from precision.operators.sigmoid_focal_loss_grad import oracle_arb
    except ImportError as exc:
        print(f"oracle_crosscheck: {exc}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    report = oracle_arb.crosscheck(points=args.points, seed=args.seed, hard=not args.no_hard)
    wall = time.perf_counter() - start
    for line in report.lines():
        print(line)
    evaluations = sum(r.comparisons for r in report.categories.values())
    print(f"time: {wall:.2f} s wall; mpmath oracle {report.seconds_mpmath:.2f} s "
          f"({1e6 * report.seconds_mpmath / max(evaluations, 1):.0f} us per evaluation), "
          f"Arb oracle {report.seconds_arb:.2f} s "
          f"({1e6 * report.seconds_arb / max(evaluations, 1):.0f} us per evaluation), "
          f"{evaluations:,} evaluations each")
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
