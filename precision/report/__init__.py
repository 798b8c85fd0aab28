"""Review reports of a run: tables, plots, findings, Markdown and HTML (``precision report``).

One module, one job: :mod:`~precision.report.load` reads a run folder,
:mod:`~precision.report.tables` derives the tables, :mod:`~precision.report.plots`
draws them, :mod:`~precision.report.findings` writes the computed sentences and
:mod:`~precision.report.render` assembles ``reports/<study>/`` atomically.
"""

from __future__ import annotations

from pathlib import Path

from precision.errors import ParameterError
from precision.report.render import build_report

__all__ = ["build_report", "report_all", "DEFAULT_STUDIES"]

#: The studies whose reports are committed under reports/ (issue 5).
DEFAULT_STUDIES = ("guard_ablation", "cancellation_threshold", "subnormal_recovery", "q_precision")


def report_all(runs_dir="out", out_dir="reports", studies_dir="studies"):
    """Regenerate every report under ``out_dir`` (the default studies if there is none).

    A study whose run folder ``runs_dir/<study>`` is missing is run first from
    ``studies_dir/<study>.toml``.

    Yields
    ------
    (study, report folder, whether the study was run) per report.

    Raises
    ------
    ParameterError
        A report folder without a study file (nothing further is written).
    """
    from precision.study import load_study
    from precision.sweep import run_study
    out = Path(out_dir)
    names = sorted(p.name for p in out.iterdir() if p.is_dir() and not p.name.startswith(".")) if out.is_dir() \
        else []
    names = names or list(DEFAULT_STUDIES)
    for name in names:
        if not (Path(studies_dir) / f"{name}.toml").is_file():
            raise ParameterError(f"report --all: {out / name} has no study file {Path(studies_dir) / name}.toml")
    for name in names:
        ran = False
        if not (Path(runs_dir) / name / "run.json").is_file():
            run_study(load_study(Path(studies_dir) / f"{name}.toml"), Path(runs_dir) / name)
            ran = True
        yield name, build_report(name, runs_dir, out_dir), ran
