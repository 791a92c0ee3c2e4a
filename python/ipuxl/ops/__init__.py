"""Op builders, mirroring ``popxl.ops``.

Each module groups one family of ops: its builders check shapes and dtypes
and create ops whose type names a C++ kernel in ``cpp/kernels``.

The families are imported on first use (``ops.gather`` imports
``ipuxl.ops.gather``), so a program pays memory and import time only for the
ops it builds. ``dir(ops)``, ``ops.__all__`` and ``from ipuxl.ops import *``
see every builder; autodiff imports every family before it concludes that an
op type has no gradient rule (``ipuxl.grad``).
"""
import importlib
import sys
import types

#: Every family's builders, by module: the public names of this package.
#: (``ipu_model_tests/test_lazy_ops.py`` checks it against each module's
#: ``__all__``.)
EXPORTS = {
    "argminmax": ('argmax', 'argmin'),
    "binary": ('add', 'add_', 'sub', 'sub_', 'mul', 'mul_', 'div', 'div_'),
    "call": ('call', 'call_with_info', 'CallSiteInfo'),
    "cast": ('cast', 'pow2scale_cast_to_fp8', 'pow2scale_cast_from_fp8', 'pow2scale_then_cast', 'cast_then_pow2scale'),
    "code_load": ('remote_code_load',),
    "conv": ('conv', 'conv_transpose', 'conv_pow2scaled', 'conv_transpose_pow2scaled'),
    "conditional": ('conditional', 'conditional_with_info', 'ConditionalSiteInfo'),
    "cumsum": ('cumsum',),
    "exchange": ('remote_load', 'remote_load_', 'remote_store', 'io_tile_copy'),
    "gather": ('gather', 'tied_gather', 'scatter', 'scatter_reduce', 'dynamic_slice', 'dynamic_update', 'dynamic_update_', 'onehot'),
    "host_io": ('host_load', 'host_store'),
    "init": ('init',),
    "ipu_copy": ('ipu_copy',),
    "logical": ('logical_and', 'logical_or', 'logical_not', 'equal', 'greater'),
    "loss": ('nll_loss', 'nll_loss_with_softmax_grad'),
    "matmul": ('matmul', 'matmul_pow2scaled'),
    "misc": ('fmod', 'pow', 'maximum', 'identity', 'rename', 'detach', 'detach_', 'increment_mod', 'increment_mod_'),
    "norm": ('group_norm', 'layer_norm', 'batch_norm_inference'),
    "pool": ('average_pool', 'max_pool'),
    "resample": ('interpolate', 'roi_align'),
    "print_tensor": ('print_tensor',),
    "random": ('random_uniform', 'random_normal', 'dropout', 'shaped_dropout', 'split_random_seed', 'create_random_seed'),
    "reduce": ('sum', 'mean', 'max', 'min', 'median', 'prod', 'l1', 'l2', 'logsum', 'logsumexp', 'sumsquare', 'lamb_square', 'histogram'),
    "repeat": ('repeat', 'repeat_with_info'),
    "scaled_add": ('scaled_add', 'scaled_add_'),
    "shape": ('reshape', 'reshape_', 'flatten', 'flatten_', 'squeeze', 'transpose', 'transpose_'),
    "slicing": ('slice', 'slice_', 'subsample', 'split', 'concat', 'concat_'),
    "softmax": ('softmax',),
    "topk": ('topk',),
    "unary": ('abs', 'negate', 'sqrt', 'exp', 'exp_', 'log', 'log2', 'sin', 'cos', 'tanh', 'relu', 'relu_', 'gelu', 'gelu_', 'geluerf', 'geluerf_', 'swish', 'swish_', 'ceil', 'floor', 'sign', 'isnan', 'isinf', 'isfinite', 'clip', 'clamp'),
    "where": ('where',),
}
#: Subpackages, imported on first use like the families.
SUBPACKAGES = ("collectives", "var_updates")
#: Modules with gradient rules but no public builders of their own.
RULE_MODULES = ("sum_n", "indexing", "var_updates")

_OWNER = {name: mod for mod, names in EXPORTS.items() for name in names}

PadType = str  # Literal["not_set", "same_upper", "same_lower", "valid"]

__all__ = sorted(_OWNER) + ["PadType"]


class _OpsPackage(types.ModuleType):
    """``ipuxl.ops``: binds a family's builders when the family is imported."""

    def __getattr__(self, name):
        mod = _OWNER.get(name)
        if mod is not None:
            importlib.import_module(f"{__name__}.{mod}")
            return self.__dict__[name]
        if name in SUBPACKAGES or name in EXPORTS:
            return importlib.import_module(f"{__name__}.{name}")
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

    def __setattr__(self, name, value):
        # The import system binds each imported submodule on its package.
        # Several families are named after one of their builders (call,
        # matmul, softmax, ...): the builder keeps the name, and every
        # builder of the family becomes an attribute.
        super().__setattr__(name, value)
        if isinstance(value, types.ModuleType) and value.__name__ == f"{__name__}.{name}":
            for export in EXPORTS.get(name, ()):
                super().__setattr__(export, getattr(value, export))

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(_OWNER) | set(EXPORTS) | set(SUBPACKAGES))


def import_all() -> None:
    """Import every family (and with it every gradient rule and decomposition)."""
    for mod in list(EXPORTS) + list(SUBPACKAGES) + list(RULE_MODULES):
        importlib.import_module(f"{__name__}.{mod}")


sys.modules[__name__].__class__ = _OpsPackage
