"""SigmoidFocalLossGrad's plugins: the generic loader (:mod:`precision.recipes.plugins`) over its variant table.

A plugin file calls :func:`precision.register_variant` (:func:`.guards.register_variant`); see
``docs/plugins.md`` and ``examples/my_kernel.py``.  What is the operator's: its table
(:data:`.guards.TABLE`), its ``evaluate``, ``evaluate_variants`` and ``bind_call``, the signature of its
variant functions (:func:`variant_function`) and the smoke evaluation's keywords (alpha 0.25, gamma 2, the
mean over the ``[1, 4]`` tensor).  Every behaviour (private module, digests, idempotence, the checks, all or
nothing, one :class:`~precision.errors.PluginError` line naming the file) is the generic loader's; this module
binds its methods to the names the toolkit and plugins have always imported from here.
"""

from __future__ import annotations

from precision.operators.sigmoid_focal_loss_grad import guards
from precision.recipes.plugins import SMOKE_PRED, SMOKE_TARGET, Plugin, PluginLoader

__all__ = ["Plugin", "LOADER", "load_plugin", "load_plugins", "ensure_loaded", "unload_plugin", "loaded_plugins",
           "variant_source", "plugin_files", "plugin_digest", "source_digest", "plugin_variants",
           "check_study_variants", "recipe_function", "variant_function", "SMOKE_PRED", "SMOKE_TARGET"]


def variant_function(machine, pred, target, dout, weight=None, alpha=0.25, gamma=2.0, reduction="mean", *,
                     count=None, **params):
    """The signature of a SigmoidFocalLossGrad variant function (docs/plugins.md): the gradient, pred's dtype
    and shape.  A stub: the loader reads its signature."""
    raise NotImplementedError


#: The loader of SigmoidFocalLossGrad's plugin files.
LOADER = PluginLoader(guards.TABLE, evaluate=guards.evaluate, evaluate_variants=guards.evaluate_variants,
                      bind_call=guards.bind_call, signature=variant_function,
                      smoke_keywords=dict(alpha=0.25, gamma=2.0, reduction="mean", count=len(SMOKE_PRED)))

load_plugin = LOADER.load_plugin
load_plugins = LOADER.load_plugins
ensure_loaded = LOADER.ensure_loaded
unload_plugin = LOADER.unload_plugin
loaded_plugins = LOADER.loaded_plugins
variant_source = LOADER.variant_source
plugin_variants = LOADER.plugin_variants
plugin_files = LOADER.plugin_files
plugin_digest = LOADER.plugin_digest
source_digest = LOADER.source_digest
check_study_variants = LOADER.check_study_variants


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
    >>> import numpy as np
    >>> from precision.operators.sigmoid_focal_loss_grad.implementations.golden import golden_call
    >>> f = recipe_function(golden_call())
    >>> x = np.array([[-1.25, 0.0]], np.float32); t = np.array([[0, 1]], np.int32)
    >>> float(f("ieee", x, t, np.ones_like(x))[0, 0]).hex()
    '-0x1.bf65b80000000p-4'
    """
    return LOADER.recipe_function(call)
