// GroupQuantizeDecompress (popxl_addons.ops.group_quantize_decompress):
// 4-bit group-quantised weights (FlexGen) back to floating point.
//
//   in:  t     uint16 (R, G, I): four 4-bit ids per element, the first in
//                                the top nibble (shifts 12, 8, 4, 0)
//        scale float (R, G, 1)
//        bias  float (R, G, 1), same dtype as scale
//   out: float (R, G * I * 4), the dtype of scale:
//        out[r, (g * I + i) * 4 + j] = id(t[r, g, i], j) * scale[r, g] + bias[r, g]
//
// The product and the sum are each rounded to the output dtype, as
// group_quantize_decompress_numpy computes them in float16 (and the IPU's
// map of the unpacked float16 ids).
#include <algorithm>
#include <memory>
#include <string>

#include "common.hpp"

namespace ipuxl {
namespace {

std::unique_ptr<Kernel> group_quantize_decompress_factory(const OpDesc& d) {
  d.expect_arity(3, 1);
  const TensorRef* t = d.in[0];
  const TensorRef* s = d.in[1];
  const TensorRef* b = d.in[2];
  const TensorRef* o = d.out[0];
  if (t->dtype != DType::UInt16) d.fail("the packed tensor must be uint16");
  if (t->rank() != 3) d.fail("the packed tensor must have rank 3, got shape " + shape_str(t->shape));
  const int64_t R = t->shape[0], G = t->shape[1], I = t->shape[2];
  const Shape sshape{R, G, 1};
  d.expect_shape(*s, sshape);
  d.expect_shape(*b, sshape);
  d.expect_same_dtype(*s, *b);
  d.expect_same_dtype(*s, *o);
  d.expect_shape(*o, Shape{R, G * I * 4});
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_FLOAT(o->dtype, {
    k = make_kernel([=](RunContext&) {
      const uint16_t* tp = t->as<uint16_t>();
      const scalar_t* sp = s->as<scalar_t>();
      const scalar_t* bp = b->as<scalar_t>();
      scalar_t* op = o->as<scalar_t>();
      parallel_for(R * G, std::max<int64_t>(1, 4096 / std::max<int64_t>(1, I)),
                   [=](int64_t lo, int64_t hi) {
        for (int64_t rg = lo; rg < hi; ++rg) {
          using ct = ct_t<scalar_t>;
          const ct scale = (ct)sp[rg], bias = (ct)bp[rg];
          for (int64_t i = 0; i < I; ++i) {
            const uint16_t v = tp[rg * I + i];
            for (int j = 0; j < 4; ++j) {
              const ct id = (ct)((v >> (12 - 4 * j)) & 15);
              const scalar_t prod = (scalar_t)(id * scale);
              op[(rg * I + i) * 4 + j] = (scalar_t)((ct)prod + bias);
            }
          }
        }
      });
    });
  });
  if (!ok) d.fail(std::string("scale and bias must be float16 or float32, got ") +
                  dtype_name(o->dtype));
  return k;
}

}  // namespace

IPUXL_REGISTER_KERNEL("GroupQuantizeDecompress", group_quantize_decompress_factory);

}  // namespace ipuxl
