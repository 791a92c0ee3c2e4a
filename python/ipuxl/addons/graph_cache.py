"""``GraphCache``: reuse a graph when ``create_graph`` is called again with
the same function and compatible arguments (``popxl_addons.graph_cache``).

The cache key is a hash of ``(fn, current ipu, io-tile setting, argument
hashes)`` over all bound arguments including defaults, where a Tensor or
TensorSpec hashes as ``(shape, dtype, meta_shape)``, a BoundGraph as
``(graph, bound args)``, a GraphWithNamedArgs as its graph, containers
recursively and anything else with ``hash()``. As in popxl_addons only the
hash is compared.
"""
import inspect
import weakref
from functools import wraps
from typing import Callable

from ..context import get_current_context, gcg
from ..graph import Graph
from ..tensor import Tensor, TensorSpec
from .graph import BoundGraph, GraphWithNamedArgs
from .named_tensors import NamedTensors

__all__ = ["GraphCache", "function", "named_tensors_function", "bound_arguments", "tensor_hash",
           "argument_hash", "get_function_hash"]


def bound_arguments(fn, *args, **kwargs) -> dict:
    """All arguments of calling ``fn(*args, **kwargs)``, defaults applied
    (for a Module: of its ``build``, with ``self`` first)."""
    target = fn
    if not inspect.isfunction(fn) and not inspect.ismethod(fn) and hasattr(fn, "build"):
        target = fn.build
    elif not inspect.isfunction(fn) and not inspect.ismethod(fn) and hasattr(fn, "__call__"):
        target = fn.__call__
    if inspect.ismethod(target):
        args = (target.__self__, *args)
        target = target.__func__
    sig = inspect.signature(target)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def tensor_hash(t) -> int:
    return hash((tuple(t.shape), t.dtype, tuple(t.meta_shape or ())))


def argument_hash(arg) -> int:
    """Hash of one argument; Tensors and TensorSpecs by spec, containers recursively."""
    if isinstance(arg, (Tensor, TensorSpec)):
        return tensor_hash(arg)
    if isinstance(arg, BoundGraph):
        return hash((arg.graph, argument_hash(arg.args)))
    if isinstance(arg, GraphWithNamedArgs):
        return hash(arg.graph)
    if isinstance(arg, dict):
        return hash(tuple((argument_hash(k), argument_hash(v)) for k, v in arg.items()))
    if isinstance(arg, (list, tuple)):
        return hash(tuple(argument_hash(v) for v in arg))
    return hash(arg)


def get_function_hash(fn, *args, **kwargs) -> int:
    """The cache key for building a graph from ``fn(*args, **kwargs)`` in the
    current context."""
    ctx = get_current_context()
    sig = [fn, ctx._ipu_id, ctx._io_tile_set]
    for name, value in bound_arguments(fn, *args, **kwargs).items():
        if isinstance(value, type(fn)) and value is fn:
            continue  # `self` of a Module: fn itself is already in the key
        sig.append(argument_hash(value))
    return hash(tuple(sig))


class GraphCache:
    """Per-Ir memo of ``ir.create_graph``::

        cache = GraphCache()
        with main:
            g = cache.create_graph(fn, x)   # builds
            g2 = cache.create_graph(fn, y)  # same graph if y has x's spec

    Graphs are mutable: a cached graph changed after creation is returned
    changed."""

    def __init__(self):
        self._cache: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()

    def _graphs_of(self, ir):
        if ir not in self._cache:
            self._cache[ir] = {}
        return self._cache[ir]

    def create_graph(self, fn: Callable, *args, **kwargs) -> Graph:
        ir = gcg().ir
        cache = self._graphs_of(ir)
        key = get_function_hash(fn, *args, **kwargs)
        if key not in cache:
            cache[key] = ir.create_graph(fn, *args, **kwargs)
        return cache[key]


def function(fn: Callable) -> Callable:
    """Decorator outlining ``fn``: each call builds (or reuses, through a
    GraphCache) a graph of ``fn`` and ``ops.call``s it::

        @function
        def matmul(x, y):
            return x @ y
    """
    cache = GraphCache()

    @wraps(fn)
    def outlined(*args, **kwargs):
        from .. import ops

        graph = cache.create_graph(fn, *args, **kwargs)
        # create_graph made graph inputs of the tensor arguments in signature
        # order; other values were baked into the graph.
        inputs = []
        for v in bound_arguments(fn, *args, **kwargs).values():
            if isinstance(v, Tensor):
                inputs.append(v)
            elif isinstance(v, (list, tuple)) and v and all(isinstance(x, Tensor) for x in v):
                inputs.append(list(v))
        return ops.call(graph, *inputs)

    return outlined


def named_tensors_function(fn: Callable[[NamedTensors], NamedTensors]) -> Callable:
    """Outline ``fn(NamedTensors) -> NamedTensors`` (same keys in and out)."""
    cache = GraphCache()
    names_box = []

    def flat(tensors):
        result = fn(NamedTensors.pack(names_box[-1], tensors))
        return tuple(result.to_dict()[k] for k in names_box[-1])

    @wraps(fn)
    def outlined(named: NamedTensors) -> NamedTensors:
        from .. import ops

        names, tensors = named.unpack()
        names_box.append(names)
        try:
            graph = cache.create_graph(flat, list(tensors))
        finally:
            names_box.pop()
        return NamedTensors.pack(names, ops.call(graph, list(tensors)))

    return outlined
