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
// float with double statistics.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../core/parallel.hpp"
#include "common.hpp"

namespace ipuxl {
namespace {

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
