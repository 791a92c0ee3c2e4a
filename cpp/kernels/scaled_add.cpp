// ScaledAdd: out = a*X + b*Y, without broadcasting (X, Y and the output have
// one shape). X and Y may have different numeric types; the output has X's.
// a and b are either the float attributes "scale0"/"scale1" or, when input 2
// or 3 is present, single-element numeric tensors read at run time.
// float16/float32 outputs compute in float32, float64 and integer outputs in
// double; integer results are truncated and saturated (NaN -> 0).
// "ScaledAddLhsInplace" is the same kernel with the output aliasing X.
#include <cmath>

#include "f16_block.hpp"
#include "unary.hpp"

namespace ipuxl {
namespace {

// Reads a single-element scale tensor as a double.
double read_scalar(const TensorRef* t) {
  double v = 0.0;
  IPUXL_DISPATCH_ALL(t->dtype, { v = (double)load_value<scalar_t>(t->data, 0); });
  return v;
}

template <class TX, class TY>
std::unique_ptr<Kernel> make_scaled_add(const OpDesc& d, double a_attr, double b_attr,
                                        const TensorRef* ta, const TensorRef* tb) {
  using C = std::conditional_t<std::is_same_v<TX, f16> || std::is_same_v<TX, float>, float,
                               double>;
  const TensorRef* x = d.in[0];
  const TensorRef* y = d.in[1];
  const TensorRef* o = d.out[0];
  return make_kernel(
      [=](RunContext&) {
        const C a = (C)(ta ? read_scalar(ta) : a_attr);
        const C b = (C)(tb ? read_scalar(tb) : b_attr);
        const uint8_t* X = x->data;
        const uint8_t* Y = y->data;
        TX* O = o->as<TX>();
        const int64_t n = o->nelms;
        if constexpr (std::is_same_v<TX, f16> && std::is_same_v<TY, f16>) {
          // The float16 updates: blocks converted in bulk (f16_block.hpp).
          const f16* ins[2] = {reinterpret_cast<const f16*>(X), reinterpret_cast<const f16*>(Y)};
          f16blk::map<2>(n, ins, O, [a, b](float xv, float yv) { return a * xv + b * yv; });
          return;
        }
        auto body = [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i) {
            const C r = a * (C)load_value<TX>(X, i) + b * (C)load_value<TY>(Y, i);
            O[i] = convert_value<TX>(r);
          }
        };
        // float32 (the SGD updates): one copy per instruction-set level.
        if constexpr (std::is_same_v<TX, float> && std::is_same_v<TY, float>)
          isa::run(body, 0, n);
        else
          body(0, n);
      });
}

std::unique_ptr<Kernel> scaled_add_factory(const OpDesc& d) {
  if (d.in.size() < 2 || d.in.size() > 4 || d.out.size() != 1 || !d.in[0] || !d.in[1])
    d.fail("expected inputs X, Y and optional a, b, and one output");
  const TensorRef* x = d.in[0];
  const TensorRef* y = d.in[1];
  const TensorRef* ta = d.in.size() > 2 ? d.in[2] : nullptr;
  const TensorRef* tb = d.in.size() > 3 ? d.in[3] : nullptr;
  d.expect_same_dtype(*x, *d.out[0]);
  d.expect_shape(*y, x->shape);
  d.expect_shape(*d.out[0], x->shape);
  for (const TensorRef* s : {ta, tb}) {
    if (s && s->nelms != 1)
      d.fail("scale tensor " + s->name + " must have one element, has shape " +
             shape_str(s->shape));
  }
  const double a = d.attrs.f("scale0", 1.0);
  const double b = d.attrs.f("scale1", 1.0);
  if (x->dtype == DType::Bool || y->dtype == DType::Bool) d.fail("X and Y must be numeric");
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_NUMERIC(x->dtype, {
    using TX = scalar_t;
    const bool y_ok = IPUXL_DISPATCH_NUMERIC(y->dtype, {
      k = make_scaled_add<TX, scalar_t>(d, a, b, ta, tb);
    });
    if (!y_ok) d.fail(std::string("unsupported dtype ") + dtype_name(y->dtype) + " for Y");
  });
  if (!ok) d.fail(std::string("unsupported dtype ") + dtype_name(x->dtype) + " for X");
  return k;
}

}  // namespace

IPUXL_REGISTER_KERNEL("ScaledAdd", scaled_add_factory);
IPUXL_REGISTER_KERNEL("ScaledAddLhsInplace", scaled_add_factory);

}  // namespace ipuxl
