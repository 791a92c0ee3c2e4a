"""Logical and comparison ops with NumPy broadcasting; every output is bool.

``logical_and``, ``logical_or`` and ``logical_not`` cast non-bool inputs to
bool first (``x != 0``), as PopXL does. ``equal`` and ``greater`` compare two
inputs of the same dtype (``equal`` also takes bool; NaN compares unequal and
not greater).
"""
from .. import dtypes
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor
from .cast import cast
from .rules import broadcast, like_input
from .utils import (ALL_DTYPES, NUMERIC_DTYPES, broadcast_shapes, check_dtype_in,
                    check_in_graph, check_same_dtype, check_tensor, same_tile_set, to_tensor)

__all__ = ["logical_and", "logical_or", "logical_not", "equal", "greater"]

for _t in ("And", "Or", "Equal", "Greater"):
    define_op(_t, broadcast(dtypes.bool), no_grad="boolean output", cost="elementwise")
define_op("Not", like_input(0, dtypes.bool), no_grad="boolean output", cost="elementwise")


def _operands(name: str, lhs, rhs, lhs_name: str = "lhs", rhs_name: str = "rhs"):
    check_tensor(name, lhs_name, lhs)
    rhs = to_tensor(rhs, like=lhs, op=name)
    check_in_graph(name, **{lhs_name: lhs, rhs_name: rhs})
    same_tile_set(name, lhs, rhs)
    return lhs, rhs


def _as_bool(name: str, t: Tensor) -> Tensor:
    check_dtype_in(name, t, ALL_DTYPES)
    return t if t.dtype == dtypes.bool else cast(t, dtypes.bool)


def _logical(kind: str, name: str, out_name: str, lhs, rhs) -> Tensor:
    lhs, rhs = _operands(name, lhs, rhs)
    lhs = _as_bool(name, lhs)
    rhs = _as_bool(name, rhs)
    broadcast_shapes(name, lhs, rhs)
    return create_op(kind, [lhs, rhs], [out_name], name=name).outputs[0]


def logical_and(lhs: Tensor, rhs: Tensor) -> Tensor:
    """Elementwise ``lhs AND rhs`` (inputs cast to bool if needed)."""
    return _logical("And", "logical_and", "and_out", lhs, rhs)


def logical_or(lhs: Tensor, rhs: Tensor) -> Tensor:
    """Elementwise ``lhs OR rhs`` (inputs cast to bool if needed)."""
    return _logical("Or", "logical_or", "or_out", lhs, rhs)


def logical_not(t: Tensor) -> Tensor:
    """Elementwise ``NOT t`` (input cast to bool if needed)."""
    check_in_graph("logical_not", t=t)
    t = _as_bool("logical_not", t)
    return create_op("Not", [t], ["not_out"], name="logical_not").outputs[0]


def equal(lhs: Tensor, rhs: Tensor) -> Tensor:
    """Elementwise ``lhs == rhs`` for two inputs of the same dtype (numeric or
    bool); a host value for ``rhs`` becomes a constant of ``lhs``'s dtype."""
    lhs, rhs = _operands("equal", lhs, rhs)
    check_same_dtype("equal", lhs, rhs)
    check_dtype_in("equal", lhs, ALL_DTYPES)
    broadcast_shapes("equal", lhs, rhs)
    return create_op("Equal", [lhs, rhs], ["equal_out"], name="equal").outputs[0]


def greater(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002 - PopXL name
    """Elementwise ``input > other`` for two inputs of the same numeric dtype;
    a host value for ``other`` becomes a constant of ``input``'s dtype."""
    input, other = _operands("greater", input, other, "input", "other")
    check_same_dtype("greater", input, other)
    check_dtype_in("greater", input, NUMERIC_DTYPES)
    broadcast_shapes("greater", input, other)
    return create_op("Greater", [input, other], ["greater_out"], name="greater").outputs[0]
