"""Errors a user can cause, one flat hierarchy under :class:`PrecisionError`.

Each class mixes in the builtin a caller would expect, so ``except ValueError``
still catches a bad parameter.  Messages are one line: what is wrong
(``name=value``), what was expected, and the fix when it is known.  The CLI
prints that line to stderr and exits with status 2.
"""

__all__ = [
    "INTERRUPTED",
    "PrecisionError",
    "ParameterError",
    "ShapeError",
    "DtypeError",
    "StudyFileError",
    "CacheIntegrityError",
    "OracleUndecidedError",
    "PluginError",
    "RunNote",
]


#: The one line the command prints on Ctrl-C (exit status 130).
INTERRUPTED = "precision: interrupted; rerun the same command to resume"


class PrecisionError(Exception):
    """Base of every error a user of ``precision`` can cause."""


class ParameterError(PrecisionError, ValueError):
    """Raised when a parameter value is outside what the function accepts."""


class ShapeError(PrecisionError, ValueError):
    """Raised when array ranks or shapes break the operator contract."""


class DtypeError(PrecisionError, TypeError):
    """Raised when an array has a dtype the operator contract does not allow."""


class StudyFileError(PrecisionError, ValueError):
    """Raised when a study or budgets file is malformed; names the file and key."""


class CacheIntegrityError(PrecisionError, OSError):
    """Raised when a cache or result file fails its integrity check."""


class OracleUndecidedError(PrecisionError, ArithmeticError):
    """Raised when the oracle cannot decide a rounding within its precision cap."""


class PluginError(PrecisionError, RuntimeError):
    """Raised when a plugin file cannot be loaded or one of its variants misbehaves; names the file."""


class RunNote(UserWarning):
    """Warned when a run does something its user should know and did not ask for: preds left out of a profile
    whose format cannot hold them, workers capped, a point set empty at some attribute value.  The command
    line prints each as one ``note:`` line."""
