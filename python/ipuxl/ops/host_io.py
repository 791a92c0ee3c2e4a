"""Host IO: ``host_load`` reads the next transfer of a host-to-device stream,
``host_store`` writes a tensor to a device-to-host stream."""
from typing import Optional

from ..context import get_current_graph
from ..op import create_op
from ..opdef import define_op
from .rules import no_outputs
from ..streams import DeviceToHostStream, HostToDeviceStream
from ..tensor import Tensor
from .utils import check_in_graph

__all__ = ["host_load", "host_store"]


def host_load(h2d_stream: HostToDeviceStream, name: Optional[str] = None) -> Tensor:
    """Load the next value of ``h2d_stream``. Each execution consumes one of
    the ``num_host_transfers`` values the host supplies per ``Session.run``."""
    if not isinstance(h2d_stream, HostToDeviceStream):
        raise TypeError(f"host_load expects a HostToDeviceStream, got {type(h2d_stream).__name__}")
    g = get_current_graph()
    if h2d_stream._ir is not g.ir:
        raise ValueError(f"host_load: stream {h2d_stream.tensor_id!r} belongs to another Ir")
    base = name or h2d_stream.tensor_id
    h2d_stream._used = True
    op = create_op("HostLoad", [], [f"{base}_hostload"], {"_stream": h2d_stream},
                   name="host_load")
    return op.outputs[0]


# Each execution moves one transfer of the host's data: never dropped,
# reordered or repeated.
define_op("HostLoad", lambda ins, attrs, graphs=(): [(attrs["_stream"].shape,
                                                     attrs["_stream"].dtype)],
          kind="host_load", side_effects=True, recomputable=False, no_grad="reads the host",
          merge="exchange")
define_op("HostStore", no_outputs, kind="host_store", side_effects=True, recomputable=False,
          no_grad="writes the host", merge="exchange")


def host_store(d2h_stream: DeviceToHostStream, t: Tensor) -> None:
    """Store ``t`` to ``d2h_stream`` (shape and dtype must match the stream)."""
    if not isinstance(d2h_stream, DeviceToHostStream):
        raise TypeError(f"host_store expects a DeviceToHostStream, got {type(d2h_stream).__name__}")
    check_in_graph("host_store", t=t)
    if t.shape != d2h_stream.shape or t.dtype != d2h_stream.dtype:
        raise ValueError(
            f"host_store: tensor {t.id!r} {t.dtype.name}{t.shape} does not match stream "
            f"{d2h_stream.tensor_id!r} {d2h_stream.dtype.name}{d2h_stream.shape}")
    d2h_stream._used = True
    create_op("HostStore", [t], [], {"_stream": d2h_stream}, name="host_store")
