"""Arithmetic binary ops with NumPy broadcasting: add, sub, mul, div and
their in-place forms (which write into, and return, the left operand)."""
from dataclasses import replace

from ..grad import register_grad
from ..context import get_current_graph
from ..op import create_op
from ..opdef import Cost, define_op
from ..tensor import Tensor
from .rules import broadcast, broadcast_into
from .utils import (NUMERIC_DTYPES, broadcast_shapes, check_dtype_in, check_in_graph,
                    check_same_dtype, same_tile_set, to_tensor)

__all__ = ["add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_"]


def _binary(kind: str, name: str, lhs, rhs) -> Tensor:
    if not isinstance(lhs, Tensor) and not isinstance(rhs, Tensor):
        raise TypeError(f"{name}: at least one operand must be a Tensor")
    lhs = to_tensor(lhs, like=rhs if isinstance(rhs, Tensor) else None, op=name)
    rhs = to_tensor(rhs, like=lhs, op=name)
    g = get_current_graph()
    # The checks' common case inline (both plain tensors of the current
    # graph, one dtype, a numeric one); the checks themselves name the rest.
    if not (type(lhs) is Tensor and lhs._graph is g and type(rhs) is Tensor and rhs._graph is g):
        check_in_graph(name, lhs=lhs, rhs=rhs)
    same_tile_set(name, lhs, rhs)
    if lhs._dtype is not rhs._dtype:
        check_same_dtype(name, lhs, rhs)
    if lhs._dtype not in NUMERIC_DTYPES:
        check_dtype_in(name, lhs, NUMERIC_DTYPES)
    broadcast_shapes(name, lhs, rhs)
    return create_op(kind, [lhs, rhs], [name], name=name).outputs[0]


def _binary_inplace(kind: str, name: str, lhs: Tensor, rhs) -> Tensor:
    if not isinstance(lhs, Tensor):
        raise TypeError(f"{name}: the left operand must be a Tensor, got {type(lhs).__name__}")
    rhs = to_tensor(rhs, like=lhs, op=name)
    check_in_graph(name, lhs=lhs, rhs=rhs)
    same_tile_set(name, lhs, rhs)
    check_same_dtype(name, lhs, rhs)
    check_dtype_in(name, lhs, NUMERIC_DTYPES)
    shape = broadcast_shapes(name, lhs, rhs)
    if shape != lhs.shape:
        raise ValueError(
            f"{name}: the result shape {shape} differs from the shape {lhs.shape} of the "
            f"in-place operand {lhs.id!r}; only the right operand may broadcast")
    return create_op(kind, [lhs, rhs], [name], name=name).outputs[0]


#: IPU-model cost of each op and its in-place variant: BinaryOp1D's figures
#: (shared/reference/ipu_model.md §3.1) for Div; the class defaults else.
_COST = {"Div": Cost("elementwise", vertex="Div", header=(29, 26), per_vector=(10, 21),
                     unroll=(2, 4))}


def _output_elements(op) -> int:
    """One FLOP per output element (popxl_addons' performance_utils count)."""
    n = 1
    for d in op.outputs[0].shape:
        n *= int(d)
    return n


for _t in ("Add", "Sub", "Mul", "Div"):
    # PopART's grad ops of Mul and Div read the forward output.
    define_op(_t, broadcast(), stash_outputs=_t in ("Mul", "Div"),
              cost=replace(_COST.get(_t, Cost("elementwise", vertex=_t)), flops=_output_elements))
    define_op(f"{_t}LhsInplace", broadcast_into(0), aliases=((0, 0),), modifies=(0,),
              no_grad="modifies its input (autodiff rejects modifying ops)",
              cost=_COST.get(_t, Cost("elementwise", vertex=_t)))


def add(lhs: Tensor, rhs: Tensor) -> Tensor:
    """``lhs + rhs`` with broadcasting."""
    return _binary("Add", "add", lhs, rhs)


def add_(lhs: Tensor, rhs: Tensor) -> Tensor:
    """``lhs += rhs`` in place; returns the updated ``lhs``."""
    return _binary_inplace("AddLhsInplace", "add_", lhs, rhs)


def sub(lhs: Tensor, rhs: Tensor) -> Tensor:
    """``lhs - rhs`` with broadcasting."""
    return _binary("Sub", "sub", lhs, rhs)


def sub_(lhs: Tensor, rhs: Tensor) -> Tensor:
    """``lhs -= rhs`` in place."""
    return _binary_inplace("SubLhsInplace", "sub_", lhs, rhs)


def mul(lhs: Tensor, rhs: Tensor) -> Tensor:
    """``lhs * rhs`` with broadcasting."""
    return _binary("Mul", "mul", lhs, rhs)


def mul_(lhs: Tensor, rhs: Tensor) -> Tensor:
    """``lhs *= rhs`` in place."""
    return _binary_inplace("MulLhsInplace", "mul_", lhs, rhs)


def div(lhs: Tensor, rhs: Tensor) -> Tensor:
    """``lhs / rhs`` with broadcasting (integer division truncates toward zero;
    division by zero of integers gives 0)."""
    return _binary("Div", "div", lhs, rhs)


def div_(lhs: Tensor, rhs: Tensor) -> Tensor:
    """``lhs /= rhs`` in place."""
    return _binary_inplace("DivLhsInplace", "div_", lhs, rhs)


# ---- gradient rules (d(lhs op rhs) / d lhs, d rhs), reduced to operand shapes

@register_grad("Add")
def _add_grad(ctx):
    g = ctx.g()
    return [ctx.unbroadcast(g, 0), ctx.unbroadcast(g, 1)]


@register_grad("Sub")
def _sub_grad(ctx):
    g = ctx.g()
    return [ctx.unbroadcast(g, 0), ctx.unbroadcast(-g, 1) if ctx.needs(1) else None]


@register_grad("Mul")
def _mul_grad(ctx):
    g = ctx.g()
    return [ctx.unbroadcast(g * ctx.x(1), 0) if ctx.needs(0) else None,
            ctx.unbroadcast(g * ctx.x(0), 1) if ctx.needs(1) else None]


@register_grad("Div")
def _div_grad(ctx):
    g = ctx.g()
    b = ctx.x(1)
    da = ctx.unbroadcast(g / b, 0) if ctx.needs(0) else None
    # d(a/b)/db = -y/b; this form cannot overflow where b*b would (float16).
    db = ctx.unbroadcast(-(g * ctx.y()) / b, 1) if ctx.needs(1) else None
    return [da, db]
