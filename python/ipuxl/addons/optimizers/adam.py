"""``AdamOptimizerStep`` (``popxl_addons.optimizers.adam``): one Adam/AdamW
update of one variable, as an addons Module holding the optimiser state."""
from functools import partial
from typing import Optional, Union

import numpy as np

from ... import dtypes
from ...context import gcg, in_sequence
from ...replica_grouping import ReplicaGrouping
from ...tensor import Tensor, TensorByRef, constant
from ..module import Module

__all__ = ["AdamOptimizerStep"]

Scalar = Union[float, Tensor]


class AdamOptimizerStep(Module):
    """``build(var, grad, replica_grouping=None, *, lr, beta1=0.9,
    beta2=0.999, eps=1e-5, weight_decay=1e-2, first_order_dtype=float16,
    bias_correction=True, loss_scaling=1, global_norm=None,
    global_norm_max=None)`` updates ``var`` (by reference) in place.

    State (by-reference variable inputs): ``first_order``
    (``first_order_dtype``), ``second_order`` (float32) and, with
    ``bias_correction``, ``step`` (float32 scalar). The gradient is first
    divided by ``loss_scaling`` and clipped by global norm when
    ``global_norm``/``global_norm_max`` are given. ``weight_decay`` is
    decoupled (AdamW): ``var -= lr * (m̂ / (sqrt(v̂) + eps) + wd * var)``.
    """

    @in_sequence()
    def build(self, var: TensorByRef, grad: Tensor, replica_grouping: Optional[ReplicaGrouping] = None,
              *, lr: Scalar, beta1: Scalar = 0.9, beta2: Scalar = 0.999, eps: Scalar = 1e-5,
              weight_decay: Scalar = 1e-2, first_order_dtype: dtypes.dtype = dtypes.float16,
              bias_correction: bool = True, loss_scaling: Scalar = 1,
              global_norm: Optional[Tensor] = None, global_norm_max: Optional[Scalar] = None):
        from ... import ops

        scale = 1
        if isinstance(loss_scaling, Tensor) or loss_scaling != 1:
            scale = 1 / loss_scaling if not isinstance(loss_scaling, Tensor) else \
                constant(1.0, dtypes.float32) / loss_scaling
        if global_norm is not None:
            if global_norm_max is None:
                raise ValueError("AdamOptimizerStep: global_norm_max must be given with global_norm")
            if not isinstance(global_norm_max, Tensor):
                global_norm_max = constant(global_norm_max, dtypes.float32)
            scale = (scale * global_norm_max) / ops.maximum(global_norm, global_norm_max)
        if isinstance(scale, Tensor) or scale != 1:
            grad = ops.cast(grad, dtypes.float32) * scale
        rg = replica_grouping or gcg().ir.replica_grouping()

        def state(name, dtype):
            if var.meta_shape:
                return self.add_replica_sharded_variable_input(
                    name, partial(np.zeros, var.meta_shape), dtype, replica_grouping=rg, by_ref=True)
            return self.add_variable_input(name, partial(np.zeros, var.shape), dtype,
                                           replica_grouping=rg, by_ref=True)

        first_order = state("first_order", first_order_dtype)
        ops.var_updates.accumulate_moving_average_(first_order, grad, f=beta1)
        second_order = state("second_order", dtypes.float32)
        ops.var_updates.accumulate_moving_average_square_(second_order, grad, f=beta2)
        step = None
        if bias_correction:
            step = self.add_variable_input("step", partial(np.zeros, ()), dtypes.float32, by_ref=True)
        updater = ops.var_updates.adam_updater(first_order, second_order, weight=var,
                                               weight_decay=weight_decay, time_step=step,
                                               beta1=beta1, beta2=beta2, epsilon=eps)
        ops.scaled_add_(var, updater, b=-lr)
