"""The report as a list of blocks, written side by side as Markdown and self-contained HTML.

A section (:mod:`precision.products.report.sections`) returns :class:`Section`: the
blocks of its first-screen part, the blocks of its body, its tables (written
as CSV) and its findings.  :func:`to_markdown` and :func:`to_html` render the
same blocks; HTML embeds plots as base64 PNG, escapes every string, lets wide
tables scroll inside their own box and folds :class:`Details` into
``<details>``.
"""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from precision.products.report.findings import fmt_num

__all__ = ["Heading", "Para", "Bullets", "Table", "Image", "Details", "Code", "Section", "to_markdown", "to_html",
           "CSS", "cell_text", "anchor"]


@dataclass
class Heading:
    text: str
    level: int = 2
    id: str | None = None


@dataclass
class Para:
    text: str
    cls: str | None = None


@dataclass
class Bullets:
    items: list


@dataclass
class Table:
    """A table shown in the page; ``styles`` (same shape, CSS classes or "") colours HTML cells."""

    frame: pd.DataFrame
    csv: str | None = None
    note: str = ""
    styles: pd.DataFrame | None = None
    id: str | None = None


@dataclass
class Image:
    stem: str | None
    caption: str


@dataclass
class Details:
    """A collapsible part (``<details>`` in HTML; a sub-heading in Markdown)."""

    summary: str
    blocks: list


@dataclass
class Code:
    text: str


@dataclass
class Section:
    """What one report section contributes.

    Attributes
    ----------
    id, title : str
        Anchor and heading of the section's body.
    first : list
        Blocks for the first screen (a verdict grid, headline lines), may be empty.
    body : list
        The section's blocks below the first screen.
    tables : dict of str to pandas.DataFrame
        CSV files of ``tables/`` (name without folder, e.g. ``verdicts.csv``).
    findings : list of precision.products.report.findings.Finding
        Computed sentences; the most important (lowest ``rank``) reach the first screen.
    answers : list of precision.products.report.answers.Answer
        The section's answers to its question (the page opens with the headline ones).
    terms : list of str
        Words of the glossary (:mod:`precision.products.report.glossary`) the section's blocks use.
    """

    id: str
    title: str
    first: list = field(default_factory=list)
    body: list = field(default_factory=list)
    tables: dict = field(default_factory=dict)
    findings: list = field(default_factory=list)
    answers: list = field(default_factory=list)
    terms: list = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.first or self.body or self.findings or self.answers)


def anchor(text: str) -> str:
    """An HTML id from a heading."""
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")


def cell_text(v) -> str:
    """The one spelling of a table cell (numbers by :func:`fmt_num`)."""
    if isinstance(v, str):
        return v
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return ""
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer, float, np.floating)):
        return fmt_num(v)
    return str(v)


def _md_table(frame: pd.DataFrame) -> str:
    cols = list(frame.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(cell_text(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines)


#: The Markdown shows at most this many rows of a table that has its CSV (the rest: the CSV, and the HTML page
#: behind a fold), so that a report.md stays within MD_BUDGET_BYTES.
MD_TABLE_ROWS = 30
#: The size budget of a report.md (tests/products/test_render.py checks every committed one).
MD_BUDGET_BYTES = 256 * 1024


def to_markdown(blocks, plot_dir: Path | None = None) -> str:
    """Markdown of the blocks (plots linked from ``plots/``; tables past :data:`MD_TABLE_ROWS` rows cut there,
    their CSV named)."""
    out = []
    for b in blocks:
        if isinstance(b, Heading):
            out.append("#" * b.level + " " + b.text + "\n")
        elif isinstance(b, Para):
            out.append(b.text + "\n")
        elif isinstance(b, Bullets):
            out.append("\n".join(f"- {t}" for t in b.items) + "\n")
        elif isinstance(b, Table):
            long = b.csv and len(b.frame) > MD_TABLE_ROWS
            out.append(_md_table(b.frame.head(MD_TABLE_ROWS) if long else b.frame) + "\n")
            if long:
                out.append(f"First {MD_TABLE_ROWS} of {fmt_num(len(b.frame))} rows; full table: "
                           f"`tables/{b.csv}`{b.note}\n")
            elif b.csv:
                out.append(f"Full table: `tables/{b.csv}`{b.note}\n")
        elif isinstance(b, Image):
            if b.stem:
                out.append(f"![{b.caption}](plots/{b.stem}.png)\n\n*{b.caption}* (also `plots/{b.stem}.svg`)\n")
        elif isinstance(b, Details):
            out.append(f"**{b.summary}**\n")
            out.append(to_markdown(b.blocks, plot_dir))
        elif isinstance(b, Code):
            out.append("```\n" + b.text + "\n```\n")
    return "\n".join(out)


#: Tables of at most this many rows wrap their cells to the page's width (:func:`_html_table`).
SHORT_TABLE_ROWS = 8


def _html_table(b: Table) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in b.frame.columns)
    rows = []
    styles = b.styles.to_numpy() if b.styles is not None else None
    for i, row in enumerate(b.frame.itertuples(index=False)):
        cells = []
        for j, v in enumerate(row):
            cls = styles[i, j] if styles is not None else ""
            attr = f" class='{html.escape(cls, quote=True)}'" if cls else ""
            cells.append(f"<td{attr}>{html.escape(cell_text(v))}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    ident = f" id='{b.id}'" if b.id else ""
    # a coloured grid (verdicts, targets) or a short table (an answer's: a few rows of long cells) wraps its
    # cells to the page's width; a long table scrolls in its own box
    grid = " class='grid'" if styles is not None or len(b.frame) <= SHORT_TABLE_ROWS else ""
    table = f"<div class='scroll'{ident}><table{grid}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table></div>"
    if b.csv:
        table += f"<p class='note'>Full table: tables/{html.escape(b.csv)}{html.escape(b.note)}</p>"
    return table


def _inline_code(text: str) -> str:
    """Escaped text with each `...` span (a command line) as <code>, as Markdown shows it."""
    parts = html.escape(text).split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: plain text
        return html.escape(text)
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def to_html(blocks, plot_dir: Path | None = None, folded: bool = False) -> str:
    """HTML of the blocks (plots embedded from ``plot_dir`` as base64 PNG).  A table of more than
    :data:`MD_TABLE_ROWS` rows that is not a coloured grid goes behind a fold of its own (unless ``folded``:
    it already is, inside a Details), its row count and CSV on the fold's line."""
    out = []
    for b in blocks:
        if isinstance(b, Heading):
            ident = f" id='{b.id or anchor(b.text)}'"
            out.append(f"<h{b.level}{ident}>{html.escape(b.text)}</h{b.level}>")
        elif isinstance(b, Para):
            cls = f" class='{b.cls}'" if b.cls else ""
            out.append(f"<p{cls}>{html.escape(b.text)}</p>")
        elif isinstance(b, Bullets):
            out.append("<ul>" + "".join(f"<li>{_inline_code(t)}</li>" for t in b.items) + "</ul>")
        elif isinstance(b, Table):
            if not folded and b.styles is None and len(b.frame) > MD_TABLE_ROWS:
                where = f" (tables/{html.escape(b.csv)})" if b.csv else ""
                out.append(f"<details><summary>Show the table: {fmt_num(len(b.frame))} rows{where}</summary>"
                           f"{_html_table(b)}</details>")
            else:
                out.append(_html_table(b))
        elif isinstance(b, Image):
            if b.stem:
                data = base64.b64encode((plot_dir / f"{b.stem}.png").read_bytes()).decode("ascii")
                out.append(f"<figure><img alt='{html.escape(b.caption, quote=True)}' "
                           f"src='data:image/png;base64,{data}'><figcaption>{html.escape(b.caption)}</figcaption>"
                           f"</figure>")
        elif isinstance(b, Details):
            out.append(f"<details><summary>{html.escape(b.summary)}</summary>{to_html(b.blocks, plot_dir, True)}"
                       "</details>")
        elif isinstance(b, Code):
            out.append(f"<pre>{html.escape(b.text)}</pre>")
    return "\n".join(out)


#: The page's style: compact tables that scroll in their own box (coloured grids wrap to the page's width instead:
#: no horizontal scroll on a first screen at 1280 px), coloured verdict cells.
CSS = ("body{font-family:sans-serif;max-width:1240px;margin:auto;padding:0 1em;font-size:14px;line-height:1.35}"
       "h1{font-size:22px;margin:.4em 0 .1em}h2{font-size:17px;margin:.8em 0 .3em}h3{font-size:15px}"
       ".desc{color:#444;margin:.1em 0 .4em}p.question{font-weight:bold;margin:.5em 0 .1em}"
       "code{font-size:11px;background:#f4f4f4;padding:0 2px}"
       ".scroll{overflow-x:auto;max-width:100%;margin:.2em 0}"
       "table{border-collapse:collapse;font-size:11px;white-space:nowrap}td,th{border:1px solid #ccc;padding:1px 5px}"
       "th{background:#f0f0f0;position:sticky;top:0}"
       "table.grid{white-space:normal;width:100%}table.grid td{vertical-align:top}"
       "td.helps,td.met{background:#c8ecc8}td.hurts,td.missed{background:#f5c0c0}td.mixed{background:#f9dca4}"
       "td.inconclusive{background:#e8e8e8}td.no_effect{color:#777}td.na{color:#bbb}"
       "img{max-width:100%}pre{background:#f4f4f4;padding:.5em;overflow-x:auto;font-size:11px}"
       ".note{font-size:11px;color:#555;margin:.1em 0 .5em}.rule{font-size:12px;color:#333}"
       "ul{margin:.2em 0;padding-left:1.3em}li{margin:.1em 0}"
       "nav{font-size:12px;border-top:1px solid #ccc;border-bottom:1px solid #ccc;padding:.3em 0;margin:1em 0}"
       "nav a{margin-right:1em}details{margin:.4em 0}summary{cursor:pointer;color:#035}"
       "figure{margin:.5em 0}figcaption{font-size:12px;color:#444}")
