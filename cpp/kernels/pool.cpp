// Pooling over 1, 2 or 3 spatial axes of an NC[D]HW tensor:
//
//   AveragePool      (x) -> y       mean of each window's input elements
//   AveragePoolGrad  (dy) -> dx     its adjoint: dy / count spread on each window
//   MaxPool          (x) -> y       max of each window (NaN wins, as PyTorch)
//   MaxPoolGrad      (x, dy) -> dx  dy added at each window's first maximum
//   MaxPoolSelect    (x, t) -> y    t read at each window's first maximum
//                                   (the adjoint of MaxPoolGrad in dy)
//
// attributes: kernel, strides, dilations (one per spatial axis) and pads
// (begins, then ends). The output's spatial shape is given by the output
// tensor (floor or ceil mode is the builder's choice); every window must
// start inside the padded input. Padding is never counted: the average
// divides by the number of input elements in the window (PopART's
// count_include_pad = 0), a max ignores it; a window with no input element
// gives 0 (average) or -inf (max).
//
// float16 computes in float and float32 in float; one plane (n, c) per
// task over the core's thread pool.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "../core/parallel.hpp"
#include "common.hpp"

namespace ipuxl {
namespace {

struct PoolGeom {
  int64_t planes = 0;
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, k[3] = {1, 1, 1};
  int64_t s[3] = {1, 1, 1}, dl[3] = {1, 1, 1}, p[3] = {0, 0, 0};
  int64_t Isp = 1, Osp = 1;
};

PoolGeom make_pool_geom(const OpDesc& d, const Shape& xs, const Shape& ys) {
  const int64_t r = (int64_t)xs.size();
  if (r < 3 || r > 5)
    d.fail("the input must have rank 3, 4 or 5 (N, C and 1-3 spatial axes), got " + shape_str(xs));
  if ((int64_t)ys.size() != r || ys[0] != xs[0] || ys[1] != xs[1])
    d.fail("the output " + shape_str(ys) + " must keep the input's " + shape_str(xs) +
           " rank, batch and channels");
  const int64_t ns = r - 2, off = 3 - ns;
  auto k = d.attrs.ints("kernel");
  auto s = d.attrs.ints("strides");
  auto dl = d.attrs.ints("dilations");
  auto p = d.attrs.ints("pads");
  if ((int64_t)k.size() != ns || (int64_t)s.size() != ns || (int64_t)dl.size() != ns ||
      (int64_t)p.size() != 2 * ns)
    d.fail("kernel, strides and dilations need " + std::to_string(ns) + " values and pads " +
           std::to_string(2 * ns));
  PoolGeom g;
  g.planes = xs[0] * xs[1];
  for (int64_t i = 0; i < ns; ++i) {
    const int64_t ki = k[(size_t)i], si = s[(size_t)i], di = dl[(size_t)i];
    const int64_t pb = p[(size_t)i], pe = p[(size_t)(i + ns)];
    if (ki < 1 || si < 1 || di < 1 || pb < 0 || pe < 0)
      d.fail("kernel, strides and dilations must be >= 1 and pads >= 0");
    const int64_t in = xs[(size_t)(i + 2)], o = ys[(size_t)(i + 2)];
    if (o < 0 || (o > 0 && (o - 1) * si - pb >= in))
      d.fail("output " + shape_str(ys) + ": a window of axis " + std::to_string(i) +
             " would start past the input " + shape_str(xs));
    if (o > 0 && (o - 1) * si - pb + di * (ki - 1) >= in + pe + si)
      d.fail("output " + shape_str(ys) + " does not match the input " + shape_str(xs) +
             " with these kernel, strides and pads");
    g.in[off + i] = in;
    g.out[off + i] = o;
    g.k[off + i] = ki;
    g.s[off + i] = si;
    g.dl[off + i] = di;
    g.p[off + i] = pb;
  }
  g.Isp = g.in[0] * g.in[1] * g.in[2];
  g.Osp = g.out[0] * g.out[1] * g.out[2];
  return g;
}

// Outputs o of an axis whose input o*s - p + koff lies in [0, in).
inline void pool_range(int64_t out, int64_t in, int64_t s, int64_t p, int64_t koff, int64_t* lo,
                       int64_t* hi) {
  const int64_t a = p - koff;
  int64_t l = a <= 0 ? 0 : (a + s - 1) / s;
  const int64_t b = in - 1 + p - koff;
  int64_t h = b < 0 ? 0 : b / s + 1;
  *lo = std::min(l, out);
  *hi = std::max(*lo, std::min(h, out));
}

// Number of valid kernel taps of each output position along axis `a`.
std::vector<float> tap_counts(const PoolGeom& g, int a) {
  std::vector<float> c((size_t)g.out[a], 0.0f);
  for (int64_t kk = 0; kk < g.k[a]; ++kk) {
    int64_t lo, hi;
    pool_range(g.out[a], g.in[a], g.s[a], g.p[a], kk * g.dl[a], &lo, &hi);
    for (int64_t o = lo; o < hi; ++o) c[(size_t)o] += 1.0f;
  }
  return c;
}

inline bool max_wins(float v, float m) { return v > m || (std::isnan(v) && !std::isnan(m)); }

// Average or max of one plane: row accumulation, vectorisable for stride 1.
template <class T, bool Avg>
void pool_plane(const PoolGeom& g, const T* X, T* Y, const std::vector<float>& cd,
                const std::vector<float>& ch, const std::vector<float>& cw, float* acc) {
  const int64_t OW = g.out[2];
  for (int64_t od = 0; od < g.out[0]; ++od)
    for (int64_t oh = 0; oh < g.out[1]; ++oh) {
      const float init = Avg ? 0.0f : -std::numeric_limits<float>::infinity();
      for (int64_t ow = 0; ow < OW; ++ow) acc[ow] = init;
      for (int64_t kd = 0; kd < g.k[0]; ++kd) {
        const int64_t id = od * g.s[0] - g.p[0] + kd * g.dl[0];
        if (id < 0 || id >= g.in[0]) continue;
        for (int64_t kh = 0; kh < g.k[1]; ++kh) {
          const int64_t ih = oh * g.s[1] - g.p[1] + kh * g.dl[1];
          if (ih < 0 || ih >= g.in[1]) continue;
          const T* row = X + (id * g.in[1] + ih) * g.in[2];
          for (int64_t kw = 0; kw < g.k[2]; ++kw) {
            int64_t lo, hi;
            pool_range(OW, g.in[2], g.s[2], g.p[2], kw * g.dl[2], &lo, &hi);
            const T* src = row + kw * g.dl[2] - g.p[2];
            const int64_t sw = g.s[2];
            if (Avg) {
              if (sw == 1)
                for (int64_t ow = lo; ow < hi; ++ow) acc[ow] += (float)src[ow];
              else
                for (int64_t ow = lo; ow < hi; ++ow) acc[ow] += (float)src[ow * sw];
            } else {
              if (sw == 1)
                for (int64_t ow = lo; ow < hi; ++ow) {
                  const float v = (float)src[ow];
                  acc[ow] = max_wins(v, acc[ow]) ? v : acc[ow];
                }
              else
                for (int64_t ow = lo; ow < hi; ++ow) {
                  const float v = (float)src[ow * sw];
                  acc[ow] = max_wins(v, acc[ow]) ? v : acc[ow];
                }
            }
          }
        }
      }
      T* y = Y + (od * g.out[1] + oh) * OW;
      if (Avg) {
        const float c0 = cd[(size_t)od] * ch[(size_t)oh];
        for (int64_t ow = 0; ow < OW; ++ow) {
          const float c = c0 * cw[(size_t)ow];
          y[ow] = (T)(c > 0.0f ? acc[ow] / c : 0.0f);
        }
      } else {
        for (int64_t ow = 0; ow < OW; ++ow) y[ow] = (T)acc[ow];
      }
    }
}

// Index (within the plane) of the first maximum of output (od, oh, ow)'s
// window, or -1 when the window holds no input element.
template <class T>
int64_t argmax_window(const PoolGeom& g, const T* X, int64_t od, int64_t oh, int64_t ow) {
  int64_t best = -1;
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t kd = 0; kd < g.k[0]; ++kd) {
    const int64_t id = od * g.s[0] - g.p[0] + kd * g.dl[0];
    if (id < 0 || id >= g.in[0]) continue;
    for (int64_t kh = 0; kh < g.k[1]; ++kh) {
      const int64_t ih = oh * g.s[1] - g.p[1] + kh * g.dl[1];
      if (ih < 0 || ih >= g.in[1]) continue;
      for (int64_t kw = 0; kw < g.k[2]; ++kw) {
        const int64_t iw = ow * g.s[2] - g.p[2] + kw * g.dl[2];
        if (iw < 0 || iw >= g.in[2]) continue;
        const int64_t idx = (id * g.in[1] + ih) * g.in[2] + iw;
        const float v = (float)X[idx];
        if (best < 0 || max_wins(v, m)) {
          best = idx;
          m = v;
          if (std::isnan(v)) return best;
        }
      }
    }
  }
  return best;
}

int64_t plane_grain(const PoolGeom& g) {
  return std::max<int64_t>(1, 65536 / std::max<int64_t>(1, g.Osp * g.k[0] * g.k[1] * g.k[2]));
}

std::unique_ptr<Kernel> pool_factory(const OpDesc& d, bool avg) {
  d.expect_arity(1, 1);
  const TensorRef* x = d.in[0];
  const TensorRef* y = d.out[0];
  d.expect_same_dtype(*x, *y);
  const PoolGeom g = make_pool_geom(d, x->shape, y->shape);
  const auto cd = tap_counts(g, 0), ch = tap_counts(g, 1), cw = tap_counts(g, 2);
  std::unique_ptr<Kernel> k;
  auto build = [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel(
        [=](RunContext&) {
          const T* X = x->as<T>();
          T* Y = y->as<T>();
          parallel_for(g.planes, plane_grain(g), [&](int64_t b, int64_t e) {
            std::vector<float> acc((size_t)std::max<int64_t>(1, g.out[2]));
            for (int64_t pl = b; pl < e; ++pl) {
              if (avg)
                pool_plane<T, true>(g, X + pl * g.Isp, Y + pl * g.Osp, cd, ch, cw, acc.data());
              else
                pool_plane<T, false>(g, X + pl * g.Isp, Y + pl * g.Osp, cd, ch, cw, acc.data());
            }
          });
        });
  };
  if (x->dtype == DType::Float32) build(float{});
  else if (x->dtype == DType::Float16) build(f16{});
  else d.fail(std::string("expected a float16 or float32 input, got ") + dtype_name(x->dtype));
  return k;
}

// AveragePoolGrad: dx[i] = sum over windows containing i of dy[o] / count(o).
std::unique_ptr<Kernel> avg_grad_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  const TensorRef* dy = d.in[0];
  const TensorRef* dx = d.out[0];
  d.expect_same_dtype(*dy, *dx);
  const PoolGeom g = make_pool_geom(d, dx->shape, dy->shape);
  const auto cd = tap_counts(g, 0), ch = tap_counts(g, 1), cw = tap_counts(g, 2);
  std::unique_ptr<Kernel> k;
  auto build = [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel(
        [=](RunContext&) {
          const T* DY = dy->as<T>();
          T* DX = dx->as<T>();
          parallel_for(g.planes, plane_grain(g), [&](int64_t b, int64_t e) {
            std::vector<float> acc((size_t)std::max<int64_t>(1, g.Isp));
            std::vector<float> q((size_t)std::max<int64_t>(1, g.out[2]));
            for (int64_t pl = b; pl < e; ++pl) {
              std::fill(acc.begin(), acc.end(), 0.0f);
              const T* src = DY + pl * g.Osp;
              for (int64_t od = 0; od < g.out[0]; ++od)
                for (int64_t oh = 0; oh < g.out[1]; ++oh) {
                  const float c0 = cd[(size_t)od] * ch[(size_t)oh];
                  const T* r = src + (od * g.out[1] + oh) * g.out[2];
                  for (int64_t ow = 0; ow < g.out[2]; ++ow) {
                    const float c = c0 * cw[(size_t)ow];
                    q[(size_t)ow] = c > 0.0f ? (float)r[ow] / c : 0.0f;
                  }
                  for (int64_t kd = 0; kd < g.k[0]; ++kd) {
                    const int64_t id = od * g.s[0] - g.p[0] + kd * g.dl[0];
                    if (id < 0 || id >= g.in[0]) continue;
                    for (int64_t kh = 0; kh < g.k[1]; ++kh) {
                      const int64_t ih = oh * g.s[1] - g.p[1] + kh * g.dl[1];
                      if (ih < 0 || ih >= g.in[1]) continue;
                      float* row = acc.data() + (id * g.in[1] + ih) * g.in[2];
                      for (int64_t kw = 0; kw < g.k[2]; ++kw) {
                        int64_t lo, hi;
                        pool_range(g.out[2], g.in[2], g.s[2], g.p[2], kw * g.dl[2], &lo, &hi);
                        float* dst = row + kw * g.dl[2] - g.p[2];
                        for (int64_t ow = lo; ow < hi; ++ow) dst[ow * g.s[2]] += q[(size_t)ow];
                      }
                    }
                  }
                }
              T* out = DX + pl * g.Isp;
              for (int64_t i = 0; i < g.Isp; ++i) out[i] = (T)acc[(size_t)i];
            }
          });
        });
  };
  if (dy->dtype == DType::Float32) build(float{});
  else if (dy->dtype == DType::Float16) build(f16{});
  else d.fail(std::string("expected a float16 or float32 input, got ") + dtype_name(dy->dtype));
  return k;
}

// MaxPoolGrad (x, dy) -> dx and MaxPoolSelect (x, t) -> y.
std::unique_ptr<Kernel> max_grad_factory(const OpDesc& d, bool select) {
  d.expect_arity(2, 1);
  const TensorRef* x = d.in[0];
  const TensorRef* t = d.in[1];
  const TensorRef* o = d.out[0];
  d.expect_same_dtype(*x, *t);
  d.expect_same_dtype(*x, *o);
  if (select) d.expect_shape(*t, x->shape);
  else d.expect_shape(*o, x->shape);
  const PoolGeom g = make_pool_geom(d, x->shape, select ? o->shape : t->shape);
  std::unique_ptr<Kernel> k;
  auto build = [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel(
        [=](RunContext&) {
          const T* X = x->as<T>();
          const T* TT = t->as<T>();
          T* O = o->as<T>();
          parallel_for(g.planes, plane_grain(g), [&](int64_t b, int64_t e) {
            std::vector<float> acc((size_t)std::max<int64_t>(1, g.Isp));
            for (int64_t pl = b; pl < e; ++pl) {
              const T* xp = X + pl * g.Isp;
              if (!select) std::fill(acc.begin(), acc.end(), 0.0f);
              int64_t oi = 0;
              for (int64_t od = 0; od < g.out[0]; ++od)
                for (int64_t oh = 0; oh < g.out[1]; ++oh)
                  for (int64_t ow = 0; ow < g.out[2]; ++ow, ++oi) {
                    const int64_t a = argmax_window(g, xp, od, oh, ow);
                    if (select) {
                      O[pl * g.Osp + oi] = a < 0 ? T(0.0f) : TT[pl * g.Isp + a];
                    } else if (a >= 0) {
                      acc[(size_t)a] += (float)TT[pl * g.Osp + oi];
                    }
                  }
              if (!select)
                for (int64_t i = 0; i < g.Isp; ++i) O[pl * g.Isp + i] = (T)acc[(size_t)i];
            }
          });
        });
  };
  if (x->dtype == DType::Float32) build(float{});
  else if (x->dtype == DType::Float16) build(f16{});
  else d.fail(std::string("expected a float16 or float32 input, got ") + dtype_name(x->dtype));
  return k;
}

}  // namespace

IPUXL_REGISTER_KERNEL("AveragePool", [](const OpDesc& d) { return pool_factory(d, true); });
IPUXL_REGISTER_KERNEL("MaxPool", [](const OpDesc& d) { return pool_factory(d, false); });
IPUXL_REGISTER_KERNEL("AveragePoolGrad", avg_grad_factory);
IPUXL_REGISTER_KERNEL("MaxPoolGrad", [](const OpDesc& d) { return max_grad_factory(d, false); });
IPUXL_REGISTER_KERNEL("MaxPoolSelect", [](const OpDesc& d) { return max_grad_factory(d, true); });

}  // namespace ipuxl
