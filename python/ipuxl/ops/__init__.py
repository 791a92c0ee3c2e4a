"""Op builders, mirroring ``popxl.ops``.

Each module groups one family of ops: its builders check shapes and dtypes
and create ops whose type names a C++ kernel in ``cpp/kernels``.

The families are imported on first use (``ops.gather`` imports
``ipuxl.ops.gather``), so a program pays memory and import time only for the
ops it builds. ``dir(ops)``, ``ops.__all__`` and ``from ipuxl.ops import *``
see every builder; autodiff imports every family before it concludes that an
op type has no gradient rule (``ipuxl.grad``).
"""
import ast
import importlib
import os
import sys
import types

#: Modules of this package that are not op families (their ``__all__`` is
#: not public): shared rules and checks, and ``indexing`` (Tensor.__getitem__).
_NOT_FAMILIES = ("__init__", "rules", "utils", "indexing")


def _declared_all(path: str) -> tuple:
    """The names a module's ``__all__ = [...]`` assignment lists, read from
    its source without importing it (a family is imported on first use)."""
    with open(path, encoding="utf-8") as f:
        for line in f:  # __all__ is near the top: read no further
            if not line.startswith("__all__"):
                continue
            text = line.split("=", 1)[1]
            while True:
                try:
                    return tuple(ast.literal_eval(text))
                except (SyntaxError, ValueError):
                    more = f.readline()
                    if not more:
                        raise ImportError(
                            f"{path}: __all__ must be a literal list of names") from None
                    text += more
    raise ImportError(f"{path}: an op family must declare its builders in __all__")


def _families() -> dict:
    """``{module: its builders}`` for every op family (each ``*.py`` module of
    this package but _NOT_FAMILIES): a new family needs no entry here."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = {}
    for f in sorted(os.listdir(here)):
        if f.endswith(".py") and f[:-3] not in _NOT_FAMILIES:
            out[f[:-3]] = _declared_all(os.path.join(here, f))
    return out


#: Every family's builders, by module: the public names of this package,
#: as each module's ``__all__`` declares them. (``ipu_model_tests/ir/
#: test_lazy_ops.py`` checks them against the imported modules.)
EXPORTS = {m: names for m, names in _families().items() if names}
#: Subpackages, imported on first use like the families.
SUBPACKAGES = ("collectives", "var_updates")
#: Modules with gradient rules but no public builders of their own.
RULE_MODULES = ("sum_n", "indexing", "var_updates")  # sum_n: an empty __all__

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
