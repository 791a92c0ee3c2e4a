// Normalisations over the channel axis (axis 1) of an (N, C, *) tensor.
//
//   GroupNorm (x, weight [C], bias [C]) -> (y, mean [N*G], inv_std_dev [N*G])
//     attrs: num_groups G, epsilon. Each (sample n, group g) normalises its
//     C/G channels times the spatial elements (a contiguous block):
//     y = (x - mean) * inv_std_dev * weight[c] + bias[c], inv_std_dev =
//     1 / sqrt(var + eps) with the biased variance. mean and inv_std_dev are
//     float32 (PopART's GroupNormOp outputs, kept for the gradient).
//   GroupNormGrad (x, weight, mean, inv_std_dev, dy) -> (dx, dweight, dbias)
//     with xhat = (x - mean) * inv_std_dev and, per (n, g), averages over
//     its elements: dx = inv_std_dev * (dy*w - avg(dy*w) - xhat * avg(dy*w*xhat)),
//     dweight[c] = sum dy * xhat, dbias[c] = sum dy (over n and space).
//   BatchNormInference (x, scale, bias, mean, var) -> y
//     y = (x - mean[c]) / sqrt(var[c] + epsilon) * scale[c] + bias[c].
//
// float16 computes in float (statistics accumulate in double); float32 in
// float with double statistics. float16 layer norms (one group, no spatial
// axes) convert in bulk and run the float32 row kernels (f16_block.hpp).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "../core/isa.hpp"
#include "../core/parallel.hpp"
#include "common.hpp"
#include "f16_block.hpp"

namespace ipuxl {
namespace {

// float32 layer norm over rows (one group, no spatial axes: an (N, C) input,
// the transformer's LayerNorm): the same formulas with the double sums kept in
// 8 independent lanes, so that each level vectorises them (the plain loops
// are one serial chain of double adds per row), and dweight/dbias summed over
// rows for blocks of columns (contiguous rows instead of a column walk with
// stride C). Every column's sum runs over the rows in order, whatever the
// thread count.
constexpr int kDL = 8;

inline double lane_sum(const double* a) {
  double s = 0.0;
  for (int l = 0; l < kDL; ++l) s += a[l];
  return s;
}

inline void layer_norm_rows_f32(const float* X, const float* W, const float* B, float* Y,
                                float* MEAN, float* INV, int64_t C, double eps, int64_t r0,
                                int64_t r1) {
  const int64_t cv = C - C % kDL;
  for (int64_t r = r0; r < r1; ++r) {
    const float* x = X + r * C;
    double a[kDL] = {};
    for (int64_t j = 0; j < cv; j += kDL)
      for (int l = 0; l < kDL; ++l) a[l] += (double)x[j + l];
    double s = lane_sum(a);
    for (int64_t j = cv; j < C; ++j) s += (double)x[j];
    const double mean = C ? s / (double)C : 0.0;
    double v[kDL] = {};
    for (int64_t j = 0; j < cv; j += kDL)
      for (int l = 0; l < kDL; ++l) {
        const double c = (double)x[j + l] - mean;
        v[l] += c * c;
      }
    double vs = lane_sum(v);
    for (int64_t j = cv; j < C; ++j) {
      const double c = (double)x[j] - mean;
      vs += c * c;
    }
    const double var = C ? vs / (double)C : 0.0;
    const float inv = (float)(1.0 / std::sqrt(var + eps));
    const float m = (float)mean;
    MEAN[r] = m;
    INV[r] = inv;
    float* y = Y + r * C;
    for (int64_t j = 0; j < C; ++j) {
      const float aa = inv * W[j];
      y[j] = x[j] * aa + (B[j] - m * aa);
    }
  }
}

inline void layer_norm_grad_rows_f32(const float* X, const float* W, const float* MEAN,
                                     const float* INV, const float* DY, float* DX, int64_t C,
                                     int64_t r0, int64_t r1) {
  const int64_t cv = C - C % kDL;
  for (int64_t r = r0; r < r1; ++r) {
    const float m = MEAN[r], inv = INV[r];
    const float* x = X + r * C;
    const float* g = DY + r * C;
    double a1[kDL] = {}, a2[kDL] = {};
    for (int64_t j = 0; j < cv; j += kDL)
      for (int l = 0; l < kDL; ++l) {
        const float gw = g[j + l] * W[j + l];
        const float xh = (x[j + l] - m) * inv;
        a1[l] += gw;
        a2[l] += (double)gw * xh;
      }
    double s1 = lane_sum(a1), s2 = lane_sum(a2);
    for (int64_t j = cv; j < C; ++j) {
      const float gw = g[j] * W[j];
      const float xh = (x[j] - m) * inv;
      s1 += gw;
      s2 += (double)gw * xh;
    }
    const float b1 = C ? (float)(s1 / (double)C) : 0.0f;
    const float b2 = C ? (float)(s2 / (double)C) : 0.0f;
    float* d = DX + r * C;
    for (int64_t j = 0; j < C; ++j) {
      const float xh = (x[j] - m) * inv;
      d[j] = inv * (g[j] * W[j] - b1 - xh * b2);
    }
  }
}

// dweight[c] = sum_r dy[r,c] xhat[r,c], dbias[c] = sum_r dy[r,c] for columns [c0, c1).
inline void layer_norm_param_grad_f32(const float* X, const float* MEAN, const float* INV,
                                      const float* DY, float* DW, float* DB, int64_t N, int64_t C,
                                      int64_t c0, int64_t c1) {
  constexpr int64_t kBlk = 64;
  for (int64_t cb = c0; cb < c1; cb += kBlk) {
    const int64_t w = std::min<int64_t>(kBlk, c1 - cb);
    double sw[kBlk] = {}, sb[kBlk] = {};
    for (int64_t r = 0; r < N; ++r) {
      const float m = MEAN[r], inv = INV[r];
      const float* x = X + r * C + cb;
      const float* g = DY + r * C + cb;
      for (int64_t j = 0; j < w; ++j) {
        sw[j] += (double)g[j] * ((x[j] - m) * inv);
        sb[j] += (double)g[j];
      }
    }
    for (int64_t j = 0; j < w; ++j) {
      DW[cb + j] = (float)sw[j];
      DB[cb + j] = (float)sb[j];
    }
  }
}

struct NormGeom {
  int64_t N = 0, C = 0, G = 1, Cg = 0, S = 1;  // S: spatial elements per channel
};

NormGeom norm_geom(const OpDesc& d, const TensorRef& x, int64_t G) {
  if (x.rank() < 2) d.fail("the input '" + x.name + "' must have rank >= 2 (N, C, ...)");
  NormGeom g;
  g.N = x.shape[0];
  g.C = x.shape[1];
  g.G = G;
  if (G < 1 || g.C % G != 0)
    d.fail("num_groups " + std::to_string(G) + " must divide the " + std::to_string(g.C) +
           " channels of '" + x.name + "'");
  g.Cg = g.C / G;
  g.S = g.C == 0 || g.N == 0 ? 0 : x.nelms / (g.N * g.C);
  return g;
}

void expect_vec(const OpDesc& d, const TensorRef* t, int64_t n, DType dt) {
  if (t->dtype != dt) d.fail("'" + t->name + "' must have dtype " + dtype_name(dt));
  if (t->nelms != n) d.fail("'" + t->name + "' must have " + std::to_string(n) + " elements");
}

template <class T>
std::unique_ptr<Kernel> group_norm_kernel(const OpDesc& d, const NormGeom g, double eps) {
  const TensorRef *x = d.in[0], *w = d.in[1], *b = d.in[2];
  const TensorRef *y = d.out[0], *mo = d.out[1], *io = d.out[2];
  const int64_t blk = g.Cg * g.S;
  if constexpr (std::is_same_v<T, f16>) {
    if (g.G == 1 && g.S == 1) {
      // float16 layer norm: rows converted in bulk, the float32 rows' formulas
      // (level-independent bits: f16blk::run_exact), the output rounded once.
      return make_kernel([=](RunContext&) {
        const int64_t C = g.C;
        std::vector<float> wb((size_t)(2 * C));
        half::to_float(w->as<f16>(), wb.data(), C);
        half::to_float(b->as<f16>(), wb.data() + C, C);
        const float *W = wb.data(), *B = wb.data() + C;
        const f16* X = x->as<f16>();
        f16* Y = y->as<f16>();
        float *MEAN = mo->as<float>(), *INV = io->as<float>();
        const int64_t rows = std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1));
        parallel_for(g.N, rows, [&](int64_t r0, int64_t r1) {
          std::vector<float> buf((size_t)(2 * rows * C));
          for (int64_t q0 = r0; q0 < r1; q0 += rows) {
            const int64_t q1 = std::min(r1, q0 + rows), len = (q1 - q0) * C;
            float *xf = buf.data(), *yf = buf.data() + rows * C;
            half::to_float(X + q0 * C, xf, len);
            f16blk::run_exact([&](int64_t a0, int64_t a1) {
              layer_norm_rows_f32(xf, W, B, yf, MEAN + q0, INV + q0, C, eps, a0, a1);
            }, 0, q1 - q0);
            half::from_float(yf, Y + q0 * C, len);
          }
        });
      });
    }
  }
  if constexpr (std::is_same_v<T, float>) {
    if (g.G == 1 && g.S == 1) {
      return make_kernel([=](RunContext&) {
        const float *X = x->as<float>(), *W = w->as<float>(), *B = b->as<float>();
        float *Y = y->as<float>(), *MEAN = mo->as<float>(), *INV = io->as<float>();
        isa::parallel_for(g.N, std::max<int64_t>(1, 16384 / std::max<int64_t>(g.C, 1)),
                          [&](int64_t r0, int64_t r1) {
                            layer_norm_rows_f32(X, W, B, Y, MEAN, INV, g.C, eps, r0, r1);
                          });
      });
    }
  }
  return make_kernel(
      [=](RunContext&) {
        const T* X = x->as<T>();
        const T* W = w->as<T>();
        const T* B = b->as<T>();
        T* Y = y->as<T>();
        float* MEAN = mo->as<float>();
        float* INV = io->as<float>();
        parallel_for(g.N * g.G, std::max<int64_t>(1, 16384 / std::max<int64_t>(blk, 1)),
                     [&](int64_t u0, int64_t u1) {
                       for (int64_t u = u0; u < u1; ++u) {
                         const T* xs = X + u * blk;
                         double s = 0.0;
                         for (int64_t i = 0; i < blk; ++i) s += (double)(float)xs[i];
                         const double mean = blk ? s / (double)blk : 0.0;
                         double v = 0.0;
                         for (int64_t i = 0; i < blk; ++i) {
                           const double c = (double)(float)xs[i] - mean;
                           v += c * c;
                         }
                         const double var = blk ? v / (double)blk : 0.0;
                         const float inv = (float)(1.0 / std::sqrt(var + eps));
                         const float m = (float)mean;
                         MEAN[u] = m;
                         INV[u] = inv;
                         const int64_t c0 = (u % g.G) * g.Cg;
                         T* ys = Y + u * blk;
                         for (int64_t c = 0; c < g.Cg; ++c) {
                           const float a = inv * (float)W[c0 + c];
                           const float bb = (float)B[c0 + c] - m * a;
                           const T* xr = xs + c * g.S;
                           T* yr = ys + c * g.S;
                           for (int64_t i = 0; i < g.S; ++i) yr[i] = (T)((float)xr[i] * a + bb);
                         }
                       }
                     });
      });
}

std::unique_ptr<Kernel> group_norm_factory(const OpDesc& d) {
  d.expect_arity(3, 3);
  const TensorRef* x = d.in[0];
  const NormGeom g = norm_geom(d, *x, d.attrs.i("num_groups"));
  const double eps = d.attrs.f("epsilon");
  expect_vec(d, d.in[1], g.C, x->dtype);
  expect_vec(d, d.in[2], g.C, x->dtype);
  d.expect_shape(*d.out[0], x->shape);
  d.expect_same_dtype(*x, *d.out[0]);
  expect_vec(d, d.out[1], g.N * g.G, DType::Float32);
  expect_vec(d, d.out[2], g.N * g.G, DType::Float32);
  if (x->dtype == DType::Float32) return group_norm_kernel<float>(d, g, eps);
  if (x->dtype == DType::Float16) return group_norm_kernel<f16>(d, g, eps);
  d.fail(std::string("expected a float16 or float32 input, got ") + dtype_name(x->dtype));
}

template <class T>
std::unique_ptr<Kernel> group_norm_grad_kernel(const OpDesc& d, const NormGeom g) {
  const TensorRef *x = d.in[0], *w = d.in[1], *mi = d.in[2], *ii = d.in[3], *dy = d.in[4];
  const TensorRef *dx = d.out[0], *dw = d.out[1], *db = d.out[2];
  const int64_t blk = g.Cg * g.S;
  if constexpr (std::is_same_v<T, f16>) {
    if (g.G == 1 && g.S == 1) {
      // float16 layer norm gradient: X, dY and the weight converted in bulk,
      // the float32 rows' and columns' formulas (f16blk::run_exact), each
      // output rounded once.
      return make_kernel([=](RunContext&) {
        const int64_t N = g.N, C = g.C, n = N * C;
        thread_local std::vector<float> scratch;
        if ((int64_t)scratch.size() < 3 * n + C) scratch.resize((size_t)(3 * n + C));
        float *X = scratch.data(), *DY = X + n, *DX = DY + n, *W = DX + n;
        half::to_float_parallel(x->as<f16>(), X, n);
        half::to_float_parallel(dy->as<f16>(), DY, n);
        half::to_float(w->as<f16>(), W, C);
        const float *MEAN = mi->as<float>(), *INV = ii->as<float>();
        parallel_for(N, std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1)),
                     [&](int64_t r0, int64_t r1) {
                       f16blk::run_exact([&](int64_t a0, int64_t a1) {
                         layer_norm_grad_rows_f32(X, W, MEAN, INV, DY, DX, C, a0, a1);
                       }, r0, r1);
                       half::from_float(DX + r0 * C, dx->as<f16>() + r0 * C, (r1 - r0) * C);
                     });
        std::vector<float> dwb((size_t)(2 * C));
        float *DW = dwb.data(), *DB = DW + C;
        const int64_t nblk = (C + 63) / 64;
        parallel_for(nblk, std::max<int64_t>(1, 16384 / std::max<int64_t>(64 * N, 1)),
                     [&](int64_t b0, int64_t b1) {
                       f16blk::run_exact([&](int64_t c0, int64_t c1) {
                         layer_norm_param_grad_f32(X, MEAN, INV, DY, DW, DB, N, C, c0, c1);
                       }, b0 * 64, std::min<int64_t>(C, b1 * 64));
                     });
        half::from_float(DW, dw->as<f16>(), C);
        half::from_float(DB, db->as<f16>(), C);
      });
    }
  }
  if constexpr (std::is_same_v<T, float>) {
    if (g.G == 1 && g.S == 1) {
      return make_kernel([=](RunContext&) {
        const float *X = x->as<float>(), *W = w->as<float>(), *DY = dy->as<float>();
        const float *MEAN = mi->as<float>(), *INV = ii->as<float>();
        float *DX = dx->as<float>(), *DW = dw->as<float>(), *DB = db->as<float>();
        isa::parallel_for(g.N, std::max<int64_t>(1, 16384 / std::max<int64_t>(g.C, 1)),
                          [&](int64_t r0, int64_t r1) {
                            layer_norm_grad_rows_f32(X, W, MEAN, INV, DY, DX, g.C, r0, r1);
                          });
        // Column blocks of 64: whole blocks per thread.
        const int64_t nblk = (g.C + 63) / 64;
        isa::parallel_for(nblk, std::max<int64_t>(1, 16384 / std::max<int64_t>(64 * g.N, 1)),
                          [&](int64_t b0, int64_t b1) {
                            layer_norm_param_grad_f32(X, MEAN, INV, DY, DW, DB, g.N, g.C, b0 * 64,
                                                      std::min<int64_t>(g.C, b1 * 64));
                          });
      });
    }
  }
  return make_kernel(
      [=](RunContext&) {
        const T* X = x->as<T>();
        const T* W = w->as<T>();
        const float* MEAN = mi->as<float>();
        const float* INV = ii->as<float>();
        const T* DY = dy->as<T>();
        T* DX = dx->as<T>();
        parallel_for(g.N * g.G, std::max<int64_t>(1, 16384 / std::max<int64_t>(blk, 1)),
                     [&](int64_t u0, int64_t u1) {
                       for (int64_t u = u0; u < u1; ++u) {
                         const int64_t c0 = (u % g.G) * g.Cg;
                         const float m = MEAN[u], inv = INV[u];
                         const T* xs = X + u * blk;
                         const T* gs = DY + u * blk;
                         double s1 = 0.0, s2 = 0.0;
                         for (int64_t c = 0; c < g.Cg; ++c) {
                           const float wc = (float)W[c0 + c];
                           for (int64_t i = 0; i < g.S; ++i) {
                             const float gw = (float)gs[c * g.S + i] * wc;
                             const float xh = ((float)xs[c * g.S + i] - m) * inv;
                             s1 += gw;
                             s2 += (double)gw * xh;
                           }
                         }
                         const float a1 = blk ? (float)(s1 / (double)blk) : 0.0f;
                         const float a2 = blk ? (float)(s2 / (double)blk) : 0.0f;
                         T* out = DX + u * blk;
                         for (int64_t c = 0; c < g.Cg; ++c) {
                           const float wc = (float)W[c0 + c];
                           for (int64_t i = 0; i < g.S; ++i) {
                             const int64_t k = c * g.S + i;
                             const float xh = ((float)xs[k] - m) * inv;
                             out[k] = (T)(inv * ((float)gs[k] * wc - a1 - xh * a2));
                           }
                         }
                       }
                     });
        T* DW = dw->as<T>();
        T* DB = db->as<T>();
        parallel_for(g.C, std::max<int64_t>(1, 16384 / std::max<int64_t>(g.N * g.S, 1)),
                     [&](int64_t c0, int64_t c1) {
                       for (int64_t c = c0; c < c1; ++c) {
                         double sw = 0.0, sb = 0.0;
                         const int64_t grp = c / g.Cg;
                         for (int64_t n = 0; n < g.N; ++n) {
                           const int64_t u = n * g.G + grp;
                           const float m = MEAN[u], inv = INV[u];
                           const T* xr = X + (n * g.C + c) * g.S;
                           const T* gr = DY + (n * g.C + c) * g.S;
                           for (int64_t i = 0; i < g.S; ++i) {
                             const float gv = (float)gr[i];
                             sw += (double)gv * (((float)xr[i] - m) * inv);
                             sb += gv;
                           }
                         }
                         DW[c] = (T)sw;
                         DB[c] = (T)sb;
                       }
                     });
      });
}

std::unique_ptr<Kernel> group_norm_grad_factory(const OpDesc& d) {
  d.expect_arity(5, 3);
  const TensorRef* x = d.in[0];
  const NormGeom g = norm_geom(d, *x, d.attrs.i("num_groups"));
  expect_vec(d, d.in[1], g.C, x->dtype);
  expect_vec(d, d.in[2], g.N * g.G, DType::Float32);
  expect_vec(d, d.in[3], g.N * g.G, DType::Float32);
  d.expect_shape(*d.in[4], x->shape);
  d.expect_same_dtype(*x, *d.in[4]);
  d.expect_shape(*d.out[0], x->shape);
  d.expect_same_dtype(*x, *d.out[0]);
  expect_vec(d, d.out[1], g.C, x->dtype);
  expect_vec(d, d.out[2], g.C, x->dtype);
  if (x->dtype == DType::Float32) return group_norm_grad_kernel<float>(d, g);
  if (x->dtype == DType::Float16) return group_norm_grad_kernel<f16>(d, g);
  d.fail(std::string("expected a float16 or float32 input, got ") + dtype_name(x->dtype));
}

template <class T>
std::unique_ptr<Kernel> batch_norm_kernel(const OpDesc& d, const NormGeom g, double eps) {
  const TensorRef *x = d.in[0], *sc = d.in[1], *bi = d.in[2], *me = d.in[3], *va = d.in[4];
  const TensorRef* y = d.out[0];
  return make_kernel(
      [=](RunContext&) {
        const T* X = x->as<T>();
        T* Y = y->as<T>();
        std::vector<float> a((size_t)g.C), b((size_t)g.C);
        for (int64_t c = 0; c < g.C; ++c) {
          const double inv = 1.0 / std::sqrt((double)(float)va->as<T>()[c] + eps);
          a[(size_t)c] = (float)((double)(float)sc->as<T>()[c] * inv);
          b[(size_t)c] = (float)((double)(float)bi->as<T>()[c] -
                                 (double)(float)me->as<T>()[c] * (double)a[(size_t)c]);
        }
        parallel_for(g.N * g.C, std::max<int64_t>(1, 32768 / std::max<int64_t>(g.S, 1)),
                     [&](int64_t u0, int64_t u1) {
                       for (int64_t u = u0; u < u1; ++u) {
                         const float aa = a[(size_t)(u % g.C)], bb = b[(size_t)(u % g.C)];
                         const T* xr = X + u * g.S;
                         T* yr = Y + u * g.S;
                         for (int64_t i = 0; i < g.S; ++i) yr[i] = (T)((float)xr[i] * aa + bb);
                       }
                     });
      });
}

std::unique_ptr<Kernel> batch_norm_factory(const OpDesc& d) {
  d.expect_arity(5, 1);
  const TensorRef* x = d.in[0];
  const NormGeom g = norm_geom(d, *x, 1);
  for (int i = 1; i < 5; ++i) expect_vec(d, d.in[(size_t)i], g.C, x->dtype);
  d.expect_shape(*d.out[0], x->shape);
  d.expect_same_dtype(*x, *d.out[0]);
  const double eps = d.attrs.f("epsilon");
  if (x->dtype == DType::Float32) return batch_norm_kernel<float>(d, g, eps);
  if (x->dtype == DType::Float16) return batch_norm_kernel<f16>(d, g, eps);
  d.fail(std::string("expected a float16 or float32 input, got ") + dtype_name(x->dtype));
}

}  // namespace

IPUXL_REGISTER_KERNEL("GroupNorm", group_norm_factory);
IPUXL_REGISTER_KERNEL("GroupNormGrad", group_norm_grad_factory);
IPUXL_REGISTER_KERNEL("BatchNormInference", batch_norm_factory);

}  // namespace ipuxl
