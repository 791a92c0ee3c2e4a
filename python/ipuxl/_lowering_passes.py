"""Rewrites of the lowered op lists: what the core runs differs from the Ir
only in ways no program can observe beyond float32 rounding.

Each graph is lowered into a list of :class:`Entry` (one per op the core
runs). The passes, in the order ``lower_ir`` applies them:

1. ``fold_transposes_into_matmuls``: operand transposes become GEMM flags.
2. ``fuse_matmul_epilogues``: ``MatMul + bias (+ Gelu)`` becomes one GEMM.
3. ``prune_unread_outputs``: graph outputs no call site reads are dropped.
4. ``fold_updates_into_matmuls``: ``scaled_add_(W, X^T @ G, b=-lr)`` becomes
   one GEMM accumulating into ``W``, also when the product is computed in a
   called (gradient) graph: the update then moves into that graph.
5. ``mark_dead_ops``: ops none of whose results is read are not run.
6. ``fuse_input_grads_with_updates``: at a small batch, a layer's input
   gradient ``G @ W^T`` and its folded update of ``W`` become one pass over
   ``W``.
7. ``reshapes_as_views``: a Reshape nothing can tell from a view shares its
   input's storage instead of copying it.
"""
from typing import Callable, Dict, List

__all__ = ["Entry", "fold_transposes_into_matmuls", "fuse_matmul_epilogues",
           "prune_unread_outputs", "fold_updates_into_matmuls", "fuse_input_grads_with_updates",
           "mark_dead_ops", "reshapes_as_views"]

SIDE_EFFECTS = ("HostLoad", "HostStore", "PrintTensor", "RemoteCodeLoad", "Call", "Repeat", "If")


class Entry:
    """One op as the core will run it: the Ir op it comes from, and its
    inputs, outputs, core attributes, type and storage aliases after the
    passes (``attrs["modified"]`` lists the inputs it writes)."""

    __slots__ = ("op", "type", "inputs", "outputs", "attrs", "aliases")

    def __init__(self, op, inputs, outputs, attrs, type=None, aliases=None):  # noqa: A002
        self.op = op
        self.type = type or op.type
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.attrs = attrs
        self.aliases = list(op.aliases if aliases is None else aliases)

    @property
    def graphs(self):
        return self.op.called_graphs

    def written_inputs(self):
        return [self.inputs[i] for i in self.attrs.get("modified", ())
                if 0 <= i < len(self.inputs) and self.inputs[i] is not None]


def _readers(g):
    consumers = {}
    for op in g._ops:
        for t in op.inputs:
            if t is not None:
                consumers.setdefault(id(t), []).append(op)
    return consumers


def _f32(t) -> bool:
    return t.dtype.name == "float32"


def fold_transposes_into_matmuls(g):
    """Operand transposes read by float32 MatMuls only (the autodiff rule of
    MatMul emits them: dA = G @ B^T) become GEMM transpose flags instead of
    copies. Returns ``(skipped Transpose ops, {matmul op: (lhs, rhs, flags)})``."""
    consumers = _readers(g)
    outputs = {id(t) for t in g._outputs}
    skip, rewired = set(), {}
    for op in g._ops:
        if op.type != "Transpose" or not _f32(op.inputs[0]):
            continue
        x, xt = op.inputs[0], op.outputs[0]
        perm = list(op.attrs.get("perm", []))
        if x.rank < 2 or perm != list(range(x.rank - 2)) + [x.rank - 1, x.rank - 2]:
            continue
        users = consumers.get(id(xt), [])
        if not users or id(xt) in outputs or any(u.type != "MatMul" for u in users):
            continue
        if any(xt is u.inputs[0] and xt is u.inputs[1] for u in users):
            continue
        skip.add(op)
        for u in users:
            ins, flags = rewired.get(u, (list(u.inputs), [0, 0]))
            k = 0 if u.inputs[0] is xt else 1
            ins[k], flags[k] = x, 1
            rewired[u] = (ins, flags)
    return skip, rewired


def fuse_matmul_epilogues(g, skip, rewired):
    """A float32 2-D MatMul whose only reader is ``+ bias`` (one value per
    column), optionally followed by a Gelu that is the sum's only reader,
    becomes one MatMul applying bias (and GELU) to each block of its result
    in the GEMM. Returns ``{matmul op: (inputs, final output, epilogue)}`` and
    adds the absorbed ops to ``skip``."""
    consumers = _readers(g)
    outputs = {id(t) for t in g._outputs}

    def only_reader(t):
        users = consumers.get(id(t), [])
        if len(users) != 1 or id(t) in outputs:
            return None
        return users[0]

    fused = {}
    for op in g._ops:
        if op.type != "MatMul" or op in skip:
            continue
        y = op.outputs[0]
        if not _f32(y) or y.rank != 2 or not all(_f32(t) for t in op.inputs):
            continue
        add = only_reader(y)
        if add is None or add.type != "Add" or add.outputs[0].shape != y.shape:
            continue
        bias = add.inputs[1] if add.inputs[0] is y else add.inputs[0]
        if bias is y or not _f32(bias) or bias.shape not in ((y.shape[1],), (1, y.shape[1])):
            continue
        final, kind = add.outputs[0], "bias"
        gelu = only_reader(final)
        if gelu is not None and gelu.type == "Gelu":
            final, kind = gelu.outputs[0], "bias_gelu"
            skip.add(gelu)
        skip.add(add)
        ins = list(rewired[op][0]) if op in rewired else list(op.inputs)
        fused[op] = (ins + [bias], final, kind)
    return fused


def prune_unread_outputs(ir, graphs, lowered) -> Dict[object, list]:
    """Outputs of a graph that no call site reads are dropped from the graph
    and from its call sites (only for graphs called by plain calls: a
    repeated graph carries all its outputs). A gradient graph's gradient for
    an input nobody needs (the images of a training step) is the usual case.
    Returns each graph's lowered outputs."""
    reads = {}
    for g in graphs:
        r = set()
        for e in lowered[g]:
            r.update(id(t) for t in e.inputs if t is not None)
        r.update(id(t) for t in g._outputs)
        reads[g] = r
    by_op = {}
    for g in graphs:
        for e in lowered[g]:
            by_op[e.op] = (g, e)
    result = {}
    for g in graphs:
        sites = [by_op[s] for s in g._call_sites if s in by_op]
        if g is ir.main_graph or not sites or any(e.type != "Call" for _, e in sites):
            result[g] = list(g._outputs)
            continue
        keep = [k for k in range(len(g._outputs))
                if any(id(e.outputs[k]) in reads[pg] for pg, e in sites)]
        result[g] = [g._outputs[k] for k in keep]
        for _, e in sites:
            e.outputs = [e.outputs[k] for k in keep]
    return result


def mark_dead_ops(entries: List[Entry], outputs) -> None:
    """Marks ops (without side effects or writes) none of whose results is
    read: the core still checks them (a malformed op is an error even if
    unused) but does not run them."""
    live = {id(t) for t in outputs}
    for e in reversed(entries):
        if (e.type in SIDE_EFFECTS or e.attrs.get("modified")
                or any(id(t) in live for t in e.outputs)):
            live.update(id(t) for t in e.inputs if t is not None)
        else:
            e.attrs["__dead"] = 1


# ---------------------------------------------------------------- update folding

def _alias_roots(entries):
    """{id(tensor): id(storage root)} for tensors that alias another one."""
    root = {}
    for e in entries:
        for o, i in e.aliases:
            src = e.inputs[i]
            root[id(e.outputs[o])] = root.get(id(src), id(src))
    return root


def _touches(e, roots, targets) -> bool:
    return any(t is not None and roots.get(id(t), id(t)) in targets
               for t in list(e.inputs) + list(e.outputs))


def _writes(e, roots, targets) -> bool:
    return any(roots.get(id(t), id(t)) in targets for t in e.written_inputs())


def _producer(entries, t):
    for pos, e in enumerate(entries):
        for k, o in enumerate(e.outputs):
            if o is t:
                return pos, e, k
    return None, None, None


def _read_count(entries, t) -> int:
    return sum(1 for e in entries for x in e.inputs if x is t)


def _accumulating_matmul(m: Entry, w, out, a: float, b: float) -> Entry:
    """``w = a*w + b*(lhs @ rhs)`` as one GEMM writing ``out`` (an alias of
    ``w``): beta = a, alpha = b."""
    attrs = {k: v for k, v in m.attrs.items() if k in ("trans_lhs", "trans_rhs")}
    attrs.update({"epilogue": "accumulate", "alpha": float(b), "beta": float(a), "modified": [2]})
    return Entry(m.op, m.inputs[:2] + [w], [out], attrs, type="MatMul", aliases=[(0, 2)])


def _is_plain_product(m: Entry, like) -> bool:
    return (m.type == "MatMul" and "epilogue" not in m.attrs and len(m.inputs) == 2
            and all(t is not None and _f32(t) and len(t.shape) == 2 for t in m.inputs)
            and tuple(m.outputs[0].shape) == tuple(like.shape) and len(like.shape) == 2)


def _place_after(entries, start: int, after: int, operands, roots) -> int:
    """Index at which an op moved from ``start`` can run after ``after``:
    -1 if some op in between writes one of its operands."""
    targets = {roots.get(id(t), id(t)) for t in operands}
    for e in entries[start + 1:after + 1]:
        if _writes(e, roots, targets):
            return -1
    return after + 1


def fold_updates_into_matmuls(graphs, lowered, graph_inputs, graph_outputs,
                              new_input: Callable) -> int:
    """``scaled_add_(W, Y, a, b)`` with float ``a``/``b``, where ``Y = lhs @
    rhs`` (float32, 2-D) is read by nothing else, becomes one GEMM
    accumulating into ``W`` (``C = b*lhs@rhs + a*C``): ``Y`` is never
    stored, and ``W`` is read and written once instead of twice.

    When ``Y`` is an output of a graph called once (a gradient graph), the
    update moves into that graph, right after the last op there that reads
    ``W`` (``W`` becomes a written input of the call, or a new one). The
    order of every read and write of ``W`` is unchanged. Returns the number
    of updates folded."""
    sites: Dict[object, list] = {}
    for g in graphs:
        for e in lowered[g]:
            for cg in e.graphs:
                sites.setdefault(cg, []).append(e)
    folded = 0
    for p in graphs:
        for u in [e for e in lowered[p] if e.type == "ScaledAddLhsInplace"]:
            if _fold_one(p, u, lowered, graph_inputs, graph_outputs, sites, new_input):
                folded += 1
    return folded


def _fold_one(p, u, lowered, graph_inputs, graph_outputs, sites, new_input) -> bool:
    entries = lowered[p]
    if len(u.inputs) != 2:  # tensor scales: read at run time
        return False
    w, y, w_out = u.inputs[0], u.inputs[1], u.outputs[0]
    a, b = u.attrs.get("scale0", 1.0), u.attrs.get("scale1", 1.0)
    if not (_f32(w) and _f32(y)) or len(w.shape) != 2:
        return False
    p_out = {id(t) for t in graph_outputs[p]}
    if id(y) in p_out or _read_count(entries, y) != 1:
        return False
    pu = entries.index(u)
    pm, m, k = _producer(entries, y)
    if m is None or pm > pu:
        return False
    roots = _alias_roots(entries)
    w_root = roots.get(id(w), id(w))
    if m.type == "MatMul":
        # Same graph: the GEMM runs where the update was.
        if not _is_plain_product(m, w) or any(roots.get(id(t), id(t)) == w_root for t in m.inputs):
            return False
        if _place_after(entries, pm, pu - 1, m.inputs, roots) < 0:
            return False
        entries[pu] = _accumulating_matmul(m, w, w_out, a, b)
        del entries[pm]
        return True
    if m.type != "Call" or len(m.graphs) != 1 or len(sites.get(m.graphs[0], ())) != 1:
        return False
    # Across a call: nothing between the call and the update may touch W,
    # and W's storage reaches the callee through exactly one input.
    if id(w_out) in p_out or _read_count(entries, w_out):
        return False
    if any(_touches(e, roots, {w_root}) for e in entries[pm + 1:pu]):
        return False
    g = m.graphs[0]
    at = [j for j, t in enumerate(m.inputs) if roots.get(id(t), id(t)) == w_root]
    if len(at) > 1 or (at and m.inputs[at[0]] is not w):
        return False
    g_entries, g_outs = lowered[g], graph_outputs[g]
    d = g_outs[k]
    if sum(1 for t in g_outs if t is d) != 1 or any(t is d for t in graph_inputs[g]):
        return False
    gm_pos, gm, _ = _producer(g_entries, d)
    if gm is None or not _is_plain_product(gm, w) or _read_count(g_entries, d):
        return False
    g_roots = _alias_roots(g_entries)
    if at:
        wg = graph_inputs[g][at[0]]
        wg_root = g_roots.get(id(wg), id(wg))
        if any(_writes(e, g_roots, {wg_root}) for e in g_entries):
            return False
        if any(g_roots.get(id(t), id(t)) == wg_root for t in gm.inputs):
            return False
        last = max([i for i, e in enumerate(g_entries) if _touches(e, g_roots, {wg_root})],
                   default=-1)
    else:
        wg, last = None, -1
    pos = _place_after(g_entries, gm_pos, max(gm_pos, last), gm.inputs, g_roots)
    if pos < 0:
        return False
    # Commit.
    if wg is None:
        wg = new_input(g, w)
        graph_inputs[g].append(wg)
        m.inputs.append(w)
        j = len(m.inputs) - 1
    else:
        j = at[0]
    g_entries.insert(pos, _accumulating_matmul(gm, wg, d, a, b))
    del g_entries[gm_pos]
    del g_outs[k]
    del m.outputs[k]
    m.attrs["modified"] = sorted(set(m.attrs.get("modified", [])) | {j})
    entries.remove(u)
    return True


def _is_shallow_update(u: Entry) -> bool:
    """``W = beta*W + alpha * X^T @ G`` (a folded update), ``X`` [B, M],
    ``G`` [B, N], ``W`` [M, N], at a shape where the core's fused kernel is
    faster than the two GEMMs (``_core.prefer_fused_input_grad_update``:
    measured rules per instruction-set level)."""
    if u.type != "MatMul" or u.attrs.get("epilogue") != "accumulate" or len(u.inputs) != 3:
        return False
    if u.attrs.get("trans_lhs", 0) != 1 or u.attrs.get("trans_rhs", 0) != 0:
        return False
    x, g, w = u.inputs
    from ._core_loader import core  # noqa: PLC0415
    return (x.shape[0] == g.shape[0] and tuple(w.shape) == (x.shape[1], g.shape[1])
            and core.prefer_fused_input_grad_update(g.shape[0], w.shape[0], w.shape[1]))


def fuse_input_grads_with_updates(entries: List[Entry]) -> int:
    """A folded update ``W = beta*W + alpha * X^T @ G`` at a small batch,
    and the input gradient ``dX = G @ W^T`` computed from the same ``G`` and
    the old ``W`` just before it (nothing in between touches ``W``, writes
    ``X`` or ``G``, or reads ``dX``), become one ``MatMulInputGradUpdate``
    op at the update's place: each row of ``W`` is read once, gives its
    column of ``dX``, and is updated. Runs after ``mark_dead_ops``: an input
    gradient nobody reads stays unrun instead. Returns the number of pairs
    fused."""
    fused = 0
    i = 0
    while i < len(entries):
        u = entries[i]
        if not _is_shallow_update(u):
            i += 1
            continue
        roots = _alias_roots(entries)
        x, g, w = u.inputs
        w_root = roots.get(id(w), id(w))
        # The last op before the update that touches W must be the input gradient.
        j = next((k for k in range(i - 1, -1, -1) if _touches(entries[k], roots, {w_root})), -1)
        a = entries[j] if j >= 0 else None
        ok = (a is not None and a.type == "MatMul" and "epilogue" not in a.attrs
              and "__dead" not in a.attrs
              and len(a.inputs) == 2 and a.inputs[0] is g and a.inputs[1] is w
              and a.attrs.get("trans_lhs", 0) == 0 and a.attrs.get("trans_rhs", 0) == 1
              and tuple(a.outputs[0].shape) == tuple(x.shape) and _f32(a.outputs[0]))
        if ok:
            dx = a.outputs[0]
            between = entries[j + 1:i]
            operands = {roots.get(id(t), id(t)) for t in (x, g)}
            ok = (not any(_writes(e, roots, operands) for e in between)
                  and not any(t is dx for e in between for t in e.inputs))
        if not ok:
            i += 1
            continue
        attrs = {"alpha": u.attrs["alpha"], "beta": u.attrs["beta"], "modified": [1]}
        entries[i] = Entry(u.op, [g, w, x], [dx, u.outputs[0]], attrs,
                           type="MatMulInputGradUpdate", aliases=[(1, 1)])
        del entries[j]
        fused += 1
    return fused


def reshapes_as_views(entries: List[Entry], outputs) -> int:
    """A Reshape (a copy, in PopXL) whose input and output no op writes, in
    place or through any view, and whose output (or a view of it) is not a
    graph output,
    becomes ``ReshapeInplace``: the output shares the input's storage. Only
    a write could tell the two apart. (The MNIST step's ``x.reshape((-1,
    784))`` copied the whole batch every step.) Returns the number changed."""
    roots = _alias_roots(entries)
    written = {roots.get(id(t), id(t)) for e in entries for t in e.written_inputs()}
    # Graph outputs, and views of this op's output that are graph outputs.
    out_roots = {roots.get(id(t), id(t)) for t in outputs}
    changed = 0
    for e in entries:
        if e.type != "Reshape" or len(e.inputs) != 1 or len(e.outputs) != 1:
            continue
        x, y = e.inputs[0], e.outputs[0]
        if x is None or roots.get(id(y), id(y)) in out_roots or x.dtype != y.dtype:
            continue
        if roots.get(id(x), id(x)) in written or roots.get(id(y), id(y)) in written:
            continue
        e.type, e.aliases = "ReshapeInplace", [(0, 0)]
        changed += 1
    return changed
