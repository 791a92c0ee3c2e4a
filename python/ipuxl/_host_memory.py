"""Host arrays the core can use as tensor storage in place.

The core's SIMD kernels and memory planner work in 64-byte aligned storage.
Variable data is copied into such arrays once, when the variable is created,
so a Session can let the device copy of a variable live in its host array
(see ``Session``) instead of holding a second copy.
"""
import math

import numpy as np

__all__ = ["ALIGNMENT", "aligned_empty", "aligned_copy", "is_aligned"]

ALIGNMENT = 64


def aligned_empty(shape, dtype) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on a 64-byte boundary."""
    dtype, shape = np.dtype(dtype), tuple(shape)
    nbytes = int(math.prod(shape)) * dtype.itemsize  # exact ints (np.prod: 20 us a call)
    buf = np.empty(nbytes + ALIGNMENT, np.uint8)
    start = (-buf.ctypes.data) % ALIGNMENT
    return buf[start:start + nbytes].view(dtype).reshape(shape)


def aligned_copy(a, dtype=None) -> np.ndarray:
    """A 64-byte aligned C-contiguous copy of ``a`` (cast to ``dtype`` if given)."""
    a = np.asarray(a, dtype=dtype)
    out = aligned_empty(a.shape, a.dtype)
    out[...] = a
    return out


def is_aligned(a: np.ndarray) -> bool:
    return a.ctypes.data % ALIGNMENT == 0
