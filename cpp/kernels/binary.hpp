// Elementwise binary kernels with NumPy broadcasting.
#pragma once

#include <algorithm>
#include <vector>

#include "../core/parallel.hpp"
#include "common.hpp"
#include "f16_block.hpp"

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
  // b is a trailing row repeated over the leading axes of a (bias add).
  int64_t B_rowlen = b->nelms;
  const bool row_bcast = !same && a->shape == o->shape && b->nelms > 1 && o->nelms % b->nelms == 0 &&
                         [&] {
                           // b's shape (ignoring leading 1s) must equal a's trailing axes.
                           Shape bs = b->shape;
                           while (!bs.empty() && bs.front() == 1) bs.erase(bs.begin());
                           if (bs.size() > o->shape.size()) return false;
                           return std::equal(bs.begin(), bs.end(), o->shape.end() - bs.size());
                         }();
  std::vector<int64_t> st[2] = {broadcast_strides(d, a->shape, o->shape),
                                broadcast_strides(d, b->shape, o->shape)};
  const Shape oshape = o->shape;
  return make_kernel(
      [=](RunContext&) {
        const T* A = a->as<T>();
        const T* B = b->as<T>();
        Out* O = o->as<Out>();
        const int64_t n = o->nelms;
        if constexpr (std::is_same_v<T, f16> && std::is_same_v<Out, f16>) {
          // Blocks converted in bulk, the float formula vectorised (f16_block.hpp);
          // the general broadcast below stays element by element.
          auto g = [&](float x, float y) { return (float)f(x, y); };
          if (same) {
            const f16* ins[2] = {A, B};
            f16blk::map<2>(n, ins, O, g);
            return;
          }
          if (b_scalar || a_scalar) {
            const float s = (float)(b_scalar ? B[0] : A[0]);
            const f16* ins[1] = {b_scalar ? A : B};
            if (b_scalar) f16blk::map<1>(n, ins, O, [&](float x) { return g(x, s); });
            else f16blk::map<1>(n, ins, O, [&](float y) { return g(s, y); });
            return;
          }
          if (row_bcast) {
            std::vector<float> row((size_t)B_rowlen);
            half::to_float(B, row.data(), B_rowlen);
            f16blk::map_rows(n / B_rowlen, B_rowlen, A, row.data(), O, g);
            return;
          }
        }
        if (same) {
          elementwise_for<T>(n, kElementwiseGrain, [&](int64_t b0, int64_t e0) {
            for (int64_t i = b0; i < e0; ++i) O[i] = (Out)f((C)A[i], (C)B[i]);
          });
        } else if (b_scalar) {
          const C bv = (C)B[0];
          elementwise_for<T>(n, kElementwiseGrain, [&](int64_t b0, int64_t e0) {
            for (int64_t i = b0; i < e0; ++i) O[i] = (Out)f((C)A[i], bv);
          });
        } else if (a_scalar) {
          const C av = (C)A[0];
          elementwise_for<T>(n, kElementwiseGrain, [&](int64_t b0, int64_t e0) {
            for (int64_t i = b0; i < e0; ++i) O[i] = (Out)f(av, (C)B[i]);
          });
        } else if (row_bcast) {
          // out[r, j] = f(a[r, j], b[j]): the bias-add pattern.
          const int64_t cols = B_rowlen, rows = n / cols;
          elementwise_for<T>(rows, std::max<int64_t>(1, kElementwiseGrain / cols),
                       [&](int64_t r0, int64_t r1) {
                         for (int64_t r = r0; r < r1; ++r) {
                           const T* pa = A + r * cols;
                           Out* po = O + r * cols;
                           for (int64_t j = 0; j < cols; ++j) po[j] = (Out)f((C)pa[j], (C)B[j]);
                         }
                       });
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
      });
}

// Factory for a binary op whose inputs and output share one numeric dtype:
// out = op(a, b) in the compute type, with broadcasting.
template <class Op>
KernelFactory same_type_binary(Op op) {
  return [op](const OpDesc& d) -> std::unique_ptr<Kernel> {
    d.expect_arity(2, 1);
    d.expect_same_dtype(*d.in[0], *d.in[1]);
    d.expect_same_dtype(*d.in[0], *d.out[0]);
    std::unique_ptr<Kernel> k;
    bool ok = IPUXL_DISPATCH_NUMERIC(d.in[0]->dtype, {
      using C = ct_t<scalar_t>;
      k = make_binary<scalar_t, scalar_t>(d, [op](C x, C y) { return (C)op(x, y); });
    });
    if (!ok) d.fail(std::string("unsupported dtype ") + dtype_name(d.in[0]->dtype));
    return k;
  };
}

}  // namespace ipuxl
