"""Implementations of SigmoidFocalLossGrad, one module per family.

Every function has the signature
``f(machine, pred, target, dout, weight, alpha, gamma, reduction, **params) -> numpy.ndarray``
(grad in pred's dtype).  The variant names and the public entry point
``evaluate`` live in :mod:`precision.operators.sigmoid_focal_loss_grad.guards`.
"""

from precision.operators.sigmoid_focal_loss_grad.implementations.golden import golden
from precision.operators.sigmoid_focal_loss_grad.implementations.kernel import kernel
from precision.operators.sigmoid_focal_loss_grad.implementations.mmcv import mmcv, mmcv_fp16
from precision.operators.sigmoid_focal_loss_grad.implementations.naive import naive, naive_fp16

__all__ = ["kernel", "naive", "naive_fp16", "golden", "mmcv", "mmcv_fp16"]
