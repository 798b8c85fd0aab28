"""Study files: parsing, validation errors naming file and key, the point axes."""

import numpy as np
import pytest

from precision.errors import StudyFileError
from precision.engine.study import AttributionSpec, load_study, parse_study

from study_support import BASE, study_with  # (this folder is on the path)


class TestParse:
    def test_defaults_and_values(self):
        s = parse_study(BASE, "t.toml")
        assert s.targets == (0, 1) and s.values("alpha") == (0.25,) and s.values("gamma") == (2.0, -1.5)
        assert s.attributes == (("alpha", (0.25,)), ("gamma", (2.0, -1.5))) and s.term_values == (2.0, -1.5)
        assert s.weights == (None,) and s.douts == (1.0,) and s.reduction == "none" and s.count == 1
        assert [p.name for p in s.profiles] == ["fp32"] and s.region_edges == (-20, -8, 0, 8, 20)
        assert s.per_point == "all" and len(s.digest) == 64

    def test_bracket_bands(self):
        assert parse_study(study_with()).bracket_edges == ()
        s = parse_study(study_with(**{"[points]": "[points]\nbracket_bands = [2, \"0x1p+2\", 16]"}))
        assert s.bracket_edges == (2.0, 4.0, 16.0)

    def test_alpha_is_float32(self):
        s = parse_study(study_with(**{"alpha = [0.25]": "alpha = [0.1]"}))
        assert s.values("alpha") == (float(np.float32(0.1)),)

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
