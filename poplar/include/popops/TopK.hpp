// ipuxl's PopLibs: popops::topK (popops/TopK.hpp). The k largest (or
// smallest) elements of each innermost-dimension slice of a tensor.
//
// ipuxl always returns them sorted (largest first for `largest`, else
// smallest first), which is also a valid answer for SortOrder::NONE, and
// always stably: equal values keep ascending index order. NaN counts as
// larger than every number.
#pragma once
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <utility>

namespace popops {

enum class SortOrder { NONE, ASCENDING, DESCENDING };

struct TopKParams {
  unsigned k;
  bool largest;
  SortOrder sortOrder;
  bool stableSort;
  TopKParams(unsigned k, bool largest, SortOrder sortOrder, bool stableSort = false) noexcept
      : k(k), largest(largest), sortOrder(sortOrder), stableSort(stableSort) {}
};

/// A tensor of `shape` laid out for topK (mapped linearly).
poplar::Tensor createTopKInput(poplar::Graph &graph, const poplar::Type &type, const std::vector<std::size_t> &shape,
                               const TopKParams &params, const poplar::DebugContext &dc = {});

/// The top k values of each innermost slice of `t`: shape of `t` with the
/// innermost dimension k. Throws poputil::poplibs_error if k is larger than
/// that dimension, or if sortOrder contradicts `largest` (ASCENDING with
/// largest, DESCENDING without: ipuxl sorts one way only).
poplar::Tensor topK(poplar::Graph &graph, poplar::program::Sequence &prog, const poplar::Tensor &t,
                    const TopKParams &params, const poplar::DebugContext &dc = {});

/// topK and the UNSIGNED_INT indices of the values within their slice.
std::pair<poplar::Tensor, poplar::Tensor> topKWithPermutation(poplar::Graph &graph, poplar::program::Sequence &prog,
                                                              const poplar::Tensor &t, const TopKParams &params,
                                                              const poplar::DebugContext &dc = {});

} // namespace popops
