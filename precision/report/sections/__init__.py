"""The report's sections: one module each, chosen and ordered by the study file's ``[report] sections``.

This package's top level only *names* the sections and their options (so a
study file can be validated without importing the renderer); each section
lives in its own module with a ``build(context) -> Section`` function
(:mod:`precision.report.context`).

==============  ===============================================================
section         what it shows
==============  ===============================================================
``verdicts``    the paired verdict of every comparison (guards, thresholds,
                declared variant pairs) per machine x format: first screen
``targets``     a candidate against its accuracy targets: first screen
``dominant``    what dominates the error: the largest errors per region and
                selector, each with its cause (from the attribution when the
                run has one)
``attribution`` where the error is born: the kept points attributed to the
                steps of their recipe, the causes checked against the errors
                (a confusion matrix), where each guard acts
``summary``     accuracy per variant, format and machine, headline maxima
                labelled exhaustive or sampled and set against the known
                witnesses (hunts, corpora) re-evaluated, plots
``ablation``    each guard's comparisons per region and gamma
``threshold``   the G5 threshold against never and against 1/64
``recovery``    G7 by band of raw*weight: outputs rescued and zeroed
``q``           q = 1 - p, ln p and the powers as x grows; where errors start
``bracket``     errors by band of the bracket's cancellation factor C
``selector``    statistics per selector and region
``standards``   the acceptance standards (MERE / MARE / RMSE threshold and
                ratio levels, allclose) beside the ULP verdict, and what they
                cannot see (blind spots, false alarms)
==============  ===============================================================
"""

from __future__ import annotations

import importlib

__all__ = ["SECTION_OPTIONS", "DEFAULT_SECTIONS", "section_module"]

#: section -> {option: (kind, default)}; kinds: number, string, numbers, strings.
SECTION_OPTIONS = {
    "verdicts": {},
    "targets": {"variant": ("string", "candidate"), "fp32_max_ulp": ("number", 4.0), "nan_inf": ("number", 0.0),
                "fp16_share_correct": ("number", 0.999), "fp16_max_ulp": ("number", 1.0),
                "ops_ratio": ("number", 1.5), "hunts": ("strings", ()), "corpus": ("strings", ())},
    "dominant": {"variants": ("strings", ())},
    "attribution": {},
    "summary": {},
    "ablation": {},
    "threshold": {},
    "recovery": {},
    "q": {"x": ("numbers", (1.0, 2.0, 4.0, 8.0, 10.0, 12.0, 14.0, 16.0, 16.5, 17.0, 18.0, 20.0, 24.0, 30.0,
                            40.0, 60.0, 87.0, 88.0, 89.0, 100.0)),
          "gamma": ("number", 2.0), "machine": ("string", "npu")},
    "bracket": {},
    "selector": {},
    "standards": {"third_party": ("string", "golden"), "third_party_machine": ("string", "ieee"),
                  "allclose": ("string", "unit_test"), "ratio_floor": ("number", 0.0), "max_ulp": ("number", 1.0),
                  "golden": ("string", "exact")},
}

#: Sections of a study file without ``[report]`` (a section with nothing to show is left out).
DEFAULT_SECTIONS = ("verdicts", "dominant", "summary", "selector")


def section_module(name: str):
    """The module implementing a section (imported on first use)."""
    return importlib.import_module(f"precision.report.sections.{name}")
