"""Which variants SigmoidFocalLoss's review compares point by point (besides a study's declared pairs).

``kernel_sum_path`` vs ``kernel``: the kernel's two element recipes (sum/mean against none), which should agree;
``kernel_accurate_q`` and ``kernel_log1p`` vs ``kernel``: each cause of the confident-correct region's error
alone; ``candidate`` vs ``kernel``: both; ``golden`` vs ``kernel``: the operator test's reference against the
kernel.  Each only when both variants are in the study.
"""

from __future__ import annotations

from precision.engine.operators import Comparison, unique_comparisons

__all__ = ["find_comparisons", "PAIRS"]

#: (with, without, what the pair is evidence for).
PAIRS = (("kernel_sum_path", "kernel", "the sum/mean element recipe"),
         ("kernel_accurate_q", "kernel", "the accurate 1 - p alone"),
         ("kernel_log1p", "kernel", "log1p(e) alone"),
         ("candidate", "kernel", "the candidate"),
         ("golden", "kernel", "the test golden"))


def find_comparisons(variants, declared=()) -> list:
    """The pairs of :data:`PAIRS` among ``variants``, then the declared ones, each once."""
    present = set(variants)
    out = [Comparison(a, a, b, "declared") for a, b, _ in PAIRS if a in present and b in present]
    out += [Comparison(a, a, b, "declared") for a, b in declared]
    return unique_comparisons(out)
