// ipuxl's PopLibs: poputil broadcasting of tensor views (NumPy rules).
#pragma once
#include <poplar/Tensor.hpp>
#include <vector>

namespace poputil {
/// Broadcasts `a` (as a view) to `shape`; throws poplibs_error when it cannot.
void broadcastToMatch(poplar::Tensor &a, const std::vector<std::size_t> &shape);
/// Broadcasts a and b to their common shape.
void broadcastToMatch(poplar::Tensor &a, poplar::Tensor &b);
void broadcastToMatch(poplar::Tensor &a, poplar::Tensor &b, poplar::Tensor &c);
bool canBroadcastToMatch(const poplar::Tensor &a, const poplar::Tensor &b);
} // namespace poputil
