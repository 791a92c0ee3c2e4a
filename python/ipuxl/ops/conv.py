"""Convolutions, mirroring PopXL's ``conv``, ``conv_transpose`` and their
float8 forms ``conv_pow2scaled`` / ``conv_transpose_pow2scaled`` (PopART's
ConvOp and ConvTransposeOp, ONNX semantics, NC[D]HW layout).

Op types (kernels in ``cpp/kernels/conv/``):

* ``Conv`` (x, w) -> y; ``ConvPow2Scaled`` (x, w, log2_scale) -> float16;
* ``ConvDataGrad`` (dy, w) -> dx: the input gradient of a Conv, which is
  also the transposed convolution (``conv_transpose`` creates it, as PopART's
  ConvTransposePattern turns a ConvTranspose into a convolution);
* ``ConvWeightsGrad`` (dy, x) -> dw.

All take ``strides``, ``pads`` (begins then ends), ``dilations`` and
``groups``; their gradient rules use each other, so gradients of any order
exist. ``available_memory_proportions``, ``partials_types`` and
``enable_conv_dithering`` plan the IPU's convolution; they are validated and
otherwise do not change the result (float16 always accumulates in float32).
The IPU model plans the convolution with the first entry of
``available_memory_proportions`` and ``partials_types`` (PopART's
MultiConvOptions for the op's one convolution, index 0), kept on the op as
``available_memory_proportion`` / ``partials_type`` (default: the model's
proportion, float partials) and inherited by its gradient ops, which PopART
creates with the forward op's convolution options.
"""
from typing import List, Optional, Sequence, Tuple

from .. import dtypes
from ..grad import register_grad
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor
from .utils import check_in_graph, check_tensor_ipu_and_tile_set

__all__ = ["conv", "conv_transpose", "conv_pow2scaled", "conv_transpose_pow2scaled"]

PadType = str  # Literal["not_set", "same_upper", "same_lower", "valid"]
PAD_TYPES = ("not_set", "same_upper", "same_lower", "valid")
_CONV_DTYPES = (dtypes.float16, dtypes.float32)
_FP8 = (dtypes.float8_143, dtypes.float8_152)


# ---------------------------------------------------------------- arguments

def _per_axis(op: str, what: str, values, n: int, default: int) -> Tuple[int, ...]:
    """``values`` as ``n`` ints. None or empty gives the default; a uniform
    tuple of another length (PopXL's 2-D defaults such as ``(1, 1)`` used
    with 1-D or 3-D inputs) is repeated."""
    if values is None:
        return (default,) * n
    try:
        vals = tuple(int(v) for v in values)
    except TypeError:
        vals = (int(values),)
    if len(vals) == 0:
        return (default,) * n
    if len(vals) != n:
        if len(set(vals)) == 1:
            return (vals[0],) * n
        raise ValueError(f"{op}: `{what}` {tuple(values)} must have {n} values, one per spatial "
                         f"axis of the input")
    return vals


def _pads(op: str, padding, n: int) -> Tuple[int, ...]:
    return _per_axis(op, "padding", padding, 2 * n, 0)


def _check_pad_type(pad_type) -> str:
    if pad_type not in PAD_TYPES:
        raise ValueError(f"pad type {pad_type} is not valid, must be not_set, same_upper, "
                         "same_lower or valid")
    return pad_type


def _auto_pads(pad_type: str, in_sp, k, strides, dils, pads) -> Tuple[int, ...]:
    """ONNX auto_pad for a convolution or pooling: SAME_* pads so that
    ``out = ceil(in / stride)`` (the odd unit at the end for same_upper, at
    the beginning for same_lower); VALID uses no padding."""
    n = len(in_sp)
    if pad_type == "not_set":
        return tuple(pads)
    if pad_type == "valid":
        return (0,) * (2 * n)
    b, e = [0] * n, [0] * n
    for i in range(n):
        out = -(-in_sp[i] // strides[i])
        total = max(0, (out - 1) * strides[i] + (k[i] - 1) * dils[i] + 1 - in_sp[i])
        small, big = total // 2, total - total // 2
        b[i], e[i] = (small, big) if pad_type == "same_upper" else (big, small)
    return tuple(b + e)


def _conv_out(in_sp, k, strides, pads, dils) -> Tuple[int, ...]:
    n = len(in_sp)
    out = []
    for i in range(n):
        span = in_sp[i] + pads[i] + pads[n + i] - dils[i] * (k[i] - 1) - 1
        out.append(span // strides[i] + 1 if span >= 0 else 0)
    return tuple(out)


def _plan_attrs(attrs, available_memory_proportions, partials_types):
    """attrs with the op's planning options (the one convolution's: index 0)."""
    if available_memory_proportions:
        attrs["available_memory_proportion"] = float(available_memory_proportions[0])
    if partials_types:
        attrs["partials_type"] = str(partials_types[0]).lower()
    return attrs


def _check_options(op: str, available_memory_proportions, partials_types, enable_conv_dithering):
    if available_memory_proportions is not None:
        for p in available_memory_proportions:
            if not 0 < float(p) <= 1:
                raise ValueError(f"{op}: available_memory_proportions must be in (0, 1], got {p}")
    if partials_types is not None:
        for p in partials_types:  # PopART lower-cases them first (MultiConvOptions)
            if not isinstance(p, str) or p.lower() not in ("half", "float"):
                raise ValueError(f"{op}: partials_types must be 'half' or 'float', got {p!r}")
    if enable_conv_dithering is not None:
        for p in enable_conv_dithering:
            if int(p) not in (0, 1):
                raise ValueError(f"{op}: enable_conv_dithering values must be 0 or 1, got {p}")


def _check_conv_operands(op: str, t: Tensor, weight: Tensor) -> int:
    if t.rank not in (3, 4, 5):
        raise ValueError(f"{op}: the input {t.id!r} {t.shape} must have rank 3, 4 or 5 "
                         "(N, C and 1 to 3 spatial axes)")
    if weight.rank != t.rank:
        raise ValueError(f"{op}: the weight {weight.id!r} {weight.shape} must have the rank of the "
                         f"input {t.id!r} {t.shape}")
    return t.rank - 2


def _check_float_dtypes(op: str, t: Tensor, weight: Tensor):
    for x in (t, weight):
        if x.dtype not in _CONV_DTYPES:
            raise TypeError(f"{op}: tensor {x.id!r} has dtype {x.dtype.name}; expected float16 or "
                            "float32 (float8 operands: use the pow2scaled form)")
    if t.dtype != weight.dtype:
        raise TypeError(f"{op}: the input {t.id!r} ({t.dtype.name}) and weight {weight.id!r} "
                        f"({weight.dtype.name}) must have the same dtype")


def _check_pow2scaled_input_properties(t: Tensor, weight: Tensor, log2_scale: Tensor):
    if t.dtype not in _FP8 or weight.dtype not in _FP8:
        raise TypeError("Scaled conv operands must be of dtype popxl.float8_143 or "
                        "popxl.float8_152")
    if log2_scale.rank > 0:
        raise ValueError("Log2 scale argument must be a scalar tensor")
    if log2_scale.dtype != dtypes.int32:
        raise TypeError("Log2 scale tensor must be of type popxl.int32")


def _conv_attrs(op, t, weight, stride, padding, dilation, groups, pad_type):
    n = _check_conv_operands(op, t, weight)
    _check_pad_type(pad_type)
    strides = _per_axis(op, "stride", stride, n, 1)
    dils = _per_axis(op, "dilation", dilation, n, 1)
    pads = _pads(op, padding, n)
    if any(s < 1 for s in strides) or any(d < 1 for d in dils) or any(p < 0 for p in pads):
        raise ValueError(f"{op}: strides and dilations must be >= 1 and padding >= 0, got stride "
                         f"{strides}, dilation {dils}, padding {pads}")
    if not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    pads = _auto_pads(pad_type, t.shape[2:], weight.shape[2:], strides, dils, pads)
    return {"strides": list(strides), "pads": list(pads), "dilations": list(dils),
            "groups": int(groups)}


# ---------------------------------------------------------------- shape rules

def _conv_shape(ins, attrs, graphs=()):
    x, w = ins[0], ins[1]
    g = attrs["groups"]
    if x.rank < 3 or w.rank != x.rank:
        raise ValueError(f"input {x.id!r} {x.shape} and weight {w.id!r} {w.shape} must both have "
                         "rank 3, 4 or 5")
    if x.shape[1] % g or w.shape[0] % g or w.shape[1] * g != x.shape[1]:
        raise ValueError(
            f"the weight {w.id!r} {w.shape} must have {x.shape[1]} / groups ({g}) input channels "
            f"and a multiple of groups output channels (input {x.id!r} {x.shape})")
    out = _conv_out(x.shape[2:], w.shape[2:], attrs["strides"], attrs["pads"], attrs["dilations"])
    if any(o < 1 for o in out):
        raise ValueError(f"the kernel {w.shape[2:]} (dilations {tuple(attrs['dilations'])}) does "
                         f"not fit the padded input {x.id!r} {x.shape}: output size {out}")
    dt = dtypes.float16 if len(ins) > 2 else x.dtype
    return [((x.shape[0], w.shape[0]) + out, dt)]


def _data_grad_shape(ins, attrs, graphs=()):
    dy, w = ins[0], ins[1]
    xs = tuple(attrs["_x_shape"])
    g = attrs["groups"]
    if w.shape[0] != dy.shape[1] or w.shape[1] * g != xs[1]:
        raise ValueError(f"the weight {w.id!r} {w.shape} does not connect {dy.id!r} {dy.shape} "
                         f"to an input of shape {xs} with {g} groups")
    out = _conv_out(xs[2:], w.shape[2:], attrs["strides"], attrs["pads"], attrs["dilations"])
    if tuple(dy.shape[2:]) != out or dy.shape[0] != xs[0]:
        raise ValueError(f"{dy.id!r} {dy.shape} is not the output shape of a convolution of an "
                         f"input {xs} with {w.id!r} {w.shape} (spatial output {out})")
    dt = dtypes.float16 if len(ins) > 2 else dy.dtype
    return [(xs, dt)]


def _weights_grad_shape(ins, attrs, graphs=()):
    dy, x = ins[0], ins[1]
    ws = tuple(attrs["_w_shape"])
    out = _conv_out(x.shape[2:], ws[2:], attrs["strides"], attrs["pads"], attrs["dilations"])
    if tuple(dy.shape) != (x.shape[0], ws[0]) + out:
        raise ValueError(f"{dy.id!r} {dy.shape} is not the output shape of a convolution of "
                         f"{x.id!r} {x.shape} with weights of shape {ws}")
    return [(ws, dy.dtype)]


define_op("Conv", _conv_shape, cost="conv")
define_op("ConvPow2Scaled", _conv_shape, kernel="Conv",
          no_grad="float8 convolutions are not differentiable (PopART: float8 is not supported "
                  "for training)", cost="conv")
define_op("ConvDataGrad", _data_grad_shape, cost="conv_data_grad")
define_op("ConvDataGradPow2Scaled", _data_grad_shape, kernel="ConvDataGrad",
          no_grad="float8 convolutions are not differentiable (PopART: float8 is not supported "
                  "for training)", cost="conv_data_grad")
define_op("ConvWeightsGrad", _weights_grad_shape, cost="conv_weights_grad")


def _public(attrs):
    return {k: v for k, v in attrs.items() if not k.startswith("_")}


def _conv(x, w, attrs, name="conv", out_name="conv_out"):
    return create_op("Conv", [x, w], [out_name], _public(attrs), name=name).outputs[0]


def _data_grad(dy, w, attrs, x_shape, name="conv_data_grad", out_name="conv_data_grad_out"):
    a = dict(_public(attrs), _x_shape=tuple(x_shape))
    return create_op("ConvDataGrad", [dy, w], [out_name], a, name=name).outputs[0]


def _weights_grad(dy, x, attrs, w_shape):
    a = dict(_public(attrs), _w_shape=tuple(w_shape))
    return create_op("ConvWeightsGrad", [dy, x], ["conv_weights_grad_out"], a,
                     name="conv_weights_grad").outputs[0]


# ---------------------------------------------------------------- builders

def conv(t: Tensor, weight: Tensor, stride: Optional[Tuple[int]] = (1, 1),
         padding: Optional[Tuple[int]] = (0, 0, 0, 0), dilation: Optional[Tuple[int]] = (1, 1),
         groups: Optional[int] = 1, pad_type: Optional[PadType] = "not_set",
         available_memory_proportions: Optional[List[float]] = None,
         partials_types: Optional[List[str]] = None,
         enable_conv_dithering: Optional[List[int]] = None) -> Tensor:
    """Convolution of ``t`` ``(N, C, *spatial)`` (1 to 3 spatial axes) with
    ``weight`` ``(M, C / groups, *kernel)``; the result is ``(N, M, *out)``
    with ``out = floor((in + pad_begin + pad_end - dilation * (k - 1) - 1) /
    stride) + 1``. ``padding`` is ``[x1_begin, x2_begin, ..., x1_end,
    x2_end, ...]``; ``pad_type`` ``"same_upper"`` / ``"same_lower"`` pads so
    that ``out = ceil(in / stride)`` (an odd unit at the end / beginning) and
    ``"valid"`` uses no padding. float16 or float32 (float16 accumulates in
    float32 and rounds once). The IPU planning options are checked and do
    not change the result.

    Raises:
        TypeError: a dtype is not float16/float32 or the two differ.
        ValueError: shapes, strides, padding, dilations or groups do not fit.
    """
    check_in_graph("conv", t=t, weight=weight)
    check_tensor_ipu_and_tile_set(t=t, weight=weight)
    _check_float_dtypes("conv", t, weight)
    _check_options("conv", available_memory_proportions, partials_types, enable_conv_dithering)
    attrs = _conv_attrs("conv", t, weight, stride, padding, dilation, groups, pad_type)
    _plan_attrs(attrs, available_memory_proportions, partials_types)
    return _conv(t, weight, attrs)


def conv_pow2scaled(t: Tensor, weight: Tensor, log2_scale: Tensor,
                    stride: Optional[Tuple[int]] = (1, 1),
                    padding: Optional[Tuple[int]] = (0, 0, 0, 0),
                    dilation: Optional[Tuple[int]] = (1, 1), groups: Optional[int] = 1,
                    pad_type: Optional[PadType] = "not_set",
                    available_memory_proportions: Optional[List[float]] = None,
                    enable_conv_dithering: Optional[List[int]] = None) -> Tensor:
    """:func:`conv` of float8 operands (``float8_143`` / ``float8_152``),
    the result multiplied by ``2 ** log2_scale`` (an int32 scalar tensor)
    and returned as float16. The operands are decoded exactly and the
    products accumulate in float32.

    Raises:
        TypeError: an operand is not float8, or ``log2_scale`` is not int32.
        ValueError: ``log2_scale`` is not a scalar.
    """
    _check_pow2scaled_input_properties(t, weight, log2_scale)
    check_in_graph("conv_pow2scaled", t=t, weight=weight, log2_scale=log2_scale)
    check_tensor_ipu_and_tile_set(t=t, weight=weight)
    _check_options("conv_pow2scaled", available_memory_proportions, None, enable_conv_dithering)
    attrs = _conv_attrs("conv_pow2scaled", t, weight, stride, padding, dilation, groups, pad_type)
    # PopXL sets partials_types=["half"] (PopART requires half partials for
    # float8 operands).
    _plan_attrs(attrs, available_memory_proportions, ["half"])
    return create_op("ConvPow2Scaled", [t, weight, log2_scale], ["conv_out"], attrs,
                     name="conv").outputs[0]


def _transpose_attrs(op, t, weight, stride, padding, dilation, groups, pad_type, output_padding,
                     output_shape):
    n = _check_conv_operands(op, t, weight)
    _check_pad_type(pad_type)
    strides = _per_axis(op, "stride", stride, n, 1)
    dils = _per_axis(op, "dilation", dilation, n, 1)
    pads = list(_pads(op, padding, n))
    if not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    if weight.shape[0] != t.shape[1]:
        raise ValueError(f"{op}: the weight {weight.id!r} {weight.shape} must have the input's "
                         f"{t.shape[1]} channels first (C_in, C_out / groups, *kernel)")
    out_pad = _per_axis(op, "output_padding", output_padding, n, 0)
    for i in range(n):
        if not 0 <= out_pad[i] < max(strides[i], dils[i]):
            raise ValueError(f"{op}: output_padding {out_pad} must be smaller than the stride or "
                             "the dilation of its axis")
    in_sp, k = t.shape[2:], weight.shape[2:]
    full = [strides[i] * (in_sp[i] - 1) + out_pad[i] + (k[i] - 1) * dils[i] + 1 for i in range(n)]
    out_shape = tuple(int(v) for v in (output_shape or ()))
    if len(out_shape) == n + 2:
        out_shape = out_shape[2:]
    if out_shape or pad_type in ("same_upper", "same_lower"):
        target = out_shape or tuple(in_sp[i] * strides[i] for i in range(n))
        if len(target) != n:
            raise ValueError(f"{op}: output_shape {tuple(output_shape)} must have {n} spatial sizes")
        for i in range(n):
            total = full[i] - target[i]
            if total < 0:
                raise ValueError(f"{op}: output_shape {target} is larger than the transposed "
                                 f"convolution can produce ({tuple(full)})")
            small, big = total // 2, total - total // 2
            # as ONNX: same_upper takes the odd unit off the end, the others
            # off the beginning
            pads[i], pads[n + i] = (small, big) if pad_type == "same_upper" else (big, small)
    elif pad_type == "valid":
        pads = [0] * (2 * n)
    if any(p < 0 for p in pads) or any(s < 1 for s in strides) or any(d < 1 for d in dils):
        raise ValueError(f"{op}: strides and dilations must be >= 1 and padding >= 0")
    out_sp = tuple(full[i] - pads[i] - pads[n + i] for i in range(n))
    if any(o < 1 for o in out_sp):
        raise ValueError(f"{op}: the padding {tuple(pads)} leaves an empty output {out_sp}")
    x_shape = (t.shape[0], weight.shape[1] * groups) + out_sp
    attrs = {"strides": list(strides), "pads": list(pads), "dilations": list(dils),
             "groups": int(groups)}
    return attrs, x_shape


def conv_transpose(t: Tensor, weight: Tensor, stride: Optional[Tuple[int]] = (1, 1),
                   padding: Optional[Tuple[int]] = (0, 0, 0, 0),
                   dilation: Optional[Tuple[int]] = (1, 1), groups: Optional[int] = 1,
                   pad_type: Optional[PadType] = "not_set",
                   output_padding: Optional[Tuple[int]] = (),
                   output_shape: Optional[Tuple[int]] = (),
                   available_memory_proportions: Optional[List[float]] = None,
                   partials_types: Optional[List[str]] = None,
                   enable_conv_dithering: Optional[List[int]] = None) -> Tensor:
    """Transposed convolution (ONNX ConvTranspose, ``torch.nn.ConvTranspose*d``)
    of ``t`` ``(N, C_in, *in)`` with ``weight`` ``(C_in, C_out / groups,
    *kernel)``: ``out = stride * (in - 1) + output_padding + dilation * (k -
    1) + 1 - pad_begin - pad_end``. With ``output_shape`` (spatial sizes) the
    padding is derived from it as ONNX does. The result is the input
    gradient of the matching convolution.
    """
    op = "conv_transpose"
    check_in_graph(op, t=t, weight=weight)
    check_tensor_ipu_and_tile_set(t=t, weight=weight)
    _check_float_dtypes(op, t, weight)
    _check_options(op, available_memory_proportions, partials_types, enable_conv_dithering)
    attrs, x_shape = _transpose_attrs(op, t, weight, stride, padding, dilation, groups, pad_type,
                                      output_padding, output_shape)
    _plan_attrs(attrs, available_memory_proportions, partials_types)
    return _data_grad(t, weight, attrs, x_shape, name="convtranspose",
                      out_name="convtranspose_out")


def conv_transpose_pow2scaled(t: Tensor, weight: Tensor, log2_scale: Tensor,
                              stride: Optional[Tuple[int]] = (1, 1),
                              padding: Optional[Tuple[int]] = (0, 0, 0, 0),
                              dilation: Optional[Tuple[int]] = (1, 1), groups: Optional[int] = 1,
                              pad_type: Optional[PadType] = "not_set",
                              output_padding: Optional[Tuple[int]] = (),
                              output_shape: Optional[Tuple[int]] = (),
                              available_memory_proportions: Optional[List[float]] = None,
                              enable_conv_dithering: Optional[List[int]] = None) -> Tensor:
    """:func:`conv_transpose` of float8 operands, the result multiplied by
    ``2 ** log2_scale`` and returned as float16 (see :func:`conv_pow2scaled`)."""
    op = "conv_transpose_pow2scaled"
    _check_pow2scaled_input_properties(t, weight, log2_scale)
    check_in_graph(op, t=t, weight=weight, log2_scale=log2_scale)
    check_tensor_ipu_and_tile_set(t=t, weight=weight)
    _check_options(op, available_memory_proportions, None, enable_conv_dithering)
    attrs, x_shape = _transpose_attrs(op, t, weight, stride, padding, dilation, groups, pad_type,
                                      output_padding, output_shape)
    _plan_attrs(attrs, available_memory_proportions, ["half"])
    attrs["_x_shape"] = x_shape
    return create_op("ConvDataGradPow2Scaled", [t, weight, log2_scale], ["convtranspose_out"],
                     attrs, name="convtranspose").outputs[0]


# ---------------------------------------------------------------- gradient rules
#
# Conv is linear in each operand; its two gradients are ConvDataGrad and
# ConvWeightsGrad, and theirs are again the three ops (adjoints of each
# other), so second and higher orders work.

@register_grad("Conv")
def _conv_grad(ctx):
    g = ctx.g()
    x, w = ctx.op.inputs[0], ctx.op.inputs[1]
    dx = _data_grad(g, ctx.x(1), ctx.attrs, x.shape) if ctx.needs(0) else None
    dw = _weights_grad(g, ctx.x(0), ctx.attrs, w.shape) if ctx.needs(1) else None
    return [dx, dw]


@register_grad("ConvDataGrad")
def _conv_data_grad_grad(ctx):
    g = ctx.g()  # shaped like x
    dy, w = ctx.op.inputs[0], ctx.op.inputs[1]
    d_dy = _conv(g, ctx.x(1), ctx.attrs) if ctx.needs(0) else None
    d_w = _weights_grad(ctx.x(0), g, ctx.attrs, w.shape) if ctx.needs(1) else None
    return [d_dy, d_w]


@register_grad("ConvWeightsGrad")
def _conv_weights_grad_grad(ctx):
    g = ctx.g()  # shaped like w
    dy, x = ctx.op.inputs[0], ctx.op.inputs[1]
    d_dy = _conv(ctx.x(1), g, ctx.attrs) if ctx.needs(0) else None
    d_x = _data_grad(ctx.x(0), g, ctx.attrs, x.shape) if ctx.needs(1) else None
    return [d_dy, d_x]
