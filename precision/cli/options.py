"""The command line's parser pieces, its path checks (before any work, nothing created) and its value
parsers: one-line errors, defaults shown, an example per command."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import textwrap
import tomllib
from pathlib import Path

import numpy as np

from precision.engine.cache import default_cache_dir
from precision.engine.operators import DEFAULT_OPERATOR, OPERATORS, OPTIONAL, get_operator, search_order
from precision.errors import ParameterError, PrecisionError
from precision.io.files import probe_writable
from precision.recipes.target_kinds import target_kind

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

class UsageError(PrecisionError):
    """Raised by the argument parser instead of printing usage and exiting."""


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors, and negative hex floats read as values."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # "-0x1.4p+0" and "-1e-5" are values, not options (argparse consults this private matcher)
        self._negative_number_matcher = re.compile(r"^-(?:\d|\.\d)")

    def error(self, message):  # one line, exit 2 (handled in main)
        command = self.prog.removeprefix("precision").strip()
        where = f"{command}: " if command else ""
        raise UsageError(f"{where}{message} (see '{self.prog} --help')")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and examples as written; every option's default shown after its help."""

    def _get_help_string(self, action):
        text = action.help or ""
        shown = "default" in text  # the help already says it ("default: every core")
        no_default = action.default is None or action.default is False or action.default == argparse.SUPPRESS
        if shown or no_default or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def add_command(sub, name: str, *, help: str, description: str, examples, func,
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
    p = sub.add_parser(name, help=help, description=paragraphs(description), epilog=examples_epilog(examples, paragraphs(setup) if setup else ""),
                       formatter_class=HelpFormatter)
    p.set_defaults(func=func)
    return p


def paragraphs(text: str) -> str:
    """Each line of ``text`` as a paragraph filled to 79 columns, a blank line between paragraphs."""
    return "\n\n".join(textwrap.fill(line, 79) for line in text.split("\n"))


def examples_epilog(lines, note: str = "") -> str:
    """The "examples:" epilog of a help page (command lines indented, as typed)."""
    return "examples:\n" + "\n".join(f"  {line}" for line in lines) + (f"\n\n{note}" if note else "")


class Given(argparse.Action):
    """Store the value and record that the option was given (``args.given``), to catch ignored options."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given = getattr(namespace, "given", frozenset()) | {self.dest}


# ---------------------------------------------------------------------------
# Paths: checked before any work, nothing created
# ---------------------------------------------------------------------------

def require_dir(path, option: str, *, create: bool = True) -> Path:
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


def require_file(path, option: str) -> Path:
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


def require_output_file(path, option: str) -> Path:
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


def require_cache_dir(args, *, create: bool = True) -> Path | None:
    """The oracle cache folder of a command (None with ``--no-cache``), checked like any folder."""
    if getattr(args, "no_cache", False):
        return None
    if args.cache_dir:
        return require_dir(args.cache_dir, "--cache-dir", create=create)
    option = "$PRECISION_CACHE_DIR" if os.environ.get("PRECISION_CACHE_DIR") else "the user cache folder"
    return require_dir(default_cache_dir(), option, create=create)


def load_cli_plugins(args) -> tuple:
    """The ``--plugin`` files of a command: checked like any input file, then loaded by the command's operator
    (one-line error for an operator without plugins); their paths."""
    paths = tuple(require_file(p, "--plugin") for p in (getattr(args, "plugin", None) or ()))
    op = command_operator(args)
    if paths and op.load_plugins is OPTIONAL["load_plugins"]:
        raise ParameterError(f"--plugin: the operator {args.operator!r} takes no plugin files")
    op.load_plugins(paths)
    return paths


def load_run_plugins(run_dir: Path) -> None:
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
    get_operator(meta.get("operator", DEFAULT_OPERATOR)).load_plugins([f for f in files if f.is_file()])


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


def parse_int(text: str, name: str, positive: bool = False) -> int:
    try:
        value = int(text, 0)
    except ValueError:
        raise ParameterError(f"--{name}={text!r} is not an integer") from None
    if positive and value <= 0:
        raise ParameterError(f"--{name}={text!r}; expected a positive integer (N*C for mean, 1 otherwise)")
    return value


def parse_target(text: str, op, formats=()) -> int | float:
    """``--target`` as the operator's target kind reads it (:mod:`precision.recipes.target_kinds`): an integer
    for a binary target (``--target=...`` is not an integer otherwise), a finite decimal or hex float for a real
    one, exact in each of ``formats`` (``fp16``, ``fp32``) when given."""
    kind = target_kind(op)
    if not kind.real:
        return parse_int(text, "target")
    value = kind.parse(text, "--target")
    kind.check_exact(value, formats, "--target")
    return value


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}; expected a positive integer")
    return value


# ---------------------------------------------------------------------------
# The operator (--operator) and its attributes as options (--alpha, --gamma)
# ---------------------------------------------------------------------------

#: The attribute options: every operator's attributes (the default operator's default values and help where two
#: operators share a name; SigmoidFocalLossGrad's and SigmoidFocalLoss's are both alpha and gamma).
OPTION_ATTRIBUTES = {name: (op.ATTRIBUTES[name], op.ATTRIBUTE_HELP[name])
                      for op in (get_operator(n) for n in sorted(OPERATORS, key=lambda n: n != DEFAULT_OPERATOR))
                      for name in op.ATTRIBUTES}


def add_operator_option(p) -> None:
    """``--operator NAME``: which operator the command is about (default: the default operator)."""
    p.add_argument("--operator", default=DEFAULT_OPERATOR, choices=list(OPERATORS),
                   help=f"the operator: {', '.join(OPERATORS)} (default: {DEFAULT_OPERATOR})")


def command_operator(args):
    """The interface of the command's ``--operator`` (the default operator for a command without the option)."""
    return get_operator(getattr(args, "operator", DEFAULT_OPERATOR))


def add_attribute_options(p, *, action=None, help_suffix: str = "(float32)") -> None:
    """One option per attribute of the operators (``--alpha``, ``--gamma``), defaulting to its default value."""
    for name, (default, text) in OPTION_ATTRIBUTES.items():
        kwargs = {"action": action} if action is not None else {}
        p.add_argument(f"--{name}", default=repr(float(default[0])), help=f"{text} {help_suffix}", **kwargs)


def add_attribute_lists(p) -> None:
    """One repeatable option per attribute (``--gamma G [G ...]``), in search order, for a search over them."""
    for name in search_order(get_operator(DEFAULT_OPERATOR)):
        default = " ".join(f"{v:g}" for v in OPTION_ATTRIBUTES[name][0])
        p.add_argument(f"--{name}", nargs="+", action="extend", metavar=name[0].upper(),
                       help=f"{name} values, float32 (default: {default})")


def add_attribute_ranges(p) -> None:
    """One option per attribute for a search over a real range instead of a list (``--gamma-range LO HI``)."""
    for name in search_order(get_operator(DEFAULT_OPERATOR)):
        p.add_argument(f"--{name}-range", nargs=2, metavar=("LO", "HI"),
                       help=f"search {name} as every float32 value in [LO, HI] instead of --{name}'s values "
                            f"(default: none, the values of --{name})")


def parse_attribute_ranges(args) -> dict:
    """``{"gamma": (lo, hi), ...}``: the attributes given as ranges (exact floats; the hunt rounds the ends to
    float32); one-line error when an attribute has both its values and its range."""
    out = {}
    for name in search_order(command_operator(args)):
        ends = getattr(args, f"{name}_range", None)
        if ends is None:
            continue
        if getattr(args, name, None):
            raise ParameterError(f"--{name} and --{name}-range: give its values or its range, not both")
        out[name] = tuple(parse_exact_float(v, f"{name}-range") for v in ends)
    return out


def parse_attributes(args) -> dict:
    """The command's operator's attribute options' values, rounded to float32 as the operator's attributes are
    (one-line error when one overflows float32)."""
    names = command_operator(args).ATTRIBUTES
    out = {}
    with np.errstate(over="ignore"):
        for name in names:
            out[name] = float(np.float32(parse_exact_float(getattr(args, name), name)))
    if not all(math.isfinite(v) for v in out.values()):
        raise ParameterError(f"{'/'.join(f'--{n}' for n in names)} overflow float32; expected finite float32 "
                             "attribute values")
    return out


def parse_attribute_lists(args) -> dict:
    """``{"gammas": [...], "alphas": [...]}``: the values of each repeatable attribute option (its default when
    not given), as the hunt takes them (exact floats; the hunt rounds them to float32)."""
    op = command_operator(args)
    return {f"{name}s": [parse_exact_float(v, name) for v in (getattr(args, name) or
                                                              [repr(float(d)) for d in op.ATTRIBUTES[name]])]
            for name in search_order(op)}
