"""Per-op emission for ``ipuxl export poplar``: each kernel op of the
faithful lowering as the PopLibs call PopART's opx makes for it, or as a
composition of PopLibs calls / a generated vertex where ipuxl's PopLibs
subset has no single call (docs/export.md lists which).

:data:`KERNELS` maps an op type to ``emit(em, e)``, where ``em`` is the
:class:`~.poplar_emit.PoplarEmitter` (``em.t(x)`` names a tensor,
``em.define(y, expr)`` defines one, ``em.line(s)`` writes a statement into
the current ``Sequence prog``) and ``e`` the op's lowering entry. An op type
it lacks raises ``NotImplementedError`` naming the op.
"""
import math

import numpy as np

from .poplar_codelets import CODELETS, HELPERS
from .poplar_addons import ADDONS_KERNELS
from .poplar_index import INDEX_KERNELS
from .poplar_misc import MISC_KERNELS
from .poplar_resize import RESIZE_KERNELS
from .poplar_roi import ROI_KERNELS
from .poplar_nn import NN_KERNELS
from .poplar_random import RANDOM_KERNELS
from .poplar_scan import SCAN_KERNELS

__all__ = ["KERNELS", "emit_kernel", "emit_collective", "helper_source", "extra_includes"]


def _dbg(e) -> str:
    from .poplar_emit import cstr

    return cstr(e.name)


def _ptype(dtype) -> str:
    from .poplar_emit import ptype

    return ptype(dtype)


def _shape(shape) -> str:
    from .poplar_emit import shape_lit

    return shape_lit(shape)


def _core(typ: str) -> str:
    for suffix in ("LhsInplace", "Inplace"):
        if typ.endswith(suffix):
            return typ[:-len(suffix)]
    return typ


def _inplace(e) -> bool:
    return bool(e.modified)


# popops named element-wise functions (PopART's ElementWiseBinaryOpx / UnaryOpx)
_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Max": "max",
           "Min": "min", "Equal": "eq", "Greater": "gt", "Less": "lt", "And": "logicalAnd",
           "Or": "logicalOr", "Fmod": "rem"}
_UNARY = {"Abs": "abs", "Neg": "neg", "Sqrt": "sqrt", "Exp": "exp", "Log": "log", "Sin": "sin",
          "Cos": "cos", "Tanh": "tanh", "Ceil": "ceil", "Floor": "floor", "Sign": "signum",
          "Not": "logicalNot"}
# popnn::nonLinearity (PopART's ReluOpx, GeluOpx, SwishOpx)
_NONLIN = {"Relu": "RELU", "Gelu": "GELU", "GeluErf": "GELU_ERF", "Swish": "SWISH"}


def _binary(em, e):
    fn = _BINARY[_core(e.type)]
    a, b = (em.t(x) for x in e.inputs)
    if _inplace(e):
        em.line(f"popops::{fn}InPlace(graph, {a}, {b}, prog, {_dbg(e)});")
        em.alias(e.outputs[0], e.inputs[0])
    else:
        em.define(e.outputs[0], f"popops::{fn}(graph, {a}, {b}, prog, {_dbg(e)})")


def _unary(em, e):
    core = _core(e.type)
    x = em.t(e.inputs[0])
    if core in _NONLIN:
        kind = f"popnn::NonLinearityType::{_NONLIN[core]}"
        if _inplace(e):
            em.line(f"popnn::nonLinearityInPlace(graph, {kind}, {x}, prog, {_dbg(e)});")
            em.alias(e.outputs[0], e.inputs[0])
        else:
            em.define(e.outputs[0], f"popnn::nonLinearity(graph, {kind}, {x}, prog, {_dbg(e)})")
        return
    fn = _UNARY[core]
    if _inplace(e):
        em.line(f"popops::{fn}InPlace(graph, {x}, prog, {_dbg(e)});")
        em.alias(e.outputs[0], e.inputs[0])
    else:
        em.define(e.outputs[0], f"popops::{fn}(graph, {x}, prog, {_dbg(e)})")


def _expr_unary(expr: str):
    """An element-wise op as one ``popops::map`` expression of ``_1``."""
    def emit(em, e):
        x = em.t(e.inputs[0])
        em.define(e.outputs[0], f"popops::map(graph, {expr}, {{{x}}}, prog, {_dbg(e)})")
    return emit


def _clip(em, e):
    lo, hi = float(e.attrs.get("min", -math.inf)), float(e.attrs.get("max", math.inf))
    from .poplar_emit import _literal

    x = em.t(e.inputs[0])
    dt = e.inputs[0].dtype
    expr = (f"popops::expr::Clamp(popops::expr::_1, popops::expr::Const({_literal(lo, dt)}), "
            f"popops::expr::Const({_literal(hi, dt)}))")
    em.define(e.outputs[0], f"popops::map(graph, {expr}, {{{x}}}, prog, {_dbg(e)})")


def _copy_of(em, e, view: str):
    """An op that is a view of its input: the view itself when the op
    aliases it (the in-place variants), else a copy (PopART's opx clones
    and copies)."""
    out = e.outputs[0]
    if e.aliases:
        em.define(out, view)
        return
    from .poplar_emit import cstr

    v = em.fresh("view")
    em.line(f"poplar::Tensor {v} = {view};")
    ref = em.define(out, f"graph.clone({v}, {cstr(out.id)})")
    em.line(f"prog.add(poplar::program::Copy({v}, {ref}));")


def _identity(em, e):
    _copy_of(em, e, em.t(e.inputs[0]))


def _io_tile_copy(em, e):
    """A copy to the other tile set (PopART's IoTileCopyOpx): a new
    variable with the IPU model's mapping of the copy (else linear), then a
    Copy. Where the model maps the copy on the source's tile set, it is
    mapped linearly on the destination's graph instead, as PopART creates
    it on the destination tile set's graph."""
    out = e.outputs[0]
    if em.tile_set_of(out) not in (None, e.tile_set):
        from .poplar_emit import cstr, ptype, shape_lit

        ref = em.define(out, f"graph.addVariable({ptype(out.dtype)}, {shape_lit(out.shape)}, "
                             f"{cstr(out.id)})")
        em.line(f"poputil::mapTensorLinearly(graph, {ref});")
        em.linear_mapped.append(out.id)
        em.placed[id(out)] = e.tile_set
    else:
        ref = em.new_variable(out)
    em.line(f"prog.add(poplar::program::Copy({em.t(e.inputs[0])}, {ref}));")


# Its input is on the other tile set: that is what it copies.
_io_tile_copy.crosses_tile_sets = True


def _reshape(em, e):
    _copy_of(em, e, f"{em.t(e.inputs[0])}.reshape({_shape(e.outputs[0].shape)})")


def _transpose(em, e):
    perm = "{" + ", ".join(str(int(p)) for p in e.attrs["perm"]) + "}"
    _copy_of(em, e, f"{em.t(e.inputs[0])}.dimShuffle({perm})")


def _slice_expr(x: str, starts, steps, sizes, shape) -> str:
    expr = x
    for d, (b, s, n, full) in enumerate(zip(starts, steps, sizes, shape)):
        b, s, n = int(b), int(s), int(n)
        if s < 0:
            raise NotImplementedError("Poplar export: Slice with a negative step")
        if b == 0 and s == 1 and n == full:
            continue
        end = b + (n - 1) * s + 1 if n > 0 else b
        expr = f"{expr}.slice({b}, {end}, {d})"
        if s > 1:
            expr = f"{expr}.subSample({s}, {d})"
    return expr


def _slice(em, e):
    a = e.attrs
    _copy_of(em, e, _slice_expr(em.t(e.inputs[0]), a["starts"], a["steps"], a["sizes"],
                                e.inputs[0].shape))


def _concat(em, e):
    parts = ", ".join(em.t(x) for x in e.inputs)
    _copy_of(em, e, f"poplar::concat({{{parts}}}, {int(e.attrs['axis']) % len(e.outputs[0].shape)})")


def _split(em, e):
    from .poplar_emit import cstr

    axis = int(e.attrs["axis"]) % len(e.inputs[0].shape)
    x = em.t(e.inputs[0])
    begin = 0
    for out, n in zip(e.outputs, e.attrs["splits"]):
        v = f"{x}.slice({begin}, {begin + int(n)}, {axis})"
        ref = em.define(out, f"graph.clone({v}, {cstr(out.id)})")
        em.line(f"prog.add(poplar::program::Copy({v}, {ref}));")
        begin += int(n)


def _cast(em, e):
    em.define(e.outputs[0], f"popops::cast(graph, {em.t(e.inputs[0])}, "
                            f"{_ptype(e.outputs[0].dtype)}, prog, {_dbg(e)})")


def _matmul_options(e) -> str:
    """The poplin options PopART's MatMulOpx passes from the op: its
    partials type and available memory proportion (C++, after a comma), or
    "" when both are the defaults."""
    opts = []
    if e.attrs.get("partials_type") == "half":
        opts.append('{"partialsType", "half"}')
    amp = e.attrs.get("available_memory_proportion")
    if amp is not None:
        opts.append(f'{{"availableMemoryProportion", "{float(amp)!r}"}}')
    return f", poplar::OptionFlags{{{', '.join(opts)}}}" if opts else ""


def _matmul(em, e):
    """PopART's MatMulOpx: operands broadcast to common batch dimensions,
    grouped into (groups, m, k) x (groups, k, n), ``poplin::matMulGrouped``
    (``poplin::matMul`` for plain 2-D operands), reshaped to the output;
    the op's partials type and available memory proportion as options."""
    a_t, b_t = e.inputs[0], e.inputs[1]
    out = e.outputs[0]
    a, b = em.t(a_t), em.t(b_t)
    ot = _ptype(out.dtype)
    o = _matmul_options(e)
    if len(a_t.shape) == 2 and len(b_t.shape) == 2:
        if em.model_mapping(out) is None:
            em.define(out, f"poplin::matMul(graph, {a}, {b}, prog, {ot}, {_dbg(e)}{o})")
            return
        # The output laid out as the IPU model's plan lays it out, so that the
        # program's vertices and the ops after it sit where the model has them.
        ref = em.new_variable(out)
        em.line(f"poplin::matMulWithOutput(graph, {a}, {b}, {ref}, prog, {_dbg(e)}{o});")
        return
    sa, sb = list(a_t.shape), list(b_t.shape)
    if len(sa) == 1:
        a, sa = f"{a}.reshape({{1u, {sa[0]}u}})", [1, sa[0]]
    if len(sb) == 1:
        b, sb = f"{b}.reshape({{{sb[0]}u, 1u}})", [sb[0], 1]
    batch = list(np.broadcast_shapes(tuple(sa[:-2]), tuple(sb[:-2])))
    g = int(np.prod(batch, dtype=np.int64)) if batch else 1
    m, k, n = sa[-2], sa[-1], sb[-1]
    em.helpers.add("broadcastTo")
    a3 = f"ipuxl_export::broadcastTo({a}, {_shape(batch + [m, k])}).reshape({{{g}u, {m}u, {k}u}})"
    b3 = f"ipuxl_export::broadcastTo({b}, {_shape(batch + [k, n])}).reshape({{{g}u, {k}u, {n}u}})"
    em.define(out, f"poplin::matMulGrouped(graph, {a3}, {b3}, prog, {ot}, {_dbg(e)}{o})"
                   f".reshape({_shape(out.shape)})")


_REDUCE = {"ReduceSum": "ADD", "ReduceMean": "ADD", "ReduceMax": "MAX", "ReduceMin": "MIN",
           "ReduceProd": "MUL", "ReduceSumSquare": "SQUARE_ADD"}


def _reduce(em, e):
    """PopART's ReduceOpx: ``popops::reduce`` over the axes, reshaped to the
    kept dimensions; a mean multiplies by 1/n afterwards."""
    x_t, out = e.inputs[0], e.outputs[0]
    rank = len(x_t.shape)
    axes = sorted({int(a) % rank for a in e.attrs["axes"]}) if rank else []
    dims = "{" + ", ".join(f"{a}u" for a in axes) + "}"
    typ = e.type
    op = _REDUCE[typ]
    x = em.t(x_t)
    expr = (f"popops::reduce(graph, {x}, {_ptype(out.dtype)}, {dims}, "
            f"popops::ReduceParams(popops::Operation::{op}), prog, {_dbg(e)})"
            f".reshape({_shape(out.shape)})")
    ref = em.define(out, expr)
    if typ == "ReduceMean":
        n = int(np.prod([x_t.shape[a] for a in axes], dtype=np.int64)) if axes else 1
        em.line(f"popops::mulInPlace(graph, {ref}, {float(np.float32(1.0 / n)).hex()}f, prog, "
                f"{_dbg(e)});")


def _softmax(em, e):
    """PopART's SoftmaxOpx: ``popnn::nonLinearity(SOFTMAX_STABLE)`` over
    the innermost dimension, the axis moved there and back."""
    x_t = e.inputs[0]
    rank = len(x_t.shape)
    axis = int(e.attrs["axis"]) % rank
    em.helpers.add("softmaxAxis")
    em.define(e.outputs[0], f"ipuxl_export::softmaxAxis(graph, {em.t(x_t)}, {axis}, prog, {_dbg(e)})")


def _softmax_grad(em, e):
    """dx = y * (g - sum(g * y, axis)) (PopART's SoftmaxGradOpx)."""
    g_t, y_t = e.inputs[0], e.inputs[1]
    axis = int(e.attrs["axis"]) % len(y_t.shape)
    em.helpers.add("softmaxGrad")
    em.define(e.outputs[0], f"ipuxl_export::softmaxGrad(graph, {em.t(g_t)}, {em.t(y_t)}, {axis}, "
                            f"prog, {_dbg(e)})")


def _group_norm(em, e):
    x, w, b = (em.t(t) for t in e.inputs)
    y, mean, inv = e.outputs
    em.helpers.add("groupNorm")
    v = em.fresh("gn")
    em.line(f"auto {v} = ipuxl_export::groupNorm(graph, {x}, {w}, {b}, {int(e.attrs['num_groups'])}, "
            f"{float(np.float32(e.attrs['epsilon'])).hex()}f, prog, {_dbg(e)});")
    em.define(y, f"{v}[0]")
    em.define(mean, f"popops::cast(graph, {v}[1], {_ptype(mean.dtype)}, prog, {_dbg(e)})")
    em.define(inv, f"popops::cast(graph, {v}[2], {_ptype(inv.dtype)}, prog, {_dbg(e)})")


def _group_norm_grad(em, e):
    x, w, mean, inv, g = (em.t(t) for t in e.inputs)
    em.helpers.add("groupNormGrad")
    v = em.fresh("gng")
    em.line(f"auto {v} = ipuxl_export::groupNormGrad(graph, {x}, {w}, {mean}, {inv}, {g}, "
            f"{int(e.attrs['num_groups'])}, prog, {_dbg(e)});")
    for k, out in enumerate(e.outputs):
        em.define(out, f"{v}[{k}]")


def _gelu_grad(em, e):
    """g * d gelu(x)/dx, the tanh form's exact derivative (PopART's
    GeluGradOpx; ipuxl's popnn has no GELU input gradient)."""
    k, a = math.sqrt(2.0 / math.pi), 0.044715
    c = "popops::expr::Const"
    x = "popops::expr::_2"
    t = f"popops::expr::Tanh({c}({k!r}f) * ({x} + {c}({a!r}f) * {x} * {x} * {x}))"
    d = (f"{c}(0.5f) * ({c}(1.0f) + {t}) + {c}(0.5f) * {x} * ({c}(1.0f) - {t} * {t}) * "
         f"{c}({k!r}f) * ({c}(1.0f) + {c}({3 * a!r}f) * {x} * {x})")
    em.define(e.outputs[0], f"popops::map(graph, popops::expr::_1 * ({d}), "
                            f"{{{em.t(e.inputs[0])}, {em.t(e.inputs[1])}}}, prog, {_dbg(e)})")


def _nonlinearity_grad(em, e):
    """PopART's TanhGradOpx / ReluGradOpx: ``popnn::nonLinearityInputGradient``
    of the forward output and the incoming gradient."""
    g, y = (em.t(t) for t in e.inputs)
    kind = {"TanhGrad": "TANH", "ReluGrad": "RELU"}[e.type]
    em.define(e.outputs[0], f"popnn::nonLinearityInputGradient(graph, "
                            f"popnn::NonLinearityType::{kind}, {y}, {g}, prog, {_dbg(e)})")


def _scale_arg(em, e, idx: int) -> str:
    """Scale ``idx`` of a ScaledAdd (a: 0, b: 1): its tensor input, else
    the attribute as a float."""
    k = 2 + idx
    if len(e.inputs) > k and e.inputs[k] is not None:
        return em.t(e.inputs[k])
    return f"{float(np.float32(e.attrs[f'scale{idx}'])).hex()}f"


def _scaled_add(em, e):
    """out = a X + b Y (PopART's ScaledAddOpx: popops::scaledAddTo)."""
    from .poplar_emit import cstr

    x_t, y_t = e.inputs[0], e.inputs[1]
    a, b = _scale_arg(em, e, 0), _scale_arg(em, e, 1)
    if _inplace(e):
        target = em.t(x_t)
    else:
        target = em.define(e.outputs[0], f"graph.clone({em.t(x_t)}, {cstr(e.outputs[0].id)})")
        em.line(f"prog.add(poplar::program::Copy({em.t(x_t)}, {target}));")
    tensor_scales = a.startswith("T[") or b.startswith("T[")
    if tensor_scales:
        em.helpers.add("scalarLike")
        a = a if a.startswith("T[") else f"ipuxl_export::scalarLike(graph, {target}, {a})"
        b = b if b.startswith("T[") else f"ipuxl_export::scalarLike(graph, {target}, {b})"
    em.line(f"popops::scaledAddTo(graph, {target}, {a}, {em.t(y_t)}, {b}, prog, {_dbg(e)});")
    if _inplace(e):
        em.alias(e.outputs[0], x_t)


def _init(em, e):
    ref = em.new_variable(e.outputs[0])
    if e.attrs.get("init_type", "zero") == "zero":
        em.line(f"popops::zero(graph, {ref}, prog, {_dbg(e)});")
    else:
        em.line(f"prog.add(poplar::program::WriteUndef({ref}));")


def _copy_var_update(em, e):
    em.line(f"prog.add(poplar::program::Copy({em.t(e.inputs[1])}, {em.t(e.inputs[0])}));")
    em.alias(e.outputs[0], e.inputs[0])


def _factor(em, e, k: int = 2) -> str:
    if len(e.inputs) > k and e.inputs[k] is not None:
        return em.t(e.inputs[k])
    return f"{float(np.float32(e.attrs.get('factor', 1.0))).hex()}f"


def _accumulate(em, e):
    """PopART's AccumulateOpx: scaledAddTo / map expressions by mode."""
    mode = e.attrs["mode"]
    t, x = em.t(e.inputs[0]), em.t(e.inputs[1])
    f = _factor(em, e)
    if f.startswith("T["):
        em.helpers.add("scalarLike")
    if mode == "add":
        em.line(f"popops::addInPlace(graph, {t}, {x}, prog, {_dbg(e)});")
    elif mode == "dampened_add":
        em.line(f"popops::scaledAddTo(graph, {t}, {x}, {f}, prog, {_dbg(e)});")
    elif mode in ("dampened_add_square", "moving_average", "moving_average_square"):
        sq = mode.endswith("square")
        fx = f"popops::expr::_3" if f.startswith("T[") else f"popops::expr::Const({f})"
        xv = "popops::expr::_2 * popops::expr::_2" if sq else "popops::expr::_2"
        if mode == "dampened_add_square":
            expr = f"popops::expr::_1 + {fx} * {xv}"
        else:
            expr = (f"{fx} * popops::expr::_1 + (popops::expr::Const(1.0f) - {fx}) * ({xv})")
        ins = f"{{{t}, {x}" + (f", {f}.reshape({{}})" if f.startswith("T[") else "") + "}"
        em.line(f"popops::mapInPlace(graph, {expr}, {ins}, prog, {_dbg(e)});")
    elif mode == "mean":  # f: the number of values accumulated so far
        pe = "popops::expr"
        fx = f"{pe}::_3" if f.startswith("T[") else f"{pe}::Const({f})"
        n1 = f"({fx} + {pe}::Const(1.0f))"
        expr = f"({fx} / {n1}) * {pe}::_1 + {pe}::_2 / {n1}"
        ins = f"{{{t}, {x}" + (f", {f}.reshape({{}})" if f.startswith("T[") else "") + "}"
        em.line(f"popops::mapInPlace(graph, {expr}, {ins}, prog, {_dbg(e)});")
    else:
        raise NotImplementedError(f"Poplar export: op Accumulate ({e.name!r}) mode {mode!r} is "
                                  "not supported")
    em.alias(e.outputs[0], e.inputs[0])


def _accumulator_scale(em, e):
    t = em.t(e.inputs[0])
    f = _factor(em, e, 1)
    if f == "0x0.0p+0f":  # PopART zeroes outright (clearing NaN and inf)
        em.line(f"popops::zero(graph, {t}, prog, {_dbg(e)});")
    elif f.startswith("T["):
        em.line(f"popops::mulInPlace(graph, {t}, {f}.reshape({{}}), prog, {_dbg(e)});")
    else:
        em.line(f"popops::mulInPlace(graph, {t}, {f}, prog, {_dbg(e)});")
    em.alias(e.outputs[0], e.inputs[0])


def _where(em, e):
    c, a, b = (em.t(x) for x in e.inputs)
    em.define(e.outputs[0], f"popops::select(graph, {a}, {b}, {c}, prog, {_dbg(e)})")


def _sum(em, e):
    acc = em.t(e.inputs[0])
    if len(e.inputs) == 1:
        _identity(em, e)
        return
    for x in e.inputs[1:]:
        v = em.fresh("sum")
        em.line(f"poplar::Tensor {v} = popops::add(graph, {acc}, {em.t(x)}, prog, {_dbg(e)});")
        acc = v
    em.define(e.outputs[0], acc)


def _nll_softmax_grad(em, e):
    """NlllWithSoftmaxGradDirect: one generated vertex (popnn's calcLoss
    takes one-hot expected values and has no ignore index or reduction)."""
    typ = e.type
    nll = typ == "Nll"
    probs, labels = e.inputs[0], e.inputs[1]
    lg = None if nll else e.inputs[2]
    loss = e.outputs[0]
    if probs.dtype.name not in ("float32", "float16") or labels.dtype.name not in ("int32", "uint32"):
        raise NotImplementedError(f"Poplar export: op {e.type} ({e.name!r}) "
                                  f"with {probs.dtype.name} probs / {labels.dtype.name} labels")
    # float16 probabilities: the vertex computes in float32 and its outputs
    # are rounded to float16 once (the Session's float arithmetic)
    half = probs.dtype.name == "float16"
    em.codelets["NllSoftmaxGrad"] = CODELETS["NllSoftmaxGrad"]
    em.helpers.add("nllSoftmaxGrad")
    a = e.attrs
    v = em.fresh("nll")
    lab = f"popops::cast(graph, {em.t(labels)}, poplar::INT, prog, {_dbg(e)})"
    if nll:  # the loss alone: a unit gradient, the vertex's dx unused
        em.helpers.add("scalarLike")
        lgv = f"ipuxl_export::scalarLike(graph, {em.t(probs)}, 1.0f)"
        mode = 2 if int(a.get("log_prob", 0)) else 1
    else:
        lgv = f"popops::cast(graph, {em.t(lg)}, poplar::FLOAT, prog, {_dbg(e)})"
        mode = 0
    pv = f"popops::cast(graph, {em.t(probs)}, poplar::FLOAT, prog, {_dbg(e)})" if half else em.t(probs)
    em.line(f"auto {v} = ipuxl_export::nllSoftmaxGrad(graph, {pv}, {lab}, {lgv}, "
            f"{_reductions[a['reduction']]}, {int(a['has_ignore_index'])}, {int(a['ignore_index'])}, {mode}, "
            f"{_shape(loss.shape)}, prog, {_dbg(e)});")
    back = (lambda r: f"popops::cast(graph, {r}, poplar::HALF, prog, {_dbg(e)})") if half else (lambda r: r)
    em.define(loss, back(f"{v}[0]"))
    if not nll:
        em.define(e.outputs[1], back(f"{v}[1]"))


_reductions = {"none": 0, "sum": 1, "mean": 2}


def _remote_code_load(em, e):
    """PopART's RemoteCodeLoadOpx (exchangex.cpp): the loaded graph's
    Function gets one ``poplar::FunctionBuffer``
    (``graph.addFunctionBuffer(f, FunctionBufferMappingType::REMOTE)``, the
    mapping PopART uses for ``destination="executable"``), and each load is
    ``Copy(buffer, f)``."""
    g = e.code_load_graph
    if g is None or g not in em.prog.graph_inputs:
        raise NotImplementedError(f"Poplar export: op RemoteCodeLoad ({e.name!r}) of a graph "
                                  "the program never calls (it has no poplar::Function)")
    f = em.function_of(g)
    k = f[2:-1]
    em.helpers.add("functionBuffers")
    if k not in em.function_buffers:
        em.function_buffers.add(k)
        em.line(f"ipuxl_export::FB[{k}] = graph.addFunctionBuffer({f}, "
                "poplar::FunctionBufferMappingType::REMOTE);")
    em.line(f"prog.add(poplar::program::Copy(ipuxl_export::FB[{k}], {f}, {_dbg(e)}));")


# Built on the whole graph: the Function it may build first is the graph's own.
_remote_code_load.whole_graph = True


def _dynamic_slice(em, e):
    x, off = e.inputs[0], e.inputs[1]
    a = e.attrs
    dims = "{" + ", ".join(f"{int(d)}u" for d in a["axes"]) + "}"
    sizes = "{" + ", ".join(f"{int(s)}u" for s in a["sizes"]) + "}"
    off_u = f"popops::cast(graph, {em.t(off)}, poplar::UNSIGNED_INT, prog, {_dbg(e)}).flatten()"
    typ = e.type
    if typ == "DynamicSlice":
        em.define(e.outputs[0], f"popops::dynamicSlice(graph, {em.t(x)}, {off_u}, {dims}, {sizes}, "
                                f"prog, {_dbg(e)})")
        return
    upd = e.inputs[2]
    em.line(f"popops::dynamicUpdate(graph, {em.t(x)}, {em.t(upd)}, {off_u}, {dims}, {sizes}, prog, "
            f"{_dbg(e)});")
    em.alias(e.outputs[0], x)


def _adam_updater(em, e):
    """AdamUpdater: a generated vertex (no PopLibs call computes it)."""
    ins = list(e.inputs) + [None] * (8 - len(e.inputs))
    w, m, v, step = ins[:4]
    if any(t is not None for t in ins[4:]):
        raise NotImplementedError(f"Poplar export: op AdamUpdater ({e.name!r}) with tensor "
                                  "hyperparameters (only constant ones are exported)")
    for t in (w, m, v, step):
        ok = ("float32",) if t is step else ("float32", "float16")
        if t is not None and t.dtype.name not in ok:
            raise NotImplementedError(f"Poplar export: op AdamUpdater ({e.name!r}) on "
                                      f"{t.dtype.name} tensor {t.id!r} ({' or '.join(ok)} only)")

    def as_float(t):  # float16 state (tutorial 6's first moment) is read as float32
        ref = em.t(t)
        if t.dtype.name == "float32":
            return ref
        return f"popops::cast(graph, {ref}, poplar::FLOAT, prog, {_dbg(e)})"
    mode = e.attrs["mode"]
    a = e.attrs
    em.codelets["AdamUpdater"] = CODELETS["AdamUpdater"]
    em.helpers.add("adamUpdater")

    def f(k, default):
        return f"{float(np.float32(a.get(k, default))).hex()}f"

    use_wd = float(a.get("weight_decay", 0.0)) != 0.0
    step_ref = em.t(step) if step is not None else "poplar::Tensor()"
    upd = (
        f"ipuxl_export::adamUpdater(graph, {as_float(w if w is not None else m)}, {as_float(m)}, "
        f"{as_float(v)}, {step_ref}, {str(use_wd).lower()}, {str(step is not None).lower()}, "
        f"{str(mode in ('adam', 'lamb', 'adamax')).lower()}, {str(mode == 'adamax').lower()}, "
        f"{f('weight_decay', 0.0)}, {f('beta1', 0.9)}, {f('beta2', 0.999)}, {f('epsilon', 1e-7)}, "
        f"prog, {_dbg(e)})")
    out = e.outputs[0]
    if out.dtype.name != "float32":
        upd = f"popops::cast(graph, {upd}, {_ptype(out.dtype)}, prog, {_dbg(e)})"
    em.define(out, upd)


KERNELS = {
    "AdamUpdater": _adam_updater,
    **{t: _binary for t in _BINARY}, **{f"{t}LhsInplace": _binary for t in _BINARY},
    **{t: _unary for t in list(_UNARY) + list(_NONLIN)},
    **{f"{t}Inplace": _unary for t in list(_UNARY) + list(_NONLIN)},
    "IsNaN": _expr_unary("popops::expr::UnaryOp(popops::expr::UnaryOpType::IS_NAN, "
                         "popops::expr::_1)"),
    "IsInf": _expr_unary("popops::expr::UnaryOp(popops::expr::UnaryOpType::IS_INF, "
                         "popops::expr::_1)"),
    "Clip": _clip,
    "Identity": _identity, "Detach": _identity,
    # popxl-addons' identicalInputs all-reduce: an identity forward, whose
    # gradient (ReplicatedAllReduceIdenticalGradInputs) is the all-reduce
    "ReplicatedAllReduceIdenticalInputs": _identity, "DetachInplace": _identity, "IoTileCopy": _io_tile_copy,
    "Reshape": _reshape, "ReshapeInplace": _reshape,
    "Transpose": _transpose, "TransposeInplace": _transpose,
    "Slice": _slice, "SliceInplace": _slice, "Concat": _concat, "ConcatInplace": _concat,
    "Split": _split, "Cast": _cast, "MatMul": _matmul,
    **{t: _reduce for t in _REDUCE},
    "Softmax": _softmax, "SoftmaxGrad": _softmax_grad,
    "GroupNorm": _group_norm, "GroupNormGrad": _group_norm_grad, "GeluGrad": _gelu_grad,
    "TanhGrad": _nonlinearity_grad, "ReluGrad": _nonlinearity_grad,
    "ScaledAdd": _scaled_add, "ScaledAddLhsInplace": _scaled_add,
    "Init": _init, "CopyVarUpdate": _copy_var_update, "Accumulate": _accumulate,
    "AccumulatorScale": _accumulator_scale, "Where": _where, "Sum": _sum,
    "NlllWithSoftmaxGradDirect": _nll_softmax_grad, "Nll": _nll_softmax_grad, "RemoteCodeLoad": _remote_code_load,
    "DynamicSlice": _dynamic_slice, "DynamicUpdate": _dynamic_slice,
    "DynamicUpdateInplace": _dynamic_slice,
    **NN_KERNELS, **RANDOM_KERNELS, **SCAN_KERNELS, **INDEX_KERNELS,
    **ADDONS_KERNELS, **MISC_KERNELS, **RESIZE_KERNELS, **ROI_KERNELS,
}


def _emission_flag(e, flag: str) -> bool:
    typ = e.type  # the per-op emission table, as emit_kernel reads it
    return bool(getattr(KERNELS.get(typ), flag, False))


def whole_graph(e) -> bool:
    """Whether op ``e`` is built on the whole graph, never a virtual one."""
    return _emission_flag(e, "whole_graph")


def crosses_tile_sets(e) -> bool:
    """Whether op ``e`` reads from the other tile set by design (IoTileCopy)."""
    return _emission_flag(e, "crosses_tile_sets")


def emit_kernel(em, e) -> None:
    typ = e.type  # the per-op emission table (one entry per op type, as onnx_export's)
    fn = KERNELS.get(typ)
    if fn is None:
        raise NotImplementedError(
            f"Poplar export: op {e.type} ({e.name!r}) has no Poplar emission (supported: "
            "docs/export.md, python/ipuxl/export/poplar_ops.py KERNELS)")
    fn(em, e)


# gcl's CollectiveOperator by ipuxl's reduction (the core's ReduceOp names)
_GCL_OPS = {"add": "ADD", "mean": "MEAN", "mul": "MUL", "min": "MIN", "max": "MAX",
            "and": "LOGICAL_AND", "or": "LOGICAL_OR", "square_add": "SQUARE_ADD",
            "local": "LOCAL"}
_REDUCE_NAMES = ("add", "mean", "mul", "min", "max", "and", "or", "square_add", "local")


def _gcl_groups(kind: str, n: int, k: int, stride: int = 1):
    """The replica groups of a gcl::CommGroup, each in rank order (as
    ipuxl's gcl::replicaGroups forms them)."""
    if kind == "ORTHOGONAL":
        m = n // k
        return [[j + i * m for i in range(k)] for j in range(m)]
    return [[base + j + i * stride for i in range(k)]
            for base in range(0, n, k * stride) for j in range(stride)]


def _comm_group(group_of):
    """``""`` for one group of all replicas, else the ``gcl::CommGroup``
    whose groups are those of ``group_of`` (the group of each replica), or
    None if no CommGroup forms them."""
    n = len(group_of)
    if len(set(group_of)) <= 1:
        return ""
    want = sorted(sorted(r for r in range(n) if group_of[r] == g) for g in set(group_of))
    k = len(want[0])
    if any(len(w) != k for w in want):
        return None
    for stride in range(1, n // k + 1):
        if n % (k * stride) == 0 and sorted(_gcl_groups("CONSECUTIVE", n, k, stride)) == want:
            extra = f", {stride}" if stride > 1 else ""
            return f"gcl::CommGroup(gcl::CommGroupType::CONSECUTIVE, {k}{extra})"
    if sorted(_gcl_groups("ORTHOGONAL", n, k)) == want:
        return f"gcl::CommGroup(gcl::CommGroupType::ORTHOGONAL, {k})"
    return None


def emit_collective(em, e) -> None:
    """Replicated collectives as gcl's cross-replica calls
    (gcl/Collectives.hpp; PopART's ReplicatedAllReduceOpx,
    ReplicatedAllGatherOpx, ReplicatedReduceScatterOpx), over all replicas
    or the ``gcl::CommGroup`` that forms the op's replica groups."""
    typ = e.type
    if e.collective is None or typ == "AllReduce":
        raise NotImplementedError(f"Poplar export: op {typ} ({e.name!r}): only the replicated "
                                  "collectives (gcl cross-replica calls) are exported")
    kind, red, group_of = e.collective
    group = _comm_group(list(group_of))
    if group is None:
        raise NotImplementedError(f"Poplar export: op {typ} ({e.name!r}) over replica groups "
                                  f"{list(group_of)}: no gcl::CommGroup (ALL, CONSECUTIVE with a "
                                  "stride, ORTHOGONAL) forms these groups")
    gop = _GCL_OPS[_REDUCE_NAMES[int(red)]]
    em.helpers.add("gcl")
    x = em.t(e.inputs[0])
    cop = f"gcl::CollectiveOperator::{gop}"
    g = f"{group}, " if group else ""
    out = e.outputs[0]
    if typ == "ReplicatedAllReduceInplace":
        em.line(f"gcl::allReduceInPlaceCrossReplica(graph, {x}, {cop}, prog, {g}{_dbg(e)});")
        em.alias(out, e.inputs[0])
    elif typ in ("ReplicatedAllReduce", "ReplicatedAllReduceIdenticalGradInputs"):
        # popxl-addons' identicalGradInputs form reduces in the forward; its
        # gradient is ReplicatedAllReduceIdenticalInputs, an identity
        em.define(out, f"gcl::allReduceCrossReplica(graph, {x}, {cop}, prog, {g}{_dbg(e)})")
    elif typ == "ReplicatedAllGather":
        em.define(out, f"gcl::allGatherCrossReplica(graph, {x}, prog, {g}{_dbg(e)})"
                       f".reshape({_shape(out.shape)})")
    elif typ == "ReplicatedReduceScatter":
        em.define(out, f"gcl::reduceScatterCrossReplica(graph, {x}.flatten(), {cop}, prog, "
                       f"{g}{_dbg(e)}).reshape({_shape(out.shape)})")
    else:
        raise NotImplementedError(f"Poplar export: collective op {typ} ({e.name!r})")


_INCLUDES = {"gcl": ["#include <gcl/Collectives.hpp>"],
             "poplinConv": ["#include <poplin/ConvUtil.hpp>", "#include <poplin/Convolution.hpp>"],
             "popnnPooling": ["#include <popnn/Pooling.hpp>"],
             "popopsTopK": ["#include <popops/TopK.hpp>"],
             "cumSum": ["#include <poputil/VertexTemplates.hpp>"],
             "scatterReduce": ["#include <limits>"],
             "argExtreme": ["#include <popnn/Loss.hpp>"],
             "oneHotAxis": ["#include <popops/Encoding.hpp>"],
             "histogram": ["#include <popops/GatherStatistics.hpp>"],
             "reduceMedian": ["#include <popops/TopK.hpp>"],
             "functionBuffers": ["#include <poplar/FunctionBufferMappingType.hpp>"]}


def extra_includes(em) -> list:
    return [line for h, lines in _INCLUDES.items() if h in em.helpers for line in lines]


def helper_source(em) -> str:
    """The C++ helpers the program's ops use (``HELPERS``), each once, in a
    fixed order."""
    names = [n for n in HELPERS if n in em.helpers or any(n in HELPERS[h][1] for h in em.helpers)]
    return "namespace ipuxl_export {\n" + "\n".join(HELPERS[n][0] for n in names) + \
        "} // namespace ipuxl_export\n"
