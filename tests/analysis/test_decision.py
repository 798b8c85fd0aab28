"""Tests of precision.analysis.decision: each outcome of the rule on constructed verdict rows, the effect words,
the cell rule and the plateau of thresholds."""

from __future__ import annotations

import math

import pytest

from precision.analysis.decision import (THRESHOLDS, Evidence, Thresholds, decide, decide_cell, effect_word,
                                         plateau, rule_text)


def ev(verdict, **kw):
    base = dict(guard="G3", machine="npu", format="fp32", study="s", comparison="kernel vs kernel-G3",
                count=1000, fired=1000)
    base.update(kw)
    return Evidence(verdict=verdict, **base)


class TestDecide:
    def test_no_effect_is_drop(self):
        d = decide(ev("no_effect", changed=0))
        assert (d.decision, d.effect) == ("drop", "none")
        assert "1,000" in d.reason

    def test_helps_is_keep_with_its_size(self):
        d = decide(ev("helps", changed=200, better=190, worse=10, median_change_bits=3.0))
        assert (d.decision, d.effect, d.word) == ("keep", "clearly", "keep (clearly)")

    def test_small_median_and_small_net_is_slightly(self):
        # the G3 on npu fp32: 17,972 better, 11,758 worse, median 0.59 bits
        d = decide(ev("helps", changed=29730, better=17972, worse=11758, median_change_bits=0.59))
        assert (d.decision, d.effect) == ("keep", "slightly")

    def test_hurts_is_drop(self):
        d = decide(ev("hurts", changed=30000, better=1218, worse=28274, median_change_bits=-10.2))
        assert (d.decision, d.effect) == ("drop", "strongly")

    def test_mixed_with_specials_fixed_is_change(self):
        d = decide(ev("mixed", changed=1000, better=600, worse=400, specials_fixed=600, median_change_bits=-2))
        assert d.decision == "change" and d.to == "a narrower condition"

    def test_mixed_whose_losses_are_rare_is_keep(self):
        # G2 on ieee fp32: 328,300 better (all specials fixed), 20 worse
        d = decide(ev("mixed", changed=391000, better=328300, worse=20, specials_fixed=328300))
        assert (d.decision, d.effect) == ("keep", "strongly")

    def test_inconclusive_is_a_weak_depends(self):
        d = decide(ev("inconclusive", changed=560, better=273, worse=287, median_change_bits=0.0))
        assert d.decision == "depends" and d.weak and "no significant" in d.reason

    def test_not_exercised_is_a_weak_depends_with_its_reason(self):
        d = decide(ev("no_effect", exercised=False, fired=0, not_exercised_because="no weight"))
        assert d.decision == "depends" and d.weak and "no weight" in d.reason

    def test_an_alternative_setting_that_helps_is_change_to_it(self):
        d = decide(ev("helps", changed=262502, better=167523, worse=94979, median_change_bits=0.56,
                      alternative="always"))
        assert (d.decision, d.to) == ("change", "always")
        assert decide(ev("hurts", changed=5, better=1, worse=4, alternative="2^-9")).decision == "keep"

    def test_an_assumption_turns_keep_or_drop_into_depends(self):
        d = decide(ev("hurts", changed=40557, better=1126, worse=17518, median_change_bits=-22,
                      assumption="the whole task is one tile"))
        assert d.decision == "depends" and d.on.startswith("an assumption") and "drop only if" in d.reason


class TestEffect:
    def test_none_when_nothing_changed(self):
        assert effect_word(ev("no_effect")) == "none"

    def test_specials_make_it_strong(self):
        assert effect_word(ev("helps", changed=100, better=100, specials_fixed=100)) == "strongly"

    def test_thresholds_are_the_ones_passed(self):
        e = ev("helps", changed=100, better=60, worse=40, median_change_bits=0.9)
        assert effect_word(e) == "slightly"
        assert effect_word(e, Thresholds(slight_bits=0.5)) == "clearly"

    def test_bad_thresholds_are_refused(self):
        with pytest.raises(ValueError):
            Thresholds(slight_bits=9, strong_bits=8)


class TestDecideCell:
    def test_nothing_measured_depends(self):
        assert decide_cell([]).decision == "depends"

    def test_a_weak_row_yields_to_evidence(self):
        rows = [ev("inconclusive", format="fp16", changed=560, better=273, worse=287),
                ev("helps", changed=156200, better=90486, worse=60952, median_change_bits=0.16)]
        d = decide_cell(rows)
        assert (d.decision, d.effect) == ("keep", "slightly") and d.basis is rows[1]

    def test_any_change_wins(self):
        rows = [ev("helps", changed=10, better=10, median_change_bits=2),
                ev("helps", changed=10, better=9, worse=1, alternative="always", median_change_bits=1)]
        assert decide_cell(rows).word.startswith("change to always")

    def test_disagreeing_formats_depend_on_the_format(self):
        rows = [ev("helps", format="fp16", changed=10, better=10, median_change_bits=2),
                ev("hurts", format="fp32", changed=10, worse=10, median_change_bits=-2)]
        d = decide_cell(rows)
        assert d.decision == "depends" and d.on == "the format"
        assert "keep for fp16" in d.reason and "drop for fp32" in d.reason

    def test_disagreeing_studies_depend_on_the_study(self):
        rows = [ev("helps", study="a", changed=10, better=10, median_change_bits=2),
                ev("no_effect", study="b")]
        assert decide_cell(rows).on == "the study"


def test_plateau_walks_down_until_an_octave_is_significant():
    assert plateau([0.5, 0.25, 0.125], [1.0, 0.5, 0.25], [1, 3, 900], [0, 2, 100]) == (0.25, 1.0)
    assert plateau([0.5], [1.0], [900], [100]) == (1.0, 1.0)


def test_the_rule_text_shows_every_threshold():
    text = rule_text()
    for v in (THRESHOLDS.slight_bits, THRESHOLDS.small_net, THRESHOLDS.strong_bits, THRESHOLDS.rare_share):
        assert f"{v:g}" in text
    assert not math.isnan(THRESHOLDS.strong_bits)
