"""Products: what users read and gate on, built from runs.

:mod:`~precision.products.report` (review reports),
:mod:`~precision.products.gate` (error budgets for CI),
:mod:`~precision.products.diff` (two runs compared),
:mod:`~precision.products.hunt` (worst-case search) and
:mod:`~precision.products.score_outputs` (device outputs scored).  May import
:mod:`precision.engine` and every layer below it; never the command line.
"""
