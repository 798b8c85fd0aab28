"""When the compiled passes run: on arrays of at least :data:`COMPILED_MIN_POINTS` elements.

The machines' (:mod:`precision.machine.npu_fused`) and the analysis' (:mod:`precision.analysis.fused`)
compiled passes equal their numpy definitions bit for bit; below this size the numpy definitions run and
numba is never imported (its load, about half a second per process, costs more than the passes save on small
arrays: the command line's single points, a small study's tasks).
"""

__all__ = ["COMPILED_MIN_POINTS"]

#: Arrays (scores and statistics: points; histogram merges: entries) of at least this many elements take the
#: compiled passes.
COMPILED_MIN_POINTS = 1 << 14
