"""Tests of precision.products.report: files, self-contained HTML, escaping, findings citing table numbers.

A tiny study is run into a temporary folder and reported; the slow test checks
that committed reports under reports/ match what the code regenerates from a
fresh run of their committed study files (numbers, not image bytes).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from precision.cli import main
from precision.products.report import build_report
from precision.products.report.tables import fmt_num
from precision.engine.study import load_study
from precision.engine.sweep import run_study
from report_support import check_findings

ROOT = Path(__file__).resolve().parents[2]

TINY = """
name = "tiny"
description = "tiny <script>alert('x')</script> & \\"quotes\\""
seed = 0

[[pred]]
kind = "list"
format = "fp32"
values = ["-0x1.8p+3", "-1.0", "-0x1.cp-1", "0.0", "0x1.4p+0", "3.5", "17.0", "40.0"]

[[pred]]
kind = "windows"
format = "fp32"
range = [-8, 8]
per_window = 6
core = 2

[points]
target = [0, 1]
alpha = [0.25]
gamma = [-1.0, 2.0]
weight = [1.0, "0x1p-140"]
dout = [1.0, "0x1p+100"]
reduction = "none"
profiles = ["fp32"]

[run]
variants = ["naive", "naive+G7", "kernel-G7", "kernel", "kernel[G5=never]", "kernel[G5=2^-6]", "kernel[G5=always]"]
machines = ["ieee", "npu+ftz"]
per_point = "all"

[report]
sections = ["verdicts", "threshold", "recovery", "dominant", "summary", "ablation", "selector"]
"""


def report_of_study(base: Path, name: str, text: str) -> Path:
    """Write the study file ``base/<name>.toml``, run it into ``base/runs`` (one worker, cache in ``base``) and
    build its report into ``base/reports``; the report folder."""
    (base / f"{name}.toml").write_text(text)
    run_study(load_study(base / f"{name}.toml"), base / "runs" / name, cache_dir=base / "cache", workers=1)
    return build_report(name, base / "runs", base / "reports")


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    base = tmp_path_factory.mktemp("report")
    return report_of_study(base, "tiny", TINY)


class TestBuildReport:
    def test_every_table_and_plot_exists(self, tiny_report):
        for name in ("verdicts", "dominant", "summary", "by_selector", "ablation", "ablation_gamma", "threshold",
                     "cancellation_window", "recovery", "recovery_g7", "recovery_weight"):
            assert (tiny_report / "tables" / f"{name}.csv").is_file(), name
        for stem in ("ulp_vs_pred", "heatmap_pred_gamma", "error_ecdf", "ablation_fp32", "threshold",
                     "recovery"):
            for ext in ("png", "svg"):
                assert (tiny_report / "plots" / f"{stem}.{ext}").stat().st_size > 0, stem
        for name in ("report.md", "report.html", "findings.json"):
            assert (tiny_report / name).is_file()

    def test_threshold_table_counts_where_g5_fired_and_what_changed(self, tiny_report):
        t = pd.read_csv(tiny_report / "tables" / "threshold.csv")
        pooled = t[t["subset"] == "pooled"].set_index(["machine", "threshold"])
        assert pooled.index.is_unique  # one row per threshold: the variants of the threshold comparisons only
        for machine in ("ieee", "npu+ftz"):
            never, always, prod = (pooled.loc[(machine, k)] for k in ("never", "always", "2^-6"))
            assert never["fired"] == 0 and never["changed"] == 0
            assert always["fired"] > prod["fired"] > 0  # a larger threshold passes the test more often
            assert prod["changed"] == prod["changed_vs_never"] <= prod["fired"]  # G5 changes only where it fires
            assert prod["better_vs_never"] + prod["worse_vs_never"] <= prod["changed"]

    def test_cancellation_window_counts_points_once_and_fires_per_machine(self, tiny_report):
        w = pd.read_csv(tiny_report / "tables" / "cancellation_window.csv").set_index("gamma")
        # gamma = -1: 8 listed preds + 6 window preds; x 2 targets x 2 weights x 2 douts, counted once
        assert w.loc[-1.0, "points_pooled"] == 14 * 8 and w.loc[2.0, "points_pooled"] == 8 * 8
        assert w.loc[2.0, "windows"] == "none" and w.loc[-1.0, "windows"] != "none"
        fired = [c for c in w.columns if c.startswith("fired_1/64_")]
        assert fired == ["fired_1/64_ieee_pooled", "fired_1/64_npu+ftz_pooled"]
        assert (w.loc[2.0, fired] == 0).all() and (w.loc[-1.0, fired] > 0).all()

    def test_html_is_self_contained(self, tiny_report):
        page = (tiny_report / "report.html").read_text()
        assert not re.search(r"""(src|href)\s*=\s*['"]?\s*(https?:)?//""", page)
        assert "<link" not in page and "<script" not in page
        assert page.count("data:image/png;base64,") >= 5

    def test_study_strings_are_escaped(self, tiny_report):
        page = (tiny_report / "report.html").read_text()
        assert "&lt;script&gt;alert(" in page
        assert "&amp;" in page

    def test_findings_cite_table_numbers(self, tiny_report):
        assert check_findings(tiny_report) > 20

    def test_sections_in_the_study_files_order(self, tiny_report):
        md = (tiny_report / "report.md").read_text()
        body = md[md.index("Contents:"):]
        heads = [line[3:] for line in body.splitlines() if line.startswith("## ")]
        assert heads[:7] == ["Verdicts: does each guard, threshold or variant change the error?",
                             "G5 cancellation threshold: is 1/64 right?", "Subnormal recovery (G7)",
                             "What dominates the error", "Accuracy summary", "Guard ablation by region and gamma",
                             "Per selector and region"]

    def test_verdicts_table_follows_the_rule(self, tiny_report):
        from precision.analysis.paired import verdicts
        t = pd.read_csv(tiny_report / "tables" / "verdicts.csv", dtype={"region": str})
        for col in ("subject", "comparison", "machine", "format", "region", "changed", "better", "worse", "tied",
                    "specials_fixed", "specials_caused", "both_garbage", "p_value", "verdict"):
            assert col in t.columns, col
        assert (t["verdict"].to_numpy() == verdicts(t)).all()
        assert set(t["verdict"]) <= {"no_effect", "helps", "hurts", "mixed", "inconclusive"}
        assert ((t["changed"] == 0) == (t["verdict"] == "no_effect")).all()

    def test_summary_matches_run(self, tiny_report):
        summary = pd.read_csv(tiny_report / "tables" / "summary.csv")
        run = pd.read_csv(tiny_report.parent.parent / "runs" / "tiny" / "summary.csv")
        assert len(summary) == len(run)
        assert np.array_equal(summary["max_ulp"].to_numpy(), run["max_ulp"].to_numpy())

    def test_reproduce_block(self, tiny_report):
        md = (tiny_report / "report.md").read_text()
        run = json.loads((tiny_report.parent.parent / "runs" / "tiny" / "run.json").read_text())
        assert run["study_sha256"] in md and "precision report tiny" in md


class TestCommandErrors:
    def test_unknown_study_exits_2_and_writes_nothing(self, tmp_path, capsys):
        out = tmp_path / "reports"
        assert main(["report", "nosuch", "--runs", str(tmp_path / "runs"), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "precision: error:" in err
        assert not out.exists()

    def test_study_and_all_together_is_an_error(self, tmp_path):
        assert main(["report", "x", "--all", "--out", str(tmp_path)]) == 2

    def test_failed_build_leaves_previous_report(self, tiny_report, tmp_path):
        runs = tiny_report.parent.parent / "runs"
        before = (tiny_report / "findings.json").read_text()
        broken = tmp_path / "runs" / "tiny"
        broken.mkdir(parents=True)
        (broken / "run.json").write_text("{}")
        assert main(["report", "tiny", "--runs", str(tmp_path / "runs"), "--out", str(tiny_report.parent)]) == 2
        assert (tiny_report / "findings.json").read_text() == before
        assert not [p for p in tiny_report.parent.iterdir() if p.name.startswith(".")]
        assert runs.is_dir()


def _compare_reports(committed: Path, fresh: Path) -> None:
    for csv in sorted((committed / "tables").glob("*.csv")):
        a = pd.read_csv(csv, dtype={"region": str})
        b = pd.read_csv(fresh / "tables" / csv.name, dtype={"region": str})
        assert list(a.columns) == list(b.columns), csv.name
        assert len(a) == len(b), csv.name
        for col in a.columns:
            if a[col].dtype.kind == "f" or b[col].dtype.kind == "f":
                x, y = a[col].to_numpy(float), b[col].to_numpy(float)
                assert np.allclose(x, y, rtol=1e-12, atol=0, equal_nan=True), (csv.name, col)
            else:
                assert a[col].astype(str).tolist() == b[col].astype(str).tolist(), (csv.name, col)
    fa = json.loads((committed / "findings.json").read_text())
    fb = json.loads((fresh / "findings.json").read_text())
    assert [f["text"] for f in fa["findings"]] == [f["text"] for f in fb["findings"]]
    assert sorted(p.name for p in (committed / "plots").iterdir()) == sorted(p.name for p in (fresh / "plots").iterdir())


def test_headline_maxima_are_labelled_and_explained(tiny_report):
    """Headline maxima are max_finite_ulp with their label (sampled here) and what the figure means."""
    data = json.loads((tiny_report / "findings.json").read_text())
    heads = [f for f in data["findings"] if f["id"].startswith("summary/headline/")]
    assert heads
    for f in heads:
        cols = {n["column"] for n in f["numbers"] if n["table"]}
        assert "max_finite_ulp" in cols and "max_ulp" not in cols
        assert "sampled: a lower bound" in f["text"] and "pred=0x" in f["text"]


def test_g7_verdicts_by_band(tiny_report):
    """G7 is compared point by point per band of |raw*weight|; the 1/w = inf band is where it zeroes outputs."""
    g7 = pd.read_csv(tiny_report / "tables" / "recovery_g7.csv")
    assert set(g7["band"]) <= {"rw >= 2^-126", "rw < 2^-126, 1/w finite", "rw < 2^-126, 1/w = inf"}
    assert (g7["changed"] == g7["better"] + g7["worse"] + g7["tied"] + g7["both_garbage"]).all()
    by_w = pd.read_csv(tiny_report / "tables" / "recovery_weight.csv")
    assert by_w.loc[by_w["weight"] == 2.0 ** -140, "recip_overflows"].all()
    assert not by_w.loc[by_w["weight"] == 1.0, "recip_overflows"].any()
    inf_band = g7[(g7["band"] == "rw < 2^-126, 1/w = inf") & (g7["machine"] == "ieee")]
    assert (inf_band["zeroed"] > 0).all() and (inf_band["verdict"] == "hurts").all()


@pytest.mark.slow
@pytest.mark.parametrize("study", ["subnormal_recovery", "q_precision", "cancellation_threshold", "guard_ablation",
                                   "candidate", "g4_tiling"])
def test_committed_report_matches_fresh_run(study, tmp_path):
    committed = ROOT / "reports" / study
    if not committed.is_dir():
        pytest.skip(f"reports/{study} not committed")
    # one process: the tests already keep both cores busy, and workers of their own cost about a fifth more CPU
    run_study(load_study(ROOT / "studies" / f"{study}.toml"), tmp_path / "runs" / study, cache_dir=tmp_path / "c",
              workers=1)
    fresh = build_report(study, tmp_path / "runs", tmp_path / "reports")
    _compare_reports(committed, fresh)
    assert check_findings(committed) > 0


CANDIDATE = """
name = "cand_tiny"
seed = 0
[pred]
kind = "list"
format = "fp16"
values = ["-0x1.d7cp-1", "-0x1.8p-1", "0.0", "0x1.8p+0", "-0x1.cp+1", "0x1.4p+3", "-0x1.0p+5", "0x1.6p+5"]
[points]
target = [0, 1]
alpha = [0.25, 0.75]
gamma = [-2.0, 0.5, 6.0]
profiles = ["fp16", "fp32"]
bracket_bands = [2, 4, 16]
[run]
variants = ["candidate", "kernel"]
machines = ["ieee", "npu"]
per_point = "worst"
compare = [["candidate", "kernel"]]

[report]
sections = ["targets", "verdicts", "dominant", "bracket", "summary"]
"""


@pytest.fixture(scope="module")
def candidate_report(tmp_path_factory):
    base = tmp_path_factory.mktemp("cand")
    return report_of_study(base, "cand_tiny", CANDIDATE)


def test_candidate_section_and_verdicts(candidate_report):
    from precision.operators.sigmoid_focal_loss_grad.report.targets import assess_targets
    for name in ("targets", "bracket", "opcount", "neighbourhood"):
        assert (candidate_report / "tables" / f"{name}.csv").is_file(), name
    assert (candidate_report / "plots" / "error_vs_cancellation.png").stat().st_size > 0
    assert check_findings(candidate_report) > 0
    targets = pd.read_csv(candidate_report / "tables" / "targets.csv")
    ops = pd.read_csv(candidate_report / "tables" / "opcount.csv")
    # the band split is a partition, and the witness lies outside the neighbourhood
    assert (targets["outside"] + targets["inside"] == targets["count"]).all()
    cand32 = targets[(targets["variant"] == "candidate") & (targets["format"] == "fp32")]
    assert (cand32["max_ulp_outside"] <= 4.0).all() and (cand32["special"] == 0).all()
    hood = pd.read_csv(candidate_report / "tables" / "neighbourhood.csv")
    assert hood["gamma"].tolist() == [-2.0]
    data = json.loads((candidate_report / "findings.json").read_text())
    texts = [f["text"] for f in data["findings"] if f["id"].startswith("targets/")]
    assert len(texts) == 5 and all("MISSED" not in t for t in texts)
    # the verdicts are computed: doctored numbers flip them
    worse = targets.copy()
    worse.loc[worse["variant"] == "candidate", "max_ulp_outside"] = 4.5
    worse.loc[worse["variant"] == "candidate", "not_correct"] = worse["count"]
    ops2 = ops.copy()
    ops2.loc[ops2["variant"] == "candidate", "ratio_to_kernel"] = 1.6
    K = {"fp32_max_ulp": 4.0, "nan_inf": 0, "fp16_share_correct": 0.999, "fp16_max_ulp": 1.0, "ops_ratio": 1.5}
    cells, flipped = assess_targets(worse, ops2, K, "candidate", "sampled")
    assert len(flipped) == 5 and all("MISSED" in f.text for f in flipped)
    doctored = [css for (row, _), (_, css) in cells.items() if "outside" in row or "share" in row or "ops" in row]
    assert len(doctored) == 5 and all(css == "missed" for css in doctored)


def test_targets_need_the_threshold_as_a_band_edge(candidate_report):
    """A band straddling C = 4 cannot be split into inside/outside: no targets table then."""
    from precision.products.report.load import load_run
    from precision.operators.sigmoid_focal_loss_grad.report.targets import targets_table
    run = load_run(candidate_report.parent.parent / "runs" / "cand_tiny")
    assert not targets_table(run, 4.0).empty
    assert targets_table(run, 3.0).empty          # 3 lies inside the band [2, 4)
    assert not targets_table(run, 16.0).empty


def test_candidate_targets_skip_variants_without_rows(candidate_report):
    from precision.operators.sigmoid_focal_loss_grad.report.targets import assess_targets
    targets = pd.read_csv(candidate_report / "tables" / "targets.csv")
    ops = pd.read_csv(candidate_report / "tables" / "opcount.csv")
    K = {"fp32_max_ulp": 4.0, "nan_inf": 0, "fp16_share_correct": 0.999, "fp16_max_ulp": 1.0, "ops_ratio": 1.5}
    fp16_only = targets[(targets["format"] == "fp16") & (targets["variant"] == "kernel")].assign(variant="mmcv-fp16")
    _, findings = assess_targets(pd.concat([targets, fp16_only]), ops, K, "candidate", "sampled")
    assert len(findings) == 5


def test_plots_are_byte_reproducible(tiny_report, tmp_path):
    """Rebuilding a report gives the same plot files, SVG element ids included."""
    again = build_report("tiny", tiny_report.parent.parent / "runs", tmp_path / "reports")
    for svg in sorted((tiny_report / "plots").glob("*.svg")):
        assert svg.read_bytes() == (again / "plots" / svg.name).read_bytes(), svg.name


def test_a_share_short_of_1_never_prints_as_1():
    from precision.products.report.findings import fmt_share
    assert fmt_num(1 - 310 / 634880) != "1" and fmt_num(1 - 1e-12) != "1" and fmt_num(1.0) == "1"
    assert fmt_share(1 - 310 / 634880, 310) == f"{fmt_num(1 - 310 / 634880)} (310 not correctly rounded)"
    assert fmt_num(2.99996) == "2.99996" and fmt_num(0.5) == "0.5" and fmt_num(3.0) == "3"


def test_printed_shares_carry_their_misses(tiny_report, candidate_report):
    """Every share a summary sentence prints comes with the count of outputs not correctly rounded."""
    checked = 0
    for folder in (tiny_report, candidate_report):
        summary = pd.read_csv(folder / "tables" / "summary.csv")
        assert (summary["not_correct"] == summary["count"] - (summary["share_correct"] * summary["count"]).round()).all()
        for f in json.loads((folder / "findings.json").read_text())["findings"]:
            if not f["id"].startswith("summary/best/"):
                continue
            share = next(n for n in f["numbers"] if n["name"] == "best_share")
            row = summary[(summary["variant"] == share["where"]["variant"]) & (summary["machine"] == share["where"]["machine"])
                          & (summary["format"] == share["where"]["format"])].iloc[0]
            if row["not_correct"]:
                assert f"share {share['text']} ({fmt_num(int(row['not_correct']))} not correctly rounded)" in f["text"]
                assert share["text"] != "1"
                checked += 1
    assert checked > 0
    targets = pd.read_csv(candidate_report / "tables" / "targets.csv")
    grid = (candidate_report / "report.md").read_text()
    for _, r in targets[(targets["variant"] == "candidate") & (targets["format"] == "fp16")].iterrows():
        if r["not_correct"]:
            assert f"({fmt_num(int(r['not_correct']))} not correctly rounded)" in grid


STALE_HUNT = {"variant": "candidate", "machine": "npu", "format": "fp32", "kind": "hunted", "label": "hunted",
              "max_ulp": 1.0, "max_finite_ulp": 1.0, "seconds": 10.0, "workers": 2, "points": 1000, "seed": 3,
              "outside_neighbourhood": True, "gammas": ["-0x1.8p+1"], "alphas": ["0x1p-2"], "targets": [0, 1],
              "specials": 0, "top": [],
              "witness": {"pred": "0x1.82895ep-1", "target": 1, "alpha": "0x1p-2", "gamma": "-0x1.8p+1",
                          "weight": "none", "dout": "0x1p+0"}}


@pytest.fixture(scope="module")
def witness_report(tmp_path_factory):
    """The tiny candidate study naming a hunt file whose stored maximum is stale (1 ulp) and a pred corpus."""
    base = tmp_path_factory.mktemp("witness")
    (base / "hunt.json").write_text(json.dumps(STALE_HUNT))
    (base / "corpus.txt").write_text("# preds\n-0x1.03e42ep-1  # a hunt witness\nnot-a-number\n0x1.0000000001p+0\n")
    study = CANDIDATE.replace('name = "cand_tiny"', 'name = "cand_known"') + \
        '\n[report.targets]\nhunts = ["hunt.json"]\ncorpus = ["corpus.txt", "absent.txt"]\n'
    return report_of_study(base, "cand_known", study)


def test_headline_maximum_takes_every_known_witness_re_evaluated(witness_report):
    from precision.products.hunt import rescore
    known = pd.read_csv(witness_report / "tables" / "witnesses.csv")
    targets = pd.read_csv(witness_report / "tables" / "targets.csv")
    assert set(known["source"]) == {"run", "hunt hunt.json", "corpus corpus.txt"}
    # the hunt's witness is scored with the current code on every machine, not read from the file (1 ulp there)
    for machine in ("ieee", "npu"):
        now = rescore("candidate", [float.fromhex("0x1.82895ep-1")], [1], [0.25], [-3.0], machine=machine)
        row = known[(known["machine"] == machine) & (known["source"] == "hunt hunt.json")].iloc[0]
        assert row["max_ulp"] == now["err_ulp"].iloc[0] != 1.0 and row["witness_pred"] == "0x1.82895e0000000p-1"
        # the corpus pred at every (selector, alpha, gamma) of the run: 2 x 2 x 3 points, some in the neighbourhood
        corpus = known[(known["machine"] == machine) & (known["source"] == "corpus corpus.txt")].iloc[0]
        assert 0 < corpus["points"] <= 12 and corpus["witness_pred"] == "-0x1.03e42e0000000p-1"
        run_max = targets[(targets["variant"] == "candidate") & (targets["machine"] == machine)
                          & (targets["format"] == "fp32")]["max_ulp_outside"].iloc[0]
        assert known.loc[(known["machine"] == machine) & (known["source"] == "run"), "max_ulp"].iloc[0] == run_max
        top = known[known["machine"] == machine].sort_values("max_ulp").iloc[-1]
        data = json.loads((witness_report / "findings.json").read_text())
        text = next(f["text"] for f in data["findings"] if f["id"] == f"targets/{machine}/fp32")
        assert f"max error {fmt_num(top['max_ulp'])} ulp" in text and f"({top['source']}" in text
        # the witness exact in hex with its decimal beside
        from precision.products.report.tables import decimal_text, short_hex
        assert f"at pred={short_hex(top['witness_pred'])} ({decimal_text(top['witness_pred'])}) " in text
        assert ("MISSED" in text) == (top["max_ulp"] > 4.0)
        assert f"Target <= 4: {'MISSED' if top['max_ulp'] > 4 else 'met'}" in text
    assert check_findings(witness_report) > 0
    missing = [f["text"] for f in json.loads((witness_report / "findings.json").read_text())["findings"]
               if f["id"] == "targets/hunts-missing"]
    assert len(missing) == 1 and "absent.txt" in missing[0]


THRESHOLD_TINY = """
name = "thr_tiny"
seed = 0
[pred]
kind = "windows"
format = "fp32"
cancellation = 2.0
per_window = 300
core = 32
range = [-8.0, 18.0]
[points]
target = [0]
alpha = [0.25]
gamma = [-2.0, -1.5]
profiles = ["fp32"]
[run]
variants = ["kernel[G5=2^-0]", "kernel[G5=2^-3]", "kernel[G5=2^-6]", "kernel[G5=never]", "kernel[G5=always]"]
machines = ["ieee", "npu"]
per_point = "worst"
threshold_search = true
[report]
sections = ["threshold", "summary"]
"""


@pytest.fixture(scope="module")
def threshold_report(tmp_path_factory):
    base = tmp_path_factory.mktemp("thr")
    return report_of_study(base, "thr_tiny", THRESHOLD_TINY)


def _curve_points(svg: str, curve: str) -> int:
    """Vertices of a curve's line in a plot's SVG (plots.curve_id); 0 when the plot has no such curve."""
    m = re.search(rf'<g id="{re.escape(curve)}">\s*<path d="([^"]*)"', svg)
    return 0 if m is None else len(re.findall(r"[ML] ", m.group(1)))


def test_threshold_plot_never_compares_a_threshold_with_itself(threshold_report):
    t = pd.read_csv(threshold_report / "tables" / "threshold.csv")
    svg = (threshold_report / "plots" / "threshold.svg").read_text()
    for panel, machine in enumerate(["ieee", "npu"]):
        rows = t[(t["machine"] == machine) & (t["subset"] == "pooled")]
        for base, itself, name in (("never", 0.0, "never"), ("production", 2.0 ** -6, "1/64")):
            for what in ("better", "worse"):
                drawn = rows[(rows["tau"] != itself) & rows[f"{what}_vs_{base}"].notna()]
                # the 1/64 curve's point at never is 1/64's own comparison with never, read the other way
                mirrored = int(base == "production" and (rows["tau"] == 0.0).any()
                               and rows.loc[rows["tau"] == itself, "better_vs_never"].notna().any())
                assert _curve_points(svg, f"curve-{panel}-{what}_than_{name}") == len(drawn) + mirrored > 0, \
                    (machine, base)
    # the legend names every curve and 1/64
    for label in ("better than never", "worse than never", "better than 1/64", "worse than 1/64", "1/64 (production)"):
        assert f"<!-- {label} -->" in svg, label


def test_best_float32_tau_in_hex_with_its_decimal(threshold_report):
    from precision.products.report.tables import decimal_text, short_hex
    search = pd.read_csv(threshold_report / "tables" / "threshold_search.csv")
    page = (threshold_report / "report.md").read_text()
    texts = {f["id"]: f["text"] for f in json.loads((threshold_report / "findings.json").read_text())["findings"]}
    for _, r in search[search["result"] == "boundary"].iterrows():
        exact = float.fromhex(r["boundary"])
        assert np.float32(float(decimal_text(exact))) == np.float32(exact)
        assert f"{short_hex(exact)} ({decimal_text(exact)}): " in page  # the first-screen grid
        assert f"tau = {r['boundary']} ({decimal_text(exact)}, net" in texts[f"threshold/{r['machine']}/fp32/fp32"]
    assert decimal_text("0x1.000002p-1") == "0.50000006"  # the production study's tau, never '0.5'


def test_threshold_answer_is_one_recommendation(threshold_report):
    """Each machine's threshold answer names what to use (the plateau's simplest value, or always when it is
    bit-identical to always on the points), computed from the report's own tables; doctored octaves move it."""
    from precision.products.report.answers import verdict_table
    from precision.products.report.load import load_run
    from precision.products.report.threshold_advice import recommend_thresholds
    tables = {n: pd.read_csv(threshold_report / "tables" / f"{n}.csv", dtype={"region": str})
              for n in ("threshold_search_octaves", "threshold", "threshold_search")}
    tables["verdicts"] = verdict_table(load_run(threshold_report.parent.parent / "runs" / "thr_tiny"))
    recs = recommend_thresholds(tables["threshold_search_octaves"], tables["threshold"], tables["verdicts"],
                                tables["threshold_search"], "thr_tiny")
    assert {r["machine"] for r in recs} == {"ieee", "npu"}
    answers = [a for a in json.loads((threshold_report / "findings.json").read_text())["answers"]
               if a["question"].startswith("Is 1/64")]
    for r in recs:
        mine = [a for a in answers if a["machine"] == r["machine"]]
        assert len(mine) == 1 and mine[0]["recommendation"] == r["recommendation"]
        assert r["production_on_plateau"] == (r["plateau_lo"] <= 2.0 ** -6 <= r["plateau_hi"])
        if r["production_on_plateau"]:  # no change supported: keep it
            assert r["recommendation"] == "2^-6"
            assert f"Keep 2^-6: it lies on the plateau {r['plateau_text']}" in mine[0]["short"]
            continue
        assert f"Use {r['recommendation']} instead of 2^-6" in mine[0]["short"]
        assert f"Every tau in {r['plateau_text']}" in mine[0]["short"]
        pooled = tables["threshold"][(tables["threshold"]["subset"] == "pooled")
                                     & (tables["threshold"]["machine"] == r["machine"])].set_index("threshold")
        assert r["mean_bits_recommended"] == pooled.loc[r["recommendation"], "mean_bits"]
        if r["identical_to_always"]:
            assert "drop the test and always correct" in mine[0]["short"]
    # an octave made significant stops the plateau above it: 1/64 falls off it, and the advice changes to the
    # plateau's largest power of two (always where it gives always's counts)
    oc = tables["threshold_search_octaves"].copy()
    oc.loc[oc["k"] == 3, ["better", "worse"]] = [10_000, 0]
    moved = recommend_thresholds(oc, tables["threshold"], tables["verdicts"], tables["threshold_search"], "thr_tiny")
    for b in moved:
        assert b["plateau_lo"] == 0.125 and not b["production_on_plateau"]
        assert b["recommendation"] in ("always", "2^0")


def _curves(svg: str) -> dict:
    """{panel: {curve label: line path}} of a plot's SVG (plots.curve_id)."""
    out = {}
    for panel, label, body in re.findall(r'<g id="curve-(\d+)-([^"]*)">(.*?)</g>', svg, re.S):
        path = re.search(r'<path d="([^"]*)"', body)
        out.setdefault(int(panel), {})[label.replace("_", " ")] = path.group(1) if path else ""
    return out


def test_no_curve_hides_another(tiny_report):
    """Every variant of the recovery and summary plots is named in each panel, and no two drawn lines coincide."""
    variants = set(json.loads((tiny_report.parent.parent / "runs" / "tiny" / "run.json").read_text())["variants"])
    for stem in ("recovery", "ulp_vs_pred"):
        panels = _curves((tiny_report / "plots" / f"{stem}.svg").read_text())
        assert panels, stem
        for panel, curves in panels.items():
            names = [n for label in curves for n in label.split(" = ")]
            assert len(names) == len(set(names)), (stem, panel)
            if stem == "recovery":  # every variant of the run, merged or not
                assert set(names) == variants, (panel, names)
            drawn = [p for p in curves.values() if p]
            assert len(drawn) == len(set(drawn)), (stem, panel)
    merged = [label for curves in _curves((tiny_report / "plots" / "recovery.svg").read_text()).values()
              for label in curves if " = " in label]
    assert merged  # the G5 threshold variants coincide with the kernel here: drawn once, all named


def test_summary_headline_takes_the_known_witnesses(witness_report):
    """The fp32 headline maximum of each headline variant is compared with every known witness, re-evaluated."""
    known = pd.read_csv(witness_report / "tables" / "headline_witnesses.csv")
    summary = pd.read_csv(witness_report / "tables" / "summary.csv")
    texts = {f["id"]: f["text"] for f in json.loads((witness_report / "findings.json").read_text())["findings"]}
    for variant in ("candidate", "kernel"):
        k = known[known["variant"] == variant]
        assert set(k["machine"]) == {"ieee", "npu"} and "corpus corpus.txt" in set(k["source"])
        assert ("hunt hunt.json" in set(k["source"])) == (variant == "candidate")  # a hunt is of one variant
        top = k.loc[k["max_ulp"].idxmax()]
        run_max = summary[(summary["variant"] == variant) & (summary["format"] == "fp32")]["max_finite_ulp"].max()
        text = texts[f"summary/headline/fp32/{variant}"]
        assert f"at most {fmt_num(top['max_ulp'])} ulp ({top['source']}, {top['machine']}" in text
        figure = max(top["max_ulp"], run_max)
        assert text.endswith(f" {fmt_num(figure)} ulp.") and (("above the run's maximum" in text) == (top["max_ulp"] > run_max))
    assert check_findings(witness_report) > 0
def test_summary_knows_no_witnesses_for_an_operator_without_a_targets_section():
    """The hunts and corpora are named in the operator's [report.targets]; an operator without that section has
    none (the generic summary does not ask for its options)."""
    from types import SimpleNamespace

    from precision.products.report.sections.summary import _known_maxima
    operator = SimpleNamespace(SECTION_OPTIONS={"threshold": {}})
    ctx = SimpleNamespace(run=SimpleNamespace(operator=operator),
                          option=lambda section, key: pytest.fail(f"asked for [report.{section}] {key}"))
    assert _known_maxima(ctx, ["kernel"]).empty


ANSWER_FIELDS = {"question", "subject", "comparison", "machine", "format", "region", "verdict", "exercised",
                 "sentence", "magnitude", "mechanism", "numbers"}
MAGNITUDE_FIELDS = {"changed", "better", "worse", "median_gain_bits", "max_gain_bits", "max_loss_bits",
                    "became_correct", "still_garbage", "correct_share_with", "correct_share_without"}


def test_answers_open_the_page_and_cite_their_numbers(tiny_report):
    """findings.json 'answers' has the listed fields; every number of a sentence is cited (checked against the
    tables by _check_findings); the page opens with the answers, before the verdict grid."""
    data = json.loads((tiny_report / "findings.json").read_text())
    answers = data["answers"]
    assert answers and all(ANSWER_FIELDS <= set(a) for a in answers)
    assert check_findings(tiny_report) > len(data["findings"])
    g7 = [a for a in answers if a["subject"] == "G7" and a["verdict"] in ("helps", "hurts", "mixed")]
    assert g7 and all(MAGNITUDE_FIELDS <= set(a["magnitude"]) for a in g7)
    a = g7[0]
    v = pd.read_csv(tiny_report / "tables" / "verdicts.csv", dtype={"region": str})
    row = v[(v["comparison"] == a["comparison"]) & (v["machine"] == a["machine"]) & (v["region"] == "all")]
    assert a["magnitude"]["changed"] == int(row["changed"].iloc[0]) > 0
    assert a["magnitude"]["better"] + a["magnitude"]["worse"] <= a["magnitude"]["changed"]
    md = (tiny_report / "report.md").read_text()
    assert md.index("## Answers") < md.index("## Verdicts")
    assert "## Words and scope" in md and "G7 | subnormal_recovery" in md


NUMBER = re.compile(r"(?<![\w^.])-?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?")


def test_the_first_screen_shows_short_answers_that_say_nothing_the_full_ones_do_not(tiny_report):
    """Every headline answer with a size (magnitude) has a short form (the first screen's line), shorter than
    its sentence, whose every number is also in the sentence (so cited); the page shows the short forms under
    the question and keeps the sentences in full below them."""
    data = json.loads((tiny_report / "findings.json").read_text())
    heads = [a for a in data["answers"] if a["headline"]]
    assert heads and all(a["short"] for a in heads if a["magnitude"])
    for a in (a for a in heads if a["short"]):
        assert len(a["short"]) <= len(a["sentence"]), a["short"]
        missing = set(NUMBER.findall(a["short"])) - set(NUMBER.findall(a["sentence"]))
        assert not missing, (missing, a["short"], a["sentence"])
    md = (tiny_report / "report.md").read_text()
    opening = md[md.index("## Answers"):md.index("## Verdicts")]
    g7 = next(a for a in heads if a["subject"] == "G7" and a["question"].startswith("Does each guard"))
    assert g7["short"] in opening and "The answers in full" in opening
    assert opening.index(g7["short"]) < opening.index("The answers in full") < opening.index(g7["sentence"])


def test_answers_alike_but_for_their_machine_share_one_line():
    """merged_shorts: two machines with the same answer body read as one line, in the place of the first."""
    from precision.products.report.answers import Answer, merged_shorts
    a = [Answer("q", "s", short="ieee fp32: no. x 1."), Answer("q", "s", short="npu fp32: yes."),
         Answer("q", "s", short="npu+ftz fp32: yes."), Answer("q", "s", short="plain line")]
    for x, m in zip(a, ["ieee", "npu", "npu+ftz", ""]):
        x.machine, x.format = m, "fp32"
    assert merged_shorts(a) == ["ieee fp32: no. x 1.", "npu, npu+ftz fp32: yes.", "plain line"]


def test_the_explain_line_of_a_mechanism_shows_its_step(tiny_report, capsys):
    """The ready 'precision explain' line of an answer's largest gain or loss runs as printed and names the
    step and cause the answer gives."""
    data = json.loads((tiny_report / "findings.json").read_text())
    mechs = [a["mechanism"] for a in data["answers"] if a["mechanism"].get("explain")]
    assert mechs
    m = mechs[0]
    argv = m["explain"].split()[1:] + ["--json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["top_cause"]["cause"] == m["cause"]
    assert (out["top_cause"]["step"] or "none") == m["step"]


NO_WEIGHT = TINY.replace('weight = [1.0, "0x1p-140"]', 'weight = ["none"]').replace(
    'gamma = [-1.0, 2.0]', 'gamma = [2.0]').replace('name = "tiny"', 'name = "noweight"').replace(
    'variants = ["naive", "naive+G7", "kernel-G7", "kernel", "kernel[G5=never]", "kernel[G5=2^-6]", '
    '"kernel[G5=always]"]', 'variants = ["naive", "naive+G7", "naive+G5", "naive+G2", "kernel"]').replace(
    'sections = ["verdicts", "threshold", "recovery", "dominant", "summary", "ablation", "selector"]',
    'sections = ["verdicts", "dominant"]')


def test_a_guard_that_never_fired_is_not_exercised_never_no_effect(tmp_path):
    """Without weights and with gamma >= 0, G7 and G5 act on no point: fired 0, shown 'not exercised' with the
    reason and the report that exercises them (the reviewed study beside it that compares the guard and whose
    axes let it act: the project's studies are copied beside the study file); G2 fires (x = 40 clamps q) and
    keeps its verdict."""
    for study in ("quick", "guard_ablation", "cancellation_threshold", "subnormal_recovery", "candidate"):
        (tmp_path / f"{study}.toml").write_text((ROOT / "studies" / f"{study}.toml").read_text())
    folder = report_of_study(tmp_path, "noweight", NO_WEIGHT)
    v = pd.read_csv(folder / "tables" / "verdicts.csv", dtype={"region": str})
    allr = v[v["region"] == "all"]
    for guard, reason, study in (("G7", "no weight", "subnormal_recovery"), ("G5", "gamma >= 0", "cancellation_threshold")):
        rows = allr[allr["subject"] == guard]
        assert len(rows) and (rows["fired"] == 0).all() and (~rows["exercised"]).all()
        assert rows["not_exercised_because"].str.contains(reason).all() and (rows["exercised_in"] == study).all()
    g2 = allr[allr["subject"] == "G2"]
    assert (g2["fired"] > 0).all() and g2["exercised"].all()
    md = (folder / "report.md").read_text()
    grid = md[md.index("## Verdicts"):md.index("Full table: `tables/verdicts.csv`")]
    g7_line = next(line for line in grid.splitlines() if line.startswith("| G7 "))
    assert "not exercised" in g7_line and "no_effect" not in g7_line
    data = json.loads((folder / "findings.json").read_text())
    g7 = [a for a in data["answers"] if a["subject"] == "G7"]
    assert g7 and not any(a["exercised"] for a in g7) and all("subnormal_recovery" in a["sentence"] for a in g7)


def test_the_pointer_names_a_reviewed_study_whose_axes_let_the_guard_act(tmp_path):
    """exercising_study reads the reviewed studies beside a study file: G7 needs a weight, G5 a gamma < 0, G8
    an fp16 output, and the study must compare the guard; a study without [report] is never named, nor the
    study itself; with no such study the pointer says so."""
    from precision.engine.operators import DEFAULT_OPERATOR, get_operator
    from precision.products.report.answers import exercising_study, pointer_text
    op = get_operator(DEFAULT_OPERATOR)
    head = '[report]\nsections = ["verdicts"]\n'
    def study(name, variants, gamma="[2.0]", weight='["none"]', profiles='["fp32"]', report=True):
        (tmp_path / f"{name}.toml").write_text(
            f'name = "{name}"\n[points]\ngamma = {gamma}\nweight = {weight}\nprofiles = {profiles}\n'
            f'[run]\nvariants = {variants}\n' + (head if report else ""))
    study("a_plain", '["naive", "kernel"]')
    study("b_weights_unreviewed", '["kernel-G7", "kernel"]', weight='[1.0, "0x1p-140"]', report=False)
    study("c_weights", '["kernel-G7", "kernel"]', weight='[1.0, { random = 4, low = "0x1p-149", high = 1.0 }]')
    study("d_negative_gamma", '["all"]', gamma='[-1.0, 2.0]', profiles='["fp16", "fp32"]')
    me = str(tmp_path / "a_plain.toml")
    assert exercising_study(me, "G7", op) == "c_weights"
    assert exercising_study(me, "G5", op) == "d_negative_gamma" and exercising_study(me, "G8", op) == "d_negative_gamma"
    assert exercising_study(str(tmp_path / "d_negative_gamma.toml"), "G5", op) is None
    assert pointer_text(None) == "no reviewed study exercises it"
    assert pointer_text("c_weights") == "see the c_weights report"


def test_a_run_gives_its_operator_and_an_older_run_is_sigmoid_focal_loss_grads(tmp_path):
    """RunData.operator is the operator run.json names (get_operator), SigmoidFocalLossGrad's where run.json
    predates the key; an unknown name is an error."""
    import precision.operators.sigmoid_focal_loss_grad as sigmoid_focal_loss_grad
    from precision.errors import PrecisionError
    from precision.products.report.load import RunData
    older, named, unknown = (RunData(tmp_path, run, *[None] * 7) for run in
                             ({}, {"operator": "sigmoid_focal_loss_grad"}, {"operator": "nope"}))
    assert older.operator is sigmoid_focal_loss_grad and older.operator_name == "sigmoid_focal_loss_grad"
    assert named.operator is sigmoid_focal_loss_grad
    with pytest.raises(PrecisionError, match="nope"):
        unknown.operator


def test_error_ecdf_separates_variants_and_merges_identical_ones(tmp_path):
    """One panel per format, a line per variant, identical lines merged under one label; each curve is the
    running share of outputs (exact first, specials last), so it ends at 1."""
    from precision.products.report.sections.summary import plot_error_ecdf
    rows = []
    for v, counts in (("a", (5, 3, 2, 0)), ("b", (5, 3, 2, 0)), ("c", (1, 2, 3, 4))):
        for upper, n in zip((0.0, 0.5, 4.0, np.inf), counts):
            rows.append({"variant": v, "format": "fp32", "bin": 0, "upper_ulp": upper, "count": n})
    stem = plot_error_ecdf(pd.DataFrame(rows), tmp_path, ["a", "b", "c"])
    svg = (tmp_path / f"{stem}.svg").read_text()
    panels = _curves(svg)
    assert set(panels[0]) == {"a = b", "c"}
    assert plot_error_ecdf(pd.DataFrame(rows), tmp_path, ["z"]) is None


def test_heat_map_needs_two_values_of_its_attribute(tmp_path):
    from precision.products.report.sections.summary import plot_pred_term_heatmap
    bins = {"variant": np.array(["kernel"]), "machine": np.array(["ieee"]), "profile": np.array(["fp32"]),
            "term": np.array([2.0]), "edges": np.array([-1.0, 0.0, 1.0]), "max_ulp": np.array([[1.0, 2.0]])}
    assert plot_pred_term_heatmap(bins, tmp_path, ["kernel"], "gamma") is None
    two = {k: (np.concatenate([v, v]) if k not in ("edges", "max_ulp") else v) for k, v in bins.items()}
    two["term"] = np.array([2.0, 3.0])
    two["max_ulp"] = np.array([[1.0, 2.0], [3.0, np.inf]])
    assert plot_pred_term_heatmap(two, tmp_path, ["kernel"], "gamma") == "heatmap_pred_gamma"


def test_error_axis_keeps_huge_finite_errors_on_their_own_band():
    """Errors past 2^24 ulp sit on the '> 2^24' band under the special one; the finite axis ends at the
    decade of the largest error under the cap, so 1e44 ulp does not stretch it."""
    from precision.products.report.plots import CEILING_ULP, clip_errors, over_level, special_level
    err = np.array([0.25, 3.0, 1e3, 5e44, np.inf, np.nan])
    level = special_level(err)
    assert level == 10.0 ** (np.ceil(np.log10(CEILING_ULP)) + 2)
    assert special_level(np.array([0.25, 3.0, 1e3])) == 1e5
    shown = clip_errors(err, level)
    assert shown[:3].tolist() == [0.25, 3.0, 1e3]
    assert shown[3] == over_level(level) and shown[4] == shown[5] == level


G4_TINY = """
name = "g4_tiny"
seed = 0
[pred]
kind = "grid"
format = "fp32"
start = -40.0
stop = 40.0
num = 257
spacing = "linear"
[points]
target = [0, 1]
alpha = [0.25]
gamma = [0.0, 2.0]
profiles = ["fp32"]
[run]
variants = ["kernel", "kernel[tile=64]", "kernel-G4"]
machines = ["npu"]
compare = [["kernel[tile=64]", "kernel-G4"]]
per_point = "worst"
[report]
sections = ["verdicts", "summary"]
"""


def test_a_one_tile_g4_verdict_says_it_is_an_upper_bound(tmp_path):
    """G4's verdicts from a study whose task is one tile (G4 acted on every point) carry the assumption; the
    verdict at a smaller tile (G4 acted on some points only) does not."""
    report = report_of_study(tmp_path, "g4_tiny", G4_TINY)
    data = json.loads((report / "findings.json").read_text())
    v = pd.read_csv(report / "tables" / "verdicts.csv", dtype={"region": str})
    cells = [a for a in data["answers"] if not a["headline"] and a["verdict"] not in ("no_effect", "not_exercised")]
    said = {}
    for a in cells:
        row = v[(v["comparison"] == a["comparison"]) & (v["machine"] == a["machine"]) & (v["region"] == "all")
                & (v["format"] == a["format"])].iloc[0]
        said[a["comparison"]] = "Assumption: the whole task is one tile" in a["sentence"]
        assert said[a["comparison"]] == (a["subject"] == "G4" and int(row["fired"]) == int(row["count"])), a["sentence"]
    assert said.get("kernel vs kernel-G4") is True and said.get("kernel[tile=64] vs kernel-G4") is False


def test_report_all_keeps_a_long_study_s_report_instead_of_running_it(tmp_path, capsys):
    """A report folder whose study is planned past the run limit and has no run folder is kept, said so."""
    from precision.products.report.render import report_all
    out, runs, studies = tmp_path / "reports", tmp_path / "runs", tmp_path / "studies"
    for d in (out / "long", studies):
        d.mkdir(parents=True)
    (out / "long" / "report.html").write_text("<p>committed</p>")
    (studies / "long.toml").write_text(THRESHOLD_TINY.replace('name = "thr_tiny"', 'name = "long"'))
    got = list(report_all(runs, out, studies_dir=studies, run_limit_seconds=0.0))
    assert [(n, w.split(" ")[0]) for n, _, w in got] == [("long", "kept")]
    assert "precision run" in got[0][2] and (out / "long" / "report.html").read_text() == "<p>committed</p>"
    assert not (runs / "long").exists()


def test_grid_scope_of_an_older_run_comes_from_its_unchanged_study_file(tmp_path):
    """A run.json without its grid takes it from the study file when the file's digest is the run's; a study
    file changed since gives no grid (nothing is claimed)."""
    from types import SimpleNamespace

    from precision.engine.study import load_study
    from precision.products.report.load import run_grid
    from precision.products.report.tables import grid_scope
    study = tmp_path / "s.toml"
    study.write_text(THRESHOLD_TINY)
    meta = {"study_file": str(study), "study_sha256": load_study(study).digest}

    def scope():
        return grid_scope(SimpleNamespace(run=meta, grid=run_grid(meta)))
    assert scope() == "on the grid of 2 gamma values at alpha 0.25"
    meta["grid"] = {"alpha": [0.25], "gamma": [2.0], "weight": [None], "dout": [1.0]}
    assert scope() == "on the grid alpha 0.25, gamma 2"
    del meta["grid"]
    study.write_text(THRESHOLD_TINY.replace("gamma = [-2.0, -1.5]", "gamma = [-2.0]"))
    assert scope() == ""


def test_report_all_reports_from_a_run_folder_without_a_study_file(tmp_path):
    """A report whose study file lives elsewhere (``precision run examples/plugin_study.toml --report``) is
    regenerated from its run folder; one with neither a run folder nor a study file is one error, nothing
    written."""
    from precision.errors import ParameterError
    from precision.engine.study import load_study
    from precision.products.report.render import report_all
    out, runs, studies, elsewhere = (tmp_path / d for d in ("reports", "runs", "studies", "elsewhere"))
    for d in (out / "thr_tiny", studies, elsewhere):
        d.mkdir(parents=True)
    (elsewhere / "thr_tiny.toml").write_text(THRESHOLD_TINY)
    run_study(load_study(elsewhere / "thr_tiny.toml"), runs / "thr_tiny", cache_dir=tmp_path / "c", workers=1)
    got = list(report_all(runs, out, studies_dir=studies))
    assert [(n, w) for n, _, w in got] == [("thr_tiny", "reported")]
    assert (out / "thr_tiny" / "report.html").is_file()
    (out / "orphan").mkdir()
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(ParameterError, match="orphan has neither a run folder .* nor a study file"):
        list(report_all(runs, out, studies_dir=studies))
    assert sorted(p.name for p in out.iterdir()) == before


def test_known_points_with_every_input_are_rescored_with_their_specials(tmp_path):
    """A ``points`` file (pred, target and the attributes, off the grid too) is a known-witness source: its
    points are re-evaluated now, the largest error outside the neighbourhood and the special outputs anywhere
    reported with their inputs; an unreadable file is named, not counted."""
    from types import SimpleNamespace

    import precision.operators.sigmoid_focal_loss_grad as op
    from precision.products.report.known_witnesses import known_sources, rescored_maxima
    (tmp_path / "pts.csv").write_text("# audit\npred,target,alpha,gamma\n0x1.1158d8p-2,1,0x1.7476cep-2,-0x1.3ee14p+1\n"
                                      "-0x1.1393fcp-3,0,0x1p-2,-0x1.8p+0\n")
    (tmp_path / "bad.csv").write_text("pred,target\n1,0\n")
    run = SimpleNamespace(operator=op, operator_name="sigmoid_focal_loss_grad",
                          stats=SimpleNamespace(frame=pd.DataFrame(columns=["variant", "format", "target", "alpha",
                                                                            "gamma"])))
    known, missing = known_sources(run, "candidate", pd.DataFrame(), [], tmp_path, ["pts.csv", "bad.csv", "no.csv"])
    assert missing == ["bad.csv", "no.csv"] and [k[0] for k in known] == ["points pts.csv"]
    row, = rescored_maxima(run, "candidate", "ieee", known, outside_only=True)
    assert row["points"] == 1 and round(row["max_ulp"], 4) == 4.3204  # the wrong-signed point is inside
    assert row["witness_gamma"] == float.fromhex("-0x1.3ee14p+1").hex() and row["specials"] == 1
    assert row["special_at"] == "pred=-0x1.1393fcp-3 target=0 alpha=0x1p-2 gamma=-0x1.8p+0 (wrong_sign)"
