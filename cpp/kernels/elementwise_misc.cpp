// Miscellaneous elementwise ops: Fmod, Pow, the variadic Max and
// IncrementMod (with its in-place form).
//
// Integer results are defined for every input, never trapping:
//   * Fmod: x fmod 0 == 0, and INT_MIN fmod -1 == 0;
//   * Pow: wraps modulo 2^bits; a negative exponent gives 1 for base 1,
//     +-1 for base -1 (by parity) and 0 otherwise (including base 0);
//   * IncrementMod: (x + increment) is computed without overflow (64-bit
//     types wrap), then the remainder takes the sign of the dividend.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "binary.hpp"
#include "unary.hpp"

namespace ipuxl {
namespace {

template <class C>
constexpr bool is_int_v = std::is_integral_v<C> && !std::is_same_v<C, bool>;

// C-style remainder (sign of the dividend), as std::fmod and NumPy's fmod.
template <class C>
C remainder_of(C x, C y) {
  if constexpr (is_int_v<C>) {
    if (y == 0) return 0;
    if constexpr (std::is_signed_v<C>) {
      if (y == (C)-1) return 0;  // INT_MIN % -1 traps on x86
    }
    return (C)(x % y);
  } else {
    return std::fmod(x, y);
  }
}

template <class C>
C int_pow(C base, C e) {
  if constexpr (std::is_signed_v<C>) {
    if (e < 0) {
      if (base == 1) return 1;
      if (base == -1) return (e % 2 == 0) ? (C)1 : (C)-1;
      return 0;
    }
  }
  using U = std::make_unsigned_t<C>;
  U n = (U)e;
  C result = 1;
  C b = base;
  while (n) {
    if (n & 1u) result = wrap_mul(result, b);
    n >>= 1;
    if (n) b = wrap_mul(b, b);
  }
  return result;
}

struct FmodF { template <class C> C operator()(C x, C y) const { return remainder_of(x, y); } };
struct PowF {
  template <class C> C operator()(C x, C y) const {
    if constexpr (is_int_v<C>) return int_pow(x, y);
    else return std::pow(x, y);
  }
};

// Elementwise maximum of N >= 1 inputs with NumPy broadcasting. NaN
// propagates (as numpy.maximum). The output is written with input 0
// broadcast, then folded with each further input; it must not alias an input.
std::unique_ptr<Kernel> max_factory(const OpDesc& d) {
  if (d.in.empty() || d.out.size() != 1) d.fail("expected at least one input and one output");
  const TensorRef* o = d.out[0];
  Shape shape;
  for (size_t i = 0; i < d.in.size(); ++i) {
    if (!d.in[i]) d.fail("input " + std::to_string(i) + " is missing");
    d.expect_same_dtype(*d.in[i], *o);
    if (d.in[i]->data == o->data && d.in[i]->nelms > 0 && o->nelms > 0)
      d.fail("output must not alias an input");
    bool ok = true;
    shape = i == 0 ? d.in[0]->shape : broadcast_shapes(shape, d.in[i]->shape, &ok);
    if (!ok) d.fail("input shapes do not broadcast");
  }
  d.expect_shape(*o, shape);
  std::vector<std::vector<int64_t>> strides;
  for (const TensorRef* t : d.in) strides.push_back(broadcast_strides(d, t->shape, o->shape));
  std::vector<const TensorRef*> ins(d.in.begin(), d.in.end());
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_NUMERIC(o->dtype, {
    using T = scalar_t;
    using C = ct_t<T>;
    k = make_kernel(
        [ins, strides, o](RunContext&) {
          T* O = o->as<T>();
          for (size_t i = 0; i < ins.size(); ++i) {
            const T* I = ins[i]->as<T>();
            const std::vector<int64_t> st[1] = {strides[i]};
            for_each_broadcast<1>(o->shape, st, [&](int64_t out, int64_t len, const int64_t* offs,
                                                    const int64_t* inner) {
              const T* p = I + offs[0];
              T* q = O + out;
              for (int64_t j = 0; j < len; ++j) {
                const C b = (C)p[j * inner[0]];
                if (i == 0) {
                  q[j] = (T)b;
                } else {
                  const C a = (C)q[j];
                  // a > b keeps a; a NaN keeps a; otherwise b (b NaN gives NaN).
                  q[j] = (a > b || a != a) ? (T)a : (T)b;
                }
              }
            });
          }
        });
  });
  if (!ok) d.fail(std::string("unsupported dtype ") + dtype_name(o->dtype));
  return k;
}

// (x + increment) % modulus with attributes "increment" and "modulus". As in
// PopART both are first converted to the tensor's type (truncated for
// integers, where they must be in range and modulus must not truncate to 0).
std::unique_ptr<Kernel> increment_mod_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  d.expect_same_dtype(*d.in[0], *d.out[0]);
  const double inc = d.attrs.f("increment");
  const double mod = d.attrs.f("modulus");
  if (!std::isfinite(inc) || !std::isfinite(mod)) d.fail("increment and modulus must be finite");
  std::unique_ptr<Kernel> k;
  const DType dt = d.in[0]->dtype;
  bool ok = IPUXL_DISPATCH_NUMERIC(dt, {
    using C = ct_t<scalar_t>;
    if constexpr (is_int_v<C>) {
      const double lo = (double)std::numeric_limits<C>::min();
      const double hi = (double)std::numeric_limits<C>::max();
      if (std::trunc(inc) < lo || std::trunc(inc) > hi || std::trunc(mod) < lo ||
          std::trunc(mod) > hi)
        d.fail(std::string("increment and modulus must be representable in ") + dtype_name(dt));
      const C ic = saturate_cast<C>(inc);
      const C mc = saturate_cast<C>(mod);
      if (mc == 0) d.fail("modulus truncates to 0 for an integer tensor");
      k = make_unary<scalar_t, scalar_t>(d, [ic, mc](C x) {
        if constexpr (sizeof(C) < 8) {
          // Exact in 64 bits; |result| < |modulus| fits in C.
          return (C)remainder_of<int64_t>((int64_t)x + (int64_t)ic, (int64_t)mc);
        } else {
          return remainder_of<C>(wrap_add(x, ic), mc);
        }
      });
    } else {
      if (mod == 0) d.fail("modulus must not be 0");
      if constexpr (std::is_same_v<C, float>) {
        const double fmax = (double)std::numeric_limits<float>::max();
        if (std::fabs(inc) > fmax || std::fabs(mod) > fmax)
          d.fail("increment and modulus must be in the float32 range");
      }
      const C ic = (C)inc;
      const C mc = (C)mod;
      k = make_unary<scalar_t, scalar_t>(d, [ic, mc](C x) { return std::fmod(x + ic, mc); });
    }
  });
  if (!ok) d.fail(std::string("unsupported dtype ") + dtype_name(dt));
  return k;
}

}  // namespace

IPUXL_REGISTER_KERNEL("Fmod", same_type_binary(FmodF{}));
IPUXL_REGISTER_KERNEL("Pow", same_type_binary(PowF{}));
IPUXL_REGISTER_KERNEL("Max", max_factory);
IPUXL_REGISTER_KERNEL("IncrementMod", increment_mod_factory);
IPUXL_REGISTER_KERNEL("IncrementModInplace", increment_mod_factory);

}  // namespace ipuxl
