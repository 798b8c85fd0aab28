"""precision: numerical-precision analysis of SigmoidFocalLossGrad kernels.

The supported API, re-exported from its modules; everything else is internal.
"""

import importlib as _importlib
import importlib.machinery as _importlib_machinery
import sys as _sys
import warnings as _warnings

#: Where each name of the API lives; imported on first use (PEP 562), so ``import precision`` is cheap and the
#: command line can catch Ctrl-C before numpy, mpmath and the machines load.
_API = {
    "precision.errors": ("CacheIntegrityError", "DtypeError", "OracleUndecidedError", "ParameterError",
                         "PluginError", "PrecisionError", "ShapeError", "StudyFileError"),
    "precision.exact.formats": ("BF16", "FORMATS", "FP16", "FP32", "FP64", "RDN", "RNA", "RNE", "RTZ", "RUP",
                                "Format", "get_format", "ordinal_distance", "round_to_format", "to_ordinal", "ulp"),
    "precision.operators.sigmoid_focal_loss_grad.guards": ("evaluate", "evaluate_variants", "list_variants", "register_variant",
                                                 "trace_variant"),
    "precision.machine": ("Machine", "MachineModel", "get_machine"),
    "precision.operators.sigmoid_focal_loss_grad.oracle": ("exact_gradient",),
    "precision.operators.sigmoid_focal_loss_grad.terms": ("gradient",),
    "precision.analysis.scoring": ("bits_error", "classify", "ulp_error"),
    "precision.analysis.groups": ("summarize",),
}
_HOME = {name: module for module, names in _API.items() for name in names}

__version__ = "0.1.0"

__all__ = [name for names in _API.values() for name in names]


def __getattr__(name):
    """An API name from its module, or a subpackage (``precision.engine``), imported on first use."""
    module = _HOME.get(name)
    if module is None:
        try:
            return _importlib.import_module(f"precision.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"precision.{name}":
                raise
            raise AttributeError(f"module 'precision' has no attribute {name!r}") from None
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))


# ---------------------------------------------------------------------------
# Module paths before the layered layout
# ---------------------------------------------------------------------------

from precision.layout import moved_name as _moved_name  # noqa: E402  (cheap: a dict)


class _MovedModules:
    """Imports a flat-layout module name as the module it became (a meta-path finder and its loader; the
    protocols only, not importlib.abc's classes, which would cost ``import precision`` 11 ms)."""

    def find_spec(self, fullname, path=None, target=None):
        if _moved_name(fullname) is None:
            return None
        return _importlib_machinery.ModuleSpec(fullname, self)

    def __init__(self):
        self._specs = {}

    def create_module(self, spec):
        new = _moved_name(spec.name)
        _warnings.warn(f"{spec.name} is now {new}", DeprecationWarning, stacklevel=2)
        module = _importlib.import_module(new)
        self._specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module):
        # the import machinery gave the module the old name's spec: its own again (one module, one spec)
        module.__spec__ = self._specs.pop(module.__name__)


# first: the path finder would otherwise load an old dotted name below a moved package a second time
_sys.meta_path.insert(0, _MovedModules())
