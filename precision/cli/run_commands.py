"""``precision variants``, ``run``, ``gate``, ``report``, ``hunt``, ``diff``, ``score`` and ``cache``: the commands
about studies and runs."""

from __future__ import annotations

import json
import os
from pathlib import Path

from precision.cli.options import (DEFAULT_RUNS_DIR, DEFAULT_SCORE_DIR, command_operator, load_cli_plugins,
                                   load_run_plugins, parse_attribute_lists, parse_attribute_ranges, parse_exact_float,
                                   parse_int, parse_target, require_cache_dir, require_dir, require_file,
                                   require_output_file)
from precision.engine.cache import ResultCache, TermCache
from precision.engine.estimate import memory_limit, plan_study
from precision.io.files import atomic_open
from precision.io.shell import shell_join
from precision.engine.operators import DEFAULT_OPERATOR, get_operator
from precision.engine.study import load_study
from precision.engine.sweep import run_study
from precision.errors import ParameterError
from precision.machine import get_machine
from precision.products.diff import diff_runs, write_diff
from precision.products.gate import append_to_corpus, run_gate
from precision.products.hunt import hunt
from precision.products.report import build_report, report_all
from precision.products.report.page import require_replaceable
from precision.products.score_outputs import (SCORE_BUDGET_METRICS, check_score, load_inputs, load_outputs,
                                              parse_shape, score_outputs, validate_score_inputs, write_score)

# ---------------------------------------------------------------------------
# precision variants, run, gate, report, hunt, diff, score, cache
# ---------------------------------------------------------------------------

def cmd_variants(args) -> int:
    load_cli_plugins(args)
    op = command_operator(args)
    rows = []
    for name, text in op.list_variants():
        source = op.variant_source(name)
        rows.append((name, text if source is None else f"{text} [plugin {_shown_path(source)}]"))
    width = max(len(name) for name, _ in rows)
    print("\n".join(f"{name:<{width}}  {text}" for name, text in rows))
    return 0


def _shown_path(path: Path) -> str:
    rel = os.path.relpath(path)
    return str(path) if rel.startswith("..") else rel


def _report_hint(study: str, run_folder: Path) -> str:
    """The ``precision report`` command that reads ``run_folder``, or '' when it cannot."""
    if run_folder.name != study:
        return ""
    runs = [] if run_folder.parent == DEFAULT_RUNS_DIR else ["--runs", str(run_folder.parent)]
    return shell_join(["precision", "report", study, *runs])


def _print_plan(plan) -> None:
    print(plan.line(), flush=True)


def cmd_run(args) -> int:
    plugins = tuple(require_file(p, "--plugin") for p in (args.plugin or ()))
    study = load_study(args.study, plugins=plugins)
    limit = memory_limit(args.memory_limit)
    json_path = require_output_file(args.json, "--json") if args.json else None
    if args.dry_run:
        for option in ("report", "scheduler"):
            if getattr(args, option):
                raise ParameterError(f"--dry-run runs nothing; drop --{option.replace('_', '-')} or --dry-run")
        plan = plan_study(study, args.workers, args.scheduler)
        print(plan.line(), flush=True)
        plan.check_memory(*limit, study.path)  # the run would be refused: so is the dry run (exit 2)
        if json_path is not None:
            _write_json(json_path, {"study": study.name, "study_file": study.path, "dry_run": True,
                                    "plan": plan.to_json(), "memory_limit_bytes": limit[0], "exit_status": 0})
        return 0
    out = require_dir(args.out or DEFAULT_RUNS_DIR / study.name, "--out")
    cache_dir = require_cache_dir(args)
    if args.report:
        if out.name != study.name:
            raise ParameterError(f"--report with --out={out}: the report reads RUNS/{study.name}, so the run "
                                 f"folder must be named {study.name}; use --out DIR/{study.name} or drop --out")
        reports = require_dir(args.report_out, "--report-out")
        require_dir(reports / study.name, "--report-out")
    elif "report_out" in getattr(args, "given", frozenset()):
        raise ParameterError("--report-out applies to --report only; add --report or drop --report-out")
    plans = []

    def on_plan(plan):
        plans.append(plan)
        _print_plan(plan)
    result = run_study(study, out, cache_dir=cache_dir, use_cache=not args.no_cache,
                       scheduler=args.scheduler, workers=args.workers, memory_limit=limit, on_plan=on_plan)
    reused = f"{result.tasks_reused} reused" + (
        f", {result.tasks_recomputed} recomputed: {'its' if result.tasks_recomputed == 1 else 'their'} chunk "
        f"{'was' if result.tasks_recomputed == 1 else 'were'} corrupt" if result.tasks_recomputed else "")
    print(f"{study.name}: {result.points:,} points x variants in {result.tasks} tasks "
          f"({reused}), oracle pairs {result.term_pairs:,} "
          f"({result.term_pairs_cached:,} from cache), {result.oracle_fallback} scalar fallbacks, "
          f"{result.seconds:.1f} s")
    notes = []
    op = get_operator(study.operator)
    for variant, profile in result.unsupported:
        source = op.variant_source(variant)
        if source is None:
            notes.append(f"{variant} does not take profile {profile}; skipped there")
        else:  # a plugin's own contract, or an error on some inputs of the run (the loader's checks passed)
            notes.append(f"{variant} (plugin {_shown_path(source)}) raised on profile {profile} during the run; "
                         f"skipped there (precision.evaluate on those inputs shows the error)")
    for note in notes:
        print(f"note: {note}")
    tables = f"{study.name}: tables -> {out / 'summary.csv'}"
    if not args.report:
        hint = _report_hint(study.name, out)
        print(f"{tables} (review report: {hint})" if hint else tables)
    else:
        print(tables)
        folder = build_report(study.name, out.parent, reports)
        print(f"{study.name}: report -> {folder / 'report.html'}")
    if json_path is not None:
        _write_json(json_path, {
            "study": study.name, "study_file": study.path, "dry_run": False, "out": str(out),
            "plan": plans[0].to_json() if plans else None, "memory_limit_bytes": limit[0],
            "points": result.points, "tasks": result.tasks, "tasks_reused": result.tasks_reused,
            "tasks_recomputed": result.tasks_recomputed, "term_pairs": result.term_pairs,
            "term_pairs_cached": result.term_pairs_cached, "oracle_fallback": result.oracle_fallback,
            "workers": result.workers, "seconds": round(result.seconds, 3),
            "notes": [*result.notes, *notes], "unsupported": [list(u) for u in result.unsupported],
            "tables": str(out / "summary.csv"), "exit_status": 0})
    return 0


def _write_json(path: Path, data: dict) -> None:
    """A JSON summary, written atomically."""
    with atomic_open(path) as fh:
        fh.write(json.dumps(data, indent=2, sort_keys=True) + "\n")


def cmd_gate(args) -> int:
    if args.update_baseline and not args.baseline:
        raise ParameterError("--update-baseline needs --baseline FILE, the file to write "
                             "(e.g. --baseline gate_baseline.json)")
    budgets = require_file(args.budgets, "--budgets")
    study = require_file(args.study, "--study") if args.study else None
    if args.update_baseline:
        baseline = require_output_file(args.baseline, "--baseline")
    else:
        baseline = None
        if args.baseline:
            if not Path(args.baseline).exists():
                raise ParameterError(f"--baseline={args.baseline}: no such file; write it once with 'precision gate "
                                     f"--baseline {args.baseline} --update-baseline' (on the main branch) and commit it")
            baseline = require_file(args.baseline, "--baseline")
    outputs = {option: require_output_file(value, option) if value else None
               for option, value in (("--junit", args.junit), ("--json", args.json), ("--propose", args.propose))}
    # the default run folder, out/<gate study name>, is known once the budgets file is read
    out = require_dir(args.out, "--out") if args.out else None
    require_dir(DEFAULT_RUNS_DIR, "--out")
    cache_dir = require_cache_dir(args)
    limit = memory_limit(args.memory_limit)
    load_cli_plugins(args)  # before the gate study names its variants
    result = run_gate(budgets, study_path=study, out_dir=out, baseline=baseline,
                      update_baseline=args.update_baseline, junit=outputs["--junit"], json_path=outputs["--json"],
                      cache_dir=cache_dir, use_cache=not args.no_cache, workers=args.workers,
                      propose=outputs["--propose"], memory_limit=limit,
                      on_plan=None if args.quiet else _print_plan)
    for line in result.lines:
        if not args.quiet or line.status == "FAIL":
            print(line.text())
    for text in result.regressions + ([] if args.quiet else result.tighten):
        print(text)
    print(result.summary)
    return result.exit_status


def cmd_report(args) -> int:
    if args.all == bool(args.study):
        raise ParameterError("report: give one study name or --all (not both, not neither)")
    out = require_dir(args.out, "--out")
    if args.all:
        runs = require_dir(args.runs, "--runs")  # missing run folders are run into it
        studies = require_dir(args.studies, "--studies", create=False)
        load_cli_plugins(args)
        for study, folder, what in report_all(runs, out, studies_dir=studies, memory_limit=memory_limit(
                args.memory_limit), on_plan=_print_plan):
            if what.startswith("kept"):
                print(f"{study}: report {what} -> {folder / 'report.html'}")
            else:
                print(f"{study}: {'ran the study, ' if what == 'ran' else ''}report -> {folder / 'report.html'}")
        print(f"review: decisions -> {out / 'index.html'} (open first)")
        return 0
    runs = Path(args.runs)
    if runs.exists():  # a missing run folder gets build_report's own message (run the study first)
        require_dir(runs, "--runs", create=False)
    if args.study and "/" not in args.study and not args.study.startswith("."):
        require_dir(out / args.study, "--out")
    load_cli_plugins(args)
    if args.study and "/" not in args.study and not args.study.startswith("."):
        load_run_plugins(runs / args.study)
    folder = build_report(args.study, runs, out)
    print(f"{args.study}: report -> {folder / 'report.html'}")
    return 0


def cmd_hunt(args) -> int:
    if args.seconds is not None and args.points is not None:
        raise ParameterError("hunt: give --seconds or --points, not both")
    seconds = None
    if args.seconds is not None:
        seconds = parse_exact_float(args.seconds, "seconds")
        if seconds <= 0:
            raise ParameterError(f"--seconds={args.seconds!r}; expected a positive number of seconds")
    points = None
    if args.points is not None:
        points = parse_int(args.points, "points")
        if points <= 0:
            raise ParameterError(f"--points={args.points!r}; expected a positive integer")
    seed = parse_int(args.seed, "seed")
    if seed < 0:
        raise ParameterError(f"--seed={args.seed!r}; expected a non-negative integer")
    top = parse_int(args.top, "top")
    if top <= 0:
        raise ParameterError(f"--top={args.top!r}; expected a positive integer")
    ranges = parse_attribute_ranges(args)
    attribute_lists = {k: v for k, v in parse_attribute_lists(args).items() if k[:-1] not in ranges}
    corpus = require_output_file(args.corpus, "--corpus") if args.corpus else None
    load_cli_plugins(args)
    op = command_operator(args)
    targets = [parse_target(v, op, [args.format]) for v in args.target or ["0", "1"]]
    if args.outside_neighbourhood and op.ROOT_NEIGHBOURHOOD_C is None:
        raise ParameterError(f"--outside-neighbourhood: the operator {args.operator!r} has no root neighbourhood "
                             "(its exact value has no cancelling factor)")
    result = hunt(args.variant, machine=args.machine, fmt=args.format, **attribute_lists, targets=targets,
                  outside_neighbourhood=args.outside_neighbourhood, seconds=seconds, points=points, seed=seed,
                  workers=args.workers, top=top, ranges=ranges, operator=args.operator)
    added = 0
    if corpus is not None and result.corpus_preds():
        note = (f"hunt witness, {result.variant} {result.fmt} {result.machine}, "
                + "".join(f"{name} {' '.join(f'{v:g}' for v in values)}, " for name, values in result.attributes
                          if name == op.TERMS_ATTRIBUTE)
                + f"seed {result.seed}")
        added = append_to_corpus(corpus, result.corpus_preds(), note)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print("\n".join(result.lines()))
        if corpus is not None:
            print(f"corpus: {added} new pred values appended to {corpus}")
    return 0


def _parse_tolerance(text: str) -> float:
    value = parse_exact_float(text, "tolerance")
    if value < 0:
        raise ParameterError(f"--tolerance={text!r}; expected a number of bits >= 0")
    return value


def cmd_diff(args) -> int:
    """``precision diff``: two runs of one study compared point by point (precision.products.diff)."""
    run_a = require_dir(args.run_a, "RUN_A", create=False)
    run_b = require_dir(args.run_b, "RUN_B", create=False)
    out = require_replaceable(require_dir(args.out, "--out"), "tables/diff.csv")
    tolerance = _parse_tolerance(args.tolerance)
    result = diff_runs(run_a, run_b, tolerance=tolerance)
    command = shell_join(["precision", "diff", str(run_a), str(run_b), "--tolerance", f"{tolerance:g}", "--out",
                          str(out)])
    folder = write_diff(result, out, command)
    print("\n".join(result.lines()))
    print(f"diff: report -> {folder / 'report.html'}")
    return result.exit_status


def cmd_score(args) -> int:
    """``precision score``: outputs produced elsewhere against the oracle (precision.products.score_outputs)."""
    given = getattr(args, "given", frozenset())
    if "machine" in given and not args.compare_with:
        raise ParameterError("--machine applies to --compare-with only; add --compare-with VARIANT or drop --machine")
    files = {"inputs": require_file(args.inputs, "--inputs"), "outputs": require_file(args.outputs, "--outputs")}
    for name in ("target", "dout", "weight"):
        if getattr(args, name) is not None:
            files[name] = require_file(getattr(args, name), f"--{name}")
    label = args.label or Path(args.outputs).stem
    if not label or any(c.isspace() or c in "/\\" for c in label) or label.startswith("."):
        raise ParameterError(f"--label={label!r}; expected a name without spaces or slashes")
    out = require_replaceable(require_dir(args.out or DEFAULT_SCORE_DIR / label, "--out"), "score.json")
    shape = parse_shape(args.shape) if args.shape is not None else None
    budgets = [_parse_score_budget(text) for text in (args.budget or ())]
    fail_on = list(dict.fromkeys(args.fail_on or ()))
    needs = [c for c in fail_on if c in ("disagree", "hurts")]
    if needs and not args.compare_with:
        raise ParameterError(f"--fail-on {needs[0]} compares with an emulated variant; add --compare-with VARIANT")
    load_cli_plugins(args)
    op = command_operator(args)
    if "dout" in files and "dout" not in op.INPUTS:
        raise ParameterError(f"--dout: the operator {args.operator!r} has no dout input")
    reduction = args.reduction or ("mean" if "mean" in op.REDUCTIONS else op.REDUCTIONS[0])
    if reduction not in op.REDUCTIONS:
        raise ParameterError(f"--reduction={reduction}: the operator {args.operator!r} takes "
                             f"{', '.join(op.REDUCTIONS)} (its REDUCTIONS)")
    if args.compare_with:
        op.get_variant(args.compare_with)
        get_machine(args.machine)
    attributes = {name: parse_exact_float(getattr(args, name), name) for name in op.ATTRIBUTES}
    arrays = load_inputs(files["inputs"], target=files.get("target"), dout=files.get("dout"),
                         weight=files.get("weight"))
    if "dout" not in op.INPUTS and arrays.get("dout") is not None:
        raise ParameterError(f"--inputs: {files['inputs']} holds a dout; the operator {args.operator!r} has none")
    inputs = validate_score_inputs(arrays, **attributes, reduction=reduction, operator=args.operator)
    outputs = load_outputs(files["outputs"], shape=shape, dtype=args.dtype, pred=inputs.pred)
    result = score_outputs(inputs, outputs, label=label, compare_with=args.compare_with,
                           machine=args.machine, operator=args.operator)
    named = ["--operator", args.operator] if args.operator != DEFAULT_OPERATOR else []
    command = shell_join(["precision", "score", *named, *(w for k, v in files.items() for w in (f"--{k}", v)),
                          *(w for name in op.ATTRIBUTES for w in (f"--{name}", getattr(args, name))),
                          "--reduction", reduction, "--label", label,
                          *(["--shape", args.shape] if args.shape else []),
                          *(["--dtype", args.dtype] if args.dtype else []),
                          *(["--compare-with", args.compare_with, "--machine", args.machine]
                            if args.compare_with else []),
                          *(w for p in (args.plugin or ()) for w in ("--plugin", p)),
                          *(w for b in (args.budget or ()) for w in ("--budget", b)),
                          *(w for c in fail_on for w in ("--fail-on", c))])
    folder = write_score(result, out, files, command)
    print("\n".join(result.lines()))
    checks = check_score(result, budgets, fail_on)
    for _, line in checks:
        print(line)
    print(f"score: tables -> {folder / 'summary.csv'}, report -> {folder / 'report.html'}")
    return 1 if any(status == "FAIL" for status, _ in checks) else 0


def _parse_score_budget(text: str) -> tuple:
    """``--budget METRIC=LIMIT``: (metric, limit), one-line errors naming the option."""
    metric, sep, value = text.partition("=")
    metric = metric.strip()
    if not sep or metric not in SCORE_BUDGET_METRICS:
        raise ParameterError(f"--budget={text!r}; expected METRIC=LIMIT with METRIC one of "
                             f"{', '.join(SCORE_BUDGET_METRICS)} (e.g. --budget max_ulp=1)")
    limit = parse_exact_float(value, "budget")
    if limit < 0:
        raise ParameterError(f"--budget={text!r}; expected a limit >= 0")
    return metric, limit


def cmd_cache(args) -> int:
    folder = require_cache_dir(args, create=True)
    terms = TermCache(folder, create=False)  # info and clear never create the folder
    results = ResultCache(folder, create=False)
    if args.action == "info":
        t, r = terms.info(), results.info()
        print(f"folder  {t['folder']}\n"
              f"terms   {t['shards']} shards, {t['entries']:,} entries, {t['bytes']:,} bytes\n"
              f"results {r['results']:,} files, {r['bytes']:,} bytes")
    else:
        print(f"removed {terms.clear()} term shards and {results.clear():,} result files from {terms.folder}")
    return 0
