"""The report's sections: one module each, chosen and ordered by the study file's ``[report] sections``.

This package's top level only *names* the sections; their options are part of
the study file format (:data:`precision.engine.study.SECTION_OPTIONS`, re-exported
here, with an operator's own: :func:`section_options`); each section lives in
its own module with a ``build(context) -> Section`` function
(:class:`precision.products.report.render.ReportContext`).  The generic ones
are here; an operator's own (its ``REPORT_SECTIONS``, e.g. SigmoidFocalLossGrad's
``targets``, ``threshold``, ``recovery``, ``q`` and ``bracket``:
:mod:`precision.operators.sigmoid_focal_loss_grad.report`) live in its package.

==============  ===============================================================
section         what it shows
==============  ===============================================================
``verdicts``    the paired verdict of every comparison (guards, thresholds,
                declared variant pairs) per machine x format: first screen
``dominant``    what dominates the error: the largest errors per region and
                selector, each with its cause (from the attribution when the
                run has one)
``attribution`` where the error is born: the kept points attributed to the
                steps of their recipe, the causes checked against the errors
                (a confusion matrix), where each guard acts
``summary``     accuracy per variant, format and machine, headline maxima
                labelled exhaustive or sampled and set against the known
                witnesses (hunts, corpora) re-evaluated, plots
``extents``     where the holes are: per variant, machine and selector, the
                outputs past 1, 2^10 and 2^20 ulp and the first and last
                pred of each (exact on an exhaustive set)
``ablation``    each guard's comparisons per region and gamma
``selector``    statistics per selector and region
``standards``   the acceptance standards (MERE / MARE / RMSE threshold and
                ratio levels, allclose) beside the ULP verdict, and what they
                cannot see (blind spots, false alarms)
==============  ===============================================================
"""

from __future__ import annotations

import importlib

from precision.engine.study import DEFAULT_SECTIONS, SECTION_OPTIONS, section_options  # the study file format

__all__ = ["SECTION_OPTIONS", "DEFAULT_SECTIONS", "section_module", "section_options"]


def section_module(name: str, op):
    """The module implementing a section (imported on first use): the operator ``op``'s own (its
    ``REPORT_SECTIONS``), else the generic one of this package."""
    return importlib.import_module(op.REPORT_SECTIONS.get(name, f"precision.products.report.sections.{name}"))
