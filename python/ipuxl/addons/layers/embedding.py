"""``Embedding`` (``popxl_addons.layers.embedding``): a table lookup with ``ops.gather``."""
from functools import partial
from math import ceil
from typing import Optional

import numpy as np

from ... import dtypes
from ...replica_grouping import ReplicaGrouping
from ...tensor import Tensor
from ..module import Module
from .linear import truncated_normal

__all__ = ["Embedding"]

# Vocabulary shards are padded to a multiple of this (as popxl_addons does).
MULTISLICE_MAGIC_NUMBER = 16


class Embedding(Module):
    """Rows of a ``(vocab_shard_size, hidden_size)`` table selected by indices.

    Args:
        dtype: table dtype.
        vocab_size / hidden_size: table size.
        axis: vocabulary axis of the table.
        replica_grouping: with several groups the vocabulary is sharded over
            them (indices must be pre-offset, see ``get_offsets``; out-of-range
            indices give zeros).
    """

    def __init__(self, dtype: dtypes.dtype, vocab_size: int, hidden_size: int, axis: int = 0,
                 replica_grouping: Optional[ReplicaGrouping] = None):
        super().__init__()
        if vocab_size < 1 or hidden_size < 1:
            raise ValueError(f"Embedding: vocab_size ({vocab_size}) and hidden_size "
                             f"({hidden_size}) must be positive")
        self.dtype = dtype
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.axis = axis
        self.replica_grouping = replica_grouping
        self.n_shards = replica_grouping.num_groups if replica_grouping else 1
        self.vocab_shard_size = self.get_vocab_shard_size(vocab_size, self.n_shards)
        self.offsets = self.get_offsets(vocab_size, self.n_shards)

    @staticmethod
    def get_vocab_shard_size(vocab_size: int, n_shards: int) -> int:
        shard = ceil(vocab_size / n_shards)
        return MULTISLICE_MAGIC_NUMBER * ceil(shard / MULTISLICE_MAGIC_NUMBER)

    @staticmethod
    def get_offsets(vocab_size: int, n_shards: int) -> np.ndarray:
        size = Embedding.get_vocab_shard_size(vocab_size, n_shards)
        return np.arange(n_shards * size, step=size)

    def build(self, indices: Tensor) -> Tensor:
        from ... import ops

        if indices.dtype.name not in ("int32", "uint32", "int64", "uint64", "int16", "int8",
                                      "uint16", "uint8"):
            raise TypeError(f"Embedding: indices {indices.id!r} must be integers, got "
                            f"{indices.dtype.name}")
        self.weight = self.add_variable_input(
            "weight", partial(truncated_normal, (self.vocab_shard_size, self.hidden_size)),
            self.dtype, replica_grouping=self.replica_grouping)
        return ops.gather(self.weight, indices, axis=self.axis, zero_OOR=self.n_shards > 1)
