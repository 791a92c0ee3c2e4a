"""Stream helpers of ``popxl_addons.ops.streams``: create a stream and its
host op in one call (different signatures from ``popxl.ops.host_load``)."""
from typing import Tuple

import numpy as np

from ... import dtypes
from ...streams import DeviceToHostStream, HostToDeviceStream, d2h_stream, h2d_stream
from ...tensor import Tensor

__all__ = ["host_load", "host_store"]


def host_load(t, dtype: dtypes.dtype, name: str) -> Tuple[np.ndarray, HostToDeviceStream, Tensor]:
    """For host data ``t``: ``(t as a numpy array of dtype, an h2d stream
    named "<name>_stream" of its shape, the host_load of that stream)``."""
    from ... import ops

    dt = dtypes.dtype.as_dtype(dtype)
    arr = t.detach().cpu().numpy() if type(t).__module__.startswith("torch") else np.asarray(t)
    stream = h2d_stream(arr.shape, dt, name=f"{name}_stream")
    return arr.astype(dt.as_numpy(), copy=False), stream, ops.host_load(stream, name)


def host_store(t: Tensor) -> DeviceToHostStream:
    """A d2h stream "<t.name>_stream" for ``t`` and the host_store into it."""
    from ... import ops

    if not isinstance(t, Tensor):
        raise TypeError(f"host_store: expected a Tensor, got {type(t).__name__}")
    stream = d2h_stream(t.shape, t.dtype, name=f"{t.name}_stream")
    ops.host_store(stream, t)
    return stream
