"""The page's blocks as Markdown and HTML: long tables cut (Markdown) and folded (HTML), grids never."""

import pandas as pd

from precision.products.report.document import MD_TABLE_ROWS, Details, Table, to_html, to_markdown


def _table(n: int, styles: bool = False) -> Table:
    frame = pd.DataFrame({"k": range(n), "v": [0.5] * n})
    return Table(frame, "t.csv", styles=frame.astype(str).map(lambda _: "helps") if styles else None)


def test_a_long_table_is_folded_in_html_and_cut_in_markdown():
    page = to_html([_table(MD_TABLE_ROWS + 1)])
    assert page.startswith(f"<details><summary>Show the table: {MD_TABLE_ROWS + 1} rows (tables/t.csv)</summary>")
    assert page.count("<tr>") == MD_TABLE_ROWS + 2  # the header and every row, behind the fold
    md = to_markdown([_table(MD_TABLE_ROWS + 1)])
    assert md.count("\n| ") == MD_TABLE_ROWS and f"First {MD_TABLE_ROWS} of {MD_TABLE_ROWS + 1} rows" in md


def test_short_tables_grids_and_tables_already_folded_are_not_folded_again():
    assert "<details>" not in to_html([_table(MD_TABLE_ROWS)])
    assert "<details>" not in to_html([_table(MD_TABLE_ROWS + 5, styles=True)])
    nested = to_html([Details("more", [_table(MD_TABLE_ROWS + 5)])])
    assert nested.count("<details>") == 1
