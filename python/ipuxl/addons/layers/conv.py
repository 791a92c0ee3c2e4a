"""``Conv2D`` layer (``popxl_addons.layers.conv``)."""
from functools import partial
from typing import List, Optional, Tuple, Union

import numpy as np

from ...replica_grouping import ReplicaGrouping
from ...tensor import Tensor
from ..module import Module
from ..named_tensors import NamedTensors
from ..utils import WeightsDict
from .linear import _to_numpy, truncated_normal

__all__ = ["Conv2D"]


class Conv2D(Module):
    """2-D convolution of an ``(N, C, H, W)`` input (see ``ops.conv``):
    weight ``(out_channels, C / groups, kh, kw)`` initialised from a normal
    distribution truncated at two standard deviations (std 0.02), and
    optionally a zero bias of shape ``(1, out_channels, 1, 1)``.

    ``paddings`` is explicit padding ``(top, left, bottom, right)`` or a pad
    type (``"same_upper"``, ``"same_lower"``, ``"valid"``).
    """

    def __init__(self, out_channels: int, kernel_size: Union[Tuple[int, int], int],
                 strides: Optional[Tuple[int]] = (1, 1),
                 paddings: Optional[Union[str, Tuple[int]]] = (0, 0, 0, 0),
                 dilations: Optional[Tuple[int]] = (1, 1), groups: Optional[int] = 1,
                 bias: bool = True, available_memory_proportions: Optional[List[float]] = None,
                 partials_types: Optional[List[str]] = None,
                 enable_conv_dithering: Optional[List[int]] = None,
                 replica_grouping: Optional[ReplicaGrouping] = None):
        super().__init__()
        self.out_channels = out_channels
        if isinstance(kernel_size, tuple):
            self.k_h, self.k_w = kernel_size
        else:
            self.k_h = self.k_w = kernel_size
        self.strides = strides
        self.dilations = dilations
        self.groups = groups
        if isinstance(paddings, str):
            self.pad_type, self.paddings = paddings, (0, 0, 0, 0)
        else:
            self.pad_type, self.paddings = "not_set", paddings
        self.replica_grouping = replica_grouping
        self.bias = bias
        self.available_memory_proportions = available_memory_proportions
        self.partial_types = partials_types
        self.enable_conv_dithering = enable_conv_dithering

    def build(self, x: Tensor) -> Tensor:
        from ... import ops

        if len(x.shape) != 4:
            raise ValueError(f"Conv2D: input {x.id!r} must have shape (N, C, H, W), got {x.shape}")
        in_channels = x.shape[1]
        shape = (self.out_channels, in_channels // self.groups, self.k_h, self.k_w)
        self.weight = self.add_variable_input("weight", partial(truncated_normal, shape), x.dtype,
                                              replica_grouping=self.replica_grouping)
        y = ops.conv(x, self.weight, stride=self.strides, padding=self.paddings,
                     dilation=self.dilations, groups=self.groups, pad_type=self.pad_type,
                     available_memory_proportions=self.available_memory_proportions,
                     partials_types=self.partial_types,
                     enable_conv_dithering=self.enable_conv_dithering)
        if self.bias:
            bias_shape = [1] * len(y.shape)
            bias_shape[1] = self.out_channels
            self.bias = self.add_variable_input("bias", partial(np.zeros, bias_shape), x.dtype,
                                                replica_grouping=self.replica_grouping)
            y = y + self.bias
        return y

    @staticmethod
    def torch_mapping(variables: NamedTensors, nn_layer, dtype=None) -> WeightsDict:
        """``{variable: data}`` copying a ``torch.nn.Conv2d``."""
        from ... import dtypes

        dtype = dtype or dtypes.float32
        state = {variables.weight: _to_numpy(nn_layer.weight.data, dtype)}
        if "bias" in variables:
            state[variables.bias] = _to_numpy(
                nn_layer.bias.data.reshape(variables.bias.shape), dtype)
        return WeightsDict(state)
