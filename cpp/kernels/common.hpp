// Helpers shared by kernels: NumPy broadcasting and strided iteration.
#pragma once

#include <type_traits>
#include <vector>

#include "../core/isa.hpp"
#include "../core/kernel.hpp"
#include "../core/parallel.hpp"

namespace ipuxl {

// Elements per thread below which an elementwise kernel stays on one thread
// (waking a sleeping worker costs tens to hundreds of microseconds on a VM,
// so only large tensors are worth splitting).
constexpr int64_t kElementwiseGrain = 32768;

// parallel_for for an elementwise loop over storage type T: float32 loops
// get one copy per instruction-set level (isa::parallel_for: vectorised for
// AVX2 or AVX-512 when that level is in use), other types one baseline
// copy (they are rarely hot, and each copy is code in the binary).
template <class T, class F>
void elementwise_for(int64_t n, int64_t grain, const F& f) {
  if constexpr (std::is_same_v<T, float>)
    isa::parallel_for(n, grain, f);
  else
    parallel_for(n, grain, f);
}

// Strides (in elements) of `in` when read at the indices of `out_shape`
// under NumPy broadcasting: broadcast axes get stride 0. Throws if the
// shapes do not broadcast to out_shape.
std::vector<int64_t> broadcast_strides(const OpDesc& d, const Shape& in, const Shape& out_shape);

// NumPy broadcast of two shapes, or nullopt-like failure via `ok`.
Shape broadcast_shapes(const Shape& a, const Shape& b, bool* ok);

// Row-major contiguous strides of a shape.
std::vector<int64_t> contiguous_strides(const Shape& s);

// Calls fn(out_index, in_offsets...) for each element of out_shape, with the
// offsets of each input computed from its (broadcast) strides. The innermost
// dimension is handed over as a run so fn can be a tight loop:
//   fn(out_offset, n, offsets[], inner_strides[])
template <size_t N, class F>
void for_each_broadcast(const Shape& out_shape, const std::vector<int64_t> (&strides)[N], F&& fn) {
  const int64_t rank = (int64_t)out_shape.size();
  int64_t total = shape_nelms(out_shape);
  if (total == 0) return;
  if (rank == 0) {
    int64_t offs[N] = {};
    int64_t inner[N] = {};
    fn((int64_t)0, (int64_t)1, offs, inner);
    return;
  }
  const int64_t inner_n = out_shape[rank - 1];
  int64_t inner[N];
  for (size_t k = 0; k < N; ++k) inner[k] = strides[k][rank - 1];
  std::vector<int64_t> idx((size_t)rank, 0);
  int64_t offs[N] = {};
  for (int64_t out = 0; out < total; out += inner_n) {
    fn(out, inner_n, offs, inner);
    // advance the outer index (all dims but the last)
    for (int64_t d = rank - 2; d >= 0; --d) {
      idx[d]++;
      for (size_t k = 0; k < N; ++k) offs[k] += strides[k][d];
      if (idx[d] < out_shape[d]) break;
      for (size_t k = 0; k < N; ++k) offs[k] -= strides[k][d] * out_shape[d];
      idx[d] = 0;
    }
  }
}

// A tensor viewed as [outer, n, inner] around one axis (for ops that run
// along an axis: softmax, cumsum). Checks rank >= 1 and the axis range.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
AxisSplit split_at_axis(const OpDesc& d, const TensorRef& t, int64_t axis);

}  // namespace ipuxl
