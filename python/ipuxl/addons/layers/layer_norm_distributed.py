"""``popxl_addons.layers.layer_norm_distributed``: :class:`LayerNormDistributed`."""
from functools import partial
from typing import Optional

import numpy as np

from ...replica_grouping import ReplicaGrouping
from ...tensor import Tensor
from ..module import Module
from ..ops.layer_norm_distributed import layer_norm_distributed

__all__ = ["LayerNormDistributed"]


class LayerNormDistributed(Module):
    """Layer normalisation of a tensor whose hidden axis is sharded over the
    replicas of ``replica_grouping``; the weight and bias (ones and zeros)
    are sharded the same way (their grouping is the transpose)."""

    def __init__(self, replica_grouping: Optional[ReplicaGrouping] = None):
        super().__init__()
        self.replica_grouping = replica_grouping

    def build(self, x: Tensor, eps: float = 1e-5) -> Tensor:
        rg = self.replica_grouping
        if rg is None:
            from ...context import gcg
            rg = gcg().ir.replica_grouping()
        w = self.add_variable_input("weight", partial(np.ones, x.shape[-1]), x.dtype,
                                    replica_grouping=rg.transpose())
        b = self.add_variable_input("bias", partial(np.zeros, x.shape[-1]), x.dtype,
                                    replica_grouping=rg.transpose())
        return layer_norm_distributed(x, w, b, epsilon=eps, group=rg)
