// The program description handed over by Python, and the lowered program.
//
// ProgramDesc is a plain record of graphs, tensors, ops and host streams,
// filled once per Session through the bindings. Engine lowers it into a
// Poplar-shaped program tree (Sequence / Execute / Copy / Call / Repeat / If /
// stream copies), allocates every tensor once, and runs it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "kernel.hpp"

namespace ipuxl {

struct NotImplemented : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class TensorKind : int { Intermediate = 0, Input = 1, Constant = 2, Variable = 3 };

struct TensorDesc {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  TensorKind kind = TensorKind::Intermediate;
  int graph = 0;
  std::vector<uint8_t> data;  // constants (and variables' initial values)
};

struct OpRecord {
  std::string type;
  std::string name;
  int graph = 0;
  std::vector<int> in;   // tensor ids, -1 for an absent optional input
  std::vector<int> out;  // tensor ids
  Attrs attrs;
  std::vector<int> graphs;                  // called graphs (Call, Repeat, If)
  std::vector<std::pair<int, int>> aliases;  // (output index, input index) sharing storage
};

struct GraphDesc {
  std::string name;
  std::vector<int> inputs;
  std::vector<int> outputs;
  std::vector<int> ops;  // in schedule order
};

struct StreamDesc {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  bool host_to_device = true;
};

class ProgramDesc {
 public:
  int add_graph(const std::string& name);
  int add_tensor(int graph, const std::string& name, DType dtype, const Shape& shape,
                 TensorKind kind);
  void set_tensor_data(int tensor, const uint8_t* data, size_t nbytes);
  int add_op(OpRecord op);
  int add_stream(const std::string& name, DType dtype, const Shape& shape, bool h2d);
  void set_graph_io(int graph, std::vector<int> inputs, std::vector<int> outputs);

  std::vector<GraphDesc> graphs;
  std::vector<TensorDesc> tensors;
  std::vector<OpRecord> ops;
  std::vector<StreamDesc> streams;

  void check_graph(int g, const char* what) const;
  void check_tensor(int t, const char* what) const;
};

}  // namespace ipuxl
