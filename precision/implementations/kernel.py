"""The production kernel's recipe (spec section 3), every numerical guard a switch.

:func:`kernel` runs steps S1..S9 of the ops-nn SigmoidFocalLossGrad kernel
(arch35) on an emulated machine, vectorized over all elements.  Each guard
G1..G8 of spec section 4 can be switched off; a switched-off guard is replaced
by what the naive recipe does at that step, so that

* ``kernel(..., guards=ALL_GUARDS)`` is the production kernel,
* ``kernel(..., guards=NO_GUARDS)`` *is* the naive recipe
  (:func:`precision.implementations.naive.naive` calls it), and
* ``kernel(..., guards={"Gi"})`` is ``naive+Gi``, ``ALL_GUARDS - {"Gi"}`` is
  ``kernel-Gi``.

Substitutions when a guard is off (each step names the on/off forms):

====  =========================================  ==========================================
id    on (production)                            off (naive substitute)
====  =========================================  ==========================================
G1    p = x>=0 ? 1/(Exp(-|x|)+1) : 1/(Exp(|x|)+1)  p = 1/(Exp(-x)+1)  (same Div0ulp, same Exp)
G2    pF = max(p, 2^-126), qF = max(q, 2^-126)   pF = p, qF = q (no clamp)
G3    Power algo "double_float"                  Power algo "intrinsic" (exp(k*ln|a|))
G4    tile-level exp(k*Ln(base)) fallback        no fallback
G5    dpos = use ? corr : orig (threshold 1/64)  dpos = orig
G6    rhs = (oma == 1) ? pg1 : pg1*oma           rhs = pg1*oma always
G7    reciprocal-division recovery               no recovery (scaled = raw*weight*dout)
G8    fp16 store RNE (CAST_RINT)                 fp16 store RTZ (CAST_TRUNC)
====  =========================================  ==========================================

Measured consequences worth knowing (pinned in the tests): G1 selects, for
x < 0, ``1/(Exp(|x|)+1)`` with ``|x| = -x``, i.e. the very ops of
``1/(Exp(-x)+1)``, so it is a bitwise no-op on every machine model; with
gamma < -1 the clamped base ``qF = 2**-126`` (x >= 16.64) gives
``qg = inf`` and ``inf * Ln(1) = NaN`` in dpos (likewise pg and dneg for
very negative x), which leaks through the selector for both t = 0 and t = 1.

Machine ops used (see :mod:`precision.machine`): ``exp(ftz=False)`` is
``PRECISION_1ULP_FTZ_FALSE``; ``div(mode="0ulp")`` is
``PRECISION_0ULP_FTZ_FALSE``; the S5 reconstruction ``qg1 / q`` uses the
ordinary ``div(mode="default")``; ``ln(ftz=ln_ftz)`` (default False, see
:func:`kernel`); every other op is an elementwise op of the compute format.
"""

from __future__ import annotations

import math

import numpy as np

from precision.errors import ParameterError
from precision.formats import RNE, RTZ
from precision.implementations.common import (
    ALL_GUARDS,
    MAX_FLOAT_FP32,
    MIN_NORMAL_FP32,
    parse_guard_set,
    prepare_host_scalars,
    resolve_machine,
    store_output,
    validate_inputs,
    validate_mean_count,
)

__all__ = [
    "G5_DEFAULT_THRESHOLD",
    "G5_NEVER",
    "G5_ALWAYS",
    "kernel",
    "validate_g5_threshold",
    "validate_tile",
    "tile_ids",
]

# ---------------------------------------------------------------------------
# Tuning parameters of the recipe
# ---------------------------------------------------------------------------

#: The production G5 threshold: correction when |orig| <= big * 2**-6 (``0.015625f``).
G5_DEFAULT_THRESHOLD = 0.015625
#: Threshold spelling for "the cancellation test never passes" (dpos = orig, like G5 off).
G5_NEVER = "never"
#: Threshold spelling for "the cancellation test always passes" (the other G5 conditions still apply).
G5_ALWAYS = "always"


def validate_g5_threshold(threshold):
    """Return a checked G5 threshold: a float in [0, inf], or ``"never"``/``"always"``.

    ``None`` means ``"never"``; ``math.inf`` means ``"always"``.

    Raises
    ------
    ParameterError
        Negative, NaN or non-numeric thresholds.
    """
    if threshold is None or threshold == G5_NEVER:
        return G5_NEVER
    if threshold == G5_ALWAYS:
        return G5_ALWAYS
    try:
        value = float(threshold)
    except (TypeError, ValueError):
        raise ParameterError(
            f"g5_threshold={threshold!r}; expected a number >= 0, 'never' or 'always'"
        ) from None
    if math.isnan(value) or value < 0:
        raise ParameterError(f"g5_threshold={threshold!r}; expected a number >= 0, 'never' or 'always'")
    if math.isinf(value):
        return G5_ALWAYS
    return value


def validate_tile(tile):
    """Return a checked tile size: ``None`` (the whole input is one tile) or an int > 0.

    Raises
    ------
    ParameterError
        Non-integer or non-positive sizes.
    """
    if tile is None:
        return None
    if isinstance(tile, (bool, np.bool_)) or not isinstance(tile, (int, np.integer)) or int(tile) <= 0:
        raise ParameterError(f"tile={tile!r}; expected a positive int (elements per tile) or None (one tile)")
    return int(tile)


def tile_ids(count: int, tile) -> np.ndarray:
    """Tile index of each element of the flattened (row-major) input.

    Parameters
    ----------
    count : int
        ``N * C``.
    tile : int or None
        Elements per tile; None puts every element in tile 0.

    Returns
    -------
    numpy.ndarray of int64, shape [count]
    """
    if tile is None:
        return np.zeros(count, dtype=np.int64)
    return np.arange(count, dtype=np.int64) // tile


# ---------------------------------------------------------------------------
# The recipe, step by step.  Each helper takes the machine ``m`` and arrays
# in the compute dtype and returns arrays in the compute dtype.
# ---------------------------------------------------------------------------

def _sigmoid(m, x, one, zero, stable: bool):
    """S1: p = sigmoid(x) (G1 on: branch on the sign of x; off: 1/(1+exp(-x)))."""
    if stable:
        ax = m.abs(x)
        pos = m.div(one, m.add(m.exp(m.neg(ax), ftz=False), one), mode="0ulp")
        neg = m.div(one, m.add(m.exp(ax, ftz=False), one), mode="0ulp")
        return m.select(m.ge(x, zero), pos, neg)
    return m.div(one, m.add(m.exp(m.neg(x), ftz=False), one), mode="0ulp")


def _flagged_tiles(m, base_min, tile, min_normal):
    """S4 detection: per element, whether its tile's minimum base is <= MIN_NORMAL.

    ``base_min`` is ``min(pF, qF)`` per element; the tile minimum is an exact
    reduction (numpy ``minimum``, NaN propagates).
    """
    base_min = np.asarray(base_min)
    count = base_min.size
    size = count if tile is None else min(tile, count)
    starts = np.arange(0, count, size)
    tile_min = np.minimum.reduceat(base_min, starts)
    tile_flag = np.asarray(m.le(tile_min, min_normal))
    return np.repeat(tile_flag, np.diff(np.append(starts, count)))


def _clamped_power_fallback(m, base, powers, exponents, in_flagged_tile, min_normal, ln_ftz):
    """S4 for one family: r = Exp(Ln(base)*k) where the base was clamped or r <= MIN_NORMAL.

    Only elements of a tile whose minimum base is <= MIN_NORMAL are candidates
    (``in_flagged_tile``).  The hardware computes Ln and Exp for the whole
    tile and selects; here they are evaluated only where the select keeps
    them (the same bits; machine op counts then show the emulator's work).
    """
    if not in_flagged_tile.any():
        return powers
    clamped = in_flagged_tile & m.le(base, min_normal)
    needs = [clamped | (in_flagged_tile & m.le(r, min_normal)) for r in powers]
    any_need = np.flatnonzero(np.logical_or.reduce(needs))
    if any_need.size == 0:
        return powers
    lb = np.zeros(base.shape, dtype=base.dtype)
    lb[any_need] = m.ln(base[any_need], ftz=ln_ftz)
    out = []
    for r, k, need in zip(powers, exponents, needs):
        idx = np.flatnonzero(need)
        if idx.size:
            r = r.copy()
            r[idx] = m.exp(m.mul(lb[idx], k), ftz=False)
        out.append(r)
    return tuple(out)


def _positive_term(m, p, q, lp, qg, qg1, ga, a, min_normal, max_float, g5_on, threshold):
    """S5: dpos = ((qg*lp)*p)*ga - qg1*a, with the G5 cancellation correction."""
    lhs = m.mul(m.mul(m.mul(qg, lp), p), ga)
    rhs = m.mul(qg1, a)
    orig = m.sub(lhs, rhs)
    if not g5_on or threshold == G5_NEVER:
        return orig
    recon = m.div(qg1, q, mode="default")
    corr = m.sub(m.mul(m.mul(m.mul(recon, lp), p), ga), rhs)
    big = m.maximum(m.abs(lhs), m.abs(rhs))
    use = m.gt(big, min_normal) & m.gt(q, min_normal) & m.gt(qg1, min_normal) & m.le(qg1, max_float)
    if threshold != G5_ALWAYS:
        limit = m.mul(big, m.asarray(np.float32(threshold)))
        use = use & m.le(m.abs(orig), limit)
    return m.select(use, corr, orig)


def _negative_term(m, q, lq, pg, pg1, gam1, oma, oma_is_one: bool, g6_on):
    """S6: dneg = ((pg*q)*lq)*gam1 + rhs, rhs = pg1 when G6 and 1-a == 1 else pg1*oma."""
    lhs = m.mul(m.mul(m.mul(pg, q), lq), gam1)
    rhs = pg1 if (g6_on and oma_is_one) else m.mul(pg1, oma)
    return m.add(lhs, rhs)


def _scale(m, raw, weight, dout, coef, one, min_normal, zero, g7_on):
    """S8: scaled = ((raw*weight)*dout)*coef, with the G7 subnormal recovery."""
    weighted = m.mul(raw, weight if weight is not None else one)
    scaled = m.mul(weighted, dout)
    if g7_on and weight is not None:
        recover = m.lt(m.abs(weighted), min_normal) & m.gt(m.abs(raw), zero) & m.gt(m.abs(weight), zero)
        idx = np.flatnonzero(recover)
        if idx.size:
            w_recip = m.div(one, weight[idx], mode="0ulp")
            d_recip = m.div(one, dout[idx], mode="0ulp")
            precise = m.div(m.div(raw[idx], w_recip, mode="0ulp"), d_recip, mode="0ulp")
            scaled = scaled.copy()
            scaled[idx] = precise
    return m.mul(scaled, coef)


def kernel(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="mean", *,
           guards=ALL_GUARDS, g5_threshold=G5_DEFAULT_THRESHOLD, tile=None, ln_ftz=False, count=None):
    """SigmoidFocalLossGrad by the production recipe S1..S9, guards switchable.

    Parameters
    ----------
    machine : str, MachineModel or Machine
        The emulated machine (``"ieee"``, ``"npu"``, ``"npu+ftz"``, ...).  The
        recipe computes in the machine's compute format (fp32 for the
        production kernel; an fp16 machine gives the all-fp16 variants, with
        MIN_NORMAL and MAX_FLOAT rounded into fp16: 0 and inf).
    pred, target, dout, weight : numpy.ndarray, shape [N, C]
        See :func:`precision.implementations.common.validate_inputs`; weight
        may be None (absent: ``raw * 1.0f``, no G7).
    alpha, gamma : float
        Attributes, float32.
    reduction : {"mean", "sum", "none"}
    guards : iterable of str, optional
        Enabled guards, a subset of ``G1``..``G8``.  Default: all (production).
    g5_threshold : float or {"never", "always"}, optional
        G5 cancellation threshold ``tau``: the correction is used when
        ``|orig| <= RN32(big * RN32(tau))`` (and the other G5 conditions hold).
        Default 1/64 (the production ``0.015625f``).  ``None``/"never" makes the
        test fail always (same as G5 off); ``inf``/"always" makes it pass always.
    tile : int or None, optional
        G4 tile size in elements (``ubFormer``) over the flattened row-major
        input, tiles starting at element 0.  Default None: the whole input is
        one tile.  (The real tiling also splits by core block of
        ``blockFormer`` elements; with one block, or ``ubFormer`` dividing
        ``blockFormer``, the tiles are exactly these.)
    ln_ftz : bool, optional
        Ln mode of S4/S5/S6.  Default False (``PRECISION_1ULP_FTZ_FALSE``).
        The ops-nn source calls ``Reg::Ln`` in its default (INTRINSIC, flushing)
        mode; with G2 on every Ln input is >= 2**-126, so both modes agree.
    count : int or None, optional
        Element count of the mean (``coef = 1.0f / float32(count)``); default
        None: ``N*C`` of the inputs.

    Returns
    -------
    numpy.ndarray
        ``grad``, pred's dtype and shape.

    Notes
    -----
    Step by step (``m`` the machine, all ops round in the compute format):

    * S1 (G1) ``p`` as in the module table; ``q = 1 - p`` by subtraction.
    * S2 (G2) ``pF = max(p, MIN_NORMAL)``, ``qF = max(q, MIN_NORMAL)``.
    * S3 (G3) ``pg, pg1, qg, qg1 = Power(pF, g), Power(pF, g1), Power(qF, g), Power(qF, g1)``.
    * S4 (G4) per tile, if ``min(min(pF, qF)) <= MIN_NORMAL`` over the tile:
      ``r = Exp(Ln(base)*k)`` where ``base <= MIN_NORMAL or r <= MIN_NORMAL``,
      for both families.  An element's result depends on its tile neighbours.
    * S5 (G5) ``lp = Ln(pF)``; ``lhs = ((qg*lp)*p)*ga``; ``rhs = qg1*a``;
      ``orig = lhs - rhs``; ``corr = ((RN(qg1/q)*lp)*p)*ga - rhs`` (ordinary
      Div); ``dpos = corr`` iff ``|orig| <= big*tau and big > MIN_NORMAL and
      q > MIN_NORMAL and MIN_NORMAL < qg1 <= MAX_FLOAT`` with
      ``big = max(|lhs|, |rhs|)``.
    * S6 (G6) ``lq = Ln(qF)``; ``dneg = ((pg*q)*lq)*gam1 + rhs``.
    * S7 ``raw = dpos*(1-t) + dneg*t`` (NaN/inf of the unselected term leaks).
    * S8 (G7) ``scaled = ((raw*w)*dout)``; when weight is present and
      ``|raw*w| < MIN_NORMAL``, ``raw != 0``, ``w != 0``:
      ``scaled = (raw / (1/w)) / (1/dout)`` (all Div0ulp); then ``*coef``.
    * S9 (G8) fp32 pred: stored as is; fp16 pred: cast RNE (G8) or RTZ.

    Comparisons with NaN are false (a NaN ``orig`` keeps ``orig``).  The
    G4 tile minimum propagates NaN (a NaN pred disables G4 in its tile).
    """
    inputs = validate_inputs(pred, target, dout, weight, alpha, gamma, reduction)
    enabled = parse_guard_set(guards)
    threshold = validate_g5_threshold(g5_threshold)
    tile = validate_tile(tile)
    m = resolve_machine(machine)
    host = prepare_host_scalars(inputs.alpha, inputs.gamma, inputs.reduction, validate_mean_count(count, inputs))

    def scalar(v):
        return m.asarray(np.float32(v))

    one, zero = scalar(1.0), scalar(0.0)
    min_normal, max_float = m.asarray(MIN_NORMAL_FP32), m.asarray(MAX_FLOAT_FP32)
    g, g1, a, ga, gam1, oma, coef = (scalar(v) for v in
                                     (host.g, host.g1, host.a, host.ga, host.gam1, host.oma, host.coef))

    # Load: fp16 -> compute exactly; int32 target -> float (CAST_RINT).
    x = m.asarray(inputs.pred.reshape(-1))
    t = m.from_int32(inputs.target.reshape(-1))
    d = m.asarray(inputs.dout.reshape(-1))
    w = m.asarray(inputs.weight.reshape(-1)) if inputs.weight is not None else None

    with np.errstate(all="ignore"):
        # S1
        p = _sigmoid(m, x, one, zero, stable="G1" in enabled)
        q = m.sub(one, p)
        # S2
        if "G2" in enabled:
            pF, qF = m.maximum(p, min_normal), m.maximum(q, min_normal)
        else:
            pF, qF = p, q
        # S3
        algo = "double_float" if "G3" in enabled else "intrinsic"
        pg, pg1 = m.pow(pF, g, algo=algo), m.pow(pF, g1, algo=algo)
        qg, qg1 = m.pow(qF, g, algo=algo), m.pow(qF, g1, algo=algo)
        # S4
        if "G4" in enabled:
            flagged = _flagged_tiles(m, m.minimum(pF, qF), tile, min_normal)
            pg, pg1 = _clamped_power_fallback(m, pF, (pg, pg1), (g, g1), flagged, min_normal, ln_ftz)
            qg, qg1 = _clamped_power_fallback(m, qF, (qg, qg1), (g, g1), flagged, min_normal, ln_ftz)
        # S5
        lp = m.ln(pF, ftz=ln_ftz)
        dpos = _positive_term(m, p, q, lp, qg, qg1, ga, a, min_normal, max_float,
                              "G5" in enabled, threshold)
        # S6
        lq = m.ln(qF, ftz=ln_ftz)
        dneg = _negative_term(m, q, lq, pg, pg1, gam1, oma, bool(np.asarray(oma) == 1),
                              "G6" in enabled)
        # S7
        raw = m.add(m.mul(dpos, m.sub(one, t)), m.mul(dneg, t))
        # S8
        scaled = _scale(m, raw, w, d, coef, one, min_normal, zero, "G7" in enabled)
        # S9
        out = store_output(m, scaled, inputs.pred.dtype, RNE if "G8" in enabled else RTZ)
    return out.reshape(inputs.shape)
