"""Resampling ops, mirroring PopXL's ``interpolate`` (PopART's ResizeOp,
ONNX Resize with scales) and ``roi_align`` (PopART's RoiAlignOp).

Kernels: ``cpp/kernels/resize.cpp`` and ``cpp/kernels/roi_align.cpp``. Both
ops are linear in their data input; their gradients are the transposed ops
(``ResizeGrad``, ``RoiAlignGrad``), whose gradients are the forward ops
again. ``roi_align`` gives no gradient to the ROI boxes (as PopART).
"""
import math
from typing import Optional, Tuple

from .. import dtypes
from ..grad import register_grad
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor
from .utils import check_in_graph, check_tensor_ipu_and_tile_set

__all__ = ["interpolate", "roi_align"]

_FLOATS = (dtypes.float16, dtypes.float32)
MODES = ("nearest", "linear", "cubic")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_crop_and_resize")


def _resize_out(shape, scales):
    return tuple(int(math.floor(d * s)) for d, s in zip(shape, scales))


def _resize_shape(ins, attrs, graphs=()):
    x = ins[0]
    out = _resize_out(x.shape, attrs["scales"])
    if any(o < 1 for o in out) and x.nelms:
        raise ValueError(f"scales {tuple(attrs['scales'])} give an empty output {out} for "
                         f"{x.id!r} {x.shape}")
    return [(out, x.dtype)]


def _resize_grad_shape(ins, attrs, graphs=()):
    xs = tuple(attrs["_x_shape"])
    if _resize_out(xs, attrs["scales"]) != tuple(ins[0].shape):
        raise ValueError(f"{ins[0].id!r} {ins[0].shape} is not the resized shape of {xs}")
    return [(xs, ins[0].dtype)]


define_op("Resize", _resize_shape, cost="elementwise")
define_op("ResizeGrad", _resize_grad_shape, cost="elementwise")


def interpolate(t: Tensor, scale_factor: Optional[Tuple[float]] = (1.0, 1.0, 1.0, 1.0),
                mode: Optional[str] = "nearest",
                nearest_mode: Optional[str] = "round_prefer_floor",
                coordinate_transformation_mode: Optional[str] = "half_pixel") -> Tensor:
    """Resize ``t``: each axis ``i`` becomes ``floor(t.shape[i] *
    scale_factor[i])`` long (one factor per axis of ``t``). ``mode``:
    ``"nearest"`` (rounded as ``nearest_mode``), ``"linear"`` or ``"cubic"``
    (ONNX's cubic, coefficient -0.75), separably on every axis, indices
    clamped at the edges. ``coordinate_transformation_mode`` maps output to
    input coordinates as ONNX Resize; ``"tf_crop_and_resize"`` needs ROIs
    PopXL does not take and raises ``NotImplementedError``.
    """
    check_in_graph("interpolate", t=t)
    check_tensor_ipu_and_tile_set(t=t)
    if mode not in MODES:
        raise ValueError(f"interpolate type {mode} is not valid, must be nearest, linear or cubic.")
    if nearest_mode not in NEAREST_MODES:
        raise ValueError(f"interpolate type {nearest_mode} is not valid, must be "
                         "round_prefer_floor, round_prefer_ceil, floor or ceil.")
    if coordinate_transformation_mode not in COORDINATE_MODES:
        raise ValueError(f"interpolate type {coordinate_transformation_mode} is not valid, must be "
                         "half_pixel, pytorch_half_pixel, align_corners, asymmetric or "
                         "tf_crop_and_resize.")
    if coordinate_transformation_mode == "tf_crop_and_resize":
        raise NotImplementedError("interpolate: coordinate_transformation_mode "
                                  "'tf_crop_and_resize' is not supported by ipuxl")
    if t.dtype not in _FLOATS:
        raise TypeError(f"interpolate: tensor {t.id!r} has dtype {t.dtype.name}; expected float16 "
                        "or float32")
    scales = [float(s) for s in scale_factor]
    if len(scales) != t.rank:
        raise ValueError(f"interpolate: scale_factor {tuple(scale_factor)} must have one value per "
                         f"axis of {t.id!r} {t.shape}")
    if any(not s > 0 for s in scales):
        raise ValueError(f"interpolate: scale_factor values must be positive, got {tuple(scales)}")
    attrs = {"scales": scales, "mode": mode, "nearest_mode": nearest_mode,
             "coordinate_transformation_mode": coordinate_transformation_mode,
             "cubic_coeff_a": -0.75}
    return create_op("Resize", [t], ["interpolate_out"], attrs, name="interpolate").outputs[0]


def _public(attrs):
    return {k: v for k, v in attrs.items() if not k.startswith("_")}


@register_grad("Resize")
def _resize_grad(ctx):
    a = dict(_public(ctx.attrs), _x_shape=ctx.op.inputs[0].shape)
    return [create_op("ResizeGrad", [ctx.g()], ["interpolate_grad_out"], a,
                      name="interpolate_grad").outputs[0]]


@register_grad("ResizeGrad")
def _resize_grad_grad(ctx):
    return [create_op("Resize", [ctx.g()], ["interpolate_out"], _public(ctx.attrs),
                      name="interpolate").outputs[0]]


# ---------------------------------------------------------------- roi_align

def _roi_shape(ins, attrs, graphs=()):
    x, rois = ins[0], ins[1]
    return [((rois.shape[0], x.shape[1], attrs["output_height"], attrs["output_width"]),
             x.dtype)]


def _roi_grad_shape(ins, attrs, graphs=()):
    return [(tuple(attrs["_x_shape"]), ins[0].dtype)]


define_op("RoiAlign", _roi_shape, cost="elementwise")
define_op("RoiAlignGrad", _roi_grad_shape, cost="elementwise")


def roi_align(t: Tensor, rois: Tensor, batch_index: Tensor, output_size: Tuple[int],
              spatial_scale: float, sampling_ratio: int) -> Tensor:
    """Average ROI align of the feature map ``t`` ``(N, C, H, W)`` over the
    boxes ``rois`` ``(num_rois, 4)`` (``[x1, y1, x2, y2]`` in image
    coordinates, scaled by ``spatial_scale``) of images ``batch_index``
    ``(num_rois,)`` int32. Each of the ``output_size`` ``(height, width)``
    bins averages ``sampling_ratio`` x ``sampling_ratio`` bilinear samples
    (0: ``ceil`` of the bin size). Returns ``(num_rois, C, height, width)``;
    the algorithm of ``torchvision.ops.roi_align(aligned=False)``.
    """
    op = "roi_align"
    check_in_graph(op, t=t, rois=rois, batch_index=batch_index)
    check_tensor_ipu_and_tile_set(t=t, rois=rois, batch_index=batch_index)
    if t.dtype not in _FLOATS or rois.dtype != t.dtype:
        raise TypeError(f"{op}: t {t.id!r} ({t.dtype.name}) and rois {rois.id!r} "
                        f"({rois.dtype.name}) must both be float16 or both float32")
    if batch_index.dtype != dtypes.int32:
        raise TypeError(f"{op}: batch_index {batch_index.id!r} must be int32, got "
                        f"{batch_index.dtype.name}")
    if t.rank != 4:
        raise ValueError(f"{op}: t {t.id!r} {t.shape} must be 4-D (N, C, H, W)")
    if rois.rank != 2 or rois.shape[1] != 4:
        raise ValueError(f"{op}: rois {rois.id!r} {rois.shape} must have shape (num_rois, 4)")
    if batch_index.shape != (rois.shape[0],):
        raise ValueError(f"{op}: batch_index {batch_index.id!r} {batch_index.shape} must have "
                         f"shape ({rois.shape[0]},)")
    size = tuple(int(v) for v in output_size)
    if len(size) != 2 or min(size) < 1:
        raise ValueError(f"{op}: output_size {tuple(output_size)} must be two positive ints")
    if int(sampling_ratio) < 0:
        raise ValueError(f"{op}: sampling_ratio must be >= 0, got {sampling_ratio}")
    attrs = {"spatial_scale": float(spatial_scale), "sampling_ratio": int(sampling_ratio),
             "output_height": size[0], "output_width": size[1]}
    return create_op("RoiAlign", [t, rois, batch_index], ["roialign_out"], attrs,
                     name="roialign").outputs[0]


@register_grad("RoiAlign", nondiff=(1, 2))
def _roi_align_grad(ctx):
    a = dict(_public(ctx.attrs), _x_shape=ctx.op.inputs[0].shape)
    dx = create_op("RoiAlignGrad", [ctx.g(), ctx.x(1), ctx.x(2)], ["roialign_grad_out"], a,
                   name="roialign_grad").outputs[0]
    return [dx, None, None]


@register_grad("RoiAlignGrad", nondiff=(1, 2))
def _roi_align_grad_grad(ctx):
    return [create_op("RoiAlign", [ctx.g(), ctx.x(1), ctx.x(2)], ["roialign_out"],
                      _public(ctx.attrs), name="roialign").outputs[0], None, None]
