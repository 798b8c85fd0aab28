"""Analysis: scores of outputs against correctly rounded exact values, and acceptance standards.

:mod:`~precision.analysis.scoring` classifies outputs and measures their
error (ulp of the output format, bits; the conventions of every module here);
:mod:`~precision.analysis.histograms` bins ulp errors for quantiles;
:mod:`~precision.analysis.acceptance` adds the acceptance standards' per-point
metrics; :mod:`~precision.analysis.groups` reduces scores into mergeable group
statistics; :mod:`~precision.analysis.paired` compares two variants on the same
points; :mod:`~precision.analysis.standards` turns the statistics into
MERE/MARE/RMSE ratio levels.  Operator-free; may import the
layers below (:mod:`precision.recipes`, :mod:`precision.machine`,
:mod:`precision.exact`, :mod:`precision.io`, :mod:`precision.errors`).
"""
