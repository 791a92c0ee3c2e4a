#pragma once
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
namespace popops {
/// Sets every element of t to zero.
void zero(poplar::Graph &graph, poplar::Tensor t, poplar::program::Sequence &prog, const poplar::DebugContext &dc = {});
}
