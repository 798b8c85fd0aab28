"""Tests of precision/operators/sigmoid_focal_loss_grad/implementations/kernel.py: the production recipe and its guards."""

import csv
import itertools
import math
from pathlib import Path

import numpy as np
import pytest

from precision.exact.formats import FP16, RNE, RTZ, ordinal_distance, round_to_format
from precision.operators.sigmoid_focal_loss_grad.guards import evaluate, list_variants
from precision.operators.sigmoid_focal_loss_grad.implementations.common import ALL_GUARDS, GUARD_IDS, NO_GUARDS
from precision.operators.sigmoid_focal_loss_grad.implementations.kernel import kernel, tile_ids
from precision.machine import get_machine

F = np.float32
ORACLE_CSV = Path(__file__).resolve().parents[3] / "data" / "oracle_points.csv"
MODELS = ["ieee", "numpy", "npu"]
MIN_NORMAL = F(2.0**-126)
MAX_FLOAT = F(np.finfo(np.float32).max)

EXAMPLE_PRED = np.array([[-1.25, -1.0, -0.75], [-0.5, -0.25, 0.0]], np.float32)
EXAMPLE_TARGET = np.array([[0, 1, 0], [1, 0, 1]], np.int32)
EXAMPLE_DOUT = np.array([[-1.5, -1.0, -0.5], [0.0, 0.5, 1.0]], np.float32)


def same_bits(a, b):
    """Bitwise equality, any NaN equal to any NaN (payloads are not compared)."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    u = np.dtype(f"u{a.dtype.itemsize}")
    nan = np.isnan(a) & np.isnan(b)
    return (a.view(u) == b.view(u)) | nan


def assert_same_bits(got, want, context=""):
    eq = same_bits(got, want)
    if not eq.all():
        i = int(np.flatnonzero(~eq.ravel())[0])
        g, w = np.asarray(got).ravel()[i], np.asarray(want).ravel()[i]
        raise AssertionError(f"{context}: {int((~eq).sum())} of {eq.size} differ; first at {i}: "
                             f"got {float(g).hex()} want {float(w).hex()}")


def example_reference_fp32():
    rows = [r for r in csv.DictReader(line for line in ORACLE_CSV.open() if not line.startswith("#"))
            if r["case"] == "example"]
    # the file lists the example twice; keep the first six rows (they are identical)
    seen, values = set(), []
    for r in rows:
        key = (r["x"], r["t"], r["dout"])
        if key not in seen:
            seen.add(key)
            values.append(float.fromhex(r["fp32"]))
    assert len(values) == 6
    return np.array(values, np.float32).reshape(2, 3)


# ---------------------------------------------------------------------------
# The spec's reference example (section 6)
# ---------------------------------------------------------------------------

class TestReferenceExample:
    @pytest.mark.parametrize("model", MODELS)
    @pytest.mark.parametrize("variant", [name for name, _ in list_variants() if "<" not in name])
    def test_every_variant_every_model_finite(self, variant, model):
        pred_dtype = np.float16 if variant.endswith("-fp16") else np.float32  # fp16-only variants
        got = evaluate(variant, EXAMPLE_PRED.astype(pred_dtype), EXAMPLE_TARGET, EXAMPLE_DOUT,
                       np.ones((2, 3), np.float32), alpha=0.25, gamma=2.0, reduction="mean", machine=model)
        assert got.shape == (2, 3) and got.dtype == pred_dtype
        assert np.isfinite(got).all()
        assert got[1, 0] == 0  # dout = 0

    def test_kernel_ieee_within_2ulp_of_reference(self):
        ref = example_reference_fp32()
        got = evaluate("kernel", EXAMPLE_PRED, EXAMPLE_TARGET, EXAMPLE_DOUT, np.ones((2, 3), np.float32),
                       machine="ieee")
        dist = ordinal_distance(got, ref, "fp32")
        assert dist.max() <= 2, [float(v).hex() for v in got.ravel()]

    @pytest.mark.parametrize("model", MODELS)
    def test_fp16_pred_example(self, model):
        got = evaluate("kernel", EXAMPLE_PRED.astype(np.float16), EXAMPLE_TARGET, EXAMPLE_DOUT,
                       np.ones((2, 3), np.float16), machine=model)
        assert got.dtype == np.float16 and np.isfinite(got).all()
        ref16 = example_reference_fp32().astype(np.float16)  # RNE of values within 2 fp32 ulp
        assert ordinal_distance(got, ref16, "fp16").max() <= 1


# ---------------------------------------------------------------------------
# An independent scalar re-derivation of the recipe (spec section 3)
# ---------------------------------------------------------------------------

class ScalarRecipe:
    """Spec section 3 written out element by element with float32 scalars.

    +, -, *, / are numpy float32 scalar ops (IEEE RNE, gradual underflow: on
    the ieee model both Div modes are correctly rounded); Exp, Ln and Power
    are the ieee machine's, called on one element at a time, so a mismatch
    can only come from the op order or the guard logic.
    """

    def __init__(self, machine):
        self.m = machine

    def exp(self, v):
        return F(self.m.exp(np.array([v], F), ftz=False)[0])

    def ln(self, v):
        return F(self.m.ln(np.array([v], F), ftz=False)[0])

    def pow(self, b, k, algo):
        return F(self.m.pow(np.array([b], F), np.asarray(k, F), algo=algo)[0])

    def run(self, *args, **kwargs):
        with np.errstate(all="ignore"):
            return self._run(*args, **kwargs)

    def _run(self, pred, target, dout, weight, alpha, gamma, reduction, guards=ALL_GUARDS, tile=None,
             threshold=0.015625):
        one, zero = F(1), F(0)
        a, g = F(alpha), F(gamma)
        g1, ga, gam1, oma = F(g + one), F(g * a), F(g * F(a - one)), F(one - a)
        xs = [F(v) for v in np.asarray(pred).ravel()]
        n = len(xs)
        coef = one / F(n) if reduction == "mean" else one
        algo = "double_float" if "G3" in guards else "intrinsic"
        first = []
        for x in xs:
            if "G1" in guards:
                ax = abs(x)
                pos = one / F(self.exp(-ax) + one)
                neg = one / F(self.exp(ax) + one)
                p = pos if x >= zero else neg
            else:
                p = one / F(self.exp(-x) + one)
            q = F(one - p)
            pF, qF = (max(p, MIN_NORMAL), max(q, MIN_NORMAL)) if "G2" in guards else (p, q)
            pows = [self.pow(pF, g, algo), self.pow(pF, g1, algo), self.pow(qF, g, algo), self.pow(qF, g1, algo)]
            first.append((x, p, q, pF, qF, pows))
        size = n if tile is None else tile
        flagged = []
        for start in range(0, n, size):
            chunk = first[start:start + size]
            flag = min(min(e[3], e[4]) for e in chunk) <= MIN_NORMAL
            flagged += [flag] * len(chunk)
        out = []
        ts = np.asarray(target).ravel()
        ds = np.asarray(dout).ravel()
        ws = None if weight is None else np.asarray(weight).ravel()
        for i, (x, p, q, pF, qF, pows) in enumerate(first):
            pg, pg1, qg, qg1 = pows
            if "G4" in guards and flagged[i]:
                for base, (ia, ib) in ((pF, (0, 1)), (qF, (2, 3))):
                    clamped = base <= MIN_NORMAL
                    lb = self.ln(base)
                    for idx, k in ((ia, g), (ib, g1)):
                        if clamped or pows[idx] <= MIN_NORMAL:
                            pows[idx] = self.exp(F(lb * k))
                pg, pg1, qg, qg1 = pows
            lp = self.ln(pF)
            lhs = F(F(F(qg * lp) * p) * ga)
            rhs = F(qg1 * a)
            dpos = F(lhs - rhs)
            if "G5" in guards:
                recon = F(qg1 / q)
                corr = F(F(F(F(recon * lp) * p) * ga) - rhs)
                big = np.maximum(abs(lhs), abs(rhs))
                use = abs(dpos) <= F(big * F(threshold)) and big > MIN_NORMAL and q > MIN_NORMAL \
                    and qg1 > MIN_NORMAL and qg1 <= MAX_FLOAT
                dpos = corr if use else dpos
            lq = self.ln(qF)
            nl = F(F(F(pg * q) * lq) * gam1)
            nr = pg1 if ("G6" in guards and oma == one) else F(pg1 * oma)
            dneg = F(nl + nr)
            t = F(int(ts[i]))
            raw = F(F(dpos * F(one - t)) + F(dneg * t))
            w = one if ws is None else F(ws[i])
            d = F(ds[i])
            weighted = F(raw * w)
            scaled = F(weighted * d)
            if "G7" in guards and ws is not None and abs(weighted) < MIN_NORMAL and abs(raw) > 0 and abs(w) > 0:
                scaled = F(F(raw / F(one / w)) / F(one / d))
            out.append(F(scaled * coef))
        res = np.array(out, np.float32)
        if np.asarray(pred).dtype == np.float16:
            res = round_to_format(res.astype(np.float64), FP16, RNE if "G8" in guards else RTZ)
        return res.reshape(np.shape(pred))


PROFILES = list(itertools.product([np.float16, np.float32], [np.float16, np.float32],
                                  [None, np.float16, np.float32]))


def profile_id(profile):
    p, d, w = profile
    name = lambda t: "none" if t is None else np.dtype(t).name.replace("float", "f")
    return f"pred-{name(p)}_dout-{name(d)}_weight-{name(w)}"


def random_case(rng, n, pred_dtype, dout_dtype, weight_dtype):
    """n points: pred in [-120, 120] (with special values), selectors, signed log-uniform dout/weight."""
    x = rng.uniform(-120, 120, n)
    specials = np.array([0.0, -0.0, 17.0, -17.0, 88.5, -88.5, 100.0, -104.0, 16.625, 9.0, -9.0, 2.0**-20])
    k = min(n // 8, specials.size)
    x[rng.choice(n, k, replace=False)] = specials[:k]
    t = rng.choice(np.array([0, 1, 0, 1, 0, 1, 2, -1], np.int32), n)

    def magnitudes(dtype, lo):
        v = np.exp2(rng.uniform(lo, 6, n)) * rng.choice([-1.0, 1.0], n)
        v[rng.random(n) < 0.05] = 0.0
        return v.astype(dtype)

    dout = magnitudes(dout_dtype, -20 if dout_dtype == np.float16 else -60)
    weight = None if weight_dtype is None else magnitudes(weight_dtype, -24 if weight_dtype == np.float16 else -140)
    return x.astype(pred_dtype).reshape(-1, 4), t.reshape(-1, 4), dout.reshape(-1, 4), \
        None if weight is None else weight.reshape(-1, 4)


def check_against_scalar(profile, n_calls, n_points, seed, guards=ALL_GUARDS, tile=None):
    rng = np.random.default_rng(seed)
    m = get_machine("ieee")
    recipe = ScalarRecipe(m)
    for call in range(n_calls):
        alpha = float(rng.uniform(-0.5, 1.5)) if call % 4 else float(rng.choice([0.0, 0.25, 1.0, 2.0**-30]))
        gamma = float(rng.uniform(-3, 6)) if call % 3 else float(rng.choice([0.0, 2.0, -1.0, -2.0]))
        reduction = ("mean", "sum", "none")[call % 3]
        pred, target, dout, weight = random_case(rng, n_points, *profile)
        got = kernel(m, pred, target, dout, weight, alpha, gamma, reduction, guards=guards, tile=tile)
        want = recipe.run(pred, target, dout, weight, alpha, gamma, reduction, guards=guards, tile=tile)
        assert_same_bits(got, want, f"{profile_id(profile)} alpha={alpha!r} gamma={gamma!r} {reduction}")


class TestKernelAgainstScalarRecipe:
    @pytest.mark.parametrize("profile", PROFILES, ids=profile_id)
    def test_all_profiles_fast(self, profile):
        check_against_scalar(profile, n_calls=6, n_points=40, seed=PROFILES.index(profile))

    @pytest.mark.parametrize("guards", [NO_GUARDS, frozenset({"G2", "G4"}), ALL_GUARDS - {"G2"},
                                        frozenset({"G5", "G7", "G8"}), ALL_GUARDS - {"G3", "G6"}],
                             ids=lambda g: "+".join(sorted(g)) or "none")
    def test_guard_subsets_fast(self, guards):
        check_against_scalar((np.float16, np.float32, np.float32), n_calls=3, n_points=40, seed=7,
                             guards=guards, tile=16)

    @pytest.mark.slow
    @pytest.mark.parametrize("profile", PROFILES, ids=profile_id)
    def test_all_profiles_thousands(self, profile):
        check_against_scalar(profile, n_calls=24, n_points=200, seed=100 + PROFILES.index(profile))

    @pytest.mark.slow
    @pytest.mark.parametrize("seed", range(4))
    def test_random_guard_sets(self, seed):
        rng = np.random.default_rng(seed)
        for _ in range(4):
            guards = frozenset(g for g in GUARD_IDS if rng.random() < 0.5)
            profile = PROFILES[int(rng.integers(len(PROFILES)))]
            check_against_scalar(profile, n_calls=3, n_points=120, seed=int(rng.integers(1 << 30)),
                                 guards=guards, tile=int(rng.choice([8, 64, 1000])))


# ---------------------------------------------------------------------------
# Guard pinning: each guard's effect at a point where it matters
# ---------------------------------------------------------------------------

def run(variant, x, t, *, dout=None, weight=None, alpha=0.25, gamma=2.0, reduction="sum", machine="ieee",
        dtype=np.float32):
    x = np.asarray(x, dtype).reshape(1, -1)
    t = np.asarray(t, np.int32).reshape(1, -1)
    dout = np.ones_like(x, dtype=np.float32) if dout is None else np.asarray(dout, np.float32).reshape(1, -1)
    if weight is not None:
        weight = np.asarray(weight, np.float32).reshape(1, -1)
    return evaluate(variant, x, t, dout, weight, alpha=alpha, gamma=gamma, reduction=reduction,
                    machine=machine).ravel()


@pytest.mark.parametrize("model", ["ieee", "npu"])
class TestGuardPinning:
    def test_g2_prevents_nan_when_q_rounds_to_zero(self, model):
        # x = 100: p rounds to 1, q = 1 - p = 0, Ln(q) = -inf, (pg*q)*lq = 0*inf = NaN in dneg
        for variant in ("naive", "kernel-G2", "naive+G1+G3+G4+G5+G6+G7+G8"):
            assert np.isnan(run(variant, [100.0], [1], machine=model)).all(), variant
        for variant in ("naive+G2", "kernel"):
            got = run(variant, [100.0], [1], machine=model)
            assert np.isfinite(got).all(), variant

    def test_unselected_nan_leaks_through_selector(self, model):
        # t = 0 selects dpos (finite here), but dneg*0 = NaN*0 = NaN leaks into raw
        assert np.isnan(run("naive", [100.0], [0], machine=model)).all()
        # x = -110: p = 0, Ln(p) = -inf, ((qg*lp)*p) = -inf*0 = NaN in dpos, selected away by t = 1
        assert np.isnan(run("naive", [-110.0], [1], machine=model)).all()
        # the guarded kernel gives finite values for both
        assert np.isfinite(run("kernel", [100.0, -110.0], [0, 1], machine=model)).all()

    def test_g4_changes_a_clamped_power(self, model):
        # x = 100, t = 0, gamma = -0.5: qF = 2^-126 (clamped); Power gives qg1 = 2^-63 exactly,
        # the fallback Exp(Ln(2^-126) * 0.5) carries Ln's rounding: dpos = -a*qg1 changes.
        with_g4 = run("kernel", [100.0], [0], gamma=-0.5, machine=model)
        without = run("kernel-G4", [100.0], [0], gamma=-0.5, machine=model)
        assert np.isfinite(with_g4).all() and np.isfinite(without).all()
        assert not same_bits(with_g4, without).all()
        if model == "ieee":
            assert float(without[0]) == -0.25 * 2.0**-63

    def test_g4_is_tile_level(self, model):
        # Element A: x = 16, so 1 + Exp(-16) rounds to 1 + 2^-23 and q = 2^-23 exactly; gamma = 4.5
        # makes qg1 = q^5.5 = 2^-126.5, subnormal, so "r <= MIN_NORMAL" holds, but A's own bases
        # are not clamped.  Neighbour B (x = 100, q = 0) has a clamped base.  A gets the fallback
        # Exp(Ln(q)*5.5) (Ln's rounding moves it by many subnormal quanta; on npu the
        # DOUBLE_FLOAT_TECH power itself flushes to 0) only when B shares its tile.
        x, t = [16.0, 100.0], [0, 1]
        alone = run("kernel[tile=1]", x, t, gamma=4.5, machine=model)
        shared = run("kernel[tile=2]", x, t, gamma=4.5, machine=model)
        assert not same_bits(alone[:1], shared[:1]).all()
        assert same_bits(alone[1:], shared[1:]).all()
        # the whole input is one tile by default
        assert same_bits(run("kernel", x, t, gamma=4.5, machine=model), shared).all()
        # without G4 the neighbour does not matter
        assert same_bits(run("kernel-G4", x, t, gamma=4.5, machine=model)[:1], alone[:1]).all()

    def test_g5_engages_only_for_negative_gamma(self, model):
        # a coarse sweep plus a dense window holding the roots of A(x, gamma) for gamma in
        # {-1.5, -2, -3} (x = -0.135, -0.921, -1.742), where orig cancels
        x = np.concatenate([np.linspace(-30, 30, 1201), np.linspace(-2.5, 0.5, 3001)])
        t = np.zeros_like(x, dtype=np.int32)
        for alpha in (0.0, 0.25, 0.5, 0.75, 1.0):
            for gamma in (0.0, 0.5, 1.0, 2.0, 3.0, 5.0):
                on = run("kernel", x, t, alpha=alpha, gamma=gamma, machine=model)
                off = run("kernel-G5", x, t, alpha=alpha, gamma=gamma, machine=model)
                assert same_bits(on, off).all(), (alpha, gamma)
        for gamma in (-1.5, -2.0, -3.0):
            on = run("kernel", x, t, gamma=gamma, machine=model)
            off = run("kernel-G5", x, t, gamma=gamma, machine=model)
            assert not same_bits(on, off).all(), gamma
            # the threshold parameter: "never" is G5 off, a wider threshold engages at least as often
            never = run("kernel[G5=never]", x, t, gamma=gamma, machine=model)
            assert same_bits(never, off).all()
            wide = run("kernel[G5=1/4]", x, t, gamma=gamma, machine=model)
            assert (~same_bits(wide, off)).sum() >= (~same_bits(on, off)).sum()

    def test_g7_changes_an_underflowing_product(self, model):
        # raw ~ -0.0746 (x = 0, t = 0), weight 3*2^-130: raw*weight is subnormal (rounded to
        # 2^-149), dout = 3*2^100 scales it back; the reciprocal path rounds differently.
        x = np.zeros(64)
        t = np.zeros(64, np.int32)
        weight = 3.0 * 2.0**-130 * (1 + np.arange(64) / 64)
        dout = np.full(64, 3.0 * 2.0**100)
        on = run("kernel", x, t, weight=weight, dout=dout, machine=model)
        off = run("kernel-G7", x, t, weight=weight, dout=dout, machine=model)
        assert np.isfinite(on).all() and np.isfinite(off).all()
        assert not same_bits(on, off).all()
        # a product that stays normal is untouched
        big_w = np.full(64, 0.5)
        assert same_bits(run("kernel", x, t, weight=big_w, machine=model),
                         run("kernel-G7", x, t, weight=big_w, machine=model)).all()

    def test_g8_rne_vs_rtz_store(self, model):
        rng = np.random.default_rng(3)
        x = rng.uniform(-8, 8, (4, 64)).astype(np.float16)
        t = rng.integers(0, 2, (4, 64)).astype(np.int32)
        d = rng.uniform(-2, 2, (4, 64)).astype(np.float32)
        wide = evaluate("kernel", x.astype(np.float32), t, d, machine=model)
        rne = evaluate("kernel", x, t, d, machine=model)
        rtz = evaluate("kernel-G8", x, t, d, machine=model)
        assert_same_bits(rne, round_to_format(wide.astype(np.float64), FP16, RNE), "RNE store")
        assert_same_bits(rtz, round_to_format(wide.astype(np.float64), FP16, RTZ), "RTZ store")
        assert not same_bits(rne, rtz).all()
        assert (np.abs(rtz.astype(np.float64)) <= np.abs(rne.astype(np.float64))).all()

    def test_g1_is_bitwise_identity(self, model):
        # For x < 0, Exp(|x|) is Exp(-x): both branches run the same ops as 1/(1+Exp(-x)).
        x = np.concatenate([np.linspace(-120, 120, 2001), [0.0, -0.0, 2.0**-140, -(2.0**-140)]])
        t = np.arange(x.size, dtype=np.int32) % 2
        assert same_bits(run("kernel", x, t, machine=model), run("kernel-G1", x, t, machine=model)).all()


class TestFlushingMachines:
    """On flush models (``ftz``/``daz`` act on Add, Sub, Mul and fma only), G7 earns its keep.

    The product raw*weight that underflows is flushed to zero; G7's recovery
    goes through Div0ulp, which keeps subnormals (as the hardware's
    PRECISION_0ULP_FTZ_FALSE Div does), so it rescues those lanes.  G6 stays
    inert on this sample: its multiply by 1 is exact and never flushes a
    normal pg1.
    """

    @pytest.mark.parametrize("model", ["ieee+ftz", "npu+ftz", "ieee+daz", "npu+ftz+daz"])
    def test_g7_rescues_g6_inert_under_flush(self, model):
        rng = np.random.default_rng(5)
        n = 4096
        x = rng.uniform(-120, 120, n)
        t = rng.integers(0, 2, n)
        weight = np.exp2(rng.uniform(-140, 0, n))
        dout = np.exp2(rng.uniform(-20, 120, n))
        for alpha in (0.25, 2.0**-30):
            on = run("kernel", x, t, weight=weight, dout=dout, alpha=alpha, machine=model)
            off6 = run("kernel-G6", x, t, weight=weight, dout=dout, alpha=alpha, machine=model)
            assert same_bits(on, off6).all(), alpha
            off7 = run("kernel-G7", x, t, weight=weight, dout=dout, alpha=alpha, machine=model)
            rescued = (on != 0) & (off7 == 0)
            if "ftz" in model:
                assert rescued.sum() > 50, alpha
            # wherever G7 changes a lane, it is a rescue of a flushed product
            assert (~same_bits(on, off7) <= rescued | np.isnan(on) | np.isnan(off7)).all()

    def test_g7_recovers_a_flushed_product(self):
        # raw ~ -0.0746, w = 2^-124: raw*w ~ 2^-127.7 is flushed by ftz; the Div0ulp recovery
        # raw / 2^124 keeps the subnormal and dout = 2^100 brings it back to a normal result
        rescued = run("kernel", [0.0], [0], weight=[2.0**-124], dout=[2.0**100], machine="ieee+ftz")
        lost = run("kernel-G7", [0.0], [0], weight=[2.0**-124], dout=[2.0**100], machine="ieee+ftz")
        exact = run("kernel", [0.0], [0], weight=[2.0**-124], dout=[2.0**100], machine="ieee")
        assert lost[0] == 0 and rescued[0] != 0
        assert abs(float(rescued[0]) - float(exact[0])) <= abs(float(exact[0])) * 2.0**-20


class TestMeanCount:
    def test_count_overrides_the_mean_coefficient(self):
        # a slice evaluated with the full tensor's count equals the slice of the full evaluation
        rng = np.random.default_rng(9)
        x = rng.uniform(-10, 10, (6, 7)).astype(np.float32)
        t = rng.integers(0, 2, (6, 7)).astype(np.int32)
        d = rng.standard_normal((6, 7)).astype(np.float32)
        for variant in ("kernel", "naive", "golden", "mmcv"):
            full = evaluate(variant, x, t, d, machine="npu")
            part = evaluate(variant, x[:2], t[:2], d[:2], machine="npu", count=42)
            assert_same_bits(part, full[:2], variant)
            assert not same_bits(evaluate(variant, x[:2], t[:2], d[:2], machine="npu"), full[:2]).all()

    def test_count_ignored_without_mean(self):
        a = evaluate("kernel", EXAMPLE_PRED, EXAMPLE_TARGET, EXAMPLE_DOUT, reduction="sum", count=1000)
        b = evaluate("kernel", EXAMPLE_PRED, EXAMPLE_TARGET, EXAMPLE_DOUT, reduction="sum")
        assert_same_bits(a, b)

    @pytest.mark.parametrize("count", [0, -1, 2.5, "6", 2**63, True])
    def test_bad_count(self, count):
        from precision.errors import ParameterError
        with pytest.raises(ParameterError):
            evaluate("kernel", EXAMPLE_PRED, EXAMPLE_TARGET, EXAMPLE_DOUT, count=count)


class TestTiles:
    def test_tile_ids(self):
        assert tile_ids(5, None).tolist() == [0] * 5
        assert tile_ids(5, 2).tolist() == [0, 0, 1, 1, 2]

    @pytest.mark.parametrize("tile", [0, -3, 1.5, "8"])
    def test_bad_tile(self, tile):
        from precision.errors import ParameterError
        with pytest.raises(ParameterError):
            kernel("ieee", EXAMPLE_PRED, EXAMPLE_TARGET, EXAMPLE_DOUT, tile=tile)

    def test_tile_larger_than_input_is_one_tile(self):
        a = kernel("ieee", EXAMPLE_PRED, EXAMPLE_TARGET, EXAMPLE_DOUT, tile=10**6)
        b = kernel("ieee", EXAMPLE_PRED, EXAMPLE_TARGET, EXAMPLE_DOUT)
        assert_same_bits(a, b)


class TestThresholdParameter:
    @pytest.mark.parametrize("bad", [-1.0, float("nan"), "often"])
    def test_bad_threshold(self, bad):
        from precision.errors import ParameterError
        with pytest.raises(ParameterError):
            kernel("ieee", EXAMPLE_PRED, EXAMPLE_TARGET, EXAMPLE_DOUT, g5_threshold=bad)

    def test_always_and_inf_agree(self):
        x = np.linspace(-20, 20, 401, dtype=np.float32).reshape(1, -1)
        t = np.zeros_like(x, dtype=np.int32)
        d = np.ones_like(x)
        a = kernel("ieee", x, t, d, None, 0.25, -1.5, "sum", g5_threshold="always")
        b = kernel("ieee", x, t, d, None, 0.25, -1.5, "sum", g5_threshold=math.inf)
        c = kernel("ieee", x, t, d, None, 0.25, -1.5, "sum")
        assert_same_bits(a, b)
        assert not same_bits(a, c).all()
