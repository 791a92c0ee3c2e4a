"""Shape rules shared by several op types (see :mod:`ipuxl.opdef`).

A shape rule is ``rule(inputs, attrs, graphs) -> [(shape, dtype), ...]``:
the shapes and dtypes of an op's outputs from its inputs (None for an absent
optional input), its attributes and the graphs it calls. Rules raise
``ValueError`` naming the op for shapes they cannot take; dtype checks with
PopXL's messages stay in the builders.
"""
from typing import Callable, Optional, Sequence, Tuple

import numpy as np

from .. import dtypes

__all__ = ["like_input", "broadcast", "broadcast_small", "broadcast_into", "no_outputs", "fixed_dtype", "called_graph_outputs"]

Spec = Tuple[Tuple[int, ...], dtypes.dtype]


def like_input(i: int = 0, dtype: Optional[dtypes.dtype] = None) -> Callable:
    """One output with input ``i``'s shape, and its dtype unless ``dtype``."""
    def rule(ins, attrs, graphs=()):
        t = ins[i]
        return [(t.shape, dtype if dtype is not None else t.dtype)]
    return rule


def broadcast_small(shapes: Sequence[Tuple[int, ...]]) -> Optional[Tuple[int, ...]]:
    """``np.broadcast_shapes(*shapes)`` (as ints) for shapes that broadcast,
    without NumPy's per-call overhead; None when they do not, or have more
    dimensions than NumPy takes (then NumPy decides, and raises)."""
    ndim = max(map(len, shapes), default=0)
    if ndim > 32:
        return None
    out = []
    for k in range(ndim, 0, -1):
        d = 1
        for s in shapes:
            if len(s) >= k:
                x = s[-k]
                if x != 1:
                    if d == 1:
                        d = x
                    elif x != d:
                        return None
        out.append(int(d))
    return tuple(out)


def broadcast_of(op: str, shapes: Sequence[Tuple[int, ...]], names=()) -> Tuple[int, ...]:
    first = tuple(shapes[0]) if shapes else ()
    if all(tuple(s) == first for s in shapes[1:]):
        return tuple(map(int, first))  # equal shapes: the common case
    small = broadcast_small([tuple(s) for s in shapes])
    if small is not None:
        return small
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        desc = ", ".join(f"{n!r} {s}" for n, s in zip(names, shapes)) if names else \
            ", ".join(str(s) for s in shapes)
        raise ValueError(f"{op}: shapes do not broadcast: {desc}") from None


def broadcast(dtype: Optional[dtypes.dtype] = None, dtype_of: int = 0) -> Callable:
    """One output with the NumPy broadcast of the present inputs' shapes, of
    ``dtype`` (default: the dtype of input ``dtype_of``)."""
    def rule(ins, attrs, graphs=()):
        if len(ins) == 2 and ins[0] is not None and ins[1] is not None \
                and ins[0].shape == ins[1].shape:  # two present inputs, one shape
            return [(tuple(map(int, ins[0].shape)),
                     dtype if dtype is not None else ins[dtype_of].dtype)]
        present = [t for t in ins if t is not None]
        shapes = [t.shape for t in present]
        first = shapes[0] if shapes else ()
        if all(s == first for s in shapes):
            shape = tuple(map(int, first))  # equal shapes (no names needed for a message)
        else:
            shape = broadcast_of("broadcast", shapes, [t.id for t in present])
        return [(shape, dtype if dtype is not None else ins[dtype_of].dtype)]
    return rule


def broadcast_into(i: int = 0) -> Callable:
    """Input ``i``'s shape and dtype, which the broadcast of all present
    inputs must equal (in-place elementwise ops write into input ``i``)."""
    def rule(ins, attrs, graphs=()):
        present = [t for t in ins if t is not None]
        shape = broadcast_of("broadcast", [t.shape for t in present], [t.id for t in present])
        if shape != ins[i].shape:
            raise ValueError(f"the result shape {shape} differs from the shape {ins[i].shape} "
                             f"of the in-place operand {ins[i].id!r}")
        return [(ins[i].shape, ins[i].dtype)]
    return rule


def no_outputs(ins, attrs, graphs=()):
    return []


def fixed_dtype(rule: Callable, dtype: dtypes.dtype) -> Callable:
    """``rule`` with every output's dtype replaced by ``dtype``."""
    def wrapped(ins, attrs, graphs=()):
        return [(s, dtype) for s, _ in rule(ins, attrs, graphs)]
    return wrapped


def called_graph_outputs(ins, attrs, graphs=()):
    """The outputs of the (first) called graph: calls, loops and branches."""
    return [(t.shape, t.dtype) for t in graphs[0].outputs]
