"""Remote memory and IO tiles: ``remote_load``, ``remote_load_``,
``remote_store`` and ``io_tile_copy``; and ``MultiExchange``, the op
``popxl.transforms.merge_exchange`` merges exchanges into.

``remote_load(buffer, offset)`` copies entry ``offset`` of a remote buffer
(Streaming Memory, one copy per replica) into a new tensor;
``remote_load_(buffer, offset, t)`` into ``t``; ``remote_store(buffer,
offset, t)`` copies ``t`` into the entry. ``offset`` is an ``int`` (a uint32
constant named ``offset``, as in PopXL) or a scalar integer tensor whose
value is read when the op runs: an offset outside ``[0, entries)`` is a
``RuntimeError`` naming the op, the offset and the buffer (the IPU leaves it
undefined). As in PopXL, nothing orders a load after a store of the same
entry but program order: use ``popxl.in_sequence``.
"""
from typing import Optional, Union

from .. import dtypes
from ..context import get_current_context, get_current_graph
from ..grad import register_grad
from ..op import create_op
from ..opdef import define_op
from ..remote_buffer import RemoteBuffer
from ..tensor import Tensor, constant
from .rules import no_outputs
from .utils import check_in_graph

__all__ = ["remote_load", "remote_load_", "remote_store", "io_tile_copy"]

_OFFSET_DTYPES = (dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64)


def _check_buffer(op: str, remote_buffer) -> RemoteBuffer:
    if not isinstance(remote_buffer, RemoteBuffer):
        raise TypeError(f"{op}: remote_buffer must be a popxl.RemoteBuffer, got "
                        f"{type(remote_buffer).__name__}")
    g = get_current_graph()
    if remote_buffer._current_ir is not g.ir:
        raise ValueError(f"{op}: remote buffer {remote_buffer.remote_buffer_id} belongs to "
                         f"another Ir ({remote_buffer._current_ir.id}) than the current graph "
                         f"({g.ir.id})")
    return remote_buffer


def _offset_tensor(op: str, offset: Union[int, Tensor]) -> Tensor:
    if isinstance(offset, Tensor):
        check_in_graph(op, offset=offset)
        if offset.nelms != 1 or offset.dtype not in _OFFSET_DTYPES:
            raise TypeError(
                f"{op}: the offset {offset.id!r} must be an integer scalar "
                f"({', '.join(d.name for d in _OFFSET_DTYPES)}), got {offset.dtype.name}"
                f"{offset.shape}")
        return offset
    if isinstance(offset, bool) or not hasattr(offset, "__index__"):
        raise TypeError(f"{op}: offset must be an int or a scalar integer Tensor, got "
                        f"{type(offset).__name__}")
    if int(offset) < 0:
        raise ValueError(f"{op}: offset must be >= 0, got {int(offset)}")
    return constant(int(offset), dtypes.uint32, name="offset")


def _load_shape(ins, attrs, graphs=()):
    rb = attrs["_remote_buffer"]
    if ins[0] is not None:
        rb.validate_tensor_matches_buffer(ins[0])
    return [(rb.tensor_shape, rb.tensor_dtype)]


def _store_shape(ins, attrs, graphs=()):
    attrs["_remote_buffer"].validate_tensor_matches_buffer(ins[0])
    return []


# Inputs [destination or None, offset]: remote_load_ writes the destination
# and returns it (output 0 aliases input 0). Loads and stores touch
# Streaming Memory, which no data dependency shows: they keep their place.
define_op("RemoteLoad", _load_shape, kind="remote_load",
          aliases=lambda ins, attrs, graphs=(): ((0, 0),) if ins[0] is not None else (),
          modifies=lambda ins, attrs, graphs=(): (0,) if ins[0] is not None else (),
          side_effects=True, recomputable=False, no_grad="reads Streaming Memory",
          merge="exchange")
define_op("RemoteStore", _store_shape, kind="remote_store", side_effects=True,
          recomputable=False, no_grad="writes Streaming Memory", merge="exchange")


def remote_load(remote_buffer: RemoteBuffer, offset: Union[int, Tensor],
                name: Optional[str] = None) -> Tensor:
    """A new tensor holding entry ``offset`` of ``remote_buffer`` (its
    ``meta_shape`` is the buffer's)."""
    rb = _check_buffer("remote_load", remote_buffer)
    off = _offset_tensor("remote_load", offset)
    if name is None:
        name = f"id_{rb.remote_buffer_id}_offset_{off.name}"
    op = create_op("RemoteLoad", [None, off], [name + "_remote_loaded"],
                   {"_remote_buffer": rb}, name="remote_load")
    out = op.outputs[0]
    out._meta_shape = tuple(rb.meta_shape)
    return out


def remote_load_(remote_buffer: RemoteBuffer, offset: Union[int, Tensor], t: Tensor) -> Tensor:
    """Load entry ``offset`` of ``remote_buffer`` into ``t`` (in place);
    returns ``t``'s new value. ``t`` must have the buffer's shape and dtype."""
    rb = _check_buffer("remote_load_", remote_buffer)
    off = _offset_tensor("remote_load_", offset)
    check_in_graph("remote_load_", t=t)
    t._meta_shape = tuple(rb.meta_shape)
    op = create_op("RemoteLoad", [t, off], ["remote_load_inplace_out"],
                   {"_remote_buffer": rb}, name="remote_load_inplace")
    out = op.outputs[0]
    out._meta_shape = tuple(rb.meta_shape)
    return out


def remote_store(remote_buffer: RemoteBuffer, offset: Union[int, Tensor], t: Tensor) -> None:
    """Store ``t`` in entry ``offset`` of ``remote_buffer`` (shape and dtype
    must match the buffer's)."""
    rb = _check_buffer("remote_store", remote_buffer)
    off = _offset_tensor("remote_store", offset)
    check_in_graph("remote_store", t=t)
    create_op("RemoteStore", [t, off], [], {"_remote_buffer": rb}, name="remote_store")


# ---------------------------------------------------------------- IO tiles
define_op("IoTileCopy", lambda ins, attrs, graphs=(): [(ins[0].shape, ins[0].dtype)],
          kernel="Identity", cost="rearrange")


def io_tile_copy(t: Tensor) -> Tensor:
    """A copy of ``t`` on the other tile set of its IPU: onto the IO tiles if
    ``t`` is on the compute tiles, and back."""
    check_in_graph("io_tile_copy", t=t)
    # As PopXL: the destination is the other tile set of the producer's; a
    # tensor without a producer (a graph input, a variable) has no tile set
    # yet, so the copy goes where the context places new ops.
    ctx = get_current_context()
    saved = ctx._io_tile_set, ctx._ipu_id
    if t.producer is not None:
        ctx._io_tile_set = t.producer.tile_set != "io"
        ctx._ipu_id = t.producer.ipu
    try:
        op = create_op("IoTileCopy", [t], [t.name + "_iotilecopy"], name="iotilecopy")
    finally:
        ctx._io_tile_set, ctx._ipu_id = saved
    return op.outputs[0]


@register_grad("IoTileCopy")
def _io_tile_copy_grad(ctx):
    """The gradient goes back to the tile set it came from."""
    return [io_tile_copy(ctx.g())]


# ------------------------------------------------------------ MultiExchange
def _multi_outputs(ins, attrs, graphs=()):
    return [(t.shape, t.dtype) for m in attrs["_members"] for t in m.outputs]


def _multi_pairs(which: str):
    """A MultiExchange's aliases or modified inputs: its members', re-indexed
    to the concatenated inputs and outputs."""
    def rule(ins, attrs, graphs=()):
        out, i0, o0 = [], 0, 0
        for m in attrs["_members"]:
            if which == "aliases":
                out += [(o + o0, i + i0) for o, i in m.aliases]
            else:
                out += [i + i0 for i in sorted(m.modified)]
            i0 += len(m.inputs)
            o0 += len(m.outputs)
        return tuple(out)
    return rule


# Its members (host and remote loads and stores, code loads) run at once:
# one exchange, one sync (the lowering emits the members in order, marked
# as one exchange group).
define_op("MultiExchange", _multi_outputs, kind="multi_exchange",
          aliases=_multi_pairs("aliases"), modifies=_multi_pairs("modifies"),
          side_effects=True, recomputable=False, no_grad="moves data between memories",
          merge="exchange")
