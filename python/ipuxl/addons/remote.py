"""Remote buffers for named variables, mirroring ``popxl_addons.remote``.

* :func:`named_buffers` / :func:`named_variable_buffers`: one remote buffer
  per tensor / per VariableFactory, under the same names;
  :func:`create_remote_buffer` makes one buffer for a spec, sharded over
  ``shard_over`` replicas of its group when that divides it (then the
  buffer holds one flat shard per entry and the spec's shape as
  ``meta_shape``).
* :func:`load_remote_graph` / :func:`store_remote_graph`: a graph that loads
  (stores) one entry of every buffer, its offset a graph input, all in one
  merged exchange (optionally on the IO tiles); :func:`load_remote` /
  :func:`store_remote` do the same in the current graph.
"""
from typing import List, Mapping, Optional, Tuple, Union

import numpy as np

from .. import dtypes, ops
from ..context import gcg, in_sequence, io_tiles
from ..remote_buffer import RemoteBuffer, remote_buffer
from ..replica_grouping import ReplicaGrouping
from ..tensor import Tensor, TensorSpec, graph_input, graph_output, replica_sharded_buffer
from ..transforms import merge_exchange
from .dot_tree import DotTree
from .graph import GraphWithNamedArgs
from .named_tensors import NamedTensors
from .rts import replica_sharded_spec
from .utils import null_context
from .variable_factory import NamedVariableFactories

__all__ = ["load_remote_graph", "store_remote_graph", "named_buffers", "named_variable_buffers",
           "create_remote_buffer", "NamedRemoteBuffers", "load_remote", "store_remote"]


class NamedRemoteBuffers(DotTree[RemoteBuffer]):
    """A ``DotTree`` of remote buffers."""


def named_buffers(tensors: NamedTensors, entries: int = 1,
                  shard_over: Optional[ReplicaGrouping] = None) -> NamedRemoteBuffers:
    """A buffer of ``entries`` entries for each tensor of ``tensors`` (for a
    sharded tensor: its shard, with the whole shape as ``meta_shape``)."""
    out = {}
    for name, t in tensors.to_dict().items():
        spec = replica_sharded_spec(t, shard_over) if shard_over is not None else t.spec
        buf = remote_buffer(spec.shape, spec.dtype, entries)
        buf.meta_shape = spec.meta_shape
        out[name] = buf
    return NamedRemoteBuffers.from_dict(out)


def _shard_over_of(name: str, factory, shard_over_dict) -> int:
    group_size = factory.replica_grouping.group_size
    if isinstance(shard_over_dict, Mapping):
        return shard_over_dict.get(name) or 1
    if isinstance(shard_over_dict, bool):
        return group_size if shard_over_dict else 1
    if isinstance(shard_over_dict, int):
        if not 1 <= shard_over_dict <= group_size:
            raise ValueError(f"Invalid shard_over_dict int value: {shard_over_dict}")
        return shard_over_dict
    raise ValueError("shard_over_dict must be a dictionary, an integer or a boolean")


def named_variable_buffers(factories: NamedVariableFactories, entries: int = 1,
                           shard_over_dict: Union[Mapping[str, int], int, bool] = True
                           ) -> NamedRemoteBuffers:
    """A buffer of ``entries`` entries for each factory of ``factories``.

    ``shard_over_dict``: per name (a mapping), for all (an int), or ``True``
    (the default: each factory's whole replica group) / ``False`` (none):
    how many replicas of its group each variable is sharded over."""
    out = {}
    for name, f in factories.to_dict().items():
        spec = TensorSpec(f.shape, f.dtype, f.meta_shape)
        out[name] = create_remote_buffer(spec, entries, f.replica_grouping,
                                         _shard_over_of(name, f, shard_over_dict))
    return NamedRemoteBuffers.from_dict(out)


def create_remote_buffer(spec: TensorSpec, entries: int = 1,
                         replica_group: Optional[ReplicaGrouping] = None,
                         shard_over: Optional[int] = None) -> RemoteBuffer:
    """A buffer for tensors of ``spec``: as given when the spec is already a
    shard (has a ``meta_shape``); sharded over ``shard_over`` replicas of
    ``replica_group`` when that is more than one; else a plain buffer."""
    ir = gcg().ir
    replica_group = replica_group or ir.replica_grouping()
    shard_over = shard_over or replica_group.group_size
    if spec.meta_shape:
        buf = remote_buffer(spec.shape, spec.dtype, entries)
        buf.meta_shape = spec.meta_shape
        return buf
    if shard_over > 1:
        nelms = int(np.prod(spec.shape, dtype=np.int64))
        if nelms % shard_over:
            raise ValueError(f"Can't shard tensor with {nelms} elements over {shard_over} "
                             "replicas")
        shape = (replica_group.num_groups, *spec.shape) if replica_group.num_groups > 1 \
            else tuple(spec.shape)
        return replica_sharded_buffer(shape, spec.dtype, replica_group, shard_over, entries)
    return remote_buffer(spec.shape, spec.dtype, entries)


def load_remote_graph(buffers: NamedRemoteBuffers, entries: int = 1,
                      use_io_tiles: bool = False) -> Tuple[GraphWithNamedArgs, List[str]]:
    """A graph that loads entry ``i`` of every buffer (``i``: its one int32
    input) in one merged exchange, and the names of its outputs. Each buffer
    grows to at least ``entries`` entries.

    ``g, names = load_remote_graph(buffers); ts = NamedTensors.pack(names, g.call(0))``
    """
    graph = gcg().ir.create_empty_graph("load_remote")
    names = []
    with graph, merge_exchange(), in_sequence(False), \
            (io_tiles() if use_io_tiles else null_context()):
        index = graph_input([], dtypes.int32, "load_index")
        for name, buf in zip(*buffers.unpack()):
            buf.entries = max(buf.entries, entries)
            names.append(name)
            graph_output(ops.remote_load(buf, index, name))
    return GraphWithNamedArgs(graph), names


def load_remote(buffers: NamedRemoteBuffers, entry: Union[int, Tensor] = 0,
                use_io_tiles: bool = False) -> NamedTensors:
    """Load entry ``entry`` of every buffer in the current graph (one merged
    exchange)."""
    out = {}
    with merge_exchange(), in_sequence(False), (io_tiles() if use_io_tiles else null_context()):
        for name, buf in buffers.to_dict().items():
            out[name] = ops.remote_load(buf, entry, name)
    return NamedTensors.from_dict(out)


def store_remote_graph(buffers: NamedRemoteBuffers, entries: int = 1,
                       use_io_tiles: bool = False) -> GraphWithNamedArgs:
    """A graph that stores a tensor in entry ``i`` of every buffer (``i``: its
    first input; one named input per buffer) in one merged exchange.

    ``store_remote_graph(buffers).bind(tensors).call(0)``
    """
    graph = gcg().ir.create_empty_graph("store_remote")
    args = {}
    with graph, merge_exchange(), in_sequence(False), \
            (io_tiles() if use_io_tiles else null_context()):
        index = graph_input([], dtypes.int32, "store_index")
        for name, buf in zip(*buffers.unpack()):
            buf.entries = max(buf.entries, entries)
            t = graph_input(buf.tensor_shape, buf.tensor_dtype, name, meta_shape=buf.meta_shape)
            ops.remote_store(buf, index, t)
            args[name] = t
    return GraphWithNamedArgs(graph, NamedTensors.from_dict(args))


def store_remote(buffers: NamedRemoteBuffers, tensors: NamedTensors,
                 entry: Union[int, Tensor] = 0, use_io_tiles: bool = False) -> None:
    """Store each of ``tensors`` in entry ``entry`` of the buffer of the same
    name, in the current graph (one merged exchange)."""
    with merge_exchange(), in_sequence(False), (io_tiles() if use_io_tiles else null_context()):
        for buf, t in buffers.to_mapping(tensors).items():
            ops.remote_store(buf, entry, t)
