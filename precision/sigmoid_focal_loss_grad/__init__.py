"""SigmoidFocalLossGrad: everything specific to the operator (spec: shared/spec/sigmoid_focal_loss_grad.md).

What the operator provides to the generic layers (the checklist for a second
operator is docs/operators.md):

- inputs, attributes and their contract: :mod:`.implementations.common`
  (``validate_inputs``, the selectors, the reductions);
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
  :mod:`.comparisons`;
- step-level attribution of an error: :mod:`.attribution`; op counts:
  :mod:`.opcount`.

May import :mod:`precision.analysis`, :mod:`precision.recipes`,
:mod:`precision.machine`, :mod:`precision.exact`, :mod:`precision.io` and
:mod:`precision.errors`; the sweep engine and the products import it.
"""
