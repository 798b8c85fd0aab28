"""The operator's kernel unit test replayed: what its allclose verdict can and cannot see.

The unit test builds its inputs per element i (pred = ((i mod 17) - 8) * 0.625,
dout = 0.25 + (i mod 7) * 0.125, weight = -0.75 + (i mod 11) * 0.2, target =
i mod 2) in two cases: 257 elements whose first six logits are -80, 80, -20,
20, -0, 0, alpha -0.125, gamma 3.25; and 2,050 elements, alpha 0.4, gamma 1.5;
reduction mean over the elements.  It compares the kernel with a float32
scalar golden (std::pow powers) by allclose: atol 2e-2, rtol 2e-2 for float16
outputs, atol 8e-4, rtol 2e-3 for float32 (the ``unit_test`` preset of
:data:`precision.analysis.acceptance.ALLCLOSE_PRESETS`).  The golden is modelled here as
the textbook formula with the log clamp (``naive+G2``) on the ``numpy``
machine: float32 library calls, as a C++ scalar loop runs them.

For the kernel on ieee and npu and for the golden, per case and output format,
the script prints and writes (``OUT/unit_test_case.csv``): the test's verdict
(allclose against the golden; ``-`` for the golden itself), then, against the
exact gradient (the oracle), the ULP errors (max, share correctly rounded) and
the acceptance standards (MERE, MARE, threshold, allclose share, blind
outputs, false alarms), from :func:`precision.products.score_outputs.score_outputs`.

    python3 examples/unit_test_case.py out/unit_test_case
"""

import sys
from pathlib import Path

import numpy as np
import pandas as pd

from precision import evaluate
from precision.sigmoid_focal_loss_grad.implementations.common import validate_inputs
from precision.analysis.acceptance import allclose_tolerances
from precision.products.score_outputs import DEVICE_MACHINE, score_outputs

#: (case, elements, alpha, gamma, logits replacing the first elements)
CASES = (("n257", 257, -0.125, 3.25, (-80.0, 80.0, -20.0, 20.0, -0.0, 0.0)), ("n2050", 2050, 0.4, 1.5, ()))
#: (label, variant, machine): the kernel on both machines, the test's golden
IMPLEMENTATIONS = (("kernel", "kernel", "ieee"), ("kernel", "kernel", "npu"), ("test_golden", "naive+G2", "numpy"))


def unit_test_inputs(n: int, first_logits, dtype):
    """pred, target, dout, weight of the unit test ([1, n], pred's dtype for the floats)."""
    i = np.arange(n)
    pred = ((i % 17) - 8) * 0.625
    pred[:len(first_logits)] = first_logits
    dout = 0.25 + (i % 7) * 0.125
    weight = -0.75 + (i % 11) * 0.2
    return (pred.astype(dtype)[None, :], (i % 2).astype(np.int32)[None, :], dout.astype(dtype)[None, :],
            weight.astype(dtype)[None, :])


def replay() -> pd.DataFrame:
    rows = []
    for case, n, alpha, gamma, logits in CASES:
        for fmt, dtype in (("fp16", np.float16), ("fp32", np.float32)):
            pred, target, dout, weight = unit_test_inputs(n, logits, dtype)
            inputs = validate_inputs(pred, target, dout, weight, alpha, gamma, "mean")
            outputs = {(label, machine): evaluate(variant, pred, target, dout, weight, alpha=alpha, gamma=gamma,
                                                  reduction="mean", machine=machine)
                       for label, variant, machine in IMPLEMENTATIONS}
            golden = outputs[("test_golden", "numpy")].astype(np.float64)
            atol, rtol = allclose_tolerances("unit_test", fmt)
            for (label, machine), out in outputs.items():
                o = out.astype(np.float64)
                verdict = "-" if label == "test_golden" else (
                    "pass" if np.all(np.isfinite(o) & (np.abs(o - golden) <= atol + rtol * np.abs(golden)))
                    else "fail")
                score = score_outputs(inputs, out, label=label)
                s = score.tables["summary.csv"]
                s = s[s["machine"] == DEVICE_MACHINE].iloc[0]
                st = score.tables["standards.csv"]
                st = st[(st["machine"] == DEVICE_MACHINE) & (st["region"] == "all")].iloc[0]
                rows.append({"case": case, "format": fmt, "implementation": label, "machine": machine,
                             "count": int(s["count"]), "test_verdict": verdict, "max_ulp": s["max_ulp"],
                             "share_correct": s["share_correct"], "over_1ulp": int(s["over_1ulp"]),
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
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.drop(columns="max_ulp_witness").to_string(index=False))
    print(f"table -> {folder / 'unit_test_case.csv'}")
