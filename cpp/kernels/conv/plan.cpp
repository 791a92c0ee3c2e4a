// The convolution plan (see plan.hpp).
#include "plan.hpp"

#include <algorithm>
#include <mutex>

#include "../../core/isa.hpp"
#include "channels_in_vectors.hpp"
#include "im2col.hpp"
#include "tap.hpp"
#include "wgrad_direct.hpp"

namespace ipuxl {
namespace conv {

namespace {

std::mutex g_options_mutex;
ConvOptions g_options;

// The Winograd form's problem (winograd.hpp) for a 2-D 3x3 convolution at
// unit strides and dilations; N = 0 for any other.
conv_winograd::Problem winograd_problem(const Geom& g) {
  conv_winograd::Problem p;
  if (g.in[0] != 1 || g.k[0] != 1 || g.k[1] != 3 || g.k[2] != 3) return p;
  for (int i = 1; i < 3; ++i)
    if (g.stride[i] != 1 || g.dil[i] != 1) return p;
  p.N = g.N;
  p.G = g.G;
  p.Cg = g.Cg;
  p.Mg = g.Mg;
  p.IH = g.in[1];
  p.IW = g.in[2];
  p.OH = g.out[1];
  p.OW = g.out[2];
  p.ph = g.pad[1];
  p.pw = g.pad[2];
  return p;
}

// The layout of the direct forward kernels for geometry f.
void pick_direct_form(const Geom& f, const ConvOptions& o, ConvPlan* p) {
  p->fg = f;
  p->oc = !o.no_oc && oc_form_applies(f);
  if (p->oc) return;
  const bool cols = !o.no_cols && cols_fit(f);
  const bool flat = !cols && f.stride[1] == 1 && f.stride[2] == 1 &&
                    flat_pays(f.out[1], f.out[2], (f.k[2] - 1) * f.dil[2]);
  p->form = cols ? DirectForm::Cols : flat ? DirectForm::Flat : DirectForm::Rows;
}

}  // namespace

ConvOptions conv_options() {
  std::lock_guard<std::mutex> lock(g_options_mutex);
  return g_options;
}

void set_conv_options(const ConvOptions& o) {
  std::lock_guard<std::mutex> lock(g_options_mutex);
  g_options = o;
}

ConvPlan make_plan(ConvKind kind, const Geom& g, const ConvOptions& o) {
  ConvPlan p;
  p.kind = kind;
  p.g = g;
  const int64_t colrow = std::max<int64_t>(1, g.K * g.P);
  p.nb = std::max<int64_t>(1, std::min<int64_t>(std::max<int64_t>(g.N, 1), kColBudget / colrow));
  if (g.pointwise && kind != ConvKind::WeightsGrad) p.nb = 1;
  // Threads over images when there are enough images and one image's
  // product is small (below ~16 MFLOP): single-threaded products on
  // private columns beat splitting each small product.
  const double image_flops = 2.0 * (double)g.M * (double)g.P * (double)g.K;
  // The choice depends on the shapes only, never on the thread count: the
  // weight gradient's two forms sum in different orders, and the forward and
  // data gradient's forms make products of different widths (one image, or
  // several), which OpenBLAS (the AVX2 rules of cpp/core/blas.cpp) rounds
  // differently at its block edges.
  p.batched = g.N >= kWgradParts && image_flops < 1.6e7 && g.P > 0 && g.K > 0;
  if (p.batched) p.nb = 1;

  if (!o.no_winograd) {
    if (kind != ConvKind::DataGrad) p.wino = winograd_problem(g);
    if (kind == ConvKind::DataGrad && data_grad_is_forward(g))
      p.wino = winograd_problem(data_grad_as_forward(g));
    p.winograd = p.wino.N > 0 && conv_winograd::applies(p.wino);
  }

  // The direct forward: any long reduction unless no_direct.
  const bool direct = kind == ConvKind::Forward && direct_applies(g) &&
                      (g.K <= kDirectMaxK || !o.no_direct);
  // The direct data gradient, a forward of dy on rows of 8+.
  const bool direct_dgrad = kind == ConvKind::DataGrad && !o.no_direct &&
                            data_grad_is_forward(g) && g.in[2] >= 8;
  // Weight gradient at unit strides: the tap products where they apply (16+
  // input channels: each tap's product is a GEMM deep enough to run near the
  // GEMM's peak), the direct kernel for the narrower ones. Below AVX-512, a
  // weight gradient with a small output (Cg x Mg <= 2048) runs as one
  // unfold + GEMM per chunk of images rather than a product per tap: each
  // tap's [Cg, positions] @ [positions, Mg] is then too small to use the
  // narrower vectors well, while the unfolded product is K = Cg * taps deep.
  const bool small_wgrad_narrow = kind == ConvKind::WeightsGrad &&
                                  isa::current() != isa::Level::AVX512 && g.Cg * g.Mg <= 2048;
  const bool tap = !direct && !direct_dgrad && !o.no_tap && !small_wgrad_narrow &&
                   tap_applies(g, kind);
  const bool direct_wgrad =
      kind == ConvKind::WeightsGrad && !tap && !o.no_direct && direct_wgrad_applies(g);

  if (direct) {
    p.path = Path::Direct;
    pick_direct_form(g, o, &p);
  } else if (direct_dgrad) {
    // declines at run time when the weights hold an infinity or NaN (its
    // padding zeros of dy would meet them: NaN where dx is finite); the
    // unfold form is planned for that case
    p.path = Path::DirectDataGrad;
    pick_direct_form(data_grad_as_forward(g), o, &p);
  } else if (tap) {
    p.path = Path::Tap;
  } else if (direct_wgrad) {
    // declines at run time when x holds an infinity or NaN (see
    // run_weights_grad_direct): the unfold form is then used, so its
    // buffers are planned too (the tap weight gradient likewise)
    p.path = Path::DirectWeightsGrad;
  }

  // Forwards and data gradients on the tap or direct path never decline:
  // they need no unfold buffers.
  const bool never_unfolds =
      p.path == Path::Direct || (p.path == Path::Tap && kind != ConvKind::WeightsGrad);
  if (never_unfolds) p.batched = false;
  if (p.path == Path::Direct) p.nb = 1;
  if (!(g.pointwise && p.nb == 1) && !p.batched && !never_unfolds)
    p.col = std::make_shared<std::vector<float>>(
        (size_t)(p.nb == 1 ? g.K * rows_per_block(g) * g.out[2] : g.K * g.P * p.nb));
  if (p.nb > 1) p.tmp = std::make_shared<std::vector<float>>((size_t)(g.Mg * g.P * p.nb));
  return p;
}

}  // namespace conv
}  // namespace ipuxl
