"""The ``precision`` command: the top layer, which may import every other (the products, the engine and
the operator through its interface, ``precision.operators.sigmoid_focal_loss_grad``).

Exit statuses: 0 success; 1 a budget failed or regressed (``gate``) or the
two oracles disagree (``oracle --check``); 2 a usage or input error,
reported as one line on stderr (``precision: error: ...``) with no traceback
and nothing written; 130 interrupted (Ctrl-C): one line on stderr, nothing
half-written, and the same command resumes.

Adding a subcommand
-------------------
1. Write ``_cmd_<name>(args) -> int`` (the exit status).  Check every path
   an option names *before any work* with :func:`require_dir`,
   :func:`require_file` or :func:`require_output_file`; they only look,
   never create, so an error leaves nothing behind.  Raise a
   :class:`~precision.errors.PrecisionError` for anything the user can fix.
2. Register it in :func:`_build_parser` with :func:`add_command`: a one-line
   help, a description and at least one example.  Give every option a help
   text; :class:`HelpFormatter` appends "(default: ...)" when the option
   has a default, and an option without one says in its help what happens
   when it is omitted ("default: ...").
3. :func:`main` does the rest: a ``PrecisionError`` (or an ``OSError`` that
   a path raised after its check) becomes one line and exit 2, Ctrl-C becomes
   :data:`INTERRUPTED` and exit 130 (:mod:`precision.__main__` catches it
   during the imports too).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import warnings

from precision import __version__
from precision.cli.options import (DEFAULT_DIFF_DIR, DEFAULT_REPORTS_DIR, DEFAULT_RUNS_DIR, DEFAULT_SCORE_DIR, Given,
                                   HelpFormatter, Parser, UsageError, add_attribute_lists, add_attribute_options,
                                   add_attribute_ranges, add_command, add_operator_option, examples_epilog, paragraphs,
                                   parse_exact_float, positive_int)
from precision.cli.point_commands import cmd_explain, cmd_oracle
from precision.cli.run_commands import (cmd_cache, cmd_diff, cmd_gate, cmd_hunt, cmd_report, cmd_run, cmd_score,
                                        cmd_variants)
from precision.engine.cache import CacheIntegrityWarning
from precision.errors import INTERRUPTED, PrecisionError
from precision.products.score_outputs import FAIL_ON, SCORE_BUDGET_METRICS

__all__ = ["main", "parse_exact_float", "INTERRUPTED", "DEFAULT_RUNS_DIR", "DEFAULT_REPORTS_DIR", "DEFAULT_DIFF_DIR",
           "DEFAULT_SCORE_DIR"]


# ---------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------

def _add_plugin_option(p) -> None:
    """``--plugin FILE`` (repeatable): a Python file registering more variants (precision.operators.sigmoid_focal_loss_grad.plugins)."""
    p.add_argument("--plugin", action="append", metavar="FILE",
                   help="a Python file that registers variants with precision.register_variant; repeatable "
                        "(default: none; see docs/plugins.md)")


def _add_study_run_options(p) -> None:
    """The options of a command that runs a study: run folder, oracle cache, worker processes."""
    p.add_argument("--out", metavar="DIR", help="run folder (default: out/<study name>)")
    cache = p.add_mutually_exclusive_group()
    cache.add_argument("--cache-dir", metavar="DIR",
                       help="oracle cache folder (default: $PRECISION_CACHE_DIR, else the user cache folder, "
                            "~/.cache/precision on Linux)")
    cache.add_argument("--no-cache", action="store_true", help="neither read nor write the oracle cache")
    p.add_argument("--workers", type=positive_int, metavar="N",
                   help="worker processes, at most one per unit of work (more than the cores: a note); 1 runs in "
                        "this process (default: every core)")
    _add_memory_limit_option(p)


def _add_memory_limit_option(p) -> None:
    """``--memory-limit SIZE``: the bound a study's estimated memory at peak must stay under (precision.engine.estimate)."""
    p.add_argument("--memory-limit", metavar="SIZE",
                   help="refuse a study whose estimated memory at peak passes SIZE (16G, 512M, 2T) before anything "
                        "is allocated or written (default: $PRECISION_MEMORY_LIMIT, else half this machine's memory)")


def _build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="precision", formatter_class=HelpFormatter,
        description=paragraphs(
            "Numerical-precision analysis of SigmoidFocalLossGrad: a certified oracle, emulated fp16/fp32 "
            "machines, ULP scores of every implementation variant, review reports and a CI gate.\n"
            "'precision COMMAND --help' shows a command's options, their defaults and examples."),
        epilog=examples_epilog(
            ["precision run studies/quick.toml && precision report quick    # the main job",
             "precision oracle --pred -0x1.4p+0 --target 0",
             "precision gate --junit gate.xml"],
            note=paragraphs("exit statuses: 0 success; 1 a budget failed or regressed (gate) or the oracles "
                             "disagree (oracle --check); 2 a usage or input error, one line on stderr, nothing "
                             "written; 130 interrupted (Ctrl-C): rerun the same command to resume.")))
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)

    p = add_command(
        sub, "oracle", func=cmd_oracle,
        help="the exact gradient at one point, and its correct roundings",
        description="Print the inputs as exact hex floats, the exact gradient to 40 significant digits and "
                    "its correctly rounded fp16, bf16, fp32 and fp64 values (hex and decimal).\n"
                    "Floats are hex (exact) or decimal (nearest float64); alpha and gamma are rounded to "
                    "float32, as the operator's attributes are. A note follows when pred, weight or dout is "
                    "not exactly an fp16, bf16 or fp32 value.\n"
                    "With --check: compare the mpmath oracle with the independent Arb oracle (python-flint) "
                    "bit for bit on random points plus hard cases; exit 0 on zero disagreements, 1 otherwise.",
        examples=["precision oracle --pred -0x1.4p+0 --target 0 --alpha 0.25 --gamma 2 --dout -0x1.8p+0 "
                  "--count 6",
                  "precision oracle --check --points 300 --seed 1",
                  "precision oracle --operator sigmoid_focal_loss --pred 16 --target 1 --gamma 2.5"])
    p.add_argument("--pred", action=Given, metavar="X", help="the logit x (required unless --check)")
    p.add_argument("--target", action=Given, metavar="T",
                   help="raw selector t: any integer, 0 the positive-class term, 1 the negative; an operator "
                        "with a real target (its TARGET_KIND) takes a decimal or hex float (required unless --check)")
    add_operator_option(p)
    add_attribute_options(p, action=Given)
    p.add_argument("--weight", action=Given, default="1.0", help="element weight")
    p.add_argument("--dout", action=Given, default="1.0", help="incoming gradient")
    p.add_argument("--count", action=Given, default="1", metavar="N",
                   help="N*C for reduction mean (coefficient: the exact 1/count), 1 for sum and none")
    p.add_argument("--check", action="store_true", help="cross-check the mpmath and Arb oracles instead")
    p.add_argument("--points", action=Given, default="10000", metavar="N", help="random points for --check")
    p.add_argument("--seed", action=Given, default="0", help="random seed for --check")

    p = add_command(
        sub, "variants", func=cmd_variants,
        help="list the registered implementation variants",
        description="List every registered implementation variant (naive, naive+G1..G8, kernel, "
                    "kernel-G1..G8, golden, mmcv, candidate, ...) with a one-line description, and the "
                    "parameterized forms kernel[G5=<tau>] and kernel[tile=<n>]. Study files name variants "
                    "this way. With --plugin, the variants a plugin file registers too, marked with its file.",
        examples=["precision variants", "precision variants | grep kernel",
                  "precision variants --plugin examples/my_kernel.py",
                  "precision variants --operator sigmoid_focal_loss"])
    add_operator_option(p)
    _add_plugin_option(p)

    p = add_command(
        sub, "explain", func=cmd_explain,
        help="attribute one point's error to the named steps of a variant's recipe",
        description="Evaluate a variant at one point and print the exact value (the gradient; the loss with "
                    "--operator sigmoid_focal_loss), the computed one with its ulp error, and one row per step of "
                    "the recipe: its computed value (hex), its exact value (decimal), its local error (Herbie's: "
                    "the step on the correctly rounded exact values of its inputs, in ulps), the cause, the "
                    "condition number and whether it reaches the output; then the top cause in one sentence "
                    "(precision.analysis.attribution).\n"
                    "Floats are hex (exact) or decimal; pred, dout and weight are rounded to --format, alpha and "
                    "gamma to float32; --dout and --count only for an operator with those inputs. --json prints "
                    "the same as one object.",
        examples=["precision explain kernel --pred 10 --target 0    # q = 1 - p cancels at large x",
                  "precision explain kernel-G7 --pred 0 --target 0 --weight 0x1p-127 --dout 0x1p30 "
                  "--machine npu+ftz --json",
                  "precision explain kernel --operator sigmoid_focal_loss --pred 16 --target 1 --gamma 2.5 "
                  "--machine npu    # the forward loss: Ln(1 + e) and q = 1 - p lose it at x = 16"])
    p.add_argument("variant", help="a recipe variant: kernel, kernel-G5, naive+G2, golden, mmcv, candidate, ...")
    p.add_argument("--pred", required=True, help="logit x (required)")
    p.add_argument("--target", required=True, help="raw selector t, 0 the positive and 1 the negative term; an "
                                                   "operator with a real target takes a decimal or hex float exact "
                                                   "in --format (required)")
    add_operator_option(p)
    add_attribute_options(p)
    p.add_argument("--weight", default=None, help="element weight (default: absent)")
    p.add_argument("--dout", default="1.0", help="upstream gradient")
    p.add_argument("--count", default="1", help="N*C of the mean reduction (coef = 1/count)")
    p.add_argument("--machine", default="ieee", help="machine spec: ieee, numpy, npu, npu+ftz, ...")
    p.add_argument("--format", default="fp32", choices=["fp32", "fp16"], help="dtype of pred, dout and weight")
    p.add_argument("--json", action="store_true", help="print one JSON object (steps, top_cause, ...)")
    _add_plugin_option(p)


    p = add_command(
        sub, "run", func=cmd_run,
        help="run a study file: oracle, every variant on every machine, scores, tables",
        description="Run a study file: the exact oracle at every point, every variant on every machine, "
                    "the ULP scores and the tables (summary.csv first), written to the run folder. An "
                    "interrupted run (Ctrl-C, kill) resumes where it stopped when the same command is run "
                    "again: finished tasks are kept in DIR/chunks/. With --report, also write the review "
                    "report (as 'precision report'); the last line names the file to open.\n"
                    "The first line is the study's plan: points, tasks, scored outputs, oracle terms, memory at "
                    "peak and the estimated time on this machine; a study whose memory passes --memory-limit is "
                    "refused before anything is allocated or written. --dry-run prints the plan and stops. "
                    "--json FILE writes the run's summary (plan, counts, notes, exit status) as JSON.",
        examples=["precision run studies/quick.toml",
                  "precision run studies/quick.toml --dry-run",
                  "precision run studies/quick.toml --report",
                  "precision run studies/quick.toml --out out/quick-cold --workers 2 --cache-dir out/cache",
                  "precision run studies/quick.toml --out out/quick-plugin --plugin examples/my_kernel.py"])
    p.add_argument("study", metavar="STUDY.toml", help="a study file, e.g. studies/quick.toml")
    _add_study_run_options(p)
    p.add_argument("--scheduler", metavar="ADDR",
                   help="Dask scheduler tcp://host:port, or 'local' for a LocalCluster "
                        "(default: a local process pool)")
    p.add_argument("--report", action="store_true",
                   help="also write the review report to --report-out/<study name>/")
    p.add_argument("--report-out", action=Given, metavar="DIR", default=str(DEFAULT_REPORTS_DIR),
                   help="folder of reports for --report")
    p.add_argument("--dry-run", action="store_true",
                   help="print the study's plan (its size and estimated time) and stop: nothing is drawn beyond "
                        "small point sets, nothing written")
    p.add_argument("--json", metavar="FILE",
                   help="write the run's summary as JSON here: plan, counts, notes, exit status (default: not "
                        "written)")
    _add_plugin_option(p)

    p = add_command(
        sub, "gate", func=cmd_gate,
        help="check a study's scores against error budgets (exit 1 on a failure)",
        description="Run the gate study, check every budget of the budgets file and print one greppable "
                    "PASS/FAIL line per (budget, metric), then REGRESSION lines (worse than --baseline), "
                    "TIGHTEN lines and a summary. Exit 0 when every budget passes and nothing regressed, "
                    "1 otherwise, 2 on a usage or input error.",
        examples=["precision gate",
                  "precision gate --baseline gate_baseline.json --update-baseline    # once, then commit it",
                  "precision gate --junit gate.xml --baseline gate_baseline.json     # in CI"])
    p.add_argument("--budgets", default="studies/budgets.toml", metavar="FILE", help="budgets file")
    p.add_argument("--study", metavar="FILE", help="study file (default: the budgets file's [gate] study)")
    p.add_argument("--baseline", metavar="FILE",
                   help="baseline JSON: report regressions against it (default: none)")
    p.add_argument("--update-baseline", action="store_true",
                   help="write the observed values to --baseline (which must be given)")
    p.add_argument("--junit", metavar="FILE", help="write JUnit XML here (default: not written)")
    p.add_argument("--json", metavar="FILE", help="write the results as JSON here (default: not written)")
    p.add_argument("--propose", metavar="FILE",
                   help="write a budgets file with limits from this run here (default: not written)")
    p.add_argument("--quiet", action="store_true",
                   help="print only the FAIL and REGRESSION lines and the summary (default: every line)")
    _add_study_run_options(p)
    _add_plugin_option(p)

    p = add_command(
        sub, "report", func=cmd_report,
        help="build a review report (Markdown, HTML, plots, tables) from a run folder",
        description="Read the run folder RUNS/<study> written by 'precision run' and write OUT/<study>/: "
                    "report.md, a self-contained report.html, plots (PNG, SVG), tables (CSV) and "
                    "findings.json. --all regenerates every report under OUT, running a study first when "
                    "its run folder is missing. The committed reports live in reports/: maintainers "
                    "regenerate them with --out reports.",
        examples=["precision report quick",
                  "precision report --all    # every report under out/reports again"])
    p.add_argument("study", nargs="?", metavar="STUDY", help="study name, e.g. quick or guard_ablation")
    p.add_argument("--all", action="store_true", help="every report under --out (or the default studies)")
    p.add_argument("--runs", default=str(DEFAULT_RUNS_DIR), metavar="DIR", help="folder of run folders")
    p.add_argument("--out", default=str(DEFAULT_REPORTS_DIR), metavar="DIR", help="folder of reports")
    p.add_argument("--studies", default="studies", metavar="DIR", help="folder of study files for --all")
    _add_memory_limit_option(p)
    _add_plugin_option(p)

    p = add_command(
        sub, "hunt", func=cmd_hunt,
        help="search for the inputs of largest ulp error (fp32 hunted, fp16 exhausted)",
        description="A black-box search for the inputs where a variant's ulp error is largest: seeded "
                    "sampling, then local search in ordinal space around the worst points (neighbours at "
                    "distances 1, 2, 4, ..., restarts), on the local cores. fp16 preds (63,488) are simply "
                    "exhausted. Prints the worst points (inputs as hex floats and decimal, error in ulp, "
                    "computed and correctly rounded values in hex) and a summary line labelling the maximum "
                    "exhaustive or hunted (with its budget); with --corpus FILE it appends the preds not correctly "
                    "rounded to that worst-case corpus (the gate replays studies/worst_cases.txt) and writes "
                    "nothing anywhere else. weight is absent, dout 1, reduction none. A hunted maximum is a "
                    "lower bound: on one slice scanned exhaustively (candidate, ieee, t 1, alpha 0.25, gamma -3, "
                    "outside the neighbourhood: best 3.483725 ulp), three 60 s hunts came within 1 % of it "
                    "(README, 'How far a hunt can be trusted'). With --alpha-range and --gamma-range the attributes "
                    "are searched as every float32 value of a real range, not only a grid's values (the search "
                    "climbs in them too; fp16 is then hunted); such a hunt is weaker: three 60 s hunts of the "
                    "candidate over alpha [0, 1] x gamma [-3, 6] found 4.01, 4.51 and 5.16 ulp where 300 s "
                    "hunts found 5.17 (one within 2.5 %, two 22 % and 13 % below), so run several seeds, and "
                    "longer.",
        examples=["precision hunt candidate --gamma -3 --outside-neighbourhood --seconds 5",
                  "precision hunt candidate --alpha-range 0 1 --gamma-range -3 6 --target 1 --seconds 5",
                  "precision hunt kernel --format fp16 --gamma 2 --json",
                  "precision hunt kernel --gamma -2 --points 20000 --corpus out/worst_cases.txt",
                  "precision hunt kernel --operator sigmoid_focal_loss --gamma 2.5 --target 1 --points 20000"])
    p.add_argument("variant", help="a registry name (see `precision variants`)")
    p.add_argument("--machine", default="npu",
                   help="machine spec: ieee, numpy, npu, suffixes like +ftz (default: npu)")
    p.add_argument("--format", default="fp32", choices=["fp32", "fp16"],
                   help="pred and output format; fp16 is exhausted (default: fp32)")
    add_operator_option(p)
    add_attribute_lists(p)
    add_attribute_ranges(p)
    p.add_argument("--target", nargs="+", action="extend", metavar="T",
                   help="raw selectors; an operator with a real target takes decimal or hex floats, exact in "
                        "--format (default: 0 1)")
    p.add_argument("--outside-neighbourhood", action="store_true",
                   help="only points outside the root neighbourhood, gamma < -1 and C >= 4 "
                        "(precision.operators.sigmoid_focal_loss_grad.bracket)")
    p.add_argument("--seconds", help="wall-time budget of an fp32 hunt in seconds, start-up excluded (default: 60)")
    p.add_argument("--points",
                   help="point budget instead of --seconds: reproducible for a seed on any machine and worker count "
                        "(default: none, the time budget applies)")
    p.add_argument("--seed", default="0", help="seed of the search streams (default: 0)")
    p.add_argument("--workers", type=positive_int, help="worker processes (default: every core)")
    p.add_argument("--top", default="10", help="worst finite points to print (default: 10)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (max_ulp, witness, kind, seconds, points, top, ...)")
    p.add_argument("--corpus", metavar="FILE",
                   help="worst-case corpus file to append the witnesses to, created if missing (default: none, "
                        "the hunt writes nothing)")
    _add_plugin_option(p)


    p = add_command(
        sub, "diff", func=cmd_diff,
        help="compare two runs of one study point by point (exit 1 when a variant got worse)",
        description="Compare two run folders of the same study (the same points; each written by 'precision run' "
                    "with [run] per_point = \"all\"): for every variant present in both, per machine, format and "
                    "region, the paired statistics of RUN_B against RUN_A on the same points (changed, better, "
                    "worse, specials fixed and caused, sign tests, verdict: the reports' rule), the new worst "
                    "points, and the variants present in one run only. Prints one line per variant, BETTER, WORSE, "
                    "SAME or MIXED (ADDED/REMOVED when in one run only), and a summary line; writes a report "
                    "(report.md, a self-contained report.html, tables/*.csv) to --out.\n"
                    "Exit status: 1 when some variant's verdict on some machine and format (over every region) is "
                    "hurts AND its worst loss there (max_loss_bits, the largest rise of log2(1 + ulp error) over "
                    "points finite in both runs; infinite when RUN_B made an output NaN, inf, of the wrong sign or "
                    "a lost inf) exceeds --tolerance; 0 otherwise; 2 on bad input (runs of different studies, a "
                    "run that did not keep every point).",
        examples=["precision diff out/before/plugin_study out/after/plugin_study",
                  "precision diff out/before/plugin_study out/after/plugin_study --tolerance 1 --out out/diff/change"],
        setup="The runs of these examples, of a study that keeps every point: precision run "
              "examples/plugin_study.toml --out out/before/plugin_study, then (after a change) precision run "
              "examples/plugin_study.toml --out out/after/plugin_study")
    p.add_argument("run_a", metavar="RUN_A", help="the reference run folder (before the change)")
    p.add_argument("run_b", metavar="RUN_B", help="the new run folder (after the change)")
    p.add_argument("--out", default=str(DEFAULT_DIFF_DIR), metavar="DIR",
                   help="report folder, replaced as a whole (a folder holding other files is refused)")
    p.add_argument("--tolerance", default="0", metavar="BITS",
                   help="bits of worst loss a 'hurts' verdict may reach without failing (exit 1 only beyond it)")

    p = add_command(
        sub, "score", func=cmd_score,
        help="score outputs produced elsewhere (a device, another framework) against the oracle",
        description="Score the gradient some implementation returned (a device run, another framework) against "
                    "the certified oracle, element by element, with the checks of the operator contract "
                    "(pred/dout/weight float16 or float32 [N, C], target int32, outputs of pred's dtype and shape). "
                    "Inputs: an .npz holding pred, target and optionally dout (default: ones) and weight (default: "
                    "absent), or a .npy of pred with --target (and --dout, --weight) .npy files. Outputs: a .npy, "
                    "or a raw little-endian dump described by --dtype (and --shape, default pred's shape).\n"
                    "Writes the tables of a run (summary.csv, by_region.csv, groups.csv with classes and hex "
                    "witnesses), points.parquet (every element over 1 ulp), score.json and a report to --out. With "
                    "--compare-with VARIANT, that variant is evaluated on the same inputs on --machine and compared "
                    "with the outputs point by point (the outputs are 'with', the emulation 'without': helps = the "
                    "outputs are more accurate): comparisons.csv and disagreements.csv, every element where they "
                    "differ. That is how a machine model is validated against hardware.\n"
                    "Exit status: 0, or 1 when a --budget METRIC=LIMIT or a --fail-on CONDITION fails (one PASS/FAIL "
                    "line each after the score lines; the result folder is written either way), 2 on bad input.",
        examples=["precision score --inputs out/device/inputs.npz --outputs out/device/grad.npy --reduction sum",
                  "precision score --inputs out/device/inputs.npz --outputs out/device/grad.bin --dtype float16 "
                  "--shape 256,80 --reduction sum --label grad_raw --compare-with kernel --machine npu",
                  "precision score --inputs out/device/inputs.npz --outputs out/device/grad.npy --reduction sum "
                  "--budget max_ulp=1000 --fail-on specials    # in CI: exit 1 past the budget"],
        setup="The files of these examples (a stand-in device run): python3 examples/device_dump.py out/device")
    p.add_argument("--inputs", required=True, metavar="FILE",
                   help=".npz with pred, target[, dout, weight], or a .npy of pred (required)")
    p.add_argument("--outputs", required=True, metavar="FILE",
                   help="the gradient to score: a .npy, or a raw dump with --dtype (required)")
    p.add_argument("--target", metavar="FILE",
                   help="target .npy (int32; an operator with a real target: pred's dtype), with a .npy --inputs "
                        "(default: none)")
    p.add_argument("--dout", metavar="FILE", help="dout .npy, with a .npy --inputs (default: ones)")
    p.add_argument("--weight", metavar="FILE", help="weight .npy, with a .npy --inputs (default: absent)")
    p.add_argument("--shape", metavar="N,C", help="shape of a raw --outputs dump (default: pred's shape)")
    p.add_argument("--dtype", choices=["float16", "float32"],
                   help="dtype of a raw --outputs dump, little-endian (default: none; required for a raw dump)")
    add_operator_option(p)
    add_attribute_options(p, help_suffix="the outputs were computed with (float32)")
    p.add_argument("--reduction", choices=["none", "sum", "mean"],
                   help="reduction attribute (mean: coefficient 1/(N*C)); one of the operator's REDUCTIONS "
                        "(default: mean, or the operator's first when it takes no mean: none for sigmoid_focal_loss)")
    p.add_argument("--label", help="name of the outputs in the tables (default: the --outputs file's stem)")
    p.add_argument("--out", metavar="DIR",
                   help="result folder, replaced as a whole (default: out/score/<label>)")
    p.add_argument("--compare-with", metavar="VARIANT",
                   help="also compare the outputs point by point with this variant evaluated on the same inputs "
                        "(default: none)")
    p.add_argument("--machine", action=Given, default="npu",
                   help="the machine of --compare-with: ieee, numpy, npu, npu+ftz, ...")
    p.add_argument("--budget", action="append", metavar="METRIC=LIMIT",
                   help="fail (exit 1) when the outputs' METRIC passes LIMIT; repeatable; metrics: "
                        f"{', '.join(SCORE_BUDGET_METRICS)} (share_correct and allclose_share are lower limits) "
                        "(default: none)")
    p.add_argument("--fail-on", action="append", metavar="CONDITION", choices=list(FAIL_ON),
                   help=f"fail (exit 1) when CONDITION holds; repeatable: {', '.join(FAIL_ON)} (disagree and hurts "
                        "need --compare-with) (default: none)")
    _add_plugin_option(p)

    p = add_command(
        sub, "cache", func=cmd_cache,
        help="show or clear the cache of oracle terms and scored results",
        description="Show (info) or empty (clear) the persistent cache: the oracle's focal terms A(x, gamma) "
                    "(one file per gamma, keyed by the exact bits of x and the oracle version) and the scored "
                    "task results (one file per variant or comparison and task, keyed by the task's inputs and "
                    "the digest of the code that computes it), with a size line per kind. Neither action "
                    "creates the folder.",
        examples=["precision cache info", "precision cache clear --cache-dir out/cache"])
    p.add_argument("action", choices=["info", "clear"], help="info: the folder and a size line per kind; clear: "
                                                              "remove every term shard and every result")
    p.add_argument("--cache-dir", metavar="DIR",
                   help="cache folder (default: $PRECISION_CACHE_DIR, else the user cache folder, "
                        "~/.cache/precision on Linux)")
    parser.commands = dict(sub.choices)  # name -> its parser (the "no command" message, tests)
    return parser


#: The exit status of a command whose output pipe was closed (``precision oracle ... | head -3``): 128 + SIGPIPE,
#: what a shell reports for a program that SIGPIPE ended, with nothing printed.
BROKEN_PIPE = 141


@contextlib.contextmanager
def _warnings_as_notes():
    """Python warnings during a command as ``note:`` lines on stderr, one per distinct message (a warning in
    a worker process is printed there, at once).  Corrupt files (:class:`CacheIntegrityWarning`) are one line
    in all, printed at the end: how many were recomputed, the first named."""
    seen, corrupt = set(), []
    pid = os.getpid()

    def show(message, category, filename, lineno, file=None, line=None):
        text = " ".join(str(message).split())
        if issubclass(category, CacheIntegrityWarning) and os.getpid() == pid:
            corrupt.append(text)
            return
        if text not in seen or os.getpid() != pid:
            seen.add(text)
            print(f"note: {text}", file=sys.stderr, flush=True)

    with warnings.catch_warnings():
        warnings.simplefilter("default")
        warnings.showwarning = show
        try:
            yield
        finally:
            if corrupt:
                more = f" (and {len(corrupt) - 1} more file{'s' if len(corrupt) > 2 else ''} like it)" \
                    if len(corrupt) > 1 else ""
                print(f"note: {corrupt[0]}{more}", file=sys.stderr, flush=True)


def main(argv=None) -> int:
    """Run the command line; returns the exit status (0, 1, 2, 130 or 141; see the module docstring)."""
    parser = _build_parser()
    try:
        with _warnings_as_notes():
            args = parser.parse_args(argv)
            if args.command is None:
                raise UsageError(f"no command; expected one of {', '.join(parser.commands)} "
                                  "(see 'precision --help')")
            return args.func(args)
    except PrecisionError as exc:
        message = str(exc).replace("\n", " ")
        print(f"precision: error: {message}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader closed the pipe (| head): nothing more to say, and nothing on stderr; the rest of the output,
        # flushed at exit, goes nowhere
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return BROKEN_PIPE
    except OSError as exc:
        # a path that passed the checks before the work and failed later (a disk filled, a folder made
        # read-only meanwhile): one line and exit 2, never a traceback or the gate's exit 1
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"precision: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        # every writer is atomic (temporary file, then rename) and finished tasks are kept,
        # so nothing is half-written and the same command resumes
        print(INTERRUPTED, file=sys.stderr)
        return 130
