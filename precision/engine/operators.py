"""The operators the toolkit knows, and the protocol each follows: a required core, optional capabilities.

An operator is a folder of ``precision/operators/`` (today ``sigmoid_focal_loss_grad``, the focal loss's
backward pass, and ``sigmoid_focal_loss``, its forward pass); the folder's ``__init__`` is its interface and
the folder's name its name.  Listing that folder is the one registration: :data:`OPERATORS` holds every
folder found.  The sweep engine and the products never import an operator; they receive it as an object,
:func:`get_operator` of the name a study file gives (``operator = "..."``, default :data:`DEFAULT_OPERATOR`),
a run folder records or a command's ``--operator`` names, and use the names below.

The protocol (docs/operators.md, with a skeleton to copy): :data:`REQUIRED`, the names every operator
defines, and :data:`OPTIONAL`, the capabilities an operator may define, each with the default
:func:`get_operator` gives an operator that does not (no guards, no conditioning bands, no plugins, no run
stages, no attribution, no sections of its own).  A default is what "none" means, stated once here: the
report reads a guard's per-element decisions only from an operator that tracks them (``FIRED_COLUMNS``),
and otherwise says "fired: not tracked".
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable

import numpy as np

from precision.errors import PrecisionError
from precision.recipes.target_kinds import TARGET_KINDS

__all__ = ["OPERATORS", "DEFAULT_OPERATOR", "REQUIRED", "OPTIONAL", "get_operator", "term_chunk", "RunStage",
           "Comparison", "unique_comparisons", "input_keys", "search_order", "default_studies"]

#: Operator name (as a study file, ``run.json`` and ``--operator`` spell it) -> the package that is its interface:
#: every folder of ``precision/operators/`` with an ``__init__.py``.
OPERATORS = {p.name: f"precision.operators.{p.name}"
             for p in sorted((Path(__file__).resolve().parent.parent / "operators").iterdir())
             if (p / "__init__.py").is_file()}
#: The operator of a study file without an ``operator`` key, and of a command without ``--operator``.
DEFAULT_OPERATOR = "sigmoid_focal_loss_grad"

#: The required core: every operator's interface defines these (name -> what it is).
REQUIRED = {
    # who it is
    "TITLE": "the operator's name in text (SigmoidFocalLossGrad)",
    "VALUE": "what its exact value is called in text (the gradient, the loss)",
    # its inputs and attributes
    "ATTRIBUTES": "float attributes -> default values, in the order its functions take them",
    "validate_inputs": "validate_inputs(pred, target, dout, weight, *attributes, reduction): the inputs checked",
    # the exact value
    "ORACLE_VERSION": "part of every cache key; bumped whenever an exact value could change",
    "RESULT_SOURCES": "its modules every result depends on besides a variant's own (file names in its folder)",
    "round_exact": "round_exact(x, t, *attributes, weight, dout, count, fmt): the certified correct rounding",
    "exact_decimal": "exact_decimal(x, t, *attributes, weight, dout, count, digits): the exact value in decimal",
    "term_tables": "term_tables(x, term values) -> {value: precision.exact.terms.TermTable}: T(x) per value",
    "derive_exact": "derive_exact(x, t, *attributes, weight, dout, count, fmt, pos, neg, certify=True)",
    # its implementations
    "get_variant": "get_variant(name) -> the registry row (family, description, function, source)",
    "variant_names": "variant_names() -> the fixed names, in order",
    "evaluate_variants": "evaluate_variants(names, pred, target, dout, weight, *, attributes..., reduction, machine, "
                         "count, keep_steps=()) -> {name: output or error} (and {name: kept steps})",
}


class _Derived:
    """An optional capability whose default is made from the operator's own interface (``make(op)``)."""

    def __init__(self, make: Callable):
        self.make = make


def _both_sides(op):
    """Default ``selected_term_tables``: T(x) and T(-x) at every point (correct, twice the work of selecting)."""
    def selected_term_tables(x, t, *attributes):
        term = dict(zip(op.ATTRIBUTES, attributes)).get(op.TERMS_ATTRIBUTE)
        x = np.asarray(x, dtype=np.float64)
        both = op.term_tables(np.concatenate([x, -x]), [term])[term]
        return both.take(np.arange(x.size)), both.take(np.arange(x.size, 2 * x.size))
    return selected_term_tables


def _evaluate_one(op):
    """Default ``evaluate``: one variant through ``evaluate_variants``, its error raised."""
    def evaluate(variant, *args, **kwargs):
        out = op.evaluate_variants([variant], *args, **kwargs)[getattr(variant, "name", variant)]
        if isinstance(out, Exception):
            raise out
        return out
    return evaluate


@dataclass(frozen=True)
class Comparison:
    """One paired comparison: ``with_variant`` against ``without_variant`` on the same points.

    Attributes
    ----------
    subject : str
        What the pair is evidence for: a guard (``G8``), a threshold (``G5=2^-6``), or the ``with`` variant's
        name for declared pairs.
    with_variant, without_variant : str
        Registry names.
    kind : {"guard", "threshold", "declared"}
    """

    subject: str
    with_variant: str
    without_variant: str
    kind: str

    @property
    def name(self) -> str:
        """``"<with> vs <without>"``, the comparison's label in tables."""
        return f"{self.with_variant} vs {self.without_variant}"


def unique_comparisons(comparisons) -> list:
    """The comparisons in their order, each (with, without) pair once (its first occurrence)."""
    seen, unique = set(), []
    for c in comparisons:
        if (c.with_variant, c.without_variant) not in seen:
            seen.add((c.with_variant, c.without_variant))
            unique.append(c)
    return unique


def _declared_comparisons(variants, declared=()) -> list:
    """Default ``find_comparisons``: the pairs a study file declares (``[run] compare``), in their order."""
    return unique_comparisons(Comparison(a, a, b, "declared") for a, b in declared)


def _production_variant(variants) -> str | None:
    """Default ``production_variant``: ``kernel`` when among the variants, else None."""
    return "kernel" if "kernel" in variants else None


def _one_band(x, target, term, edges) -> np.ndarray:
    """Default ``bracket_band``: every point in band 0 (no conditioning bands)."""
    return np.zeros(np.broadcast_shapes(np.shape(x), np.shape(target)), dtype=np.int64)


def _no_cancellation(x, target, term) -> np.ndarray:
    """Default ``selected_cancellation``: C = 1 everywhere (no cancelling factor)."""
    return np.ones(np.broadcast_shapes(np.shape(x), np.shape(target)))


def _nowhere(x, target, term) -> np.ndarray:
    """Default ``in_neighbourhood``: no point lies near a root of the exact value."""
    return np.zeros(np.broadcast_shapes(np.shape(x), np.shape(target)), dtype=bool)


def _nothing(*args, **kwargs) -> None:
    return None


def _generic_describe(op):
    """Default ``describe``: the toolkit's sentence for a point's top cause (precision.analysis.attribution) for
    an operator with ``attribute``; None without."""
    if getattr(op, "attribute", None) is None:
        return None
    from precision.analysis.attribution import describe  # pandas and mpmath: loaded only for attribution
    return describe


#: The optional capabilities: name -> the default an operator without it gets (what "none" means); a derived
#: default is made from the operator's required names.
OPTIONAL = {
    # words and their reuse
    "ATTRIBUTE_HELP": _Derived(lambda op: {name: f"the {name} attribute" for name in op.ATTRIBUTES}),
    "term_sides": lambda attributes, targets: (True, True),
    "selected_term_tables": _Derived(_both_sides),
    # the variants, read through the required names
    "list_variants": _Derived(lambda op: lambda: [(n, op.get_variant(n).description) for n in op.variant_names()]),
    "evaluate": _Derived(_evaluate_one),
    "recipe_call": lambda variant: None, "bind_recipe": None,
    # inputs: the attribute whose reusable terms are tabled per value (None: one table, keyed None); the inputs a
    # point has besides pred and the attributes (a loss's gradient: target, weight, upstream gradient, mean count);
    # the target's kind (precision.recipes.target_kinds: "binary", an int32 selector, or "real", a float value)
    "TERMS_ATTRIBUTE": None, "INPUTS": ("target", "weight", "dout", "count"), "TARGET_KIND": "binary",
    # the reductions its element evaluation takes (a study's `reduction`, `score --reduction`)
    "REDUCTIONS": ("none", "sum", "mean"),
    # the oracle's measured speed (terms per core-second), for a run's estimate; None: the engine's measured rate
    "TERMS_PER_SECOND": None,
    # guards: none; per-element decisions not tracked (the report: "fired: not tracked")
    "ALL_GUARDS": frozenset(), "GUARD_NAMES": {}, "GUARD_PURPOSE": {},
    "FIRED_COLUMNS": {}, "FIRED_STEPS": (), "FIRED_MEANING": {},
    "variant_guards": _nothing, "variant_fired": lambda variant, steps, machine, attributes, size: {},
    "guard_blocked": _nothing, "not_exercised_reason": _nothing, "decision_assumption": _nothing,
    "TILED_GUARDS": (), "PRODUCTION_TILE": {}, "ub_former": _nothing,
    # comparisons: the declared pairs only; production variant: `kernel` when present
    "find_comparisons": _declared_comparisons, "production_variant": _production_variant,
    "is_production": lambda variant: variant == "kernel", "PRODUCTION_THRESHOLD": None,
    "threshold_name": str, "g5_threshold": _nothing,
    # conditioning: one band, no roots, no neighbourhood
    "bracket_band": _one_band, "band_labels": lambda edges: ["all"], "band_ranges": lambda edges: [(1.0, np.inf)],
    "selected_cancellation": _no_cancellation, "in_neighbourhood": _nowhere, "ROOT_NEIGHBOURHOOD_C": None,
    "roots": lambda term, *a, **k: [], "neighbourhood": lambda term, *a, **k: [],
    "cancellation_windows": lambda term, *a, **k: [],
    # plugins: none
    "load_plugins": _nothing, "ensure_loaded": _nothing, "check_study_variants": _nothing,
    "plugin_digest": _nothing, "variant_source": _nothing,
    # run stages, attribution, cost: none
    "RUN_STAGES": {}, "attribute": None, "attribute_bound": None, "describe": _Derived(_generic_describe),
    "count_ops": None,
    # study domain: one region over all pred, no pred sets of its own
    "DEFAULT_REGION_EDGES": (), "PRED_SETS": {},
    # report: no sections, options, glossary words or phrases of its own
    "REPORT_SECTIONS": {}, "SECTION_OPTIONS": {}, "GLOSSARY": {}, "PHRASES": {},
    # the studies `precision report --all` rebuilds, by file name under studies/
    "DEFAULT_STUDIES": (),
}


def get_operator(name: str) -> ModuleType:
    """The interface of the operator called ``name`` (its package, imported on first use), completed with the
    defaults of the optional capabilities it does not define (:data:`OPTIONAL`).

    Raises
    ------
    precision.errors.PrecisionError
        ``name`` is not one of :data:`OPERATORS`, or its interface lacks a required name (:data:`REQUIRED`).
    """
    if name not in OPERATORS:
        raise PrecisionError(f"operator {name!r} is unknown; expected one of {', '.join(OPERATORS)}")
    module = importlib.import_module(OPERATORS[name])
    if not getattr(module, "_PROTOCOL_COMPLETE", False):
        missing = [n for n in REQUIRED if not hasattr(module, n)]
        if missing:
            raise PrecisionError(f"operator {name!r} lacks {', '.join(missing)} (the required core: "
                                 f"docs/operators.md)")
        for key, default in OPTIONAL.items():
            if not hasattr(module, key):
                setattr(module, key, default.make(module) if isinstance(default, _Derived) else default)
        if module.TARGET_KIND not in TARGET_KINDS:
            raise PrecisionError(f"operator {name!r} has TARGET_KIND={module.TARGET_KIND!r}; expected one of "
                                 f"{', '.join(TARGET_KINDS)}")
        module._PROTOCOL_COMPLETE = True
    return module


def default_studies() -> list:
    """The studies whose reports are committed under reports/ (``precision report --all`` in an empty folder):
    every operator's ``DEFAULT_STUDIES``, operators in name order."""
    return [study for name in OPERATORS for study in get_operator(name).DEFAULT_STUDIES]


def input_keys(op) -> tuple:
    """The key columns naming a point's inputs besides pred in the tables of a run of the operator ``op``: its
    attributes (its ``ATTRIBUTES``, in order), ``weight``, ``dout``, ``target``."""
    return (*op.ATTRIBUTES, "weight", "dout", "target")


def search_order(op) -> list:
    """The operator ``op``'s attributes in the order a search over them and its tables list them: its terms
    attribute first (the outer loop: one oracle table per value), then the others in its ``ATTRIBUTES`` order
    (SigmoidFocalLossGrad: gamma, alpha)."""
    return sorted(op.ATTRIBUTES, key=lambda a: a != op.TERMS_ATTRIBUTE)


def term_chunk(chunk) -> dict:
    """{term value: TermTable} of one chunk ``(x, values of the terms attribute, operator name)`` of an
    operator's exact-value terms (SigmoidFocalLossGrad's focal terms, per gamma): a job of the sweep's and the
    hunt's oracle stage on a worker (the operator travels by name)."""
    x, terms, operator = chunk
    return get_operator(operator).term_tables(x, terms)


@dataclass(frozen=True)
class RunStage:
    """A stage an operator adds to a run after its tasks, switched on by the study file
    (``[run] <name> = true``; the operator's ``RUN_STAGES`` maps each name to a factory of these, given the
    study's variants, which raises :class:`~precision.errors.PrecisionError` saying what they lack).

    Attributes
    ----------
    name : str
        The study file's switch.
    evaluates : tuple of str
        The variants whose implementations its tables depend on (their source digests key its cache entry,
        with the tasks' inputs, ``parameters`` and the code of ``run``).
    parameters : dict
        Its other inputs (JSON).
    run : callable
        ``run(tasks, executor, pooled_regions) -> {table name: DataFrame}``: the tables it adds to the run
        folder (``<table name>.csv``), from the run's tasks on the run's executor; ``pooled_regions`` holds one
        bool per region of the study, False for a region it keeps separate.
    """

    name: str
    evaluates: tuple
    parameters: dict
    run: Callable
