"""Point sets of a study (precision.engine.points): pred values, gamma-dependent windows, unions."""

import numpy as np
import pytest

from precision.errors import StudyFileError
from precision.exact.formats import FP16, FP32
from precision.engine.study import load_study, parse_study
from precision.engine.points import pred_values
from study_support import BASE, study_with  # (this folder is on the path)


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


class TestWindows:
    TEXT = BASE.replace('kind = "list"\nformat = "fp32"\nvalues = ["-0x1.4p+0", "2.5", "0"]',
                        'kind = "windows"\nformat = "fp32"\nper_window = 2000\ncore = 16\nrange = [-8.0, 18.0]')

    def test_each_gamma_has_its_windows_dense_at_the_roots(self):
        from precision.operators.sigmoid_focal_loss_grad.bracket import cancellation_factor, roots
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
        from precision.operators.sigmoid_focal_loss_grad.bracket import cancellation_factor
        v1 = pred_values(s1.pred, s1.seed, -2.0)
        assert np.all(cancellation_factor(-v1, -2.0) >= 2 * (1 - 1e-6)) and v1.min() < 0
        assert pred_values(s0.pred, s0.seed, -2.0).size > 0

    def test_sweep_computes_each_gammas_own_terms(self, tmp_path):
        from precision.engine.points import study_preds_by_term
        from precision.engine.sweep import run_study
        text = self.TEXT.replace("per_window = 2000", "per_window = 300").replace(
            'gamma = [2.0, -1.5]', 'gamma = [-2.0, -1.5]').replace("target = [0, 1]", "target = [0]")
        s = parse_study(text)
        by_gamma = study_preds_by_term(s)
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
