"""One report page (Markdown + self-contained HTML) in a folder written atomically, for ``diff`` and ``score``.

The page has the design of a study report (:mod:`precision.products.report.render`):
a first screen (``<div id='first-screen'>``: a title, a description, the
verdict grid or headline blocks), a table of contents, then the body.  Blocks
are :mod:`precision.products.report.document`'s; tables go to ``tables/*.csv``.
:func:`write_folder` builds the whole folder in a temporary sibling and
renames it into place, so a failure leaves the previous folder (or nothing).
"""

from __future__ import annotations

import html
import os
import shutil
import tempfile
from pathlib import Path

from precision.errors import ParameterError
from precision.products.report.document import CSS, Heading, Para, anchor, to_html, to_markdown

__all__ = ["write_page", "write_folder", "require_replaceable"]


def require_replaceable(out, marker: str, option: str = "--out") -> Path:
    """Check that ``out`` may be replaced as a whole: missing, empty, or a previous result (holding ``marker``).

    :func:`write_folder` replaces the whole folder, so a folder holding anything else (``--out out``, the
    folder of every run) is refused up front.

    Raises
    ------
    ParameterError
        A folder with other content.
    """
    out = Path(out)
    if out.is_dir() and any(out.iterdir()) and not (out / marker).is_file():
        raise ParameterError(f"{option}={out} holds other files (no {marker}); this command replaces its folder "
                             "as a whole: give a new folder or one it wrote before")
    return out


def write_page(folder: Path, title: str, description: str, first: list, body: list,
               plot_dir: Path | None = None) -> None:
    """Write ``report.md`` and ``report.html`` into ``folder``.

    Parameters
    ----------
    folder : Path
        An existing folder.
    title, description : str
        The page's heading and the line under it.
    first : list of blocks
        The first screen (after the title).
    body : list of blocks
        The rest; its level-2 headings make the table of contents.
    plot_dir : Path, optional
        Where the blocks' plots are (embedded in the HTML, linked from the Markdown).
    """
    head = [Heading(title, 1), Para(description, "desc")]
    toc = [(b.text, b.id or anchor(b.text)) for b in body if isinstance(b, Heading) and b.level == 2]
    nav_md = "Contents: " + " · ".join(f"[{t}](#{i})" for t, i in toc) + "\n"
    nav_html = ("<nav>Contents: " + "".join(f"<a href='#{html.escape(i, quote=True)}'>{html.escape(t)}</a>"
                                           for t, i in toc) + "</nav>")
    (folder / "report.md").write_text(to_markdown(head + first, plot_dir) + "\n" + nav_md + "\n"
                                      + to_markdown(body, plot_dir))
    page = ("<!DOCTYPE html><html><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
            + "<div id='first-screen'>" + to_html(head + first, plot_dir) + "</div>" + nav_html
            + to_html(body, plot_dir) + "</body></html>\n")
    (folder / "report.html").write_text(page)


def write_folder(out: Path, build) -> Path:
    """Build ``out`` atomically: ``build(tmp)`` fills a temporary sibling, which then replaces ``out``.

    Returns
    -------
    Path
        ``out``.
    """
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        build(tmp)
        os.chmod(tmp, 0o755)
        old = None
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            os.replace(out, old / "r")
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
