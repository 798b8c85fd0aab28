"""The public API is exactly what precision.__all__ declares."""

import pytest

import precision


def test_all_names_exist_and_are_public():
    exported = {name for name in dir(precision) if not name.startswith("_")}
    modules = {"errors", "cli", "exact", "io", "machine", "recipes", "analysis", "operators", "sigmoid_focal_loss_grad",
               "engine", "products", "layout"}
    assert set(precision.__all__) == exported - modules


def test_public_entry_points():
    import precision.operators.sigmoid_focal_loss_grad.guards
    import precision.operators.sigmoid_focal_loss_grad.oracle
    import precision.operators.sigmoid_focal_loss_grad.terms

    # the batch gradient is the certified fast path; the mpmath reference stays in oracle
    assert callable(precision.operators.sigmoid_focal_loss_grad.oracle.gradient)
    assert precision.gradient is precision.operators.sigmoid_focal_loss_grad.terms.gradient
    assert precision.exact_gradient is precision.operators.sigmoid_focal_loss_grad.oracle.exact_gradient
    assert precision.evaluate is precision.operators.sigmoid_focal_loss_grad.guards.evaluate


def test_flat_layout_module_names_still_import():
    """Scripts and plugins written against the flat layout (``precision.oracle``) keep working."""
    import importlib
    import warnings

    from precision.operators.sigmoid_focal_loss_grad import oracle
    from precision.operators.sigmoid_focal_loss_grad.implementations import common

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = importlib.import_module("precision.oracle")
        from precision.implementations.common import store_output
    assert old is oracle and store_output is common.store_output
    assert old.__spec__.name == "precision.operators.sigmoid_focal_loss_grad.oracle"  # one module, its own spec
    with pytest.warns(DeprecationWarning, match="precision.scoring is now precision.analysis.scoring"):
        assert precision.scoring is importlib.import_module("precision.analysis.scoring")  # attribute access
    assert [str(w.message) for w in caught if w.category is DeprecationWarning] == [
        "precision.oracle is now precision.operators.sigmoid_focal_loss_grad.oracle",
        "precision.implementations is now precision.operators.sigmoid_focal_loss_grad.implementations",
        "precision.implementations.common is now precision.operators.sigmoid_focal_loss_grad.implementations.common"]
    for missing in ("precision.no_such_module", "precision.oracle.no_such_module"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(missing)
