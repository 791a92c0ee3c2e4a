// The geometry of a convolution (see geom.hpp).
#include "geom.hpp"

#include <cstring>
#include <string>

#include "../common.hpp"

namespace ipuxl {
namespace conv {

Geom make_geom(const OpDesc& d, const Shape& xs, const Shape& ws, const Shape& ys) {
  const int64_t r = (int64_t)xs.size();
  if (r < 3 || r > 5)
    d.fail("the input must have rank 3, 4 or 5 (N, C and 1-3 spatial axes), got " +
           shape_str(xs));
  if ((int64_t)ws.size() != r || (int64_t)ys.size() != r)
    d.fail("the input " + shape_str(xs) + ", weights " + shape_str(ws) + " and output " +
           shape_str(ys) + " must have the same rank");
  const int64_t ns = r - 2;
  auto strides = d.attrs.ints("strides");
  auto pads = d.attrs.ints("pads");
  auto dils = d.attrs.ints("dilations");
  const int64_t G = d.attrs.i("groups", 1);
  if ((int64_t)strides.size() != ns || (int64_t)dils.size() != ns || (int64_t)pads.size() != 2 * ns)
    d.fail("strides and dilations need " + std::to_string(ns) + " values and pads " +
           std::to_string(2 * ns));
  Geom g;
  g.N = xs[0];
  g.C = xs[1];
  g.M = ws[0];
  g.G = G;
  if (G < 1 || g.C % G != 0 || g.M % G != 0)
    d.fail("groups " + std::to_string(G) + " must divide the input channels " +
           std::to_string(g.C) + " and the output channels " + std::to_string(g.M));
  g.Cg = g.C / G;
  g.Mg = g.M / G;
  if (ws[1] != g.Cg)
    d.fail("the weights " + shape_str(ws) + " must have C/groups = " + std::to_string(g.Cg) +
           " input channels");
  if (ys[0] != g.N || ys[1] != g.M)
    d.fail("the output " + shape_str(ys) + " must have batch " + std::to_string(g.N) +
           " and " + std::to_string(g.M) + " channels");
  const int64_t off = 3 - ns;
  for (int64_t i = 0; i < ns; ++i) {
    const int64_t s = strides[(size_t)i], dl = dils[(size_t)i];
    const int64_t pb = pads[(size_t)i], pe = pads[(size_t)(i + ns)];
    if (s < 1 || dl < 1 || pb < 0 || pe < 0) d.fail("strides and dilations must be >= 1, pads >= 0");
    const int64_t in = xs[(size_t)(i + 2)], kk = ws[(size_t)(i + 2)], o = ys[(size_t)(i + 2)];
    if (kk < 1) d.fail("kernel sizes must be >= 1, got " + shape_str(ws));
    const int64_t span = in + pb + pe - dl * (kk - 1) - 1;
    const int64_t expect = span < 0 ? 0 : span / s + 1;
    if (o != expect)
      d.fail("spatial axis " + std::to_string(i) + ": input " + std::to_string(in) +
             ", kernel " + std::to_string(kk) + ", stride " + std::to_string(s) + ", dilation " +
             std::to_string(dl) + " and pads " + std::to_string(pb) + "/" + std::to_string(pe) +
             " give an output of " + std::to_string(expect) + ", not " + std::to_string(o));
    g.in[off + i] = in;
    g.k[off + i] = kk;
    g.out[off + i] = o;
    g.stride[off + i] = s;
    g.dil[off + i] = dl;
    g.pad[off + i] = pb;
  }
  g.Isp = g.in[0] * g.in[1] * g.in[2];
  g.Ksp = g.k[0] * g.k[1] * g.k[2];
  g.P = g.out[0] * g.out[1] * g.out[2];
  g.K = g.Cg * g.Ksp;
  g.pointwise = g.Ksp == 1;
  for (int i = 0; i < 3; ++i)
    g.pointwise = g.pointwise && g.stride[i] == 1 && g.pad[i] == 0 && g.out[i] == g.in[i];
  return g;
}

Geom data_grad_as_forward(const Geom& g) {
  Geom f = g;
  f.C = g.M;
  f.M = g.C;
  f.Cg = g.Mg;
  f.Mg = g.Cg;
  for (int a = 0; a < 3; ++a) {
    f.in[a] = g.out[a];
    f.out[a] = g.in[a];
    f.pad[a] = (g.k[a] - 1) * g.dil[a] - g.pad[a];
  }
  f.Isp = g.P;
  f.P = g.Isp;
  f.K = f.Cg * f.Ksp;
  f.pointwise = false;
  return f;
}

bool data_grad_is_forward(const Geom& g) {
  if (!(g.in[0] == 1 && g.k[0] == 1 && g.stride[1] == 1 && g.stride[2] == 1) || g.pointwise)
    return false;
  if (g.P == 0 || g.N == 0 || g.Isp == 0) return false;
  for (int a = 1; a < 3; ++a) {
    const int64_t reach = (g.k[a] - 1) * g.dil[a];
    const int64_t pe = (g.out[a] - 1) + reach - g.pad[a] - (g.in[a] - 1);  // end padding used
    if (g.pad[a] > reach || pe < 0 || pe > reach) return false;
  }
  return true;
}

bool all_finite(const float* v, int64_t n) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, sizeof bits);
    bad |= (uint32_t)((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

}  // namespace conv
}  // namespace ipuxl
