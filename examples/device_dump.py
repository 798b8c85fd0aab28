"""Write an example "device run" for `precision score`: inputs as .npz, outputs as .npy and as a raw dump.

The outputs stand in for what an NPU returned: the kernel recipe on the emulated npu machine, with one
element perturbed by 300 ulps (a stand-in for a hardware or driver bug) so that the score has a witness
to name and the comparison with the emulation has a disagreement to show.

    python3 examples/device_dump.py out/device
    precision score --inputs out/device/inputs.npz --outputs out/device/grad.npy --reduction sum \\
        --compare-with kernel --machine npu
"""

import sys
from pathlib import Path

import numpy as np

from precision import evaluate

folder = Path(sys.argv[1] if len(sys.argv) > 1 else "out/device")
folder.mkdir(parents=True, exist_ok=True)
rng = np.random.default_rng(0)
pred = rng.normal(0.0, 6.0, (256, 80)).astype(np.float16)
target = (rng.random(pred.shape) < 0.1).astype(np.int32)
dout = np.full(pred.shape, 1.0, dtype=np.float16)
grad = evaluate("kernel", pred, target, dout, alpha=0.25, gamma=2.0, reduction="sum", machine="npu")
grad.view(np.uint16)[17, 5] += 300  # the planted fault: element (17, 5)
np.savez(folder / "inputs.npz", pred=pred, target=target, dout=dout)
np.save(folder / "grad.npy", grad)
grad.tofile(folder / "grad.bin")  # the same outputs as a raw little-endian float16 dump
print(f"inputs -> {folder / 'inputs.npz'}, outputs -> {folder / 'grad.npy'} and {folder / 'grad.bin'} "
      f"({grad.shape[0]}x{grad.shape[1]} float16)")
