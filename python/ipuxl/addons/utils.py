"""Small helpers of ``popxl_addons.utils``: an ``OrderedDict`` with a
multi-line repr and ``idx`` (value by position), ``WeightsDict`` (validated variable → array
mapping), ``timer``, ``null_context``, ``suffix_graph_name``, ``overrides``
and ``duplicate_items``."""
import collections
import re
import time
from collections.abc import MutableMapping
from contextlib import contextmanager
from typing import Any, Iterable, List

import numpy as np

__all__ = ["OrderedDict", "WeightsDict", "timer", "null_context", "suffix_graph_name", "overrides",
           "duplicate_items"]


class OrderedDict(collections.OrderedDict):
    """``collections.OrderedDict`` with ``idx(i)`` and a one-item-per-line repr."""

    def idx(self, idx: int):
        """The value at position ``idx`` in insertion order (as popxl-addons;
        negative positions count from the end, IndexError beyond)."""
        values = list(self.values())
        try:
            return values[idx]
        except IndexError:
            raise IndexError(f"OrderedDict.idx: position {idx} is out of range for "
                             f"{len(values)} items") from None

    def __repr__(self) -> str:
        body = "".join(f"{k}: {v!r},\n" for k, v in self.items())
        return "{\n" + body + "}"


class WeightsDict(MutableMapping):
    """``{Variable: np.ndarray}`` that checks every array against its
    variable's host shape and dtype on insertion (for
    ``session.write_variables_data``)."""

    def __init__(self, *args, **kwargs):
        self._d = {}
        self.update(dict(*args, **kwargs))

    def __setitem__(self, var, value) -> None:
        from ..tensor import Variable

        if not isinstance(var, Variable):
            raise TypeError(f"WeightsDict keys must be popxl Variables, got {type(var).__name__}")
        arr = np.asarray(value)
        expected = var.dtype.as_numpy()
        if arr.dtype != expected:
            raise ValueError(f"WeightsDict: data for {var.name!r} has dtype {arr.dtype}, the "
                             f"variable is {var.dtype.name}")
        shape = tuple(getattr(var, "shape_on_host", var.shape))
        if tuple(arr.shape) != shape:
            raise ValueError(f"WeightsDict: data for {var.name!r} has shape {arr.shape}, the "
                             f"variable's host shape is {shape}")
        self._d[var] = arr

    def __getitem__(self, var):
        return self._d[var]

    def __delitem__(self, var):
        del self._d[var]

    def __iter__(self):
        return iter(self._d)

    def __len__(self):
        return len(self._d)

    def __repr__(self):
        return f"WeightsDict({self._d!r})"


@contextmanager
def null_context():
    yield


def suffix_graph_name(name: str, suffix: str) -> str:
    """``"Linear_subgraph(3)", "bwd"`` → ``"Linear_bwd"``."""
    base = re.sub(r"_subgraph\(\d+\)", "", name)
    return f"{base}_{suffix}"


@contextmanager
def timer(title=None, log_to_wandb: bool = True):
    """Log (at INFO level) how long the block took. ``log_to_wandb`` is
    accepted for compatibility; ipuxl does not talk to Weights & Biases."""
    import logging  # only here: keeps logging out of every ipuxl process

    t0 = time.perf_counter()
    logging.info(f"Starting {title or ''}")
    yield
    mins = (time.perf_counter() - t0) / 60
    logging.info(f"{title + ' duration' if title else 'Duration'}: {mins:.2f} mins")


def overrides(cls: type, base: type, method: str) -> bool:
    """Whether ``cls`` (or a class between it and ``base``) redefines ``method``."""
    return getattr(cls, method, None) is not getattr(base, method, None)


def duplicate_items(items: Iterable[Any]) -> List[Any]:
    """Items appearing more than once (by hash and equality; Tensors and
    Graphs by identity), each listed once, in first-seen order."""
    counts: "collections.OrderedDict[Any, int]" = collections.OrderedDict()
    for x in items:
        counts[x] = counts.get(x, 0) + 1
    return [x for x, n in counts.items() if n > 1]
