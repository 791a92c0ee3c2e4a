"""``ipu_copy``: a copy of a tensor from one IPU of a replica to another.

As in PopXL, ``ipu_copy(t, destination, source=None)`` makes an ``IpuCopy``
op: its output lives on IPU ``destination``; the source IPU is ``source``
or, when not given, the IPU PopART infers for ``t`` (its producer's, an
``IpuCopy``'s destination, a graph input's call site, or the IPU of the ops
that consume it). A tensor whose IPU cannot be inferred needs ``source``.

The lowering makes it a ``Copy`` between IPUs in the program
(``describe()`` shows ``[ipu a -> ipu b]``); the IPU model charges it a
global exchange over the IPU-Links. Its gradient is the copy back.
"""
from typing import Optional

from ..context import get_current_context
from ..grad import register_grad
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor
from .utils import check_in_graph

__all__ = ["ipu_copy"]


def _ipu_copy_shape(ins, attrs, graphs=()):
    return [(ins[0].shape, ins[0].dtype)]


define_op("IpuCopy", _ipu_copy_shape, kind="ipu_copy")


def _check_ipu(what: str, v) -> int:
    if isinstance(v, bool) or not hasattr(v, "__index__") or int(v) < 0:
        raise ValueError(f"ipu_copy: {what} must be a non-negative int (an IPU of the replica), "
                         f"got {v!r}")
    return int(v)


def ipu_copy(t: Tensor, destination: int, source: Optional[int] = None) -> Tensor:
    """Copy a tensor to an IPU.

    Args:
        t: the tensor to copy.
        destination: the IPU to copy it to.
        source: the IPU to copy it from; by default the IPU of the op that
            produces ``t`` (as PopART infers it). A tensor without one (a
            variable nothing reads yet) needs ``source``.

    Raises:
        ValueError: the source IPU could not be inferred and is not given.

    Returns:
        The copy, on IPU ``destination``.
    """
    check_in_graph("ipu_copy", t=t)
    destination = _check_ipu("destination", destination)
    if source is None:
        source = t._virtual_graph_id()
        if source == -1:
            raise ValueError(
                f'Could not infer the ipu for Tensor to be copied "{t}" . '
                "Please specify `source` when copying for this tensor.")
    source = _check_ipu("source", source)
    ctx = get_current_context()
    saved = ctx._ipu_id
    ctx._ipu_id = source  # the op runs on the source IPU; its output is on the destination
    try:
        op = create_op("IpuCopy", [t], [t.name + f"_c{destination}"],
                       {"_source": source, "_destination": destination}, name="ipucopy")
    finally:
        ctx._ipu_id = saved
    out = op.outputs[0]
    out._ipu = destination
    return out


@register_grad("IpuCopy")
def _ipu_copy_grad(ctx):
    """The gradient is copied back to the source IPU."""
    src, dst = ctx.attrs["_source"], ctx.attrs["_destination"]
    return [ipu_copy(ctx.g(), src, dst)]
