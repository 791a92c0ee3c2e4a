"""``repeat``: run a graph ``repeat_count`` times with loop-carried values.

After each iteration output ``i`` is copied to input ``i`` for every output;
the remaining inputs keep their values. The outputs of the op are the values
after the last iteration (the carried inputs themselves when the count is 0).
"""
from typing import List, Mapping, Optional, Tuple, Union

import numpy as np

from ..errors import popart_exception
from ..grad import register_grad
from ..graph import Graph
from ..opdef import define_op
from ..tensor import Tensor
from .call import CallSiteInfo, _by_ref_inputs, _create_call, bind_inputs
from .rules import called_graph_outputs

__all__ = ["repeat", "repeat_with_info"]

_MAX_REPEAT_COUNT = 2 ** 63 - 1


def repeat_with_info(graph: Graph, repeat_count: int, *inputs: Union[Tensor, List[Tensor]],
                     inputs_dict: Optional[Mapping[Tensor, Tensor]] = None,
                     check_inputs: bool = True) -> CallSiteInfo:
    """As :func:`repeat`, returning the :class:`CallSiteInfo` of the loop."""
    if not isinstance(repeat_count, int) or isinstance(repeat_count, bool):
        raise TypeError(f"repeat: repeat_count must be an int, got {repeat_count!r}")
    if repeat_count < 0:
        raise ValueError(f"repeat: repeat_count must be >= 0, got {repeat_count}")
    if repeat_count > _MAX_REPEAT_COUNT:
        # PopART's trip count is an int64: PopXL's setTripCountValue raises
        # a TypeError here, when the op is built.
        raise TypeError(f"repeat: repeat_count {repeat_count} does not fit the loop's int64 "
                        f"trip count (at most 2**63 - 1 = {_MAX_REPEAT_COUNT})")
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
          side_effects=True)


def repeat(graph: Graph, repeat_count: int, *inputs: Union[Tensor, List[Tensor]],
           inputs_dict: Optional[Mapping[Tensor, Tensor]] = None) -> Tuple[Tensor, ...]:
    """Call ``graph`` ``repeat_count`` times, carrying output ``i`` into input
    ``i`` between iterations; returns the outputs of the last iteration."""
    return repeat_with_info(graph, repeat_count, *inputs, inputs_dict=inputs_dict).outputs


# ---- gradient rule
#
# ``repeat(body, n, c..., x...)`` runs ``c = body(c, x)`` n times: the
# ``k = len(body.outputs)`` carried inputs ``c`` and the invariant inputs
# ``x``. Reverse mode walks the iterations backwards, so it needs the state
# at the start of each iteration. The rule
#
# 1. runs the loop again with a body that also writes its input state into
#    a stash of shape ``(n, *state)`` (``dynamic_update`` at the iteration
#    counter): the forward activations of a repeat are not outputs PopXL
#    could stitch, so they are recomputed, as PopART recomputes them;
# 2. runs a second loop from iteration n-1 down to 0: it reads the stashed
#    state, calls the body once more to get the values its gradient graph
#    needs, and calls the body's gradient graph (autodiff of the body,
#    differentiated once) with the carried gradient, which becomes the
#    gradient of the previous state; gradients of invariant inputs add up.
#
# Memory is one copy of the state per iteration; time is about three
# forward passes and one backward pass per iteration.

def _zeros_like(t: Tensor) -> Tensor:
    from .init import init

    return init(t.shape, t.dtype, name=f"zero_grad_{t.name.split('/')[-1]}")


@register_grad("Repeat")
def _repeat_grad(ctx):
    from .. import dtypes
    from ..tensor import constant, graph_input, graph_output
    from ..transforms.autodiff import ExpectedConnectionType
    from .call import call, call_with_info
    from .gather import dynamic_slice, dynamic_update
    from .shape import reshape

    op = ctx.op
    body = op.called_graphs[0]
    n = int(op.attrs["repeat_count"])
    k = len(body.outputs)
    ins = list(op.inputs)
    is_float = [t.dtype.is_floating_point for t in ins]
    if n == 0:  # the outputs are the carried inputs themselves
        return [ctx.g(j) if j < k and is_float[j] and ctx.needs(j) else None
                for j in range(len(ins))]
    info = ctx.subgraph_grad_info(body)  # first: autodiff may restart this rule
    idx_of = {id(t): i for i, t in enumerate(body.inputs)}
    out_of = {id(t): i for i, t in enumerate(body.outputs)}
    grad_to_input = [idx_of[id(ec.fwd_tensor)] for ec in info.expected_outputs]
    carried = [j for j in range(k) if is_float[j]]                 # carried gradients
    invariant = [j for j in range(k, len(ins)) if is_float[j] and j in grad_to_input]
    u32 = dtypes.uint32
    one = np.uint32(1)

    # 1. The state at the start of every iteration, stashed.
    fwd = ctx.new_graph("repeat_stash")
    with fwd:
        s = [graph_input(ins[j].shape, ins[j].dtype, f"state_{j}") for j in range(k)]
        st = [graph_input((n,) + ins[j].shape, ins[j].dtype, f"stash_{j}") for j in range(k)]
        i = graph_input((), u32, "iteration")
        x = [graph_input(ins[j].shape, ins[j].dtype, f"input_{j}") for j in range(k, len(ins))]
        nxt = call(body, *s, *x)
        at = reshape(i, (1,))
        for j in range(k):
            graph_output(nxt[j])
        for j in range(k):
            # Out of place, so that the gradient graph can be differentiated
            # again (autodiff refuses graphs that modify their inputs).
            graph_output(dynamic_update(st[j], at, reshape(s[j], (1,) + ins[j].shape), [0], [1],
                                        True))
        graph_output(i + constant(one))
    stash0 = [_stash_zeros(ins[j], n) for j in range(k)]
    outs = repeat(fwd, n, *[ctx.x(j) for j in range(k)], *stash0,
                  constant(np.uint32(0)), *[ctx.x(j) for j in range(k, len(ins))])
    stashes = outs[k:2 * k]

    # 2. Backwards through the iterations.
    bwd = ctx.new_graph("repeat_grad")
    with bwd:
        g = [graph_input(ins[j].shape, ins[j].dtype, f"grad_{j}") for j in carried]
        acc = [graph_input(ins[j].shape, ins[j].dtype, f"grad_{j}") for j in invariant]
        i = graph_input((), u32, "iteration")
        st = [graph_input((n,) + ins[j].shape, ins[j].dtype, f"stash_{j}") for j in range(k)]
        x = [graph_input(ins[j].shape, ins[j].dtype, f"input_{j}") for j in range(k, len(ins))]
        at = reshape(i, (1,))
        s = [reshape(dynamic_slice(st[j], at, [0], [1], True), ins[j].shape) for j in range(k)]
        site = call_with_info(body, *s, *x)
        grad_of = dict(zip(carried, g))
        args = []
        for ec in info.expected_inputs:
            t = ec.fwd_tensor
            if ec.connection_type == ExpectedConnectionType.FwdGrad:
                args.append(grad_of.get(out_of[id(t)]) if out_of[id(t)] in grad_of
                            else _zeros_like(t))
            elif id(t) in idx_of:
                j = idx_of[id(t)]
                args.append(s[j] if j < k else x[j - k])
            else:
                args.append(site.outputs[out_of[id(t)]])
        grads = call(info.graph, *args) if info.expected_outputs else ()
        by_input = dict(zip(grad_to_input, grads))
        for j in carried:
            graph_output(by_input[j] if j in by_input else _zeros_like(ins[j]))
        for a, j in zip(acc, invariant):
            graph_output(a + by_input[j])
        graph_output(i - constant(one))
    g0 = [ctx.g(j) if ctx.g(j) is not None else ctx.g_or_zeros(j) for j in carried]
    acc0 = [_zeros_like(ins[j]) for j in invariant]
    res = repeat(bwd, n, *g0, *acc0, constant(np.uint32(n - 1)), *stashes,
                 *[ctx.x(j) for j in range(k, len(ins))])
    result = [None] * len(ins)
    for pos, j in enumerate(carried):
        result[j] = res[pos] if ctx.needs(j) else None
    for pos, j in enumerate(invariant):
        result[j] = res[len(carried) + pos] if ctx.needs(j) else None
    return result


def _stash_zeros(t: Tensor, n: int) -> Tensor:
    from .init import init

    return init((n,) + t.shape, t.dtype, name=f"stash_{t.name.split('/')[-1]}")
