"""SigmoidFocalLoss (forward): the operator's interface (spec: shared/spec/sigmoid_focal_loss.md).

The protocol's required core (precision.engine.operators.REQUIRED) and the optional capabilities this
operator has: attribute help, a terms attribute (gamma) with its selected terms, its studies, its recipes for
``precision explain``, the paired comparisons its review asks for, a run stage (the kernel's sum and mean
against the exact ones), its report sections, plugin files (``register_variant``, :mod:`.plugins`) and step
attribution (:mod:`.attribution`, with the exact step values of :mod:`.step_values`; the sentence is the
toolkit's ``describe``).  It has no guards with per-element decisions and no conditioning bands, and takes
``list_variants`` and ``evaluate`` from its required names: the engine's defaults stand for them.

- inputs and attributes: :mod:`.inputs` (alpha in [0, 1], gamma in [0, 5], a binary target, no dout);
- the exact value: :mod:`.oracle` (mpmath balls of the per-class terms, derived and certified by
  :mod:`precision.exact.terms`);
- the implementations as step tables: :mod:`.recipes`, registered in :mod:`.variants`;
- the reductions as the kernel orders them, their exact sum and mean and their bounds: :mod:`.reduction`, run
  as the stage ``reductions`` (:mod:`.reductions`) and shown by the report section ``reductions``
  (:mod:`.report`).
"""

from __future__ import annotations

TITLE = "SigmoidFocalLoss"
VALUE = "loss"
#: The studies whose reports are committed under reports/ (studies/<name>.toml).
DEFAULT_STUDIES = ("sigmoid_focal_loss",)
#: The inputs a point has besides pred and the attributes: no upstream gradient, no mean count per element.
INPUTS = ("target", "weight")
#: Its element evaluation's reduction: none (the sum and mean are the reduction stage's, [run] reductions = true).
REDUCTIONS = ("none",)

# inputs and attributes
from precision.operators.sigmoid_focal_loss.inputs import (ATTRIBUTE_HELP, ATTRIBUTES, TERMS_ATTRIBUTE,  # noqa: E402
                                                           validate_inputs)
# the exact value
from precision.operators.sigmoid_focal_loss.oracle import (ORACLE_VERSION, derive_exact, exact_decimal,  # noqa: E402
                                                           round_exact, selected_term_tables, term_sides,
                                                           term_tables)
# the implementations
from precision.operators.sigmoid_focal_loss.variants import (bind_recipe, evaluate_variants, get_variant,  # noqa: E402
                                                             recipe_call, register_variant, variant_names)
# optional: plugin files that register more variants (precision.recipes.plugins over its table)
from precision.operators.sigmoid_focal_loss.plugins import (check_study_variants, ensure_loaded,  # noqa: E402
                                                            load_plugins, plugin_digest, variant_source)
# optional: comparisons, the reduction stage, report section and words
from precision.operators.sigmoid_focal_loss.comparisons import find_comparisons  # noqa: E402
from precision.operators.sigmoid_focal_loss.reductions import RUN_STAGES  # noqa: E402
# optional: why a point is wrong (step attribution, precision explain)
from precision.operators.sigmoid_focal_loss.attribution import attribute, attribute_bound  # noqa: E402
from precision.operators.sigmoid_focal_loss.report import GLOSSARY, REPORT_SECTIONS, SECTION_OPTIONS  # noqa: E402

#: Distinct (pred, gamma) terms its mpmath oracle tables per core-second (measured: 20,000 in 1.17 s, Dec 2026):
#: the run's estimate uses it.
TERMS_PER_SECOND = 17_000.0
#: Its modules every result depends on besides a variant's own source (the exact values, the registry).
RESULT_SOURCES = ("oracle.py", "variants.py", "inputs.py")

__all__ = ["TITLE", "VALUE", "DEFAULT_STUDIES", "INPUTS", "REDUCTIONS", "ATTRIBUTES", "ATTRIBUTE_HELP",
           "TERMS_ATTRIBUTE", "validate_inputs", "ORACLE_VERSION", "RESULT_SOURCES", "TERMS_PER_SECOND", "round_exact",
           "exact_decimal", "term_tables", "selected_term_tables", "term_sides", "derive_exact", "get_variant",
           "variant_names", "evaluate_variants", "recipe_call", "bind_recipe", "find_comparisons", "RUN_STAGES",
           "attribute", "attribute_bound", "REPORT_SECTIONS", "SECTION_OPTIONS", "GLOSSARY", "register_variant",
           "load_plugins", "ensure_loaded", "check_study_variants", "plugin_digest", "variant_source"]
