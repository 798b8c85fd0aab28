"""When the compiled passes run (on arrays of at least :data:`COMPILED_MIN_POINTS` elements) and the one
form they take their inputs in (:func:`frozen`).

The machines' (:mod:`precision.machine.npu_fused`) and the analysis' (:mod:`precision.analysis.fused`)
compiled passes equal their numpy definitions bit for bit; below this size the numpy definitions run and
the passes are never loaded (their load, about half a second per process, costs more than they save on small
arrays: the command line's single points, a small study's tasks).  The oracle's certified path
(:mod:`precision.operators.sigmoid_focal_loss_grad.oracle_fast`) is compiled at every size: a term's bits must not
depend on the batch it was computed in.
"""

import numpy as np

__all__ = ["COMPILED_MIN_POINTS", "frozen"]

#: Arrays (scores and statistics: points; histogram merges: entries) of at least this many elements take the
#: compiled passes.
COMPILED_MIN_POINTS = 1 << 14


def frozen(a, dtype=None) -> np.ndarray:
    """``a`` as a C-contiguous read-only array (a view when it is one already): every compiled pass takes its
    inputs in this one form, so each is compiled once per dtype (numba tells read-only arrays from writable
    ones)."""
    view = np.ascontiguousarray(a, dtype=dtype).view()
    view.flags.writeable = False
    return view
