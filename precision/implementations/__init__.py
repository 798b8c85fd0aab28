"""Implementations of SigmoidFocalLossGrad, one module per family.

Every function has the signature
``f(machine, pred, target, dout, weight, alpha, gamma, reduction, **params) -> numpy.ndarray``
(grad in pred's dtype).  The variant names and the public entry point
``evaluate`` live in :mod:`precision.guards`.
"""

from precision.implementations.golden import golden
from precision.implementations.kernel import kernel
from precision.implementations.mmcv import mmcv, mmcv_fp16
from precision.implementations.naive import naive, naive_fp16

__all__ = ["kernel", "naive", "naive_fp16", "golden", "mmcv", "mmcv_fp16"]
