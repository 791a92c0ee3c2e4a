"""``LayerNorm`` (``popxl_addons.layers.layer_norm``).

ipuxl has no ``ops.layer_norm`` yet, so the layer is composed from
``mean``/``sub``/``mul``/``sqrt``/``div`` (numerically the same: biased
variance, ``eps`` inside the square root), which autodiff differentiates
op by op."""
from functools import partial

import numpy as np

from ...tensor import Tensor
from ..module import Module
from ..named_tensors import NamedTensors
from ..utils import WeightsDict

__all__ = ["LayerNorm", "layer_norm"]


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the last axis."""
    from ... import ops

    mean = ops.mean(x, axis=-1, keepdims=True)
    xc = x - mean
    var = ops.mean(xc * xc, axis=-1, keepdims=True)
    return xc / ops.sqrt(var + eps) * weight + bias


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
