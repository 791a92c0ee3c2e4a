#pragma once
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
namespace popops {
/// Sets every element of t to fillValue.
void fill(poplar::Graph &graph, poplar::Tensor t, double fillValue, poplar::program::Sequence &prog,
          const poplar::DebugContext &dc = {});
template <class T>
void fill(poplar::Graph &graph, poplar::Tensor t, T fillValue, poplar::program::Sequence &prog,
          const poplar::DebugContext &dc = {}) {
  fill(graph, t, static_cast<double>(fillValue), prog, dc);
}
/// PopLibs' documented order (popops/Fill.hpp: graph, t, prog, fillValue),
/// as PopART's opx call it.
template <class T>
void fill(poplar::Graph &graph, const poplar::Tensor &t, poplar::program::Sequence &prog, T fillValue,
          const poplar::DebugContext &dc = {}) {
  fill(graph, t, static_cast<double>(fillValue), prog, dc);
}
} // namespace popops
