"""precision: numerical-precision analysis of SigmoidFocalLossGrad kernels.

The supported API, re-exported from its modules; everything else is internal.
"""

from precision.errors import (CacheIntegrityError, DtypeError, OracleUndecidedError, ParameterError, PluginError,
                              PrecisionError, ShapeError, StudyFileError)
from precision.formats import (BF16, FORMATS, FP16, FP32, FP64, RDN, RNA, RNE, RTZ, RUP, Format,
                               get_format, ordinal_distance, round_to_format, to_ordinal, ulp)
from precision.guards import evaluate, evaluate_variants, list_variants, register_variant, trace_variant
from precision.machine import Machine, MachineModel, get_machine
from precision.oracle import exact_gradient, gradient
from precision.scoring import bits_error, classify, summarize, ulp_error

__version__ = "0.1.0"

__all__ = [
    "BF16", "FORMATS", "FP16", "FP32", "FP64", "Format", "RDN", "RNA", "RNE", "RTZ", "RUP",
    "get_format", "ordinal_distance", "round_to_format", "to_ordinal", "ulp",
    "exact_gradient", "gradient",
    "evaluate", "evaluate_variants", "list_variants", "register_variant", "trace_variant",
    "Machine", "MachineModel", "get_machine",
    "bits_error", "classify", "summarize", "ulp_error",
    "CacheIntegrityError", "DtypeError", "OracleUndecidedError", "ParameterError", "PluginError",
    "PrecisionError", "ShapeError", "StudyFileError",
]
