"""Rotary positional embeddings (``popxl_addons.ops.rotary_pos_embed``).

RoFormer's RoPE (https://arxiv.org/abs/2104.09864), as GPT-J applies it:
the first ``rotary_dim`` elements of each head's hidden vector are
``rotary_dim / 2`` complex numbers stored interleaved (real, imaginary),
and the one at sequence position ``m`` turns by ``m * theta_i``,
``theta_i = base ** (-2 i / rotary_dim)``. Ops ``RotaryPosEmbed`` and its
adjoint ``RotaryPosEmbedGrad`` (kernel ``cpp/kernels/rotary.cpp``); the
gradient rule also gives the gradients of the sin and cos tables.
"""
from typing import Any, Optional, Tuple

import numpy as np

from ... import dtypes
from ...grad import register_grad
from ...op import create_op
from ...opdef import define_op
from ...ops.utils import check_in_graph, check_tensor_ipu_and_tile_set
from ...tensor import Tensor

__all__ = ["rotary_pos_embed", "trig_tables", "trig_table_constants"]


def trig_tables(seq_len: int, rotary_dim: int, base: int = 10000,
                np_dtype: Any = "float32") -> Tuple[np.ndarray, np.ndarray]:
    """``(sin, cos)`` of ``m * theta_i``, each ``(seq_len, rotary_dim // 2)``."""
    theta = base ** (-1 * np.arange(0, rotary_dim, 2).astype(np_dtype) / rotary_dim)
    seq_idx = np.arange(seq_len).astype(np_dtype)
    phi = np.outer(seq_idx, theta)
    return np.sin(phi), np.cos(phi)


def trig_table_constants(seq_len: int, rotary_dim: int, base: int = 10000,
                         dtype: dtypes.dtype = dtypes.float32):
    """The tables of :func:`trig_tables` as popxl constants of ``dtype``."""
    from ... import constant

    sin, cos = trig_tables(seq_len, rotary_dim, base, dtype.as_numpy())
    return constant(sin, dtype), constant(cos, dtype)


def _shape(ins, attrs, graphs=()):
    x, sin, cos = ins
    r = int(attrs["rotary_dim"])
    if len(x.shape) != 4:
        raise ValueError(f"x {x.id!r} should have rank 4 (batch, seq, heads, hh), got {x.shape}")
    if r % 2 or r < 0 or r > x.shape[3]:
        raise ValueError(f"rotary_dim ({r}) must be even and at most the hidden size {x.shape[3]}")
    for name, t in (("sin", sin), ("cos", cos)):
        if len(t.shape) != 3 or t.shape[0] not in (1, x.shape[0]) or t.shape[1:] != (x.shape[1], r // 2):
            raise ValueError(f"{name} {t.id!r} must have shape (1 or {x.shape[0]}, {x.shape[1]}, "
                             f"{r // 2}), got {t.shape}")
        if t.dtype != x.dtype:
            raise TypeError(f"{name} {t.id!r} has dtype {t.dtype}; x has {x.dtype}")
    return [(x.shape, x.dtype)]


define_op("RotaryPosEmbed", _shape, cost="elementwise")
define_op("RotaryPosEmbedGrad", _shape, cost="elementwise")


def rotary_pos_embed(t: Tensor, sin: Tensor, cos: Tensor,
                     rotary_dim: Optional[int] = None) -> Tensor:
    """Rotate ``t`` ``(batch, seq, heads, hh)`` by the angles whose sines
    and cosines are ``sin``, ``cos`` (``(seq, rotary_dim / 2)`` or
    ``(1 or batch, seq, rotary_dim / 2)``, from :func:`trig_tables`);
    ``rotary_dim`` (even) elements rotate, by default all."""
    if not rotary_dim:
        rotary_dim = t.shape[-1]
    check_in_graph("rotary_pos_embed", t=t, sin=sin, cos=cos)
    if t.rank != 4:
        raise ValueError(f"rotary_pos_embed: t {t.id!r} should have rank 4 (batch, seq, heads, hh)")
    if sin.rank == 2:
        sin = sin.reshape((1, *sin.shape))
    if cos.rank == 2:
        cos = cos.reshape((1, *cos.shape))
    if sin.rank != 3 or cos.rank != 3:
        raise ValueError("rotary_pos_embed: trig functions should have rank 3 "
                         "(1 or batch, seq, rotary_dim / 2)")
    check_tensor_ipu_and_tile_set(t=t, sin=sin, cos=cos)
    return create_op("RotaryPosEmbed", [t, sin, cos], ["t_rotated"],
                     {"rotary_dim": int(rotary_dim)}, name="rotary_pos_embed").outputs[0]


def _trig_grads(ctx, inverse: bool):
    """Gradients of sin and cos for y = rotate(x) (inverse: the adjoint):
    summed over heads (and batch when the tables have one row)."""
    from ... import ops

    x, sin, g = ctx.x(0), ctx.x(1), ctx.g()
    b, s, h, _ = x.shape
    r = int(ctx.attrs["rotary_dim"])

    def pairs(t):
        t = ops.slice(t, start=0, stop=r, axis=3) if r < t.shape[3] else t
        t = t.reshape((b, s, h, r // 2, 2))
        re = ops.slice(t, start=0, stop=1, axis=4).reshape((b, s, h, r // 2))
        im = ops.slice(t, start=1, stop=2, axis=4).reshape((b, s, h, r // 2))
        return re, im

    xr, xi = pairs(x)
    gr, gi = pairs(g)
    # y_re = xr c - sgn xi s ; y_im = xi c + sgn xr s
    d_cos = ops.sum(gr * xr + gi * xi, axis=2)
    d_sin = ops.sum(gi * xr - gr * xi, axis=2)
    if inverse:
        d_sin = -d_sin
    if sin.shape[0] == 1 and b != 1:
        d_cos = ops.sum(d_cos, axis=0, keepdims=True)
        d_sin = ops.sum(d_sin, axis=0, keepdims=True)
    return d_sin, d_cos


def _rotary_grad(ctx, adjoint: str, inverse: bool):
    out = [None, None, None]
    if ctx.needs(0):
        out[0] = create_op(adjoint, [ctx.g(), ctx.x(1), ctx.x(2)], ["t_rotated_grad"],
                           {"rotary_dim": int(ctx.attrs["rotary_dim"])},
                           name="rotary_pos_embed_grad").outputs[0]
    if ctx.needs(1) or ctx.needs(2):
        d_sin, d_cos = _trig_grads(ctx, inverse)
        out[1] = d_sin if ctx.needs(1) else None
        out[2] = d_cos if ctx.needs(2) else None
    return out


@register_grad("RotaryPosEmbed")
def _rotary_pos_embed_grad(ctx):
    return _rotary_grad(ctx, "RotaryPosEmbedGrad", inverse=False)


@register_grad("RotaryPosEmbedGrad")
def _rotary_pos_embed_grad_grad(ctx):
    return _rotary_grad(ctx, "RotaryPosEmbed", inverse=True)
