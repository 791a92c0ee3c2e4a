"""An Ir's inference program as an ONNX model (opset 11).

The main graph becomes the ONNX graph: each host-to-device stream a graph
input (named by the stream), each device-to-host stream a graph output,
each variable and constant an initializer (named by its tensor id), and
``Call``s are inlined. Ops ONNX opset 11 lacks are decomposed into ONNX ops
(layer / group norm, gelu, softmax on an inner axis, gather with
``zero_OOR``) rather than emitted in the ``ai.graphcore`` domain, so that
any ONNX runtime runs the model.

Anything else (remote buffers, collectives, random ops, ``repeat`` / ``if``,
in-place updates of variables, training ops) raises ``NotImplementedError``
naming the op: the subset is the inference program, one host transfer per
run. In-place ops on activations are exported as their out-of-place op
whose output later readers of the input read; a write through a view
(``reshape_`` then ``+=``) is not propagated back to the viewed tensor.
"""
import math
from typing import Dict, Mapping, Optional

import numpy as np

from ..opdef import get_opdef

__all__ = ["onnx_model", "OPSET"]

OPSET = 11

_BINARY = {"Add": "Add", "Sub": "Sub", "Mul": "Mul", "Div": "Div", "Pow": "Pow",
           "Equal": "Equal", "Greater": "Greater", "And": "And", "Or": "Or",
           "Max": "Max"}
_UNARY = {"Abs": "Abs", "Neg": "Neg", "Sqrt": "Sqrt", "Exp": "Exp", "Log": "Log",
          "Sin": "Sin", "Cos": "Cos", "Tanh": "Tanh", "Relu": "Relu", "Floor": "Floor",
          "Ceil": "Ceil", "Sign": "Sign", "Not": "Not", "Identity": "Identity",
          "Detach": "Identity"}
_REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
           "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")


def _onnx():
    try:
        import onnx
    except ImportError as e:
        raise ImportError("ONNX export needs onnx: pip install 'ipuxl[export]'") from e
    return onnx


class _Builder:
    """Collects nodes, initializers and unique names for one ONNX graph."""

    def __init__(self, onnx):
        self.onnx = onnx
        self.h = onnx.helper
        self.nodes, self.inits, self.inputs, self.outputs = [], [], [], []
        self.names = set()
        self.env: Dict[int, str] = {}   # id(ipuxl Tensor) -> ONNX value name

    def fresh(self, base: str) -> str:
        name, k = base, 0
        while name in self.names:
            k += 1
            name = f"{base}__{k}"
        self.names.add(name)
        return name

    def node(self, op_type: str, inputs, base: str, n_out: int = 1, **attrs):
        outs = [self.fresh(base if n_out == 1 else f"{base}_{i}") for i in range(n_out)]
        self.nodes.append(self.h.make_node(op_type, list(inputs), outs,
                                           name=self.fresh(f"{base}/{op_type}"), **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value, base: str) -> str:
        name = self.fresh(base)
        self.inits.append(self.onnx.numpy_helper.from_array(np.asarray(value), name))
        return name

    def scalar(self, value: float, like_dtype, base: str) -> str:
        return self.const(np.array(value, dtype=like_dtype.as_numpy()), base)

    def value_info(self, name: str, t):
        elem = self.onnx.helper.np_dtype_to_tensor_dtype(t.dtype.as_numpy())
        return self.h.make_tensor_value_info(name, elem, list(t.shape))


def _name(b: _Builder, t) -> str:
    if id(t) not in b.env:
        raise NotImplementedError(f"ONNX export: tensor {t.id!r} is read before it is written "
                                  "in the exported program")
    return b.env[id(t)]


def _emit_gelu(b, x, t, base, erf: bool) -> str:
    half = b.scalar(0.5, t.dtype, f"{base}_half")
    one = b.scalar(1.0, t.dtype, f"{base}_one")
    if erf:  # 0.5 x (1 + erf(x / sqrt 2))
        inner = b.node("Div", [x, b.scalar(math.sqrt(2.0), t.dtype, f"{base}_sqrt2")],
                       f"{base}_scaled")
        g = b.node("Erf", [inner], f"{base}_erf")
    else:    # 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), PopART's Gelu
        x3 = b.node("Mul", [b.node("Mul", [x, x], f"{base}_x2"), x], f"{base}_x3")
        cub = b.node("Mul", [x3, b.scalar(0.044715, t.dtype, f"{base}_a")], f"{base}_ax3")
        inner = b.node("Mul", [b.node("Add", [x, cub], f"{base}_sum"),
                               b.scalar(math.sqrt(2.0 / math.pi), t.dtype, f"{base}_c")],
                       f"{base}_scaled")
        g = b.node("Tanh", [inner], f"{base}_tanh")
    return b.node("Mul", [b.node("Mul", [x, half], f"{base}_halfx"),
                          b.node("Add", [g, one], f"{base}_1p")], base)


def _emit_group_norm(b, op, base):
    """GroupNorm (y, mean, inv_std_dev) decomposed: statistics over each
    sample's group of channels (and spatial positions), biased variance."""
    x_t, w_t, bias_t = op.inputs
    x, w, bias = (_name(b, t) for t in op.inputs)
    groups, eps = int(op.attrs["num_groups"]), float(op.attrs["epsilon"])
    n, c = x_t.shape[0], x_t.shape[1]
    dt = x_t.dtype
    xg = b.node("Reshape", [x, b.const(np.array([n, groups, -1], np.int64), f"{base}_gshape")],
                f"{base}_grouped")
    mean = b.node("ReduceMean", [xg], f"{base}_mean", axes=[2], keepdims=1)
    centred = b.node("Sub", [xg, mean], f"{base}_centred")
    var = b.node("ReduceMean", [b.node("Mul", [centred, centred], f"{base}_sq")],
                 f"{base}_var", axes=[2], keepdims=1)
    inv = b.node("Reciprocal", [b.node("Sqrt", [b.node("Add", [var, b.scalar(eps, dt, f"{base}_eps")],
                                                       f"{base}_vareps")], f"{base}_std")],
                 f"{base}_inv")
    normed = b.node("Mul", [centred, inv], f"{base}_normed")
    y = b.node("Reshape", [normed, b.const(np.array(x_t.shape, np.int64), f"{base}_shape")],
               f"{base}_y")
    per_channel = np.array([c] + [1] * (len(x_t.shape) - 2), np.int64)
    wr = b.node("Reshape", [w, b.const(per_channel, f"{base}_cshape")], f"{base}_w")
    br = b.node("Reshape", [bias, b.const(per_channel, f"{base}_cshape")], f"{base}_b")
    out = b.node("Add", [b.node("Mul", [y, wr], f"{base}_scaled"), br], base)
    flat = b.const(np.array([n * groups], np.int64), f"{base}_statshape")
    stats = [b.node("Reshape", [s, flat], f"{base}_{k}") for s, k in ((mean, "mean"), (inv, "inv_std"))]
    if op.outputs[1].dtype != dt:  # statistics are float32 for a float16 input
        to = b.onnx.helper.np_dtype_to_tensor_dtype(op.outputs[1].dtype.as_numpy())
        stats = [b.node("Cast", [s], f"{s}_f32", to=to) for s in stats]
    return [out] + stats


def _emit_softmax(b, op, x, base):
    t = op.inputs[0]
    axis = int(op.attrs["axis"]) % len(t.shape)
    if axis == len(t.shape) - 1:  # opset 11 Softmax flattens to 2-D at axis: exact for the last
        return [b.node("Softmax", [x], base, axis=axis)]
    m = b.node("ReduceMax", [x], f"{base}_max", axes=[axis], keepdims=1)
    e = b.node("Exp", [b.node("Sub", [x, m], f"{base}_shift")], f"{base}_exp")
    s = b.node("ReduceSum", [e], f"{base}_sum", axes=[axis], keepdims=1)
    return [b.node("Div", [e, s], base)]


def _emit_slice(b, op, x, base):
    """``Slice`` / ``SliceInplace`` (starts, steps and sizes per axis) as
    ONNX Slice with explicit ends; a negative step that runs to index 0
    ends at ``-dim - 1``, which ONNX clamps to "before the first"."""
    t = op.inputs[0]
    starts, steps, sizes = op.attrs["starts"], op.attrs["steps"], op.attrs["sizes"]
    ends = []
    for a, (st, sp, n) in enumerate(zip(starts, steps, sizes)):
        end = st + n * sp
        ends.append(end if end >= 0 else -t.shape[a] - 1)
    if any(n == 0 for n in sizes):
        raise NotImplementedError(f"ONNX export: op {op.type} ({op.name!r}) selects no "
                                  "elements; ONNX opset 11 has no empty slice to export")
    vec = lambda v, what: b.const(np.array(v, np.int64), f"{base}_{what}")  # noqa: E731
    axes = list(range(t.rank))
    return b.node("Slice", [x, vec(starts, "starts"), vec(ends, "ends"), vec(axes, "axes"),
                            vec(steps, "steps")], base)


def _emit_gather(b, op, ins, base):
    """``Gather``. ONNX rejects an index outside ``[-n, n)``; PopXL's
    ``zero_OOR=True`` gives zeros for an index outside ``[0, n)``, so the
    indices are clamped to 0 there and the rows masked with Where. With
    ``zero_OOR=False`` PopXL leaves such rows undefined: exported as plain
    Gather (ONNX runtimes raise on them)."""
    t, idx = op.inputs[0], op.inputs[1]
    axis, n = int(op.attrs["axis"]), t.shape[int(op.attrs["axis"])]
    data, indices = ins
    if not op.attrs.get("zero_oor"):
        return b.node("Gather", [data, indices], base, axis=axis)
    np_idx = idx.dtype.as_numpy()
    zero, top = b.const(np.array(0, np_idx), f"{base}_zero"), b.const(np.array(n, np_idx),
                                                                       f"{base}_n")
    valid = b.node("And", [b.node("Not", [b.node("Less", [indices, zero], f"{base}_neg")],
                                  f"{base}_nonneg"),
                           b.node("Less", [indices, top], f"{base}_below")], f"{base}_valid")
    safe = b.node("Where", [valid, indices, zero], f"{base}_safe")
    rows = b.node("Gather", [data, safe], f"{base}_rows", axis=axis)
    # valid has the indices' shape; put it where the gathered dims sit and
    # add size-1 axes for the data's trailing dims so it broadcasts.
    shape = [1] * axis + list(idx.shape) + [1] * (t.rank - axis - 1)
    mask = b.node("Reshape", [valid, b.const(np.array(shape, np.int64), f"{base}_mshape")],
                  f"{base}_mask")
    return b.node("Where", [mask, rows, b.scalar(0, t.dtype, f"{base}_fill")], base)


def _emit_op(b: _Builder, op, streams_in: dict, streams_out: dict):
    typ, base = op.type, op.name.replace("/", "_")
    kind = get_opdef(typ).kind
    core = typ[:-len("Inplace")] if typ.endswith("Inplace") else typ
    core = core[:-len("Lhs")] if core.endswith("Lhs") else core
    if op.modified:
        for i in op.modified:
            t = op.inputs[i]
            if t is not None and t.tensor_type == "Variable":
                raise NotImplementedError(f"ONNX export: op {typ} ({op.name!r}) updates variable "
                                          f"{t.id!r}: training updates are not in the inference "
                                          "subset")
    if kind == "host_load":
        stream = op.attrs["_stream"]
        if stream.tensor_id in streams_in:
            raise NotImplementedError(f"ONNX export: stream {stream.tensor_id!r} is loaded "
                                      "twice; only one host transfer per run is exported")
        name = b.fresh(stream.tensor_id)
        streams_in[stream.tensor_id] = name
        b.inputs.append(b.value_info(name, op.outputs[0]))
        return [name]
    if kind == "host_store":
        stream = op.attrs["_stream"]
        if stream.tensor_id in streams_out:
            raise NotImplementedError(f"ONNX export: stream {stream.tensor_id!r} is stored "
                                      "twice; only one host transfer per run is exported")
        name = b.fresh(stream.tensor_id)
        streams_out[stream.tensor_id] = name
        b.nodes.append(b.h.make_node("Identity", [_name(b, op.inputs[0])], [name],
                                     name=b.fresh(f"{base}/Identity")))
        b.outputs.append(b.value_info(name, op.inputs[0]))
        return []
    if kind == "call":
        graph = op.called_graphs[0]
        for inner, outer in zip(graph.inputs, op.inputs):
            b.env[id(inner)] = _name(b, outer)
        _emit_graph(b, graph, streams_in, streams_out)
        # An input the call site marks modified: the caller reads the callee's write.
        for i in op.modified:
            b.env[id(op.inputs[i])] = _name(b, graph.inputs[i])
        return [_name(b, t) for t in graph.outputs]
    ins = [_name(b, t) for t in op.inputs if t is not None]
    if core in _BINARY and len(ins) == 2:
        return [b.node(_BINARY[core], ins, base)]
    if core in _UNARY:
        return [b.node(_UNARY[core], ins, base)]
    if core in ("Gelu", "GeluErf"):
        return [_emit_gelu(b, ins[0], op.inputs[0], base, erf=core == "GeluErf")]
    if typ == "MatMul":
        return [b.node("MatMul", ins, base)]
    if typ == "Softmax":
        return _emit_softmax(b, op, ins[0], base)
    if typ == "GroupNorm":
        return _emit_group_norm(b, op, base)
    if core == "Reshape":
        shape = b.const(np.array(op.outputs[0].shape, np.int64), f"{base}_shape")
        return [b.node("Reshape", [ins[0], shape], base)]
    if core == "Transpose":
        return [b.node("Transpose", ins, base, perm=[int(p) for p in op.attrs["perm"]])]
    if typ == "Cast":
        to = b.onnx.helper.np_dtype_to_tensor_dtype(op.attrs["_to"].as_numpy())
        return [b.node("Cast", ins, base, to=to)]
    if core == "Where":
        return [b.node("Where", ins, base)]
    if core == "Concat":
        return [b.node("Concat", ins, base, axis=int(op.attrs["axis"]))]
    if core == "Slice":
        return [_emit_slice(b, op, ins[0], base)]
    if typ == "Subsample":   # every strides[a]-th element from 0: a Slice
        t, strides = op.inputs[0], [int(v) for v in op.attrs["strides"]]
        vec = lambda v, what: b.const(np.array(v, np.int64), f"{base}_{what}")  # noqa: E731
        return [b.node("Slice", [ins[0], vec([0] * t.rank, "starts"), vec(list(t.shape), "ends"),
                                 vec(list(range(t.rank)), "axes"), vec(strides, "steps")], base)]
    if typ in ("Gather", "TiedGather"):
        return [_emit_gather(b, op, ins, base)]
    if typ == "Split":
        sizes = [int(n) for n in op.attrs["splits"]]
        outs = b.node("Split", ins, base, n_out=len(sizes), axis=int(op.attrs["axis"]),
                      split=sizes)
        return outs if len(sizes) > 1 else [outs]
    if typ == "Sum":
        return [b.node("Sum", ins, base) if len(ins) > 1 else b.node("Identity", ins, base)]
    if typ in _REDUCE:
        axes = [int(a) for a in op.attrs["axes"]]
        return [b.node(typ, ins, base, axes=axes, keepdims=int(op.attrs["keepdims"]))]
    raise NotImplementedError(f"ONNX export: op {typ} ({op.name!r}) is not in the inference "
                              f"subset ONNX opset {OPSET} export supports")


def _host_value(t, value) -> np.ndarray:
    """A variable's or constant's value for its initializer: ``value`` when
    given, else the one it was created with."""
    if value is None:
        value = t._host_data
    return np.asarray(value).astype(t.dtype.as_numpy(), copy=False).reshape(t.shape)


def _emit_graph(b: _Builder, graph, streams_in, streams_out):
    for t in graph.constants:  # a called graph's own constants (``t + 1.0`` inside it)
        if id(t) not in b.env:
            b.env[id(t)] = b.const(_host_value(t, None), t.id)
    for op in graph.get_op_schedule():
        outs = _emit_op(b, op, streams_in, streams_out)
        for t, name in zip(op.outputs, outs):
            b.env[id(t)] = name
        # An in-place op (x += 1) writes its input: later readers of the input
        # read the op's output, ONNX values being immutable.
        for out_i, in_i in op.aliases:
            if in_i in op.modified and op.inputs[in_i] is not None and out_i < len(outs):
                b.env[id(op.inputs[in_i])] = outs[out_i]


def onnx_model(ir, weights: Optional[Mapping] = None, name: str = "ipuxl"):
    """The main graph of ``ir`` as an ONNX ``ModelProto`` (opset 11), checked
    with ``onnx.checker``. Variables take their values from ``weights``
    (``{Variable: array}``, e.g. ``session.get_tensors_data(vars)`` after
    training) or else their initial values. Raises ``NotImplementedError``
    naming the first op outside the inference subset (module docstring)."""
    onnx = _onnx()
    if ir.num_host_transfers != 1 or ir.replication_factor != 1:
        raise NotImplementedError(
            f"ONNX export: num_host_transfers {ir.num_host_transfers} and replication_factor "
            f"{ir.replication_factor}; the inference subset has one transfer on one replica")
    b = _Builder(onnx)
    weights = dict(weights or {})
    main = ir.main_graph
    for t in main.variables:
        b.env[id(t)] = b.const(_host_value(t, weights.get(t)), t.id)
    _emit_graph(b, main, {}, {})
    if not b.outputs:
        raise NotImplementedError("ONNX export: the program stores nothing to the host "
                                  "(no host_store): the model would have no output")
    graph = b.h.make_graph(b.nodes, name, b.inputs, b.outputs, initializer=b.inits)
    model = b.h.make_model(graph, opset_imports=[b.h.make_opsetid("", OPSET)],
                           producer_name="ipuxl")
    model.ir_version = 7  # the ONNX IR of opset 11 runtimes (onnx 1.6+)
    onnx.checker.check_model(model)
    return model
