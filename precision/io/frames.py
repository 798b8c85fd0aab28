"""Data frames as a few npz-storable arrays and back (no pickle), and as CSV tables.

A frame of numeric columns is stored as one float64 matrix (every int64
count below 2**53, every bool and float, exactly), its column names and
their dtypes; a text column as a unicode array of its own.  Few arrays make
small files quick to read: a task result or a cached piece holds three
frames, not forty columns.
"""

from __future__ import annotations


import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.csv as pa_csv

from precision.io.files import atomic_open

__all__ = ["frame_to_arrays", "frame_from_arrays", "columns_from_arrays", "stack_arrays", "write_csv", "hex_floats"]


def hex_floats(values) -> np.ndarray:
    """``float(v).hex()`` of each value (object array), spelled once per distinct float64 bit pattern.

    Table columns repeat few values (a witness's alpha, gamma, the preds of
    a grid); -0.0 and 0.0, and every NaN payload, keep their own spelling.

    >>> hex_floats([1.5, -0.0, 1.5, float("inf")]).tolist()
    ['0x1.8000000000000p+0', '-0x0.0p+0', '0x1.8000000000000p+0', 'inf']
    """
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.int64)
    distinct, inverse = np.unique(bits, return_inverse=True)
    text = np.array([float(v).hex() for v in distinct.view(np.float64).tolist()], dtype=object)
    return text[inverse.reshape(bits.shape)]


def frame_to_arrays(frame, prefix: str) -> dict:
    """``{prefix.values, prefix.columns, prefix.dtypes, prefix.text.<name>...}`` of a frame.

    ``frame`` is a DataFrame or a dict of equal-length arrays (its columns).
    """
    columns = {str(c): np.asarray(frame[c]) for c in frame}
    numeric = [c for c, v in columns.items() if v.dtype.kind in "biuf"]
    n = len(next(iter(columns.values()))) if columns else len(frame)
    values = (np.column_stack([columns[c].astype(np.float64) for c in numeric]) if numeric
              else np.empty((n, 0)))
    out = {f"{prefix}.values": values, f"{prefix}.columns": np.array(numeric, dtype=str),
           f"{prefix}.dtypes": np.array([columns[c].dtype.str for c in numeric], dtype=str),
           f"{prefix}.order": np.array(list(columns), dtype=str)}
    for c, v in columns.items():
        if c not in numeric:
            out[f"{prefix}.text.{c}"] = np.array([("" if x is None else str(x)) for x in v], dtype=str)
    return out


def frame_from_arrays(arrays: dict, prefix: str) -> pd.DataFrame:
    """The inverse of :func:`frame_to_arrays` (text columns come back as Python strings)."""
    return pd.DataFrame(columns_from_arrays(arrays, prefix), index=range(arrays[f"{prefix}.values"].shape[0]))


def columns_from_arrays(arrays: dict, prefix: str) -> dict:
    """The columns of :func:`frame_from_arrays`'s frame as arrays, in its order (no frame built)."""
    values = arrays[f"{prefix}.values"]
    cols = {str(c): values[:, j].astype(np.dtype(str(t)))
            for j, (c, t) in enumerate(zip(arrays[f"{prefix}.columns"], arrays[f"{prefix}.dtypes"]))}
    for c in arrays[f"{prefix}.order"]:
        c = str(c)
        if c not in cols:
            cols[c] = np.array(arrays[f"{prefix}.text.{c}"], dtype=object)
    return {str(c): cols[str(c)] for c in arrays[f"{prefix}.order"]}


def stack_arrays(parts, prefix: str, label: str, labels, hist: bool = False) -> dict:
    """Several packed frames (same numeric columns) stacked into one, each part's rows labelled.

    ``parts`` are dicts of :func:`frame_to_arrays` arrays under ``prefix``;
    the stacked frame gets the int64 column ``label`` (first) holding each
    part's entry of ``labels``.  With ``hist``, each part's ``prefix.hist``
    (rows, bins, counts: rows index the part's frame) is stacked too, its
    rows shifted to the stacked frame's, in the parts' own dtype (int32
    when they are stored so; int64 when one part's is, or when the shifted
    rows would not fit).  Equal to stacking the unpacked frames, without building
    them (the task assembly's fast path).
    """
    parts = list(parts)
    if not parts:
        out = {f"{prefix}.values": np.empty((0, 1)), f"{prefix}.columns": np.array([label], dtype=str),
               f"{prefix}.dtypes": np.array(["<i8"], dtype=str), f"{prefix}.order": np.array([label], dtype=str)}
        if hist:
            out[f"{prefix}.hist"] = np.empty((3, 0), dtype=np.int64)
        return out
    first = parts[0]
    sizes = [p[f"{prefix}.values"].shape[0] for p in parts]
    column = np.repeat(np.asarray(labels, dtype=np.float64), sizes)[:, None]
    out = {f"{prefix}.values": np.hstack([column, np.vstack([p[f"{prefix}.values"] for p in parts])]),
           f"{prefix}.columns": np.concatenate([[label], first[f"{prefix}.columns"]]).astype(str),
           f"{prefix}.dtypes": np.concatenate([["<i8"], first[f"{prefix}.dtypes"]]).astype(str),
           f"{prefix}.order": np.concatenate([[label], first[f"{prefix}.order"]]).astype(str)}
    if hist:  # filled in place: one allocation, no copy per part
        widths = [p[f"{prefix}.hist"].shape[1] for p in parts]
        dtype = np.result_type(*(p[f"{prefix}.hist"].dtype for p in parts))
        if np.iinfo(dtype).max < sum(sizes):  # the shifted rows would not fit
            dtype = np.int64
        stacked = np.empty((3, sum(widths)), dtype=dtype)
        start = 0
        for p, off, width in zip(parts, np.cumsum(sizes) - sizes, widths):
            block = stacked[:, start:start + width]
            block[...] = p[f"{prefix}.hist"]
            block[0] += off
            start += width
        out[f"{prefix}.hist"] = stacked
    return out


def write_csv(frame: pd.DataFrame, path) -> None:
    """A table as CSV, atomically: every float in its shortest exact spelling (it reads back bit for bit),
    NaN as an empty cell, text quoted (Arrow's writer: an order of magnitude faster than pandas')."""
    table = pa.Table.from_pandas(frame.reset_index(drop=True), preserve_index=False)
    with atomic_open(path, "wb") as fh:
        pa_csv.write_csv(table, fh)
