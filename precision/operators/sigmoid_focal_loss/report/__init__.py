"""SigmoidFocalLoss's own report section and words.

=============  ===============================================================
section        what it shows
=============  ===============================================================
``accuracy``   where the forward is inaccurate and why (each cause alone), the
               two element recipes, what the standards accept there
``reductions`` the kernel's sum and mean against the exact ones, beside their a-priori bound
=============  ===============================================================
"""

from __future__ import annotations

__all__ = ["SECTION_OPTIONS", "REPORT_SECTIONS", "GLOSSARY"]

SECTION_OPTIONS = {"accuracy": {}, "reductions": {}}
REPORT_SECTIONS = {name: f"precision.operators.sigmoid_focal_loss.report.{name}" for name in SECTION_OPTIONS}
GLOSSARY = {
    "confident-correct": "t = 1 and x > 0 (or t = 0 and x < 0): the prediction is right and confident, the loss is "
                         "about alpha e^(-(gamma+1)|x|), and q = 1 - p by subtraction loses its bits",
    "gamma_k": "the a-priori error factor of k chained fp32 additions, k u / (1 - k u) with u = 2^-24",
}
