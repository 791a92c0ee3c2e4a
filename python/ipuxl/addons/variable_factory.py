"""``VariableFactory`` and ``NamedVariableFactories``: descriptions of
variables that are created later, in the main graph
(``popxl_addons.variable_factory``).

A Module's graph takes its weights as graph inputs; the factories returned by
``create_graph`` say how to make the matching variables (``init``), so the
caller decides how many instances exist and where.

Random-number compatibility: as in popxl_addons, a callable ``data_iter`` is
called once at construction "to test it" (the result is discarded) and a
second time when the factory peeks at its first sample to learn shape and
dtype; the first ``init`` returns that peeked sample. With
``np.random.seed(s)`` this reproduces popxl_addons' initial weights exactly.

For an abstract Ir (:mod:`ipuxl._abstract`) the callable is not called when
it is a ``functools.partial`` of a known array source
(:func:`ipuxl._abstract.sample_spec`: NumPy creators and samplers, SciPy's
``rvs``, ``truncated_normal``), whose arguments give shape and dtype;
otherwise it is called once, for the shape and dtype of its first sample,
which is not kept. Variables get
:class:`~ipuxl._abstract.AbstractData` of that shape (stacked per replica
group) and the data source is never asked again.
"""
import numbers
from typing import Any, Callable, Iterable, Iterator, Optional, Tuple, Union

import numpy as np

from .. import dtypes
from .._abstract import AbstractData, sample_spec
from ..replica_grouping import ReplicaGrouping
from ..tensor import Tensor
from .dot_tree import DotTree
from .named_replica_grouping import NamedReplicaGrouping
from .named_tensors import NamedTensors

__all__ = ["VariableFactory", "NamedVariableFactories", "add_variable_input",
           "add_replica_sharded_variable_input"]

DataIter = Union[Callable[[], Any], Iterable[Any]]


class _Peekable:
    """An iterator with one element of look-ahead (``more_itertools.peekable``)."""

    _EMPTY = object()

    def __init__(self, it: Iterable):
        self._it: Iterator = iter(it)
        self._cache = self._EMPTY

    def peek(self):
        if self._cache is self._EMPTY:
            self._cache = next(self._it)
        return self._cache

    def __iter__(self):
        return self

    def __next__(self):
        if self._cache is not self._EMPTY:
            v, self._cache = self._cache, self._EMPTY
            return v
        return next(self._it)


def _abstract_ir(replica_grouping) -> bool:
    """Whether the factory is for an abstract Ir: the grouping's, else the
    current graph's (False outside any graph)."""
    ir = getattr(replica_grouping, "_ir", None)
    if ir is None:
        from ..context import gcg

        try:
            ir = gcg().ir
        except Exception:  # noqa: BLE001 - no graph context: the concrete path reports it
            return False
    return bool(getattr(ir, "_abstract", False))


def _is_host_tensor(x) -> bool:
    if isinstance(x, (np.ndarray, np.generic, AbstractData)):
        return True
    return type(x).__module__.startswith("torch") and hasattr(x, "shape")


def _to_numpy(x) -> np.ndarray:
    if type(x).__module__.startswith("torch"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


class VariableFactory:
    """Describes one variable: its data source, dtype, name and placement.

    Args:
        data_iter: a callable returning a host array (called once per
            instance), or an iterable of host arrays (e.g. one per instance).
        dtype: popxl dtype; inferred from the first sample when None.
        name: the variable's name.
        by_ref: graph inputs created for it are passed by reference.
        replica_grouping: replicas holding identical data (default: all
            replicas of the current Ir; needs a graph context).
        shard_over: replicas the variable is sharded over (replica tensor
            sharding); 1 means not sharded.

    Raises:
        ValueError: ``data_iter`` is neither callable nor iterable, the
            callable raises, or a sample is not a host array; ``shard_over``
            exceeds the group size.
    """

    def __init__(self, data_iter: DataIter, dtype: Optional[dtypes.dtype] = None,
                 name: Optional[str] = None, by_ref: bool = False,
                 replica_grouping: Optional[ReplicaGrouping] = None, shard_over: int = 1):
        # An abstract Ir (ipuxl._abstract) reads shape and dtype from the
        # callable's arguments where it can (sample_spec), else takes one
        # sample, and never produces a variable's data.
        abstract = _abstract_ir(replica_grouping)
        known = sample_spec(data_iter) if abstract and callable(data_iter) else None
        if known is not None:
            # Shape and dtype from the callable's arguments: never called.
            source = iter([AbstractData(known[0], known[1], f"VariableFactory {name!r}")])
        elif callable(data_iter):
            fn = data_iter
            try:
                if not abstract:
                    fn()  # popxl_addons tests the callable; keeps RNG streams identical
            except Exception as e:  # noqa: BLE001 - re-raised with context
                raise ValueError("VariableFactory: the callable passed as `data_iter` raised an "
                                 "error") from e

            def gen():
                while True:
                    yield fn()

            source = gen()
        elif isinstance(data_iter, Iterable):
            source = data_iter
        else:
            raise ValueError("VariableFactory: `data_iter` must be an iterable or a callable. To "
                             "use the same data for every instance wrap it: `lambda: data`")
        self.data_iter = _Peekable(source)
        try:
            peek = self.data_iter.peek()
        except StopIteration:
            raise ValueError("VariableFactory: `data_iter` is empty") from None
        if not _is_host_tensor(peek):
            raise ValueError("VariableFactory: `data_iter` must produce numpy arrays or torch "
                             f"tensors, it produced {type(peek).__name__}: {peek!r}")
        if replica_grouping is None:
            from ..context import gcg

            replica_grouping = gcg().ir.replica_grouping()
        if not isinstance(replica_grouping, ReplicaGrouping):
            raise TypeError("VariableFactory: replica_grouping must be a popxl.ReplicaGrouping, "
                            f"got {type(replica_grouping).__name__}")
        # Any integral number: PopXL programs compute it with NumPy
        # (tutorial 5: ``np.prod(var.meta_shape) // np.prod(var.shape)``).
        if not isinstance(shard_over, numbers.Integral) or isinstance(shard_over, bool) \
                or shard_over < 1:
            raise ValueError(f"VariableFactory: shard_over must be a positive int, got {shard_over!r}")
        shard_over = int(shard_over)
        if shard_over > replica_grouping.group_size:
            raise ValueError(f"VariableFactory: shard_over ({shard_over}) cannot exceed the replica "
                             f"group size ({replica_grouping.group_size})")
        self.name = name
        self.by_ref = by_ref
        self.replica_grouping = replica_grouping
        self.shard_over = shard_over
        self.replica_sharded = shard_over > 1
        self.dtype = dtypes.dtype.as_dtype(dtype) if dtype is not None else \
            dtypes.dtype.as_dtype(peek.dtype if isinstance(peek, AbstractData) else
                                  _to_numpy(peek).dtype)
        data_shape = tuple(int(d) for d in peek.shape)
        if self.replica_sharded:
            n = int(np.prod(data_shape))
            if n % shard_over:
                raise ValueError(f"VariableFactory {name!r}: {n} elements cannot be sharded evenly "
                                 f"over {shard_over} replicas")
            self.meta_shape: Tuple[int, ...] = data_shape
            self.shape: Tuple[int, ...] = (n // shard_over,)
        else:
            self.meta_shape = ()
            self.shape = data_shape
        #: An abstract factory's samples: shape and dtype only.
        self._abstract: Optional[AbstractData] = None
        if abstract:
            self._abstract = AbstractData(self.meta_shape or self.shape, self.dtype.as_numpy(),
                                          f"VariableFactory {name!r}")
            self.data_iter = None  # the peeked sample is not kept

    def __repr__(self):
        return (f"VariableFactory(name={self.name!r}, shape={self.shape}, dtype={self.dtype}, "
                f"by_ref={self.by_ref}, replica_grouping={self.replica_grouping!r}"
                + (f", shard_over={self.shard_over}" if self.replica_sharded else "") + ")")

    @property
    def spec(self):
        from ..tensor import TensorSpec

        return TensorSpec(self.shape, self.dtype, self.meta_shape)

    def create_input(self, prefix: Optional[str] = None) -> Tensor:
        """A graph input for this variable in the current graph."""
        from ..tensor import graph_input

        name = self.name if prefix is None else f"{prefix}.{self.name}"
        return graph_input(self.shape, self.dtype, name, by_ref=self.by_ref,
                           meta_shape=self.meta_shape or None)

    def next_data(self, empty: bool = False) -> np.ndarray:
        """The next sample (stacked ``num_groups`` times along a new axis 0
        when the grouping has several groups); ``empty=True`` gives
        uninitialised data of the right shape."""
        if self._abstract is not None:
            groups = self.replica_grouping.num_groups
            return AbstractData(((groups,) if groups > 1 else ()) + self._abstract.shape,
                                self._abstract.dtype, self._abstract.what)

        def one():
            if empty:
                return np.empty(self.meta_shape or self.shape, self.dtype.as_numpy())
            return _to_numpy(next(self.data_iter))

        if self.replica_grouping.num_groups == 1:
            return one()
        return np.concatenate([one()[np.newaxis, ...] for _ in range(self.replica_grouping.num_groups)])

    def next_memmap(self, memmap_dir: str, name: str, empty: bool = False,
                    read_only_if_exists: bool = False) -> np.memmap:
        """The host value as ``memmap_dir/<name>.npy`` (raw data): created with
        the next sample when the file does not exist, else opened as it is
        (read-only with ``read_only_if_exists``), as popxl_addons does."""
        import os

        if self._abstract is not None:
            return self.next_data(empty)  # no file for a variable without data
        os.makedirs(memmap_dir, exist_ok=True)
        path = os.path.join(memmap_dir, name + ".npy")
        shape = self.meta_shape or self.shape
        if self.replica_grouping.num_groups != 1:
            shape = (self.replica_grouping.num_groups, *shape)
        if not os.path.exists(path):
            data = np.memmap(path, dtype=self.dtype.as_numpy(), shape=tuple(shape), mode="w+")
            if not empty:
                np.copyto(data, self.next_data(empty), casting="unsafe")
            return data
        return np.memmap(path, dtype=self.dtype.as_numpy(), shape=tuple(shape),
                         mode="r" if read_only_if_exists else "r+")

    def create_tensor(self, name: Optional[str] = None, empty: bool = False,
                      memmap_dir: Optional[str] = None, read_only_if_exists: bool = False) -> Tensor:
        """A ``popxl.variable`` in the current (main) graph holding the next
        sample (in a memory-mapped file under ``memmap_dir`` if given).
        Sharded factories create the whole tensor."""
        from ..tensor import variable

        name = name or self.name
        data = self.next_memmap(memmap_dir, name, empty, read_only_if_exists) \
            if memmap_dir is not None else self.next_data(empty)
        return variable(data, self.dtype, name, replica_grouping=self.replica_grouping)

    def create_remote_tensor(self, buffer, entry: int, name: Optional[str] = None,
                             empty: bool = False, memmap_dir: Optional[str] = None,
                             read_only_if_exists: bool = False) -> Tensor:
        """A remote variable in ``buffer`` at ``entry`` holding the next sample."""
        from ..tensor import remote_replica_sharded_variable, remote_variable

        name = name or self.name
        data = self.next_memmap(memmap_dir, name, empty, read_only_if_exists) \
            if memmap_dir is not None else self.next_data(empty)
        if getattr(buffer, "meta_shape", None):
            return remote_replica_sharded_variable(data, buffer, entry, self.dtype, name,
                                                   replica_grouping=self.replica_grouping)
        return remote_variable(data, buffer, entry, self.dtype, name,
                               replica_grouping=self.replica_grouping)


class NamedVariableFactories(DotTree[VariableFactory]):
    """A ``DotTree`` of VariableFactories (what ``Module.create_graph`` returns)."""

    def _items_sorted(self):
        # Alphabetical flat-key order, so data is drawn deterministically.
        return sorted(self.to_dict().items(), key=lambda kv: kv[0])

    def init(self, prefix: Optional[str] = None, empty: bool = False,
             memmap_dir: Optional[str] = None, read_only_if_exists: bool = False) -> NamedTensors:
        """Create one variable per factory in the current (main) graph, in
        alphabetical key order; variable names are ``prefix.key`` (or ``key``)."""
        out = {}
        for key, f in self._items_sorted():
            out[key] = f.create_tensor(f"{prefix}.{key}" if prefix else key, empty, memmap_dir,
                                       read_only_if_exists)
        return NamedTensors.from_dict(out)

    def init_remote(self, buffers, entry: int = 0, prefix: Optional[str] = None,
                    empty: bool = False, memmap_dir: Optional[str] = None,
                    read_only_if_exists: bool = False) -> NamedTensors:
        """Create remote variables, each in the buffer of ``buffers`` with the same key."""
        bufs = buffers.to_dict()
        out = {}
        for key, f in self._items_sorted():
            if key not in bufs:
                raise KeyError(f"init_remote: no remote buffer for {key!r}")
            out[key] = f.create_remote_tensor(bufs[key], entry, f"{prefix}.{key}" if prefix else key,
                                              empty, memmap_dir, read_only_if_exists)
        return NamedTensors.from_dict(out)

    def _init_op(self, init_type: str) -> NamedTensors:
        from .. import ops

        return NamedTensors.from_dict({
            key: ops.init(f.shape, f.dtype, key, init_type, meta_shape=f.meta_shape or None)
            for key, f in self.to_dict().items()})

    def init_zero(self) -> NamedTensors:
        """Zero-filled tensors (``ops.init``, not variables) in the current graph."""
        return self._init_op("zero")

    def init_undef(self) -> NamedTensors:
        """Uninitialised tensors (``ops.init(..., "undef")``) in the current graph."""
        return self._init_op("undef")

    @property
    def replica_groupings(self) -> NamedReplicaGrouping:
        return NamedReplicaGrouping.from_dict(
            {k: f.replica_grouping for k, f in self.to_dict().items()})


def add_variable_input(name: str, data_iter: DataIter, dtype: Optional[dtypes.dtype] = None,
                       by_ref: bool = False, replica_grouping: Optional[ReplicaGrouping] = None
                       ) -> Tuple[Tensor, VariableFactory]:
    """A VariableFactory and its graph input in the current graph."""
    f = VariableFactory(data_iter, dtype, name, by_ref, replica_grouping)
    return f.create_input(), f


def add_replica_sharded_variable_input(name: str, data_iter: DataIter,
                                       dtype: Optional[dtypes.dtype] = None, by_ref: bool = False,
                                       replica_grouping: Optional[ReplicaGrouping] = None,
                                       shard_over: Optional[int] = None
                                       ) -> Tuple[Tensor, VariableFactory]:
    """Like ``add_variable_input`` but the graph input is a shard (flat, with
    ``meta_shape``); ``shard_over`` defaults to the whole replica group."""
    if replica_grouping is None:
        from ..context import gcg

        replica_grouping = gcg().ir.replica_grouping()
    f = VariableFactory(data_iter, dtype, name, by_ref, replica_grouping,
                        shard_over if shard_over is not None else replica_grouping.group_size)
    return f.create_input(), f
