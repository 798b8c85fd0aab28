"""Words defined: the glossary block of every report and its scope (which guards its points exercise).

The guard rows come from the run's operator's registry (:data:`precision.operators.sigmoid_focal_loss_grad.guards.GUARD_NAMES`,
:data:`precision.operators.sigmoid_focal_loss_grad.guards.GUARD_PURPOSE`) and the meaning of each fired count
(:data:`precision.operators.sigmoid_focal_loss_grad.implementations.kernel.FIRED_MEANING`); the other terms are
listed only when the page uses them (:func:`used_terms` reads the page's own text), the generic ones and the
operator's own (its ``GLOSSARY``).
The scope (:func:`scope_table`) says, per guard, how many of the study's points it acted on in the variants
that carry it, and for a guard it never acted on, why and which report exercises it.
"""

from __future__ import annotations

import re

import pandas as pd

from precision.errors import PrecisionError
from precision.products.report.answers import exercising_study, not_exercised_reason, variant_totals

__all__ = ["TERMS", "TERMS_AFTER", "guard_table", "used_terms", "scope_table"]

#: Term -> definition (shown when the page uses the term); ``{value}`` is what the operator's exact value is called
#: (its ``VALUE``: the gradient, the loss).
TERMS = {
    "helps": "exact sign tests (level 0.01) on specials fixed vs caused and on finite outputs better vs worse: "
             "significant for the first variant in one direction only (or, neither alone, all better vs all worse)",
    "hurts": "as helps, significant against the first variant",
    "mixed": "the two sign tests significant in opposite directions (e.g. fixes specials, worsens finite outputs)",
    "inconclusive": "outputs change but no significant difference (or changes only on both_garbage points)",
    "no_effect": "the subject acted on some points but no output bit changed",
    "not exercised": "the guard's condition held at none of the points, so the comparison says nothing about it",
    "both_garbage": "a changed output special or wrong by over 2^20 ulp both with and without: no evidence either way",
    "better/worse": "changed outputs whose error falls / rises with the first variant, paired on the same point",
    "changed": "outputs whose bits differ between the two variants (NaN payloads aside)",
    "correctly rounded": "the output equals the exact {value} rounded to nearest in the output format",
    "CR": "correctly rounded",
    "ulp": "unit in the last place of the exact value in the output format; errors are |computed - exact| / ulp",
    "bits": "bits of error, log2(1 + ulp error); a gain of k bits divides the error by about 2^k",
    "special": "a NaN, inf, wrong-sign or lost-inf output where the exact value is finite (or the reverse)",
    "special mismatches": "for the standards (TTK's rules): a NaN or inf output, or golden (the exact value rounded "
                        "into the format where it overflows), without its match (NaN for NaN, the same inf); it "
                        "fails the threshold and ratio standards before any metric",
    "fired": "points where the guard's condition held in the variant that has it (per guard: see the guard table)",
    "exhaustive": "a maximum over every representable input of the range (exact)",
    "sampled": "a maximum over a sample of inputs: a lower bound of the true maximum",
    "hunted": "a maximum found by a search for bad inputs: a lower bound, usually near the true one",
    "region": "a range of x = pred (the study's region edges)",
    "pooled": "all regions of the study together, except those it keeps apart",
}
#: The terms after the operator's own (its ``GLOSSARY``), which follow :data:`TERMS`.
TERMS_AFTER = {
    "witness": "the input at which a maximum is attained, in hex floats (exact)",
    "explain": "`precision explain ...` evaluates one point step by step: each step's computed and exact value, "
               "local error and cause",
}


def guard_table(op) -> pd.DataFrame:
    """One row per guard of the operator ``op``: id, name, what it does, what its fired count counts."""
    return pd.DataFrame({"guard": list(op.GUARD_NAMES), "name": list(op.GUARD_NAMES.values()),
                         "what it does": [op.GUARD_PURPOSE[g] for g in op.GUARD_NAMES],
                         "fired counts points where": [op.FIRED_MEANING[g] for g in op.GUARD_NAMES]})


def used_terms(text: str, op) -> pd.DataFrame:
    """The terms the text uses (whole words, case-sensitive), in glossary order: :data:`TERMS`, the operator
    ``op``'s own (its ``GLOSSARY``), :data:`TERMS_AFTER`."""
    rows = [(term, d.replace("{value}", op.VALUE)) for term, d in {**TERMS, **op.GLOSSARY, **TERMS_AFTER}.items()
            if re.search(r"(?<![\w-])" + re.escape(term) + r"(?![\w-])", text)]
    return pd.DataFrame(rows, columns=["term", "meaning"])


def scope_table(run) -> pd.DataFrame:
    """Per guard: the variants of the study that carry it, the points it acted on among theirs (pooled regions),
    whether the study exercises it, and if not why and which report does."""
    op = run.operator
    totals = variant_totals(run)
    totals = totals[totals["region"] == "all"]
    rows = []
    for g, column in op.FIRED_COLUMNS.items():
        fired = int(totals[column].sum()) if column in totals.columns else 0
        carrying = [v for v in dict.fromkeys(totals["variant"]) if _carries(v, g, op)]
        points = int(totals[totals["variant"].isin(carrying)]["count"].sum()) if carrying else 0
        exercised = fired > 0
        elsewhere = None if exercised else exercising_study(str(run.run.get("study_file", "")), g, op)
        if not carrying:
            why = "no variant of the study has this guard"
        else:
            why = "" if exercised else not_exercised_reason(run, g)
        rows.append({"guard": g, "name": op.GUARD_NAMES[g], "variants with it": len(carrying),
                     "points (all variants with it)": points, "fired": fired, "exercised": exercised,
                     "why not": why, "exercised in": "" if exercised else
                     f"{elsewhere} report (../{elsewhere}/report.html)" if elsewhere else "no reviewed study"})
    for g in [g for g in op.GUARD_NAMES if g not in op.FIRED_COLUMNS]:  # a guard whose decisions are not kept
        carrying = [v for v in dict.fromkeys(totals["variant"]) if _carries(v, g, op)]
        points = int(totals[totals["variant"].isin(carrying)]["count"].sum()) if carrying else 0
        rows.append({"guard": g, "name": op.GUARD_NAMES[g], "variants with it": len(carrying),
                     "points (all variants with it)": points, "fired": "not tracked", "exercised": True,
                     "why not": "", "exercised in": ""})
    return pd.DataFrame(rows)


def _carries(variant: str, guard: str, op) -> bool:
    try:
        guards = op.variant_guards(variant)
    except PrecisionError:  # a plugin variant not loaded: it carries no guard of the kernel
        return False
    return guards is not None and guard in guards
