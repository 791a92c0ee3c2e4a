"""``repeat_graph`` (``popxl_addons.transforms.repeat_graph``).

``repeat_graph(graph, repeat_count)`` wraps the ops of ``graph`` (the main
graph too) in a loop, in place: every op moves, in schedule order, into a
new graph ``repeat_graph``, which ``graph`` then calls with
``ops.repeat_with_info(..., repeat_count)``. Tensors the ops read that no
moved op produces (variables, constants, inputs of ``graph``) stay in
``graph`` and are passed by reference, so writes to variables persist from
one iteration to the next. Topological constraints between moved ops move
with them. A count of 1 or less changes nothing and returns ``graph``.
"""
from typing import Dict

from ... import ops
from ...graph import Graph
from ...tensor import Constant, Tensor, graph_input
from ._surgery import clone_op, erase_op

__all__ = ["repeat_graph"]


def repeat_graph(graph: Graph, repeat_count: int) -> Graph:
    """Move every op of ``graph`` into a new graph called ``repeat_count``
    times from ``graph``; returns the new graph (``graph`` itself when
    ``repeat_count <= 1``)."""
    if not isinstance(graph, Graph):
        raise TypeError(f"repeat_graph expects a popxl Graph, got {type(graph).__name__}")
    if isinstance(repeat_count, bool) or not hasattr(repeat_count, "__index__"):
        raise TypeError(f"repeat_graph: repeat_count must be an int, got {repeat_count!r}")
    repeat_count = int(repeat_count)
    if repeat_count <= 1:
        return graph
    produced_out = [t for t in graph._outputs if t.producer is not None]
    if produced_out:
        raise NotImplementedError(
            f"repeat_graph: graph {graph.name or 'main'!r} has outputs computed by its ops "
            f"({produced_out[0].id!r}); only a graph without such outputs can be moved into a "
            "loop (as popxl_addons, which leaves them unconnected)")
    old_ops = list(graph._ops)
    new_graph = graph.ir.create_empty_graph("repeat_graph")
    old_to_new: Dict[Tensor, Tensor] = {}
    new_to_old_inputs: Dict[Tensor, Tensor] = {}
    moved = {}
    with new_graph:
        for op in old_ops:
            ins = []
            for t in op.inputs:
                if t is None:
                    ins.append(None)
                    continue
                if t not in old_to_new:
                    # By reference (constants, which nothing writes, by value).
                    nt = graph_input(t.shape, t.dtype, t.name,
                                     by_ref=not isinstance(t, Constant))
                    old_to_new[t] = nt
                    new_to_old_inputs[nt] = t
                ins.append(old_to_new[t])
            new_op = clone_op(op, new_graph, ins)
            moved[op] = new_op
            for o, no in zip(op.outputs, new_op.outputs):
                old_to_new[o] = no
    # Constraints between moved ops hold in the loop body.
    for a, b in graph._topo_cons:
        if a in moved and b in moved:
            new_graph._add_topo_con(moved[a], moved[b])
    for op in reversed(old_ops):
        erase_op(op)
    # Created like any op: an enclosing in_sequence orders the loop as it
    # would have ordered the moved ops.
    with graph:
        ops.repeat_with_info(new_graph, repeat_count, inputs_dict=new_to_old_inputs)
    return new_graph
