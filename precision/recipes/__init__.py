"""Recipes: an implementation as a table of named steps on an emulated machine.

:mod:`~precision.recipes.steps` defines :class:`~precision.recipes.steps.Step`,
:class:`~precision.recipes.steps.Recipe` (evaluated once for every guard
configuration, shared steps computed once) and traces.  Operator-free; may
import :mod:`precision.machine`, :mod:`precision.exact` and :mod:`precision.errors`.
"""
