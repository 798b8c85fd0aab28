"""Reading a run folder (the output of ``precision run``) for a report.

A report only reads what :mod:`precision.sweep` wrote (its module docstring
documents every file); it never reruns the oracle or a variant.  The one
exception is the direct q = 1 - p table of :mod:`precision.report.tables`,
which evaluates a handful of scalars by design.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from precision.errors import ParameterError

__all__ = ["RunData", "load_run", "REQUIRED_FILES"]

#: Files a run folder must hold for a report (see :mod:`precision.sweep`).
REQUIRED_FILES = ("run.json", "summary.csv", "by_region.csv", "by_gamma.csv", "groups_raw.csv", "hist.npz",
                  "changes.csv", "predbins.npz", "points.parquet")


@dataclass
class RunData:
    """The tables of one run folder, loaded once.

    Attributes
    ----------
    folder : Path
        The run folder.
    run : dict
        ``run.json``: study name, study file and its SHA-256, seed, versions, models.
    summary, by_region, by_gamma, groups_raw, changes : pandas.DataFrame
        The CSV tables of the run (columns: :mod:`precision.sweep`).
    hist : pandas.DataFrame
        ``hist.npz`` as columns ``group``, ``bin``, ``count``.
    predbins : dict of numpy.ndarray
        ``predbins.npz``: ``edges``, ``variant``, ``model``, ``profile``, ``gamma``, ``max_ulp``.
    """

    folder: Path
    run: dict
    summary: pd.DataFrame
    by_region: pd.DataFrame
    by_gamma: pd.DataFrame
    groups_raw: pd.DataFrame
    changes: pd.DataFrame
    hist: pd.DataFrame
    predbins: dict
    _points: pd.DataFrame | None = field(default=None, repr=False)

    def points(self, columns=None) -> pd.DataFrame:
        """Per-point rows of ``points.parquet`` (empty when the study kept none)."""
        import pyarrow.parquet as pq
        path = self.folder / "points.parquet"
        names = set(pq.read_schema(path).names)
        if columns and not set(columns) <= names:  # per_point = "none": an empty file without columns
            return pd.DataFrame(columns=columns)
        frame = pd.read_parquet(path, columns=columns) if columns else pd.read_parquet(path)
        if "variant" in frame.columns:
            frame["variant"] = frame["variant"].astype(str)
        return frame

    @property
    def variants(self) -> list:
        """Variants in run order (that of the summary table)."""
        return list(dict.fromkeys(self.summary["variant"]))

    @property
    def models(self) -> list:
        """Machine models in study order."""
        return list(self.run.get("models", dict.fromkeys(self.summary["model"])))


def _read_csv(path: Path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=True, dtype={"region": str})


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
    missing = [name for name in REQUIRED_FILES if not (folder / name).is_file()]
    if missing:
        raise ParameterError(f"run folder {folder} lacks {', '.join(missing)}; rerun `precision run` into it")
    run = json.loads((folder / "run.json").read_text())
    with np.load(folder / "hist.npz", allow_pickle=False) as h:
        hist = pd.DataFrame({k: h[k] for k in ("group", "bin", "count")})
    with np.load(folder / "predbins.npz", allow_pickle=False) as p:
        predbins = {k: p[k] for k in ("edges", "variant", "model", "profile", "gamma", "max_ulp")}
    return RunData(folder, run, _read_csv(folder / "summary.csv"), _read_csv(folder / "by_region.csv"),
                   _read_csv(folder / "by_gamma.csv"), _read_csv(folder / "groups_raw.csv"),
                   _read_csv(folder / "changes.csv"), hist, predbins)
