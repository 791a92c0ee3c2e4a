"""ipuxl.addons: the ``popxl_addons`` API on ipuxl.

``import popxl_addons as addons`` (after ``ipuxl.compat.install()``) gives
this package. Every module declares ``__all__``; the top-level namespace
exports what popxl_addons' star imports make available and that ipuxl
implements, and binds the submodules (``addons.module``, ``addons.ops``,
``addons.transforms`` ...). ``layers`` and ``optimizers`` are imported
explicitly by users, as in popxl_addons. Importing needs only numpy and the
ipuxl core (no compilation, no MPI, no git).
"""
from . import dot_tree, named_tensors, named_replica_grouping, utils  # noqa: F401
from . import variable_factory, graph, graph_cache, module  # noqa: F401
from . import ops, transforms  # noqa: F401  (explicit: addons.ops is this subpackage)
from . import array_munging  # noqa: F401
from .array_munging import *  # noqa: F401,F403  (addons.repeat is the NumPy helper, as upstream)
from .dot_tree import DotTree, sanitise, to_mapping
from .graph import BoundGraph, GraphWithNamedArgs
from .graph_cache import (GraphCache, argument_hash, bound_arguments, function,
                          get_function_hash, named_tensors_function, tensor_hash)
from .module import Module, NameScopeMeta, create_grad_graph_info
from .named_replica_grouping import NamedReplicaGrouping
from .named_tensors import NamedTensorData, NamedTensors, TensorMap, print_named_tensors
from .ops import cross_entropy, cross_entropy_with_grad, host_load, host_store
from .streams import InputStreams, OutputStreams
from .task_session import TaskSession, write_variables_pb
from .route_tensor import is_subgraph, route_tensor_into_graph
from .performance_utils import (evaluate_FLOPs, evaluate_ir_FLOPs, format_flops_scientific,
                                print_FLOPs, total_FLOPs)
from .transforms import (RemoteHandle, autodiff, autodiff_with_accumulation, batch_serial_buffer,
                         batch_serialise, batch_serialise_fwd_and_grad, remap_grad_info,
                         pipelined_execution, recompute_graph, add_recompute_inputs,
                         set_available_memory_proportion_by_ipu,
                         set_graph_available_memory_proportion_by_ipu, disable_fc_pass,
                         enable_fc_pass)
from . import remote, rts  # noqa: F401
from .seed_variable import seed_variable
from .remote import (create_remote_buffer, load_remote_graph, named_buffers,
                     named_variable_buffers, store_remote_graph)
from .utils import OrderedDict, WeightsDict, duplicate_items, null_context, overrides, \
    suffix_graph_name, timer
from .variable_factory import (NamedVariableFactories, VariableFactory,
                               add_replica_sharded_variable_input, add_variable_input)

GIT_COMMIT = None  # popxl_addons records its git commit here; ipuxl does not

__all__ = [
    "DotTree", "sanitise", "to_mapping", "BoundGraph", "GraphWithNamedArgs", "GraphCache",
    "argument_hash", "bound_arguments", "function", "get_function_hash", "named_tensors_function",
    "tensor_hash", "Module", "NameScopeMeta", "create_grad_graph_info", "NamedReplicaGrouping",
    "NamedTensorData", "NamedTensors", "TensorMap", "print_named_tensors", "cross_entropy",
    "cross_entropy_with_grad", "host_load", "host_store", "autodiff", "autodiff_with_accumulation",
    "remap_grad_info", "OrderedDict", "WeightsDict", "duplicate_items", "null_context", "overrides",
    "suffix_graph_name", "timer", "NamedVariableFactories", "VariableFactory",
    "add_replica_sharded_variable_input", "add_variable_input", "GIT_COMMIT", "InputStreams",
    "OutputStreams", "TaskSession", "write_variables_pb", "evaluate_FLOPs", "evaluate_ir_FLOPs",
    "format_flops_scientific", "print_FLOPs", "total_FLOPs", "is_subgraph",
    "route_tensor_into_graph", "load_remote_graph", "store_remote_graph", "named_buffers",
    "named_variable_buffers", "create_remote_buffer", "batch_serialise",
    "batch_serialise_fwd_and_grad", "batch_serial_buffer", "RemoteHandle",
    "pipelined_execution", "recompute_graph", "add_recompute_inputs",
    "set_available_memory_proportion_by_ipu", "set_graph_available_memory_proportion_by_ipu",
    "disable_fc_pass", "enable_fc_pass", "seed_variable",
] + array_munging.__all__
