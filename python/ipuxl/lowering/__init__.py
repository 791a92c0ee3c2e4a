"""Lowering of an Ir into the C++ core's program, in two pipelines.

1. :func:`lower`: the faithful lowering. Every op of every graph reachable
   from the main graph, as PopXL/PopART would build the program: one
   function per called graph (the core outlines them), call sites with
   their copies, loops, branches, host streams, and each op's placement
   (IPU, tile set, execution context). ``describe()``, reports and the IPU
   model see this program.
2. :mod:`~ipuxl.lowering.host_passes`: rewrites of a copy of it that only
   make the host faster (fusions, views, dead-op skipping), each checked
   and switchable by name.

:func:`build` runs both and builds the core Engine over the host program,
handing it the faithful one for descriptions.
"""
from typing import Dict, List

import numpy as np

from .._core_loader import apply_conv_options, core
from .._gc import gc_paused
from ..opdef import get_opdef
from . import host_passes
from .program import DescMemo, Entry, LoweredTensor, Program, to_desc

__all__ = ["lower", "build", "LoweredProgram", "Entry", "Program"]


def _reachable_graphs(ir) -> list:
    order, seen = [], set()
    queue = [ir.main_graph]
    head = 0
    while head < len(queue):
        g = queue[head]
        head += 1
        if g.name in seen:
            continue
        seen.add(g.name)
        order.append(g)
        for op in g._ops:
            for cg in op.called_graphs:
                if cg.name not in seen:
                    queue.append(cg)
    return order


def _kernel_attrs(op) -> dict:
    """The attributes a kernel reads: those not starting with ``_``, as plain
    Python values."""
    out = {}
    for k, v in op.attrs.items():
        if k.startswith("_"):
            continue
        if isinstance(v, np.ndarray):
            v = v.tolist()
        elif isinstance(v, np.integer):
            v = int(v)
        elif isinstance(v, np.floating):
            v = float(v)
        out[k] = v
    return out


def faithful_entry(op, exchange_group: int = -1, opdef=None) -> Entry:
    """The entry of one Ir op, with the facts its OpDef declares (``opdef``:
    the op type's, when the caller has it)."""
    d = opdef if opdef is not None else get_opdef(op.type)
    kind = d.kind
    stream, trip, branches, attrs = -1, 0, [], {}
    remote, collective, code_load = None, None, None
    if kind == "kernel":
        attrs = _kernel_attrs(op) if op.attrs else {}
        if d.cost_class == "code_load":
            code_load = op.attrs.get("_graph")
    elif kind in ("remote_load", "remote_store"):
        remote = op.attrs["_remote_buffer"]
    elif kind == "collective":
        collective = op.attrs["_collective"]
    elif kind in ("host_load", "host_store"):
        stream = op.attrs["_stream"]
    elif kind == "repeat":
        trip = int(op.attrs["repeat_count"])
    elif kind == "if":
        branches = [list(op.attrs["then_inputs"]), list(op.attrs["else_inputs"])]
    ipu = op.ipu
    # Every field of Entry, its sequences the entry's own copies (what
    # Entry.make does, without its keyword and default handling: one entry per op).
    return Entry._of({
        "op": op, "kind": kind, "kernel": d.kernel, "inputs": list(op.inputs),
        "outputs": list(op.outputs), "attrs": attrs,
        "aliases": [tuple(a) for a in op.aliases] if op.aliases else [],
        "modified": sorted(set(op.modified)) if op.modified else [],
        "side_effects": d.side_effects, "graphs": list(op.called_graphs), "stream": stream,
        "trip_count": trip, "branch_inputs": branches, "skip": False, "type": op.type,
        "remote_buffer": remote, "collective": collective, "exchange_group": exchange_group,
        "name": op.name, "ipu": ipu if ipu is not None else 0,
        "tile_set": "io" if op.tile_set == "io" else "compute",
        "context": op.execution_context, "cost": d.cost, "code_load_graph": code_load,
        "view_streaming_memory": False, "write_host_directly": False})


def _graph_entries(g, groups: list) -> list:
    """The entries of graph ``g``'s ops; a MultiExchange becomes its members,
    in order, marked as one exchange group (one sync on the IPU)."""
    out = []
    for op in g._ops:
        d = get_opdef(op.type)
        if d.kind != "multi_exchange":
            out.append(faithful_entry(op, opdef=d))
            continue
        k = len(groups)
        groups.append(op)
        for m in op.attrs["_members"]:
            out.append(faithful_entry(m, exchange_group=k))
    return out


def _check_remote(ir, graphs, entries) -> None:
    """Remote variables and constant offsets against their buffers' entries
    (entries can change while the program is built, so this is checked
    when it is lowered)."""
    from ..tensor import Constant

    owner = {}
    for v in ir.main_graph._tensors.values():
        if v._remote is None:
            continue
        rb, entry, _ = v._remote
        if entry >= rb.entries:
            raise ValueError(
                f"remote variable {v.id!r}: offset {entry} is out of range for remote buffer "
                f"{rb.remote_buffer_id} ({rb._name}) of {rb.entries} entries")
        key = (id(rb), entry)
        if key in owner:
            raise ValueError(
                f"remote variables {owner[key]!r} and {v.id!r} both live in entry {entry} of "
                f"remote buffer {rb.remote_buffer_id} ({rb._name}); give each its own offset")
        owner[key] = v.id
    for g in graphs:
        for e in entries[g]:
            rb = e.remote_buffer
            off = e.inputs[1] if rb is not None and len(e.inputs) > 1 else None
            if isinstance(off, Constant):
                k = int(np.asarray(off._host_data).reshape(-1)[0])
                if not 0 <= k < rb.entries:
                    raise ValueError(
                        f"{e.type} {e.op.name!r}: offset {k} (constant {off.id!r}) is out of "
                        f"range for remote buffer {rb.remote_buffer_id} ({rb._name}) of "
                        f"{rb.entries} entries")


def lower(ir) -> Program:
    """The faithful program of ``ir`` (see the module docstring)."""
    graphs = _reachable_graphs(ir)
    groups: list = []
    entries = {g: _graph_entries(g, groups) for g in graphs}
    _check_remote(ir, graphs, entries)
    # Remote buffers: those the Ir created, then any an op uses, in order.
    remote, seen = [], set()
    for rb in list(getattr(ir, "_remote_buffers", ())) + [
            e.remote_buffer for g in graphs for e in entries[g] if e.remote_buffer is not None]:
        if id(rb) not in seen:
            seen.add(id(rb))
            remote.append(rb)
    return Program(ir, graphs, entries, {g: list(g._inputs) for g in graphs},
                   {g: list(g._outputs) for g in graphs}, sorted(ir._streams), remote,
                   ir.instance_replication_factor, {g: _tensor_records(g) for g in graphs},
                   ir.replication_factor if getattr(ir, "_popdist", None) is not None else None)


def _tensor_records(g) -> list:
    """The core's records of graph ``g``'s tensors, in creation order; a
    remote variable lives in Streaming Memory, not on the device: none."""
    from ..tensor import Constant, Variable

    inputs = set(map(id, g._inputs))
    out = []
    new = object.__new__
    for t in g._tensors.values():
        if t._remote is not None:
            continue
        kind = ("variable" if isinstance(t, Variable) else "constant" if isinstance(t, Constant)
                else "input" if id(t) in inputs else "intermediate")
        # tensor_record(t, kind) for an Ir tensor, whose fields are all there.
        ipu = t._ipu
        if t._producer is None:
            inferred = t._virtual_graph_id_and_tile_set()[0]
            if inferred != -1:
                ipu = inferred
        r = new(LoweredTensor)
        r.__dict__.update(tensor=t, name=t._id, dtype=t._dtype, shape=tuple(t._shape), kind=kind,
                          ipu=ipu if ipu is not None else 0,
                          tile_set="io" if t._tile_set == "io" else "compute",
                          data=t._host_data if kind == "constant" else None)
        out.append(r)
    return out


class LoweredProgram:
    """The Engine built for a Session, and where each tensor, stream and
    variable of the Ir went in it."""

    def __init__(self, engine, faithful: Program, host: Program, tensor_index, stream_index,
                 passes: Dict[str, int]):
        from ..tensor import Variable

        self.engine = engine
        self.faithful = faithful
        # The host program's entries are not kept: the Engine has them, and
        # they are a quarter of the objects a large Session would keep alive.
        self.remote_buffers: List = list(host.remote_buffers)
        self.tensor_index = tensor_index
        self.stream_index = stream_index
        self.streams: List = list(host.streams)
        self.stream_item_bytes: List[int] = [
            int(np.prod(s.shape, dtype=np.int64)) * s.dtype.itemsize for s in self.streams]
        self.variables = [t for g in host.graphs for t in g._tensors.values()
                          if isinstance(t, Variable) and t._remote is None]
        #: Variables in remote buffers (Streaming Memory), in creation order.
        self.remote_variables = [t for t in host.ir.main_graph._tensors.values()
                                 if t._remote is not None]
        #: The core's index of each remote buffer.
        self.remote_index = {id(rb): i for i, rb in enumerate(host.remote_buffers)}
        #: Rewrites each host pass made.
        self.host_passes = passes
        #: Streams whose tensor the program computes in the run's output
        #: array (host pass direct_host_stores), when that is 64-byte aligned.
        self.direct_store_streams = [
            e.stream for e in host.entries[host.graphs[0]]
            if e.kind == "host_store" and e.write_host_directly]


def build(ir, passes=None) -> LoweredProgram:
    """Lower ``ir``, apply the selected host passes (see
    :func:`host_passes.enabled_passes`) and build the core Engine."""
    names = host_passes.enabled_passes(passes)
    with gc_paused():
        faithful = lower(ir)
        host = faithful.copy()
        counts = host_passes.apply(host, names)
        # The faithful description first (when it differs): the host one
        # reuses the records of the entries no pass changed.
        memo = DescMemo()
        faithful_desc = to_desc(faithful, with_data=False, with_index=False, memo=memo)[0] \
            if any(counts.values()) else None
        desc, tensor_index, stream_index = to_desc(host, memo=memo)
    apply_conv_options()
    engine = core.Engine(desc, 0, faithful_desc)
    lp = LoweredProgram(engine, faithful, host, tensor_index, stream_index, counts)
    # The faithful program's description, for the IPU model (the host one
    # when no host pass changed anything).
    lp.model_desc = faithful_desc if faithful_desc is not None else desc
    return lp
