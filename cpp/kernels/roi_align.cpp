// RoiAlign (Mask R-CNN's ROI align, average mode, not pixel-aligned: the
// algorithm of torchvision.ops.roi_align with aligned=False, which PopART's
// RoiAlignOp follows) and its input gradient.
//
//   RoiAlign      (x [N,C,H,W], rois [R,4] (x1,y1,x2,y2), batch_index [R] int32) -> y [R,C,ph,pw]
//   RoiAlignGrad  (dy [R,C,ph,pw], rois, batch_index) -> dx [N,C,H,W]
//
// attributes: spatial_scale, sampling_ratio (0: ceil(roi size / bins)).
// Each bin averages a grid of bilinear samples; samples more than one pixel
// outside the map contribute 0 and coordinates below 0 are clamped to 0.
// A batch index outside [0, N) is a RunError naming the ROI.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../core/parallel.hpp"
#include "common.hpp"

namespace ipuxl {
namespace {

struct RoiGeom {
  int64_t N, C, H, W, R, PH, PW;
  double scale;
  int64_t ratio;
};

// Calls f(index, weight) for the 4 bilinear taps of (y, x) (none outside).
template <class F>
inline void bilinear(int64_t H, int64_t W, double y, double x, F&& f) {
  if (y < -1.0 || y > (double)H || x < -1.0 || x > (double)W) return;
  if (y <= 0) y = 0;
  if (x <= 0) x = 0;
  int64_t yl = (int64_t)y, xl = (int64_t)x, yh, xh;
  if (yl >= H - 1) { yh = yl = H - 1; y = (double)yl; } else { yh = yl + 1; }
  if (xl >= W - 1) { xh = xl = W - 1; x = (double)xl; } else { xh = xl + 1; }
  const double ly = y - (double)yl, lx = x - (double)xl, hy = 1.0 - ly, hx = 1.0 - lx;
  f(yl * W + xl, hy * hx);
  f(yl * W + xh, hy * lx);
  f(yh * W + xl, ly * hx);
  f(yh * W + xh, ly * lx);
}

// Calls f(r, c_plane_offset_unused, bin (ph, pw), sample tap index, weight / count).
template <class F>
void for_each_tap(const RoiGeom& g, const float* roi, int64_t ph, int64_t pw, F&& f) {
  const double x1 = roi[0] * g.scale, y1 = roi[1] * g.scale;
  const double x2 = roi[2] * g.scale, y2 = roi[3] * g.scale;
  const double rw = std::max(x2 - x1, 1.0), rh = std::max(y2 - y1, 1.0);
  const double bh = rh / (double)g.PH, bw = rw / (double)g.PW;
  const int64_t gh = g.ratio > 0 ? g.ratio : (int64_t)std::ceil(rh / (double)g.PH);
  const int64_t gw = g.ratio > 0 ? g.ratio : (int64_t)std::ceil(rw / (double)g.PW);
  const double count = (double)std::max<int64_t>(gh * gw, 1);
  for (int64_t iy = 0; iy < gh; ++iy) {
    const double y = y1 + ph * bh + (iy + 0.5) * bh / (double)gh;
    for (int64_t ix = 0; ix < gw; ++ix) {
      const double x = x1 + pw * bw + (ix + 0.5) * bw / (double)gw;
      bilinear(g.H, g.W, y, x, [&](int64_t i, double w) { f(i, w / count); });
    }
  }
}

RoiGeom roi_geom(const OpDesc& d, const TensorRef* x, const TensorRef* y, const TensorRef* rois,
                 const TensorRef* bi) {
  if (x->rank() != 4) d.fail("the input must be 4-D (N, C, H, W), got " + shape_str(x->shape));
  if (rois->rank() != 2 || rois->shape[1] != 4 || rois->dtype != x->dtype)
    d.fail("rois must be (num_rois, 4) of the input's dtype, got " + shape_str(rois->shape));
  if (bi->rank() != 1 || bi->shape[0] != rois->shape[0] || bi->dtype != DType::Int32)
    d.fail("batch_index must be int32 (num_rois,), got " + shape_str(bi->shape));
  RoiGeom g{x->shape[0], x->shape[1], x->shape[2], x->shape[3], rois->shape[0], 0, 0,
            d.attrs.f("spatial_scale"), d.attrs.i("sampling_ratio")};
  if (y->rank() != 4 || y->shape[0] != g.R || y->shape[1] != g.C)
    d.fail("the output must be (num_rois, C, ph, pw), got " + shape_str(y->shape));
  g.PH = y->shape[2];
  g.PW = y->shape[3];
  if (g.PH < 1 || g.PW < 1 || g.ratio < 0) d.fail("output sizes must be >= 1, sampling_ratio >= 0");
  return g;
}

template <class T>
std::vector<float> load_rois(const TensorRef* rois) {
  std::vector<float> r((size_t)rois->nelms);
  for (int64_t i = 0; i < rois->nelms; ++i) r[(size_t)i] = (float)rois->as<T>()[i];
  return r;
}

int64_t checked_batch(const RoiGeom& g, const TensorRef* bi, int64_t r) {
  const int64_t b = bi->as<int32_t>()[r];
  if (b < 0 || b >= g.N)
    throw RunError("roi_align: batch_index[" + std::to_string(r) + "] = " + std::to_string(b) +
                   " is outside [0, " + std::to_string(g.N) + ")");
  return b;
}

std::unique_ptr<Kernel> roi_factory(const OpDesc& d, bool grad) {
  d.expect_arity(3, 1);
  const TensorRef* a = d.in[0];
  const TensorRef* rois = d.in[1];
  const TensorRef* bi = d.in[2];
  const TensorRef* o = d.out[0];
  d.expect_same_dtype(*a, *o);
  if (a->dtype != DType::Float32 && a->dtype != DType::Float16)
    d.fail(std::string("expected float16 or float32, got ") + dtype_name(a->dtype));
  const RoiGeom g = grad ? roi_geom(d, o, a, rois, bi) : roi_geom(d, a, o, rois, bi);
  std::unique_ptr<Kernel> k;
  auto build = [&](auto tag) {
    using T = decltype(tag);
    k = make_kernel(
        [=](RunContext&) {
          const std::vector<float> R = load_rois<T>(rois);
          const T* A = a->as<T>();
          T* O = o->as<T>();
          const int64_t plane = g.H * g.W, bins = g.PH * g.PW;
          if (!grad) {
            for (int64_t r = 0; r < g.R; ++r) checked_batch(g, bi, r);
            parallel_for(g.R * g.C, 1, [&](int64_t u0, int64_t u1) {
              for (int64_t u = u0; u < u1; ++u) {
                const int64_t r = u / g.C, c = u % g.C;
                const T* src = A + (bi->as<int32_t>()[r] * g.C + c) * plane;
                for (int64_t ph = 0; ph < g.PH; ++ph)
                  for (int64_t pw = 0; pw < g.PW; ++pw) {
                    double s = 0.0;
                    for_each_tap(g, R.data() + 4 * r, ph, pw,
                                 [&](int64_t i, double w) { s += w * (double)(float)src[i]; });
                    O[u * bins + ph * g.PW + pw] = (T)(float)s;
                  }
              }
            });
          } else {
            for (int64_t r = 0; r < g.R; ++r) checked_batch(g, bi, r);
            // Each (n, c) plane gathers the ROIs of its image: no two tasks
            // write the same plane.
            parallel_for(g.N * g.C, 1, [&](int64_t u0, int64_t u1) {
              std::vector<double> acc((size_t)plane);
              for (int64_t u = u0; u < u1; ++u) {
                const int64_t n = u / g.C, c = u % g.C;
                std::fill(acc.begin(), acc.end(), 0.0);
                for (int64_t r = 0; r < g.R; ++r) {
                  if (bi->as<int32_t>()[r] != n) continue;
                  const T* dy = A + (r * g.C + c) * bins;
                  for (int64_t ph = 0; ph < g.PH; ++ph)
                    for (int64_t pw = 0; pw < g.PW; ++pw) {
                      const double gv = (double)(float)dy[ph * g.PW + pw];
                      for_each_tap(g, R.data() + 4 * r, ph, pw,
                                   [&](int64_t i, double w) { acc[(size_t)i] += w * gv; });
                    }
                }
                T* dst = O + u * plane;
                for (int64_t i = 0; i < plane; ++i) dst[i] = (T)(float)acc[(size_t)i];
              }
            });
          }
        });
  };
  if (a->dtype == DType::Float32) build(float{});
  else build(f16{});
  return k;
}

}  // namespace

IPUXL_REGISTER_KERNEL("RoiAlign", [](const OpDesc& d) { return roi_factory(d, false); });
IPUXL_REGISTER_KERNEL("RoiAlignGrad", [](const OpDesc& d) { return roi_factory(d, true); });

}  // namespace ipuxl
