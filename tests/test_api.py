"""The public API is exactly what precision.__all__ declares."""

import precision


def test_all_names_exist_and_are_public():
    exported = {name for name in dir(precision) if not name.startswith("_")}
    modules = {"errors", "cli", "exact", "io", "machine", "recipes", "analysis", "sigmoid_focal_loss_grad",
               "engine", "products"}
    assert set(precision.__all__) == exported - modules


def test_public_entry_points():
    import precision.sigmoid_focal_loss_grad.guards
    import precision.sigmoid_focal_loss_grad.oracle

    assert callable(precision.sigmoid_focal_loss_grad.oracle.gradient)
    assert precision.gradient is precision.sigmoid_focal_loss_grad.oracle.gradient
    assert precision.evaluate is precision.sigmoid_focal_loss_grad.guards.evaluate
