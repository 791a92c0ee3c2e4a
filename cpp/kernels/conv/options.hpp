// Switches of the convolution plan (plan.hpp), for comparing its forms: each
// keeps the plan from choosing one form, so the next one in the plan's order
// runs. They change which form sums a convolution (and so its rounding),
// never whether it is supported. The Python side sets them
// (_core.set_conv_options); a plan reads them once, when its kernel is
// built.
#pragma once

namespace ipuxl {
namespace conv {

struct ConvOptions {
  bool no_winograd = false;  // no Winograd F(2x2, 3x3) form
  bool no_direct = false;    // direct kernels only for short forward reductions (C/G x k <= 64)
  bool no_tap = false;       // no tap-decomposed products
  bool no_cols = false;      // no column-unfolded direct form (short reductions pad rows)
  bool no_oc = false;        // no channels-in-vectors direct form
};

// The options plans built from now on use (all false until set).
ConvOptions conv_options();
void set_conv_options(const ConvOptions& o);

}  // namespace conv
}  // namespace ipuxl
