// Cast between any two of the core's dtypes (bool, 8/16/32/64-bit signed
// and unsigned integers, float16/32/64).
//
// Every conversion is defined (see convert_value in unary.hpp): to bool is
// `x != 0` (NaN -> true); float to integer truncates toward zero, saturates
// at the integer type's limits and maps NaN to 0; integer to integer wraps
// modulo 2^bits; to float16 rounds to nearest even through float32 (so
// float64 -> float16 rounds twice, which can differ from a direct rounding
// by one unit in the last place for values exactly between two halves).
#include "../core/fp8.hpp"
#include "../core/half.hpp"
#include "unary.hpp"

namespace ipuxl {
namespace {

template <class From, class To>
std::unique_ptr<Kernel> make_cast(const OpDesc& d) {
  const TensorRef* a = d.in[0];
  const TensorRef* o = d.out[0];
  if constexpr (std::is_same_v<From, float> && std::is_same_v<To, f16>) {
    // The bulk conversions give convert_value's bits at every level (half.hpp).
    return make_kernel([a, o](RunContext&) {
      half::from_float_parallel(a->as<float>(), o->as<f16>(), o->nelms);
    });
  } else if constexpr (std::is_same_v<From, f16> && std::is_same_v<To, float>) {
    return make_kernel([a, o](RunContext&) {
      half::to_float_parallel(a->as<f16>(), o->as<float>(), o->nelms);
    });
  } else {
    return make_kernel(
        [a, o](RunContext&) {
          const uint8_t* A = a->data;
          To* O = o->as<To>();
          const int64_t n = o->nelms;
          for (int64_t i = 0; i < n; ++i) O[i] = convert_value<To>(load_value<From>(A, i));
        });
  }
}

// From float8 (no scale): each byte's value converted as a double would be.
std::unique_ptr<Kernel> cast_from_fp8(const OpDesc& d) {
  const TensorRef* a = d.in[0];
  const TensorRef* o = d.out[0];
  const fp8::Format f = a->dtype == DType::Float8_143 ? fp8::kF143 : fp8::kF152;
  std::unique_ptr<Kernel> k;
  const bool ok = IPUXL_DISPATCH_ALL(o->dtype, {
    using To = scalar_t;
    k = make_kernel(
        [a, o, f](RunContext&) {
          To table[256];
          for (int i = 0; i < 256; ++i) table[i] = convert_value<To>(fp8::decode((uint8_t)i, f, 0));
          To* O = o->as<To>();
          for (int64_t i = 0; i < o->nelms; ++i) O[i] = table[a->data[i]];
        });
  });
  if (!ok) d.fail(std::string("cannot cast float8 to ") + dtype_name(o->dtype));
  return k;
}

std::unique_ptr<Kernel> cast_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  d.expect_shape(*d.out[0], d.in[0]->shape);
  if (dtype_is_fp8(d.in[0]->dtype)) return cast_from_fp8(d);
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_ALL(d.in[0]->dtype, {
    using From = scalar_t;
    const bool out_ok = IPUXL_DISPATCH_ALL(d.out[0]->dtype, {
      k = make_cast<From, scalar_t>(d);
    });
    if (!out_ok) d.fail(std::string("unsupported output dtype ") + dtype_name(d.out[0]->dtype));
  });
  if (!ok) d.fail(std::string("unsupported input dtype ") + dtype_name(d.in[0]->dtype));
  return k;
}

}  // namespace

IPUXL_REGISTER_KERNEL("Cast", cast_factory);

}  // namespace ipuxl
