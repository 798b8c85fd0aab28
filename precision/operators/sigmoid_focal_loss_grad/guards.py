"""Guard names and the variant registry: one row per variant, in the spirit of ARM's ``F1 (exp)``.

The guards G1..G8 of spec section 4 have stable long names
(:data:`GUARD_NAMES`).  A *variant* is a named way to compute
SigmoidFocalLossGrad; the table :data:`VARIANTS` holds one
:class:`Variant` row per fixed name:

=================  =========  =================================================
name               family     recipe
=================  =========  =================================================
``naive``          naive      kernel recipe with no guard (textbook formula)
``naive+Gi``       naive      naive with guard Gi added (i = 1..8)
``kernel``         kernel     the production recipe, every guard on
``kernel-Gi``      kernel     the production recipe with guard Gi off
``naive-fp16``     naive      naive with every op in fp16
``golden``         golden     the ops-nn test golden (PyTorch op order, fp32)
``mmcv``           mmcv       MMCV's CUDA formula, fp32
``mmcv-fp16``      mmcv       MMCV's formula instantiated in fp16
=================  =========  =================================================

Parsed names (:func:`get_variant`) extend the table:

* several guards: ``naive+G2+G4``, ``kernel-G5-G7``;
* parameters in brackets, comma-separated: ``kernel[G5=1/16]`` (the G5
  threshold: a fraction ``1/16``, a power ``2^-4`` or ``2**-4``, a decimal
  ``0.0625``, a hex float ``0x1p-4``, or ``never``/``always``/``inf``) and
  ``kernel[tile=64]`` (the G4 tile size in elements); e.g.
  ``naive+G4[tile=512]``, ``kernel[G5=2^-4,tile=64]``.  A parameter of a guard
  that is off is rejected.

Later candidate implementations add rows with :func:`register_variant`.
The public entry point is :func:`evaluate`.

The table, its rows and the name grammar are the generic ones of
:mod:`precision.recipes.registry` (:class:`~precision.recipes.registry.VariantTable`,
:class:`~precision.recipes.registry.NameGrammar`); this module gives them the
operator's guards, rows, bracket parameters and words, and evaluates its
variants with its contract (:func:`validate_inputs`).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from precision.errors import ParameterError, PrecisionError
from precision.operators.sigmoid_focal_loss_grad.implementations.common import (
    ALL_GUARDS,
    GUARD_IDS,
    NO_GUARDS,
    load_operands,
    require_fp16_pred,
    resolve_machine,
    validate_inputs,
    validate_mean_count,
    with_compute_format,
)
from precision.operators.sigmoid_focal_loss_grad.implementations.candidate import candidate as _candidate
from precision.operators.sigmoid_focal_loss_grad.implementations.candidate import candidate_call as _candidate_call
from precision.operators.sigmoid_focal_loss_grad.implementations.golden import golden, golden_call
from precision.operators.sigmoid_focal_loss_grad.implementations.kernel import (
    guard_fired,
    kernel,
    kernel_call,
    validate_g5_threshold,
    validate_tile,
)
from precision.operators.sigmoid_focal_loss_grad.implementations.mmcv import mmcv, mmcv_call, mmcv_fp16
from precision.operators.sigmoid_focal_loss_grad.implementations.naive import naive, naive_fp16
from precision.recipes.registry import NameGrammar, NameParameter, Variant, VariantTable, parse_threshold
from precision.recipes.shared import evaluate_rows
from precision.recipes.steps import BoundRecipe, RecipeCall, Trace
from precision.recipes.steps import trace as _trace

__all__ = [
    "GUARD_IDS",
    "GUARD_NAMES",
    "GUARD_PURPOSE",
    "Variant",
    "VARIANTS",
    "TABLE",
    "guard_set_name",
    "get_variant",
    "list_variants",
    "variant_names",
    "register_variant",
    "evaluate",
    "variant_fired",
    "variant_guards",
    "recipe_call",
    "bind_recipe",
    "bind_call",
    "evaluate_variants",
    "trace_variant",
]

#: Long name of each guard (spec section 4).
GUARD_NAMES = {
    "G1": "stable_sigmoid",
    "G2": "log_clamp",
    "G3": "high_precision_power",
    "G4": "clamped_power_fallback",
    "G5": "cancellation_correction",
    "G6": "alpha_one_select",
    "G7": "subnormal_recovery",
    "G8": "rint_output",
}

#: What each guard does, one line (the step it changes and how).
GUARD_PURPOSE = _GUARD_PURPOSE = {
    "G1": "S1 sigmoid branched on the sign of x",
    "G2": "S2 log/power bases floored at 2^-126",
    "G3": "S3 DOUBLE_FLOAT_TECH power instead of exp(k*ln|a|)",
    "G4": "S4 tile-level exp(k*ln(base)) for clamped bases / tiny powers",
    "G5": "S5 reconstructed positive term when |orig| <= big/64",
    "G6": "S6 pg1 used directly when 1-alpha rounds to 1",
    "G7": "S8 reciprocal-division path when raw*weight underflows",
    "G8": "S9 nearest-even fp16 store instead of truncation",
}


def _parse_tile(value: str, name: str) -> int:
    """A ``tile=<n>`` value: a positive int (elements per G4 tile)."""
    try:
        return validate_tile(int(value.strip()))
    except (ValueError, ParameterError):
        raise ParameterError(f"variant={name!r}: tile={value!r}; expected a positive int") from None


_PARAM_HELP = (
    ("kernel[G5=<tau>]", "kernel with G5 threshold tau (1/16, 2^-4, 0.0625, never, always)"),
    ("kernel[tile=<n>]", "kernel with G4 tiles of n elements (default: one tile)"),
)

#: Parsed names: ``naive`` takes ``+Gi``, ``kernel`` takes ``-Gi``; ``[G5=<tau>]`` (a threshold spelling,
#: :func:`precision.recipes.registry.parse_threshold`) needs G5 on, ``[tile=<n>]`` needs G4 on.
GRAMMAR = NameGrammar(
    {"naive": (NO_GUARDS, "+"), "kernel": (ALL_GUARDS, "-")}, GUARD_IDS, function=kernel,
    parameters=(
        NameParameter("G5", "g5_threshold", lambda value, name: parse_threshold(value, name, "G5",
                                                                                validate_g5_threshold),
                      guard="G5", what="G5 threshold", placeholder="<tau>"),
        NameParameter("tile", "tile", _parse_tile, guard="G4", what="tile", placeholder="<n>"),
    ),
    help=_PARAM_HELP,
)


def guard_set_name(guards) -> str:
    """The canonical variant name of a guard set: ``naive``, ``naive+G2``, ``kernel``, ``kernel-G5``.

    A set with at most four guards is named from ``naive`` upwards, a larger
    one from ``kernel`` downwards (ties: ``naive``).
    """
    return GRAMMAR.guard_name(guards)


def _guard_row(guards: frozenset, description: str) -> Variant:
    name = guard_set_name(guards)
    family = "naive" if name.startswith("naive") else "kernel"
    return Variant(name, family, description, kernel, (("guards", frozenset(guards)),))


#: The variant table: the fixed rows and their recipes (candidates and plugins are added by
#: :func:`register_variant`; :mod:`precision.operators.sigmoid_focal_loss_grad.plugins` loads plugin files).
TABLE = VariantTable("sigmoid_focal_loss_grad", grammar=GRAMMAR,
                     unknown_hint=", or naive+Gi / kernel-Gi with optional [G5=<tau>,tile=<n>]")
TABLE.add(_guard_row(NO_GUARDS, "textbook formula, fp32, no guard (= kernel with every guard off)"))
for _g in GUARD_IDS:
    TABLE.add(_guard_row(frozenset({_g}), f"naive plus {_g} {GUARD_NAMES[_g]}: {_GUARD_PURPOSE[_g]}"))
TABLE.add(_guard_row(ALL_GUARDS, "production recipe S1..S9 (ops-nn arch35), every guard on, fp32"))
for _g in GUARD_IDS:
    TABLE.add(_guard_row(ALL_GUARDS - {_g}, f"production recipe without {_g} {GUARD_NAMES[_g]}"))
del _g
TABLE.add(Variant("naive-fp16", "naive", "naive recipe with every op in fp16 (fp16 pred only)", naive_fp16))
TABLE.add(Variant("golden", "golden", "ops-nn test golden: PyTorch op order, fp32, powers as exp(k*log)", golden))
TABLE.add(Variant("mmcv", "mmcv", "MMCV CUDA formula, fp32, raw-selector flags", mmcv))
TABLE.add(Variant("mmcv-fp16", "mmcv", "MMCV CUDA formula instantiated in fp16, FLT_MIN -> 0 (fp16 pred only)",
                  mmcv_fp16))
#: Implementation function -> builder of its RecipeCall from the row's params.
TABLE.recipes.update({
    kernel: lambda params: kernel_call(**params),
    naive: lambda params: kernel_call(NO_GUARDS),
    naive_fp16: lambda params: kernel_call(NO_GUARDS, compute="fp16", fp16_only="naive-fp16"),
    golden: lambda params: golden_call(),
    mmcv: lambda params: mmcv_call(),
    mmcv_fp16: lambda params: mmcv_call(fp16=True),
})
# The candidate implementation (issue 6), a recipe of its own.
TABLE.add(Variant("candidate", "candidate", "issue-6 candidate: log1p by atanh series, p/q without 1-p, double-float "
                  "exp powers, select, fp32", _candidate), recipe=lambda params: _candidate_call())

#: The rows, by name (the table's; tests and candidates add and remove rows through it).
VARIANTS: dict = TABLE.rows


def variant_names() -> list:
    """Every fixed variant name, in table order."""
    return TABLE.names()


def variant_guards(variant: str) -> frozenset | None:
    """The guards ``variant`` carries: its guard set in the kernel and naive families (the recipes with guard
    switches), None outside them (a golden, mmcv, a plugin without guards).

    Raises PrecisionError for an unknown name (a plugin variant not loaded)."""
    row = get_variant(variant)
    return row.guards if row.family in ("kernel", "naive") else None


def variant_fired(variant: str, steps: dict, machine, attributes: dict, size: int) -> dict:
    """Per guard, the elements where it acted in one evaluation of ``variant``: ``{fired_gi: bool [size]}``
    (:func:`~precision.operators.sigmoid_focal_loss_grad.implementations.kernel.guard_fired` with the variant's guards,
    :func:`variant_guards`: nothing fires in a variant without guards).  ``steps``: the kept values of
    ``FIRED_STEPS``; ``attributes``: the evaluation's ``{"alpha": ..., "gamma": ...}``."""
    return guard_fired(steps, variant_guards(variant), machine, attributes["alpha"], size)


def list_variants() -> list:
    """``(name, description)`` rows for ``precision variants``: the table, then the parameter forms."""
    return TABLE.listing()


def get_variant(name) -> Variant:
    """Resolve a variant name (or pass a :class:`Variant` through).

    Raises
    ------
    ParameterError
        Unknown names, listing the valid ones; ``+Gi`` on ``kernel`` or
        ``-Gi`` on ``naive``; a repeated guard; malformed parameters.

    Examples
    --------
    >>> sorted(get_variant("naive+G2").guards)
    ['G2']
    >>> dict(get_variant("kernel[G5=1/16]").params)["g5_threshold"]
    0.0625
    """
    return TABLE.get(name)


def register_variant(name: str, function: Callable, description: str, *, family: str = "candidate",
                     params=None, replace: bool = False, recipe=None) -> Variant:
    """Add a row to the variant table (for candidate implementations and plugins).

    Parameters
    ----------
    name : str
        The new name; must not collide with an existing row (unless
        ``replace``) nor look like a parsed ``naive``/``kernel`` name.  In a
        plugin file (:mod:`precision.operators.sigmoid_focal_loss_grad.plugins`) a name may never redefine a
        built-in row or another plugin's, ``replace`` or not.
    function : callable
        ``f(machine, pred, target, dout, weight, alpha, gamma, reduction, **params)``
        returning grad in pred's dtype; it should also take the keyword
        ``count`` (mean element count), which :func:`evaluate` passes when given.
    description : str
        One line for ``precision variants``.
    family : str, optional
        Default ``"candidate"``.
    params : mapping or iterable of (str, value), optional
        Keyword arguments bound to ``function``.
    recipe : RecipeCall or callable, optional
        The variant as a table of named steps (:mod:`precision.recipes.steps`): a
        :class:`~precision.recipes.steps.RecipeCall`, or ``recipe(params) ->
        RecipeCall`` with ``params`` the row's bound keyword arguments.  It
        must compute exactly what ``function`` returns; it lets
        ``precision explain``, :func:`trace_variant` and
        :func:`evaluate_variants` see the steps.  Default None: the variant
        is evaluated through ``function`` only.

    Returns
    -------
    Variant
        The registered row.
    """
    return TABLE.register(name, function, description, family=family, params=params, replace=replace,
                          recipe=recipe)


def evaluate(variant, pred, target, dout, weight=None, *, alpha=0.25, gamma=2.0, reduction="mean",
             machine="ieee", count=None) -> np.ndarray:
    """Compute SigmoidFocalLossGrad with a named variant on an emulated machine.

    Parameters
    ----------
    variant : str or Variant
        A registry name (see :func:`list_variants`).
    pred : numpy.ndarray, float16 or float32, shape [N, C]
        Logits.
    target : numpy.ndarray, int32, shape [N, C]
        Raw selector (0 selects the positive term, 1 the negative).
    dout : numpy.ndarray, float16 or float32, shape [N, C]
        Upstream gradient.
    weight : numpy.ndarray or None, float16 or float32, shape [N, C]
        Element weight; None means absent (all ones).
    alpha, gamma : float
        Attributes, rounded to float32 (RNE); finite.
    reduction : {"mean", "sum", "none"}
    machine : str, MachineModel or Machine
        ``"ieee"`` (default), ``"numpy"``, ``"npu"``, with suffixes such as
        ``"+ftz"``.
    count : int or None
        Element count of the mean reduction (``coef = 1/count``); default
        None: ``N*C`` of the inputs.  A sweep evaluating a slice of a larger
        tensor passes the full count.  Ignored for "sum" and "none".

    Returns
    -------
    numpy.ndarray
        grad, pred's dtype, shape [N, C].

    Raises
    ------
    ParameterError, ShapeError, DtypeError
        Unknown variant or a broken operator contract.

    Examples
    --------
    >>> x = np.array([[-1.25, 0.0]], np.float32); t = np.array([[0, 1]], np.int32)
    >>> g = evaluate("kernel", x, t, np.ones_like(x))
    >>> g.dtype, g.shape
    (dtype('float32'), (1, 2))
    """
    row = get_variant(variant)
    return row(machine, pred, target, dout, weight, alpha, gamma, reduction, count=count)


# ---------------------------------------------------------------------------
# Variants as recipes: shared evaluation and traces
# ---------------------------------------------------------------------------

def recipe_call(variant) -> RecipeCall | None:
    """How a variant runs as a step table, or None for a function that is not a recipe.

    Parameters
    ----------
    variant : str or Variant

    Returns
    -------
    RecipeCall or None
        None for rows registered with a function of their own (they are
        evaluated one by one).

    Raises
    ------
    ParameterError
        Unknown variant names.
    """
    return TABLE.recipe_call(variant)


def bind_recipe(variant, pred, target, dout, weight=None, *, alpha=0.25, gamma=2.0, reduction="mean",
                machine="ieee", count=None) -> BoundRecipe:
    """Validate the inputs and prepare a variant's recipe to run (constants, operands, plan).

    Parameters and errors as :func:`evaluate`; additionally

    Raises
    ------
    ParameterError
        The variant is not a recipe (a registered function of its own).
    DtypeError
        An fp16-only variant with a non-fp16 pred.
    """
    row = get_variant(variant)
    call = recipe_call(row)
    if call is None:
        raise ParameterError(f"variant={row.name!r} is not a step recipe (a registered function); "
                             "expected a kernel-family variant, golden, mmcv or candidate")
    return bind_call(row.name, call, pred, target, dout, weight, alpha=alpha, gamma=gamma, reduction=reduction,
                     machine=machine, count=count)


def bind_call(name: str, call: RecipeCall, pred, target, dout, weight=None, *, alpha=0.25, gamma=2.0,
              reduction="mean", machine="ieee", count=None) -> BoundRecipe:
    """A recipe call bound to validated inputs: the preparation every recipe evaluation shares.

    The inputs are checked (:func:`validate_inputs`, fp16-only recipes), the
    machine resolved (with the call's compute format, if any), the mean's
    count checked, the constants prepared and the operands loaded; ``name``
    is the variant's (:attr:`BoundRecipe.variant`).  Errors as :func:`evaluate`.
    """
    inputs = validate_inputs(pred, target, dout, weight, alpha, gamma, reduction)
    if call.fp16_only:
        require_fp16_pred(call.fp16_only, inputs)
    m = resolve_machine(machine)
    if call.compute:
        m = with_compute_format(m, call.compute)
    n = validate_mean_count(count, inputs)
    return BoundRecipe(name, call, call.recipe.plan(call.config), m, call.prepare(m, inputs, n),
                       load_operands(m, inputs), inputs.shape, n)


def trace_variant(variant, pred, target, dout, weight=None, *, alpha=0.25, gamma=2.0, reduction="mean",
                  machine="ieee", count=None) -> Trace:
    """Evaluate a variant keeping every named step (the trace mode).

    Parameters and errors as :func:`bind_recipe`.

    Returns
    -------
    precision.recipes.steps.Trace
        ``names`` (the steps in order), ``values`` (each ``[N, C]``),
        ``evaluated``, ``output`` (bit-identical to :func:`evaluate`).

    Examples
    --------
    >>> x = np.array([[10.0]], np.float32); t = np.array([[0]], np.int32)
    >>> tr = trace_variant("kernel", x, t, np.ones_like(x))
    >>> float(tr.values["q"][0, 0]).hex()
    '0x1.7d00000000000p-15'
    """
    return _trace(bind_recipe(variant, pred, target, dout, weight, alpha=alpha, gamma=gamma,
                              reduction=reduction, machine=machine, count=count))


def evaluate_variants(variants, pred, target, dout, weight=None, *, alpha=0.25, gamma=2.0, reduction="mean",
                      machine="ieee", count=None, keep_steps=()):
    """Evaluate several variants on the same operands, computing each shared step once.

    Variants that are the same recipe with different switches (``kernel``,
    ``kernel-Gi``, ``naive+Gi``, ``kernel[G5=...]``, ...) share every step
    whose inputs and configuration keys (its own and its ancestors') agree:
    ``kernel-G8`` recomputes only the store, ``kernel-G7`` only S8 onwards.
    Results are bit-identical to :func:`evaluate` of each variant alone.

    Parameters
    ----------
    variants : iterable of str or Variant
    pred, target, dout, weight, alpha, gamma, reduction, machine, count
        As :func:`evaluate`.
    keep_steps : iterable of str, optional
        Names of steps (e.g. the guard decisions ``g4_tile``, ``g5_use``,
        ``g7_use``) whose values to return as well.

    Returns
    -------
    dict, or (dict, dict) when ``keep_steps`` is given
        Variant name (as given) -> gradient (pred's dtype, ``[N, C]``), or
        the :class:`~precision.errors.PrecisionError` that evaluating it alone
        raises (an unknown name, an fp16-only variant on fp32 pred, a broken
        contract).  With ``keep_steps``, also variant name -> {step name ->
        its value ``[N, C]`` (a ``where`` step: NaN where it did not run)}
        for the steps of ``keep_steps`` its recipe evaluated (variants that
        are not recipes: empty); read-only arrays, one per distinct step
        value, shared by the variants that computed that value.

    Notes
    -----
    Variants are grouped by (recipe, machine after any forced compute
    format); within a group a step value is kept only while a later variant
    of the group still reads it.  Registered functions that are not recipes
    are evaluated one by one.  A machine counting ops counts every shared
    step once.
    """
    n = 0
    try:
        inputs = validate_inputs(pred, target, dout, weight, alpha, gamma, reduction)
        n = validate_mean_count(count, inputs)
        base = resolve_machine(machine)
    except PrecisionError:
        inputs = None  # every variant raises the same error alone: let each do so

    def machine_of(call):
        if call.fp16_only:
            require_fp16_pred(call.fp16_only, inputs)
        return with_compute_format(base, call.compute) if call.compute else base

    def alone(row):
        return evaluate(row, pred, target, dout, weight, alpha=alpha, gamma=gamma, reduction=reduction,
                        machine=machine, count=count)
    return evaluate_rows(list(variants), TABLE, inputs, machine_of, alone, n, load_operands, keep_steps)
