// Elementwise unary kernels and the conversions shared by the elementwise
// families (cast, clip, scaled_add, increment_mod).
#pragma once

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>

#include "../core/parallel.hpp"
#include "common.hpp"
#include "f16_block.hpp"

namespace ipuxl {

// Builds a kernel computing out[i] = f(in[i]) for storage types In and Out.
// f receives the compute-type value (float for float16). The output may alias
// the input (in-place ops): each element is read before it is written.
template <class In, class Out, class F>
std::unique_ptr<Kernel> make_unary(const OpDesc& d, F f) {
  using C = ct_t<In>;
  const TensorRef* a = d.in[0];
  const TensorRef* o = d.out[0];
  if (a->shape != o->shape)
    d.fail("input shape " + shape_str(a->shape) + " differs from the output shape " +
           shape_str(o->shape));
  return make_kernel(
      [=](RunContext&) {
        const In* A = a->as<In>();
        Out* O = o->as<Out>();
        if constexpr (std::is_same_v<In, f16> && std::is_same_v<Out, f16>) {
          // Blocks converted in bulk, the float formula vectorised (f16_block.hpp).
          const f16* ins[1] = {A};
          f16blk::map<1>(o->nelms, ins, O, [&](float x) { return (float)f(x); });
          return;
        }
        // Elementwise work splits into independent chunks across threads.
        elementwise_for<In>(o->nelms, kElementwiseGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) O[i] = (Out)f((C)A[i]);
        });
      });
}

// A double converted to the integer type I without undefined behaviour:
// truncated toward zero, NaN gives 0 and out-of-range values saturate at the
// limits of I. (A plain static_cast is UB for NaN and out-of-range values.)
template <class I>
I saturate_cast(double v) {
  static_assert(std::is_integral_v<I>, "saturate_cast targets integers");
  if (std::isnan(v)) return 0;
  constexpr I lo = std::numeric_limits<I>::min();
  constexpr I hi = std::numeric_limits<I>::max();
  // (double)hi may round up (2^63, 2^64): anything >= it is out of range.
  if (v <= (double)lo) return lo;
  if (v >= (double)hi) return hi;
  return (I)v;
}

// Converts a compute value to storage type To with defined results for
// every pair of types: to bool is `!= 0` (NaN is true, as in NumPy); float to
// integer truncates and saturates (NaN -> 0); integer to integer wraps
// modulo 2^bits (two's complement); anything to float16 rounds through
// float.
template <class To, class From>
To convert_value(From x) {
  if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (std::is_same_v<To, f16>) {
    return f16((float)x);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return saturate_cast<To>((double)x);
  } else {
    return static_cast<To>(x);
  }
}

// Reads element i of a buffer of storage type T as its compute type; bools
// are read as bytes so that any non-zero byte counts as true.
template <class T>
inline ct_t<T> load_value(const uint8_t* data, int64_t i) {
  if constexpr (std::is_same_v<T, bool>) {
    return data[i] != 0;
  } else {
    return (ct_t<T>)reinterpret_cast<const T*>(data)[i];
  }
}

// Wrapping integer arithmetic: signed overflow is UB in C++, the IPU wraps.
template <class T>
T wrap_add(T x, T y) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return (T)(U)((U)x + (U)y);
  } else {
    return (T)(x + y);
  }
}
template <class T>
T wrap_mul(T x, T y) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    // uint16 * uint16 promotes to (signed) int and may overflow: widen first.
    using W = std::conditional_t<(sizeof(U) < sizeof(unsigned)), unsigned, U>;
    return (T)(U)((W)(U)x * (W)(U)y);
  } else {
    return (T)(x * y);
  }
}
template <class T>
T wrap_neg(T x) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using U = std::make_unsigned_t<T>;
    return (T)(U)((U)0 - (U)x);
  } else {
    return -x;
  }
}

}  // namespace ipuxl
