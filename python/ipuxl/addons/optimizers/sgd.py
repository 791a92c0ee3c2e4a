"""``SGDOptimizerStep``: plain/momentum SGD for one variable (an ipuxl
extension; popxl_addons has no SGD module — its tutorials write
``ops.scaled_add_(var, grad, b=-lr)`` inline, which is what this does when
``momentum`` is 0)."""
from functools import partial
from typing import Union

import numpy as np

from ...context import in_sequence
from ...tensor import Tensor, TensorByRef, constant
from ..module import Module

__all__ = ["SGDOptimizerStep"]

Scalar = Union[float, Tensor]


class SGDOptimizerStep(Module):
    """``build(var, grad, *, lr, momentum=0.0, weight_decay=0.0)``: the
    ``torch.optim.SGD`` update (no dampening, no Nesterov), in place::

        g = grad + weight_decay * var
        buf = momentum * buf + g        (buf starts at g; skipped if momentum == 0)
        var -= lr * buf

    With momentum the buffer is a by-reference variable input
    ``momentum_buffer`` (first step copies ``g``: the state ``step`` counts
    calls)."""

    @in_sequence()
    def build(self, var: TensorByRef, grad: Tensor, *, lr: Scalar, momentum: float = 0.0,
              weight_decay: float = 0.0):
        from ... import ops

        if momentum < 0 or weight_decay < 0:
            raise ValueError(f"SGDOptimizerStep: momentum ({momentum}) and weight_decay "
                             f"({weight_decay}) must be non-negative")
        g = grad
        if weight_decay:
            g = g + var * weight_decay
        if momentum:
            buf = self.add_variable_input("momentum_buffer", partial(np.zeros, var.shape), var.dtype,
                                          by_ref=True)
            first = self.add_variable_input("step", partial(np.zeros, ()), var.dtype, by_ref=True)
            # torch: buf = g on the first step, momentum*buf + g afterwards;
            # momentum * min(step, 1) selects between the two without control flow.
            started = ops.clip(first, 0.0, 1.0)
            ops.var_updates.copy_var_update_(buf, buf * (started * momentum) + g)
            ops.var_updates.accumulate_(first, constant(1.0, var.dtype))
            g = buf
        ops.scaled_add_(var, g, b=-lr)
