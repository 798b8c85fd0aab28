"""The production kernel's UB tile (``ubFormer``): the tile guard G4's fallback runs per (spec step S4).

Source: the operator's host tiling, ``loss/sigmoid_focal_loss_grad/op_host/arch35/
sigmoid_focal_loss_grad_tiling_arch35.cpp`` in hicann/ops-nn (the stored version, commit
``fe62c7f3392ab3fd267ce39b23813bc4bf79a150``), ``ComputeMultiCoreSplit`` and ``ComputeUbSplit``
(about lines 274-330; the constants ``kMinBitsPerCore = 32768``, ``kElemAlign = 512``,
``kUbAlignBytes = 256`` at lines 29-31)::

    ubAvailableBytes = AlignDown(platformUbBytes, 256)
    minElemBytes     = min(predBytes, 4, doutBytes[, weightBytes])
    perElemBytes     = 72 + 2*predBytes + doutBytes                       (no weight)
                     = 76 + 2*predBytes + doutBytes + weightBytes         (with weight)
    alignElems       = 256 / minElemBytes
    ubFormer         = min(blockFormer, AlignDown(ubAvailableBytes / perElemBytes, alignElems))

with ``blockFormer = AlignUp(ceil(dim0 / coreNum), 512)`` and ``coreNum = max(1, min(ceil(dim0 /
(32768 / minDtypeBits)), availableCoreNum))``, ``minDtypeBits`` 16 when any tensor is fp16, else 32.
So the UB term is the tile of every task large enough to fill the cores (``dim0 >= coreNum * ubFormer``,
about 190,000 elements on 64 cores); a smaller task's tile is its (smaller) per-core block.

``platformUbBytes`` is the device's UB size (``GetCoreMemSize(CoreMemType::UB)``), which the sources do
not fix: the tiling test ``tests/ut/op_host/arch35/test_sigmoid_focal_loss_grad_tiling.cpp`` runs the
function with ``platformUbBytes = 253952`` (248 KiB) and ``availableCoreNum = 64`` on a platform it
names ``Ascend950`` / ``NpuArch 3510``; that is the value taken here (:data:`UB_BYTES_ASCEND950`). Other
ops-nn arch35 tiling tests use ``ubSize = 262144`` (256 KiB), which gives tiles of 3,072 (fp32) and 3,328
(fp16) elements instead of 3,008 and 3,200 (see :func:`ub_former`): the doubt moves the tile by about 4 %.

Profiles: the toolkit's ``fp32`` and ``fp16`` profiles are pred and dout of that format with no weight
(``weight = "none"``), so their tiles are 3,008 and 3,200 elements (:data:`PRODUCTION_TILE`).
"""

from __future__ import annotations

from precision.errors import ParameterError
from precision.machine.devices import ASCEND950_CORES, ASCEND950_UB_BYTES

__all__ = ["UB_BYTES_ASCEND950", "UB_ALIGN_BYTES", "ELEM_ALIGN", "MIN_BITS_PER_CORE", "CORES_ASCEND950",
           "per_elem_bytes", "ub_former", "block_former", "task_tile", "PRODUCTION_TILE", "SOURCE"]

#: Where the formula comes from (repository, file, commit, functions).
SOURCE = ("hicann/ops-nn loss/sigmoid_focal_loss_grad/op_host/arch35/sigmoid_focal_loss_grad_tiling_arch35.cpp "
          "(commit fe62c7f), ComputeUbSplit")
#: The UB size the operator's tiling test gives its Ascend950 (arch 3510) platform, in bytes (248 KiB), and the
#: vector cores the same test gives it (precision.machine.devices).
UB_BYTES_ASCEND950 = ASCEND950_UB_BYTES
CORES_ASCEND950 = ASCEND950_CORES
#: ``kUbAlignBytes``: UB sizes and tile alignment in bytes.
UB_ALIGN_BYTES = 256
#: ``kElemAlign``: per-core blocks are a multiple of this many elements.
ELEM_ALIGN = 512
#: ``kMinBitsPerCore``: a core gets at least this many bits of the smallest dtype.
MIN_BITS_PER_CORE = 32768

_BYTES = {"fp16": 2, "fp32": 4, "float16": 2, "float32": 4}


def _bytes(dtype) -> int:
    try:
        return _BYTES[str(dtype)]
    except KeyError:
        raise ParameterError(f"dtype={dtype!r}; expected 'fp16' or 'fp32'") from None


def per_elem_bytes(pred, dout=None, weight=None) -> int:
    """UB bytes per element of a tile (``perElemBytes``): 72 + 2*pred + dout, or 76 + 2*pred + dout + weight.

    ``dout`` defaults to ``pred``'s dtype; ``weight`` None means no weight tensor.

    >>> per_elem_bytes("fp32"), per_elem_bytes("fp16"), per_elem_bytes("fp32", weight="fp32")
    (84, 78, 92)
    """
    p, d = _bytes(pred), _bytes(pred if dout is None else dout)
    return 72 + 2 * p + d if weight is None else 76 + 2 * p + d + _bytes(weight)


def ub_former(pred, ub_bytes: int = UB_BYTES_ASCEND950, dout=None, weight=None) -> int:
    """The UB bound of the tile, in elements: ``AlignDown(AlignDown(ub_bytes, 256) / perElemBytes, 256 / minElemBytes)``.

    This is ``ubFormer`` for every task big enough to fill the cores (else :func:`task_tile`).

    >>> ub_former("fp32"), ub_former("fp16")
    (3008, 3200)
    >>> ub_former("fp32", 262144), ub_former("fp16", 262144)
    (3072, 3328)
    """
    if int(ub_bytes) < UB_ALIGN_BYTES:
        raise ParameterError(f"ub_bytes={ub_bytes!r}; expected at least {UB_ALIGN_BYTES}")
    sizes = [_bytes(pred), 4, _bytes(pred if dout is None else dout)] + ([] if weight is None else [_bytes(weight)])
    align = UB_ALIGN_BYTES // min(sizes)
    available = int(ub_bytes) // UB_ALIGN_BYTES * UB_ALIGN_BYTES
    return available // per_elem_bytes(pred, dout, weight) // align * align


def block_former(dim0: int, min_dtype_bits: int, cores: int = CORES_ASCEND950) -> int:
    """Elements per core block (``blockFormer``) of a task of ``dim0`` elements.

    >>> block_former(6, 32), block_former(10**6, 32), block_former(10**6, 16)
    (512, 15872, 15872)
    """
    if dim0 <= 0 or min_dtype_bits not in (16, 32) or cores <= 0:
        raise ParameterError(f"dim0={dim0!r}, min_dtype_bits={min_dtype_bits!r}, cores={cores!r}")
    per_core = MIN_BITS_PER_CORE // min_dtype_bits
    core_num = max(1, min(-(-dim0 // per_core), cores, 65535))
    return -(-(-(-dim0 // core_num)) // ELEM_ALIGN) * ELEM_ALIGN


def task_tile(dim0: int, pred, ub_bytes: int = UB_BYTES_ASCEND950, cores: int = CORES_ASCEND950,
              dout=None, weight=None) -> int:
    """``ubFormer`` of a task of ``dim0`` elements: ``min(blockFormer, ub_former)``.

    >>> task_tile(10**6, "fp32"), task_tile(2048, "fp32"), task_tile(6, "fp16")
    (3008, 1024, 512)
    """
    fp16 = "fp16" in (str(pred), str(dout), str(weight)) or "float16" in (str(pred), str(dout), str(weight))
    return min(block_former(dim0, 16 if fp16 else 32, cores), ub_former(pred, ub_bytes, dout, weight))


#: The production tile of the toolkit's profiles (pred and dout of the format, no weight) on Ascend 950.
PRODUCTION_TILE = {"fp32": ub_former("fp32"), "fp16": ub_former("fp16")}
