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
from types import ModuleType

from precision.errors import PrecisionError

__all__ = ["OPERATORS", "DEFAULT_OPERATOR", "get_operator"]

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
