"""``linear_layout`` (``popxl_addons.ops.linear_layout``): a copy of a
tensor mapped linearly over the tiles."""
from ...grad import register_grad
from ...op import create_op
from ...opdef import define_op
from ...ops.rules import like_input
from ...ops.utils import MOVABLE_DTYPES, check_in_graph
from ...tensor import Tensor

__all__ = ["linear_layout"]

# A copy (the Identity kernel) into a new tensor; the IPU model gives a
# copy's output a linear tile mapping (poputil::mapTensorLinearly).
define_op("LinearLayout", like_input(), kernel="Identity", cost="copy")


def linear_layout(t: Tensor, bs: int = 1) -> Tensor:
    """A copy of ``t`` laid out linearly over the tiles, each tile holding a
    multiple of ``bs`` elements (the grain). The values are ``t``'s."""
    check_in_graph("linear_layout", t=t)
    if t.dtype not in MOVABLE_DTYPES:
        raise TypeError(f"linear_layout: tensor {t.id!r} has unsupported dtype {t.dtype}")
    if not isinstance(bs, int) or isinstance(bs, bool) or bs < 1:
        raise ValueError(f"linear_layout: bs must be a positive int, got {bs!r}")
    return create_op("LinearLayout", [t], ["linear_layout"], {"batchsize": bs},
                     name="linear_layout").outputs[0]


@register_grad("LinearLayout")
def _linear_layout_grad(ctx):
    from ... import ops

    return [ops.identity(ctx.g())]
