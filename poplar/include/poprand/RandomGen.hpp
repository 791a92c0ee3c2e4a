// ipuxl's PopLibs: poprand random tensors. Each element's value is a hash
// of the seed, the seed modifier, the element's index and how many times the
// program has run, so results do not depend on the tile mapping and differ
// between runs (ipuxl's generator, not the IPU's; see docs/poplar.md).
#pragma once
#include <cstdint>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>

namespace poprand {

/// Uniform in [minVal, maxVal) for floating types, [minVal, maxVal] for integral ones.
poplar::Tensor uniform(poplar::Graph &graph, const poplar::Tensor *seed, std::uint32_t seedModifier,
                       const poplar::Tensor &reference, const poplar::Type &outType, double minVal, double maxVal,
                       poplar::program::Sequence &prog, const poplar::DebugContext &dc = {});
poplar::Tensor normal(poplar::Graph &graph, const poplar::Tensor *seed, std::uint32_t seedModifier,
                      const poplar::Tensor &reference, const poplar::Type &outType, double mean, double stdDev,
                      poplar::program::Sequence &prog, const poplar::DebugContext &dc = {});
/// Normal, redrawn until within alpha standard deviations of the mean.
poplar::Tensor truncatedNormal(poplar::Graph &graph, const poplar::Tensor *seed, std::uint32_t seedModifier,
                               const poplar::Tensor &reference, const poplar::Type &outType, double mean,
                               double stdDev, double alpha, poplar::program::Sequence &prog,
                               const poplar::DebugContext &dc = {});
/// 1 with probability prob, else 0.
poplar::Tensor bernoulli(poplar::Graph &graph, const poplar::Tensor *seed, std::uint32_t seedModifier,
                         const poplar::Tensor &reference, const poplar::Type &outType, double prob,
                         poplar::program::Sequence &prog, const poplar::DebugContext &dc = {});
/// input * scale where a bernoulli(keepProbability) draw is 1, else 0.
poplar::Tensor dropout(poplar::Graph &graph, const poplar::Tensor *seed, std::uint32_t seedModifier,
                       const poplar::Tensor &input, const poplar::Tensor &reference, double keepProbability,
                       double scale, poplar::program::Sequence &prog, const poplar::DebugContext &dc = {});
/// Sets the seed later calls without a seed tensor use (two UNSIGNED_INT elements).
void setSeed(poplar::Graph &graph, const poplar::Tensor &masterSeed, std::uint32_t seedModifier,
             poplar::program::Sequence &prog, const poplar::DebugContext &dc = {});

} // namespace poprand
