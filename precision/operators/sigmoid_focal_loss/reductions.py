"""The run stage ``reductions``: the kernel's sum and mean against the exact ones, beside their a-priori bound.

For each input distribution, gamma, size n and core count (:data:`CASES`), the stage draws n elements (pred as
fp16 values, so inputs are exact in fp16 and fp32; a binary target), computes the per-element losses with the
kernel's sum/mean element recipe (``kernel_sum_path``, fp32 inputs, on the production machine model ``npu``),
reduces them in the kernel's order (:func:`.reduction.kernel_sum`, chunks of the production ``rUbFactor``,
:func:`production_chunk`) and compares, with everything exact:

``sum_ulp``, ``mean_ulp``
    the kernel's fp32 sum and mean against the exact sum and mean of the exact losses, correctly rounded to fp32
    (ordinal distance, so ulps of fp32); ``certified`` False where the rounding of the exact value is not decided
    by its bound (its ulp columns then NaN);
``reduction_rel``, ``bound_rel``, ``bound_used``
    the summation's own relative error: the kernel's sum against the exact sum of the fp32 elements it adds,
    against the a-priori bound gamma_k (k = :func:`.reduction.kernel_depth`, the longest chain of additions;
    all terms are >= 0, so sum|x_i| / |sum x_i| = 1 and the relative bound is gamma_k itself), and the share of
    the bound used;
``elements_rel``
    the elements' own error: the exact sum of the kernel's fp32 elements against the exact sum of the exact
    losses (what no summation order can repair);
``sequential_rel``
    the same elements summed left to right in fp32, for comparison (bound gamma_(n-1)).

The exact losses come from the operator's oracle (term tables per gamma over the distinct preds, certified
derivation): each within 2^-60 relative of the exact loss, so their sum is too (nonnegative terms), and the
fp32 rounding of the exact sum and mean is decided when the interval of that width rounds to one value.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd

from precision.engine.operators import RunStage
from precision.exact.formats import ordinal_distance
from precision.machine.devices import ASCEND950_CORES, ASCEND950_UB_BYTES
from precision.operators.sigmoid_focal_loss import oracle, reduction
from precision.operators.sigmoid_focal_loss.variants import evaluate

__all__ = ["production_chunk", "CASES", "DISTRIBUTIONS", "COLUMNS", "reduction_rows", "reductions_stage",
           "RUN_STAGES"]

#: The kernel's UB bytes reserved for the reduction's binary-counter cache (``REDUCTION_CACHE_BYTES``) and the
#: UB bytes per reduced element (``bytesPerR = 3 max(dtype, 4) + 2 * 4``), from hicann/ops-nn
#: ``loss/sigmoid_focal_loss/op_kernel/arch35/sigmoid_focal_loss_tiling_data.h`` and
#: ``op_host/arch35/sigmoid_focal_loss_tiling.cpp`` (commit 5e77af7f).
CACHE_BYTES, BYTES_PER_ELEMENT, BLOCK_BYTES = 16 * 1024, 20, 32


def production_chunk(n: int, dtype_bytes: int = 4, ub_bytes: int = ASCEND950_UB_BYTES) -> int:
    """``rUbFactor``: the elements per chunk of the reduction, as the host's tiling computes it for n elements
    (``min(n, rMax)`` aligned down to a 32-byte block when the input does not fit one chunk).

    Examples
    --------
    >>> production_chunk(1000), production_chunk(10**6), production_chunk(10**6, dtype_bytes=2)
    (1000, 11872, 11872)
    """
    r_max = (ub_bytes - CACHE_BYTES - dtype_bytes) // BYTES_PER_ELEMENT
    block = BLOCK_BYTES // dtype_bytes
    return n if n <= r_max else r_max // block * block


#: Input distributions: name -> (what it is, draw(rng, n) -> (pred, target)).
DISTRIBUTIONS = {
    "balanced": ("pred ~ N(0, 3^2), target ~ Bernoulli(1/2)",
                 lambda rng, n: (rng.normal(0.0, 3.0, n), rng.integers(0, 2, n))),
    "confident": ("right and confident: target ~ Bernoulli(1/2), pred = (2 target - 1) U(4, 16)",
                  lambda rng, n: _confident(rng, n)),
    "detector": ("1 % positives, pred ~ N(2, 2^2); negatives pred ~ N(-5, 2^2)",
                 lambda rng, n: _detector(rng, n)),
}


def _confident(rng, n):
    t = rng.integers(0, 2, n)
    return (2 * t - 1) * rng.uniform(4.0, 16.0, n), t


def _detector(rng, n):
    t = (rng.random(n) < 0.01).astype(np.int64)
    return np.where(t == 1, rng.normal(2.0, 2.0, n), rng.normal(-5.0, 2.0, n)), t


_SIZES = (1, 2, 3, 8, 9, 1000, 11871, 11872, 11873, 2 * 11872 + 1, 4 * 11872 + 1, 2**20 + 1)
#: The cases: (distribution, gamma, n, cores).  Sizes: 1, 2, 3, the block edges 8 and 9, a chunk boundary
#: (production_chunk: 11,872 fp32 elements) and its neighbours, 2 and 4 chunks + 1 and 2^20 + 1, on one core
#: and on the Ascend 950's 64; and 2^24 + 1, where the host's 1/float(N) rounds twice.
CASES = tuple([(d, g, n, c) for d in DISTRIBUTIONS for g in (2.0, 2.5) for n in _SIZES for c in (1, ASCEND950_CORES)]
              + [("balanced", 2.5, 2**24 + 1, ASCEND950_CORES)])
COLUMNS = ("distribution", "gamma", "n", "cores", "chunk", "sum", "exact_sum", "sum_ulp", "mean", "exact_mean",
           "mean_ulp", "certified", "reduction_rel", "depth", "bound_rel", "bound_used", "elements_rel",
           "sequential_rel")


def _fp16_values(x) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float16).astype(np.float64)


def _rounded(exact: Fraction) -> float:
    """exact (within :data:`.oracle.REDUCTION_REL`) correctly rounded to fp32, or NaN when its bound straddles a
    rounding edge."""
    rounded = oracle.round_within(exact, oracle.REDUCTION_REL, "fp32")
    return math.nan if rounded is None else rounded


def _ulps(computed: float, exact_rounded: float) -> float:
    if math.isnan(exact_rounded):
        return math.nan
    return float(ordinal_distance(np.array([computed], np.float32), np.array([exact_rounded], np.float32), "fp32")[0])


def _rel(a, b: Fraction) -> float:
    return float(abs(Fraction(a) - b) / b) if b != 0 else (0.0 if a == 0 else math.inf)


def reduction_rows(cases=CASES, seed: int = 45, alpha: float = 0.25, machine: str = "npu") -> pd.DataFrame:
    """One row per case (module docstring's columns); the same cases and seed give the same table."""
    rows = []
    for dist, gamma, n, cores in cases:
        # the same elements for every core count of a (distribution, gamma, n): like with like
        rng = np.random.default_rng([seed, list(DISTRIBUTIONS).index(dist), int(gamma * 1024), n])
        x, t = DISTRIBUTIONS[dist][1](rng, n)
        x, t = _fp16_values(x), np.asarray(t, dtype=np.int64)
        elements = evaluate("kernel_sum_path", x.astype(np.float32).reshape(1, -1), t.astype(np.int32).reshape(1, -1),
                            alpha=alpha, gamma=gamma, machine=machine).ravel()
        exact = oracle.exact_reduction(x, t, alpha, gamma)
        own = reduction.exact_sum(elements)
        chunk = production_chunk(n)
        total = reduction.kernel_sum(elements, chunk, cores)
        mean = reduction.kernel_mean(elements, chunk, cores)
        depth = reduction.kernel_depth(n, chunk, cores)
        exact_sum, exact_mean = _rounded(exact), _rounded(exact / n)
        u = 2.0**-24
        bound = depth * u / (1 - depth * u)
        reduction_rel = _rel(float(total), own)
        rows.append({
            "distribution": dist, "gamma": gamma, "n": n, "cores": cores, "chunk": chunk,
            "sum": float(total).hex(), "exact_sum": float(exact_sum).hex(), "sum_ulp": _ulps(float(total), exact_sum),
            "mean": float(mean).hex(), "exact_mean": float(exact_mean).hex(),
            "mean_ulp": _ulps(float(mean), exact_mean),
            "certified": not (math.isnan(exact_sum) or math.isnan(exact_mean)),
            "reduction_rel": reduction_rel, "depth": depth, "bound_rel": bound,
            "bound_used": reduction_rel / bound if bound > 0 else 0.0,
            "elements_rel": _rel(own, exact) if exact != 0 else 0.0,
            "sequential_rel": _rel(float(reduction.sequential_sum(elements)), own),
        })
    return pd.DataFrame(rows, columns=list(COLUMNS))


def reductions_stage(variants) -> RunStage:
    """The stage ``reductions`` of a run (``[run] reductions = true``): the table ``reductions`` over :data:`CASES`
    (it evaluates ``kernel_sum_path`` itself, whatever the study's variants)."""
    def run(tasks, executor, pooled_regions) -> dict:
        return {"reductions": reduction_rows()}
    return RunStage("reductions", ("kernel_sum_path",), {"cases": [list(c) for c in CASES], "seed": 45}, run)


#: The stages this operator adds to a run, by the study file's switch.
RUN_STAGES = {"reductions": reductions_stage}
