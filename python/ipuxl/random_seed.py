"""``create_seeds``, mirroring ``popxl.create_seeds``."""
import numpy as np

__all__ = ["create_seeds"]


def create_seeds(seed: int, offset: int = 0, batches_per_step: int = 1,
                 gradient_accumulation_factor: int = 1, replicas: int = 1) -> np.ndarray:
    """Seed tensors for random ops: uint32 of shape ``[bps, gaf, rf, 2]`` with
    size-1 dimensions removed. Deterministic in ``seed`` and ``offset``."""
    n = batches_per_step * gradient_accumulation_factor * replicas
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, int(seed) >> 32 & 0xFFFFFFFF])
    seeds = rng.integers(0, 2**32, size=(n + offset, 2), dtype=np.uint64)[offset:]
    seeds = seeds.astype(np.uint32).reshape(batches_per_step, gradient_accumulation_factor, replicas, 2)
    return np.squeeze(seeds)
