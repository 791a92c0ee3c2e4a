"""Host streams, mirroring ``popxl.streams``."""
from typing import Iterable, Optional

from . import dtypes
from .context import get_current_context
from ._shapes import check_shape
from .tensor import TensorSpec

__all__ = ["HostToDeviceStream", "DeviceToHostStream", "h2d_stream", "d2h_stream"]


class _Stream:
    _direction = ""

    def __init__(self):
        raise TypeError(f"{type(self).__name__} cannot be constructed directly; use "
                        "popxl.h2d_stream / popxl.d2h_stream")

    @classmethod
    def _create(cls, ir, shape, dtype, name):
        self = object.__new__(cls)
        self._ir = ir
        self._dtype = dtypes.dtype.as_dtype(dtype)
        self._dtype._core_code  # noqa: B018 - rejects fp8/complex early
        self._shape = check_shape(f"{cls._direction}_stream {name!r}", shape,
                                  self._dtype.itemsize)
        taken = {s._tensor_id for s in ir._streams}
        tid = name
        if tid in taken:
            tid = ir._unique_tensor_id(name, taken)
        self._tensor_id = tid
        self._index = len(ir._streams)
        self._used = False
        ir._streams.append(self)
        return self

    @property
    def dtype(self) -> dtypes.dtype:
        return self._dtype

    @property
    def shape(self):
        return self._shape

    @property
    def spec(self) -> TensorSpec:
        return TensorSpec(self._shape, self._dtype)

    @property
    def tensor_id(self) -> str:
        return self._tensor_id

    def __hash__(self):
        return hash((self._tensor_id, self._ir.id))

    def __eq__(self, other):
        return type(other) is type(self) and other._tensor_id == self._tensor_id and \
            other._ir is self._ir

    def __lt__(self, other):  # sorting gives creation order
        return self._index < other._index

    def __str__(self):
        return f"{type(self).__name__} {self._tensor_id}"

    __repr__ = __str__


class HostToDeviceStream(_Stream):
    """A stream the host writes and ``ops.host_load`` reads."""
    _direction = "h2d"


class DeviceToHostStream(_Stream):
    """A stream ``ops.host_store`` writes and the host reads."""
    _direction = "d2h"


def _ir():
    return get_current_context().graph.ir


def h2d_stream(shape: Iterable[int], dtype: dtypes.dtype, name: Optional[str] = None) -> HostToDeviceStream:
    """Create a host-to-device stream (always owned by the main graph)."""
    return HostToDeviceStream._create(_ir(), shape, dtype, name or "h2d_stream")


def d2h_stream(shape: Iterable[int], dtype: dtypes.dtype, name: Optional[str] = None) -> DeviceToHostStream:
    """Create a device-to-host stream (always owned by the main graph)."""
    return DeviceToHostStream._create(_ir(), shape, dtype, name or "d2h_stream")
