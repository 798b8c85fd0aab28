"""Study files: parsing, validation errors naming file and key, point sets."""

import numpy as np
import pytest

from precision.errors import StudyFileError
from precision.exact.formats import FP16, FP32
from precision.engine.study import AttributionSpec, load_study, parse_study
from precision.engine.points import pred_values

BASE = """
name = "t"
seed = 3
[pred]
kind = "list"
format = "fp32"
values = ["-0x1.4p+0", "2.5", "0"]
[points]
target = [0, 1]
alpha = [0.25]
gamma = [2.0, -1.5]
[run]
variants = ["kernel", "naive"]
machines = ["ieee"]
"""


def study_with(**replace):
    text = BASE
    for old, new in replace.items():
        text = text.replace(old, new)
    return text


class TestParse:
    def test_defaults_and_values(self):
        s = parse_study(BASE, "t.toml")
        assert s.targets == (0, 1) and s.alphas == (0.25,) and s.gammas == (2.0, -1.5)
        assert s.weights == (None,) and s.douts == (1.0,) and s.reduction == "none" and s.count == 1
        assert [p.name for p in s.profiles] == ["fp32"] and s.region_edges == (-20, -8, 0, 8, 20)
        assert s.per_point == "all" and len(s.digest) == 64

    def test_bracket_bands(self):
        assert parse_study(study_with()).bracket_edges == ()
        s = parse_study(study_with(**{"[points]": "[points]\nbracket_bands = [2, \"0x1p+2\", 16]"}))
        assert s.bracket_edges == (2.0, 4.0, 16.0)

    def test_alpha_is_float32(self):
        s = parse_study(study_with(**{"alpha = [0.25]": "alpha = [0.1]"}))
        assert s.alphas == (float(np.float32(0.1)),)

    @pytest.mark.parametrize("old,new,words", [
        ("seed = 3", "seed = 3\ncolour = 1", ["t.toml", "colour", "unknown key"]),
        ("alpha = [0.25]", "alpha = []", ["points.alpha", "empty axis"]),
        ("alpha = [0.25]", 'alpha = "x"', ["points.alpha", "wrong type"]),
        ("gamma = [2.0, -1.5]", "gamma = [nan]", ["points.gamma", "finite"]),
        ("gamma = [2.0, -1.5]", "gamma = [1e39]", ["points.gamma", "float32"]),
        ('kind = "list"', 'kind = "spiral"', ["pred.kind", "exhaustive"]),
        ('variants = ["kernel", "naive"]', 'variants = ["kernal"]', ["run.variants", "kernal"]),
        ('machines = ["ieee"]', 'machines = ["gpu"]', ["run.machines", "gpu"]),
        ("target = [0, 1]", "target = [0.5]", ["points.target", "int32"]),
        ("[points]", '[points]\nreduction = "avg"', ["points.reduction", "mean"]),
        ("[points]", '[points]\nreduction = "mean"\ncount = 0', ["points.count", "positive"]),
        ("[points]", "[points]\ncount = 4", ["points.count", "mean"]),
        ('"2.5"', '"0x1.gp+0"', ["pred.values", "does not parse"]),
        ("seed = 3", "seed = 3.5", ["seed", "integer"]),
        ("[run]", "[run]\nper_point = \"some\"", ["run.per_point", "over_1ulp"]),
        ("[points]", '[points]\nprofiles = ["fp8"]', ["points.profiles", "fp16"]),
        ("[points]", "[points]\nregions = [0, -1]", ["points.regions", "increasing"]),
        ("[points]", "[points]\nbracket_bands = [4, 2]", ["points.bracket_bands", "increasing"]),
        ("[points]", "[points]\nbracket_bands = [1, 4]", ["points.bracket_bands", "above 1"]),
        ("[points]", '[points]\nbracket_bands = ["x"]', ["points.bracket_bands", "does not parse"]),
        ("name = \"t\"", "name = ", ["TOML syntax"]),
        ("[points]", '[points]\nregion_names = ["a", "b"]', ["points.region_names", "6 names"]),
        ("[points]", '[points]\nregions = [0]\nregion_names = ["a", "a"]', ["points.region_names", "distinct"]),
        ("[points]", '[points]\nregions = [0]\nseparate = ["a"]', ["points.separate", "region_names"]),
        ("[points]", '[points]\nregions = [0]\nregion_names = ["a", "b"]\nseparate = ["c"]',
         ["points.separate", "'c'"]),
        ("[points]", '[points]\nregions = [0]\nregion_names = ["a", "b"]\nseparate = ["a", "b"]',
         ["points.separate", "pooled"]),
        ("[points]", '[points]\nweight = [{ random = 3, low = 2, high = 1 }]', ["points.weight", "0 < L < H"]),
        ("[points]", '[points]\ndout = [{ random = 0, low = 1, high = 2 }]', ["points.dout[0].random", "positive"]),
        ("[points]", '[points]\ndout = [{ random = 2, low = 1, high = 2, seed = 4 }]',
         ["points.dout[0].seed", "unknown key"]),
        ("[run]", "[run]\nthreshold_search = true", ["run.threshold_search", "kernel[G5=always]"]),
        ("[run]", "[run]\nthreshold_search = 1", ["run.threshold_search", "true or false"]),
        ('kind = "list"\nformat = "fp32"\nvalues = ["-0x1.4p+0", "2.5", "0"]',
         'kind = "windows"\nformat = "fp32"\ncancellation = 1.0', ["pred.cancellation", "C > 1"]),
        ('kind = "list"\nformat = "fp32"\nvalues = ["-0x1.4p+0", "2.5", "0"]',
         'kind = "windows"\nformat = "fp32"\nselector = 2', ["pred.selector", "0 (A(x))"]),
    ])
    def test_errors_name_file_key_and_expectation(self, old, new, words):
        with pytest.raises(StudyFileError) as info:
            parse_study(study_with(**{old: new}), "t.toml")
        message = str(info.value)
        assert "\n" not in message and message.startswith("t.toml")
        for w in words:
            assert w in message

    def test_attribution_key(self):
        assert parse_study(BASE).attribution is None
        s = parse_study(study_with(**{"[run]": "[run]\nattribution = true"}))
        assert s.attribution == AttributionSpec((), "kept")
        s = parse_study(study_with(**{"[run]": '[run]\nattribution = { variants = ["kernel"], points = 8 }'}))
        assert s.attribution == AttributionSpec(("kernel",), 8)
        assert parse_study(study_with(**{"[run]": "[run]\nattribution = false"})).attribution is None

    @pytest.mark.parametrize("value,words", [
        ("3", ["run.attribution", "true, false or a table"]),
        ('"kernel"', ["run.attribution", "true, false or a table"]),
        ("{ points = 0 }", ["run.attribution.points", "positive integer"]),
        ('{ points = "some" }', ["run.attribution.points", '"kept"']),
        ("{ points = true }", ["run.attribution.points", "positive integer"]),
        ('{ variants = ["golden"] }', ["run.attribution.variants", "'golden'", "not among the study's variants"]),
        ('{ variants = "kernel" }', ["run.attribution.variants", "wrong type"]),
        ("{ variants = [] }", ["run.attribution.variants", "empty"]),
        ("{ colour = 1 }", ["run.attribution.colour", "unknown key"]),
    ])
    def test_attribution_errors_are_one_line(self, value, words):
        with pytest.raises(StudyFileError) as info:
            parse_study(study_with(**{"[run]": f"[run]\nattribution = {value}"}), "t.toml")
        message = str(info.value)
        assert "\n" not in message and message.startswith("t.toml")
        for w in words:
            assert w in message

    def test_attribution_needs_kept_points(self):
        text = study_with(**{"[run]": '[run]\nattribution = true\nper_point = "none"'})
        with pytest.raises(StudyFileError, match=r"run.attribution: needs per-point rows .*per_point = \"worst\""):
            parse_study(text, "t.toml")

    def test_missing_file(self, tmp_path):
        with pytest.raises(StudyFileError, match="cannot read"):
            load_study(tmp_path / "nope.toml")

    def test_committed_studies_load(self):
        from pathlib import Path
        for path in sorted(Path(__file__).parents[2].joinpath("studies").glob("*.toml")):
            if path.name != "budgets.toml":
                load_study(path)


class TestPredValues:
    def test_exhaustive_fp16_keeps_both_zeros(self):
        s = parse_study(study_with(**{'kind = "list"': 'kind = "exhaustive"', 'format = "fp32"': 'format = "fp16"',
                                      'values = ["-0x1.4p+0", "2.5", "0"]': ""}))
        v = pred_values(s.pred, s.seed)
        assert v.size == 63488 and np.sum(v == 0) == 2
        assert np.all(np.diff(v) >= 0)

    def test_stratified_per_binade_both_signs_seeded(self):
        s = parse_study(study_with(**{'kind = "list"': 'kind = "stratified"',
                                      'values = ["-0x1.4p+0", "2.5", "0"]': "per_binade = 3\nrange = [-100, 100]"}))
        v = pred_values(s.pred, s.seed)
        assert np.array_equal(v, pred_values(s.pred, s.seed))
        assert not np.array_equal(v, pred_values(s.pred, s.seed + 1))
        assert np.all(np.abs(v) <= 100) and np.all(v.astype(np.float32) == v)
        # binades 2^-149 (subnormals) .. 2^6, three each, both signs, plus zero
        pos = v[v > 0]
        binades = np.unique(np.floor(np.log2(pos)).clip(-127))
        assert binades.size == 6 + 127 + 1
        assert abs(pos.size - 3 * binades.size) <= 3

    def test_list_grid_and_distributions_are_exact_in_format(self):
        for pred in ('kind = "grid"\nformat = "fp16"\nstart = -3\nstop = 3\nnum = 101',
                     'kind = "normal"\nformat = "fp16"\nsigma = 4\ncount = 500',
                     'kind = "uniform_real"\nformat = "fp32"\nlow = -1\nhigh = 1\ncount = 500'):
            text = BASE.replace('kind = "list"\nformat = "fp32"\nvalues = ["-0x1.4p+0", "2.5", "0"]', pred)
            s = parse_study(text)
            v = pred_values(s.pred, s.seed)
            fmt = FP16 if 'fp16' in pred else FP32
            assert v.size > 50 and np.all(v.astype(fmt.dtype).astype(np.float64) == v)


class TestAxes:
    def test_random_weights_and_douts_are_seeded_float32_in_range(self):
        text = study_with(**{"[points]": '[points]\nweight = [1.0, { random = 12, low = "0x1p-149", high = "0x1p-100" }]'
                                         '\ndout = [{ random = 5, low = 1.0, high = "0x1p+100" }, 2.0]'})
        s = parse_study(text)
        w, d = np.array(s.weights[1:]), np.array(s.douts[:5])
        assert s.weights[0] == 1.0 and s.douts[5] == 2.0 and w.size == 12
        assert np.all((w >= 2.0 ** -149) & (w <= 2.0 ** -100)) and np.all((d >= 1) & (d <= 2.0 ** 100))
        assert np.all(w.astype(np.float32) == w) and np.all(d.astype(np.float32) == d)
        m, _ = np.frexp(d)
        assert np.sum(m != 0.5) >= 4  # random mantissas, not powers of two
        assert parse_study(text).weights == s.weights  # seeded: the same file gives the same values
        assert parse_study(text.replace("seed = 3", "seed = 4")).weights != s.weights

    def test_region_names_and_separate(self):
        s = parse_study(study_with(**{"[points]": '[points]\nregions = [0, 8]\nregion_names = ["neg", "mid", "hole"]'
                                                  '\nseparate = ["hole"]'}))
        assert s.regions == ["neg", "mid", "hole"] and s.separate == ("hole",)
        assert parse_study(BASE).regions[0] == "x < -20"


class TestWindows:
    TEXT = BASE.replace('kind = "list"\nformat = "fp32"\nvalues = ["-0x1.4p+0", "2.5", "0"]',
                        'kind = "windows"\nformat = "fp32"\nper_window = 2000\ncore = 16\nrange = [-8.0, 18.0]')

    def test_each_gamma_has_its_windows_dense_at_the_roots(self):
        from precision.sigmoid_focal_loss_grad.bracket import cancellation_factor, roots
        from precision.exact.formats import from_ordinal, to_ordinal
        s = parse_study(self.TEXT)
        for g in (-2.0, -1.5):
            v = pred_values(s.pred, s.seed, g)
            assert v.size >= 2000 and np.all(v.astype(np.float32) == v)
            assert np.all((v >= -8) & (v <= 18)) and np.all(np.diff(v) > 0)
            assert np.all(cancellation_factor(v, g) >= 2 * (1 - 1e-6))  # only where the bracket cancels
            (r,) = roots(g, -8, 18)
            o = int(to_ordinal(np.float32([r]), "fp32")[0])
            core = from_ordinal(np.arange(o - 16, o + 17), "fp32").astype(np.float64)
            assert set(core.tolist()) <= set(v.tolist())  # every float32 within 16 ordinals of the root
            assert np.array_equal(v, pred_values(s.pred, s.seed, g))
        assert pred_values(s.pred, s.seed, 2.0).size == 0  # nothing cancels for gamma >= 0
        assert not np.array_equal(pred_values(s.pred, s.seed, -2.0), pred_values(s.pred, s.seed, -1.5))
        with pytest.raises(Exception, match="depends on gamma"):
            pred_values(s.pred, s.seed)

    def test_selector_1_mirrors_the_windows(self):
        s0 = parse_study(self.TEXT)
        s1 = parse_study(self.TEXT.replace("core = 16", "core = 16\nselector = 1\n").replace("[-8.0, 18.0]",
                                                                                          "[-18.0, 8.0]"))
        from precision.sigmoid_focal_loss_grad.bracket import cancellation_factor
        v1 = pred_values(s1.pred, s1.seed, -2.0)
        assert np.all(cancellation_factor(-v1, -2.0) >= 2 * (1 - 1e-6)) and v1.min() < 0
        assert pred_values(s0.pred, s0.seed, -2.0).size > 0

    def test_sweep_computes_each_gammas_own_terms(self, tmp_path):
        from precision.engine.points import study_preds_by_gamma
        from precision.engine.sweep import run_study
        text = self.TEXT.replace("per_window = 2000", "per_window = 300").replace(
            'gamma = [2.0, -1.5]', 'gamma = [-2.0, -1.5]').replace("target = [0, 1]", "target = [0]")
        s = parse_study(text)
        by_gamma = study_preds_by_gamma(s)
        result = run_study(s, tmp_path / "o", cache_dir=tmp_path / "c", workers=1)
        assert result.term_pairs == sum(v.size for v in by_gamma.values())
        assert result.points == sum(v.size for v in by_gamma.values()) * len(s.machines)


class TestPredUnion:
    def test_union_of_sets_and_file_kind(self, tmp_path):
        from precision.engine.points import study_pred_values
        (tmp_path / "corpus.txt").write_text("# worst cases\n0x1.8p+3\n-2.5  # from a gate run\n\n")
        text = BASE.replace('[pred]\nkind = "list"\nformat = "fp32"\nvalues = ["-0x1.4p+0", "2.5", "0"]',
                            '[[pred]]\nkind = "list"\nformat = "fp32"\nvalues = ["-0x1.4p+0", "2.5", "0"]\n'
                            '[[pred]]\nkind = "file"\nformat = "fp32"\npath = "corpus.txt"\n'
                            '[[pred]]\nkind = "stratified"\nformat = "fp32"\nper_binade = 1\nrange = [1, 4]')
        study_file = tmp_path / "s.toml"
        study_file.write_text(text)
        s = load_study(study_file)
        assert len(s.pred_sets) == 3 and s.pred_sets[1].get("values") == (12.0, -2.5)
        v = study_pred_values(s)
        assert {-1.25, 2.5, 0.0, 12.0, -2.5} <= set(v.tolist()) and np.all(np.diff(v) >= 0)
        assert np.sum((v >= 1) & (v < 4) & (v != 2.5)) == 2  # one per binade [1,2), [2,4)

    def test_file_errors_name_the_line(self, tmp_path):
        (tmp_path / "c.txt").write_text("1.0\nbogus\n")
        text = BASE.replace('kind = "list"\nformat = "fp32"\nvalues = ["-0x1.4p+0", "2.5", "0"]',
                            'kind = "file"\npath = "c.txt"')
        (tmp_path / "s.toml").write_text(text)
        with pytest.raises(StudyFileError, match="c.txt line 2"):
            load_study(tmp_path / "s.toml")
