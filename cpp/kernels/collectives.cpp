// AllReduce: popxl.ops.collectives.all_reduce, the reduction of N tensors
// across the IPUs of one replica. Every output is the reduction of all the
// inputs (with identical_inputs, PopART's identity forward: output i is
// input i). Reductions follow the replica collectives (cpp/exec/
// collectives.cpp): op 0 add, 1 mean, 2 mul, 3 min, 4 max, 5 and, 6 or,
// 7 square_add; floats accumulate in double, integers in 64 bits.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "common.hpp"

namespace ipuxl {
namespace {

template <class T>
using wide_t = std::conditional_t<std::is_floating_point_v<T> || std::is_same_v<T, f16>, double,
                                  std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;

template <class T>
wide_t<T> widen(T v) {
  if constexpr (std::is_same_v<T, f16>) return (double)(float)v;
  else return (wide_t<T>)v;
}

template <class T>
T narrow(wide_t<T> v) {
  if constexpr (std::is_same_v<T, f16>) return f16((float)v);
  else return (T)v;
}

std::unique_ptr<Kernel> all_reduce_factory(const OpDesc& d) {
  if (d.in.empty() || d.in.size() != d.out.size())
    d.fail("expected N inputs and N outputs (N >= 1)");
  const int64_t op = d.attrs.i("op", 0);
  if (op < 0 || op > 7) d.fail("op must be a reduction code in [0, 7], got " + std::to_string(op));
  const bool identical = d.attrs.i("identical_inputs", 0) != 0;
  std::vector<const TensorRef*> ins(d.in.begin(), d.in.end());
  std::vector<const TensorRef*> outs(d.out.begin(), d.out.end());
  for (size_t k = 0; k < ins.size(); ++k) {
    if (!ins[k]) d.fail("inputs must all be present");
    d.expect_same_dtype(*ins[k], *outs[0]);
    d.expect_shape(*ins[k], outs[0]->shape);
    d.expect_same_dtype(*outs[k], *outs[0]);
    d.expect_shape(*outs[k], outs[0]->shape);
  }
  std::unique_ptr<Kernel> kern;
  bool ok = IPUXL_DISPATCH_NUMERIC(outs[0]->dtype, {
    using T = scalar_t;
    using W = wide_t<T>;
    kern = make_kernel([ins, outs, op, identical](RunContext&) {
      const int64_t n = outs[0]->nelms;
      const size_t g = ins.size();
      if (identical) {
        for (size_t k = 0; k < g; ++k)
          if (outs[k]->data != ins[k]->data && n)
            std::memmove(outs[k]->data, ins[k]->data, (size_t)n * sizeof(T));
        return;
      }
      // Every input is read before any output is written (outputs may alias).
      std::vector<W> acc((size_t)n);
      for (int64_t i = 0; i < n; ++i) {
        W v = widen(ins[0]->as<T>()[i]);
        if (op == 7) v = v * v;
        if (op == 5 || op == 6) v = v != W(0) ? W(1) : W(0);
        for (size_t m = 1; m < g; ++m) {
          const W x = widen(ins[m]->as<T>()[i]);
          switch (op) {
            case 0: case 1: v += x; break;
            case 2: v *= x; break;
            case 3: v = std::min(v, x); break;
            case 4: v = std::max(v, x); break;
            case 5: v = (v != W(0) && x != W(0)) ? W(1) : W(0); break;
            case 6: v = (v != W(0) || x != W(0)) ? W(1) : W(0); break;
            case 7: v += x * x; break;
            default: break;
          }
        }
        if (op == 1) v = v / (W)g;
        acc[(size_t)i] = v;
      }
      for (size_t k = 0; k < g; ++k) {
        T* o = outs[k]->as<T>();
        for (int64_t i = 0; i < n; ++i) o[i] = narrow<T>(acc[(size_t)i]);
      }
    });
  });
  if (!ok) d.fail(std::string("unsupported dtype ") + dtype_name(outs[0]->dtype));
  return kern;
}

}  // namespace

IPUXL_REGISTER_KERNEL("AllReduce", all_reduce_factory);

}  // namespace ipuxl
