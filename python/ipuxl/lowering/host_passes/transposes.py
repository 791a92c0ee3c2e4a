"""``fold_transposes``: a transpose of the last two axes read only by float32
(or float16) matmuls becomes a transpose flag of those GEMMs instead of a
copy (the autodiff rule of MatMul emits them: ``dA = G @ B^T``).

Relies on, and checks: the transpose swaps exactly the last two axes of a
float32 or float16 operand of rank >= 2 (the float16 MatMul converts a
flagged operand to float transposed and runs the plain product, so its bits
are the unfused Transpose + MatMul's); every reader of its result is a
plain MatMul (no epilogue), none reading it as both operands; the result is
not a graph output; nothing between the transpose and each reading MatMul
writes (any view of) the transposed tensor, since the GEMM now reads it
later.
"""
from ..program import Program
from .analysis import alias_roots, is_half_or_f32, readers, writes_between

NAME = "fold_transposes"


def run(prog: Program) -> int:
    folded = 0
    for g in prog.graphs:
        entries = prog.entries[g]
        outputs = {id(t) for t in prog.graph_outputs[g]}
        reads = readers(entries)
        roots = alias_roots(entries)
        pos = {id(e): i for i, e in enumerate(entries)}
        for e in list(entries):
            if e.kernel != "Transpose" or e.skip or not is_half_or_f32(e.inputs[0]):
                continue
            x, xt = e.inputs[0], e.outputs[0]
            perm = list(e.attrs.get("perm", []))
            if len(x.shape) < 2 or perm != list(range(len(x.shape) - 2)) + [len(x.shape) - 1,
                                                                            len(x.shape) - 2]:
                continue
            users = reads.get(id(xt), [])
            if not users or id(xt) in outputs:
                continue
            if any(u.kernel != "MatMul" or "epilogue" in u.attrs or len(u.inputs) != 2
                   or (u.inputs[0] is xt and u.inputs[1] is xt) for u in users):
                continue
            if any(writes_between(entries, pos[id(e)], pos[id(u)], [x], roots) for u in users):
                continue
            for u in users:
                k = 0 if u.inputs[0] is xt else 1
                u.inputs[k] = x
                u.attrs["trans_lhs" if k == 0 else "trans_rhs"] = 1
            entries.remove(e)
            pos = {id(e2): i for i, e2 in enumerate(entries)}
            folded += 1
    return folded
