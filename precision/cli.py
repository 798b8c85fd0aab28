"""The ``precision`` command.

Exit statuses: 0 success; 1 a budget failed (``gate``); 2 a usage or input
error, reported as one line on stderr with no traceback and nothing written.
"""

from __future__ import annotations

import argparse
import math
import re
import sys

from precision.errors import ParameterError, PrecisionError

__all__ = ["main", "parse_exact_float"]


class _UsageError(PrecisionError):
    """Raised by the argument parser instead of printing usage and exiting."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors, and negative hex floats read as values."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # "-0x1.4p+0" and "-1e-5" are values, not options
        self._negative_number_matcher = re.compile(r"^-(?:\d|\.\d)")

    def error(self, message):  # one line, exit 2 (handled in main)
        raise _UsageError(f"{self.prog}: {message}")


def parse_exact_float(text: str, name: str) -> float:
    """Parse a hex float (``-0x1.4p+0``) exactly, or a decimal to the nearest float64.

    Raises ParameterError (naming the argument) for anything else, NaN and inf included.
    """
    s = text.strip()
    try:
        value = float.fromhex(s) if "0x" in s.lower() else float(s)
    except ValueError:
        raise ParameterError(
            f"--{name}={text!r} is not a number; expected a hex float like -0x1.4p+0 or a decimal"
        ) from None
    if not math.isfinite(value):
        raise ParameterError(f"--{name}={text!r}; expected a finite value")
    return value


def _parse_int(text: str, name: str, positive: bool = False) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise ParameterError(f"--{name}={text!r} is not an integer") from None
    if positive and value <= 0:
        raise ParameterError(f"--{name}={text!r}; expected a positive integer (N*C for mean, 1 otherwise)")
    return value


def _cmd_oracle_check(args) -> int:
    """``precision oracle --check``: the mpmath and Arb oracles, bit for bit."""
    try:
        from precision import oracle_arb
    except ImportError:
        raise ParameterError("--check needs python-flint for the Arb oracle; "
                             "install it with pip install 'precision[arb]'") from None
    points = _parse_int(args.points, "points")
    seed = _parse_int(args.seed, "seed")
    if points < 0:
        raise ParameterError(f"--points={args.points!r}; expected a count >= 0")
    report = oracle_arb.crosscheck(points=points, seed=seed)
    print("\n".join(report.lines()))
    return 0 if report.passed else 1


def _cmd_oracle(args) -> int:
    import numpy as np

    from precision import oracle
    from precision.formats import FORMATS

    if args.check:
        return _cmd_oracle_check(args)
    if args.pred is None or args.target is None:
        raise _UsageError("precision oracle: the following arguments are required: --pred, --target (or --check)")
    x = parse_exact_float(args.pred, "pred")
    t = _parse_int(args.target, "target")
    with np.errstate(over="ignore"):
        alpha = float(np.float32(parse_exact_float(args.alpha, "alpha")))
        gamma = float(np.float32(parse_exact_float(args.gamma, "gamma")))
    if not (math.isfinite(alpha) and math.isfinite(gamma)):
        raise ParameterError("--alpha/--gamma overflow float32; expected finite float32 attribute values")
    weight = parse_exact_float(args.weight, "weight")
    dout = parse_exact_float(args.dout, "dout")
    count = _parse_int(args.count, "count", positive=True)
    exact = oracle.exact_decimal(x, t, alpha, gamma, weight, dout, count, digits=40)
    lines = [
        f"pred    {x.hex():<24} {x!r}",
        f"target  {t}",
        f"alpha   {alpha.hex():<24} {alpha!r} (float32)",
        f"gamma   {gamma.hex():<24} {gamma!r} (float32)",
        f"weight  {weight.hex():<24} {weight!r}",
        f"dout    {dout.hex():<24} {dout!r}",
        f"count   {count}",
        f"exact   {exact}",
    ]
    for name in FORMATS:
        try:
            v = oracle.round_gradient(x, t, alpha, gamma, weight, dout, count, fmt=name)
            lines.append(f"{name:<7} {v.hex():<24} {v!r}")
        except PrecisionError as exc:  # undecided at the precision cap
            lines.append(f"{name:<7} unresolved ({exc})")
    print("\n".join(lines))
    return 0


def _cmd_variants(args) -> int:
    from precision.guards import list_variants
    rows = list_variants()
    width = max(len(name) for name, _ in rows)
    print("\n".join(f"{name:<{width}}  {text}" for name, text in rows))
    return 0


def _cmd_run(args) -> int:
    from pathlib import Path

    from precision.study import load_study
    from precision.sweep import run_study

    study = load_study(args.study)
    out = Path(args.out) if args.out else Path("out") / study.name
    result = run_study(study, out, cache_dir=args.cache_dir, use_cache=not args.no_cache,
                       scheduler=args.scheduler, workers=args.workers)
    print(f"{study.name}: {result.points:,} points x variants in {result.tasks} tasks "
          f"({result.tasks_reused} reused), oracle pairs {result.term_pairs:,} "
          f"({result.term_pairs_cached:,} from cache), {result.oracle_fallback} scalar fallbacks, "
          f"{result.seconds:.1f} s -> {out}")
    for variant, profile in result.unsupported:
        print(f"note: {variant} does not take profile {profile}; skipped there")
    return 0


def _cmd_cache(args) -> int:
    from precision.cache import TermCache, default_cache_dir

    cache = TermCache(args.cache_dir or default_cache_dir())
    if args.action == "info":
        info = cache.info()
        print(f"folder  {info['folder']}\nshards  {info['shards']}\nentries {info['entries']:,}\n"
              f"bytes   {info['bytes']:,}")
    else:
        print(f"removed {cache.clear()} shards from {cache.folder}")
    return 0


def _cmd_gate(args) -> int:
    from precision.gate import run_gate

    result = run_gate(args.budgets, study_path=args.study, out_dir=args.out, baseline=args.baseline,
                      update_baseline=args.update_baseline, junit=args.junit, json_path=args.json,
                      cache_dir=args.cache_dir, use_cache=not args.no_cache, workers=args.workers,
                      propose=args.propose)
    for line in result.lines:
        print(line.text())
    for text in result.regressions + result.tighten:
        print(text)
    print(result.summary)
    return result.exit_status


def _cmd_report(args) -> int:
    from pathlib import Path

    from precision.report import build_report, report_all

    runs = Path(args.runs) if args.runs else Path("out")
    out = Path(args.out) if args.out else Path("reports")
    if args.all == bool(args.study):
        raise ParameterError("report: give one study name or --all (not both, not neither)")
    if args.all:
        for study, folder, ran in report_all(runs, out, studies_dir=Path(args.studies)):
            print(f"{study}: {'ran the study, ' if ran else ''}report -> {folder}")
        return 0
    folder = build_report(args.study, runs, out)
    print(f"{args.study}: report -> {folder}")
    return 0


def _cmd_hunt(args) -> int:
    import json
    from pathlib import Path

    from precision.gate import append_to_corpus
    from precision.hunt import hunt

    if args.seconds is not None and args.points is not None:
        raise ParameterError("hunt: give --seconds or --points, not both")
    seconds = None
    if args.seconds is not None:
        seconds = parse_exact_float(args.seconds, "seconds")
        if seconds <= 0:
            raise ParameterError(f"--seconds={args.seconds!r}; expected a positive number of seconds")
    points = None
    if args.points is not None:
        points = _parse_int(args.points, "points")
        if points <= 0:
            raise ParameterError(f"--points={args.points!r}; expected a positive integer")
    seed = _parse_int(args.seed, "seed")
    if seed < 0:
        raise ParameterError(f"--seed={args.seed!r}; expected a non-negative integer")
    top = _parse_int(args.top, "top")
    if top <= 0:
        raise ParameterError(f"--top={args.top!r}; expected a positive integer")
    gammas = [parse_exact_float(v, "gamma") for v in args.gamma or ["2.0"]]
    alphas = [parse_exact_float(v, "alpha") for v in args.alpha or ["0.25"]]
    targets = [_parse_int(v, "target") for v in args.target or ["0", "1"]]
    result = hunt(args.variant, machine=args.machine, fmt=args.format, gammas=gammas, alphas=alphas,
                  targets=targets, outside_neighbourhood=args.outside_neighbourhood, seconds=seconds, points=points,
                  seed=seed, workers=args.workers, top=top)
    added = 0
    if not args.no_corpus and result.corpus_preds():
        note = (f"hunt witness, {result.variant} {result.fmt} {result.machine}, "
                f"gamma {' '.join(f'{g:g}' for g in result.gammas)}, seed {result.seed}")
        added = append_to_corpus(Path(args.corpus), result.corpus_preds(), note)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print("\n".join(result.lines()))
        if not args.no_corpus:
            print(f"corpus: {added} new pred values appended to {args.corpus}")
    return 0


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}; expected a positive integer")
    return value


def _add_study_run_options(p) -> None:
    """The options of a command that runs a study: run folder, oracle cache, worker processes."""
    p.add_argument("--out", help="run folder (default: out/<study name>)")
    p.add_argument("--cache-dir", help="oracle cache folder (default: $PRECISION_CACHE_DIR or the user cache)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the oracle cache")
    p.add_argument("--workers", type=_positive_int, help="worker processes (default: every core)")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="precision", description="Numerical-precision analysis of SigmoidFocalLossGrad.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    p = sub.add_parser("oracle", help="the exact gradient at one point, and its correct roundings",
                       description="Print the exact gradient to 40 significant digits and its correctly "
                                   "rounded fp16, bf16, fp32 and fp64 values (hex and decimal). "
                                   "Floats are hex (exact) or decimal (nearest float64); alpha and gamma "
                                   "are rounded to float32 as the operator's attributes are.")
    p.add_argument("--pred", help="logit x (required unless --check)")
    p.add_argument("--target", help="raw selector t (any integer; 0 positive, 1 negative term; required unless --check)")
    p.add_argument("--alpha", default="0.25")
    p.add_argument("--gamma", default="2.0")
    p.add_argument("--weight", default="1.0")
    p.add_argument("--dout", default="1.0")
    p.add_argument("--count", default="1", help="N*C for reduction mean (coef = exact 1/count), 1 otherwise")
    p.add_argument("--check", action="store_true",
                   help="cross-check the mpmath oracle against the Arb oracle (python-flint) bit for bit on "
                        "random points plus hard cases; exit 0 on zero disagreements, 1 otherwise")
    p.add_argument("--points", default="10000", help="random points for --check (default 10000)")
    p.add_argument("--seed", default="0", help="random seed for --check (default 0)")
    p.set_defaults(func=_cmd_oracle)

    p = sub.add_parser("variants", help="list the registered implementation variants")
    p.set_defaults(func=_cmd_variants)

    p = sub.add_parser("run", help="run a study file: oracle, every variant, scores, tables")
    p.add_argument("study", help="a study file, e.g. studies/quick.toml")
    _add_study_run_options(p)
    p.add_argument("--scheduler", help="Dask scheduler tcp://host:port, or 'local' for a LocalCluster")
    p.set_defaults(func=_cmd_run)

    p = sub.add_parser("gate", help="check a study's scores against error budgets (exit 1 on a failure)")
    p.add_argument("--budgets", default="studies/budgets.toml", help="budgets file (default studies/budgets.toml)")
    p.add_argument("--study", help="study file (default: the budgets file's [gate] study)")
    p.add_argument("--baseline", help="baseline JSON: report regressions against it")
    p.add_argument("--update-baseline", action="store_true", help="write the observed values to --baseline")
    p.add_argument("--junit", help="write JUnit XML here")
    p.add_argument("--json", help="write the results as JSON here")
    p.add_argument("--propose", help="write a budgets file with limits from this run here")
    _add_study_run_options(p)
    p.set_defaults(func=_cmd_gate)

    p = sub.add_parser("report", help="build reports/<study>/ (Markdown, HTML, plots, tables) from a run folder",
                       description="Read the run folder RUNS/<study> written by `precision run` and write "
                                   "OUT/<study>/: report.md, a self-contained report.html, plots (PNG, SVG), "
                                   "tables (CSV) and findings.json. --all regenerates every report under OUT, "
                                   "running a study first when its run folder is missing.")
    p.add_argument("study", nargs="?", help="study name, e.g. guard_ablation")
    p.add_argument("--all", action="store_true", help="every committed report (folders under --out)")
    p.add_argument("--runs", help="folder of run folders (default: out)")
    p.add_argument("--out", help="folder of reports (default: reports)")
    p.add_argument("--studies", default="studies", help="folder of study files for --all (default: studies)")
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser(
        "hunt", help="search for the inputs of largest ulp error (fp32 hunted, fp16 exhausted)",
        description="A black-box search for the inputs where a variant's ulp error is largest: seeded "
                    "sampling, then local search in ordinal space around the worst points (neighbours at "
                    "distances 1, 2, 4, ..., restarts), on the local cores. fp16 preds (63,488) are simply "
                    "exhausted. Prints the worst points (inputs as hex floats and decimal, error in ulp, "
                    "computed and correctly rounded values in hex) and a summary line labelling the maximum "
                    "exhaustive or hunted (with its budget), and appends the preds not correctly rounded to the "
                    "gate's worst-case corpus. weight is absent, dout 1, reduction none.",
        epilog="example: precision hunt candidate --gamma -3 --outside-neighbourhood --seconds 60 --no-corpus")
    p.add_argument("variant", help="a registry name (see `precision variants`)")
    p.add_argument("--machine", default="npu",
                   help="machine spec: ieee, numpy, npu, suffixes like +ftz (default: npu)")
    p.add_argument("--format", default="fp32", choices=["fp32", "fp16"],
                   help="pred and output format; fp16 is exhausted (default: fp32)")
    p.add_argument("--gamma", nargs="+", action="extend", metavar="G", help="gamma values, float32 (default: 2)")
    p.add_argument("--alpha", nargs="+", action="extend", metavar="A", help="alpha values, float32 (default: 0.25)")
    p.add_argument("--target", nargs="+", action="extend", metavar="T", help="raw selectors (default: 0 1)")
    p.add_argument("--outside-neighbourhood", action="store_true",
                   help="only points outside the root neighbourhood, gamma < -1 and C >= 4 (precision.bracket)")
    p.add_argument("--seconds", help="wall-time budget of an fp32 hunt in seconds, start-up excluded (default: 60)")
    p.add_argument("--points",
                   help="point budget instead of --seconds: reproducible for a seed on any machine and worker count")
    p.add_argument("--seed", default="0", help="seed of the search streams (default: 0)")
    p.add_argument("--workers", type=_positive_int, help="worker processes (default: every core)")
    p.add_argument("--top", default="10", help="worst finite points to print (default: 10)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (max_ulp, witness, kind, seconds, points, top, ...)")
    p.add_argument("--corpus", default="studies/worst_cases.txt",
                   help="worst-case corpus to append to (default: studies/worst_cases.txt)")
    p.add_argument("--no-corpus", action="store_true", help="do not append to the corpus")
    p.set_defaults(func=_cmd_hunt)

    p = sub.add_parser("cache", help="show or clear the oracle cache")
    p.add_argument("action", choices=["info", "clear"])
    p.add_argument("--cache-dir", help="cache folder (default: $PRECISION_CACHE_DIR or the user cache)")
    p.set_defaults(func=_cmd_cache)
    return parser


def main(argv=None) -> int:
    """Run the command line; returns the exit status."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        return args.func(args)
    except PrecisionError as exc:
        message = str(exc).replace("\n", " ")
        print(f"precision: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
