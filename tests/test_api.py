"""The public API is exactly what precision.__all__ declares."""

import precision


def test_all_names_exist_and_are_public():
    exported = {name for name in dir(precision) if not name.startswith("_")}
    modules = {"errors", "formats", "oracle", "scoring", "cli", "implementations", "machine", "guards",
               "terms", "cache", "study", "sweep", "executor", "gate", "report", "oracle_arb", "bracket",
               "opcount", "hunt", "comparisons", "certify", "steps", "attribution", "task", "attribution_table",
               "plugins", "diff", "score_outputs", "frames", "threshold_search", "standards", "files"}
    assert set(precision.__all__) == exported - modules


def test_public_entry_points():
    assert callable(precision.oracle.gradient)
    assert precision.gradient is precision.oracle.gradient
    assert precision.evaluate is precision.guards.evaluate
