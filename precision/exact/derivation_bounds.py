"""The constants of the certified derivation from tabled terms, shared by its numpy definition
(:mod:`precision.exact.terms`) and its compiled pass (:mod:`precision.exact.derive_pass`)."""

__all__ = ["ESTIMATE_REL", "DECIDED_ABOVE", "DECIDED_BELOW", "K_MIN", "EXP_FAR", "EXP_CLAMP"]

#: The widest ball (relative radius) whose centre a point the derivation leaves undecided keeps as its estimate
#: (:func:`precision.exact.terms.derive` with ``certify=False``).
ESTIMATE_REL = 2.0**-40
#: Binade exponents beyond which a derived value is decided as inf / 0 for every sweep format (fp16, bf16,
#: fp32; their ranges end at 2**128 and 2**-149).
DECIDED_ABOVE = 1000
DECIDED_BELOW = -1000
#: The smallest |c * weight * dout| the derivation takes: its product's error term is then a normal float64.
K_MIN = 2.0**-960
#: A term beyond 2**+-EXP_FAR is tabled as its sign and side only, with the exponent +-EXP_CLAMP: no float64
#: weight, dout and count (their product within 2**+-2100) bring it back into any format's range.
EXP_FAR = 4096
EXP_CLAMP = 1 << 40
