"""``check_shape``: the one validation of a user-given shape."""
from typing import Tuple

import numpy as np

__all__ = ["check_shape"]

# Bytes a tensor may span: element counts and byte sizes stay far from
# int64 overflow in every layer (NumPy, the core's size_t arithmetic).
_MAX_BYTES = 2 ** 62


def check_shape(what: str, shape, itemsize: int = 1) -> Tuple[int, ...]:
    """``shape`` as a tuple of ints, or a clear error naming ``what``: every
    dimension an integer (not a float or bool), none negative, and the
    element count times ``itemsize`` addressable with 64 bits."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, (bool, np.bool_)):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"{what}: shape must be a sequence of ints, got {shape!r}") from None
    out = []
    for d in dims:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise TypeError(f"{what}: shape must be a sequence of ints; {shape!r} has the dimension {d!r}")
        if d < 0:
            raise ValueError(f"{what}: shape {tuple(dims)} has a negative dimension {d}")
        out.append(int(d))
    n = 1
    span = 1  # as NumPy counts: an empty tensor may still not be addressable
    for d in out:
        n *= d  # Python ints: no overflow while checking
        span *= max(d, 1)
    if span * max(int(itemsize), 1) > _MAX_BYTES:
        if n == 0:
            raise ValueError(f"{what}: shape {tuple(out)} is empty but its nonzero dimensions "
                             f"span {span} elements, too many to address (at most "
                             f"{_MAX_BYTES // max(int(itemsize), 1)} of this dtype)")
        raise ValueError(f"{what}: shape {tuple(out)} has {n} elements, too many to address "
                         f"(at most {_MAX_BYTES // max(int(itemsize), 1)} of this dtype)")
    return tuple(out)
