"""Recipes as tables of named steps: one description for evaluating, sharing, tracing and explaining.

A *recipe* (the production kernel with its guard switches, the golden, MMCV,
the candidate) is a :class:`Recipe`: an ordered table of :class:`Step` rows.
Each row names one intermediate value and says

* which values it reads (``inputs``: earlier steps or the loaded operands
  ``x``, ``t``, ``d``, ``w``),
* how the machine computes it (``op``: primitive ops of
  :class:`precision.machine.Machine`, usually exactly one rounding),
* which real number it stands for (``exact``: a function of the point's exact
  quantities, see :mod:`precision.operators.sigmoid_focal_loss_grad.attribution`),
* which configuration keys it depends on (``reads``: ``"G2"``,
  ``"g5_threshold"``, ``"tile"``, ...; ``when`` picks between rows of the same
  name, e.g. the stable and the plain sigmoid),
* whether it runs only on some elements (``where``: a boolean step; the G4
  fallback and the G7 recovery are evaluated only where they are needed, as
  the hardware's select keeps them), and
* what kind of operation it is (``kind``, the hint the attribution turns into
  a cause: a subtraction can cancel, a logarithm can be ill-conditioned, a
  clamp can move a value).

The same table serves four uses:

1. **ordinary evaluation** (:meth:`Recipe.run`): the steps run in order, each
   value dropped after its last reader, so nothing is kept that the old
   hand-written function did not keep (bit-identical results, the same
   machine op counts);
2. **shared evaluation** (``memo=``): a step's value depends only on its
   inputs and on the configuration keys read by it and its ancestors
   (:attr:`Plan.keys`), so variants that differ in one switch reuse every
   step above the switch (:func:`precision.operators.sigmoid_focal_loss_grad.guards.evaluate_variants`);
3. **tracing** (``trace=True``): every step's value is kept and returned;
4. **attribution** (:mod:`precision.operators.sigmoid_focal_loss_grad.attribution`): each step is re-run on the
   correctly rounded exact values of its inputs (Herbie's local error).

Conventions
-----------
* Arrays are 1-D (the flattened ``[N, C]`` tensor, row-major) in the
  machine's compute dtype; boolean steps (``kind="bool"``) hold numpy bool
  arrays, or None for "false everywhere" (then nothing downstream of a
  ``where`` on it runs).
* A step's ``op`` is called as ``op(m, c, k, *inputs)``: the machine, the
  recipe's constants (host scalars as compute-format scalars), the
  configuration restricted to the step's ``reads`` (reading another key is a
  KeyError, so a missing declaration cannot silently break sharing), then the
  input values.
* A ``where`` step is computed on the elements where its mask holds and
  kept compressed (:class:`Sparse`; None when the mask is empty);
  :func:`patch` merges it into a base value.  Traces expand it to a
  full-size array with NaN where it did not run.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

__all__ = [
    "KINDS",
    "RECIPE_INPUTS",
    "Step",
    "Plan",
    "Recipe",
    "RecipeCall",
    "BoundRecipe",
    "Trace",
    "Sparse",
    "full_value",
    "patch",
    "trace",
    "sum_cond",
]

#: Step kinds (the attribution's cause hints).  ``exact``: no rounding
#: (abs, neg, copies of a value); ``alias``: the value of its one input
#: unchanged (a switched-off guard); ``select``: ``cond ? a : b`` (first input
#: the condition); ``patch``: a base value with a ``where`` step merged in
#: (inputs base, sparse, mask); ``selector``: the S7 multiply of a term (first
#: input) by its selector coefficient (second input): the term reaches the
#: output only where the coefficient is nonzero, or when it is NaN/inf and
#: leaks through 0*inf;
#: ``clamp``: max/min against a bound (a machine artefact standing for its
#: input); ``store``: the conversion to the output format; ``bool``: a
#: decision (guard or branch); ``const``: a value that depends on the host
#: only (no exact counterpart is tracked).
KINDS = ("add", "sub", "mul", "div", "fma", "exp", "ln", "pow", "exact", "alias", "select", "patch",
         "selector", "clamp", "store", "bool", "const")

#: The loaded operands every recipe reads: pred, target, dout, weight (None when absent).
RECIPE_INPUTS = ("x", "t", "d", "w")


@dataclass(frozen=True)
class Step:
    """One row of a recipe table.

    Attributes
    ----------
    name : str
        Stable name of the value (the spec's names for the kernel family).
    inputs : tuple of str
        Names of the earlier steps or operands (:data:`RECIPE_INPUTS`) it reads.
    op : callable
        ``op(m, c, k, *inputs) -> value`` (see the module Notes).
    kind : str
        One of :data:`KINDS`.
    exact : callable or None
        ``exact(Q) -> mpf``: the real number the step stands for, from the
        point's exact quantities ``Q`` (:mod:`precision.operators.sigmoid_focal_loss_grad.attribution`).  None
        for steps without one (decisions, constants, error-compensation terms).
    formula : str
        How the step is computed, in the spec's notation (``"1 - p"``).
    reads : tuple of str
        Configuration keys read by ``op`` and ``when``.
    when : callable or None
        ``when(k) -> bool`` on the configuration: the row is active when
        true.  Rows of the same name must be exclusive.
    where : str or None
        A boolean step: compute only where it holds.
    cond : callable or None
        ``cond(c, v, *inputs) -> condition number`` from float64 exact
        values (output ``v``, inputs); None uses the kind's default
        (:mod:`precision.operators.sigmoid_focal_loss_grad.attribution`).
    fmt : {"compute", "output", "bool"}
        The format of the value: the machine's compute format, pred's dtype
        (the store), or a decision.
    uses : callable or None
        ``uses(*computed inputs) -> list`` of per-input bool masks (None =
        every element): where each input's value can reach this step's
        value.  None uses the kind's default (a select passes its taken
        branch, a patch its masked value, a selector multiply its term where
        the coefficient is nonzero or the term is NaN/inf).
    """

    name: str
    inputs: tuple
    op: Callable
    kind: str
    exact: Callable | None = None
    formula: str = ""
    reads: tuple = ()
    when: Callable | None = None
    where: str | None = None
    cond: Callable | None = None
    fmt: str = "compute"
    uses: Callable | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"step {self.name!r}: kind={self.kind!r}; expected one of {KINDS}")
        if self.fmt not in ("compute", "output", "bool"):
            raise ValueError(f"step {self.name!r}: fmt={self.fmt!r}")


@dataclass(frozen=True)
class Plan:
    """A recipe resolved for one configuration (cached by :meth:`Recipe.plan`).

    Attributes
    ----------
    recipe : Recipe
    config : tuple of (str, value)
        The configuration, sorted by key.
    steps : tuple of Step
        The active rows, in evaluation order.
    keys : tuple
        Per step, ``(name, ((key, value), ...))`` over the configuration keys
        read by the step and all its ancestors: two plans with equal keys
        compute the same value from the same operands (the memo key of
        shared evaluation).
    frees : tuple of tuple of str
        Per step, the values whose last reader it is (dropped after it runs).
    views : tuple of dict
        Per step, the configuration restricted to its ``reads``.
    """

    recipe: "Recipe"
    config: tuple
    steps: tuple
    keys: tuple
    frees: tuple
    views: tuple

    @property
    def names(self) -> tuple:
        """The active step names, in order."""
        return tuple(s.name for s in self.steps)

    def step(self, name: str) -> Step:
        """The active row named ``name`` (KeyError if none)."""
        for s in self.steps:
            if s.name == name:
                return s
        raise KeyError(name)


class _ReadOnlyConfig(dict):
    """The configuration view a step's op receives (only its declared keys)."""

    def __setitem__(self, key, value):  # pragma: no cover - a programming error
        raise TypeError("a step's configuration view is read-only")


def sum_cond(*constants):
    """Condition number of a sum of the step's inputs and host ``constants``: ``max |term| / |sum|``.

    For ``Step.cond`` of a sum with a constant operand (``e + 1``, ``1 - p``),
    whose constant the default (the step inputs only) would leave out.
    """
    def cond(c, v, *ins):
        with np.errstate(all="ignore"):
            terms = [np.abs(np.asarray(a, np.float64)) for a in ins] + [abs(float(k)) for k in constants]
            return np.maximum.reduce(np.broadcast_arrays(*terms)) / np.abs(v)
    return cond


class Sparse:
    """A ``where`` step's values on the elements where its mask holds (compressed).

    Attributes
    ----------
    idx : numpy.ndarray of int
        The flat indices where the step ran (ascending).
    values : numpy.ndarray
        Its values there.
    size : int
        The full length (elements of the tensor).
    """

    __slots__ = ("idx", "values", "size")

    def __init__(self, idx, values, size):
        self.idx, self.values, self.size = idx, values, size

    def at(self, idx):
        """The values at ``idx`` (a subset of :attr:`idx`)."""
        if idx is self.idx:
            return self.values
        pos = np.searchsorted(self.idx, idx)
        if pos.size and (pos[-1] >= self.idx.size or not np.array_equal(self.idx[pos], idx)):
            raise ValueError("a where step reads another whose mask does not cover its own")
        return self.values[pos]

    def full(self):
        """The full-size array: the values where computed, NaN (False) elsewhere."""
        fill = False if self.values.dtype == bool else np.nan
        out = np.full(self.size, fill, dtype=self.values.dtype)
        out[self.idx] = self.values
        return out


def full_value(value):
    """A step value as stored for traces: a :class:`Sparse` expanded (NaN where not computed)."""
    return value.full() if isinstance(value, Sparse) else value


def patch(base, sparse, mask):
    """``mask ? sparse : base`` where ``sparse`` holds a ``where`` step's values.

    ``sparse`` is a :class:`Sparse` (the fast path), a full-size array, or
    None (nothing computed).  Returns ``base`` itself (no copy) when nothing
    is replaced, else a copy with the masked elements replaced.
    """
    if sparse is None or mask is None:
        return base
    if isinstance(sparse, Sparse):
        idx, values = sparse.idx, sparse.values
    else:
        idx = np.flatnonzero(mask)
        values = sparse[idx]
    if idx.size == 0:
        return base
    out = np.array(base, copy=True)
    out[idx] = values
    return out


class Recipe:
    """An ordered table of :class:`Step` rows with one output.

    Parameters
    ----------
    name : str
        ``"kernel"``, ``"golden"``, ``"mmcv"``, ``"candidate"``.
    steps : sequence of Step
        The rows, in evaluation order.
    output : str
        The name of the output step (pred's dtype).
    defaults : mapping
        The configuration keys of the recipe with their default values.
    """

    def __init__(self, name: str, steps, output: str = "out", defaults=None):
        self.name = name
        self.steps = tuple(steps)
        self.output = output
        self.defaults = dict(defaults or {})
        for s in self.steps:
            unknown = [k for k in s.reads if k not in self.defaults]
            if unknown:
                raise ValueError(f"step {s.name!r} reads unknown configuration keys {unknown}")

    def __repr__(self) -> str:
        return f"Recipe({self.name!r}, {len(self.steps)} rows)"

    def config(self, **values) -> tuple:
        """A full configuration (defaults overridden by ``values``) as sorted items."""
        unknown = set(values) - set(self.defaults)
        if unknown:
            raise ValueError(f"recipe {self.name}: unknown configuration keys {sorted(unknown)}")
        merged = {**self.defaults, **values}
        return tuple(sorted(merged.items()))

    def plan(self, config=None) -> Plan:
        """Resolve the active rows for ``config`` (items or a mapping; cached)."""
        if config is None:
            config = self.config()
        elif isinstance(config, dict):
            config = self.config(**config)
        return self._plan(tuple(config))

    @functools.lru_cache(maxsize=256)
    def _plan(self, config: tuple) -> Plan:
        cfg = dict(config)
        active, seen = [], set()
        for s in self.steps:
            view = _ReadOnlyConfig({k: cfg[k] for k in s.reads})
            if s.when is not None and not s.when(view):
                continue
            if s.name in seen:
                raise ValueError(f"recipe {self.name}: two active rows named {s.name!r} for config {cfg}")
            seen.add(s.name)
            active.append((s, view))
        defined = set(RECIPE_INPUTS)
        closure: dict = {n: frozenset() for n in RECIPE_INPUTS}
        keys, views = [], []
        for s, view in active:
            needed = s.inputs + ((s.where,) if s.where else ())
            missing = [n for n in needed if n not in defined]
            if missing:
                raise ValueError(f"recipe {self.name}: step {s.name!r} reads {missing} before they are defined")
            reads = frozenset(s.reads).union(*(closure[n] for n in needed))
            closure[s.name] = reads
            keys.append((s.name, tuple(sorted((k, cfg[k]) for k in reads))))
            views.append(view)
            defined.add(s.name)
        if self.output not in defined:
            raise ValueError(f"recipe {self.name}: no active row for the output {self.output!r}")
        last = {}
        for i, (s, _) in enumerate(active):
            for n in s.inputs + ((s.where,) if s.where else ()):
                last[n] = i
        frees = [[] for _ in active]
        for n, i in last.items():
            if n != self.output:
                frees[i].append(n)
        return Plan(self, config, tuple(s for s, _ in active), tuple(keys), tuple(tuple(f) for f in frees),
                    tuple(views))

    def run(self, plan: Plan, m, c, operands: dict, *, trace: bool = False, memo: dict | None = None,
            keep=None):
        """Evaluate a plan on the machine.

        Parameters
        ----------
        plan : Plan
            From :meth:`plan` of this recipe.
        m : Machine
        c : object
            The recipe's constants (attribute access).
        operands : dict
            ``x``, ``t``, ``d``, ``w`` arrays (``w`` may be None).
        trace : bool
            Keep every step's value and return ``(output, values)``.
        memo : dict, optional
            Shared-evaluation store ``{plan key: value}``: a step whose key is
            present is not recomputed; a computed step is stored when its key
            is in ``keep`` (all keys when ``keep`` is None).
        keep : set, optional
            The keys later evaluations will look up (see ``memo``).

        Returns
        -------
        numpy.ndarray, or (numpy.ndarray, dict) when tracing
            The output in pred's dtype (1-D).
        """
        env = dict(operands)
        idxs: dict = {}
        with np.errstate(all="ignore"):
            for i, s in enumerate(plan.steps):
                key = plan.keys[i]
                if memo is not None and key in memo:
                    env[s.name] = memo[key]
                else:
                    args = [env[n] for n in s.inputs]
                    if s.where is None:
                        value = s.op(m, c, plan.views[i], *args)
                    else:
                        if s.where not in idxs:
                            mask = env[s.where]
                            idxs[s.where] = (None, 0) if mask is None else (np.flatnonzero(mask), mask.size)
                        value = _run_where(s, m, c, plan.views[i], *idxs[s.where], args)
                    env[s.name] = value
                    if memo is not None and (keep is None or key in keep):
                        memo[key] = value
                if not trace:
                    for n in plan.frees[i]:
                        env.pop(n, None)
        out = env[self.output]
        if trace:
            return out, {k: full_value(v) for k, v in env.items()}
        return out


def _run_where(s: Step, m, c, view, idx, n, args):
    """Run a ``where`` step on the elements ``idx`` of ``n`` (a :class:`Sparse`; None when there are none)."""
    if idx is None or idx.size == 0:
        return None
    sub = []
    for a in args:
        if isinstance(a, Sparse):
            sub.append(a.at(idx))
        elif isinstance(a, np.ndarray) and a.ndim == 1 and a.size == n:
            sub.append(a[idx])
        else:
            sub.append(a)
    return Sparse(idx, np.asarray(s.op(m, c, view, *sub)), n)


@dataclass(frozen=True)
class RecipeCall:
    """How a registered variant runs as a recipe (for shared evaluation and attribution).

    Attributes
    ----------
    recipe : Recipe
    config : tuple of (str, value)
        Full configuration (:meth:`Recipe.config`).
    prepare : callable
        ``prepare(m, inputs, count) -> constants`` with ``inputs`` the
        validated :class:`~precision.operators.sigmoid_focal_loss_grad.implementations.common.OperatorInputs`
        and ``count`` the mean's element count (validated).
    compute : str or None
        A compute format the variant forces (``"fp16"`` for the all-fp16
        variants); None keeps the machine's.
    fp16_only : str or None
        The variant label used in the error when pred is not float16
        (:func:`~precision.operators.sigmoid_focal_loss_grad.implementations.common.require_fp16_pred`).
    """

    recipe: Recipe
    config: tuple
    prepare: Callable
    compute: str | None = None
    fp16_only: str | None = None


@dataclass(frozen=True)
class BoundRecipe:
    """A recipe ready to run on validated operands: what a variant evaluation needs.

    Attributes
    ----------
    variant : str
        The registry name.
    call : RecipeCall
    plan : Plan
    machine : Machine
        The machine the recipe runs on (the compute format forced by the
        variant, if any, applied).
    constants : object
        The recipe's constants for these attributes (``call.prepare``).
    operands : dict
        The loaded ``x``, ``t``, ``d``, ``w`` (1-D, row-major).
    shape : tuple of int
        ``(N, C)``.
    count : int
        The mean's element count.
    """

    variant: str
    call: RecipeCall
    plan: Plan
    machine: object
    constants: object
    operands: dict
    shape: tuple
    count: int

    def run(self, *, trace: bool = False, memo=None, keep=None):
        """Evaluate (see :meth:`Recipe.run`); the output is 1-D."""
        return self.plan.recipe.run(self.plan, self.machine, self.constants, self.operands, trace=trace,
                                    memo=memo, keep=keep)


@dataclass(frozen=True)
class Trace:
    """Every step's value of one evaluation (:func:`precision.operators.sigmoid_focal_loss_grad.guards.trace_variant`).

    Attributes
    ----------
    variant : str
    recipe : str
        The recipe's name (``kernel``, ``golden``, ``mmcv``, ``candidate``).
    names : tuple of str
        The active steps, in evaluation order.
    kinds : dict
        Step name -> kind (:data:`KINDS`).
    values : dict
        Step name -> numpy.ndarray shaped ``[N, C]``: compute dtype (the
        ``out`` step: pred's dtype), bool for decisions; a ``where`` step
        holds NaN (False) where it did not run.  Values that are scalars on
        the machine (a host-side op) stay 0-d.
    evaluated : dict
        Step name -> bool ``[N, C]``: where the step ran (all True except for
        ``where`` steps).
    output : numpy.ndarray
        The gradient, pred's dtype, ``[N, C]`` (the ``out`` step).
    """

    variant: str
    recipe: str
    names: tuple
    kinds: dict
    values: dict
    evaluated: dict
    output: np.ndarray


def trace(bound: BoundRecipe) -> Trace:
    """Run a bound recipe keeping every step (see :class:`Trace`)."""
    out, env = bound.run(trace=True)
    plan, shape = bound.plan, bound.shape
    n = int(np.prod(shape))
    values, evaluated = {}, {}
    for s in plan.steps:
        v = env[s.name]
        mask = env[s.where] if s.where else None
        if s.where and mask is None:
            mask = np.zeros(n, bool)
        if v is None:
            v = np.zeros(n, bool) if s.fmt == "bool" else np.full(n, np.nan, bound.machine.dtype)
        v = np.asarray(v)
        values[s.name] = v.reshape(shape) if v.ndim == 1 and v.size == n else v
        evaluated[s.name] = (np.asarray(mask, bool) if mask is not None else np.ones(n, bool)).reshape(shape)
    return Trace(bound.variant, plan.recipe.name, plan.names, {s.name: s.kind for s in plan.steps}, values,
                 evaluated, np.asarray(out).reshape(shape))
