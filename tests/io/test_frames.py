"""Frames as arrays and text: the hex spelling of table columns."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from precision.io.frames import hex_floats


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True), max_size=40))
def test_hex_floats_spells_each_value_as_float_hex(values):
    assert hex_floats(np.array(values, dtype=np.float64)).tolist() == [float(v).hex() for v in values]


def test_signed_zeros_and_repeats_keep_their_own_spelling():
    values = np.array([0.0, -0.0, 2.0**-1074, 0.0, -0.0, 65504.0])
    assert hex_floats(values).tolist() == ["0x0.0p+0", "-0x0.0p+0", "0x0.0000000000001p-1022", "0x0.0p+0",
                                           "-0x0.0p+0", "0x1.ffc0000000000p+15"]
    assert hex_floats(values.reshape(2, 3)).shape == (2, 3)
