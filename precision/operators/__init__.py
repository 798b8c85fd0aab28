"""The operators: one folder each (``precision/operators/<name>/``), the folder's ``__init__`` its interface.

A folder here is the one registration point of an operator: :mod:`precision.engine.operators` finds the
operators by listing this folder (their names are the folders' names) and imports one when a study, a run
folder or a command names it.  Operators import the layers below them, never each other (import-linter's
independence contract); the protocol they follow, its required core and its optional capabilities with
their defaults, is :mod:`precision.engine.operators` and docs/operators.md.
"""
