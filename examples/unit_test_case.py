"""The operator's kernel unit test replayed as it is: what its allclose verdict can and cannot see.

The unit test (``hicann/ops-nn``, ``loss/sigmoid_focal_loss_grad/tests/ut/op_kernel/
test_sigmoid_focal_loss_grad.cpp``) builds its inputs per element i in float32 arithmetic
(pred = float((i mod 17) - 8) * 0.625f, dout = 0.25f + float(i mod 7) * 0.125f,
weight = -0.75f + float(i mod 11) * 0.2f, target = i & 1), casts each to its profile's dtype, and runs:

* ``Mode0`` .. ``Mode11``: the twelve dtype profiles (pred, dout, weight in fp16 or fp32; weight absent
  from profile 8 on), 129 elements, alpha 0.25, gamma 2, reduceMeanCoef 1, one block, ubFormer 128 (64
  for profiles 7 and 11);
* ``HandlesExtremeLogitsAndMeanReduction``: profile 7 (fp32, weighted), 257 elements whose first six
  logits are -80, 80, -20, 20, -0, 0, alpha -0.125, gamma 3.25, reduceMeanCoef 1.0f/257, ubFormer 64;
* ``HandlesMultipleBlocksAndUbTiles``: profile 11 (fp32, no weight), 2,050 elements in blocks of 1,024,
  alpha 0.4, gamma 1.5, reduceMeanCoef 1, ubFormer 64.

Each output must be finite and within ``atol + rtol |golden|`` of a float32 scalar golden (std::pow powers,
the log clamp) rounded to pred's dtype: atol 2e-2, rtol 2e-2 for fp16 outputs, atol 8e-4, rtol 2e-3 for fp32
(the ``unit_test`` preset of :data:`precision.analysis.acceptance.ALLCLOSE_PRESETS`).  The golden is modelled
here as the textbook formula with the log clamp (``naive+G2``) on the ``numpy`` machine, on the inputs as
float32 (as the test reads them), rounded to pred's dtype; the kernel runs with the case's ubFormer as G4's
tile (``kernel[tile=N]``: the blocks of 1,024 are whole tiles, so flat tiles are the kernel's).

For the kernel on ieee and npu and for the golden, per case, the script prints and writes
(``OUT/unit_test_case.csv``): the test's verdict (``-`` for the golden itself), then, against the exact
gradient (the oracle), the ULP errors (max, share correctly rounded) and the acceptance standards (MERE, MARE,
threshold, allclose share, blind outputs, false alarms), from
:func:`precision.products.score_outputs.score_outputs`.

    python3 examples/unit_test_case.py out/unit_test_case
"""

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from precision import evaluate
from precision.analysis.acceptance import allclose_tolerances
from precision.products.score_outputs import DEVICE_MACHINE, score_outputs
from precision.operators.sigmoid_focal_loss_grad.implementations.common import validate_inputs

#: The test's dtype profiles (TestDtypeProfile): profile -> (pred, dout, weight or None).
PROFILES = {p: ("fp16" if p < 4 or p in (8, 9) else "fp32",
                "fp16" if p in (0, 1, 4, 5, 8, 10) else "fp32",
                None if p >= 8 else ("fp16" if p in (0, 2, 4, 6) else "fp32")) for p in range(12)}
#: (test, profile, elements, alpha, gamma, mean over the elements (reduceMeanCoef 1/N, else 1), ubFormer,
#: the extreme logits replacing the first elements)
CASES = (*((f"Mode{p}", p, 129, 0.25, 2.0, False, 64 if p in (7, 11) else 128, ()) for p in range(12)),
         ("HandlesExtremeLogitsAndMeanReduction", 7, 257, -0.125, 3.25, True, 64, (-80.0, 80.0, -20.0, 20.0, -0.0,
                                                                                      0.0)),
         ("HandlesMultipleBlocksAndUbTiles", 11, 2050, 0.4, 1.5, False, 64, ()))
_DTYPES = {"fp16": np.float16, "fp32": np.float32}


def unit_test_inputs(n: int, extreme, profile: int):
    """pred, target, dout, weight (None when the profile has none) of the test, [1, n], in the profile's
    dtypes: built in float32 arithmetic as the test builds them, then cast."""
    i = np.arange(n)
    f = np.float32
    pred = (i % 17 - 8).astype(f) * f(0.625)
    pred[:len(extreme)] = extreme
    dout = f(0.25) + (i % 7).astype(f) * f(0.125)
    weight = f(-0.75) + (i % 11).astype(f) * f(0.2)
    p, d, w = PROFILES[profile]
    return (pred.astype(_DTYPES[p])[None, :], (i & 1).astype(np.int32)[None, :], dout.astype(_DTYPES[d])[None, :],
            None if w is None else weight.astype(_DTYPES[w])[None, :])


def replay() -> pd.DataFrame:
    rows = []
    for test, profile, n, alpha, gamma, mean, ub, extreme in CASES:
        pred, target, dout, weight = unit_test_inputs(n, extreme, profile)
        fmt = PROFILES[profile][0]
        reduction, count = ("mean", {"count": n}) if mean else ("none", {})
        inputs = validate_inputs(pred, target, dout, weight, alpha, gamma, reduction)
        as32 = [a if a is None else a.astype(np.float32) for a in (pred, dout, weight)]
        golden = evaluate("naive+G2", as32[0], target, as32[1], as32[2], alpha=alpha, gamma=gamma,
                          reduction=reduction, machine="numpy", **count).astype(pred.dtype)
        outputs = {("kernel", m): evaluate(f"kernel[tile={ub}]", pred, target, dout, weight, alpha=alpha, gamma=gamma,
                                           reduction=reduction, machine=m, **count) for m in ("ieee", "npu")}
        outputs[("test_golden", "numpy")] = golden
        atol, rtol = allclose_tolerances("unit_test", fmt)
        g = golden.astype(np.float64)
        for (label, machine), out in outputs.items():
            o = out.astype(np.float64)
            verdict = "-" if label == "test_golden" else (
                "pass" if np.all(np.isfinite(o) & (np.abs(o - g) <= atol + rtol * np.abs(g))) else "fail")
            score = score_outputs(inputs, out, label=label)
            s = score.tables["summary.csv"]
            s = s[s["machine"] == DEVICE_MACHINE].iloc[0]
            st = score.tables["standards.csv"]
            st = st[(st["machine"] == DEVICE_MACHINE) & (st["region"] == "all")].iloc[0]
            rows.append({"test": test, "profile": "/".join(x or "none" for x in PROFILES[profile]), "count": n,
                         "implementation": label, "machine": machine, "test_verdict": verdict,
                         "max_ulp": s["max_ulp"], "share_correct": s["share_correct"],
                         "over_1ulp": int(s["over_1ulp"]),
                         "max_ulp_witness": f"pred={s['witness_pred']},target={s['witness_target']}",
                         "mere": st["mere"], "mare": st["mare"], "threshold_pass": bool(st["threshold_pass"]),
                         "allclose_share": st["allclose_share"], "blind": int(st["blind"]),
                         "false_alarm": int(st["false_alarm"])})
    return pd.DataFrame(rows)


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "out/unit_test_case")
    folder.mkdir(parents=True, exist_ok=True)
    table = replay()
    table.to_csv(folder / "unit_test_case.csv", index=False)
    with pd.option_context("display.width", 220, "display.max_columns", 20, "display.max_rows", 100):
        print(table.drop(columns="max_ulp_witness").to_string(index=False))
    print(f"table -> {folder / 'unit_test_case.csv'}")
