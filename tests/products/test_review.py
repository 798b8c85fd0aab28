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
