"""Where each module of the flat layout (before the layered subpackages) lives now.

``precision/__init__.py`` imports an old name (``precision.oracle``) as the module it became, with a
DeprecationWarning; the engine resolves old names in the source of plugin files with :func:`moved_name`.
Imports nothing: the lowest layer.
"""

__all__ = ["MOVED", "moved_name"]

#: Where each top-level module of the flat layout (before the layers) lives now.  ``import precision.oracle``
#: or ``from precision.implementations.common import store_output`` in a user's script or plugin keeps
#: working: the old name is the new module itself (one object, one ``__spec__``), with a DeprecationWarning.
MOVED = {
    "formats": "exact.formats", "certify": "exact.certify", "files": "io.files", "frames": "io.frames",
    "steps": "recipes.steps", "scoring": "analysis.scoring", "standards": "analysis.standards",
    **{name: f"operators.sigmoid_focal_loss_grad.{name}" for name in (
        "oracle", "oracle_arb", "terms", "bracket", "implementations", "guards", "comparisons", "attribution",
        "opcount", "plugins")},
    **{name: f"engine.{name}" for name in (
        "study", "task", "sweep", "cache", "executor", "attribution_table")},
    "threshold_search": "operators.sigmoid_focal_loss_grad.threshold_tasks",
    "sigmoid_focal_loss_grad": "operators.sigmoid_focal_loss_grad",
    **{name: f"products.{name}" for name in ("report", "gate", "diff", "hunt", "score_outputs")},
}


def moved_name(name: str):
    """The current name of a module named in the flat layout (``precision.oracle`` ->
    ``precision.operators.sigmoid_focal_loss_grad.oracle``), or None."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != "precision" or parts[1] not in MOVED:
        return None
    return ".".join(["precision", MOVED[parts[1]], *parts[2:]])
