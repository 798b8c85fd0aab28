"""SigmoidFocalLossGrad's own report sections: the questions a review of this operator asks.

The report framework (:mod:`precision.products.report`) builds the generic
sections (verdicts, dominant, summary, selector, ...); a study of this
operator may also name these, each a module with ``build(context) ->
Section`` like the generic ones:

=============  ===============================================================
section        what it shows
=============  ===============================================================
``targets``    a candidate against its accuracy targets: first screen
``threshold``  the G5 threshold against never and against 1/64
``recovery``   G7 by band of raw*weight: outputs rescued and zeroed
``q``          q = 1 - p, ln p and the powers as x grows; where errors start
``bracket``    errors by band of the bracket's cancellation factor C
=============  ===============================================================

:data:`SECTION_OPTIONS` is their part of the study file format (the
``[report.<section>]`` options, as :data:`precision.engine.study.SECTION_OPTIONS`
for the generic ones); :data:`REPORT_SECTIONS` says where each is built;
:data:`GLOSSARY` holds the operator's words a report defines when it uses them, :data:`PHRASES` the phrases the
generic sections say of its comparisons.
"""

from __future__ import annotations

__all__ = ["SECTION_OPTIONS", "REPORT_SECTIONS", "GLOSSARY", "PHRASES"]

#: The operator's report sections and their options: section -> {option: (kind, default)}.
SECTION_OPTIONS = {
    "targets": {"variant": ("string", "candidate"), "fp32_max_ulp": ("number", 4.0), "nan_inf": ("number", 0.0),
                "fp16_share_correct": ("number", 0.999), "fp16_max_ulp": ("number", 1.0),
                "ops_ratio": ("number", 1.5), "hunts": ("strings", ()), "corpus": ("strings", ()),
                "points": ("strings", ())},
    "threshold": {},
    "recovery": {},
    "q": {"x": ("numbers", (1.0, 2.0, 4.0, 8.0, 10.0, 12.0, 14.0, 16.0, 16.5, 17.0, 18.0, 20.0, 24.0, 30.0,
                            40.0, 60.0, 87.0, 88.0, 89.0, 100.0)),
          "gamma": ("number", 2.0), "machine": ("string", "npu")},
    "bracket": {},
}

#: The module building each of them.
REPORT_SECTIONS = {name: f"precision.operators.sigmoid_focal_loss_grad.report.{name}" for name in SECTION_OPTIONS}

#: Term -> definition: the operator's words in a report's glossary (after the generic ones, when the page uses
#: them; precision.products.report.glossary).
GLOSSARY = {
    "tau": "G5's cancellation threshold: the correction applies when |orig| <= tau * max(|lhs|, |rhs|)",
    "bracket": "the bracket A of the positive term, gamma*q*ln(p) - ... whose cancellation factor C measures how "
               "much its terms cancel",
    "C >=": "the bracket's cancellation factor C = max(|terms|) / |A|: C >= 2 loses at least one bit to cancellation",
    "q-hole": "x >= 12 ln 2 (about 8.32) in fp32, where q = 1 - p by subtraction has lost at least half its 24 "
              "bits (q below 2^-12); from x = 25 ln 2 (about 17.33) p rounds to 1 and q is 0",
    "candidate": "the issue-6 candidate implementation (log1p by atanh series, p and q without 1 - p, double-float "
                 "exp powers)",
}

#: What the generic sections say of this operator's comparisons: ``thresholds``, the threshold comparisons
#: (kind ``threshold``) against no correction, and ``thresholds_elsewhere``, where the rest of them is shown
#: (the verdicts section), ``thresholds_shown``, the same in the verdict grid's note; ``routes_around``, an
#: example of a guard that routes around a step (the attribution
#: section).
PHRASES = {
    "thresholds": "G5 thresholds against no correction",
    "thresholds_elsewhere": "each threshold, against never and against 1/64, in the threshold section",
    "routes_around": "as G5 selects corr instead of orig",
    "thresholds_shown": "thresholds against 1/64 in the threshold section",
}
