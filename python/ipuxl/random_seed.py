"""Seeds for random ops, mirroring ``popxl.random_seed``.

A seed tensor is one uint64 held as two uint32 elements: the most
significant 32 bits first, then the least significant 32 bits.
"""
from typing import Tuple

import numpy as np

__all__ = ["create_seeds", "uint64_to_two_uint32", "two_uint32_to_uint64", "MAX_UINT64"]

MAX_UINT64 = 2**64 - 1
_MAX_UINT32 = 2**32 - 1


def create_seeds(seed: int, offset: int = 0, batches_per_step: int = 1,
                 gradient_accumulation_factor: int = 1, replicas: int = 1) -> np.ndarray:
    """``batches_per_step * gradient_accumulation_factor * replicas`` seed
    tensors drawn from NumPy's default generator seeded with
    ``seed + offset``: uint32 of shape ``[bps, gaf, replicas, 2]`` with
    size-1 dimensions removed. Deterministic in ``seed + offset``."""
    n = batches_per_step * gradient_accumulation_factor * replicas
    values = np.random.default_rng(seed + offset).integers(
        0, MAX_UINT64, size=n, dtype=np.uint64, endpoint=True)
    pairs = np.empty((n, 2), dtype=np.uint32)
    pairs[:, 0] = (values >> np.uint64(32)).astype(np.uint32)
    pairs[:, 1] = (values & np.uint64(_MAX_UINT32)).astype(np.uint32)
    shape = (batches_per_step, gradient_accumulation_factor, replicas, 2)
    return np.squeeze(pairs.reshape(shape))


def uint64_to_two_uint32(num: int) -> Tuple[int, int]:
    """``(most significant 32 bits, least significant 32 bits)`` of ``num``;
    ``ValueError`` unless ``0 <= num <= MAX_UINT64``."""
    num = int(num)
    if not 0 <= num <= MAX_UINT64:
        raise ValueError(f"Number is negative or cannot be represented as a uint64: {num}")
    return num >> 32, num & _MAX_UINT32


def two_uint32_to_uint64(a: int, b: int) -> int:
    """The uint64 whose most significant 32 bits are ``a`` and least
    significant 32 bits are ``b``; ``ValueError`` unless both fit a uint32."""
    a, b = int(a), int(b)
    if not (0 <= a <= _MAX_UINT32 and 0 <= b <= _MAX_UINT32):
        raise ValueError(
            f"Either `a` or `b` are negative or cannot be represented as a uint32: {a}, {b}")
    return (a << 32) | b
