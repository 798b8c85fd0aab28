"""The variant registry every operator builds its variants from: rows, recipe builders, parsed names.

A *variant* is a named way to compute an operator.  An operator keeps its variants in a
:class:`VariantTable`: one :class:`Variant` row per fixed name, the builder of each recipe function's
:class:`~precision.recipes.steps.RecipeCall` (keyed by the function), and optionally a
:class:`NameGrammar` that parses names with guard switches and parameters into rows on demand:

* ``<base>+Gi...`` or ``<base>-Gi...``: a base name (the operator's, e.g. ``naive`` starting with no guard
  and taking ``+Gi``, ``kernel`` starting with every guard and taking ``-Gi``) with guards switched, each
  named once (``G`` in any case);
* ``[key=value,...]``: parameters in brackets, comma-separated, each understood by one
  :class:`NameParameter` (the guard it needs on, the keyword it binds, its parser).

:func:`parse_threshold` reads a threshold the way every guard threshold is spelled: a fraction ``1/16``, a
power ``2^-4`` or ``2**-4``, a decimal ``0.0625``, a hex float ``0x1p-4``, or ``never``/``always``/``inf``.

:meth:`VariantTable.register` adds rows (candidates, plugins: :mod:`precision.recipes.plugins` installs a
registration hook while it imports a plugin file).  Operator-free: the operator supplies its bases, guards,
parameters and words.
"""

from __future__ import annotations

import math
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Callable

from precision.errors import ParameterError
from precision.recipes.steps import RecipeCall

__all__ = ["Variant", "VariantTable", "NameGrammar", "NameParameter", "parse_threshold"]


@dataclass(frozen=True)
class Variant:
    """One row of a variant table.

    Attributes
    ----------
    name : str
        The registry spelling (``kernel-G5``, ``kernel[G5=1/16]``).
    family : str
        ``naive``, ``kernel``, ``golden``, ... or a candidate's family.
    description : str
        One line for ``precision variants``.
    function : callable
        The operator's variant function, ``f(machine, pred, target, dout, weight, <attributes>, reduction,
        **params)``: the code its results' cache key digests.
    params : tuple of (str, object)
        Keyword arguments bound to ``function`` (e.g. ``("guards", frozenset)``).
    source : pathlib.Path or None
        The plugin file that registered the row (absolute; :mod:`precision.recipes.plugins`), None for the
        package's own variants.  Its digest stands for the row's implementation (``function`` is the
        plugin's function wrapped by the loader).
    """

    name: str
    family: str
    description: str
    function: Callable
    params: tuple = field(default=())
    source: Path | None = None

    @property
    def guards(self) -> frozenset | None:
        """The enabled guard set of a row with guard switches (its params' ``guards``); None for other rows."""
        return dict(self.params).get("guards")

    def __call__(self, machine, *args, count=None, **kwargs):
        """Run the variant: ``function(machine, *args, **kwargs, **params)``.

        ``count`` (the mean's element count) is passed on only when given, so functions without that keyword
        still work.
        """
        extra = {} if count is None else {"count": count}
        return self.function(machine, *args, **kwargs, **dict(self.params), **extra)


# ---------------------------------------------------------------------------
# Spellings of parameter values
# ---------------------------------------------------------------------------

def _nonnegative(value: float) -> float:
    if math.isnan(value) or value < 0:
        raise ParameterError(f"threshold={value!r}; expected a number >= 0")
    return value


def parse_threshold(text: str, name: str, key: str, check: Callable | None = None):
    """A threshold's spelling -> a float, ``"never"`` or ``"always"``.

    Parameters
    ----------
    text : str
        The spelling: a fraction ``1/16``, a power ``2^-4``, ``2**-4`` or ``2^(-4)``, a decimal ``0.0625``, a
        hex float ``0x1p-4``, ``never`` (or ``none``), ``always`` (or ``inf``, ``+inf``); case-insensitive.
    name : str
        The variant name it is part of (for the messages).
    key : str
        The parameter's key as spelled (``G5``; for the messages).
    check : callable, optional
        ``check(float) -> value``, raising ParameterError for a value out of range (the messages say
        ``must be >= 0``); default: NaN and negative values are refused.

    Raises
    ------
    ParameterError
        ``variant='kernel[G5=abc]': G5='abc' is not a threshold; expected e.g. 1/64, 2^-6, 0.015625, never,
        always`` or ``...: G5='-1' must be >= 0``.

    Examples
    --------
    >>> parse_threshold("2^-4", "v", "G5"), parse_threshold("1/16", "v", "G5"), parse_threshold("inf", "v", "G5")
    (0.0625, 0.0625, 'always')
    """
    s = text.strip().lower()
    if s in ("never", "none"):
        return "never"
    if s in ("always", "inf", "+inf"):
        return "always"
    try:
        power = re.fullmatch(r"2(?:\^|\*\*)\(?([+-]?\d+)\)?", s)
        if power:
            value = math.ldexp(1.0, int(power.group(1)))
        elif s.startswith(("0x", "-0x", "+0x")):
            value = float.fromhex(s)
        else:
            value = float(Fraction(s))
    except (ValueError, ZeroDivisionError, OverflowError):
        raise ParameterError(
            f"variant={name!r}: {key}={text!r} is not a threshold; expected e.g. 1/64, 2^-6, 0.015625, never, always"
        ) from None
    try:
        return (check or _nonnegative)(value)
    except ParameterError:
        raise ParameterError(f"variant={name!r}: {key}={text!r} must be >= 0") from None


# ---------------------------------------------------------------------------
# The name grammar: <base>[+-]Gi...[key=value,...]
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class NameParameter:
    """One bracket parameter of parsed names (``G5=1/16``, ``tile=64``).

    Attributes
    ----------
    key : str
        Its spelling before ``=`` (matched case-insensitively): ``G5``, ``tile``.
    keyword : str
        The keyword argument of the row's function it binds: ``g5_threshold``, ``tile``.
    parse : callable
        ``parse(value text, variant name) -> value``; raises a one-line ParameterError naming the variant.
    guard : str or None
        The guard that must be on for the parameter to mean something (``G5``); None: any.
    what : str
        What it is, in "<what> given but G5 is off" (``G5 threshold``); default: the key.
    placeholder : str
        Its value in the "expected G5=<tau>" message (``<tau>``).
    """

    key: str
    keyword: str
    parse: Callable
    guard: str | None = None
    what: str = ""
    placeholder: str = "<value>"


class NameGrammar:
    """Parsed variant names of one operator: ``<base>[+-]Gi...[key=value,...]``.

    Parameters
    ----------
    bases : mapping of str to (frozenset, str)
        Base name -> (its starting guard set, the sign it takes: ``"+"`` adds guards, ``"-"`` removes them).
        A parsed row's family is its base.
    guard_ids : sequence of str
        The guard ids in order (``G1`` .. ``G8``); matched case-insensitively.
    function : callable
        The variant function of every parsed row (its params: ``guards`` and the bracket parameters).
    parameters : sequence of NameParameter
        The bracket parameters, in the order their keywords are bound.
    help : sequence of (str, str)
        ``(form, description)`` rows for ``precision variants`` (``kernel[G5=<tau>]``, ...).
    guard_hint : str
        How one guard is written in the messages (``Gi``).

    Examples
    --------
    >>> g = NameGrammar({"plain": (frozenset(), "+"), "full": (frozenset({"A1", "A2"}), "-")}, ("A1", "A2"),
    ...                 function=print)
    >>> row = g.parse("full-a2")
    >>> row.family, sorted(row.guards), row.description
    ('full', ['A1'], 'full recipe with guards {A1}')
    """

    def __init__(self, bases: dict, guard_ids, *, function: Callable, parameters=(), help=(), guard_hint="Gi"):
        self.bases = {name: (frozenset(guards), sign) for name, (guards, sign) in bases.items()}
        if any(sign not in "+-" or len(sign) != 1 for _, sign in self.bases.values()):
            raise ValueError("a base takes '+' or '-'")
        self.guard_ids = tuple(guard_ids)
        self.function = function
        self.parameters = tuple(parameters)
        self.help = tuple(help)
        self.guard_hint = guard_hint
        self._canonical = {g.lower(): g for g in self.guard_ids}
        guards = "|".join(re.escape(g) for g in sorted(self.guard_ids, key=len, reverse=True))
        bases_re = "|".join(re.escape(b) for b in sorted(self.bases, key=len, reverse=True))
        self._guard_re = re.compile(rf"([+-])((?i:{guards}))")
        self._name_re = re.compile(
            rf"^(?P<base>{bases_re})(?P<mods>(?:[+-](?i:{guards}))*)(?:\[(?P<params>[^\[\]]*)\])?$")

    def matches(self, name: str) -> bool:
        """Whether ``name`` has the form of a parsed name (so a registered row may not take it)."""
        return bool(self._name_re.match(name))

    def guard_name(self, guards) -> str:
        """The canonical name of a guard set: from the ``+`` base upwards when it has at most as many guards on
        as off, else from the ``-`` base downwards (the grammar must have one base of each sign starting from no
        guard and from every guard)."""
        on = sorted(set(guards), key=self.guard_ids.index)
        off = [g for g in self.guard_ids if g not in on]
        up = next(b for b, (start, sign) in self.bases.items() if sign == "+" and not start)
        down = next(b for b, (start, sign) in self.bases.items() if sign == "-" and start == set(self.guard_ids))
        if len(on) <= len(off):
            return up + "".join(f"+{g}" for g in on)
        return down + "".join(f"-{g}" for g in off)

    def parse(self, name: str) -> Variant | None:
        """The row a parsed name stands for, or None when ``name`` does not have the form.

        Raises
        ------
        ParameterError
            The wrong sign for the base, a guard named twice, a bracket parameter not understood, repeated,
            of a guard that is off, or with a bad value (its parser's message).
        """
        match = self._name_re.match(name.strip())
        if not match:
            return None
        base = match.group("base")
        start, sign_ok = self.bases[base]
        guards = set(start)
        named = set()
        for sign, spelled in self._guard_re.findall(match.group("mods")):
            gid = self._canonical[spelled.lower()]
            if sign != sign_ok:
                raise ParameterError(
                    f"variant={name!r}: {sign}{gid} on {base}; expected {base}{sign_ok}{self.guard_hint} "
                    f"({f'guards are added to {base}' if sign_ok == '+' else f'guards are removed from {base}'})"
                )
            if gid in named:
                raise ParameterError(f"variant={name!r}: {gid} named twice")
            named.add(gid)
            (guards.add if sign == "+" else guards.discard)(gid)
        guards = frozenset(guards)
        params = (("guards", guards),) + self._parse_params(match.group("params") or "", name, guards)
        described = ", ".join(f"{k}={v}" for k, v in params[1:])
        desc = f"{base} recipe with guards {{{', '.join(sorted(guards, key=self.guard_ids.index))}}}"
        if described:
            desc += f", {described}"
        return Variant(name, base, desc, self.function, params)

    def _expected(self) -> str:
        forms = [f"{p.key}={p.placeholder}" for p in self.parameters]
        return forms[0] if len(forms) == 1 else ", ".join(forms[:-1]) + " and/or " + forms[-1]

    def _parse_params(self, text: str, name: str, guards: frozenset) -> tuple:
        by_key = {p.key.lower(): p for p in self.parameters}
        params = []
        seen = set()
        for item in (p.strip() for p in text.split(",")):
            if not item:
                continue
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep or key.lower() not in by_key or key.lower() in seen:
                raise ParameterError(f"variant={name!r}: parameter {item!r} is not understood; expected "
                                     f"{self._expected()}, once each")
            seen.add(key.lower())
            param = by_key[key.lower()]
            if param.guard is not None and param.guard not in guards:
                raise ParameterError(f"variant={name!r}: {param.what or param.key} given but {param.guard} is off; "
                                     f"enable {param.guard} or drop {param.key}=")
            params.append((param.keyword, param.parse(value, name)))
        return tuple(params)


# ---------------------------------------------------------------------------
# The table
# ---------------------------------------------------------------------------

#: The table whose registration hook is installed (a plugin file of its operator is being imported), else None.
_HOOKED: list = []


class VariantTable:
    """One operator's variants: rows by name, recipe builders by function, parsed names.

    Parameters
    ----------
    label : str
        Whose table it is (the operator's name), for messages.
    grammar : NameGrammar, optional
        Parsed names (rows made on demand by :meth:`get`); their forms are reserved: :meth:`register` refuses
        them.
    unknown_hint : str
        Appended to the unknown-name message after the list of names (``", or naive+Gi / kernel-Gi ..."``).

    Attributes
    ----------
    rows : dict
        Name -> :class:`Variant`, in registration order (the operator's ``VARIANTS``).
    recipes : dict
        Variant function -> ``builder(params) -> RecipeCall``: how the rows of that function run as recipes.
    registration_hook : callable or None
        Set by :mod:`precision.recipes.plugins` while it imports a plugin file (:meth:`hooked`):
        ``hook(name, function, exists) -> (function, source)`` is called by :meth:`register` instead of its own
        name check (``exists``: the name is taken by a row or has a parsed form); it raises on a clash and returns
        the function to register (the plugin's, wrapped) and the plugin file (the row's ``source``).
    """

    def __init__(self, label: str, *, grammar: NameGrammar | None = None, unknown_hint: str = ""):
        self.label = label
        self.grammar = grammar
        self.unknown_hint = unknown_hint
        self.rows: dict = {}
        self.recipes: dict = {}
        self.registration_hook: Callable | None = None

    def __repr__(self) -> str:
        return f"VariantTable({self.label!r}, {len(self.rows)} rows)"

    # -- the package's own rows ------------------------------------------------------------------------------

    def add(self, row: Variant, recipe: Callable | None = None) -> Variant:
        """Put a row of the package in the table (no name check, no hook); ``recipe``: ``params -> RecipeCall``
        for its function."""
        self.rows[row.name] = row
        if recipe is not None:
            self.recipes[row.function] = recipe
        return row

    # -- reading ---------------------------------------------------------------------------------------------

    def names(self) -> list:
        """Every fixed name (the package's rows, then registered ones), in order."""
        return list(self.rows)

    def listing(self) -> list:
        """``(name, description)`` rows for ``precision variants``: the table, then the grammar's forms."""
        return [(v.name, v.description) for v in self.rows.values()] + list(self.grammar.help if self.grammar else ())

    def unknown(self, name) -> ParameterError:
        """The one-line error of an unknown name, listing the known ones."""
        return ParameterError(f"variant={name!r} is unknown; expected one of {', '.join(self.rows)}"
                              f"{self.unknown_hint}")

    def get(self, name) -> Variant:
        """Resolve a variant name (a :class:`Variant` passes through): a row, else a parsed name.

        Raises
        ------
        ParameterError
            An unknown name (listing the valid ones), or a parsed name's error.
        """
        if isinstance(name, Variant):
            return name
        if not isinstance(name, str):
            raise self.unknown(name)
        if name in self.rows:
            return self.rows[name]
        row = self.grammar.parse(name) if self.grammar is not None else None
        if row is None:
            raise self.unknown(name)
        return row

    def recipe_builder(self, row: Variant):
        """The recipe builder registered for a row's function (None when it is not a recipe)."""
        return self.recipes.get(row.function)

    def recipe_call(self, variant) -> RecipeCall | None:
        """How a variant runs as a step table, or None for a function that is not a recipe (errors as :meth:`get`).
        """
        row = self.get(variant)
        builder = self.recipes.get(row.function)
        return None if builder is None else builder(dict(row.params))

    # -- registering -----------------------------------------------------------------------------------------

    def register(self, name: str, function: Callable, description: str, *, family: str = "candidate",
                 params=None, replace: bool = False, recipe=None) -> Variant:
        """Add a row (candidate implementations and plugins); see the operator's ``register_variant``.

        Raises
        ------
        ParameterError
            A name that is empty or has spaces, that a row or a parsed form takes (unless ``replace``), a
            function that is not callable, a recipe that is neither a RecipeCall nor a builder; during the
            import of a plugin of another operator, any name (a plugin registers its own operator's variants).
        """
        if not isinstance(name, str) or not name or any(c.isspace() for c in name):
            raise ParameterError(f"name={name!r}; expected a non-empty name without spaces")
        if not callable(function):
            raise ParameterError(f"function={function!r} is not callable")
        if recipe is not None and not (isinstance(recipe, RecipeCall) or callable(recipe)):
            raise ParameterError(f"recipe={recipe!r}; expected a RecipeCall or a function params -> RecipeCall")
        if self.registration_hook is None and _HOOKED:
            other = _HOOKED[-1].label
            raise ParameterError(f"variant {name!r} is registered for the operator {self.label} but the plugin is "
                                 f"loaded for {other}; register it with {other}'s register_variant, or load the "
                                 f"plugin for {self.label} (--operator {self.label})")
        exists = name in self.rows or (self.grammar is not None and self.grammar.matches(name))
        source = None
        if self.registration_hook is not None:
            function, source = self.registration_hook(name, function, exists)
        elif not replace and exists:
            raise ParameterError(f"variant={name!r} already exists; pick another name or pass replace=True")
        items = tuple(sorted(dict(params or {}).items()))
        row = Variant(name, family, description, function, items, source)
        if recipe is not None:
            self.recipes[function] = recipe if not isinstance(recipe, RecipeCall) else (lambda params, c=recipe: c)
        self.rows[name] = row
        return row

    @contextmanager
    def hooked(self, hook: Callable):
        """:attr:`registration_hook` set to ``hook`` for the block (a plugin file's import)."""
        self.registration_hook = hook
        _HOOKED.append(self)
        try:
            yield
        finally:
            _HOOKED.remove(self)
            self.registration_hook = None

    def remove(self, name: str) -> tuple | None:
        """Take a registered row out (with its recipe builder when no other row shares its function); returns
        ``(row, builder)`` to :meth:`restore` it, or None when absent."""
        row = self.rows.get(name)
        if row is None:
            return None
        builder = self.recipes.get(row.function)
        del self.rows[name]
        if not any(r.function is row.function for r in self.rows.values()):
            self.recipes.pop(row.function, None)
        return row, builder

    def restore(self, row: Variant, builder=None) -> None:
        """Put back a row taken out by :meth:`remove` (with its recipe builder, if any)."""
        self.rows[row.name] = row
        if builder is not None:
            self.recipes[row.function] = builder
