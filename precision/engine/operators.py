"""The operators the toolkit knows, by name: the one place the layers below an operator find it.

An operator is a package above the products (today one:
:mod:`precision.sigmoid_focal_loss_grad`); its ``__init__`` is its interface
(the checklist is docs/operators.md).  The sweep engine and the products never
import an operator; they receive it as an object, :func:`get_operator` of the
name a study file gives (``operator = "..."``, default
:data:`DEFAULT_OPERATOR`) or a run folder records, and call what its interface
provides (``op.evaluate_variants(...)``, ``op.ORACLE_VERSION``).  So a second
operator is a sibling package and one line of :data:`OPERATORS`, not a change
to the engine.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType
from typing import Callable

from precision.errors import PrecisionError

__all__ = ["OPERATORS", "DEFAULT_OPERATOR", "get_operator", "term_chunk", "RunStage", "input_keys", "search_order"]

#: Operator name (as a study file and ``run.json`` spell it) -> the package that is its interface.
OPERATORS = {"sigmoid_focal_loss_grad": "precision.sigmoid_focal_loss_grad"}
#: The operator of a study file without an ``operator`` key.
DEFAULT_OPERATOR = "sigmoid_focal_loss_grad"


def get_operator(name: str) -> ModuleType:
    """The interface of the operator called ``name`` (its package, imported on first use).

    Raises
    ------
    precision.errors.PrecisionError
        ``name`` is not one of :data:`OPERATORS`.
    """
    if name not in OPERATORS:
        raise PrecisionError(f"operator {name!r} is unknown; expected one of {', '.join(OPERATORS)}")
    return importlib.import_module(OPERATORS[name])


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
    return get_operator(operator).focal_term_tables(x, terms)


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
