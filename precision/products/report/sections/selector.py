"""Statistics per selector and region: the finest table a reviewer usually needs, folded away."""

from __future__ import annotations

from precision.products.report.document import Details, Para, Section, Table
from precision.products.report.tables import inputs_text, stat_table
from precision.analysis.scoring import SPECIAL_CLASSES

__all__ = ["build"]

T = "by_selector.csv"


def build(ctx) -> Section:
    run = ctx.run
    t = stat_table(run, ["variant", "machine", "format", "profile", "target", "region"])
    section = Section("selector", "Per selector and region")
    section.tables[T] = t
    shown = t.assign(inputs=[inputs_text(r, "finite_witness_", attributes=run.operator.ATTRIBUTES,
                                                 dout="dout" in run.operator.INPUTS) for _, r in t.iterrows()])
    shown = shown[["variant", "machine", "format", "target", "region", "count", "max_finite_ulp", "inputs", "mean_bits",
                   "share_correct", "not_correct", "over_1ulp", *SPECIAL_CLASSES]]
    section.body = [Para(f"{len(t):,} rows: every statistic per variant, machine, format, selector and pred region "
                         f"(by_selector.csv also has the max over every output with its witness, and quantiles)."),
                    Details("The table", [Table(shown, T)])]
    return section
