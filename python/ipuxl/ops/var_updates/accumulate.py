"""Accumulator updates: ``accumulate_`` and friends, ``accumulator_scale_``,
``accumulator_zero_`` and ``sparse_accumulate_``.

All of them update their first argument in place and return it (as an
alias). ``t`` and ``X`` must have the same shape (no broadcasting) but may
have different numeric dtypes; kernels compute in double and round once into
``t``'s dtype (integers truncate toward zero and saturate).
"""
from typing import Optional, Union

from ... import dtypes
from ...op import create_op
from ...opdef import define_op
from ..rules import like_input
from ...tensor import Tensor
from ..utils import normalize_axis, same_tile_set
from .utils import check_same_shape, check_update_tensors, handle_optimizer_value

__all__ = [
    "accumulate_", "accumulate_square_", "accumulate_mean_", "accumulate_moving_average_",
    "accumulate_moving_average_square_", "accumulator_scale_", "accumulator_zero_",
    "sparse_accumulate_",
]

Factor = Union[float, Tensor]


def _accumulate(op: str, out_name: str, mode: str, t: Tensor, X: Tensor, f) -> Tensor:
    check_update_tensors(op, t=t, X=X)
    check_same_shape(op, t, "t", X, "X")
    inputs = [t, X]
    attrs = {"mode": mode}
    handle_optimizer_value(op, "f", f, inputs, attrs, "factor")
    if inputs[-1] is None:
        inputs.pop()
    if isinstance(f, Tensor):
        same_tile_set(op, t, X, f)
    o = create_op("Accumulate", inputs, [out_name + t.name], attrs, name=op)
    return o.outputs[0]


def accumulate_(t: Tensor, X: Tensor, f: Optional[Factor] = None) -> Tensor:
    """``t = t + f * X`` in place (``t = t + X`` when ``f`` is None).

    Args:
        t: the tensor to update.
        X: the update, same shape as ``t`` (no broadcasting).
        f: optional scalar factor: a float or a scalar Tensor.
    Returns:
        An alias of the updated ``t``.
    """
    mode = "add" if f is None else "dampened_add"
    return _accumulate("accumulate_", "accumulate__", mode, t, X, f)


def accumulate_square_(t: Tensor, X: Tensor, f: Factor = 1.0) -> Tensor:
    """``t = t + f * X^2`` in place; ``f`` a float or a scalar Tensor."""
    if f is None:
        raise TypeError("accumulate_square_: f must be a float or a scalar Tensor, got None")
    return _accumulate("accumulate_square_", "accumulate_square__", "dampened_add_square", t, X,
                       f)


def accumulate_mean_(t: Tensor, X: Tensor, step: Factor) -> Tensor:
    """``t = step/(step+1) * t + 1/(step+1) * X`` in place: the running mean
    when ``step`` counts the values accumulated so far. A float ``step``
    becomes a float32 constant tensor (as in PopXL)."""
    op = "accumulate_mean_"
    check_update_tensors(op, t=t, X=X)
    if step is None or isinstance(step, bool):
        raise TypeError(f"{op}: step must be a float or a scalar Tensor, got {step!r}")
    if not isinstance(step, Tensor):
        step = t._ensure_tensor(step, dtype=dtypes.float32)
    check_update_tensors(op, t=t, X=X, step=step)
    if step.nelms != 1:
        raise ValueError(f"{op}: step {step.id!r} must be a scalar tensor (one element), got "
                         f"shape {step.shape}")
    check_same_shape(op, t, "t", X, "X")
    o = create_op("Accumulate", [t, X, step], ["accumulate_mean__" + t.name],
                  {"mode": "mean"}, name=op)
    return o.outputs[0]


def accumulate_moving_average_(t: Tensor, X: Tensor, f: Factor) -> Tensor:
    """``t = f * t + (1 - f) * X`` in place; ``f`` a float or a scalar Tensor."""
    if f is None:
        raise TypeError("accumulate_moving_average_: f must be a float or a scalar Tensor, "
                        "got None")
    return _accumulate("accumulate_moving_average_", "accumulate_moving_avg__", "moving_average",
                       t, X, f)


def accumulate_moving_average_square_(t: Tensor, X: Tensor, f: Factor) -> Tensor:
    """``t = f * t + (1 - f) * X^2`` in place; ``f`` a float or a scalar Tensor."""
    if f is None:
        raise TypeError("accumulate_moving_average_square_: f must be a float or a scalar "
                        "Tensor, got None")
    return _accumulate("accumulate_moving_average_square_", "accumulate_moving_avg_square__",
                       "moving_average_square", t, X, f)


def accumulator_scale_(t: Tensor, f: Factor) -> Tensor:
    """``t = f * t`` in place. A constant (float) factor of 0 zeroes ``t``
    outright, clearing NaN and inf too; a Tensor factor multiplies."""
    op = "accumulator_scale_"
    check_update_tensors(op, t=t)
    if f is None:
        raise TypeError(f"{op}: f must be a float or a scalar Tensor, got None")
    inputs = [t]
    attrs = {}
    handle_optimizer_value(op, "f", f, inputs, attrs, "factor")
    if isinstance(f, Tensor):
        same_tile_set(op, t, f)
    else:
        inputs.pop()
    o = create_op("AccumulatorScale", inputs, ["accumulator_scale__" + t.name],
                  attrs, name=op)
    return o.outputs[0]


def accumulator_zero_(t: Tensor) -> Tensor:
    """``t = 0`` in place (an accumulator scale by the constant 0)."""
    return accumulator_scale_(t, 0.0)


def sparse_accumulate_(t: Tensor, X: Tensor, indices: Tensor, axis: int = 0,
                       f: Optional[Factor] = None, W: Optional[Tensor] = None) -> Tensor:
    """Scatter-accumulate the slices of ``X`` into ``t`` in place:
    ``t[..., indices[k], ...] += f * X[..., k, ...]`` along ``axis``.

    ``X`` has the layout of ``gather(t, indices, axis)``: its shape is
    ``t.shape[:axis] + indices.shape + t.shape[axis+1:]`` (the gradient of a
    gather). Repeated indices accumulate; indices outside
    ``[0, t.shape[axis])`` are skipped, as poplibs' multiUpdateAdd does.
    ``W`` (optional) only guides the tile layout on the IPU; it is checked
    and otherwise ignored. Returns an alias of the updated ``t``.
    """
    op = "sparse_accumulate_"
    check_update_tensors(op, t=t, X=X, indices=indices)
    if not indices.dtype.is_int:
        raise TypeError(f"{op}: indices {indices.id!r} must have an integer dtype, got "
                        f"{indices.dtype.name}")
    if t.rank == 0:
        raise ValueError(f"{op}: t {t.id!r} must have rank >= 1")
    ax = normalize_axis(op, axis, t.rank)
    expect = t.shape[:ax] + tuple(indices.shape) + t.shape[ax + 1:]
    if X.shape != expect:
        raise ValueError(f"{op}: X {X.id!r} has shape {X.shape}, expected {expect} (the shape of "
                         f"t {t.shape} with axis {ax} replaced by the indices shape "
                         f"{indices.shape})")
    if W is not None:
        check_update_tensors(op, W=W)
        same_tile_set(op, t, W)
        if W.shape != t.shape:
            raise ValueError(f"{op}: W {W.id!r} has shape {W.shape}, expected t's shape {t.shape}")
    inputs = [t, X]
    attrs = {"mode": "add" if f is None else "dampened_add", "axis": ax}
    handle_optimizer_value(op, "f", f, inputs, attrs, "factor")
    if isinstance(f, Tensor):
        same_tile_set(op, t, f)
    inputs.append(indices)
    if W is not None:
        inputs.append(W)
    o = create_op("SparseAccumulate", inputs,
                  ["sparse_accumulate__" + t.name], attrs, name=op)
    return o.outputs[0]


for _t in ("Accumulate", "AccumulatorScale", "SparseAccumulate"):
    define_op(_t, like_input(0), aliases=((0, 0),), modifies=(0,),
              no_grad="an optimizer update: modifies its input", cost="elementwise")
