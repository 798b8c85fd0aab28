"""The size of a study before it runs: points, tasks, scored outputs, memory at peak and time on this machine.

:func:`plan_study` reads only the study (no point is drawn, nothing is allocated
beyond a few small arrays), so a study of a trillion points is sized in
milliseconds and refused by :meth:`StudyPlan.check_memory` before anything is
allocated or written.  Every command that runs a study prints
:meth:`StudyPlan.line` first (``precision run --dry-run`` prints it and stops).

The rates below are the only measured numbers of the estimate: each says what it
counts and where it was measured.  When the oracle or the evaluation gets faster,
update the rate here (and nowhere else); the estimate's time is
``overhead + oracle terms / (oracle rate x cores) + scored outputs / (evaluation
rate x cores)``, with the cores the work can use (the workers, at most the work
units).  Counts are upper bounds where the drawing decides (a random set's
repeats, values that leave a profile's format), so the estimate errs on the
large side.

The memory bound (:func:`memory_limit`): ``--memory-limit`` when given, else
``$PRECISION_MEMORY_LIMIT``, else :data:`DEFAULT_MEMORY_FRACTION` of this
machine's physical memory (``os.sysconf``).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import asdict, dataclass

import numpy as np

from precision.engine.operators import get_operator
from precision.engine.points import study_preds_by_term
from precision.engine.study import PredAxis, Study
from precision.errors import ParameterError, StudyFileError
from precision.exact.formats import get_format, round_to_format

__all__ = ["StudyPlan", "plan_study", "study_variants", "memory_limit", "parse_size", "format_bytes", "format_seconds",
           "ORACLE_TERMS_PER_CORE_SECOND", "EVALUATION_OUTPUTS_PER_CORE_SECOND", "RUN_OVERHEAD_SECONDS",
           "DEFAULT_MEMORY_FRACTION", "MEMORY_LIMIT_ENV", "STREAMED_TERMS_PER_CORE_SECOND",
           "STREAMED_OUTPUTS_PER_CORE_SECOND"]

# ---------------------------------------------------------------------------
# Measured rates (one place: update them here when the code gets faster)
# ---------------------------------------------------------------------------

def _term_rate(op, default: float) -> float:
    """Terms per core-second of the operator ``op``'s oracle: its own measured ``TERMS_PER_SECOND`` when it states
    one (an operator whose terms come from mpmath), else ``default``, the rate measured for SigmoidFocalLossGrad's
    compiled path below."""
    return float(op.TERMS_PER_SECOND or default)


#: Distinct (pred, gamma) focal terms the oracle stage computes per second on one core, cache empty: the
#: compiled certified path (precision.operators.sigmoid_focal_loss_grad.oracle_fast) with the stage's bookkeeping.
#: Measured on the 2-core development machine (Dec 2026): studies/cancellation_threshold.toml's 2,371,152 terms
#: in 3.1 s cold on one worker (0.76 M per second, about 1 s of it loading the compiled passes; the terms
#: alone 5.5 M per second), studies/fp32_stratified_1m.toml's 1,004,099 in 1.7 s.
ORACLE_TERMS_PER_CORE_SECOND = 1.0e6

#: Scored outputs (point x variant x machine) the evaluation, scoring and aggregation of a task handle per second
#: on one core.  Measured on the same machine with every term cached: studies/quick.toml, 7.49 M outputs in
#: 2.1 s on 2 workers (3.4 M per core-second); the stratified fp32 study above, 6.1 M outputs in 4.9 s on its one
#: unit of work (1.6 M per core-second, npu included).
EVALUATION_OUTPUTS_PER_CORE_SECOND = 2.0e6

#: Seconds of every run besides the oracle and the evaluation: the worker pool, the tables, run.json.  Measured:
#: a 98-point study runs in 0.9-1.2 s here, imports excluded.
RUN_OVERHEAD_SECONDS = 1.0

#: Core-seconds of each task besides its scored outputs: building its tensor and groups, writing and reading its
#: chunk.  Measured: studies/gate.toml (112 tasks, 4.0 M outputs) ran in 5.8 s where the outputs alone account for
#: 2.8 s on 2 cores, so about 0.05 core-seconds a task.
TASK_OVERHEAD_SECONDS = 0.05

#: A streamed study's rates (precision.engine.stream: each block's terms computed where it runs, no cache, no
#: stage bookkeeping): distinct terms per core-second of the compiled certified path, and scored outputs per
#: core-second of the rest of a block's job (certified roundings, evaluation, scoring, its chunk).  Measured on
#: the 2-core development machine (Dec 2026), studies/fp32_exhaustive.toml (2,040 blocks of 2^21 preds x 2
#: selectors, kernel and candidate on ieee and npu: 8.56e9 terms, 3.42e10 scored outputs) in 3,522 s on 2
#: workers (2026-12-06, beside other work): 7,044 core-seconds, of which the terms at 9e6/s take 951, so 5.6e6
#: outputs per core-second for the rest; planned with 5.5e6 (the run would have been planned at 60 min).
STREAMED_TERMS_PER_CORE_SECOND = 9.0e6
STREAMED_OUTPUTS_PER_CORE_SECOND = 5.5e6

#: Pred values drawn and deduplicated per second in this process (blocks of sorted values, one pass).
GENERATE_POINTS_PER_SECOND = 2.0e7

#: Bytes per pred value in the run's process: the value, its sorting key and the union's copy (8 bytes each).
BYTES_PER_PRED = 24
#: Bytes per value drawn at once by a set's generator (an int64 draw and its float64 value).
BYTES_PER_DRAW = 16
#: Bytes per distinct focal term in the run's process: x (8), the term table's four float64 columns (32), the
#: cache lookup's and the tasks' copies of them (measured: the stratified study above held about 90 B/term).
BYTES_PER_TERM = 96
#: Bytes per element (pred x target) of a work unit in a worker: operands, exact values, each variant's computed
#: outputs, errors and classes while it is scored (measured: 2.04 M elements, 3 variants, 2 machines in one
#: worker: 576 MB at peak of which about 300 MB is the process itself, so about 140 B per element).
BYTES_PER_ELEMENT = 150
#: Bytes of a process before its work: the interpreter, numpy, pandas, numba's compiled passes (measured: 250-300
#: MB for the run's process, 60 MB for an idle forked worker; 150 MB taken for a working one).
BYTES_PER_PROCESS = 300 << 20
BYTES_PER_WORKER = 150 << 20

#: Studies of at most this many pred values are drawn by the plan and counted exactly (milliseconds); larger
#: ones are sized without drawing a point.
EXACT_COUNT_PREDS = 1 << 20

#: The default memory bound: this share of the machine's physical memory (the rest is the system's and other
#: users').
DEFAULT_MEMORY_FRACTION = 0.5
#: The environment variable that sets the memory bound (a size: ``16G``, ``512M``, ``2T``, or bytes).
MEMORY_LIMIT_ENV = "PRECISION_MEMORY_LIMIT"

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}


def parse_size(text: str, name: str) -> int:
    """A size in bytes from ``16G``, ``512MB``, ``1.5T`` or ``1000000`` (binary units); ParameterError naming
    ``name`` otherwise.

    Examples
    --------
    >>> parse_size("16G", "--memory-limit")
    17179869184
    >>> parse_size("512MB", "--memory-limit") == 512 << 20
    True
    """
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([KMGTP]?)(?:I?B)?\s*", str(text), flags=re.I)
    if not m:
        raise ParameterError(f"{name}={text!r} is not a size; expected a number of bytes or one like 16G, 512M, 2T")
    value = float(m.group(1)) * _UNITS[m.group(2).upper()]
    if not value >= 1:
        raise ParameterError(f"{name}={text!r}; expected a positive size like 16G")
    return int(value)


def physical_memory() -> int | None:
    """This machine's physical memory in bytes (``os.sysconf``), or None where it cannot say."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def memory_limit(option: str | None = None) -> tuple[int, str]:
    """(the memory bound in bytes, where it comes from): ``--memory-limit``, else ``$PRECISION_MEMORY_LIMIT``,
    else :data:`DEFAULT_MEMORY_FRACTION` of the physical memory (16 GiB where the system cannot say)."""
    if option is not None:
        return parse_size(option, "--memory-limit"), "--memory-limit"
    env = os.environ.get(MEMORY_LIMIT_ENV)
    if env:
        return parse_size(env, f"${MEMORY_LIMIT_ENV}"), f"${MEMORY_LIMIT_ENV}"
    total = physical_memory()
    if total is None:
        return 16 << 30, "the default 16G"
    return int(total * DEFAULT_MEMORY_FRACTION), f"{DEFAULT_MEMORY_FRACTION:.0%} of this machine's memory"


def format_bytes(n: float) -> str:
    """``1.2 GB`` (binary units, as ``--memory-limit`` reads them).

    Examples
    --------
    >>> format_bytes(3 << 30), format_bytes(7.28 * 2**40), format_bytes(500)
    ('3.0 GB', '7.3 TB', '500 B')
    """
    for unit, size in (("PB", 1 << 50), ("TB", 1 << 40), ("GB", 1 << 30), ("MB", 1 << 20), ("KB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def format_seconds(s: float) -> str:
    """``0.8 s``, ``42 s``, ``3.5 min``, ``2.1 h``, ``4.0 days``, ``12 years``.

    Examples
    --------
    >>> format_seconds(0.84), format_seconds(42.4), format_seconds(210), format_seconds(3.2e9)
    ('0.8 s', '42 s', '3.5 min', '101 years')
    """
    if s < 10:
        return f"{s:.1f} s"
    if s < 120:
        return f"{s:.0f} s"
    if s < 7200:
        return f"{s / 60:.1f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    if s < 365 * 86400:
        return f"{s / 86400:.1f} days"
    return f"{s / (365 * 86400):.0f} years"


# ---------------------------------------------------------------------------
# Counting points without drawing them
# ---------------------------------------------------------------------------

def _distinct(draws: float, floats: float) -> float:
    """Expected distinct values among ``draws`` uniform draws from ``floats`` values."""
    if floats <= 0 or draws <= 0:
        return 0.0
    return floats * -math.expm1(-draws / floats) if draws < 50 * floats else floats


def _stratified_count(axis: PredAxis) -> float:
    """Expected size of a stratified set: per binade (and sign) overlapping the range, the distinct values of
    ``per_binade`` draws over its floats, as many as fall in the range; plus 0."""
    fmt = get_format(axis.format)
    n = axis.get("per_binade")
    lo, hi = axis.get("range", (-fmt.max_finite, fmt.max_finite))
    width = fmt.prec - 1
    total = 1.0
    for e in range(fmt.emin - 1, fmt.emax + 1):
        base = math.ldexp(1.0, max(e, fmt.emin))
        start, top = (base, 2 * base) if e >= fmt.emin else (0.0, base)
        floats = float(1 << width) - (1 if e < fmt.emin else 0)
        for sign in (1.0, -1.0):
            a, b = sorted((sign * start, sign * top))
            overlap = min(b, hi) - max(a, lo)
            if overlap < 0 or b < lo or a > hi:
                continue
            share = min(1.0, overlap / (b - a)) if b > a else 1.0
            total += _distinct(n, floats) * share
    return total


def _axis_count(axis: PredAxis, term, operator: str) -> float:
    """An upper bound (or the expectation, for a stratified set) of the number of pred values of one set."""
    fmt = get_format(axis.format)
    if axis.per_term:
        size = getattr(get_operator(operator).PRED_SETS[axis.kind], "size", None)
        if size is not None:
            return float(size(axis.format, dict(axis.params), term))
        return 1.0
    if axis.kind == "exhaustive":
        start, stop = fmt.finite_positions(*axis.get("range", (None, None)))
        return float(max(0, stop - start))
    if axis.kind == "stratified":
        return _stratified_count(axis)
    if axis.kind == "grid":
        return float(axis.get("num"))
    if axis.kind in ("list", "file"):
        return float(len(axis.get("values")))
    return float(axis.get("count"))  # normal, uniform_real


def _largest_draw(axis: PredAxis) -> float:
    """Values drawn at once by one set before they are deduplicated (one binade's ``per_binade``, a grid's
    ``num``, a random set's ``count``): the transient of its generation."""
    if axis.kind == "stratified":
        return float(axis.get("per_binade"))
    if axis.kind == "grid":
        return float(axis.get("num"))
    if axis.kind in ("normal", "uniform_real"):
        return float(axis.get("count"))
    return 0.0


def study_variants(study: Study) -> tuple:
    """The variant names a study evaluates (``all`` expanded to the operator's registry, in order)."""
    names = []
    for v in study.variants:
        names.extend(get_operator(study.operator).variant_names() if v == "all" else [v])
    return tuple(dict.fromkeys(names))


# ---------------------------------------------------------------------------
# The plan
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class StudyPlan:
    """The size of a study (see the module docstring); every count an upper bound where the drawing decides.

    Attributes
    ----------
    study : str
        The study's name.
    preds : int
        Distinct pred values (summed over the values of the terms attribute when a set depends on it).
    points : int
        Points (pred x target) of all the tasks, as ``precision run`` counts them.
    tasks : int
        Tasks: one per (machine, profile, attribute values, weight, dout).
    units : int
        Units of work: a task's machines run together, so the tasks of one point set are one unit.
    outputs : int
        Scored outputs: points x variants (every variant on every task).
    terms : int
        Distinct (x, terms attribute value) exact-value terms before the cache (x and -x where both are needed).
    workers : int
        Worker processes the run uses (the requested or every core, at most :attr:`units` and the oracle's
        chunks).
    requested_workers : int
        What was asked (``--workers``), or the cores.
    cores : int
        This machine's cores.
    memory_bytes : int
        Memory at peak: this process (points, terms, tables) and the working workers.
    oracle_seconds, evaluation_seconds, seconds : float
        The estimated time of the oracle (nothing cached), of the evaluation, and in all.
    block : int
        A streamed study's preds per block (each block a task's tile: :mod:`precision.engine.stream`); 0 for a
        study run whole.
    """

    study: str
    preds: int
    points: int
    tasks: int
    units: int
    outputs: int
    terms: int
    workers: int
    requested_workers: int
    cores: int
    memory_bytes: int
    oracle_seconds: float
    evaluation_seconds: float
    seconds: float
    block: int = 0

    def line(self) -> str:
        """The plan in one line, printed before a study runs."""
        blocks = (f" ({self.units:,} blocks of up to {self.block:,} preds, each block a task's tile)"
                  if self.block else "")
        return (f"{self.study}: plan: {self.points:,} points ({self.preds:,} preds) in {self.tasks:,} tasks{blocks}, "
                f"{self.outputs:,} scored outputs, {self.terms:,} oracle terms before the cache; "
                f"memory at peak ~{format_bytes(self.memory_bytes)}; estimated {format_seconds(self.seconds)} "
                f"on {self.workers} worker{'s' if self.workers != 1 else ''} (oracle "
                f"{format_seconds(self.oracle_seconds)} when nothing is cached, evaluation "
                f"{format_seconds(self.evaluation_seconds)})")

    def workers_note(self, requested: int | None) -> str | None:
        """The note of a run asked for more workers (``--workers``) than this machine has cores; None
        otherwise."""
        if requested is None or requested <= self.cores:
            return None
        units = f"{self.units} blocks" if self.block else f"{self.units} units of work and its oracle chunks"
        return (f"--workers={requested} is more than this machine's {self.cores} cores; capped at {self.workers} "
                f"(the study's {units} use no more)" + (", the rest sharing cores" if self.workers > self.cores
                                                        else ""))

    def to_json(self) -> dict:
        """The plan as a JSON object (``run --json``)."""
        return asdict(self)

    def check_memory(self, limit: int, source: str, path: str) -> None:
        """Refuse a study whose memory at peak passes ``limit`` bytes (``source``: where the bound comes from),
        before anything is allocated or written: one line naming the study file, the estimate and how to run
        it.

        Raises
        ------
        StudyFileError
        """
        if self.memory_bytes <= limit:
            return
        share = max(2, math.ceil(self.memory_bytes / max(limit, 1)))
        raise StudyFileError(
            f"{path}: pred: {self.points:,} points ({self.preds:,} preds, {self.outputs:,} scored outputs) need "
            f"~{format_bytes(self.memory_bytes)} at peak, past the memory bound of {format_bytes(limit)} ({source}), "
            f"and ~{format_seconds(self.seconds)} here; run it in chunks: at least {share} studies each with a "
            f"part of pred.range (or fewer points: per_binade, num, count), one at a time; a Dask cluster "
            f"(--scheduler) takes the tasks' memory, not this process's points and terms; --memory-limit "
            f"(or ${MEMORY_LIMIT_ENV}) moves the bound")


def _combinations(study: Study, op) -> int:
    """Tasks per machine, profile and value of the terms attribute: the combinations of the operator's other
    attributes' values, weights and douts."""
    others = [values for name, values in study.attributes if name != op.TERMS_ATTRIBUTE]
    return math.prod(len(v) for v in others) * len(study.weights) * len(study.douts)


def plan_study(study: Study, workers: int | None = None, scheduler: str | None = None) -> StudyPlan:
    """The size of ``study`` run with ``workers`` processes (None: every core), without drawing a point.

    Parameters
    ----------
    study : Study
    workers : int, optional
        ``--workers``; None: every core.
    scheduler : str, optional
        ``--scheduler``: a remote cluster's workers are not this machine's (their memory is not counted).
    """
    op = get_operator(study.operator)
    term_values = list(study.term_values)
    per_term = any(axis.per_term for axis in study.pred_sets)
    preds_at = {}
    for term in term_values if per_term else term_values[:1]:
        preds_at[term] = sum(_axis_count(axis, term, study.operator) for axis in study.pred_sets)
    if not per_term:
        preds_at = {term: preds_at[term_values[0]] for term in term_values}
    need_pos, need_neg = op.term_sides(dict(study.attributes), study.targets)
    sides = int(need_pos) + int(need_neg)
    terms = sum(preds_at.values()) * sides
    # (per term value, per profile: the preds a tensor of the profile's format holds; all, unless counted)
    kept = {(term, profile): preds_at[term] for term in term_values for profile in study.profiles}
    if study.streamed:
        return _streamed_plan(study, preds_at[term_values[0]], sides, workers, scheduler)
    if sum(preds_at.values()) <= EXACT_COUNT_PREDS:  # small sets are drawn and counted exactly
        drawn = study_preds_by_term(study)
        preds_at = {term: float(drawn[term].size) for term in term_values}
        terms = 0
        for term in term_values:
            p = drawn[term]
            xs = np.concatenate([p if need_pos else p[:0], -p if need_neg else p[:0]])
            terms += np.unique(xs.view(np.int64)).size
        for term in term_values:
            for profile in study.profiles:
                p = drawn[term]
                exact = round_to_format(p, get_format(profile.pred)).astype(np.float64).view(np.int64) == p.view(
                    np.int64)
                kept[term, profile] = float(exact.sum())
    combos = _combinations(study, op)
    per_machine = sum(kept.values()) * combos
    T = len(study.targets)
    M = len(study.machines)
    points = per_machine * M * T
    tasks = sum(1 for n in kept.values() if n > 0) * combos * M
    units = max(1, tasks // max(M, 1))
    variants = len(study_variants(study))
    outputs = points * variants
    cores = os.cpu_count() or 1
    requested = workers or cores
    chunks = math.ceil(terms / 8192) if terms else 0  # the oracle's chunks (sweep.TERM_CHUNK)
    used = max(1, min(requested, max(units, chunks)))
    local = scheduler is None or scheduler == "local"
    oracle_cores = min(used, cores, max(chunks, 1)) if local else used
    eval_cores = min(used, cores, units) if local else min(used, units)
    oracle_seconds = terms / (_term_rate(op, ORACLE_TERMS_PER_CORE_SECOND) * oracle_cores)
    evaluation_seconds = (outputs / EVALUATION_OUTPUTS_PER_CORE_SECOND + tasks * TASK_OVERHEAD_SECONDS) / max(
        eval_cores, 1)
    generate_seconds = sum(preds_at.values()) / GENERATE_POINTS_PER_SECOND
    seconds = RUN_OVERHEAD_SECONDS + generate_seconds + oracle_seconds + evaluation_seconds
    largest_unit = max(preds_at.values(), default=0) * T * M
    held = sum(preds_at.values()) if per_term else max(preds_at.values(), default=0)
    draw = max((_largest_draw(axis) for axis in study.pred_sets), default=0.0)
    generation = BYTES_PER_PROCESS + held * BYTES_PER_PRED + draw * BYTES_PER_DRAW
    memory = max(generation, BYTES_PER_PROCESS + held * BYTES_PER_PRED + terms * BYTES_PER_TERM
              + (min(used, units) * (BYTES_PER_WORKER + largest_unit * BYTES_PER_ELEMENT) if local else 0))
    return StudyPlan(study.name, int(round(sum(preds_at.values()))), int(round(points)), int(tasks), int(units),
                     int(round(outputs)), int(round(terms)), int(used), int(requested), int(cores), int(memory),
                     oracle_seconds, evaluation_seconds, seconds)


def _streamed_plan(study: Study, preds: float, sides: int, workers: int | None, scheduler: str | None) -> StudyPlan:
    """The plan of a streamed study (:attr:`~precision.engine.study.Study.streamed`): its blocks of
    ``[pred] block`` preds (:attr:`~precision.engine.study.Study.stream_block`) are its units of work; each worker holds one block's
    terms and tensors, this process no pred at all (its tables' groups only)."""
    op = get_operator(study.operator)
    start, stop = get_format(study.pred.format).finite_positions(*study.pred.get("range", (None, None)))
    size = study.stream_block
    blocks = len(range(start // size * size, stop, size)) if stop > start else 0
    combos = _combinations(study, op)
    T, M, V = len(study.targets), len(study.machines), len(study_variants(study))
    values = len(study.term_values) * len(study.profiles)
    points = preds * values * combos * M * T
    tasks = blocks * values * combos * M
    terms = preds * len(study.term_values) * sides
    cores = os.cpu_count() or 1
    requested = workers or cores
    used = max(1, min(requested, blocks))
    local = scheduler is None or scheduler == "local"
    run_cores = min(used, cores) if local else used
    oracle_seconds = terms / (_term_rate(get_operator(study.operator), STREAMED_TERMS_PER_CORE_SECOND) * run_cores)
    evaluation_seconds = (points * V / STREAMED_OUTPUTS_PER_CORE_SECOND + tasks * TASK_OVERHEAD_SECONDS) / run_cores
    block = min(size, preds)
    memory = BYTES_PER_PROCESS + (used * (BYTES_PER_WORKER + block * (T * M * BYTES_PER_ELEMENT
                                                                       + sides * BYTES_PER_TERM)) if local else 0)
    return StudyPlan(study.name, int(preds), int(round(points)), int(tasks), int(blocks), int(round(points * V)),
                     int(round(terms)), int(used), int(requested), int(cores), int(memory), oracle_seconds,
                     evaluation_seconds, RUN_OVERHEAD_SECONDS + oracle_seconds + evaluation_seconds, size)
