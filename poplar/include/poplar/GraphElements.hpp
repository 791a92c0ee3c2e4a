// ipuxl's Poplar: handles to graph objects (compute sets, vertices, fields,
// functions). Each is an id into the Graph that made it.
#pragma once
#include <cstddef>
#include <poplar/StringRef.hpp>
#include <string>

namespace poplar {

class Graph;

class ComputeSet {
public:
  ComputeSet() = default;
  explicit ComputeSet(unsigned id) : id_(id) {}
  unsigned getId() const { return id_; }
  bool operator==(const ComputeSet &o) const { return id_ == o.id_; }

private:
  unsigned id_ = ~0u;
};

class FieldRef;

class VertexRef {
public:
  VertexRef() = default;
  VertexRef(Graph *g, unsigned id) : graph_(g), id_(id) {}
  unsigned getId() const { return id_; }
  FieldRef operator[](StringRef fieldName) const;
  Graph *ipuxlGraph() const { return graph_; }

private:
  Graph *graph_ = nullptr;
  unsigned id_ = ~0u;
};

class FieldRef {
public:
  FieldRef() = default;
  FieldRef(VertexRef v, std::string field, std::size_t index = ~std::size_t(0))
      : vertex_(v), field_(std::move(field)), index_(index) {}
  /// An element of a vector field (Vector<Input<...>>).
  FieldRef operator[](std::size_t i) const { return FieldRef(vertex_, field_, i); }
  const VertexRef &ipuxlVertex() const { return vertex_; }
  const std::string &ipuxlName() const { return field_; }
  bool ipuxlIsIndexed() const { return index_ != ~std::size_t(0); }
  std::size_t ipuxlIndex() const { return index_; }

private:
  VertexRef vertex_;
  std::string field_;
  std::size_t index_ = ~std::size_t(0);
};

inline FieldRef VertexRef::operator[](StringRef fieldName) const { return FieldRef(*this, fieldName); }

class Function {
public:
  Function() = default;
  explicit Function(unsigned id) : id_(id) {}
  unsigned getId() const { return id_; }

private:
  unsigned id_ = ~0u;
};

/// A buffer holding a Function's code off the tiles (Graph::addFunctionBuffer);
/// Copy(FunctionBuffer, Function) loads it before the Function is called.
class FunctionBuffer {
public:
  FunctionBuffer() = default;
  FunctionBuffer(unsigned id, unsigned function) : id_(id), function_(function) {}
  unsigned getId() const { return id_; }
  unsigned ipuxlFunction() const { return function_; }

private:
  unsigned id_ = ~0u;
  unsigned function_ = ~0u;
};
inline bool operator==(const Function &a, const Function &b) { return a.getId() == b.getId(); }
inline bool operator==(const FunctionBuffer &a, const FunctionBuffer &b) { return a.getId() == b.getId(); }

class HostFunction {
public:
  HostFunction() = default;
  explicit HostFunction(unsigned id) : id_(id) {}
  unsigned getId() const { return id_; }

private:
  unsigned id_ = ~0u;
};

} // namespace poplar
