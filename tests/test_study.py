"""Study files: parsing, validation errors naming file and key, point sets."""

import numpy as np
import pytest

from precision.errors import StudyFileError
from precision.formats import FP16, FP32
from precision.study import AttributionSpec, load_study, parse_study, pred_values

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
        for path in sorted(Path(__file__).parents[1].joinpath("studies").glob("*.toml")):
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


class TestPredUnion:
    def test_union_of_sets_and_file_kind(self, tmp_path):
        from precision.study import study_pred_values
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
