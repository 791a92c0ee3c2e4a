"""``Sum``: the elementwise sum of several same-shaped tensors. Autodiff uses
it to add partial gradients (PopART's ``GradSum`` ops); ``decompose_sum``
rewrites the ones with more than two inputs into chains of additions."""
from typing import Optional, Sequence

from ..grad import register_grad
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor
from .rules import like_input
from .utils import check_in_graph, check_same_dtype

__all__: list = []  # internal: not part of popxl.ops


def sum_n(tensors: Sequence[Tensor], name: Optional[str] = None, out_name: Optional[str] = None) -> Tensor:
    """``tensors[0] + tensors[1] + ...`` (same shapes and dtypes)."""
    tensors = list(tensors)
    if not tensors:
        raise ValueError("sum_n: needs at least one tensor")
    check_in_graph("sum_n", **{f"t{i}": t for i, t in enumerate(tensors)})
    check_same_dtype("sum_n", *tensors)
    shapes = {t.shape for t in tensors}
    if len(shapes) != 1:
        raise ValueError(f"sum_n: all inputs must have the same shape, got {sorted(shapes)}")
    op = create_op("Sum", tensors, [out_name or "sum"], name=name or "sum")
    return op.outputs[0]


define_op("Sum", like_input(0), cost="elementwise")


@register_grad("Sum")
def _sum_grad(ctx):
    return [ctx.g() for _ in ctx.op.inputs]
