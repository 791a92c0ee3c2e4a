"""Remote buffers, mirroring ``popxl.remote_buffer``.

A remote buffer is ``entries`` slots of one tensor shape and dtype in
Streaming Memory (off-chip DRAM on an IPU system; host memory apart from
the device's tile memory on the simulator). Each replica has its own copy.
``ops.remote_load`` / ``ops.remote_store`` move one entry at a time between
the buffer and a tensor on chip; ``popxl.remote_variable`` places a
variable's value in one entry.

Buffers are numbered 1, 2, ... per Ir, as PopXL numbers them; the numbering
restarts for every Ir. The shape and dtype are fixed when the buffer is
created (``set_remote_buffer_info`` may reset them while the program is
built, as PopXL allows), ``entries`` and ``meta_shape`` may change until a
Session compiles the Ir.
"""
from typing import Tuple

from . import dtypes
from ._shapes import check_shape
from .context import gcg

__all__ = ["RemoteBuffer", "remote_buffer"]


def _entries_checked(entries) -> int:
    if isinstance(entries, bool) or not isinstance(entries, int) and \
            not hasattr(entries, "__index__"):
        raise TypeError(f"Entries must be a non-zero, positive integer. Got {entries!r}")
    if entries < 1:
        raise ValueError(f"Entries must be a non-zero, positive integer. Got {entries}")
    return int(entries)


class RemoteBuffer:
    """Store to or load from a buffer in Streaming Memory.

    Args:
        tensor_shape: the shape of each entry.
        tensor_dtype: the dtype of each entry.
        entries: how many tensors of that shape and dtype the buffer holds.

    Raises:
        ValueError: if ``entries`` is not a positive integer.
    """

    def __init__(self, tensor_shape: Tuple[int, ...], tensor_dtype: dtypes.dtype,
                 entries: int) -> None:
        _entries_checked(entries)
        ir = gcg().ir
        self._current_ir = ir
        self._meta_shape: Tuple[int, ...] = ()
        infos = ir.__dict__.setdefault("_remote_buffer_infos", {})
        self._remote_buffer_id = max(infos, default=0) + 1
        self.set_remote_buffer_info(tensor_dtype=tensor_dtype, tensor_shape=tensor_shape,
                                    entries=entries)
        ir.__dict__.setdefault("_remote_buffers", []).append(self)

    # ---- the buffer's record in its Ir
    def _info(self):
        return self._current_ir._remote_buffer_infos[self._remote_buffer_id]

    def _check_not_compiled(self, what: str) -> None:
        if getattr(self._current_ir, "_prepared", False):
            raise RuntimeError(
                f"RemoteBuffer {self._remote_buffer_id}: cannot change its {what}: a Session "
                f"has already compiled Ir {self._current_ir.id}")

    def set_remote_buffer_info(self, tensor_dtype: dtypes.dtype, tensor_shape: Tuple[int, ...],
                               entries: int) -> None:
        """Set the shape, dtype and number of entries of the buffer."""
        self._check_not_compiled("shape, dtype or entries")
        dt = dtypes.dtype.as_dtype(tensor_dtype)
        shape = check_shape(f"RemoteBuffer {self._remote_buffer_id}", tensor_shape, dt.itemsize)
        n = _entries_checked(entries)
        self._current_ir._remote_buffer_infos[self._remote_buffer_id] = (shape, dt, n)

    def validate_tensor_matches_buffer(self, t, num_shards: int = 1) -> None:
        """Raise ``ValueError`` unless tensor ``t`` has the buffer's shape
        (with ``num_shards > 1``: its ``meta_shape``, the shape of the whole
        sharded tensor) and dtype."""
        shape, dt, _ = self._info()
        want_shape = shape if num_shards == 1 else tuple(self.meta_shape)
        if tuple(t.shape) != tuple(want_shape) or t.dtype != dt:
            raise ValueError(
                f"Tensor {t.id} does not match buffer.\n"
                f"Existing remote buffer has shape={tuple(want_shape)} and dtype={dt.name}.\n"
                f"The tensor has shape={tuple(t.shape)}, dtype={t.dtype.name}.")

    # ---- properties (shape and dtype are read-only, as in PopXL)
    @property
    def remote_buffer_id(self) -> int:
        """The buffer's id: 1, 2, ... in creation order within its Ir."""
        return self._remote_buffer_id

    @property
    def tensor_shape(self) -> Tuple[int, ...]:
        """The shape of each entry."""
        return self._info()[0]

    @tensor_shape.setter
    def tensor_shape(self, value):
        raise AttributeError("can't set attribute 'tensor_shape'")

    @property
    def tensor_dtype(self) -> dtypes.dtype:
        """The dtype of each entry."""
        return self._info()[1]

    @tensor_dtype.setter
    def tensor_dtype(self, value):
        raise AttributeError("can't set attribute 'tensor_dtype'")

    @property
    def entries(self) -> int:
        """How many tensors the buffer holds; settable (a positive integer)."""
        return self._info()[2]

    @entries.setter
    def entries(self, value: int) -> None:
        _entries_checked(value)
        self.set_remote_buffer_info(tensor_dtype=self.tensor_dtype,
                                    tensor_shape=self.tensor_shape, entries=value)

    @property
    def meta_shape(self) -> Tuple[int, ...]:
        """The shape of the whole tensor when each entry holds one replica's
        shard of it (replicated tensor sharding); ``()`` otherwise."""
        return self._meta_shape

    @meta_shape.setter
    def meta_shape(self, shape: Tuple[int, ...]) -> None:
        self._check_not_compiled("meta_shape")
        self._meta_shape = tuple(int(d) for d in shape)

    # ---- ipuxl
    @property
    def _name(self) -> str:
        """The buffer's name in the program (PopART's ``RB_<id>``)."""
        return f"RB_{self._remote_buffer_id}"

    @property
    def entry_nbytes(self) -> int:
        """Bytes of one entry (one replica)."""
        shape, dt, _ = self._info()
        n = 1
        for d in shape:
            n *= d
        return n * dt.itemsize

    def __hash__(self):
        return hash((id(self._current_ir), self._remote_buffer_id))

    def __eq__(self, other):
        return isinstance(other, RemoteBuffer) and other._current_ir is self._current_ir and \
            other._remote_buffer_id == self._remote_buffer_id

    def __repr__(self):
        shape, dt, n = self._info()
        meta = f" meta_shape={self._meta_shape}" if self._meta_shape else ""
        return f"RemoteBuffer[id={self._remote_buffer_id} {dt.name}{shape} x {n}{meta}]"


def remote_buffer(tensor_shape: Tuple[int, ...], tensor_dtype: dtypes.dtype,
                  entries: int = 1) -> RemoteBuffer:
    """A new remote buffer in the Ir of the current graph: ``entries`` tensors
    of ``tensor_shape`` and ``tensor_dtype``."""
    return RemoteBuffer(tensor_shape, tensor_dtype, entries)
