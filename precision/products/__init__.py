"""Products: what users read and gate on, built from runs.

:mod:`~precision.products.report` (review reports),
:mod:`~precision.products.gate` (error budgets for CI),
:mod:`~precision.products.diff` (two runs compared),
:mod:`~precision.products.hunt` (worst-case search) and
:mod:`~precision.products.score_outputs` (device outputs scored).  The operator is
received as an object (:func:`precision.engine.operators.get_operator` of the
name a run folder records, or a command's); never imported.  May import
:mod:`precision.engine` and every layer below it; never an operator or the
command line.
"""
