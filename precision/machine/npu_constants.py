"""Constants of the npu math library (npu_math.md): bit patterns as hex, section numbers as in the spec.

Shared by the numpy definitions (:mod:`precision.machine.npu`) and the compiled passes
(:mod:`precision.machine.npu_fused`) of the float32 Power.
"""

import numpy as np

__all__ = [
    "POW_NAN_BITS", "VDIV_NAN_BITS", "MAX_SUBNORMAL_BITS", "POW_FLT_MIN", "POW_SUBNORMAL_SCALE",
    "POW_SUBNORMAL_SHIFT", "POW_SQRT_HALF_BITS", "POW_EXPONENT_MASK", "POW_LOG_POLY", "POW_LN2_HI",
    "POW_LN2_LO", "POW_EXP_OVERFLOW", "POW_EXP_UNDERFLOW", "LN_SUBNORMAL_SCALE_LOG2",
    "LN_SUBNORMAL_OFFSET_FP32"
]

#: Quiet NaN written by the pow special cases (§2.4), per compute format.
POW_NAN_BITS = {"fp32": 0x7FC00000, "fp16": 0x7E00, "bf16": 0x7FC0}
#: NaN returned by the default (vdiv) Div (§6 doc example), per format.
VDIV_NAN_BITS = {"fp32": 0x7FFFFFFF, "fp16": 0x7FFF, "bf16": 0x7FFF}
#: Largest subnormal bit pattern per format: Exp/Ln FTZ_FALSE compare against
#: it (§6: 0x007FFFFF float, 0x03FF half).
MAX_SUBNORMAL_BITS = {"fp32": 0x007FFFFF, "fp16": 0x03FF}

# Algorithm C (§2), float32 bit patterns / exact values.
POW_FLT_MIN = np.float32(2.0**-126)  # 0x00800000, R0 subnormal test literal 1.175494351e-38f
POW_SUBNORMAL_SCALE = np.float32(2.0**23)  # 0x4B000000, R0 Muls scale (exact)
POW_SUBNORMAL_SHIFT = np.float32(-23.0)  # R0 i0 for scaled inputs
POW_SQRT_HALF_BITS = np.int32(0x3F3504F3)  # R1: 0.70710678f ~ sqrt(1/2)
POW_EXPONENT_MASK = np.int32(-0x00800000)  # R1: 0xFF800000 as int32
POW_LOG_POLY = (  # L10 Horner coefficients, highest order first
    np.float32(0.129394531),  # 0x3E048000
    np.float32(0.141957462),  # 0x3E115D4C
    np.float32(0.200015724),  # 0x3E4CD0EC
    np.float32(0.333333254),  # 0x3EAAAAA8
)
POW_LN2_HI = np.float32(0.693147182)  # 0x3F317218, 21 significant bits
POW_LN2_LO = np.float32(-1.90465421e-9)  # 0xB102E308 = ln2 - LN2_HI (negative; the source's LOG2_LO)
POW_EXP_OVERFLOW = np.float32(88.7228390)  # 0x42B17218 = 88.72283935546875 (source name EXP_MIN_F)
POW_EXP_UNDERFLOW = np.float32(-104.0)  # 0xC2D00000 (source name EXP_OVFL_UNFL_F)

# Ln FTZ_FALSE (§6): scale 2**23 (half: 2**10), offset -ln(2**23) rounded.
LN_SUBNORMAL_SCALE_LOG2 = {"fp32": 23, "fp16": 10}
LN_SUBNORMAL_OFFSET_FP32 = np.float32(-15.9423851528787421)  # 0xC17F1402 = -15.942384719848633
