"""SigmoidFocalLoss's variants: one row per implementation, each a recipe (:mod:`.recipes`).

=================  ==========  =====================================================================
name               family      recipe
=================  ==========  =====================================================================
``kernel``         kernel      the production element recipe, reduction none (Power, clamp after)
``kernel_sum_path`` kernel     the element recipe the kernel runs under sum and mean (clamp first,
                               Exp(gamma Ln))
``naive``          naive       the textbook formula in fp32, no guard
``golden``         golden      the operator test's torch chain in fp32
``third_party``    golden      the same chain in fp16 (fp16 inputs only)
``candidate``      candidate   the kernel with the accurate 1 - p it discards and log1p(e)
``kernel_accurate_q`` kernel   the kernel with only the accurate 1 - p (one cause isolated)
``kernel_log1p``   kernel      the kernel with only log1p(e) for Ln(1 + e) (the other cause)
=================  ==========  =====================================================================

Variants of one recipe (the kernel family and the candidate) share every common step when
evaluated together (:func:`precision.recipes.shared.run_shared`).

The rows live in a :class:`~precision.recipes.registry.VariantTable` (:data:`TABLE`): each row's function is
one of :func:`loss`, :func:`naive` and :func:`golden` with its recipe's configuration bound as params.
:func:`register_variant` adds rows (a candidate of your own, or a plugin file's:
:mod:`precision.operators.sigmoid_focal_loss.plugins`); a row registered with a function and no recipe is
evaluated through its function.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from precision.errors import DtypeError, ParameterError, PrecisionError
from precision.operators.sigmoid_focal_loss.inputs import validate_inputs
from precision.operators.sigmoid_focal_loss.recipes import golden_call, load_operands, loss_call, naive_call
from precision.recipes.operands import resolve_machine, with_compute_format
from precision.recipes.registry import Variant, VariantTable
from precision.recipes.shared import evaluate_rows
from precision.recipes.steps import BoundRecipe, RecipeCall

__all__ = ["Variant", "VARIANTS", "TABLE", "get_variant", "variant_names", "list_variants", "register_variant",
           "recipe_call", "evaluate", "evaluate_variants", "bind_recipe", "bind_call", "loss", "naive", "golden"]


def _run(call: RecipeCall, machine, pred, target, dout, weight, alpha, gamma, reduction) -> np.ndarray:
    bound = bind_call(call.recipe.name, call, pred, target, dout, weight, alpha=alpha, gamma=gamma,
                      reduction=reduction, machine=machine)
    return bound.run().reshape(np.shape(pred))


def loss(machine, pred, target, dout=None, weight=None, alpha=0.25, gamma=2.0, reduction="none", *, count=None,
         **config) -> np.ndarray:
    """The kernel family's element recipe with its configuration (``path``, ``q``, ``log``:
    :func:`.recipes.loss_call`): the loss per element, pred's dtype and shape."""
    return _run(loss_call(**config), machine, pred, target, dout, weight, alpha, gamma, reduction)


def naive(machine, pred, target, dout=None, weight=None, alpha=0.25, gamma=2.0, reduction="none", *, count=None
          ) -> np.ndarray:
    """The textbook formula in fp32 (:func:`.recipes.naive_call`)."""
    return _run(naive_call(), machine, pred, target, dout, weight, alpha, gamma, reduction)


def golden(machine, pred, target, dout=None, weight=None, alpha=0.25, gamma=2.0, reduction="none", *, count=None,
           fp16=False) -> np.ndarray:
    """The operator test's torch chain, in fp32 or (``fp16``, the third party) in fp16
    (:func:`.recipes.golden_call`)."""
    return _run(golden_call(fp16=fp16), machine, pred, target, dout, weight, alpha, gamma, reduction)


#: The variant table: the package's rows (plugins add theirs, :func:`register_variant`).
TABLE = VariantTable("sigmoid_focal_loss")
TABLE.recipes.update({
    loss: lambda params: loss_call(**params),
    naive: lambda params: naive_call(),
    golden: lambda params: golden_call(**params),
})
for _row in (
    Variant("kernel", "kernel", "production element recipe, reduction none: Power(base, gamma), clamp after",
            loss, (("path", "none"),)),
    Variant("kernel_sum_path", "kernel", "production element recipe under sum/mean: clamp first, Exp(gamma Ln)",
            loss, (("path", "sum"),)),
    Variant("naive", "naive", "textbook formula in fp32, no guard", naive),
    Variant("golden", "golden", "operator test golden: torch chain in fp32", golden),
    Variant("third_party", "golden", "operator test third party: the torch chain in fp16 (fp16 inputs)",
            golden, (("fp16", True),)),
    Variant("candidate", "candidate", "kernel with the accurate 1 - p and log1p(e), reduction none",
            loss, (("path", "none"), ("q", "accurate"), ("log", "log1p"))),
    Variant("kernel_accurate_q", "kernel", "kernel with only the accurate 1 - p it computes and discards",
            loss, (("path", "none"), ("q", "accurate"))),
    Variant("kernel_log1p", "kernel", "kernel with only log1p(e) in place of Ln(1 + e)",
            loss, (("path", "none"), ("log", "log1p"))),
):
    TABLE.add(_row)
del _row

#: The rows, by name (the table's).
VARIANTS: dict = TABLE.rows


def variant_names() -> list:
    return TABLE.names()


def list_variants() -> list:
    """(name, description) of every variant, for ``precision variants --operator sigmoid_focal_loss``."""
    return TABLE.listing()


def get_variant(name) -> Variant:
    """The row of ``name`` (a Variant passes through).

    Raises
    ------
    ParameterError
        An unknown name (the message lists the known ones).
    """
    return TABLE.get(name)


def register_variant(name: str, function: Callable, description: str, *, family: str = "candidate",
                     params=None, replace: bool = False, recipe=None) -> Variant:
    """Add a row to the variant table (a candidate implementation; in a plugin file, the plugin's variants).

    Parameters
    ----------
    name : str
        The new name; must not collide with an existing row (unless ``replace``).  In a plugin file
        (:mod:`precision.operators.sigmoid_focal_loss.plugins`) a name may never redefine a built-in row or
        another plugin's, ``replace`` or not.
    function : callable
        ``f(machine, pred, target, dout=None, weight=None, alpha=0.25, gamma=2.0, reduction="none", *,
        count=None, **params)`` returning the loss per element in pred's dtype and shape (begin with
        :func:`.inputs.validate_inputs`).
    description : str
        One line for ``precision variants``.
    family : str, optional
        Default ``"candidate"``.
    params : mapping or iterable of (str, value), optional
        Keyword arguments bound to ``function``.
    recipe : RecipeCall or callable, optional
        The variant as a table of named steps: a :class:`~precision.recipes.steps.RecipeCall`, or
        ``recipe(params) -> RecipeCall``; it must compute exactly what ``function`` returns, and lets
        :func:`evaluate_variants` share its steps with the package's recipes.  Default None: evaluated through
        ``function`` only.

    Returns
    -------
    Variant
        The registered row.
    """
    return TABLE.register(name, function, description, family=family, params=params, replace=replace,
                          recipe=recipe)


def recipe_call(variant) -> RecipeCall | None:
    """How a variant runs as a step table (None for a registered function that is not a recipe)."""
    return TABLE.recipe_call(variant)


def _prepared(call: RecipeCall, machine, inputs):
    if call.fp16_only and inputs.pred.dtype != np.float16:
        raise DtypeError(f"pred dtype={inputs.pred.dtype} with variant={call.fp16_only}; expected float16 (it "
                         "computes in fp16; golden is the fp32 chain)")
    m = resolve_machine(machine)
    return with_compute_format(m, call.compute) if call.compute else m


def bind_call(name: str, call: RecipeCall, pred, target, dout=None, weight=None, *, alpha=0.25, gamma=2.0,
              reduction="none", machine="ieee", count=None) -> BoundRecipe:
    """A recipe call bound to validated inputs (the contract checked, the machine resolved, the constants
    prepared, the operands loaded); ``name`` is the variant's."""
    inputs = validate_inputs(pred, target, dout, weight, alpha, gamma, reduction)
    m = _prepared(call, machine, inputs)
    return BoundRecipe(name, call, call.recipe.plan(call.config), m, call.prepare(m, inputs),
                       load_operands(m, inputs), inputs.shape, inputs.count)


def bind_recipe(variant, pred, target, dout=None, weight=None, *, alpha=0.25, gamma=2.0, reduction="none",
                machine="ieee", count=None) -> BoundRecipe:
    """A variant's recipe bound to validated inputs (``precision explain``).

    Raises
    ------
    ParameterError
        The variant is not a recipe (a registered function of its own).
    """
    row = get_variant(variant)
    call = recipe_call(row)
    if call is None:
        raise ParameterError(f"variant={row.name!r} is not a step recipe (a registered function); expected one of "
                             "the package's variants or one registered with recipe=")
    return bind_call(row.name, call, pred, target, dout, weight, alpha=alpha, gamma=gamma, reduction=reduction,
                     machine=machine)


def evaluate(variant, pred, target, dout=None, weight=None, *, alpha=0.25, gamma=2.0, reduction="none",
             machine="ieee", count=None) -> np.ndarray:
    """The loss per element, pred's dtype and shape, by a variant on an emulated machine.

    Examples
    --------
    >>> x = np.array([[2.0, -1.0]], np.float32); t = np.array([[1, 0]], np.int32)
    >>> [float(v).hex() for v in evaluate("kernel", x, t)[0]]
    ['0x1.d8cb300000000p-12', '0x1.166c160000000p-6']
    """
    row = get_variant(variant)
    if recipe_call(row) is None:  # a registered function of its own (a plugin's)
        return row(machine, pred, target, dout, weight, alpha, gamma, reduction, count=count)
    return bind_recipe(row, pred, target, dout, weight, alpha=alpha, gamma=gamma, reduction=reduction,
                       machine=machine).run().reshape(np.shape(pred))


def evaluate_variants(variants, pred, target, dout=None, weight=None, *, alpha=0.25, gamma=2.0, reduction="none",
                      machine="ieee", count=None, keep_steps=()):
    """Several variants on the same operands, each shared step once; bit-identical to :func:`evaluate` alone.

    Returns name -> loss ``[N, C]`` or the :class:`~precision.errors.PrecisionError` evaluating it alone raises,
    and, with ``keep_steps``, name -> {step: value} as well (the engine's contract, docs/operators.md).  A
    registered function that is not a recipe is evaluated alone (no steps kept).
    """
    try:
        inputs = validate_inputs(pred, target, dout, weight, alpha, gamma, reduction)
    except PrecisionError:
        inputs = None  # every variant raises the same error alone

    def alone(row):
        return evaluate(row, pred, target, dout, weight, alpha=alpha, gamma=gamma, reduction=reduction,
                        machine=machine, count=count)
    return evaluate_rows(list(variants), TABLE, inputs, lambda call: _prepared(call, machine, inputs), alone,
                         inputs.count if inputs is not None else 0, load_operands, keep_steps)
