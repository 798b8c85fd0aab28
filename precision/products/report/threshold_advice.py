"""A threshold search's answer as one recommendation: the plateau, its simplest value, the size.

From a cancellation-threshold run's tables (``threshold_search_octaves.csv``, ``threshold.csv``,
``threshold_search.csv``, ``verdicts.csv``), per machine:

- the **plateau**: the interval of tau whose net cannot be told from the best float32 tau
  (:func:`precision.analysis.decision.plateau`, an exact sign test per octave, largest octave first);
- when the production threshold lies on the plateau, no change is supported: keep it;
- else its **simplest value**: the largest power of two on it, reported as ``always`` when that threshold's
  pooled row of ``threshold.csv`` has the same counts as always's (changed, better and worse against
  never, mean bits, largest finite error, share correctly rounded): the test can then be dropped;
- the **size** in a reviewer's terms: mean bits of error, largest finite error and share correctly
  rounded with the production threshold and with the recommendation, and the share of the outputs
  the change moves that get worse (``verdicts.csv``, recommendation against production).

The review page and the threshold section both say it with :func:`recommendation_sentence`.  The
numbers are the pooled points' of the study (its grid of attributes): a property of those points.
"""

from __future__ import annotations

import math

import pandas as pd

from precision.analysis.decision import plateau
from precision.products.report.findings import fmt_num
from precision.products.report.tables import short_hex

__all__ = ["recommend_thresholds", "recommendation_sentence", "power_text"]

#: The counts that make a threshold indistinguishable from always on a study's points.
SAME_AS_ALWAYS = ("changed_vs_never", "better_vs_never", "worse_vs_never", "mean_bits", "max_finite_ulp",
                  "share_correct")


def power_text(tau: float) -> str:
    """``2^-k`` for a power of two, ``always`` for inf, ``0`` for 0, else the hex float."""
    if tau == math.inf:
        return "always"
    if tau <= 0:
        return "0"
    k = -math.log2(tau)
    return f"2^{-int(k)}" if k == int(k) else float(tau).hex()


def _count(v) -> int | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)


def recommend_thresholds(octaves: pd.DataFrame, t: pd.DataFrame, v: pd.DataFrame, search: pd.DataFrame,
                         study: str) -> list:
    """One recommendation (a dict) per machine of ``octaves``; [] when a table is missing.

    ``t``: threshold.csv (its ``pooled`` subset is used); ``v``: verdicts.csv (its threshold rows against
    the production threshold, region ``all``); ``search``: threshold_search.csv (the best float32 tau).
    """
    if octaves.empty or t.empty or v.empty:
        return []
    out = []
    pooled = t[t["subset"] == "pooled"]
    for machine, oc in octaves.groupby("machine", sort=False):
        oc = oc.sort_values("k")
        lo, hi = plateau(oc["tau_lo"].to_numpy(float), oc["tau_hi"].to_numpy(float), oc["better"].to_numpy(),
                         oc["worse"].to_numpy())
        mine = pooled[pooled["machine"] == machine]
        prod_rows = v[(v["region"] == "all") & (v["machine"] == machine) & (v["kind"] == "threshold")
                      & ~v["without_variant"].str.contains("never")]
        if mine.empty or prod_rows.empty:
            continue
        production_variant = prod_rows["without_variant"].iloc[0]
        prod = mine[mine["variant"] == production_variant].iloc[0]
        powers = mine[(mine["tau"] >= lo) & (mine["tau"] <= hi) & (mine["threshold"] != "always")]
        simplest = powers.sort_values("tau", ascending=False).iloc[0] if len(powers) else None
        always = mine[mine["threshold"] == "always"]
        as_always = simplest is not None and len(always) > 0 and all(
            simplest[c] == always.iloc[0][c] for c in SAME_AS_ALWAYS)
        rec = always.iloc[0] if as_always else simplest
        on_plateau = lo <= float(prod["tau"]) <= hi
        if on_plateau:  # no change is supported: the production threshold nets as the best within noise
            rec = prod
        if rec is None:
            continue
        vs = prod_rows[prod_rows["with_variant"] == rec["variant"]]
        vr = vs.iloc[0] if len(vs) else None
        best = search[search["machine"] == machine] if not search.empty else search
        out.append({
            "machine": machine, "format": str(prod["format"]), "profile": str(prod["profile"]), "study": study,
            "plateau_lo": lo, "plateau_hi": hi, "plateau_text": f"[{power_text(lo)}, {power_text(hi)}]",
            "best_tau_hex": (short_hex(best["boundary"].iloc[0]) if len(best) and "boundary" in best
                             and isinstance(best["boundary"].iloc[0], str) else None),
            "recommendation": str(rec["threshold"]), "simplest_power": str(simplest["threshold"]),
            "identical_to_always": bool(as_always), "production": str(prod["threshold"]),
            "production_on_plateau": bool(on_plateau),
            "production_variant": production_variant, "recommended_variant": str(rec["variant"]),
            "mean_bits_production": float(prod["mean_bits"]), "mean_bits_recommended": float(rec["mean_bits"]),
            "max_finite_ulp_production": float(prod["max_finite_ulp"]),
            "max_finite_ulp_recommended": float(rec["max_finite_ulp"]),
            "share_correct_production": float(prod["share_correct"]),
            "share_correct_recommended": float(rec["share_correct"]),
            "changed": _count(vr["changed"]) if vr is not None else None,
            "better": _count(vr["better"]) if vr is not None else None,
            "worse": _count(vr["worse"]) if vr is not None else None,
            "verdict": vr["verdict"] if vr is not None else None,
            "link": f"{study}/report.html#threshold"})
    return out


def recommendation_sentence(r: dict, machine: bool = True) -> str:
    """The recommendation in words: what to use, why (the plateau), and the size of the change."""
    head = f"{r['machine']} {r['format']}: " if machine else ""
    if r.get("production_on_plateau"):
        return (f"{head}keep {r['production']}: it lies on the plateau {r['plateau_text']} of thresholds that net "
                f"the same as the best float32 tau ({r['best_tau_hex']}) within noise (sign test per octave), "
                "so these points support no change.")
    same = (f"; {r['simplest_power']}, the largest power of two on it, gives the same counts as always on the "
            "study's points, so: drop the test and always correct") if r["identical_to_always"] else ""
    worse = (f"; of the {fmt_num(r['changed'])} outputs that change, {fmt_num(r['worse'])} "
             f"({r['worse'] / max(r['changed'], 1):.0%}) get worse") if r.get("changed") else ""
    return (f"{head}use {r['recommendation']} instead of {r['production']}. Every tau in "
            f"{r['plateau_text']} nets the same as the best float32 tau ({r['best_tau_hex']}) within noise "
            f"(sign test per octave){same}. Size: mean error {fmt_num(round(r['mean_bits_production'], 3))} -> "
            f"{fmt_num(round(r['mean_bits_recommended'], 3))} bits, largest finite error "
            f"{fmt_num(r['max_finite_ulp_production'])} -> {fmt_num(r['max_finite_ulp_recommended'])} ulp, share "
            f"correctly rounded {r['share_correct_production']:.2%} -> {r['share_correct_recommended']:.2%}{worse}.")
