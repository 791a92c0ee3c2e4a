"""``fold_updates``: ``scaled_add_(W, Y, a, b)`` with float ``a``/``b``, where
``Y = lhs @ rhs`` (float32 or float16, 2-D) is read by nothing else, becomes one GEMM
accumulating into ``W`` (``C = b*lhs@rhs + a*C``): ``Y`` is never stored,
and ``W`` is read and written once instead of twice.

When ``Y`` is an output of a graph called once (a gradient graph), the
update moves into that graph, right after the last entry there that reads
``W`` (``W`` becomes a written input of the call, or a new one).

Relies on, and checks: 2-D operands of a plain product, all float32 or all
float16 as ``W`` (float16 rounds the product to float16 before the update,
as the unfused MatMul does, so the bits are the unfused ones); constant
scales; ``Y`` read once; no entry between the product and the update writes
the product's operands; across a call, nothing between the call and the
update touches ``W``, ``W`` reaches the callee through at most one input,
which the callee never writes, and the callee's product does not read
``W``. The order of every read and write of ``W`` is unchanged.
"""
from ..program import Entry, Program
from .analysis import alias_roots, is_half_or_f32, producer, read_count, root_of, touches, writes

#: The MatMul attributes a fused product keeps (the operand layout and the
#: partials type its kernel honours).
_KEPT_ATTRS = ("trans_lhs", "trans_rhs", "partials_type")

NAME = "fold_updates"


def _accumulating_matmul(m: Entry, w, out, a: float, b: float) -> Entry:
    """``w = a*w + b*(lhs @ rhs)`` as one GEMM writing ``out`` (an alias of
    ``w``): beta = a, alpha = b."""
    attrs = {k: v for k, v in m.attrs.items() if k in _KEPT_ATTRS}
    attrs.update({"epilogue": "accumulate", "alpha": float(b), "beta": float(a)})
    return m.derive(kernel="MatMul", inputs=m.inputs[:2] + [w], outputs=[out], attrs=attrs,
                    aliases=[(0, 2)], modified=[2], side_effects=False)


def _is_plain_product(m: Entry, like) -> bool:
    return (m.kernel == "MatMul" and not m.skip and "epilogue" not in m.attrs
            and len(m.inputs) == 2
            and all(t is not None and t.dtype == like.dtype and len(t.shape) == 2
                    for t in m.inputs)
            and tuple(m.outputs[0].shape) == tuple(like.shape) and len(like.shape) == 2)


def _place_after(entries, start: int, after: int, operands, roots) -> int:
    """Index at which an entry moved from ``start`` can run after ``after``:
    -1 if some entry in between writes one of its operands."""
    targets = {root_of(roots, t) for t in operands}
    for e in entries[start + 1:after + 1]:
        if writes(e, roots, targets):
            return -1
    return after + 1


def run(prog: Program) -> int:
    sites = {}
    for g in prog.graphs:
        for e in prog.entries[g]:
            for cg in e.graphs:
                sites.setdefault(cg, []).append(e)
    folded = 0
    for p in prog.graphs:
        for u in [e for e in prog.entries[p] if e.kernel == "ScaledAddLhsInplace" and not e.skip]:
            if _fold_one(prog, p, u, sites):
                folded += 1
    return folded


def _fold_one(prog: Program, p, u: Entry, sites) -> bool:
    entries = prog.entries[p]
    if len(u.inputs) != 2:  # tensor scales: read at run time
        return False
    w, y, w_out = u.inputs[0], u.inputs[1], u.outputs[0]
    a, b = u.attrs.get("scale0", 1.0), u.attrs.get("scale1", 1.0)
    if not (is_half_or_f32(w) and y is not None and y.dtype == w.dtype) or len(w.shape) != 2:
        return False
    p_out = {id(t) for t in prog.graph_outputs[p]}
    if id(y) in p_out or read_count(entries, y) != 1:
        return False
    pu = entries.index(u)
    pm, m, k = producer(entries, y)
    if m is None or pm > pu:
        return False
    roots = alias_roots(entries)
    w_root = root_of(roots, w)
    if m.kind == "kernel":
        # Same graph: the GEMM runs where the update was.
        if not _is_plain_product(m, w) or any(root_of(roots, t) == w_root for t in m.inputs):
            return False
        if _place_after(entries, pm, pu - 1, m.inputs, roots) < 0:
            return False
        entries[pu] = _accumulating_matmul(m, w, w_out, a, b)
        del entries[pm]
        return True
    if m.kind != "call" or len(m.graphs) != 1 or len(sites.get(m.graphs[0], ())) != 1:
        return False
    # Across a call: nothing between the call and the update may touch W,
    # and W's storage reaches the callee through exactly one input.
    if id(w_out) in p_out or read_count(entries, w_out):
        return False
    if any(touches(e, roots, {w_root}) for e in entries[pm + 1:pu]):
        return False
    g = m.graphs[0]
    at = [j for j, t in enumerate(m.inputs) if root_of(roots, t) == w_root]
    if len(at) > 1 or (at and m.inputs[at[0]] is not w):
        return False
    g_entries, g_outs = prog.entries[g], prog.graph_outputs[g]
    d = g_outs[k]
    if sum(1 for t in g_outs if t is d) != 1 or any(t is d for t in prog.graph_inputs[g]):
        return False
    gm_pos, gm, _ = producer(g_entries, d)
    if gm is None or not _is_plain_product(gm, w) or read_count(g_entries, d):
        return False
    g_roots = alias_roots(g_entries)
    if at:
        wg = prog.graph_inputs[g][at[0]]
        wg_root = root_of(g_roots, wg)
        if any(writes(e, g_roots, {wg_root}) for e in g_entries):
            return False
        if any(root_of(g_roots, t) == wg_root for t in gm.inputs):
            return False
        last = max([i for i, e in enumerate(g_entries) if touches(e, g_roots, {wg_root})],
                   default=-1)
    else:
        wg, last = None, -1
    pos = _place_after(g_entries, gm_pos, max(gm_pos, last), gm.inputs, g_roots)
    if pos < 0:
        return False
    # Commit.
    if wg is None:
        wg = prog.new_input(g, w, "updated_in_place")
        prog.graph_inputs[g].append(wg)
        m.inputs.append(w)
        j = len(m.inputs) - 1
    else:
        j = at[0]
    g_entries.insert(pos, _accumulating_matmul(gm, wg, d, a, b))
    del g_entries[gm_pos]
    del g_outs[k]
    del m.outputs[k]
    entries[pm] = m.derive(modified=sorted(set(m.modified) | {j}))
    entries.remove(u)
    return True
