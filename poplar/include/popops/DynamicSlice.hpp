// ipuxl's PopLibs: popops dynamic slicing (offsets read at run time):
// dynamicSlice/dynamicUpdate (one slice) and multiSlice/multiUpdate/
// multiUpdateAdd/multiUpdateMax/multiUpdateMul (one slice per offset, as an
// embedding lookup and its gradient). A SlicePlan is accepted for the
// SDK's signatures; ipuxl's plan is fixed (see docs/poplar.md).
#pragma once
#include <cstddef>
#include <ostream>
#include <poplar/ArrayRef.hpp>
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <vector>

namespace popops {

/// How a multi-slice is implemented. ipuxl has one implementation (the
/// sliced tensor split in columns over the tiles, see createSliceableTensor),
/// so every plan is equal; a default-constructed plan is valid everywhere.
class SlicePlan {
public:
  SlicePlan() = default;
  friend std::ostream &operator<<(std::ostream &o, const SlicePlan &) { return o << "SlicePlan(ipuxl)"; }
  friend bool operator<(const SlicePlan &, const SlicePlan &) noexcept { return false; }
  friend bool operator==(const SlicePlan &, const SlicePlan &) noexcept { return true; }
  friend bool operator!=(const SlicePlan &, const SlicePlan &) noexcept { return false; }
};

/// The slice of t of `sizes` along `dims` starting at the offsets held in
/// `offset` (one unsigned element per dimension), clamped to stay in range.
poplar::Tensor dynamicSlice(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &offset,
                            const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                            poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                            const poplar::OptionFlags &options = {});
/// Writes s into t at the offsets held in `offset`.
void dynamicUpdate(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &s,
                   const poplar::Tensor &offset, const std::vector<std::size_t> &dims,
                   const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog,
                   const poplar::DebugContext &dc = {}, const poplar::OptionFlags &options = {});

/// A tensor of `shape` mapped for slicing along dims[0]: the elements after
/// that dimension are split in column chunks, one chunk per tile, so each
/// tile slices its own columns of every row.
poplar::Tensor createSliceableTensor(poplar::Graph &graph, const poplar::Type &type, const std::vector<std::size_t> &shape,
                                     const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                                     std::size_t minGrainSize = 0, const poplar::DebugContext &dc = {});
poplar::Tensor createSliceableTensor(poplar::Graph &graph, const poplar::Type &type, const std::vector<std::size_t> &shape,
                                     const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                                     const SlicePlan &plan, const poplar::OptionFlags &options,
                                     const poplar::DebugContext &dc = {});
/// The tensor multiSlice returns for numIndices offsets (shape
/// {numIndices, t's shape with dims[k] of sizes[k]}), mapped as its slices will be.
poplar::Tensor createSliceTensor(poplar::Graph &graph, const poplar::Tensor &t, const std::vector<std::size_t> &dims,
                                 const std::vector<std::size_t> &sizes, std::size_t numIndices,
                                 const poplar::DebugContext &dc = {});
poplar::Tensor createSliceTensor(poplar::Graph &graph, const poplar::Type &type, const std::vector<std::size_t> &shape,
                                 const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                                 std::size_t numIndices, const SlicePlan &plan, const poplar::OptionFlags &options,
                                 const poplar::DebugContext &dc = {});
/// An UNSIGNED_INT tensor {numIndices, dims.size()} for multiSlice's offsets.
poplar::Tensor createIndicesTensor(poplar::Graph &graph, const std::vector<std::size_t> &dims, std::size_t numIndices,
                                   const SlicePlan &plan, const poplar::OptionFlags &options,
                                   const poplar::DebugContext &dc = {});

/// Takes offsets.dim(0) slices of t: result[i] = t sliced along dims[0] at
/// [offsets[i], offsets[i] + sizes[0]). dims and sizes have one entry;
/// offsets is {N} or {N, 1} of an integral type. A slice that does not fit
/// in t reads zeros, or with option remapOutOfBoundIndices=true the slice at 0.
poplar::Tensor multiSlice(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &offsets,
                          const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                          poplar::program::Sequence &prog, const SlicePlan &plan, const poplar::OptionFlags &options,
                          const poplar::DebugContext &dc = {});
/// Slices of size 1 along `dim` at offsets known when the graph is built.
poplar::Tensor multiSlice(poplar::Graph &graph, const poplar::Tensor &t, poplar::ArrayRef<unsigned> offsets,
                          std::size_t dim, poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                          const poplar::OptionFlags &options = {});
/// t's slice at offsets[i] = s[i], for each i in order (a later offset
/// wins); offsets whose slice does not fit in t are ignored.
void multiUpdate(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &s, const poplar::Tensor &offsets,
                 const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                 poplar::program::Sequence &prog, const SlicePlan &plan, const poplar::OptionFlags &options,
                 const poplar::DebugContext &dc = {});
/// t's slice at offsets[i] += scale * s[i] (scale: a one-element tensor, of t's type or FLOAT).
void multiUpdateAdd(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &s, const poplar::Tensor &offsets,
                    const poplar::Tensor &scale, const std::vector<std::size_t> &dims,
                    const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog, const SlicePlan &plan,
                    const poplar::OptionFlags &options, const poplar::DebugContext &dc = {});
void multiUpdateAdd(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &s,
                    poplar::ArrayRef<unsigned> offsets, const poplar::Tensor &scale, std::size_t dim,
                    poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                    const poplar::OptionFlags &options = {});
/// t's slice at offsets[i] = max(itself, s[i]).
void multiUpdateMax(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &s, const poplar::Tensor &offsets,
                    const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                    poplar::program::Sequence &prog, const SlicePlan &plan, const poplar::OptionFlags &options,
                    const poplar::DebugContext &dc = {});
/// t's slice at offsets[i] *= s[i].
void multiUpdateMul(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &s, const poplar::Tensor &offsets,
                    const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                    poplar::program::Sequence &prog, const SlicePlan &plan, const poplar::OptionFlags &options,
                    const poplar::DebugContext &dc = {});

/// Grouped forms: t is [G, ...], offsets [G, N] or [G, N, 1], dims index
/// each group's dimensions; group k slices (updates) t[k] at offsets[k].
/// The result (the slices s) is [G, N, group's slice shape].
poplar::Tensor createGroupedSliceableTensor(poplar::Graph &graph, const poplar::Type &type, std::size_t groupSize,
                                            const std::vector<std::size_t> &shape, const std::vector<std::size_t> &dims,
                                            const std::vector<std::size_t> &sizes, const SlicePlan &plan,
                                            const poplar::OptionFlags &options, const poplar::DebugContext &dc = {});
poplar::Tensor createGroupedSliceTensor(poplar::Graph &graph, const poplar::Type &type, std::size_t groupSize,
                                        const std::vector<std::size_t> &shape, const std::vector<std::size_t> &dims,
                                        const std::vector<std::size_t> &sizes, std::size_t numIndices,
                                        const SlicePlan &plan, const poplar::OptionFlags &options,
                                        const poplar::DebugContext &dc = {});
poplar::Tensor createGroupedIndicesTensor(poplar::Graph &graph, std::size_t groupSize,
                                          const std::vector<std::size_t> &dims, std::size_t numIndices,
                                          const SlicePlan &plan, const poplar::OptionFlags &options,
                                          const poplar::DebugContext &dc = {});
poplar::Tensor groupedMultiSlice(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &offsets,
                                 const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                                 poplar::program::Sequence &prog, const SlicePlan &plan,
                                 const poplar::OptionFlags &options, const poplar::DebugContext &dc = {});
void groupedMultiUpdate(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &s,
                        const poplar::Tensor &offsets, const std::vector<std::size_t> &dims,
                        const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog, const SlicePlan &plan,
                        const poplar::OptionFlags &options, const poplar::DebugContext &dc = {});
void groupedMultiUpdateAdd(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &s,
                           const poplar::Tensor &offsets, const poplar::Tensor &scale,
                           const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                           poplar::program::Sequence &prog, const SlicePlan &plan, const poplar::OptionFlags &options,
                           const poplar::DebugContext &dc = {});
void groupedMultiUpdateMax(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &s,
                           const poplar::Tensor &offsets, const std::vector<std::size_t> &dims,
                           const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog,
                           const SlicePlan &plan, const poplar::OptionFlags &options,
                           const poplar::DebugContext &dc = {});
void groupedMultiUpdateMul(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &s,
                           const poplar::Tensor &offsets, const std::vector<std::size_t> &dims,
                           const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog,
                           const SlicePlan &plan, const poplar::OptionFlags &options,
                           const poplar::DebugContext &dc = {});

namespace embedding {
/// A plan for slicing a {numEntries, outputSize} embedding (ipuxl: the one plan).
SlicePlan plan(const poplar::Graph &graph, const poplar::Type &dataType, std::size_t numEntries,
               std::size_t outputSize, const std::vector<std::size_t> &numLookups,
               const poplar::OptionFlags &options);
SlicePlan plan(const poplar::Graph &graph, const poplar::Type &dataType, std::size_t groupSize,
               std::size_t numEntries, std::size_t outputSize, const std::vector<std::size_t> &numLookups,
               const poplar::OptionFlags &options);
} // namespace embedding

} // namespace popops
