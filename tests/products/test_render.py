"""The committed reports as a reviewer sees them: rendered by headless Chromium, answers on the first screen.

Each committed ``reports/<study>/report.html`` is loaded in a 1280 x 900
window with a probe script appended that records where the answers (the
question and its first answer), the first answer table (a section's answer
grid, the candidate's targets grid or the verdict grid, whichever comes
first) and the first screen's findings sit; the DOM is dumped and the
positions read back.
Chromium is Debian's package (``.ci/run`` installs it); without it the test
is skipped locally and fails in CI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REPORTS = sorted(p for p in (ROOT / "reports").iterdir() if (p / "report.html").is_file())
#: The reviewer's first screen.
WIDTH, HEIGHT = 1280, 900

PROBE = """<script>
(function () {
  function box(el) { if (!el) return null; var r = el.getBoundingClientRect(); return [r.top, r.bottom]; }
  var grid = document.querySelector('[id$="-answer-table"] table, #targets-grid + div table, #verdict-table table');
  var answers = document.getElementById('answers');
  var first = answers ? answers.parentNode.querySelector('#answers ~ ul li') : null;
  var out = {grid: box(grid), findings: box(document.getElementById('findings')),
             answers: box(answers), first_answer: box(first),
             height: window.innerHeight, width: document.documentElement.scrollWidth,
             rows: grid ? grid.querySelectorAll('tbody tr').length : 0,
             grids_scrolling: Array.from(document.querySelectorAll('table.grid')).filter(
                 function (t) { return t.parentNode.scrollWidth > t.parentNode.clientWidth + 1; }).length};
  var pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def render_probe(html: Path, tmp: Path) -> dict:
    """Positions on the first screen of a report page (see the module docstring)."""
    browser = _chromium()
    page = tmp / "page.html"
    page.write_text(html.read_text().replace("</body>", PROBE + "</body>"))
    proc = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp / 'profile'}", f"--window-size={WIDTH},{HEIGHT}",
                           "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    found = re.search(r"<pre id=\"probe\">(.*?)</pre>", proc.stdout)
    assert found, proc.stderr[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"'))


@pytest.fixture(scope="module")
def browser():
    if _chromium() is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed: .ci/run installs Debian's chromium package")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return _chromium()


@pytest.mark.parametrize("report", REPORTS, ids=[p.name for p in REPORTS])
def test_the_answer_opens_the_first_screen_and_the_grid_backs_it(report, browser, tmp_path):
    """The page opens with its question and first answer (both on the first screen), then the grid behind them."""
    probe = render_probe(report / "report.html", tmp_path)
    assert probe["answers"] is not None and probe["first_answer"] is not None, f"{report.name}: no answers"
    assert 0 <= probe["answers"][0] < HEIGHT / 3, f"{report.name}: the answers start at {probe['answers'][0]:.0f} px"
    assert probe["first_answer"][1] <= HEIGHT, (f"{report.name}: the first answer ends at "
                                                f"{probe['first_answer'][1]:.0f} px, below the first screen")
    assert probe["grid"] is not None, f"{report.name}: no verdict table"
    assert probe["rows"] >= 1
    assert probe["grid"][0] > probe["first_answer"][1], f"{report.name}: the grid comes before the answers"
    # nothing makes the page itself wider than the window: wide tables scroll in their own box
    assert probe["width"] <= WIDTH, f"{report.name}: the page is {probe['width']} px wide"
    # the coloured grids (verdicts, targets) wrap their cells: read whole at 1280 px, no scroll bar of their own
    assert probe["grids_scrolling"] == 0, f"{report.name}: {probe['grids_scrolling']} grids scroll sideways"


@pytest.mark.parametrize("report", REPORTS, ids=[p.name for p in REPORTS])
def test_markdown_within_its_size_budget(report):
    """report.md stays readable: long tables are cut at MD_TABLE_ROWS rows with their CSV named."""
    from precision.products.report.document import MD_BUDGET_BYTES, MD_TABLE_ROWS
    md = (report / "report.md").read_text()
    assert len(md.encode()) <= MD_BUDGET_BYTES, report.name
    rows = 0
    for line in md.splitlines() + [""]:
        if line.startswith("|"):
            rows += 1
        else:
            assert rows <= MD_TABLE_ROWS + 2, report.name  # header and rule lines besides the rows
            rows = 0
