"""``Tensor.__getitem__``: slicing, integer (gather) and boolean (mask)
indexing, as PopXL.

* ints, slices, ``...`` and tuples of them: basic slicing with NumPy's rules.
  Each slice becomes one :func:`~ipuxl.ops.slice` with steps of +-1, then a
  :func:`~ipuxl.ops.subsample` takes every ``|step|``-th element where a step
  is larger, then :func:`~ipuxl.ops.squeeze` removes the int-indexed axes.
  An int out of range raises IndexError (as NumPy).
* an integer Tensor or host integer array: :func:`~ipuxl.ops.gather` on
  axis 0.
* a bool Tensor or host bool array: a mask, ``where(mask, t, 0)``. Unlike
  NumPy the shape is kept: masked-out elements become 0.
"""
import builtins

import numpy as np

from .. import dtypes
from ..tensor import Tensor, constant

__all__ = ["tensor_getitem"]


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _basic(t: Tensor, key: tuple) -> Tensor:
    from .shape import squeeze
    from .slicing import slice as slice_op, subsample

    n_ellipsis = sum(1 for k in key if k is Ellipsis)
    if n_ellipsis > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    n_axes = len(key) - n_ellipsis
    if n_axes > t.rank:
        raise IndexError(f"too many indices for tensor {t.id!r} of rank {t.rank}: {len(key)} "
                         "were indexed")
    if n_ellipsis:
        i = key.index(Ellipsis)
        key = key[:i] + (builtins.slice(None),) * (t.rank - n_axes) + key[i + 1:]
    starts, stops, steps, axes, int_axes = [], [], [], [], []
    strides = [1] * t.rank
    for axis, k in enumerate(key):
        n = t.shape[axis]
        if _is_int(k):
            i = int(k)
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} of tensor {t.id!r} "
                                 f"with size {n}")
            i %= n
            starts.append(i)
            stops.append(i + 1)
            steps.append(1)
            axes.append(axis)
            int_axes.append(axis)
            continue
        for v in (k.start, k.stop, k.step):
            if v is not None and not _is_int(v):
                raise TypeError(f"slice indices must be integers or None, got {k!r}")
        step = 1 if k.step is None else int(k.step)
        if step == 0:
            raise ValueError(f"slice step cannot be zero (axis {axis} of tensor {t.id!r})")
        strides[axis] = abs(step)
        if k.start is None and k.stop is None and step > 0:
            continue  # the whole axis, forwards: no slice needed
        # The bounds resolve the same for step s and sign(s); |s| > 1 is then
        # a subsample of the unit-step slice.
        starts.append(k.start)
        stops.append(k.stop)
        steps.append(1 if step > 0 else -1)
        axes.append(axis)
    out = t
    if axes:
        out = slice_op(out, starts, stops, steps, axes)
    if any(s != 1 for s in strides):
        out = subsample(out, strides)
    if int_axes:
        out = squeeze(out, int_axes)
    return out


def tensor_getitem(t: Tensor, key) -> Tensor:
    """``t[key]``; see the module docstring."""
    if isinstance(key, (bool, np.bool_, str)):
        pass  # rejected below
    elif _is_int(key) or isinstance(key, builtins.slice) or key is Ellipsis:
        return _basic(t, (key,))
    elif isinstance(key, tuple) and all(_is_int(k) or isinstance(k, builtins.slice)
                                        or k is Ellipsis for k in key):
        return _basic(t, key)
    elif isinstance(key, Tensor) or (
            isinstance(key, (np.ndarray, list, tuple)) and not isinstance(key, str)):
        if not isinstance(key, Tensor):
            arr = np.asarray(key)
            if arr.dtype == object or arr.size == 0:
                raise TypeError(f"invalid index {key!r} for tensor {t.id!r}")
            key = constant(arr)
        if key.dtype.is_int:
            from .gather import gather

            return gather(t, key)
        if key.dtype == dtypes.bool:
            try:
                from .where import where
            except ImportError:
                raise NotImplementedError(
                    "boolean indexing needs ops.where, which is not available") from None
            zero = constant(np.zeros((), dtype=t.dtype.as_numpy()), t.dtype)
            return where(key, t, zero)
    raise TypeError(
        "Only integers, slices (`:`), ellipsis (`...`), integer tensors and boolean tensors are "
        f"valid indices. Not a valid type: {type(key).__name__}. Value: {key!r}.")
