"""The regression gate: scores of a study against error budgets, for CI.

A budgets file (``studies/budgets.toml``)::

    [gate]
    study = "gate.toml"            # the gate's points (relative to this file)
    corpus = "worst_cases.txt"     # known worst cases: replayed by the study, extended by every run
    tighten_below = 0.5            # "can tighten" when observed < limit * tighten_below
    baseline_tolerance = 0.05      # relative slack before a worse metric is a regression
    headroom = 1.25                # --propose: limit = observed * headroom

    [[budget]]
    variant = "kernel"             # a registry name
    format = "fp32"                # output format
    machine = "npu"                  # machine spec
    region = "all"                 # "all" or a region label of the study ("[-8, 0)")
    max_ulp = 1.2e8                # each metric optional; omitted = not checked
    p99_ulp = 2.0e7
    mean_bits = 3.5
    min_share_correct = 0.3
    nan = 0                        # allowed counts of each special class (default 0)
    inf = 0
    wrong_sign = 0
    lost_inf = 0
    mere = 2e-7                    # acceptance standards (optional): mean / max relative error, RMSE,
    mare = 1e-4                    # the allclose share of the study's preset, outputs the standards
    rmse = 1e-7                    # cannot see (blind: a count), the lowest ratio level ("L0", "L1",
    min_allclose_share = 1.0       # "L2"; observed as 1, 2, 3, none as 0; a special mismatch: MERE,
                                   # MARE and RMSE inf, the level 0; not judged: NaN, which fails)
    blind = 4000
    min_level = "L2"
    ms_benchmark = "pass"          # msprobe's standards (optional): the least verdict accepted, "pass" or
    ms_ratio = "warning"           # "warning" (ms_benchmark, ms_ulp, ms_absolute, ms_ratio; not judged fails)
    observed = { max_ulp = 8.8e7, p99_ulp = 9.9e6, mean_bits = 2.9, share_correct = 0.33 }
    witness = "pred=0x1.0a40000000000p+4 target=0 alpha=0x1.0000000000000p-2 gamma=..."

Each budget records the observed values it was set from and the witness of
its max error, so the file explains itself.  The gate prints one line per
(budget, metric)::

    PASS kernel fp32 npu all max_ulp observed=87676460 limit=1.2e+08 witness=pred=0x1.0a4...p+4,target=0,...

A check that cannot fail (an upper limit of ``inf``, or a lower limit of 0 or
less on a share or level) is an ``UNBOUNDED`` line, counted apart from the
passes (it neither passes nor fails: it measures and reports)::

    UNBOUNDED golden fp16 ieee all max_ulp observed=inf limit=inf witness=...

then ``REGRESSION`` lines (worse than the baseline beyond its tolerance, even
within budget), ``TIGHTEN`` lines (the limit sits far above the observed
value: "can tighten to ..."), and one summary line.  Exit status: 0 when every
budget passes and nothing regressed, 1 otherwise, 2 on a usage or input
error.
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import re
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import numpy as np
import pandas as pd

from precision.errors import ParameterError, PrecisionError, StudyFileError
from precision.io.files import atomic_open
from precision.analysis.groups import witness_fields
from precision.analysis.msprobe import MSPROBE_VERDICTS
from precision.analysis.scoring import SPECIAL_CLASSES
from precision.analysis.standards import LEVEL_RANK, ROW_LEVEL_RANK, settings_from_options, standards_table
from precision.engine.study import load_study
from precision.engine.sweep import hex_witnesses, load_stats, run_study
from precision.recipes.target_kinds import target_text

__all__ = ["Budget", "GateSettings", "GateLine", "load_budgets", "measure", "check_budgets", "run_gate",
           "propose_budgets", "append_to_corpus", "METRICS"]

#: metric -> (budget key, comparison): "le" observed <= limit, "ge" observed >= limit.
METRICS = {
    "max_ulp": ("max_ulp", "le"),
    "p99_ulp": ("p99_ulp", "le"),
    "mean_bits": ("mean_bits", "le"),
    "share_correct": ("min_share_correct", "ge"),
    "nan": ("nan", "le"),
    "inf": ("inf", "le"),
    "wrong_sign": ("wrong_sign", "le"),
    "lost_inf": ("lost_inf", "le"),
    # the acceptance standards (precision.analysis.standards, with the study's [report.standards] settings)
    "mere": ("mere", "le"),
    "mare": ("mare", "le"),
    "rmse": ("rmse", "le"),
    "allclose_share": ("min_allclose_share", "ge"),
    "blind": ("blind", "le"),
    "level": ("min_level", "ge"),
    # msprobe's pre-check standards (precision.analysis.msprobe): the least verdict accepted, "pass" or "warning"
    **{name: (name, "ge") for name in MSPROBE_VERDICTS},
}
#: msprobe's verdicts as numbers (for budgets): error 0, warning 1, pass 2; ``not judged`` is NaN (fails).
MS_VERDICT_RANK = {"error": 0, "warning": 1, "pass": 2}
_COUNT_METRICS = SPECIAL_CLASSES
_BUDGET_KEYS = {"variant", "format", "machine", "region", "observed", "witness",
                *(key for key, _ in METRICS.values())}
_GATE_KEYS = {"study", "corpus", "tighten_below", "baseline_tolerance", "headroom"}


@dataclass(frozen=True)
class GateSettings:
    """The [gate] table: paths resolved against the budgets file's folder."""

    study: Path
    corpus: Path | None
    tighten_below: float = 0.5
    baseline_tolerance: float = 0.05
    headroom: float = 1.25


@dataclass(frozen=True)
class Budget:
    """One budget: limits for one (variant, format, machine, region)."""

    variant: str
    format: str
    machine: str
    region: str
    limits: tuple  # (metric, limit) pairs, metric names as in METRICS
    observed: tuple = ()
    witness: str = ""

    @property
    def key(self) -> str:
        return f"{self.variant} {self.format} {self.machine} {self.region}"


@dataclass(frozen=True)
class GateLine:
    """One checked (budget, metric): status PASS, FAIL or UNBOUNDED (a limit that nothing can pass:
    :func:`unbounded`)."""

    status: str
    budget: Budget
    metric: str
    observed: float
    limit: float
    witness: str
    witness_pred: float | None = None  # the witness's pred (exact), for the worst-case corpus

    def text(self) -> str:
        return (f"{self.status} {self.budget.key} {self.metric} observed={_num(self.observed)} "
                f"limit={_num(self.limit)} witness={self.witness}")


def unbounded(metric: str, limit: float) -> bool:
    """Whether a check cannot fail: an upper limit of +inf, or a lower limit at or below 0 (shares and levels are
    never negative)."""
    return limit == math.inf if METRICS[metric][1] == "le" else limit <= 0


def _num(v: float) -> str:
    if isinstance(v, (int, np.integer)) or (isinstance(v, float) and v.is_integer() and abs(v) < 1e15):
        return str(int(v))
    return f"{v:.6g}"


def _error(path, key, message) -> StudyFileError:
    return StudyFileError(f"{path}: {key}: {message}")


def _number(path, key, v, integer=False):
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _error(path, key, f"{v!r} has the wrong type; expected a number")
    if integer and (not float(v).is_integer() or v < 0):
        raise _error(path, key, f"{v!r}; expected a count (a non-negative integer)")
    if math.isnan(v) or v < 0:
        raise _error(path, key, f"{v!r}; expected a non-negative number")
    return float(v)


def load_budgets(path) -> tuple[GateSettings, list]:
    """Read and validate a budgets file; StudyFileError names the file and key."""
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise StudyFileError(f"{path}: cannot read the budgets file ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise StudyFileError(f"{path}: TOML syntax error: {exc}") from None
    unknown = sorted(set(data) - {"gate", "budget"})
    if unknown:
        raise _error(path, unknown[0], "unknown key; expected [gate] and [[budget]] tables")
    gate = data.get("gate", {})
    if not isinstance(gate, dict):
        raise _error(path, "gate", "expected a [gate] table")
    bad = sorted(set(gate) - _GATE_KEYS)
    if bad:
        raise _error(path, f"gate.{bad[0]}", f"unknown key; expected one of {', '.join(sorted(_GATE_KEYS))}")
    if "study" not in gate or not isinstance(gate["study"], str):
        raise _error(path, "gate.study", "missing; expected the gate study file's path")
    corpus = gate.get("corpus")
    if corpus is not None and not isinstance(corpus, str):
        raise _error(path, "gate.corpus", f"{corpus!r}; expected a path")
    settings = GateSettings(
        study=path.parent / gate["study"], corpus=(path.parent / corpus) if corpus else None,
        tighten_below=_number(path, "gate.tighten_below", gate.get("tighten_below", 0.5)),
        baseline_tolerance=_number(path, "gate.baseline_tolerance", gate.get("baseline_tolerance", 0.05)),
        headroom=_number(path, "gate.headroom", gate.get("headroom", 1.25)))
    rows = data.get("budget", [])
    if not isinstance(rows, list) or not rows:
        raise _error(path, "budget", "expected at least one [[budget]] table")
    budgets = []
    seen = set()
    for i, row in enumerate(rows):
        where = f"budget[{i}]"
        bad = sorted(set(row) - _BUDGET_KEYS)
        if bad:
            raise _error(path, f"{where}.{bad[0]}", f"unknown key; expected one of {', '.join(sorted(_BUDGET_KEYS))}")
        ids = []
        for key in ("variant", "format", "machine", "region"):
            v = row.get(key, "all" if key == "region" else None)
            if not isinstance(v, str) or not v:
                raise _error(path, f"{where}.{key}", f"{v!r}; expected a string")
            ids.append(v)
        limits = []
        for metric, (key, _) in METRICS.items():
            if metric == "level" and key in row:
                if row[key] not in LEVEL_RANK:
                    raise _error(path, f"{where}.{key}", f"{row[key]!r}; expected one of "
                                                         f"{', '.join(repr(k) for k in LEVEL_RANK)}")
                limits.append((metric, float(LEVEL_RANK[row[key]])))
            elif metric.startswith("ms_") and key in row:
                if row[key] not in MS_VERDICT_RANK:
                    raise _error(path, f"{where}.{key}", f"{row[key]!r}; expected one of "
                                                         f"{', '.join(repr(k) for k in MS_VERDICT_RANK)}")
                limits.append((metric, float(MS_VERDICT_RANK[row[key]])))
            elif key in row:
                limits.append((metric, _number(path, f"{where}.{key}", row[key],
                                               metric in _COUNT_METRICS or metric == "blind")))
            elif metric in _COUNT_METRICS:
                limits.append((metric, 0.0))
        observed = row.get("observed", {})
        if not isinstance(observed, dict):
            raise _error(path, f"{where}.observed", "expected an inline table of observed values")
        budget = Budget(*ids, tuple(limits), tuple(sorted(observed.items())), str(row.get("witness", "")))
        if budget.key in seen:
            raise _error(path, where, f"duplicate budget for {budget.key}")
        seen.add(budget.key)
        budgets.append(budget)
    return settings, budgets


# ---------------------------------------------------------------------------
# Measuring a run
# ---------------------------------------------------------------------------

def measure(run_dir) -> pd.DataFrame:
    """Observed metrics per (variant, format, machine, region), "all" included, from a run folder.

    The statistics are :class:`precision.analysis.groups.GroupStats` merged from the
    run's fine groups (:func:`precision.engine.sweep.load_stats`); the special-class
    counts are floats, like every other metric.
    """
    stats = load_stats(run_dir)
    keys = ["variant", "format", "machine"]
    by_region = stats.merge(keys + ["region"]).table(keys + ["region"])
    overall = stats.merge(keys).table(keys).assign(region="all")
    table = hex_witnesses(pd.concat([overall, by_region], ignore_index=True))
    for col in SPECIAL_CLASSES:
        table[col] = table[col].astype(float)
    if "acc_sum_r" in stats.frame.columns:
        report = json.loads((Path(run_dir) / "run.json").read_text()).get("report") or {}
        settings = settings_from_options((report.get("options") or {}).get("standards"))
        acc = standards_table(stats, settings)[keys + ["region", "mere", "mare", "rmse", "allclose_share", "blind",
                                                       "level", "special_mismatch", *MSPROBE_VERDICTS]]
        for name in MSPROBE_VERDICTS:
            acc[name] = acc[name].map(MS_VERDICT_RANK).astype(float)
        # a special mismatch fails the case before any metric (TTK's stat_rel_err): every budget on one fails
        failed = acc.pop("special_mismatch").to_numpy() > 0
        for metric in ("mere", "mare", "rmse"):
            acc[metric] = np.where(failed, np.inf, acc[metric].to_numpy(np.float64))
        acc = acc.assign(blind=acc["blind"].astype(float), level=acc["level"].map(ROW_LEVEL_RANK).astype(float))
        table = table.merge(acc, on=keys + ["region"], how="left")
    return table


def _witness(row) -> str:
    """The inputs of a row's witness: pred, target, the operator's attributes, weight, dout."""
    fields = witness_fields(row.keys(), "witness_", inputs_only=True)
    return ",".join(f"{f}={target_text(row['witness_target']) if f == 'target' else row[f'witness_{f}']}"
                    for f in fields)


def check_budgets(budgets, observed: pd.DataFrame) -> list:
    """PASS/FAIL lines for every (budget, metric); a budget with no data fails its every metric."""
    rows = {k: observed.iloc[i] for i, k in enumerate(zip(observed["variant"], observed["format"],
                                                           observed["machine"], observed["region"]))}
    lines = []
    for b in budgets:
        key = (b.variant, b.format, b.machine, b.region)
        row = rows.get(key)
        for metric, limit in b.limits:
            if row is None:
                lines.append(GateLine("FAIL", b, metric, math.nan, limit, "no-data"))
                continue
            value = float(row[metric])
            ok = value <= limit if METRICS[metric][1] == "le" else value >= limit
            pred = row["witness_pred"]
            status = "UNBOUNDED" if unbounded(metric, limit) else "PASS" if ok else "FAIL"
            lines.append(GateLine(status, b, metric, value, limit, _witness(row),
                                  float.fromhex(pred) if isinstance(pred, str) else None))
    return lines


def _tighten_lines(lines, settings: GateSettings) -> list:
    out = []
    for line in lines:
        if line.status == "FAIL" or METRICS[line.metric][1] != "le" or line.metric in _COUNT_METRICS:
            continue
        if line.limit > 0 and math.isfinite(line.observed) and line.observed < line.limit * settings.tighten_below:
            proposal = _round_up(line.observed * settings.headroom)
            out.append(f"TIGHTEN {line.budget.key} {line.metric} observed={_num(line.observed)} "
                       f"limit={_num(line.limit)} can tighten to {_num(proposal)}")
    return out


def _round_up(v: float) -> float:
    """v rounded up to 3 significant digits (a readable limit)."""
    if v <= 0 or not math.isfinite(v):
        return v
    scale = 10.0 ** (math.floor(math.log10(v)) - 2)
    return math.ceil(v / scale - 1e-9) * scale


def _baseline_lines(lines, baseline: dict, tolerance: float) -> list:
    out = []
    for line in lines:
        base = baseline.get(f"{line.budget.key} {line.metric}")
        if base is None:
            continue
        if METRICS[line.metric][1] == "le":
            worse = line.observed > base * (1 + tolerance)
        else:
            worse = line.observed < base * (1 - tolerance)
        if worse:
            out.append(f"REGRESSION {line.budget.key} {line.metric} observed={_num(line.observed)} "
                       f"baseline={_num(base)} tolerance={tolerance:g} witness={line.witness}")
    return out


# ---------------------------------------------------------------------------
# Files: corpus, baseline, JUnit, JSON, proposed budgets
# ---------------------------------------------------------------------------

def _atomic_text(path: Path, text: str) -> None:
    with atomic_open(path) as fh:
        fh.write(text)


def append_to_corpus(corpus: Path, preds, note: str) -> int:
    """Append pred values (hex) not yet in the corpus file; returns how many were new.

    Locked and atomic, deduplicated by exact value (bits).
    """
    corpus = Path(corpus)
    corpus.parent.mkdir(parents=True, exist_ok=True)
    # the lock is on the corpus's folder (the file itself is replaced by each write): no lock file is left behind
    folder = os.open(corpus.absolute().parent, os.O_RDONLY)
    try:
        fcntl.flock(folder, fcntl.LOCK_EX)
        text = corpus.read_text() if corpus.exists() else "# worst-case pred values found by gates and studies\n"
        known = set()  # by hex spelling, so -0 and +0 are two values
        for line in text.splitlines():
            item = line.split("#", 1)[0].strip()
            if item:
                known.add((float.fromhex(item) if "0x" in item.lower() else float(item)).hex())
        new = []
        for v in preds:
            v = float(v)
            if math.isfinite(v) and v.hex() not in known:
                known.add(v.hex())
                new.append(v)
        if new:
            if not text.endswith("\n"):
                text += "\n"
            text += "".join(f"{v.hex()}  # {note}\n" for v in new)
            _atomic_text(corpus, text)
    finally:
        os.close(folder)  # releases the lock
    return len(new)


def _junit(lines, regressions, seconds: float) -> str:
    cases = []
    for line in lines:
        name = quoteattr(f"{line.budget.key} {line.metric}")
        body = "" if line.status == "PASS" else (
            f'<skipped message={quoteattr("unbounded: " + line.text())}/>' if line.status == "UNBOUNDED" else
            f'<failure message={quoteattr(line.text())}>{escape(line.text())}</failure>')
        cases.append(f'  <testcase classname="precision.gate" name={name}>{body}</testcase>')
    for text in regressions:
        cases.append(f'  <testcase classname="precision.gate.baseline" name={quoteattr(text.split(" observed")[0])}>'
                     f'<failure message={quoteattr(text)}>{escape(text)}</failure></testcase>')
    failures = sum(line.status == "FAIL" for line in lines) + len(regressions)
    skipped = sum(line.status == "UNBOUNDED" for line in lines)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<testsuite name="precision.gate" tests="{len(cases)}" failures="{failures}" skipped="{skipped}" '
            f'time="{seconds:.3f}">\n' + "\n".join(cases) + "\n</testsuite>\n")


def _json(lines, regressions, tighten) -> str:
    return json.dumps({
        "lines": [{"status": ln.status, "variant": ln.budget.variant, "format": ln.budget.format,
                   "machine": ln.budget.machine, "region": ln.budget.region, "metric": ln.metric,
                   "observed": ln.observed if math.isfinite(ln.observed) else str(ln.observed),
                   "limit": ln.limit, "witness": ln.witness} for ln in lines],
        "regressions": regressions, "tighten": tighten,
        "passed": sum(ln.status == "PASS" for ln in lines), "failed": sum(ln.status == "FAIL" for ln in lines),
        "unbounded": sum(ln.status == "UNBOUNDED" for ln in lines),
    }, indent=2, sort_keys=True) + "\n"


def propose_budgets(settings_text: str, observed: pd.DataFrame, headroom: float, variants=None) -> str:
    """A budgets file whose limits are the observed values times ``headroom``."""
    out = [settings_text.rstrip() + "\n"]
    for r in observed.sort_values(["variant", "format", "machine", "region"], kind="stable").itertuples(index=False):
        if variants and r.variant not in variants:
            continue
        obs = {m: float(getattr(r, m)) for m in METRICS}
        out.append("\n[[budget]]")
        out.append("\n".join(f"{key} = {_toml_string(value)}" for key, value in (
            ("variant", r.variant), ("format", r.format), ("machine", r.machine), ("region", r.region))))
        for metric in ("max_ulp", "p99_ulp", "mean_bits"):
            v = obs[metric]
            out.append(f"{metric} = {_toml_num(_round_up(v * headroom) if v > 0 else 0.0)}")
        share = obs["share_correct"]
        out.append(f"min_share_correct = {_toml_num(math.floor(share * (1 - (headroom - 1) / 10) * 1e4) / 1e4)}")
        for metric in _COUNT_METRICS:
            out.append(f"{metric} = {int(obs[metric])}")
        out.append("observed = { " + ", ".join(f"{m} = {_toml_num(v)}" for m, v in obs.items()) + " }")
        out.append(f'witness = {_toml_string(_witness(r._asdict()).replace(",", " "))}')
    return "\n".join(out) + "\n"


def _toml_string(text: str) -> str:
    """A TOML basic string (JSON's escaping is TOML's for these characters)."""
    return json.dumps(str(text), ensure_ascii=False)


def _toml_num(v: float) -> str:
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if math.isnan(v):
        return "nan"
    return repr(float(f"{v:.8g}"))


# ---------------------------------------------------------------------------
# The gate
# ---------------------------------------------------------------------------

@dataclass
class GateResult:
    lines: list
    regressions: list
    tighten: list
    summary: str
    exit_status: int
    extra: dict = field(default_factory=dict)


def run_gate(budgets_path, *, study_path=None, out_dir=None, baseline=None, update_baseline=False, junit=None,
             json_path=None, cache_dir=None, use_cache=True, workers=None, scheduler=None,
             propose=None, memory_limit=None, on_plan=None) -> GateResult:
    """Run the gate study, check the budgets, write the requested files; see the module docstring.

    ``memory_limit`` and ``on_plan`` go to :func:`precision.engine.sweep.run_study` (the study's plan and its
    memory bound)."""
    started = time.perf_counter()
    if update_baseline and not baseline:
        raise ParameterError("update_baseline needs a baseline file to write (--baseline FILE)")
    settings, budgets = load_budgets(budgets_path)
    study = load_study(study_path or settings.study)
    baseline_data = None
    if baseline and not update_baseline:
        try:
            baseline_data = json.loads(Path(baseline).read_text())
        except OSError as exc:
            raise PrecisionError(f"--baseline={baseline}: cannot read ({exc.strerror})") from None
        except json.JSONDecodeError as exc:
            raise PrecisionError(f"--baseline={baseline}: not a baseline file ({exc.msg})") from None
    out = Path(out_dir) if out_dir else Path("out") / study.name
    run_study(study, out, cache_dir=cache_dir, use_cache=use_cache, workers=workers, scheduler=scheduler,
              memory_limit=memory_limit, on_plan=on_plan)
    observed = measure(out)
    lines = check_budgets(budgets, observed)
    regressions = _baseline_lines(lines, baseline_data, settings.baseline_tolerance) if baseline_data else []
    tighten = _tighten_lines(lines, settings)
    if settings.corpus is not None:
        witnesses = {line.witness_pred for line in lines if line.witness_pred is not None}
        append_to_corpus(settings.corpus, sorted(witnesses), f"gate witness, {study.name}")
    if update_baseline:
        target = Path(baseline)
        _atomic_text(target, json.dumps({f"{ln.budget.key} {ln.metric}": ln.observed for ln in lines
                                         if math.isfinite(ln.observed)}, indent=2, sort_keys=True) + "\n")
    if propose:
        gate_table = re.split(r"^\[\[budget\]\]", Path(budgets_path).read_text(), maxsplit=1, flags=re.M)[0]
        _atomic_text(Path(propose), propose_budgets(gate_table, observed, settings.headroom))
    seconds = time.perf_counter() - started
    failed = sum(line.status == "FAIL" for line in lines)
    free = sum(line.status == "UNBOUNDED" for line in lines)
    summary = (f"gate: {len(lines)} checks of {len(budgets)} budgets, {len(lines) - failed - free} PASS, {failed} FAIL, "
               f"{len(regressions)} REGRESSION, {free} UNBOUNDED (cannot fail), {len(tighten)} can tighten "
               f"({Path(budgets_path)}, {seconds:.1f} s)")
    if junit:
        _atomic_text(Path(junit), _junit(lines, regressions, seconds))
    if json_path:
        _atomic_text(Path(json_path), _json(lines, regressions, tighten))
    status = 1 if failed or regressions else 0
    return GateResult(lines, regressions, tighten, summary, status)
