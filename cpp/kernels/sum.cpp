// Sum: elementwise sum of N same-shaped inputs (gradient accumulation).
#include "common.hpp"
#include "f16_block.hpp"

namespace ipuxl {
namespace {

std::unique_ptr<Kernel> sum_factory(const OpDesc& d) {
  if (d.in.empty() || d.out.size() != 1) d.fail("expected at least one input and one output");
  const TensorRef* o = d.out[0];
  std::vector<const TensorRef*> ins;
  for (auto* t : d.in) {
    if (!t) d.fail("inputs must all be present");
    d.expect_same_dtype(*t, *o);
    d.expect_shape(*t, o->shape);
    ins.push_back(t);
  }
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_NUMERIC(o->dtype, {
    using T = scalar_t;
    using C = ct_t<T>;
    k = make_kernel(
        [ins, o](RunContext&) {
          T* out = o->as<T>();
          const int64_t n = o->nelms;
          if constexpr (std::is_same_v<T, f16>) {
            // Two or three float16 inputs: blocks converted in bulk (f16_block.hpp).
            if (ins.size() == 2) {
              const f16* in2[2] = {ins[0]->as<f16>(), ins[1]->as<f16>()};
              f16blk::map<2>(n, in2, reinterpret_cast<f16*>(out), [](float a, float b) { return a + b; });
              return;
            }
            if (ins.size() == 3) {
              const f16* in3[3] = {ins[0]->as<f16>(), ins[1]->as<f16>(), ins[2]->as<f16>()};
              f16blk::map<3>(n, in3, reinterpret_cast<f16*>(out), [](float a, float b, float c) { return (a + b) + c; });
              return;
            }
          }
          // Accumulate in the compute type; read every input before the
          // write so an output aliasing an input stays correct.
          for (int64_t i = 0; i < n; ++i) {
            C acc = (C)ins[0]->as<T>()[i];
            for (size_t k2 = 1; k2 < ins.size(); ++k2) acc = (C)(acc + (C)ins[k2]->as<T>()[i]);
            out[i] = (T)acc;
          }
        });
  });
  if (!ok) d.fail(std::string("unsupported dtype ") + dtype_name(o->dtype));
  return k;
}

}  // namespace

IPUXL_REGISTER_KERNEL("Sum", sum_factory);

}  // namespace ipuxl
