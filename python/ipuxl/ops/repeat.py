"""``repeat``: run a graph ``repeat_count`` times with loop-carried values.

After each iteration output ``i`` is copied to input ``i`` for every output;
the remaining inputs keep their values. The outputs of the op are the values
after the last iteration (the carried inputs themselves when the count is 0).
"""
from typing import List, Mapping, Optional, Tuple, Union

from ..errors import popart_exception
from ..graph import Graph
from ..tensor import Tensor
from ..opdef import define_op
from .call import CallSiteInfo, _by_ref_inputs, _create_call, bind_inputs
from .rules import called_graph_outputs

__all__ = ["repeat", "repeat_with_info"]


def repeat_with_info(graph: Graph, repeat_count: int, *inputs: Union[Tensor, List[Tensor]],
                     inputs_dict: Optional[Mapping[Tensor, Tensor]] = None,
                     check_inputs: bool = True) -> CallSiteInfo:
    """As :func:`repeat`, returning the :class:`CallSiteInfo` of the loop."""
    if not isinstance(repeat_count, int) or isinstance(repeat_count, bool):
        raise TypeError(f"repeat: repeat_count must be an int, got {repeat_count!r}")
    if repeat_count < 0:
        raise ValueError(f"repeat: repeat_count must be >= 0, got {repeat_count}")
    if not isinstance(graph, Graph):
        raise TypeError(f"repeat: expected a Graph, got {type(graph).__name__}")
    if len(graph.outputs) > len(graph.inputs):
        raise ValueError(
            f"repeat: graph {graph.name!r} has {len(graph.outputs)} outputs but only "
            f"{len(graph.inputs)} inputs; every output is carried into the input at the same "
            "index, so a repeated graph needs at least as many inputs as outputs.")
    for i, (o, x) in enumerate(zip(graph.outputs, graph.inputs)):
        if o.shape != x.shape or o.dtype != x.dtype:
            raise popart_exception(
                f"repeat: output {i} {o.id!r} {o.dtype.name}{o.shape} of graph {graph.name!r} "
                f"cannot be carried into input {i} {x.id!r} {x.dtype.name}{x.shape}")
    parents = bind_inputs("repeat", graph, inputs, inputs_dict, check_inputs)
    op = _create_call("Repeat", graph, parents, {"repeat_count": repeat_count})
    return CallSiteInfo(op)


define_op("Repeat", called_graph_outputs, kind="repeat", modifies=_by_ref_inputs,
          side_effects=True, no_grad="not implemented in ipuxl yet (PopART's LoopGradOp)")


def repeat(graph: Graph, repeat_count: int, *inputs: Union[Tensor, List[Tensor]],
           inputs_dict: Optional[Mapping[Tensor, Tensor]] = None) -> Tuple[Tensor, ...]:
    """Call ``graph`` ``repeat_count`` times, carrying output ``i`` into input
    ``i`` between iterations; returns the outputs of the last iteration."""
    return repeat_with_info(graph, repeat_count, *inputs, inputs_dict=inputs_dict).outputs
