// ipuxl's PopLibs: popops scaled additions (A += scale * B and friends).
#pragma once
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>

namespace popops {
enum class ScaledAddSpecialisation { DEFAULT, X_MINUS_AX_PLUS_BY };

/// A += scaleB * B
void scaledAddTo(poplar::Graph &graph, poplar::Tensor A, poplar::Tensor B, float scaleB,
                 poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                 const poplar::OptionFlags &options = {});
void scaledAddTo(poplar::Graph &graph, poplar::Tensor A, poplar::Tensor B, poplar::Tensor scaleB,
                 poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                 const poplar::OptionFlags &options = {});
/// A = scaleA * A + scaleB * B
void scaledAddTo(poplar::Graph &graph, poplar::Tensor A, float scaleA, poplar::Tensor B, float scaleB,
                 poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                 const poplar::OptionFlags &options = {});
void scaledAddTo(poplar::Graph &graph, poplar::Tensor A, poplar::Tensor scaleA, poplar::Tensor B,
                 poplar::Tensor scaleB, poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                 const poplar::OptionFlags &options = {});
/// A -= scaleB * B
void scaledSubtractFrom(poplar::Graph &graph, poplar::Tensor A, poplar::Tensor B, float scaleB,
                        poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                        const poplar::OptionFlags &options = {});
void scaledSubtractFrom(poplar::Graph &graph, poplar::Tensor A, poplar::Tensor B, poplar::Tensor scaleB,
                        poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                        const poplar::OptionFlags &options = {});
} // namespace popops
