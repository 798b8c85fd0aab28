"""The production kernel's recipe (spec section 3), every numerical guard a switch.

:func:`kernel` runs steps S1..S9 of the ops-nn SigmoidFocalLossGrad kernel
(arch35) on an emulated machine, vectorized over all elements.  Each guard
G1..G8 of spec section 4 can be switched off; a switched-off guard is replaced
by what the naive recipe does at that step, so that

* ``kernel(..., guards=ALL_GUARDS)`` is the production kernel,
* ``kernel(..., guards=NO_GUARDS)`` *is* the naive recipe
  (:func:`precision.operators.sigmoid_focal_loss_grad.implementations.naive.naive` calls it), and
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

The recipe is one table of named steps, :data:`KERNEL_RECIPE`
(:mod:`precision.recipes.steps`); :func:`kernel` is a thin call of it, and the same
table serves shared evaluation of variants, traces and error attribution.
The steps, in order (spec section 3 names; ``*`` marks guard rows that exist
only when the guard is on, ``=`` an alias when it is off):

* S1: ``ax nax e e1 pos ed ed1 neg x_nonneg p`` (G1; without it
  ``nx ex ex1 p``), ``q``;
* S2: ``pF qF`` (G2 clamps; ``=`` p, q);
* S3: ``pg pg1 qg qg1`` (G3 picks the Power algorithm);
* S4 (G4): ``g4_tile*``, per family ``pF_clamped* pg_need* pg1_need*
  pfam_need* pF_ln*`` and per power ``pg_lk* pg_fb*`` (computed only where
  needed) and ``pg_s4`` (the power after the fallback; ``=`` pg), likewise
  for q;
* S5: ``lp qg_lp qg_lp_p lhs_pos rhs_pos orig``, G5's ``recon* corr_lp*
  corr_lp_p* corr_lhs* corr* g5_use*``, ``dpos`` (``=`` orig);
* S6: ``lq pg_q pg_q_lq lhs_neg rhs_neg dneg``;
* S7: ``omt dpos_t dneg_t raw``;
* S8: ``weighted scaled``, G7's ``g7_use* w_recip* d_recip* raw_w*
  recovered*`` and ``scaled_g7`` (``=`` scaled), ``grad = scaled_g7 * coef``;
* S9: ``out`` (the store).

Machine ops used (see :mod:`precision.machine`): ``exp(ftz=False)`` is
``PRECISION_1ULP_FTZ_FALSE``; ``div(mode="0ulp")`` is
``PRECISION_0ULP_FTZ_FALSE``; the S5 reconstruction ``qg1 / q`` uses the
ordinary ``div(mode="default")``; ``ln(ftz=ln_ftz)`` (default False, see
:func:`kernel`); every other op is an elementwise op of the compute format.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from precision.errors import ParameterError
from precision.exact.formats import RNE, RTZ
from precision.operators.sigmoid_focal_loss_grad.implementations.common import (
    ALL_GUARDS,
    GUARD_IDS,
    MAX_FLOAT_FP32,
    MIN_NORMAL_FP32,
    load_operands,
    parse_guard_set,
    prepare_host_scalars,
    resolve_machine,
    store_output,
    validate_inputs,
    validate_mean_count,
)
from precision.recipes.steps import Recipe, RecipeCall, Step, full_value, patch, sum_cond

__all__ = [
    "G5_DEFAULT_THRESHOLD",
    "G5_NEVER",
    "G5_ALWAYS",
    "kernel",
    "KERNEL_RECIPE",
    "KERNEL_DEFAULTS",
    "KernelConstants",
    "kernel_constants",
    "kernel_config",
    "kernel_call",
    "validate_g5_threshold",
    "g5_big",
    "g5_cancels",
    "validate_tile",
    "tile_ids",
    "FIRED_STEPS",
    "FIRED_COLUMNS",
    "guard_fired",
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
# Host constants of one evaluation
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class KernelConstants:
    """The recipe's constants on the machine: host scalars and bounds in the compute format.

    Attributes
    ----------
    one, zero, min_normal, max_float : numpy scalar
        1, 0, ``MIN_NORMAL`` and ``MAX_FLOAT`` converted to the compute format
        (fp16 compute: 0 and inf for the bounds).
    g, g1, a, ga, gam1, oma, coef : numpy scalar
        The host scalars of :func:`~precision.operators.sigmoid_focal_loss_grad.implementations.common.prepare_host_scalars`
        in the compute format.
    oma_is_one : bool
        ``oma == 1`` (G6's condition).
    pred_dtype : numpy.dtype
        The output dtype (S9).
    host : HostScalars
        The float32 host values (for condition numbers).
    """

    one: np.ndarray
    zero: np.ndarray
    min_normal: np.ndarray
    max_float: np.ndarray
    g: np.ndarray
    g1: np.ndarray
    a: np.ndarray
    ga: np.ndarray
    gam1: np.ndarray
    oma: np.ndarray
    coef: np.ndarray
    oma_is_one: bool
    pred_dtype: np.dtype
    host: object


def kernel_constants(machine, inputs, count: int) -> KernelConstants:
    """Prepare the host scalars (spec section 3) for one evaluation on ``machine``."""
    m = machine
    host = prepare_host_scalars(inputs.alpha, inputs.gamma, inputs.reduction, count)

    def scalar(v):
        return m.asarray(np.float32(v))

    oma = scalar(host.oma)
    return KernelConstants(
        one=scalar(1.0), zero=scalar(0.0),
        min_normal=m.asarray(MIN_NORMAL_FP32), max_float=m.asarray(MAX_FLOAT_FP32),
        g=scalar(host.g), g1=scalar(host.g1), a=scalar(host.a), ga=scalar(host.ga), gam1=scalar(host.gam1),
        oma=oma, coef=scalar(host.coef), oma_is_one=bool(np.asarray(oma) == 1),
        pred_dtype=np.dtype(inputs.pred.dtype), host=host,
    )


# ---------------------------------------------------------------------------
# The recipe as named steps (spec section 3).  Each row: name, inputs, the
# machine op, kind, the exact quantity it stands for, the formula.  ``Q`` is
# the point's exact quantities (precision.operators.sigmoid_focal_loss_grad.attribution).
# ---------------------------------------------------------------------------

def _on(*guards):
    return lambda k: all(k[g] for g in guards)


def _off(guard):
    return lambda k: not k[guard]


def _g5_active(k):
    return k["G5"] and k["g5_threshold"] != G5_NEVER


def _pow_cond(k_attr):
    """Condition number of base**k: |k| in the base, |k ln base| in the exponent (Herbie)."""
    def cond(c, v, base):
        k = float(getattr(c.host, k_attr))
        with np.errstate(all="ignore"):
            return np.maximum(abs(k), np.abs(k * np.log(np.abs(base))))
    return cond


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


def _clamped(m, c, k, flagged, base):
    """S4: the tile is flagged and the base was clamped (None: no tile flagged, no ops)."""
    if flagged is None or not flagged.any():
        return None
    return flagged & m.le(base, c.min_normal)


def _needs(m, c, k, flagged, clamped, power):
    """S4: the fallback replaces this power (clamped base or power <= MIN_NORMAL, in a flagged tile)."""
    if clamped is None:
        return None
    return clamped | (flagged & m.le(power, c.min_normal))


def _either(m, c, k, a, b):
    """Union of two masks (None = empty); numpy, not a machine op."""
    if a is None:
        return b
    if b is None:
        return a
    return a | b


def g5_big(m, lhs, rhs):
    """S5's ``big = max(|lhs|, |rhs|)`` on machine m."""
    return m.maximum(m.abs(lhs), m.abs(rhs))


def g5_cancels(m, big, orig, threshold: float):
    """S5's cancellation test ``|orig| <= big * tau`` on machine m (the product rounded, flushed, as m does)."""
    return m.le(m.abs(orig), m.mul(big, m.asarray(np.float32(threshold))))


def _g5_use(m, c, k, lhs, rhs, orig, q, qg1):
    """S5 decision: |orig| <= big*tau and big, q, qg1 > MIN_NORMAL and qg1 <= MAX_FLOAT."""
    big = g5_big(m, lhs, rhs)
    use = m.gt(big, c.min_normal) & m.gt(q, c.min_normal) & m.gt(qg1, c.min_normal) & m.le(qg1, c.max_float)
    threshold = k["g5_threshold"]
    if threshold != G5_ALWAYS:
        use = use & g5_cancels(m, big, orig, threshold)
    return use


def _g7_use(m, c, k, weighted, raw, w):
    """S8 decision: weight present, |raw*w| < MIN_NORMAL, raw != 0 and w != 0 (None without weight)."""
    if w is None:
        return None
    return m.lt(m.abs(weighted), c.min_normal) & m.gt(m.abs(raw), c.zero) & m.gt(m.abs(w), c.zero)


def _s4_family(base: str, powers) -> list:
    """The G4 rows of one family: mask, Ln of the base where needed, Exp(Ln*k) per power."""
    fam = base[0]  # "p" or "q"
    lnq = (lambda Q: Q.lp) if fam == "p" else (lambda Q: Q.lq)
    rows = [
        Step(f"{base}_clamped", ("g4_tile", base), _clamped, "bool",
             formula=f"g4_tile and {base} <= MIN_NORMAL", reads=("G4",), when=_on("G4"), fmt="bool"),
    ]
    for power, exponent, exp_q in powers:
        rows.append(Step(f"{power}_need", ("g4_tile", f"{base}_clamped", power), _needs, "bool",
                         formula=f"{base}_clamped or (g4_tile and {power} <= MIN_NORMAL)",
                         reads=("G4",), when=_on("G4"), fmt="bool"))
    rows += [
        Step(f"{fam}fam_need", tuple(f"{p}_need" for p, _, _ in powers), _either, "bool",
             formula=" or ".join(f"{p}_need" for p, _, _ in powers), reads=("G4",), when=_on("G4"), fmt="bool"),
        Step(f"{base}_ln", (base,), lambda m, c, k, b: m.ln(b, ftz=k["ln_ftz"]), "ln", exact=lnq,
             formula=f"Ln({base})", reads=("G4", "ln_ftz"), when=_on("G4"), where=f"{fam}fam_need"),
    ]
    for power, exponent, exp_q in powers:
        kq = (lambda Q: Q.g) if exponent == "g" else (lambda Q: Q.g1)
        rows += [
            Step(f"{power}_lk", (f"{base}_ln",), lambda m, c, k, lb, e=exponent: m.mul(lb, getattr(c, e)), "mul",
                 exact=lambda Q, kq=kq, lnq=lnq: kq(Q) * lnq(Q), formula=f"{base}_ln * {exponent}",
                 reads=("G4",), when=_on("G4"), where=f"{power}_need"),
            Step(f"{power}_fb", (f"{power}_lk",), lambda m, c, k, y: m.exp(y, ftz=False), "exp", exact=exp_q,
                 formula=f"Exp({power}_lk)", reads=("G4",), when=_on("G4"), where=f"{power}_need"),
            Step(f"{power}_s4", (power, f"{power}_fb", f"{power}_need"), lambda m, c, k, r, fb, need: patch(r, fb, need),
                 "patch", exact=exp_q, formula=f"{power}_need ? {power}_fb : {power}", reads=("G4",), when=_on("G4")),
        ]
    return rows


def _steps() -> list:
    alias = lambda m, c, k, v: v  # noqa: E731
    rows = [
        # S1 (G1): stable sigmoid, or the plain 1/(1+Exp(-x))
        Step("ax", ("x",), lambda m, c, k, x: m.abs(x), "exact", exact=lambda Q: Q.ax, formula="|x|",
             reads=("G1",), when=_on("G1")),
        Step("nax", ("ax",), lambda m, c, k, ax: m.neg(ax), "exact", exact=lambda Q: -Q.ax, formula="-|x|",
             reads=("G1",), when=_on("G1")),
        Step("e", ("nax",), lambda m, c, k, y: m.exp(y, ftz=False), "exp", exact=lambda Q: Q.e,
             formula="Exp(-|x|)", reads=("G1",), when=_on("G1")),
        Step("e1", ("e",), lambda m, c, k, e: m.add(e, c.one), "add", exact=lambda Q: Q.e + 1, formula="e + 1",
             reads=("G1",), when=_on("G1"), cond=sum_cond(1.0)),
        Step("pos", ("e1",), lambda m, c, k, e1: m.div(c.one, e1, mode="0ulp"), "div",
             exact=lambda Q: 1 / (Q.e + 1), formula="Div0ulp(1, e + 1)", reads=("G1",), when=_on("G1")),
        Step("ed", ("ax",), lambda m, c, k, ax: m.exp(ax, ftz=False), "exp", exact=lambda Q: Q.ed,
             formula="Exp(|x|)", reads=("G1",), when=_on("G1")),
        Step("ed1", ("ed",), lambda m, c, k, ed: m.add(ed, c.one), "add", exact=lambda Q: Q.ed + 1,
             formula="ed + 1", reads=("G1",), when=_on("G1"), cond=sum_cond(1.0)),
        Step("neg", ("ed1",), lambda m, c, k, ed1: m.div(c.one, ed1, mode="0ulp"), "div",
             exact=lambda Q: 1 / (Q.ed + 1), formula="Div0ulp(1, ed + 1)", reads=("G1",), when=_on("G1")),
        Step("x_nonneg", ("x",), lambda m, c, k, x: m.ge(x, c.zero), "bool", formula="x >= 0",
             reads=("G1",), when=_on("G1"), fmt="bool"),
        Step("p", ("x_nonneg", "pos", "neg"), lambda m, c, k, s, a, b: m.select(s, a, b), "select",
             exact=lambda Q: Q.p, formula="x >= 0 ? pos : neg", reads=("G1",), when=_on("G1")),
        Step("nx", ("x",), lambda m, c, k, x: m.neg(x), "exact", exact=lambda Q: -Q.x, formula="-x",
             reads=("G1",), when=_off("G1")),
        Step("ex", ("nx",), lambda m, c, k, y: m.exp(y, ftz=False), "exp", exact=lambda Q: Q.enx,
             formula="Exp(-x)", reads=("G1",), when=_off("G1")),
        Step("ex1", ("ex",), lambda m, c, k, e: m.add(e, c.one), "add", exact=lambda Q: Q.enx + 1,
             formula="ex + 1", reads=("G1",), when=_off("G1"), cond=sum_cond(1.0)),
        Step("p", ("ex1",), lambda m, c, k, e1: m.div(c.one, e1, mode="0ulp"), "div", exact=lambda Q: Q.p,
             formula="Div0ulp(1, Exp(-x) + 1)", reads=("G1",), when=_off("G1")),
        Step("q", ("p",), lambda m, c, k, p: m.sub(c.one, p), "sub", exact=lambda Q: Q.q, formula="1 - p",
             cond=sum_cond(1.0)),
        # S2 (G2): log clamp
        Step("pF", ("p",), lambda m, c, k, p: m.maximum(p, c.min_normal), "clamp", exact=lambda Q: Q.p,
             formula="max(p, MIN_NORMAL)", reads=("G2",), when=_on("G2")),
        Step("qF", ("q",), lambda m, c, k, q: m.maximum(q, c.min_normal), "clamp", exact=lambda Q: Q.q,
             formula="max(q, MIN_NORMAL)", reads=("G2",), when=_on("G2")),
        Step("pF", ("p",), alias, "alias", exact=lambda Q: Q.p, formula="p (G2 off)", reads=("G2",),
             when=_off("G2")),
        Step("qF", ("q",), alias, "alias", exact=lambda Q: Q.q, formula="q (G2 off)", reads=("G2",),
             when=_off("G2")),
    ]
    # S3 (G3): the four powers
    algo = lambda k: "double_float" if k["G3"] else "intrinsic"  # noqa: E731
    for power, base, exponent, exact in (("pg", "pF", "g", lambda Q: Q.pg), ("pg1", "pF", "g1", lambda Q: Q.pg1),
                                         ("qg", "qF", "g", lambda Q: Q.qg), ("qg1", "qF", "g1", lambda Q: Q.qg1)):
        rows.append(Step(power, (base,), lambda m, c, k, b, e=exponent: m.pow(b, getattr(c, e), algo=algo(k)),
                         "pow", exact=exact, formula=f"Power({base}, {exponent})", reads=("G3",),
                         cond=_pow_cond(exponent)))
    # S4 (G4): tile-level fallback exp(k*ln(base)) for clamped bases and tiny powers
    rows.append(Step("g4_tile", ("pF", "qF"),
                     lambda m, c, k, pF, qF: _flagged_tiles(m, m.minimum(pF, qF), k["tile"], c.min_normal), "bool",
                     formula="min over the tile of min(pF, qF) <= MIN_NORMAL", reads=("G4", "tile"),
                     when=_on("G4"), fmt="bool"))
    rows += _s4_family("pF", (("pg", "g", lambda Q: Q.pg), ("pg1", "g1", lambda Q: Q.pg1)))
    rows += _s4_family("qF", (("qg", "g", lambda Q: Q.qg), ("qg1", "g1", lambda Q: Q.qg1)))
    for power, exact in (("pg", lambda Q: Q.pg), ("pg1", lambda Q: Q.pg1), ("qg", lambda Q: Q.qg),
                         ("qg1", lambda Q: Q.qg1)):
        rows.append(Step(f"{power}_s4", (power,), alias, "alias", exact=exact, formula=f"{power} (G4 off)",
                         reads=("G4",), when=_off("G4")))
    rows += [
        # S5 (G5): positive term with the cancellation correction
        Step("lp", ("pF",), lambda m, c, k, b: m.ln(b, ftz=k["ln_ftz"]), "ln", exact=lambda Q: Q.lp,
             formula="Ln(pF)", reads=("ln_ftz",)),
        Step("qg_lp", ("qg_s4", "lp"), lambda m, c, k, a, b: m.mul(a, b), "mul", exact=lambda Q: Q.qg * Q.lp,
             formula="qg * lp"),
        Step("qg_lp_p", ("qg_lp", "p"), lambda m, c, k, a, b: m.mul(a, b), "mul",
             exact=lambda Q: Q.qg * Q.lp * Q.p, formula="(qg * lp) * p"),
        Step("lhs_pos", ("qg_lp_p",), lambda m, c, k, a: m.mul(a, c.ga), "mul",
             exact=lambda Q: Q.g * Q.a * Q.qg * Q.lp * Q.p, formula="((qg * lp) * p) * ga"),
        Step("rhs_pos", ("qg1_s4",), lambda m, c, k, a: m.mul(a, c.a), "mul", exact=lambda Q: Q.a * Q.qg1,
             formula="qg1 * a"),
        Step("orig", ("lhs_pos", "rhs_pos"), lambda m, c, k, a, b: m.sub(a, b), "sub", exact=lambda Q: Q.dpos,
             formula="lhs_pos - rhs_pos"),
        Step("recon", ("qg1_s4", "q"), lambda m, c, k, a, b: m.div(a, b, mode="default"), "div",
             exact=lambda Q: Q.qg, formula="qg1 / q (ordinary Div)", reads=("G5", "g5_threshold"),
             when=_g5_active),
        Step("corr_lp", ("recon", "lp"), lambda m, c, k, a, b: m.mul(a, b), "mul", exact=lambda Q: Q.qg * Q.lp,
             formula="recon * lp", reads=("G5", "g5_threshold"), when=_g5_active),
        Step("corr_lp_p", ("corr_lp", "p"), lambda m, c, k, a, b: m.mul(a, b), "mul",
             exact=lambda Q: Q.qg * Q.lp * Q.p, formula="(recon * lp) * p", reads=("G5", "g5_threshold"),
             when=_g5_active),
        Step("corr_lhs", ("corr_lp_p",), lambda m, c, k, a: m.mul(a, c.ga), "mul",
             exact=lambda Q: Q.g * Q.a * Q.qg * Q.lp * Q.p, formula="((recon * lp) * p) * ga",
             reads=("G5", "g5_threshold"), when=_g5_active),
        Step("corr", ("corr_lhs", "rhs_pos"), lambda m, c, k, a, b: m.sub(a, b), "sub", exact=lambda Q: Q.dpos,
             formula="corr_lhs - rhs_pos", reads=("G5", "g5_threshold"), when=_g5_active),
        Step("g5_use", ("lhs_pos", "rhs_pos", "orig", "q", "qg1_s4"), _g5_use, "bool",
             formula="|orig| <= max(|lhs|, |rhs|) * tau and the range conditions", reads=("G5", "g5_threshold"),
             when=_g5_active, fmt="bool"),
        Step("dpos", ("g5_use", "corr", "orig"), lambda m, c, k, s, a, b: m.select(s, a, b), "select",
             exact=lambda Q: Q.dpos, formula="g5_use ? corr : orig", reads=("G5", "g5_threshold"), when=_g5_active),
        Step("dpos", ("orig",), alias, "alias", exact=lambda Q: Q.dpos, formula="orig (G5 off)",
             reads=("G5", "g5_threshold"), when=lambda k: not _g5_active(k)),
        # S6 (G6): negative term
        Step("lq", ("qF",), lambda m, c, k, b: m.ln(b, ftz=k["ln_ftz"]), "ln", exact=lambda Q: Q.lq,
             formula="Ln(qF)", reads=("ln_ftz",)),
        Step("pg_q", ("pg_s4", "q"), lambda m, c, k, a, b: m.mul(a, b), "mul", exact=lambda Q: Q.pg * Q.q,
             formula="pg * q"),
        Step("pg_q_lq", ("pg_q", "lq"), lambda m, c, k, a, b: m.mul(a, b), "mul",
             exact=lambda Q: Q.pg * Q.q * Q.lq, formula="(pg * q) * lq"),
        Step("lhs_neg", ("pg_q_lq",), lambda m, c, k, a: m.mul(a, c.gam1), "mul",
             exact=lambda Q: Q.g * (Q.a - 1) * Q.pg * Q.q * Q.lq, formula="((pg * q) * lq) * gam1"),
        Step("rhs_neg", ("pg1_s4",),
             lambda m, c, k, a: a if (k["G6"] and c.oma_is_one) else m.mul(a, c.oma), "mul",
             exact=lambda Q: (1 - Q.a) * Q.pg1, formula="oma == 1 ? pg1 : pg1 * oma", reads=("G6",)),
        Step("dneg", ("lhs_neg", "rhs_neg"), lambda m, c, k, a, b: m.add(a, b), "add", exact=lambda Q: Q.dneg,
             formula="lhs_neg + rhs_neg"),
        # S7: selector (NaN/inf of the unselected term leaks through 0 * inf)
        Step("omt", ("t",), lambda m, c, k, t: m.sub(c.one, t), "sub", exact=lambda Q: 1 - Q.t, formula="1 - t",
             cond=sum_cond(1.0)),
        Step("dpos_t", ("dpos", "omt"), lambda m, c, k, a, b: m.mul(a, b), "selector",
             exact=lambda Q: Q.dpos * (1 - Q.t), formula="dpos * (1 - t)"),
        Step("dneg_t", ("dneg", "t"), lambda m, c, k, a, b: m.mul(a, b), "selector", exact=lambda Q: Q.dneg * Q.t,
             formula="dneg * t"),
        Step("raw", ("dpos_t", "dneg_t"), lambda m, c, k, a, b: m.add(a, b), "add", exact=lambda Q: Q.raw,
             formula="dpos * (1 - t) + dneg * t"),
        # S8 (G7): weight, dout, subnormal recovery, coefficient
        Step("weighted", ("raw", "w"), lambda m, c, k, r, w: m.mul(r, w if w is not None else c.one), "mul",
             exact=lambda Q: Q.weighted, formula="raw * weight"),
        Step("scaled", ("weighted", "d"), lambda m, c, k, a, d: m.mul(a, d), "mul", exact=lambda Q: Q.scaled,
             formula="weighted * dout"),
        Step("g7_use", ("weighted", "raw", "w"), _g7_use, "bool",
             formula="|weighted| < MIN_NORMAL and raw != 0 and weight != 0", reads=("G7",), when=_on("G7"),
             fmt="bool"),
        Step("w_recip", ("w",), lambda m, c, k, w: m.div(c.one, w, mode="0ulp"), "div", exact=lambda Q: 1 / Q.w,
             formula="Div0ulp(1, weight)", reads=("G7",), when=_on("G7"), where="g7_use"),
        Step("d_recip", ("d",), lambda m, c, k, d: m.div(c.one, d, mode="0ulp"), "div", exact=lambda Q: 1 / Q.d,
             formula="Div0ulp(1, dout)", reads=("G7",), when=_on("G7"), where="g7_use"),
        Step("raw_w", ("raw", "w_recip"), lambda m, c, k, r, a: m.div(r, a, mode="0ulp"), "div",
             exact=lambda Q: Q.weighted, formula="Div0ulp(raw, w_recip)", reads=("G7",), when=_on("G7"),
             where="g7_use"),
        Step("recovered", ("raw_w", "d_recip"), lambda m, c, k, a, b: m.div(a, b, mode="0ulp"), "div",
             exact=lambda Q: Q.scaled, formula="Div0ulp(raw_w, d_recip)", reads=("G7",), when=_on("G7"),
             where="g7_use"),
        Step("scaled_g7", ("scaled", "recovered", "g7_use"), lambda m, c, k, a, b, s: patch(a, b, s), "patch",
             exact=lambda Q: Q.scaled, formula="g7_use ? recovered : scaled", reads=("G7",), when=_on("G7")),
        Step("scaled_g7", ("scaled",), alias, "alias", exact=lambda Q: Q.scaled, formula="scaled (G7 off)",
             reads=("G7",), when=_off("G7")),
        Step("grad", ("scaled_g7",), lambda m, c, k, a: m.mul(a, c.coef), "mul", exact=lambda Q: Q.grad,
             formula="scaled * coef"),
        # S9 (G8): store
        Step("out", ("grad",), lambda m, c, k, a: store_output(m, a, c.pred_dtype, RNE if k["G8"] else RTZ),
             "store", exact=lambda Q: Q.grad, formula="store (RNE with G8, RTZ without)", reads=("G8",),
             fmt="output"),
    ]
    return rows


#: The configuration keys of the kernel recipe and their defaults (the production kernel).
KERNEL_DEFAULTS = {**{g: True for g in GUARD_IDS}, "g5_threshold": G5_DEFAULT_THRESHOLD, "tile": None,
                   "ln_ftz": False}

#: The production recipe S1..S9 as named steps; every guard a configuration key.
KERNEL_RECIPE = Recipe("kernel", _steps(), defaults=KERNEL_DEFAULTS)


def kernel_config(guards=ALL_GUARDS, g5_threshold=G5_DEFAULT_THRESHOLD, tile=None, ln_ftz=False) -> tuple:
    """The kernel recipe's configuration for a guard set and parameters (validated).

    Raises
    ------
    ParameterError
        Unknown guard ids, a bad threshold or tile.
    """
    enabled = parse_guard_set(guards)
    threshold = validate_g5_threshold(g5_threshold)
    tile = validate_tile(tile)
    return KERNEL_RECIPE.config(**{g: g in enabled for g in GUARD_IDS}, g5_threshold=threshold, tile=tile,
                                ln_ftz=bool(ln_ftz))


def kernel_call(guards=ALL_GUARDS, g5_threshold=G5_DEFAULT_THRESHOLD, tile=None, ln_ftz=False, *,
                compute=None, fp16_only=None) -> RecipeCall:
    """The :class:`~precision.recipes.steps.RecipeCall` of a kernel-family variant."""
    return RecipeCall(KERNEL_RECIPE, kernel_config(guards, g5_threshold, tile, ln_ftz), kernel_constants,
                      compute=compute, fp16_only=fp16_only)


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
        See :func:`precision.operators.sigmoid_focal_loss_grad.implementations.common.validate_inputs`; weight
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
    The recipe is the step table :data:`KERNEL_RECIPE` (one row per named
    value; :func:`precision.operators.sigmoid_focal_loss_grad.guards.trace_variant` returns them all).  Step by
    step (``m`` the machine, all ops round in the compute format):

    * S1 (G1) ``p`` as in the module table; ``q = 1 - p`` by subtraction.
    * S2 (G2) ``pF = max(p, MIN_NORMAL)``, ``qF = max(q, MIN_NORMAL)``.
    * S3 (G3) ``pg, pg1, qg, qg1 = Power(pF, g), Power(pF, g1), Power(qF, g), Power(qF, g1)``.
    * S4 (G4) per tile, if ``min(min(pF, qF)) <= MIN_NORMAL`` over the tile:
      ``r = Exp(Ln(base)*k)`` where ``base <= MIN_NORMAL or r <= MIN_NORMAL``,
      for both families (steps ``pg_s4`` ... ``qg1_s4``).  An element's result
      depends on its tile neighbours.
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
    config = kernel_config(guards, g5_threshold, tile, ln_ftz)
    m = resolve_machine(machine)
    consts = kernel_constants(m, inputs, validate_mean_count(count, inputs))
    out = KERNEL_RECIPE.run(KERNEL_RECIPE.plan(config), m, consts, load_operands(m, inputs))
    return out.reshape(inputs.shape)


# ---------------------------------------------------------------------------
# Where each guard acts (the ``fired_gi`` counts of the sweep)
# ---------------------------------------------------------------------------

#: The steps :func:`guard_fired` reads (kept by the sweep for every kernel-family variant).
FIRED_STEPS = ("x_nonneg", "p", "q", "pF", "qF", "g4_tile", "g5_use", "g7_use", "grad", "out")
#: The group-statistics column of each guard's fired count (``fired_g4`` etc.).
FIRED_COLUMNS = {g: f"fired_{g.lower()}" for g in GUARD_IDS}
#: What a fired count counts, per guard (the report's glossary cites it).
FIRED_MEANING = {
    "G1": "x < 0: the stable sigmoid took its Exp(|x|) branch",
    "G2": "the clamp raised p or q to MIN_NORMAL (pF != p or qF != q)",
    "G3": "a power was evaluated on a base strictly between 0 and 1 by the double-float algorithm",
    "G4": "the tile was flagged (a base or power <= MIN_NORMAL in it)",
    "G5": "the cancellation test and its range conditions held (the corrected term was used)",
    "G6": "1 - alpha rounds to 1, so pg1 was used without the product",
    "G7": "a weight is given and raw*weight fell below MIN_NORMAL with raw, weight != 0",
    "G8": "the fp16 store rounded to nearest differs from truncation",
}


def _differs(a, b) -> np.ndarray:
    """Elementwise: a and b are different values (NaN equals NaN, -0 equals +0).

    Two float16 arrays are compared by their bits (numpy computes float16 compares in software): equal bits
    are equal values, and of the others only two zeros or two NaNs are equal values."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype == b.dtype == np.float16 and a.shape == b.shape:
        ua, ub = a.view(np.uint16), b.view(np.uint16)
        out = ua != ub
        idx = np.flatnonzero(out)
        ma, mb = ua.reshape(-1)[idx] & np.uint16(0x7FFF), ub.reshape(-1)[idx] & np.uint16(0x7FFF)
        out.reshape(-1)[idx[((ma | mb) == 0) | ((ma > 0x7C00) & (mb > 0x7C00))]] = False
        return out
    return ~((a == b) | (np.isnan(a) & np.isnan(b)))


#: The last few truncated re-stores of G8's count, newest first: (machine, the grad's bits, the store).
_TRUNCATED: list = []
_TRUNCATED_KEPT = 4


def _truncated_store(grad: np.ndarray, machine) -> np.ndarray:
    """``grad`` stored into float16 with truncation on ``machine`` (what G8's branch would give), kept for the
    next variant with the same grad bit for bit: the variants of one evaluation that differ only downstream
    of grad (most of the kernel family, on most tasks) each ask for it."""
    bits = grad.view(f"u{grad.dtype.itemsize}")
    for held_machine, held_bits, stored in _TRUNCATED:
        if held_machine == machine and held_bits.dtype == bits.dtype and np.array_equal(held_bits, bits):
            return stored
    stored = store_output(resolve_machine(machine), grad, np.float16, RTZ)
    _TRUNCATED[:] = [(machine, bits.copy(), stored), *_TRUNCATED[:_TRUNCATED_KEPT - 1]]
    return stored


#: The last decision masks computed, by their name and the ids of the kept step objects each came from, with
#: those objects (held: an id names its object while the entry lives): the variants of one evaluation share
#: most steps (on a task of fp16_exhaustive, 5 distinct (pF, p, qF, q) among 19 kernel-family variants), and
#: so their masks.  At most ``_DECISIONS_KEPT``, the oldest dropped first.
_DECISIONS: dict = {}
_DECISIONS_KEPT = 32


def _decision(name: str, steps: tuple, compute) -> np.ndarray:
    """The mask ``name`` computed from these very ``steps`` objects by an earlier call, else ``compute()``."""
    key = (name, *map(id, steps))
    held = _DECISIONS.get(key)
    if held is None:
        mask = compute()
        mask.flags.writeable = False  # (shared by every variant with those steps)
        held = _DECISIONS[key] = (steps, mask)
        if len(_DECISIONS) > _DECISIONS_KEPT:
            del _DECISIONS[next(iter(_DECISIONS))]
    return held[1]


@functools.lru_cache(maxsize=4)
def _filled(size: int, value: bool) -> np.ndarray:
    """A read-only mask of ``size`` elements all ``value``, the same array for the next variant (whose counts
    are then kept, :meth:`precision.analysis.groups.Grouping.count`, instead of a new array each time)."""
    mask = np.full(size, value, dtype=bool)
    mask.flags.writeable = False
    return mask


def guard_fired(steps: dict, guards, machine, alpha: float, size: int) -> dict:
    """Per guard, the elements where it acted: ``{fired_gi: bool [size]}``.

    ``steps`` are the kept values of :data:`FIRED_STEPS` (flattened as the
    recipe ran; a step the variant lacks is absent), ``guards`` the variant's
    guard set (None: not a kernel-family variant, nothing fires), ``machine``
    the machine it ran on (G8 re-stores ``grad`` with truncation on it),
    ``alpha`` the host alpha.  The meaning of each count is :data:`FIRED_MEANING`;
    a guard that is off fires nowhere.
    """
    none = _filled(size, False)  # (every mask handed out is read-only: shared by columns and variants)
    out = {column: none for column in FIRED_COLUMNS.values()}
    if guards is None:
        return out
    v = {k: np.asarray(full_value(val)).ravel() for k, val in steps.items() if val is not None}

    def decided(name, needs, compute):  # (a mask from the very step objects of an earlier call is reused)
        return _decision(name, tuple(steps[k] for k in needs), compute)
    with np.errstate(invalid="ignore"):
        if "G1" in guards and "x_nonneg" in v:
            out["fired_g1"] = decided("g1", ("x_nonneg",), lambda: v["x_nonneg"] == 0)
        if "G2" in guards and {"p", "q", "pF", "qF"} <= set(v):
            out["fired_g2"] = decided("g2", ("pF", "p", "qF", "q"),
                                      lambda: _differs(v["pF"], v["p"]) | _differs(v["qF"], v["q"]))
        if "G3" in guards and {"pF", "qF"} <= set(v):
            out["fired_g3"] = decided("g3", ("pF", "qF"), lambda: ((v["pF"] > 0) & (v["pF"] < 1))
                                      | ((v["qF"] > 0) & (v["qF"] < 1)))
        for g, step in (("G4", "g4_tile"), ("G5", "g5_use"), ("G7", "g7_use")):
            if g in guards and step in v:
                out[FIRED_COLUMNS[g]] = decided(g, (step,), lambda: v[step] == 1)
        if "G6" in guards and _g6_acts(alpha):
            out["fired_g6"] = _filled(size, True)
        if "G8" in guards and {"grad", "out"} <= set(v) and v["out"].dtype == np.float16 \
                and v["grad"].dtype != np.float16:
            out["fired_g8"] = decided(f"g8 {machine}", ("out", "grad"),
                                      lambda: _differs(v["out"], _truncated_store(v["grad"], machine)))
    return {k: m if m.shape == (size,) and not m.flags.writeable else np.broadcast_to(m, (size,))
            for k, m in out.items()}


@functools.lru_cache(maxsize=64)
def _g6_acts(alpha: float) -> bool:
    """G6 acts at every element for this host alpha (its prepared 1 - alpha is exactly 1)."""
    return prepare_host_scalars(alpha, 2.0, "none", 1).oma == 1
