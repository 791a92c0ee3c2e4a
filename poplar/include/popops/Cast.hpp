#pragma once
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
namespace popops {
/// t converted to dstType (round to nearest for float to half; C++ conversion otherwise).
poplar::Tensor cast(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Type &dstType,
                    poplar::program::Sequence &prog, const poplar::DebugContext &dc = {});
void cast(poplar::Graph &graph, poplar::Tensor src, poplar::Tensor dst, poplar::program::Sequence &prog,
          const poplar::DebugContext &dc = {});
} // namespace popops
