// CrossEntropyShardedWR (popxl_addons.ops.cross_entropy_sharded_wr_loss):
// cross-entropy of logits sharded along the class axis over the IPUs of
// one replica.
//
//   in:  logits_0 .. logits_{n-1}   float16/float32 (N, C_i), one dtype
//        indices_0 .. indices_{n-1} integer (N): the same global labels
//   out: loss (N) in the logits' dtype,
//        softmax_0 .. softmax_{n-1} (N, C_i): the shards of the softmax
//   attr n_shards
//
// Shard i holds the classes [sum_{j<i} C_j, sum_{j<=i} C_j). Per sample,
// loss = log(sum over all classes of exp(x - m)) + m - x[label] with m the
// largest logit, computed in float32 (float64 for float64) and rounded
// once. A label outside [0, sum C_i) is a RunError naming the op.
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"

namespace ipuxl {
namespace {

template <class I>
int64_t read_label(const TensorRef* t, int64_t r) { return (int64_t)t->as<I>()[r]; }

int64_t label_at(const TensorRef* t, int64_t r) {
  switch (t->dtype) {
    case DType::Int32: return read_label<int32_t>(t, r);
    case DType::UInt32: return read_label<uint32_t>(t, r);
    case DType::Int64: return read_label<int64_t>(t, r);
    case DType::UInt64: return (int64_t)read_label<uint64_t>(t, r);
    case DType::Int16: return read_label<int16_t>(t, r);
    case DType::UInt16: return read_label<uint16_t>(t, r);
    case DType::Int8: return read_label<int8_t>(t, r);
    case DType::UInt8: return read_label<uint8_t>(t, r);
    default: return -1;
  }
}

std::unique_ptr<Kernel> ce_sharded_wr_factory(const OpDesc& d) {
  const int64_t n = d.attrs.i("n_shards");
  if (n < 1) d.fail("n_shards must be >= 1");
  d.expect_arity((size_t)(2 * n), (size_t)(n + 1));
  const TensorRef* l0 = d.in[0];
  if (l0->rank() != 2) d.fail("logits must have rank 2 (n_samples, n_classes of the shard)");
  const int64_t N = l0->shape[0];
  std::vector<const TensorRef*> xs, ids, sms;
  std::vector<int64_t> offs;
  int64_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const TensorRef* x = d.in[(size_t)i];
    const TensorRef* id = d.in[(size_t)(n + i)];
    const TensorRef* sm = d.out[(size_t)(1 + i)];
    d.expect_same_dtype(*l0, *x);
    if (x->rank() != 2 || x->shape[0] != N)
      d.fail("logits shard " + std::to_string(i) + " must have shape (" + std::to_string(N) +
             ", classes), got " + shape_str(x->shape));
    d.expect_shape(*id, Shape{N});
    if (dtype_is_float(id->dtype) || dtype_is_fp8(id->dtype) || id->dtype == DType::Bool)
      d.fail("indices must be integers");
    d.expect_same_dtype(*x, *sm);
    d.expect_shape(*sm, x->shape);
    xs.push_back(x);
    ids.push_back(id);
    sms.push_back(sm);
    offs.push_back(total);
    total += x->shape[1];
  }
  const TensorRef* loss = d.out[0];
  d.expect_same_dtype(*l0, *loss);
  d.expect_shape(*loss, Shape{N});
  const std::string name = d.name;
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_FLOAT(l0->dtype, {
    using T = scalar_t;
    using ct = ct_t<T>;
    k = make_kernel([=](RunContext&) {
      for (int64_t r = 0; r < N; ++r) {
        ct m = -INFINITY;
        for (int64_t i = 0; i < n; ++i) {
          const int64_t C = xs[(size_t)i]->shape[1];
          const T* x = xs[(size_t)i]->as<T>() + r * C;
          for (int64_t c = 0; c < C; ++c) m = std::max(m, (ct)x[c]);
        }
        ct s = 0, picked = 0;
        bool found = false;
        for (int64_t i = 0; i < n; ++i) {
          const int64_t C = xs[(size_t)i]->shape[1];
          const T* x = xs[(size_t)i]->as<T>() + r * C;
          for (int64_t c = 0; c < C; ++c) s += std::exp((ct)x[c] - m);
          const int64_t lab = label_at(ids[(size_t)i], r) - offs[(size_t)i];
          if (lab >= 0 && lab < C) {
            picked = (ct)x[lab];
            found = true;
          }
        }
        if (!found)
          throw RunError(name + ": label " + std::to_string(label_at(ids[0], r)) + " of sample " +
                         std::to_string(r) + " is outside [0, " + std::to_string(total) + ")");
        loss->as<T>()[r] = (T)(std::log(s) + m - picked);
        for (int64_t i = 0; i < n; ++i) {
          const int64_t C = xs[(size_t)i]->shape[1];
          const T* x = xs[(size_t)i]->as<T>() + r * C;
          T* y = sms[(size_t)i]->as<T>() + r * C;
          for (int64_t c = 0; c < C; ++c) y[c] = (T)(std::exp((ct)x[c] - m) / s);
        }
      }
    });
  });
  if (!ok) d.fail(std::string("logits must be float16 or float32, got ") + dtype_name(l0->dtype));
  return k;
}

}  // namespace

IPUXL_REGISTER_KERNEL("CrossEntropyShardedWR", ce_sharded_wr_factory);

}  // namespace ipuxl
