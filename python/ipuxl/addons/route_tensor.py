"""``route_tensor_into_graph`` and ``is_subgraph``, mirroring
``popxl_addons.route_tensor``: reach a tensor of a calling graph from a
graph it calls (directly or through other graphs) by adding graph inputs
along the way and passing the tensor at every call site on those paths.

Only call sites of ``Call`` and ``Repeat`` ops are followed (their inputs
correspond one to one, in order, to the called graph's inputs, so a new
graph input is appended at each call site). Call sites of the graphs on a
path that are not themselves reachable from the tensor's graph are not
changed.
"""
from typing import Dict, List, Optional

from ..context import get_current_graph
from ..graph import Graph
from ..opdef import get_opdef
from ..tensor import Tensor, graph_input

__all__ = ["route_tensor_into_graph", "is_subgraph"]

#: Op kinds whose inputs feed the called graph's inputs one to one.
_CALLERS = ("call", "repeat")


def _called(graph: Graph) -> List[Graph]:
    out = []
    for op in graph.ops:
        for g in op.called_graphs:
            if g not in out:
                out.append(g)
    return out


def is_subgraph(parent: Graph, subgraph: Graph) -> bool:
    """Whether ``subgraph`` is ``parent`` or is called from it, directly or
    through other graphs."""
    seen, stack = set(), [parent]
    while stack:
        g = stack.pop()
        if g is subgraph:
            return True
        if g in seen:
            continue
        seen.add(g)
        stack.extend(_called(g))
    return False


def _route(tensor: Tensor, target: Graph, modified: bool) -> Tensor:
    source = tensor.graph
    # graphs reachable from the source through Call/Repeat ops, in an order
    # where every graph comes after all graphs that call it
    order, state = [], {}

    def visit(g):
        state[g] = "open"
        for op in g.ops:
            if get_opdef(op.type).kind in _CALLERS:
                for h in op.called_graphs:
                    if h not in state:
                        visit(h)
        state[g] = "done"
        order.append(g)

    visit(source)
    order.reverse()
    on_path = {g for g in order if is_subgraph(g, target)}
    rep: Dict[Graph, Tensor] = {source: tensor}
    for g in order:
        if g not in on_path or g not in rep:
            continue
        parent_t = rep[g]
        for op in list(g.ops):
            if get_opdef(op.type).kind not in _CALLERS:
                continue
            for h in op.called_graphs:
                if h not in on_path or h is source:
                    continue
                if h not in rep:
                    if parent_t in op.inputs:
                        # already passed at this call site: use that input
                        rep[h] = h.inputs[op.inputs.index(parent_t)]
                    else:
                        with h:
                            rep[h] = graph_input(parent_t.shape, parent_t.dtype, parent_t.name,
                                                 by_ref=modified)
                idx = h.inputs.index(rep[h])
                if idx == len(op.inputs):
                    op.inputs.append(parent_t)
                    parent_t._consumers.append(op)
                elif idx > len(op.inputs) or op.inputs[idx] is not parent_t:
                    raise RuntimeError(f"Could not move {tensor.id} into graph {h.name}: the call "
                                       f"site {op.name} does not pass the graph's inputs in order")
                if modified:
                    op.modified.add(idx)
    if target not in rep:
        raise RuntimeError(f"Could not move {tensor.id} into graph {target.name}")
    return rep[target]


def route_tensor_into_graph(tensor: Tensor, graph: Optional[Graph] = None,
                            modified: bool = False) -> Tensor:
    """``tensor`` as seen inside ``graph`` (default: the current graph).

    When ``tensor`` is in a graph that calls ``graph`` (directly or through
    other graphs), inputs are added to ``graph`` and to the graphs in
    between, and every call site on those paths passes the tensor; with
    ``modified=True`` the inputs are by reference and the call sites mark
    them modified, so writes inside reach ``tensor``. Routing the same
    tensor again reuses the inputs already added.

    Raises:
        ValueError: ``tensor``'s graph does not call ``graph``.
    """
    if graph is None:
        graph = get_current_graph()
    if tensor.graph is graph:
        return tensor
    if not is_subgraph(tensor.graph, graph):
        raise ValueError(f"{tensor} is not in the graph {graph.name}. Additionally, the tensor is "
                         "not in a known parent graph so cannot be moved into the graph.")
    return _route(tensor, graph, bool(modified))
