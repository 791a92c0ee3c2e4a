"""``recompute_graph`` (``popxl_addons.transforms.recomputation``).

``recompute_graph(grad_graph)`` returns a gradient graph that recomputes the
forward pass itself instead of reading stashed activations: a new graph
``<name>_recomp`` calls the forward graph on the forward inputs, then the
gradient graph on the recomputed activations. Its inputs are, in order, the
``FwdGrad`` inputs of the gradient graph, its ``Fwd`` inputs that are
forward-graph *inputs*, the remaining forward inputs (by name), then any
other gradient-graph input (accumulators, counters: passed by reference as
in the gradient graph). The returned ``GradGraphInfo`` describes that, so
``grad_graph_info.inputs_dict(fwd_call_info)`` now supplies forward inputs
only, and the named args are carried over.
"""
from typing import Dict, List, Tuple

from ...graph import Graph
from ...tensor import Tensor, graph_input, graph_output
from ...transforms.autodiff import ExpectedConnection, ExpectedConnectionType, GradGraphInfo
from ..graph import BoundGraph, GraphWithNamedArgs
from ..utils import suffix_graph_name

__all__ = ["recompute_graph", "add_recompute_inputs"]


def _input_like(t: Tensor, by_ref: bool = False) -> Tensor:
    return graph_input(t.shape, t.dtype, t.name, by_ref=by_ref)


def add_recompute_inputs(grad_info: GradGraphInfo
                         ) -> Tuple[Dict[Tensor, Tensor], Dict[Tensor, Tensor],
                                    List[ExpectedConnection]]:
    """Add to the current graph the inputs a recomputing gradient graph
    needs, in the order of the expected connections it returns:
    ``(forward input -> new input, gradient-graph input -> new input,
    expected connections)``."""
    fwd_map: Dict[Tensor, Tensor] = {}
    grad_map: Dict[Tensor, Tensor] = {}
    expected: List[ExpectedConnection] = []
    fwd_inputs = list(grad_info.forward_graph.inputs)
    fwd_set = set(fwd_inputs)
    for ec, t in zip(grad_info.expected_inputs, grad_info.graph.inputs):
        if ec.connection_type == ExpectedConnectionType.FwdGrad:
            grad_map[t] = _input_like(t)
            expected.append(ec)
        elif ec.connection_type == ExpectedConnectionType.Fwd and ec.fwd_tensor in fwd_set \
                and ec.fwd_tensor not in fwd_map:
            fwd_map[ec.fwd_tensor] = _input_like(ec.fwd_tensor)
            expected.append(ec)
    # Every other forward input, so that the forward graph can be called.
    for t in sorted((t for t in fwd_inputs if t not in fwd_map), key=lambda t: t.name):
        fwd_map[t] = _input_like(t)
        expected.append(ExpectedConnection._create(t, ExpectedConnectionType.Fwd))
    return fwd_map, grad_map, expected


def recompute_graph(grad_graph: GraphWithNamedArgs) -> GraphWithNamedArgs:
    """A gradient graph with recomputation: it calls the forward graph, then
    ``grad_graph`` (see the module docstring).

    Args:
        grad_graph: a gradient graph, as ``addons.autodiff`` or
            ``autodiff_with_accumulation`` return it (with its
            ``grad_graph_info``).

    Returns:
        GraphWithNamedArgs: the recomputing gradient graph, its named args
        and its GradGraphInfo.
    """
    if not isinstance(grad_graph, GraphWithNamedArgs):
        raise TypeError(f"recompute_graph expects a GraphWithNamedArgs (a gradient graph), got "
                        f"{type(grad_graph).__name__}")
    info = grad_graph.grad_graph_info
    if info is None:
        raise ValueError(f"recompute_graph: graph {grad_graph.graph.name!r} has no "
                         "grad_graph_info; pass the gradient graph autodiff returned")
    ir = grad_graph.graph.ir
    r_graph: Graph = ir.create_empty_graph(suffix_graph_name(grad_graph.graph.name, "recomp"))
    with r_graph:
        fwd_inputs, grad_inputs, expected = add_recompute_inputs(info)
        call_info = BoundGraph(info.forward_graph, fwd_inputs).call_with_info()
        grad_inputs.update(info.inputs_dict(call_info))
        by_ref = grad_graph.graph._by_ref_inputs
        for t in sorted((t for t in grad_graph.graph.inputs if t not in grad_inputs),
                        key=lambda t: t.name):
            grad_inputs[t] = _input_like(t, by_ref=t in by_ref)
        outs = BoundGraph(grad_graph.graph, grad_inputs).call_with_info().outputs
        for o in outs:
            graph_output(o)
    new_info = GradGraphInfo._create(r_graph, info.forward_graph, expected,
                                     info.expected_outputs)
    return GraphWithNamedArgs(r_graph, grad_graph.args.remap(grad_inputs), new_info)

