"""``remote_code_load``: load a graph's code from remote (streaming) memory.

On the IPU, code of a graph can live off-chip and be loaded before it runs.
The simulator keeps every function's code resident, so the op only records
the request (it appears in the program and in schedules) and does nothing
when run. The destinations that need code buffers are not supported.
"""
from ..graph import Graph
from ..op import create_op
from ..opdef import define_op
from .rules import no_outputs

__all__ = ["remote_code_load"]

_DESTINATIONS = ("executable", "compute_buffer", "io_buffer")

# It moves code, which no data dependency shows: it must stay in the program.
define_op("RemoteCodeLoad", no_outputs, side_effects=True, recomputable=False,
          no_grad="moves code, not data", cost="code_load", merge="exchange")


def remote_code_load(graph: Graph, destination: str) -> None:
    """Load the code of ``graph`` into ``destination`` (``"executable"``)."""
    if not isinstance(graph, Graph):
        raise TypeError(f"remote_code_load expects a Graph, got {type(graph).__name__}")
    if destination not in _DESTINATIONS:
        raise ValueError(f"remote_code_load: destination must be one of {_DESTINATIONS}, got "
                         f"{destination!r}")
    if destination != "executable":
        raise NotImplementedError(
            f"remote_code_load to {destination!r} is not supported by ipuxl (code buffers are "
            "not modelled); use destination='executable'")
    create_op("RemoteCodeLoad", [], [], {"destination": destination, "_graph": graph},
              name="remote_code_load")
