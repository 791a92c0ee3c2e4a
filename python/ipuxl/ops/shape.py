"""Shape ops: reshape, flatten, squeeze and transpose, with their in-place
(view) forms.

``reshape_``/``flatten_`` are true views: the output shares the input's
storage, so an in-place op on either is seen through the other.
``transpose_`` is a view in PopXL too, but a permuted layout cannot share
storage, so ipuxl computes it as a copy and marks the op ``_view_copy``:
reading the result works, writing through it in place raises
NotImplementedError (see :func:`~ipuxl.op.create_op`), and in-place changes
made to the input *after* the transpose are not seen by the result.
"""
from typing import Iterable, List, Optional, Sequence, Tuple

import numpy as np

from ..grad import register_grad
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor
from .utils import check_in_graph, normalize_axis

__all__ = ["reshape", "reshape_", "flatten", "flatten_", "squeeze", "transpose", "transpose_"]


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_copied_view(t: Tensor) -> bool:
    """Whether ``t``'s storage is a copy standing in for a view of another
    tensor (so that a view of ``t`` must also refuse in-place writes)."""
    p = t.producer
    return p is not None and bool(p.attrs.get("_view_copy"))


def _view_attrs(t: Tensor, copied: bool) -> dict:
    """Attributes of an in-place view op on ``t``: ``_view_copy`` when the
    result is a copy, or when it aliases a tensor that is itself a copied view
    (a write through the alias would not reach the original either)."""
    return {"_view_copy": True} if copied or _is_copied_view(t) else {}


def _resolve_shape(op: str, t: Tensor, shape) -> Tuple[int, ...]:
    if _is_int(shape):
        shape = (shape,)
    try:
        shape = tuple(shape)
    except TypeError:
        raise TypeError(f"{op}: shape must be a tuple of ints, got {shape!r}") from None
    if not all(_is_int(d) for d in shape):
        raise TypeError(f"{op}: shape must be a tuple of ints, got {shape!r}")
    shape = tuple(int(d) for d in shape)
    if any(d < -1 for d in shape):
        raise ValueError(
            f"{op}: invalid shape value in {shape} for tensor {t.id!r}. Must be '>=0' or '-1'.")
    if shape.count(-1) > 1:
        raise ValueError(f"{op}: shape can contain at most one '-1' value. Provided {shape}.")
    if -1 in shape:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or t.nelms % known != 0:
            raise ValueError(
                f"{op}: cannot infer the '-1' dimension of {shape} for tensor {t.id!r} "
                f"with shape {t.shape} ({t.nelms} elements)")
        shape = tuple(t.nelms // known if d == -1 else d for d in shape)
    if int(np.prod(shape, dtype=np.int64)) != t.nelms:
        raise ValueError(
            f"{op}: cannot reshape tensor {t.id!r} of shape {t.shape} ({t.nelms} elements) "
            f"to {shape}")
    return shape


def reshape(t: Tensor, shape: Tuple[int, ...]) -> Tensor:
    """Reshape ``t`` (a copy). ``shape`` may contain one ``-1``, inferred from
    the number of elements.

    Raises:
        ValueError: a dimension below -1, more than one -1, or an element count
            that does not match.
    """
    check_in_graph("reshape", t=t)
    shape = _resolve_shape("reshape", t, shape)
    return create_op("Reshape", [t], [f"{t.name}_reshaped"], {"shape": list(shape)},
                     name="reshape").outputs[0]


def reshape_(t: Tensor, shape: Tuple[int, ...]) -> Tensor:
    """Reshape ``t`` in place: the result is a view sharing ``t``'s storage."""
    check_in_graph("reshape_", t=t)
    shape = _resolve_shape("reshape_", t, shape)
    return create_op("ReshapeInplace", [t], [f"{t.name}_reshaped"],
                     attrs={"shape": list(shape), **_view_attrs(t, False)},
                     name="reshape_inplace").outputs[0]


def flatten(t: Tensor) -> Tensor:
    """``reshape(t, (-1,))``: a 1-D copy of ``t``."""
    return reshape(t, (-1,))


def flatten_(t: Tensor) -> Tensor:
    """``reshape_(t, (-1,))``: a 1-D view of ``t``."""
    return reshape_(t, (-1,))


def squeeze(t: Tensor, axes: Optional[List[int]] = None) -> Tensor:
    """Remove axes of length one (all of them when ``axes`` is None), via
    :func:`reshape`.

    Raises:
        ValueError: repeated axes, an axis out of range, or an axis whose
            length is not one.
    """
    check_in_graph("squeeze", t=t)
    if axes is None:
        new_shape = [d for d in t.shape if d != 1]
    else:
        if _is_int(axes):
            axes = [axes]
        axes = list(axes)
        if t.rank == 0 and axes:
            raise ValueError(f"squeeze: tensor {t.id!r} is a scalar; it has no axis to squeeze")
        norm = [normalize_axis("squeeze", a, t.rank) for a in axes]
        if len(set(norm)) != len(norm):
            raise ValueError(f"squeeze: axes {list(axes)} contain duplicates")
        for a in norm:
            if t.shape[a] != 1:
                raise ValueError(
                    f"squeeze: can't squeeze axis {a} of tensor {t.id!r} {t.shape}: its length "
                    f"is {t.shape[a]}, not 1")
        new_shape = [d for i, d in enumerate(t.shape) if i not in norm]
    return reshape(t, tuple(new_shape))


def _permutation(op: str, t: Tensor, permutation) -> Tuple[int, ...]:
    if permutation is None:
        return tuple(reversed(range(t.rank)))
    try:
        perm = tuple(permutation)
    except TypeError:
        raise TypeError(f"{op}: permutation must be a sequence of ints, got {permutation!r}") from None
    if not all(_is_int(p) for p in perm):
        raise TypeError(f"{op}: permutation must be a sequence of ints, got {permutation!r}")
    if len(perm) != t.rank:
        raise ValueError(
            f"{op}: permutation {perm} has {len(perm)} entries but tensor {t.id!r} has rank "
            f"{t.rank}")
    for p in perm:
        if not -t.rank <= p < t.rank:
            raise ValueError(
                f"{op}: values in permutation must be less than the tensor's rank {t.rank}. "
                f"Found {p} in {perm}")
    norm = tuple(int(p) % t.rank for p in perm)
    if sorted(norm) != list(range(t.rank)):
        raise ValueError(f"{op}: {perm} is not a permutation of the axes of tensor {t.id!r}")
    return norm


def _transposed_shape(t: Tensor, perm: Sequence[int]) -> Tuple[int, ...]:
    return tuple(t.shape[p] for p in perm)


def transpose(t: Tensor, permutation: Optional[Iterable[int]] = None) -> Tensor:
    """Permute the axes of ``t``; output axis ``i`` is input axis
    ``permutation[i]``. By default the axes are reversed."""
    check_in_graph("transpose", t=t)
    perm = _permutation("transpose", t, permutation)
    return create_op("Transpose", [t], [f"{t.name}_T"], {"perm": list(perm)},
                     name="transpose").outputs[0]


def transpose_(t: Tensor, permutation: Optional[Iterable[int]] = None) -> Tensor:
    """In-place (view) form of :func:`transpose`.

    When the permutation keeps the memory order (it only moves axes of
    length 1) the result is a true view of ``t``; otherwise it is a copy, and
    in-place writes through it raise NotImplementedError (see the module
    docstring).
    """
    check_in_graph("transpose_", t=t)
    perm = _permutation("transpose_", t, permutation)
    return create_op("TransposeInplace", [t], [f"{t.name}_T"],
                     {"perm": list(perm), **_view_attrs(t, not _keeps_layout(t, perm))},
                     name="transpose_inplace").outputs[0]


def _keeps_layout(t: Tensor, perm: Sequence[int]) -> bool:
    """Whether permuting ``t``'s axes by ``perm`` keeps its memory order (it
    moves only axes of length 1), so the result can share its storage."""
    moved = [p for p in perm if t.shape[p] != 1]
    return moved == sorted(moved)


def _reshape_shape(ins, attrs, graphs=()):
    t, shape = ins[0], tuple(attrs["shape"])
    if int(np.prod(shape, dtype=np.int64)) != t.nelms:
        raise ValueError(f"cannot reshape {t.id!r} {t.shape} to {shape}")
    return [(shape, t.dtype)]


def _transpose_shape(ins, attrs, graphs=()):
    t, perm = ins[0], list(attrs["perm"])
    if sorted(perm) != list(range(t.rank)):
        raise ValueError(f"{perm} is not a permutation of the axes of {t.id!r} {t.shape}")
    return [(_transposed_shape(t, perm), t.dtype)]


define_op("Reshape", _reshape_shape, cost="copy")
define_op("ReshapeInplace", _reshape_shape, aliases=((0, 0),), cost="view")
define_op("Transpose", _transpose_shape, cost="rearrange")
define_op("TransposeInplace", _transpose_shape, cost="view",
          aliases=lambda ins, attrs, graphs=(): ((0, 0),) if _keeps_layout(ins[0], attrs["perm"])
          else ())


# ---- gradient rules. Views (``reshape_``, ``transpose_``) are not modifying
# ops, so autodiff accepts them; their gradients are those of the copies.

def _reshape_grad(ctx):
    return [reshape(ctx.g(), ctx.op.inputs[0].shape)]


def _transpose_grad(ctx):
    perm = ctx.attrs["perm"]
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return [transpose(ctx.g(), inverse)]


register_grad("Reshape")(_reshape_grad)
register_grad("ReshapeInplace")(_reshape_grad)
register_grad("Transpose")(_transpose_grad)
register_grad("TransposeInplace")(_transpose_grad)
