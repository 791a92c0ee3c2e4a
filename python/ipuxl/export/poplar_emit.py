"""An Ir as a standalone Poplar C++ program (``ipuxl export poplar``).

:func:`export_poplar` writes, into a directory,

* ``program.cpp``: ``buildPrograms(graph, data)`` builds the faithful
  lowering of the Ir (:func:`ipuxl.lowering.lower`, never the host passes)
  with the documented Poplar / PopLibs API, and, unless ``main=False``,
  a ``main()`` that runs it as ``Session.run`` does (``--inputs in.npz
  --outputs out.npz``);
* ``program.hpp``: the Engine program indices (``WEIGHTS_FROM_HOST``,
  ``MAIN_PROGRAM``, ``WEIGHTS_TO_HOST``), the target and the stream names;
* ``codelets.cpp``: vertices for the ops ipuxl's PopLibs subset has no
  call for (only when the program has such ops);
* ``Makefile`` and ``CMakeLists.txt``;
* ``weights.npz``: every variable's value (by tensor id) and the data of
  the constants too large to write into the source (``constant/<k>``).

The program's structure follows the lowering: every variable and constant
is created once, with the tile mapping of ipuxl's IPU model (interval by
interval, :func:`ipuxl_export::mapRun`) or, for a tensor the model gives no
mapping, ``poputil::mapTensorLinearly``; each called graph is one
``poplar::Function`` (``graph.addFunction``) whose body exists once, and
each call site a ``Call`` with the copies into its inputs and out of its
outputs; ``repeat`` is one ``Repeat`` of the body's ``Call``; a conditional
one ``If``; host loads and stores ``Copy`` from and to FIFOs
(``addHostToDeviceFIFO`` / ``addDeviceToHostFIFO``); remote buffers
``addRemoteBuffer`` and ``Copy``. The per-op emission is
:mod:`.poplar_ops`; ops it does not know raise ``NotImplementedError``
naming the op.
"""
import os
from typing import Dict, List, Optional

import numpy as np

from . import poplar_ops
from .poplar_runtime import RUNTIME_CPP, cmakelists, main_cpp, makefile

__all__ = ["export_poplar", "PoplarEmitter", "POPLAR_TYPES", "NPY_DESCR"]

#: ipuxl dtype name -> Poplar element type.
POPLAR_TYPES = {
    "float32": "poplar::FLOAT", "float16": "poplar::HALF", "int32": "poplar::INT",
    "uint32": "poplar::UNSIGNED_INT", "bool": "poplar::BOOL", "int8": "poplar::SIGNED_CHAR",
    "uint8": "poplar::UNSIGNED_CHAR", "int16": "poplar::SHORT", "uint16": "poplar::UNSIGNED_SHORT",
}
#: ipuxl dtype name -> numpy descr of its host arrays.
NPY_DESCR = {
    "float32": "<f4", "float16": "<f2", "int32": "<i4", "uint32": "<u4", "bool": "|b1",
    "int8": "|i1", "uint8": "|u1", "int16": "<i2", "uint16": "<u2",
}
#: Ops per generated C++ function (compile time grows faster than linearly
#: with a function's size).
CHUNK_OPS = 200
#: Constants of at most this many elements are written into the source.
INLINE_CONSTANT_ELEMENTS = 64


def ptype(dtype) -> str:
    try:
        return POPLAR_TYPES[dtype.name]
    except KeyError:
        raise NotImplementedError(f"Poplar export: dtype {dtype.name} has no Poplar element "
                                  f"type in the export (supported: {', '.join(POPLAR_TYPES)})")


def cstr(s: str) -> str:
    """``s`` as a C++ string literal."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def shape_lit(shape) -> str:
    return "{" + ", ".join(f"{int(d)}u" for d in shape) + "}"


def _literal(v, dtype) -> str:
    if dtype.name in ("float32", "float16"):
        f = float(v)
        if np.isnan(f):
            return "NAN"
        if np.isinf(f):
            return "INFINITY" if f > 0 else "-INFINITY"
        return float(np.float32(f)).hex() + "f"
    if dtype.name == "bool":
        return "true" if bool(v) else "false"
    return str(int(v))


_CPP_ELEM = {"float32": "float", "float16": "float", "int32": "int", "uint32": "unsigned",
             "bool": "bool", "int8": "int", "uint8": "unsigned", "int16": "int",
             "uint16": "unsigned"}


class PoplarEmitter:
    """Walks the faithful program of an Ir and writes its C++ (see the
    module docstring). ``mapping``: ``{(graph name, tensor id): (ipu,
    set begin, set size, first, count, elements per tile)}`` from the IPU
    model; ``weights``: ``{Variable: array}`` overriding initial values."""

    def __init__(self, ir, mapping: Optional[dict] = None, weights: Optional[dict] = None,
                 tiles_per_ipu: int = 1472, num_ipus: int = 1, version: str = "ipu2",
                 num_io_tiles: int = 0):
        from ..lowering import lower

        self.ir = ir
        self.prog = lower(ir)
        self.mapping = mapping or {}
        self.weights = {id(k): v for k, v in (weights or {}).items()}
        self.tiles_per_ipu, self.num_ipus, self.version = tiles_per_ipu, num_ipus, version
        self.num_io_tiles = int(num_io_tiles)
        self.placed: Dict[int, Optional[str]] = {}  # id(tensor) -> the tile set it was put on
        self.function_buffers: set = set()     # F[] slots given a FunctionBuffer
        self.replicas = int(self.prog.replicas)
        #: id(variable) -> the row of its stored value each replica reads (None: one row)
        self.weight_rows: Dict[int, Optional[List[int]]] = {}
        self.index: Dict[int, int] = {}        # id(tensor) -> T[] slot
        self.lines: List[str] = []             # the body being written
        self.functions: List[str] = []         # C++ functions of graph bodies
        self.graph_fn: Dict[int, int] = {}     # id(graph) -> F[] slot
        self.function_graphs: List[str] = []   # graph name by F[] slot (addFunction order)
        self._sites: Optional[Dict[int, list]] = None  # id(graph) -> entries calling it
        self._aliased: Dict[int, set] = {}     # id(graph) -> input indices aliased at its calls
        self.codelets: Dict[str, str] = {}     # vertex name -> source
        self.helpers: set = set()              # names of poplar_ops C++ helpers used
        self.data: Dict[str, np.ndarray] = {}  # weights.npz
        self.linear_mapped: List[str] = []     # tensors mapped linearly (no model mapping)
        self.model_mapped = 0
        self.var_streams: List[tuple] = []     # (handle, key, tensor, T slot)
        self.remote_vars: List[tuple] = []     # (buffer handle, entry, key, tensor)
        #: key -> (shard size, shards, members of each group), for replica-sharded ones
        self.remote_shards: Dict[str, tuple] = {}
        self.streams: Dict[object, str] = {}   # HostToDevice/DeviceToHost stream -> C++ var
        self.remote: Dict[int, str] = {}       # id(RemoteBuffer) -> C++ var
        self.counts = {"functions": 0, "calls": 0, "repeats": 0, "ifs": 0}
        self._main_name = self.prog.graphs[0].name or "main"
        self._graph_name = self._main_name
        self._seq = 0

    # ---- tensors
    def slot(self, t) -> int:
        k = self.index.get(id(t))
        if k is None:
            k = self.index[id(t)] = len(self.index)
        return k

    def t(self, t) -> str:
        """The C++ expression of an Ir tensor already defined."""
        if id(t) not in self.index:
            raise NotImplementedError(f"Poplar export: tensor {t.id!r} is read before the "
                                      "exported program defines it")
        return f"T[{self.index[id(t)]}]"

    def define(self, t, expr: str) -> str:
        ref = f"T[{self.slot(t)}]"
        self.line(f"{ref} = {expr};")
        return ref

    def alias(self, t, other) -> None:
        """``t`` is the same Poplar tensor as ``other`` (an in-place output)."""
        self.define(t, self.t(other))

    def line(self, s: str) -> None:
        self.lines.append("  " + s)

    def fresh(self, base: str) -> str:
        self._seq += 1
        return f"{base}{self._seq}"

    def model_mapping(self, t, graph_name: Optional[str] = None):
        """The IPU model's mapping of ``t`` (see the class docstring), or None."""
        m = self.mapping.get((graph_name or self._graph_name, t.id))
        if m is not None and m[6] != int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize:
            m = None  # the model's tensor of that name is another one
        return m

    def map_tensor(self, ref: str, t, graph_name: Optional[str] = None) -> None:
        """Maps a new variable or constant: the IPU model's mapping, else linear."""
        m = self.model_mapping(t, graph_name)
        nelms = int(np.prod(t.shape, dtype=np.int64))
        if m is not None and nelms > 0:
            from .poplar_host import _elements_mapping

            ipu, base, size, first, count, per = _elements_mapping(m, t.dtype.itemsize)
            if self.num_io_tiles:
                self.placed[id(t)] = "io" if base == 0 else "compute"
            self.line(f"ipuxl_export::mapRun(graph, {ref}, {self.tiles_per_ipu}, {ipu}, {base}, "
                      f"{size}, {first}, {count}, {per});")
            self.model_mapped += 1
        else:
            self.line(f"poputil::mapTensorLinearly(graph, {ref});")
            self.linear_mapped.append(t.id)

    def new_variable(self, t, name: Optional[str] = None, graph_name: Optional[str] = None) -> str:
        ref = self.define(t, f"graph.addVariable({ptype(t.dtype)}, {shape_lit(t.shape)}, "
                             f"{cstr(name or t.id)})")
        self.map_tensor(ref, t, graph_name)
        return ref

    def new_constant(self, t) -> str:
        value = np.asarray(t._host_data).astype(t.dtype.as_numpy(), copy=False).reshape(t.shape)
        flat = value.reshape(-1)
        pt = ptype(t.dtype)
        if flat.size <= INLINE_CONSTANT_ELEMENTS:
            elem = _CPP_ELEM[t.dtype.name]
            vals = ", ".join(_literal(v, t.dtype) for v in flat)
            ref = self.define(t, f"graph.addConstant<{elem}>({pt}, {shape_lit(t.shape)}, "
                                 f"std::vector<{elem}>{{{vals}}}, {cstr(t.id)})")
        else:
            key = f"constant/{len(self.data)}"
            self.data[key] = value
            ref = self.define(t, f"ipuxl_export::constantFrom(graph, data, {cstr(key)}, {pt}, "
                                 f"{shape_lit(t.shape)}, {cstr(NPY_DESCR[t.dtype.name])})")
            self.helpers.add("constantFrom")
        self.map_tensor(ref, t)
        return ref

    # ---- streams and buffers
    def stream(self, s) -> str:
        name = self.streams.get(s)
        if name is None:
            name = self.streams[s] = f"S{len(self.streams)}"
        return name

    def remote_buffer(self, rb) -> str:
        name = self.remote.get(id(rb))
        if name is None:
            name = self.remote[id(rb)] = f"RB{len(self.remote)}"
        return name

    # ---- graphs
    def emit_graph_ops(self, g) -> None:
        for e in self.prog.entries[g]:
            self.emit_entry(e)

    def emit_entry(self, e) -> None:
        kind = e.kind
        self.line(f"// {e.type} {e.name}")
        if kind in ("call", "repeat", "if"):
            self.emit_control(e)
        elif kind in ("host_load", "host_store", "remote_load", "remote_store"):
            start = len(self.lines)
            self._data_movement(e)
            if self._own_graphs():
                self._on_ipu_graph(e, start)
        elif kind == "ipu_copy":
            src, out = e.inputs[0], e.outputs[0]
            dst_ipu = int(getattr(out, "_ipu", 0) or 0)
            ref = self.define(out, f"poputil::cloneToIpu(graph, {self.t(src)}, {dst_ipu}, "
                                   f"{cstr(out.id)})")
            self.line(f"prog.add(poplar::program::Copy({self.t(src)}, {ref}));")
        elif kind in ("collective", "kernel"):
            start = len(self.lines)
            (poplar_ops.emit_collective if kind == "collective" else poplar_ops.emit_kernel)(self, e)
            if self._own_graphs() and not (kind == "kernel" and poplar_ops.whole_graph(e)):
                self._on_ipu_graph(e, start)
        else:
            raise NotImplementedError(f"Poplar export: op {e.type} ({e.name!r}) of kind {kind!r} "
                                      "is not supported")

    def aliased_inputs(self, g) -> Dict[int, object]:
        """Inputs of called graph ``g`` that are the caller's tensor itself,
        with no copy at the call: as PopART's AliasZeroCopy (and ipuxl's
        IPU model) alias a parameter bound to the same caller tensor at every
        call site. Only for graphs every site of which is a ``call``; an
        input the body writes (itself or through a view) only when every
        site passes it by reference, its writes going back anyway.
        ``{input index: caller tensor}``."""
        if self._sites is None:
            self._sites = {}
            for h in self.prog.graphs:
                for e in self.prog.entries[h]:
                    for cg in e.graphs:
                        self._sites.setdefault(id(cg), []).append(e)
        sites = self._sites.get(id(g), [])
        if not sites or any(e.kind != "call" for e in sites):
            return {}
        written = self._written_roots(g)
        out = {}
        for i, gi in enumerate(self.prog.graph_inputs[g]):
            xs = [e.inputs[i] if i < len(e.inputs) else None for e in sites]
            if xs[0] is None or any(x is not xs[0] for x in xs):
                continue
            if sum(x is xs[0] for x in sites[0].inputs) > 1:
                continue  # one tensor at two positions: a write through one must not show in the other
            if id(gi) in written and not all(i in e.modified for e in sites):
                continue
            out[i] = xs[0]
        return out

    def _storage_root(self, g):
        """``root(tensor) -> id``: the storage each tensor of ``g`` is a view
        of, through its ops' (output, input) alias pairs."""
        parent: Dict[int, int] = {}

        def find(t: int) -> int:
            while parent.get(t, t) != t:
                t = parent[t]
            return t

        for e in self.prog.entries[g]:
            for o, i in e.aliases:
                if o < len(e.outputs) and i < len(e.inputs) and e.inputs[i] is not None:
                    parent[find(id(e.outputs[o]))] = find(id(e.inputs[i]))
        return lambda t: find(id(t))

    def _written_roots(self, g) -> set:
        """ids of the inputs of ``g`` whose storage an op of ``g`` writes
        (itself or through a view)."""
        root = self._storage_root(g)
        roots = {root(t) for e in self.prog.entries[g] for t in e.written_inputs()}
        return {id(t) for t in self.prog.graph_inputs[g] if root(t) in roots}

    def aliased_outputs(self, g) -> set:
        """Outputs of ``g`` its call site reads in place (no copy out): when
        ``g`` has one site, a ``call``, and the output is storage of the
        body's own, not a view of an input."""
        sites = (self._sites or {}).get(id(g), [])
        if len(sites) != 1 or sites[0].kind != "call":
            return set()
        root = self._storage_root(g)
        inputs = {root(t) for t in self.prog.graph_inputs[g]}
        outs = self.prog.graph_outputs[g]
        return {k for k, t in enumerate(outs)
                if root(t) not in inputs and sum(o is t for o in outs) == 1}


    def _data_movement(self, e) -> None:
        """Host and remote-buffer transfers: Copy to / from the stream or buffer."""
        kind = e.kind
        if kind == "host_load":
            s = self.stream(e.stream)
            out = e.outputs[0]
            ref = self.new_variable(out)
            self.line(f"prog.add(poplar::program::Copy({s}, {ref}));")
        elif kind == "host_store":
            s = self.stream(e.stream)
            self.line(f"prog.add(poplar::program::Copy({self.t(e.inputs[0])}, {s}));")
        elif kind == "remote_load":
            rb = self.remote_buffer(e.remote_buffer)
            dst, off = e.inputs[0], e.inputs[1]
            if dst is None:
                ref = self.new_variable(e.outputs[0])
            else:
                ref = self.t(dst)
                self.alias(e.outputs[0], dst)
            self.line(f"prog.add(poplar::program::Copy({rb}, {ref}, "
                      f"ipuxl_export::offsetOf(graph, {self.t(off)}, prog)));")
            self.helpers.add("offsetOf")
        elif kind == "remote_store":
            rb = self.remote_buffer(e.remote_buffer)
            src, off = e.inputs[0], e.inputs[1]
            self.line(f"prog.add(poplar::program::Copy({self.t(src)}, {rb}, "
                      f"ipuxl_export::offsetOf(graph, {self.t(off)}, prog)));")
            self.helpers.add("offsetOf")

    def tile_set_of(self, t) -> Optional[str]:
        """``"io"`` / ``"compute"``: the tile set ``t`` was put on (by the
        model's mapping, or by the graph its op was built on), else the one
        the IPU model maps it to; None: unknown, or no IO tiles."""
        if id(t) in self.placed:
            return self.placed[id(t)]
        m = self.model_mapping(t)
        if m is None or self.num_io_tiles == 0:
            return None
        return "io" if m[1] == 0 else "compute"

    def _own_graphs(self) -> bool:
        """Ops are built on a virtual graph of their tiles: with several IPUs
        or with IO tiles."""
        return self.num_ipus > 1 or self.num_io_tiles > 0

    def _on_ipu_graph(self, e, start: int) -> None:
        """Puts the lines of op ``e`` (from ``start``) in a block where
        ``graph`` is the virtual graph of the op's tiles, as PopART builds
        each op on the graph of its IPU and tile set (``getVirtualGraph(id,
        TileSet)``), so the tensors PopLibs creates for it live there. With
        IO tiles, an IPU's tiles ``[0, num_io_tiles)`` are its IO tiles' graph
        and the rest its compute tiles' graph (the IPU model's layout,
        ``poplar_host.mapping_of``). Mappings the model gives stay absolute
        (``mapRun`` on ``topGraph``): the model may place an input of an IO
        tile op (a loop counter) on the compute tiles; an op with an input
        known to be on the other tile set is built on the IPU's graph, and
        remote buffer offsets are cast on ``topGraph``."""
        ts = [t for t in list(e.outputs) + list(e.inputs) if t is not None]
        ipu = int(getattr(ts[0], "_ipu", 0) or 0) if ts else 0
        lo, hi = ipu * self.tiles_per_ipu, (ipu + 1) * self.tiles_per_ipu
        what = f"IPU {ipu}'s tiles"
        tile_set = None
        if self.num_io_tiles > 0 and not poplar_ops.crosses_tile_sets(e) and any(
                self.tile_set_of(t) not in (None, e.tile_set) for t in e.inputs if t is not None):
            # An input the model keeps on the other tile set (a loop counter):
            # PopLibs could not read it on this set's graph; the IPU's graph.
            what += f" (an input off the {e.tile_set} tiles)"
        elif self.num_io_tiles > 0:
            tile_set = e.tile_set
            if e.tile_set == "io":
                hi, what = lo + self.num_io_tiles, f"IPU {ipu}'s IO tiles"
            else:
                lo, what = lo + self.num_io_tiles, f"IPU {ipu}'s compute tiles"
        for t in e.outputs:
            if t is not None:
                self.placed.setdefault(id(t), tile_set)
        # A remote buffer offset (a loop counter on either tile set) is cast
        # where it lives: on the top-level graph.
        body = [ln.replace("ipuxl_export::mapRun(graph,", "ipuxl_export::mapRun(topGraph,")
                  .replace("ipuxl_export::offsetOf(graph,", "ipuxl_export::offsetOf(topGraph,")
                for ln in self.lines[start:]]
        del self.lines[start:]
        self.lines.append(f"  {{ poplar::Graph &topGraph = graph;  // {what}")
        self.lines.append(f"    poplar::Graph graph = topGraph.createVirtualGraph({lo}, {hi});")
        self.lines.extend("  " + ln for ln in body)
        self.lines.append("    (void)topGraph; }")

    def function_of(self, g) -> str:
        """The ``poplar::Function`` of called graph ``g``, built on first use."""
        k = self.graph_fn.get(id(g))
        if k is not None:
            return f"F[{k}]"
        aliased = self.aliased_inputs(g)
        for i, t in enumerate(self.prog.graph_inputs[g]):
            if i in aliased:
                self.alias(t, aliased[i])
            else:
                self.new_variable(t, graph_name=g.name)
        self._aliased[id(g)] = set(aliased)
        saved, saved_name = self.lines, self._graph_name
        self.lines, self._graph_name = [], g.name
        self.emit_graph_ops(g)
        body, self.lines, self._graph_name = self.lines, saved, saved_name
        fn = f"buildGraph{len(self.functions)}"
        self.functions.append(self._chunked(
            fn, body, f"// graph {g.name!r}: one Function, called from each of its call sites"))
        k = self.graph_fn[id(g)] = len(self.graph_fn)
        self.function_graphs.append(g.name)
        self.line(f"{{ poplar::program::Sequence body; {fn}(graph, body, data); "
                  f"F[{k}] = graph.addFunction(body); }}")
        self.counts["functions"] += 1
        return f"F[{k}]"

    def _chunked(self, fn: str, body: List[str], comment: str) -> str:
        """``static void fn(graph, prog, data)`` running ``body``, split at op
        boundaries into functions of at most :data:`CHUNK_OPS` ops each, so
        that the C++ compiler's time stays linear in the program's size."""
        groups: List[List[str]] = [[]]
        ops_in = 0
        for ln in body:
            if ln.startswith("  // ") and not ln.startswith("  // RemoteCodeLoad"):
                if ops_in == CHUNK_OPS:
                    groups.append([])
                    ops_in = 0
                ops_in += 1
            groups[-1].append(ln)
        sig = ("(poplar::Graph &graph, poplar::program::Sequence &prog,\n"
               "    const std::map<std::string, ipuxl_export::HostArray> &data)")
        if len(groups) == 1:
            return f"{comment}\nstatic void {fn}{sig} {{\n  (void)data;\n" + "\n".join(body) + "\n}\n"
        parts = [f"static void {fn}_{k}{sig} {{\n  (void)data;\n" + "\n".join(g) + "\n}\n"
                 for k, g in enumerate(groups)]
        calls = "\n".join(f"  {fn}_{k}(graph, prog, data);" for k in range(len(groups)))
        return "\n".join(parts) + f"{comment}\nstatic void {fn}{sig} {{\n{calls}\n}}\n"

    def _copy(self, seq: str, src: str, dst: str) -> None:
        self.line(f"{seq}.add(poplar::program::Copy({src}, {dst}));")

    def emit_control(self, e) -> None:
        kind = e.kind
        if kind == "if":
            self.emit_if(e)
            return
        g = e.graphs[0]
        f = self.function_of(g)
        ins, outs = self.prog.graph_inputs[g], self.prog.graph_outputs[g]
        aliased = self._aliased.get(id(g), set())
        for i, (x, gi) in enumerate(zip(e.inputs, ins)):
            if i not in aliased:
                self._copy("prog", self.t(x), self.t(gi))
        if kind == "call":
            self.line(f"prog.add(poplar::program::Call({f}));")
            self.counts["calls"] += 1
        else:
            body = self.fresh("loop")
            self.line(f"poplar::program::Sequence {body};")
            self.line(f"{body}.add(poplar::program::Call({f}));")
            for go, gi in zip(outs, ins):  # loop-carried: output i -> input i
                if go is not gi:
                    self._copy(body, self.t(go), self.t(gi))
            self.line(f"prog.add(poplar::program::Repeat({int(e.trip_count)}, {body}));")
            self.counts["repeats"] += 1
            self.counts["calls"] += 1
        # Outputs after the site: a repeat's values are the carried inputs'.
        in_place = self.aliased_outputs(g) if kind == "call" else set()
        for k, out in enumerate(e.outputs):
            src = ins[k] if kind == "repeat" and k < len(ins) else outs[k]
            if k in in_place:
                self.alias(out, src)
                continue
            ref = self.define(out, f"graph.clone({self.t(src)}, {cstr(out.id)})")
            self._copy("prog", self.t(src), ref)
        for i in e.modified:  # by-reference inputs: the callee's writes go back
            if i < len(ins) and e.inputs[i] is not None and i not in aliased:
                self._copy("prog", self.t(ins[i]), self.t(e.inputs[i]))

    def emit_if(self, e) -> None:
        then_g, else_g = e.graphs
        seqs = []
        for g, idx in ((then_g, e.branch_inputs[0]), (else_g, e.branch_inputs[1])):
            f = self.function_of(g)
            seq = self.fresh("branch")
            self.line(f"poplar::program::Sequence {seq};")
            for gi, i in zip(self.prog.graph_inputs[g], idx):
                self._copy(seq, self.t(e.inputs[i]), self.t(gi))
            self.line(f"{seq}.add(poplar::program::Call({f}));")
            seqs.append((seq, g))
        outs = []
        for k, out in enumerate(e.outputs):
            first = self.prog.graph_outputs[then_g][k]
            outs.append(self.define(out, f"graph.clone({self.t(first)}, {cstr(out.id)})"))
        for seq, g in seqs:
            for k, go in enumerate(self.prog.graph_outputs[g]):
                self._copy(seq, self.t(go), outs[k])
        pred = self.t(e.inputs[0])
        self.line(f"prog.add(poplar::program::If({pred}, {seqs[0][0]}, {seqs[1][0]}));")
        self.counts["ifs"] += 1
        self.counts["calls"] += 2

    # ---- the whole program
    def build_source(self, with_main: bool = True) -> Dict[str, str]:
        from ..tensor import Constant, Variable

        main = self.prog.graphs[0]
        # An op without an emission is named before anything else fails on it.
        for g in self.prog.graphs:
            for e in self.prog.entries[g]:
                typ = e.type
                if e.kind == "kernel" and typ not in poplar_ops.KERNELS:
                    poplar_ops.emit_kernel(self, e)
        self.lines = []
        # Variables and constants of every graph, created first, as PopART does.
        weights: List[tuple] = []
        for g in self.prog.graphs:
            self._graph_name = g.name or self._main_name
            for rec in self.prog.tensors[g]:
                t = rec.tensor
                if isinstance(t, (Variable, Constant)):
                    self.line(f"// {type(t).__name__.lower()} {t.id}")
                if isinstance(t, Variable):
                    self.new_variable(t)
                    weights.append(t)
                elif isinstance(t, Constant):
                    self.new_constant(t)
        self._graph_name = self._main_name
        for t in self.ir.main_graph._tensors.values():
            if isinstance(t, Variable) and t._remote is not None:
                rb, entry, _ = t._remote
                key = f"remote/{t.id}"
                if t._remote[2]:  # replica-sharded
                    self.remote_shards[key] = self._shards_of(t, rb)
                self.data[key] = self._value(t)
                self.remote_vars.append((rb, int(entry), key, t))
        for t in weights:
            self.data[t.id] = self._value(t)
        self.functions.append(self._chunked("buildTensors", self.lines,
                                            "// every variable and constant, with its tile mapping"))
        decl_lines = ["  buildTensors(graph, prog, data);"]
        self.lines = []
        self.emit_graph_ops(main)
        self.functions.append(self._chunked("buildMainGraph", self.lines, "// the main graph"))
        main_lines = ["  buildMainGraph(graph, prog, data);"]
        return self._assemble(decl_lines, main_lines, weights, with_main)

    def _shards_of(self, t, rb):
        """``(shard size, shards, members of each group)`` of a replica-
        sharded remote variable, by PopXL's rule as the Session applies it
        (ipuxl._sharding, _remote_state): each group's value flattened,
        zero-padded and split into ``shards`` contiguous shards, member
        ``k`` of a group holding shard ``k % shards``."""
        from .._remote_state import RemoteVariables
        from .._sharding import group_members

        rg = t.replica_grouping
        assignment = list(rg.assignment) if rg is not None else [0] * self.replicas
        if self.replicas < 2 or len(assignment) != self.replicas:
            raise NotImplementedError(
                f"Poplar export: replica-sharded remote variable {t.id!r} on {self.replicas} "
                "replica(s): its grouping does not cover the program's replicas")
        members = group_members(assignment)
        try:
            shards = RemoteVariables._num_shards(t, rb, len(members[0]))
        except ValueError as e:
            raise NotImplementedError(f"Poplar export: {e}") from None
        return int(np.prod(rb.tensor_shape, dtype=np.int64)), shards, members

    def _value(self, t) -> np.ndarray:
        """The host value of variable ``t``: its shape, ``(groups, *shape)``
        for a variable of several replica groups (``shape_on_host``), or
        ``(replicas, *shape)`` where the weights given hold every replica's
        value (an ``all_replicas`` variable read back from a Session). The
        row each replica reads is kept in ``weight_rows``."""
        from .poplar_host import replica_groups

        v = self.weights.get(id(t))
        if v is None:
            v = t._host_data
        v = np.asarray(v).astype(t.dtype.as_numpy(), copy=False)
        n = int(np.prod(t.shape, dtype=np.int64))
        if self.replicas > 1 and v.size == n * self.replicas and v.size != int(np.prod(t.shape_on_host)):
            self.weight_rows[id(t)] = list(range(self.replicas))
            return np.ascontiguousarray(v.reshape((self.replicas, *t.shape)))
        self.weight_rows[id(t)] = replica_groups(t, self.replicas) if self.replicas > 1 else None
        return np.ascontiguousarray(v.reshape(t.shape_on_host))

    def _assemble(self, decl_lines, main_lines, weights, with_main) -> Dict[str, str]:
        stream_lines, stream_meta = [], []
        for s, var in sorted(self.streams.items(), key=lambda kv: int(kv[1][1:])):
            h2d = s._direction == "h2d"
            fn = "addHostToDeviceFIFO" if h2d else "addDeviceToHostFIFO"
            n = int(np.prod(s.shape, dtype=np.int64))
            stream_lines.append(f"  {var} = graph.{fn}({cstr(s.tensor_id)}, {ptype(s.dtype)}, {n});")
            stream_meta.append((s.tensor_id, h2d, NPY_DESCR[s.dtype.name], list(s.shape)))
        for rb in self.prog.remote_buffers:
            self.remote_buffer(rb)
        for rb_id, var in sorted(self.remote.items(), key=lambda kv: int(kv[1][2:])):
            rb = next(r for r in self.prog.remote_buffers if id(r) == rb_id)
            n = int(np.prod(rb.tensor_shape, dtype=np.int64))
            stream_lines.append(f"  {var} = graph.addRemoteBuffer({cstr(self._rb_name(rb))}, "
                                f"{ptype(rb.tensor_dtype)}, {n}, {int(rb.entries)});")
        wfh, wth = ["  poplar::program::Sequence wfh, wth;"], []
        for k, t in enumerate(weights):
            ref = self.t(t)
            n = int(np.prod(t.shape, dtype=np.int64))
            wfh.append(f"  {{ auto s = graph.addHostToDeviceFIFO({cstr('weights_from_host/' + t.id)}, "
                       f"{ptype(t.dtype)}, {n}); wfh.add(poplar::program::Copy(s, {ref})); }}")
            wth.append(f"  {{ auto s = graph.addDeviceToHostFIFO({cstr('weights_to_host/' + t.id)}, "
                       f"{ptype(t.dtype)}, {n}); wth.add(poplar::program::Copy({ref}, s)); }}")
        n_t, n_f = len(self.index), len(self.graph_fn)
        build = "\n".join(
            ["std::vector<poplar::program::Program> buildPrograms(poplar::Graph &graph,",
             "    const std::map<std::string, ipuxl_export::HostArray> &data) {",
             "  T.assign(NUM_TENSORS, poplar::Tensor());",
             "  F.assign(NUM_FUNCTIONS, poplar::Function());",
             "  popops::addCodelets(graph);", "  poplin::addCodelets(graph);",
             "  popnn::addCodelets(graph);", "  poprand::addCodelets(graph);"]
            + (["  graph.addCodelets(std::string(IPUXL_EXPORT_DIR) + \"/codelets.cpp\");"]
               if self.codelets else [])
            + ["  poplar::program::Sequence prog;"] + stream_lines + decl_lines
            + main_lines + wfh + wth
            + ["  return {wfh, prog, wth};", "}"])
        header = self._header(n_t, n_f, stream_meta, weights)
        source = "\n".join([
            "// Generated by `ipuxl export poplar`: the Poplar program of a PopXL Ir.",
            "// Builds against any Poplar SDK (or ipuxl's Poplar): see docs/export.md.",
            '#include "program.hpp"', "",
            "#include <algorithm>", "#include <cmath>", "#include <cstdint>", "#include <cstring>",
            "#include <fstream>", "#include <functional>", "#include <iostream>", "#include <memory>", "#include <iterator>", "#include <map>",
            "#include <stdexcept>", "#include <string>", "#include <vector>", "",
            "#include <poplar/DeviceManager.hpp>", "#include <poplar/Engine.hpp>",
            "#include <poplar/Graph.hpp>", "#include <poplar/IPUModel.hpp>",
            "#include <poplar/Program.hpp>", "#include <poplin/MatMul.hpp>",
            "#include <poplin/codelets.hpp>", "#include <popnn/NonLinearity.hpp>",
            "#include <popnn/codelets.hpp>", "#include <popops/Cast.hpp>",
            "#include <popops/DynamicSlice.hpp>", "#include <popops/ElementWise.hpp>",
            "#include <popops/Fill.hpp>", "#include <popops/Reduce.hpp>",
            "#include <popops/ScaledAdd.hpp>", "#include <popops/Zero.hpp>",
            "#include <popops/codelets.hpp>", "#include <poprand/codelets.hpp>",
            "#include <poputil/TileMapping.hpp>",
        ] + poplar_ops.extra_includes(self) + [
            "#ifndef IPUXL_EXPORT_DIR", '#define IPUXL_EXPORT_DIR "."', "#endif", "",
            RUNTIME_CPP, poplar_ops.helper_source(self), "",
            "static std::vector<poplar::Tensor> T;",
            "static std::vector<poplar::Function> F;",
            "static poplar::DataStream " + ", ".join(
                [v for v in self.streams.values()] or ["S_none"]) + ";",
            "static poplar::RemoteBuffer " + ", ".join(
                [v for v in self.remote.values()] or ["RB_none"]) + ";",
            "",
        ] + self.functions + [build, "", self._host_side(stream_meta, weights),
                              main_cpp() if with_main else ""])
        files = {"program.cpp": source, "program.hpp": header,
                 "Makefile": makefile(bool(self.codelets), "gcl" in self.helpers),
                 "CMakeLists.txt": cmakelists("gcl" in self.helpers)}
        if self.codelets:
            files["codelets.cpp"] = ("// Vertices for ops ipuxl's PopLibs subset has no call for.\n"
                                     "#include <poplar/Vertex.hpp>\n#include <cmath>\n#include <type_traits>\n"
                                     "using namespace poplar;\n\n"
                                     + "\n".join(self.codelets[k] for k in sorted(self.codelets)))
        return files

    @staticmethod
    def _rb_name(rb) -> str:
        return f"remote_buffer_{rb.remote_buffer_id}"

    def _header(self, n_t, n_f, stream_meta, weights) -> str:
        R = self.replicas
        lines = [
            "// Generated by `ipuxl export poplar`: the programs and streams of program.cpp.",
            "#pragma once", "#include <map>", "#include <string>", "#include <vector>",
            "#include <poplar/Graph.hpp>", "#include <poplar/Program.hpp>", "",
            "// Engine program indices.",
            "enum : unsigned { WEIGHTS_FROM_HOST = 0, MAIN_PROGRAM = 1, WEIGHTS_TO_HOST = 2 };",
            f"constexpr unsigned NUM_IPUS = {self.num_ipus};",
            f"constexpr unsigned TILES_PER_IPU = {self.tiles_per_ipu};",
            f"constexpr unsigned REPLICATION_FACTOR = {R};",
            f"constexpr unsigned NUM_HOST_TRANSFERS = {int(self.ir.num_host_transfers)};",
            f"constexpr unsigned NUM_TENSORS = {n_t};",
            f"constexpr unsigned NUM_FUNCTIONS = {n_f};",
            "// Host-to-device streams (fed by --inputs) and device-to-host streams (--outputs).",
            "static const char *const INPUT_STREAMS[] = {" + ", ".join(
                [cstr(n) for n, h2d, _, _ in stream_meta if h2d] + ["nullptr"]) + "};",
            "static const char *const OUTPUT_STREAMS[] = {" + ", ".join(
                [cstr(n) for n, h2d, _, _ in stream_meta if not h2d] + ["nullptr"]) + "};",
            "",
            "namespace ipuxl_export { struct HostArray; }",
            "// Builds the graph's tensors and programs; `data` is weights.npz (constants",
            "// too large for the source). Returns {WeightsFromHost, main, WeightsToHost}.",
            "std::vector<poplar::program::Program> buildPrograms(poplar::Graph &graph,",
            "    const std::map<std::string, ipuxl_export::HostArray> &data);",
        ]
        return "\n".join(lines) + "\n"

    def _host_side(self, stream_meta, weights) -> str:
        """createDevice(), connectWeights(), connectStreams(), writeRemote(),
        savedWeights(): the host half of Session.run."""
        from .poplar_host import host_side

        return host_side(self, stream_meta, weights)


def export_poplar(ir, out_dir: str, weights: Optional[dict] = None, profile=None,
                  main: bool = True, model=None) -> dict:
    """Writes the Poplar program of ``ir`` into ``out_dir`` (module
    docstring). ``weights``: ``{Variable: array}`` (default: initial
    values); ``profile``: an ipuxl Profile of the program whose tensor
    mappings to use (default: :func:`ipuxl.profile.profile_ir` on
    ``model``). ``main=False`` leaves ``main()`` out. Returns a summary:
    files written, functions, calls, repeats, tensors mapped from the model
    and linearly, the graph of each ``poplar::Function`` in
    ``graph.addFunction`` order (``function_graphs``)."""
    from .poplar_host import mapping_of

    if profile is None:
        from .. import profile as prof

        profile = prof.profile_ir(ir, model)
    mapping, tiles, ipus, version = mapping_of(profile)
    nio = int(profile.target.get("num_io_tiles", 0))
    em = PoplarEmitter(ir, mapping, weights, tiles, ipus, version, num_io_tiles=nio)
    files = em.build_source(with_main=main)
    os.makedirs(out_dir, exist_ok=True)
    for name, text in files.items():
        with open(os.path.join(out_dir, name), "w") as f:
            f.write(text)
    np.savez(os.path.join(out_dir, "weights.npz"), **em.data)
    return {"files": sorted(files) + ["weights.npz"], **em.counts,
            "model_mapped": em.model_mapped, "linear_mapped": list(em.linear_mapped),
            "codelets": sorted(em.codelets), "function_graphs": list(em.function_graphs)}
