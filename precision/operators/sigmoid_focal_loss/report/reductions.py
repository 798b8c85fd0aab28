"""The report section ``reductions``: is each of the kernel's reductions within its bound, and where does the
error of a sum come from?

Reads ``reductions.csv`` (the run stage :mod:`precision.operators.sigmoid_focal_loss.reductions`, switched on by
``[run] reductions = true``).  Its answers, each computed from that table:

- the summation's own error against its a-priori bound gamma_k, case by case (all terms are >= 0: the bound is
  gamma_k relative), and the largest share of the bound used;
- the elements' own error against the summation's, per distribution (the elements' is what no order repairs);
- the sum and mean in fp32 ulps against the exact ones, per distribution, the worst case named;
- the mean past 2^24 elements, where the host's 1/float(N) rounds twice.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from precision.products.report.answers import Answer
from precision.products.report.document import Details, Image, Para, Section, Table
from precision.products.report.findings import cite
from precision.products.report.plots import save

__all__ = ["build", "plot_errors"]

T = "reductions.csv"
QUESTION_BOUND = "Is each reduction (sum, mean) within its a-priori bound, and where does its error come from?"
_KEY = ("distribution", "gamma", "n", "cores")


def _where(r) -> dict:
    return {k: (r[k].item() if hasattr(r[k], "item") else r[k]) for k in _KEY}


def _case(r) -> str:
    return f"{r['distribution']}, gamma {r['gamma']:g}, n = {int(r['n']):,}, {int(r['cores'])} core(s)"


def plot_errors(t: pd.DataFrame, folder, cores: int) -> str | None:
    """Relative errors against n, one panel per distribution (``cores`` cores, every gamma): the summation's own
    error beside its bound gamma_k and the sequential order's, and the elements' own error."""
    rows = t[t["cores"] == cores]
    if rows.empty:
        return None
    dists = list(dict.fromkeys(rows["distribution"]))
    fig, axes = plt.subplots(1, len(dists), figsize=(4.2 * len(dists), 3.2), squeeze=False, sharey=True)
    for ax, dist in zip(axes[0], dists):
        for gamma, sub in rows[rows["distribution"] == dist].groupby("gamma"):
            sub = sub.sort_values("n")
            n = sub["n"].to_numpy(np.float64)
            floor = 2.0**-60
            ax.loglog(n, np.maximum(sub["reduction_rel"], floor), "o-", ms=3, label=f"kernel order, gamma {gamma:g}")
            ax.loglog(n, np.maximum(sub["elements_rel"], floor), "s:", ms=3, label=f"elements, gamma {gamma:g}")
            ax.loglog(n, np.maximum(sub["sequential_rel"], floor), "^--", ms=3, lw=0.8,
                      label=f"sequential order, gamma {gamma:g}")
        bound = rows[rows["distribution"] == dist].sort_values("n").drop_duplicates("n")
        ax.loglog(bound["n"], bound["bound_rel"], "k-", lw=0.8, label="bound gamma_k (kernel order)")
        ax.set_title(f"{dist}, {cores} core(s)", fontsize=8)
        ax.set_xlabel("n (elements)", fontsize=7)
        ax.tick_params(labelsize=6)
    axes[0, 0].set_ylabel("relative error of the sum", fontsize=7)
    axes[0, -1].legend(fontsize=5, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout()
    return save(fig, folder, f"reductions_{cores}_cores")


def build(ctx) -> Section:
    run = ctx.run
    section = Section("reductions", "Reductions: the kernel's sum and mean against the exact ones")
    path = run.folder / T
    if not path.is_file():
        return section
    t = pd.read_csv(path)
    if t.empty:
        return section
    section.tables[T] = t
    answers, paras = [], []
    # 1. the bound, case by case
    over = t[t["reduction_rel"] > t["bound_rel"]]
    top = t.loc[t["bound_used"].idxmax()]
    used = cite("bound_used_max", T, t, _where(top), "bound_used")
    cases = len(t)
    if over.empty:
        text = (f"Every one of the {cases:,} cases is within its a-priori bound gamma_k (k the longest chain of "
                f"fp32 additions in the kernel's order): the largest share of the bound used is {used.text}, at "
                f"{_case(top)} (kernel order as modelled from the sources; the device's lane order is inferred).")
    else:
        worst = over.loc[(over["reduction_rel"] / over["bound_rel"]).idxmax()]
        text = (f"{len(over):,} of {cases:,} cases exceed the a-priori bound gamma_k, the worst at {_case(worst)} "
                f"(relative error {worst['reduction_rel']:.3g} against {worst['bound_rel']:.3g}): the modelled "
                "order is not what the bound assumes, or the bound is wrong; a defect of the model to fix.")
    answers.append(Answer(QUESTION_BOUND, text, [used], subject="sum", short=text))
    # 2. where the error comes from, per distribution
    for dist, sub in t.groupby("distribution", sort=False):
        e = sub.loc[sub["elements_rel"].idxmax()]
        r = sub.loc[sub["reduction_rel"].idxmax()]
        s = sub.loc[sub["sum_ulp"].idxmax()] if sub["sum_ulp"].notna().any() else None
        ce = cite(f"{dist}_elements_rel", T, t, _where(e), "elements_rel")
        cr = cite(f"{dist}_reduction_rel", T, t, _where(r), "reduction_rel")
        nums = [ce, cr]
        if e["elements_rel"] > r["reduction_rel"]:
            cause = (f"the elements' own error (up to {ce.text} relative, at {_case(e)}) exceeds the summation's "
                     f"(up to {cr.text}): no summation order repairs it")
        else:
            cause = (f"the summation's error (up to {cr.text} relative, at {_case(r)}) exceeds the elements' "
                     f"(up to {ce.text})")
        worst = ""
        if s is not None:
            cs = cite(f"{dist}_sum_ulp", T, t, _where(s), "sum_ulp")
            nums.append(cs)
            worst = f"; the kernel's fp32 sum is at most {cs.text} ulp from the exact sum ({_case(s)})"
        text = f"{dist} ({len(sub):,} cases): {cause}{worst}."
        answers.append(Answer(QUESTION_BOUND, text, nums, subject=str(dist), short=text))
    # 3. the mean past 2^24
    big = t[t["n"] > 2**24]
    for _, r in big.iterrows():
        cm = cite(f"mean_ulp_{int(r['n'])}", T, t, _where(r), "mean_ulp")
        cs = cite(f"sum_ulp_{int(r['n'])}", T, t, _where(r), "sum_ulp")
        text = (f"Mean of n = {int(r['n']):,} elements (past 2^24, where the host's 1/float(N) rounds N first): "
                f"{cm.text} ulp from the exact mean, the sum {cs.text} ulp from the exact sum ({_case(r)}).")
        answers.append(Answer(QUESTION_BOUND, text, [cm, cs], subject="mean", short=text))
    section.answers = answers
    section.first = []
    paras.append(Para("Each case: n elements drawn from the distribution (pred as fp16 values, exact in fp16 and "
                      "fp32), their losses by the kernel's sum/mean element recipe (kernel_sum_path, npu, fp32), "
                      "summed in the kernel's order (chunks of rUbFactor, the i / i + P pre-add, ReduceSum's "
                      "trees, the binary-counter cache, the cores' partials) and compared with the exact sum and "
                      "mean of the exact losses. sum_ulp and mean_ulp: fp32 ulps from the exact value correctly "
                      "rounded; reduction_rel: the summation's own relative error, bound_rel its bound gamma_k; "
                      "elements_rel: the elements' own error; sequential_rel: the same elements summed left to "
                      "right."))
    shown = t[["distribution", "gamma", "n", "cores", "chunk", "sum_ulp", "mean_ulp", "reduction_rel", "bound_rel",
               "bound_used", "elements_rel", "sequential_rel", "certified"]]
    section.body = [
        *paras,
        *[Para(a.sentence) for a in answers],
        Image(plot_errors(t, ctx.plot_dir, int(t["cores"].max())),
              "Relative error of the sum against n: the kernel's order (with its bound gamma_k), the sequential "
              "order and the elements' own error (an error of 0, an exact sum, is drawn at 2^-60)"),
        Details(f"Every case ({len(t):,}; reductions.csv)", [Table(shown, T)]),
    ]
    return section
