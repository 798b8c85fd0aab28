"""SigmoidFocalLossGrad: everything specific to the operator (spec: shared/spec/sigmoid_focal_loss_grad.md).

This module is the operator's interface: what the layers below it use (the
sweep engine and the products, through this module as an object) and what
the command line imports (only from here: import-linter's ``forbidden``
contract in pyproject.toml).  What it provides, module by module (the
checklist for a second operator is docs/operators.md):

- inputs, attributes and their contract: :mod:`.implementations.common`
  (``ATTRIBUTES``, alpha and gamma with their defaults, and ``TERMS_ATTRIBUTE``,
  gamma: what the layers below take the attributes from; ``validate_inputs``,
  the selectors, the reductions);
- the exact value and its certified rounding into each format:
  :mod:`.oracle` (mpmath balls), :mod:`.oracle_arb` (an independent Arb
  oracle), :mod:`.terms` (focal terms shared across a sweep);
- where the exact value is ill-conditioned: :mod:`.bracket` (the roots and
  cancellation windows);
- the recipes with their guards: :mod:`.implementations` (kernel, naive,
  golden, mmcv, candidate), the variant registry :mod:`.guards`
  (``evaluate``, ``register_variant``) and the plugin files that add to it
  (:mod:`.plugins`);
- which variants are compared with which, and the G5 thresholds:
  :mod:`.comparisons`; the stage it adds to a run (``RUN_STAGES``), where
  G5's threshold belongs, from two evaluations of each task:
  :mod:`.threshold_tasks` on :mod:`.threshold_search`;
- step-level attribution of an error: :mod:`.attribution` on the exact step
  values of :mod:`.step_values`; op counts:
  :mod:`.opcount`;
- why a guard acts on no point of a study: :mod:`.exercise`;
- its domain in a study: the default pred regions and its pred sets
  (``PRED_SETS``: ``windows``; :mod:`.regions`); its report sections, glossary
  words and phrases (:mod:`.report`).

The operator sits above the products in the layers: it may import
:mod:`precision.products`, :mod:`precision.engine` and every layer below
them; only the command line imports it.  The sweep engine and the products
receive it as an object (this module, from
:func:`precision.engine.operators.get_operator`), by the name a study file or
a run folder gives.
"""

from __future__ import annotations

#: Who it is, in text.
TITLE = "SigmoidFocalLossGrad"
VALUE = "gradient"
#: The studies whose reports are committed under reports/ (studies/<name>.toml).
DEFAULT_STUDIES = ("guard_ablation", "cancellation_threshold", "subnormal_recovery", "q_precision", "candidate",
                   "g4_tiling")

# 1. inputs, attributes and their contract
from precision.operators.sigmoid_focal_loss_grad.implementations.common import (
    ALL_GUARDS, ATTRIBUTE_HELP, ATTRIBUTES, TERMS_ATTRIBUTE, validate_inputs)
# 2. the exact value and its certified rounding; its reuse across a sweep
# (the protocol's names: round_exact, term_tables, derive_exact)
from precision.operators.sigmoid_focal_loss_grad.oracle import ORACLE_VERSION, exact_decimal
from precision.operators.sigmoid_focal_loss_grad.oracle import round_gradient as round_exact
from precision.operators.sigmoid_focal_loss_grad.terms import derive_gradient as derive_exact
from precision.operators.sigmoid_focal_loss_grad.terms import focal_term_tables as term_tables
from precision.operators.sigmoid_focal_loss_grad.terms import selected_term_tables, term_sides
# 3. where the exact value is ill-conditioned
from precision.operators.sigmoid_focal_loss_grad.bracket import (
    ROOT_NEIGHBOURHOOD_C, band_labels, band_ranges, bracket_band, cancellation_windows, in_neighbourhood,
    neighbourhood, roots, selected_cancellation)
# 4. the recipes with their guards, the variant registry and plugin files
from precision.operators.sigmoid_focal_loss_grad.guards import (
    GUARD_NAMES, GUARD_PURPOSE, bind_recipe, evaluate, evaluate_variants, get_variant, list_variants, recipe_call,
    variant_fired, variant_guards, variant_names)
from precision.operators.sigmoid_focal_loss_grad.implementations.kernel import (
    FIRED_COLUMNS, FIRED_MEANING, FIRED_STEPS)
from precision.operators.sigmoid_focal_loss_grad.exercise import (
    TILED_GUARDS, decision_assumption, guard_blocked, not_exercised_reason)
from precision.operators.sigmoid_focal_loss_grad.tiling import PRODUCTION_TILE, ub_former
from precision.operators.sigmoid_focal_loss_grad.plugins import (
    check_study_variants, ensure_loaded, load_plugins, plugin_digest, variant_source)
# 5. which variants are compared with which
from precision.operators.sigmoid_focal_loss_grad.comparisons import (
    PRODUCTION_THRESHOLD, find_comparisons, g5_threshold, is_production, production_variant, threshold_name)
# 5b. the stages it adds to a run (the G5 threshold search)
from precision.operators.sigmoid_focal_loss_grad.threshold_tasks import RUN_STAGES
# 6. why a point is wrong; what a variant costs
from precision.operators.sigmoid_focal_loss_grad.attribution import attribute, attribute_bound, describe
from precision.operators.sigmoid_focal_loss_grad.opcount import count_ops
# 7. regions and studies; its report sections
from precision.operators.sigmoid_focal_loss_grad.regions import DEFAULT_REGION_EDGES, PRED_SETS
from precision.operators.sigmoid_focal_loss_grad.report import GLOSSARY, PHRASES, REPORT_SECTIONS, SECTION_OPTIONS

#: The operator's modules (relative to this package) that every sweep result depends on besides a variant's own
#: source: its exact values and their reuse across a sweep, the bracket's bands (the groups), the registry
#: binding variants to recipes.  Part of every result's cache key (precision.engine.task.shared_digest).
RESULT_SOURCES = ("terms.py", "oracle.py", "oracle_fast.py", "bracket.py", "guards.py")

__all__ = [
    # 1. inputs
    "ALL_GUARDS", "ATTRIBUTES", "ATTRIBUTE_HELP", "TERMS_ATTRIBUTE", "validate_inputs",
    # 2. exact value
    "TITLE", "VALUE", "DEFAULT_STUDIES",
    "ORACLE_VERSION", "RESULT_SOURCES", "exact_decimal", "round_exact", "derive_exact", "term_tables",
    "selected_term_tables", "term_sides",
    # 3. conditioning
    "ROOT_NEIGHBOURHOOD_C", "band_labels", "band_ranges", "bracket_band", "cancellation_windows", "neighbourhood",
    "roots", "selected_cancellation", "in_neighbourhood",
    # 4. recipes, guards, registry, plugins
    "GUARD_NAMES", "GUARD_PURPOSE", "bind_recipe", "evaluate", "evaluate_variants", "get_variant", "list_variants",
    "recipe_call", "variant_names", "FIRED_COLUMNS", "FIRED_MEANING", "FIRED_STEPS", "variant_fired", "variant_guards",
    "guard_blocked", "not_exercised_reason", "decision_assumption", "TILED_GUARDS", "PRODUCTION_TILE", "ub_former",
    "check_study_variants", "ensure_loaded", "load_plugins", "plugin_digest", "variant_source",
    # 5. comparisons; run stages
    "PRODUCTION_THRESHOLD", "find_comparisons", "g5_threshold", "threshold_name", "is_production",
    "production_variant", "RUN_STAGES",
    # 6. attribution, cost
    "attribute", "attribute_bound", "describe", "count_ops",
    # 7. regions and studies
    "DEFAULT_REGION_EDGES", "PRED_SETS", "SECTION_OPTIONS", "REPORT_SECTIONS", "GLOSSARY", "PHRASES",
]
