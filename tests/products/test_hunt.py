"""Tests of precision.products.hunt and the ``precision hunt`` command.

Hunts here are short (a few seconds at most) and seeded; the corpus is
always a temporary file.
"""

import json
import math
import re
import time

import numpy as np
import pytest

from precision.operators.sigmoid_focal_loss_grad import oracle
from precision.operators.sigmoid_focal_loss_grad.bracket import ROOT_NEIGHBOURHOOD_C, cancellation_factor
from precision.errors import ParameterError
from precision.exact.formats import FP16, from_ordinal, get_format, to_ordinal
from precision.operators.sigmoid_focal_loss_grad.guards import VARIANTS, evaluate, register_variant
from precision.products.hunt import KINDS, hunt, rescore
from precision.products.hunt_result import HuntResult

from cli_support import run

#: The planted fp32 worst case, and the half-width (ordinals) of its basin.
PLANT32 = float.fromhex("0x1.6a09e6p+0")
BASIN = 1 << 20
#: The planted fp16 worst case.
PLANT16 = float.fromhex("-0x1.5p+3")


def _correct(pred, target, dout, weight, alpha, gamma):
    """Correctly rounded gradients in pred's format (reduction none)."""
    fmt = get_format(pred.dtype)
    w = 1.0 if weight is None else weight
    return fmt, oracle.gradient(pred, target, alpha, gamma, w, dout, fmt=fmt.name)


def _shift(values, fmt, k):
    """values moved k ordinals away from zero (k ulps of error inside one binade)."""
    o = to_ordinal(values, fmt)
    return from_ordinal(o + np.where(o < 0, -k, k), fmt).astype(fmt.dtype)


def planted_basin(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="none", *,
                  count=None):
    """Correctly rounded everywhere except within BASIN ordinals of PLANT32.

    There it is 2 (BASIN - d) ordinals off at distance d, and 4 BASIN at
    PLANT32 itself: one input is the worst, and its basin is wide enough to
    be sampled (a lone wrong input among 4e9 cannot be found by any
    black-box search in seconds).  Near PLANT32 the gradient (gamma 2,
    alpha 0.25, target 0) stays within one binade with room for the shift,
    so errors are exactly those ordinal counts, up to 0.5 ulp.
    """
    fmt, rounded = _correct(pred, target, dout, weight, alpha, gamma)
    d = np.abs(to_ordinal(pred, fmt) - to_ordinal(np.array(PLANT32, fmt.dtype), fmt))
    k = np.where(d == 0, 4 * BASIN, np.where(d < BASIN, 2 * (BASIN - d), 0))
    return _shift(rounded, fmt, k)


def planted_single(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="none", *,
                   count=None):
    """Correctly rounded everywhere except at pred == PLANT16 (1000 ulps off there)."""
    fmt, rounded = _correct(pred, target, dout, weight, alpha, gamma)
    return _shift(rounded, fmt, np.where(pred.astype(np.float64) == PLANT16, 1000, 0))


@pytest.fixture
def planted():
    register_variant("test-planted-basin", planted_basin, "exact except around one fp32 input", replace=True)
    register_variant("test-planted-single", planted_single, "exact except at one fp16 input", replace=True)
    yield
    VARIANTS.pop("test-planted-basin", None)
    VARIANTS.pop("test-planted-single", None)


class TestPlanted:
    def test_basin_is_what_the_docstring_says(self, planted):
        x = np.array([[PLANT32], [np.nextafter(np.float32(PLANT32), np.float32(2))], [3.0]], np.float32)
        t = np.zeros((3, 1), np.int32)
        got = evaluate("test-planted-basin", x, t, np.ones_like(x), reduction="none")
        exact = oracle.gradient(x, t, 0.25, 2.0, fmt="fp32")
        d = np.abs(to_ordinal(got, "fp32") - to_ordinal(exact, "fp32")).ravel().tolist()
        assert d == [4 * BASIN, 2 * (BASIN - 1), 0]

    def test_fp32_hunt_finds_the_planted_input(self, planted):
        r = hunt("test-planted-basin", fmt="fp32", gammas=[2.0], alphas=[0.25], targets=[0], points=40_000,
                 seed=0, workers=2, top=3)
        assert r.kind == "hunted" and r.points == 40_000
        assert r.witness["pred"] == PLANT32.hex() and r.witness["target"] == 0
        assert 4 * BASIN - 0.5 <= r.max_ulp <= 4 * BASIN + 0.5
        assert r.top["err_ulp"].iloc[0] == r.max_ulp == r.top["err_ulp_alone"].iloc[0]
        assert r.top["err_ulp"].iloc[1] < 2 * BASIN + 0.5  # everything else is far below

    def test_fp16_exhaustive_finds_the_planted_input(self, planted):
        r = hunt("test-planted-single", fmt="fp16", gammas=[2.0], targets=[0], workers=2, top=3)
        assert r.kind == "exhaustive" and r.points == FP16.finite_count
        assert r.witness["pred"] == PLANT16.hex()
        assert 999.5 <= r.max_ulp <= 1000.5
        assert r.top["err_ulp"].iloc[1] <= 0.5  # every other pred is correctly rounded
        assert r.label == f"exhaustive ({FP16.finite_count:,} points)"


class TestReproducible:
    def test_point_budget_same_result_for_any_worker_count(self):
        a = hunt("candidate", gammas=[-3.0], points=3000, seed=5, workers=1, top=5)
        b = hunt("candidate", gammas=[-3.0], points=3000, seed=5, workers=2, top=5)
        cols = ["err_ulp", "pred_hex", "target", "gamma_hex", "computed_hex"]
        assert a.top[cols].equals(b.top[cols]) and a.points == b.points == 3000
        c = hunt("candidate", gammas=[-3.0], points=3000, seed=6, workers=1, top=5)
        assert not a.top["pred_hex"].equals(c.top["pred_hex"])

    def test_seconds_respected_within_10_percent(self):
        # 6 s: long enough that starting the worker processes on a loaded machine stays inside the 10 %
        started = time.monotonic()
        r = hunt("candidate", seconds=6, seed=1, workers=2, top=3)
        wall = time.monotonic() - started
        assert 5.4 <= wall <= 6.6 and 5.4 <= r.seconds <= 6.6
        assert r.budget_seconds == 6 and r.budget_points is None and r.points > 0
        assert r.label.startswith(f"hunted ({r.points:,} points in ")


class TestSearchSpace:
    def test_outside_neighbourhood_only_scores_outside(self):
        r = hunt("kernel", gammas=[-3.0], outside_neighbourhood=True, points=2000, seed=2, workers=1, top=10)
        assert len(r.top) and (r.top["c_factor"] < ROOT_NEIGHBOURHOOD_C).all()

    def test_specials_rank_above_finite_errors(self):
        # the kernel returns NaN for huge negative pred at gamma -3 (q^g overflows)
        r = hunt("kernel", gammas=[-3.0], targets=[0], points=4000, seed=0, workers=1, top=2)
        assert r.max_ulp == math.inf and r.specials > 0
        assert r.top["class"].iloc[0] in ("nan", "inf") and r.top["err_ulp"].iloc[0] == math.inf
        finite = r.top[np.isfinite(r.top["err_ulp"])]
        assert len(finite) == 2 and finite["err_ulp"].iloc[0] == r.max_finite_ulp and math.isfinite(r.max_finite_ulp)

    def test_rescore_gives_the_hunts_own_errors(self):
        """precision.products.hunt.rescore (the reports' re-evaluation of known witnesses) scores as the hunt does."""
        from precision.products.hunt import rescore
        r = hunt("candidate", gammas=[-3.0, 2.0], alphas=[0.25, 0.75], outside_neighbourhood=True, points=3000,
                 seed=1, workers=1, top=6)
        top = r.top
        again = rescore("candidate", top["pred"], top["target"], top["alpha"], top["gamma"], machine="npu")
        assert again["err_ulp"].tolist() == top["err_ulp"].tolist()
        assert again["c_factor"].tolist() == top["c_factor"].tolist() and not again["inside"].any()
        inside = rescore("candidate", [0.5, 0.5], [0, 0], [0.25, 0.25], [-3.0, 2.0], machine="ieee")["inside"]
        assert inside.tolist() == [bool(cancellation_factor(np.array([0.5]), -3.0)[0] >= ROOT_NEIGHBOURHOOD_C), False]

    def test_witness_reproduces_with_the_oracle(self):
        r = hunt("candidate", gammas=[2.0], points=1500, seed=3, workers=1, top=1)
        w = r.witness
        x = np.array([[float.fromhex(w["pred"])]], np.float32)
        t = np.array([[w["target"]]], np.int32)
        got = evaluate("candidate", x, t, np.ones_like(x), alpha=float.fromhex(w["alpha"]),
                       gamma=float.fromhex(w["gamma"]), reduction="none", machine="npu")
        assert float(got[0, 0]).hex() == r.top["computed_hex"].iloc[0]
        want = oracle.round_gradient(float(x[0, 0]), int(t[0, 0]), 0.25, 2.0, fmt="fp32")
        assert want.hex() == r.top["rounded_hex"].iloc[0]

    @pytest.mark.parametrize("kwargs,word", [
        (dict(variant="nosuch"), "variant"),
        (dict(fmt="bf16"), "format"),
        (dict(seconds=-1.0, points=None), "seconds"),
        (dict(seconds=math.nan, points=None), "seconds"),
        (dict(points=0), "points"),
        (dict(points=10, seconds=1.0), "not both"),
        (dict(gammas=[1e39]), "gamma"),
        (dict(alphas=[]), "alpha"),
        (dict(targets=[0.5]), "target"),
        (dict(machine="tpu"), "tpu"),
        (dict(variant="naive-fp16"), "fp32"),
        (dict(workers=0), "workers"),
    ])
    def test_bad_parameters(self, kwargs, word):
        kwargs = {"variant": "candidate", "points": 10, "workers": 1, **kwargs}
        with pytest.raises(ParameterError, match=word):
            hunt(kwargs.pop("variant"), **kwargs)

    def test_ladder_then_random_octaves(self):
        from precision.products import hunt as hunt_module
        space = hunt_module._Space("candidate", "npu", "fp32", (("gamma", (2.0,), 0, 0), ("alpha", (0.25,), 0, 0)),
                                   (0,), False)
        kept = hunt_module._empty()
        kept.update(ordinal=np.array([1 << 30]), combo=np.array([0]), err=np.array([1.0]),
                    expansions=np.array([0]))
        kept = {k: np.asarray(v) for k, v in kept.items()}
        rng = np.random.default_rng(0)
        o, c = hunt_module._neighbours(rng, space, kept, 1000)
        steps = o - (1 << 30)
        ladder = [1 << j for j in range(hunt_module.LADDER_BITS + 1)]
        assert sorted(steps.tolist()) == sorted(ladder + [-d for d in ladder]) and (c == 0).all()
        assert kept["expansions"].tolist() == [1]
        o, _ = hunt_module._neighbours(rng, space, kept, 1000)
        dist = np.abs(o - (1 << 30))
        octave = np.floor(np.log2(dist)).astype(int)
        assert sorted(octave.tolist()) == sorted(2 * list(range(1, hunt_module.LADDER_BITS + 1)))

    def test_all_names_exist(self):
        from precision.products import hunt as hunt_module
        assert all(hasattr(hunt_module, name) for name in hunt_module.__all__)

    def test_kinds(self):
        assert KINDS == ("exhaustive", "sampled", "hunted")
        assert "max_ulp" in HuntResult.__dataclass_fields__



class TestCommand:
    def test_json_schema(self, capsys, tmp_path):
        corpus = tmp_path / "corpus.txt"
        code, out, err = run(capsys, "hunt", "candidate", "--gamma", "-3", "2", "--points", "1200", "--workers", "1",
                             "--json", "--top", "4", "--corpus", str(corpus))
        assert code == 0 and err == ""
        doc = json.loads(out)
        assert {"max_ulp", "witness", "kind", "seconds", "points", "top", "label", "max_finite_ulp",
                "budget", "specials", "unresolved", "fresh_points", "fresh_not_correct"} <= doc.keys()
        assert 0 < doc["fresh_points"] <= doc["points"] and 0 <= doc["fresh_not_correct"] <= doc["fresh_points"]
        assert doc["kind"] == "hunted" and doc["points"] == 1200 and doc["budget"] == {"seconds": None, "points": 1200}
        assert set(doc["witness"]) == {"pred", "target", "alpha", "gamma", "weight", "dout"}
        assert float.fromhex(doc["witness"]["pred"]) == float.fromhex(doc["top"][0]["pred"])
        assert doc["gammas"] == [(-3.0).hex(), (2.0).hex()]
        assert len(doc["top"]) == 4 and doc["top"][0]["err_ulp"] == doc["max_ulp"]
        assert {"rank", "err_ulp", "err_ulp_alone", "class", "pred", "target", "alpha", "gamma", "weight", "dout",
                "computed", "rounded", "exact", "c_factor", "pred_decimal"} == doc["top"][0].keys()
        # the preds not correctly rounded went to the corpus, once
        lines = [ln for ln in corpus.read_text().splitlines() if not ln.startswith("#")]
        assert lines and lines[0].split()[0] == doc["witness"]["pred"] and "hunt witness, candidate" in lines[0]

    def test_text_output_and_corpus(self, capsys, tmp_path):
        corpus = tmp_path / "c.txt"
        argv = ["hunt", "candidate", "--points", "800", "--workers", "1", "--top", "3", "--corpus", str(corpus)]
        code, out, err = run(capsys, *argv)
        lines = out.splitlines()
        assert code == 0 and err == "" and len(lines) == 5
        assert re.match(r"  1 err=\S+ ulp alone=\S+ class=\w+ pred=-?0x\S+ \(\S+\) target=\d+ alpha=0x\S+ "
                        r"gamma=-?0x\S+ weight=none dout=0x1\.0+p\+0 got=-?0x\S+ want=-?0x\S+ C=\S+$", lines[0])
        assert lines[3].startswith("hunt candidate fp32 npu: max_ulp=") and "hunted (800 points" in lines[3]
        assert lines[4].startswith("corpus: ") and corpus.exists()
        again = corpus.read_text()
        code, out, _ = run(capsys, *argv)
        assert out.splitlines()[-1].startswith("corpus: 0 new") and corpus.read_text() == again

    def test_no_corpus_given_writes_nothing(self, capsys, tmp_path, monkeypatch):
        """A hunt writes only where it is told: without --corpus, nothing in the working folder (no
        studies/worst_cases.txt, no lock file) and no corpus line."""
        monkeypatch.chdir(tmp_path)
        code, out, err = run(capsys, "hunt", "candidate", "--points", "800", "--workers", "1", "--top", "3")
        assert code == 0 and err == "" and len(out.splitlines()) == 4
        assert not out.splitlines()[-1].startswith("corpus") and list(tmp_path.iterdir()) == []

    def test_corpus_leaves_no_lock_file(self, capsys, tmp_path):
        folder = tmp_path / "c"
        folder.mkdir()
        code, _, _ = run(capsys, "hunt", "candidate", "--points", "800", "--workers", "1",
                         "--corpus", str(folder / "c.txt"))
        assert code == 0 and [p.name for p in folder.iterdir()] == ["c.txt"]

    @pytest.mark.parametrize("argv,word", [
        (["hunt", "nosuch"], "nosuch"),
        (["hunt", "candidate", "--format", "bf16"], "--format"),
        (["hunt", "candidate", "--seconds", "-2"], "--seconds"),
        (["hunt", "candidate", "--seconds", "abc"], "--seconds"),
        (["hunt", "candidate", "--points", "0"], "--points"),
        (["hunt", "candidate", "--points", "10", "--seconds", "1"], "not both"),
        (["hunt", "candidate", "--gamma", "1e39"], "gamma"),
        (["hunt", "candidate", "--target", "x"], "--target"),
        (["hunt", "candidate", "--machine", "tpu"], "tpu"),
        (["hunt", "candidate", "--seed", "-1"], "--seed"),
        (["hunt", "candidate", "--workers", "0"], "--workers"),
        (["hunt", "candidate", "--gamma", "2", "--gamma-range", "-3", "6"], "not both"),
        (["hunt", "candidate", "--gamma-range", "6", "-3"], "LO <= HI"),
        (["hunt", "candidate", "--alpha-range", "0", "x"], "--alpha-range"),
        (["hunt", "candidate", "--alpha-range", "0", "1e39"], "finite float32"),
    ])
    def test_bad_input_one_line_exit_2(self, capsys, tmp_path, argv, word):
        code, out, err = run(capsys, *argv, "--corpus", str(tmp_path / "c.txt"))
        assert code == 2 and out == ""
        assert err.count("\n") == 1 and word in err and "Traceback" not in err
        assert not (tmp_path / "c.txt").exists()


class TestRanges:
    """Attributes searched as real ranges (``ranges``, ``--gamma-range``)."""

    RANGES = {"alpha": (0.0, 1.0), "gamma": (-3.0, 6.0)}

    def test_points_lie_in_the_ranges_off_the_grid_and_reproduce(self):
        a = hunt("candidate", machine="ieee", ranges=self.RANGES, targets=[1], points=6000, workers=1, top=20)
        b = hunt("candidate", machine="ieee", ranges=self.RANGES, targets=[1], points=6000, workers=2, top=20)
        assert a.top.equals(b.top) and a.points == 6000 and a.kind == "hunted"
        t = a.top
        assert t["alpha"].between(0.0, 1.0).all() and t["gamma"].between(-3.0, 6.0).all()
        assert (t["alpha"] == t["alpha"].astype(np.float32)).all()  # float32 values
        grid = {-3.0, -2.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.0, 3.0, 5.0, 6.0}
        assert not set(t["gamma"]).issubset(grid)
        assert a.ranges == (("gamma", -3.0, 6.0), ("alpha", 0.0, 1.0)) and a.attributes == ()
        assert "gamma in [-3, 6], alpha in [0, 1]" in a.lines()[-1]
        j = a.to_json()
        assert j["gamma_range"] == [(-3.0).hex(), (6.0).hex()] and "gammas" not in j
        # every reported error is the point's own, rescored alone
        again = rescore("candidate", t["pred"], t["target"], t["alpha"], t["gamma"], machine="ieee")
        assert np.array_equal(again["err_ulp"].to_numpy(), t["err_ulp"].to_numpy())

    def test_a_range_and_a_list_mix(self):
        r = hunt("candidate", machine="ieee", ranges={"gamma": (-3.0, -2.0)}, alphas=[0.25], targets=[0, 1],
                 points=3000, workers=1)
        assert set(r.top["alpha"]) == {0.25} and r.top["gamma"].between(-3.0, -2.0).all()
        assert r.attributes == (("alpha", (0.25,)),)

    def test_fp16_with_a_range_is_hunted(self):
        r = hunt("candidate", fmt="fp16", machine="ieee", ranges={"gamma": (1.0, 2.0)}, points=12000, workers=1)
        assert r.kind == "hunted" and r.points == 12000
        # fresh points: the seeded draws, not the local search's (from the second batch on); every batch draws some
        assert 0 < r.fresh < r.points and 0 <= r.fresh_not_correct <= r.fresh
        assert r.to_json()["fresh_points"] == r.fresh and r.to_json()["fresh_not_correct"] == r.fresh_not_correct


def test_an_exhaustive_hunts_fresh_points_are_all_its_points_and_its_misses_are_counted():
    """fp16 exhausted: every point is fresh, and the count not correctly rounded is the points whose output differs
    from the certified rounding (recounted here from the variant's outputs and the oracle's rounding)."""
    from precision.engine.operators import get_operator
    r = hunt("candidate", fmt="fp16", machine="ieee", gammas=[2.0], alphas=[0.25], targets=[1], workers=1)
    assert r.kind == "exhaustive" and r.fresh == r.points == FP16.finite_values().size
    x = FP16.finite_values()
    op = get_operator("sigmoid_focal_loss_grad")
    out = evaluate("candidate", x[:, None], np.ones((x.size, 1), np.int32), np.ones((x.size, 1), np.float16),
                   alpha=0.25, gamma=2.0, reduction="none", machine="ieee")[:, 0]
    n = x.size
    pos, neg = op.selected_term_tables(x.astype(np.float64), np.ones(n), np.full(n, 0.25), 2.0)
    d = op.derive_exact(x.astype(np.float64), np.ones(n, np.int64), np.full(n, 0.25), np.full(n, 2.0), np.ones(n),
                        np.ones(n), np.ones(n, np.int64), "fp16", pos, neg)
    wrong = int(np.sum(~(out.astype(np.float64) == d.rounded.astype(np.float64))))
    assert r.fresh_not_correct == wrong and 0 < wrong < 100

    @pytest.mark.parametrize("ranges, extra, word", [
        ({"beta": (0, 1)}, {}, "not an attribute"),
        ({"gamma": (1, 0)}, {}, "LO <= HI"),
        ({"gamma": (0, 1)}, {"gammas": [2.0]}, "not both"),
        ({"gamma": (0, float("inf"))}, {}, "finite float32"),
    ])
    def test_bad_ranges(self, ranges, extra, word):
        with pytest.raises(ParameterError, match=word):
            hunt("candidate", ranges=ranges, points=10, workers=1, **extra)

    def test_attribute_moves_change_one_ranged_attribute_within_its_range(self):
        from precision.products import hunt as hunt_module
        f32 = get_format("fp32")
        lo, hi = (int(v) for v in to_ordinal(np.array([-3.0, 6.0], dtype=np.float32), f32))
        space = hunt_module._Space("candidate", "ieee", "fp32", (("gamma", None, lo, hi), ("alpha", (0.25,), 0, 0)),
                                   (0, 1), False)
        center = int(space.combine([np.array([(hi - lo) // 2]), np.array([0]), np.array([1])])[0])
        rng = np.random.default_rng(0)
        o, c = hunt_module._attribute_moves(rng, space, center, 1 << 40, 1 << 41, 100)
        assert o.size == 50 * hunt_module.ATTRIBUTE_MOVES and (c != center).all()
        assert np.unique(c).size == hunt_module.ATTRIBUTE_MOVES  # (one combination per move)
        assert {-8, -4, -2, -1, 0, 1, 2, 4, 8} <= set((o - (1 << 40)).tolist())
        gamma = space.attribute_of("gamma", c)
        assert ((gamma >= -3.0) & (gamma <= 6.0)).all() and (gamma != space.attribute_of("gamma", [center])).any()
        assert (space.attribute_of("alpha", c) == 0.25).all() and (space.targets_of(c) == 1).all()

    def test_screened_points_score_without_the_scalar_oracle(self, monkeypatch):
        """Over real alpha values 1 - alpha can be an fp32 midpoint; at a huge |x| the exact gradient is that
        midpoint plus a hair, whose rounding the scalar oracle cannot decide (NaN: ``unresolved``).  The hunt
        scores such points from the compiled ball's centre instead: the same 30,000 points, the same maximum,
        none unresolved."""
        from precision.products import hunt as hunt_module
        kw = dict(machine="ieee", ranges=self.RANGES, targets=[1], outside_neighbourhood=True, points=30000,
                  workers=1, seed=0)
        screened = hunt("candidate", **kw)
        original = hunt_module._score_points
        monkeypatch.setattr(hunt_module, "_score_points",
                            lambda space, ordinal, combo, certify=True: original(space, ordinal, combo, True))
        certified = hunt("candidate", **kw)
        assert certified.unresolved > 0 and screened.unresolved == 0
        assert screened.max_finite_ulp == certified.max_finite_ulp
        assert screened.top["err_ulp"].iloc[0] == certified.top["err_ulp"].iloc[0]
