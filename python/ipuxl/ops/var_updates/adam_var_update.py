"""``adam_var_update``: apply an Adam/Lamb updater term to a weight."""
from typing import Optional, Union

from ...op import create_op
from ...opdef import Cost, define_op
from ..rules import like_input
from ...tensor import Tensor
from .utils import check_same_shape, check_update_tensors, handle_optimizer_value

__all__ = ["adam_var_update"]


def adam_var_update(t: Tensor, x: Tensor, r1: Tensor, r2: Tensor,
                    learning_rate: Optional[Union[float, Tensor]] = None,
                    max_weight_norm: Optional[Union[float, Tensor]] = None) -> Tensor:
    """Update the weight ``t`` in place with the updater term ``x``::

        ratio = 1                                  if r1 == 0 or r2 == 0
                                                   or max_weight_norm == 0
              = min(sqrt(r1), max_weight_norm) / sqrt(r2)   otherwise
        t -= learning_rate * ratio * x

    ``r1`` and ``r2`` are the squared L2 norms of the weight and of the
    updater (for Lamb; pass zeros for plain Adam). With ``max_weight_norm``
    None the trust ratio is ``sqrt(r1) / sqrt(r2)`` without clipping.

    Args:
        t: the weight, updated in place.
        x: the updater term (see ``adam_updater``), same shape as ``t``.
        r1, r2: scalar tensors, the squared norms.
        learning_rate: a float or a scalar Tensor. Required here: PopXL
            accepts None but cannot lower it.
        max_weight_norm: optional float or scalar Tensor.
    Returns:
        An alias of the updated ``t``.
    """
    op = "adam_var_update"
    check_update_tensors(op, t=t, x=x, r1=r1, r2=r2)
    check_same_shape(op, t, "t", x, "x")
    for name, r in (("r1", r1), ("r2", r2)):
        if r.nelms != 1:
            raise ValueError(f"{op}: {name} {r.id!r} must be a scalar tensor (one element), got "
                             f"shape {r.shape}")
    if learning_rate is None:
        raise ValueError(f"{op}: learning_rate is required (a float or a scalar Tensor)")
    inputs = [t, x, r1, r2]
    attrs = {"has_mwn": max_weight_norm is not None}
    handle_optimizer_value(op, "learning_rate", learning_rate, inputs, attrs, "lr")
    handle_optimizer_value(op, "max_weight_norm", max_weight_norm, inputs, attrs, "mwn")
    while inputs[-1] is None:
        inputs.pop()
    hps = {n: v for n, v in (("learning_rate", learning_rate),
                             ("max_weight_norm", max_weight_norm)) if isinstance(v, Tensor)}
    check_update_tensors(op, t=t, **hps)
    o = create_op("AdamVarUpdate", inputs, ["adam_var_update_out"], attrs, name=op)
    return o.outputs[0]


define_op("AdamVarUpdate", like_input(0), aliases=((0, 0),), modifies=(0,),
          no_grad="an optimizer update: modifies its input", cost=Cost("elementwise", header=(40, 40), per_vector=(24, 24), unroll=(2, 4)))
