"""``copy_var_update_``: overwrite a tensor with another, in place."""
from ...op import create_op
from ...opdef import define_op
from ..rules import like_input
from ...tensor import Tensor
from ..utils import ALL_DTYPES, check_dtype_in, check_in_graph, check_tensor, same_tile_set
from .utils import check_same_shape

__all__ = ["copy_var_update_"]


def copy_var_update_(t: Tensor, X: Tensor) -> Tensor:
    """``t = X`` in place; returns an alias of the updated ``t``.

    ``X`` must have ``t``'s shape and dtype.
    """
    op = "copy_var_update_"
    check_tensor(op, "t", t)
    check_tensor(op, "X", X)
    check_in_graph(op, t=t, X=X)
    same_tile_set(op, t, X)
    check_dtype_in(op, t, ALL_DTYPES)
    if X.dtype != t.dtype:
        raise TypeError(f"{op}: X {X.id!r} has dtype {X.dtype.name} but t {t.id!r} has dtype "
                        f"{t.dtype.name}; they must be equal")
    check_same_shape(op, t, "t", X, "X")
    o = create_op("CopyVarUpdate", [t, X], ["updated__" + t.name], name=op)
    return o.outputs[0]


define_op("CopyVarUpdate", like_input(0), aliases=((0, 0),), modifies=(0,),
          no_grad="an optimizer update: modifies its input", cost="elementwise")
