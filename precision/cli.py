"""The ``precision`` command.

Exit statuses: 0 success; 1 a budget failed or regressed (``gate``) or the
two oracles disagree (``oracle --check``); 2 a usage or input error,
reported as one line on stderr (``precision: error: ...``) with no traceback
and nothing written; 130 interrupted (Ctrl-C): one line on stderr, nothing
half-written, and the same command resumes.

Adding a subcommand
-------------------
1. Write ``_cmd_<name>(args) -> int`` (the exit status).  Check every path
   an option names *before any work* with :func:`_require_dir`,
   :func:`_require_file` or :func:`_require_output_file`; they only look,
   never create, so an error leaves nothing behind.  Raise a
   :class:`~precision.errors.PrecisionError` for anything the user can fix.
2. Register it in :func:`_build_parser` with :func:`_add_command`: a one-line
   help, a description and at least one example.  Give every option a help
   text; :class:`_HelpFormatter` appends "(default: ...)" when the option
   has a default, and an option without one says in its help what happens
   when it is omitted ("default: ...").
3. :func:`main` does the rest: a ``PrecisionError`` (or an ``OSError`` that
   a path raised after its check) becomes one line and exit 2, Ctrl-C becomes
   :data:`INTERRUPTED` and exit 130 (:mod:`precision.__main__` catches it
   during the imports too).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import textwrap
import tomllib
from pathlib import Path

import numpy as np
from mpmath import libmp

from precision import __version__

from precision.sigmoid_focal_loss_grad import oracle
from precision.sigmoid_focal_loss_grad.attribution import attribute, describe
from precision.engine.cache import ResultCache, TermCache, default_cache_dir
from precision.products.diff import diff_runs, write_diff
from precision.errors import INTERRUPTED, ParameterError, PrecisionError
from precision.io.files import probe_writable
from precision.exact.formats import FORMATS, round_to_format
from precision.products.gate import append_to_corpus, run_gate
from precision.sigmoid_focal_loss_grad.guards import get_variant, list_variants
from precision.products.hunt import hunt
from precision.machine import get_machine
from precision.engine.plugins import load_plugins, variant_source
from precision.products.report import build_report, report_all
from precision.products.report.page import require_replaceable
from precision.products.score_outputs import (load_inputs, load_outputs, parse_shape, score_outputs,
                                              validate_score_inputs, write_score)
from precision.engine.study import load_study
from precision.engine.sweep import run_study

__all__ = ["main", "parse_exact_float", "INTERRUPTED", "DEFAULT_RUNS_DIR", "DEFAULT_REPORTS_DIR", "DEFAULT_DIFF_DIR",
           "DEFAULT_SCORE_DIR"]

#: Folder of run folders: ``precision run`` writes ``out/<study name>/``.
DEFAULT_RUNS_DIR = Path("out")
#: Folder of reports written by ``precision report`` and ``run --report``;
#: outside the committed ``reports/`` (maintainers pass ``--out reports``).
DEFAULT_REPORTS_DIR = Path("out/reports")
#: Where ``precision diff`` writes its report unless ``--out`` says otherwise.
DEFAULT_DIFF_DIR = Path("out/diff")
#: Folder of ``precision score`` results: ``out/score/<label>/``.
DEFAULT_SCORE_DIR = Path("out/score")


# ---------------------------------------------------------------------------
# Parser: one-line errors, defaults shown, an example per command
# ---------------------------------------------------------------------------

class _UsageError(PrecisionError):
    """Raised by the argument parser instead of printing usage and exiting."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors, and negative hex floats read as values."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # "-0x1.4p+0" and "-1e-5" are values, not options (argparse consults this private matcher)
        self._negative_number_matcher = re.compile(r"^-(?:\d|\.\d)")

    def error(self, message):  # one line, exit 2 (handled in main)
        command = self.prog.removeprefix("precision").strip()
        where = f"{command}: " if command else ""
        raise _UsageError(f"{where}{message} (see '{self.prog} --help')")


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and examples as written; every option's default shown after its help."""

    def _get_help_string(self, action):
        text = action.help or ""
        shown = "default" in text  # the help already says it ("default: every core")
        no_default = action.default is None or action.default is False or action.default == argparse.SUPPRESS
        if shown or no_default or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def _add_command(sub, name: str, *, help: str, description: str, examples, func,
                 setup: str = "") -> argparse.ArgumentParser:
    """Register a subcommand with its one-line help, description, examples and handler.

    Parameters
    ----------
    sub : argparse subparsers action
        The top-level parser's ``add_subparsers()`` result.
    name : str
        The command name (``precision NAME``).
    help : str
        One line for ``precision --help``.
    description : str
        What the command does, for ``precision NAME --help``.
    examples : sequence of str
        Command lines shown under "examples:" (at least one).
    func : callable
        ``func(args) -> int``, the exit status.
    setup : str
        What makes the examples' input files, printed under them
        (``tests/test_examples.py`` runs it, then the examples, as printed).
    """
    if not examples:
        raise ValueError(f"command {name!r} needs at least one example")
    p = sub.add_parser(name, help=help, description=_paragraphs(description), epilog=_examples(examples, _paragraphs(setup) if setup else ""),
                       formatter_class=_HelpFormatter)
    p.set_defaults(func=func)
    return p


def _paragraphs(text: str) -> str:
    """Each line of ``text`` as a paragraph filled to 79 columns, a blank line between paragraphs."""
    return "\n\n".join(textwrap.fill(line, 79) for line in text.split("\n"))


def _examples(lines, note: str = "") -> str:
    """The "examples:" epilog of a help page (command lines indented, as typed)."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines) + (f"\n\n{note}" if note else "")


class _Given(argparse.Action):
    """Store the value and record that the option was given (``args.given``), to catch ignored options."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given = getattr(namespace, "given", frozenset()) | {self.dest}


# ---------------------------------------------------------------------------
# Paths: checked before any work, nothing created
# ---------------------------------------------------------------------------

def _require_dir(path, option: str, *, create: bool = True) -> Path:
    """Check that ``path`` can serve as the folder ``option`` names; create nothing.

    Parameters
    ----------
    path : str or Path
    option : str
        How the user gave the path (``"--out"``, ``"$PRECISION_CACHE_DIR"``),
        for the message.
    create : bool
        True (an output folder): an existing writable folder, or a path whose
        nearest existing ancestor is a writable folder (the command creates
        it when it writes).  False (an input folder): an existing folder.

    Returns
    -------
    Path

    Raises
    ------
    ParameterError
        One line naming the option and the path: a file where a folder is
        expected, a missing input folder, a folder that cannot be created or
        written.
    """
    path = Path(path)
    shown = f"{option}={path}"
    if path.exists():
        if not path.is_dir():
            raise ParameterError(f"{shown} is a file; expected a folder (give a folder path or move the file)")
        if create and not _can_create_in(path):
            raise ParameterError(f"{shown}: the folder is not writable; expected a folder you can write to")
        return path
    if path.is_symlink():
        raise ParameterError(f"{shown} is a broken symbolic link; expected a folder")
    if not create:
        raise ParameterError(f"{shown}: no such folder; expected an existing folder")
    ancestor = next(p for p in path.absolute().parents if p.exists())
    if not ancestor.is_dir():
        raise ParameterError(f"{shown}: cannot create the folder, {ancestor} is a file; expected a folder path")
    if not _can_create_in(ancestor):
        raise ParameterError(f"{shown}: cannot create the folder, {ancestor} is not writable")
    return path


def _can_create_in(folder: Path) -> bool:
    """Whether a file can really be created in ``folder`` (a probe file, made and removed: permission bits say
    nothing of read-only mounts, /proc or immutable folders, nor for root)."""
    try:
        probe_writable(folder)
    except OSError:
        return False
    return True


def _require_file(path, option: str) -> Path:
    """Check that ``path`` is an existing readable file (an input); raises ParameterError otherwise."""
    path = Path(path)
    shown = f"{option}={path}"
    if path.is_dir():
        raise ParameterError(f"{shown} is a folder; expected a file")
    if not path.is_file():
        raise ParameterError(f"{shown}: no such file; expected an existing file")
    if not os.access(path, os.R_OK):
        raise ParameterError(f"{shown}: the file is not readable")
    return path


def _require_output_file(path, option: str) -> Path:
    """Check that a file can be written at ``path``: not a folder, in an existing folder where a file can really
    be created (every file is written as a temporary sibling renamed over ``path``), and not itself locked."""
    path = Path(path)
    shown = f"{option}={path}"
    if path.is_dir():
        raise ParameterError(f"{shown} is a folder; expected a file path")
    folder = path.absolute().parent
    if not folder.is_dir():
        raise ParameterError(f"{shown}: the folder {path.parent} does not exist; create it or give another path")
    if not _can_create_in(folder) or (path.exists() and not os.access(path, os.W_OK)):
        raise ParameterError(f"{shown}: cannot write there (permission denied)")
    return path


def _require_cache_dir(args, *, create: bool = True) -> Path | None:
    """The oracle cache folder of a command (None with ``--no-cache``), checked like any folder."""
    if getattr(args, "no_cache", False):
        return None
    if args.cache_dir:
        return _require_dir(args.cache_dir, "--cache-dir", create=create)
    option = "$PRECISION_CACHE_DIR" if os.environ.get("PRECISION_CACHE_DIR") else "the user cache folder"
    return _require_dir(default_cache_dir(), option, create=create)


def _load_cli_plugins(args) -> tuple:
    """The ``--plugin`` files of a command: checked like any input file, then loaded; their paths."""
    paths = tuple(_require_file(p, "--plugin") for p in (getattr(args, "plugin", None) or ()))
    load_plugins(paths)
    return paths


def _load_run_plugins(run_dir: Path) -> None:
    """Load the plugins of the study a run folder was made from (its ``[run] plugins``), when they still exist.

    A report names the run's variants; a plugin variant is known only once its file is loaded.
    """
    try:
        meta = json.loads((run_dir / "run.json").read_text())
        study_file = Path(meta["study_file"])
        table = tomllib.loads(study_file.read_text()).get("run", {})
    except (OSError, KeyError, TypeError, ValueError):
        return
    rels = table.get("plugins", []) if isinstance(table, dict) else []
    files = [study_file.parent / rel for rel in rels if isinstance(rel, str)]
    load_plugins([f for f in files if f.is_file()])


# ---------------------------------------------------------------------------
# Parsing values
# ---------------------------------------------------------------------------

def parse_exact_float(text: str, name: str) -> float:
    """Parse a hex float (``-0x1.4p+0``) exactly, or a decimal to the nearest float64.

    Raises ParameterError (naming the argument) for anything else, NaN and inf included.

    Examples
    --------
    >>> parse_exact_float("-0x1.4p+0", "pred")
    -1.25
    >>> parse_exact_float("0.1", "pred").hex()
    '0x1.999999999999ap-4'
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


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}; expected a positive integer")
    return value


# ---------------------------------------------------------------------------
# precision oracle
# ---------------------------------------------------------------------------

#: The options that describe one point (``precision oracle`` without ``--check``).
_POINT_OPTIONS = ("pred", "target", "alpha", "gamma", "weight", "dout", "count")
#: The options of ``--check`` only.
_CHECK_OPTIONS = ("points", "seed")


def _cmd_oracle(args) -> int:
    given = getattr(args, "given", frozenset())
    if args.check:
        ignored = [f"--{name}" for name in _POINT_OPTIONS if name in given]
        if ignored:
            raise ParameterError(f"oracle --check takes no point ({', '.join(ignored)} given); it checks random "
                                 "points and hard cases: drop --check to evaluate one point")
        return _cmd_oracle_check(args)
    ignored = [f"--{name}" for name in _CHECK_OPTIONS if name in given]
    if ignored:
        raise ParameterError(f"oracle: {', '.join(ignored)} applies to --check only; add --check or drop it")
    if args.pred is None or args.target is None:
        raise _UsageError("oracle: the following arguments are required: --pred, --target (or --check) "
                          "(see 'precision oracle --help')")
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
    lines += [_representability_note(name, value) for name, value in (("pred", x), ("weight", weight),
                                                                        ("dout", dout))]
    print("\n".join(line for line in lines if line))
    return 0


#: The tensor formats a kernel's pred/weight/dout can have.
_INPUT_FORMATS = ("fp16", "bf16", "fp32")


def _representability_note(name: str, value: float) -> str:
    """A ``note:`` line when ``value`` is not exactly a value of every input format, else ''.

    The oracle evaluates at the float64 value given; a kernel whose tensors
    are fp16, bf16 or fp32 receives that value rounded (or inf), so the rounded
    lines above are not what such a kernel should return for it.
    """
    inexact, overflow = [], []
    for fmt in _INPUT_FORMATS:
        rounded = float(round_to_format(np.float64(value), FORMATS[fmt]))
        if rounded != value:
            (overflow if math.isinf(rounded) else inexact).append(fmt)
    if not inexact and not overflow:
        return ""
    parts = ([f"overflows {', '.join(overflow)}"] if overflow else []) + \
            ([f"is not exact in {', '.join(inexact)}"] if inexact else [])
    return (f"note: {name}={value!r} {' and '.join(parts)}; the values above are for this float64 {name}, "
            f"which an {'/'.join(overflow + inexact)} tensor cannot hold")


def _cmd_oracle_check(args) -> int:
    """``precision oracle --check``: the mpmath and Arb oracles, bit for bit."""
    try:  # python-flint is an optional extra: imported only when asked for
        from precision.sigmoid_focal_loss_grad import oracle_arb
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


# ---------------------------------------------------------------------------
# precision variants, run, gate, report, cache
# ---------------------------------------------------------------------------


def _json_number(v):
    """A float for JSON: None for NaN, "inf"/"-inf" for infinities (JSON has neither)."""
    v = float(v)
    if math.isnan(v):
        return None
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def _cmd_explain(args) -> int:
    """``precision explain``: one point's error, step by step (precision.sigmoid_focal_loss_grad.attribution)."""
    _load_cli_plugins(args)
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
    _load_cli_plugins(args)
    rows = []
    for name, text in list_variants():
        source = variant_source(name)
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
    runs = "" if run_folder.parent == DEFAULT_RUNS_DIR else f" --runs {run_folder.parent}"
    return f"precision report {study}{runs}"


def _cmd_run(args) -> int:
    plugins = tuple(_require_file(p, "--plugin") for p in (args.plugin or ()))
    study = load_study(args.study, plugins=plugins)
    out = _require_dir(args.out or DEFAULT_RUNS_DIR / study.name, "--out")
    cache_dir = _require_cache_dir(args)
    if args.report:
        if out.name != study.name:
            raise ParameterError(f"--report with --out={out}: the report reads RUNS/{study.name}, so the run "
                                 f"folder must be named {study.name}; use --out DIR/{study.name} or drop --out")
        reports = _require_dir(args.report_out, "--report-out")
        _require_dir(reports / study.name, "--report-out")
    elif "report_out" in getattr(args, "given", frozenset()):
        raise ParameterError("--report-out applies to --report only; add --report or drop --report-out")
    result = run_study(study, out, cache_dir=cache_dir, use_cache=not args.no_cache,
                       scheduler=args.scheduler, workers=args.workers)
    print(f"{study.name}: {result.points:,} points x variants in {result.tasks} tasks "
          f"({result.tasks_reused} reused), oracle pairs {result.term_pairs:,} "
          f"({result.term_pairs_cached:,} from cache), {result.oracle_fallback} scalar fallbacks, "
          f"{result.seconds:.1f} s")
    for variant, profile in result.unsupported:
        source = variant_source(variant)
        if source is None:
            print(f"note: {variant} does not take profile {profile}; skipped there")
        else:  # a plugin's own contract, or an error on some inputs of the run (the loader's checks passed)
            print(f"note: {variant} (plugin {_shown_path(source)}) raised on profile {profile} during the run; "
                  f"skipped there (precision.evaluate on those inputs shows the error)")
    tables = f"{study.name}: tables -> {out / 'summary.csv'}"
    if not args.report:
        hint = _report_hint(study.name, out)
        print(f"{tables} (review report: {hint})" if hint else tables)
        return 0
    print(tables)
    folder = build_report(study.name, out.parent, reports)
    print(f"{study.name}: report -> {folder / 'report.html'}")
    return 0


def _cmd_gate(args) -> int:
    if args.update_baseline and not args.baseline:
        raise ParameterError("--update-baseline needs --baseline FILE, the file to write "
                             "(e.g. --baseline gate_baseline.json)")
    budgets = _require_file(args.budgets, "--budgets")
    study = _require_file(args.study, "--study") if args.study else None
    if args.update_baseline:
        baseline = _require_output_file(args.baseline, "--baseline")
    else:
        baseline = None
        if args.baseline:
            if not Path(args.baseline).exists():
                raise ParameterError(f"--baseline={args.baseline}: no such file; write it once with 'precision gate "
                                     f"--baseline {args.baseline} --update-baseline' (on the main branch) and commit it")
            baseline = _require_file(args.baseline, "--baseline")
    outputs = {option: _require_output_file(value, option) if value else None
               for option, value in (("--junit", args.junit), ("--json", args.json), ("--propose", args.propose))}
    # the default run folder, out/<gate study name>, is known once the budgets file is read
    out = _require_dir(args.out, "--out") if args.out else None
    _require_dir(DEFAULT_RUNS_DIR, "--out")
    cache_dir = _require_cache_dir(args)
    _load_cli_plugins(args)  # before the gate study names its variants
    result = run_gate(budgets, study_path=study, out_dir=out, baseline=baseline,
                      update_baseline=args.update_baseline, junit=outputs["--junit"], json_path=outputs["--json"],
                      cache_dir=cache_dir, use_cache=not args.no_cache, workers=args.workers,
                      propose=outputs["--propose"])
    for line in result.lines:
        print(line.text())
    for text in result.regressions + result.tighten:
        print(text)
    print(result.summary)
    return result.exit_status


def _cmd_report(args) -> int:
    if args.all == bool(args.study):
        raise ParameterError("report: give one study name or --all (not both, not neither)")
    out = _require_dir(args.out, "--out")
    if args.all:
        runs = _require_dir(args.runs, "--runs")  # missing run folders are run into it
        studies = _require_dir(args.studies, "--studies", create=False)
        _load_cli_plugins(args)
        for study, folder, ran in report_all(runs, out, studies_dir=studies):
            print(f"{study}: {'ran the study, ' if ran else ''}report -> {folder / 'report.html'}")
        return 0
    runs = Path(args.runs)
    if runs.exists():  # a missing run folder gets build_report's own message (run the study first)
        _require_dir(runs, "--runs", create=False)
    if args.study and "/" not in args.study and not args.study.startswith("."):
        _require_dir(out / args.study, "--out")
    _load_cli_plugins(args)
    if args.study and "/" not in args.study and not args.study.startswith("."):
        _load_run_plugins(runs / args.study)
    folder = build_report(args.study, runs, out)
    print(f"{args.study}: report -> {folder / 'report.html'}")
    return 0


def _cmd_hunt(args) -> int:
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
    corpus = _require_output_file(args.corpus, "--corpus") if args.corpus else None
    _load_cli_plugins(args)
    result = hunt(args.variant, machine=args.machine, fmt=args.format, gammas=gammas, alphas=alphas,
                  targets=targets, outside_neighbourhood=args.outside_neighbourhood, seconds=seconds, points=points,
                  seed=seed, workers=args.workers, top=top)
    added = 0
    if corpus is not None and result.corpus_preds():
        note = (f"hunt witness, {result.variant} {result.fmt} {result.machine}, "
                f"gamma {' '.join(f'{g:g}' for g in result.gammas)}, seed {result.seed}")
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


def _cmd_diff(args) -> int:
    """``precision diff``: two runs of one study compared point by point (precision.products.diff)."""
    run_a = _require_dir(args.run_a, "RUN_A", create=False)
    run_b = _require_dir(args.run_b, "RUN_B", create=False)
    out = require_replaceable(_require_dir(args.out, "--out"), "tables/diff.csv")
    tolerance = _parse_tolerance(args.tolerance)
    result = diff_runs(run_a, run_b, tolerance=tolerance)
    command = f"precision diff {run_a} {run_b} --tolerance {tolerance:g} --out {out}"
    folder = write_diff(result, out, command)
    print("\n".join(result.lines()))
    print(f"diff: report -> {folder / 'report.html'}")
    return result.exit_status


def _cmd_score(args) -> int:
    """``precision score``: outputs produced elsewhere against the oracle (precision.products.score_outputs)."""
    given = getattr(args, "given", frozenset())
    if "machine" in given and not args.compare_with:
        raise ParameterError("--machine applies to --compare-with only; add --compare-with VARIANT or drop --machine")
    files = {"inputs": _require_file(args.inputs, "--inputs"), "outputs": _require_file(args.outputs, "--outputs")}
    for name in ("target", "dout", "weight"):
        if getattr(args, name) is not None:
            files[name] = _require_file(getattr(args, name), f"--{name}")
    label = args.label or Path(args.outputs).stem
    if not label or any(c.isspace() or c in "/\\" for c in label) or label.startswith("."):
        raise ParameterError(f"--label={label!r}; expected a name without spaces or slashes")
    out = require_replaceable(_require_dir(args.out or DEFAULT_SCORE_DIR / label, "--out"), "score.json")
    shape = parse_shape(args.shape) if args.shape is not None else None
    _load_cli_plugins(args)
    if args.compare_with:
        get_variant(args.compare_with)
        get_machine(args.machine)
    alpha = parse_exact_float(args.alpha, "alpha")
    gamma = parse_exact_float(args.gamma, "gamma")
    arrays = load_inputs(files["inputs"], target=files.get("target"), dout=files.get("dout"),
                         weight=files.get("weight"))
    inputs = validate_score_inputs(arrays, alpha=alpha, gamma=gamma, reduction=args.reduction)
    outputs = load_outputs(files["outputs"], shape=shape, dtype=args.dtype, pred=inputs.pred)
    result = score_outputs(inputs, outputs, label=label, compare_with=args.compare_with,
                           machine=args.machine)
    command = " ".join(["precision score", *(f"--{k} {v}" for k, v in files.items()),
                        f"--alpha {args.alpha} --gamma {args.gamma} --reduction {args.reduction} --label {label}",
                        *([f"--shape {args.shape}"] if args.shape else []),
                        *([f"--dtype {args.dtype}"] if args.dtype else []),
                        *([f"--compare-with {args.compare_with} --machine {args.machine}"]
                          if args.compare_with else []),
                        *(f"--plugin {p}" for p in (args.plugin or ()))])
    folder = write_score(result, out, files, command)
    print("\n".join(result.lines()))
    print(f"score: tables -> {folder / 'summary.csv'}, report -> {folder / 'report.html'}")
    return 0


def _cmd_cache(args) -> int:
    folder = _require_cache_dir(args, create=True)
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


# ---------------------------------------------------------------------------
# The parser
# ---------------------------------------------------------------------------

def _add_plugin_option(p) -> None:
    """``--plugin FILE`` (repeatable): a Python file registering more variants (precision.engine.plugins)."""
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
    p.add_argument("--workers", type=_positive_int, metavar="N",
                   help="worker processes; 1 runs in this process (default: every core)")


def _build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="precision", formatter_class=_HelpFormatter,
        description=_paragraphs(
            "Numerical-precision analysis of SigmoidFocalLossGrad: a certified oracle, emulated fp16/fp32 "
            "machines, ULP scores of every implementation variant, review reports and a CI gate.\n"
            "'precision COMMAND --help' shows a command's options, their defaults and examples."),
        epilog=_examples(
            ["precision run studies/quick.toml && precision report quick    # the main job",
             "precision oracle --pred -0x1.4p+0 --target 0",
             "precision gate --junit gate.xml"],
            note=_paragraphs("exit statuses: 0 success; 1 a budget failed or regressed (gate) or the oracles "
                             "disagree (oracle --check); 2 a usage or input error, one line on stderr, nothing "
                             "written; 130 interrupted (Ctrl-C): rerun the same command to resume.")))
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    p = _add_command(
        sub, "oracle", func=_cmd_oracle,
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
                  "precision oracle --check --points 300 --seed 1"])
    p.add_argument("--pred", action=_Given, metavar="X", help="the logit x (required unless --check)")
    p.add_argument("--target", action=_Given, metavar="T",
                   help="raw selector t: any integer, 0 the positive-class term, 1 the negative "
                        "(required unless --check)")
    p.add_argument("--alpha", action=_Given, default="0.25", help="balance attribute (float32)")
    p.add_argument("--gamma", action=_Given, default="2.0", help="focusing attribute (float32; negatives allowed)")
    p.add_argument("--weight", action=_Given, default="1.0", help="element weight")
    p.add_argument("--dout", action=_Given, default="1.0", help="incoming gradient")
    p.add_argument("--count", action=_Given, default="1", metavar="N",
                   help="N*C for reduction mean (coefficient: the exact 1/count), 1 for sum and none")
    p.add_argument("--check", action="store_true", help="cross-check the mpmath and Arb oracles instead")
    p.add_argument("--points", action=_Given, default="10000", metavar="N", help="random points for --check")
    p.add_argument("--seed", action=_Given, default="0", help="random seed for --check")

    p = _add_command(
        sub, "variants", func=_cmd_variants,
        help="list the registered implementation variants",
        description="List every registered implementation variant (naive, naive+G1..G8, kernel, "
                    "kernel-G1..G8, golden, mmcv, candidate, ...) with a one-line description, and the "
                    "parameterized forms kernel[G5=<tau>] and kernel[tile=<n>]. Study files name variants "
                    "this way. With --plugin, the variants a plugin file registers too, marked with its file.",
        examples=["precision variants", "precision variants | grep kernel",
                  "precision variants --plugin examples/my_kernel.py"])
    _add_plugin_option(p)

    p = _add_command(
        sub, "explain", func=_cmd_explain,
        help="attribute one point's error to the named steps of a variant's recipe",
        description="Evaluate a variant at one point and print the exact gradient, the computed one with its "
                    "ulp error, and one row per step of the recipe: its computed value (hex), its exact value "
                    "(decimal), its local error (Herbie's: the step on the correctly rounded exact values of its "
                    "inputs, in ulps), the cause, the condition number and whether it reaches the output; then "
                    "the top cause in one sentence (precision.sigmoid_focal_loss_grad.attribution).\n"
                    "Floats are hex (exact) or decimal; pred, dout and weight are rounded to --format, alpha and "
                    "gamma to float32. --json prints the same as one object.",
        examples=["precision explain kernel --pred 10 --target 0    # q = 1 - p cancels at large x",
                  "precision explain kernel-G7 --pred 0 --target 0 --weight 0x1p-127 --dout 0x1p30 "
                  "--machine npu+ftz --json"])
    p.add_argument("variant", help="a recipe variant: kernel, kernel-G5, naive+G2, golden, mmcv, candidate, ...")
    p.add_argument("--pred", required=True, help="logit x (required)")
    p.add_argument("--target", required=True, help="raw selector t, 0 the positive and 1 the negative term "
                                                   "(required)")
    p.add_argument("--alpha", default="0.25", help="alpha (float32)")
    p.add_argument("--gamma", default="2.0", help="gamma (float32)")
    p.add_argument("--weight", default=None, help="element weight (default: absent)")
    p.add_argument("--dout", default="1.0", help="upstream gradient")
    p.add_argument("--count", default="1", help="N*C of the mean reduction (coef = 1/count)")
    p.add_argument("--machine", default="ieee", help="machine spec: ieee, numpy, npu, npu+ftz, ...")
    p.add_argument("--format", default="fp32", choices=["fp32", "fp16"], help="dtype of pred, dout and weight")
    p.add_argument("--json", action="store_true", help="print one JSON object (steps, top_cause, ...)")
    _add_plugin_option(p)


    p = _add_command(
        sub, "run", func=_cmd_run,
        help="run a study file: oracle, every variant on every machine, scores, tables",
        description="Run a study file: the exact oracle at every point, every variant on every machine, "
                    "the ULP scores and the tables (summary.csv first), written to the run folder. An "
                    "interrupted run (Ctrl-C, kill) resumes where it stopped when the same command is run "
                    "again: finished tasks are kept in DIR/chunks/. With --report, also write the review "
                    "report (as 'precision report'); the last line names the file to open.",
        examples=["precision run studies/quick.toml",
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
    p.add_argument("--report-out", action=_Given, metavar="DIR", default=str(DEFAULT_REPORTS_DIR),
                   help="folder of reports for --report")
    _add_plugin_option(p)

    p = _add_command(
        sub, "gate", func=_cmd_gate,
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
    _add_study_run_options(p)
    _add_plugin_option(p)

    p = _add_command(
        sub, "report", func=_cmd_report,
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
    _add_plugin_option(p)

    p = _add_command(
        sub, "hunt", func=_cmd_hunt,
        help="search for the inputs of largest ulp error (fp32 hunted, fp16 exhausted)",
        description="A black-box search for the inputs where a variant's ulp error is largest: seeded "
                    "sampling, then local search in ordinal space around the worst points (neighbours at "
                    "distances 1, 2, 4, ..., restarts), on the local cores. fp16 preds (63,488) are simply "
                    "exhausted. Prints the worst points (inputs as hex floats and decimal, error in ulp, "
                    "computed and correctly rounded values in hex) and a summary line labelling the maximum "
                    "exhaustive or hunted (with its budget); with --corpus FILE it appends the preds not correctly "
                    "rounded to that worst-case corpus (the gate replays studies/worst_cases.txt) and writes "
                    "nothing anywhere else. weight is absent, dout 1, reduction none.",
        examples=["precision hunt candidate --gamma -3 --outside-neighbourhood --seconds 5",
                  "precision hunt kernel --format fp16 --gamma 2 --json",
                  "precision hunt kernel --gamma -2 --points 20000 --corpus out/worst_cases.txt"])
    p.add_argument("variant", help="a registry name (see `precision variants`)")
    p.add_argument("--machine", default="npu",
                   help="machine spec: ieee, numpy, npu, suffixes like +ftz (default: npu)")
    p.add_argument("--format", default="fp32", choices=["fp32", "fp16"],
                   help="pred and output format; fp16 is exhausted (default: fp32)")
    p.add_argument("--gamma", nargs="+", action="extend", metavar="G", help="gamma values, float32 (default: 2)")
    p.add_argument("--alpha", nargs="+", action="extend", metavar="A", help="alpha values, float32 (default: 0.25)")
    p.add_argument("--target", nargs="+", action="extend", metavar="T", help="raw selectors (default: 0 1)")
    p.add_argument("--outside-neighbourhood", action="store_true",
                   help="only points outside the root neighbourhood, gamma < -1 and C >= 4 "
                        "(precision.sigmoid_focal_loss_grad.bracket)")
    p.add_argument("--seconds", help="wall-time budget of an fp32 hunt in seconds, start-up excluded (default: 60)")
    p.add_argument("--points",
                   help="point budget instead of --seconds: reproducible for a seed on any machine and worker count "
                        "(default: none, the time budget applies)")
    p.add_argument("--seed", default="0", help="seed of the search streams (default: 0)")
    p.add_argument("--workers", type=_positive_int, help="worker processes (default: every core)")
    p.add_argument("--top", default="10", help="worst finite points to print (default: 10)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object (max_ulp, witness, kind, seconds, points, top, ...)")
    p.add_argument("--corpus", metavar="FILE",
                   help="worst-case corpus file to append the witnesses to, created if missing (default: none, "
                        "the hunt writes nothing)")
    _add_plugin_option(p)


    p = _add_command(
        sub, "diff", func=_cmd_diff,
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

    p = _add_command(
        sub, "score", func=_cmd_score,
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
                    "differ. That is how a machine model is validated against hardware.",
        examples=["precision score --inputs out/device/inputs.npz --outputs out/device/grad.npy --reduction sum",
                  "precision score --inputs out/device/inputs.npz --outputs out/device/grad.bin --dtype float16 "
                  "--shape 256,80 --reduction sum --label grad_raw --compare-with kernel --machine npu"],
        setup="The files of these examples (a stand-in device run): python3 examples/device_dump.py out/device")
    p.add_argument("--inputs", required=True, metavar="FILE",
                   help=".npz with pred, target[, dout, weight], or a .npy of pred (required)")
    p.add_argument("--outputs", required=True, metavar="FILE",
                   help="the gradient to score: a .npy, or a raw dump with --dtype (required)")
    p.add_argument("--target", metavar="FILE", help="target .npy (int32), with a .npy --inputs (default: none)")
    p.add_argument("--dout", metavar="FILE", help="dout .npy, with a .npy --inputs (default: ones)")
    p.add_argument("--weight", metavar="FILE", help="weight .npy, with a .npy --inputs (default: absent)")
    p.add_argument("--shape", metavar="N,C", help="shape of a raw --outputs dump (default: pred's shape)")
    p.add_argument("--dtype", choices=["float16", "float32"],
                   help="dtype of a raw --outputs dump, little-endian (default: none; required for a raw dump)")
    p.add_argument("--alpha", default="0.25", help="alpha attribute the outputs were computed with (float32)")
    p.add_argument("--gamma", default="2.0", help="gamma attribute (float32)")
    p.add_argument("--reduction", default="mean", choices=["none", "sum", "mean"],
                   help="reduction attribute (mean: coefficient 1/(N*C))")
    p.add_argument("--label", help="name of the outputs in the tables (default: the --outputs file's stem)")
    p.add_argument("--out", metavar="DIR",
                   help="result folder, replaced as a whole (default: out/score/<label>)")
    p.add_argument("--compare-with", metavar="VARIANT",
                   help="also compare the outputs point by point with this variant evaluated on the same inputs "
                        "(default: none)")
    p.add_argument("--machine", action=_Given, default="npu",
                   help="the machine of --compare-with: ieee, numpy, npu, npu+ftz, ...")
    _add_plugin_option(p)

    p = _add_command(
        sub, "cache", func=_cmd_cache,
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


def main(argv=None) -> int:
    """Run the command line; returns the exit status (0, 1, 2 or 130; see the module docstring)."""
    parser = _build_parser()
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            raise _UsageError(f"no command; expected one of {', '.join(parser.commands)} "
                              "(see 'precision --help')")
        return args.func(args)
    except PrecisionError as exc:
        message = str(exc).replace("\n", " ")
        print(f"precision: error: {message}", file=sys.stderr)
        return 2
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


if __name__ == "__main__":  # pragma: no cover  (``python -m precision`` is the entry point; see __main__)
    raise SystemExit(main())
