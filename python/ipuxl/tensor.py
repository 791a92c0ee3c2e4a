"""Tensors, mirroring ``popxl.tensor``: ``Tensor``, ``Variable``, ``Constant``,
``TensorSpec``, ``TensorByRef`` and the creation functions ``variable``,
``constant``, ``graph_input`` and ``graph_output``."""
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Iterable, Optional, Sequence, Tuple, Union

import numpy as np

from . import dtypes
from ._abstract import AbstractData, abstract_host_array
from ._host_data import _check_fits, _to_host_array  # noqa: F401 - ops.utils imports _check_fits
from ._positions import position
from ._shapes import check_shape
from .context import get_current_context, get_current_graph, get_main_graph
from .errors import UndefinedValue
from .op import placement_epoch
from .opdef import get_opdef

if TYPE_CHECKING:
    from .graph import Graph
    from .op import Op

__all__ = [
    "Tensor", "Variable", "Constant", "variable", "constant", "graph_input", "graph_output",
    "TensorByRef", "TensorSpec", "TensorLike", "HostTensor", "remote_variable",
    "remote_replica_sharded_variable", "replica_sharded_variable", "replica_sharded_buffer",
]

HostScalarTensor = Union[int, float, bool, np.number, np.ndarray]
HostTensor = Union[np.ndarray, Sequence]


class TensorSpec(Mapping):
    """Shape, dtype and meta-shape of a tensor, usable wherever a graph input is
    described (``ir.create_graph(fn, x.spec)``)."""

    def __init__(self, shape: Tuple[int, ...], dtype: dtypes.dtype, meta_shape: Tuple[int, ...] = ()):
        self.dtype = dtypes.dtype.as_dtype(dtype)
        self.shape = check_shape("TensorSpec", shape, self.dtype.itemsize)
        self.meta_shape = tuple(meta_shape)

    def to_dict(self):
        return {"shape": self.shape, "dtype": self.dtype, "meta_shape": self.meta_shape}

    def to_tuple(self):
        return (self.shape, self.dtype, self.meta_shape)

    def __getitem__(self, key):
        return self.to_dict()[key]

    def __iter__(self):
        return iter(self.to_dict())

    def __len__(self):
        return 3

    def __hash__(self):
        return hash(self.to_tuple())

    def __eq__(self, other):
        return isinstance(other, TensorSpec) and self.to_tuple() == other.to_tuple()

    def __repr__(self):
        return f"TensorSpec(shape={self.shape}, dtype={self.dtype}, meta_shape={self.meta_shape})"


_OPS_MODULE = None

#: Producer kinds whose output's placement the search follows (others: the op's own).
_FOLLOWED_KINDS = ("ipu_copy", "call", "repeat")
#: Consumer lists up to this long are read again on every placement query.
_CONSUMERS_READ_AGAIN = 8


def _least_placement(cons, start: int, best):
    """The least of ``best`` and the ``(ipu, tile set)`` of ``cons[start:]``
    (an ``IpuCopy``'s source; unplaced ops do not count)."""
    for k in range(start, len(cons)):
        c = cons[k]
        if get_opdef(c.type).kind == "ipu_copy":
            here = (c.attrs["_source"], c._tile_set)
        elif c._ipu is not None:
            here = (c._ipu, c._tile_set)
        else:
            continue
        if best is None or here < best:
            best = here
    return best


class Tensor:
    """A tensor of a graph. Created by ops and the creation functions, never directly."""

    #: A remote variable's place: (RemoteBuffer, entry, sharded); None otherwise.
    _remote = None
    #: ``_consumers_placement``'s kept answer (long consumer lists only).
    _consumers_place = None

    def __init__(self):
        raise RuntimeError(
            "popxl.Tensor cannot be constructed directly; use popxl.variable, popxl.constant, "
            "popxl.graph_input or an op.")

    @classmethod
    def _create(cls, graph: "Graph", name: str, shape: Tuple[int, ...], dtype: dtypes.dtype,
                producer: Optional["Op"] = None, meta_shape: Tuple[int, ...] = ()):
        if not isinstance(dtype, dtypes.dtype):
            raise TypeError(f"dtype must be a popxl dtype, got {dtype!r}")
        if not isinstance(name, str):
            raise TypeError(f"tensor name must be a str, got {name!r} ({type(name).__name__})")
        for d in shape:
            if d < 0:
                raise ValueError(f"tensor {name!r}: negative dimension in shape {shape}")
        self = object.__new__(cls)
        self._graph = graph
        self._id = graph._create_tensor_id(name)
        self._shape = tuple(shape)
        self._dtype = dtype
        self._meta_shape = tuple(meta_shape)
        self._producer = producer
        self._consumers = []
        # Placement: where the op (or creation context) put it.
        if producer is not None:
            self._ipu, self._tile_set = producer._ipu, producer._tile_set
        else:
            ctx = get_current_context()
            self._ipu, self._tile_set = ctx._ipu_id, "io" if ctx._io_tile_set else "compute"
        graph._add_tensor(self)
        return self

    # ---- identity
    @property
    def id(self) -> str:
        return self._id

    @property
    def name(self) -> str:
        """The id without the graph's scope."""
        scope = self._graph._scope_prefix
        return self._id[len(scope):] if scope and self._id.startswith(scope) else self._id

    @property
    def scope(self) -> str:
        return self._graph.name

    @property
    def graph(self) -> "Graph":
        return self._graph

    @property
    def ir(self):
        return self._graph.ir

    @property
    def producer(self) -> Optional["Op"]:
        return self._producer

    # ---- type and shape
    @property
    def dtype(self) -> dtypes.dtype:
        return self._dtype

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._shape

    @property
    def meta_shape(self) -> Tuple[int, ...]:
        return self._meta_shape

    @property
    def rank(self) -> int:
        return len(self._shape)

    @property
    def nelms(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def spec(self) -> TensorSpec:
        return TensorSpec(self._shape, self._dtype, self._meta_shape)

    @property
    def location_info(self):
        return None

    @property
    def ipu(self) -> int:
        """The IPU the tensor is on, as PopART infers it: its producer's (an
        ``ipu_copy``'s destination), else a graph input's call site's, else
        that of the ops consuming it.

        Raises:
            UndefinedValue: none of those gives one.
        """
        ipu, _ = self._virtual_graph_id_and_tile_set()
        if ipu == -1:
            raise UndefinedValue(f"Tensor's IPU is undefined ({self.id!r} has no producer, "
                                 "call site or consumer that places it).")
        return ipu

    @property
    def tile_set(self) -> str:
        """``"compute"`` or ``"io"``: the tile set the tensor is on (inferred as :attr:`ipu`).

        Raises:
            UndefinedValue: the tile set is undefined.
        """
        _, ts = self._virtual_graph_id_and_tile_set()
        if ts == "undefined":
            raise UndefinedValue(f"Tensor's tile set is undefined ({self.id!r} has no producer, "
                                 "call site or consumer that places it).")
        return ts

    def _virtual_graph_id(self) -> int:
        """The inferred IPU, or -1 (PopART's ``getVirtualGraphIdUnsafe``)."""
        return self._virtual_graph_id_and_tile_set()[0]

    #: Tensors :meth:`_virtual_graph_id_and_tile_set` follows at most (through
    #: call sites and called graphs' outputs) before it settles for what it has.
    _VGID_SEARCH_LIMIT = 256

    def _virtual_graph_id_and_tile_set(self):
        """``(ipu, tile set)`` as PopART's ``Tensor::getVirtualGraphIdAndTileSetUnsafe``
        derives them: (-1, "undefined") when nothing places the tensor.

        Its producer's placement (an ``IpuCopy``'s destination; a call's
        output: the called graph's output's, else the call's); for a graph
        input, that of the tensors its call sites pass; else that of the
        ops consuming it (an ``IpuCopy``'s source). PopART takes the least
        of what it finds. The search is iterative and follows at most
        ``_VGID_SEARCH_LIMIT`` tensors (then the calls' own placement counts)."""
        p = self._producer
        if p is not None:
            if get_opdef(p.type).kind not in _FOLLOWED_KINDS:
                if p._ipu is not None:
                    return (p._ipu, p._tile_set)  # an ordinary op's output: where the op runs
                # An unplaced ordinary op's output: the search below would
                # find nothing to follow; its consumers place it.
                by_consumers = self._consumers_placement()
                return by_consumers if by_consumers is not None else (-1, "undefined")
        elif not self._graph._call_sites or position(self._graph, "_inputs", self) < 0:
            # Nothing to follow (no call site feeds it): its consumers place it.
            by_consumers = self._consumers_placement()
            return by_consumers if by_consumers is not None else (-1, "undefined")
        found, fallback = [], []
        seen = set()
        stack = [self]
        while stack and len(seen) < self._VGID_SEARCH_LIMIT:
            t = stack.pop()
            if id(t) in seen:
                continue
            seen.add(id(t))
            p = t._producer
            if p is not None:
                kind = get_opdef(p.type).kind
                if kind == "ipu_copy":
                    found.append((p.attrs["_destination"], p.tile_set))
                    continue
                k = position(p, "outputs", t) if kind in ("call", "repeat") else -1
                if k >= 0 and p.called_graphs:
                    outs = p.called_graphs[0]._outputs
                    if p.ipu is not None:
                        fallback.append((p.ipu, p.tile_set))
                    if k < len(outs):
                        stack.append(outs[k])
                    continue
                if p.ipu is not None:
                    found.append((p.ipu, p.tile_set))
                continue
            g = t._graph
            k = position(g, "_inputs", t)
            if k >= 0:
                for site in reversed(g._call_sites):
                    kind = get_opdef(site.type).kind
                    if kind in ("call", "repeat") and k < len(site.inputs) \
                            and site.inputs[k] is not None:
                        stack.append(site.inputs[k])
                    elif site.ipu is not None:
                        found.append((site.ipu, site.tile_set))
        if found:
            return min(found)
        if fallback:
            return min(fallback)
        by_consumers = self._consumers_placement()
        return by_consumers if by_consumers is not None else (-1, "undefined")

    def _consumers_placement(self):
        """The least ``(ipu, tile set)`` of the ops consuming this tensor (an
        ``IpuCopy``'s source), or None.

        Every op created on a variable asks for it, so for a tensor with many
        consumers the answer is kept and extended by the consumers added
        since; it is recomputed when the consumer list is replaced, shrinks
        or no longer ends with the consumer seen last, or when an existing op
        was re-placed (``op.placement_epoch``). A short list is read again
        (cheaper than keeping an answer on every tensor)."""
        cons = self._consumers
        n = len(cons)
        if n <= _CONSUMERS_READ_AGAIN:
            return _least_placement(cons, 0, None)
        epoch = placement_epoch()
        cached = self._consumers_place
        if cached is not None and cached[0] is cons and cached[1] <= n and cached[4] == epoch \
                and (cached[1] == 0 or cons[cached[1] - 1] is cached[2]):
            best = _least_placement(cons, cached[1], cached[3])
        else:
            best = _least_placement(cons, 0, None)
        self._consumers_place = (cons, n, cons[n - 1], best, epoch)
        return best

    @property
    def in_sync_with_ipu(self) -> bool:
        return True

    @property
    def tensor_type(self) -> str:
        return "ActGrad"

    def strides(self, shape=None) -> Tuple[int, ...]:
        """Bytes to step in each dimension of a C-ordered array of this
        dtype and ``shape`` (default: the tensor's), as ``numpy.ndarray.strides``:
        a tuple."""
        shape = self._shape if shape is None else tuple(shape)
        item = self._dtype.itemsize
        out, acc = [], item
        for d in reversed(shape):
            out.append(acc)
            acc *= d
        return tuple(reversed(out))

    # ---- methods delegating to ops
    def _ops(self):
        global _OPS_MODULE
        if _OPS_MODULE is None:
            from . import ops  # imports this module: bound on first use

            _OPS_MODULE = ops
        return _OPS_MODULE

    def transpose(self, permutation=None):
        return self._ops().transpose(self, permutation)

    def transpose_(self, permutation=None):
        return self._ops().transpose_(self, permutation)

    @property
    def T(self):  # noqa: N802
        return self.transpose()

    @property
    def T_(self):  # noqa: N802
        return self.transpose_()

    def reshape(self, shape):
        return self._ops().reshape(self, shape)

    def reshape_(self, shape):
        return self._ops().reshape_(self, shape)

    def flatten(self):
        return self._ops().flatten(self)

    def flatten_(self):
        return self._ops().flatten_(self)

    def detach(self):
        return self._ops().detach(self)

    def detach_(self):
        return self._ops().detach_(self)

    def copy_to_ipu(self, destination: int, source: Optional[int] = None):
        return self._ops().ipu_copy(self, destination, source)

    def diag(self):
        if self.rank != 2:
            raise ValueError(f"diag: tensor {self.id!r} must be 2-D, has shape {self.shape}")
        return self.flatten()[:: self.shape[1] + 1]

    def _ensure_tensor(self, value, dtype=None) -> "Tensor":
        """Turn a host value into a constant of ``dtype`` (default: this tensor's)."""
        if isinstance(value, Tensor):
            return value
        dt = self._dtype if dtype is None else dtype
        # Only numbers and bools: None would become NaN, complex values lose
        # their imaginary part, strings and dates are not numbers.
        raw = None if value is None else np.asarray(value)
        if raw is None or raw.dtype.kind not in "biuf":
            raise TypeError(f"cannot combine tensor {self.id!r} with {value!r}: expected a "
                            "Tensor, a number, a bool or an array of them")
        want = dt.as_numpy()
        if want.kind != "f":  # (allow_inf: nothing to refuse for a float tensor)
            _check_fits(raw, want, f"operand {value!r} of tensor {self.id!r}", allow_inf=True)
        try:
            arr = np.asarray(raw, dtype=want)
        except (ValueError, OverflowError) as e:
            raise TypeError(f"cannot convert {value!r} to {dt.name} for tensor {self.id!r}: "
                            f"{e}") from None
        if arr.size == 0:
            raise ValueError(f"cannot turn the empty value {value!r} into a tensor")
        return constant(arr, dt)

    # ---- dunders
    def __add__(self, o):
        return self._ops().add(self, self._ensure_tensor(o))

    def __radd__(self, o):
        return self._ops().add(self._ensure_tensor(o), self)

    def __iadd__(self, o):
        # As PopXL: update in place and keep the same Tensor object, so
        # `x += y` works on variables and later ops see the new value.
        self._ops().add_(self, self._ensure_tensor(o))
        return self

    def __sub__(self, o):
        return self._ops().sub(self, self._ensure_tensor(o))

    def __rsub__(self, o):
        return self._ops().sub(self._ensure_tensor(o), self)


    def __mul__(self, o):
        return self._ops().mul(self, self._ensure_tensor(o))

    def __rmul__(self, o):
        return self._ops().mul(self._ensure_tensor(o), self)


    def __truediv__(self, o):
        return self._ops().div(self, self._ensure_tensor(o))

    def __rtruediv__(self, o):
        return self._ops().div(self._ensure_tensor(o), self)


    def __mod__(self, o):
        return self._ops().fmod(self, self._ensure_tensor(o))

    def __rmod__(self, o):
        return self._ops().fmod(self._ensure_tensor(o), self)

    def __pow__(self, o):
        return self._ops().pow(self, o if isinstance(o, (int, float, Tensor)) else
                               self._ensure_tensor(o))

    def __rpow__(self, o):
        return self._ops().pow(self._ensure_tensor(o), self)

    def __matmul__(self, o):
        return self._ops().matmul(self, self._ensure_tensor(o))

    def __rmatmul__(self, o):
        return self._ops().matmul(self._ensure_tensor(o), self)

    def __neg__(self):
        return self._ops().negate(self)

    def __and__(self, o):
        return self._ops().logical_and(self, self._ensure_tensor(o))

    def __rand__(self, o):
        return self._ops().logical_and(self._ensure_tensor(o), self)

    def __or__(self, o):
        return self._ops().logical_or(self, self._ensure_tensor(o))

    def __ror__(self, o):
        return self._ops().logical_or(self._ensure_tensor(o), self)

    def __invert__(self):
        return self._ops().logical_not(self)

    def __getitem__(self, key):
        from .ops.indexing import tensor_getitem

        return tensor_getitem(self, key)

    def __len__(self) -> int:
        if not self._shape:
            raise ValueError(f"len() of a scalar tensor {self.id!r}")
        return self._shape[0]

    __iter__ = None
    __contains__ = None
    __array_ufunc__ = None

    # No __bool__, as PopXL's Tensor: its truth value is ``len(t) != 0``
    # (``if not word_embedding:`` in Graphcore's GPT-3 tests a tensor for
    # presence), and a scalar's ``len()`` raises ValueError. It is never
    # the tensor's data, which is not known while the graph is built.

    def __hash__(self):
        # Equal tensors have equal ids; tensors of different graphs that share
        # an id only collide. (The id's str hash is cached: look-ups are cheap.)
        return hash(self._id)

    def __eq__(self, other):
        return other is self or (isinstance(other, Tensor) and self._id == other._id
                                 and self._graph is other._graph)

    def __repr__(self) -> str:
        return f"Tensor[{self.id} {self.dtype} {self.shape}]"


class Variable(Tensor):
    """A tensor whose value persists across runs (weights, optimiser state)."""

    #: The ``np.memmap`` holding the host value, when it is memory-mapped.
    _memmap_arr = None

    @property
    def tensor_type(self) -> str:
        return "Variable"

    @property
    def replica_grouping(self):
        return self._replica_grouping

    @property
    def retrieval_mode(self) -> str:
        return self._retrieval_mode

    @property
    def shape_on_replica(self) -> Tuple[int, ...]:
        return self._shape

    @property
    def shape_on_host(self) -> Tuple[int, ...]:
        groups = self._replica_grouping.num_groups if self._replica_grouping is not None else 1
        if groups > 1:
            return (groups,) + self._shape
        return self._shape

    def copy_to_ipu(self, destination: int, source: int):
        return self._ops().ipu_copy(self, destination, source)


class Constant(Tensor):
    """A tensor with a fixed value, embedded in the program."""

    @property
    def tensor_type(self) -> str:
        return "Const"

    def copy_to_ipu(self, destination: int, source: int):
        return self._ops().ipu_copy(self, destination, source)


TensorLike = Union[Tensor, HostScalarTensor, Iterable]


def variable(data: HostTensor, dtype: Optional[dtypes.dtype] = None, name: Optional[str] = None,
             downcast: bool = True, replica_grouping=None, retrieval_mode: Optional[str] = None,
             log2_scale: Optional[int] = None, nan_on_overflow: Optional[bool] = None) -> Variable:
    """A variable initialised with ``data``. Only in the main graph.

    64-bit host data is downcast to 32 bits unless ``downcast=False`` or a
    dtype is given.
    """
    g = get_current_graph()
    if g is not g.ir.main_graph:
        raise ValueError(
            f"popxl.variable can only be created in the main graph, not in {g.name!r}. "
            "Pass it to subgraphs as an input.")
    what = f"variable {name!r}" if name else "variable"
    arr, dt = (abstract_host_array if g.ir._abstract else _to_host_array)(
        data, dtype, downcast, what, log2_scale, nan_on_overflow)
    if retrieval_mode not in (None, "one_per_group", "all_replicas"):
        raise ValueError(f"retrieval_mode must be 'one_per_group' or 'all_replicas', got {retrieval_mode!r}")
    if replica_grouping is None:
        replica_grouping = g.ir.replica_grouping()
    expected_shape = arr.shape
    shape = arr.shape
    if replica_grouping.num_groups > 1:
        if arr.shape[:1] != (replica_grouping.num_groups,):
            raise ValueError(
                f"variable {name!r}: with {replica_grouping.num_groups} replica groups the host "
                f"data must have shape (num_groups, ...), got {arr.shape}")
        shape = arr.shape[1:]
    t = Variable._create(g, name or "t", shape, dt)
    t._host_data = arr
    if isinstance(arr, AbstractData):
        t._host_data = arr.named(f"variable {t.id!r}")
    t._memmap_arr = arr if isinstance(arr, np.memmap) else None
    t._replica_grouping = replica_grouping
    t._retrieval_mode = retrieval_mode or "one_per_group"
    del expected_shape
    return t


def constant(data: HostTensor, dtype: Optional[dtypes.dtype] = None, name: Optional[str] = None,
             downcast: bool = True, log2_scale: Optional[int] = None,
             nan_on_overflow: Optional[bool] = None) -> Constant:
    """A constant tensor in the current graph."""
    g = get_current_graph()
    if dtype is None and getattr(data, "dtype", None) in (dtypes.np_dtype_float8_143,
                                                         dtypes.np_dtype_float8_152):
        raise TypeError("constant: float8 data needs an explicit dtype (popxl.float8_143 or "
                        "popxl.float8_152)")
    arr, dt = _to_host_array(data, dtype, downcast, f"constant {name!r}" if name else "constant",
                             log2_scale, nan_on_overflow)
    t = Constant._create(g, name or "t", arr.shape, dt)
    t._host_data = np.array(arr, order="C", copy=True)  # keeps 0-d arrays 0-d
    return t


def graph_input(shape: Iterable[int], dtype: dtypes.dtype, name: Optional[str] = None,
                by_ref: bool = False, meta_shape: Optional[Iterable[int]] = None) -> Tensor:
    """Add an input to the current graph (a subgraph)."""
    g = get_current_graph()
    if g is g.ir.main_graph:
        # Nothing could feed it: a Session would run with it undefined.
        raise ValueError(
            f"graph_input {name or 't'!r}: the main graph has no inputs; feed data with "
            "popxl.h2d_stream and ops.host_load, or hold it in a popxl.variable")
    dt = dtypes.dtype.as_dtype(dtype)
    shape = check_shape(f"graph_input {name or 't'!r}", shape, dt.itemsize)
    t = Tensor._create(g, name or "t", shape, dt, meta_shape=tuple(meta_shape or ()))
    g._add_input(t, by_ref=by_ref)
    return t


def graph_output(t: Tensor) -> None:
    """Mark ``t`` as an output of the current graph."""
    g = get_current_graph()
    if not isinstance(t, Tensor):
        raise TypeError(f"graph_output expects a Tensor, got {type(t).__name__}")
    if t.graph is not g:
        raise ValueError(f"graph_output: tensor {t.id!r} is not in the current graph {g.name!r}")
    g._add_output(t)


class _TensorByRefMeta(type):
    def __getitem__(cls, item):
        return cls


class TensorByRef(Tensor, metaclass=_TensorByRefMeta):
    """Annotation for a subgraph function argument passed by reference: writes
    to it inside the graph are visible at every call site."""


# ---------------------------------------------------------------- remote variables
def _remote_location(what: str, remote_buffer, offset) -> int:
    from .remote_buffer import RemoteBuffer

    if not isinstance(remote_buffer, RemoteBuffer):
        raise TypeError(f"{what}: remote_buffer must be a popxl.RemoteBuffer, got "
                        f"{type(remote_buffer).__name__}")
    g = get_current_graph()
    if remote_buffer._current_ir is not g.ir:
        raise ValueError(f"{what}: remote buffer {remote_buffer.remote_buffer_id} belongs to "
                         f"another Ir ({remote_buffer._current_ir.id}) than the current graph "
                         f"({g.ir.id})")
    if isinstance(offset, bool) or not hasattr(offset, "__index__") or int(offset) < 0:
        raise ValueError(f"{what}: offset must be a non-negative int (an entry of the buffer), "
                         f"got {offset!r}")
    return int(offset)


def remote_variable(data: HostTensor, remote_buffer, offset: int = 0,
                    dtype: Optional[dtypes.dtype] = None, name: Optional[str] = None,
                    downcast: bool = True, replica_grouping=None,
                    retrieval_mode: Optional[str] = "one_per_group",
                    log2_scale: Optional[int] = None,
                    nan_on_overflow: Optional[bool] = None) -> Variable:
    """A variable stored in entry ``offset`` of ``remote_buffer`` (Streaming
    Memory, off chip) instead of in tile memory. Its value reaches the
    buffer with ``weights_from_host`` and comes back with
    ``weights_to_host`` / ``get_tensor_data``; programs move it on chip with
    ``ops.remote_load`` and back with ``ops.remote_store``. The variable
    itself cannot be an op's input.

    Raises:
        ValueError: if its shape or dtype differ from the buffer's.
    """
    offset = _remote_location("remote_variable", remote_buffer, offset)
    var = variable(data, dtype, name, downcast, replica_grouping, retrieval_mode,
                   log2_scale=log2_scale, nan_on_overflow=nan_on_overflow)
    try:
        # As PopART, which copies the variable's bytes into the entry: the
        # dtype and element count must match, not the exact shape (PopXL's
        # own tests store a (1, 1) variable in entries of shape (1,)).
        if var.dtype != remote_buffer.tensor_dtype or \
                var.nelms != int(np.prod(remote_buffer.tensor_shape, dtype=np.int64)):
            remote_buffer.validate_tensor_matches_buffer(var)
    except ValueError:
        del var.graph._tensors[var.id]  # not left behind as an on-chip variable
        raise
    var._remote = (remote_buffer, offset, False)
    return var


def remote_replica_sharded_variable(data: HostTensor, remote_buffer, offset: int = 0,
                                    dtype: Optional[dtypes.dtype] = None,
                                    name: Optional[str] = None, downcast: bool = True,
                                    replica_grouping=None,
                                    retrieval_mode: Optional[str] = "one_per_group",
                                    log2_scale: Optional[int] = None,
                                    nan_on_overflow: Optional[bool] = None) -> Variable:
    """A variable stored sharded in entry ``offset`` of ``remote_buffer``: each
    replica holds one shard (see :mod:`ipuxl._sharding`); the buffer's
    entries are shards and its ``meta_shape`` the whole tensor's shape.

    Raises:
        ValueError: without replication, or if the data's shape differs from
            the buffer's ``meta_shape`` or its shards from the buffer's shape.
    """
    rf = get_current_graph().ir.replication_factor
    if rf <= 1:
        raise ValueError(f"The IR's global replication factor is {rf}. It must be greater than 1 "
                         "to create a replica sharded variable.")
    offset = _remote_location("remote_replica_sharded_variable", remote_buffer, offset)
    var = variable(data, dtype, name, downcast, replica_grouping, retrieval_mode,
                   log2_scale=log2_scale, nan_on_overflow=nan_on_overflow)
    try:
        if remote_buffer.meta_shape == ():
            remote_buffer.meta_shape = var.shape
        elif tuple(remote_buffer.meta_shape) != tuple(var.shape):
            raise ValueError(
                f"Cannot use RemoteBuffer[id={remote_buffer.remote_buffer_id}] for replica sharded "
                f"variable of shape {var.shape}. The buffer's meta_shape has already been set to: "
                f"{remote_buffer.meta_shape}.")
        if var.dtype != remote_buffer.tensor_dtype:
            remote_buffer.validate_tensor_matches_buffer(var, num_shards=2)
    except ValueError:
        del var.graph._tensors[var.id]
        raise
    var._remote = (remote_buffer, offset, True)
    var._meta_shape = tuple(var.shape)
    return var


def replica_sharded_buffer(shape: Tuple[int, ...], dtype: dtypes.dtype, replica_grouping=None,
                           shard_over: Optional[int] = None, entries: int = 1):
    """A remote buffer for replica-sharded variables of ``shape`` (with the
    group dimension first when ``replica_grouping`` has several groups):
    entries of ``ceil(nelms / shard_over)`` elements, ``meta_shape`` the
    tensor's shape. ``shard_over`` (default: the group size) must divide
    the replica group size."""
    from ._sharding import shard_size
    from .remote_buffer import remote_buffer

    g = get_current_graph()
    rg = replica_grouping if replica_grouping is not None else g.ir.replica_grouping()
    rg = rg.const_rg
    group_size = rg.group_size
    shard_over = group_size if shard_over is None else int(shard_over)
    if shard_over > group_size:
        raise ValueError(
            f"The sharding group size ({shard_over}) must be less than or equal to the replica "
            f"group size ({group_size}). Note that if no replica grouping was passed, the replica "
            "group size defaults to the IR's global replication factor; and if no sharding group "
            "size was passed, it defaults to the replica group size.")
    if shard_over < 1 or group_size % shard_over:
        raise ValueError(
            f"The replica group size ({group_size}) must be divisible by the sharding group size "
            f"({shard_over}). Note that if no replica grouping was passed, the replica group size "
            "defaults to the IR's global replication factor; and if no sharding group size was "
            "passed, it defaults to the replica group size.")
    shape = tuple(int(d) for d in shape)
    tensor_shape = shape[1:] if rg.num_groups > 1 else shape
    nelms = int(np.prod(tensor_shape, dtype=np.int64))
    buffer = remote_buffer((shard_size(nelms, shard_over),), dtype, entries)
    buffer.meta_shape = tensor_shape
    buffer._shard_over = shard_over
    return buffer


def replica_sharded_variable(data: HostTensor, dtype: Optional[dtypes.dtype] = None,
                             name: Optional[str] = None, downcast: bool = True,
                             replica_grouping=None, shard_over: Optional[int] = None,
                             retrieval_mode: Optional[str] = "one_per_group",
                             log2_scale: Optional[int] = None,
                             nan_on_overflow: Optional[bool] = None) -> Tuple[Variable, Tensor]:
    """A variable sharded over the replicas of each group (replicated tensor
    sharding): each replica holds one shard, ``ceil(nelms / shard_over)``
    elements of the flattened, zero-padded value (see
    :mod:`ipuxl._sharding`), and never the whole tensor.

    As PopXL: a buffer from :func:`replica_sharded_buffer`, a
    :func:`remote_replica_sharded_variable` in it, and a ``remote_load`` of
    the shard in the weights-from-host program (a ``remote_store`` back in
    the weights-to-host program).

    Returns:
        ``(variable, shard)``: the full variable, for the Session's get/set
        data methods only (never an op's input), and the on-chip shard
        (1-D, ``meta_shape`` the variable's shape).
    """
    from . import ops
    from .context import _execution_context, get_main_graph

    arr, dt = (abstract_host_array if get_current_graph().ir._abstract else _to_host_array)(
        data, dtype, downcast, "replica_sharded_variable", log2_scale, nan_on_overflow)
    buffer = replica_sharded_buffer(arr.shape, dt, replica_grouping, shard_over)
    var = remote_replica_sharded_variable(arr, buffer, 0, dt, name, downcast, replica_grouping,
                                          retrieval_mode)
    with get_main_graph():
        with _execution_context("weights_from_host"):
            shard = ops.remote_load(buffer, 0, var.name + "_rts")
        with _execution_context("weights_to_host"):
            ops.remote_store(buffer, 0, shard)
    return var, shard
