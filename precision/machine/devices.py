"""Which device each machine model stands for, and where that behaviour is documented.

A guard's value is a property of a (recipe, machine) pair (``sigmoid_focal_loss_grad.md`` §7), so a
decision names its machine model, and the reader needs to know which device that model stands for.
:data:`DEVICES` is that table: per base model (``ieee``, ``numpy``, ``npu``) the device, the behaviour
the model reproduces and its source; per flush switch (``+ftz``, ``+daz``) what it adds.
:func:`device_of` spells a composite name (``npu+ftz``) and :data:`PRODUCTION_MODEL` names the model of
the device the kernel ships on.

Operator-free facts about machines; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Device", "DEVICES", "SWITCHES", "PRODUCTION_MODEL", "device_of", "is_production", "ASCEND950_UB_BYTES",
           "ASCEND950_CORES"]


@dataclass(frozen=True)
class Device:
    """The device a machine model stands for.

    ``device`` names it, ``behaviour`` says what the model reproduces (the part a guard's value depends
    on: subnormals kept or flushed, the accuracy of exp, ln, div and pow), ``source`` where that
    behaviour is documented.
    """

    device: str
    behaviour: str
    source: str


#: Base machine models (``precision.machine.MODEL_NAMES``) -> the device each stands for.
DEVICES = {
    "ieee": Device("an ideal IEEE 754 float32 machine (no real device: the reference)",
                   "every op correctly rounded, gradual underflow everywhere",
                   "sigmoid_focal_loss_grad.md §7"),
    "numpy": Device("a CPU running numpy's float32 ufuncs (the CPU reference a test compares with)",
                    "IEEE +, -, *, / with gradual underflow; the platform's libm exp, ln, pow",
                    "sigmoid_focal_loss_grad.md §7"),
    "npu": Device("the Ascend 950 (arch 3510) vector unit, where the kernel ships",
                  "Add/Mul keep subnormals; hardware Exp, Ln and default Div flush (1 ulp, proxies); "
                  "Div 0-ulp and the DOUBLE_FLOAT_TECH Power as documented",
                  "npu_math.md §1, §2, §6 (asc-devkit, Reg precision table)"),
}

#: Flush switches appended to a model name -> what they add (and which device that models).
SWITCHES = {
    "ftz": "Mul/Add flush subnormal results to zero: a device without gradual underflow in its vector "
           "arithmetic (not the Ascend 950, whose Add/Mul keep subnormals)",
    "daz": "Mul/Add read subnormal inputs as zero: a device that treats denormal operands as zero "
           "(not the Ascend 950)",
}

#: The machine model of the device the production kernel runs on.
PRODUCTION_MODEL = "npu"

#: The Ascend 950 (arch 3510) platform as the operators' tiling tests give it (hicann/ops-nn
#: ``tests/ut/op_host/arch35/test_sigmoid_focal_loss_grad_tiling.cpp``: ``platformUbBytes = 253952``, 248 KiB, and
#: ``availableCoreNum = 64``); the sources do not fix the device's values, other arch35 tests use 256 KiB.
ASCEND950_UB_BYTES = 253952
ASCEND950_CORES = 64


def device_of(model: str) -> str:
    """The device a machine model name stands for, in one phrase.

    Examples
    --------
    >>> device_of("npu")
    'the Ascend 950 (arch 3510) vector unit, where the kernel ships'
    >>> device_of("npu+ftz").startswith("the Ascend 950 (arch 3510) vector unit, where the kernel ships, with ")
    True
    >>> device_of("tpu")
    'tpu (not a documented machine model)'
    """
    base, *switches = str(model).split("+")
    if base not in DEVICES:
        return f"{model} (not a documented machine model)"
    text = DEVICES[base].device
    for s in switches:
        if s in SWITCHES:
            text += f", with {SWITCHES[s]}"
    return text


def is_production(model: str) -> bool:
    """Whether ``model`` is the production device's model (:data:`PRODUCTION_MODEL`, no flush switch)."""
    return str(model) == PRODUCTION_MODEL
