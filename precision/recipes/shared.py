"""Several recipes on the same operands, each shared step computed once: any operator's shared evaluation.

Variants that are one recipe with different switches (an operator's ``kernel``, ``kernel-G8``,
``naive+G5``, ...) share every step whose inputs and configuration keys (its own and its ancestors') agree;
:func:`run_shared` runs a group of them on one machine and returns each output bit-identical to the variant
evaluated alone.  The operator groups its variants (by recipe and machine) and validates the inputs; this
module only runs them.
"""

from __future__ import annotations

import numpy as np

from precision.errors import PrecisionError
from precision.recipes.steps import full_value

__all__ = ["run_shared", "step_array", "evaluate_calls", "in_order", "evaluate_rows"]


def step_array(value, shape) -> np.ndarray:
    """A kept step's value as an array of the operands' shape (a ``where`` step that ran nowhere: all False)."""
    if value is None:
        return np.zeros(shape, dtype=bool)
    return np.array(np.broadcast_to(np.asarray(full_value(value)), (int(np.prod(shape)),)).reshape(shape))


def run_shared(members, machine, inputs, count: int, operands: dict, keep_steps=()) -> tuple[dict, dict]:
    """Run the recipe calls of one group (one recipe, one machine) on the same operands.

    Parameters
    ----------
    members : list of (str, RecipeCall)
        The variants' names and calls, all of one recipe, in evaluation order.
    machine : Machine
        The machine they run on (the group's compute format applied).
    inputs : object
        The validated inputs (their ``shape``), passed to each call's ``prepare``.
    count : int
        The mean's element count (``prepare``'s third argument).
    operands : dict
        The loaded operands (the recipe's inputs, 1-D).
    keep_steps : tuple of str
        Step names whose values to return as well.

    Returns
    -------
    (dict, dict)
        name -> output ``[N, C]`` (never one array twice); name -> {kept step -> its value ``[N, C]``},
        read-only arrays, one per distinct step value, shared by the variants that computed it.  A step value
        is kept in memory only while a later member still reads it.
    """
    recipe = members[0][1].recipe
    consts = members[0][1].prepare(machine, inputs, count)
    plans = [recipe.plan(call.config) for _, call in members]
    later = [set() for _ in plans]
    for i in range(len(plans) - 2, -1, -1):
        later[i] = later[i + 1] | set(plans[i + 1].keys)
    memo: dict = {}
    returned: set = set()
    step_arrays: dict = {}
    results, kept = {}, {}
    for i, (key, _) in enumerate(members):
        steps = {s.name: plans[i].keys[j] for j, s in enumerate(plans[i].steps) if s.name in keep_steps}
        out = recipe.run(plans[i], machine, consts, operands, memo=memo, keep=later[i] | set(steps.values()))
        for k in steps.values():
            if k not in step_arrays:
                step_arrays[k] = step_array(memo[k], inputs.shape)
                step_arrays[k].flags.writeable = False
        kept[key] = {name: step_arrays[k] for name, k in steps.items()}
        for k in [k for k in memo if k not in later[i]]:
            del memo[k]
        if id(out) in returned or any(out is v for v in memo.values()):
            out = out.copy()  # never hand out one array twice
        returned.add(id(out))
        results[key] = out.reshape(inputs.shape)
    return results, kept


def evaluate_calls(calls: dict, inputs, count: int, load, keep_steps=()) -> tuple[dict, dict]:
    """Every recipe call of ``calls`` (name -> (machine, RecipeCall)), grouped by recipe and machine model and run
    group by group with :func:`run_shared` on the operands ``load(machine, inputs)``; returns its two dicts,
    every group's merged."""
    groups: dict = {}
    for key, (machine, call) in calls.items():
        groups.setdefault((id(call.recipe), machine.model), (machine, []))[1].append((key, call))
    results, kept = {}, {}
    for machine, members in groups.values():
        outputs, steps = run_shared(members, machine, inputs, count, load(machine, inputs), keep_steps)
        results.update(outputs)
        kept.update(steps)
    return results, kept


def in_order(names, results: dict, kept: dict, keep_steps=()):
    """An operator's ``evaluate_variants`` return value: name -> output (or error) in the order asked (a name or a
    row with a ``name``), and with ``keep_steps`` also name -> {kept step -> value}."""
    out = {getattr(n, "name", n): results[getattr(n, "name", n)] for n in names}
    return (out, {name: kept.get(name, {}) for name in out}) if keep_steps else out


def evaluate_rows(names, table, inputs, machine_of, alone, count: int, load, keep_steps=()):
    """An operator's ``evaluate_variants`` over its variant table: every variant that is a recipe is run with the
    others of its recipe and machine (:func:`evaluate_calls`), any other evaluated alone; each name's result is
    its output or the :class:`~precision.errors.PrecisionError` evaluating it alone raises.

    ``table``: the operator's :class:`~precision.recipes.registry.VariantTable`; ``inputs``: its validated
    inputs, or None when they are invalid (then every variant is evaluated alone and raises that error);
    ``machine_of(call)``: the machine a recipe call runs on (raising a PrecisionError for inputs the call refuses,
    e.g. an fp16-only recipe); ``alone(row)``: the output of a variant that is not a recipe; ``count``, ``load``
    and ``keep_steps`` as :func:`evaluate_calls`.  Returns :func:`in_order`'s value.
    """
    wanted = tuple(keep_steps)
    results, calls = {}, {}
    for name in names:
        key = getattr(name, "name", name)
        try:
            row = table.get(name)
            call = table.recipe_call(row) if inputs is not None else None
            if call is None:
                results[key] = alone(row)
            else:
                calls[key] = (machine_of(call), call)
        except PrecisionError as exc:
            results[key] = exc
    shared, kept = evaluate_calls(calls, inputs, count, load, wanted)
    return in_order(names, {**results, **shared}, kept, wanted)
