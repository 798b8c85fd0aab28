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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from precision.errors import DtypeError, ParameterError, PrecisionError
from precision.operators.sigmoid_focal_loss.inputs import validate_inputs
from precision.operators.sigmoid_focal_loss.recipes import golden_call, load_operands, loss_call, naive_call
from precision.recipes.operands import resolve_machine, with_compute_format
from precision.recipes.shared import evaluate_calls, in_order
from precision.recipes.steps import BoundRecipe, RecipeCall

__all__ = ["Variant", "VARIANTS", "get_variant", "variant_names", "list_variants", "recipe_call", "evaluate",
           "evaluate_variants", "bind_recipe"]


@dataclass(frozen=True)
class Variant:
    """One row: ``name``, ``family``, ``description``, the builder of its :class:`RecipeCall` (``call``)."""

    name: str
    family: str
    description: str
    call: Callable
    params: tuple = ()
    source: None = None
    guards: None = None

    @property
    def function(self) -> Callable:
        """The code the row stands for (its source digest keys its results): the recipe module's builder."""
        return self.call


VARIANTS = {v.name: v for v in (
    Variant("kernel", "kernel", "production element recipe, reduction none: Power(base, gamma), clamp after",
            lambda: loss_call(path="none")),
    Variant("kernel_sum_path", "kernel", "production element recipe under sum/mean: clamp first, Exp(gamma Ln)",
            lambda: loss_call(path="sum")),
    Variant("naive", "naive", "textbook formula in fp32, no guard", naive_call),
    Variant("golden", "golden", "operator test golden: torch chain in fp32", golden_call),
    Variant("third_party", "golden", "operator test third party: the torch chain in fp16 (fp16 inputs)",
            lambda: golden_call(fp16=True)),
    Variant("candidate", "candidate", "kernel with the accurate 1 - p and log1p(e), reduction none",
            lambda: loss_call(path="none", q="accurate", log="log1p")),
    Variant("kernel_accurate_q", "kernel", "kernel with only the accurate 1 - p it computes and discards",
            lambda: loss_call(path="none", q="accurate")),
    Variant("kernel_log1p", "kernel", "kernel with only log1p(e) in place of Ln(1 + e)",
            lambda: loss_call(path="none", log="log1p")),
)}


def variant_names() -> list:
    return list(VARIANTS)


def list_variants() -> list:
    """(name, description) of every variant, for ``precision variants --operator sigmoid_focal_loss``."""
    return [(v.name, v.description) for v in VARIANTS.values()]


def get_variant(name) -> Variant:
    """The row of ``name`` (a Variant passes through).

    Raises
    ------
    ParameterError
        An unknown name (the message lists the known ones).
    """
    if isinstance(name, Variant):
        return name
    if name not in VARIANTS:
        raise ParameterError(f"variant={name!r} is unknown; expected one of {', '.join(VARIANTS)}")
    return VARIANTS[name]


def recipe_call(variant) -> RecipeCall:
    return get_variant(variant).call()


def _prepared(call: RecipeCall, machine, inputs):
    if call.fp16_only and inputs.pred.dtype != np.float16:
        raise DtypeError(f"pred dtype={inputs.pred.dtype} with variant={call.fp16_only}; expected float16 (it "
                         "computes in fp16; golden is the fp32 chain)")
    m = resolve_machine(machine)
    return with_compute_format(m, call.compute) if call.compute else m


def bind_recipe(variant, pred, target, dout=None, weight=None, *, alpha=0.25, gamma=2.0, reduction="none",
                machine="ieee", count=None) -> BoundRecipe:
    """A variant's recipe bound to validated inputs (``precision explain``)."""
    row = get_variant(variant)
    call = row.call()
    inputs = validate_inputs(pred, target, dout, weight, alpha, gamma, reduction)
    m = _prepared(call, machine, inputs)
    return BoundRecipe(row.name, call, call.recipe.plan(call.config), m, call.prepare(m, inputs),
                       load_operands(m, inputs), inputs.shape, inputs.count)


def evaluate(variant, pred, target, dout=None, weight=None, *, alpha=0.25, gamma=2.0, reduction="none",
             machine="ieee", count=None) -> np.ndarray:
    """The loss per element, pred's dtype and shape, by a variant on an emulated machine.

    Examples
    --------
    >>> x = np.array([[2.0, -1.0]], np.float32); t = np.array([[1, 0]], np.int32)
    >>> [float(v).hex() for v in evaluate("kernel", x, t)[0]]
    ['0x1.d8cb300000000p-12', '0x1.166c160000000p-6']
    """
    return bind_recipe(variant, pred, target, dout, weight, alpha=alpha, gamma=gamma, reduction=reduction,
                       machine=machine).run().reshape(np.shape(pred))


def evaluate_variants(variants, pred, target, dout=None, weight=None, *, alpha=0.25, gamma=2.0, reduction="none",
                      machine="ieee", count=None, keep_steps=()):
    """Several variants on the same operands, each shared step once; bit-identical to :func:`evaluate` alone.

    Returns name -> loss ``[N, C]`` or the :class:`~precision.errors.PrecisionError` evaluating it alone raises,
    and, with ``keep_steps``, name -> {step: value} as well (the engine's contract, docs/operators.md).
    """
    names = list(variants)
    results: dict = {}
    calls: dict = {}
    try:
        inputs = validate_inputs(pred, target, dout, weight, alpha, gamma, reduction)
    except PrecisionError as exc:
        inputs, error = None, exc
    for name in names:
        key = getattr(name, "name", name)
        try:
            if inputs is None:
                raise error
            call = recipe_call(name)
            calls[key] = (_prepared(call, machine, inputs), call)
        except PrecisionError as exc:
            results[key] = exc
    shared, kept = evaluate_calls(calls, inputs, inputs.count if inputs is not None else 0, load_operands,
                                  tuple(keep_steps))
    return in_order(names, {**results, **shared}, kept, tuple(keep_steps))
