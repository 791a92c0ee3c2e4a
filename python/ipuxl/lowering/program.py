"""The lowered program in Python form, and its hand-over to the C++ core.

A :class:`Program` lists, for every graph reachable from the main graph, the
ops the core will see (one :class:`Entry` each, in schedule order) and the
graph's inputs and outputs. The faithful lowering builds it from the Ir;
host passes (``lowering.host_passes``) rewrite a copy of it; :func:`to_desc`
turns either into the core's ``ProgramDesc``.

Graphs are numbered in discovery order and tensors in graph-then-creation
order, so the description is the same whatever PYTHONHASHSEED is.
"""
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Dict, List, Optional, Tuple

import numpy as np

from .._core_loader import core

__all__ = ["Entry", "Program", "LoweredTensor", "SyntheticTensor", "DescMemo", "to_desc",
           "tensor_record"]


@dataclass(frozen=True, eq=False)
class Entry:
    """One op as the core receives it: every field of its core OpRecord.

    ``op`` is the Ir op it comes from, kept for host passes' pattern checks
    and messages; :func:`to_desc` reads only the other fields. ``kernel``
    names the C++ kernel (``kind == "kernel"``); ``attrs`` holds kernel
    attributes only; ``modified`` the inputs it writes; ``skip``: validated
    and built but never run (host plan only). ``name``, ``ipu``,
    ``tile_set``, ``context``: the op's name and placement; ``cost``: its
    OpDef's :class:`~ipuxl.opdef.Cost` (None: undeclared, or a host pass's
    op, which the IPU model never sees); ``code_load_graph``: the graph a
    code load loads. ``view_streaming_memory`` (remote_load) and
    ``write_host_directly`` (host_store) are host-pass decisions.
    The record is frozen: host passes put a changed copy in its place
    (:meth:`derive`); they may still edit its lists in place. Entries
    compare by identity, as list positions are looked up by entry.
    """

    op: object
    kind: str
    kernel: Optional[str]
    inputs: list
    outputs: list
    attrs: dict
    aliases: list
    modified: list
    side_effects: bool
    graphs: list = field(default_factory=list)
    stream: object = -1
    trip_count: int = 0
    branch_inputs: list = field(default_factory=list)
    skip: bool = False
    type: str = ""
    #: remote_load / remote_store: the RemoteBuffer.
    remote_buffer: object = None
    #: collective: (kind code, reduction code, group of each replica).
    collective: Optional[tuple] = None
    #: Members of one MultiExchange share a group number (-1: none).
    exchange_group: int = -1
    name: str = ""
    ipu: int = 0
    tile_set: str = "compute"
    context: str = "normal"
    cost: object = None
    code_load_graph: object = None
    view_streaming_memory: bool = False
    write_host_directly: bool = False

    def __post_init__(self):
        # Own copies of the sequences (a derived entry shares none with its source).
        _own_sequences(self.__dict__)

    @classmethod
    def make(cls, **values) -> "Entry":
        """``Entry(**values)``, without the dataclass's field-by-field
        ``__setattr__`` (lowering makes one entry per op, copies one per op)."""
        self = object.__new__(cls)
        d = self.__dict__
        d.update(_ENTRY_DEFAULTS)
        d.update(values)
        if len(d) != len(_ENTRY_DEFAULTS) + len(_ENTRY_REQUIRED):
            # A missing or unknown field: the dataclass names it.
            return cls(**values)
        _own_sequences(d)
        return self

    @classmethod
    def _of(cls, values: dict) -> "Entry":
        """An entry of ``values``: every field, its sequences already its own
        (lowering's one entry per op; checked against the fields)."""
        self = object.__new__(cls)
        self.__dict__.update(values)
        if len(values) != len(_ENTRY_DEFAULTS) + len(_ENTRY_REQUIRED):
            return cls(**values)  # a missing or unknown field: the dataclass names it
        return self

    def derive(self, **changes) -> "Entry":
        """A copy with ``changes`` (the same op, name and placement):
        ``dataclasses.replace``, without its field-by-field ``__init__``."""
        if not _ENTRY_FIELDS.issuperset(changes):
            return replace(self, **changes)  # an unknown field: replace names it
        new = object.__new__(Entry)
        d = new.__dict__
        d.update(self.__dict__)
        d.update(changes)
        _own_sequences(d)
        return new

    def copy(self) -> "Entry":
        """A copy with its own attrs and sequences (``derive(attrs=dict(attrs))``)."""
        new = object.__new__(Entry)
        d = new.__dict__
        d.update(self.__dict__)
        d["attrs"] = dict(self.attrs)
        _own_sequences(d)
        return new

    def written_inputs(self):
        return [self.inputs[i] for i in self.modified
                if 0 <= i < len(self.inputs) and self.inputs[i] is not None]

    def __repr__(self):
        return f"Entry({self.kernel or self.kind}: {self.name})"


def _own_sequences(d: dict) -> None:
    """Replace an entry's sequences (in its ``__dict__``) by its own copies."""
    d["inputs"] = list(d["inputs"])
    d["outputs"] = list(d["outputs"])
    a = d["aliases"]
    d["aliases"] = [tuple(x) for x in a] if a else []
    m = d["modified"]
    d["modified"] = sorted(set(m)) if m else []
    d["graphs"] = list(d["graphs"])
    b = d["branch_inputs"]
    d["branch_inputs"] = [list(x) for x in b] if b else []


_ENTRY_DEFAULTS = {f.name: f.default if f.default is not MISSING else f.default_factory()
                   for f in fields(Entry)
                   if f.default is not MISSING or f.default_factory is not MISSING}
_ENTRY_REQUIRED = tuple(f.name for f in fields(Entry) if f.name not in _ENTRY_DEFAULTS)
_ENTRY_FIELDS = frozenset(f.name for f in fields(Entry))


@dataclass(frozen=True)
class LoweredTensor:
    """One tensor as the core receives it: ``tensor`` is the Ir tensor (or
    a host pass's :class:`SyntheticTensor`) that entries name; ``kind`` one
    of the core's TensorKind names; ``data``: a constant's value."""

    tensor: object
    name: str
    dtype: object
    shape: Tuple[int, ...]
    kind: str
    ipu: int = 0
    tile_set: str = "compute"
    data: Optional[np.ndarray] = None


def tensor_record(t, kind: str) -> LoweredTensor:
    """The record of Ir tensor ``t`` of kind ``kind`` (placed as
    :func:`_placement` says; a constant with its data)."""
    ipu, tile_set = _placement(t)
    # The frozen dataclass's __init__ sets each field through
    # object.__setattr__; lowering makes one record per tensor.
    r = object.__new__(LoweredTensor)
    r.__dict__.update(tensor=t, name=t.id, dtype=t.dtype, shape=tuple(t.shape), kind=kind,
                      ipu=ipu, tile_set=tile_set,
                      data=t._host_data if kind == "constant" else None)
    return r


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
                 remote_buffers=(), replicas: int = 1, tensors=None,
                 global_replicas: Optional[int] = None):
        self.ir = ir
        #: Replicas of all instances together (popdist), None for one instance.
        self.global_replicas = global_replicas
        #: Each graph's tensors, as the core receives them, in creation order.
        self.tensors: Dict[object, List[LoweredTensor]] = tensors or {}
        self.remote_buffers: List = list(remote_buffers)
        self.replicas = replicas
        self.graphs: List = graphs
        self.entries: Dict[object, List[Entry]] = entries
        self.graph_inputs: Dict[object, list] = graph_inputs
        self.graph_outputs: Dict[object, list] = graph_outputs
        self.streams: List = streams
        self.synthetic: List[SyntheticTensor] = []
        #: ``{id(entry): the entry of another program it is a copy of}`` (copy()).
        self.copied_from: Dict[int, Entry] = {}

    def copy(self) -> "Program":
        """A copy with copies of every entry (which host passes may edit);
        ``copied_from`` maps ``id`` of each new entry to the entry it copies."""
        entries = {g: [e.copy() for e in es] for g, es in self.entries.items()}
        p = Program(self.ir, list(self.graphs), entries,
                    {g: list(v) for g, v in self.graph_inputs.items()},
                    {g: list(v) for g, v in self.graph_outputs.items()}, list(self.streams),
                    self.remote_buffers, self.replicas,
                    {g: list(v) for g, v in self.tensors.items()}, self.global_replicas)
        p.synthetic = list(self.synthetic)
        p.copied_from = {id(n): o for g, es in self.entries.items()
                         for o, n in zip(es, entries[g])}
        return p

    def new_input(self, g, like, suffix: str) -> SyntheticTensor:
        """A new tensor of graph ``g`` shaped like ``like`` (for host passes)."""
        t = SyntheticTensor(g, f"{like.id}__{suffix}", like.dtype, like.shape)
        self.synthetic.append(t)
        return t


def _placement(t) -> tuple:
    """A tensor's (IPU, tile set name): an op's output where the op put it
    (an IpuCopy's on its destination); a tensor without a producer
    (variable, constant, graph input) on the IPU PopART infers for it from
    its call sites or consumers."""
    ipu = getattr(t, "_ipu", 0)
    if getattr(t, "_producer", True) is None and hasattr(t, "_virtual_graph_id"):
        inferred = t._virtual_graph_id()
        if inferred != -1:
            ipu = inferred
    tile_set = "io" if getattr(t, "_tile_set", "compute") == "io" else "compute"
    return ipu if ipu is not None else 0, tile_set


_CODES: Dict[object, Dict[str, int]] = {}


def _table(enum) -> Dict[str, int]:
    """``{name: code}`` of a core enum. pybind11's ``__members__`` builds a
    new dict on every access: it is read once per enum (to_desc looks up
    several codes for every op)."""
    table = _CODES.get(enum)
    if table is None:
        table = _CODES[enum] = {n: int(v) for n, v in enum.__members__.items()}
    return table


def _code(enum, name: str) -> int:
    return _table(enum)[name]


class DescMemo:
    """What one :func:`to_desc` call leaves for a later call on a copy of
    its program (``build``: the faithful description, then the host one):
    the tensor records and each entry's op record. The later call reuses a
    record only where nothing it depends on differs: the same graphs,
    streams, remote buffers and tensor records, in the same order (so the
    same core indices), and an entry equal, field by field, to the one it
    was copied from (``Program.copied_from``)."""

    def __init__(self):
        self.key: Optional[tuple] = None
        self.trecs: list = []
        self.ops: Dict[int, tuple] = {}  # id(entry) -> (entry, op record)


def _same_entry(a: "Entry", b: "Entry") -> bool:
    try:
        return a.__dict__ == b.__dict__
    except Exception:  # a field whose == raises (a Graph against None): not reused
        return False


def to_desc(prog: Program, with_data: bool = True, with_index: bool = True,
            memo: Optional[DescMemo] = None):
    """The core ProgramDesc of ``prog``, and ``{tensor: core index}``,
    ``{stream: core index}``. ``with_data=False`` leaves constants' data out
    (a description for reports, never run); ``with_index=False`` gives None
    for the tensor index (the caller needs only the description).
    ``memo``: an empty :class:`DescMemo` is filled; a filled one is reused
    where it applies (the description is the same either way). It reads the program's own
    records (:class:`Entry`, :class:`LoweredTensor`) and the streams and
    remote buffers it lists: no Ir op, no Ir tensor, no OpDef."""
    desc = core.ProgramDesc()
    desc.replicas = prog.replicas
    if prog.global_replicas is not None:
        desc.global_replicas = prog.global_replicas  # several instances (popdist)
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
    tensor_kind, tile_set_code = _table(core.TensorKind), _table(core.TileSet)
    kind_code, context_code = _table(core.OpKind), _table(core.ExecContext)
    records = [(g, r) for g in prog.graphs for r in prog.tensors[g]]
    key = None
    if memo is not None:
        key = (tuple(map(id, prog.graphs)), tuple(map(id, prog.streams)),
               tuple(map(id, prog.remote_buffers)), tuple(id(r) for _g, r in records))
    reuse = memo is not None and memo.key is not None and memo.key == key
    fill = memo is not None and memo.key is None
    n_ir = len(records)
    records += [(t.graph, tensor_record(t, "input")) for t in prog.synthetic]
    # Records go to the core in one call per kind (add_tensors, add_ops):
    # tuples of add_tensor's / add_op's positional arguments.
    def trec(g, r):
        return (graph_index[g], r.name, r.dtype._core_code, r.shape, tensor_kind[r.kind], r.ipu,
                tile_set_code[r.tile_set])

    if reuse:
        trecs = memo.trecs + [trec(g, r) for g, r in records[n_ir:]]
    else:
        trecs = [trec(g, r) for g, r in records]
    if fill:
        memo.trecs = trecs[:n_ir]
    first = desc.add_tensors(trecs)
    tensors = [r.tensor for _g, r in records]
    indices = range(first, first + len(tensors))
    # The index by object identity: Tensor.__hash__ is Python code, and ops
    # name their tensors by the objects the records hold (an equal but
    # different object falls back to tensor_index). As with assignments in
    # record order, a later record of an equal tensor wins.
    by_id: Dict[int, int] = dict(zip(map(id, tensors), indices))
    tensor_index: Optional[Dict[object, int]] = dict(zip(tensors, indices)) if with_index else None

    def index_of(t) -> int:
        """The core index of an Ir tensor equal to ``t`` (another object)."""
        nonlocal tensor_index
        if tensor_index is None:
            tensor_index = dict(zip(tensors, indices))
        return tensor_index[t]
    if with_data:
        for i, (_g, r) in enumerate(records, first):
            if r.data is not None:
                desc.set_tensor_data(i, np.ascontiguousarray(r.data))
    program_cost = _cost_fields(None, _code(core.CostClass, "program"))
    costs: Dict[int, tuple] = {}  # id(Cost) -> its fields (one per op type)
    no_collective = (0, 0, ())
    orecs = []
    add = orecs.append
    # An absent optional input (None) is index -1: one look-up per input.
    core_index = dict(by_id)
    core_index[id(None)] = -1
    index = core_index.__getitem__
    origin = prog.copied_from if reuse else {}
    kept = memo.ops if reuse else {}
    for g in prog.graphs:
        gi = graph_index[g]
        for e in prog.entries[g]:
            if reuse:
                o = origin.get(id(e))
                m = kept.get(id(o)) if o is not None else None
                if m is not None and m[1][0] == gi and _same_entry(m[0], e):
                    add(m[1])
                    continue
            try:
                ins = list(map(index, map(id, e.inputs)))
                outs = list(map(by_id.__getitem__, map(id, e.outputs)))
            except KeyError:
                ins = [-1 if t is None else index_of(t) for t in e.inputs]
                outs = [index_of(t) for t in e.outputs]
            if e.kind != "kernel":
                cost = program_cost
            else:
                cost = costs.get(id(e.cost))
                if cost is None:
                    cost = costs[id(e.cost)] = _cost_fields(e.cost)
            coll = e.collective
            coll_kind, reduce_op, group_of = no_collective if coll is None else \
                (int(coll[0]), int(coll[1]), list(coll[2]))
            stream = e.stream
            add((gi, e.type, e.name, ins, outs, e.attrs,
                 [graph_index[cg] for cg in e.graphs] if e.graphs else (), e.aliases,
                 e.kernel or "", kind_code[e.kind], e.modified, e.side_effects, e.ipu,
                 tile_set_code[e.tile_set], context_code[e.context],
                 stream_index[stream] if stream != -1 else -1,
                 e.trip_count, e.branch_inputs, e.skip, cost[0],
                 remote_index[id(e.remote_buffer)] if e.remote_buffer is not None else -1,
                 coll_kind, reduce_op, group_of, e.exchange_group,
                 cost[1], cost[2], cost[3], cost[4],
                 e.view_streaming_memory, e.write_host_directly,
                 graph_index.get(e.code_load_graph, -1)
                 if e.code_load_graph is not None else -1))
            if fill:
                memo.ops[id(e)] = (e, orecs[-1])
    desc.add_ops(orecs)
    for g in prog.graphs:
        gi = graph_index[g]
        desc.set_graph_io(gi, [_index(by_id, index_of, t) for t in prog.graph_inputs[g]],
                          [_index(by_id, index_of, t) for t in prog.graph_outputs[g]])
    if with_index and tensor_index is None:
        tensor_index = dict(zip(tensors, indices))
    if fill:
        memo.key = key
    return desc, tensor_index, stream_index


def _index(by_id: Dict[int, int], index_of, t) -> int:
    i = by_id.get(id(t))
    return i if i is not None else index_of(t)


def _cost_fields(cost, cls: Optional[int] = None) -> tuple:
    """The core's cost fields of a kernel entry's Cost, in ``add_op``'s
    order: (class, vertex, header, per_vector, unroll). None: class "none",
    which the IPU model refuses; ``cls`` overrides the class (non-kernels)."""
    if cost is None:
        return (_code(core.CostClass, "none") if cls is None else cls, "", [], [], [])
    return (int(cost.code), cost.vertex or "", list(cost.header), list(cost.per_vector),
            list(cost.unroll))


def stream_of(e: Entry) -> Optional[object]:
    return e.stream if e.kind in ("host_load", "host_store") else None
