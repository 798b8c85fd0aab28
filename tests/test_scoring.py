"""Tests of precision.scoring: ulp error, bits, classes, summaries."""

import math

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from precision.scoring import (CLASS_INF, CLASS_NAN, CLASS_OK, CLASS_WRONG_SIGN, assert_max_ulp,
                               bits_error, classify, summarize, ulp_error)


class TestUlpError:
    def test_half_ulp_and_exact(self):
        assert float(ulp_error(np.float32(1.0), 1.0 + 2.0**-24, "fp32")) == 0.5
        assert float(ulp_error(np.float32(1.0), 1.0, "fp32")) == 0.0

    def test_ulp_of_exact_binade_not_of_computed(self):
        # exact just below 2: ulp is 2^-23; computed 2.0 is 2^-24/2^-23 = 0.5 ulp away... of the exact binade
        exact = 2.0 - 2.0**-25
        assert float(ulp_error(np.float32(2.0), exact, "fp32")) == 2.0**-25 / 2.0**-23

    def test_double_double_exact(self):
        hi, lo = 1.0, 2.0**-60
        assert float(ulp_error(np.float32(1.0), (hi, lo), "fp32")) == 2.0**-60 / 2.0**-23

    def test_fp16_subnormal_quantum(self):
        assert float(ulp_error(np.float16(0.0), 3 * 2.0**-24, "fp16")) == 3.0

    def test_specials(self):
        assert float(ulp_error(np.float32(np.nan), 1.0, "fp32")) == math.inf
        assert float(ulp_error(np.float32(np.inf), 1.0, "fp32")) == math.inf
        # the exact value overflows fp16: the correctly rounded value is inf
        assert float(ulp_error(np.float16(np.inf), 70000.0, "fp16")) == 0.0
        assert float(ulp_error(np.float16(65504), 70000.0, "fp16")) == math.inf

    def test_signed_zero_is_no_error(self):
        assert float(ulp_error(np.float32(-0.0), 0.0, "fp32")) == 0.0


class TestBitsError:
    def test_values(self):
        got = bits_error(np.float32([1.0, np.nextafter(np.float32(1), np.float32(2)), np.nan, -0.0]),
                         np.float32([1.0, 1.0, 1.0, 0.0]), "fp32")
        assert_array_equal(got, [0.0, 1.0, 32.0, 0.0])

    def test_fp16_across_zero_does_not_wrap(self):
        assert float(bits_error(np.float16(1000), np.float16(-1000), "fp16")) == pytest.approx(math.log2(51105))


class TestClassify:
    def test_codes(self):
        c = classify(np.float32([1.0, np.nan, np.inf, -2.0, 0.0, np.inf]),
                     np.float32([1.0, 1.0, 3.0, 2.0, -1e-30, np.inf]))
        assert_array_equal(c, [CLASS_OK, CLASS_NAN, CLASS_INF, CLASS_WRONG_SIGN, CLASS_OK, CLASS_OK])


class TestSummarize:
    def test_numbers(self):
        err = np.array([0.0, 0.25, 0.5, 3.0, np.inf])
        bits = np.array([0.0, 0.0, 0.0, 2.0, 32.0])
        cls = np.array([0, 0, 0, 0, CLASS_NAN], dtype=np.int8)
        s = summarize(err, bits, cls)
        assert s.count == 5 and s.max_ulp == math.inf and s.witness == 4
        assert s.mean_ulp == pytest.approx(3.75 / 4)
        assert s.share_correct == 0.6 and s.count_over_1ulp == 2 and s.count_nan == 1
        assert s.mean_bits == pytest.approx(34 / 5)

    def test_witness_is_first_max(self):
        s = summarize(np.array([1.0, 7.0, 7.0]), np.zeros(3), np.zeros(3, np.int8))
        assert s.witness == 1 and s.max_ulp == 7.0 and s.p50_ulp == 7.0

    def test_empty(self):
        assert summarize([], [], []).count == 0


class TestAssertMaxUlp:
    def test_passes_and_fails_with_witness(self):
        assert_max_ulp(np.float32([1.0]), [1.0 + 2.0**-24], "fp32", 0.5)
        with pytest.raises(AssertionError, match=r"max error is 2 ulp at index 1: got 0x1.0000080000000p\+0"):
            assert_max_ulp(np.float32([1.0, 1.0 + 2.0**-21]), [1.0, 1.0 + 2.0**-22], "fp32", 1.0)


class TestHistograms:
    def test_quantile_bounds_are_upper_bounds_within_resolution(self):
        from precision.scoring import HIST_SUBBINS, bin_upper_edge, histogram_bins, quantile_upper_bound
        rng = np.random.default_rng(4)
        err = np.concatenate([np.zeros(500), rng.exponential(2.0, 5000), [np.inf] * 3, [1e300]])
        bins, counts = np.unique(histogram_bins(err), return_counts=True)
        for q in (0.5, 0.99, 0.999):
            exact = np.sort(err)[int(np.ceil(q * err.size)) - 1]
            bound = quantile_upper_bound(bins, counts, q)
            assert exact <= bound <= exact * 2 ** (1 / HIST_SUBBINS) or exact == bound == 0
        assert np.all(err <= bin_upper_edge(histogram_bins(err)))

    def test_vectorized_group_quantiles_match_scalar(self):
        from precision.scoring import histogram_bins, quantile_upper_bound
        from precision.sweep import _histogram_quantiles
        rng = np.random.default_rng(5)
        keys_all, bins_all, counts_all, expected = [], [], [], []
        for k in range(7):
            err = rng.exponential(1.0 + k, 200 + 50 * k)
            b, c = np.unique(histogram_bins(err), return_counts=True)
            keys_all.append(np.full(b.size, k)); bins_all.append(b); counts_all.append(c)
            expected.append([quantile_upper_bound(b, c, q) for q in (0.5, 0.99, 0.999)])
        got = _histogram_quantiles(np.concatenate(keys_all), np.concatenate(bins_all), np.concatenate(counts_all),
                                   (0.5, 0.99, 0.999))
        np.testing.assert_array_equal(got, np.array(expected))
