"""Exact arithmetic: the number formats and certified rounding.

:mod:`~precision.exact.formats` defines the formats (fp16, bf16, fp32,
fp64), exact rounding of mpmath values into them and ULP ordinals (int64);
:mod:`~precision.exact.certify` escalates precision until a rounding is
decided.  The lowest layer: imports nothing of ``precision`` but
:mod:`precision.errors`.
"""
