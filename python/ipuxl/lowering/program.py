"""The lowered program in Python form, and its hand-over to the C++ core.

A :class:`Program` lists, for every graph reachable from the main graph, the
ops the core will see (one :class:`Entry` each, in schedule order) and the
graph's inputs and outputs. The faithful lowering builds it from the Ir;
host passes (``lowering.host_passes``) rewrite a copy of it; :func:`to_desc`
turns either into the core's ``ProgramDesc``.

Graphs are numbered in discovery order and tensors in graph-then-creation
order, so the description is the same whatever PYTHONHASHSEED is.
"""
from typing import Dict, List, Optional

import numpy as np

from .._core_loader import core
from ..opdef import _REGISTRY

__all__ = ["Entry", "Program", "SyntheticTensor", "to_desc", "TENSOR_KINDS", "EXEC_CONTEXTS"]

#: The core's TensorKind.
TENSOR_KINDS = {"intermediate": 0, "input": 1, "constant": 2, "variable": 3}
#: PopART's execution contexts, in the core's ExecContext order.
EXEC_CONTEXTS = ("normal", "accumulate_outer", "weights_from_host", "weights_to_host",
                 "optimizer_from_host", "subgraph")


class Entry:
    """One op as the core receives it.

    ``op`` is the Ir op it comes from (host passes keep it for names and
    placement). ``kernel`` names the C++ kernel (``kind == "kernel"``);
    ``attrs`` holds kernel attributes only; ``modified`` the inputs it
    writes; ``skip``: validated and built but never run (host plan only).
    """

    __slots__ = ("op", "type", "kind", "kernel", "inputs", "outputs", "attrs", "aliases",
                 "modified", "side_effects", "graphs", "stream", "trip_count", "branch_inputs",
                 "skip", "remote_buffer", "collective", "exchange_group")

    def __init__(self, op, kind, kernel, inputs, outputs, attrs, aliases, modified,
                 side_effects, graphs=(), stream=-1, trip_count=0, branch_inputs=(),
                 skip=False, type=None, remote_buffer=None, collective=None):  # noqa: A002
        self.op = op
        self.type = type or op.type
        self.kind = kind
        self.kernel = kernel
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.attrs = attrs
        self.aliases = [tuple(a) for a in aliases]
        self.modified = sorted(set(modified))
        self.side_effects = side_effects
        self.graphs = list(graphs)
        self.stream = stream
        self.trip_count = trip_count
        self.branch_inputs = [list(b) for b in branch_inputs]
        self.skip = skip
        #: remote_load / remote_store: the RemoteBuffer.
        self.remote_buffer = remote_buffer
        #: collective: (kind code, reduction code, group of each replica).
        self.collective = collective
        #: Members of one MultiExchange share a group number (-1: none).
        self.exchange_group = -1

    def copy(self) -> "Entry":
        e = object.__new__(Entry)
        for k in Entry.__slots__:
            v = getattr(self, k)
            setattr(e, k, list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else v)
        e.branch_inputs = [list(b) for b in self.branch_inputs]
        return e

    def written_inputs(self):
        return [self.inputs[i] for i in self.modified
                if 0 <= i < len(self.inputs) and self.inputs[i] is not None]

    def __repr__(self):
        return f"Entry({self.kernel or self.kind}: {self.op.name})"


class SyntheticTensor:
    """A tensor a host pass adds (a graph input for a weight an update moved
    into a called graph writes); stands in for an Ir Tensor."""

    def __init__(self, graph, name, dtype, shape):
        self.graph = graph
        self.id, self.dtype, self.shape = name, dtype, tuple(shape)


class Program:
    """Graphs (``graphs[0]`` is the main graph), each graph's entries, inputs
    and outputs, and the host streams."""

    def __init__(self, ir, graphs, entries, graph_inputs, graph_outputs, streams,
                 remote_buffers=(), replicas: int = 1):
        self.ir = ir
        self.remote_buffers: List = list(remote_buffers)
        self.replicas = replicas
        self.graphs: List = graphs
        self.entries: Dict[object, List[Entry]] = entries
        self.graph_inputs: Dict[object, list] = graph_inputs
        self.graph_outputs: Dict[object, list] = graph_outputs
        self.streams: List = streams
        self.synthetic: List[SyntheticTensor] = []

    def copy(self) -> "Program":
        p = Program(self.ir, list(self.graphs),
                    {g: [e.copy() for e in es] for g, es in self.entries.items()},
                    {g: list(v) for g, v in self.graph_inputs.items()},
                    {g: list(v) for g, v in self.graph_outputs.items()}, list(self.streams),
                    self.remote_buffers, self.replicas)
        p.synthetic = list(self.synthetic)
        return p

    def new_input(self, g, like, suffix: str) -> SyntheticTensor:
        """A new tensor of graph ``g`` shaped like ``like`` (for host passes)."""
        t = SyntheticTensor(g, f"{like.id}__{suffix}", like.dtype, like.shape)
        self.synthetic.append(t)
        return t


def _placement(t) -> tuple:
    """A tensor's (IPU, tile set code): an op's output where the op put it
    (an IpuCopy's on its destination); a tensor without a producer
    (variable, constant, graph input) on the IPU PopART infers for it from
    its call sites or consumers."""
    ipu = getattr(t, "_ipu", 0)
    if getattr(t, "_producer", True) is None and hasattr(t, "_virtual_graph_id"):
        inferred = t._virtual_graph_id()
        if inferred != -1:
            ipu = inferred
    return ipu if ipu is not None else 0, 1 if getattr(t, "_tile_set", "compute") == "io" else 0


def to_desc(prog: Program, with_data: bool = True):
    """The core ProgramDesc of ``prog``, and ``{tensor: core index}``,
    ``{stream: core index}``. ``with_data=False`` leaves constants' data out
    (a description for reports, never run)."""
    from ..tensor import Constant, Variable

    desc = core.ProgramDesc()
    desc.replicas = prog.replicas
    if getattr(prog.ir, "_popdist", None) is not None:
        desc.global_replicas = prog.ir.replication_factor  # several instances (popdist)
    remote_index = {}
    for i, rb in enumerate(prog.remote_buffers):
        remote_index[id(rb)] = desc.add_remote_buffer(
            getattr(rb, "_name", f"remote_buffer_{i}"), rb.tensor_dtype._core_code,
            list(rb.tensor_shape), int(rb.entries))
    stream_index = {}
    for s in prog.streams:
        stream_index[s] = desc.add_stream(s.tensor_id, s.dtype._core_code, list(s.shape),
                                          s._direction == "h2d")
    graph_index = {}
    for g in prog.graphs:
        graph_index[g] = desc.add_graph(g.name or "main")
    tensor_index: Dict[object, int] = {}
    for g in prog.graphs:
        gi = graph_index[g]
        inputs = set(map(id, g._inputs))
        for t in g._tensors.values():
            if t._remote is not None:
                continue  # a remote variable: in Streaming Memory, not a device tensor
            if isinstance(t, Variable):
                kind = TENSOR_KINDS["variable"]
            elif isinstance(t, Constant):
                kind = TENSOR_KINDS["constant"]
            elif id(t) in inputs:
                kind = TENSOR_KINDS["input"]
            else:
                kind = TENSOR_KINDS["intermediate"]
            ipu, tile_set = _placement(t)
            idx = desc.add_tensor(gi, t.id, t.dtype._core_code, list(t.shape), kind, ipu, tile_set)
            tensor_index[t] = idx
            if kind == TENSOR_KINDS["constant"] and with_data:
                desc.set_tensor_data(idx, np.ascontiguousarray(t._host_data))
    for t in prog.synthetic:
        tensor_index[t] = desc.add_tensor(graph_index[t.graph], t.id, t.dtype._core_code,
                                          list(t.shape), TENSOR_KINDS["input"])
    for g in prog.graphs:
        gi = graph_index[g]
        for e in prog.entries[g]:
            op = e.op
            ins = [-1 if t is None else tensor_index[t] for t in e.inputs]
            outs = [tensor_index[t] for t in e.outputs]
            desc.add_op(gi, e.type, op.name, ins, outs, e.attrs,
                        [graph_index[cg] for cg in e.graphs], e.aliases,
                        kernel=e.kernel or "", kind=_KIND_CODES[e.kind], modified=e.modified,
                        side_effects=e.side_effects, ipu=op.ipu if op.ipu is not None else 0,
                        tile_set=1 if op.tile_set == "io" else 0,
                        context=EXEC_CONTEXTS.index(op.execution_context),
                        stream=stream_index[e.stream] if e.stream != -1 else -1,
                        trip_count=e.trip_count, branch_inputs=e.branch_inputs, skip=e.skip,
                        cost_class=_cost_class(e.type),
                        remote_buffer=remote_index[id(e.remote_buffer)]
                        if e.remote_buffer is not None else -1,
                        exchange_group=e.exchange_group,
                        **_collective_fields(e.collective))
        desc.set_graph_io(gi, [tensor_index[t] for t in prog.graph_inputs[g]],
                          [tensor_index[t] for t in prog.graph_outputs[g]])
    return desc, tensor_index, stream_index


def _cost_class(op_type: str) -> str:
    """The IPU model's cost class of an op type (``OpDef.model``); "" for
    types only host passes create (the model never sees them)."""
    d = _REGISTRY.get(op_type)
    return d.model if d is not None else ""


def _collective_fields(c) -> dict:
    if c is None:
        return {}
    kind, op, group_of = c
    return {"collective_kind": int(kind), "reduce_op": int(op), "group_of": list(group_of)}


_KIND_CODES = {k: i for i, k in enumerate(("kernel", "call", "repeat", "if", "host_load",
                                           "host_store", "collective", "remote_load",
                                           "remote_store", "ipu_copy"))}
# (multi_exchange: expanded into its members)


def stream_of(e: Entry) -> Optional[object]:
    return e.stream if e.kind in ("host_load", "host_store") else None
