"""Plugins: a Python file of the user's that registers variants joins studies, runs, reports and the gate.

A *plugin* is one Python file that calls an operator's ``register_variant`` (SigmoidFocalLossGrad's is
:func:`precision.register_variant`; see ``docs/plugins.md`` for the function contract and a complete example,
``examples/my_kernel.py``).  It is named by a study file (``[run] plugins = ["my_kernel.py"]``, paths relative
to the study file) or on the command line (``--plugin FILE``, repeatable), and loaded by the operator's
:class:`PluginLoader` (one per operator, over its :class:`~precision.recipes.registry.VariantTable`):

* **by path, under a private module name** (``_precision_plugin_<hash of the
  path>``): the file's bytes are read once, hashed (SHA-256, the plugin's
  *digest*), compiled and executed; no bytecode is written next to it.  A
  plugin is a single file: whatever else it imports must be installed.
* **idempotently per digest**: loading the same file again is a no-op while
  its bytes are unchanged; a changed file is imported again and may
  re-register its own names.
* **checked**: while the file is imported, every ``register_variant`` call
  goes through a hook that rejects a name of a built-in variant (``kernel``,
  ``golden``, a parsed ``naive+G2``, ...) or of another plugin, ``replace``
  or not, and wraps the function (:meth:`PluginLoader.checked`): an exception
  inside it becomes a :class:`~precision.errors.PluginError` naming the file
  and the variant, and so does a result that is not a numpy array of pred's
  dtype and shape.  A :class:`~precision.errors.PrecisionError` raised by the
  plugin itself (its operator contract, e.g. a float16-only variant given
  float32) passes through unchanged: as for the built-in variants, it means
  "does not take these inputs".  A variant registered with another operator's
  ``register_variant`` is refused.  Each registered variant is then evaluated
  once on a ``[1, 4]`` tensor (:data:`SMOKE_PRED`, :data:`SMOKE_TARGET`,
  dout all ones, no weight, the operator's smoke keywords) on the ``ieee``
  machine, with float32 and with float16 pred (rejecting one of the two is
  allowed), and when it registered a recipe, the recipe must return the
  function's bits.
* **all or nothing**: any failure (no such file, syntax error, import error,
  exception at import, a name clash, no variant registered, a failed smoke
  evaluation) removes whatever the file registered, restores what an earlier
  version of it had registered, and raises one
  :class:`~precision.errors.PluginError` line naming the file.  Nothing is
  written.

What the operator supplies (:class:`PluginLoader`'s arguments): its table, its ``evaluate``,
``evaluate_variants`` and ``bind_call`` (a recipe call bound to validated inputs), the signature of its variant
functions (a stub function: the positional operands and attributes with their defaults, ``count``, ``**params``)
and the keywords of the smoke evaluation (its attributes, reduction and count).

What other modules use (the operator's interface binds them)
------------------------------------------------------------
* :attr:`precision.engine.study.Study.plugins`: the resolved absolute paths of every
  plugin a study needs (its own ``[run] plugins`` and the ``--plugin`` files
  given with it), in load order.
* :meth:`PluginLoader.ensure_loaded` (``study.plugins``): a worker process (Dask, spawn)
  loads the plugins a task needs before evaluating it; a no-op for files
  already loaded at the same digest.
* :attr:`precision.recipes.registry.Variant.source` (the plugin file of a plugin variant's row, None for the
  package's variants), :meth:`~PluginLoader.variant_source`, :meth:`~PluginLoader.plugin_files`,
  :meth:`~PluginLoader.plugin_digest`, :meth:`~PluginLoader.source_digest`: which
  file implements a variant, and its digest, so that results can be keyed by
  the source of each variant's implementation (for a plugin variant, the
  plugin file; for a built-in one, the package).
* :meth:`~PluginLoader.check_study_variants`: the plugin variants of a study evaluated once
  on every machine and profile of the study before a run writes anything.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from precision.errors import PluginError, PrecisionError
from precision.exact.formats import get_format
from precision.recipes.registry import Variant, VariantTable
from precision.recipes.target_kinds import BINARY, TargetKind

__all__ = ["Plugin", "PluginLoader", "SMOKE_PRED", "SMOKE_TARGET"]

#: The smoke evaluation's pred (one [1, 4] tensor: both signs, small and large |x|) ...
SMOKE_PRED = (-3.0, -0.5, 0.5, 3.0)
#: ... and its selectors.
SMOKE_TARGET = (0, 1, 0, 1)
#: Prefix of the private module names plugins are imported under.
_MODULE_PREFIX = "_precision_plugin_"


@dataclass(frozen=True)
class Plugin:
    """One loaded plugin file.

    Attributes
    ----------
    path : Path
        The resolved absolute path.
    digest : str
        SHA-256 (hex) of the file's bytes as loaded.
    module : str
        The private module name it was imported under (in ``sys.modules``).
    variants : tuple of str
        The names it registered, in registration order.
    """

    path: Path
    digest: str
    module: str
    variants: tuple


def _shown(path: Path) -> str:
    """A path as messages show it: relative to the working folder when inside it, else absolute."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # pragma: no cover - another drive (Windows)
        return str(path)
    return str(path) if rel.startswith("..") else rel


def _resolve(path) -> Path:
    return Path(os.path.abspath(os.path.expanduser(str(path))))


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else ""


def _describe(exc: BaseException) -> str:
    """``ValueError: message`` (or just the type when there is no message)."""
    line = _first_line(exc)
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def _line_in(exc: BaseException, filename: str) -> int | None:
    """The line of the plugin file where an exception was raised (its last frame in that file)."""
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _call_parts(signature: inspect.Signature, args, kwargs) -> tuple[list, dict, dict]:
    """A call bound to a variant function's signature: the positional arguments (defaults filled in), the
    keywords (keyword-only ones only when given, then ``**params``) and the arguments as given, by name."""
    bound = signature.bind(*args, **kwargs)
    positional, keywords = [], {}
    for p in signature.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional.append(bound.arguments.get(p.name, p.default))
        elif p.kind is p.KEYWORD_ONLY:
            if p.name in bound.arguments:
                keywords[p.name] = bound.arguments[p.name]
        elif p.kind is p.VAR_KEYWORD:
            keywords.update(bound.arguments.get(p.name, {}))
    return positional, keywords, bound.arguments


class PluginLoader:
    """The plugin files of one operator: loading them into its variant table, and which file implements what.

    Parameters
    ----------
    table : VariantTable
        The operator's variants.
    evaluate : callable
        ``evaluate(variant, pred, target, dout, weight, *, <attributes>, reduction, machine, count)`` -> output.
    evaluate_variants : callable
        The operator's shared evaluation (same arguments, a list of variants; returns name -> output or error).
    bind_call : callable
        ``bind_call(name, call, pred, target, dout, weight, *, <attributes>, reduction, machine, count)`` ->
        :class:`~precision.recipes.steps.BoundRecipe` (the inputs validated): what :meth:`recipe_function` runs.
    signature : callable
        A stub with the signature of the operator's variant functions, ``f(machine, pred, target, dout,
        weight=None, <attribute>=<default>, ..., reduction=<default>, *, count=None, **params)``: the wrapper of
        a plugin's function (:meth:`checked`) fills in the defaults of its positional parameters, and
        :meth:`recipe_function` takes it.  A parameter named ``pred`` is required.
    smoke_keywords : mapping
        The keywords of the load-time evaluation besides ``machine="ieee"`` (the attributes, the reduction, and
        ``count`` when the reduction needs it).
    target_kind : TargetKind, default BINARY
        The operator's target kind (:mod:`precision.recipes.target_kinds`): the smoke target's dtype.
    """

    def __init__(self, table: VariantTable, *, evaluate: Callable, evaluate_variants: Callable, bind_call: Callable,
                 signature: Callable, smoke_keywords: dict, target_kind: TargetKind = BINARY):
        self.table = table
        self.target_kind = target_kind
        self.evaluate = evaluate
        self.evaluate_variants = evaluate_variants
        self.bind_call = bind_call
        self.signature = inspect.signature(signature)
        if "pred" not in self.signature.parameters:
            raise ValueError("a variant function's signature names pred")
        self.smoke_keywords = dict(smoke_keywords)
        #: Loaded plugins by resolved path.
        self.loaded: dict = {}
        #: Variant name -> resolved path of the plugin that registered it.
        self.sources: dict = {}

    def __repr__(self) -> str:
        return f"PluginLoader({self.table.label!r}, {len(self.loaded)} loaded)"

    # -----------------------------------------------------------------------
    # The wrapper of a plugin's function
    # -----------------------------------------------------------------------

    def checked(self, function, name: str, shown: str):
        """``function`` with its result checked and its exceptions named (see the module docstring)."""
        signature = self.signature

        @functools.wraps(function)
        def run(*args, **kwargs):
            positional, keywords, given = _call_parts(signature, args, kwargs)
            try:
                out = function(*positional, **keywords)
            except PrecisionError:
                raise
            except Exception as exc:  # a bug of the plugin: one line naming it, not a traceback of ours
                hint = ("; a variant function takes the keyword count=None (docs/plugins.md)"
                        if isinstance(exc, TypeError) and "'count'" in str(exc) else "")
                raise PluginError(f"plugin {shown}: variant {name!r} raised {_describe(exc)}{hint}") from exc
            want = np.asarray(given["pred"])
            if not isinstance(out, np.ndarray):
                raise PluginError(f"plugin {shown}: variant {name!r} returned {type(out).__name__}; expected a "
                                  f"numpy.ndarray of pred's dtype ({want.dtype}) and shape {want.shape}")
            if out.shape != want.shape:
                raise PluginError(f"plugin {shown}: variant {name!r} returned shape {out.shape} for pred shape "
                                  f"{want.shape}; expected pred's shape")
            if out.dtype != want.dtype:
                raise PluginError(f"plugin {shown}: variant {name!r} returned dtype {out.dtype} for pred dtype "
                                  f"{want.dtype}; expected pred's dtype")
            return out

        run.plugin_function = function
        return run

    # -----------------------------------------------------------------------
    # Loading
    # -----------------------------------------------------------------------

    def _hook(self, path: Path, shown: str, registered: list):
        """The registration hook of one plugin import (:attr:`VariantTable.registration_hook`)."""

        def hook(name, function, exists):
            if exists and name not in registered:
                owner = self.sources.get(name)
                if owner is None:
                    raise PluginError(f"plugin {shown}: variant {name!r} redefines a built-in variant; "
                                      "pick another name (see `precision variants`)")
                if owner != path:
                    raise PluginError(f"plugin {shown}: variant {name!r} is already registered by plugin "
                                      f"{_shown(owner)}; pick another name")
            if name not in registered:
                registered.append(name)
            return self.checked(function, name, shown), path

        return hook

    def _smoke(self, name: str, shown: str) -> None:
        """Evaluate a freshly registered variant once (float32 and float16 pred, ieee); raise PluginError."""
        rejected = []
        for dtype in (np.float32, np.float16):
            x = np.array([SMOKE_PRED], dtype=dtype)
            t = self.target_kind.array([SMOKE_TARGET], dtype)
            args = (x, t, np.ones_like(x), None)
            kwargs = dict(self.smoke_keywords, machine="ieee")
            try:
                out = self.evaluate(name, *args, **kwargs)
            except PluginError:
                raise
            except PrecisionError as exc:  # the plugin's own contract: it does not take this dtype
                rejected.append((np.dtype(dtype).name, exc))
                continue
            if self.table.recipe_call(name) is None:
                continue
            try:
                via_recipe = self.evaluate_variants([name], *args, **kwargs)[name]
            except Exception as exc:
                raise PluginError(f"plugin {shown}: variant {name!r}: its recipe raised {_describe(exc)} where its "
                                  "function did not") from exc
            if isinstance(via_recipe, Exception):
                raise PluginError(f"plugin {shown}: variant {name!r}: its recipe raised {_describe(via_recipe)} "
                                  "where its function did not")
            same = (isinstance(via_recipe, np.ndarray) and via_recipe.dtype == out.dtype
                    and via_recipe.shape == out.shape
                    and np.array_equal(via_recipe.view(f"u{out.itemsize}"), out.view(f"u{out.itemsize}")))
            if not same:
                raise PluginError(f"plugin {shown}: variant {name!r}: its recipe and its function return different "
                                  f"values for pred {list(SMOKE_PRED)} ({np.dtype(dtype).name}); the recipe must "
                                  "compute exactly what the function returns")
        if len(rejected) == 2:
            raise PluginError(f"plugin {shown}: variant {name!r} rejects both float32 and float16 pred "
                              f"({_first_line(rejected[0][1])}); expected it to take at least one")

    def _remove(self, names) -> list:
        """Take rows out of the table; returns (row, recipe builder, owner) to restore them."""
        taken = []
        for name in names:
            removed = self.table.remove(name)
            if removed is not None:
                taken.append((*removed, self.sources.pop(name, None)))
        return taken

    def _restore(self, taken) -> None:
        for row, builder, owner in taken:
            self.table.restore(row, builder)
            if owner is not None:
                self.sources[row.name] = owner

    def load_plugin(self, path) -> Plugin:
        """Load one plugin file (idempotent while its bytes are unchanged).

        Parameters
        ----------
        path : str or Path
            The plugin file (relative paths are relative to the working folder).

        Returns
        -------
        Plugin

        Raises
        ------
        PluginError
            One line naming the file: no such file, a syntax or import error, an
            exception at import, a name of a built-in variant or of another
            plugin, no variant registered, or a failed smoke evaluation (see the
            module docstring).  The registry is left as it was.
        """
        resolved = _resolve(path)
        shown = _shown(resolved)
        if resolved.is_dir():
            raise PluginError(f"plugin {shown} is a folder; expected a Python file that registers variants")
        try:
            source = resolved.read_bytes()
        except FileNotFoundError:
            raise PluginError(f"plugin {shown}: no such file; expected a Python file that registers "
                              "variants") from None
        except OSError as exc:
            raise PluginError(f"plugin {shown}: cannot read ({exc.strerror})") from None
        digest = hashlib.sha256(source).hexdigest()
        old = self.loaded.get(resolved)
        if old is not None and old.digest == digest:
            return old
        module_name = _MODULE_PREFIX + hashlib.sha256(str(resolved).encode()).hexdigest()[:16]
        previous = self._remove(old.variants) if old is not None else []
        previous_module = sys.modules.get(module_name)
        registered: list = []
        try:
            try:
                code = compile(source, str(resolved), "exec", dont_inherit=True)
            except SyntaxError as exc:
                raise PluginError(f"plugin {shown}: syntax error at line {exc.lineno}: {exc.msg}") from None
            except ValueError as exc:  # null bytes
                raise PluginError(f"plugin {shown}: not a Python source file ({_first_line(exc)})") from None
            module = types.ModuleType(module_name)
            module.__file__ = str(resolved)
            sys.modules[module_name] = module
            try:
                with self.table.hooked(self._hook(resolved, shown, registered)):
                    exec(code, module.__dict__)
            except PrecisionError as exc:
                if isinstance(exc, PluginError):
                    raise
                raise PluginError(f"plugin {shown}: {_first_line(exc)}") from None
            except SystemExit as exc:
                raise PluginError(f"plugin {shown}: called sys.exit({exc.code!r}) at import") from None
            except ImportError as exc:
                line = _line_in(exc, str(resolved))
                raise PluginError(f"plugin {shown}: cannot import{f' (line {line})' if line else ''}: "
                                  f"{_describe(exc)}") from None
            except Exception as exc:
                line = _line_in(exc, str(resolved))
                raise PluginError(f"plugin {shown}: raised {type(exc).__name__} at import"
                                  f"{f' (line {line})' if line else ''}: {_first_line(exc)}") from None
            if not registered:
                raise PluginError(f"plugin {shown} registers no variant; expected at least one "
                                  "precision.register_variant(...) call")
            for name in registered:
                self._smoke(name, shown)
        except BaseException:
            self._remove(registered)
            self._restore(previous)
            if previous_module is not None:
                sys.modules[module_name] = previous_module
            else:
                sys.modules.pop(module_name, None)
            if old is None:
                self.loaded.pop(resolved, None)
            raise
        for name in registered:
            self.sources[name] = resolved
        plugin = Plugin(resolved, digest, module_name, tuple(registered))
        self.loaded[resolved] = plugin
        return plugin

    def load_plugins(self, paths) -> tuple:
        """Load several plugin files in order; returns their :class:`Plugin` rows (see :meth:`load_plugin`)."""
        return tuple(self.load_plugin(p) for p in paths)

    def ensure_loaded(self, paths, digests=None) -> tuple:
        """Make sure the plugins a piece of work needs are loaded in this process (workers call it first).

        Parameters
        ----------
        paths : iterable of str or Path
            Plugin files, e.g. :attr:`precision.engine.study.Study.plugins`.
        digests : mapping of path to str, optional
            The digest each file had when the work was planned; a file whose
            bytes changed since raises, so a worker never evaluates another
            version than the one the work is keyed by.  Default None: not checked.

        Returns
        -------
        tuple of Plugin

        Raises
        ------
        PluginError
            As :meth:`load_plugin`, or a changed file.
        """
        out = []
        for p in paths:
            plugin = self.load_plugin(p)
            if digests is not None:
                want = dict((str(_resolve(k)), v) for k, v in dict(digests).items()).get(str(plugin.path))
                if want is not None and want != plugin.digest:
                    raise PluginError(f"plugin {_shown(plugin.path)} changed since the run started (sha256 "
                                      f"{plugin.digest[:12]}, expected {want[:12]}); run again")
            out.append(plugin)
        return tuple(out)

    def unload_plugin(self, path) -> None:
        """Remove a loaded plugin's variants from the table and forget it (a no-op when not loaded)."""
        resolved = _resolve(path)
        plugin = self.loaded.pop(resolved, None)
        if plugin is None:
            return
        self._remove(plugin.variants)
        sys.modules.pop(plugin.module, None)

    def loaded_plugins(self) -> tuple:
        """The plugins loaded in this process, in load order."""
        return tuple(self.loaded.values())

    # -----------------------------------------------------------------------
    # Which file implements a variant
    # -----------------------------------------------------------------------

    def variant_source(self, variant) -> Path | None:
        """The plugin file that registered a variant (resolved path), or None for a built-in one.

        The same as the row's :attr:`precision.recipes.registry.Variant.source`.
        """
        name = variant.name if isinstance(variant, Variant) else variant
        return self.sources.get(name)

    def plugin_variants(self, path=None) -> tuple:
        """The variant names registered by one loaded plugin file, or by every loaded plugin (path None)."""
        if path is None:
            return tuple(n for p in self.loaded.values() for n in p.variants)
        plugin = self.loaded.get(_resolve(path))
        return () if plugin is None else plugin.variants

    def _expand(self, variants) -> list:
        """Variant names with ``"all"`` (as in a study file) standing for every registered variant."""
        names = []
        for v in variants:
            names.extend(self.table.names() if v == "all" else [v])
        return names

    def plugin_files(self, variants) -> list:
        """The distinct plugin files behind some variant names (sorted; empty when all are built-in).

        ``"all"`` stands for every registered variant, as in a study file.
        """
        return sorted({p for p in (self.variant_source(n) for n in self._expand(variants)) if p is not None})

    def plugin_digest(self, path) -> str:
        """SHA-256 (hex) of a plugin file: of the version loaded in this process, else of the file on disk.

        Raises
        ------
        PluginError
            A file that is neither loaded nor readable.
        """
        resolved = _resolve(path)
        plugin = self.loaded.get(resolved)
        if plugin is not None:
            return plugin.digest
        try:
            return hashlib.sha256(resolved.read_bytes()).hexdigest()
        except OSError as exc:
            raise PluginError(f"plugin {_shown(resolved)}: cannot read ({exc.strerror})") from None

    def source_digest(self, variant) -> str | None:
        """The digest of the plugin file implementing a variant, or None for a built-in variant (the package)."""
        path = self.variant_source(variant)
        return None if path is None else self.plugin_digest(path)

    # -----------------------------------------------------------------------
    # A study's plugin variants on its machines and profiles
    # -----------------------------------------------------------------------

    def check_study_variants(self, variants, machines, profiles, *, reduction="none", count=1, weight=False,
                             **attributes) -> None:
        """Evaluate every plugin variant among ``variants`` once per machine and profile (a [1, 4] tensor).

        Parameters
        ----------
        variants : sequence of str
            Registry names (``"all"``: every registered variant).
        machines : sequence of str
            Machine specs.
        profiles : sequence of precision.engine.study.Profile
            pred/dout/weight formats.
        reduction, count, **attributes
            The reduction and the attributes to evaluate with (a study's first values); ``count`` is passed
            for the mean only.
        weight : bool
            Pass a weight tensor (the study has weights), else weight is absent.

        Raises
        ------
        PluginError
            A plugin variant that raises (other than a PrecisionError of its own
            contract, which means "does not take this profile", as in a run) or
            returns a wrong shape or dtype on one of them.
        """
        names = [n for n in dict.fromkeys(self._expand(variants)) if self.variant_source(n) is not None]
        for profile in profiles:
            x = np.array([SMOKE_PRED], dtype=get_format(profile.pred).dtype)
            t = self.target_kind.array([SMOKE_TARGET], x.dtype)
            d = np.ones(x.shape, dtype=get_format(profile.dout).dtype)
            w = np.full(x.shape, 0.5, dtype=get_format(profile.weight).dtype) if weight else None
            for machine in machines:
                for name in names:
                    try:
                        self.evaluate(name, x, t, d, w, **attributes, reduction=reduction, machine=machine,
                                      count=count if reduction == "mean" else None)
                    except PluginError:
                        raise
                    except PrecisionError:
                        pass  # the variant's own contract (e.g. fp16 only): skipped there, as in a run

    # -----------------------------------------------------------------------
    # Writing a plugin
    # -----------------------------------------------------------------------

    def recipe_function(self, call):
        """A variant function that runs a recipe: validate the inputs, prepare the constants, run, reshape.

        Parameters
        ----------
        call : precision.recipes.steps.RecipeCall or callable
            The recipe (or a ``params -> RecipeCall`` builder, called with the
            variant's bound keyword arguments).

        Returns
        -------
        callable
            A function of the operator's variant signature (``f(machine, pred, target, dout, weight=None,
            <attributes>, reduction, *, count=None, **params)``), for its ``register_variant`` together with
            ``recipe=call``.
        """
        signature = self.signature
        bind_call = self.bind_call
        names = [p.name for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
        varkw = next((p.name for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD), None)

        def run(*args, **kwargs):
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = {n: bound.arguments[n] for n in names}
            params = bound.arguments.get(varkw, {}) if varkw else {}
            c = call if not callable(call) else call(params)
            done = bind_call(c.recipe.name, c, **arguments)
            return done.run().reshape(done.shape)

        run.__signature__ = signature
        return run
