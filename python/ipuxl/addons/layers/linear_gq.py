"""``LinearGQ`` (``popxl_addons.layers.linear_gq``): a linear layer whose
weight is stored 4-bit group-quantised and decompressed on the device."""
from functools import partial
from typing import Optional

import numpy as np

from ... import dtypes
from ...replica_grouping import ReplicaGrouping
from ...tensor import Tensor
from ..module import Module
from ..named_tensors import NamedTensors
from ..ops.group_quantize_decompress import (group_quantize_compress_numpy,
                                             group_quantize_decompress)
from ..utils import WeightsDict

__all__ = ["LinearGQ"]


class LinearGQ(Module):
    """``y = x @ decompress(weight) (+ bias)``.

    The weight ``(in_features, out_features)`` is held as three variables:
    ``weight_compressed`` (uint16, four 4-bit ids per element),
    ``weight_decompression_scale`` and ``weight_decompression_bias`` (the
    input's dtype), all zeros until written (``torch_mapping`` compresses a
    ``torch.nn.Linear``'s weight).

    Args:
        out_features: output size.
        bias: add a bias.
        replica_grouping: grouping of the variables.
        group_size: elements per quantisation group (a multiple of 4 dividing
            the quantised axis).
        dim: the weight axis that is grouped: -1 or 1 the output axis, 0 the
            input axis.
    """

    def __init__(self, out_features: int, bias: bool = True,
                 replica_grouping: Optional[ReplicaGrouping] = None, group_size: int = 0,
                 dim: int = -1):
        super().__init__()
        self.out_features = out_features
        self.bias = bias
        self.replica_grouping = replica_grouping
        self.group_size = group_size
        self.dim = dim

    def build(self, x: Tensor) -> Tensor:
        in_features = x.shape[-1]
        if self.dim in (1, -1):
            compressed, uncompressed = self.out_features, in_features
        elif self.dim == 0:
            compressed, uncompressed = in_features, self.out_features
        else:
            raise ValueError(f"LinearGQ: dim must be 0, 1 or -1, got {self.dim}")
        gs = self.group_size
        if not isinstance(gs, int) or gs <= 0 or gs % 4 or compressed % gs:
            raise ValueError(f"LinearGQ: group_size {gs!r} must be a positive multiple of 4 that "
                             f"divides the quantised weight axis ({compressed})")
        shape = (uncompressed, compressed // gs)
        w_compressed = self.add_variable_input(
            "weight_compressed", partial(np.zeros, shape=(*shape, gs // 4)), dtypes.uint16,
            replica_grouping=self.replica_grouping)
        w_scale = self.add_variable_input(
            "weight_decompression_scale", partial(np.zeros, shape=(*shape, 1)), x.dtype,
            replica_grouping=self.replica_grouping)
        w_bias = self.add_variable_input(
            "weight_decompression_bias", partial(np.zeros, shape=(*shape, 1)), x.dtype,
            replica_grouping=self.replica_grouping)
        w = group_quantize_decompress(w_compressed, w_scale, w_bias, self.dim)
        y = x @ w
        if self.bias:
            b = self.add_variable_input("bias", partial(np.zeros, y.shape[-1]), x.dtype,
                                        replica_grouping=self.replica_grouping)
            y = y + b
        return y

    @staticmethod
    def torch_mapping(variables: NamedTensors, nn_layer, dtype=dtypes.float32,
                      group_size: int = 64, dim: int = -1) -> WeightsDict:
        """``{variable: data}`` for a ``torch.nn.Linear``: its weight
        (transposed to ``(in, out)``) compressed with ``group_size`` along
        ``dim``, and its bias in ``dtype``."""
        weight = nn_layer.weight.T.detach().cpu().numpy()
        packed, scale, bias = group_quantize_compress_numpy(weight, group_size, dim=dim)
        # scale and bias are computed in float16; stored in the variables' dtype
        s_var, b_var = variables.weight_decompression_scale, variables.weight_decompression_bias
        d = {variables.weight_compressed: packed,
             s_var: scale.astype(s_var.dtype.as_numpy()),
             b_var: bias.astype(b_var.dtype.as_numpy())}
        if "bias" in variables.keys():
            d[variables.bias] = nn_layer.bias.detach().cpu().numpy().astype(dtype.as_numpy())
        return WeightsDict(d)
