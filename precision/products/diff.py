"""Two runs of one study compared point by point: what a change did to each variant (``precision diff``).

``RUN_A`` is the reference (before the change), ``RUN_B`` the new run
(after).  For every variant present in both, the per-point outputs of
``points.parquet`` (the study must keep every point: ``[run] per_point =
"all"``) are joined on the exact inputs (pred's float64 bits, so -0.0 and
0.0 are two points; target, the operator's attributes (SigmoidFocalLossGrad's alpha, gamma), weight, dout,
count) and the machine,
format and profile, and compared with :func:`precision.analysis.paired.compare_points`
("with" = B, "without" = A) into :class:`precision.analysis.paired.PairedStats` per
(variant, machine, format, profile, region), overall (region ``all``) and per
region, each with its verdict (:func:`precision.analysis.paired.verdicts`, the rule
:data:`precision.analysis.paired.VERDICT_RULE`, the same as the reports').

Per variant, one word from its verdicts on each (machine, format, profile)
over every region:

``BETTER``
    some cell ``helps`` and none ``hurts`` or is ``mixed``;
``WORSE``
    some cell ``hurts`` and none ``helps`` or is ``mixed``;
``MIXED``
    some cell is ``mixed``, or one helps where another hurts;
``SAME``
    every cell ``no_effect`` or ``inconclusive``.

**Exit status** (:attr:`DiffResult.exit_status`): 1 when some variant's
verdict on some (machine, format, profile) is ``hurts`` *and* its worst loss
there exceeds the tolerance (``--tolerance BITS``, default 0): the worst loss
is ``max_loss_bits`` (the largest increase of ``log2(1 + ulp error)`` over
the points finite both before and after), infinite when B made an output
special (NaN, inf, wrong sign, lost inf) that was finite in A.  0 otherwise.
Two runs of different studies (different point sets) are an error, and so is a
run that did not keep every point.

Outputs (``OUT``, default ``out/diff``), written atomically:

``report.md``, ``report.html``
    First screen: the verdict grid (variant x machine and profile: the
    verdict of B against A and better/worse among the changed outputs) and
    the new worst points (largest losses, hex witnesses); then the variants
    present in one run only, the per-variant summary, the maxima of both
    runs, the comparisons per region, the rule and how to reproduce.
``tables/diff.csv``
    The paired statistics: columns of ``comparisons.csv`` of a run
    (:data:`precision.engine.sweep.COMPARISON_KEYS`, the counts, the sign tests,
    ``median_change_bits``, ``max_gain_bits``, ``max_loss_bits`` with hex
    witnesses, ``verdict``); ``kind`` is ``diff``, ``with_variant`` and
    ``without_variant`` the variant.
``tables/variants.csv``
    One row per variant: ``variant``, ``status`` (``both``, ``only_a``,
    ``only_b``), ``word``, ``fails`` (counts for the exit status), ``cells``
    (the verdict of each changed cell), the pooled ``count``, ``changed``,
    ``better``, ``worse``, ``tied``, ``both_garbage``, ``specials_fixed``,
    ``specials_caused``, ``max_gain_bits``, ``max_loss_bits``,
    ``worst_loss_bits`` (inf when a special was caused) and the witness of the
    worst loss (``witness_*``).
``tables/worst_points.csv``
    Per variant the :data:`WORST_POINTS` points that lost most (B against A;
    a special caused first): ``variant``, ``machine``, ``format``,
    ``profile``, ``region``, ``pred`` (hex), ``pred_decimal``, ``target``,
    the attributes (``alpha``, ``gamma``), ``weight`` (hex or ``none``), ``dout``,
    ``loss_bits``, ``err_ulp_a``, ``err_ulp_b``, ``class_a``, ``class_b``,
    ``computed_a``, ``computed_b``, ``rounded`` (hex).
``tables/maxima.csv``
    :class:`precision.analysis.groups.GroupStats` of both runs per (variant, machine,
    format, profile): ``max_ulp``, ``max_finite_ulp``, ``p99_ulp``,
    ``mean_bits``, ``share_correct``, ``over_1ulp`` and the special counts,
    suffixed ``_a`` and ``_b``, with the witness of each ``max_ulp``.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from precision.errors import ParameterError
from precision.products.report.document import Code, Details, Heading, Para, Table
from precision.products.report.page import write_folder, write_page
from precision.products.report.sections.verdicts import verdict_grid
from precision.analysis.groups import Grouping
from precision.analysis.paired import VERDICT_RULE, PairedStats, compare_points, outputs_changed
from precision.analysis.scoring import CLASS_NAMES, SPECIAL_CLASSES
from precision.engine.operators import DEFAULT_OPERATOR, get_operator
from precision.engine.sweep import comparison_table, hex_witnesses, load_stats
from precision.io.frames import write_csv
from precision.recipes.target_kinds import target_text

__all__ = ["diff_runs", "write_diff", "DiffResult", "WORDS", "WORST_POINTS", "point_keys"]

#: The word of a variant for each verdict of :func:`precision.analysis.paired.verdicts`.
WORDS = {"helps": "BETTER", "hurts": "WORSE", "mixed": "MIXED", "no_effect": "SAME", "inconclusive": "SAME"}
#: Points listed per variant in ``worst_points.csv`` (the report shows the first of them).
WORST_POINTS = 20
_CLASS_TEXT = np.asarray(list(CLASS_NAMES.values()), dtype=object)
_NAN_BITS = np.int64(0x7FF8000000000000)
_TEXT = ("variant", "class", "machine", "format", "profile")


def point_keys(attributes) -> tuple:
    """The columns a point is joined on, given the operator's attribute names (pred, the attributes, weight,
    dout compared by their float64 bits)."""
    return ("pred", "target", *attributes, "weight", "dout", "count", "machine", "format", "profile")


def _float_keys(attributes) -> tuple:
    return ("pred", *attributes, "weight", "dout")


def _columns(attributes) -> tuple:
    return (*point_keys(attributes), "variant", "computed", "err_ulp", "class", "rounded")


def _witness_inputs(attributes) -> tuple:
    """A witness's fields in the text and tables: the point's inputs, its machine and profile."""
    return ("pred", "target", *attributes, "weight", "dout", "machine", "profile")


def _hex(v) -> str:
    v = float(v)
    return "none" if math.isnan(v) else v.hex()


# ---------------------------------------------------------------------------
# Reading the two runs
# ---------------------------------------------------------------------------

@dataclass
class _Run:
    folder: Path
    label: str
    meta: dict
    points: pd.DataFrame
    attributes: tuple  # the names of its operator's attributes


def _read_run(folder: Path, label: str) -> _Run:
    """run.json and every per-point row of a run folder; ParameterError when it does not hold every point."""
    folder = Path(folder)
    shown = f"{label}={folder}"
    for name in ("run.json", "points.parquet", "groups_raw.parquet", "hist.npz"):
        if not (folder / name).is_file():
            raise ParameterError(f"{shown} lacks {name}; expected a run folder written by `precision run`")
    try:
        meta = json.loads((folder / "run.json").read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ParameterError(f"{shown}: run.json does not parse ({exc}); rerun `precision run` into it") from None
    attributes = tuple(get_operator(meta.get("operator", DEFAULT_OPERATOR)).ATTRIBUTES)
    columns = _columns(attributes)
    names = set(pq.read_schema(folder / "points.parquet").names)
    stats = load_stats(folder).frame
    if not set(columns) <= names:
        points = pd.DataFrame({c: [] for c in columns})
    else:
        points = pd.read_parquet(folder / "points.parquet", columns=list(columns))
    for col in _TEXT:
        points[col] = points[col].astype(object).astype("category") if points[col].dtype != "category" \
            else points[col]
    # every point kept? (the study's per_point = "all"): rows per variant, machine and profile against the counts
    want = stats.groupby(["variant", "machine", "profile"], sort=False)["count"].sum()
    have = points.groupby(["variant", "machine", "profile"], observed=True).size()
    have = pd.Series(have.to_numpy(), index=pd.MultiIndex.from_tuples(
        [tuple(str(v) for v in k) for k in have.index], names=have.index.names) if len(have) else None)
    have = have.reindex(want.index, fill_value=0)
    short = want[have.to_numpy() != want.to_numpy()]
    if len(short):
        (v, m, p), n = short.index[0], int(short.iloc[0])
        raise ParameterError(
            f"{shown}: points.parquet holds {int(have.loc[(v, m, p)]):,} of the {n:,} points of {v} on {m} {p}; "
            "diff compares every point: rerun the study with [run] per_point = \"all\"")
    return _Run(folder, label, meta, points, attributes)


def _keyed(points: pd.DataFrame, vocab: dict, attributes) -> pd.DataFrame:
    """The frame in numbers: float keys as int64 bits (one NaN spelling for an absent weight), text columns as
    codes into ``vocab`` (shared by both runs), classes as :data:`precision.analysis.scoring.CLASS_NAMES` codes."""
    out = {}
    for col in _float_keys(attributes):
        v = points[col].to_numpy(np.float64)
        out[col] = np.where(np.isnan(v), _NAN_BITS, v.view(np.int64))
    for col in ("target", "count"):
        out[col] = points[col].to_numpy(np.int64)
    for col in ("variant", "machine", "format", "profile"):
        out[col] = pd.Categorical(points[col], categories=vocab[col]).codes.astype(np.int64)
    out["class"] = pd.Categorical(points["class"], categories=list(CLASS_NAMES.values())).codes.astype(np.int8)
    for col in ("computed", "err_ulp", "rounded"):
        out[col] = points[col].to_numpy(np.float64)
    return pd.DataFrame(out)


def _check_same_points(a: _Run, b: _Run, ka: pd.DataFrame, kb: pd.DataFrame) -> None:
    keys = list(point_keys(a.attributes))
    pa, pb = ka[keys].drop_duplicates(), kb[keys].drop_duplicates()
    both = pa.merge(pb, how="outer", on=keys, indicator=True)
    only_a = int((both["_merge"] == "left_only").sum())
    only_b = int((both["_merge"] == "right_only").sum())
    if only_a or only_b:
        raise ParameterError(
            f"RUN_A={a.folder} (study {a.meta.get('study')}) and RUN_B={b.folder} (study {b.meta.get('study')}) "
            f"are not runs of the same study: {only_a:,} points only in RUN_A, {only_b:,} only in RUN_B; "
            "diff compares two runs of one study (same points)")


# ---------------------------------------------------------------------------
# The comparison
# ---------------------------------------------------------------------------

@dataclass
class DiffResult:
    """What :func:`diff_runs` found (see the module docstring for the tables)."""

    run_a: Path
    run_b: Path
    study: str
    tolerance: float
    comparisons: pd.DataFrame
    variants: pd.DataFrame
    worst: pd.DataFrame
    maxima: pd.DataFrame
    machines: list
    regions: list
    seconds: float = 0.0
    meta: dict = field(default_factory=dict)
    attributes: tuple = ()  # the names of the runs' operator's attributes

    @property
    def compared(self) -> pd.DataFrame:
        """The rows of :attr:`variants` present in both runs."""
        return self.variants[self.variants["status"] == "both"]

    @property
    def exit_status(self) -> int:
        """1 when a variant got worse beyond the tolerance (module docstring), else 0."""
        return int(bool(self.compared["fails"].any())) if len(self.variants) else 0

    def lines(self) -> list:
        """One line per variant (BETTER, WORSE, SAME, MIXED; ADDED/REMOVED for one run only), then a summary."""
        out = []
        for r in self.variants.itertuples(index=False):
            if r.status != "both":
                word, where = ("REMOVED", "RUN_A") if r.status == "only_a" else ("ADDED", "RUN_B")
                out.append(f"{word} {r.variant} (only in {where})")
                continue
            text = (f"{r.word} {r.variant} changed={r.changed} better={r.better} worse={r.worse} tied={r.tied} "
                    f"both_garbage={r.both_garbage} specials_fixed={r.specials_fixed} "
                    f"specials_caused={r.specials_caused} max_gain_bits={_bits(r.max_gain_bits)} "
                    f"max_loss_bits={_bits(r.max_loss_bits)} cells={r.cells or 'none'}")
            if r.word in ("WORSE", "MIXED"):
                text += f" beyond_tolerance={'yes' if r.fails else 'no'}"
            if isinstance(r.witness_pred, str) and r.witness_pred:
                text += " witness=" + _witness_text(r._asdict(), "witness_", self.attributes)
            out.append(text)
        words = self.compared["word"].value_counts()
        n_pts = int(self.compared["count"].sum()) if len(self.compared) else 0
        status = self.exit_status
        out.append(
            f"diff {self.study}: RUN_B={self.run_b} against RUN_A={self.run_a}: {len(self.compared)} variants on "
            f"{n_pts:,} paired points: " + ", ".join(f"{words.get(w, 0)} {w}" for w in ("BETTER", "WORSE", "SAME",
                                                                                       "MIXED"))
            + f"; {int((self.variants['status'] == 'only_a').sum())} only in RUN_A, "
            f"{int((self.variants['status'] == 'only_b').sum())} only in RUN_B; tolerance {self.tolerance:g} bits: "
            + ("a variant got worse beyond it (exit 1)" if status else "no variant got worse beyond it (exit 0)"))
        return out


def _bits(v) -> str:
    v = float(v)
    return "nan" if math.isnan(v) else "inf" if math.isinf(v) else f"{v:.4g}"


def _witness_text(row: dict, prefix: str, attributes) -> str:
    return ",".join(f"{k}={row[prefix + k]}" for k in _witness_inputs(attributes))


def _word(verdicts) -> str:
    v = set(verdicts)
    if "mixed" in v or {"helps", "hurts"} <= v:
        return "MIXED"
    if "hurts" in v:
        return "WORSE"
    if "helps" in v:
        return "BETTER"
    return "SAME"


def _worst_loss(specials_caused, max_loss_bits) -> np.ndarray:
    """The worst loss of a cell: inf when a special was caused, else max_loss_bits (0 when none)."""
    loss = np.nan_to_num(np.asarray(max_loss_bits, np.float64), nan=0.0)
    return np.where(np.asarray(specials_caused) > 0, np.inf, loss)


def diff_runs(run_a, run_b, *, tolerance: float = 0.0) -> DiffResult:
    """Compare two run folders of one study point by point (see the module docstring).

    Parameters
    ----------
    run_a, run_b : str or Path
        The reference run and the new run (``precision run`` folders of the
        same study, with ``[run] per_point = "all"``).
    tolerance : float
        Bits of loss a ``hurts`` verdict may reach without failing (default 0).

    Returns
    -------
    DiffResult

    Raises
    ------
    ParameterError
        A folder that is not a run folder, a run without every point, runs
        of different studies, a negative or non-finite tolerance.
    """
    started = time.perf_counter()
    if not (isinstance(tolerance, (int, float)) and math.isfinite(tolerance) and tolerance >= 0):
        raise ParameterError(f"--tolerance={tolerance!r}; expected a finite number of bits >= 0")
    a, b = _read_run(Path(run_a), "RUN_A"), _read_run(Path(run_b), "RUN_B")
    if a.attributes != b.attributes:
        raise ParameterError(f"RUN_A={a.folder} and RUN_B={b.folder} are runs of different operators "
                             f"({a.meta.get('operator', DEFAULT_OPERATOR)}, {b.meta.get('operator', DEFAULT_OPERATOR)}); "
                             "diff compares two runs of one study")
    attributes = a.attributes
    vocab = {c: sorted(set(map(str, a.points[c].unique())) | set(map(str, b.points[c].unique())))
             for c in ("variant", "machine", "format", "profile")}
    text = {c: np.asarray(v, dtype=object) for c, v in vocab.items()}
    ka, kb = _keyed(a.points, vocab, attributes), _keyed(b.points, vocab, attributes)
    _check_same_points(a, b, ka, kb)
    edges = np.asarray(a.meta.get("region_edges", []), dtype=np.float64)
    regions = list(a.meta.get("regions") or ["all"])
    order_a = list(dict.fromkeys([*a.meta.get("variants", []), *vocab["variant"]]))
    order_b = list(dict.fromkeys([*b.meta.get("variants", []), *vocab["variant"]]))
    present_a = {vocab["variant"][i] for i in np.unique(ka["variant"])}
    present_b = {vocab["variant"][i] for i in np.unique(kb["variant"])}
    common = [v for v in order_a if v in present_a and v in present_b]
    machines = list(dict.fromkeys([*a.meta.get("machines", []), *b.meta.get("machines", [])]))
    keys = list(point_keys(attributes))
    parts, worst = [], []
    for v in common:
        code = vocab["variant"].index(v)
        m = ka[ka["variant"].to_numpy() == code].merge(kb[kb["variant"].to_numpy() == code], on=keys,
                                                        suffixes=("_a", "_b"), sort=True)
        pred = m["pred"].to_numpy(np.int64).view(np.float64)
        ca, cb = m["computed_a"].to_numpy(np.float64), m["computed_b"].to_numpy(np.float64)
        changed = outputs_changed(ca, cb)
        ea, eb = m["err_ulp_a"].to_numpy(np.float64), m["err_ulp_b"].to_numpy(np.float64)
        cla, clb = m["class_a"].to_numpy(np.int8), m["class_b"].to_numpy(np.int8)
        outcome, fix, delta = compare_points(eb, clb, ea, cla, changed)  # with = B, without = A
        region = np.searchsorted(edges, pred, side="right") if edges.size else np.zeros(pred.size, np.int64)
        cell_cols = {c: m[c].to_numpy(np.int64) for c in ("machine", "format", "profile")}
        cell = ((cell_cols["machine"] * len(vocab["format"]) + cell_cols["format"]) * len(vocab["profile"])
                + cell_cols["profile"]) * len(regions) + region
        ids, first, gid = np.unique(cell, return_index=True, return_inverse=True)
        floats = {c: m[c].to_numpy(np.int64).view(np.float64) for c in _float_keys(attributes)[1:]}
        witness = {"pred": pred, "target": m["target"].to_numpy(), **floats, "machine": cell_cols["machine"],
                   "profile": cell_cols["profile"]}
        stats = PairedStats.reduce(Grouping(gid.ravel(), ids.size), outcome, fix, delta, changed, witness=witness)
        at = first[stats.frame["group"].to_numpy(np.int64)]
        stats = stats.with_columns(kind="diff", subject=v, comparison=f"{v}: B vs A", with_variant=v,
                                   without_variant=v, region=np.asarray(regions, dtype=object)[region[at]],
                                   **{c: text[c][cell_cols[c][at]] for c in cell_cols})
        parts.append(stats)
        lost = np.flatnonzero(delta < 0)
        lost = lost[np.argsort(delta[lost], kind="stable")][:WORST_POINTS]
        if lost.size:
            worst.append(pd.DataFrame({
                "variant": v, **{c: text[c][cell_cols[c][lost]] for c in cell_cols},
                "region": np.asarray(regions, dtype=object)[region[lost]], "pred": [float(x).hex() for x in pred[lost]],
                "pred_decimal": [repr(float(x)) for x in pred[lost]], "target": m["target"].to_numpy()[lost],
                **{c: [_hex(x) for x in floats[c][lost]] for c in floats},
                "loss_bits": -delta[lost], "err_ulp_a": ea[lost], "err_ulp_b": eb[lost],
                "class_a": _CLASS_TEXT[cla[lost]], "class_b": _CLASS_TEXT[clb[lost]],
                "computed_a": [_hex(x) for x in ca[lost]], "computed_b": [_hex(x) for x in cb[lost]],
                "rounded": [_hex(x) for x in m["rounded_a"].to_numpy(np.float64)[lost]]}))
    paired = PairedStats.concat(parts)
    if len(paired):
        paired = PairedStats(paired.frame.drop(columns=["group"]), paired.hist)
    table = comparison_table(paired, common, machines, regions)
    table = _hex_witnesses(table, text, attributes)
    worst_frame = pd.concat(worst, ignore_index=True) if worst else pd.DataFrame(columns=[
        "variant", "machine", "format", "profile", "region", "pred", "pred_decimal", "target", *attributes,
        "weight", "dout", "loss_bits", "err_ulp_a", "err_ulp_b", "class_a", "class_b", "computed_a", "computed_b",
        "rounded"])
    variants = _variant_rows(paired, table, worst_frame, common, order_a, order_b, present_a, present_b,
                             float(tolerance), attributes)
    maxima = _maxima(a.folder, b.folder, common, machines)
    return DiffResult(a.folder, b.folder, str(a.meta.get("study", "")), float(tolerance), table, variants,
                      worst_frame, maxima, machines, regions, time.perf_counter() - started,
                      {"a": a.meta, "b": b.meta}, attributes)


def _hex_witnesses(table: pd.DataFrame, text: dict, attributes) -> pd.DataFrame:
    """Witness columns of a paired table for people: machine and profile codes as their names, the inputs
    as hex floats (:func:`precision.engine.sweep.hex_witnesses`)."""
    t = table.copy()
    for prefix in ("gain_witness_", "loss_witness_"):
        for c in ("machine", "profile"):
            col = prefix + c
            if col in t.columns:
                codes = pd.to_numeric(t[col], errors="coerce").to_numpy(np.float64)
                t[col] = [None if np.isnan(k) else text[c][int(k)] for k in codes]
        for c in _float_keys(attributes):  # numbers, whatever the frame held them as
            if prefix + c in t.columns:
                t[prefix + c] = pd.to_numeric(t[prefix + c], errors="coerce").astype(np.float64)
    return hex_witnesses(t)


def _variant_rows(paired, table, worst, common, order_a, order_b, present_a, present_b, tolerance,
                  attributes) -> pd.DataFrame:
    rows = []
    pooled = paired.merge(["with_variant"]).table(["with_variant"]) if len(paired) else pd.DataFrame()
    overall = table[table["region"] == "all"] if len(table) else table
    for v in common:
        cells = overall[overall["with_variant"] == v]
        loss = _worst_loss(cells["specials_caused"], cells["max_loss_bits"])
        fails = bool(((cells["verdict"] == "hurts").to_numpy() & (loss > tolerance)).any())
        p = pooled[pooled["with_variant"] == v].iloc[0]
        w = worst[worst["variant"] == v]
        top = w.iloc[0] if len(w) else None
        row = {"variant": v, "status": "both", "word": _word(cells["verdict"]), "fails": fails,
               "cells": ",".join(f"{r.machine}/{r.profile}:{r.verdict}" for r in cells.itertuples(index=False)
                                 if r.verdict != "no_effect")}
        for c in ("count", "changed", "better", "worse", "tied", "both_garbage", "specials_fixed",
                  "specials_caused"):
            row[c] = int(p[c])
        row["max_gain_bits"] = float(p["max_gain_bits"])
        row["max_loss_bits"] = float(p["max_loss_bits"])
        row["worst_loss_bits"] = float(_worst_loss(p["specials_caused"], p["max_loss_bits"]))
        for c in _witness_inputs(attributes):
            row[f"witness_{c}"] = None if top is None else target_text(top[c]) if c == "target" else top[c]
        rows.append(row)
    for v in order_a:
        if v in present_a and v not in present_b:
            rows.append({"variant": v, "status": "only_a"})
    for v in order_b:
        if v in present_b and v not in present_a:
            rows.append({"variant": v, "status": "only_b"})
    columns = ["variant", "status", "word", "fails", "cells", "count", "changed", "better", "worse", "tied",
               "both_garbage", "specials_fixed", "specials_caused", "max_gain_bits", "max_loss_bits",
               "worst_loss_bits"] + [f"witness_{c}" for c in _witness_inputs(attributes)]
    return pd.DataFrame(rows, columns=columns)


_MAXIMA_STATS = ("count", "max_ulp", "max_finite_ulp", "p99_ulp", "mean_bits", "share_correct", "over_1ulp",
                 *SPECIAL_CLASSES)


def _maxima(folder_a: Path, folder_b: Path, variants, machines) -> pd.DataFrame:
    """GroupStats of both runs per (variant, machine, format, profile), side by side."""
    by = ["variant", "machine", "format", "profile"]
    tables = []
    for folder, suffix in ((folder_a, "_a"), (folder_b, "_b")):
        stats = load_stats(folder)
        t = hex_witnesses(stats.merge(by).table(by))
        t = t[t["variant"].isin(variants)]
        keep = by + [c for c in _MAXIMA_STATS] + [c for c in t.columns if c.startswith("witness_")]
        t = t[[c for c in keep if c in t.columns]]
        tables.append(t.rename(columns={c: c + suffix for c in t.columns if c not in by}))
    out = tables[0].merge(tables[1], on=by, how="inner")
    rank = {v: i for i, v in enumerate(variants)}
    mrank = {m: i for i, m in enumerate(machines)}
    out = out.assign(_v=out["variant"].map(rank), _m=out["machine"].map(mrank).fillna(len(mrank)))
    return out.sort_values(["_v", "_m", "format", "profile"], kind="stable").drop(columns=["_v", "_m"]).reset_index(
        drop=True)


# ---------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------

def _worst_shown(attributes) -> list:
    """Columns of the worst points shown on the first screen."""
    return ["variant", "machine", "profile", "pred", "pred_decimal", "target", *attributes, "weight", "dout",
            "loss_bits", "err_ulp_a", "err_ulp_b", "class_b", "computed_b", "rounded"]


def write_diff(result: DiffResult, out_dir, command: str = "") -> Path:
    """Write the diff report and its tables into ``out_dir`` (atomically); returns the folder."""

    def build(folder: Path) -> None:
        tdir = folder / "tables"
        tdir.mkdir()
        tables = {"diff.csv": result.comparisons, "variants.csv": result.variants,
                  "worst_points.csv": result.worst, "maxima.csv": result.maxima}
        for name, frame in tables.items():
            write_csv(frame, tdir / name)
        first, body = _blocks(result, command)
        write_page(folder, f"Diff: {result.study}", f"RUN_B = {result.run_b} against RUN_A = {result.run_a}: "
                   "every variant of both runs compared point by point on the same points.", first, body)

    return write_folder(Path(out_dir), build)


def _blocks(r: DiffResult, command: str) -> tuple:
    t = r.comparisons
    first = [Heading("Verdicts: B against A", 2, "verdict-grid")]
    if len(t):
        grid = t[t["region"] == "all"].assign(subject=t["with_variant"], comparison="B vs A")
        text, style = verdict_grid(grid, r.machines)
        first.append(Table(text, "diff.csv", " (every region, every count and test)", style, id="verdict-table"))
    else:
        first.append(Para("No variant is present in both runs.", "note"))
    words = r.compared[["variant", "word", "fails"]] if len(r.compared) else pd.DataFrame()
    verdict_line = "; ".join(f"{row.variant} {row.word}" + (" (beyond the tolerance)" if row.fails else "")
                             for row in words.itertuples(index=False))
    first.append(Para(
        "Cell: the verdict of B against A on that machine and profile over every region, then better/worse = "
        "changed outputs whose error falls / rises from A to B. Rule: paired on the same points; exact sign tests at "
        "level 0.01 on specials fixed/caused and on finite outputs better/worse; ties, and outputs special or "
        f"over 2^20 ulp in both A and B, are no evidence. Words: {verdict_line or 'none'}. Tolerance {r.tolerance:g} bits: "
        f"exit status {r.exit_status}.", "rule"))
    first.append(Heading("New worst points", 2, "worst-points"))
    if len(r.worst):
        shown = r.worst.sort_values("loss_bits", ascending=False, kind="stable").head(WORST_POINTS)
        first.append(Table(shown[_worst_shown(r.attributes)].reset_index(drop=True), "worst_points.csv",
                           f" ({WORST_POINTS} per variant)"))
        first.append(Para("loss_bits = log2(1 + ulp error in B) - log2(1 + ulp error in A); inf = an output made "
                          "special (NaN, inf, wrong sign, lost inf). Inputs as hex floats.", "note"))
    else:
        first.append(Para("No output got worse: no point loses accuracy from A to B.", "note"))
    only_a = list(r.variants.loc[r.variants["status"] == "only_a", "variant"])
    only_b = list(r.variants.loc[r.variants["status"] == "only_b", "variant"])
    if only_a or only_b:
        first.append(Para(f"Only in RUN_A (not compared): {', '.join(only_a) or 'none'}. Only in RUN_B (not "
                          f"compared): {', '.join(only_b) or 'none'}."))
    body = [Heading("Variants", 2, "variants"),
            Table(r.variants.drop(columns=[c for c in r.variants.columns if c.startswith("witness_")]),
                  "variants.csv", " (with the witness of each worst loss)"),
            Heading("Maxima of both runs", 2, "maxima"),
            Para("GroupStats of each run over the same points (A: _a, B: _b); means are descriptive only."),
            Table(r.maxima[[c for c in r.maxima.columns if not c.startswith("witness_")]], "maxima.csv",
                  " (with the witness of each max_ulp)"),
            Heading("Comparisons per region", 2, "regions")]
    if len(t):
        body.append(Details("Paired counts per machine, profile and region", [Table(
            t[["with_variant", "machine", "profile", "region", "count", "changed", "better", "worse", "tied",
               "both_garbage", "specials_fixed", "specials_caused", "max_loss_bits", "verdict"]], "diff.csv")]))
    body += [Heading("Rule", 2, "rule"), Para(VERDICT_RULE),
             Para("Exit status 1 when some variant's verdict on some machine and profile is hurts and its worst loss "
                  "there (max_loss_bits; infinite when B made an output special that was finite in A) exceeds "
                  f"--tolerance ({r.tolerance:g} bits); 0 otherwise."),
             Heading("Reproduce", 2, "reproduce"),
             Code("\n".join([command or f"precision diff {r.run_a} {r.run_b} --tolerance {r.tolerance:g}",
                             f"RUN_A study sha256 {r.meta.get('a', {}).get('study_sha256')}",
                             f"RUN_B study sha256 {r.meta.get('b', {}).get('study_sha256')}",
                             f"RUN_A code sha256  {r.meta.get('a', {}).get('code_sha256')}",
                             f"RUN_B code sha256  {r.meta.get('b', {}).get('code_sha256')}"]))]
    return first, body
