// Logical and comparison ops: And, Or, Not (bool -> bool) and Equal,
// Greater (any same-typed inputs -> bool), with NumPy broadcasting.
//
// Bool tensors are read as bytes and any non-zero byte counts as true, so a
// kernel never depends on a bool holding exactly 0 or 1.
#include <cmath>

#include "binary.hpp"
#include "unary.hpp"

namespace ipuxl {
namespace {

template <class Op>
KernelFactory bool_binary(Op op) {
  return [op](const OpDesc& d) -> std::unique_ptr<Kernel> {
    d.expect_arity(2, 1);
    for (const TensorRef* t : {d.in[0], d.in[1], d.out[0]})
      if (t->dtype != DType::Bool)
        d.fail(std::string("expected bool tensors, got ") + dtype_name(t->dtype) + " for " +
               t->name);
    return make_binary<uint8_t, bool>(d, [op](uint8_t x, uint8_t y) {
      return op(x != 0, y != 0);
    });
  };
}

std::unique_ptr<Kernel> not_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  if (d.in[0]->dtype != DType::Bool || d.out[0]->dtype != DType::Bool)
    d.fail("expected a bool input and output");
  return make_unary<uint8_t, bool>(d, [](uint8_t x) { return x == 0; });
}

// Comparison of two same-typed inputs into a bool output. Floats compare in
// their compute type (NaN compares unequal and not greater).
template <class Op>
KernelFactory comparison(Op op, bool allow_bool) {
  return [op, allow_bool](const OpDesc& d) -> std::unique_ptr<Kernel> {
    d.expect_arity(2, 1);
    d.expect_same_dtype(*d.in[0], *d.in[1]);
    if (d.out[0]->dtype != DType::Bool) d.fail("the output must be bool");
    const DType dt = d.in[0]->dtype;
    std::unique_ptr<Kernel> k;
    if (dt == DType::Bool) {
      if (!allow_bool) d.fail("bool inputs are not supported");
      return make_binary<uint8_t, bool>(d, [op](uint8_t x, uint8_t y) {
        return op((int)(x != 0), (int)(y != 0));
      });
    }
    bool ok = IPUXL_DISPATCH_NUMERIC(dt, {
      using C = ct_t<scalar_t>;
      k = make_binary<scalar_t, bool>(d, [op](C x, C y) { return op(x, y); });
    });
    if (!ok) d.fail(std::string("unsupported dtype ") + dtype_name(dt));
    return k;
  };
}

struct AndF { bool operator()(bool x, bool y) const { return x && y; } };
struct OrF { bool operator()(bool x, bool y) const { return x || y; } };
struct EqualF { template <class C> bool operator()(C x, C y) const { return x == y; } };
struct GreaterF { template <class C> bool operator()(C x, C y) const { return x > y; } };

}  // namespace

IPUXL_REGISTER_KERNEL("And", bool_binary(AndF{}));
IPUXL_REGISTER_KERNEL("Or", bool_binary(OrF{}));
IPUXL_REGISTER_KERNEL("Not", not_factory);
IPUXL_REGISTER_KERNEL("Equal", comparison(EqualF{}, true));
IPUXL_REGISTER_KERNEL("Greater", comparison(GreaterF{}, false));

}  // namespace ipuxl
