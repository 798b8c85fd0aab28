"""SigmoidFocalLoss (forward), reduction ``sum``/``mean``: the kernel's fp32 order of additions, exact sums, bounds.

Read (to learn the order; no code copied)
-----------------------------------------
* hicann/ops-nn, commit ``5e77af7f2e5ccda3b860c51194540ce2b132efc9``, ``loss/sigmoid_focal_loss/``:
  ``op_kernel/arch35/sigmoid_focal_loss_kernel.h`` (``ProcessReductionRange``, ``FindNearestPower2``,
  ``GetCacheId``, ``DoCachingVf``, ``ProcessReductionChunk`` with ``ClearHeadPadVf``/``ClearExtensionVf``,
  ``MergeReductionSlotsVf``, ``ReduceReductionSlot``, ``Phase1Process``, ``Phase2Process``, ``PostElewiseVf``),
  ``op_kernel/arch35/sigmoid_focal_loss_tiling_data.h`` (``REDUCTION_SLOT_ELEMENTS = 8``),
  ``op_host/arch35/sigmoid_focal_loss_tiling.cpp`` (``ComputeBranch4Tiling``) and ``.h``
  (``ComputeReductionScale``), ``op_kernel/arch35/sigmoid_focal_loss_empty.h`` (empty input).
* cannmirror/asc-devkit, commit ``0da921b91aeb2abdc6e8d74423b0bbe7040c3fd1``, ``impl/adv_api/detail/reduce/``:
  ``reduce_sum/reduce_sum_3510_impl.h`` (fp32 AR -> ``ReduceARImpl`` with ``ReduceType::SUM``, fp32 RA ->
  ``ReduceRAImpl``), ``reduce_common_ar_reuse_align_3510_impl.h`` (``ReduceARImpl``, ``ReduceAROverVLImpl``,
  ``ReduceAROverVLVFImpl``), ``reduce_common_ar_reuse_align_less_than_vl_3510_impl.h``
  (``ReduceARReuseSourceLessThanVL``, ``GroupReduceVf``), ``reduce_common_util_3510_impl.h``
  (``CalculateMainR``, ``BASE_FOLD = 4``), ``reduce_common_ra_reuse_align_3510_impl.h`` (``ReduceRAImpl``,
  ``ReduceRAConcatImpl``, ``ReduceRAConcatVFImpl``); and the instruction order documented in
  ``docs/zh/api/SIMD-API/基础API/Reg矢量计算/归约计算/Reduce.md`` and ``ReduceDataBlock.md``.

The order modelled by :func:`kernel_sum`
----------------------------------------
1. Chunks: ``chunk`` (rUbFactor) elements each, the last one shorter; every chunk is zero-padded to
   ``width = ceil(chunk / align) * align`` (rUbFactorAlign; ``align`` = 32-byte block / input dtype size: 8
   for fp32 inputs, 16 for fp16).  ``chunk`` larger than the input is taken as the input's length, as the host
   does (``rFactor = min(total, rMax)``).
2. Per core range of ``count`` chunks: P = ``FindNearestPower2(count)`` (the largest power of two strictly
   below ``count``; 1 for 1 or 2 chunks); chunk ``i + P`` is added element by element onto chunk ``i`` for
   ``i < count - P``; each of the P resulting rows is reduced by ReduceSum (step 3); the P row sums go
   through the binary-counter cache (``GetCacheId`` = trailing ones of ``i``, ``DoCachingVf`` adds the new sum
   to the cached levels, smallest first), which for a power-of-two P is the perfect tree over adjacent pairs:
   ``((s0 + s1) + (s2 + s3)) + ...``.
3. ReduceSum over one padded row of ``width`` fp32 values (``ReduceARImpl``, source reused):
   ``width == 8``: the data-block tree; ``width`` 16 or 24: the 8-element data blocks added one after another
   (``b1 + b0``, then ``b2 + ...``), then the data-block tree; ``32 <= width <= 64``: the 64-lane tree, lanes
   past ``width`` as 0; ``width > 64``: with ``main`` the largest power of two <= ``width``, element
   ``main + j`` is added onto element ``j``; the ``main / 64`` vectors of 64 lanes are then folded in
   consecutive groups of 16 vectors (halving tree inside a group: vector ``k + 8`` onto ``k``, then ``+4``,
   ``+2``, ``+1``) while 16 or more remain, the last 2, 4 or 8 vectors by the same halving tree, and the last
   vector by the 64-lane tree.  Lane trees (the ``ReduceSum`` / ``ReduceSumWithDataBlock`` instructions) add
   adjacent pairs: ``(l0 + l1), (l2 + l3), ...`` then adjacent pairs of those.
4. Several cores (``cores >= 2`` and at least 2 chunks: the host's group route): ``per = ceil(R / cores)``
   chunks per core, ``G = ceil(R / per)`` cores used; the kernel gives the first ``R mod G`` cores
   ``R // G + 1`` contiguous chunks and the others ``R // G``; each core reduces its range by steps 2-3 to one
   fp32 partial; core 0 reduces the G partials with ReduceSum RA (``ReduceRAConcatImpl``): partial ``main + j``
   onto partial ``j`` (``main`` the largest power of two <= G), then the halving tree.  Not sequential.
5. mean: ``kernel_sum * invRTotal`` (one fp32 multiply, ``PostElewiseVf``); ``invRTotal = 1.0f /
   (float)(N*C)`` on the host; the output cast to fp16 (RINT) is not part of :func:`kernel_mean`.

Every addition is one fp32 addition rounded to nearest even.  *Inferred* (not checked on a device): that the
vector and lane additions round to nearest even with gradual underflow (no FTZ) and no wider intermediate;
the lane order of the two reduce instructions (from asc-devkit's documentation, not from code), with masked
lanes as 0; the data-block order of ``GroupReduceVf`` (from its address arithmetic); that the kernel is built
against the asc-devkit version read.  Not modelled: the host's fallbacks from the group route to one core
(``rGroupCnt > rUbFactorAlign / 8``, the phase-2 buffer; the local cache size), which the production chunk
(thousands of elements) never triggers but a small ``chunk`` with many cores would.
Padding zeros change no value except the sign of a zero sum (``-0 + 0 = +0``).

Rounding of every returned value: fp32 results are the emulated kernel's bits; exact results are
:class:`fractions.Fraction`; bounds are floats rounded up (exact rational arithmetic, then the next float up
when the nearest float is below the exact bound).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from precision.errors import DtypeError, ParameterError, ShapeError
from precision.exact.formats import get_format

__all__ = [
    "VECTOR_LANES",
    "BLOCK_LANES",
    "MAIN_FOLD_VECTORS",
    "FP32_ALIGN",
    "MAX_PADDED_CHUNK",
    "U_FP32",
    "kernel_sum",
    "kernel_mean",
    "mean_scale",
    "sequential_sum",
    "pairwise_sum",
    "exact_sum",
    "round_exact",
    "kernel_depth",
    "tree_bound",
    "sequential_bound",
]

# ---------------------------------------------------------------------------
# Tuning and machine constants
# ---------------------------------------------------------------------------

#: fp32 lanes of one 256-byte vector register (the kernel's ``FP32_VECTOR_LENGTH``, ReduceSum's ``vlSize``).
VECTOR_LANES = 64
#: fp32 values of one 32-byte data block (``REDUCTION_SLOT_ELEMENTS``; ``ReduceSumWithDataBlock``'s group).
BLOCK_LANES = 8
#: Vectors one main fold of ReduceSum turns into one (``BASE_FOLD = 4`` halvings).
MAIN_FOLD_VECTORS = 16
#: rUbFactorAlign's alignment for fp32 inputs in elements (32-byte block / 4 bytes); fp16 inputs: 16.
FP32_ALIGN = 8
#: ReduceSum's R extent is a uint16 (``dimRAxis``): a padded chunk must stay below 2**16 elements.
MAX_PADDED_CHUNK = 2**16 - 1
#: fp32 unit roundoff (round to nearest): 2**-24.
U_FP32 = Fraction(1, 2**24)
#: exact_sum: int64 mantissas are summed in pieces of at most this many terms of one exponent; each term has
#: |m| <= 2**53 - 1, so a piece's sum is at most 2**10 * (2**53 - 1) = 2**63 - 2**10 < 2**63 - 1 (no overflow).
_EXACT_PIECE = 2**10
#: exact_sum: dtype -> (unsigned view, fraction bits, exponent bias).
_FIELDS = {np.dtype(np.float32): (np.uint32, 23, 127), np.dtype(np.float64): (np.uint64, 52, 1023)}
#: sequential_sum: elements per np.add.accumulate call (bounds the temporary to 4 MiB).
_SEQUENTIAL_BLOCK = 2**20


# ---------------------------------------------------------------------------
# Reference orders
# ---------------------------------------------------------------------------

def _as_fp32_vector(values) -> np.ndarray:
    """``values`` as a 1-D float32 array; other dtypes must hold exact fp32 values."""
    x = np.asarray(values)
    if x.ndim != 1:
        raise ShapeError(f"values has shape {x.shape}; expected a 1-D array (ravel it first)")
    if x.dtype == np.float32:
        return x
    if x.dtype.kind not in "fiu":
        raise DtypeError(f"values has dtype {x.dtype}; expected float32")
    y = x.astype(np.float32)
    if not np.array_equal(y.astype(np.float64), x.astype(np.float64), equal_nan=True):
        raise ParameterError("values are not exact fp32 values; round them first (round_to_format(values, 'fp32'))")
    return y


def sequential_sum(values) -> np.float32:
    """The fp32 sum of ``values`` left to right: ``(((x0 + x1) + x2) + ...)``, each addition rounded (RNE).

    Parameters
    ----------
    values : array_like, shape (n,)
        Exact fp32 values.  An empty input sums to +0.

    Examples
    --------
    >>> float(sequential_sum(np.array([2.0**24, 1, 1, 1], np.float32))).hex()   # each tie rounds back to 2**24
    '0x1.0000000000000p+24'
    """
    x = _as_fp32_vector(values)
    acc = np.float32(0.0) if x.size == 0 else x[0]
    with np.errstate(over="ignore", invalid="ignore"):
        for start in range(1, x.size, _SEQUENTIAL_BLOCK):
            acc = np.add.accumulate(np.concatenate(([acc], x[start:start + _SEQUENTIAL_BLOCK])))[-1]
    return np.float32(acc)


def pairwise_sum(values) -> np.float32:
    """The fp32 sum of ``values`` by the recursive halving tree (RNE): the second half is added onto the first
    half element by element (``x[j] + x[h + j]``, ``h = n // 2``), an odd last element is carried to the end of
    the next level, until one value is left: ``ceil(log2 n)`` levels.

    This is the textbook pairwise order (one chunk, no hardware lanes), a reference beside
    :func:`sequential_sum`; the kernel's own in-chunk order is :func:`kernel_sum`'s.

    Examples
    --------
    >>> float(pairwise_sum(np.array([2.0**24, 1, 1, 1], np.float32))).hex()   # (2**24 + 1) + (1 + 1)
    '0x1.0000020000000p+24'
    """
    x = _as_fp32_vector(values)
    if x.size == 0:
        return np.float32(0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        while x.size > 1:
            half = x.size // 2
            level = x[:half] + x[half:2 * half]
            x = np.concatenate((level, x[2 * half:]))
    return np.float32(x[0])


# ---------------------------------------------------------------------------
# The kernel's order (see the module docstring for the source of each step)
# ---------------------------------------------------------------------------

def _halving(x: np.ndarray) -> np.ndarray:
    """Sum over the last axis (a power of two long) by halving: ``x[..., k] + x[..., k + h]``, repeatedly."""
    while x.shape[-1] > 1:
        half = x.shape[-1] // 2
        x = x[..., :half] + x[..., half:]
    return x[..., 0]


def _adjacent(x: np.ndarray) -> np.ndarray:
    """Sum over the last axis (a power of two long) by adjacent pairs: ``x[..., 2k] + x[..., 2k + 1]``,
    repeatedly (the lane tree of the reduce instructions; also the binary-counter cache's tree)."""
    while x.shape[-1] > 1:
        x = x[..., 0::2] + x[..., 1::2]
    return x[..., 0]


def _fold_tail(x: np.ndarray) -> np.ndarray:
    """Add the elements past the largest power of two ``main`` (last axis) onto the first ones; return the
    ``main`` long head."""
    n = x.shape[-1]
    main = 1 << (n.bit_length() - 1)
    if main == n:
        return x
    head = x[..., :main].copy()
    head[..., :n - main] += x[..., main:]
    return head


def _reduce_sum_ar(rows: np.ndarray) -> np.ndarray:
    """ReduceSum<float, AR> of each row of ``rows`` (float32, shape (m, width), width a multiple of 8)."""
    m, width = rows.shape
    if width <= VECTOR_LANES:
        if width < VECTOR_LANES // 2:  # GroupReduceVf: data blocks one after another, then the data-block tree
            blocks = rows.reshape(m, -1, BLOCK_LANES)
            acc = blocks[:, 0]
            for k in range(1, blocks.shape[1]):  # at most two more blocks (width 16 or 24)
                acc = blocks[:, k] + acc
            return _adjacent(acc)
        lanes = np.zeros((m, VECTOR_LANES), np.float32)  # masked lanes count as 0
        lanes[:, :width] = rows
        return _adjacent(lanes)
    vectors = _fold_tail(rows).reshape(m, -1, VECTOR_LANES)
    while vectors.shape[1] >= MAIN_FOLD_VECTORS:  # main folds: 16 consecutive vectors into one
        groups = vectors.reshape(m, -1, MAIN_FOLD_VECTORS, VECTOR_LANES)
        vectors = _halving(np.moveaxis(groups, 2, -1))
    return _adjacent(_halving(np.moveaxis(vectors, 1, -1)))  # tail folds (1, 2, 4 or 8 vectors), then lanes


def _bisection(count: int) -> int:
    """``FindNearestPower2``: the largest power of two strictly below ``count`` (1 for 1 or 2 chunks)."""
    return 1 if count <= 2 else 1 << ((count - 1).bit_length() - 1)


def _core_partial(chunks: np.ndarray) -> np.float32:
    """One core's fp32 partial over its padded chunks (shape (count, width)): ``ProcessReductionRange``."""
    count = chunks.shape[0]
    p = _bisection(count)
    merged = chunks[:p]
    if count > p:
        merged = merged.copy()
        merged[:count - p] += chunks[p:]  # MergeReductionSlots: chunk i + P onto chunk i
    return np.float32(_adjacent(_reduce_sum_ar(merged)))  # cache tree over the P row sums


def _core_ranges(nchunks: int, cores: int) -> list:
    """(first chunk, chunk count) per core used: the host's group split and the kernel's ``Phase1Process``."""
    if cores < 2 or nchunks < 2:
        return [(0, nchunks)]
    groups = -(-nchunks // -(-nchunks // cores))
    small, big = divmod(nchunks, groups)
    counts = [small + 1] * big + [small] * (groups - big)
    starts = np.cumsum([0] + counts[:-1]).tolist()
    return list(zip(starts, counts))


def _chunk_shape(n: int, chunk: int, cores: int, align: int) -> tuple:
    """(rUbFactor, rUbFactorAlign, chunk count) for ``n`` elements, after checking the parameters."""
    for name, value in (("chunk", chunk), ("cores", cores), ("align", align)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ParameterError(f"{name}={value!r}; expected a positive integer")
    if align % BLOCK_LANES:
        raise ParameterError(f"align={align}; expected a multiple of 8 (8 for fp32 inputs, 16 for fp16)")
    factor = max(1, min(int(chunk), n))
    width = -(-factor // align) * align
    if width > MAX_PADDED_CHUNK:
        raise ParameterError(f"chunk={chunk} pads to {width} elements; ReduceSum takes at most {MAX_PADDED_CHUNK} "
                             "(use a smaller chunk)")
    return factor, width, -(-n // factor) if n else 0


def kernel_sum(values, chunk: int, cores: int = 1, *, align: int = FP32_ALIGN) -> np.float32:
    """The fp32 sum of ``values`` in the SigmoidFocalLoss kernel's order (module docstring, steps 1-4).

    Parameters
    ----------
    values : array_like, shape (n,)
        Exact fp32 values (the per-element losses).  An empty input sums to +0 (the empty-input kernel).
    chunk : int
        rUbFactor: elements per chunk (taken as ``n`` when larger).
    cores : int
        Available cores; 1 (default) is the one-core route.
    align : int
        rUbFactorAlign's alignment in elements: 8 (default, fp32 inputs) or 16 (fp16 inputs).

    Returns
    -------
    numpy.float32
        Every addition rounded to nearest even; overflow gives inf, inf - inf gives NaN.

    Examples
    --------
    >>> x = np.array([2.0**24, 1, 1, 1], np.float32)
    >>> float(kernel_sum(x, chunk=8)).hex(), float(sequential_sum(x)).hex()   # (2**24 + 1) + (1 + 1) + 0s
    ('0x1.0000020000000p+24', '0x1.0000000000000p+24')
    """
    x = _as_fp32_vector(values)
    factor, width, nchunks = _chunk_shape(x.size, chunk, cores, align)
    if nchunks == 0:
        return np.float32(0.0)
    padded = np.zeros((nchunks, width), np.float32)
    full = (nchunks - 1) * factor
    padded[:nchunks - 1, :factor] = x[:full].reshape(nchunks - 1, factor)
    padded[-1, :x.size - full] = x[full:]
    with np.errstate(over="ignore", invalid="ignore"):
        partials = np.array([_core_partial(padded[s:s + c]) for s, c in _core_ranges(nchunks, cores)], np.float32)
        return np.float32(_halving(_fold_tail(partials)))  # Phase2Process: ReduceSum RA over the partials


def mean_scale(n: int) -> np.float32:
    """The host's ``invRTotal = 1.0f / (float)(N*C)``: ``n`` rounded to fp32, then the reciprocal rounded to
    fp32 (RNE both; two roundings, so not the correctly rounded 1/n once n > 2**24 is inexact).

    ``n == 0`` gives 0, as the host's ``ComputeReductionScale`` does.

    Examples
    --------
    >>> float(mean_scale(2**24 + 1)).hex()          # float(2**24 + 1) is 2**24
    '0x1.0000000000000p-24'
    >>> round_exact(Fraction(1, 2**24 + 1), "fp32").hex()
    '0x1.fffffe0000000p-25'
    """
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise ParameterError(f"n={n!r}; expected an element count >= 0")
    if n == 0:
        return np.float32(0.0)
    as_float = round_exact(Fraction(int(n)), "fp32")
    return np.float32(round_exact(1 / Fraction(as_float), "fp32"))


def kernel_mean(values, chunk: int, cores: int = 1, *, align: int = FP32_ALIGN) -> np.float32:
    """The kernel's fp32 mean: ``kernel_sum(values, chunk, cores) * mean_scale(n)``, one fp32 multiply (RNE).

    An empty input gives NaN (the empty-input kernel).  The output cast to the input format is not applied.
    """
    x = _as_fp32_vector(values)
    if x.size == 0:
        return np.float32(np.nan)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.float32(kernel_sum(x, chunk, cores, align=align) * mean_scale(x.size))


# ---------------------------------------------------------------------------
# Exact sums and correct rounding
# ---------------------------------------------------------------------------

def exact_sum(values) -> Fraction | float:
    """The exact sum of float values (fp16, fp32 or fp64), as a Fraction.

    Each value is split, from its bits, into a signed int64 significand ``m`` (``|m| < 2**53``, the hidden bit
    included for normal values) and an exponent ``e`` (value ``m * 2**e``, subnormals included; fp16 goes
    through fp32 exactly); the values are sorted by exponent, each exponent's significands summed exactly in int64
    (pieces of :data:`_EXACT_PIECE` terms, then the pieces' 32-bit halves), and the at most 2,046 exponent sums
    combined with Python integers.

    Notes
    -----
    Non-finite input returns a float: NaN if any value is NaN or both infinities occur, else that infinity.
    A zero sum is ``Fraction(0)`` (the sign of a zero is not kept).

    Examples
    --------
    >>> exact_sum(np.array([2.0**60, 1.0, -2.0**60, 2.0**-1074])) == 1 + Fraction(1, 2**1074)
    True
    """
    x = np.asarray(values)
    if x.dtype == np.float16:
        x = x.astype(np.float32)
    if x.dtype not in _FIELDS:
        raise DtypeError(f"values has dtype {x.dtype}; expected float16, float32 or float64")
    uint, frac_bits, bias = _FIELDS[x.dtype]
    x = np.ascontiguousarray(x).ravel()
    finite = np.isfinite(x)
    if not finite.all():
        special = x[~finite]
        if np.isnan(special).any() or ((special > 0).any() and (special < 0).any()):
            return math.nan
        return float(special[0])
    if x.size == 0:
        return Fraction(0)
    bits = x.view(uint)
    biased = ((bits >> frac_bits) & ((1 << (8 * x.itemsize - 1 - frac_bits)) - 1)).astype(np.int16)
    man = (bits & ((1 << frac_bits) - 1)).astype(np.int64) | (biased > 0).astype(np.int64) << frac_bits
    man = np.where(bits >> (8 * x.itemsize - 1) != 0, -man, man)  # x = man * 2**(max(biased, 1) - bias - frac_bits)
    exp = np.maximum(biased, 1)
    order = np.argsort(exp, kind="stable")  # int16 keys: a radix sort
    exp, man = exp[order], man[order]
    starts = np.flatnonzero(np.r_[True, exp[1:] != exp[:-1]])  # first index of each exponent
    counts = -(-np.diff(np.r_[starts, x.size]) // _EXACT_PIECE)  # pieces per exponent
    firsts = np.cumsum(counts) - counts  # each exponent's first piece
    pieces = np.repeat(starts, counts) + _EXACT_PIECE * (np.arange(counts.sum()) - np.repeat(firsts, counts))
    piece_sums = np.add.reduceat(man, pieces)  # exact (see _EXACT_PIECE)
    # A piece sum is hi * 2**32 + lo with 0 <= lo < 2**32 and |hi| <= 2**31; an exponent has at most n / 2**10 + 1
    # pieces, so the sums of lo (< 2**32 * (n / 2**10 + 1)) and of hi stay below 2**63 for n < 2**40.
    lo = np.add.reduceat(piece_sums & 0xFFFFFFFF, firsts).tolist()
    hi = np.add.reduceat(piece_sums >> 32, firsts).tolist()
    exps = exp[starts].tolist()
    low = exps[0]
    total = sum(((h << 32) + l) << (e - low) for h, l, e in zip(hi, lo, exps))
    shift = low - bias - frac_bits
    return Fraction(total << shift) if shift >= 0 else Fraction(total, 1 << -shift)


def round_exact(value, fmt: str) -> float:
    """Correctly round an exact rational into ``fmt`` (``fp16``, ``bf16``, ``fp32``, ``fp64``), to nearest even.

    Parameters
    ----------
    value : Fraction, int or float
        The exact value.  A float inf or NaN (as :func:`exact_sum` returns them) is returned as it is.
    fmt : str or Format
        The target format.

    Returns
    -------
    float
        A Python float holding the format's value: gradual underflow (a value below half the smallest subnormal
        gives a signed zero), overflow to a signed inf from ``max_finite + ulp/2`` on (IEEE RNE).

    Examples
    --------
    >>> round_exact(Fraction(1, 3), "fp32").hex()
    '0x1.5555560000000p-2'
    >>> round_exact(1 + Fraction(1, 2**24), "fp32"), round_exact(1 + Fraction(3, 2**24), "fp32").hex()
    (1.0, '0x1.0000040000000p+0')
    """
    f = get_format(fmt)
    if isinstance(value, float) and (not math.isfinite(value) or value == 0):
        return value
    q = Fraction(value)
    if q == 0:
        return 0.0
    negative = q < 0
    a, b = abs(q.numerator), q.denominator
    e = a.bit_length() - b.bit_length()  # 2**e <= a/b < 2**(e + 1) after this correction
    if (a << max(-e, 0)) < (b << max(e, 0)):
        e -= 1
    qexp = max(e, f.emin) - f.prec + 1  # exponent of the ulp of a/b's binade (subnormal quantum below emin)
    if e > f.emax:
        return -math.inf if negative else math.inf
    if e < qexp - 1:  # below half the quantum: rounds to zero
        return -0.0 if negative else 0.0
    num, den = (a << -qexp, b) if qexp < 0 else (a, b << qexp)
    n, rem = divmod(num, den)
    if 2 * rem > den or (2 * rem == den and n & 1):
        n += 1
    if n.bit_length() + qexp > f.emax + 1:
        return -math.inf if negative else math.inf
    result = math.ldexp(float(n), qexp)
    return -result if negative else result


# ---------------------------------------------------------------------------
# A-priori error bounds
# ---------------------------------------------------------------------------

def _chunk_depth(width: int) -> int:
    """Additions on the longest path through ReduceSum of one padded row (step 3)."""
    lane_levels = VECTOR_LANES.bit_length() - 1
    if width <= VECTOR_LANES:
        if width < VECTOR_LANES // 2:
            return -(-width // BLOCK_LANES) - 1 + BLOCK_LANES.bit_length() - 1
        return lane_levels
    main = 1 << (width.bit_length() - 1)
    return int(width > main) + main.bit_length() - 1


def kernel_depth(n: int, chunk: int, cores: int = 1, *, align: int = FP32_ALIGN) -> int:
    """The most fp32 additions any element goes through in :func:`kernel_sum` (same parameters).

    The pre-add of chunk ``i + P`` (1 when a core has 2 or more chunks), ReduceSum's tree over the padded row
    (``ceil(log2 width)``, 6 for widths 32-64), the cache tree (``log2 P``) and core 0's tree over the G partials
    (``ceil(log2 G)``), for the largest core range.  Additions of padding zeros count (they are exact, so the
    bound is a little loose there).

    Examples
    --------
    >>> kernel_depth(40, 8), kernel_depth(80, 8, cores=4)   # 1 + 3 + 2 + 0 and 1 + 3 + 1 + 2
    (6, 7)
    """
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise ParameterError(f"n={n!r}; expected an element count >= 0")
    _, width, nchunks = _chunk_shape(n, chunk, cores, align)
    if nchunks == 0:
        return 0
    ranges = _core_ranges(nchunks, cores)
    count = max(c for _, c in ranges)
    p = _bisection(count)
    return int(count > p) + _chunk_depth(width) + p.bit_length() - 1 + (len(ranges) - 1).bit_length()


def _float_up(value: Fraction) -> float:
    """The smallest float >= ``value`` (inf when past the float64 range)."""
    try:
        r = float(value)
    except OverflowError:
        return math.inf
    return math.nextafter(r, math.inf) if Fraction(r) < value else r


def tree_bound(values, depth: int | None = None) -> float:
    """The a-priori error bound ``gamma_k * sum|x_i|`` of an fp32 summation whose elements each go through at
    most ``k = depth`` additions (``gamma_k = k u / (1 - k u)``, ``u = 2**-24``; Higham, Accuracy and Stability
    of Numerical Algorithms, 2nd ed., section 4.2).

    Parameters
    ----------
    values : array_like of float
        The summands (any float dtype).
    depth : int, optional
        ``k``; default ``ceil(log2 n)``, the pairwise tree's.  :func:`kernel_depth` gives the kernel's.

    Returns
    -------
    float
        The bound computed exactly and rounded up; inf when ``k u >= 1`` or a summand is not finite.
    """
    x = np.asarray(values)
    abs_sum = exact_sum(np.abs(x).ravel()) if x.size else Fraction(0)
    if isinstance(abs_sum, float):
        return math.inf
    k = (max(x.size, 1) - 1).bit_length() if depth is None else depth
    if k < 0:
        raise ParameterError(f"depth={depth}; expected an integer >= 0")
    ku = k * U_FP32
    if ku >= 1:
        return math.inf
    return _float_up(ku / (1 - ku) * abs_sum)


def sequential_bound(values) -> float:
    """:func:`tree_bound` with ``k = n - 1``: the bound of :func:`sequential_sum`'s order."""
    return tree_bound(values, max(np.asarray(values).size - 1, 0))
