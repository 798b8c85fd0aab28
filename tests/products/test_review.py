"""Tests of precision.products.report.review (the review page) and precision.products.report.defects.

A small study (every guard of the kernel removed in turn, the candidate, ieee and npu, fp16 and fp32, two
gammas) is run and reported; the review page built from its report must hold the decisions the rule gives
on its verdicts.csv rows, its defects.csv, links that resolve, and command lines a shell reads as printed.
"""

from __future__ import annotations

import html
import json
import re
import shlex
from pathlib import Path

import pandas as pd
import pytest

from precision.analysis.decision import decide_cell
from precision.io.shell import shell_join
from precision.products.report.review import build_review, page_links, review_data
from test_report import report_of_study

ROOT = Path(__file__).resolve().parents[2]

SMALL = """
name = "small"
description = "every guard removed in turn; ieee and npu"
seed = 0

[pred]
kind = "list"
format = "fp16"
values = ["-0x1.4p+4", "-0x1.8p+3", "-1.0", "0.0", "0x1.4p+0", "3.5", "0x1.0a8p+4", "0x1.5p+4", "0x1.6p+6"]

[points]
target = [0, 1]
alpha = [0.25, 1.0]
gamma = [-1.0, 2.0]
weight = ["none"]
dout = [1.0]
reduction = "none"
profiles = ["fp16", "fp32"]

[run]
variants = ["kernel", "kernel-G1", "kernel-G2", "kernel-G3", "kernel-G4", "kernel-G5", "kernel-G6", "kernel-G7",
            "kernel-G8", "candidate"]
machines = ["ieee", "npu"]
per_point = "worst"

[report]
sections = ["verdicts", "dominant", "summary"]
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory):
    base = tmp_path_factory.mktemp("review")
    folder = report_of_study(base, "small", SMALL)
    build_review(folder.parent)
    return folder.parent


def _verdict_rows(folder: Path, guard: str, machine: str):
    from precision.products.report.review import _guard_rows
    from precision.engine.operators import DEFAULT_OPERATOR, get_operator

    v = pd.read_csv(folder / "tables" / "verdicts.csv", dtype={"region": str})
    return [e for e in _guard_rows(folder.name, v, get_operator(DEFAULT_OPERATOR))
            if e.guard == guard and e.machine == machine]


def test_the_review_files_exist(review):
    for name in ("index.md", "index.html", "review.json"):
        assert (review / name).is_file()


def test_every_decision_is_the_rule_on_its_verdict_rows(review):
    data = json.loads((review / "review.json").read_text())
    assert data["machines"] == ["ieee", "npu"]
    cells = {(d["guard"], d["machine"]): d for d in data["decisions"]}
    assert {g for g, _ in cells} == {f"G{i}" for i in range(1, 9)}
    v = pd.read_csv(review / "small" / "tables" / "verdicts.csv", dtype={"region": str})
    for (guard, machine), d in cells.items():
        rows = _verdict_rows(review / "small", guard, machine)
        assert len(rows) == 2  # fp16 and fp32
        expected = decide_cell(rows)
        assert (d["decision"], d["effect"], d["reason"]) == (expected.decision, expected.effect, expected.reason)
        # the evidence is verdicts.csv's, number for number
        for e in d["evidence"]:
            row = v[(v["region"] == "all") & (v["comparison"] == e["comparison"]) & (v["machine"] == machine)
                    & (v["format"] == e["format"])].iloc[0]
            assert (e["verdict"], e["better"], e["worse"], e["changed"]) == (
                row["verdict"], row["better"], row["worse"], row["changed"])
    # G1 changes no output where it acts (no_effect everywhere): drop
    g1 = v[(v["subject"] == "G1") & (v["region"] == "all")]
    if (g1["verdict"] == "no_effect").all() and g1["exercised"].all():
        assert cells[("G1", "npu")]["decision"] == "drop"
    # G7 acts on no point without a weight: depends, and the reason says why
    assert cells[("G7", "npu")]["decision"] == "depends" and "not exercised" in cells[("G7", "npu")]["reason"]


def test_the_production_device_is_named_and_decided_in_words(review):
    data = json.loads((review / "review.json").read_text())
    assert data["production_model"] == "npu" and "Ascend 950" in data["devices"]["npu"]["device"]
    words = data["production"]
    for d in data["decisions"]:
        if d["machine"] == "npu":
            assert d["guard"] in words
    page = (review / "index.md").read_text()
    assert words in page and page.index(words) < page.index("## Decisions")


def test_the_rule_and_its_thresholds_are_on_the_page(review):
    data = json.loads((review / "review.json").read_text())
    page = html.unescape((review / "index.html").read_text())
    assert data["rule"] in page
    for v in data["thresholds"].values():
        assert f"{v:g}" in data["rule"]


def test_defects_come_from_the_reports_defects_table(review):
    t = pd.read_csv(review / "small" / "tables" / "defects.csv")
    data = json.loads((review / "review.json").read_text())
    assert data["defects"], "the kernel has NaN outputs for gamma < 0 at large x"
    for d in data["defects"]:
        rows = t[(t["format"] == d["format"]) & (t["inputs"] == d["inputs"]) & t["machine"].isin(d["machines"])]
        assert len(rows) == len(d["machines"])
        assert (rows["special"] == d["special"]).all() and (rows["nan"] == d["nan"]).all()
    order = [{"realistic": 0, "large_logits": 1, "negative_gamma": 2}[d["inputs"]] for d in data["defects"]]
    assert order == sorted(order)
    # the report itself opens with them, before the answers
    md = (review / "small" / "report.md").read_text()
    assert md.index("## Answers") < md.index("What does the production kernel get badly wrong") < md.index(
        "Does each guard earn its place")


def _check_links(folder: Path) -> int:
    checked = 0
    for name in ("index.html", "index.md"):
        page = (folder / name).read_text()
        for link in page_links(page):
            path, _, anchor = link.partition("#")
            target = folder / path
            assert target.is_file(), (name, link)
            if anchor and target.suffix == ".html":
                assert f"id='{anchor}'" in target.read_text(), (name, link)
            if anchor and target.suffix == ".md":
                slugs = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                         for h in re.findall(r"^#+ (.*)$", target.read_text(), re.M)}
                assert anchor in slugs, (name, link)
            checked += 1
    return checked


def test_links_resolve_in_a_fresh_reports_folder(review):
    assert _check_links(review) > 10


def test_links_resolve_in_the_committed_reports():
    if not (ROOT / "reports" / "index.html").is_file():
        pytest.skip("reports/index.html not committed")
    assert _check_links(ROOT / "reports") > 10


def test_review_data_is_what_review_json_holds(review):
    data = json.loads((review / "review.json").read_text())
    fresh = review_data(review)
    assert [d["word"] for d in fresh["decisions"]] == [d["word"] for d in data["decisions"]]


def _commands(text: str) -> list:
    return [c for c in re.findall(r"`([^`]+)`", text) if c.startswith("precision ")]


@pytest.mark.parametrize("where", ["fresh", "committed"])
def test_printed_command_lines_are_shell_safe(review, where):
    folders = [review / "small"] if where == "fresh" else sorted(p for p in (ROOT / "reports").iterdir()
                                                                   if p.is_dir())
    commands = []
    for folder in folders:
        commands += _commands((folder / "report.md").read_text())
        fj = json.loads((folder / "findings.json").read_text())
        commands += [a["mechanism"]["explain"] for a in fj.get("answers", [])
                     if (a.get("mechanism") or {}).get("explain")]
    assert commands
    for c in commands:
        assert shell_join(shlex.split(c)) == c, c  # quoted exactly where a POSIX shell needs it
        for word in shlex.split(c):
            if re.search(r"[\[\]*?]", word):
                assert f"'{word}'" in c, c  # a glob character is never bare (zsh: no matches found)


# ---------------------------------------------------------------------------
# G4 per tile assumption (the g4_tiling study): the production tile decides, the one-tile verdict is its bound
# ---------------------------------------------------------------------------

_VERDICT_COLUMNS = ["subject", "comparison", "kind", "with_variant", "without_variant", "machine", "format", "profile",
                    "region", "count", "fired", "changed", "better", "worse", "specials_fixed", "specials_caused",
                    "median_change_bits", "exercised", "not_exercised_because", "verdict"]


def _verdict(with_, machine, fmt, region, count, changed, better, worse, med, verdict, fired=None):
    subject = "G4" if with_ == "kernel" else with_
    kind = "guard" if with_ == "kernel" else "declared"
    return [subject, f"{with_} vs kernel-G4", kind, with_, "kernel-G4", machine, fmt, fmt, region, count,
            count if fired is None and with_ == "kernel" else fired, changed, better, worse, 0, 0, med, True, None,
            verdict]


def _fake_report(out: Path, study: str, rows: list):
    (out / study / "tables").mkdir(parents=True)
    (out / study / "findings.json").write_text("{}")
    pd.DataFrame(rows, columns=_VERDICT_COLUMNS).to_csv(out / study / "tables" / "verdicts.csv", index=False)


@pytest.fixture(scope="module")
def tiled_review(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiled")
    # the whole-task-as-one-tile verdict of a broad study (guard_ablation's figures on npu fp32)
    _fake_report(out, "ablation", [
        _verdict("kernel", "npu", "fp32", "all", 1264590, 40557, 1126, 17518, -22.0, "hurts"),
        _verdict("kernel", "ieee", "fp32", "all", 1264590, 0, 0, 0, None, "no_effect")])
    # the tiling study: production tile and one tile on the same points
    _fake_report(out, "g4_tiling", [
        _verdict("kernel", "npu", "fp32", "all", 110886, 3211, 715, 269, 0.578125, "helps"),
        _verdict("kernel[tile=3008]", "npu", "fp32", "all", 110886, 2379, 11, 269, -16.0, "hurts"),
        _verdict("kernel[tile=3008]", "npu", "fp32", "rare: -80 <= x < -20 (p^g underflows)", 48282, 0, 0, 0, None,
                 "no_effect"),
        _verdict("kernel", "npu", "fp32", "rare: -80 <= x < -20 (p^g underflows)", 48282, 830, 702, 0, 0.578125,
                 "helps"),
        # fp16 (as measured): outputs change only where both sides are over 2^20 ulp: no evidence either way
        _verdict("kernel", "npu", "fp16", "all", 29892, 2241, 0, 0, 0.0, "inconclusive"),
        _verdict("kernel[tile=3200]", "npu", "fp16", "all", 29892, 2241, 0, 0, 0.0, "inconclusive"),
        # the fp32 tile on the fp16 profile is not the production tile there: left out
        _verdict("kernel[tile=3008]", "npu", "fp16", "all", 29892, 5, 5, 0, 1.0, "helps")])
    build_review(out)
    return out


def test_g4_is_decided_at_the_production_tile_with_the_one_tile_bound_beside_it(tiled_review):
    from precision.analysis.decision import Evidence

    data = json.loads((tiled_review / "review.json").read_text())
    cell = next(d for d in data["decisions"] if d["guard"] == "G4" and d["machine"] == "npu")
    at_tile = decide_cell([Evidence("G4", "npu", "fp32", verdict="hurts", count=110886, fired=110886, changed=2379,
                                    better=11, worse=269, median_change_bits=-16.0),
                           Evidence("G4", "npu", "fp16", verdict="inconclusive", count=29892, fired=29892,
                                    changed=2241, median_change_bits=0.0)])
    assert (cell["decision"], cell["effect"], cell["word"]) == ("drop", "strongly", "drop (strongly)")
    assert cell["word"] == at_tile.word
    assert cell["reason"].startswith("at the production tile (3,008 (fp32) / 3,200 (fp16) elements, g4_tiling): "
                                     "drop (strongly): hurts fp32: 11 better / 269 worse, median -16 b")
    assert [p["assumption"] for p in cell["per_tile"]] == ["production tile (3,008 (fp32) / 3,200 (fp16) elements)",
                                                           "whole task as one tile (upper bound)"]
    # the bound: the broad study says drop, the tiling study's own one-tile run says keep: depends on the study
    bound = cell["per_tile"][1]
    assert bound["decision"] == "depends"
    assert "ablation: drop (strongly), hurts fp32: 1,126 better / 17,518 worse, median -22 b" in bound["reason"]
    assert "g4_tiling: keep (slightly), helps fp32: 715 better / 269 worse, median +0.58 b" in bound["reason"]
    # no 'depends on an assumption' left where the production tile was measured
    assert "assumption" not in (cell["on"] or "")
    assert "G4 (strongly) at the production tile" in data["production"]
    # a machine the tiling study did not run keeps the one-tile verdict, labelled as resting on it
    ieee = next(d for d in data["decisions"] if d["guard"] == "G4" and d["machine"] == "ieee")
    assert ieee["per_tile"] is None and ieee["decision"] == "depends" and "one tile" in ieee["reason"]


def test_the_review_page_names_the_tile_in_g4s_cell_and_table(tiled_review):
    page = (tiled_review / "index.md").read_text()
    row = next(line for line in page.splitlines() if line.startswith("| G4 "))
    cells = row.split(" | ")
    npu = cells[2]  # guard, ieee, npu
    assert npu.startswith("**drop (strongly)**: at tile 3,008 / 3,200: drop (strongly), hurts fp32: 11 better / "
                          "269 worse, median -16 b; one tile (upper bound): depends, ")
    assert "## G4 per tile assumption: the production tile and the one-tile upper bound" in page
    assert ("| npu | fp32 | rare: -80 <= x < -20 (p^g underflows) | no effect (0 of 48,282 changed) | helps: 702 "
            "better / 0 worse of 830 changed, median +0.58 b |") in page
    assert ("| npu | fp16 | all | inconclusive: 0 better / 0 worse of 2,241 changed, median +0 b | inconclusive: 0 "
            "better / 0 worse of 2,241 changed, median +0 b |") in page
    html_page = (tiled_review / "index.html").read_text()
    assert "id='tiling-g4'" in html_page and "at tile 3,008 / 3,200" in html_page
