// Sum: elementwise sum of N same-shaped inputs (gradient accumulation).
#include "common.hpp"
#include "f16_block.hpp"

namespace ipuxl {
namespace {

// Elements below which a float32 sum runs on the calling thread.
constexpr int64_t kSumGrain = int64_t{1} << 15;

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
          if constexpr (std::is_same_v<T, float>) {
            // Gradient sums of float32 activations: the same additions in
            // the same order per element, vectorised and over the threads.
            std::vector<const float*> src;
            for (auto* t : ins) src.push_back(t->as<float>());
            const float* const* sp = src.data();
            const size_t m = src.size();
            isa::parallel_for(n, kSumGrain, [&](int64_t b, int64_t e) {
              if (m == 2) {
                const float *x0 = sp[0], *x1 = sp[1];
                for (int64_t i = b; i < e; ++i) out[i] = x0[i] + x1[i];
              } else if (m == 3) {
                const float *x0 = sp[0], *x1 = sp[1], *x2 = sp[2];
                for (int64_t i = b; i < e; ++i) out[i] = (x0[i] + x1[i]) + x2[i];
              } else {
                for (int64_t i = b; i < e; ++i) {
                  float acc = sp[0][i];
                  for (size_t k2 = 1; k2 < m; ++k2) acc = acc + sp[k2][i];
                  out[i] = acc;
                }
              }
            });
            return;
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
