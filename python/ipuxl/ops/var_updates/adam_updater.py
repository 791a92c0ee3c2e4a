"""Updater terms for Adam, Lamb and AdaMax (out of place).

With bias correction (``time_step`` given) the op first increments
``time_step`` in place by one, then computes, with ``t`` the new step::

    mc = m / (1 - beta1^t)            (without correction: mc = m)
    vc = v / (1 - beta2^t)            (without correction, and AdaMax: vc = v)
    x  = mc / (sqrt(vc) + eps)        (AdaMax: mc / (vc + eps))
    x += weight_decay * w             (when weight decay is non-zero)

Lamb's updater term is Adam's; the Lamb trust ratio is applied by
``adam_var_update``. The result has the weight's dtype when a weight is
connected, else the first order momentum's; everything is computed in double.
"""
from typing import Optional, Union

from ...op import create_op
from ...opdef import Cost, define_op
from ...tensor import Tensor
from .utils import check_same_shape, check_update_tensors, handle_optimizer_value

__all__ = ["adam_updater", "lamb_updater", "adamax_updater"]

Value = Union[float, Tensor]


def _weight_decay_is_required(weight_decay) -> bool:
    if isinstance(weight_decay, Tensor):
        return True
    return weight_decay is not None and weight_decay != 0.0


def _create_updater(op: str, mode: str, m: Tensor, v: Tensor, weight: Optional[Tensor],
                    time_step: Optional[Tensor], weight_decay, beta1, beta2,
                    epsilon) -> Tensor:
    check_update_tensors(op, acc_first_order=m, acc_second_order=v, weight=weight,
                         time_step=time_step)
    check_same_shape(op, m, "acc_first_order", v, "acc_second_order")
    if weight is not None:
        check_same_shape(op, m, "acc_first_order", weight, "weight")
    if time_step is not None and time_step.nelms != 1:
        raise ValueError(f"{op}: time_step {time_step.id!r} must be a scalar tensor (one element), "
                         f"got shape {time_step.shape}")
    inputs = [weight, m, v, time_step]
    attrs = {"mode": mode}
    handle_optimizer_value(op, "weight_decay", weight_decay, inputs, attrs, "weight_decay")
    handle_optimizer_value(op, "beta1", beta1, inputs, attrs, "beta1")
    handle_optimizer_value(op, "beta2", beta2, inputs, attrs, "beta2")
    handle_optimizer_value(op, "epsilon", epsilon, inputs, attrs, "epsilon")
    while inputs[-1] is None:
        inputs.pop()
    hps = {n: t for n, t in (("weight_decay", weight_decay), ("beta1", beta1), ("beta2", beta2),
                             ("epsilon", epsilon)) if isinstance(t, Tensor)}
    check_update_tensors(op, acc_first_order=m, **hps)
    return create_op("AdamUpdater", inputs, ["Updater"], attrs, name=op).outputs[0]


def _updater_shape(ins, attrs, graphs=()):
    weight, m = ins[0], ins[1]
    return [(m.shape, weight.dtype if weight is not None else m.dtype)]


# It increments its time step (input 3) in place when it has one.
define_op("AdamUpdater", _updater_shape,
          modifies=lambda ins, attrs, graphs=(): (3,) if len(ins) > 3 and ins[3] is not None else (),
          no_grad="an optimizer update (it increments its time step in place)", cost=Cost("elementwise", header=(40, 40), per_vector=(24, 24), unroll=(2, 4)))


def _checked_weight(weight, weight_decay):
    if _weight_decay_is_required(weight_decay) and weight is None:
        raise ValueError("Weight decay requires weight to be not None.")
    # The weight is only an input when weight decay uses it (as in PopXL).
    return weight if _weight_decay_is_required(weight_decay) else None


def adam_updater(acc_first_order: Tensor, acc_second_order: Tensor,
                 weight: Optional[Tensor] = None, time_step: Optional[Tensor] = None,
                 weight_decay: Optional[Value] = None, beta1: Optional[Value] = None,
                 beta2: Optional[Value] = None, epsilon: Value = 1e-07) -> Tensor:
    """The Adam updater term (see the module docstring).

    Providing ``time_step`` enables bias correction and needs ``beta1`` and
    ``beta2``; ``time_step`` is incremented by one in place.

    Raises:
        ValueError: weight decay is set but ``weight`` is None, or
            ``time_step`` is given without both betas.
    """
    w = _checked_weight(weight, weight_decay)
    if time_step is not None and (beta1 is None or beta2 is None):
        raise ValueError("Bias correction requires both beta1 and beta2 not None.")
    if time_step is not None:
        return _create_updater("adam_updater", "adam", acc_first_order, acc_second_order, w,
                               time_step, weight_decay, beta1, beta2, epsilon)
    return _create_updater("adam_updater", "adam_no_bias", acc_first_order, acc_second_order, w,
                           None, weight_decay, beta1, beta2, epsilon)


def lamb_updater(acc_first_order: Tensor, acc_second_order: Tensor,
                 weight: Optional[Tensor] = None, time_step: Optional[Tensor] = None,
                 weight_decay: Optional[Value] = None, beta1: Optional[Value] = None,
                 beta2: Optional[Value] = None, epsilon: Value = 1e-07) -> Tensor:
    """The Lamb updater term: the same formula as ``adam_updater`` (the trust
    ratio is applied by ``adam_var_update``). Same arguments and errors."""
    w = _checked_weight(weight, weight_decay)
    if time_step is not None and (beta1 is None or beta2 is None):
        raise ValueError("Bias correction requires both beta1 and beta2 not None.")
    if time_step is not None:
        return _create_updater("lamb_updater", "lamb", acc_first_order, acc_second_order, w,
                               time_step, weight_decay, beta1, beta2, epsilon)
    return _create_updater("lamb_updater", "lamb_no_bias", acc_first_order, acc_second_order, w,
                           None, weight_decay, beta1, beta2, epsilon)


def adamax_updater(acc_first_order: Tensor, acc_second_order: Tensor,
                   weight: Optional[Tensor] = None, time_step: Tensor = None,
                   weight_decay: Optional[Value] = None, beta1: Value = 0.9,
                   epsilon: Value = 1e-07) -> Tensor:
    """The AdaMax updater term ``m / (1 - beta1^t) / (v + eps) [+ wd * w]``,
    where ``v`` is the infinity-norm accumulator. ``time_step`` is required
    and incremented by one in place.

    Raises:
        ValueError: weight decay is set but ``weight`` is None, or
            ``time_step`` is None.
    """
    w = _checked_weight(weight, weight_decay)
    if time_step is None:
        raise ValueError("AdaMax requires time_step not None.")
    if beta1 is None:
        raise ValueError("adamax_updater: beta1 must be a float or a scalar Tensor, got None")
    return _create_updater("adamax_updater", "adamax", acc_first_order, acc_second_order, w,
                           time_step, weight_decay, beta1, None, epsilon)
