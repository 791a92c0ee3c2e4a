"""Normalisations, mirroring PopXL's ``group_norm``, ``layer_norm`` and
``batch_norm_inference`` (PopART's GroupNormOp and BatchNormOp).

``t`` is ``(N, C, *)`` with channels on axis 1; ``weight``/``bias`` (and the
batch-norm statistics) have shape ``(C,)``. ``group_norm`` normalises each
sample's ``C / num_groups`` channels (times the spatial elements) together,
with the biased variance and ``eps`` inside the square root; ``layer_norm``
is ``group_norm`` with one group (as PopXL: it normalises all of axis 1 and
beyond, with per-channel weight and bias). Kernels: ``cpp/kernels/norm.cpp``.

Gradients: ``GroupNorm`` has the fused ``GroupNormGrad`` kernel (dx,
dweight, dbias in two passes); ``GroupNormGrad`` and ``BatchNormInference``
have decompositions into elementwise ops and reductions, which autodiff
differentiates (second order for group norm, first for batch norm).
"""
import numpy as np

from .. import dtypes
from ..grad import register_decomposition, register_grad
from ..op import create_op
from ..opdef import Cost, define_op
from ..tensor import Tensor
from .utils import check_in_graph, check_tensor_ipu_and_tile_set

__all__ = ["group_norm", "layer_norm", "batch_norm_inference"]

_NORM_DTYPES = (dtypes.float16, dtypes.float32)


def _check(op: str, t: Tensor, **params: Tensor):
    if t.dtype not in _NORM_DTYPES:
        raise TypeError(f"{op}: tensor {t.id!r} has dtype {t.dtype.name}; expected float16 or "
                        "float32")
    if t.rank < 2:
        raise ValueError(f"{op}: tensor {t.id!r} {t.shape} must have rank >= 2 (N, C, ...)")
    for name, p in params.items():
        if p.dtype != t.dtype:
            raise TypeError(f"{op}: {name} {p.id!r} has dtype {p.dtype.name}; expected the "
                            f"input's {t.dtype.name}")
        if p.shape != (t.shape[1],):
            raise ValueError(f"{op}: {name} {p.id!r} has shape {p.shape}; expected "
                             f"({t.shape[1]},), one value per channel of {t.id!r} {t.shape}")


def _group_norm_shape(ins, attrs, graphs=()):
    x = ins[0]
    g = attrs["num_groups"]
    if x.shape[1] % g:
        raise ValueError(f"num_groups {g} must divide the {x.shape[1]} channels of {x.id!r}")
    n = x.shape[0] * g
    return [(x.shape, x.dtype), ((n,), dtypes.float32), ((n,), dtypes.float32)]


def _group_norm_grad_shape(ins, attrs, graphs=()):
    x = ins[0]
    c = (x.shape[1],)
    return [(x.shape, x.dtype), (c, x.dtype), (c, x.dtype)]


def _group_norm_flops(op) -> int:
    """popxl_addons' performance_utils count: the mean and variance of each
    group cost about one and two operations per element; normalising
    (x - mean) / std, then scale and shift, four per output element."""
    x, out, mean = op.inputs[0], op.outputs[0], op.outputs[1]
    groups = mean.shape[0] // x.shape[0]
    per_group = x.shape[-1] * x.shape[-2] // groups
    n_out = int(np.prod(out.shape, dtype=np.int64))
    return int(per_group + 2 * per_group + 2 * mean.shape[0] + 4 * n_out)


define_op("GroupNorm", _group_norm_shape, cost=Cost("norm", flops=_group_norm_flops))
define_op("GroupNormGrad", _group_norm_grad_shape, cost="norm")
define_op("BatchNormInference", lambda ins, attrs, graphs=(): [(ins[0].shape, ins[0].dtype)], cost="norm")


def group_norm(t: Tensor, weight: Tensor, bias: Tensor, num_groups: int,
               eps: float = 1e-5) -> Tensor:
    """Group normalisation (arXiv:1803.08494) of ``t`` ``(N, C, *)``: each
    sample's channels split into ``num_groups`` groups, each normalised to
    zero mean and unit (biased) variance, then scaled by ``weight`` and
    shifted by ``bias`` (both ``(C,)``, the input's dtype).

    Raises:
        TypeError: dtypes are not float16/float32 or differ.
        ValueError: ``num_groups`` does not divide C, or shapes differ.
    """
    check_in_graph("group_norm", t=t, weight=weight, bias=bias)
    check_tensor_ipu_and_tile_set(t=t, weight=weight, bias=bias)
    _check("group_norm", t, weight=weight, bias=bias)
    if not isinstance(num_groups, (int, np.integer)) or isinstance(num_groups, bool) \
            or num_groups < 1:
        raise ValueError(f"group_norm: num_groups must be a positive int, got {num_groups!r}")
    if t.shape[1] % int(num_groups):
        raise ValueError(f"group_norm: num_groups {num_groups} must divide the {t.shape[1]} "
                         f"channels of {t.id!r} {t.shape}")
    op = create_op("GroupNorm", [t, weight, bias],
                   ["group_norm_out", "group_norm_mean", "group_norm_inv_std_dev"],
                   {"num_groups": int(num_groups), "epsilon": float(eps)}, name="group_norm")
    return op.outputs[0]


def layer_norm(t: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    """Layer normalisation: :func:`group_norm` with one group (each sample
    normalised over axis 1 and beyond; ``weight``/``bias`` of shape ``(C,)``).
    For ``torch.nn.LayerNorm`` over several trailing axes, flatten them into
    axis 1 first."""
    return group_norm(t, weight=weight, bias=bias, num_groups=1, eps=eps)


def batch_norm_inference(t: Tensor, scale: Tensor, bias: Tensor, mean: Tensor, var: Tensor,
                         epsilon: float = 1e-5, momentum: float = 0.9) -> Tensor:
    """Batch normalisation with given statistics (inference):
    ``(t - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + bias[c]`` over the
    channel axis 1. ``momentum`` (for running averages) is not used."""
    check_in_graph("batch_norm_inference", t=t, scale=scale, b=bias, mean=mean, var=var)
    check_tensor_ipu_and_tile_set(t=t, scale=scale, b=bias, mean=mean, var=var)
    _check("batch_norm_inference", t, scale=scale, bias=bias, mean=mean, var=var)
    return create_op("BatchNormInference", [t, scale, bias, mean, var], ["batch_norm_out"],
                     {"epsilon": float(epsilon), "momentum": float(momentum)},
                     name="batch_norm").outputs[0]


# ---------------------------------------------------------------- gradients

def _grouped(t: Tensor, groups: int) -> Tensor:
    from .shape import reshape

    n, c = t.shape[0], t.shape[1]
    s = int(np.prod(t.shape[2:], dtype=np.int64)) if t.rank > 2 else 1
    return reshape(t, (n, groups, c // groups, s))


def _per_group(v: Tensor, n: int, groups: int, dt) -> Tensor:
    from .cast import cast
    from .shape import reshape

    v = reshape(v, (n, groups, 1, 1))
    return cast(v, dt) if v.dtype != dt else v


@register_grad("GroupNorm")
def _group_norm_grad(ctx):
    """dx, dweight, dbias from the fused GroupNormGrad op; gradients reaching
    the mean / inv_std_dev outputs (when a gradient graph that reads them is
    differentiated again) add ``g_mean / n`` and ``-g_inv * inv^3 * (x - mean)
    / n`` to dx (n: elements per group)."""
    from .shape import reshape

    x, w = ctx.x(0), ctx.x(1)
    mean, inv = ctx.y(1), ctx.y(2)
    G = ctx.attrs["num_groups"]
    g = ctx.g_or_zeros(0)
    op = create_op("GroupNormGrad", [x, w, mean, inv, g], ["dx", "dweight", "dbias"],
                   {"num_groups": G}, name="group_norm_grad")
    dx, dw, db = op.outputs
    gm, gi = ctx.g(1), ctx.g(2)
    if gm is not None or gi is not None:
        n, dt = x.shape[0], x.dtype
        blk = float(np.prod(x.shape[1:], dtype=np.int64) // G)
        xg = _grouped(x, G)
        xc = xg - _per_group(mean, n, G, dt)  # full group shape, so the sum below is too
        extra = xc * 0.0
        if gm is not None:
            extra = extra + _per_group(gm, n, G, dt) * (1.0 / blk)
        if gi is not None:
            iv = _per_group(inv, n, G, dt)
            extra = extra + _per_group(gi, n, G, dt) * iv * iv * iv * xc * (-1.0 / blk)
        dx = dx + reshape(extra, x.shape)
    return [dx, dw, db]


@register_decomposition("GroupNormGrad")
def _group_norm_grad_decomposition(op, x, w, mean, inv, dy):
    """The fused gradient from elementwise ops and reductions, for autodiff
    of a gradient graph (second order)."""
    from .reduce import mean as rmean
    from .reduce import sum as rsum
    from .shape import reshape

    G = op.attrs["num_groups"]
    n, c = x.shape[0], x.shape[1]
    dt = x.dtype
    xg, dyg = _grouped(x, G), _grouped(dy, G)
    wg = reshape(w, (1, G, c // G, 1))
    m, iv = _per_group(mean, n, G, dt), _per_group(inv, n, G, dt)
    xh = (xg - m) * iv
    gw = dyg * wg
    a1 = rmean(gw, axis=[2, 3], keepdims=True)
    a2 = rmean(gw * xh, axis=[2, 3], keepdims=True)
    dx = reshape(iv * (gw - a1 - xh * a2), x.shape)
    dw = reshape(rsum(dyg * xh, axis=[0, 3]), (c,))
    db = reshape(rsum(dyg, axis=[0, 3]), (c,))
    return [dx, dw, db]


@register_decomposition("BatchNormInference")
def _batch_norm_decomposition(op, x, scale, bias, mean, var):
    from .shape import reshape
    from .unary import sqrt

    shape = (1, x.shape[1]) + (1,) * (x.rank - 2)
    inv = reshape(scale, shape) / sqrt(reshape(var, shape) + op.attrs["epsilon"])
    return [(x - reshape(mean, shape)) * inv + reshape(bias, shape)]
