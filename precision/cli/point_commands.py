"""``precision oracle`` (and ``--check``) and ``precision explain``: the commands about one point."""

from __future__ import annotations

import json
import math

import numpy as np
from mpmath import libmp, mpf

from precision.cli.options import (OPTION_ATTRIBUTES, UsageError, command_operator, load_cli_plugins,
                                   parse_attributes, parse_exact_float, parse_int, parse_target)
from precision.engine.operators import DEFAULT_OPERATOR
from precision.recipes.target_kinds import target_json, target_kind, target_text
from precision.errors import ParameterError, PrecisionError
from precision.analysis.scoring import ulp_error
from precision.exact.formats import FORMATS, round_to_format
from precision.recipes.steps import trace

# ---------------------------------------------------------------------------
# precision oracle, oracle --check, explain
# ---------------------------------------------------------------------------

#: The options that describe one point (``precision oracle`` without ``--check``).
_POINT_OPTIONS = ("pred", "target", *OPTION_ATTRIBUTES, "weight", "dout", "count")
#: The options of ``--check`` only.
_CHECK_OPTIONS = ("points", "seed")


def _unused_inputs(args, op) -> None:
    """One-line error for a ``--dout`` or ``--count`` given to an operator without that input (its ``INPUTS``)."""
    given = getattr(args, "given", None)
    for name in ("dout", "count"):
        default = {"dout": "1.0", "count": "1"}[name]
        named = name in given if given is not None else getattr(args, name) != default
        if named and name not in op.INPUTS:
            raise ParameterError(f"--{name}: the operator {args.operator!r} has no {name} input (its inputs: pred, "
                                 f"{', '.join(op.INPUTS)} and {', '.join(op.ATTRIBUTES)})")


def cmd_oracle(args) -> int:
    given = getattr(args, "given", frozenset())
    op = command_operator(args)
    if args.check and args.operator != DEFAULT_OPERATOR:
        raise ParameterError(f"oracle --check: the Arb cross-check is {DEFAULT_OPERATOR}'s; the operator "
                             f"{args.operator!r} has none")
    if args.check:
        ignored = [f"--{name}" for name in _POINT_OPTIONS if name in given]
        if ignored:
            raise ParameterError(f"oracle --check takes no point ({', '.join(ignored)} given); it checks random "
                                 "points and hard cases: drop --check to evaluate one point")
        return cmd_oracle_check(args)
    ignored = [f"--{name}" for name in _CHECK_OPTIONS if name in given]
    if ignored:
        raise ParameterError(f"oracle: {', '.join(ignored)} applies to --check only; add --check or drop it")
    if args.pred is None or args.target is None:
        raise UsageError("oracle: the following arguments are required: --pred, --target (or --check) "
                          "(see 'precision oracle --help')")
    _unused_inputs(args, op)
    x = parse_exact_float(args.pred, "pred")
    t = parse_target(args.target, op)
    attributes = parse_attributes(args)
    weight = parse_exact_float(args.weight, "weight")
    dout = parse_exact_float(args.dout, "dout")
    count = parse_int(args.count, "count", positive=True)
    exact = op.exact_decimal(x, t, *attributes.values(), weight, dout, count, digits=40)
    lines = [
        f"operator {args.operator}" if args.operator != DEFAULT_OPERATOR else "",
        f"pred    {x.hex():<24} {x!r}",
        f"target  {target_text(t)}",
        *(f"{name:<7} {v.hex():<24} {v!r} (float32)" for name, v in attributes.items()),
        f"weight  {weight.hex():<24} {weight!r}",
        f"dout    {dout.hex():<24} {dout!r}" if "dout" in op.INPUTS else "",
        f"count   {count}" if "count" in op.INPUTS else "",
        f"exact   {exact}",
    ]
    for name in FORMATS:
        try:
            v = op.round_exact(x, t, *attributes.values(), weight, dout, count, fmt=name)
            lines.append(f"{name:<7} {v.hex():<24} {v!r}")
        except PrecisionError as exc:  # undecided at the precision cap
            lines.append(f"{name:<7} unresolved ({exc})")
    lines += [_representability_note(name, value) for name, value in (("pred", x), ("weight", weight),
                                                                        ("dout", dout))]
    print("\n".join(line for line in lines if line))
    return 0


#: The tensor formats a kernel's pred/weight/dout can have.
_INPUT_FORMATS = ("fp16", "bf16", "fp32")


def _representability_note(name: str, value: float) -> str:
    """A ``note:`` line when ``value`` is not exactly a value of every input format, else ''.

    The oracle evaluates at the float64 value given; a kernel whose tensors
    are fp16, bf16 or fp32 receives that value rounded (or inf), so the rounded
    lines above are not what such a kernel should return for it.
    """
    inexact, overflow = [], []
    for fmt in _INPUT_FORMATS:
        rounded = float(round_to_format(np.float64(value), FORMATS[fmt]))
        if rounded != value:
            (overflow if math.isinf(rounded) else inexact).append(fmt)
    if not inexact and not overflow:
        return ""
    parts = ([f"overflows {', '.join(overflow)}"] if overflow else []) + \
            ([f"is not exact in {', '.join(inexact)}"] if inexact else [])
    return (f"note: {name}={value!r} {' and '.join(parts)}; the values above are for this float64 {name}, "
            f"which an {'/'.join(overflow + inexact)} tensor cannot hold")


def cmd_oracle_check(args) -> int:
    """``precision oracle --check``: the mpmath and Arb oracles, bit for bit."""
    try:  # python-flint is an optional extra: imported only when asked for
        from precision.operators.sigmoid_focal_loss_grad import oracle_arb
    except ImportError:
        raise ParameterError("--check needs python-flint for the Arb oracle; "
                             "install it with pip install 'precision[arb]'") from None
    points = parse_int(args.points, "points")
    seed = parse_int(args.seed, "seed")
    if points < 0:
        raise ParameterError(f"--points={args.points!r}; expected a count >= 0")
    report = oracle_arb.crosscheck(points=points, seed=seed)
    print("\n".join(report.lines()))
    return 0 if report.passed else 1


def _json_number(v):
    """A float for JSON: None for NaN, "inf"/"-inf" for infinities (JSON has neither)."""
    v = float(v)
    if math.isnan(v):
        return None
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def cmd_explain(args) -> int:
    """``precision explain``: one point's error, step by step (the operator's ``attribute``:
    :mod:`precision.analysis.attribution`)."""
    load_cli_plugins(args)
    op = command_operator(args)
    _unused_inputs(args, op)
    if op.attribute is None:
        return _explain_steps(args, op)
    attribute, describe, exact_decimal = op.attribute, op.describe, op.exact_decimal
    has_dout, has_count = "dout" in op.INPUTS, "count" in op.INPUTS
    dtype = np.dtype(np.float16 if args.format == "fp16" else np.float32)
    raw = {name: parse_exact_float(getattr(args, name), name) for name in ("pred", "dout")
           if has_dout or name != "dout"}
    raw["weight"] = None if args.weight is None else parse_exact_float(args.weight, "weight")
    t = parse_target(args.target, op, [args.format])
    if not target_kind(op).real and not -2**31 <= t < 2**31:  # an int32 target tensor: a wider value would wrap
        raise ParameterError(f"--target={args.target!r} is outside int32 [-2147483648, 2147483647]; expected a "
                             "selector an int32 target tensor holds (0 the positive term, 1 the negative)")
    count = parse_int(args.count, "count", positive=True) if has_count else 1
    attributes = parse_attributes(args)
    with np.errstate(over="ignore"):
        values = {k: (None if v is None else dtype.type(v)) for k, v in raw.items()}
    for name, v in values.items():
        if v is not None and not np.isfinite(v):
            raise ParameterError(f"--{name}={getattr(args, name)!r} overflows {args.format}; expected a finite value")
    inputs_of_point = {**({"dout": values["dout"]} if has_dout else {}), **({"count": count} if has_count else {})}
    att = attribute(args.variant, np.array([values["pred"]], dtype), [t], weight=values["weight"], **attributes,
                    **inputs_of_point, machine=args.machine)
    point = att.points.loc[0]
    x, d = float(values["pred"]), float(values["dout"]) if has_dout else 1.0
    w = None if values["weight"] is None else float(values["weight"])
    exact = exact_decimal(x, t, *attributes.values(), 1.0 if w is None else w, d, count, digits=20)
    rows = att.steps
    exact_text = att.exact_values[0]

    def hex_of(v, kind):
        if kind == "bool":
            return None if np.isnan(v) else bool(v)
        return None if np.isnan(v) and kind == "skip" else float(v).hex()

    steps = []
    for r in rows.itertuples(index=False):
        is_bool = r.format == "bool"
        mpf = exact_text.get(r.step)
        steps.append({
            "step": r.step, "formula": att.formulas[r.step], "kind": r.kind, "format": r.format,
            "evaluated": bool(r.evaluated),
            "computed": (None if np.isnan(r.computed) else bool(r.computed)) if is_bool else
            (float(r.computed).hex() if r.evaluated else None),
            "exact": (None if np.isnan(r.exact) else bool(r.exact)) if is_bool else
            (None if mpf is None else libmp.to_str(mpf._mpf_, 17)),
            "exact_rounded": None if is_bool or np.isnan(r.exact_rounded) else float(r.exact_rounded).hex(),
            "local": None if is_bool or np.isnan(r.local) else float(r.local).hex(),
            "local_ulp": _json_number(r.local_ulp), "cause": r.cause, "cond": _json_number(r.cond),
            "reaches_output": bool(r.reaches_output),
        })
    sentence = describe(att, 0)
    top = {"step": point["top_step"] if isinstance(point["top_step"], str) else None, "cause": point["top_cause"],
           "local_ulp": _json_number(point["top_local_ulp"]),
           "cond": _json_number(point["top_cond"]), "sentence": sentence}
    inputs = {"pred": x.hex(), "target": target_json(t), **{name: v.hex() for name, v in attributes.items()},
              "weight": None if w is None else w.hex(), **({"dout": d.hex()} if has_dout else {}),
              **({"count": count} if has_count else {})}
    if args.json:
        print(json.dumps({**({} if args.operator == DEFAULT_OPERATOR else {"operator": args.operator}),
                          "variant": args.variant, "machine": args.machine, "format": args.format, "inputs": inputs,
                          "exact": exact, "exact_rounded": float(point["exact_rounded"]).hex(),
                          "computed": float(point["computed"]).hex(), "err_ulp": _json_number(point["err_ulp"]),
                          "steps": steps, "top_cause": top}, indent=1, allow_nan=False))
        return 0
    of = "" if args.operator == DEFAULT_OPERATOR else f" of {args.operator}"
    tensors = "pred/dout/weight" if has_dout else "pred/weight"
    lines = [
        f"variant  {args.variant}{of} on {args.machine}, {args.format} {tensors}"
        + (f", reduction mean, count {count}" if has_count else ""),
        f"pred     {x.hex():<24} {x!r}",
        f"target   {target_text(t)}",
        *(f"{name:<8} {v.hex():<24} {v!r} (float32)" for name, v in attributes.items()),
        f"weight   {'absent' if w is None else f'{w.hex():<24} {w!r}'}",
        *([f"dout     {d.hex():<24} {d!r}"] if has_dout else []),
        f"exact    {exact}",
        f"{args.format:<8} {float(point['exact_rounded']).hex():<24} {float(point['exact_rounded'])!r} "
        "(correctly rounded)",
        f"computed {float(point['computed']).hex():<24} {float(point['computed'])!r} "
        f"({_fmt_ulp(point['err_ulp'])} ulp)",
        "",
        f"{'step':<11} {'computed':<24} {'exact':<24} {'local_ulp':>9}  {'cause':<15} {'cond':>8}  reaches",
    ]
    for st in steps:
        comp = "-" if st["computed"] is None else str(st["computed"]).lower()
        ex = "-" if st["exact"] is None else str(st["exact"]).lower()
        lu = "-" if st["local_ulp"] is None else _fmt_ulp(st["local_ulp"])
        cond = "-" if st["cond"] is None else f"{float(st['cond']):.3g}"
        lines.append(f"{st['step']:<11} {comp:<24} {ex:<24} {lu:>9}  {st['cause']:<15} {cond:>8}  "
                     f"{'yes' if st['reaches_output'] else 'no'}")
    lines += ["", f"top cause: {sentence}"]
    print("\n".join(lines))
    return 0


def _explain_steps(args, op) -> int:
    """``precision explain`` for an operator without step attribution (no ``attribute``): every step's computed
    value on the machine, then the exact value, its correct rounding and the output's error in ulps."""
    if op.bind_recipe is None:
        raise ParameterError(f"explain: the operator {args.operator!r} binds no recipe (its bind_recipe); its "
                             "variants cannot be shown step by step")
    dtype = np.dtype(np.float16 if args.format == "fp16" else np.float32)
    t = parse_target(args.target, op, [args.format])
    attributes = parse_attributes(args)
    with np.errstate(over="ignore"):
        x = dtype.type(parse_exact_float(args.pred, "pred"))
        w = None if args.weight is None else dtype.type(parse_exact_float(args.weight, "weight"))
    for name, v in (("pred", x), ("weight", w)):
        if v is not None and not np.isfinite(v):
            raise ParameterError(f"--{name}={getattr(args, name)!r} overflows {args.format}; expected a finite value")
    bound = op.bind_recipe(args.variant, np.array([[x]], dtype), target_kind(op).array([[t]], dtype), None,
                           None if w is None else np.array([[w]], dtype), **attributes, reduction="none",
                           machine=args.machine)
    tr = trace(bound)
    weight = 1.0 if w is None else float(w)
    exact = op.exact_decimal(float(x), t, *attributes.values(), weight, digits=20)
    rounded = op.round_exact(float(x), t, *attributes.values(), weight, fmt=args.format)
    computed = float(np.asarray(tr.output).ravel()[0])
    hi = float(mpf(exact)) if exact not in ("0", "-0") else 0.0  # the exact value to float64, then its remainder
    lo = float(mpf(exact) - mpf(hi)) if math.isfinite(hi) else 0.0
    err = float(ulp_error(np.array([computed]), (np.array([hi]), np.array([lo])), args.format,
                          np.array([rounded]))[0])
    steps = [{"step": name, "computed": float(np.asarray(tr.values[name]).ravel()[0]).hex()}
             for name in tr.names if tr.values.get(name) is not None]
    inputs = {"pred": float(x).hex(), "target": target_json(t), **{k: v.hex() for k, v in attributes.items()},
              "weight": None if w is None else float(w).hex()}
    if args.json:
        print(json.dumps({"operator": args.operator, "variant": args.variant, "machine": args.machine,
                          "format": args.format, "inputs": inputs, "exact": exact, "exact_rounded": rounded.hex(),
                          "computed": computed.hex(), "err_ulp": _json_number(err), "steps": steps,
                          "attribution": None}, indent=1, allow_nan=False))
        return 0
    lines = [f"variant  {args.variant} of {args.operator} on {args.machine}, {args.format} pred/weight",
             f"pred     {float(x).hex():<24} {float(x)!r}", f"target   {target_text(t)}",
             *(f"{name:<8} {v.hex():<24} {v!r} (float32)" for name, v in attributes.items()),
             f"weight   {'absent' if w is None else f'{float(w).hex():<24} {float(w)!r}'}",
             f"exact    {exact}",
             f"{args.format:<8} {rounded.hex():<24} {rounded!r} (correctly rounded)",
             f"computed {computed.hex():<24} {computed!r} ({_fmt_ulp(err)} ulp)", "",
             f"{'step':<11} computed", *(f"{s['step']:<11} {s['computed']}" for s in steps), "",
             f"steps: computed values only; {args.operator} has no step attribution (exact step values and "
             "causes: not tracked)"]
    print("\n".join(lines))
    return 0


def _fmt_ulp(v) -> str:
    """An ulp error in the explain table's fixed-width column: 3 significant digits."""
    v = float(v)
    return f"{v:.3g}" if math.isfinite(v) else str(v)
