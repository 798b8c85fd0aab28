"""Review reports of a run: tables, plots, findings, Markdown and HTML (``precision report``).

One module, one job: :mod:`~precision.products.report.load` reads a run folder,
:mod:`~precision.products.report.sections` holds one module per report section (its
tables, findings and blocks), :mod:`~precision.products.report.plots` draws,
:mod:`~precision.products.report.findings` defines cited sentences and
:mod:`~precision.products.report.render` assembles ``<out>/<study>/`` atomically.
The renderer (matplotlib) is imported on first use of :func:`build_report`,
so reading a study file's ``[report]`` table stays cheap.
"""

from __future__ import annotations

__all__ = ["build_report", "report_all"]


def __getattr__(name):  # PEP 562: the renderer is imported when first asked for
    if name in ("build_report", "report_all"):
        from precision.products.report import render
        return getattr(render, name)
    raise AttributeError(f"module 'precision.products.report' has no attribute {name!r}")
