"""Host-side NumPy helpers for sharded and replicated data, mirroring
``popxl_addons.array_munging``.

"Shards" of an array are equal parts along one axis, stacked on a new
leading axis (one entry per replica); the ``un*`` functions invert that.
Negative axes count from the end, as in NumPy.
"""
from typing import Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = [
    "shard", "unshard_arrays", "unshard", "repeat", "repeat_axis", "split2D", "shard2D",
    "unshard2D", "repeat_shard", "tensor_parallel_input", "pad_axis", "squeeze_safe",
    "handle_negative_axis",
]


def handle_negative_axis(x: np.ndarray, axis: int) -> int:
    """``axis`` of ``x`` as a non-negative index; ``IndexError`` when ``x`` has
    no such axis (a rank-0 array has none)."""
    rank = np.ndim(x)
    if not -rank <= axis < rank:
        raise IndexError(f"axis {axis} is out of range for an array of rank {rank}")
    return axis + rank if axis < 0 else axis


def shard(x: np.ndarray, n: int, axis: int) -> np.ndarray:
    """Split ``x`` into ``n`` equal parts along ``axis`` and stack them on a
    new leading axis: shape ``(n, ..., x.shape[axis] // n, ...)``."""
    axis = handle_negative_axis(x, axis)
    return np.stack(np.split(np.asarray(x), n, axis=axis))


def unshard_arrays(xs: List[np.ndarray], axis: int) -> np.ndarray:
    """Join shards that each have a leading axis of size 1 along ``axis``
    (which does not count that leading axis); the result drops it."""
    xs = [np.asarray(x) for x in xs]
    ranks = {x.ndim for x in xs}
    if len(ranks) > 1:
        raise ValueError(f"All arrays must be of the same rank. Ranks: {[x.ndim for x in xs]}")
    if any(x.shape[:1] != (1,) for x in xs):
        raise ValueError("each array must have a leading axis of size 1, got shapes "
                         f"{[x.shape for x in xs]}")
    return np.concatenate([x[0] for x in xs], axis=axis)


def unshard(x: np.ndarray, axis: int) -> np.ndarray:
    """Inverse of :func:`shard`: join the entries of the leading axis along
    ``axis`` (which does not count the leading axis)."""
    return np.concatenate(list(np.asarray(x)), axis=axis)


def repeat(x: np.ndarray, n: int, axis: int = 0) -> np.ndarray:
    """``n`` copies of ``x`` stacked on a new axis at position ``axis``."""
    return np.stack([np.asarray(x)] * n, axis=axis)


def repeat_axis(x: np.ndarray, n: int, axis: int = 0) -> np.ndarray:
    """``n`` copies of ``x`` joined end to end along its existing ``axis``."""
    return np.concatenate([np.asarray(x)] * n, axis=axis)


def split2D(x: np.ndarray, n_1: int, n_2: int, axis_1: int, axis_2: int) -> List[List[np.ndarray]]:
    """Split into ``n_1`` parts along ``axis_1``, then each into ``n_2`` parts
    along ``axis_2``: a list (outer) of lists (inner) of arrays."""
    return [np.split(part, n_2, axis=axis_2) for part in np.split(np.asarray(x), n_1, axis=axis_1)]


def shard2D(x: np.ndarray, n_1: int, n_2: int, axis_1: int, axis_2: int) -> np.ndarray:
    """The ``n_1 * n_2`` parts of :func:`split2D` stacked on a new leading
    axis, ``axis_1`` outermost: part ``i * n_2 + j`` is inner part ``j`` of
    outer part ``i``."""
    return np.stack([p for row in split2D(x, n_1, n_2, axis_1, axis_2) for p in row])


def unshard2D(x: np.ndarray, n_1: int, n_2: int, axis_1: int, axis_2: int) -> np.ndarray:
    """Inverse of :func:`shard2D` (the axes do not count the leading axis)."""
    x = np.asarray(x)
    if x.shape[0] != n_1 * n_2:
        raise ValueError(f"the leading axis has {x.shape[0]} entries, expected n_1 * n_2 = {n_1 * n_2}")
    rows = [np.concatenate(list(x[i * n_2:(i + 1) * n_2]), axis=axis_2) for i in range(n_1)]
    return np.concatenate(rows, axis=axis_1)


def repeat_shard(x: np.ndarray, n_repeats: int, n_shards: int, shard_axis: int,
                 sharded_tensor: str = "contiguous") -> np.ndarray:
    """Shard ``x`` into ``n_shards`` along ``shard_axis`` and repeat the shards
    ``n_repeats`` times on the leading axis: ``"contiguous"`` gives
    ``s0, s1, s0, s1``, ``"strided"`` gives ``s0, s0, s1, s1``."""
    shards = shard(x, n_shards, shard_axis)
    if sharded_tensor == "contiguous":
        return repeat_axis(shards, n_repeats, 0)
    if sharded_tensor == "strided":
        return np.repeat(shards, n_repeats, axis=0)
    raise ValueError(f"sharded_tensor should be either 'contiguous' or 'strided'. Not: {sharded_tensor}")


def _check_tp(tp: int, rf: int):
    if tp > rf:
        raise ValueError(f"tensor parallel factor `tp` is not less than replication factor `rf`: {tp} > {rf}")
    if rf % tp:
        raise ValueError(f"tensor parallel factor `tp` does not equally divide replication factor "
                         f"`rf`: rf/tp={rf / tp}")


def tensor_parallel_input(input_data: np.ndarray, tp: int, rf: int,
                          repeat_fn: Optional[Callable[[np.ndarray, int], np.ndarray]] = None
                          ) -> np.ndarray:
    """Host data for ``rf`` replicas in groups of ``tp`` consecutive replicas
    that see the same sample: ``[n, *data_shape]`` becomes
    ``[n * tp // rf, rf, *data_shape]`` (size-1 leading axes squeezed).
    ``repeat_fn(copy, i)``, when given, changes the copy for the ``i``-th
    replica of each group."""
    _check_tp(tp, rf)
    data = np.asarray(input_data)
    copies = []
    for i in range(tp):
        c = data[:, np.newaxis]
        if repeat_fn is not None:
            c = repeat_fn(c.copy(), i)
        copies.append(c)
    out = np.concatenate(copies, axis=1).reshape(-1, rf, *data.shape[1:])
    return squeeze_safe(out, [0, 1])


def tensor_parallel_output(output_data: np.ndarray, num_host_transfers: int, tp: int, rf: int,
                           data_shape: Tuple[int, ...], tp_identical: bool = True,
                           true_num_host_transfers: Optional[int] = None) -> np.ndarray:
    """Inverse of :func:`tensor_parallel_input` for session outputs
    ``[num_host_transfers, rf, *data_shape]``: ``[samples, *data_shape]``
    (``[samples, tp, *data_shape]`` when ``tp_identical`` is False). Host
    transfers past ``true_num_host_transfers`` are dropped."""
    _check_tp(tp, rf)
    out = np.asarray(output_data).reshape(num_host_transfers, rf // tp, tp, *data_shape)
    if true_num_host_transfers is not None:
        out = out[:true_num_host_transfers]
    out = out.reshape(-1, tp, *data_shape)
    return out[:, 0] if tp_identical else out


def pad_axis(x: np.ndarray, n: int, axis: int, value: Union[int, float] = 0) -> np.ndarray:
    """Pad ``axis`` at its end with ``value`` up to length ``n``."""
    x = np.asarray(x)
    if x.shape[axis] > n:
        raise ValueError(f"axis {axis} has length {x.shape[axis]}, more than {n}")
    widths = [(0, 0)] * x.ndim
    widths[axis] = (0, n - x.shape[axis])
    return np.pad(x, widths, constant_values=value)


def squeeze_safe(x: np.ndarray, axis: Optional[Union[int, Sequence[int]]] = None) -> np.ndarray:
    """``np.squeeze``, except that named axes whose length is not 1 are kept
    instead of raising."""
    x = np.asarray(x)
    if axis is None:
        return np.squeeze(x)
    axes = [axis] if isinstance(axis, int) else list(axis)
    keep = {handle_negative_axis(x, a) for a in axes}
    drop = tuple(a for a in sorted(keep) if x.shape[a] == 1)
    return np.squeeze(x, axis=drop) if drop else x
