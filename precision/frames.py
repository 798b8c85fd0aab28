"""Data frames as a few npz-storable arrays, and back (no pickle).

A frame of numeric columns is stored as one float64 matrix (every int64
count below 2**53, every bool and float, exactly), its column names and
their dtypes; a text column as a unicode array of its own.  Few arrays make
small files quick to read: a task result or a cached piece holds three
frames, not forty columns.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["frame_to_arrays", "frame_from_arrays"]


def frame_to_arrays(frame: pd.DataFrame, prefix: str) -> dict:
    """``{prefix.values, prefix.columns, prefix.dtypes, prefix.text.<name>...}`` of a frame."""
    numeric = [c for c in frame.columns if frame[c].dtype.kind in "biuf"]
    values = (np.column_stack([frame[c].to_numpy(np.float64) for c in numeric]) if numeric
              else np.empty((len(frame), 0)))
    out = {f"{prefix}.values": values, f"{prefix}.columns": np.array(numeric, dtype=str),
           f"{prefix}.dtypes": np.array([frame[c].dtype.str for c in numeric], dtype=str),
           f"{prefix}.order": np.array([str(c) for c in frame.columns], dtype=str)}
    for c in frame.columns:
        if c not in numeric:
            out[f"{prefix}.text.{c}"] = np.array([("" if v is None else str(v)) for v in frame[c]], dtype=str)
    return out


def frame_from_arrays(arrays: dict, prefix: str) -> pd.DataFrame:
    """The inverse of :func:`frame_to_arrays` (text columns come back as Python strings)."""
    values = arrays[f"{prefix}.values"]
    cols = {str(c): values[:, j].astype(np.dtype(str(t)))
            for j, (c, t) in enumerate(zip(arrays[f"{prefix}.columns"], arrays[f"{prefix}.dtypes"]))}
    for c in arrays[f"{prefix}.order"]:
        c = str(c)
        if c not in cols:
            cols[c] = np.array(arrays[f"{prefix}.text.{c}"], dtype=object)
    return pd.DataFrame({str(c): cols[str(c)] for c in arrays[f"{prefix}.order"]}, index=range(values.shape[0]))
