"""Lowering of an Ir into the C++ core's ProgramDesc, and the Engine built from it.

Graphs reachable from the main graph are numbered in discovery order, tensors
in graph-then-creation order, so the lowered program is the same whatever
PYTHONHASHSEED is. Attributes whose key starts with ``_`` stay in Python;
``_stream`` becomes the core's stream index.
"""
import os
from dataclasses import dataclass, field
from typing import Dict, List

import numpy as np

from ._core_loader import core
from .streams import _Stream
from .tensor import Constant, Tensor, Variable

__all__ = ["LoweredProgram", "lower_ir"]

_KIND_INTERMEDIATE, _KIND_INPUT, _KIND_CONSTANT, _KIND_VARIABLE = 0, 1, 2, 3


@dataclass
class LoweredProgram:
    desc: object
    engine: object
    graph_index: Dict[object, int] = field(default_factory=dict)
    tensor_index: Dict[Tensor, int] = field(default_factory=dict)
    stream_index: Dict[_Stream, int] = field(default_factory=dict)
    streams: List[_Stream] = field(default_factory=list)
    stream_item_bytes: List[int] = field(default_factory=list)
    variables: List[Variable] = field(default_factory=list)


def _reachable_graphs(ir):
    order, seen = [], set()
    stack = [ir.main_graph]
    while stack:
        g = stack.pop(0)
        if g.name in seen:
            continue
        seen.add(g.name)
        order.append(g)
        for op in g._ops:
            for cg in op.called_graphs:
                if cg.name not in seen:
                    stack.append(cg)
    return order


def _core_attrs(op, prog: LoweredProgram) -> dict:
    out = {}
    # Written inputs: the core must not let such an input share the caller's
    # storage unless the write is meant to reach the caller.
    if op.type in ("Call", "Repeat") or op.modified:
        out["modified"] = sorted(op.modified)
    for k, v in op.attrs.items():
        if k == "_stream":
            out["stream"] = prog.stream_index[v]
        elif k.startswith("_"):
            continue
        elif isinstance(v, np.ndarray):
            out[k] = v.tolist()
        elif isinstance(v, (np.integer,)):
            out[k] = int(v)
        elif isinstance(v, (np.floating,)):
            out[k] = float(v)
        else:
            out[k] = v
    return out


def _fold_transposes_into_matmuls(g):
    """Operand transposes read by float32 MatMuls only (the autodiff rule of
    MatMul emits them: dA = G @ B^T) become GEMM transpose flags instead of
    copies. Returns ``(skipped Transpose ops, {matmul op: (lhs, rhs, flags)})``."""
    consumers = {}
    for op in g._ops:
        for t in op.inputs:
            if t is not None:
                consumers.setdefault(id(t), []).append(op)
    outputs = {id(t) for t in g._outputs}
    skip, rewired = set(), {}
    for op in g._ops:
        if op.type != "Transpose" or op.inputs[0].dtype.name != "float32":
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


def _fuse_matmul_epilogues(g, skip, rewired):
    """A float32 2-D MatMul whose only reader is ``+ bias`` (one value per
    column), optionally followed by a Gelu that is the sum's only reader,
    becomes one MatMul applying bias (and GELU) to each block of its result
    in the GEMM. Returns ``{matmul op: (inputs, final output, epilogue)}`` and
    adds the absorbed ops to ``skip``."""
    consumers = {}
    for op in g._ops:
        for t in op.inputs:
            if t is not None:
                consumers.setdefault(id(t), []).append(op)
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
        if y.dtype.name != "float32" or y.rank != 2 or any(t.dtype.name != "float32" for t in op.inputs):
            continue
        add = only_reader(y)
        if add is None or add.type != "Add" or add.outputs[0].shape != y.shape:
            continue
        bias = add.inputs[1] if add.inputs[0] is y else add.inputs[0]
        if bias is y or bias.dtype.name != "float32" or bias.shape not in ((y.shape[1],), (1, y.shape[1])):
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


# IPUXL_NO_FUSION=1 lowers every op as written (for debugging and A/B timing).
_NO_FUSION = os.environ.get("IPUXL_NO_FUSION", "") not in ("", "0")

_SIDE_EFFECTS = ("HostLoad", "HostStore", "PrintTensor", "RemoteCodeLoad", "Call", "Repeat", "If")


def _prune_unread_outputs(ir, graphs, lowered):
    """Outputs of a graph that no call site reads are dropped from the graph
    and from its call sites (only for graphs called by plain calls: a
    repeated graph carries all its outputs). A gradient graph's gradient for
    an input nobody needs (the images of a training step) is the usual case.
    Returns each graph's lowered outputs."""
    reads = {}
    for g in graphs:
        r = set()
        for _, inputs, _, _ in lowered[g]:
            r.update(id(t) for t in inputs if t is not None)
        r.update(id(t) for t in g._outputs)
        reads[g] = r
    by_op = {}
    for g in graphs:
        for entry in lowered[g]:
            by_op[entry[0]] = (g, entry)
    result = {}
    for g in graphs:
        sites = [by_op[s] for s in g._call_sites if s in by_op]
        if g is ir.main_graph or not sites or any(e[0].type != "Call" for _, e in sites):
            result[g] = list(g._outputs)
            continue
        keep = [k for k in range(len(g._outputs))
                if any(id(e[2][k]) in reads[pg] for pg, e in sites)]
        result[g] = [g._outputs[k] for k in keep]
        for _, e in sites:
            e[2] = [e[2][k] for k in keep]
    return result


def _drop_dead_ops(entries, outputs):
    """Marks ops (without side effects) none of whose results is read: the
    core still checks them (a malformed op is an error even if unused) but
    does not run them."""
    live = {id(t) for t in outputs}
    for entry in reversed(entries):
        op, inputs, outs, attrs = entry
        if op.type in _SIDE_EFFECTS or op.modified or any(id(t) in live for t in outs):
            live.update(id(t) for t in inputs if t is not None)
        else:
            attrs["__dead"] = 1


def lower_ir(ir) -> LoweredProgram:
    desc = core.ProgramDesc()
    prog = LoweredProgram(desc=desc, engine=None)
    for s in sorted(ir._streams):
        prog.stream_index[s] = desc.add_stream(s.tensor_id, s.dtype._core_code, list(s.shape),
                                               s._direction == "h2d")
        prog.streams.append(s)
        prog.stream_item_bytes.append(int(np.prod(s.shape, dtype=np.int64)) * s.dtype.itemsize)
    graphs = _reachable_graphs(ir)
    for g in graphs:
        prog.graph_index[g] = desc.add_graph(g.name or "main")
    for g in graphs:
        gi = prog.graph_index[g]
        inputs = set(g._inputs)
        for t in g._tensors.values():
            if isinstance(t, Variable):
                kind = _KIND_VARIABLE
            elif isinstance(t, Constant):
                kind = _KIND_CONSTANT
            elif t in inputs:
                kind = _KIND_INPUT
            else:
                kind = _KIND_INTERMEDIATE
            idx = desc.add_tensor(gi, t.id, t.dtype._core_code, list(t.shape), kind)
            prog.tensor_index[t] = idx
            if kind == _KIND_CONSTANT:
                desc.set_tensor_data(idx, np.ascontiguousarray(t._host_data))
            elif kind == _KIND_VARIABLE:
                prog.variables.append(t)
    # 1. Each graph's ops as the core will run them (folds and fusions applied).
    lowered = {}
    for g in graphs:
        if _NO_FUSION:
            skip, rewired, fused = set(), {}, {}
        else:
            skip, rewired = _fold_transposes_into_matmuls(g)
            fused = _fuse_matmul_epilogues(g, skip, rewired)
        entries = []
        for op in g._ops:
            if op in skip:
                continue
            inputs, outputs, attrs = list(op.inputs), list(op.outputs), _core_attrs(op, prog)
            if op in rewired:
                inputs, flags = rewired[op]
                attrs["trans_lhs"], attrs["trans_rhs"] = flags
            if op in fused:
                inputs, final, attrs["epilogue"] = fused[op]
                outputs = [final]
            entries.append([op, list(inputs), outputs, attrs])
        lowered[g] = entries
    # 2. Results nobody reads are not computed.
    graph_outputs = _prune_unread_outputs(ir, graphs, lowered)
    for g in graphs:
        _drop_dead_ops(lowered[g], graph_outputs[g])
    # 3. Hand everything to the core.
    for g in graphs:
        gi = prog.graph_index[g]
        for op, inputs, outputs, attrs in lowered[g]:
            ins = [-1 if t is None else prog.tensor_index[t] for t in inputs]
            outs = [prog.tensor_index[t] for t in outputs]
            desc.add_op(gi, op.type, op.name, ins, outs, attrs,
                        [prog.graph_index[cg] for cg in op.called_graphs],
                        [tuple(a) for a in op.aliases])
        desc.set_graph_io(gi, [prog.tensor_index[t] for t in g._inputs],
                          [prog.tensor_index[t] for t in graph_outputs[g]])
    prog.engine = core.Engine(desc, prog.graph_index[ir.main_graph])
    return prog
