// ipuxl's Poplar (internal): how a vertex type describes itself to the
// runtime. A codelet object (compiled from the user's file plus a
// registration shim) and PopLibs' built-in vertices both produce a list of
// VertexTypeInfo: the class name, a factory, compute(), and per field its
// name, kind, direction, element type and a binder that points the field at
// the data the runtime lays out for it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace poplar {
namespace ipuxl_detail {

enum FieldKind : int {
  FK_EDGE_SCALAR,           // Input<float>
  FK_EDGE_VECTOR,           // Input<Vector<float>>
  FK_EDGE_VECTORLIST,       // Input<VectorList<float, ...>>
  FK_VECTOR_OF_EDGE_VECTORS,// Vector<Input<Vector<float>>>
  FK_VECTOR_OF_EDGE_SCALARS,// Vector<Input<float>>
  FK_VALUE_SCALAR,          // unsigned n;  (set by setInitialValue)
  FK_VALUE_VECTOR,          // Vector<unsigned> ns;
  FK_OPAQUE                 // any other member: not a field the graph can set
};
enum FieldDir : int { FD_IN, FD_OUT, FD_INOUT, FD_NONE };

struct Span {
  char *data;
  std::size_t n; // elements
};
struct FieldBinding {
  std::vector<Span> spans;
};
struct FieldInfo {
  std::string name;
  int kind = FK_OPAQUE, dir = FD_NONE, elemCode = 0;
  std::function<void(void *, const FieldBinding &)> bind;
};
struct VertexTypeInfo {
  std::string name;
  std::vector<FieldInfo> fields;
  std::function<void *()> create;
  std::function<void(void *)> destroy;
  std::function<bool(void *, unsigned)> compute;
  bool multiVertex = false;
  bool supervisor = false;
  /// Vertex state bytes from the number of edges of each field, for a type
  /// whose state layout is not the generic pointer-and-size per edge (a
  /// PopLibs vertex with COMPACT_PTR edges); empty: the generic rule.
  std::function<std::uint64_t(const std::vector<std::size_t> &)> stateBytes;
  /// Code bytes of the type on each tile that runs it; 0: the generic figure.
  std::uint64_t codeBytes = 0;
};

} // namespace ipuxl_detail
} // namespace poplar
