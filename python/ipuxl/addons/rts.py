"""Replicated tensor sharding helpers, mirroring ``popxl_addons.rts``.

A tensor "sharded over" a replica grouping of ``n`` replicas is held as
``n`` flat shards, one per replica, with the whole tensor's shape as
``meta_shape`` (:mod:`ipuxl._sharding` has the layout). These helpers make
the specs, and the graphs that gather shards (all-gather) and reduce and
scatter gradients, across the replicas of a group. With groups of one
replica (no replication) they pass tensors through unchanged; the
collectives they use across several replicas come from
``ops.collectives``.
"""
from typing import List, Optional, Tuple

import numpy as np

from .. import ops
from ..context import gcg, in_sequence, io_tiles
from ..replica_grouping import ReplicaGrouping
from ..tensor import Tensor, TensorSpec, graph_input, graph_output
from .graph import GraphWithNamedArgs
from .named_replica_grouping import NamedReplicaGrouping
from .named_tensors import NamedTensors
from .utils import null_context

__all__ = ["all_gather_replica_sharded_graph", "reduce_replica_sharded_graph",
           "reduce_replica_sharded_tensor", "gather_replica_sharded_tensor",
           "replica_sharded_spec"]


def replica_sharded_spec(t: Tensor, shard_over: Optional[ReplicaGrouping] = None) -> TensorSpec:
    """The spec of one shard of ``t`` sharded over ``shard_over``'s groups:
    ``t``'s own spec if it is already a shard, if the group has one replica
    or if its elements do not divide evenly."""
    if t.meta_shape or shard_over is None:
        return t.spec
    n = shard_over.group_size
    if n == 1 or t.nelms % n:
        return t.spec
    return TensorSpec((int(np.prod(t.shape, dtype=np.int64)) // n,), t.dtype, t.shape)


def gather_replica_sharded_tensor(t: Tensor, use_io_tiles: bool = False,
                                  replica_group: Optional[ReplicaGrouping] = None) -> Tensor:
    """All-gather the shards of ``t`` over ``replica_group`` (default: all
    replicas) when ``t`` is a shard; then copy it from the IO tiles if
    ``use_io_tiles``."""
    replica_group = replica_group or gcg().ir.replica_grouping()
    if t.meta_shape:
        with (io_tiles() if use_io_tiles else null_context()):
            t = ops.collectives.replicated_all_gather(t, group=replica_group)
    if use_io_tiles:
        t = ops.io_tile_copy(t)
    return t


def all_gather_replica_sharded_graph(tensors: NamedTensors, use_io_tiles: bool = False,
                                     replica_groups: Optional[NamedReplicaGrouping] = None
                                     ) -> Tuple[GraphWithNamedArgs, List[str]]:
    """A graph gathering each of ``tensors`` (a named input each) over its
    replica group; returns it and the names of its outputs."""
    ir = gcg().ir
    graph = ir.create_empty_graph("all_gather")
    groups = (replica_groups or NamedReplicaGrouping.build_groups(
        tensors.named_tensors.keys(), value=ir.replica_grouping())).to_dict()
    names, args = [], {}
    with graph, in_sequence(False):
        for name, t in zip(*tensors.unpack()):
            x = graph_input(t.shape, t.dtype, t.name, meta_shape=t.meta_shape)
            args[name] = x
            names.append(name)
            graph_output(gather_replica_sharded_tensor(x, use_io_tiles, groups[name].const_rg))
    return GraphWithNamedArgs(graph, NamedTensors.from_dict(args)), names


def reduce_replica_sharded_tensor(t: Tensor, op: str = "add",
                                  replica_group: Optional[ReplicaGrouping] = None,
                                  shard_group: Optional[ReplicaGrouping] = None) -> Tensor:
    """Reduce ``t`` with ``op`` over ``replica_group`` (default: all replicas)
    and leave each replica its shard over ``shard_group`` (default: the same
    group) when the elements divide evenly: a reduce-scatter when the two
    groups are one, else an all-reduce then a slice."""
    replica_group = replica_group or gcg().ir.replica_grouping()
    shard_group = shard_group or replica_group
    coll = ops.collectives
    if shard_group.group_size > 1 and t.nelms % shard_group.group_size == 0:
        if replica_group == shard_group and replica_group.group_size > 1:
            return coll.replicated_reduce_scatter(
                t, op=op, group=replica_group,
                configure_output_for_replicated_tensor_sharding=True)
        if replica_group.group_size > 1:
            t = coll.replicated_all_reduce(t, op=op, group=replica_group)
        return coll.replica_sharded_slice(t, group=shard_group)
    if replica_group.group_size > 1:
        t = coll.replicated_all_reduce(t, op=op, group=replica_group)
    return t


def reduce_replica_sharded_graph(tensors: NamedTensors, op: str = "add",
                                 use_io_tiles: bool = False,
                                 shard_groups: Optional[NamedReplicaGrouping] = None,
                                 replica_group: Optional[ReplicaGrouping] = None
                                 ) -> Tuple[GraphWithNamedArgs, List[str]]:
    """A graph reducing each of ``tensors`` over ``replica_group`` and
    sharding it over its shard group (see
    :func:`reduce_replica_sharded_tensor`); returns it and its output names."""
    ir = gcg().ir
    graph = ir.create_empty_graph("replica_reduce")
    groups = shard_groups.to_dict() if shard_groups else {}
    names, args = [], {}
    with graph, in_sequence(False), (io_tiles() if use_io_tiles else null_context()):
        for name, t in zip(*tensors.unpack()):
            x = graph_input(t.shape, t.dtype, t.name, meta_shape=t.meta_shape)
            args[name] = x
            names.append(name)
            y = ops.io_tile_copy(x) if use_io_tiles else x
            graph_output(reduce_replica_sharded_tensor(
                y, op, replica_group=replica_group, shard_group=groups.get(name, replica_group)))
    return GraphWithNamedArgs(graph, NamedTensors.from_dict(args)), names
