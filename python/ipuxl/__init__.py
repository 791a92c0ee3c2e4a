"""ipuxl: an open implementation of the PopXL programming model.

``import ipuxl as popxl`` gives the PopXL API: build an ``Ir`` of graphs with
ops, then run it with a ``Session`` on the ipuxl IPU-model simulator (a C++
engine). See README.md.
"""
from . import dtypes
from ._core_loader import blas_backend as _blas_backend  # noqa: F401  (loads the core)
from .context import (gcg, get_current_graph, get_ir, get_main_graph, gir, gmg, in_sequence,
                      io_tiles, ipu, name_scope)
from .dtypes import (dtype, bool_ as bool, complex64, complex128, double,  # noqa: F401
                     float, float8_143, float8_152, float16, float32, float64, half, int8, int16,
                     int32, int64, uint8, uint16, uint32, uint64)
from .graph import Graph
from .ir import Ir
from .module import Module
from .random_seed import create_seeds
from .replica_grouping import ReplicaGrouping
from .session import Session
from .profile.model import IpuModel
from .streams import DeviceToHostStream, HostToDeviceStream, d2h_stream, h2d_stream
from .tensor import (Constant, Tensor, TensorByRef, TensorSpec, Variable, constant, graph_input,
                     graph_output, remote_replica_sharded_variable, remote_variable,
                     replica_sharded_buffer, replica_sharded_variable, variable)
from .tensorlocation import (ExecutionContext, ReplicatedTensorSharding, TensorLocation,
                             TensorStorage, TileSet)
from .remote_buffer import RemoteBuffer, remote_buffer
from . import fp8_utils, ops, transforms  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "get_current_graph", "get_main_graph", "get_ir", "gcg", "gmg", "gir", "in_sequence",
    "name_scope", "ipu", "io_tiles", "dtype", "bool", "int8", "int16", "int32", "int64", "uint8",
    "uint16", "uint32", "uint64", "half", "float8_143", "float8_152", "float16", "float",
    "float32", "double", "float64", "complex64", "complex128", "Graph", "Ir", "Module",
    "create_seeds", "RemoteBuffer", "remote_buffer", "ReplicaGrouping", "HostToDeviceStream",
    "DeviceToHostStream", "h2d_stream", "d2h_stream", "Tensor", "variable", "remote_variable",
    "remote_replica_sharded_variable", "replica_sharded_variable", "constant", "graph_input",
    "graph_output", "TensorByRef", "TensorSpec", "TensorStorage", "TensorLocation",
    "ReplicatedTensorSharding", "TileSet", "ExecutionContext", "Session", "IpuModel",
]
