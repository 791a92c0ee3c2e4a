// Elementwise binary kernels with NumPy broadcasting.
#pragma once

#include "common.hpp"

namespace ipuxl {

// Builds a kernel computing out[i] = f(a[i'], b[i'']) with broadcasting, for
// storage type T (inputs) and Out (output). f receives compute-type values
// (float for float16). out may alias a (in-place ops).
template <class T, class Out, class F>
std::unique_ptr<Kernel> make_binary(const OpDesc& d, F f) {
  using C = ct_t<T>;
  const TensorRef* a = d.in[0];
  const TensorRef* b = d.in[1];
  const TensorRef* o = d.out[0];
  bool ok = false;
  Shape bs = broadcast_shapes(a->shape, b->shape, &ok);
  if (!ok || bs != o->shape)
    d.fail("inputs " + shape_str(a->shape) + " and " + shape_str(b->shape) +
           " do not broadcast to the output shape " + shape_str(o->shape));
  const bool same = a->shape == o->shape && b->shape == o->shape;
  const bool b_scalar = b->nelms == 1 && a->shape == o->shape;
  const bool a_scalar = a->nelms == 1 && b->shape == o->shape;
  std::vector<int64_t> st[2] = {broadcast_strides(d, a->shape, o->shape),
                                broadcast_strides(d, b->shape, o->shape)};
  const Shape oshape = o->shape;
  return make_kernel(
      [=](RunContext&) {
        const T* A = a->as<T>();
        const T* B = b->as<T>();
        Out* O = o->as<Out>();
        const int64_t n = o->nelms;
        if (same) {
          for (int64_t i = 0; i < n; ++i) O[i] = (Out)f((C)A[i], (C)B[i]);
        } else if (b_scalar) {
          const C bv = (C)B[0];
          for (int64_t i = 0; i < n; ++i) O[i] = (Out)f((C)A[i], bv);
        } else if (a_scalar) {
          const C av = (C)A[0];
          for (int64_t i = 0; i < n; ++i) O[i] = (Out)f(av, (C)B[i]);
        } else {
          for_each_broadcast<2>(oshape, st, [&](int64_t out, int64_t len, const int64_t* offs,
                                                const int64_t* inner) {
            const T* pa = A + offs[0];
            const T* pb = B + offs[1];
            Out* po = O + out;
            const int64_t sa = inner[0], sb = inner[1];
            for (int64_t j = 0; j < len; ++j) po[j] = (Out)f((C)pa[j * sa], (C)pb[j * sb]);
          });
        }
      },
      (double)o->nelms);
}

}  // namespace ipuxl
