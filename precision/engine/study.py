"""Study files: what a sweep evaluates, read from TOML and validated in one place.

A study file (``studies/NAME.toml``)::

    name = "fp16_exhaustive"          # also the default output folder name
    description = "..."
    seed = 0                          # every random point set derives from it
    operator = "sigmoid_focal_loss_grad"   # optional (the default): whose gradient (precision.engine.operators)

    [pred]                            # the pred axis: one point set, or several [[pred]] (their union)
    kind = "exhaustive"               # exhaustive | stratified | grid | list | file | normal | uniform_real
                                      # | the operator's own (its PRED_SETS: windows)
    format = "fp16"                   # values are exact in this format
    # exhaustive:   range = [lo, hi] (optional filter); fp32: streamed in blocks, the study's only set,
    #               block = 2097152 (optional: preds per block, a power of two; a block is a task's tile)
    # stratified:   per_binade = N, range = [lo, hi] (optional), both signs
    # grid:         start, stop, num, spacing = "linear" | "log"
    # list:         values = ["-0x1.4p+0", "2.5", ...]
    # file:         path = "corpus.txt" (one value a line, '#' comments; relative to the study file)
    # normal:       sigma, mean (0), count
    # uniform_real: low, high, count
    # windows:      SigmoidFocalLossGrad's, per gamma, where the bracket of A cancels: cancellation = C
    #               (default 2), per_window = N (default 100000), core = K (default 2048), range = [lo, hi]
    #               (default [-20, 20]), selector = 0 | 1 (A(x) or A(-x)); see
    #               precision.operators.sigmoid_focal_loss_grad.regions.PRED_SETS

    [points]
    target = [0, 1]                   # raw selector values
    alpha = [0.25]                    # the operator's float attributes (its ATTRIBUTES, with their defaults):
    gamma = [2.0]                     # float32 values; negatives allowed
    weight = ["none"]                 # "none" (absent) or numbers, or tables of seeded random values:
    dout = [1.0]                      # { random = N, low = "0x1p-149", high = "0x1p-100" } (N float32
                                      # values log-uniform in [low, high], random mantissas)
    reduction = "none"                # none | sum | mean
    count = 1                         # mean only: N*C, the coefficient is 1/count
    regions = [-20, -8, 0, 8, 20]     # pred region edges for the tables
    region_names = ["..."]            # optional: one name per region (len(regions) + 1)
    separate = ["q-hole"]             # optional: regions kept out of the pooled ("all") comparisons
    bracket_bands = [4, 16]           # optional: edges on the bracket's cancellation factor C
                                      # (precision.operators.sigmoid_focal_loss_grad.bracket); adds a bracket column and by_bracket.csv
    profiles = ["fp16", "fp32"]       # pred dtype (= output format), or "pred/dout/weight"

    [run]
    variants = ["all"]                # registry names, or "all"
    machines = ["ieee", "npu"]          # machine specs ("npu+ftz", ...)
    per_point = "all"                 # all | incorrect | over_1ulp | worst | none
    compare = [["candidate", "kernel"]]   # optional: (with, without) pairs compared point by point,
                                      # besides the guard and G5-threshold pairs found from the names
    threshold_search = true           # optional: a run stage of the operator (its RUN_STAGES); this one places
                                      # the best G5 threshold by bisection (needs kernel[G5=always], never)
    attribution = { variants = ["kernel"], points = 8 }   # optional: attribute kept points to recipe steps
                                      # (true: every variant, every kept row; points = "kept" or N per group)
    plugins = ["my_kernel.py"]        # optional: plugin files registering more variants (relative to
                                      # this file; precision.operators.sigmoid_focal_loss_grad.plugins), loaded before the names are checked

    [report]                          # optional: the report's sections, in order (precision.products.report.sections)
    sections = ["verdicts", "dominant", "summary"]
    [report.q]                        # optional: options of one section
    x = [1.0, 8.0, 16.0]

Unknown keys, wrong types and empty axes raise
:class:`~precision.errors.StudyFileError` naming the file, the key and what
was expected.
"""

from __future__ import annotations

import hashlib
import math
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from precision.errors import ParameterError, PrecisionError, StudyFileError
from precision.exact.formats import FORMATS, round_to_format
from precision.engine.operators import DEFAULT_OPERATOR, OPERATORS, get_operator
from precision.machine import get_machine
from precision.recipes.target_kinds import target_kind

__all__ = ["PredAxis", "Profile", "Study", "ReportSpec", "load_study", "parse_study", "PER_POINT_MODES",
           "AttributionSpec", "region_labels", "STREAMED_FORMATS", "STREAM_BLOCK", "SECTION_OPTIONS", "DEFAULT_SECTIONS", "section_options"]

#: The engine's pred kinds; an operator adds its own (its ``PRED_SETS``, drawn per value of its terms attribute).
PRED_KINDS = ("exhaustive", "stratified", "grid", "list", "file", "normal", "uniform_real")
#: Which distribution each pred kind samples (uniform over floats and over reals weigh errors differently).
SAMPLING_LABELS = {
    "exhaustive": "every float", "stratified": "uniform over binades", "grid": "grid",
    "list": "list", "file": "list", "normal": "normal over reals", "uniform_real": "uniform over reals",
}
PER_POINT_MODES = ("all", "incorrect", "over_1ulp", "worst", "none")
#: Formats whose exhaustive sets are streamed: enumerated block by block (precision.engine.stream), never held
#: whole.
STREAMED_FORMATS = ("fp32",)
#: Preds per block of a streamed set: the positions [k * STREAM_BLOCK, (k + 1) * STREAM_BLOCK) of the format's
#: finite values in ascending order (:meth:`precision.exact.formats.Format.finite_positions`), cut by the range.
#: A block is one task's tensor (pred x target), so it is the tile of a tile-level guard (G4's fallback); fp32's
#: 4,278,190,080 finite values are 2,040 blocks, none straddling zero, each a quarter binade (a subnormal block:
#: 2^21 consecutive subnormals).
STREAM_BLOCK = 1 << 21
#: per_point = "worst" keeps this many worst points per (variant, target, region) of each task.
WORST_PER_GROUP = 8
_INPUT_FORMATS = ("fp16", "fp32")
_TOP_KEYS = {"name", "description", "seed", "operator", "pred", "points", "run", "report"}
_PRED_KEYS = {
    "exhaustive": {"kind", "format", "range", "block"},
    "stratified": {"kind", "format", "range", "per_binade"},
    "grid": {"kind", "format", "start", "stop", "num", "spacing"},
    "list": {"kind", "format", "values"},
    "file": {"kind", "format", "path"},
    "normal": {"kind", "format", "sigma", "mean", "count"},
    "uniform_real": {"kind", "format", "low", "high", "count"},
}
_POINT_KEYS = {"target", "weight", "dout", "reduction", "count", "profiles", "regions", "bracket_bands",
               "region_names", "separate"}  # and the operator's attributes (its ATTRIBUTES)
_RUN_KEYS = {"variants", "machines", "per_point", "compare", "attribution", "plugins"}  # and the operator's stages


def region_labels(edges) -> list:
    """Labels of the regions cut by the edges: 'x < -20', '[-20, -8)', ..., 'x >= 20'; 'any x' without edges (one
    region, an operator's default)."""
    e = [f"{v:g}" for v in edges]
    if not e:
        return ["any x"]
    labels = [f"x < {e[0]}"] + [f"[{a}, {b})" for a, b in zip(e, e[1:])] + [f"x >= {e[-1]}"]
    return labels


#: The generic ``[report]`` sections (:mod:`precision.products.report.sections`) and their options:
#: section -> {option: (kind, default)}; kinds: number, string, numbers, strings.  An operator adds its own
#: (its ``SECTION_OPTIONS``; :func:`section_options`).
SECTION_OPTIONS = {
    "verdicts": {},
    "dominant": {"variants": ("strings", ())},
    "attribution": {},
    "summary": {},
    "extents": {},
    "ablation": {},
    "selector": {},
    "standards": {"third_party": ("string", "golden"), "third_party_machine": ("string", "ieee"),
                  "allclose": ("string", "unit_test"), "ratio_floor": ("number", 0.0), "max_ulp": ("number", 1.0),
                  "golden": ("string", "exact")},
}

#: Sections of a study file without ``[report]`` (a section with nothing to show is left out).
DEFAULT_SECTIONS = ("verdicts", "dominant", "summary", "selector")


def section_options(op) -> dict:
    """Every ``[report]`` section a study of the operator ``op`` (its interface,
    :func:`~precision.engine.operators.get_operator`) may name, with its options: the generic ones
    (:data:`SECTION_OPTIONS`), then the operator's own (its ``SECTION_OPTIONS``)."""
    return {**SECTION_OPTIONS, **op.SECTION_OPTIONS}


@dataclass(frozen=True)
class PredAxis:
    """The pred point set: a kind and its parameters (see the module docstring).

    ``per_term``: a kind of the operator's (its ``PRED_SETS``: ``windows``, the cancellation windows at each
    gamma), drawn at each value of its terms attribute; ``label``: what the kind samples.
    """

    kind: str
    format: str
    params: tuple  # sorted (key, value) pairs
    per_term: bool = False
    label: str = ""

    def get(self, key, default=None):
        return dict(self.params).get(key, default)


@dataclass(frozen=True)
class Profile:
    """Input dtypes of one run: pred (also the output format), dout, weight."""

    pred: str
    dout: str
    weight: str

    @property
    def name(self) -> str:
        return self.pred if self.pred == self.dout == self.weight else f"{self.pred}/{self.dout}/{self.weight}"


@dataclass(frozen=True)
class Study:
    """A validated study (built only by :func:`parse_study`)."""

    name: str
    description: str
    seed: int
    pred_sets: tuple  # of PredAxis; the pred values are their union
    targets: tuple
    attributes: tuple  # (name, values) of each of the operator's attributes, in its ATTRIBUTES order
    weights: tuple  # None = weight absent
    douts: tuple
    reduction: str
    count: int
    profiles: tuple
    region_edges: tuple
    variants: tuple
    machines: tuple
    per_point: str
    source: str  # the file's text, for the reproduce block and the hash
    path: str
    bracket_edges: tuple = ()  # edges on the bracket's cancellation factor C; () = no bracket bands
    compare: tuple = ()  # declared (with, without) variant pairs
    report: "ReportSpec | None" = None  # the [report] table; None = the default sections
    attribution: "AttributionSpec | None" = None  # [run] attribution; None = no attribution
    #: Absolute paths of the plugin files the study needs, in load order: its own ``[run] plugins``
    #: (relative to the study file) and those given with it (``--plugin``).  Loaded by
    #: :func:`parse_study`; a worker process loads them with :func:`precision.operators.sigmoid_focal_loss_grad.plugins.ensure_loaded`.
    plugins: tuple = ()
    region_names: tuple = ()  # one per region; () = the labels of the edges (region_labels)
    separate: tuple = ()  # region names kept out of the pooled comparisons
    stages: tuple = ()  # the operator's run stages switched on ([run] <stage> = true; its RUN_STAGES)
    operator: str = DEFAULT_OPERATOR  # the operator's name (precision.engine.operators); get_operator gives it

    @property
    def regions(self) -> list:
        """The region names, in order of x."""
        if self.region_names:
            return list(self.region_names)
        return region_labels(self.region_edges)

    def values(self, attribute: str) -> tuple:
        """The study's values of one of its operator's attributes (float32 values, as floats)."""
        return dict(self.attributes)[attribute]

    def grid(self) -> dict:
        """The grid of values besides pred every point of the study takes (JSON-ready, run.json's ``grid``):
        each attribute's values, then ``weight`` (None: absent) and ``dout``."""
        return {**{name: [float(v) for v in values] for name, values in self.attributes},
                "weight": [None if w is None else float(w) for w in self.weights],
                "dout": [float(d) for d in self.douts]}

    @property
    def term_values(self) -> tuple:
        """The values of the operator's terms attribute (its ``TERMS_ATTRIBUTE``; ``(None,)`` when it has
        none): the sweep computes and caches exact-value terms, and groups its tasks, per value."""
        name = get_operator(self.operator).TERMS_ATTRIBUTE
        return (None,) if name is None else self.values(name)

    @property
    def streamed(self) -> bool:
        """Whether the study's one pred set is an exhaustive set of a :data:`STREAMED_FORMATS` format, run in
        blocks (:mod:`precision.engine.stream`)."""
        return self.pred.kind == "exhaustive" and self.pred.format in STREAMED_FORMATS

    @property
    def stream_block(self) -> int:
        """Preds per block of a streamed study (``[pred] block``, default :data:`STREAM_BLOCK`)."""
        return int(self.pred.get("block", STREAM_BLOCK))

    @property
    def pred(self) -> PredAxis:
        """The first pred set (the only one in most studies)."""
        return self.pred_sets[0]

    @property
    def digest(self) -> str:
        """SHA-256 of the study file's text."""
        return hashlib.sha256(self.source.encode()).hexdigest()


@dataclass(frozen=True)
class ReportSpec:
    """The ``[report]`` table: section names in order and each section's options.

    ``options`` holds ``(section, ((key, value), ...))`` pairs, checked
    against :func:`section_options`.
    """

    sections: tuple
    options: tuple = ()

    def options_of(self, section: str) -> dict:
        """The options given for one section (a fresh dict)."""
        return dict(dict(self.options).get(section, ()))


@dataclass(frozen=True)
class AttributionSpec:
    """``[run] attribution``: which kept points get a per-step error attribution (:mod:`precision.engine.attribution_table`).

    Attributes
    ----------
    variants : tuple of str
        The variants attributed; () = every variant of the study (each is a
        step recipe).
    points : "kept" or int
        ``"kept"``: every per-point row the study keeps (``per_point``); an
        int N: at most the N largest errors (special outputs first) of each
        fine group (variant, machine, format, profile, alpha, gamma, weight,
        dout, target, region) of those rows.
    """

    variants: tuple = ()
    points: "str | int" = "kept"

    def __post_init__(self):
        if not (self.points == "kept" or (isinstance(self.points, int) and not isinstance(self.points, bool)
                                          and self.points > 0)):
            raise StudyFileError(f"attribution points={self.points!r}; expected \"kept\" or a positive integer")


class _Reader:
    """Typed access to one TOML table, with errors naming file and key."""

    def __init__(self, path: str, table: dict, prefix: str, allowed: set):
        self.path, self.table, self.prefix = path, table, prefix
        unknown = sorted(set(table) - allowed)
        if unknown:
            raise self.error(unknown[0], f"unknown key; expected one of {', '.join(sorted(allowed))}")

    def error(self, key: str, message: str) -> StudyFileError:
        return StudyFileError(f"{self.path}: {self.prefix}{key}: {message}")

    def has(self, key):
        return key in self.table

    def number(self, key, default=None, integer=False, positive=False):
        if key not in self.table:
            if default is None:
                raise self.error(key, "missing; expected a number")
            return default
        v = self.table[key]
        ok = isinstance(v, int) and not isinstance(v, bool) if integer else (
            isinstance(v, (int, float)) and not isinstance(v, bool))
        if not ok:
            raise self.error(key, f"{v!r} has the wrong type; expected {'an integer' if integer else 'a number'}")
        if not math.isfinite(v):
            raise self.error(key, f"{v!r}; expected a finite number")
        if positive and v <= 0:
            raise self.error(key, f"{v!r}; expected a positive number")
        return v

    def string(self, key, choices=None, default=None):
        if key not in self.table:
            if default is None:
                raise self.error(key, f"missing; expected one of {', '.join(choices)}" if choices else "missing")
            return default
        v = self.table[key]
        if not isinstance(v, str):
            raise self.error(key, f"{v!r} has the wrong type; expected a string")
        if choices and v not in choices:
            raise self.error(key, f"{v!r}; expected one of {', '.join(choices)}")
        return v

    def array(self, key, default=None):
        if key not in self.table:
            if default is None:
                raise self.error(key, "missing; expected a non-empty array")
            return default
        v = self.table[key]
        if not isinstance(v, list):
            raise self.error(key, f"{v!r} has the wrong type; expected an array")
        if not v:
            raise self.error(key, "empty axis; expected at least one value")
        return v

    def table_of(self, key, allowed):
        v = self.table.get(key, {})
        if not isinstance(v, dict):
            raise self.error(key, f"expected a table [{key}]")
        return _Reader(self.path, v, f"{self.prefix}{key}.", allowed)


def _parse_float_text(reader, key, v):
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise reader.error(key, f"{v!r} has the wrong type; expected a number or a hex-float string")
    if isinstance(v, str):
        try:
            v = float.fromhex(v) if "0x" in v.lower() else float(v)
        except ValueError:
            raise reader.error(key, f"{v!r} does not parse as a float (hex like -0x1.4p+0, or decimal)") from None
    if not math.isfinite(v):
        raise reader.error(key, f"{v!r}; expected finite values")
    return float(v)


def _float32_axis(reader, key, default=None):
    values = []
    for v in reader.array(key, default):
        x = _parse_float_text(reader, key, v)
        with np.errstate(over="ignore"):
            x32 = float(np.float32(x))
        if not math.isfinite(x32):
            raise reader.error(key, f"{v!r} overflows float32; attributes are float32")
        values.append(x32)
    return tuple(dict.fromkeys(values))


def _pred_keys(op) -> dict:
    """The keys of each pred kind: the engine's and the operator's (its ``PRED_SETS``)."""
    return {**_PRED_KEYS, **{kind: {"kind", "format", "range", *p.keys} for kind, p in op.PRED_SETS.items()}}


def _parse_pred(reader: _Reader, op) -> PredAxis:
    kind = reader.string("kind", (*PRED_KINDS, *op.PRED_SETS))
    sub = _Reader(reader.path, reader.table, reader.prefix, _pred_keys(op)[kind])
    fmt = sub.string("format", tuple(FORMATS), default="fp16" if kind in ("exhaustive",) else "fp32")
    if kind == "exhaustive" and fmt not in ("fp16", "bf16", "fp32"):
        raise sub.error("format", f"{fmt!r}; exhaustive sweeps enumerate fp16, bf16 or fp32")
    params = {}
    if sub.has("range"):
        r = sub.array("range")
        if len(r) != 2:
            raise sub.error("range", f"{r!r}; expected [lo, hi]")
        lo, hi = (_parse_float_text(sub, "range", v) for v in r)
        if not lo < hi:
            raise sub.error("range", f"{r!r}; expected lo < hi")
        params["range"] = (lo, hi)
    if sub.has("block"):
        block = sub.number("block", integer=True, positive=True)
        if kind != "exhaustive" or fmt not in STREAMED_FORMATS:
            raise sub.error("block", f"{block}; only an exhaustive {' or '.join(STREAMED_FORMATS)} set is run in blocks")
        if block & (block - 1) or not 1 << 10 <= block <= 1 << 24:
            raise sub.error("block", f"{block}; expected a power of two from 1024 to 16777216 (preds per block)")
        params["block"] = block
    if kind == "stratified":
        params["per_binade"] = sub.number("per_binade", integer=True, positive=True)
    elif kind == "grid":
        params["start"] = sub.number("start")
        params["stop"] = sub.number("stop")
        params["num"] = sub.number("num", integer=True, positive=True)
        params["spacing"] = sub.string("spacing", ("linear", "log"), default="linear")
        if params["spacing"] == "log" and (params["start"] <= 0 or params["stop"] <= 0):
            raise sub.error("start", "log spacing needs start > 0 and stop > 0")
    elif kind == "list":
        params["values"] = tuple(_parse_float_text(sub, "values", v) for v in sub.array("values"))
    elif kind == "file":
        rel = sub.string("path")
        path = (Path(reader.path).parent / rel) if reader.path != "<study>" else Path(rel)
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise sub.error("path", f"{rel!r}: cannot read ({exc.strerror})") from None
        values = []
        for n, line in enumerate(lines, 1):
            text = line.split("#", 1)[0].strip()
            if text:
                values.append(_parse_float_text(sub, f"path ({rel} line {n})", text))
        params["values"] = tuple(values)
    elif kind == "normal":
        params["sigma"] = sub.number("sigma", positive=True)
        params["mean"] = sub.number("mean", default=0.0)
        params["count"] = sub.number("count", integer=True, positive=True)
    elif kind in op.PRED_SETS:
        op.PRED_SETS[kind].parse(sub, params)
    elif kind == "uniform_real":
        params["low"] = sub.number("low")
        params["high"] = sub.number("high")
        params["count"] = sub.number("count", integer=True, positive=True)
        if not params["low"] < params["high"]:
            raise sub.error("high", "expected low < high")
    if "values" in params:
        _check_values_in_format(sub, kind, params["values"], fmt)
    own = op.PRED_SETS.get(kind)
    return PredAxis(kind, fmt, tuple(sorted(params.items())), own is not None,
                    own.label if own is not None else SAMPLING_LABELS[kind])


def _check_values_in_format(reader, kind: str, values, fmt: str) -> None:
    """A list's (or a file's) values must be finite in the set's format: one that overflows it would be dropped
    without a word (or leave the set empty)."""
    with np.errstate(over="ignore"):
        rounded = round_to_format(np.asarray(values, dtype=np.float64), fmt)
    bad = np.flatnonzero(~np.isfinite(rounded))
    if bad.size:
        i = int(bad[0])
        v = values[i]
        key = f"values[{i}]" if kind == "list" else f"path (value {i + 1} of the file)"
        raise reader.error(key, f"{v!r} overflows {fmt} (largest finite {FORMATS[fmt].max_finite:g}); expected "
                                f"values finite in format = \"{fmt}\" (drop it, or set a wider format)")


def _parse_profile(reader, text) -> Profile:
    if not isinstance(text, str):
        raise reader.error("profiles", f"{text!r}; expected strings like 'fp16' or 'fp32/fp16/fp16'")
    parts = text.split("/")
    if len(parts) == 1:
        parts = parts * 3
    if len(parts) != 3 or any(p not in _INPUT_FORMATS for p in parts):
        raise reader.error("profiles", f"{text!r}; expected 'fp16', 'fp32' or 'pred/dout/weight' of fp16/fp32")
    return Profile(*parts)


def parse_study(text: str, path: str = "<study>", plugins=()) -> Study:
    """Parse and validate a study file's text (see the module docstring).

    ``plugins`` are more plugin files (``--plugin``), loaded before the
    study's own ``[run] plugins``; both are loaded before the variant names
    are checked, and the plugin variants the study names are evaluated once
    on each of its machines and profiles (:func:`precision.operators.sigmoid_focal_loss_grad.plugins.check_study_variants`).
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise StudyFileError(f"{path}: TOML syntax error: {exc}") from None
    top = _Reader(path, data, "", _TOP_KEYS)
    name = top.string("name")
    if not name or "/" in name or name.startswith("."):
        raise top.error("name", f"{name!r}; expected a plain folder name")
    description = top.string("description", default="")
    seed = top.number("seed", default=0, integer=True)
    if seed < 0:
        raise top.error("seed", f"{seed}; expected a non-negative integer (numpy's random generators take seeds >= 0)")
    operator = top.string("operator", tuple(OPERATORS), default=DEFAULT_OPERATOR)
    op = get_operator(operator)
    if "pred" not in data:
        raise top.error("pred", "missing; expected a [pred] table or [[pred]] tables")
    tables = data["pred"] if isinstance(data["pred"], list) else [data["pred"]]
    if not tables or not all(isinstance(t, dict) for t in tables):
        raise top.error("pred", "expected a [pred] table or [[pred]] tables")
    pred_sets = tuple(_parse_pred(_Reader(path, t, f"pred[{i}]." if len(tables) > 1 else "pred.",
                                          set().union(*_pred_keys(op).values())), op) for i, t in enumerate(tables))
    pts = top.table_of("points", _POINT_KEYS | set(op.ATTRIBUTES))
    kind = target_kind(op)
    targets = []
    for v in pts.array("target", [0, 1]):
        if not kind.real:
            if isinstance(v, bool) or not isinstance(v, int) or not -2**31 <= v < 2**31:
                raise pts.error("target", f"{v!r}; expected int32 selector values")
            targets.append(v)
        else:
            targets.append(_parse_float_text(pts, "target", v))
    attributes = tuple((name, _float32_axis(pts, name, list(default))) for name, default in op.ATTRIBUTES.items())
    weights = []
    for i, v in enumerate(pts.array("weight", ["none"])):
        weights += [None] if v == "none" else _axis_values(pts, "weight", v, seed, i)
    douts = tuple(x for i, v in enumerate(pts.array("dout", [1.0])) for x in _axis_values(pts, "dout", v, seed, i))
    reduction = pts.string("reduction", op.REDUCTIONS, default="none")
    count = pts.number("count", default=1, integer=True, positive=True)
    if reduction != "mean" and count != 1:
        raise pts.error("count", f"{count}; only reduction = \"mean\" takes a count (sum/none use 1)")
    first = pred_sets[0].format
    profiles = tuple(_parse_profile(pts, p) for p in pts.array("profiles", [first if first in _INPUT_FORMATS
                                                                              else "fp32"]))
    for v in targets:  # a real target is an exact value of every format pred takes, never rounded on the way in
        try:
            kind.check_exact(v, dict.fromkeys(p.pred for p in profiles), "value")
        except ParameterError as exc:
            raise pts.error("target", str(exc)) from None
    edges = tuple(_parse_float_text(pts, "regions", v) for v in pts.array("regions", list(op.DEFAULT_REGION_EDGES)))
    if any(b <= a for a, b in zip(edges, edges[1:])):
        raise pts.error("regions", f"{list(edges)}; expected strictly increasing edges")
    region_names, separate = _parse_region_names(pts, edges)
    bands = tuple(_parse_float_text(pts, "bracket_bands", v) for v in pts.array("bracket_bands", []))
    if any(b <= a for a, b in zip(bands, bands[1:])) or any(not (1.0 < b < math.inf) for b in bands):
        raise pts.error("bracket_bands", f"{list(bands)}; expected strictly increasing finite edges above 1")
    run = top.table_of("run", _RUN_KEYS | set(op.RUN_STAGES))
    variants = run.array("variants", ["all"])
    if not all(isinstance(v, str) for v in variants):
        raise run.error("variants", "expected an array of variant names")
    machines = run.array("machines", ["ieee"])
    if not all(isinstance(v, str) for v in machines):
        raise run.error("machines", "expected an array of machine specs")
    per_point = run.string("per_point", PER_POINT_MODES, default="all")
    plugin_paths = _load_study_plugins(run, path, plugins, op)
    _check_registry_names(run, variants, machines, op)
    op.check_study_variants(variants, machines, profiles, **{name: values[0] for name, values in attributes},
                            reduction=reduction, count=count, weight=any(w is not None for w in weights))
    compare = _parse_compare(run, variants)
    attribution = _parse_attribution(run, variants, per_point, op)
    stages = _parse_stages(run, variants, op)
    report = _parse_report(top, data, op) if "report" in data else None
    if any(axis.kind == "exhaustive" and axis.format in STREAMED_FORMATS for axis in pred_sets):
        _check_streamed(top, pred_sets, profiles, attribution, stages)
    return Study(name, description, seed, pred_sets, tuple(dict.fromkeys(targets)), attributes,
                 tuple(dict.fromkeys(weights)), tuple(dict.fromkeys(douts)), reduction, count, profiles, edges,
                 tuple(dict.fromkeys(variants)), tuple(dict.fromkeys(machines)), per_point, text, path, bands,
                 compare, report, attribution, plugin_paths, region_names, separate, stages, operator)


def _check_streamed(top: "_Reader", pred_sets, profiles, attribution, stages) -> None:
    """A streamed set (:data:`STREAMED_FORMATS`: every fp32 in a range, in blocks) stands alone, runs profiles
    of its own format and no step that needs every point at once (attribution, run stages)."""
    fmt = pred_sets[0].format
    if len(pred_sets) > 1:
        raise top.error("pred", f"an exhaustive {fmt} set is streamed in blocks and stands alone; remove the "
                                "other [[pred]] sets (run them as a study of their own)")
    wrong = [p.name for p in profiles if p.pred != fmt]
    if wrong:
        raise top.error("points.profiles", f"{wrong}; an exhaustive {fmt} set runs profiles whose pred format is "
                                           f"{fmt} (a narrower format's values are a study of their own)")
    if attribution is not None or stages:
        step = "attribution" if attribution is not None else stages[0]
        raise top.error(f"run.{step}", f"not available on an exhaustive {fmt} set (streamed in blocks, it never "
                                       "holds every point at once); run it on a sampled study")


def _parse_stages(run: "_Reader", variants, op) -> tuple:
    """The operator's run stages the study switches on (``[run] <stage> = true``), each checked against the
    study's variants (its factory in the operator's ``RUN_STAGES`` says what they lack)."""
    stages = []
    for name, stage in op.RUN_STAGES.items():
        if not run.has(name):
            continue
        value = run.table[name]
        if not isinstance(value, bool):
            raise run.error(name, f"{value!r}; expected true or false")
        if value:
            try:
                stage(variants)
            except PrecisionError as exc:
                raise run.error(name, str(exc)) from None
            stages.append(name)
    return tuple(stages)


def _parse_region_names(pts: "_Reader", edges) -> tuple:
    """``region_names`` (one per region, distinct) and ``separate`` (some of them)."""
    names = ()
    if pts.has("region_names"):
        names = tuple(pts.array("region_names"))
        if len(names) != len(edges) + 1 or not all(isinstance(n, str) and n for n in names):
            raise pts.error("region_names", f"{list(names)!r}; expected {len(edges) + 1} names (one per region of "
                                            f"regions = {list(edges)})")
        if len(set(names)) != len(names):
            raise pts.error("region_names", f"{list(names)!r}; expected distinct names")
    separate = tuple(pts.array("separate", []))
    if separate and not names:
        raise pts.error("separate", "names regions: give region_names first")
    unknown = [n for n in separate if n not in names]
    if unknown:
        raise pts.error("separate", f"{unknown[0]!r} is not among region_names {list(names)}")
    if separate and len(set(separate)) == len(names):
        raise pts.error("separate", "keeps every region apart; at least one region must be pooled")
    return names, tuple(dict.fromkeys(separate))


_RANDOM_KEYS = {"random", "low", "high"}


def _axis_values(reader: "_Reader", key: str, value, seed: int, index: int) -> list:
    """One entry of the weight or dout axis: a number, or a table of seeded random float32 values.

    ``{ random = N, low = L, high = H }`` (0 < L < H, float32): N values
    log-uniform in [L, H] with uniformly random mantissas, rounded to
    float32, distinct (repeats are redrawn), drawn from the seed
    ``(study seed, axis, entry index)``, so the same file gives the same values.
    """
    if not isinstance(value, dict):
        return [_parse_float_text(reader, key, value)]
    where = f"{key}[{index}]"
    sub = _Reader(reader.path, value, f"{reader.prefix}{where}.", _RANDOM_KEYS)
    n = sub.number("random", integer=True, positive=True)
    low, high = (_parse_float_text(sub, k, sub.table.get(k)) if k in sub.table else None for k in ("low", "high"))
    if low is None or high is None or not 0 < low < high or not math.isfinite(float(np.float32(high))):
        raise reader.error(key, f"{value!r}; expected {{ random = N, low = L, high = H }} with 0 < L < H finite "
                                "in float32")
    lo32, hi32 = float(np.float32(low)), float(np.float32(high))
    available = int(np.float32(hi32).view(np.int32)) - int(np.float32(lo32).view(np.int32)) + 1
    if n > available:
        raise sub.error("random", f"{n}; only {available} float32 values lie in [{lo32!r}, {hi32!r}]")
    tag = int.from_bytes(hashlib.sha256(f"{key}:{index}".encode()).digest()[:4], "little")
    rng = np.random.default_rng([seed, tag])
    drawn = np.empty(0)
    while drawn.size < n:  # distinct values, in order of first draw
        batch = np.exp2(rng.uniform(np.log2(low), np.log2(high), 2 * n))
        batch = np.clip(round_to_format(batch, "fp32").astype(np.float64), lo32, hi32)
        merged = np.concatenate([drawn, batch])
        _, first = np.unique(merged, return_index=True)
        drawn = merged[np.sort(first)]
    return [float(v) for v in drawn[:n]]


def _load_study_plugins(run: _Reader, path: str, extra, op) -> tuple:
    """``[run] plugins`` (relative to the study file) after ``extra``: resolved, loaded; their absolute paths."""
    base = Path(path).parent if path != "<study>" else Path(".")
    own = []
    rels = run.table.get("plugins", [])
    if not isinstance(rels, list):
        raise run.error("plugins", f"{rels!r} has the wrong type; expected an array of paths")
    for rel in rels:
        if not isinstance(rel, str) or not rel:
            raise run.error("plugins", f"{rel!r}; expected paths of plugin files (relative to the study file)")
        if not (base / rel).is_file():
            raise run.error("plugins", f"{rel!r}: no such file ({base / rel}); paths are relative to the study file")
        own.append(base / rel)
    paths = tuple(dict.fromkeys(Path(os.path.abspath(p)) for p in [*extra, *own]))
    op.load_plugins(paths)  # PluginError names the file
    return paths


def _parse_compare(run: _Reader, variants) -> tuple:
    """``[run] compare``: (with, without) pairs of the study's own variants."""
    if not run.has("compare"):
        return ()
    pairs = []
    named = set(variants)
    for pair in run.array("compare"):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, str) for v in pair)):
            raise run.error("compare", f"{pair!r}; expected pairs of variant names like [\"candidate\", \"kernel\"]")
        missing = [v for v in pair if v not in named and "all" not in named]
        if missing:
            raise run.error("compare", f"{missing[0]!r} is not among the study's variants; add it to variants")
        if pair[0] == pair[1]:
            raise run.error("compare", f"{pair!r} compares a variant with itself")
        pairs.append(tuple(pair))
    return tuple(dict.fromkeys(pairs))


def _parse_attribution(run: _Reader, variants, per_point: str, op) -> "AttributionSpec | None":
    """``[run] attribution``: true/false, or a table ``{variants = [...], points = "kept" | N}``."""
    if not run.has("attribution"):
        return None
    value = run.table["attribution"]
    expected = 'expected true, false or a table like { variants = ["kernel"], points = "kept" } (points: "kept" or N)'
    if isinstance(value, bool):
        spec = AttributionSpec() if value else None
    elif isinstance(value, dict):
        sub = run.table_of("attribution", {"variants", "points"})
        names = sub.array("variants") if sub.has("variants") else ["all"]
        if not all(isinstance(v, str) for v in names):
            raise sub.error("variants", f"{names!r}; expected an array of variant names")
        for v in names:
            if v != "all" and v not in variants and "all" not in variants:
                raise sub.error("variants", f"{v!r} is not among the study's variants; add it to [run] variants")
            try:
                recipe = v == "all" or op.recipe_call(v) is not None
            except PrecisionError as exc:
                raise sub.error("variants", str(exc)) from None
            if not recipe:
                raise sub.error("variants", f"{v!r} is not a step recipe; only recipes can be attributed")
        points = sub.table.get("points", "kept")
        if not (points == "kept" or (isinstance(points, int) and not isinstance(points, bool) and points > 0)):
            raise sub.error("points", f"{points!r}; expected \"kept\" (every kept row) or a positive integer N "
                                      "(the N largest errors of each group)")
        spec = AttributionSpec(() if "all" in names else tuple(dict.fromkeys(names)), points)
    else:
        raise run.error("attribution", f"{value!r}; {expected}")
    if spec is not None and per_point == "none":
        raise run.error("attribution", 'needs per-point rows but per_point = "none"; set per_point = "worst" '
                                       '(or over_1ulp, incorrect, all)')
    return spec


def _parse_report(top: _Reader, data: dict, op) -> ReportSpec:
    """``[report]``: known section names, and for each ``[report.<section>]`` only that section's options."""
    table = data["report"]
    if not isinstance(table, dict):
        raise top.error("report", "expected a table [report]")
    known = section_options(op)
    rep = _Reader(top.path, table, "report.", {"sections"} | set(known))
    sections = rep.array("sections")
    for name in sections:
        if name not in known:
            raise rep.error("sections", f"{name!r} is not a report section; expected some of "
                                        f"{', '.join(known)}")
    options = []
    for name in (k for k in table if k != "sections"):
        sub = rep.table_of(name, set(known[name]))
        values = []
        for key, (kind, _default) in known[name].items():
            if sub.has(key):
                values.append((key, _report_option(sub, key, kind)))
        if name == "standards":
            _check_standards_options(sub, dict(values), op)
        options.append((name, tuple(values)))
    return ReportSpec(tuple(dict.fromkeys(sections)), tuple(options))


def _check_standards_options(reader: _Reader, values: dict, op) -> None:
    """``[report.standards]``: a known allclose preset and third party, a machine, a floor >= 0."""
    from precision.analysis.acceptance import ALLCLOSE_PRESETS
    if values.get("allclose", "unit_test") not in ALLCLOSE_PRESETS:
        raise reader.error("allclose", f"{values['allclose']!r} is not an allclose preset; expected one of "
                                       f"{', '.join(ALLCLOSE_PRESETS)}")
    if values.get("golden", "exact") not in ("exact", "rounded"):
        raise reader.error("golden", f"{values['golden']!r}; expected \"exact\" (the oracle's value) or "
                                     "\"rounded\" (its correct rounding to the output format)")
    if values.get("ratio_floor", 0.0) < 0 or values.get("max_ulp", 1.0) < 0:
        key = "ratio_floor" if values.get("ratio_floor", 0.0) < 0 else "max_ulp"
        raise reader.error(key, f"{values[key]!r}; expected a non-negative number")
    if "third_party" in values:
        try:
            op.get_variant(values["third_party"])
        except PrecisionError as exc:
            raise reader.error("third_party", str(exc)) from None
    if "third_party_machine" in values:
        try:
            get_machine(values["third_party_machine"])
        except PrecisionError as exc:
            raise reader.error("third_party_machine", str(exc)) from None


def _report_option(reader: _Reader, key: str, kind: str):
    """One report option by its declared kind: number, string, numbers, strings."""
    if kind == "number":
        return float(reader.number(key))
    if kind == "string":
        return reader.string(key)
    values = reader.array(key)
    if kind == "numbers":
        return tuple(_parse_float_text(reader, key, v) for v in values)
    if not all(isinstance(v, str) for v in values):
        raise reader.error(key, "expected an array of strings")
    return tuple(values)


def _check_registry_names(run: _Reader, variants, machines, op) -> None:
    for v in variants:
        if v == "all":
            continue
        try:
            op.get_variant(v)
        except PrecisionError as exc:
            raise run.error("variants", str(exc)) from None
    for m in machines:
        try:
            get_machine(m)
        except PrecisionError as exc:
            raise run.error("machines", str(exc)) from None


def load_study(path, plugins=()) -> Study:
    """Read and validate a study file; StudyFileError names the file on any problem.

    ``plugins``: more plugin files to load first (``--plugin``; see :func:`parse_study`).
    """
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise StudyFileError(f"{path}: cannot read the study file ({exc.strerror})") from None
    except UnicodeDecodeError:
        raise StudyFileError(f"{path}: not a UTF-8 text file") from None
    return parse_study(text, str(path), plugins)
