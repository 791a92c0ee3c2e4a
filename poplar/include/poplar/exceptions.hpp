// ipuxl's Poplar: the SDK's exception types. Every error raised by the
// library is a poplar_error (or one of its subclasses below), whose `type`
// names the subclass as in the SDK.
#pragma once
#include <stdexcept>
#include <string>

namespace poplar {

struct poplar_error : std::runtime_error {
  std::string type;
  explicit poplar_error(const std::string &s) : std::runtime_error(s), type("poplar_error") {}
  explicit poplar_error(const char *s) : std::runtime_error(s), type("poplar_error") {}

protected:
  poplar_error(const std::string &s, const char *t) : std::runtime_error(s), type(t) {}
};

#define POPLAR_IPUXL_ERROR(NAME)                                                                   \
  struct NAME : poplar_error {                                                                     \
    explicit NAME(const std::string &s) : poplar_error(s, #NAME) {}                                \
  };

POPLAR_IPUXL_ERROR(application_runtime_error)
POPLAR_IPUXL_ERROR(control_program_error)
POPLAR_IPUXL_ERROR(graph_connection_error)
POPLAR_IPUXL_ERROR(graph_cycle_error)
POPLAR_IPUXL_ERROR(graph_memory_allocation_error)
POPLAR_IPUXL_ERROR(graph_object_creation_error)
POPLAR_IPUXL_ERROR(graph_object_load_error)
POPLAR_IPUXL_ERROR(index_error)
POPLAR_IPUXL_ERROR(invalid_machine_model)
POPLAR_IPUXL_ERROR(invalid_option)
POPLAR_IPUXL_ERROR(invalid_tile_mapping)
POPLAR_IPUXL_ERROR(link_error)
POPLAR_IPUXL_ERROR(memory_elem_constraints_error)
POPLAR_IPUXL_ERROR(missing_cycle_estimate)
POPLAR_IPUXL_ERROR(missing_perf_estimate)
POPLAR_IPUXL_ERROR(no_environment)
POPLAR_IPUXL_ERROR(no_size_specified)
POPLAR_IPUXL_ERROR(overflow_error)
POPLAR_IPUXL_ERROR(parse_error)
POPLAR_IPUXL_ERROR(profiling_disabled)
POPLAR_IPUXL_ERROR(runtime_error)
POPLAR_IPUXL_ERROR(stream_connection_error)
POPLAR_IPUXL_ERROR(stream_memory_allocation_error)
POPLAR_IPUXL_ERROR(symbol_error)
POPLAR_IPUXL_ERROR(tensor_creation_error)
POPLAR_IPUXL_ERROR(tensor_io_state_error)
POPLAR_IPUXL_ERROR(type_error)
POPLAR_IPUXL_ERROR(unknown_field)
POPLAR_IPUXL_ERROR(unknown_vertex_type)
#undef POPLAR_IPUXL_ERROR

/// A codelet failed to compile; `what()` carries the compiler's own message.
struct graph_program_compilation_error : poplar_error {
  explicit graph_program_compilation_error(const std::string &s)
      : poplar_error(s, "graph_program_compilation_error") {}
};

} // namespace poplar
