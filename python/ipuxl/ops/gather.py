"""Index-driven ops: gather, tied_gather, scatter, scatter_reduce,
dynamic_slice, dynamic_update, dynamic_update_ and onehot.

Out-of-range indices never read or write outside a tensor. What they do:

* ``gather``/``tied_gather``: with ``zero_OOR=True`` an index outside
  ``[0, n)`` gives zeros (negative indices count as out of range, as in
  PopART). With ``zero_OOR=False`` PopXL leaves the result undefined; ipuxl
  follows :func:`numpy.take` for indices in ``[-n, n)`` and clamps the others
  to the nearest valid index.
* ``scatter``: indices in ``[-n, n)`` (ONNX ScatterElements; negative values
  count from the end); others are ignored. With repeated indices the last
  update in row-major order wins (PopXL leaves this undefined).
* ``scatter_reduce``: indices outside ``[0, axis_size)`` are ignored.
* ``dynamic_slice``/``dynamic_update``: as Poplar, an offset is read as
  unsigned, an offset not below the axis length becomes 0, and a slice that
  runs past the end of an axis wraps round to its start.
* ``onehot``: indices in ``[-depth, depth)`` (ONNX); others give a row of
  "off" values.
"""
from typing import Iterable, List, Optional

import numpy as np

from .. import dtypes
from ..grad import register_grad
from ..op import create_op
from ..opdef import Cost, define_op
from .rules import like_input
from ..tensor import Constant, Tensor, constant
from .shape import _is_int
from .utils import (ALL_DTYPES, INT_DTYPES, MOVABLE_DTYPES, NUMERIC_DTYPES, check_dtype_in, check_in_graph,
                    check_same_dtype, check_tensor, normalize_axis, same_tile_set)

__all__ = ["gather", "tied_gather", "scatter", "scatter_reduce", "dynamic_slice",
           "dynamic_update", "dynamic_update_", "onehot"]


def _indices(op: str, indices, name: str = "indices") -> Tensor:
    """A Tensor of integer indices from a Tensor or host integers."""
    if not isinstance(indices, Tensor):
        arr = np.asarray(indices)
        if arr.dtype == object or not (np.issubdtype(arr.dtype, np.integer) or arr.size == 0):
            raise TypeError(f"{op}: {name} must be an integer Tensor or host integers, "
                            f"got {indices!r}")
        indices = constant(arr.astype(np.int32) if arr.size == 0 else arr)
    check_dtype_in(op, indices, INT_DTYPES, f"{name} must have")
    return indices


def _check_amp(op: str, amp) -> None:
    if amp is None:
        return
    if isinstance(amp, bool) or not isinstance(amp, (int, float, np.floating, np.integer)):
        raise TypeError(f"{op}: available_memory_proportion must be a float, got {amp!r}")
    if not 0.0 < float(amp) <= 1.0:
        raise ValueError(f"{op}: available_memory_proportion must be in (0, 1], got {amp}")


def _gather(kind: str, op: str, t: Tensor, indices, axis: int, amp, zero_OOR) -> Tensor:
    check_tensor(op, "t", t)
    indices = _indices(op, indices)
    check_in_graph(op, t=t, indices=indices)
    same_tile_set(op, t, indices)
    check_dtype_in(op, t, MOVABLE_DTYPES)
    _check_amp(op, amp)
    if t.rank == 0:
        raise ValueError(f"{op}: cannot gather from the scalar tensor {t.id!r}")
    axis = normalize_axis(op, axis, t.rank)
    return create_op(kind, [t, indices], [f"{op}_out"],
                     {"axis": axis, "zero_oor": bool(zero_OOR)}, name=op).outputs[0]


def _gather_shape(ins, attrs, graphs=()):
    t, indices, axis = ins[0], ins[1], attrs["axis"]
    return [(t.shape[:axis] + indices.shape + t.shape[axis + 1:], t.dtype)]


define_op("Gather", _gather_shape, cost="gather")
define_op("TiedGather", _gather_shape, cost="gather")


def gather(t: Tensor, indices: Tensor, axis: int = 0,
           available_memory_proportion: Optional[float] = None, zero_OOR: bool = False) -> Tensor:
    """Select slices of ``t`` along ``axis`` at ``indices`` (like
    :func:`numpy.take`): the output shape is
    ``t.shape[:axis] + indices.shape + t.shape[axis+1:]``.

    ``available_memory_proportion`` is a planning hint (accepted, checked,
    unused by the simulator). ``zero_OOR=True`` gives zeros for indices
    outside ``[0, n)``; see the module docstring for other out-of-range
    indices.
    """
    return _gather("Gather", "gather", t, indices, axis, available_memory_proportion, zero_OOR)


def tied_gather(t: Tensor, indices: Tensor, axis: int = 0,
                available_memory_proportion: Optional[float] = None,
                zero_OOR: bool = False) -> Tensor:
    """Numerically identical to :func:`gather`; on the IPU it differs only in
    the tile layout of ``t`` (it does not lay it out for the gather)."""
    return _gather("TiedGather", "tied_gather", t, indices, axis, available_memory_proportion,
                   zero_OOR)


def scatter(t: Tensor, indices: Tensor, values: Tensor, axis: int = 0,
            available_memory_proportion: Optional[float] = None) -> Tensor:
    """A copy of ``t`` with ``values`` written at ``indices`` along ``axis``
    (ONNX ScatterElements): for each position ``p`` of ``indices``,
    ``out[p with p[axis] = indices[p]] = values[p]``.

    ``indices`` and ``values`` have the same shape and the rank of ``t``; off
    the scatter axis their dimensions may not exceed ``t``'s. ``values`` may be
    host data (converted to ``t``'s dtype).
    """
    op = "scatter"
    check_tensor(op, "t", t)
    indices = _indices(op, indices)
    if not isinstance(values, Tensor):
        values = constant(np.asarray(values, dtype=t.dtype.as_numpy()), t.dtype)
    check_in_graph(op, t=t, indices=indices, values=values)
    same_tile_set(op, t, indices, values)
    check_same_dtype(op, t, values)
    check_dtype_in(op, t, ALL_DTYPES)
    _check_amp(op, available_memory_proportion)
    if t.rank == 0:
        raise ValueError(f"{op}: cannot scatter into the scalar tensor {t.id!r}")
    axis = normalize_axis(op, axis, t.rank)
    if indices.shape != values.shape:
        raise ValueError(f"{op}: indices {indices.id!r} {indices.shape} and values {values.id!r} "
                         f"{values.shape} must have the same shape")
    if indices.rank != t.rank:
        raise ValueError(f"{op}: indices {indices.id!r} {indices.shape} must have the rank of "
                         f"t {t.id!r} {t.shape}")
    for k in range(t.rank):
        if k != axis and indices.shape[k] > t.shape[k]:
            raise ValueError(f"{op}: indices {indices.id!r} {indices.shape} are larger than t "
                             f"{t.id!r} {t.shape} on axis {k}")
    return create_op("Scatter", [t, indices, values], ["scatter_out"], {"axis": axis},
                     name=op).outputs[0]


define_op("Scatter", like_input(0), cost="scatter")


_REDUCTIONS = ("sum", "max", "min", "mul", "none")


def scatter_reduce(data: Tensor, indices: Tensor, reduction: str = "sum",
                   initial_values: Optional[Tensor] = None, axis: int = 0,
                   axis_size: Optional[int] = None, enable_index_broadcast: bool = True,
                   available_memory_proportion: Optional[float] = None) -> Tensor:
    """Reduce the elements of ``data`` into the output positions given by
    ``indices`` along ``axis`` (as ``torch_scatter.scatter``):
    ``out[p with p[axis] = indices[p]] (op)= data[p]``.

    The output has ``data``'s shape with ``axis`` of length ``axis_size``, or
    the shape of ``initial_values`` when given. Without ``initial_values`` the
    output starts at 0 (1 for ``"mul"``) and positions nothing is scattered
    to stay 0 (1 for ``"mul"``), also for ``"max"``/``"min"``; with them, the
    initial values take part in the reduction. ``"none"`` writes the values
    (with repeated indices, the last in row-major order wins).

    ``indices`` has ``data``'s shape or, with ``enable_index_broadcast``, is
    a vector of ``data.shape[axis]`` entries (possibly with extra singleton
    axes) applied along ``axis`` to every other position.
    """
    op = "scatter_reduce"
    check_tensor(op, "data", data)
    indices = _indices(op, indices)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{op}: the reduction must be one of {list(_REDUCTIONS)}, got "
                         f"{reduction!r}")
    if initial_values is None and axis_size is None:
        raise ValueError(f"{op}: one of initial_values and axis_size must be specified")
    check_in_graph(op, data=data, indices=indices, initial_values=initial_values)
    same_tile_set(op, data, indices, initial_values)
    check_dtype_in(op, data, NUMERIC_DTYPES)
    _check_amp(op, available_memory_proportion)
    if data.rank == 0:
        raise ValueError(f"{op}: data {data.id!r} must have rank >= 1")
    axis = normalize_axis(op, axis, data.rank)
    shape = list(data.shape)
    if initial_values is not None:
        check_same_dtype(op, data, initial_values)
        shape = list(initial_values.shape)
        if len(shape) != data.rank or any(shape[k] != data.shape[k]
                                          for k in range(data.rank) if k != axis):
            raise ValueError(f"{op}: initial_values {initial_values.id!r} {initial_values.shape} "
                             f"must match data {data.id!r} {data.shape} except on axis {axis}")
        if axis_size is not None and axis_size != shape[axis]:
            raise ValueError(f"{op}: axis_size {axis_size} differs from the length {shape[axis]} "
                             f"of initial_values {initial_values.id!r} on axis {axis}")
    else:
        if not _is_int(axis_size) or axis_size < 1:
            raise ValueError(f"{op}: axis_size must be an int > 0, got {axis_size!r}")
        shape[axis] = int(axis_size)
    # The indices as a shape of data's rank: same shape, or a vector along
    # `axis` with singleton axes around it (index broadcasting).
    if indices.shape == data.shape:
        index_shape = list(data.shape)
    else:
        if not enable_index_broadcast:
            raise NotImplementedError(
                f"{op}: indices {indices.id!r} {indices.shape} differ from data {data.id!r} "
                f"{data.shape}; partial indices without enable_index_broadcast are not "
                "supported by ipuxl")
        if indices.rank > data.rank:
            raise ValueError(f"{op}: indices rank {indices.rank} must be <= data rank {data.rank}")
        index_shape = list(indices.shape)
        if indices.rank == 1:
            index_shape = [1] * axis + index_shape
        index_shape += [1] * (data.rank - len(index_shape))
        non_unit = [k for k, d in enumerate(index_shape) if d != 1]
        if non_unit not in ([axis], []) or index_shape[axis] != data.shape[axis]:
            raise ValueError(
                f"{op}: indices {indices.id!r} {indices.shape} must have the shape of data "
                f"{data.id!r} {data.shape} or be a vector of {data.shape[axis]} entries along "
                f"axis {axis} (partial broadcasting is not supported)")
    inputs = [data, indices] + ([initial_values] if initial_values is not None else [])
    return create_op("ScatterReduce", inputs, ["scatterreduce_out"],
                     {"axis": axis, "reduction": reduction, "index_shape": index_shape,
                      "axis_size": int(shape[axis])}, name=op).outputs[0]


def _scatter_reduce_shape(ins, attrs, graphs=()):
    data, axis = ins[0], attrs["axis"]
    shape = list(data.shape)
    shape[axis] = attrs["axis_size"]
    return [(tuple(shape), data.dtype)]


define_op("ScatterReduce", _scatter_reduce_shape, cost="scatter")


def _dynamic_args(op: str, t: Tensor, index, axes, sizes):
    check_tensor(op, "t", t)
    if not isinstance(index, Tensor):
        arr = np.asarray(index)
        if arr.dtype == object or not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"{op}: index must be an integer Tensor, got {index!r}")
        index = constant(arr.astype(np.uint32))
    check_dtype_in(op, index, INT_DTYPES, "index must have")
    try:
        axes = list(axes)
        sizes = list(sizes)
    except TypeError:
        raise TypeError(f"{op}: axes and sizes must be lists of ints") from None
    if not all(_is_int(a) for a in axes) or not all(_is_int(s) for s in sizes):
        raise TypeError(f"{op}: axes and sizes must be lists of ints, got {axes!r}, {sizes!r}")
    if len(axes) != len(sizes):
        raise ValueError(f"{op}: axes {axes} and sizes {sizes} must have the same length")
    if index.nelms != len(axes) or index.rank > 1:
        raise ValueError(f"{op}: index {index.id!r} {index.shape} must be a vector with one "
                         f"entry per axis ({len(axes)})")
    if t.rank == 0 and axes:
        raise ValueError(f"{op}: tensor {t.id!r} is a scalar and has no axis to slice")
    axes = [normalize_axis(op, a, t.rank) for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: repeated axis in {axes}")
    part = list(t.shape)
    for a, s in zip(axes, sizes):
        if not 0 <= s <= t.shape[a]:
            raise ValueError(f"{op}: size {s} is out of range for axis {a} of tensor {t.id!r} "
                             f"{t.shape}")
        part[a] = int(s)
    return index, axes, [int(s) for s in sizes], tuple(part)


def dynamic_slice(t: Tensor, index: Tensor, axes: List[int], sizes: List[int],
                  no_overlap: bool) -> Tensor:
    """A copy of the slice of ``t`` starting at the run-time offsets ``index``
    (one per axis in ``axes``) with ``sizes`` elements on those axes and all
    elements on the others. See the module docstring for offsets out of range.
    ``no_overlap`` only matters to gradients (recorded, unused here).
    """
    op = "dynamic_slice"
    index, axes, sizes, part = _dynamic_args(op, t, index, axes, sizes)
    check_in_graph(op, t=t, index=index)
    same_tile_set(op, t, index)
    return create_op("DynamicSlice", [t, index], ["dynamic_slice_out"],
                     {"axes": axes, "sizes": sizes, "no_overlap": bool(no_overlap)},
                     name=op).outputs[0]


def _dynamic_update(kind: str, op: str, t: Tensor, index, t_update: Tensor, axes, sizes,
                    no_overlap, inplace: bool) -> Tensor:
    index, axes, sizes, part = _dynamic_args(op, t, index, axes, sizes)
    check_tensor(op, "t_update", t_update)
    check_in_graph(op, t=t, index=index, t_update=t_update)
    same_tile_set(op, t, index, t_update)
    check_same_dtype(op, t, t_update)
    if t_update.shape != part:
        raise ValueError(f"{op}: t_update {t_update.id!r} has shape {t_update.shape}; the slice "
                         f"of {t.id!r} {t.shape} with axes {axes} and sizes {sizes} has shape "
                         f"{part}")
    return create_op(kind, [t, index, t_update], [f"{op}_out"],
                     {"axes": axes, "sizes": sizes, "no_overlap": bool(no_overlap)},
                     name=op).outputs[0]


def _dynamic_slice_shape(ins, attrs, graphs=()):
    part = list(ins[0].shape)
    for a, s in zip(attrs["axes"], attrs["sizes"]):
        part[a] = s
    return [(tuple(part), ins[0].dtype)]


define_op("DynamicSlice", _dynamic_slice_shape, cost="gather")
define_op("DynamicUpdate", like_input(0), cost="scatter")
define_op("DynamicUpdateInplace", like_input(0), aliases=((0, 0),), modifies=(0,), cost=Cost("scatter", vertex="DynamicUpdate"),
          no_grad="modifies its input (autodiff rejects modifying ops)")


def dynamic_update(t: Tensor, index: Tensor, t_update: Tensor, axes: Iterable[int],
                   sizes: Iterable[int], no_overlap: bool) -> Tensor:
    """A copy of ``t`` with the slice at the run-time offsets ``index`` (see
    :func:`dynamic_slice`) replaced by ``t_update``."""
    return _dynamic_update("DynamicUpdate", "dynamic_update", t, index, t_update, axes, sizes,
                           no_overlap, False)


def dynamic_update_(t: Tensor, index: Tensor, t_update: Tensor, axes: Iterable[int],
                    sizes: Iterable[int], no_overlap: bool) -> Tensor:
    """In-place :func:`dynamic_update`: writes into ``t`` and returns it."""
    return _dynamic_update("DynamicUpdateInplace", "dynamic_update_", t, index, t_update, axes,
                           sizes, no_overlap, True)


def onehot(t: Tensor, num_classes: Tensor, values: Tensor, axis: int) -> Tensor:
    """One-hot encoding (ONNX OneHot): the output has ``t``'s shape with a new
    axis of length ``num_classes`` inserted at ``axis`` (in ``[-r-1, r]``),
    holding ``values[1]`` ("on") where the class equals ``t``'s index and
    ``values[0]`` ("off") elsewhere. Its dtype is ``values``'s.

    ``num_classes`` must be known while the graph is built: a scalar constant
    tensor (or a Python int). ``values`` is a 2-element tensor ``[off, on]``.
    Non-integer indices are truncated.
    """
    op = "onehot"
    check_tensor(op, "t", t)
    if _is_int(num_classes):
        num_classes = constant(np.int32(num_classes))
    check_tensor(op, "num_classes", num_classes)
    if not isinstance(num_classes, Constant):
        raise ValueError(f"{op}: num_classes {num_classes.id!r} must be a constant tensor (its "
                         "value sets the output shape)")
    if not isinstance(values, Tensor):
        values = constant(values)
    check_in_graph(op, t=t, num_classes=num_classes, values=values)
    same_tile_set(op, t, num_classes, values)
    check_dtype_in(op, t, NUMERIC_DTYPES)
    check_dtype_in(op, num_classes, NUMERIC_DTYPES)
    check_dtype_in(op, values, ALL_DTYPES)
    if num_classes.nelms != 1:
        raise ValueError(f"{op}: num_classes {num_classes.id!r} must be a scalar, has shape "
                         f"{num_classes.shape}")
    depth_f = float(np.asarray(num_classes._host_data).reshape(-1)[0])
    depth = int(depth_f)
    if depth != depth_f or depth < 1:
        raise ValueError(f"{op}: num_classes must be a positive integer, got {depth_f}")
    if values.nelms != 2 or values.rank != 1:
        raise ValueError(f"{op}: values {values.id!r} must have shape (2,) [off, on], has "
                         f"{values.shape}")
    axis = normalize_axis(op, axis, t.rank + 1)
    return create_op("Onehot", [t, num_classes, values], ["onehot_out"],
                     {"axis": axis, "depth": depth}, name=op).outputs[0]


def _onehot_shape(ins, attrs, graphs=()):
    t, axis = ins[0], attrs["axis"]
    return [(t.shape[:axis] + (attrs["depth"],) + t.shape[axis:], ins[2].dtype)]


define_op("Onehot", _onehot_shape, cost="fill")


# ---- gradient rules
#
# All rules emit ordinary forward ops (Gather, ScatterReduce "sum", Scatter,
# DynamicSlice/DynamicUpdate, Reshape, Mul, Div and index arithmetic on
# integer tensors), so gradient graphs can be differentiated again:
#
# * Gather/TiedGather: d t = scatter-add of the gradient into zeros
#   (ScatterReduce "sum"; repeated indices accumulate), at the position each
#   output slice was read from under the op's index rules (clamped or
#   wrapped for zero_OOR=False; nowhere for zeroed slices).
# * ScatterReduce "sum": d data = the gradient at each element's target
#   (Gather along the axis, or a flat Gather for element-wise indices);
#   d initial_values = the gradient. ScatterReduce is thus the transpose of
#   Gather and each is the other's rule.
# * Scatter and ScatterReduce "none": d t (d initial_values) = the gradient
#   with the written positions zeroed; d values (d data) = the gradient at
#   each element's target, for the element whose write survived (with
#   repeated indices only the last one in row-major order; the others get 0).
# * ScatterReduce "max"/"min": the gradient of each output position is
#   shared evenly between the elements equal to the result (data elements
#   and the initial value), as PyTorch's amax/amin.
# * ScatterReduce "mul": not supported (NotImplementedError).
# * Indices, dynamic offsets and onehot's indices/depth never get gradients.

def _host_ints(t: Tensor) -> Optional[np.ndarray]:
    """The values of a constant index tensor (None for run-time indices)."""
    if isinstance(t, Constant):
        return np.asarray(t._host_data).astype(np.int64)
    return None


def _i32(t: Tensor) -> Tensor:
    from .cast import cast

    return t if t.dtype == dtypes.int32 else cast(t, dtypes.int32)


def _norm_index(i: Tensor, n: int, wrap_negative: bool, clamp: bool):
    """Run-time indices ``i`` (any integer dtype) resolved against an axis of
    length ``n >= 1``, computed in ``i``'s own dtype so that no value is
    changed by a narrowing cast: negatives get ``n`` added if
    ``wrap_negative``; then either clamped into [0, n) (``clamp``) or checked.
    Returns ``(int32 indices in [0, n), bool validity or None)``; invalid
    entries hold 0."""
    from .logical import greater, logical_and, logical_not
    from .where import where

    signed = i.dtype.name.startswith("int")

    def c(v):
        return constant(np.asarray(v, dtype=i.dtype.as_numpy()), i.dtype)

    if signed and wrap_negative:
        i = where(greater(c(0), i), i + c(n), i)
    if clamp:
        if signed:
            i = where(greater(c(0), i), c(0), i)
        i = where(greater(i, c(n - 1)), c(n - 1), i)
        return _i32(i), None
    valid = greater(c(n), i)
    if signed:
        valid = logical_and(logical_not(greater(c(0), i)), valid)
    return _i32(where(valid, i, c(0))), valid


def _icst(v) -> Tensor:
    return constant(np.asarray(v, dtype=np.int32))


def _gather_read_positions(ctx, n: int, k: int, zero_oor: bool) -> Tensor:
    """A (k,) index vector: where along the axis each gathered slice was read
    from, or a value outside [0, n) for the slices gather zeroed."""
    from .shape import reshape
    from .where import where

    host = _host_ints(ctx.op.inputs[1])
    if host is not None:
        i = host.reshape(-1)
        if zero_oor:
            i = np.where((i >= 0) & (i < n), i, -1)
        else:
            i = np.clip(np.where(i < 0, i + n, i), 0, n - 1)
        return _icst(i)
    # Mirror the kernel: zero_OOR reads nothing outside [0, n) (-1 here, which
    # scatter_reduce ignores); otherwise wrap [-n, 0) and clamp the rest.
    i, valid = _norm_index(reshape(ctx.x(1), (k,)), n, not zero_oor, not zero_oor)
    return i if valid is None else where(valid, i, _icst(-1))


def _gather_grad(ctx):
    from .shape import reshape

    g = ctx.g()
    t = ctx.op.inputs[0]
    axis = ctx.attrs["axis"]
    n = t.shape[axis]
    if t.nelms == 0 or g.nelms == 0:
        return [None, None]
    k = ctx.op.inputs[1].nelms
    outer = int(np.prod(t.shape[:axis], dtype=np.int64))
    inner = int(np.prod(t.shape[axis + 1:], dtype=np.int64))
    pos = _gather_read_positions(ctx, n, k, bool(ctx.attrs.get("zero_oor", False)))
    acc = scatter_reduce(reshape(g, (outer, k, inner)), pos, "sum", axis=1, axis_size=n)
    return [reshape(acc, t.shape), None]


register_grad("Gather", nondiff=(1,))(_gather_grad)
register_grad("TiedGather", nondiff=(1,))(_gather_grad)


def _take_along(src: Tensor, idx_fwd: Tensor, idx_val: Tensor, axis: int,
                wrap_negative: bool) -> Tensor:
    """``out[p] = src[p with p[axis] = idx[p]]`` (shape of ``idx``, which has
    ``src``'s rank and is no larger off ``axis``); zero where the index is
    outside [0, n) (after adding n to negative ones if ``wrap_negative``).
    Built as a Gather (zero_OOR) from the flattened ``src``."""
    from .shape import reshape
    from .where import where

    n = src.shape[axis]
    shape = idx_fwd.shape
    if int(np.prod(shape, dtype=np.int64)) == 0 or src.nelms == 0:
        from .init import init

        return init(shape, src.dtype, name="take_along_zeros")
    strides = [int(np.prod(src.shape[k + 1:], dtype=np.int64)) for k in range(src.rank)]
    base = np.zeros(shape, np.int64)
    for k in range(len(shape)):
        if k != axis:
            r = np.arange(shape[k], dtype=np.int64) * strides[k]
            base = base + r.reshape([-1 if q == k else 1 for q in range(len(shape))])
    host = _host_ints(idx_fwd)
    if host is not None:
        i = np.where(host < 0, host + n, host) if wrap_negative else host
        flat = np.where((i >= 0) & (i < n), base + i * strides[axis], -1)
        flat_t = _icst(flat)
    else:
        i, valid = _norm_index(idx_val, n, wrap_negative, False)
        flat_t = where(valid, _icst(base) + i * _icst(strides[axis]), _icst(-1))
    return gather(reshape(src, (src.nelms,)), flat_t, zero_OOR=True)


def _last_writer_mask(ctx, shape, host_flat_or_none, write, take) -> Optional[Tensor]:
    """A float mask of ``shape`` (the writers' shape): 1 where an element's
    write survived (the last in row-major order at its target), 0 for
    overwritten or out-of-range writes. ``host_flat_or_none``: the writers'
    flat targets (-1 if none) when the indices are constants; otherwise
    ``write(values)`` scatters int32 values the op's way and ``take(t)`` reads
    a tensor at each writer's target. None when every write survived."""
    from .cast import cast
    from .logical import equal

    dt = ctx.op.outputs[0].dtype
    if host_flat_or_none is not None:
        flat = host_flat_or_none.reshape(-1)
        last = {}
        for u, f in enumerate(flat):
            if f >= 0:
                last[int(f)] = u
        mask = np.array([f >= 0 and last[int(f)] == u for u, f in enumerate(flat)], bool)
        if mask.all():
            return None
        return constant(mask.reshape(shape).astype(dt.as_numpy()), dt)
    ids = _icst(np.arange(1, int(np.prod(shape, dtype=np.int64)) + 1).reshape(shape))
    return cast(equal(take(write(ids)), ids), dt)


def _scatter_targets_host(idx: np.ndarray, out_shape, axis: int, wrap_negative: bool):
    """Flat target of each element of ``idx`` (``-1`` when it writes nowhere)."""
    n = out_shape[axis]
    strides = [int(np.prod(out_shape[k + 1:], dtype=np.int64)) for k in range(len(out_shape))]
    grid = np.indices(idx.shape, dtype=np.int64)
    i = np.where(idx < 0, idx + n, idx) if wrap_negative else idx
    flat = i * strides[axis]
    for k in range(idx.ndim):
        if k != axis:
            flat = flat + grid[k] * strides[k]
    return np.where((i >= 0) & (i < n), flat, -1)


@register_grad("Scatter", nondiff=(1,))
def _scatter_grad(ctx):
    from .init import init

    g = ctx.g()
    t, idx, vals = ctx.op.inputs
    axis = ctx.attrs["axis"]
    res = [None, None, None]
    if ctx.needs(0):
        res[0] = scatter(g, ctx.x(1), init(vals.shape, vals.dtype, name="scatter_grad_zeros"),
                         axis=axis)
    if ctx.needs(2) and vals.nelms:
        host = _host_ints(idx)
        taken = _take_along(g, idx, idx if host is not None else ctx.x(1), axis, True)
        mask = _last_writer_mask(
            ctx, vals.shape,
            None if host is None else _scatter_targets_host(host, t.shape, axis, True),
            lambda ids: scatter(init(t.shape, dtypes.int32, name="scatter_writer_ids"),
                                ctx.x(1), ids, axis=axis),
            lambda w: _take_along(w, idx, ctx.x(1), axis, True))
        res[2] = taken if mask is None else taken * mask
    return res


def _sr_full_index(ctx, data: Tensor) -> bool:
    return list(ctx.attrs["index_shape"]) == list(data.shape) and \
        tuple(ctx.op.inputs[1].shape) == tuple(data.shape)


def _sr_take(ctx, src: Tensor) -> Tensor:
    """``src`` (the output's shape) read at each data element's target along
    the axis, zero for elements whose index is outside [0, axis_size)."""
    from .shape import reshape

    data, idx = ctx.op.inputs[0], ctx.op.inputs[1]
    axis = ctx.attrs["axis"]
    host = _host_ints(idx)
    if _sr_full_index(ctx, data):
        return _take_along(src, idx, ctx.x(1) if host is None else idx, axis, False)
    k = data.shape[axis]
    vec = _icst(host.reshape(-1)) if host is not None else reshape(ctx.x(1), (k,))
    return gather(src, vec, axis=axis, zero_OOR=True)


def _sr_targets_host(ctx) -> Optional[np.ndarray]:
    data, idx = ctx.op.inputs[0], ctx.op.inputs[1]
    host = _host_ints(idx)
    if host is None:
        return None
    full = np.broadcast_to(host.reshape(ctx.attrs["index_shape"]), data.shape)
    return _scatter_targets_host(full, ctx.op.outputs[0].shape, ctx.attrs["axis"], False)


@register_grad("ScatterReduce", nondiff=(1,))
def _scatter_reduce_grad(ctx):
    from .cast import cast
    from .logical import equal, logical_and
    from .where import where

    g = ctx.g()
    data, idx = ctx.op.inputs[0], ctx.op.inputs[1]
    has_init = len(ctx.op.inputs) == 3
    out = ctx.op.outputs[0]
    axis = ctx.attrs["axis"]
    red = ctx.attrs["reduction"]
    n = out.shape[axis]
    res = [None, None] + ([None] if has_init else [])

    def scatter_like(values, reduction):
        # The forward scatter's targets, for another values tensor.
        iv = _icst(_host_ints(idx)) if _host_ints(idx) is not None else ctx.x(1)
        return scatter_reduce(values, iv, reduction, axis=axis, axis_size=n)

    if red == "sum":
        if ctx.needs(0) and data.nelms:
            res[0] = _sr_take(ctx, g)
        if has_init and ctx.needs(2):
            res[2] = g
        return res
    if red == "none":
        writers = _sr_targets_host(ctx)
        if ctx.needs(0) and data.nelms:
            taken = _sr_take(ctx, g)
            mask = _last_writer_mask(ctx, data.shape, writers,
                                     lambda ids: scatter_like(ids, "none"),
                                     lambda w: _sr_take(ctx, w))
            res[0] = taken if mask is None else taken * mask
        if has_init and ctx.needs(2):
            if writers is not None:
                kept = np.ones(out.shape, out.dtype.as_numpy()).reshape(-1)
                kept[writers.reshape(-1)[writers.reshape(-1) >= 0]] = 0
                res[2] = g * constant(kept.reshape(out.shape), out.dtype)
            else:
                ones = _icst(np.ones(data.shape, np.int32))
                touched = scatter_like(ones, "sum")
                res[2] = g * cast(equal(touched, _icst(0)), out.dtype)
        return res
    if red in ("max", "min"):
        y = ctx.y()
        x = ctx.x(0)
        valid = equal(_sr_take(ctx, _icst(np.ones(out.shape, np.int32))), _icst(1))
        hit = cast(logical_and(equal(_sr_take(ctx, y), x), valid), out.dtype)
        count = scatter_like(hit, "sum")
        init_hit = None
        if has_init:
            init_hit = cast(equal(y, ctx.x(2)), out.dtype)
            count = count + init_hit
        one = constant(np.ones((), out.dtype.as_numpy()), out.dtype)
        share = g / where(equal(count, constant(np.zeros((), out.dtype.as_numpy()), out.dtype)),
                          one, count)
        if ctx.needs(0) and data.nelms:
            res[0] = _sr_take(ctx, share) * hit
        if has_init and ctx.needs(2):
            res[2] = share * init_hit
        return res
    raise NotImplementedError(
        f"autodiff: the gradient of scatter_reduce with reduction {red!r} is not supported by "
        "ipuxl (supported: 'sum', 'none', 'max', 'min')")


@register_grad("DynamicSlice", nondiff=(1,))
def _dynamic_slice_grad(ctx):
    from .init import init

    t = ctx.op.inputs[0]
    a = ctx.attrs
    zeros = init(t.shape, t.dtype, name="dynamic_slice_grad_zeros")
    # Same offsets, same wrapping: the update writes exactly where the slice read.
    return [dynamic_update(zeros, ctx.x(1), ctx.g(), a["axes"], a["sizes"], a["no_overlap"]),
            None]


@register_grad("DynamicUpdate", nondiff=(1,))
def _dynamic_update_grad(ctx):
    from .init import init

    g = ctx.g()
    upd = ctx.op.inputs[2]
    a = ctx.attrs
    res = [None, None, None]
    if ctx.needs(0):
        zeros = init(upd.shape, upd.dtype, name="dynamic_update_grad_zeros")
        res[0] = dynamic_update(g, ctx.x(1), zeros, a["axes"], a["sizes"], a["no_overlap"])
    if ctx.needs(2):
        res[2] = dynamic_slice(g, ctx.x(1), a["axes"], a["sizes"], a["no_overlap"])
    return res


@register_grad("Onehot", nondiff=(0, 1))
def _onehot_grad(ctx):
    from .reduce import sum as reduce_sum
    from .shape import reshape
    from .slicing import concat

    g = ctx.g()
    vals = ctx.op.inputs[2]
    if g.nelms == 0:
        return [None, None, None]
    # d/d on = sum of g where the class matched; d/d off = sum of the rest.
    picks = constant(np.array([0, 1], vals.dtype.as_numpy()), vals.dtype)
    hot = onehot(ctx.x(0), ctx.x(1), picks, ctx.attrs["axis"])
    on = reduce_sum(g * hot)
    off = reduce_sum(g) - on
    return [None, None, concat([reshape(off, (1,)), reshape(on, (1,))], axis=0)]
