"""Slicing ops: slice, slice_, subsample, split, concat and concat_.

``slice_`` and ``concat_`` are views in PopXL. A slice or a concatenation is
not a same-order alias of one whole input, so ipuxl computes them as copies
and marks the op ``_view_copy``: the result can be read, but writing through
it in place raises NotImplementedError, and in-place changes made to the
inputs after the op are not seen by the result. The only exceptions, which
are true aliases, are a ``slice_`` that selects the whole tensor and a
``concat_`` of a single tensor.
"""
import builtins
from typing import Iterable, List, Optional, Sequence, Tuple, Union


from ..grad import register_grad
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor
from .shape import _is_int, _view_attrs, reshape
from .utils import check_in_graph, check_same_dtype, normalize_axis, same_tile_set

__all__ = ["slice", "slice_", "subsample", "split", "concat", "concat_"]

IntOrList = Union[int, List[Optional[int]], None]


def _as_list(op: str, name: str, v) -> Optional[list]:
    if v is None:
        return None
    if _is_int(v):
        return [int(v)]
    if isinstance(v, (list, tuple)):
        for e in v:
            if e is not None and not _is_int(e):
                raise TypeError(f"{op}: {name} must be an int, None or a list of them, got {v!r}")
        return [None if e is None else int(e) for e in v]
    raise TypeError(f"{op}: {name} must be an int, None or a list of them, got {v!r}")


def _slice_params(op: str, t: Tensor, start, stop, step, axis):
    """Per-axis start, step and output shape of a slice of ``t``.

    Follows PopXL: scalars apply to one axis; lists give one slice per entry;
    without ``axis`` the slices apply to axes 0..N-1. Bounds are resolved like
    Python slices (negative indices count from the end, out-of-range bounds
    are clamped)."""
    lists = {"start": _as_list(op, "start", start), "stop": _as_list(op, "stop", stop),
             "step": _as_list(op, "step", step)}
    if axis is not None and not _is_int(axis):
        if not isinstance(axis, (list, tuple)) or not all(_is_int(a) for a in axis):
            raise TypeError(f"{op}: axis must be an int or a list of ints, got {axis!r}")
    lists["axis"] = None if axis is None else ([int(axis)] if _is_int(axis) else
                                               [int(a) for a in axis])
    n = None
    for k, v in lists.items():
        if v is not None:
            if n is None:
                n = len(v)
            elif len(v) != n:
                raise ValueError(
                    f"{op}: all inputs must have the same length. `{k}` has length {len(v)} != {n}.")
    n = n or 0
    steps = [1] * n if lists["step"] is None else [1 if e is None else e for e in lists["step"]]
    starts = lists["start"] or [None] * n
    stops = lists["stop"] or [None] * n
    axes = list(range(n)) if lists["axis"] is None else lists["axis"]
    if n > t.rank:
        raise ValueError(f"{op}: {n} slices given for tensor {t.id!r} of rank {t.rank}")
    axes = [normalize_axis(op, a, t.rank) for a in axes]
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: repeated axis in {axes}")
    out_start = [0] * t.rank
    out_step = [1] * t.rank
    shape = list(t.shape)
    for a, b, e, s in zip(axes, starts, stops, steps):
        if s == 0:
            raise ValueError(f"{op}: step must not be zero (axis {a})")
        r = range(*builtins.slice(b, e, s).indices(t.shape[a]))
        shape[a] = len(r)
        out_start[a] = r.start if len(r) else 0
        out_step[a] = s
    return out_start, out_step, tuple(shape)


def slice(t: Tensor, start: IntOrList = None, stop: IntOrList = None, step: IntOrList = None,
          axis: Optional[Union[int, List[int]]] = None) -> Tensor:
    """Select elements of ``t`` with one slice per axis (a copy).

    ``start`` (inclusive), ``stop`` (exclusive) and ``step`` are ints or lists
    (one entry per sliced axis; ``None`` entries take the defaults). ``axis``
    names the sliced axes; by default axes 0..N-1. Bounds behave like Python
    slices: negative values count from the end and out-of-range values are
    clamped. ``step`` may be any non-zero int (PopXL documents ±1; larger
    steps behave like Python). With no start, stop or step, returns ``t``.
    """
    check_in_graph("slice", t=t)
    if start is None and stop is None and step is None:
        return t
    starts, steps, shape = _slice_params("slice", t, start, stop, step, axis)
    return create_op("Slice", [t], ["slice_out"],
                     {"starts": starts, "steps": steps, "sizes": list(shape)},
                     name="slice").outputs[0]


def slice_(t: Tensor, start: IntOrList = None, stop: IntOrList = None, step: IntOrList = None,
           axis: Optional[Union[int, List[int]]] = None) -> Tensor:
    """In-place (view) form of :func:`slice`; see the module docstring for how
    ipuxl implements the view."""
    check_in_graph("slice_", t=t)
    if start is None and stop is None and step is None:
        return t
    starts, steps, shape = _slice_params("slice_", t, start, stop, step, axis)
    attrs = {"starts": starts, "steps": steps, "sizes": list(shape)}
    attrs.update(_view_attrs(t, not _whole_slice([t], attrs)))
    return create_op("SliceInplace", [t], ["slice_out"], attrs, name="slice_inplace").outputs[0]


def _slice_shape(ins, attrs, graphs=()):
    t = ins[0]
    starts, steps, sizes = attrs["starts"], attrs["steps"], attrs["sizes"]
    if not len(starts) == len(steps) == len(sizes) == t.rank:
        raise ValueError(f"starts, steps and sizes need one entry per axis of {t.id!r} {t.shape}")
    for a, (b, s, n) in enumerate(zip(starts, steps, sizes)):
        if n < 0 or s == 0 or (n > 0 and not (0 <= b < t.shape[a] and 0 <= b + (n - 1) * s
                                               < t.shape[a])):
            raise ValueError(f"slice of axis {a} (start {b}, step {s}, {n} elements) is out of "
                             f"range for {t.id!r} {t.shape}")
    return [(tuple(sizes), t.dtype)]


def _whole_slice(ins, attrs, graphs=()) -> bool:
    """Whether a slice selects all of its input in order (a true alias)."""
    t = ins[0]
    return tuple(attrs["sizes"]) == t.shape and all(
        b == 0 and (s == 1 or n <= 1) for b, s, n in zip(attrs["starts"], attrs["steps"], t.shape))


define_op("Slice", _slice_shape, cost="rearrange")
define_op("SliceInplace", _slice_shape, cost="view",
          aliases=lambda ins, attrs, graphs=(): ((0, 0),) if _whole_slice(ins, attrs) else ())


def subsample(t: Tensor, strides: Union[int, Iterable[int]]) -> Tensor:
    """Every ``strides[k]``-th element along each axis ``k``, starting at 0
    (``t[::s0, ::s1, ...]``). An int is the stride of axis 0. As PopXL, a
    list shorter than the rank is padded with ones (PyTorch's ``t[::s]``).

    Raises:
        ValueError: ``strides`` has more entries than ``t`` has axes, or an
            entry is below 1.
    """
    check_in_graph("subsample", t=t)
    if _is_int(strides):
        strides = [strides]
    try:
        strides = list(strides)
    except TypeError:
        raise TypeError(f"subsample: strides must be an int or a list of ints, got {strides!r}") from None
    if not all(_is_int(s) for s in strides):
        raise TypeError(f"subsample: strides must be ints, got {strides!r}")
    if len(strides) > t.rank:
        raise ValueError(
            f"subsample: The length of subsample `strides` ({len(strides)}) must not be greater "
            f"than the rank of the input tensor {t.id!r} ({t.rank}).")
    strides = strides + [1] * (t.rank - len(strides))
    if any(s < 1 for s in strides):
        raise ValueError(f"subsample: strides must be >= 1, got {strides}")
    return create_op("Subsample", [t], ["subsample_out"],
                     {"strides": [int(s) for s in strides]}, name="subsample").outputs[0]


define_op("Subsample", cost="rearrange", shape=lambda ins, attrs, graphs=(): [
    (tuple(-(-d // s) for d, s in zip(ins[0].shape, attrs["strides"])), ins[0].dtype)])


def split(t: Tensor, splits: Union[int, List[int]], axis: int = 0) -> List[Tensor]:
    """Split ``t`` along ``axis`` into ``splits`` equal parts (an int) or into
    parts of the given lengths (a list). Returns a list of tensors (copies).

    Raises:
        ValueError: an int that does not divide the axis length, or lengths
            that do not sum to it.
    """
    check_in_graph("split", t=t)
    if t.rank == 0:
        raise ValueError(f"split: tensor {t.id!r} is a scalar and cannot be split")
    axis = normalize_axis("split", axis, t.rank)
    n = t.shape[axis]
    if _is_int(splits):
        if splits < 1:
            raise ValueError(f"split: the number of splits must be >= 1, got {splits}")
        if n % splits != 0:
            raise ValueError(
                f"split: {splits} does not equally divide axis {axis} of tensor {t.id!r} "
                f"with length {n}")
        sizes = [n // int(splits)] * int(splits)
    else:
        try:
            sizes = list(splits)
        except TypeError:
            raise TypeError(f"split: splits must be an int or a list of ints, got {splits!r}") from None
        if not sizes or not all(_is_int(s) and s >= 0 for s in sizes):
            raise ValueError(f"split: splits must be a non-empty list of ints >= 0, got {splits!r}")
        sizes = [int(s) for s in sizes]
        if sum(sizes) != n:
            raise ValueError(
                f"split: split lengths {sizes} sum to {sum(sizes)}, not to the length {n} of "
                f"axis {axis} of tensor {t.id!r}")
    outs = []
    for i, s in enumerate(sizes):
        shape = list(t.shape)
        shape[axis] = s
        outs.append((f"{t.name}_split_{i}", tuple(shape), t.dtype))
    op = create_op("Split", [t], outs, {"axis": axis, "splits": sizes}, name="split")
    return list(op.outputs)


def _split_shape(ins, attrs, graphs=()):
    t, axis, sizes = ins[0], attrs["axis"], attrs["splits"]
    if sum(sizes) != t.shape[axis] or any(s < 0 for s in sizes):
        raise ValueError(f"splits {sizes} do not partition axis {axis} of {t.id!r} {t.shape}")
    return [(t.shape[:axis] + (s,) + t.shape[axis + 1:], t.dtype) for s in sizes]


define_op("Split", _split_shape, cost="rearrange")


def _concat_check(op: str, ts) -> Tuple[List[Tensor], int]:
    if isinstance(ts, Tensor):
        raise TypeError(f"{op}: ts must be an iterable of Tensors, not a single Tensor")
    try:
        ts = list(ts)
    except TypeError:
        raise TypeError(f"{op}: ts must be an iterable of Tensors, got {ts!r}") from None
    if not ts:
        raise ValueError(f"{op}: at least one tensor is required")
    check_in_graph(op, **{f"ts_{i}": t for i, t in enumerate(ts)})
    same_tile_set(op, *ts)
    if len({t.dtype for t in ts}) > 1:
        desc = ", ".join(f"{t.id!r} ({t.dtype.name})" for t in ts)
        raise TypeError(f"{op}: All inputs to a concat operation must have the same type: {desc}")
    return ts, ts[0].rank


def _concat_shape(op: str, ts: Sequence[Tensor], axis: int) -> Tuple[int, Tuple[int, ...]]:
    rank = ts[0].rank
    if rank == 0:
        raise ValueError(f"{op}: scalar tensors cannot be concatenated ({ts[0].id!r})")
    for t in ts:
        if t.rank != rank:
            raise ValueError(
                f"{op}: all tensors must have the same rank; {ts[0].id!r} has shape "
                f"{ts[0].shape} and {t.id!r} has shape {t.shape}")
    axis = normalize_axis(op, axis, rank)
    for t in ts:
        for k in range(rank):
            if k != axis and t.shape[k] != ts[0].shape[k]:
                raise ValueError(
                    f"{op}: shapes must match except on axis {axis}; {ts[0].id!r} has shape "
                    f"{ts[0].shape} and {t.id!r} has shape {t.shape}")
    shape = list(ts[0].shape)
    shape[axis] = sum(t.shape[axis] for t in ts)
    return axis, tuple(shape)


def concat(ts: Iterable[Tensor], axis: int = 0) -> Tensor:
    """Concatenate tensors of the same dtype and rank along ``axis`` into a new
    tensor; all other dimensions must match."""
    ts, _ = _concat_check("concat", ts)
    axis, shape = _concat_shape("concat", ts, axis)
    return create_op("Concat", ts, ["concat_out"], {"axis": axis}, name="concat").outputs[0]


def concat_(ts: Iterable[Tensor], axis: int = 0) -> Tensor:
    """In-place (view) form of :func:`concat`; see the module docstring for how
    ipuxl implements the view."""
    ts, _ = _concat_check("concat_", ts)
    axis, shape = _concat_shape("concat_", ts, axis)
    single = len(ts) == 1
    attrs = {"axis": axis}
    if not single or _view_attrs(ts[0], False):
        attrs["_view_copy"] = True
    return create_op("ConcatInplace", ts, ["concat_out"], attrs,
                     name="concat_inplace").outputs[0]


def _concat_rule(ins, attrs, graphs=()):
    return [(_concat_shape("concat", ins, attrs["axis"])[1], ins[0].dtype)]


define_op("Concat", _concat_rule, cost="rearrange")
define_op("ConcatInplace", _concat_rule, cost="view",
          aliases=lambda ins, attrs, graphs=(): ((0, 0),) if len(ins) == 1 else ())


# ---- gradient rules. The views ``slice_``/``concat_`` are not modifying ops,
# so autodiff accepts them; their gradients are those of the copies. Every
# rule is built from Reshape, Concat, Slice and Init (zeros), which are
# differentiable again.

def _zeros_like_axis(g: Tensor, axis: int, length: int) -> Tensor:
    from .init import init

    shape = list(g.shape)
    shape[axis] = length
    return init(tuple(shape), g.dtype, name="slice_grad_zeros")


def _unstride(g: Tensor, axis: int, start: int, step: int, n: int) -> Tensor:
    """The tensor of length ``n`` on ``axis`` holding ``g[j]`` at position
    ``start + j * step`` (the elements a slice read) and zeros elsewhere."""
    m = g.shape[axis]
    if step < 0:
        if m > 1:
            g = slice(g, step=-1, axis=axis)  # now in increasing position order
        start, step = start + (m - 1) * step, -step
    if step > 1 and m > 1:
        # Interleave step-1 zeros after each element: (.., m, ..) -> (.., m, step, ..)
        # -> (.., m*step, ..), then drop the trailing zeros after the last element.
        rest = g.shape[axis + 1:]
        g1 = reshape(g, g.shape[:axis + 1] + (1,) + rest)
        z = _zeros_like_axis(g1, axis + 1, step - 1)
        c = concat([g1, z], axis=axis + 1)
        c = reshape(c, g.shape[:axis] + (m * step,) + rest)
        g = slice(c, start=0, stop=(m - 1) * step + 1, axis=axis)
    length = g.shape[axis]
    parts = []
    if start > 0:
        parts.append(_zeros_like_axis(g, axis, start))
    parts.append(g)
    if n - start - length > 0:
        parts.append(_zeros_like_axis(g, axis, n - start - length))
    return parts[0] if len(parts) == 1 else concat(parts, axis=axis)


def _strided_grad(ctx, starts, steps):
    g = ctx.g()
    x = ctx.op.inputs[0]
    if any(d == 0 for d in g.shape):
        return [None]  # nothing was read: the gradient is zero
    for a, (b, s, n) in enumerate(zip(starts, steps, x.shape)):
        m = g.shape[a]
        if m == n and b == 0 and (s == 1 or m <= 1):
            continue
        g = _unstride(g, a, b, s, n)
    return [g]


def _slice_grad(ctx):
    return _strided_grad(ctx, ctx.attrs["starts"], ctx.attrs["steps"])


def _subsample_grad(ctx):
    strides = ctx.attrs["strides"]
    return _strided_grad(ctx, [0] * len(strides), strides)


def _split_grad(ctx):
    return [concat([ctx.g_or_zeros(i) for i in range(len(ctx.op.outputs))],
                   axis=ctx.attrs["axis"])]


def _concat_grad(ctx):
    g = ctx.g()
    axis = ctx.attrs["axis"]
    out, off = [], 0
    for i, x in enumerate(ctx.op.inputs):
        n = x.shape[axis]
        if not ctx.needs(i) or n == 0:
            out.append(None)
        elif n == g.shape[axis]:
            out.append(g)
        else:
            out.append(slice(g, start=off, stop=off + n, axis=axis))
        off += n
    return out


register_grad("Slice")(_slice_grad)
register_grad("SliceInplace")(_slice_grad)
register_grad("Subsample")(_subsample_grad)
register_grad("Split")(_split_grad)
register_grad("Concat")(_concat_grad)
register_grad("ConcatInplace")(_concat_grad)
