"""Analysis: scores of outputs against correctly rounded exact values, and acceptance standards.

:mod:`~precision.analysis.scoring` classifies outputs and measures their
error (ulp of the output format, bits), groups and merges statistics and
compares variants paired; :mod:`~precision.analysis.standards` turns the
statistics into MERE/MARE/RMSE ratio levels.  Operator-free; may import the
layers below (:mod:`precision.recipes`, :mod:`precision.machine`,
:mod:`precision.exact`, :mod:`precision.io`, :mod:`precision.errors`).
"""
