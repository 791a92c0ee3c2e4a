"""``fuse_epilogues``: ``MatMul + bias`` (and a following ``Gelu``) becomes one
GEMM that applies the bias (and GELU) to each block of its result while it
is in cache.

Relies on, and checks: a single 2-D float32 or float16 product (both
operands 2-D and of one dtype, no epilogue yet, plain or transposed); its
result read only by an ``Add`` of a bias of that dtype with one value per column (shape ``(N,)`` or ``(1, N)``) whose
result has the product's shape; for GELU, the sum read only by a ``Gelu``;
no intermediate result is a graph output. The fused GEMM runs where the last
fused op ran (so the bias exists, whatever the schedule), which needs that
no entry in between writes (a view of) an operand or the bias. In float16
the fused GEMM rounds the product, the sum and the GELU to float16 each, as
the three unfused kernels do, so the results are the same bits.
"""
from ..program import Program
from .analysis import alias_roots, is_half_or_f32, readers, writes_between

#: The MatMul attributes a fused product keeps (the operand layout and the
#: partials type its kernel honours).
_KEPT_ATTRS = ("trans_lhs", "trans_rhs", "partials_type")

NAME = "fuse_epilogues"


def run(prog: Program) -> int:
    fused = 0
    for g in prog.graphs:
        entries = prog.entries[g]
        outputs = {id(t) for t in prog.graph_outputs[g]}
        i = 0
        while i < len(entries):
            m = entries[i]
            plan = _plan(entries, i, outputs)
            if plan is None:
                i += 1
                continue
            absorbed, bias, final, kind = plan
            last = entries.index(absorbed[-1])
            attrs = {k: v for k, v in m.attrs.items() if k in _KEPT_ATTRS}
            attrs["epilogue"] = kind
            entries[last] = m.derive(kernel="MatMul", inputs=m.inputs[:2] + [bias],
                                     outputs=[final], attrs=attrs, aliases=(), modified=(),
                                     side_effects=False)
            for e in absorbed[:-1]:
                entries.remove(e)
            entries.remove(m)
            fused += 1
        # positions changed: nothing else to do for this graph
    return fused


def _only_reader(reads, outputs, t):
    users = reads.get(id(t), [])
    if len(users) != 1 or id(t) in outputs:
        return None
    return users[0]


def _plan(entries, i, outputs):
    m = entries[i]
    if m.kernel != "MatMul" or m.skip or "epilogue" in m.attrs or len(m.inputs) != 2:
        return None
    y = m.outputs[0]
    if not is_half_or_f32(y) or not all(t is not None and t.dtype == y.dtype and len(t.shape) == 2
                                        for t in m.inputs):
        return None
    reads = readers(entries)
    add = _only_reader(reads, outputs, y)
    if add is None or add.kernel != "Add" or add.skip or tuple(add.outputs[0].shape) != tuple(y.shape):
        return None
    bias = add.inputs[1] if add.inputs[0] is y else add.inputs[0]
    if bias is y or bias.dtype != y.dtype or tuple(bias.shape) not in ((y.shape[1],), (1, y.shape[1])):
        return None
    absorbed, final, kind = [add], add.outputs[0], "bias"
    gelu = _only_reader(reads, outputs, final)
    if gelu is not None and gelu.kernel == "Gelu" and not gelu.skip:
        absorbed, final, kind = [add, gelu], gelu.outputs[0], "bias_gelu"
    roots = alias_roots(entries)
    last = entries.index(absorbed[-1])
    if writes_between(entries, i, last, list(m.inputs) + [bias], roots):
        return None
    return absorbed, bias, final, kind
