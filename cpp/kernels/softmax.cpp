// Softmax along attribute `axis` (non-negative): out = exp(x - max) / sum(exp(x - max)).
// Subtracting the slice maximum keeps exp from overflowing. float16 computes in
// float; float32 and float64 in double. A slice whose maximum is +inf or NaN
// gives NaN (as PyTorch); an all -inf slice gives NaN too (0/0).
//
// The float32 fast path of the forward softmax (float arithmetic with
// fastmath::exp) was removed: with it, data-parallel MNIST on 4 replicas
// drifted from the single-replica run (weights 1.35e-3 apart after 150
// steps, against 1.2e-7 on this exact path); see bench/README.md.
//
// SoftmaxGrad (dy, y) -> dx = y * (dy - sum(dy * y, axis)): PopART's
// SoftmaxGradOp, the softmax's gradient in two passes over each slice.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "../core/isa.hpp"
#include "common.hpp"

namespace ipuxl {
namespace {

constexpr int kLanes = 16;

// dx = y * (g - sum(g * y)) for rows [r0, r1) of length n.
inline void softmax_grad_rows_f32(const float* G, const float* Y, float* D, int64_t n, int64_t r0,
                                  int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* g = G + r * n;
    const float* y = Y + r * n;
    float* d = D + r * n;
    float sm[kLanes] = {};
    const int64_t nv = n - n % kLanes;
    for (int64_t j = 0; j < nv; j += kLanes)
      for (int l = 0; l < kLanes; ++l) sm[l] += g[j + l] * y[j + l];
    float s = 0.0f;
    for (int l = 0; l < kLanes; ++l) s += sm[l];
    for (int64_t j = nv; j < n; ++j) s += g[j] * y[j];
    for (int64_t j = 0; j < n; ++j) d[j] = y[j] * (g[j] - s);
  }
}

int64_t row_grain(int64_t n) { return std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)); }

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
          // Slices split over the pool: each is computed as alone, so the
          // split changes no result.
          parallel_for(outer, row_grain(n * inner), [&](int64_t o0, int64_t o1) {
          std::vector<A> e((size_t)n);
          for (int64_t o = o0; o < o1; ++o) {
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
  });
  if (!ok) d.fail(std::string("expected a floating-point input, got ") + dtype_name(in->dtype));
  return k;
}

std::unique_ptr<Kernel> softmax_grad_factory(const OpDesc& d) {
  d.expect_arity(2, 1);
  const TensorRef* g = d.in[0];
  const TensorRef* y = d.in[1];
  const TensorRef* out = d.out[0];
  d.expect_same_dtype(*g, *y);
  d.expect_same_dtype(*g, *out);
  d.expect_shape(*y, g->shape);
  d.expect_shape(*out, g->shape);
  const AxisSplit sp = split_at_axis(d, *g, d.attrs.i("axis"));
  const int64_t outer = sp.outer, n = sp.n, inner = sp.inner;
  if (g->dtype == DType::Float32 && inner == 1) {
    return make_kernel([=](RunContext&) {
      const float* G = g->as<float>();
      const float* Y = y->as<float>();
      float* D = out->as<float>();
      isa::parallel_for(outer, row_grain(n), [&](int64_t r0, int64_t r1) {
        softmax_grad_rows_f32(G, Y, D, n, r0, r1);
      });
    });
  }
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_FLOAT(g->dtype, {
    using T = scalar_t;
    using A = std::conditional_t<std::is_same_v<T, f16>, float, double>;
    k = make_kernel([=](RunContext&) {
      const T* G = g->as<T>();
      const T* Y = y->as<T>();
      T* D = out->as<T>();
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
          const int64_t base = o * n * inner + i;
          A s = 0;
          for (int64_t j = 0; j < n; ++j)
            s += (A)G[base + j * inner] * (A)Y[base + j * inner];
          for (int64_t j = 0; j < n; ++j) {
            const int64_t q = base + j * inner;
            D[q] = (T)((A)Y[q] * ((A)G[q] - s));
          }
        }
      }
    });
  });
  if (!ok) d.fail(std::string("expected a floating-point input, got ") + dtype_name(g->dtype));
  return k;
}

}  // namespace

IPUXL_REGISTER_KERNEL("Softmax", softmax_factory);
IPUXL_REGISTER_KERNEL("SoftmaxGrad", softmax_grad_factory);

}  // namespace ipuxl
