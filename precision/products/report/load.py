"""Reading a run folder (the output of ``precision run``) for a report.

A report only reads what :mod:`precision.engine.sweep` wrote (its module docstring
documents every file) and aggregates it with :mod:`precision.analysis.scoring`; it never
reruns the oracle or a variant.  The one exception is the direct q = 1 - p
table of :mod:`precision.operators.sigmoid_focal_loss_grad.report.q`, which evaluates a handful of
scalars by design.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from precision.errors import ParameterError, PrecisionError
from precision.analysis.groups import GroupStats
from precision.analysis.paired import PairedStats
from precision.engine.operators import DEFAULT_OPERATOR, get_operator
from precision.engine.sweep import load_paired, load_stats

__all__ = ["RunData", "load_run", "REQUIRED_FILES", "required_files"]

#: Files a run folder of any operator must hold for a report (see :mod:`precision.engine.sweep`).
REQUIRED_FILES = ("run.json", "summary.csv", "by_region.csv", "groups_raw.parquet", "hist.npz",
                  "comparisons.csv", "paired_raw.parquet", "paired_hist.npz", "predbins.npz", "points.parquet")


def required_files(op) -> tuple:
    """:data:`REQUIRED_FILES` and, for an operator with a terms attribute, its ``by_<term>.csv``
    (``by_gamma.csv``), in the order a run writes them."""
    term = op.TERMS_ATTRIBUTE
    return (*REQUIRED_FILES[:3], *([f"by_{term}.csv"] if term else []), *REQUIRED_FILES[3:])


def _read_csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=True, dtype={"region": str, "bracket": str})


@dataclass
class RunData:
    """The tables of one run folder, loaded once.

    Attributes
    ----------
    folder : Path
        The run folder.
    run : dict
        ``run.json``: study name, study file and its SHA-256, seed, operator, versions,
        variants, machines, region and bracket edges with their labels.
    summary, by_region, comparisons : pandas.DataFrame
        The CSV tables of the run (columns: :mod:`precision.engine.sweep`).
    by_term : pandas.DataFrame or None
        ``by_<term>.csv``, split by the operator's terms attribute (``by_gamma.csv``); None without one.
    stats : precision.analysis.groups.GroupStats
        The fine groups, for merging by any key.
    paired : precision.analysis.paired.PairedStats
        The fine paired comparisons.
    predbins : dict of numpy.ndarray
        ``predbins.npz``: ``edges``, ``variant``, ``machine``, ``profile``, ``term`` (the value of the terms
        attribute: gamma; stored under its name), ``max_ulp``.
    """

    folder: Path
    run: dict
    summary: pd.DataFrame
    by_region: pd.DataFrame
    by_term: pd.DataFrame | None
    comparisons: pd.DataFrame
    stats: GroupStats
    paired: PairedStats
    predbins: dict

    @functools.cached_property
    def grid(self) -> dict | None:
        """The grid of values besides pred the run's points take (:func:`run_grid`), read once."""
        return run_grid(self.run)

    def points(self, columns=None) -> pd.DataFrame:
        """Per-point rows of ``points.parquet`` (empty, with the columns asked for, when the study kept none)."""
        path = self.folder / "points.parquet"
        names = set(pq.read_schema(path).names)
        if columns and not set(columns) <= names:  # per_point = "none": an empty file without columns
            return pd.DataFrame(columns=columns)
        frame = pd.read_parquet(path, columns=columns) if columns else pd.read_parquet(path)
        for col in ("variant", "class"):
            if col in frame.columns:
                frame[col] = frame[col].astype(str)
        return frame

    @property
    def operator_name(self) -> str:
        """The name of the run's operator (``run.json``'s ``operator``; older runs, without it, are
        SigmoidFocalLossGrad's: :data:`~precision.engine.operators.DEFAULT_OPERATOR`)."""
        return self.run.get("operator", DEFAULT_OPERATOR)

    @property
    def operator(self) -> ModuleType:
        """The run's operator, as an object (:func:`precision.engine.operators.get_operator` of
        :attr:`operator_name`): its registry, thresholds and bracket, for the sections."""
        return get_operator(self.operator_name)

    @property
    def variants(self) -> list:
        """Variants in run order."""
        return list(self.run.get("variants") or dict.fromkeys(self.summary["variant"]))

    @property
    def machines(self) -> list:
        """Machines in study order."""
        return list(self.run.get("machines", dict.fromkeys(self.summary["machine"])))

    @property
    def regions(self) -> list:
        """Region labels in order of x (the run's edges)."""
        return list(self.run.get("regions") or dict.fromkeys(self.by_region["region"]))

    @property
    def separate(self) -> list:
        """Regions the study keeps out of the pooled comparisons (its labelled subsets)."""
        return list(self.run.get("separate", []))

    @property
    def region_edges(self) -> list:
        """The region edges (numbers) that cut the labels of :attr:`regions`."""
        return list(self.run.get("region_edges", []))

    @property
    def brackets(self) -> list:
        """Bracket band labels in order of C (``["all"]`` without bands)."""
        return list(self.run.get("brackets") or ["all"])

    @property
    def bracket_edges(self) -> list:
        return list(self.run.get("bracket_edges", []))

    @property
    def pred_kinds(self) -> list:
        """The kinds of the run's pred sets (``exhaustive``, ``stratified``, ...)."""
        return [p.get("kind") for p in self.run.get("pred_sets", [])]


def run_grid(meta: dict) -> dict | None:
    """A run's grid (:meth:`precision.engine.study.Study.grid`) from its ``run.json`` (``meta``); for a run
    folder written before run.json kept it, from its study file when that file still has the digest the run
    recorded (so it is the study that ran); None otherwise."""
    if meta.get("grid"):
        return meta["grid"]
    path = meta.get("study_file")
    if not path or not Path(path).is_file():
        return None
    from precision.engine.study import load_study
    try:
        study = load_study(path)
    except (PrecisionError, OSError):  # a file that no longer parses is not the study that ran
        return None
    return study.grid() if study.digest == meta.get("study_sha256") else None


def load_run(folder) -> RunData:
    """Load a run folder.

    Parameters
    ----------
    folder : str or Path
        A folder written by ``precision run``.

    Returns
    -------
    RunData

    Raises
    ------
    ParameterError
        The folder or one of :data:`REQUIRED_FILES` is missing (run the study first).
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise ParameterError(f"--runs: run folder {folder} does not exist; run `precision run "
                             f"studies/<study>.toml` first (or pass --runs)")
    run = json.loads((folder / "run.json").read_text()) if (folder / "run.json").is_file() else {}
    op = get_operator(run.get("operator", DEFAULT_OPERATOR))
    missing = [name for name in required_files(op) if not (folder / name).is_file()]
    if missing:
        raise ParameterError(f"run folder {folder} lacks {', '.join(missing)}; rerun `precision run` into it")
    term = op.TERMS_ATTRIBUTE
    with np.load(folder / "predbins.npz", allow_pickle=False) as p:
        predbins = {k: p[k] for k in ("edges", "variant", "machine", "profile", "max_ulp")}
        predbins["term"] = p[term or "term"]
    return RunData(folder, run, _read_csv(folder / "summary.csv"), _read_csv(folder / "by_region.csv"),
                   _read_csv(folder / f"by_{term}.csv") if term else None, _read_csv(folder / "comparisons.csv"),
                   load_stats(folder), load_paired(folder), predbins)
