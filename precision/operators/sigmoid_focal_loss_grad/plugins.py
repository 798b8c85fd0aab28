"""Plugins: a Python file of the user's that registers variants joins studies, runs, reports and the gate.

A *plugin* is one Python file that calls :func:`precision.register_variant`
(see ``docs/plugins.md`` for the function contract and a complete example,
``examples/my_kernel.py``).  It is named by a study file (``[run] plugins =
["my_kernel.py"]``, paths relative to the study file) or on the command line
(``--plugin FILE``, repeatable), and loaded here:

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
  or not, and wraps the function (:func:`_checked`): an exception inside it
  becomes a :class:`~precision.errors.PluginError` naming the file and the
  variant, and so does a result that is not a numpy array of pred's dtype and
  shape.  A :class:`~precision.errors.PrecisionError` raised by the plugin
  itself (its operator contract, e.g. a float16-only variant given float32)
  passes through unchanged: as for the built-in variants, it means "does not
  take these inputs".  Each registered variant is then evaluated once on a
  ``[1, 4]`` tensor (:data:`SMOKE_PRED`) on the ``ieee`` machine, with float32
  and with float16 pred (rejecting one of the two is allowed), and when it
  registered a recipe, the recipe must return the function's bits.
* **all or nothing**: any failure (no such file, syntax error, import error,
  exception at import, a name clash, no variant registered, a failed smoke
  evaluation) removes whatever the file registered, restores what an earlier
  version of it had registered, and raises one
  :class:`~precision.errors.PluginError` line naming the file.  Nothing is
  written.

What other modules use
----------------------
* :attr:`precision.engine.study.Study.plugins`: the resolved absolute paths of every
  plugin a study needs (its own ``[run] plugins`` and the ``--plugin`` files
  given with it), in load order.
* :func:`ensure_loaded` (``study.plugins``): a worker process (Dask, spawn)
  loads the plugins a task needs before evaluating it; a no-op for files
  already loaded at the same digest.
* :attr:`precision.operators.sigmoid_focal_loss_grad.guards.Variant.source` (the plugin file of a plugin
  variant's row, None for the package's variants), :func:`variant_source`,
  :func:`plugin_files`, :func:`plugin_digest`, :func:`source_digest`: which
  file implements a variant, and its digest, so that results can be keyed by
  the source of each variant's implementation (for a plugin variant, the
  plugin file; for a built-in one, the package).
* :func:`check_study_variants`: the plugin variants of a study evaluated once
  on every machine and profile of the study before a run writes anything.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import types
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from precision.operators.sigmoid_focal_loss_grad import guards
from precision.errors import PluginError, PrecisionError
from precision.exact.formats import get_format

__all__ = ["Plugin", "load_plugin", "load_plugins", "ensure_loaded", "unload_plugin", "loaded_plugins",
           "variant_source", "plugin_files", "plugin_digest", "source_digest", "plugin_variants",
           "check_study_variants", "recipe_function", "SMOKE_PRED", "SMOKE_TARGET"]

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


#: Loaded plugins by resolved path.
_LOADED: dict = {}
#: Variant name -> resolved path of the plugin that registered it.
_SOURCES: dict = {}


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


# ---------------------------------------------------------------------------
# The wrapper of a plugin's function
# ---------------------------------------------------------------------------

def _checked(function, name: str, shown: str):
    """``function`` with its result checked and its exceptions named (see the module docstring)."""

    @functools.wraps(function)
    def run(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="mean", **kwargs):
        try:
            out = function(machine, pred, target, dout, weight, alpha, gamma, reduction, **kwargs)
        except PrecisionError:
            raise
        except Exception as exc:  # a bug of the plugin: one line naming it, not a traceback of ours
            hint = ("; a variant function takes the keyword count=None (docs/plugins.md)"
                    if isinstance(exc, TypeError) and "'count'" in str(exc) else "")
            raise PluginError(f"plugin {shown}: variant {name!r} raised {_describe(exc)}{hint}") from exc
        want = np.asarray(pred)
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


# ---------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------

def _hook(path: Path, shown: str, registered: list):
    """The registration hook of one plugin import (see :data:`precision.operators.sigmoid_focal_loss_grad.guards._registration_hook`)."""

    def hook(name, function, exists):
        if exists and name not in registered:
            owner = _SOURCES.get(name)
            if owner is None:
                raise PluginError(f"plugin {shown}: variant {name!r} redefines a built-in variant; "
                                  "pick another name (see `precision variants`)")
            if owner != path:
                raise PluginError(f"plugin {shown}: variant {name!r} is already registered by plugin "
                                  f"{_shown(owner)}; pick another name")
        if name not in registered:
            registered.append(name)
        return _checked(function, name, shown), path

    return hook


def _smoke(name: str, shown: str) -> None:
    """Evaluate a freshly registered variant once (float32 and float16 pred, ieee); raise PluginError."""
    t = np.array([SMOKE_TARGET], dtype=np.int32)
    rejected = []
    for dtype in (np.float32, np.float16):
        x = np.array([SMOKE_PRED], dtype=dtype)
        args = (x, t, np.ones_like(x), None)
        kwargs = dict(alpha=0.25, gamma=2.0, reduction="mean", machine="ieee", count=x.size)
        try:
            out = guards.evaluate(name, *args, **kwargs)
        except PluginError:
            raise
        except PrecisionError as exc:  # the plugin's own contract: it does not take this dtype
            rejected.append((np.dtype(dtype).name, exc))
            continue
        if guards.recipe_call(name) is None:
            continue
        try:
            via_recipe = guards.evaluate_variants([name], *args, **kwargs)[name]
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


def _remove(names) -> list:
    """Take rows out of the registry; returns (row, recipe builder, owner) to restore them."""
    taken = []
    for name in names:
        row = guards.VARIANTS.get(name)
        if row is None:
            continue
        builder = guards._recipe_builder(row)
        guards._remove_variant(name)
        taken.append((row, builder, _SOURCES.pop(name, None)))
    return taken


def _restore(taken) -> None:
    for row, builder, owner in taken:
        guards._restore_variant(row, builder)
        if owner is not None:
            _SOURCES[row.name] = owner


def load_plugin(path) -> Plugin:
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
        raise PluginError(f"plugin {shown}: no such file; expected a Python file that registers variants") from None
    except OSError as exc:
        raise PluginError(f"plugin {shown}: cannot read ({exc.strerror})") from None
    digest = hashlib.sha256(source).hexdigest()
    old = _LOADED.get(resolved)
    if old is not None and old.digest == digest:
        return old
    module_name = _MODULE_PREFIX + hashlib.sha256(str(resolved).encode()).hexdigest()[:16]
    previous = _remove(old.variants) if old is not None else []
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
        guards._registration_hook = _hook(resolved, shown, registered)
        try:
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
        finally:
            guards._registration_hook = None
        if not registered:
            raise PluginError(f"plugin {shown} registers no variant; expected at least one "
                              "precision.register_variant(...) call")
        for name in registered:
            _smoke(name, shown)
    except BaseException:
        _remove(registered)
        _restore(previous)
        if previous_module is not None:
            sys.modules[module_name] = previous_module
        else:
            sys.modules.pop(module_name, None)
        if old is None:
            _LOADED.pop(resolved, None)
        raise
    for name in registered:
        _SOURCES[name] = resolved
    plugin = Plugin(resolved, digest, module_name, tuple(registered))
    _LOADED[resolved] = plugin
    return plugin


def load_plugins(paths) -> tuple:
    """Load several plugin files in order; returns their :class:`Plugin` rows (see :func:`load_plugin`)."""
    return tuple(load_plugin(p) for p in paths)


def ensure_loaded(paths, digests=None) -> tuple:
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
        As :func:`load_plugin`, or a changed file.
    """
    out = []
    for p in paths:
        plugin = load_plugin(p)
        if digests is not None:
            want = dict((str(_resolve(k)), v) for k, v in dict(digests).items()).get(str(plugin.path))
            if want is not None and want != plugin.digest:
                raise PluginError(f"plugin {_shown(plugin.path)} changed since the run started (sha256 "
                                  f"{plugin.digest[:12]}, expected {want[:12]}); run again")
        out.append(plugin)
    return tuple(out)


def unload_plugin(path) -> None:
    """Remove a loaded plugin's variants from the registry and forget it (a no-op when not loaded)."""
    resolved = _resolve(path)
    plugin = _LOADED.pop(resolved, None)
    if plugin is None:
        return
    _remove(plugin.variants)
    sys.modules.pop(plugin.module, None)


def loaded_plugins() -> tuple:
    """The plugins loaded in this process, in load order."""
    return tuple(_LOADED.values())


# ---------------------------------------------------------------------------
# Which file implements a variant
# ---------------------------------------------------------------------------

def variant_source(variant) -> Path | None:
    """The plugin file that registered a variant (resolved path), or None for a built-in one.

    The same as the row's :attr:`precision.operators.sigmoid_focal_loss_grad.guards.Variant.source`.
    """
    name = variant.name if isinstance(variant, guards.Variant) else variant
    return _SOURCES.get(name)


def plugin_variants(path=None) -> tuple:
    """The variant names registered by one loaded plugin file, or by every loaded plugin (path None)."""
    if path is None:
        return tuple(n for p in _LOADED.values() for n in p.variants)
    plugin = _LOADED.get(_resolve(path))
    return () if plugin is None else plugin.variants


def plugin_files(variants) -> list:
    """The distinct plugin files behind some variant names (sorted; empty when all are built-in).

    ``"all"`` stands for every registered variant, as in a study file.
    """
    names = []
    for v in variants:
        names.extend(guards.variant_names() if v == "all" else [v])
    return sorted({p for p in (variant_source(n) for n in names) if p is not None})


def plugin_digest(path) -> str:
    """SHA-256 (hex) of a plugin file: of the version loaded in this process, else of the file on disk.

    Raises
    ------
    PluginError
        A file that is neither loaded nor readable.
    """
    resolved = _resolve(path)
    plugin = _LOADED.get(resolved)
    if plugin is not None:
        return plugin.digest
    try:
        return hashlib.sha256(resolved.read_bytes()).hexdigest()
    except OSError as exc:
        raise PluginError(f"plugin {_shown(resolved)}: cannot read ({exc.strerror})") from None


def source_digest(variant) -> str | None:
    """The digest of the plugin file implementing a variant, or None for a built-in variant (the package)."""
    path = variant_source(variant)
    return None if path is None else plugin_digest(path)


# ---------------------------------------------------------------------------
# A study's plugin variants on its machines and profiles
# ---------------------------------------------------------------------------

def check_study_variants(variants, machines, profiles, *, alpha=0.25, gamma=2.0, reduction="none", count=1,
                         weight=False) -> None:
    """Evaluate every plugin variant among ``variants`` once per machine and profile (a [1, 4] tensor).

    Parameters
    ----------
    variants : sequence of str
        Registry names (``"all"``: every registered variant).
    machines : sequence of str
        Machine specs.
    profiles : sequence of precision.engine.study.Profile
        pred/dout/weight formats.
    alpha, gamma, reduction, count
        The attributes to evaluate with (a study's first values).
    weight : bool
        Pass a weight tensor (the study has weights), else weight is absent.

    Raises
    ------
    PluginError
        A plugin variant that raises (other than a PrecisionError of its own
        contract, which means "does not take this profile", as in a run) or
        returns a wrong shape or dtype on one of them.
    """
    names = []
    for v in variants:
        names.extend(guards.variant_names() if v == "all" else [v])
    names = [n for n in dict.fromkeys(names) if variant_source(n) is not None]
    t = np.array([SMOKE_TARGET], dtype=np.int32)
    for profile in profiles:
        x = np.array([SMOKE_PRED], dtype=get_format(profile.pred).dtype)
        d = np.ones(x.shape, dtype=get_format(profile.dout).dtype)
        w = np.full(x.shape, 0.5, dtype=get_format(profile.weight).dtype) if weight else None
        for machine in machines:
            for name in names:
                try:
                    guards.evaluate(name, x, t, d, w, alpha=alpha, gamma=gamma, reduction=reduction,
                                    machine=machine, count=count if reduction == "mean" else None)
                except PluginError:
                    raise
                except PrecisionError:
                    pass  # the variant's own contract (e.g. fp16 only): skipped there, as in a run


# ---------------------------------------------------------------------------
# Writing a plugin
# ---------------------------------------------------------------------------

def recipe_function(call):
    """A variant function that runs a recipe: validate the inputs, prepare the constants, run, reshape.

    Parameters
    ----------
    call : precision.recipes.steps.RecipeCall or callable
        The recipe (or a ``params -> RecipeCall`` builder, called with the
        variant's bound keyword arguments).

    Returns
    -------
    callable
        ``f(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0,
        reduction="mean", *, count=None, **params)``, for
        :func:`precision.register_variant` together with ``recipe=call``.

    Examples
    --------
    >>> from precision.operators.sigmoid_focal_loss_grad.implementations.golden import golden_call
    >>> f = recipe_function(golden_call())
    >>> x = np.array([[-1.25, 0.0]], np.float32); t = np.array([[0, 1]], np.int32)
    >>> float(f("ieee", x, t, np.ones_like(x))[0, 0]).hex()
    '-0x1.bf65b80000000p-4'
    """
    def run(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="mean", *, count=None,
            **params):
        c = call if not callable(call) else call(params)
        bound = guards.bind_call(c.recipe.name, c, pred, target, dout, weight, alpha=alpha, gamma=gamma,
                                 reduction=reduction, machine=machine, count=count)
        return bound.run().reshape(bound.shape)

    return run
