"""``LayerNorm`` (``popxl_addons.layers.layer_norm``), on ``ops.layer_norm``."""
from functools import partial

import numpy as np

from ...tensor import Tensor
from ..module import Module
from ..named_tensors import NamedTensors
from ..utils import WeightsDict

__all__ = ["LayerNorm", "layer_norm"]


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last axis of
    ``x`` (any rank >= 1; leading axes are flattened for ``ops.layer_norm``,
    whose fused kernel and gradient do the work)."""
    from ... import ops

    if x.rank == 2:
        return ops.layer_norm(x, weight, bias, eps=eps)
    flat = ops.reshape(x, (-1, x.shape[-1]))
    return ops.reshape(ops.layer_norm(flat, weight, bias, eps=eps), x.shape)


class LayerNorm(Module):
    """Layer normalisation of a 2-D ``(N, C)`` input (flatten extra
    dimensions first); weight ones, bias zeros, both of shape ``(C,)``."""

    def build(self, x: Tensor, eps: float = 1e-5) -> Tensor:
        if len(x.shape) != 2:
            raise ValueError(f"LayerNorm: input {x.id!r} must be of shape (N, C), got {x.shape}. "
                             "Flatten the extra dimensions.")
        w = self.add_variable_input("weight", partial(np.ones, x.shape[-1]), x.dtype)
        b = self.add_variable_input("bias", partial(np.zeros, x.shape[-1]), x.dtype)
        return layer_norm(x, w, b, eps)

    @staticmethod
    def torch_mapping(variables: NamedTensors, nn_layer, dtype=None) -> WeightsDict:
        """``{variable: data}`` copying a ``torch.nn.LayerNorm``."""
        from ... import dtypes

        dtype = dtype or dtypes.float32
        w = nn_layer.weight.data.reshape(variables.weight.shape)
        b = nn_layer.bias.data.reshape(variables.bias.shape)
        return WeightsDict({variables.weight: w.detach().cpu().numpy().astype(dtype.as_numpy()),
                            variables.bias: b.detach().cpu().numpy().astype(dtype.as_numpy())})
