"""``where``: elementwise selection with NumPy broadcasting over the
condition and both operands."""
from .. import dtypes
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor
from .rules import broadcast
from .cast import cast
from .utils import (ALL_DTYPES, broadcast_shapes, check_dtype_in, check_in_graph,
                    check_same_dtype, check_tensor, same_tile_set, to_tensor)

__all__ = ["where"]


def where(condition: Tensor, lhs: Tensor, rhs: Tensor) -> Tensor:
    """``lhs`` where ``condition`` is true, else ``rhs``, elementwise.

    The three inputs broadcast together (NumPy rules). A non-bool condition
    is cast to bool first (``x != 0``), as PopXL does. ``lhs`` and ``rhs``
    must have the same dtype, which the output has; one of them may be a host
    value, converted to a constant of the other's dtype.

    Raises:
        TypeError: a non-Tensor condition, both operands host values, or
            ``lhs``/``rhs`` of different dtypes.
        ValueError: shapes that do not broadcast, or tensors from another graph.
    """
    check_tensor("where", "condition", condition)
    if not isinstance(lhs, Tensor) and not isinstance(rhs, Tensor):
        raise TypeError("where: at least one of lhs and rhs must be a Tensor")
    lhs = to_tensor(lhs, like=rhs if isinstance(rhs, Tensor) else None, op="where")
    rhs = to_tensor(rhs, like=lhs, op="where")
    check_in_graph("where", condition=condition, lhs=lhs, rhs=rhs)
    same_tile_set("where", condition, lhs, rhs)
    check_dtype_in("where", condition, ALL_DTYPES)
    check_same_dtype("where", lhs, rhs)
    check_dtype_in("where", lhs, ALL_DTYPES)
    broadcast_shapes("where", condition, lhs, rhs)
    if condition.dtype != dtypes.bool:
        condition = cast(condition, dtypes.bool)
    return create_op("Where", [condition, lhs, rhs], ["where_out"], name="where").outputs[0]


define_op("Where", broadcast(dtype_of=1), cost="elementwise")


# ---- gradient rule
from ..grad import register_grad  # noqa: E402


@register_grad("Where", nondiff=(0,))
def _where_grad(ctx):
    """The output gradient goes to ``lhs`` where the condition holds and to
    ``rhs`` elsewhere (zeros in the other places), each summed down to its
    operand's shape. The condition gets none."""
    g = ctx.g()
    c = ctx.x(0)
    dl = ctx.unbroadcast(where(c, g, 0.0), 1) if ctx.needs(1) else None
    dr = ctx.unbroadcast(where(c, 0.0, g), 2) if ctx.needs(2) else None
    return [None, dl, dr]
