// ipuxl's PopLibs (internal): helpers for the libraries' built-in vertex
// types. Built-in vertices are ordinary Vertex classes registered with the
// graph by each library's addCodelets; their fields of type AnyElem take
// tensors of any element type (the vertex's plan says which).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <poplar/Vertex.hpp>
#include <poplar/exceptions.hpp>
#include <poputil/exceptions.hpp>
#include <string>
#include <vector>

namespace popops {
namespace ipuxl {

/// An element of any type: the plan of the vertex gives the type.
struct AnyElem {
  char c;
};

inline std::size_t sizeOf(int code) { return poplar::ipuxl_detail::typeCodeSize(code); }

inline double load(int code, const char *p) {
  using namespace poplar::ipuxl_detail;
  switch (code) {
  case T_FLOAT: { float v; std::memcpy(&v, p, 4); return v; }
  case T_HALF: { std::uint16_t b; std::memcpy(&b, p, 2); return halfBitsToFloat(b); }
  case T_INT: { int v; std::memcpy(&v, p, 4); return v; }
  case T_UNSIGNED_INT: { unsigned v; std::memcpy(&v, p, 4); return v; }
  case T_SHORT: { short v; std::memcpy(&v, p, 2); return v; }
  case T_UNSIGNED_SHORT: { unsigned short v; std::memcpy(&v, p, 2); return v; }
  case T_CHAR: return static_cast<char>(*p);
  case T_SIGNED_CHAR: return static_cast<signed char>(*p);
  case T_UNSIGNED_CHAR: return static_cast<unsigned char>(*p);
  case T_BOOL: return *p ? 1.0 : 0.0;
  case T_LONGLONG: { long long v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
  case T_UNSIGNED_LONGLONG: { unsigned long long v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
  }
  return 0;
}

inline void store(int code, char *p, double v) {
  using namespace poplar::ipuxl_detail;
  switch (code) {
  case T_FLOAT: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); return; }
  case T_HALF: { std::uint16_t b = floatToHalfBits(static_cast<float>(v)); std::memcpy(p, &b, 2); return; }
  case T_INT: { int i = static_cast<int>(static_cast<long long>(v)); std::memcpy(p, &i, 4); return; }
  case T_UNSIGNED_INT: { unsigned u = static_cast<unsigned>(static_cast<long long>(v)); std::memcpy(p, &u, 4); return; }
  case T_SHORT: { short s = static_cast<short>(v); std::memcpy(p, &s, 2); return; }
  case T_UNSIGNED_SHORT: { unsigned short s = static_cast<unsigned short>(v); std::memcpy(p, &s, 2); return; }
  case T_CHAR: case T_SIGNED_CHAR: *p = static_cast<char>(static_cast<int>(v)); return;
  case T_UNSIGNED_CHAR: *p = static_cast<char>(static_cast<unsigned char>(static_cast<int>(v))); return;
  case T_BOOL: *p = v != 0.0; return;
  case T_LONGLONG: { long long l = static_cast<long long>(v); std::memcpy(p, &l, 8); return; }
  case T_UNSIGNED_LONGLONG: { unsigned long long l = static_cast<unsigned long long>(v); std::memcpy(p, &l, 8); return; }
  }
}

inline bool isIntegral(int code) {
  using namespace poplar::ipuxl_detail;
  return code != T_FLOAT && code != T_HALF;
}

/// Registers built-in vertex types with the graph.
void registerBuiltins(poplar::Graph &graph, const std::vector<poplar::ipuxl_detail::VertexTypeInfo> &types);
/// Throws poplibs_error naming the library function when its codelets were not added.
void requireCodelets(const poplar::Graph &graph, const char *vertexType, const char *library);

/// For each tile holding elements of `t`, the flat intervals it holds.
struct TilePart {
  unsigned tile;
  std::vector<poplar::Interval> intervals;
  std::size_t size;
};
std::vector<TilePart> partsByTile(const poplar::Graph &graph, const poplar::Tensor &t);
/// The elements of flat tensor `flat` in the given intervals, as one 1-D tensor.
poplar::Tensor gatherIntervals(const poplar::Tensor &flat, const std::vector<poplar::Interval> &intervals);

/// Stores a plan object (kept alive for the process) and returns its handle
/// for a vertex's `plan` field.
template <class P> unsigned long long keepPlan(P *p) {
  return static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(p));
}
template <class P> P *planOf(unsigned long long h) { return reinterpret_cast<P *>(static_cast<std::uintptr_t>(h)); }

/// NumPy broadcasting of shapes; throws poplibs_error naming `op` when they do not broadcast.
std::vector<std::size_t> broadcastShapes(const std::vector<std::vector<std::size_t>> &shapes, const std::string &op);
/// t broadcast (as a view) to `shape`.
poplar::Tensor broadcastTo(const poplar::Tensor &t, const std::vector<std::size_t> &shape);

} // namespace ipuxl
} // namespace popops

namespace poplar {
namespace ipuxl_detail {
template <> struct ElemCode<popops::ipuxl::AnyElem> { static constexpr int value = 0; };
} // namespace ipuxl_detail
} // namespace poplar
