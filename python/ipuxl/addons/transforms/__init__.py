"""Graph transforms of popxl_addons implemented by ipuxl."""
from .autodiff import autodiff, autodiff_with_accumulation, remap_grad_info
from .available_memory_proportion import (set_available_memory_proportion_by_ipu,
                                          set_graph_available_memory_proportion_by_ipu)
from .batch_serialisation import (BatchSerialResult, RemoteHandle, batch_serial_buffer,
                                  batch_serialise, batch_serialise_fwd_and_grad)
from .pipelining import pipelined_execution
from .recomputation import add_recompute_inputs, recompute_graph
from .use_fc_pass import disable_fc_pass, enable_fc_pass

__all__ = ["autodiff", "autodiff_with_accumulation", "remap_grad_info", "batch_serialise",
           "batch_serialise_fwd_and_grad", "batch_serial_buffer", "RemoteHandle",
           "BatchSerialResult", "pipelined_execution", "recompute_graph",
           "add_recompute_inputs", "set_available_memory_proportion_by_ipu",
           "set_graph_available_memory_proportion_by_ipu", "disable_fc_pass", "enable_fc_pass"]
