"""Frames as arrays and text: the hex spelling of table columns, packed frames stacked with their histograms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from precision.io.frames import frame_to_arrays, hex_floats, stack_arrays


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True), max_size=40))
def test_hex_floats_spells_each_value_as_float_hex(values):
    assert hex_floats(np.array(values, dtype=np.float64)).tolist() == [float(v).hex() for v in values]


def test_signed_zeros_and_repeats_keep_their_own_spelling():
    values = np.array([0.0, -0.0, 2.0**-1074, 0.0, -0.0, 65504.0])
    assert hex_floats(values).tolist() == ["0x0.0p+0", "-0x0.0p+0", "0x0.0000000000001p-1022", "0x0.0p+0",
                                           "-0x0.0p+0", "0x1.ffc0000000000p+15"]
    assert hex_floats(values.reshape(2, 3)).shape == (2, 3)


def _part(rows: int, entries: int, dtype, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    part = frame_to_arrays({"x": rng.random(rows)}, "s")
    part["s.hist"] = np.stack([np.sort(rng.integers(0, rows, entries)), rng.integers(0, 99, entries),
                               rng.integers(1, 9, entries)]).astype(dtype)
    return part


@pytest.mark.parametrize("dtypes, expected", [
    ((np.int32, np.int32), np.int32),  # a task's pieces, stored as int32, stay so in its chunk and the run's
    ((np.int32, np.int64), np.int64),
])
def test_stacked_histograms_shift_each_parts_rows_in_the_parts_dtype(dtypes, expected):
    parts = [_part(5, 7, dtypes[0], 1), _part(3, 4, dtypes[1], 2)]
    out = stack_arrays(parts, "s", "task", [10, 11], hist=True)
    hist = out["s.hist"]
    assert hist.dtype == expected and hist.shape == (3, 11)
    np.testing.assert_array_equal(hist[:, :7], parts[0]["s.hist"])
    np.testing.assert_array_equal(hist[0, 7:], parts[1]["s.hist"][0].astype(np.int64) + 5)
    np.testing.assert_array_equal(hist[1:, 7:], parts[1]["s.hist"][1:])
    np.testing.assert_array_equal(out["s.values"][:, 0], [10] * 5 + [11] * 3)
