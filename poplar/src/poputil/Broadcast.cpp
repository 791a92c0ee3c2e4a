// ipuxl's PopLibs: poputil broadcasting.
#include "../popops/builtin.hpp"

#include <poputil/Broadcast.hpp>

#include <algorithm>

// The shared broadcasting rules live here (libpoputil) so that popops and
// poputil users both link them.
namespace popops {
namespace ipuxl {
std::vector<std::size_t> broadcastShapes(const std::vector<std::vector<std::size_t>> &shapes, const std::string &op) {
  std::size_t rank = 0;
  for (const auto &s : shapes) rank = std::max(rank, s.size());
  std::vector<std::size_t> out(rank, 1);
  for (const auto &s : shapes)
    for (std::size_t k = 0; k < s.size(); ++k) {
      std::size_t d = rank - s.size() + k;
      if (s[k] == out[d] || s[k] == 1) continue;
      if (out[d] == 1) {
        out[d] = s[k];
        continue;
      }
      std::string all;
      for (const auto &x : shapes) {
        all += "{";
        for (std::size_t j = 0; j < x.size(); ++j) all += (j ? "," : "") + std::to_string(x[j]);
        all += "} ";
      }
      throw poputil::poplibs_error(op + ": operand shapes " + all + "do not broadcast");
    }
  return out;
}

poplar::Tensor broadcastTo(const poplar::Tensor &t, const std::vector<std::size_t> &shape) {
  poplar::Tensor r = t;
  while (r.rank() < shape.size()) r = r.expand({0});
  for (unsigned d = 0; d < shape.size(); ++d)
    if (r.dim(d) != shape[d]) r = r.broadcast(static_cast<unsigned>(shape[d]), d);
  return r;
}

} // namespace ipuxl
} // namespace popops

namespace poputil {
void broadcastToMatch(poplar::Tensor &a, const std::vector<std::size_t> &shape) {
  if (popops::ipuxl::broadcastShapes({a.shape(), shape}, "poputil::broadcastToMatch") != shape)
    throw poplibs_error("poputil::broadcastToMatch: " + a.shapeToString() + " does not broadcast to the given shape");
  a = popops::ipuxl::broadcastTo(a, shape);
}
void broadcastToMatch(poplar::Tensor &a, poplar::Tensor &b) {
  auto s = popops::ipuxl::broadcastShapes({a.shape(), b.shape()}, "poputil::broadcastToMatch");
  a = popops::ipuxl::broadcastTo(a, s);
  b = popops::ipuxl::broadcastTo(b, s);
}
void broadcastToMatch(poplar::Tensor &a, poplar::Tensor &b, poplar::Tensor &c) {
  auto s = popops::ipuxl::broadcastShapes({a.shape(), b.shape(), c.shape()}, "poputil::broadcastToMatch");
  a = popops::ipuxl::broadcastTo(a, s);
  b = popops::ipuxl::broadcastTo(b, s);
  c = popops::ipuxl::broadcastTo(c, s);
}
bool canBroadcastToMatch(const poplar::Tensor &a, const poplar::Tensor &b) {
  try {
    popops::ipuxl::broadcastShapes({a.shape(), b.shape()}, "");
    return true;
  } catch (const poplibs_error &) {
    return false;
  }
}
} // namespace poputil
