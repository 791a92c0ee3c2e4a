"""An Ir as PopART's IR JSON dump (``POPART_IR_DUMP``, ``Ir::serialise``).

PopART writes ``{"<graph>": [op, ...], ...}``: the main graph as
``"maingraph"``, every other graph by its id (in id order, PopART's graph
map), and each op as ``{"type", "name", "inputs": [{"name", "shape", "type",
"index"}], "outputs": [{"name", "index"}], "attributes": {...}}`` with every
value a string, shapes as ``"[2 3]"`` and dtypes as ONNX names
(``"FLOAT"``). This module writes the same, plus ``"domain"`` and
``"version"`` (the rest of the PopART operator identifier) on each op and
``"shape"`` / ``"type"`` on outputs too, so a reader of PopART's dump (such
as ``[j["type"] for g in ir.values() for j in g]``, as PopART's outlining
tests read it) reads this one unchanged.
"""
from typing import Dict, List

from ..context import _CONTEXT_NAMES
from ..opdef import get_opdef
from .popart_ids import popart_identifier

__all__ = ["popart_ir", "unmapped_op_types", "all_graphs", "onnx_dtype_name"]

_ONNX_DTYPE_NAMES = {
    "bool": "BOOL", "int8": "INT8", "uint8": "UINT8", "int16": "INT16", "uint16": "UINT16",
    "int32": "INT32", "uint32": "UINT32", "int64": "INT64", "uint64": "UINT64",
    "float16": "FLOAT16", "float32": "FLOAT", "float64": "DOUBLE",
    "float8_143": "FLOAT8_143", "float8_152": "FLOAT8_152",
}


def onnx_dtype_name(dtype) -> str:
    """PopART's ``DataType`` name of an ipuxl dtype (``float32`` -> ``"FLOAT"``)."""
    return _ONNX_DTYPE_NAMES[dtype.name]


def all_graphs(ir) -> list:
    """The main graph, then every graph reachable through called graphs, by id."""
    seen, todo = {}, [ir.main_graph]
    while todo:
        g = todo.pop()
        if g.id in seen:
            continue
        seen[g.id] = g
        for op in g.ops:
            todo.extend(op.called_graphs)
    main = seen.pop(ir.main_graph.id)
    return [main] + [seen[k] for k in sorted(seen)]


#: ipuxl's execution context name -> PopART's (``operator<<(ExecutionContext)``).
_POPART_CONTEXT = {ours: popart for popart, ours in _CONTEXT_NAMES.items()}


def _context(op) -> str:
    return _POPART_CONTEXT.get(op.execution_context, str(op.execution_context))


def _shape(shape) -> str:
    return "[" + " ".join(str(int(d)) for d in shape) + "]"


def _attributes(op) -> Dict[str, str]:
    attrs = {k: str(v) for k, v in sorted(op.attrs.items()) if not k.startswith("_")}
    attrs["executionContext"] = _context(op)
    if op.ipu is not None:
        attrs["__ipu_number"] = str(op.ipu)
    if op.called_graphs:
        attrs["callee"] = ",".join(g.id for g in op.called_graphs)
    return attrs


def _op_json(op) -> dict:
    (domain, typ, version), _ = popart_identifier(op.type)
    inputs = [{"name": t.id, "shape": _shape(t.shape), "type": onnx_dtype_name(t.dtype),
               "index": str(i)} for i, t in enumerate(op.inputs) if t is not None]
    outputs = [{"name": t.id, "shape": _shape(t.shape), "type": onnx_dtype_name(t.dtype),
                "index": str(i)} for i, t in enumerate(op.outputs)]
    return {"type": typ, "domain": domain, "version": str(version), "name": op.name,
            "inputs": inputs, "outputs": outputs, "attributes": _attributes(op)}


def _with_init(op, entry: dict, taken: set) -> list:
    """PopXL's ``host_load`` creates an ``Init`` ("undef") whose output is the
    HostLoad's input 0 (PopART's HostLoadOp takes the tensor it overwrites);
    ipuxl's HostLoad has no input, so the dump adds both as PopXL has them."""
    out = op.outputs[0]
    base = out.id[:-len("_hostload")] if out.id.endswith("_hostload") else out.id
    init_id, k = f"{base}_init", 0
    while init_id in taken:
        k += 1
        init_id = f"{base}_init__{k}"
    taken.add(init_id)
    tensor = {"name": init_id, "shape": _shape(out.shape), "type": onnx_dtype_name(out.dtype),
              "index": "0"}
    init = {"type": "Init", "domain": "ai.graphcore", "version": "1", "name": f"{op.name}_init",
            "inputs": [], "outputs": [tensor],
            "attributes": {"init_type": "undef", **_attributes(op)}}
    entry["inputs"] = [tensor]
    return [init, entry]


def _loop_wrapper(op, entry: dict, graph_ids: set) -> tuple:
    """PopXL's ``repeat`` loops a wrapper graph ``<graph>__loop_wrapper``
    whose one op calls the user's graph (``_setup_call_and_repeat``);
    ipuxl's Repeat calls the graph directly. Returns ``(wrapper id, its
    ops)`` and points the Loop entry at the wrapper."""
    body = op.called_graphs[0]
    wid, k = f"{body.id}__loop_wrapper", 0
    while wid in graph_ids:
        k += 1
        wid = f"{body.id}__loop_wrapper_{k}"
    graph_ids.add(wid)

    def ref(t, i):
        return {"name": f"{wid}/{t.id}", "shape": _shape(t.shape),
                "type": onnx_dtype_name(t.dtype), "index": str(i)}

    call = {"type": "Call", "domain": "ai.graphcore", "version": "1",
            "name": f"{wid}__call__{body.id}",
            "inputs": [ref(t, i) for i, t in enumerate(body.inputs)],
            "outputs": [ref(t, i) for i, t in enumerate(body.outputs)],
            "attributes": {"executionContext": _context(op), "callee": body.id}}
    entry["attributes"]["callee"] = wid
    return wid, [call]


def popart_ir(ir) -> dict:
    """The IR of ``ir`` as PopART's JSON dump (see the module docstring): a
    dict ``json.dump`` writes as PopART would, ops in schedule order, with
    the ops PopXL's op modules add around ipuxl's: an Init before each
    HostLoad, a wrapper graph calling each repeated graph."""
    graphs = all_graphs(ir)
    graph_ids = {g.id for g in graphs}
    out, wrappers = {}, {}
    for g in graphs:
        name = "maingraph" if g is ir.main_graph else g.id
        taken = {t.id for t in g.tensors}
        ops = []
        for op in g.get_op_schedule():
            entry = _op_json(op)
            kind = get_opdef(op.type).kind
            if kind == "host_load":
                ops.extend(_with_init(op, entry, taken))
                continue
            if kind == "repeat":
                wid, wops = _loop_wrapper(op, entry, graph_ids)
                wrappers[wid] = wops
            ops.append(entry)
        out[name] = ops
    main = out.pop("maingraph")
    out.update(wrappers)
    return {"maingraph": main, **{k: out[k] for k in sorted(out)}}


def unmapped_op_types(ir) -> List[str]:
    """The op types of ``ir`` with no known PopART identifier (exported as
    ``ai.graphcore.<type>:1``), sorted."""
    return sorted({op.type for g in all_graphs(ir) for op in g.ops
                   if not popart_identifier(op.type)[1]})
