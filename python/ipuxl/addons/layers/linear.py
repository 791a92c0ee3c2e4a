"""``Linear`` layer (``popxl_addons.layers.linear``)."""
from functools import partial
from typing import Optional

import numpy as np

from ...replica_grouping import ReplicaGrouping
from ...tensor import Tensor
from ..module import Module
from ..named_tensors import NamedTensors
from ..utils import WeightsDict

__all__ = ["Linear", "truncated_normal"]


def truncated_normal(size, std: float = 0.02, bound: float = 2.0) -> np.ndarray:
    """Normal(0, std) samples truncated to ±bound·std: ``scipy.stats.truncnorm``
    when scipy is installed (the same stream as popxl_addons), otherwise
    numpy rejection sampling (same distribution, different stream)."""
    try:
        from scipy.stats import truncnorm
    except ImportError:
        truncnorm = None
    if truncnorm is not None:
        return truncnorm.rvs(-bound, bound, loc=0, scale=std, size=size)
    out = np.random.normal(0.0, 1.0, size)
    bad = np.abs(out) > bound
    while bad.any():
        out[bad] = np.random.normal(0.0, 1.0, int(bad.sum()))
        bad = np.abs(out) > bound
    return out * std


def _to_numpy(t, dtype) -> np.ndarray:
    arr = t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)
    return arr.astype(dtype.as_numpy())


class Linear(Module):
    """``y = x @ weight (+ bias)``; weight ``(in, out)`` initialised
    truncated-normal(0, 0.02), bias zeros.

    Args:
        out_features: output size.
        bias: add a bias.
        replica_grouping: grouping of the variables.
    """

    def __init__(self, out_features: int, bias: bool = True,
                 replica_grouping: Optional[ReplicaGrouping] = None):
        super().__init__()
        if not isinstance(out_features, int) or out_features < 1:
            raise ValueError(f"Linear: out_features must be a positive int, got {out_features!r}")
        self.out_features = out_features
        self.bias = bias
        self.replica_grouping = replica_grouping

    def build(self, x: Tensor) -> Tensor:
        if len(x.shape) < 1:
            raise ValueError(f"Linear: input {x.id!r} must have at least one dimension")
        w = self.add_variable_input(
            "weight", partial(truncated_normal, (x.shape[-1], self.out_features)), x.dtype,
            replica_grouping=self.replica_grouping)
        y = x @ w
        if self.bias:
            b = self.add_variable_input("bias", partial(np.zeros, (self.out_features,)), x.dtype,
                                        replica_grouping=self.replica_grouping)
            y = y + b
        return y

    @staticmethod
    def torch_mapping(variables: NamedTensors, nn_layer, dtype=None) -> WeightsDict:
        """``{variable: data}`` copying a ``torch.nn.Linear`` (weight transposed)."""
        from ... import dtypes

        dtype = dtype or dtypes.float32
        d = {variables.weight: _to_numpy(nn_layer.weight.data, dtype).T.copy()}
        if "bias" in variables.keys():
            d[variables.bias] = _to_numpy(nn_layer.bias.data, dtype)
        return WeightsDict(d)
