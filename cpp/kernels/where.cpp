// Where(condition, lhs, rhs): lhs where condition is true, else rhs, with
// NumPy broadcasting over all three inputs. The condition is bool (read as
// bytes: any non-zero byte is true); lhs, rhs and the output share a dtype.
#include <cstring>

#include "common.hpp"

namespace ipuxl {
namespace {

template <class T>
std::unique_ptr<Kernel> make_where(const OpDesc& d) {
  const TensorRef* c = d.in[0];
  const TensorRef* a = d.in[1];
  const TensorRef* b = d.in[2];
  const TensorRef* o = d.out[0];
  std::vector<int64_t> st[3] = {broadcast_strides(d, c->shape, o->shape),
                                broadcast_strides(d, a->shape, o->shape),
                                broadcast_strides(d, b->shape, o->shape)};
  return make_kernel(
      [=](RunContext&) {
        const uint8_t* C = c->as<uint8_t>();
        const T* A = a->as<T>();
        const T* B = b->as<T>();
        T* O = o->as<T>();
        for_each_broadcast<3>(o->shape, st, [&](int64_t out, int64_t len, const int64_t* offs,
                                                const int64_t* inner) {
          for (int64_t j = 0; j < len; ++j)
            O[out + j] = C[offs[0] + j * inner[0]] ? A[offs[1] + j * inner[1]]
                                                   : B[offs[2] + j * inner[2]];
        });
      });
}

std::unique_ptr<Kernel> where_factory(const OpDesc& d) {
  d.expect_arity(3, 1);
  if (d.in[0]->dtype != DType::Bool) d.fail("the condition must be bool");
  d.expect_same_dtype(*d.in[1], *d.in[2]);
  d.expect_same_dtype(*d.in[1], *d.out[0]);
  bool ok = true;
  Shape s = broadcast_shapes(d.in[0]->shape, d.in[1]->shape, &ok);
  if (ok) s = broadcast_shapes(s, d.in[2]->shape, &ok);
  if (!ok)
    d.fail("shapes " + shape_str(d.in[0]->shape) + ", " + shape_str(d.in[1]->shape) + " and " +
           shape_str(d.in[2]->shape) + " do not broadcast");
  d.expect_shape(*d.out[0], s);
  // Selection only moves bytes: dispatch on the element size.
  switch (dtype_size(d.out[0]->dtype)) {
    case 1: return make_where<uint8_t>(d);
    case 2: return make_where<uint16_t>(d);
    case 4: return make_where<uint32_t>(d);
    case 8: return make_where<uint64_t>(d);
    default: d.fail(std::string("unsupported dtype ") + dtype_name(d.out[0]->dtype));
  }
}

}  // namespace

IPUXL_REGISTER_KERNEL("Where", where_factory);

}  // namespace ipuxl
