// Arithmetic binary ops: Add, Sub, Mul, Div and their in-place forms.
// In-place forms ("...Inplace") are lowered with the output aliasing input 0,
// so the same kernel writes straight into the left operand.
#include <cmath>
#include <limits>
#include <type_traits>

#include "binary.hpp"
#include "unary.hpp"

namespace ipuxl {
namespace {

template <class C>
C safe_div(C x, C y) {
  if constexpr (std::is_integral_v<C>) {
    // Integer division by zero (and MIN / -1) would trap the process; the IPU
    // leaves the value undefined, we define it as 0.
    if (y == 0) return 0;
    if constexpr (std::is_signed_v<C>) {
      if (y == (C)-1) return wrap_neg(x);  // MIN / -1 wraps to MIN (0 - x overflowed: UB)
    }
    return x / y;
  } else {
    return x / y;
  }
}

// Integer overflow wraps (as on the IPU); signed overflow is UB in C++, so
// integers go through unsigned arithmetic.
struct AddF { template <class C> C operator()(C x, C y) const { return wrap_add(x, y); } };
struct SubF {
  template <class C> C operator()(C x, C y) const {
    if constexpr (std::is_integral_v<C>) {
      using U = std::make_unsigned_t<C>;
      return (C)(U)((U)x - (U)y);
    } else {
      return (C)(x - y);
    }
  }
};
struct MulF { template <class C> C operator()(C x, C y) const { return wrap_mul(x, y); } };
struct DivF { template <class C> C operator()(C x, C y) const { return safe_div(x, y); } };

}  // namespace

IPUXL_REGISTER_KERNEL("Add", same_type_binary(AddF{}));
IPUXL_REGISTER_KERNEL("AddLhsInplace", same_type_binary(AddF{}));
IPUXL_REGISTER_KERNEL("Sub", same_type_binary(SubF{}));
IPUXL_REGISTER_KERNEL("SubLhsInplace", same_type_binary(SubF{}));
IPUXL_REGISTER_KERNEL("Mul", same_type_binary(MulF{}));
IPUXL_REGISTER_KERNEL("MulLhsInplace", same_type_binary(MulF{}));
IPUXL_REGISTER_KERNEL("Div", same_type_binary(DivF{}));
IPUXL_REGISTER_KERNEL("DivLhsInplace", same_type_binary(DivF{}));

}  // namespace ipuxl
