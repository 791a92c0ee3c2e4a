// CumSum along attribute `axis` (non-negative), inclusive and forward (as
// popxl.ops.cumsum). Floats keep a double running sum and round each output
// once; integers keep a 64-bit two's-complement running sum cast to the
// output type (NumPy's int64 result cast back to the input dtype).
#include <type_traits>

#include "common.hpp"

namespace ipuxl {
namespace {

// One running sum along a slice of n elements `inner` apart.
template <class T>
void cumsum_slice(const T* in, T* out, int64_t n, int64_t inner) {
  if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, f16>) {
    double s = 0;
    for (int64_t j = 0; j < n; ++j) {
      s += (double)in[j * inner];
      out[j * inner] = (T)s;
    }
  } else {
    uint64_t s = 0;  // unsigned: wrap-around without UB
    for (int64_t j = 0; j < n; ++j) {
      if constexpr (std::is_signed_v<T>) {
        s += (uint64_t)(int64_t)in[j * inner];
        out[j * inner] = (T)(int64_t)s;  // modular narrowing
      } else {
        s += (uint64_t)in[j * inner];
        out[j * inner] = (T)s;
      }
    }
  }
}

std::unique_ptr<Kernel> cumsum_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  const TensorRef* in = d.in[0];
  const TensorRef* out = d.out[0];
  d.expect_same_dtype(*in, *out);
  d.expect_shape(*out, in->shape);
  const AxisSplit sp = split_at_axis(d, *in, d.attrs.i("axis"));
  const int64_t outer = sp.outer, n = sp.n, inner = sp.inner;
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_NUMERIC(in->dtype, {
    using T = scalar_t;
    k = make_kernel(
        [=](RunContext&) {
          const T* I = in->as<T>();
          T* O = out->as<T>();
          for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = 0; i < inner; ++i)
              cumsum_slice<T>(I + o * n * inner + i, O + o * n * inner + i, n, inner);
        });
  });
  if (!ok) d.fail(std::string("unsupported dtype ") + dtype_name(in->dtype));
  return k;
}

}  // namespace

IPUXL_REGISTER_KERNEL("CumSum", cumsum_factory);

}  // namespace ipuxl
