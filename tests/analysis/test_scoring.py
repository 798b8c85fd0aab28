"""Tests of precision.analysis.scoring: ulp error, bits of error, classes, the test assertion."""

import math

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from precision.operators.sigmoid_focal_loss_grad.guards import evaluate
from precision.operators.sigmoid_focal_loss_grad.oracle import gradient
from precision.analysis.scoring import (CLASS_INF, CLASS_LOST_INF, CLASS_NAN, CLASS_OK, CLASS_WRONG_SIGN,
                                        assert_max_ulp, bits_error, classify, error_bits, ulp_error)


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
        c = classify(np.float32([1.0, np.nan, np.inf, -2.0, 0.0, np.inf, np.inf, 3.0e38, 0.0]),
                     np.float32([1.0, 1.0, 3.0, 2.0, -1e-30, np.inf, -np.inf, np.inf, np.inf]))
        assert_array_equal(c, [CLASS_OK, CLASS_NAN, CLASS_INF, CLASS_WRONG_SIGN, CLASS_OK, CLASS_OK,
                               CLASS_WRONG_SIGN, CLASS_LOST_INF, CLASS_LOST_INF])

    # Real operator points of each special class, found by sweeping kernel / naive over fp16 preds
    # (hex inputs; profile pred/dout; ieee machine).
    REAL = [
        # NaN where the exact value is a structural zero (alpha 0, t = 0): 0 * inf in the unselected algebra
        ("kernel", "-0x1.fcp+15", 0, 0.0, -2.0, "0x1p+0", "fp16", CLASS_NAN),
        # +inf where the correctly rounded value is -inf (the sign of an overflowing result is lost)
        ("kernel", "-0x1.6p+5", 1, 0.0, -2.0, "0x1p+0", "fp16", CLASS_WRONG_SIGN),
        # finite, of the wrong sign: +1.29e19 where the exact value is -1.29e19
        ("kernel", "-0x1.6p+5", 1, 0.0, -2.0, "0x1p+0", "fp32", CLASS_WRONG_SIGN),
        # a truncating store (G8 off) gives -65504 where the correctly rounded value is -inf
        ("naive", "-0x1.134p+4", 1, 0.0, -2.0, "0x1p+0", "fp16", CLASS_LOST_INF),
        ("kernel-G8", "-0x1.134p+4", 1, 0.0, -2.0, "0x1p+0", "fp16", CLASS_LOST_INF),
        # +inf where the correctly rounded value is 60000: the kernel's q = 1 - p is 7.75x too large
        ("kernel", "0x1.0ap+4", 0, 0.25, 2.0, "-0x1.2ec7c6p+88", "fp16/fp32", CLASS_INF),
    ]

    @pytest.mark.parametrize("variant,pred,t,alpha,gamma,dout,profile,expected", REAL)
    def test_real_operator_points(self, variant, pred, t, alpha, gamma, dout, profile, expected):
        fmt, dfmt = (profile.split("/") + [profile])[:2]
        dtype = {"fp16": np.float16, "fp32": np.float32}
        x = np.array([[float.fromhex(pred)]], dtype[fmt])
        d = np.array([[float.fromhex(dout)]], dtype[dfmt])
        got = evaluate(variant, x, np.array([[t]], np.int32), d, alpha=alpha, gamma=gamma, reduction="none",
                       machine="ieee")
        rounded = gradient(float(x[0, 0]), t, alpha, gamma, dout=float(d[0, 0]), fmt=fmt)
        assert int(classify(got, rounded)[0, 0]) == expected
        assert float(ulp_error(got, float(gradient(float(x[0, 0]), t, alpha, gamma, dout=float(d[0, 0]),
                                                    fmt="fp64")), fmt, rounded)[0, 0]) > 1


class TestErrorBits:
    def test_values(self):
        assert_array_equal(error_bits([0.0, 1.0, 3.0, np.inf, np.nan]), [0.0, 1.0, 2.0, np.inf, np.inf])


class TestAssertMaxUlp:
    def test_passes_and_fails_with_witness(self):
        assert_max_ulp(np.float32([1.0]), [1.0 + 2.0**-24], "fp32", 0.5)
        with pytest.raises(AssertionError, match=r"max error is 2 ulp at index 1: got 0x1.0000080000000p\+0"):
            assert_max_ulp(np.float32([1.0, 1.0 + 2.0**-21]), [1.0, 1.0 + 2.0**-22], "fp32", 1.0)
