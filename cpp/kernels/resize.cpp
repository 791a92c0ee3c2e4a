// Resize (ops.interpolate; ONNX Resize with scales) and its adjoint.
//
//   Resize      (x) -> y     y's shape is floor(x.shape * scales)
//   ResizeGrad  (dy) -> dx   the transpose of Resize (dx has x's shape)
//
// attributes: scales (one float per axis), mode ("nearest", "linear",
// "cubic"), nearest_mode ("round_prefer_floor", "round_prefer_ceil",
// "floor", "ceil"), coordinate_transformation_mode ("half_pixel",
// "pytorch_half_pixel", "align_corners", "asymmetric"), cubic_coeff_a.
//
// Each axis maps an output coordinate to a source coordinate (ONNX's
// formulas, with the given scale) and reads 1 (nearest), 2 (linear) or 4
// (cubic) taps, indices clamped to the axis (ONNX's edge handling, which is
// also PyTorch's clamping of negative source coordinates). Axes are resized
// one after another in double precision with a single rounding at the end.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../core/parallel.hpp"
#include "common.hpp"

namespace ipuxl {
namespace {

struct AxisTaps {
  int64_t in = 1, out = 1, ntaps = 1;
  std::vector<int64_t> idx;  // out * ntaps
  std::vector<double> w;
  bool identity = false;
};

AxisTaps make_taps(const OpDesc& d, int64_t in, int64_t out, double scale, const std::string& mode,
                   const std::string& nearest, const std::string& ctm, double A) {
  AxisTaps t;
  t.in = in;
  t.out = out;
  t.ntaps = mode == "nearest" ? 1 : mode == "linear" ? 2 : 4;
  t.idx.assign((size_t)(out * t.ntaps), 0);
  t.w.assign((size_t)(out * t.ntaps), 0.0);
  auto clampi = [&](int64_t i) { return std::max<int64_t>(0, std::min<int64_t>(in - 1, i)); };
  bool ident = in == out;
  for (int64_t o = 0; o < out; ++o) {
    // Source coordinates in float arithmetic, as PyTorch and the IPU compute
    // them (the ratio rounded to float once), so that weights agree bit for bit.
    const float inv = (float)(1.0 / scale);
    float xf;
    if (ctm == "half_pixel") xf = ((float)o + 0.5f) * inv - 0.5f;
    else if (ctm == "pytorch_half_pixel") xf = out > 1 ? ((float)o + 0.5f) * inv - 0.5f : 0.0f;
    else if (ctm == "align_corners")
      xf = out > 1 ? (float)((double)(in - 1) / (double)(out - 1)) * (float)o : 0.0f;
    else if (ctm == "asymmetric") xf = (float)o * inv;
    else d.fail("unsupported coordinate_transformation_mode '" + ctm + "'");
    const double x = (double)xf;
    int64_t* I = t.idx.data() + o * t.ntaps;
    double* W = t.w.data() + o * t.ntaps;
    if (t.ntaps == 1) {
      double r;
      const double fl = std::floor(x), frac = x - fl;
      if (nearest == "round_prefer_floor") r = frac == 0.5 ? fl : std::round(x);
      else if (nearest == "round_prefer_ceil") r = frac == 0.5 ? fl + 1 : std::round(x);
      else if (nearest == "floor") r = fl;
      else if (nearest == "ceil") r = std::ceil(x);
      else d.fail("unsupported nearest_mode '" + nearest + "'");
      I[0] = clampi((int64_t)r);
      W[0] = 1.0;
      ident = ident && I[0] == o;
    } else if (t.ntaps == 2) {
      const double fl = std::floor(x);
      const float r = xf - (float)fl;
      I[0] = clampi((int64_t)fl);
      I[1] = clampi((int64_t)fl + 1);
      W[0] = (double)(1.0f - r);
      W[1] = (double)r;
      ident = ident && r == 0.0 && I[0] == o;
    } else {
      const double fl = std::floor(x);
      const double r = x - fl;
      const double c[4] = {((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
                           ((A + 2) * r - (A + 3)) * r * r + 1,
                           ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1,
                           ((A * (2 - r) - 5 * A) * (2 - r) + 8 * A) * (2 - r) - 4 * A};
      for (int k = 0; k < 4; ++k) {
        I[k] = clampi((int64_t)fl - 1 + k);
        W[k] = c[k];
      }
      ident = ident && r == 0.0 && (int64_t)fl == o;
    }
  }
  t.identity = ident;
  return t;
}

struct ResizePlan {
  Shape in, out;
  std::vector<AxisTaps> axes;
};

// One pass along axis a: src has shape `cur` (axis a of size taps.in), dst
// the same with axis a of size taps.out. adjoint: scatter instead.
void resize_axis(const std::vector<double>& src, std::vector<double>& dst, const Shape& cur,
                 int64_t a, const AxisTaps& t, bool adjoint) {
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < a; ++i) outer *= cur[(size_t)i];
  for (size_t i = (size_t)a + 1; i < cur.size(); ++i) inner *= cur[i];
  const int64_t n_src = adjoint ? t.out : t.in, n_dst = adjoint ? t.in : t.out;
  dst.assign((size_t)(outer * n_dst * inner), 0.0);
  parallel_for(outer, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, n_dst * inner * t.ntaps)),
               [&](int64_t b, int64_t e) {
                 for (int64_t o = b; o < e; ++o) {
                   const double* s = src.data() + o * n_src * inner;
                   double* dd = dst.data() + o * n_dst * inner;
                   for (int64_t j = 0; j < t.out; ++j)
                     for (int64_t k = 0; k < t.ntaps; ++k) {
                       const int64_t i = t.idx[(size_t)(j * t.ntaps + k)];
                       const double w = t.w[(size_t)(j * t.ntaps + k)];
                       if (w == 0.0) continue;
                       if (!adjoint) {
                         const double* sr = s + i * inner;
                         double* dr = dd + j * inner;
                         for (int64_t q = 0; q < inner; ++q) dr[q] += w * sr[q];
                       } else {
                         const double* sr = s + j * inner;
                         double* dr = dd + i * inner;
                         for (int64_t q = 0; q < inner; ++q) dr[q] += w * sr[q];
                       }
                     }
                 }
               });
}

std::unique_ptr<Kernel> resize_factory(const OpDesc& d, bool adjoint) {
  d.expect_arity(1, 1);
  const TensorRef* a = d.in[0];
  const TensorRef* o = d.out[0];
  d.expect_same_dtype(*a, *o);
  if (a->dtype != DType::Float32 && a->dtype != DType::Float16)
    d.fail(std::string("expected a float16 or float32 input, got ") + dtype_name(a->dtype));
  const Shape& xs = adjoint ? o->shape : a->shape;
  const Shape& ys = adjoint ? a->shape : o->shape;
  auto scales = d.attrs.floats("scales");
  if (xs.size() != ys.size() || scales.size() != xs.size())
    d.fail("scales need one value per axis of " + shape_str(xs));
  const std::string mode = d.attrs.s("mode"), nearest = d.attrs.s("nearest_mode", "round_prefer_floor");
  const std::string ctm = d.attrs.s("coordinate_transformation_mode", "half_pixel");
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    d.fail("mode must be nearest, linear or cubic, got '" + mode + "'");
  const double A = d.attrs.f("cubic_coeff_a", -0.75);
  auto plan = std::make_shared<ResizePlan>();
  plan->in = xs;
  plan->out = ys;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!(scales[i] > 0.0)) d.fail("scales must be positive");
    if (ys[i] != (int64_t)std::floor((double)xs[i] * scales[i]) || (xs[i] == 0) != (ys[i] == 0))
      d.fail("output " + shape_str(ys) + " is not floor(input " + shape_str(xs) + " * scales)");
    plan->axes.push_back(make_taps(d, xs[i], ys[i], scales[i], mode, nearest, ctm, A));
  }
  return make_kernel(
      [=](RunContext&) {
        std::vector<double> cur((size_t)a->nelms), nxt;
        if (a->dtype == DType::Float32)
          for (int64_t i = 0; i < a->nelms; ++i) cur[(size_t)i] = a->as<float>()[i];
        else
          for (int64_t i = 0; i < a->nelms; ++i) cur[(size_t)i] = (float)a->as<f16>()[i];
        Shape shape = adjoint ? plan->out : plan->in;
        const int64_t r = (int64_t)shape.size();
        for (int64_t k = 0; k < r; ++k) {
          const int64_t ax = adjoint ? r - 1 - k : k;
          const AxisTaps& t = plan->axes[(size_t)ax];
          if (t.identity) continue;
          resize_axis(cur, nxt, shape, ax, t, adjoint);
          shape[(size_t)ax] = adjoint ? t.in : t.out;
          cur.swap(nxt);
        }
        if (o->dtype == DType::Float32)
          for (int64_t i = 0; i < o->nelms; ++i) o->as<float>()[i] = (float)cur[(size_t)i];
        else
          for (int64_t i = 0; i < o->nelms; ++i) o->as<f16>()[i] = f16((float)cur[(size_t)i]);
      });
}

}  // namespace

IPUXL_REGISTER_KERNEL("Resize", [](const OpDesc& d) { return resize_factory(d, false); });
IPUXL_REGISTER_KERNEL("ResizeGrad", [](const OpDesc& d) { return resize_factory(d, true); });

}  // namespace ipuxl
