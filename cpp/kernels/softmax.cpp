// Softmax along attribute `axis` (non-negative): out = exp(x - max) / sum(exp(x - max)).
// Subtracting the slice maximum keeps exp from overflowing. float16 computes in
// float; float32 and float64 in double. A slice whose maximum is +inf or NaN
// gives NaN (as PyTorch); an all -inf slice gives NaN too (0/0).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "common.hpp"

namespace ipuxl {
namespace {

std::unique_ptr<Kernel> softmax_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  const TensorRef* in = d.in[0];
  const TensorRef* out = d.out[0];
  d.expect_same_dtype(*in, *out);
  d.expect_shape(*out, in->shape);
  const AxisSplit sp = split_at_axis(d, *in, d.attrs.i("axis"));
  const int64_t outer = sp.outer, n = sp.n, inner = sp.inner;
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_FLOAT(in->dtype, {
    using T = scalar_t;
    using A = std::conditional_t<std::is_same_v<T, f16>, float, double>;
    k = make_kernel(
        [=](RunContext&) {
          if (outer == 0 || inner == 0) return;  // empty: no row to hold in `e`
          const T* I = in->as<T>();
          T* O = out->as<T>();
          std::vector<A> e((size_t)n);
          for (int64_t o = 0; o < outer; ++o) {
            for (int64_t i = 0; i < inner; ++i) {
              const int64_t base = o * n * inner + i;
              A m = -std::numeric_limits<A>::infinity();
              for (int64_t j = 0; j < n; ++j) {
                A v = (A)I[base + j * inner];
                m = (std::isnan(v) || v > m) ? v : m;
              }
              A s = 0;
              for (int64_t j = 0; j < n; ++j) {
                e[(size_t)j] = std::exp((A)I[base + j * inner] - m);
                s += e[(size_t)j];
              }
              for (int64_t j = 0; j < n; ++j) O[base + j * inner] = (T)(e[(size_t)j] / s);
            }
          }
        });
  });
  if (!ok) d.fail(std::string("expected a floating-point input, got ") + dtype_name(in->dtype));
  return k;
}

}  // namespace

IPUXL_REGISTER_KERNEL("Softmax", softmax_factory);

}  // namespace ipuxl
