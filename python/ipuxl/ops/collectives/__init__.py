"""Collective ops, mirroring ``popxl.ops.collectives``.

Across replicas (one program over ``ir.replication_factor`` replica states,
see :mod:`ipuxl.session`), each op works within the groups of a
:class:`~ipuxl.ReplicaGrouping` (default: one group of all replicas); the
members of a group, in ascending replica order, have ranks 0, 1, ...:

* ``replicated_all_reduce(t, op, group)``: every member gets the reduction
  of the members' ``t`` (``replicated_all_reduce_`` in place).
* ``replicated_all_gather(t, axis, group, output_shape)``: the members'
  ``t`` concatenated in rank order (``"concat"`` on ``axis``, ``"new_axis"``
  stacked, ``"meta_shape"`` the flat shards put back into ``t.meta_shape``).
* ``replicated_reduce_scatter(t, op, group, ...)``: the reduction, flattened,
  zero-padded to a multiple of the group size and cut into equal shards;
  rank ``k`` gets shard ``k`` (1-D, ``ceil(nelms / group_size)``).
* ``replica_sharded_slice(t, group)``: rank ``k``'s shard of its own ``t``
  (no reduction), with ``meta_shape`` ``t.shape``; ``replicated_slice(t,
  axis, group)``: rank ``k``'s equal slice of ``t`` along ``axis``.
* ``all_reduce`` and its ``identical_inputs`` / ``identical_grad_inputs``
  variants reduce a list of tensors across the IPUs of one replica.

Reductions (``op``): ``"add"``, ``"mean"``, ``"mul"`` (the product:
PopXL's own table maps ``"mul"`` to ``Mean``, a bug ipuxl does not copy),
``"min"``, ``"max"``, ``"and"``, ``"or"`` (results 0/1 in ``t``'s dtype) and
``"square_add"`` (the sum of squares). Floating-point reductions accumulate
in double and round once, so results do not depend on replica order.

Gradients follow PopART: an all-gather's gradient is a ``Local``
reduce-scatter (the rank's own slice of the gradient), a ``Local``
reduce-scatter's (``replica_sharded_slice``, ``replicated_slice``) is an
all-gather, and ``all_reduce``'s (``add`` only) is an all-reduce of the
gradients (an identity for ``all_reduce_identical_grad_inputs``, and the
all-reduce for ``all_reduce_identical_inputs``). Beyond PopART, which has
none, ``replicated_all_reduce`` with ``"add"`` or ``"mean"`` and
``replicated_reduce_scatter`` with ``"add"`` or ``"mean"`` differentiate to
the same collective of the gradients (their adjoints, the derivative of
the sum of every replica's loss); other reductions raise at autodiff.
"""
from typing import List, Optional

from ... import dtypes
from ..._core_loader import core
from ...context import get_current_context, get_current_graph
from ...errors import UndefinedValue
from ...grad import register_grad
from ...op import create_op
from ...opdef import define_op
from ...tensor import Tensor
from ..utils import MOVABLE_DTYPES, NUMERIC_DTYPES, check_dtype_in, check_in_graph

__all__ = [
    "replicated_all_reduce", "replicated_all_reduce_", "replicated_all_gather",
    "replicated_reduce_scatter", "replica_sharded_slice", "replicated_slice", "all_reduce",
    "all_reduce_identical_inputs", "all_reduce_identical_grad_inputs",
]

#: PopXL's reduction names and the core's ReduceOp codes (its own table).
OP_MAP = {n: int(v) for n, v in core.ReduceOp.__members__.items() if n != "local"}
_LOCAL = int(core.ReduceOp.__members__["local"])
_OP_NAMES = {int(v): n for n, v in core.ReduceOp.__members__.items()}
#: The core's CollectiveKind codes.
_ALL_REDUCE, _ALL_GATHER, _REDUCE_SCATTER = (
    int(core.CollectiveKind.__members__[n]) for n in ("all_reduce", "all_gather", "reduce_scatter"))


def to_collective_op(op) -> int:
    """The code of reduction ``op``; ``ValueError`` for an unknown name (as PopXL)."""
    try:
        return OP_MAP[op]
    except (KeyError, TypeError):
        raise ValueError(f"Not a valid op: {op}. Must choose from: {', '.join(OP_MAP)}") from None


def _grouping(what: str, group):
    """``group`` (default: all replicas in one group), checked: a grouping of
    this Ir with a constant stride."""
    from ...replica_grouping import ReplicaGrouping

    ir = get_current_graph().ir
    if group is None:
        return ir.replica_grouping()
    if not isinstance(group, ReplicaGrouping):
        raise TypeError(f"{what}: group must be a popxl.ReplicaGrouping (ir.replica_grouping(...)), "
                        f"got {type(group).__name__}")
    if group._ir is not ir:
        raise ValueError(f"{what}: the replica grouping belongs to another Ir ({group._ir.id}) "
                         f"than the current graph ({ir.id})")
    if not group.is_const:
        raise NotImplementedError(
            f"{what}: this ReplicaGrouping ({group.assignment}) has a non-constant stride and has "
            "no PopART C++ representation. You can't use this ReplicaGrouping with GCL ops.")
    if group._num_replicas != ir.replication_factor:
        raise ValueError(f"{what}: the replica grouping covers {group._num_replicas} replicas, the "
                         f"Ir has replication_factor={ir.replication_factor}")
    return group


def _collective(op_type: str, t: Tensor, kind: int, red: int, group, out_name: str,
                attrs: Optional[dict] = None, name: Optional[str] = None) -> Tensor:
    a = {"_collective": (kind, red, tuple(group.assignment)), "_group_size": group.group_size,
         "_grouping": group}
    a.update(attrs or {})
    return create_op(op_type, [t], [out_name], a, name=name or op_type[0].lower() + op_type[1:]
                     ).outputs[0]


# ---------------------------------------------------------------- shape rules
def _like_input(ins, attrs, graphs=()):
    return [(ins[0].shape, ins[0].dtype)]


def _gather_shape(ins, attrs, graphs=()):
    shape = tuple(attrs["_out_shape"])
    n, g = ins[0].nelms, attrs["_group_size"]
    m = 1
    for d in shape:
        m *= d
    # A meta shape may drop the zero padding of the shards (PopART takes the
    # output's shape as given: the first elements of the gather).
    if m > n * g or (not attrs.get("_meta") and m != n * g):
        raise ValueError(f"the output shape {shape} ({m} elements) does not hold the gather of "
                         f"{g} replicas' {n} elements")
    return [(shape, ins[0].dtype)]


def _scatter_shape(ins, attrs, graphs=()):
    g = attrs["_group_size"]
    return [((-(-ins[0].nelms // g),), ins[0].dtype)]


define_op("ReplicatedAllReduce", _like_input, kind="collective")
define_op("ReplicatedAllReduceInplace", _like_input, kind="collective", aliases=((0, 0),),
          modifies=(0,))
define_op("ReplicatedAllGather", _gather_shape, kind="collective")
define_op("ReplicatedReduceScatter", _scatter_shape, kind="collective")


# ---------------------------------------------------------------- builders
def _check_reduce_dtype(what: str, t: Tensor) -> None:
    check_dtype_in(what, t, NUMERIC_DTYPES)


def replicated_all_reduce(t: Tensor, op: str = "add", group=None) -> Tensor:
    """Reduce ``t`` across the replicas of each group of ``group`` (default:
    all replicas); every member gets the result.

    Args:
        t: the tensor to reduce.
        op: ``"add"``, ``"mean"``, ``"mul"``, ``"min"``, ``"max"``, ``"and"``,
            ``"or"`` or ``"square_add"``.
        group: a constant-stride ``ReplicaGrouping``.
    """
    code = to_collective_op(op)
    check_in_graph("replicated_all_reduce", t=t)
    _check_reduce_dtype("replicated_all_reduce", t)
    group = _grouping("replicated_all_reduce", group)
    return _collective("ReplicatedAllReduce", t, _ALL_REDUCE, code, group,
                       t.name + "_all_reduce", name="replicated_all_reduce")


def replicated_all_reduce_(t: Tensor, op: str = "add", group=None) -> Tensor:
    """:func:`replicated_all_reduce` in place on ``t``."""
    code = to_collective_op(op)
    check_in_graph("replicated_all_reduce_", t=t)
    _check_reduce_dtype("replicated_all_reduce_", t)
    group = _grouping("replicated_all_reduce_", group)
    return _collective("ReplicatedAllReduceInplace", t, _ALL_REDUCE, code, group,
                       t.name + "_all_reduce", name="replicated_all_reduce_inplace")


def _rearrange_input(t: Tensor, axis: int):
    """``t`` with ``axis`` moved first, flattened; and the moved shape."""
    if axis > 0:
        perm = list(range(t.rank))
        perm.pop(axis)
        perm.insert(0, axis)
        t = t.transpose(perm)
    pre = list(t.shape)
    return t.flatten(), pre


def _rearrange_output(y: Tensor, shape, axis: int) -> Tensor:
    y = y.reshape(tuple(shape))
    if axis > 0:
        perm = list(range(y.rank))
        perm.pop(0)
        perm.insert(axis, 0)
        y = y.transpose(perm)
    return y


def replicated_all_gather(t: Tensor, axis: int = 0, group=None,
                          output_shape: str = "auto") -> Tensor:
    """Gather ``t`` from the replicas of each group, in rank order.

    ``output_shape``: ``"new_axis"`` gives ``(group_size, *t.shape)``;
    ``"concat"`` concatenates on ``axis``; ``"meta_shape"`` gives
    ``t.meta_shape`` (the flat shards put together, padding dropped);
    ``"auto"`` is ``"meta_shape"`` when ``t`` has one, else ``"concat"``.

    Raises:
        ValueError: if ``output_shape`` is not one of these.
    """
    what = "replicated_all_gather"
    check_in_graph(what, t=t)
    check_dtype_in(what, t, MOVABLE_DTYPES)
    group = _grouping(what, group)
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise ValueError(f"Axis should be an int. Type: {type(axis)}. Value: {axis}")
    if output_shape == "auto":
        output_shape = "meta_shape" if t.meta_shape else "concat"
    if output_shape not in ("new_axis", "concat", "meta_shape"):
        raise ValueError("output_shape must equal one of 'new_axis', 'concat', 'meta_shape', "
                         f"'auto'. Value: {output_shape}")
    if output_shape == "meta_shape":
        if not t.meta_shape:
            raise ValueError(f"{what}: output_shape='meta_shape' but tensor {t.id!r} has no "
                             "meta_shape")
        return _collective("ReplicatedAllGather", t, _ALL_GATHER, 0, group,
                           t.name + "_all_gathered",
                           {"_out_shape": tuple(t.meta_shape), "_meta": True},
                           name="replicated_all_gather")
    if t.rank == 0 and output_shape == "concat":
        raise ValueError(f"{what}: cannot concatenate scalar tensor {t.id!r} on axis {axis}; "
                         "use output_shape='new_axis'")
    if t.rank:
        if not -t.rank <= axis < t.rank:
            raise ValueError(f"{what}: axis {axis} is out of range for tensor {t.id!r} of rank "
                             f"{t.rank}")
        axis %= t.rank
    else:
        axis = 0
    flat, concat_shape = _rearrange_input(t, axis)
    if output_shape == "new_axis":
        new_shape = (group.group_size,) + tuple(t.shape)
    else:
        concat_shape[0] *= group.group_size
        new_shape = tuple(concat_shape)
    out = _collective("ReplicatedAllGather", flat, _ALL_GATHER, 0, group,
                      flat.name + "_all_gathered", {"_out_shape": new_shape},
                      name="replicated_all_gather")
    if output_shape == "new_axis":
        return out
    return _rearrange_output(out, new_shape, axis)


def _reduce_scatter(what: str, t: Tensor, code: int, group, rts: bool, suffix: str) -> Tensor:
    check_in_graph(what, t=t)
    check_dtype_in(what, t, NUMERIC_DTYPES if code != _LOCAL else MOVABLE_DTYPES)
    group = _grouping(what, group)
    out = _collective("ReplicatedReduceScatter", t, _REDUCE_SCATTER, code, group,
                      t.name + suffix, {"_rts": bool(rts)}, name="replicated_reduce_scatter")
    if rts:
        out._meta_shape = tuple(t.shape)
    return out


def replicated_reduce_scatter(t: Tensor, op: str = "add", group=None,
                              configure_output_for_replicated_tensor_sharding: bool = False
                              ) -> Tensor:
    """Reduce ``t`` across the replicas of each group; rank ``k`` gets shard
    ``k`` of the flattened, zero-padded result (1-D, ``ceil(nelms /
    group_size)`` elements). With
    ``configure_output_for_replicated_tensor_sharding`` the output's
    ``meta_shape`` is ``t.shape``."""
    code = to_collective_op(op)
    return _reduce_scatter("replicated_reduce_scatter", t, code, group,
                           configure_output_for_replicated_tensor_sharding, "_reduce_scattered")


def replica_sharded_slice(t: Tensor, group=None) -> Tensor:
    """Rank ``k``'s shard of ``t`` (flattened, zero-padded, ``ceil(nelms /
    group_size)`` elements), with ``meta_shape`` ``t.shape``."""
    return _reduce_scatter("replica_sharded_slice", t, _LOCAL, group, True, "_sharded_slice")


def replicated_slice(t: Tensor, axis: int = 0, group=None) -> Tensor:
    """Each rank ``k`` of a group takes the ``k``-th of ``group_size`` equal
    slices of ``t`` along ``axis`` (the axis is kept unless the slices have
    size 1, as PopXL).

    Raises:
        ValueError: if the group size does not divide the axis.
    """
    what = "replicated_slice"
    check_in_graph(what, t=t)
    group = _grouping(what, group)
    if not isinstance(axis, int) or isinstance(axis, bool) or not -t.rank <= axis < t.rank:
        raise ValueError(f"{what}: axis {axis!r} is out of range for tensor {t.id!r} of rank "
                         f"{t.rank}")
    axis %= t.rank
    if t.shape[axis] % group.group_size != 0:
        raise ValueError("Replicated slice must equally divide axis. "
                         f"Axis size: {t.shape[axis]}. Replica group size: {group.group_size}")
    flat, new_shape = _rearrange_input(t, axis)
    if t.shape[axis] // group.group_size == 1:
        new_shape.pop(0)
        if axis > 0:  # the axis is gone: nothing to move back
            out = _reduce_scatter(what, flat, _LOCAL, group, False, "_replicated_slice")
            out = out.reshape(tuple(new_shape))
            return out
    else:
        new_shape[0] //= group.group_size
    out = _reduce_scatter(what, flat, _LOCAL, group, False, "_replicated_slice")
    return _rearrange_output(out, new_shape, axis)


# ---------------------------------------------------------------- gradients
def _grad_all_reduce(ctx):
    code = ctx.op.attrs["_collective"][1]
    if code not in (OP_MAP["add"], OP_MAP["mean"]):
        raise NotImplementedError(
            f"{ctx.op.type} op {ctx.op.name!r}: no gradient for the {_OP_NAMES[code]!r} "
            "reduction (only 'add' and 'mean' are differentiable)")
    return [replicated_all_reduce(ctx.g_or_zeros(), _OP_NAMES[code], ctx.op.attrs["_grouping"])]


register_grad("ReplicatedAllReduce")(_grad_all_reduce)
register_grad("ReplicatedAllReduceInplace")(_grad_all_reduce)


@register_grad("ReplicatedAllGather")
def _grad_all_gather(ctx):
    """PopART's rule: a Local reduce-scatter (each rank's own slice of the
    gradient), reshaped to the input's shape."""
    x = ctx.op.inputs[0]
    g = _reduce_scatter("replicated_all_gather grad", ctx.g_or_zeros(), _LOCAL, ctx.op.attrs["_grouping"],
                        False, "_sharded_slice")
    return [g if g.shape == x.shape else g.reshape(x.shape)]


@register_grad("ReplicatedReduceScatter")
def _grad_reduce_scatter(ctx):
    """PopART's rule for Local (an all-gather of the gradient); the adjoint
    for add (the same) and mean (divided by the group size)."""
    code = ctx.op.attrs["_collective"][1]
    if code not in (_LOCAL, OP_MAP["add"], OP_MAP["mean"]):
        raise NotImplementedError(
            f"ReplicatedReduceScatter op {ctx.op.name!r}: no gradient for the "
            f"{_OP_NAMES[code]!r} reduction (only local, 'add' and 'mean')")
    x = ctx.op.inputs[0]
    group = ctx.op.attrs["_grouping"]
    g = _collective("ReplicatedAllGather", ctx.g_or_zeros(), _ALL_GATHER, 0, group,
                    "replicated_reduce_scatter_grad",
                    {"_out_shape": tuple(x.shape), "_meta": True},
                    name="replicated_all_gather")
    if code == OP_MAP["mean"]:
        g = g * (1.0 / group.group_size)
    return [g]


# ---------------------------------------------------------------- across IPUs
def _all_reduce_shape(ins, attrs, graphs=()):
    shapes = {(t.shape, t.dtype) for t in ins}
    if len(shapes) != 1:
        raise ValueError("all inputs must have the same shape and dtype, got "
                         f"{[(t.shape, t.dtype.name) for t in ins]}")
    return [(ins[0].shape, ins[0].dtype)] * len(ins)


define_op("AllReduce", _all_reduce_shape, cost="collective")


def _all_reduce(what: str, ts: List[Tensor], ipus: Optional[List[int]], op: str,
                identical_inputs: bool = False, identical_grad_inputs: bool = False
                ) -> List[Tensor]:
    code = to_collective_op(op)
    ts = list(ts)
    if not ts:
        raise ValueError(f"{what}: needs at least one tensor")
    check_in_graph(what, **{f"t{i}": t for i, t in enumerate(ts)})
    for t in ts:
        check_dtype_in(what, t, NUMERIC_DTYPES)
    if ipus is None:
        try:
            ipus = [t.ipu for t in ts]
        except UndefinedValue as e:
            raise ValueError(
                "Could not automatically infer the IPU of all input Tensors `ts`. "
                "Please specify the IPUs via the `ipus` parameter.") from e
    ipus = list(ipus)
    if len(ts) != len(ipus):
        raise ValueError("Number of specified tensor does not equal number of specified IPUs. "
                         f"{len(ts)} != {len(ipus)}")
    attrs = {"op": code, "identical_inputs": int(bool(identical_inputs)),
             "_identical_grad_inputs": bool(identical_grad_inputs), "_ipus": tuple(ipus),
             "_op_name": op}
    op_ = create_op("AllReduce", ts, [f"all_reduce_out_{i}" for i in range(len(ts))], attrs,
                    name="all_reduce")
    return list(op_.outputs)


def all_reduce(ts: List[Tensor], ipus: Optional[List[int]] = None, op: str = "add"
               ) -> List[Tensor]:
    """Reduce tensors across the IPUs of one replica: every output is the
    reduction of all of ``ts`` (autodiff: ``add`` only)."""
    return _all_reduce("all_reduce", ts, ipus, op)


def all_reduce_identical_inputs(ts: List[Tensor], ipus: Optional[List[int]] = None,
                                op: str = "add") -> List[Tensor]:
    """An all-reduce whose inputs are identical: the forward is an identity,
    the gradient an all-reduce."""
    return _all_reduce("all_reduce_identical_inputs", ts, ipus, op, identical_inputs=True)


def all_reduce_identical_grad_inputs(ts: List[Tensor], ipus: Optional[List[int]] = None,
                                     op: str = "add") -> List[Tensor]:
    """An all-reduce whose gradients are identical: the forward reduces, the
    gradient is an identity."""
    return _all_reduce("all_reduce_identical_grad_inputs", ts, ipus, op,
                       identical_grad_inputs=True)


@register_grad("AllReduce")
def _grad_all_reduce_ipus(ctx):
    a = ctx.op.attrs
    if a["op"] != OP_MAP["add"]:
        raise NotImplementedError(
            f"AllReduce op {ctx.op.name!r}: cannot create its gradient: 'add' is the only "
            f"reduction autodiff supports, got {a['_op_name']!r}")
    grads = [ctx.g_or_zeros(i) for i in range(len(ctx.op.outputs))]
    # PopART swaps the two flags: identical grads -> identity.
    return _all_reduce("all_reduce grad", grads, list(a["_ipus"]), "add",
                       identical_inputs=a["_identical_grad_inputs"],
                       identical_grad_inputs=bool(a["identical_inputs"]))
