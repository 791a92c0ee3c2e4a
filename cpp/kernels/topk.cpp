// TopK along attribute `axis` (non-negative): the k largest (largest=1) or
// smallest values of each slice with their int32 indices. Results are always
// in sorted order (largest first, or smallest first), which is a valid
// answer for sorted=0 too. Equal values keep ascending index order; NaN
// counts as larger than every number (as torch.topk).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <type_traits>
#include <vector>

#include "common.hpp"

namespace ipuxl {
namespace {

std::unique_ptr<Kernel> topk_factory(const OpDesc& d) {
  d.expect_arity(1, 2);
  const TensorRef* in = d.in[0];
  const TensorRef* vals = d.out[0];
  const TensorRef* idxs = d.out[1];
  d.expect_same_dtype(*in, *vals);
  if (idxs->dtype != DType::Int32) d.fail("the indices output must be int32");
  if (in->dtype == DType::Bool) d.fail("bool inputs are not supported");
  if (in->rank() == 0) d.fail("the input must have rank >= 1");
  const int64_t axis = d.attrs.i("axis");
  const int64_t kk = d.attrs.i("k");
  const bool largest = d.attrs.i("largest", 1) != 0;
  if (axis < 0 || axis >= in->rank())
    d.fail("axis " + std::to_string(axis) + " is out of range for input shape " +
           shape_str(in->shape));
  const int64_t n = in->shape[(size_t)axis];
  if (kk < 0 || kk > n)
    d.fail("k = " + std::to_string(kk) + " must be in [0, " + std::to_string(n) + "]");
  if (n > (int64_t)std::numeric_limits<int32_t>::max()) d.fail("axis too long for int32 indices");
  Shape oshape = in->shape;
  oshape[(size_t)axis] = kk;
  d.expect_shape(*vals, oshape);
  d.expect_shape(*idxs, oshape);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= in->shape[(size_t)i];
  for (int64_t i = axis + 1; i < in->rank(); ++i) inner *= in->shape[(size_t)i];
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_NUMERIC(in->dtype, {
    using T = scalar_t;
    using C = ct_t<T>;
    k = make_kernel(
        [=](RunContext&) {
          if (outer == 0 || inner == 0) return;  // empty: no row to sort
          const T* I = in->as<T>();
          T* V = vals->as<T>();
          int32_t* X = idxs->as<int32_t>();
          std::vector<int32_t> order((size_t)n);
          std::vector<C> row((size_t)n);
          // a before b in the result? NaN is the largest value.
          auto before = [&](int32_t a, int32_t b) {
            C x = row[(size_t)a], y = row[(size_t)b];
            bool xn = false, yn = false;
            if constexpr (std::is_floating_point_v<C>) { xn = std::isnan(x); yn = std::isnan(y); }
            bool x_gt, y_gt;  // strict orders with NaN on top
            if (xn || yn) { x_gt = xn && !yn; y_gt = yn && !xn; }
            else { x_gt = x > y; y_gt = y > x; }
            if (x_gt == y_gt) return a < b;  // equal (or both NaN): lower index first
            return largest ? x_gt : y_gt;
          };
          for (int64_t o = 0; o < outer; ++o) {
            for (int64_t i = 0; i < inner; ++i) {
              const int64_t base = o * n * inner + i;
              const int64_t obase = o * kk * inner + i;
              for (int64_t j = 0; j < n; ++j) row[(size_t)j] = (C)I[base + j * inner];
              std::iota(order.begin(), order.end(), 0);
              std::partial_sort(order.begin(), order.begin() + kk, order.end(), before);
              for (int64_t j = 0; j < kk; ++j) {
                V[obase + j * inner] = I[base + (int64_t)order[(size_t)j] * inner];
                X[obase + j * inner] = order[(size_t)j];
              }
            }
          }
        });
  });
  if (!ok) d.fail(std::string("unsupported dtype ") + dtype_name(in->dtype));
  return k;
}

}  // namespace

IPUXL_REGISTER_KERNEL("TopK", topk_factory);

}  // namespace ipuxl
