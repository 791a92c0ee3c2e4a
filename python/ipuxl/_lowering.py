"""Lowering of an Ir into the C++ core's ProgramDesc, and the Engine built from it.

Graphs reachable from the main graph are numbered in discovery order, tensors
in graph-then-creation order, so the lowered program is the same whatever
PYTHONHASHSEED is. Attributes whose key starts with ``_`` stay in Python;
``_stream`` becomes the core's stream index.
"""
import os
from typing import Dict, List

import numpy as np

from ._core_loader import core
from ._lowering_passes import (Entry, fold_transposes_into_matmuls, fold_updates_into_matmuls,
                               fuse_input_grads_with_updates, fuse_matmul_epilogues, mark_dead_ops,
                               prune_unread_outputs, reshapes_as_views)
from .streams import _Stream
from .tensor import Constant, Tensor, Variable

__all__ = ["LoweredProgram", "lower_ir"]

_KIND_INTERMEDIATE, _KIND_INPUT, _KIND_CONSTANT, _KIND_VARIABLE = 0, 1, 2, 3


class _SyntheticInput:
    """A graph input the passes add (a weight an update moved into a called
    graph writes); stands in for a Tensor in the lowering's tables."""

    def __init__(self, name, dtype, shape):
        self.id, self.dtype, self.shape = name, dtype, tuple(shape)


class LoweredProgram:
    """The core's ProgramDesc and Engine, and where each graph, tensor,
    stream and variable of the Ir went in them."""

    def __init__(self, desc, engine):
        self.desc, self.engine = desc, engine
        self.graph_index: Dict[object, int] = {}
        self.tensor_index: Dict[Tensor, int] = {}
        self.stream_index: Dict[_Stream, int] = {}
        self.streams: List[_Stream] = []
        self.stream_item_bytes: List[int] = []
        self.variables: List[Variable] = []


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


# IPUXL_NO_FUSION=1 lowers every op as written (for debugging and A/B timing).
_NO_FUSION = os.environ.get("IPUXL_NO_FUSION", "") not in ("", "0")


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
            skip, rewired = fold_transposes_into_matmuls(g)
            fused = fuse_matmul_epilogues(g, skip, rewired)
        entries = []
        for op in g._ops:
            if op in skip:
                continue
            e = Entry(op, op.inputs, op.outputs, _core_attrs(op, prog))
            if op in rewired:
                e.inputs, flags = list(rewired[op][0]), rewired[op][1]
                e.attrs["trans_lhs"], e.attrs["trans_rhs"] = flags
            if op in fused:
                inputs, final, e.attrs["epilogue"] = fused[op]
                e.inputs, e.outputs = list(inputs), [final]
            entries.append(e)
        lowered[g] = entries
    # 2. Results nobody reads are not computed.
    graph_outputs = prune_unread_outputs(ir, graphs, lowered)
    graph_inputs = {g: list(g._inputs) for g in graphs}
    # 3. Weight updates accumulate into the weights in the GEMM of their gradient.
    if not _NO_FUSION:
        def new_input(g, like):
            t = _SyntheticInput(f"{like.id}__updated_in_place", like.dtype, like.shape)
            prog.tensor_index[t] = desc.add_tensor(prog.graph_index[g], t.id, t.dtype._core_code,
                                                   list(t.shape), _KIND_INPUT)
            return t

        fold_updates_into_matmuls(graphs, lowered, graph_inputs, graph_outputs, new_input)
    for g in graphs:
        mark_dead_ops(lowered[g], graph_outputs[g])
        if not _NO_FUSION:
            fuse_input_grads_with_updates(lowered[g])
            reshapes_as_views(lowered[g], graph_outputs[g])
    # 4. Hand everything to the core.
    for g in graphs:
        gi = prog.graph_index[g]
        for e in lowered[g]:
            ins = [-1 if t is None else prog.tensor_index[t] for t in e.inputs]
            outs = [prog.tensor_index[t] for t in e.outputs]
            desc.add_op(gi, e.type, e.op.name, ins, outs, e.attrs,
                        [prog.graph_index[cg] for cg in e.graphs],
                        [tuple(a) for a in e.aliases])
        desc.set_graph_io(gi, [prog.tensor_index[t] for t in graph_inputs[g]],
                          [prog.tensor_index[t] for t in graph_outputs[g]])
    prog.engine = core.Engine(desc, prog.graph_index[ir.main_graph])
    return prog
