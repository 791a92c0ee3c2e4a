"""Checks shared by the variable-update builders.

Hyper-parameters (factors, learning rates, betas, ...) are either a Python
number, which becomes a kernel attribute, or a scalar Tensor, which becomes
an extra op input (PopART's "non-const optimizer value").
"""
import numbers
from typing import Any, Dict, List, Optional, Union

from ...tensor import Tensor
from ..utils import NUMERIC_DTYPES, check_dtype_in, check_in_graph, check_tensor, same_tile_set

__all__ = ["check_update_tensors", "handle_optimizer_value", "check_same_shape"]

OptValue = Union[None, float, Tensor]


def check_update_tensors(op: str, **tensors: Optional[Tensor]) -> None:
    """Each given tensor is a Tensor of a numeric dtype in the current graph,
    and all of them are on the same tile set."""
    present = {k: v for k, v in tensors.items() if v is not None}
    for name, t in present.items():
        check_tensor(op, name, t)
    check_in_graph(op, **present)
    same_tile_set(op, *present.values())
    for name, t in present.items():
        check_dtype_in(op, t, NUMERIC_DTYPES, f"{name} must have")


def check_same_shape(op: str, t: Tensor, t_name: str, x: Tensor, x_name: str) -> None:
    if t.shape != x.shape:
        raise ValueError(
            f"{op}: {x_name} {x.id!r} has shape {x.shape} but {t_name} {t.id!r} has shape "
            f"{t.shape}; they must be equal (this op does not broadcast)")


def handle_optimizer_value(op: str, name: str, value: Any, inputs: List[Optional[Tensor]],
                           attrs: Dict[str, Any], attr: str) -> None:
    """Append ``value`` to ``inputs`` (a scalar Tensor) or store it in
    ``attrs[attr]`` (a number, appending None). None appends None and sets
    nothing, leaving the kernel's default."""
    if isinstance(value, Tensor):
        check_update_tensors(op, **{name: value})
        if value.nelms != 1:
            raise ValueError(f"{op}: {name} {value.id!r} must be a scalar tensor (one element), "
                             f"got shape {value.shape}")
        inputs.append(value)
        return
    inputs.append(None)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{op}: {name} must be a float or a scalar Tensor, got "
                        f"{type(value).__name__} {value!r}")
    attrs[attr] = float(value)
