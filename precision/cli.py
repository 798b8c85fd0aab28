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


def _json_number(v):
    """A float for JSON: None for NaN, "inf"/"-inf" for infinities (JSON has neither)."""
    v = float(v)
    if math.isnan(v):
        return None
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _cmd_explain(args) -> int:
    """``precision explain``: one point's error, step by step (precision.attribution)."""
    import json

    import numpy as np
    from mpmath import libmp

    from precision import oracle
    from precision.attribution import attribute, describe

    dtype = np.dtype(np.float16 if args.format == "fp16" else np.float32)
    raw = {name: parse_exact_float(getattr(args, name), name) for name in ("pred", "dout")}
    raw["weight"] = None if args.weight is None else parse_exact_float(args.weight, "weight")
    t = _parse_int(args.target, "target")
    count = _parse_int(args.count, "count", positive=True)
    with np.errstate(over="ignore"):
        alpha = float(np.float32(parse_exact_float(args.alpha, "alpha")))
        gamma = float(np.float32(parse_exact_float(args.gamma, "gamma")))
        values = {k: (None if v is None else dtype.type(v)) for k, v in raw.items()}
    if not (math.isfinite(alpha) and math.isfinite(gamma)):
        raise ParameterError("--alpha/--gamma overflow float32; expected finite float32 attribute values")
    for name, v in values.items():
        if v is not None and not np.isfinite(v):
            raise ParameterError(f"--{name}={getattr(args, name)!r} overflows {args.format}; expected a finite value")
    att = attribute(args.variant, np.array([values["pred"]], dtype), [t], dout=values["dout"],
                    weight=values["weight"], alpha=alpha, gamma=gamma, reduction="mean", count=count,
                    machine=args.machine)
    point = att.points.loc[0]
    x, d = float(values["pred"]), float(values["dout"])
    w = None if values["weight"] is None else float(values["weight"])
    exact = oracle.exact_decimal(x, t, alpha, gamma, 1.0 if w is None else w, d, count, digits=20)
    rows = att.steps
    exact_text = att.exact_values[0]

    def hex_of(v, kind):
        if kind == "bool":
            return None if np.isnan(v) else bool(v)
        return None if np.isnan(v) and kind == "skip" else float(v).hex()

    steps = []
    for r in rows.itertuples(index=False):
        is_bool = r.format == "bool"
        mpf = exact_text.get(r.step)
        steps.append({
            "step": r.step, "formula": att.formulas[r.step], "kind": r.kind, "format": r.format,
            "evaluated": bool(r.evaluated),
            "computed": (None if np.isnan(r.computed) else bool(r.computed)) if is_bool else
            (float(r.computed).hex() if r.evaluated else None),
            "exact": (None if np.isnan(r.exact) else bool(r.exact)) if is_bool else
            (None if mpf is None else libmp.to_str(mpf._mpf_, 17)),
            "exact_rounded": None if is_bool or np.isnan(r.exact_rounded) else float(r.exact_rounded).hex(),
            "local": None if is_bool or np.isnan(r.local) else float(r.local).hex(),
            "local_ulp": _json_number(r.local_ulp), "cause": r.cause, "cond": _json_number(r.cond),
            "reaches_output": bool(r.reaches_output),
        })
    sentence = describe(att, 0)
    top = {"step": point["top_step"] if isinstance(point["top_step"], str) else None, "cause": point["top_cause"], "local_ulp": _json_number(point["top_local_ulp"]),
           "cond": _json_number(point["top_cond"]), "sentence": sentence}
    inputs = {"pred": x.hex(), "target": t, "alpha": alpha.hex(), "gamma": gamma.hex(),
              "weight": None if w is None else w.hex(), "dout": d.hex(), "count": count}
    if args.json:
        print(json.dumps({"variant": args.variant, "machine": args.machine, "format": args.format, "inputs": inputs,
                          "exact": exact, "exact_rounded": float(point["exact_rounded"]).hex(),
                          "computed": float(point["computed"]).hex(), "err_ulp": _json_number(point["err_ulp"]),
                          "steps": steps, "top_cause": top}, indent=1, allow_nan=False))
        return 0
    lines = [
        f"variant  {args.variant} on {args.machine}, {args.format} pred/dout/weight, reduction mean, count {count}",
        f"pred     {x.hex():<24} {x!r}",
        f"target   {t}",
        f"alpha    {alpha.hex():<24} {alpha!r} (float32)",
        f"gamma    {gamma.hex():<24} {gamma!r} (float32)",
        f"weight   {'absent' if w is None else f'{w.hex():<24} {w!r}'}",
        f"dout     {d.hex():<24} {d!r}",
        f"exact    {exact}",
        f"{args.format:<8} {float(point['exact_rounded']).hex():<24} {float(point['exact_rounded'])!r} (correctly rounded)",
        f"computed {float(point['computed']).hex():<24} {float(point['computed'])!r} "
        f"({_fmt_ulp(point['err_ulp'])} ulp)",
        "",
        f"{'step':<11} {'computed':<24} {'exact':<24} {'local_ulp':>9}  {'cause':<15} {'cond':>8}  reaches",
    ]
    for st in steps:
        comp = "-" if st["computed"] is None else str(st["computed"]).lower()
        ex = "-" if st["exact"] is None else str(st["exact"]).lower()
        lu = "-" if st["local_ulp"] is None else _fmt_ulp(st["local_ulp"])
        cond = "-" if st["cond"] is None else f"{float(st['cond']):.3g}"
        lines.append(f"{st['step']:<11} {comp:<24} {ex:<24} {lu:>9}  {st['cause']:<15} {cond:>8}  "
                     f"{'yes' if st['reaches_output'] else 'no'}")
    lines += ["", f"top cause: {sentence}"]
    print("\n".join(lines))
    return 0


def _fmt_ulp(v) -> str:
    v = float(v) if not isinstance(v, str) else float(v)
    return f"{v:.3g}" if math.isfinite(v) else str(v)


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


class _ExplainFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """Defaults shown for options that have one; description and epilog kept as written."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or action.required:
            return action.help
        return super()._get_help_string(action)


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

    p = sub.add_parser(
        "explain", help="attribute one point's error to the named steps of a variant's recipe",
        formatter_class=_ExplainFormatter,
        description="Evaluate a variant at one point and print the exact gradient, the computed one with\n"
                    "its ulp error, and one row per step of the recipe: its computed value (hex), its exact\n"
                    "value (decimal), its local error (Herbie's: the step on the correctly rounded exact\n"
                    "values of its inputs, in ulps), the cause, the condition number and whether it\n"
                    "reaches the output; then the top cause in one sentence (precision.attribution).\n"
                    "Floats are hex (exact) or decimal; pred, dout and weight are rounded to --format,\n"
                    "alpha and gamma to float32. --json prints the same as one object.",
        epilog="example (q = 1 - p cancels at large x):\n"
               "  precision explain kernel --pred 10 --target 0\n"
               "  precision explain kernel-G7 --pred 0 --target 0 --weight 0x1p-127 --dout 0x1p30 "
               "--machine npu+ftz --json")
    p.add_argument("variant", help="a recipe variant: kernel, kernel-G5, naive+G2, golden, mmcv, candidate, ...")
    p.add_argument("--pred", required=True, help="logit x")
    p.add_argument("--target", required=True, help="raw selector t (0 positive, 1 negative term)")
    p.add_argument("--alpha", default="0.25", help="alpha (float32)")
    p.add_argument("--gamma", default="2.0", help="gamma (float32)")
    p.add_argument("--weight", default=None, help="element weight (absent when not given)")
    p.add_argument("--dout", default="1.0", help="upstream gradient")
    p.add_argument("--count", default="1", help="N*C of the mean reduction (coef = 1/count)")
    p.add_argument("--machine", default="ieee", help="machine spec: ieee, numpy, npu, npu+ftz, ...")
    p.add_argument("--format", default="fp32", choices=["fp32", "fp16"], help="dtype of pred, dout and weight")
    p.add_argument("--json", action="store_true", help="print one JSON object (steps, top_cause, ...)")
    p.set_defaults(func=_cmd_explain)

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
