"""``GroupNorm`` layer (``popxl_addons.layers.group_norm``)."""
from functools import partial
from typing import Optional

import numpy as np

from ...replica_grouping import ReplicaGrouping
from ...tensor import Tensor
from ..module import Module
from ..named_tensors import NamedTensors
from ..utils import WeightsDict
from .linear import _to_numpy

__all__ = ["GroupNorm"]


class GroupNorm(Module):
    """Group normalisation (``ops.group_norm``) of an ``(N, C, *)`` input of
    any rank >= 2, channels on axis 1; weight ones and bias zeros of shape
    ``(C,)``."""

    def __init__(self, num_groups: int, replica_grouping: Optional[ReplicaGrouping] = None,
                 eps: float = 1e-5, cache: bool = False):
        super().__init__(cache)
        self.num_groups = num_groups
        self.replica_grouping = replica_grouping
        self.eps = eps

    def build(self, x: Tensor) -> Tensor:
        from ... import ops

        c = x.shape[1]
        self.weight = self.add_variable_input("weight", partial(np.ones, c), x.dtype,
                                              replica_grouping=self.replica_grouping)
        self.bias = self.add_variable_input("bias", partial(np.zeros, c), x.dtype,
                                            replica_grouping=self.replica_grouping)
        return ops.group_norm(x, self.weight, self.bias, num_groups=self.num_groups, eps=self.eps)

    @staticmethod
    def torch_mapping(variables: NamedTensors, nn_layer, dtype=None) -> WeightsDict:
        """``{variable: data}`` copying a ``torch.nn.GroupNorm``."""
        from ... import dtypes

        dtype = dtype or dtypes.float32
        return WeightsDict({variables.weight: _to_numpy(nn_layer.weight.data, dtype),
                            variables.bias: _to_numpy(nn_layer.bias.data, dtype)})
