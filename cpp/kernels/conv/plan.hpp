// The plan of one convolution op: which algorithm of cpp/kernels/conv/ runs
// it, picked once, when the kernel is built, from the shape, the op kind,
// the instruction-set level and the ConvOptions (options.hpp). Nothing is
// timed, so the same program always takes the same path (and gives the same
// bits at any thread count: every path computes each output in a fixed
// order).
//
// In the order the plan tries them:
//  * Winograd F(2x2, 3x3) (winograd.hpp): all three ops of 2-D 3x3
//    convolutions at unit strides and dilations with 32+ channels per group
//    on both sides. It declines at run time when x, dy or w holds an
//    infinity or NaN (its transforms would turn inf - inf into NaN), and the
//    path below runs.
//  * direct kernels (direct.hpp, channels_in_vectors.hpp, wgrad_direct.hpp):
//    - forward, 1 or 2 spatial axes, any strides and dilations, output rows
//      8+ wide: strips of padded rows, the flat form, or for short
//      reductions (C/G x kernel <= 64) the column-unfolded form; where the
//      row strips would leave a sixth or more of their lanes past the rows'
//      ends and the channels allow it, the channels-in-vectors form;
//    - data gradient of a unit-stride convolution: the same forward kernels
//      on dy, with the weights transposed per group and the taps reversed,
//      padded by reach - pad (declines on inf/NaN weights: the padding's
//      zeros of dy would meet them);
//    - weight gradient of a unit-stride convolution with fewer than 16
//      input or 8 output channels per group (declines on inf/NaN in x).
//  * tap-decomposed GEMMs (tap.hpp) for the unit-stride weight gradients
//    with 16+ input channels (at AVX-512; below it only where the output is
//    larger than 2048 channel pairs) and the remaining unit-stride forwards
//    and data gradients with 16+ channels (outputs narrower than 8).
//  * otherwise, and whenever a form above declines: unfold + GEMM
//    (im2col.hpp), threaded over images for small images (`batched`).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "direct.hpp"
#include "geom.hpp"
#include "options.hpp"
#include "winograd.hpp"

namespace ipuxl {
namespace conv {

// The algorithm a plan runs after the Winograd form (or instead of it).
enum class Path {
  Unfold,             // im2col.hpp: run_*_im2col, or run_*_batched
  Tap,                // tap.hpp (the weight gradient declines on inf/NaN in x)
  Direct,             // run_forward_direct / run_forward_oc on g
  DirectDataGrad,     // the same on fg = data_grad_as_forward(g), flipped weights
  DirectWeightsGrad,  // run_weights_grad_direct
};

struct ConvPlan {
  ConvKind kind = ConvKind::Forward;
  Geom g;
  // Tried first when set: conv_winograd::forward of the forward or of the
  // data gradient as a forward, or conv_winograd::weights_grad.
  bool winograd = false;
  conv_winograd::Problem wino;
  Path path = Path::Unfold;
  // Direct and DirectDataGrad: the channels-in-vectors form (oc), else the
  // direct kernels in `form`; fg the geometry they run.
  bool oc = false;
  DirectForm form = DirectForm::Rows;
  Geom fg;
  // The unfold form (path Unfold, or when the path declines): threads over
  // images (batched), else chunks of nb images with these buffers.
  bool batched = false;
  int64_t nb = 1;
  std::shared_ptr<std::vector<float>> col, tmp;  // columns, reordered rows
};

// The plan of the op `kind` with geometry g under options o.
ConvPlan make_plan(ConvKind kind, const Geom& g, const ConvOptions& o);

}  // namespace conv
}  // namespace ipuxl
