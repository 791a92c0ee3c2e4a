"""``LinearFP8`` (``popxl_addons.layers.linear_fp8``): a linear layer whose
products run in float8 (``ops.matmul_pow2scaled``), with its own backward
pass (``build_grad``)."""
from functools import partial
from typing import Optional

import numpy as np

from ... import dtypes
from ...replica_grouping import ReplicaGrouping
from ...tensor import Tensor, constant
from ..module import Module
from ..named_tensors import NamedTensors
from ..ops.fp8_amax_scale import fp8_amax_scale
from ..ops.fp8_mse_scale import fp8_mse_scale
from ..utils import WeightsDict
from .linear import _to_numpy, truncated_normal

__all__ = ["LinearFP8"]


class LinearFP8(Module):
    """``y = x @ weight (+ bias)`` with ``x`` and ``weight`` cast to
    float8_143 under power-of-two scales (``scale_metric``: ``"amax"``,
    ``"mse"`` or ``"manual_scale"`` with ``scale``), the product computed by
    ``matmul_pow2scaled`` and unscaled. ``build_grad`` casts the output
    gradient to float8_152 and computes ``dx`` and ``dweight`` in float8 too.
    """

    def __init__(self, out_features: int, bias: bool = True, scale_metric: str = "amax",
                 scale: int = 0, replica_grouping: Optional[ReplicaGrouping] = None):
        super().__init__()
        self.out_features = out_features
        self.bias = bias
        self.replica_grouping = replica_grouping
        self.scale_metric = scale_metric
        self.scale = scale
        self.forward_fp8_type = dtypes.float8_143
        self.grad_fp8_type = dtypes.float8_152
        if scale_metric == "amax":
            self.fp8_scale = fp8_amax_scale
        elif scale_metric == "mse":
            self.fp8_scale = fp8_mse_scale
        elif scale_metric == "manual_scale":
            self.fp8_scale = lambda x, y: constant(self.scale, dtypes.int32)
        else:
            raise ValueError(
                f"The scale_metric option {scale_metric} is not available. Please provide one "
                "of the following options: amax, mse or manual_scale.")

    def build(self, x: Tensor) -> Tensor:
        from ... import ops

        w = self.add_variable_input("weight",
                                    partial(truncated_normal, (x.shape[-1], self.out_features)),
                                    x.dtype, replica_grouping=self.replica_grouping)
        w_log2scale = self.fp8_scale(w, dtypes.float8_143)
        w_fp8 = ops.pow2scale_cast_to_fp8(w, data_type=self.forward_fp8_type,
                                          log2_scale=w_log2scale)
        x_log2scale = self.fp8_scale(x, dtypes.float8_143)
        x_fp8 = ops.pow2scale_cast_to_fp8(x, data_type=self.forward_fp8_type,
                                          log2_scale=x_log2scale)
        self.aux["w_log2scale"] = w_log2scale
        self.aux["w_fp8"] = w_fp8
        self.aux["x_log2scale"] = x_log2scale
        self.aux["x_fp8"] = x_fp8
        y = ops.matmul_pow2scaled(x_fp8, w_fp8, log2_scale=-w_log2scale - x_log2scale)
        if x.dtype == dtypes.float32:
            y = ops.cast(y, dtypes.float32)
        if self.bias:
            b = self.add_variable_input("bias", partial(np.zeros, y.shape[-1]), x.dtype,
                                        replica_grouping=self.replica_grouping)
            y = y + b
        return y

    def build_grad(self, dLdy: Tensor) -> Tensor:
        """The backward pass in float8: ``dx = dy @ w^T``, ``dw = x^T @ dy``."""
        from ... import ops

        dLdy_log2scale = self.fp8_scale(dLdy, dtypes.float8_152) - constant(3, dtypes.int32)
        dLdy_log2scale = ops.clip(dLdy_log2scale, -31, 31)
        dLdy_fp8 = ops.pow2scale_cast_to_fp8(dLdy, data_type=self.grad_fp8_type,
                                             log2_scale=dLdy_log2scale)
        dLdx = ops.matmul_pow2scaled(dLdy_fp8, self.aux["w_fp8"].T,
                                     log2_scale=-self.aux["w_log2scale"] - dLdy_log2scale)
        dLdw = ops.matmul_pow2scaled(dLdy_fp8.T, self.aux["x_fp8"],
                                     log2_scale=-self.aux["x_log2scale"] - dLdy_log2scale).T
        self.var_grad["weight"] = dLdw
        if self.bias:
            self.var_grad["bias"] = ops.sum(dLdy, 0)
        return dLdx

    @staticmethod
    def torch_mapping(variables: NamedTensors, nn_layer, dtype=None) -> WeightsDict:
        """``{variable: data}`` copying a ``torch.nn.Linear`` (weight transposed)."""
        dtype = dtype or dtypes.float32
        state = {variables.weight: _to_numpy(nn_layer.weight.data, dtype).T}
        if "bias" in variables.keys():
            state[variables.bias] = _to_numpy(nn_layer.bias.data, dtype)
        return WeightsDict(state)
