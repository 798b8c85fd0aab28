"""The acceptance standards kernel teams use, judged on a run's group statistics: ``standards.csv``.

Ascend's operator precision standards and allclose, computed from the
acceptance columns of :class:`precision.analysis.groups.GroupStats` (per-point
definitions in :func:`precision.analysis.acceptance.acceptance_columns`):

* special positions (the output or the golden NaN or infinite) first, by
  TTK's rules (:data:`precision.analysis.acceptance.SPECIAL_RULE`): a match
  (both NaN, the same infinity; a correctly rounded overflow is one) is left
  out, a mismatch fails the threshold and the ratio standard before any
  metric;
* per element finite on both sides ``r = |actual - golden| / (|golden| +
  1e-7)``, golden = the oracle's exact value (float64; setting ``golden =
  "rounded"``: its correct rounding to the output format); **MERE** = mean
  r, **MARE** = max r, **RMSE** = sqrt(mean((actual - golden)^2)), in the
  output's units, over those ``evaluated`` positions (NaN when none);
* the **threshold standard** (TTK's stat_rel_err): pass when no special
  mismatch and MERE < T and MARE < 10 T
  (:data:`precision.analysis.acceptance.THRESHOLD_T`), or no finite position
  is left;
* the **ratio standard** (TTK's cross_check): MARE, MERE, RMSE of a variant
  over those of a third party on the same points, within the limits of a
  level (:data:`RATIO_LEVELS`) with at least its case count; level
  ``special_mismatch`` when the variant has a special mismatch and the
  third party none (cross_check fails it), ``third_party_special`` when the
  variant has none and the third party gives a special output where the
  golden is finite (cross_check fails the variant there: it must equal the
  third party), ``not_evaluable`` when both have mismatches (cross_check
  then compares them position by position, which pooled statistics
  cannot), the reason in ``level_note``; ``third_party`` on the third
  party's own row;
* **allclose**: the share of outputs with ``|a - g| <= atol + rtol |g|``
  for a preset (:data:`precision.analysis.acceptance.ALLCLOSE_PRESETS`),
  equal infinities close, NaN never;
* what they cannot see: ``blind`` (finite, accepted element-wise, r <= 10
  T, yet over 2^10 ulps wrong) and ``false_alarm`` (correctly rounded, yet
  r > 10 T or a special mismatch).
* msprobe's pre-check standards (the ``ms_*`` columns,
  :mod:`precision.analysis.msprobe`), its third party the ratio standard's.

Ratio conventions (the published standard leaves them open; TTK's own code
floors the third party's metric at a small value and splits off small
goldens, which these pooled statistics do not):
``0 / 0 = 1`` (a tie), ``x / 0 = inf``; the third party's metric is first
raised to ``ratio_floor`` (default 0).  Ratios are computed only where the
variant and the third party cover the same number of points (else NaN and
level ``unpaired``); without the third party among the rows, ``third_party`` is ``none`` and
``level`` ``no_third_party``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from precision.analysis.acceptance import ACCEPTANCE_MAXIMA, THRESHOLD_T, allclose_tolerances
from precision.analysis.groups import GroupStats, witness_fields
from precision.analysis.msprobe import MSPROBE_COLUMNS, MSPROBE_COUNTS, msprobe_metrics, msprobe_verdicts
from precision.recipes.target_kinds import target_text

__all__ = ["RATIO_LEVELS", "LEVEL_RANK", "ROW_LEVEL_RANK", "StandardsSettings", "STANDARDS_COLUMNS", "standards_table",
           "ratio", "ratio_level", "settings_from_options"]

#: Ratio standard levels, loosest first: (MARE, MERE, RMSE) ratio limits and the minimum case count.
RATIO_LEVELS = {
    "L0": {"mare": 10.0, "mere": 2.0, "rmse": 2.0, "min_count": 5000},
    "L1": {"mare": 5.0, "mere": 1.5, "rmse": 1.5, "min_count": 10000},
    "L2": {"mare": 2.0, "mere": 1.2, "rmse": 1.2, "min_count": 30000},
}
#: A level as a number (for gate budgets): none 0, L0 1, L1 2, L2 3.
LEVEL_RANK = {"none": 0, **{name: i + 1 for i, name in enumerate(RATIO_LEVELS)}}
#: A row's level as a number: :data:`LEVEL_RANK`, and ``special_mismatch`` and ``third_party_special`` (failed on
#: special values) 0; ``unpaired``, ``not_evaluable``, ``third_party`` (its own row) and ``no_third_party`` are
#: NaN (not judged).
ROW_LEVEL_RANK = {**LEVEL_RANK, "special_mismatch": 0, "third_party_special": 0}

#: Columns of ``standards.csv``.
STANDARDS_COLUMNS = ("variant", "machine", "format", "region", "count", "evaluated", "special_match",
                     "special_mismatch", "special_mismatch_finite", "mere", "mare", "mare_witness", "rmse",
                     "threshold_T", "threshold_pass", "third_party", "mare_ratio", "mere_ratio", "rmse_ratio", "level",
                     "level_note", "allclose_share", "blind", "blind_witness", "false_alarm", "false_alarm_witness",
                     *MSPROBE_COLUMNS)


@dataclass(frozen=True)
class StandardsSettings:
    """The choices a team makes (a study's ``[report.standards]`` options).

    ``third_party`` / ``third_party_machine``: the ratio standard's third
    party (default the ops-nn golden, a torch float32 composition, on the
    ieee machine); ``allclose``: the preset of ``allclose_share``;
    ``ratio_floor``: the third party's metrics are raised to at least this
    before dividing; ``golden``: ``exact`` (the oracle's value, float64) or
    ``rounded`` (its correct rounding to the output format), chosen when a
    run scores its points (:class:`precision.engine.task.Task`).
    """

    third_party: str = "golden"
    third_party_machine: str = "ieee"
    allclose: str = "unit_test"
    ratio_floor: float = 0.0
    golden: str = "exact"

    @property
    def label(self) -> str:
        return f"{self.third_party}@{self.third_party_machine}"


def settings_from_options(options: dict | None) -> StandardsSettings:
    """Settings from ``[report.standards]`` options (missing keys take their defaults)."""
    options = options or {}
    keys = StandardsSettings.__dataclass_fields__
    return StandardsSettings(**{k: v for k, v in options.items() if k in keys})


def ratio(device, third, floor: float = 0.0) -> np.ndarray:
    """``device / max(third, floor)`` with ``0 / 0 = 1`` and ``x / 0 = inf`` (float64)."""
    d = np.asarray(device, dtype=np.float64)
    t = np.maximum(np.asarray(third, dtype=np.float64), floor)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = d / t
    return np.where((d == 0) & (t == 0), 1.0, np.where((t == 0) & (d > 0), np.inf, out))


def ratio_level(mare_ratio, mere_ratio, rmse_ratio, count) -> np.ndarray:
    """The highest ratio level passed (``L0``, ``L1``, ``L2``) per row, ``none`` if none, ``unpaired`` where a
    ratio is NaN (the variant and the third party cover different points)."""
    ratios = {"mare": np.asarray(mare_ratio, dtype=np.float64), "mere": np.asarray(mere_ratio, dtype=np.float64),
              "rmse": np.asarray(rmse_ratio, dtype=np.float64)}
    count = np.asarray(count)
    level = np.full(count.shape, "none", dtype=object)
    for name, lim in RATIO_LEVELS.items():  # loosest first: a stricter level passed overwrites
        ok = (count >= lim["min_count"]) & np.logical_and.reduce([ratios[m] <= lim[m] for m in ratios])
        level[ok] = name
    unpaired = np.logical_or.reduce([np.isnan(v) for v in ratios.values()])
    level[unpaired] = "unpaired"
    return level


def _witness_text(frame: pd.DataFrame, prefix: str) -> np.ndarray:
    """One text per row naming a witness: its inputs and output as hex floats (empty where none)."""
    cols = witness_fields(frame.columns, prefix)
    columns = {c: frame[f"{prefix}{c}"].tolist() for c in cols}
    out = []
    for i in range(len(frame)):
        values = {c: columns[c][i] for c in cols}
        if "pred" not in values or pd.isna(values["pred"]) or values["pred"] is None:
            out.append("")
            continue
        parts = []
        for c, v in values.items():
            if isinstance(v, str):
                parts.append(f"{c}={v}")
            elif c == "target":
                parts.append(f"{c}={target_text(v)}")
            elif c in ("row", "col"):
                parts.append(f"{c}={int(v)}")
            elif c == "weight" and pd.isna(v):  # an absent weight
                parts.append(f"{c}=none")
            else:
                parts.append(f"{c}={float(v).hex()}")
        out.append(",".join(parts))
    return np.asarray(out, dtype=object)


def standards_table(stats: GroupStats, settings: StandardsSettings | None = None, variants=None,
                    regions=None) -> pd.DataFrame:
    """``standards.csv``: every (variant, machine, format) pooled over its points (region ``all``) and per
    region, judged by each standard (see the module docstring).

    ``stats`` needs the acceptance columns (``acc_sum_r``, ...) and the key
    columns variant, machine, format, region.  ``variants`` / ``regions``
    order the rows (default: as found).
    """
    settings = settings or StandardsSettings()
    keys = ["variant", "machine", "format"]
    per_region = stats.merge_frame(keys + ["region"])
    pooled = stats.merge_frame(keys).assign(region="all")
    f = pd.concat([pooled, per_region], ignore_index=True)
    count = f["count"].to_numpy(np.int64)
    match = f["acc_special_match"].to_numpy(np.int64)
    mismatch = f["acc_special_mismatch"].to_numpy(np.int64)
    mismatch_finite = f["acc_special_mismatch_finite"].to_numpy(np.int64)
    evaluated = count - match - mismatch  # finite on both sides: the metrics' positions
    with np.errstate(invalid="ignore", divide="ignore"):
        mere = np.where(evaluated > 0, f["acc_sum_r"].to_numpy(np.float64) / evaluated, np.nan)
        rmse = np.where(evaluated > 0, np.sqrt(f["acc_sum_sq"].to_numpy(np.float64) / evaluated), np.nan)
    mare = f["mare"].to_numpy(np.float64)
    T = np.asarray([THRESHOLD_T[fmt] for fmt in f["format"]], dtype=np.float64)
    out = pd.DataFrame({"variant": f["variant"].to_numpy(), "machine": f["machine"].to_numpy(),
                        "format": f["format"].to_numpy(), "region": f["region"].to_numpy(),
                        "count": count, "evaluated": evaluated, "special_match": match,
                        "special_mismatch": mismatch, "special_mismatch_finite": mismatch_finite, "mere": mere,
                        "mare": mare,
                        "mare_witness": _witness_text(f, ACCEPTANCE_MAXIMA["mare"]), "rmse": rmse,
                        "threshold_T": T,
                        # stat_rel_err: a special mismatch fails first; no finite position left passes
                        "threshold_pass": (mismatch == 0) & ((evaluated == 0) | ((mere < T) & (mare < 10 * T))),
                        "third_party": settings.label})
    # the third party's metrics on the same (format, region)
    third = out[(out["variant"] == settings.third_party) & (out["machine"] == settings.third_party_machine)]
    ref = out[["format", "region"]].merge(third[["format", "region", "count", "evaluated", "special_mismatch",
                                                 "special_mismatch_finite", "mere", "mare", "rmse"]],
                                          on=["format", "region"], how="left", suffixes=("", "_tp"))
    paired = ref["count"].to_numpy(np.float64) == count  # the same number of points (NaN: no third party)
    none_left = (evaluated == 0) & (ref["evaluated"].to_numpy(np.float64) == 0)  # both all special, matched
    for m in ("mare", "mere", "rmse"):
        r = ratio(out[m].to_numpy(np.float64), ref[m].to_numpy(np.float64), settings.ratio_floor)
        out[f"{m}_ratio"] = np.where(paired, np.where(none_left, 1.0, r), np.nan)
    level = ratio_level(out["mare_ratio"], out["mere_ratio"], out["rmse_ratio"], count)
    # cross_check judges special positions one by one: one passes when the device equals the third party there, or
    # the golden is special and the device matches it.  Pooled, that is decided in three cases: a third party
    # without special mismatches (every special golden is one both match: any mismatch of the device fails); a
    # device without them against a third party special where the golden is finite (the device is finite there,
    # so unequal to it: fails); a device without them against a third party whose mismatches are all at special
    # goldens (the device matches those: passes).  When neither fails, both sides' metrics are over the same
    # positions (the golden's finite ones).  Mismatches on both sides are judged position by position only.
    tp_mismatch = ref["special_mismatch"].to_numpy(np.float64)
    tp_at_finite = ref["special_mismatch_finite"].to_numpy(np.float64)
    itself = ((out["variant"] == settings.third_party) & (out["machine"] == settings.third_party_machine)).to_numpy()
    judged = paired & ~itself
    failed = judged & (tp_mismatch == 0) & (mismatch > 0)
    failed_tp = judged & (mismatch == 0) & (tp_at_finite > 0)
    undecided = judged & (tp_mismatch > 0) & (mismatch > 0)
    level[failed] = "special_mismatch"
    level[failed_tp] = "third_party_special"
    level[undecided] = "not_evaluable"
    level[itself] = "third_party"  # (the third party against itself: not a verdict)
    out["level"] = level
    note = np.full(len(out), "", dtype=object)
    note[failed] = [f"{n:,} special mismatches (NaN or inf against the exact value): cross_check fails before any "
                    "metric" for n in mismatch[failed]]
    note[failed_tp] = [f"the third party gives {int(n):,} special outputs where the exact value is finite: "
                       "cross_check fails the device there, which does not equal them (its rule: at a special "
                       "position the device equals the third party, or the golden is special and the device "
                       "matches it)" for n in tp_at_finite[failed_tp]]
    note[undecided] = [f"special mismatches on both sides ({int(a):,} here, {int(b):,} in the third party): "
                       "cross_check judges them position by position, which pooled statistics cannot"
                       for a, b in zip(mismatch[undecided], tp_mismatch[undecided])]
    out["level_note"] = note
    if third.empty:  # no third party among the rows: the ratio standard does not apply
        out["third_party"], out["level"], out["level_note"] = "none", "no_third_party", ""
    preset = f"acc_allclose_{settings.allclose}"
    for fmt in set(out["format"]):  # an unknown preset or format fails here, naming the presets
        allclose_tolerances(settings.allclose, fmt)
    out["allclose_share"] = f[preset].to_numpy(np.float64) / count
    out["blind"] = f["acc_blind"].to_numpy(np.int64)
    out["blind_witness"] = _witness_text(f, ACCEPTANCE_MAXIMA["blind_ulp"])
    out["false_alarm"] = f["acc_false_alarm"].to_numpy(np.int64)
    out["false_alarm_witness"] = _witness_text(f, ACCEPTANCE_MAXIMA["false_alarm_r"])
    out = pd.concat([out, _msprobe(f, out, paired & (not third.empty), settings)], axis=1)
    return _sorted(out, variants, regions)


def _msprobe(f: pd.DataFrame, out: pd.DataFrame, paired, settings: StandardsSettings) -> pd.DataFrame:
    """msprobe's standards of every row (:mod:`precision.analysis.msprobe`), the third party being the ratio
    standard's on the same (format, region) and the same number of points; empty columns for statistics
    without msprobe's (a format it has no standard for)."""
    if MSPROBE_COUNTS[0] not in f.columns:
        return pd.DataFrame({c: np.full(len(f), np.nan, dtype=object) for c in MSPROBE_COLUMNS}, index=out.index)
    own = msprobe_metrics(f)
    itself = ((out["variant"] == settings.third_party) & (out["machine"] == settings.third_party_machine)).to_numpy()
    keys = out[["format", "region"]].reset_index(drop=True)
    third = keys.merge(pd.concat([keys, own.reset_index(drop=True)], axis=1)[itself], on=["format", "region"],
                       how="left").drop(columns=["format", "region"])
    third[~np.asarray(paired, dtype=bool) | itself] = np.nan  # not the same points, or its own row: not judged
    return msprobe_verdicts(own.reset_index(drop=True), third, out["format"].to_numpy()).set_axis(out.index)


def _sorted(t: pd.DataFrame, variants, regions) -> pd.DataFrame:
    vrank = {v: i for i, v in enumerate(variants if variants is not None else dict.fromkeys(t["variant"]))}
    rrank = {r: i for i, r in enumerate(["all", *(regions if regions is not None else ())])}
    order = pd.DataFrame({"v": t["variant"].map(vrank), "m": t["machine"], "f": t["format"],
                          "r": t["region"].map(rrank).fillna(len(rrank))})
    idx = order.sort_values(["v", "m", "f", "r"], kind="stable").index
    return t.loc[idx].reset_index(drop=True)
