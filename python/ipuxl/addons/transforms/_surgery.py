"""Moving ops between graphs, for the transforms that restructure a graph
(``repeat_graph``, ``pipelined_execution``).

popxl_addons does this with PopART's ``Op.cloneIntoGraph``,
``connectInTensor`` and ``Graph.eraseOp``; ipuxl's Ir is Python, so the
equivalents are here: :func:`clone_op` re-creates an op (type, attributes,
called graphs, placement, execution context, traits) in another graph on
given inputs, and :func:`erase_op` removes an op and its outputs from its
graph.
"""
from typing import Optional, Sequence

from ...graph import Graph
from ...op import Op
from ...opdef import get_opdef
from ...tensor import Tensor

__all__ = ["clone_op", "erase_op"]


def clone_op(op: Op, graph: Graph, inputs: Sequence[Optional[Tensor]]) -> Op:
    """A copy of ``op`` in ``graph`` reading ``inputs`` (tensors of
    ``graph``, shaped as ``op``'s), with outputs named like ``op``'s. The
    copy keeps the op's IPU, tile set and execution context; op-created
    hooks and ``in_sequence`` do not see it (it is not a new op of the
    program, only a moved one)."""
    if len(inputs) != len(op.inputs):
        raise ValueError(f"clone_op: {op.type} {op.name!r} has {len(op.inputs)} inputs, "
                         f"{len(inputs)} given")
    for old, new in zip(op.inputs, inputs):
        if (old is None) != (new is None):
            raise ValueError(f"clone_op: {op.type} {op.name!r}: an input is connected on one "
                             "side only")
        if new is not None:
            if new.graph is not graph:
                raise ValueError(f"clone_op: input {new.id!r} is not in graph {graph.name!r}")
            if new.shape != old.shape or new.dtype != old.dtype:
                raise ValueError(
                    f"clone_op: {op.type} {op.name!r}: input {new.id!r} {new.dtype.name}"
                    f"{new.shape} does not match {old.id!r} {old.dtype.name}{old.shape}")
    d = get_opdef(op.type)
    new_op = Op(graph, op.type, graph._unique_op_name(op.name), dict(op.attrs),
                op.called_graphs, d.aliases(list(inputs), op.attrs, op.called_graphs),
                d.modifies(list(inputs), op.attrs, op.called_graphs))
    new_op.ipu, new_op.tile_set = op.ipu, op.tile_set
    new_op.execution_context = op.execution_context
    new_op.inputs = list(inputs)
    for o in op.outputs:
        t = Tensor._create(graph, o.name, o.shape, o.dtype, producer=new_op,
                           meta_shape=o._meta_shape)
        t._ipu, t._tile_set = o._ipu, o._tile_set
        new_op.outputs.append(t)
    graph._add_op(new_op)
    return new_op


def erase_op(op: Op) -> None:
    """Remove ``op`` from its graph: its schedule entry, its place among its
    inputs' consumers and its called graphs' call sites, its topological
    constraints, and its outputs (which nothing else may read)."""
    g = op.graph
    for t in op.outputs:
        users = [c for c in t._consumers if c is not op]
        if users:
            raise ValueError(f"erase_op: {op.type} {op.name!r}: its output {t.id!r} is still "
                             f"read by {users[0].type} {users[0].name!r}")
        if t in g._outputs:
            raise ValueError(f"erase_op: {op.type} {op.name!r}: its output {t.id!r} is an "
                             f"output of graph {g.name!r}")
    g._ops.remove(op)
    g._ops_set.discard(op)
    for t in op.inputs:
        if t is not None and op in t._consumers:
            t._consumers.remove(op)
    for cg in op.called_graphs:
        if op in cg._call_sites:
            cg._call_sites.remove(op)
    g._topo_cons = [(a, b) for a, b in g._topo_cons if a is not op and b is not op]
    for t in op.outputs:
        if g._tensors.get(t.id) is t:
            del g._tensors[t.id]
