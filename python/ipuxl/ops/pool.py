"""Pooling, mirroring PopXL's ``average_pool`` and ``max_pool`` (PopART's
AveragePoolOp and MaxPoolOp, ONNX semantics, NC[D]HW layout).

Output size per spatial axis: ``floor`` (or ``ceil`` with ``ceil_mode``) of
``(in + pad_begin + pad_end - dilation * (k - 1) - 1) / stride``, plus 1; as
PyTorch, in ceil mode a last window that would start in the end padding is
dropped. The average divides by the number of *input* elements in each
window (PopART's ``count_include_pad = 0``; torch's
``count_include_pad=False``). Max pooling propagates NaN and routes the
gradient to the first maximum of each window (PyTorch's choice).

Kernels: ``cpp/kernels/pool.cpp``. ``AveragePoolGrad`` and ``MaxPoolGrad``
are the gradient ops; their rules (``AveragePool`` again, and
``MaxPoolSelect``) make gradients of any order available.
"""
from typing import Optional, Tuple

from .. import dtypes
from ..grad import register_grad
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor
from .conv import PAD_TYPES, _auto_pads, _per_axis
from .utils import check_in_graph, check_tensor_ipu_and_tile_set

__all__ = ["average_pool", "max_pool"]

_POOL_DTYPES = (dtypes.float16, dtypes.float32)


def _pool_attrs(op: str, t: Tensor, kernel_size, stride, padding, out_pads, dilation,
                in_dilations, auto_pad, ceil_mode):
    if t.rank not in (3, 4, 5):
        raise ValueError(f"{op}: the input {t.id!r} {t.shape} must have rank 3, 4 or 5 (N, C and 1 "
                         "to 3 spatial axes)")
    if t.dtype not in _POOL_DTYPES:
        raise TypeError(f"{op}: tensor {t.id!r} has dtype {t.dtype.name}; expected float16 or "
                        "float32")
    n = t.rank - 2
    try:
        k = tuple(int(v) for v in kernel_size)
    except TypeError:
        k = (int(kernel_size),) * n
    if len(k) != n:
        raise ValueError(f"{op}: kernel_size {tuple(kernel_size)} must have one value per spatial "
                         f"axis of {t.id!r} {t.shape} ({n})")
    strides = _per_axis(op, "stride", stride, n, 1)
    dils = _per_axis(op, "dilation", dilation, n, 1)
    pads = _per_axis(op, "padding", padding, 2 * n, 0)
    if out_pads and any(int(v) != 0 for v in out_pads):
        raise NotImplementedError(f"{op}: out_pads {tuple(out_pads)} is not supported by ipuxl")
    if in_dilations and any(int(v) != 1 for v in in_dilations):
        raise NotImplementedError(f"{op}: in_dilations {tuple(in_dilations)} is not supported by "
                                  "ipuxl")
    if auto_pad not in PAD_TYPES:
        raise ValueError(f"{op}: auto_pad {auto_pad} is not valid, must be not_set, same_upper, "
                         "same_lower or valid")
    if any(v < 1 for v in k + strides + dils) or any(p < 0 for p in pads):
        raise ValueError(f"{op}: kernel_size, stride and dilation must be >= 1 and padding >= 0, "
                         f"got {k}, {strides}, {dils}, {pads}")
    pads = _auto_pads(auto_pad, t.shape[2:], k, strides, dils, pads)
    for i in range(n):
        eff = dils[i] * (k[i] - 1) + 1
        if pads[i] >= eff or pads[n + i] >= eff:
            raise ValueError(f"{op}: padding {pads} must be smaller than the (dilated) kernel "
                             f"{k} on each side, or windows would hold padding only")
    return {"kernel": list(k), "strides": list(strides), "pads": list(pads),
            "dilations": list(dils), "ceil_mode": int(bool(ceil_mode))}


def _pool_out(in_sp, attrs) -> Tuple[int, ...]:
    k, s, p, d = attrs["kernel"], attrs["strides"], attrs["pads"], attrs["dilations"]
    n = len(in_sp)
    out = []
    for i in range(n):
        span = in_sp[i] + p[i] + p[n + i] - d[i] * (k[i] - 1) - 1
        if span < 0:
            out.append(0)
            continue
        o = (-(-span // s[i]) if attrs["ceil_mode"] else span // s[i]) + 1
        if attrs["ceil_mode"] and (o - 1) * s[i] >= in_sp[i] + p[i]:
            o -= 1
        out.append(o)
    return tuple(out)


def _pool_shape(ins, attrs, graphs=()):
    x = ins[0]
    out = _pool_out(x.shape[2:], attrs)
    if any(o < 1 for o in out):
        raise ValueError(f"the kernel {tuple(attrs['kernel'])} does not fit the padded input "
                         f"{x.id!r} {x.shape}")
    return [(x.shape[:2] + out, x.dtype)]


def _pool_grad_shape(ins, attrs, graphs=()):
    xs = tuple(attrs["_x_shape"])
    if tuple(ins[-1].shape) != xs[:2] + _pool_out(xs[2:], attrs):
        raise ValueError(f"{ins[-1].id!r} {ins[-1].shape} is not the pooled shape of {xs}")
    return [(xs, ins[-1].dtype)]


def _select_shape(ins, attrs, graphs=()):
    x, t = ins
    if t.shape != x.shape:
        raise ValueError(f"{t.id!r} {t.shape} must have the shape of {x.id!r} {x.shape}")
    return _pool_shape([x], attrs)


define_op("AveragePool", _pool_shape, cost="pool")
define_op("MaxPool", _pool_shape, cost="pool")
define_op("AveragePoolGrad", _pool_grad_shape, cost="pool")
define_op("MaxPoolGrad", _pool_grad_shape, cost="pool")
define_op("MaxPoolSelect", _select_shape, cost="pool")


def _kernel_attrs(attrs):
    return {k: v for k, v in attrs.items() if not k.startswith("_")}


def average_pool(t: Tensor, kernel_size: Tuple[int], stride: Optional[Tuple[int]] = None,
                 padding: Optional[Tuple[int]] = None, out_pads: Optional[Tuple[int]] = None,
                 dilation: Optional[Tuple[int]] = None, in_dilations: Optional[Tuple[int]] = None,
                 auto_pad: str = "not_set", ceil_mode: bool = False) -> Tensor:
    """Average of each ``kernel_size`` window of ``t`` ``(N, C, *spatial)``
    (1 to 3 spatial axes), padding not counted. ``stride`` and ``dilation``
    default to 1, ``padding`` (``[x1_begin, ..., x1_end, ...]``) to 0;
    ``auto_pad`` as :func:`ipuxl.ops.conv`. ``out_pads`` and
    ``in_dilations`` other than the defaults raise ``NotImplementedError``.
    """
    check_in_graph("average_pool", t=t)
    check_tensor_ipu_and_tile_set(t=t)
    attrs = _pool_attrs("average_pool", t, kernel_size, stride, padding, out_pads, dilation,
                        in_dilations, auto_pad, ceil_mode)
    return create_op("AveragePool", [t], ["averagepool_out"], attrs, name="averagepool").outputs[0]


def max_pool(t: Tensor, kernel_size: Tuple[int], stride: Optional[Tuple[int]] = None,
             padding: Optional[Tuple[int]] = None, out_pads: Optional[Tuple[int]] = None,
             dilation: Optional[Tuple[int]] = None, in_dilations: Optional[Tuple[int]] = None,
             auto_pad: str = "not_set", ceil_mode: bool = False,
             storage_order: str = "row") -> Tensor:
    """Maximum of each ``kernel_size`` window of ``t`` (arguments as
    :func:`average_pool`). ``storage_order`` (``"row"`` or ``"column"``)
    only concerns ONNX's optional index output, which PopXL does not
    return."""
    check_in_graph("max_pool", t=t)
    check_tensor_ipu_and_tile_set(t=t)
    if storage_order not in ("row", "column"):
        raise ValueError(f"max_pool: storage_order must be 'row' or 'column', got "
                         f"{storage_order!r}")
    attrs = _pool_attrs("max_pool", t, kernel_size, stride, padding, out_pads, dilation,
                        in_dilations, auto_pad, ceil_mode)
    return create_op("MaxPool", [t], ["maxpool_out"], attrs, name="maxpool").outputs[0]


# ---------------------------------------------------------------- gradient rules

def _avg_grad(g, attrs, x_shape):
    a = dict(_kernel_attrs(attrs), _x_shape=tuple(x_shape))
    return create_op("AveragePoolGrad", [g], ["averagepool_grad_out"], a,
                     name="averagepool_grad").outputs[0]


@register_grad("AveragePool")
def _average_pool_grad(ctx):
    return [_avg_grad(ctx.g(), ctx.attrs, ctx.op.inputs[0].shape)]


@register_grad("AveragePoolGrad")
def _average_pool_grad_grad(ctx):
    # AveragePoolGrad is the adjoint of AveragePool, and conversely.
    return [create_op("AveragePool", [ctx.g()], ["averagepool_out"],
                      _kernel_attrs(ctx.attrs), name="averagepool").outputs[0]]


@register_grad("MaxPool")
def _max_pool_grad(ctx):
    a = dict(_kernel_attrs(ctx.attrs), _x_shape=ctx.op.inputs[0].shape)
    return [create_op("MaxPoolGrad", [ctx.x(0), ctx.g()], ["maxpool_grad_out"], a,
                      name="maxpool_grad").outputs[0]]


@register_grad("MaxPoolGrad")
def _max_pool_grad_grad(ctx):
    # Linear in dy (its adjoint reads g at each window's maximum); piecewise
    # constant in x, whose gradient is zero almost everywhere.
    d_dy = None
    if ctx.needs(1):
        d_dy = create_op("MaxPoolSelect", [ctx.x(0), ctx.g()], ["maxpool_select_out"],
                         _kernel_attrs(ctx.attrs), name="maxpool_select").outputs[0]
    return [None, d_dy]


@register_grad("MaxPoolSelect")
def _max_pool_select_grad(ctx):
    d_t = None
    if ctx.needs(1):
        a = dict(_kernel_attrs(ctx.attrs), _x_shape=ctx.op.inputs[0].shape)
        d_t = create_op("MaxPoolGrad", [ctx.x(0), ctx.g()], ["maxpool_grad_out"], a,
                        name="maxpool_grad").outputs[0]
    return [None, d_t]
