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
      if (y == (C)-1) return (C)(0 - x);
    }
    return x / y;
  } else {
    return x / y;
  }
}

template <class Op>
KernelFactory arithmetic(Op op) {
  return [op](const OpDesc& d) -> std::unique_ptr<Kernel> {
    d.expect_arity(2, 1);
    d.expect_same_dtype(*d.in[0], *d.in[1]);
    d.expect_same_dtype(*d.in[0], *d.out[0]);
    std::unique_ptr<Kernel> k;
    bool ok = IPUXL_DISPATCH_NUMERIC(d.in[0]->dtype, {
      using C = ct_t<scalar_t>;
      k = make_binary<scalar_t, scalar_t>(d, [op](C x, C y) { return op(x, y); });
    });
    if (!ok) d.fail(std::string("unsupported dtype ") + dtype_name(d.in[0]->dtype));
    return k;
  };
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

IPUXL_REGISTER_KERNEL("Add", arithmetic(AddF{}));
IPUXL_REGISTER_KERNEL("AddLhsInplace", arithmetic(AddF{}));
IPUXL_REGISTER_KERNEL("Sub", arithmetic(SubF{}));
IPUXL_REGISTER_KERNEL("SubLhsInplace", arithmetic(SubF{}));
IPUXL_REGISTER_KERNEL("Mul", arithmetic(MulF{}));
IPUXL_REGISTER_KERNEL("MulLhsInplace", arithmetic(MulF{}));
IPUXL_REGISTER_KERNEL("Div", arithmetic(DivF{}));
IPUXL_REGISTER_KERNEL("DivLhsInplace", arithmetic(DivF{}));

}  // namespace ipuxl
