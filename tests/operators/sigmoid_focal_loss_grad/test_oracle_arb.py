"""Tests of precision.operators.sigmoid_focal_loss_grad.oracle_arb, the second (Arb / python-flint) oracle, and of
the cross-check ``precision oracle --check`` against the mpmath oracle."""

import math
import random
import re
import sys

import mpmath
import numpy as np
import pytest
from mpmath import libmp

pytest.importorskip("flint", reason="python-flint is not installed (pip install 'precision[arb]')")

import precision  # noqa: E402
from precision import cli  # noqa: E402
from precision.operators.sigmoid_focal_loss_grad import oracle  # noqa: E402
from precision.operators.sigmoid_focal_loss_grad import oracle_arb as oa  # noqa: E402

from precision.errors import OracleUndecidedError, ParameterError  # noqa: E402
from precision.exact.formats import FORMATS, get_format  # noqa: E402

F32 = lambda v: float(np.float32(v))  # noqa: E731


def same(a, b):
    return (a == b and math.copysign(1.0, a) == math.copysign(1.0, b)) or (math.isnan(a) and math.isnan(b))


def bits_of(value, fmt):
    f = get_format(fmt)
    return int(np.asarray(value, dtype=f.dtype).view(f.uint_dtype))


def textbook(x, t, alpha, gamma, weight=1.0, dout=1.0, count=1, bits=3000):
    """The gradient by mpmath's high-level textbook formula (a third evaluation)."""
    with mpmath.workprec(bits):
        X, g, a = mpmath.mpf(x), mpmath.mpf(gamma), mpmath.mpf(alpha)
        p, q = 1 / (1 + mpmath.exp(-X)), 1 / (1 + mpmath.exp(X))
        lnp, lnq = -mpmath.log1p(mpmath.exp(-X)), -mpmath.log1p(mpmath.exp(X))
        A = g * p * q**g * lnp - q ** (g + 1)
        B = p ** (g + 1) - g * p**g * q * lnq
        return (a * (1 - t) * A + (1 - a) * t * B) * mpmath.mpf(weight) * mpmath.mpf(dout) / count


# ---------------------------------------------------------------------------
# The Arb oracle on its own
# ---------------------------------------------------------------------------

class TestReferencePoints:
    """tests/data/oracle_points.csv (Arb at 600+ bits, exact rational rounding), bit for bit."""

    @pytest.mark.parametrize("fmt", ["fp32", "fp16", "bf16"])
    def test_batch_matches_reference_bits(self, reference_points, fmt):
        rows = reference_points
        got = oa.gradient(
            np.array([r["x"] for r in rows]), np.array([r["t"] for r in rows]),
            np.array([r["alpha"] for r in rows]), np.array([r["gamma"] for r in rows]),
            np.array([r["weight"] for r in rows]), np.array([r["dout"] for r in rows]),
            np.array([r["count"] for r in rows]), fmt=fmt)
        assert got.dtype == get_format(fmt).dtype and len(rows) == 78
        mismatches = [(r["case"], r["x"], float(g), r[fmt]) for r, g in zip(rows, got.astype(float))
                      if bits_of(g, fmt) != bits_of(r[fmt], fmt)]
        assert mismatches == []

    def test_scalar_matches_reference_and_signs_of_zero(self, reference_points):
        zeros = 0
        for r in reference_points:
            args = (r["x"], r["t"], r["alpha"], r["gamma"], r["weight"], r["dout"], r["count"])
            for fmt in ("fp32", "fp16", "bf16"):
                v = oa.round_gradient(*args, fmt=fmt)
                assert same(v, r[fmt]), (r["case"], fmt, v, r[fmt])
                zeros += v == 0
        assert zeros > 10


class TestExactRounding:
    def test_round_exact_matches_format_round_mpf(self):
        rng = random.Random(7)
        for f in FORMATS.values():
            qmin = f.emin - f.prec + 1
            for _ in range(5000):
                nbits = rng.choice([1, 2, f.prec, f.prec + 1, f.prec + 2, 90, 300])
                man = rng.getrandbits(nbits) | 1
                exp = rng.randint(qmin - 6, f.emax + 3) - man.bit_length() + 1
                man = -man if rng.random() < 0.5 else man
                assert same(oa.round_exact(man, exp, f), f.round_mpf(libmp.from_man_exp(man, exp)))

    @pytest.mark.parametrize("fmt", list(FORMATS))
    def test_ties_and_edges(self, fmt):
        f = get_format(fmt)
        q = f.emin - f.prec + 1
        assert same(oa.round_exact(1, q - 1, f), 0.0)              # half the smallest subnormal: tie to 0
        assert same(oa.round_exact(-3, q - 2, f), -f.smallest_subnormal)  # 0.75 ulp rounds up
        assert same(oa.round_exact(-1, q - 2, f), -0.0)            # 0.25 ulp: -0 keeps the sign
        big = (1 << (f.prec + 1)) - 1                               # max finite + half ulp: tie to inf
        assert oa.round_exact(big, f.emax - f.prec, f) == math.inf
        assert oa.round_exact(big - 1, f.emax - f.prec, f) == f.max_finite
        # astronomically large exponents are decided from the exponent alone
        assert same(oa.round_exact(-7, -(10**40), f), -0.0)
        assert oa.round_exact(5, 10**40, f) == math.inf


class TestOracle:
    @pytest.mark.parametrize("fmt", list(FORMATS))
    def test_structural_zeros_are_plus_zero(self, fmt):
        for args in [(-3.0, 0, 0.0, 2.0), (5.0, 1, 1.0, 2.0), (2.0, 1, 0.25, 2.0, 0.0),
                     (2.0, 0, 0.25, 2.0, -0.0), (2.0, 1, 0.25, 2.0, 1.0, 0.0), (-7.0, 0, 0.0, -1.5, -2.0, 3.0)]:
            v = oa.round_gradient(*args, fmt=fmt)
            assert v == 0 and math.copysign(1.0, v) == 1.0

    def test_matches_textbook_on_moderate_points(self):
        rng = np.random.default_rng(3)
        for _ in range(300):
            x = float(rng.uniform(-40, 40))
            t = int(rng.choice([0, 1, -1, 2]))
            a, g = F32(rng.uniform(0, 1)), F32(rng.uniform(-3, 5))
            w = float(rng.choice([1.0, -0.5, 2.0**-140, 3.0 * 2**100]))
            for fmt in FORMATS:
                want = get_format(fmt).round_mpf(textbook(x, t, a, g, w, 1.0, 3))
                assert same(oa.round_gradient(x, t, a, g, w, 1.0, 3, fmt=fmt), want)

    @pytest.mark.parametrize("x", [1.0, 30.0, 200.0, 700.0, 740.0, 745.0])
    def test_deep_cancellation_gamma_minus_one(self, x):
        """A(x, -1) = (log1p(e) - e)/e ~ -e/2 for x >= 0: the naive bracket cancels by e."""
        for fmt in FORMATS:
            want = get_format(fmt).round_mpf(textbook(x, 0, 0.5, -1.0, bits=4000))
            assert same(oa.round_gradient(x, 0, 0.5, -1.0, fmt=fmt), want)

    @pytest.mark.parametrize("x", [1e4, 1e30, 3.4028234663852886e38])
    def test_huge_x_gamma_minus_one_and_neighbours(self, x):
        # A(x, -1) ~ -exp(-x)/2 far below every format: -0; A(-x, g) ~ -1
        for fmt in FORMATS:
            v = oa.round_gradient(x, 0, 0.5, -1.0, fmt=fmt)
            assert v == 0 and math.copysign(1.0, v) == -1.0
        # gamma = -1 -+ ulp: A(x, g) ~ -(g+1) exp(-(g+1) x): grows (g < -1) or decays (g > -1)
        below, above = F32(-1 - 2.0**-23), F32(-1 + 2.0**-24)
        for fmt in FORMATS:
            for g in (-1.0, below, above):
                assert oa.round_gradient(-x, 0, 0.5, g, fmt=fmt) == -0.5
            v_below = oa.round_gradient(x, 0, 0.5, below, fmt=fmt)
            v_above = oa.round_gradient(x, 0, 0.5, above, fmt=fmt)
            assert v_below > 0 and (v_above < 0 or (v_above == 0 and math.copysign(1.0, v_above) < 0))
            assert same(v_below, oracle.round_gradient(x, 0, 0.5, below, fmt=fmt))
            assert same(v_above, oracle.round_gradient(x, 0, 0.5, above, fmt=fmt))

    def test_undecided_is_nan_or_raises(self):
        # (1 - alpha) is an fp32 midpoint and the gradient differs from it by exp(-1e5)
        # relative: deciding needs ~144,000 bits, beyond MAX_PREC
        alpha = F32(0.4)
        with pytest.raises(OracleUndecidedError):
            oa.round_gradient(1e5, 1, alpha, 2.0, fmt="fp32")
        got = oa.gradient(np.array([1e5, 3e4]), 1, alpha, 2.0, fmt="fp32")
        assert math.isnan(got[0]) and got[1] == np.float32(0.6)  # 3e4 needs ~43,000 bits: decided

    def test_batch_validation(self):
        with pytest.raises(ParameterError):
            oa.gradient(np.array([1, 2]), 0, 0.25, 2.0)
        with pytest.raises(ParameterError):
            oa.gradient(np.array([1.0]), 0, 0.25, 2.0, count=0)
        with pytest.raises(ParameterError):
            oa.gradient(np.array([np.inf]), 0, 0.25, 2.0)
        with pytest.raises(ParameterError):
            oa.gradient(np.array([1.0]), np.array([0.5]), 0.25, 2.0)
        out = oa.gradient(np.zeros((2, 3), dtype=np.float16), np.array([0, 1, 2]), 0.25, 2.0, fmt="bf16")
        assert out.shape == (2, 3) and out.dtype == get_format("bf16").dtype

    def test_precision_context_restored(self):
        from flint import ctx
        before = ctx.prec
        oa.round_gradient(3.0, 0, 0.25, 2.0, fmt="fp64")
        assert ctx.prec == before


# ---------------------------------------------------------------------------
# The cross-check against the mpmath oracle
# ---------------------------------------------------------------------------

HARD_CATEGORIES = ["roots", "gamma~-1", "x~88.7/104", "subnormal", "overflow", "weight/dout-threshold",
                   "ties", "huge-x", "selectors/alpha"]



@pytest.fixture(scope="module")
def report():
    return oa.crosscheck(points=10_000, seed=0)


class TestCrossCheck:
    def test_coverage(self, report):
        cats = report.categories
        assert cats["random"].points == 10_000
        for name in HARD_CATEGORIES:
            assert cats[name].points >= 100, name
            assert cats[name].comparisons == 4 * cats[name].points

    def test_no_conflicting_values(self, report):
        """Where both oracles decide, they agree bit for bit (sign of zero included)."""
        conflicts = [d.line() for d in report.disagreements if d.conflict]
        assert conflicts == []

    def test_arb_never_undecided_where_mpmath_decides(self, report):
        assert [d.line() for d in report.disagreements if math.isnan(d.arb_value)] == []

    @pytest.mark.parametrize("category", [c for c in HARD_CATEGORIES if c != "ties"])
    def test_zero_disagreements_hard(self, report, category):
        r = report.categories[category]
        assert r.disagreements == 0 and r.undecided == 0, [
            d.line() for d in report.disagreements if d.case.category == category]

    def test_zero_disagreements_ties(self, report):
        assert report.categories["ties"].disagreements == 0

    def test_zero_disagreements_random(self, report):
        assert report.categories["random"].disagreements == 0

    def test_zero_disagreements_overall(self, report):
        assert [d.line() for d in report.disagreements] == []


class TestCheckCommand:
    @pytest.fixture
    def small_hard(self, monkeypatch):
        """A short hard-case list (every category but the known mpmath-undecided ties)."""
        full = oa.hard_cases()
        short = [c for c in full if c.category != "ties"][::20]
        monkeypatch.setattr(oa, "hard_cases", lambda: short)

    def test_exit_0_on_agreement(self, small_hard, capsys):
        assert cli.main(["oracle", "--check", "--points", "300", "--seed", "5"]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[-1].startswith("PASS: 0 disagreements")
        assert any(line.startswith("random ") and "300 points" in line for line in out)

    def test_exit_1_on_injected_disagreement(self, small_hard, monkeypatch, capsys):
        real = oa.gradient

        def broken(pred, *args, fmt="fp32", **kw):
            out = real(pred, *args, fmt=fmt, **kw)
            if fmt == "fp32" and out.size > 7:
                out = out.copy()
                out[7] = np.nextafter(out[7], np.float32(np.inf))  # one ulp off at one point
            return out

        monkeypatch.setattr(oa, "gradient", broken)
        assert cli.main(["oracle", "--check", "--points", "50"]) == 1
        out = capsys.readouterr().out
        assert re.search(r"DISAGREE \[random\] fp32 x=-?0x\S+ t=-?\d+ alpha=\S+ gamma=\S+ weight=\S+ "
                         r"dout=\S+ count=\d+: mpmath=-?0x\S+ arb=-?0x\S+", out)
        assert out.splitlines()[-1].startswith("FAIL: ")

    def test_exit_1_when_mpmath_oracle_is_wrong(self, small_hard, monkeypatch, capsys):
        real = oracle.gradient

        def broken(pred, target, alpha, gamma, weight=1.0, dout=1.0, count=1, fmt="fp32"):
            out = real(pred, target, alpha, gamma, weight, dout, count, fmt=fmt)
            return -out if fmt == "bf16" else out  # sign flipped: every bf16 value wrong

        monkeypatch.setattr(oracle, "gradient", broken)
        assert cli.main(["oracle", "--check", "--points", "20"]) == 1
        assert "values differ" in capsys.readouterr().out

    def test_exit_2_without_python_flint(self, monkeypatch, capsys):
        monkeypatch.setitem(sys.modules, "precision.operators.sigmoid_focal_loss_grad.oracle_arb", None)  # import fails
        monkeypatch.delattr(precision.operators.sigmoid_focal_loss_grad, "oracle_arb", raising=False)
        assert cli.main(["oracle", "--check"]) == 2
        err = capsys.readouterr().err
        assert "python-flint" in err and "Traceback" not in err

    def test_bad_points_and_missing_pred(self, capsys):
        assert cli.main(["oracle", "--check", "--points", "-1"]) == 2
        assert cli.main(["oracle", "--check", "--points", "many"]) == 2
        assert cli.main(["oracle"]) == 2
        err = capsys.readouterr().err.splitlines()
        assert len(err) == 3 and all(line.startswith("precision: error: ") for line in err)
