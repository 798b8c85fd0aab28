"""SigmoidFocalLoss's plugins: the generic loader (:mod:`precision.recipes.plugins`) over its variant table.

A plugin file of the forward loss registers its variants with
:func:`precision.operators.sigmoid_focal_loss.register_variant` (:func:`.variants.register_variant`); a study of
the operator names it (``[run] plugins = ["my_loss.py"]``) or a command takes it (``--plugin FILE --operator
sigmoid_focal_loss``).  A variant function has the signature of :func:`variant_function` and returns the loss
per element in pred's dtype and shape; :func:`recipe_function` makes one of a recipe (a
:class:`~precision.recipes.steps.RecipeCall`, e.g. :func:`.recipes.loss_call`).  The loader's behaviour (private
module, digests, idempotence, the checks, all or nothing, one :class:`~precision.errors.PluginError` line naming
the file) is the generic one; its smoke evaluation takes the forward's inputs: reduction none, no count.

Examples
--------
>>> import numpy as np
>>> from precision.operators.sigmoid_focal_loss.recipes import loss_call
>>> f = recipe_function(loss_call(path="none"))
>>> x = np.array([[2.0, -1.0]], np.float32); t = np.array([[1, 0]], np.int32)
>>> [float(v).hex() for v in f("ieee", x, t)[0]]
['0x1.d8cb300000000p-12', '0x1.166c160000000p-6']
"""

from __future__ import annotations

from precision.operators.sigmoid_focal_loss import variants
from precision.recipes.plugins import SMOKE_PRED, SMOKE_TARGET, Plugin, PluginLoader

__all__ = ["Plugin", "LOADER", "load_plugin", "load_plugins", "ensure_loaded", "unload_plugin", "loaded_plugins",
           "variant_source", "plugin_files", "plugin_digest", "source_digest", "plugin_variants",
           "check_study_variants", "recipe_function", "variant_function", "SMOKE_PRED", "SMOKE_TARGET"]


def variant_function(machine, pred, target, dout=None, weight=None, alpha=0.25, gamma=2.0, reduction="none", *,
                     count=None, **params):
    """The signature of a SigmoidFocalLoss variant function: the loss per element, pred's dtype and shape
    (``dout``: None or all ones; ``reduction``: none; ``count`` is passed on, and may be ignored).  A stub: the
    loader reads its signature."""
    raise NotImplementedError


#: The loader of SigmoidFocalLoss's plugin files.
LOADER = PluginLoader(variants.TABLE, evaluate=variants.evaluate, evaluate_variants=variants.evaluate_variants,
                      bind_call=variants.bind_call, signature=variant_function,
                      smoke_keywords=dict(alpha=0.25, gamma=2.0, reduction="none"))

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
recipe_function = LOADER.recipe_function
