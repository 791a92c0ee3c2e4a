"""``decompose_sum``: rewrite every ``Sum`` of more than two tensors into a
zero ``Init`` followed by a chain of ``Add`` ops.

Each addition is scheduled right after the later of its summand's producer
and the previous addition, so partial gradients are folded into the running
total as soon as they exist and die immediately: the liveness-optimal order.
Summands are added in order of their producers' schedule positions (graph
inputs first). The last addition writes the original output tensor, so
consumers are untouched. Numerically this is a left fold from zero.
"""
from ..context import get_current_context
from ..graph import Graph

__all__ = ["decompose_sum"]


def decompose_sum(graph: Graph) -> Graph:
    """Decompose the multi-input ``Sum`` ops of ``graph`` in place; returns ``graph``."""
    from .. import ops
    from ..op import create_op

    ctx = get_current_context()
    saved = (ctx._in_sequence, ctx._name_scopes)
    ctx._in_sequence, ctx._name_scopes = None, []
    try:
        with graph:
            for sum_op in [op for op in graph._ops if op.type == "Sum" and len(op.inputs) > 2]:
                pos = {op: i for i, op in enumerate(graph._ops)}
                out = sum_op.outputs[0]
                base = out.name.split("/")[-1]
                summands = sorted(enumerate(sum_op.inputs),
                                  key=lambda it: (pos.get(it[1].producer, -1), it[0]))
                graph._ops.remove(sum_op)
                graph._ops_set.discard(sum_op)
                for x in sum_op.inputs:
                    x._consumers = [c for c in x._consumers if c is not sum_op]
                start = len(graph._ops)
                acc = ops.init(out.shape, out.dtype, name=f"{base}_init")
                placed = [acc.producer]
                for k, (_, x) in enumerate(summands):
                    last = k == len(summands) - 1
                    add = create_op("Add", [acc, x], [(f"{base}_{k}", out.shape, out.dtype)],
                                    name=f"{base}_add{k}")
                    if last:  # write the original tensor so consumers are untouched
                        tmp = add.outputs[0]
                        del graph._tensors[tmp.id]
                        add.outputs[0] = out
                        out._producer = add
                    acc = add.outputs[0]
                    placed.append(add)
                # Move the new ops from the end of the schedule to their places:
                # the init before the first addition, each addition right after
                # the later of its summand's producer and the previous addition.
                del graph._ops[start:]
                pos = {op: i for i, op in enumerate(graph._ops)}
                anchors, anchor = [], -1
                for _, x in summands:
                    anchor = max(anchor, pos.get(x.producer, -1))
                    anchors.append(anchor)
                by_anchor = {}
                for a, add in zip(anchors, placed[1:]):
                    by_anchor.setdefault(a, []).append(add)
                result = list(by_anchor.get(-1, []))
                if anchors[0] == -1:
                    result.insert(0, placed[0])
                for i, op in enumerate(graph._ops):
                    result.append(op)
                    if i == anchors[0]:
                        result.append(placed[0])
                    result.extend(by_anchor.get(i, []))
                graph._ops[:] = result
    finally:
        ctx._in_sequence, ctx._name_scopes = saved
    return graph
