// Conversions from Python values shared by the core's bindings
// (bindings.cpp, bindings_desc.cpp), and the one path by which a
// ProgramDesc receives an op or tensor record from Python.
#pragma once
#include <pybind11/pybind11.h>

#include <string>
#include <utility>
#include <vector>

#include "program/program.hpp"

namespace ipuxl {
namespace py = pybind11;

DType to_dtype(int code);
AttrValue to_attr(const std::string& key, const py::handle& v);

// A code received from Python, checked against its enum's bound.
template <class E>
E checked_code(int code, int count, const std::string& op, const char* what) {
  if (code < 0 || code >= count)
    throw Error("op '" + op + "': invalid " + what + " " + std::to_string(code) + " (expected 0.." +
                std::to_string(count - 1) + ")");
  return (E)code;
}

inline std::pair<int64_t, int64_t> pair_of(const std::vector<int64_t>& v, const std::string& op,
                                           const char* what) {
  if (v.empty()) return {0, 0};
  if (v.size() != 2) throw Error("op '" + op + "': " + what + " takes (other dtypes, float16)");
  return {v[0], v[1]};
}

// ProgramDesc.add_tensor's checks and record (codes are the enums' values).
int add_tensor_record(ProgramDesc& d, int graph, const std::string& name, int dtype,
                      const Shape& shape, int kind, int ipu, int tile_set);

// ProgramDesc.add_op's record from its arguments, in the binding's order.
int add_op_record(ProgramDesc& d, int graph, const std::string& type, const std::string& name,
                  std::vector<int> in, std::vector<int> out, const py::dict& attrs,
                  std::vector<int> graphs, std::vector<std::pair<int, int>> aliases,
                  const std::string& kernel, int kind, std::vector<int> modified,
                  bool side_effects, int ipu, int tile_set, int context, int stream,
                  int64_t trip_count, std::vector<std::vector<int>> branch_inputs, bool skip,
                  int cost_class, int remote_buffer, int collective_kind, int reduce_op,
                  std::vector<int> group_of, int exchange_group, const std::string& cost_vertex,
                  const std::vector<int64_t>& cost_header,
                  const std::vector<int64_t>& cost_per_vector,
                  const std::vector<int64_t>& cost_unroll, bool view_streaming_memory,
                  bool write_host_directly, int code_load_graph);

// The batch forms: `records` is a list of tuples, each add_tensor's (7) or
// add_op's (32) positional arguments. add_tensor_records returns the first
// record's index (the others follow it in order).
int add_tensor_records(ProgramDesc& d, const py::list& records);
void add_op_records(ProgramDesc& d, const py::list& records);

}  // namespace ipuxl
