"""``popxl_addons.ops.replicated_strided_collectives``: collectives over any
constant-stride replica grouping.

popxl_addons implements these as custom ops (its own GCL wrapper, for
strides PopART's collectives lacked); ipuxl's ``ops.collectives`` take any
constant-stride grouping, so these are the same math:

* ``replicated_all_gather_strided(t, group)``: the members' ``t``
  concatenated flat (1-D, ``group_size * nelms``), reshaped to
  ``t.meta_shape`` when ``t`` is a shard;
* ``replicated_reduce_scatter_strided`` and ``replicated_all_reduce_strided``
  as ``ops.collectives``' reduce-scatter and all-reduce;
* ``..._identical_inputs``: an identity whose gradient is the all-reduce;
  ``..._identical_grad_inputs``: the all-reduce, whose gradient is the
  identity (popxl_addons swaps the two flags in the gradient op).
"""
from typing import List, Optional, Tuple

from ... import ops
from ...context import gcg, in_sequence, io_tiles
from ...grad import register_grad
from ...op import create_op
from ...opdef import define_op
from ...replica_grouping import ReplicaGrouping
from ...tensor import Tensor, graph_input, graph_output
from ...ops import collectives as _c
from ...ops.utils import NUMERIC_DTYPES, check_dtype_in, check_in_graph
from ..graph import GraphWithNamedArgs
from ..named_tensors import NamedTensors
from ..utils import null_context

__all__ = [
    "replicated_all_gather_strided", "replicated_reduce_scatter_strided",
    "replicated_all_reduce_strided", "replicated_all_reduce_strided_identical_inputs",
    "replicated_all_reduce_strided_identical_grad_inputs", "replicated_all_reduce_strided_graph",
]


def replicated_all_gather_strided(t: Tensor, group: Optional[ReplicaGrouping] = None) -> Tensor:
    """Gather ``t`` flat from the replicas of each group (rank order)."""
    check_in_graph("replicated_all_gather_strided", t=t)
    flat = t if t.rank == 1 else t.flatten()
    out = _c.replicated_all_gather(flat, 0, group, "concat")
    if t.meta_shape:
        out = out.reshape_(t.meta_shape)
    return out


def replicated_reduce_scatter_strided(t: Tensor, op: str = "add",
                                      group: Optional[ReplicaGrouping] = None,
                                      configure_output_for_replicated_tensor_sharding: bool = False
                                      ) -> Tensor:
    """``ops.collectives.replicated_reduce_scatter``."""
    return _c.replicated_reduce_scatter(t, op, group,
                                        configure_output_for_replicated_tensor_sharding)


def replicated_all_reduce_strided(t: Tensor, op: str = "add",
                                  group: Optional[ReplicaGrouping] = None) -> Tensor:
    """``ops.collectives.replicated_all_reduce``."""
    return _c.replicated_all_reduce(t, op, group)


# Forward identity, gradient all-reduce (PopART's identicalInputs).
define_op("ReplicatedAllReduceIdenticalInputs", lambda ins, attrs, graphs=():
          [(ins[0].shape, ins[0].dtype)], kernel="Identity", cost="copy")


def replicated_all_reduce_strided_identical_inputs(t: Tensor, op: str = "add",
                                                   group: Optional[ReplicaGrouping] = None
                                                   ) -> Tensor:
    """An all-reduce of inputs known to be identical on every member: the
    forward is an identity, the gradient an all-reduce."""
    what = "replicated_all_reduce_strided_identical_inputs"
    code = _c.to_collective_op(op)
    check_in_graph(what, t=t)
    check_dtype_in(what, t, NUMERIC_DTYPES)
    group = _c._grouping(what, group)
    return create_op("ReplicatedAllReduceIdenticalInputs", [t], [t.name + "_all_reduce"],
                     {"_op": op, "_code": code, "_grouping": group},
                     name="replicated_all_reduce_identical_inputs").outputs[0]


# Forward all-reduce, gradient identity (PopART's identicalGradInputs).
define_op("ReplicatedAllReduceIdenticalGradInputs", lambda ins, attrs, graphs=():
          [(ins[0].shape, ins[0].dtype)], kind="collective")


def replicated_all_reduce_strided_identical_grad_inputs(t: Tensor, op: str = "add",
                                                        group: Optional[ReplicaGrouping] = None
                                                        ) -> Tensor:
    """An all-reduce whose gradients are known to be identical on every
    member: the forward reduces, the gradient is an identity."""
    what = "replicated_all_reduce_strided_identical_grad_inputs"
    code = _c.to_collective_op(op)
    check_in_graph(what, t=t)
    check_dtype_in(what, t, NUMERIC_DTYPES)
    group = _c._grouping(what, group)
    return create_op("ReplicatedAllReduceIdenticalGradInputs", [t], [t.name + "_all_reduce"],
                     {"_collective": (_c._ALL_REDUCE, code, tuple(group.assignment)), "_op": op,
                      "_grouping": group},
                     name="replicated_all_reduce_identical_grad_inputs").outputs[0]


@register_grad("ReplicatedAllReduceIdenticalInputs")
def _identical_inputs_grad(ctx):
    a = ctx.op.attrs
    return [replicated_all_reduce_strided_identical_grad_inputs(ctx.g_or_zeros(), a["_op"],
                                                                a["_grouping"])]


@register_grad("ReplicatedAllReduceIdenticalGradInputs")
def _identical_grad_inputs_grad(ctx):
    a = ctx.op.attrs
    return [replicated_all_reduce_strided_identical_inputs(ctx.g_or_zeros(), a["_op"],
                                                           a["_grouping"])]


def replicated_all_reduce_strided_graph(tensors: NamedTensors, op: str = "add",
                                        group: Optional[ReplicaGrouping] = None,
                                        use_io_tiles: bool = False
                                        ) -> Tuple[GraphWithNamedArgs, List[str]]:
    """A graph all-reducing each of ``tensors`` (a named input each) with
    ``op`` over ``group``; returns it and the names of its outputs."""
    graph = gcg().ir.create_empty_graph("replica_reduce")
    names, args = [], {}
    with graph, in_sequence(False), (io_tiles() if use_io_tiles else null_context()):
        for name, t in zip(*tensors.unpack()):
            x = graph_input(t.shape, t.dtype, t.name, meta_shape=t.meta_shape)
            args[name] = x
            names.append(name)
            if use_io_tiles:
                x = ops.io_tile_copy(x)
            graph_output(replicated_all_reduce_strided(x, op=op, group=group))
    return GraphWithNamedArgs(graph, NamedTensors.from_dict(args)), names
