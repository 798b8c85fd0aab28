"""Tests of precision.analysis.histograms: quantile bounds and their vectorised form."""


import numpy as np



class TestHistograms:
    def test_quantile_bounds_are_upper_bounds_within_resolution(self):
        from precision.analysis.histograms import HIST_SUBBINS, bin_upper_edge, histogram_bins, quantile_upper_bound
        rng = np.random.default_rng(4)
        err = np.concatenate([np.zeros(500), rng.exponential(2.0, 5000), [np.inf] * 3, [1e300]])
        bins, counts = np.unique(histogram_bins(err), return_counts=True)
        for q in (0.5, 0.99, 0.999):
            exact = np.sort(err)[int(np.ceil(q * err.size)) - 1]
            bound = quantile_upper_bound(bins, counts, q)
            assert exact <= bound <= exact * 2 ** (1 / HIST_SUBBINS) or exact == bound == 0
        assert np.all(err <= bin_upper_edge(histogram_bins(err)))

    def test_vectorized_group_quantiles_match_scalar(self):
        from precision.analysis.histograms import histogram_bins, histogram_quantiles, quantile_upper_bound
        rng = np.random.default_rng(5)
        keys_all, bins_all, counts_all, expected = [], [], [], []
        for k in range(7):
            err = rng.exponential(1.0 + k, 200 + 50 * k)
            b, c = np.unique(histogram_bins(err), return_counts=True)
            keys_all.append(np.full(b.size, k)); bins_all.append(b); counts_all.append(c)
            expected.append([quantile_upper_bound(b, c, q) for q in (0.5, 0.99, 0.999)])
        got = histogram_quantiles(np.concatenate(keys_all), np.concatenate(bins_all), np.concatenate(counts_all),
                                  (0.5, 0.99, 0.999))
        np.testing.assert_array_equal(got, np.array(expected))
