"""4-bit group quantisation (``popxl_addons.ops.group_quantize_decompress``).

FlexGen's scheme (https://arxiv.org/abs/2303.06865): a float16 tensor is
split into groups along one axis; each group keeps its minimum (``bias``)
and ``(max - min) / 15`` (``scale``) and its elements become the nearest of
the 16 levels ``bias + i * scale``; the 4-bit ids are packed four to a
uint16, the first in the top nibble.

``group_quantize_decompress`` unpacks on the device (op
``GroupQuantizeDecompress``, kernel ``cpp/kernels/group_quantize.cpp``);
the NumPy functions compress and decompress on the host. The op has a
gradient for ``group_scale`` and ``group_bias`` (the packed ids are
integers); popxl_addons' custom op has none.
"""
from typing import Tuple

import numpy as np

from ... import dtypes
from ...grad import register_grad
from ...op import create_op
from ...opdef import define_op
from ...ops.utils import check_in_graph, check_tensor_ipu_and_tile_set
from ...tensor import Tensor

__all__ = [
    "group_quantize_decompress",
    "group_quantize_decompress_numpy",
    "group_quantize_compress_numpy",
]


def _shape(ins, attrs, graphs=()):
    t, scale, bias = ins
    if t.dtype != dtypes.uint16:
        raise TypeError(f"the packed tensor {t.id!r} must be uint16, got {t.dtype}")
    if len(t.shape) != 3:
        raise ValueError(f"the packed tensor {t.id!r} must have rank 3, got shape {t.shape}")
    want = (*t.shape[:2], 1)
    for name, s in (("group_scale", scale), ("group_bias", bias)):
        if tuple(s.shape) != want:
            raise ValueError(f"{name} {s.id!r} must have shape {want}, got {s.shape}")
    if scale.dtype != bias.dtype:
        raise TypeError(f"group_scale and group_bias must have the same dtype, got "
                        f"{scale.dtype} and {bias.dtype}")
    if scale.dtype not in (dtypes.float16, dtypes.float32):
        raise TypeError(f"group_scale must be float16 or float32, got {scale.dtype}")
    rows, groups, ids = t.shape
    return [((rows, groups * ids * 4), scale.dtype)]


define_op("GroupQuantizeDecompress", _shape, cost="elementwise")


def group_quantize_decompress(t: Tensor, group_scale: Tensor, group_bias: Tensor,
                              dim: int = -1) -> Tensor:
    """Decompress a 4-bit group-quantised tensor.

    Args:
        t: packed ids, uint16 ``(num_rows, num_groups, num_group_ids)``.
        group_scale: float16 (or float32) ``(num_rows, num_groups[, 1])``.
        group_bias: same shape and dtype as ``group_scale``.
        dim: the axis of the result that holds the decompressed groups
            (the result is transposed to put it there; default last).

    Returns:
        ``(num_rows, num_groups * num_group_ids * 4)`` in ``group_scale``'s
        dtype (transposed for ``dim``): ``id * scale + bias``.
    """
    if t.rank != 3:
        raise NotImplementedError(
            "4-bit decompression currently supported only for packed tensors with rank 3")
    if group_scale.rank < t.rank - 1 or group_scale.rank > t.rank:
        raise ValueError("group_scale.rank must be equal to or one less than t.rank")
    if group_bias.rank < t.rank - 1 or group_bias.rank > t.rank:
        raise ValueError("group_bias.rank must be equal to or one less than t.rank")
    if t.shape[:-1] != group_scale.shape[: t.rank - 1]:
        raise ValueError("The first two dimensions of t and group_scale must be the same")
    if t.shape[:-1] != group_bias.shape[: t.rank - 1]:
        raise ValueError("The first two dimensions of t and group_bias must be the same")
    check_in_graph("group_quantize_decompress", t=t, group_scale=group_scale,
                   group_bias=group_bias)
    check_tensor_ipu_and_tile_set(t=t, group_scale=group_scale, group_bias=group_bias)
    if group_scale.rank == t.rank - 1:
        group_scale = group_scale.reshape((*group_scale.shape, 1))
    if group_bias.rank == t.rank - 1:
        group_bias = group_bias.reshape((*group_bias.shape, 1))
    out = create_op("GroupQuantizeDecompress", [t, group_scale, group_bias], ["t_decompressed"],
                    name="group_quantize_decompress").outputs[0]
    if dim != -1:
        perm = list(range(out.rank))
        i = perm.pop(-1)
        perm.insert(dim, i)
        out = out.transpose(perm)
    return out


@register_grad("GroupQuantizeDecompress")
def _group_quantize_decompress_grad(ctx):
    # out = id * scale + bias per group: d scale = sum(g * id), d bias = sum(g).
    from ... import constant, ops

    g = ctx.g()
    t, scale = ctx.x(0), ctx.x(1)
    rows, groups, ids = t.shape
    g = g.reshape((rows, groups, ids * 4))
    d_scale = d_bias = None
    if ctx.needs(1):
        ones = constant(np.ones(scale.shape, scale.dtype.as_numpy()), scale.dtype)
        zeros = constant(np.zeros(scale.shape, scale.dtype.as_numpy()), scale.dtype)
        levels = create_op("GroupQuantizeDecompress", [t, ones, zeros], ["ids"],
                           name="group_quantize_ids").outputs[0]
        d_scale = ops.sum(g * levels.reshape((rows, groups, ids * 4)), axis=-1, keepdims=True)
    if ctx.needs(2):
        d_bias = ops.sum(g, axis=-1, keepdims=True)
    return [None, d_scale, d_bias]


def group_quantize_decompress_numpy(t: np.ndarray, group_scale: np.ndarray,
                                    group_bias: np.ndarray, dim: int = -1) -> np.ndarray:
    """NumPy decompression (the reference of the op): ``t`` uint16
    ``(*leading, num_groups, num_group_ids)``, ``group_scale`` and
    ``group_bias`` float16 ``(*leading, num_groups, 1)``; returns float16
    ``(*leading, num_groups * num_group_ids * 4)``, with the last axis moved
    to ``dim``."""
    leading = t.shape[:-2]
    n_groups, n_ids = t.shape[-2:]
    unpacked = np.stack([(t >> s) & 15 for s in (12, 8, 4, 0)], axis=-1)
    unpacked = unpacked.reshape(*leading, n_groups, n_ids * 4).astype(np.float16)
    out = (unpacked * group_scale + group_bias).reshape(*leading, n_groups * n_ids * 4)
    if dim != -1:
        perm = list(range(out.ndim))
        i = perm.pop(-1)
        perm.insert(dim, i)
        out = out.transpose(perm)
    return out


def group_quantize_compress_numpy(t: np.ndarray, group_size: int,
                                  dim: int = -1) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NumPy compression: groups of ``group_size`` along ``dim`` (a multiple
    of 4 dividing that axis); returns the packed uint16 ids
    ``(*other_dims, num_groups, group_size // 4)`` and the float16 scale and
    bias ``(*other_dims, num_groups, 1)``.

    Raises:
        ValueError: ``t`` has a non-finite value, or the group size does not fit.
    """
    if dim != -1:
        perm = list(range(t.ndim))
        i = perm.pop(dim)
        perm.append(i)
        t = t.transpose(perm)
    leading = t.shape[:-1]
    n_cols = t.shape[-1]
    if group_size <= 0 or group_size % 4 or n_cols % group_size:
        raise ValueError(f"group_size {group_size} must be a positive multiple of 4 that divides "
                         f"the compressed axis ({n_cols})")
    if not np.isfinite(t).all():
        raise ValueError("Cannot compress t which contains non-finite values")
    n_groups = n_cols // group_size
    grouped = t.reshape(*leading, n_groups, group_size)
    t_max = grouped.max(-1, keepdims=True).astype(np.float16)
    t_min = grouped.min(-1, keepdims=True).astype(np.float16)
    scale = (t_max - t_min) / (2**4 - 1)
    bias = t_min
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.round((grouped - bias) / scale)
    q = np.clip(np.nan_to_num(q, nan=0.0), 0, 15).astype(np.uint16)  # constant groups: id 0
    weights = (2 ** (np.arange(4) * 4)[::-1]).astype(np.uint16)
    packed = q.reshape(*leading, n_groups, group_size // 4, 4) @ weights
    return packed.astype(np.uint16), scale, bias
