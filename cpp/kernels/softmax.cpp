// Softmax along attribute `axis` (non-negative): out = exp(x - max) / sum(exp(x - max)).
// Subtracting the slice maximum keeps exp from overflowing. float16 computes in
// float; float32 and float64 in double. A slice whose maximum is +inf or NaN
// gives NaN (as PyTorch); an all -inf slice gives NaN too (0/0).
//
// The float32 fast path of the forward softmax (float arithmetic with
// fastmath::exp) was removed: with it, data-parallel MNIST on 4 replicas
// drifted from the single-replica run (weights 1.35e-3 apart after 150
// steps, against 1.2e-7 on this exact path). (The same
// 1.35e-3 shows without it at IPUXL_ISA=avx2, even between two
// single-replica runs with IPUXL_GEMM=core and =blas: rounding differences
// tip the ReLU network onto another trajectory, so the fast path was
// probably not wrong; not reintroduced here.) float32
// along a contiguous axis keeps the double arithmetic of the exact path
// (same maximum, same sequential double sum, one rounding to float at the
// end) but computes exp with exp_double below, vectorised per level
// instead of a scalar std::exp call: within ~2 ulp of double, so the float
// results are those of std::exp except where e/s lies within ~1e-16 of a
// float rounding boundary (about one element in 10^8, then by one ulp).
//
// float16 along a contiguous axis converts each row in bulk and runs the
// float32 rows' code (the same bits at every level, f16_block.hpp).
//
// SoftmaxGrad (dy, y) -> dx = y * (dy - sum(dy * y, axis)): PopART's
// SoftmaxGradOp, the softmax's gradient in two passes over each slice.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "../core/isa.hpp"
#include "common.hpp"
#include "f16_block.hpp"

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

// e^x in double, branch-free so that loops calling it vectorise: x clamped
// to [-708, 709] (below, e^x < 2^-1021 and every softmax output it feeds
// rounds to float zero as e^x itself would; NaN passes the clamps), then
// e^x = 2^n e^r with n = round(x / ln 2) (the 1.5 * 2^52 shifter leaves n
// in the low bits: no float-to-int conversion), r = x - n ln 2 in two parts
// (fdlibm's split; |r| <= 0.347), e^r by its Taylor polynomial to degree 13
// (truncation below 5e-18), 2^n built in the exponent field.
inline double exp_double(double x) {
  x = x < -708.0 ? -708.0 : x;
  x = x > 709.0 ? 709.0 : x;
  constexpr double kShift = 0x1.8p52;
  const double t = x * 1.4426950408889634 + kShift;
  const double n = t - kShift;
  const double r = (x - n * 6.93147180369123816490e-01) - n * 1.90821492927058770002e-10;
  double p = 1.0 / 6227020800.0;  // 1/13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  int64_t ti, si;
  std::memcpy(&ti, &t, sizeof ti);
  std::memcpy(&si, &kShift, sizeof si);
  const int64_t bits = (ti - si + 1023) << 52;
  double scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// Softmax of rows [r0, r1) of length n, float32 in and out, double inside:
// e[j] = exp(x[j] - max) (vectorised), s = sum of e in order, y = e / s.
inline void softmax_rows_f32(const float* I, float* O, int64_t n, double* e, int64_t r0,
                             int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const float* x = I + r * n;
    float* y = O + r * n;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < n; ++j) {
      const double v = x[j];
      m = (std::isnan(v) || v > m) ? v : m;
    }
    for (int64_t j = 0; j < n; ++j) e[j] = exp_double((double)x[j] - m);
    double s = 0;
    for (int64_t j = 0; j < n; ++j) s += e[j];
    for (int64_t j = 0; j < n; ++j) y[j] = (float)(e[j] / s);
  }
}

std::unique_ptr<Kernel> softmax_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  const TensorRef* in = d.in[0];
  const TensorRef* out = d.out[0];
  d.expect_same_dtype(*in, *out);
  d.expect_shape(*out, in->shape);
  const AxisSplit sp = split_at_axis(d, *in, d.attrs.i("axis"));
  const int64_t outer = sp.outer, n = sp.n, inner = sp.inner;
  if (in->dtype == DType::Float32 && inner == 1) {
    return make_kernel([=](RunContext&) {
      if (outer == 0 || n == 0) return;
      const float* I = in->as<float>();
      float* O = out->as<float>();
      parallel_for(outer, row_grain(n), [&](int64_t r0, int64_t r1) {
        std::vector<double> e((size_t)n);
        double* ep = e.data();
        isa::run([&](int64_t b, int64_t end) { softmax_rows_f32(I, O, n, ep, b, end); }, r0, r1);
      });
    });
  }
  if (in->dtype == DType::Float16 && inner == 1) {
    // float16 rows: converted in bulk, the float32 rows' double arithmetic
    // (f16blk::run_exact: the same bits at every level), rounded to float
    // and then to float16.
    return make_kernel([=](RunContext&) {
      if (outer == 0 || n == 0) return;
      const f16* I = in->as<f16>();
      f16* O = out->as<f16>();
      parallel_for(outer, row_grain(n), [&](int64_t r0, int64_t r1) {
        std::vector<double> e((size_t)n);
        std::vector<float> xf((size_t)(2 * n));
        double* ep = e.data();
        float *xp = xf.data(), *yp = xf.data() + n;
        for (int64_t r = r0; r < r1; ++r) {
          half::to_float(I + r * n, xp, n);
          f16blk::run_exact([&](int64_t b, int64_t end) { softmax_rows_f32(xp, yp, n, ep, b, end); },
                            0, 1);
          half::from_float(yp, O + r * n, n);
        }
      });
    });
  }
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
  if (g->dtype == DType::Float16 && inner == 1) {
    // float16 rows: converted in bulk, the float32 rows' formula
    // (f16blk::run_exact), rounded once.
    return make_kernel([=](RunContext&) {
      const f16* G = g->as<f16>();
      const f16* Y = y->as<f16>();
      f16* D = out->as<f16>();
      parallel_for(outer, row_grain(n), [&](int64_t r0, int64_t r1) {
        std::vector<float> buf((size_t)(3 * n));
        float *gp = buf.data(), *yp = gp + n, *dp = yp + n;
        for (int64_t r = r0; r < r1; ++r) {
          half::to_float(G + r * n, gp, n);
          half::to_float(Y + r * n, yp, n);
          f16blk::run_exact([&](int64_t b, int64_t e) { softmax_grad_rows_f32(gp, yp, dp, n, b, e); },
                            0, 1);
          half::from_float(dp, D + r * n, n);
        }
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
