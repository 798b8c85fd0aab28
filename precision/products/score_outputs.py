"""Outputs produced elsewhere (a device run, another framework) scored against the oracle (``precision score``).

The inputs of one call of the operator (``pred``, ``target``, optional
``dout`` and ``weight``, its attributes (its ``ATTRIBUTES``; SigmoidFocalLossGrad's
alpha and gamma), the reduction) and the
gradient some implementation returned for them are checked against the
operator contract (its ``validate_inputs``; :func:`precision.operators.sigmoid_focal_loss_grad.implementations.common.validate_inputs`;
the output must have pred's dtype and shape), then every element is scored
against the certified oracle exactly as a run scores a variant
(:func:`precision.analysis.scoring.ulp_error`, :func:`~precision.analysis.scoring.bits_error`,
:func:`~precision.analysis.scoring.classify`, :class:`~precision.analysis.groups.GroupStats`).
The exact values come from the operator's terms (``selected_term_tables``; SigmoidFocalLossGrad's focal
terms, :func:`precision.operators.sigmoid_focal_loss_grad.terms.focal_term_tables`, one evaluation per distinct
(x, gamma)) and its ``derive_gradient``, as in a sweep.

With ``compare_with`` (a variant) and ``machine`` (default ``npu``), that
variant is evaluated on the same inputs on the emulated machine, and the
device outputs are compared with it point by point
(:func:`precision.analysis.paired.compare_points`, "with" = the device, "without" =
the emulation: ``helps`` means the device is more accurate than the
emulation): how many outputs agree bit for bit, and where they disagree.
That is how a machine model is validated against hardware.

Files (``OUT``, default ``out/score/<label>``), written atomically:

``summary.csv``, ``by_region.csv``, ``groups.csv``
    The columns of a run's tables (:mod:`precision.engine.sweep`), one row per
    (variant, machine, format, profile)[, region][, target]: the device
    outputs are the variant ``<label>`` on the machine ``device``; with a
    comparison, the emulated variant is a second row.  The witnesses are hex
    floats (``witness_pred``, ...), plus the element's ``witness_row`` and
    ``witness_col`` in the tensor.
``groups_raw.parquet``, ``hist.npz``
    The mergeable group statistics (:func:`precision.engine.sweep.load_stats` reads them).
``points.parquet``
    The elements over 1 ulp (specials included): ``row``, ``col``, the
    columns of a run's ``points.parquet`` (``pred``, ``target``, the attributes
    (``alpha``, ``gamma``), ``weight`` (NaN when absent), ``dout``, ``count``,
    ``variant``, ``machine``, ``format``, ``profile``, ``computed``,
    ``exact``, ``exact_lo``, ``rounded``, ``err_ulp``, ``err_bits``,
    ``class``).
``comparisons.csv``, ``disagreements.csv``
    With a comparison only: the paired statistics and verdict (columns of a
    run's ``comparisons.csv``; region ``all`` and per region) and every
    element where the device and the emulation differ (``row``, ``col``,
    inputs in hex, ``device``, ``emulated``, ``rounded`` in hex, their ulp
    errors and classes, ``outcome``).
``standards.csv``
    The acceptance standards (:func:`precision.analysis.standards.standards_table`):
    MERE, MARE, RMSE, the threshold standard, allclose (``unit_test``),
    blind spots and false alarms per variant and region; with a comparison,
    the ratio levels with the compared variant as the third party.
``score.json``
    The input files and their SHA-256, shape, dtypes, attributes, count,
    label, the comparison, oracle and package versions.
``report.md``, ``report.html``
    First screen: the headline (max error with its witness, share correctly
    rounded, specials), the worst elements and, with a comparison, the
    verdict and the agreement; then the tables per region.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import json
import math
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from precision.engine.cache import atomic_write_npz
from precision.engine.operators import DEFAULT_OPERATOR, get_operator
from precision.errors import DtypeError, ParameterError, ShapeError
from precision.products.report.document import Code, Details, Heading, Para, Table
from precision.products.report.findings import fmt_num, fmt_share
from precision.products.report.page import write_folder, write_page
from precision.products.report.sections.verdicts import verdict_grid
from precision.analysis.acceptance import standards_golden
from precision.analysis.groups import GroupStats, Grouping
from precision.analysis.msprobe import bench_in_format
from precision.analysis.paired import OUTCOME_NAMES, VERDICT_RULE, PairedStats, compare_points, outputs_changed
from precision.analysis.scoring import CLASS_NAMES, bits_error, classify, ulp_error
from precision.analysis.standards import StandardsSettings, standards_table
from precision.engine.sweep import comparison_table, hex_witnesses, region_labels
from precision.io.frames import write_csv

__all__ = ["load_inputs", "load_outputs", "parse_shape", "check_outputs", "validate_score_inputs", "score_outputs",
           "write_score", "ScoreResult", "DEVICE_MACHINE",
           "INPUT_ARRAYS", "RAW_DTYPES", "WORST_SHOWN"]

#: The machine column of the scored outputs in every table.
DEVICE_MACHINE = "device"
#: The arrays an inputs ``.npz`` may hold (pred and target required).
INPUT_ARRAYS = ("pred", "target", "dout", "weight")
#: ``--dtype`` of a raw output dump -> numpy dtype (little-endian).
RAW_DTYPES = {"float16": np.dtype("<f2"), "fp16": np.dtype("<f2"), "float32": np.dtype("<f4"),
              "fp32": np.dtype("<f4")}
#: Elements listed on the report's first screen.
WORST_SHOWN = 20


# ---------------------------------------------------------------------------
# Reading the files
# ---------------------------------------------------------------------------

def _load_array(path: Path, option: str):
    """``np.load`` without pickles: an ndarray or a dict of the arrays of an ``.npz``."""
    try:
        with open(path, "rb") as f:
            data = np.load(f, allow_pickle=False)
            if isinstance(data, np.lib.npyio.NpzFile):
                with data:
                    return {k: data[k] for k in data.files}
            return data
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ParameterError(f"{option}={path}: not a .npy or .npz file numpy can read without pickles ({text})") \
            from None


def load_inputs(inputs, *, target=None, dout=None, weight=None) -> dict:
    """The operator's input arrays from files: an ``.npz`` (``pred``, ``target``, optional ``dout``, ``weight``),
    or ``.npy`` files (pred in ``inputs``, the others given one by one).

    Returns
    -------
    dict
        ``pred``, ``target``, ``dout`` (None when absent), ``weight`` (None when absent).

    Raises
    ------
    ParameterError
        An unreadable file, a missing or unexpected array, target given twice.
    """
    data = _load_array(Path(inputs), "--inputs")
    if isinstance(data, dict):
        extra = [f"--{k}" for k, v in (("target", target), ("dout", dout), ("weight", weight)) if v is not None]
        if extra:
            raise ParameterError(f"--inputs={inputs} is an .npz: it holds every input, so {', '.join(extra)} "
                                 "must not be given (or pass pred as a .npy)")
        unknown = sorted(set(data) - set(INPUT_ARRAYS))
        if unknown:
            raise ParameterError(f"--inputs={inputs} holds {unknown[0]!r}; expected arrays named "
                                 f"{', '.join(INPUT_ARRAYS)} (pred and target required)")
        missing = [k for k in ("pred", "target") if k not in data]
        if missing:
            raise ParameterError(f"--inputs={inputs} lacks {missing[0]!r}; expected arrays named "
                                 f"{', '.join(INPUT_ARRAYS)} (pred and target required)")
        return {k: data.get(k) for k in INPUT_ARRAYS}
    if target is None:
        raise ParameterError(f"--inputs={inputs} is a .npy (pred only): give --target FILE too, or pass an .npz "
                             "holding pred and target")
    out = {"pred": data}
    for name, path in (("target", target), ("dout", dout), ("weight", weight)):
        if path is None:
            out[name] = None
            continue
        arr = _load_array(Path(path), f"--{name}")
        if isinstance(arr, dict):
            raise ParameterError(f"--{name}={path} is an .npz; expected a .npy holding the {name} array")
        out[name] = arr
    return out


def parse_shape(text: str) -> tuple:
    """``"N,C"`` (or ``NxC``) -> (N, C) of positive ints; ParameterError otherwise."""
    parts = [p.strip() for p in str(text).replace("x", ",").split(",")]
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        dims = ()
    if len(dims) != 2 or min(dims) <= 0:
        raise ParameterError(f"--shape={text!r}; expected N,C (two positive integers, e.g. 128,80)")
    return dims


def load_outputs(path, *, shape=None, dtype=None, pred=None) -> np.ndarray:
    """The outputs to score: a ``.npy``, or a raw little-endian dump described by ``dtype`` (and ``shape``).

    Parameters
    ----------
    path : str or Path
    shape : tuple of int, optional
        Of a raw dump; default pred's shape.
    dtype : str, optional
        Of a raw dump (:data:`RAW_DTYPES`); required for anything that is not a ``.npy``.
    pred : numpy.ndarray, optional
        The inputs' pred, for the default shape.

    Raises
    ------
    ParameterError
        An unreadable file, ``--shape``/``--dtype`` with a ``.npy``, a raw dump
        without ``--dtype``, a size that does not match.
    """
    path = Path(path)
    with open(path, "rb") as f:
        magic = f.read(6)
    if magic == b"\x93NUMPY":
        if shape is not None or dtype is not None:
            raise ParameterError(f"--outputs={path} is a .npy (it records its shape and dtype); --shape and "
                                 "--dtype describe raw dumps only")
        arr = _load_array(path, "--outputs")
        return arr
    if dtype is None:
        raise ParameterError(f"--outputs={path} is not a .npy; for a raw dump give --dtype float16|float32 (and "
                             "--shape N,C, default pred's shape)")
    if dtype not in RAW_DTYPES:
        raise ParameterError(f"--dtype={dtype!r}; expected float16 or float32")
    dt = RAW_DTYPES[dtype]
    if shape is None:
        if pred is None:
            raise ParameterError("--shape is needed for a raw dump when pred's shape is unknown")
        shape = tuple(np.shape(pred))
    data = path.read_bytes()
    want = int(np.prod(shape)) * dt.itemsize
    if len(data) != want:
        raise ParameterError(f"--outputs={path} holds {len(data):,} bytes; a {shape[0]}x{shape[1]} {dt.name} raw "
                             f"dump holds {want:,} (check --shape and --dtype)")
    return np.frombuffer(data, dtype=dt).astype(dt.newbyteorder("="), copy=True).reshape(shape)


def check_outputs(outputs, inputs) -> np.ndarray:
    """The operator's output contract: an array of pred's dtype and shape (``inputs``: the operator's
    ``OperatorInputs``).

    Raises
    ------
    ShapeError, DtypeError
    """
    out = np.asarray(outputs)
    if out.dtype != inputs.pred.dtype:
        raise DtypeError(f"outputs dtype={out.dtype} but pred dtype={inputs.pred.dtype}; the operator returns "
                         "pred's dtype")
    if out.shape != inputs.pred.shape:
        raise ShapeError(f"outputs shape={out.shape} differs from pred shape={inputs.pred.shape}; expected equal "
                         "shapes")
    return out


def _check_finite(inputs) -> None:
    for name in ("pred", "dout", "weight"):
        arr = getattr(inputs, name)
        if arr is None:
            continue
        bad = ~np.isfinite(arr)
        if bad.any():
            i, j = (int(v) for v in np.argwhere(bad)[0])
            raise ParameterError(f"{name}[{i}, {j}]={arr[i, j]}; the exact gradient is defined for finite inputs "
                                 f"only ({int(bad.sum())} non-finite {name} values)")


# ---------------------------------------------------------------------------
# Scoring
# ---------------------------------------------------------------------------

def _exact(x, t, attributes: dict, w, d, n: int, fmt, op):
    """(rounded, exact_hi, exact_lo) of every element: the operator ``op``'s terms once per distinct x, derived
    as in a sweep (``attributes``: one value of each of its attributes)."""
    size = x.size
    d_ = op.derive_exact(x, t, *(np.full(size, v) for v in attributes.values()), w, d,
                            np.full(size, n, dtype=np.int64), fmt, *op.selected_term_tables(x, t, *attributes.values()))
    return d_.rounded, d_.exact_hi, d_.exact_lo


@dataclass
class ScoreResult:
    """What :func:`score_outputs` measured (see the module docstring for the tables)."""

    label: str
    fmt: str
    profile: str
    shape: tuple
    attributes: tuple  # (name, value) of each of the operator's attributes, in its order
    reduction: str
    count: int
    weight: bool
    stats: GroupStats
    tables: dict
    points: pd.DataFrame
    worst: pd.DataFrame
    compare_with: str | None = None
    machine: str | None = None
    comparisons: pd.DataFrame | None = None
    disagreements: pd.DataFrame | None = None
    seconds: float = 0.0
    meta: dict = field(default_factory=dict)
    operator: str = DEFAULT_OPERATOR  # the name of the operator scored (precision.engine.operators)

    @property
    def headline(self) -> pd.Series:
        """The device's row of ``summary.csv``."""
        s = self.tables["summary.csv"]
        return s[s["machine"] == DEVICE_MACHINE].iloc[0]

    def lines(self) -> list:
        """What the command prints: the device's headline, its standards (the team's, msprobe's), the comparison's,
        one summary line."""
        h = self.headline
        out = [f"score {self.label} {self.fmt} {self.shape[0]}x{self.shape[1]}: max_ulp={_g(h['max_ulp'])} "
               f"max_finite_ulp={_g(h['max_finite_ulp'])} share_correct={fmt_num(h['share_correct'])} not_correct={_misses(h)} "
               f"over_1ulp={int(h['over_1ulp'])} nan={int(h['nan'])} inf={int(h['inf'])} "
               f"wrong_sign={int(h['wrong_sign'])} lost_inf={int(h['lost_inf'])} "
               f"witness=row={h['witness_row']},col={h['witness_col']},pred={h['witness_pred']},"
               f"target={h['witness_target']},weight={h['witness_weight']},dout={h['witness_dout']},"
               f"computed={_hex(h['witness_computed'])},exact={float(h['witness_exact'])!r}"]
        s = self.tables["standards.csv"]
        s = s[(s["machine"] == DEVICE_MACHINE) & (s["region"] == "all")].iloc[0]
        ratios = (f" vs {s['third_party']}: mare_ratio={_g(s['mare_ratio'])} mere_ratio={_g(s['mere_ratio'])} "
                  f"rmse_ratio={_g(s['rmse_ratio'])} level={s['level']}" if s["third_party"] != "none" else "")
        specials = f"special_match={int(s['special_match'])} special_mismatch={int(s['special_mismatch'])} "
        out.append(f"standards {self.label}: mere={_g(s['mere'])} mare={_g(s['mare'])} rmse={_g(s['rmse'])} "
                   f"{specials}threshold(T={_g(s['threshold_T'])})={'pass' if s['threshold_pass'] else 'fail'}{ratios} "
                   f"allclose_share={_g(s['allclose_share'])} blind={int(s['blind'])} "
                   f"false_alarm={int(s['false_alarm'])} mare_witness={s['mare_witness'] or 'none'}")
        if isinstance(s["ms_absolute"], str):  # msprobe's standards (a format it has them for)
            failed = f"({s['ms_benchmark_failed']})" if s["ms_benchmark_failed"] else ""
            judged = (f" vs {s['third_party']}: benchmark={s['ms_benchmark']}{failed} ulp={s['ms_ulp']}"
                      if s["ms_benchmark"] != "not judged" else "")
            out.append(f"msprobe {self.label}: absolute={s['ms_absolute']} ratio={s['ms_ratio']}{judged} "
                       f"mean_ulp={_g(s['ms_mean_ulp'])} ulp_share={_g(s['ms_ulp_share'])} "
                       f"rel_err_ratio={_g(s['ms_rel_err_ratio'])} thousandth={_g(s['ms_thousandth'])}")
        if self.comparisons is not None and len(self.comparisons):
            c = self.comparisons[self.comparisons["region"] == "all"].iloc[0]
            agree = int(c["count"]) - int(c["changed"])
            out.append(f"compare {self.label} vs {self.compare_with} on {self.machine}: "
                       f"agree={agree}/{int(c['count'])} "
                       f"bit for bit, disagree={int(c['changed'])} (device better={int(c['better'])} "
                       f"worse={int(c['worse'])} tied={int(c['tied'])}), verdict={c['verdict']}")
        return out


#: ``precision score --budget METRIC=LIMIT``: metric -> (where it is read, comparison); "le" observed <= limit,
#: "ge" observed >= limit (the gate's metrics, :data:`precision.products.gate.METRICS`, on the device's row).
SCORE_BUDGET_METRICS = {
    "max_ulp": ("summary", "le"), "max_finite_ulp": ("summary", "le"), "p99_ulp": ("summary", "le"),
    "mean_bits": ("summary", "le"), "share_correct": ("summary", "ge"), "over_1ulp": ("summary", "le"),
    "nan": ("summary", "le"), "inf": ("summary", "le"), "wrong_sign": ("summary", "le"), "lost_inf": ("summary", "le"),
    "mere": ("standards", "le"), "mare": ("standards", "le"), "rmse": ("standards", "le"),
    "allclose_share": ("standards", "ge"), "blind": ("standards", "le"),
}

#: ``precision score --fail-on CONDITION``: condition -> what fails it.
FAIL_ON = {
    "threshold": "the threshold standard fails",
    "specials": "an output is special (nan, inf, wrong sign, lost inf)",
    "incorrect": "an output is not correctly rounded",
    "over_1ulp": "an output is more than 1 ulp off",
    "disagree": "an output differs from --compare-with's bit for bit",
    "hurts": "the comparison's verdict is hurts (the outputs less accurate than --compare-with's)",
}


def check_score(result: "ScoreResult", budgets=(), fail_on=()) -> list:
    """``(status, line)`` per budget (``(metric, limit)``) and per ``--fail-on`` condition, status PASS or FAIL,
    the line as ``precision score`` prints it: ``FAIL device max_ulp observed=586 limit=1``."""
    h = result.headline
    s = result.tables["standards.csv"]
    s = s[(s["machine"] == DEVICE_MACHINE) & (s["region"] == "all")].iloc[0]
    rows = {"summary": h, "standards": s}
    out = []
    for metric, limit in budgets:
        where, sense = SCORE_BUDGET_METRICS[metric]
        value = float(rows[where][metric])
        ok = value <= limit if sense == "le" else value >= limit
        out.append(("PASS" if ok else "FAIL", f"{'PASS' if ok else 'FAIL'} {result.label} {metric} "
                                              f"observed={_g(value)} limit={_g(limit)}"))
    comparison = None
    if result.comparisons is not None and len(result.comparisons):
        comparison = result.comparisons[result.comparisons["region"] == "all"].iloc[0]
    for condition in fail_on:
        if condition == "threshold":
            failed, seen = not bool(s["threshold_pass"]), f"threshold={'pass' if s['threshold_pass'] else 'fail'}"
        elif condition == "specials":
            n = sum(int(h[c]) for c in ("nan", "inf", "wrong_sign", "lost_inf"))
            failed, seen = n > 0, f"specials={n}"
        elif condition == "incorrect":
            failed, seen = _misses(h) > 0, f"not_correct={_misses(h)}"
        elif condition == "over_1ulp":
            failed, seen = int(h["over_1ulp"]) > 0, f"over_1ulp={int(h['over_1ulp'])}"
        elif comparison is None:  # disagree, hurts: checked before the work (they need --compare-with)
            raise ParameterError(f"--fail-on {condition} needs --compare-with VARIANT")
        elif condition == "disagree":
            failed, seen = int(comparison["changed"]) > 0, f"disagree={int(comparison['changed'])}"
        else:
            failed, seen = comparison["verdict"] == "hurts", f"verdict={comparison['verdict']}"
        status = "FAIL" if failed else "PASS"
        out.append((status, f"{status} {result.label} --fail-on {condition}: {seen}"))
    return out


def _misses(h) -> int:
    """Outputs not correctly rounded of a summary row (``share_correct`` is n_correct / count, so exact)."""
    return int(h["count"]) - int(round(float(h["share_correct"]) * int(h["count"])))


def _g(v) -> str:
    v = float(v)
    return "inf" if math.isinf(v) else "nan" if math.isnan(v) else f"{v:.6g}"


def _hex(v) -> str:
    v = float(v)
    return "nan" if math.isnan(v) else v.hex()


def _fmt_name(dtype) -> str:
    return "fp16" if np.dtype(dtype) == np.float16 else "fp32"


def score_outputs(inputs, outputs, *, label: str = "device", count=None, compare_with=None, machine: str = "npu",
                  region_edges=None, operator: str = DEFAULT_OPERATOR) -> ScoreResult:
    """Score an implementation's outputs against the oracle (see the module docstring).

    Parameters
    ----------
    inputs : OperatorInputs
        The operator's, from :func:`validate_score_inputs`
        (:func:`precision.operators.sigmoid_focal_loss_grad.implementations.common.validate_inputs`).
    outputs : numpy.ndarray
        The gradient it returned (pred's dtype and shape).
    label : str
        The name of the outputs in the tables (their ``variant``).
    count : int, optional
        N*C of the mean reduction (default: the inputs'); ignored otherwise.
    compare_with : str, optional
        A variant to evaluate on the same inputs and compare with point by point.
    machine : str
        The machine of ``compare_with`` (default ``npu``).
    region_edges : sequence of float, optional
        pred region edges for ``by_region.csv`` (default: the operator's, a study's default).
    operator : str
        The name of the operator whose outputs these are (:func:`precision.engine.operators.get_operator`);
        default :data:`~precision.engine.operators.DEFAULT_OPERATOR`.

    Raises
    ------
    ShapeError, DtypeError, ParameterError
        A broken contract, non-finite inputs, an unknown variant or machine.
    """
    started = time.perf_counter()
    op = get_operator(operator)
    out = check_outputs(outputs, inputs)
    _check_finite(inputs)
    if not isinstance(label, str) or not label or any(c.isspace() or c in "/\\" for c in label):
        raise ParameterError(f"--label={label!r}; expected a name without spaces or slashes")
    fmt = _fmt_name(inputs.pred.dtype)
    # (an operator without an upstream gradient, its inputs' dout None: the pred's format stands for it)
    dout = inputs.dout if inputs.dout is not None else np.ones(inputs.pred.shape, dtype=inputs.pred.dtype)
    profile_parts = [fmt, _fmt_name(dout.dtype), _fmt_name(inputs.weight.dtype) if inputs.weight is not None
                     else fmt]
    profile = fmt if len(set(profile_parts)) == 1 else "/".join(profile_parts)
    n = inputs.count if count is None else int(count)
    if inputs.reduction != "mean":
        n = 1
    attributes = {name: float(getattr(inputs, name)) for name in op.ATTRIBUTES}  # the inputs' float32 values
    emulated = None
    if compare_with is not None:
        op.get_variant(compare_with)
        emulated = op.evaluate(compare_with, inputs.pred, inputs.target, inputs.dout, inputs.weight,
                               **attributes, reduction=inputs.reduction, machine=machine,
                               count=n if inputs.reduction == "mean" else None)
    N, C = inputs.shape
    x = inputs.pred.astype(np.float64).ravel()
    t = inputs.target.astype(np.float64 if inputs.target.dtype.kind == "f" else np.int64).ravel()  # its kind
    w = np.ones(x.size) if inputs.weight is None else inputs.weight.astype(np.float64).ravel()
    d = dout.astype(np.float64).ravel()
    rounded, hi, lo = _exact(x, t, attributes, w, d, n, fmt, op)
    edges = np.asarray(op.DEFAULT_REGION_EDGES if region_edges is None else region_edges, dtype=np.float64)
    regions = region_labels(edges)
    region = np.searchsorted(edges, x, side="right")
    targets = np.unique(t)
    t_index = np.searchsorted(targets, t)
    R = len(regions)
    group = t_index * R + region
    grouping = Grouping(group, targets.size * R)
    rows, cols = np.divmod(np.arange(x.size), C)
    witness = {"pred": x, "target": t, "weight": np.full(x.size, np.nan) if inputs.weight is None else w,
               "dout": d, "row": rows, "col": cols}
    variants = [(label, DEVICE_MACHINE, out.ravel())]
    if emulated is not None:
        variants.append((compare_with, machine, np.asarray(emulated).ravel()))
    parts, scores, kept = [], [], []
    golden = standards_golden(hi, rounded)
    bench_cast = bench_in_format(hi, fmt)  # msprobe's bench (the exact value) cast to the format
    for name, mach, computed in variants:
        err = ulp_error(computed, (hi, lo), fmt, rounded)
        bits = bits_error(computed, rounded, fmt)
        cls = classify(computed, rounded)
        c64 = computed.astype(np.float64)
        parts.append(GroupStats.reduce(grouping, err, bits, cls, witness={**witness, "computed": c64, "exact": hi},
                                       acceptance=(c64, golden, fmt, hi, bench_cast))
                     .with_columns(variant=name, machine=mach))
        scores.append((computed, err, bits, cls))
        idx = np.flatnonzero(~(err <= 1.0))
        kept.append(pd.DataFrame({
            "row": rows[idx], "col": cols[idx], "pred": x[idx], "target": t[idx], **attributes,
            "weight": np.nan if inputs.weight is None else w[idx], "dout": d[idx], "count": n, "variant": name,
            "machine": mach, "format": fmt, "profile": profile, "computed": c64[idx], "exact": hi[idx],
            "exact_lo": lo[idx], "rounded": rounded[idx].astype(np.float64), "err_ulp": err[idx],
            "err_bits": bits[idx], "class": np.asarray(list(CLASS_NAMES.values()), dtype=object)[cls[idx]]}))
    stats = GroupStats.concat(parts)
    gid = stats.frame["group"].to_numpy(np.int64)
    stats = stats.with_columns(format=fmt, profile=profile, **attributes, target=targets[gid // R],
                               region=np.asarray(regions, dtype=object)[gid % R])
    keys = ["variant", "machine", "format", "profile", *attributes, "target", "region"]
    frame = stats.frame.drop(columns=["group"])
    stats = GroupStats(frame[keys + [c for c in frame.columns if c not in keys]], stats.hist)

    def table(by):
        tb = stats.merge(by).table(by)
        return _hex_witness(tb, attributes, inputs.weight is not None)
    tables = {"summary.csv": table(["variant", "machine", "format", "profile"]),
              "by_region.csv": table(["variant", "machine", "format", "profile", "region"]),
              "groups.csv": table(keys)}
    for name in tables:
        tables[name] = _order(tables[name], [v for v, _, _ in variants], regions)
    third = StandardsSettings(third_party=compare_with or "", third_party_machine=machine)
    tables["standards.csv"] = standards_table(stats, third, [v for v, _, _ in variants], regions)
    points = pd.concat(kept, ignore_index=True)
    dev = points[points["machine"] == DEVICE_MACHINE]
    worst = dev.assign(_e=dev["err_ulp"].fillna(np.inf)).sort_values("_e", ascending=False, kind="stable") \
        .drop(columns="_e").head(WORST_SHOWN)
    result = ScoreResult(label, fmt, profile, (N, C), tuple(attributes.items()), inputs.reduction, n,
                         inputs.weight is not None, stats,
                         tables, points, _hex_points(worst), compare_with, machine if compare_with else None,
                         operator=operator)
    if emulated is not None:
        result.comparisons, result.disagreements = _compare(scores, grouping, witness, targets, regions, R, fmt,
                                                           profile, label, compare_with, machine, rounded,
                                                           inputs.weight is not None)
    result.seconds = time.perf_counter() - started
    return result


def _order(t: pd.DataFrame, variants, regions) -> pd.DataFrame:
    rank = {v: i for i, v in enumerate(variants)}
    rrank = {r: i for i, r in enumerate(regions)}
    cols = {"_v": t["variant"].map(rank)}
    if "region" in t.columns:
        cols["_r"] = t["region"].map(rrank)
    t = t.assign(**cols)
    by = ["_v"] + (["target"] if "target" in t.columns else []) + (["_r"] if "_r" in cols else [])
    return t.sort_values(by, kind="stable").drop(columns=list(cols)).reset_index(drop=True)


def _hex_witness(t: pd.DataFrame, attributes: dict, weighted: bool) -> pd.DataFrame:
    """Witness columns as a run writes them (:func:`precision.engine.sweep.hex_witnesses`), plus the element's row
    and col; the attributes are the scored outputs', an absent weight ``none``."""
    t = t.copy()
    for prefix in ("witness_", "finite_witness_"):
        none = t[f"{prefix}pred"].isna().to_numpy()
        for name, value in attributes.items():
            t[f"{prefix}{name}"] = np.where(none, np.nan, float(value))
        if not weighted:
            t[f"{prefix}weight"] = np.nan
    return hex_witnesses(t, integers=("target", "row", "col"))


def _hex_points(frame: pd.DataFrame) -> pd.DataFrame:
    """Per-element rows for people: inputs and values in hex."""
    f = frame.copy()
    f["pred_decimal"] = [repr(float(v)) for v in f["pred"]]
    for c in ("pred", "dout", "computed", "rounded"):
        f[c] = [float(v).hex() for v in f[c]]
    f["weight"] = ["none" if math.isnan(v) else float(v).hex() for v in f["weight"]]
    return f


def _compare(scores, grouping, witness, targets, regions, R, fmt, profile, label, variant, machine, rounded,
             weighted):
    """The device ("with") against the emulation ("without"): paired table and the disagreeing elements."""
    (dev, err_d, _, cls_d), (emu, err_e, _, cls_e) = scores
    changed = outputs_changed(dev, emu)
    outcome, fix, delta = compare_points(err_d, cls_d, err_e, cls_e, changed)
    paired = PairedStats.reduce(grouping, outcome, fix, delta, changed, witness={"pred": witness["pred"]})
    gid = paired.frame["group"].to_numpy(np.int64)
    paired = paired.with_columns(kind="device", subject=label, comparison=f"{label} vs {variant} on {machine}",
                                 with_variant=label, without_variant=variant, machine=machine, format=fmt,
                                 profile=profile, target=targets[gid // R],
                                 region=np.asarray(regions, dtype=object)[gid % R])
    paired = PairedStats(paired.frame.drop(columns=["group"]), paired.hist)
    table = comparison_table(paired, [label], [machine], regions)
    for prefix in ("gain_witness_", "loss_witness_"):
        col = prefix + "pred"
        if col in table.columns:
            table[col] = [None if pd.isna(v) else float(v).hex() for v in table[col]]
    idx = np.flatnonzero(changed)
    names = np.asarray(list(CLASS_NAMES.values()), dtype=object)
    w = witness["weight"]
    dis = pd.DataFrame({
        "row": witness["row"][idx], "col": witness["col"][idx],
        "pred": [float(v).hex() for v in witness["pred"][idx]],
        "pred_decimal": [repr(float(v)) for v in witness["pred"][idx]], "target": witness["target"][idx],
        "weight": [float(v).hex() for v in w[idx]] if weighted else "none",
        "dout": [float(v).hex() for v in witness["dout"][idx]],
        "device": [float(v).hex() for v in dev[idx].astype(np.float64)],
        "emulated": [float(v).hex() for v in emu[idx].astype(np.float64)],
        "rounded": [float(v).hex() for v in rounded[idx].astype(np.float64)],
        "err_ulp_device": err_d[idx], "err_ulp_emulated": err_e[idx], "class_device": names[cls_d[idx]],
        "class_emulated": names[cls_e[idx]],
        "outcome": np.asarray([OUTCOME_NAMES[int(o)] for o in outcome[idx]], dtype=object)})
    return table, dis


# ---------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------

def _sha256(path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def write_score(result: ScoreResult, out_dir, files: dict, command: str = "") -> Path:
    """Write the tables, per-element rows, ``score.json`` and the report into ``out_dir`` (atomically).

    ``files`` maps a role (``inputs``, ``outputs``, ``target``, ...) to the path it was read from.
    """
    versions = {}
    for pkg in ("precision", "numpy", "mpmath", "pandas"):
        try:
            versions[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    meta = {"label": result.label, "format": result.fmt, "profile": result.profile, "shape": list(result.shape),
            **dict(result.attributes), "reduction": result.reduction, "count": result.count,
            "weight": result.weight, "compare_with": result.compare_with, "machine": result.machine,
            "files": {k: {"path": str(v), "sha256": _sha256(v)} for k, v in files.items() if v is not None},
            "oracle_version": get_operator(result.operator).ORACLE_VERSION, "versions": versions,
            "command": command}

    def build(folder: Path) -> None:
        for name, frame in result.tables.items():
            write_csv(frame, folder / name)
        result.stats.frame.to_parquet(folder / "groups_raw.parquet", index=False)
        atomic_write_npz(folder / "hist.npz", {c: result.stats.hist[c].to_numpy(np.int64) for c in ("row", "bin",
                                                                                                  "count")})
        result.points.to_parquet(folder / "points.parquet", index=False)
        if result.comparisons is not None:
            write_csv(result.comparisons, folder / "comparisons.csv")
            write_csv(result.disagreements, folder / "disagreements.csv")
        (folder / "score.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
        first, body = _blocks(result, meta)
        write_page(folder, f"Scored outputs: {result.label}",
                   f"{result.shape[0]} x {result.shape[1]} {result.fmt} outputs of {files.get('outputs')} against "
                   f"the exact gradient (certified oracle); "
                   + "".join(f"{name} {value:g}, " for name, value in result.attributes)
                   + f"reduction {result.reduction}" + (f" (count {result.count})" if result.reduction == "mean" else "")
                   + (", weight given" if result.weight else ", weight absent") + ".", first, body)

    return write_folder(Path(out_dir), build)


_SUMMARY_SHOWN = ["variant", "machine", "format", "count", "max_ulp", "max_finite_ulp", "p99_ulp", "mean_bits",
                  "share_correct", "over_1ulp", "nan", "inf", "wrong_sign", "lost_inf", "witness_row", "witness_col",
                  "witness_pred", "witness_target"]
_WORST_COLUMNS = ["row", "col", "pred", "pred_decimal", "target", "weight", "dout", "computed", "rounded", "err_ulp",
                  "class"]


def _blocks(r: ScoreResult, meta: dict) -> tuple:
    s = r.tables["summary.csv"]
    h = r.headline
    first = [Heading("Headline", 2, "headline"),
             Table(s[[c for c in _SUMMARY_SHOWN if c in s.columns]], "summary.csv",
                   " (every statistic and both witnesses)"),
             Para(f"Largest error {_g(h['max_ulp'])} ulp at row {h['witness_row']}, col {h['witness_col']} "
                  f"(pred {h['witness_pred']}, target {h['witness_target']}): computed {_hex(h['witness_computed'])}"
                  f", exact {float(h['witness_exact'])!r}. A share {fmt_share(h['share_correct'], _misses(h))} of the "
                  f"{int(h['count']):,} outputs is correctly rounded; {int(h['over_1ulp']):,} are over 1 ulp (points.parquet).", "rule")]
    if r.comparisons is not None and len(r.comparisons):
        t = r.comparisons
        grid = t[t["region"] == "all"].assign(subject=r.label, comparison=f"device vs {r.compare_with}")
        text, style = verdict_grid(grid, [r.machine])
        c = grid.iloc[0]
        agree = int(c["count"]) - int(c["changed"])
        first += [Heading(f"Device against {r.compare_with} on {r.machine}", 2, "verdict-grid"),
                  Table(text, "comparisons.csv", "", style, id="verdict-table"),
                  Para(f"{agree:,} of {int(c['count']):,} outputs agree bit for bit with the emulation; "
                       f"{int(c['changed']):,} differ (disagreements.csv): the device is more accurate on "
                       f"{int(c['better']):,}, less on {int(c['worse']):,}, equally on {int(c['tied']):,}. Verdict "
                       "of the device against the emulation by the reports' rule (helps = the device is more "
                       "accurate).", "rule")]
        if len(r.disagreements):
            d = r.disagreements.assign(_k=(r.disagreements["err_ulp_device"] - r.disagreements["err_ulp_emulated"])
                                       .abs().fillna(np.inf))
            d = d.sort_values("_k", ascending=False, kind="stable").drop(columns="_k").head(WORST_SHOWN)
            first.append(Details(f"The {len(d)} largest disagreements", [Table(d.reset_index(drop=True),
                                                                               "disagreements.csv")]))
    st = r.tables["standards.csv"]
    first += [Heading("Acceptance standards", 2, "standards"),
              Table(st.loc[st["region"] == "all", [c for c in st.columns if not c.endswith("_witness")]]
                    .reset_index(drop=True), "standards.csv", " (every region and the witnesses in hex)"),
              Para("r = |output - exact| / (|exact| + 1e-7); MERE = mean r, MARE = max r, RMSE in output units; "
                   "threshold: MERE < T and MARE < 10 T; level: the highest ratio level (L0, L1, L2) against the "
                   "third party (--compare-with); allclose: the unit_test preset; blind: outputs accepted "
                   "element-wise (r <= 10 T) yet special or over 1024 ulps wrong; false_alarm: correctly rounded "
                   "outputs with r > 10 T (precision.analysis.standards).", "rule")]
    first += [Heading("Worst elements", 2, "worst")]
    if len(r.worst):
        first.append(Table(r.worst[_WORST_COLUMNS].reset_index(drop=True), "points.parquet",
                           " (every element over 1 ulp)"))
    else:
        first.append(Para("No output is more than 1 ulp from the exact gradient.", "note"))
    br = r.tables["by_region.csv"]
    body = [Heading("By region", 2, "by-region"),
            Table(br[[c for c in ["variant", "machine", "region", "count", "max_ulp", "max_finite_ulp", "p99_ulp",
                                  "mean_bits", "share_correct", "over_1ulp", "nan", "inf", "wrong_sign",
                                  "lost_inf", "witness_pred"] if c in br.columns]], "by_region.csv"),
            Heading("Conventions", 2, "conventions"),
            Para("ulp error = |computed - exact| / ulp(exact) in the output format (a correctly rounded output scores "
                 "at most 0.5); bits of error = log2(1 + ordinal distance to the correctly rounded value); specials: "
                 "nan, inf, wrong_sign, lost_inf (precision.analysis.scoring)."),
            ]
    if r.comparisons is not None:
        body += [Para(VERDICT_RULE)]
    files = meta.get("files", {})
    body += [Heading("Reproduce", 2, "reproduce"),
             Code("\n".join([meta.get("command") or "precision score ...",
                             *(f"{k:<8} {v['path']} sha256 {v['sha256']}" for k, v in files.items()),
                             f"oracle version {meta.get('oracle_version')}",
                             "versions " + ", ".join(f"{k} {v}"
                                                     for k, v in sorted(meta.get("versions", {}).items()))]))]
    return first, body


def validate_score_inputs(arrays: dict, *, reduction, operator: str = DEFAULT_OPERATOR, **attributes):
    """The contract of the operator named ``operator`` on loaded arrays (its ``OperatorInputs``), with its
    attributes by name (``alpha=..., gamma=...``; its ``ATTRIBUTES``, each required); dout absent means ones of
    pred's dtype."""
    op = get_operator(operator)
    if set(attributes) != set(op.ATTRIBUTES):
        raise TypeError(f"validate_score_inputs() takes the attributes {', '.join(op.ATTRIBUTES)} of the operator "
                        f"{operator!r}; got {', '.join(attributes) or 'none'}")
    pred = arrays["pred"]
    dout = arrays.get("dout")
    if dout is None and isinstance(pred, np.ndarray):
        dout = np.ones(pred.shape, dtype=pred.dtype if pred.dtype in (np.float16, np.float32) else np.float32)
    return op.validate_inputs(pred, arrays["target"], dout, arrays.get("weight"),
                              *(attributes[name] for name in op.ATTRIBUTES), reduction)
