// Index-driven data movement: Gather / TiedGather (numpy.take along an
// axis), Scatter (ONNX ScatterElements), ScatterReduce (torch_scatter style
// reductions) and Onehot.
//
// Out-of-range indices never touch memory outside a tensor:
// * Gather with zero_oor=1: an index outside [0, n) yields zeros (negative
//   indices count as out of range, as in PopART, which reads indices as
//   unsigned). With zero_oor=0 (PopXL: "garbage"), ipuxl follows numpy.take
//   for indices in [-n, n) and clamps others to the nearest valid index.
// * Scatter: indices in [-n, n) (ONNX; negatives count from the end); others
//   are ignored. With repeated indices the last update in row-major order wins.
// * ScatterReduce: indices outside [0, axis_size) are ignored.
// * Onehot: indices in [-depth, depth) (ONNX); others give an all-"off" row.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "shape_common.hpp"

namespace ipuxl {
namespace {

struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisSplit split_at(const Shape& s, int64_t axis) {
  AxisSplit a;
  for (int64_t k = 0; k < axis; ++k) a.outer *= s[(size_t)k];
  a.n = s[(size_t)axis];
  for (size_t k = (size_t)axis + 1; k < s.size(); ++k) a.inner *= s[k];
  return a;
}

std::unique_ptr<Kernel> gather_factory(const OpDesc& d) {
  d.expect_arity(2, 1);
  const TensorRef* t = d.in[0];
  const TensorRef* idx = d.in[1];
  const TensorRef* out = d.out[0];
  d.expect_same_dtype(*t, *out);
  if (!dtype_is_integer(idx->dtype)) d.fail("indices must have an integer dtype");
  const int64_t axis = d.attrs.i("axis");
  if (axis < 0 || axis >= t->rank()) d.fail("axis out of range");
  const bool zero_oor = d.attrs.i("zero_oor", 0) != 0;
  Shape expect(t->shape.begin(), t->shape.begin() + axis);
  expect.insert(expect.end(), idx->shape.begin(), idx->shape.end());
  expect.insert(expect.end(), t->shape.begin() + axis + 1, t->shape.end());
  d.expect_shape(*out, expect);
  const AxisSplit a = split_at(t->shape, axis);
  const int64_t K = idx->nelms;
  const size_t es = dtype_size(t->dtype);
  return make_kernel(
      [t, idx, out, a, K, es, zero_oor](RunContext&) {
        const size_t row = (size_t)a.inner * es;
        for (int64_t k = 0; k < K; ++k) {
          int64_t i = read_index(idx, k);
          if (zero_oor) {
            if (i < 0 || i >= a.n) i = -1;
          } else if (a.n == 0) {
            i = -1;  // nothing to read: zeros
          } else if (i < 0) {
            i = i >= -a.n ? i + a.n : 0;
          } else if (i >= a.n) {
            i = a.n - 1;
          }
          for (int64_t o = 0; o < a.outer; ++o) {
            uint8_t* dst = out->data + (size_t)((o * K + k) * a.inner) * es;
            if (i < 0)
              std::memset(dst, 0, row);
            else
              std::memcpy(dst, t->data + (size_t)((o * a.n + i) * a.inner) * es, row);
          }
        }
      });
}

// Calls fn(u, base) for each element u (row-major) of `ishape`, the shape of
// the indices and updates; `base` is the offset of the same multi-index in a
// tensor of shape `tshape`, with the coordinate on `axis` left out (the
// caller adds index * axis stride).
template <class F>
void for_each_scatter(const Shape& ishape, const Shape& tshape, int64_t axis, F&& fn) {
  const int64_t total = shape_nelms(ishape);
  if (total == 0) return;
  const auto ts = row_major_strides(tshape);
  const size_t rank = ishape.size();
  std::vector<int64_t> m(rank, 0);
  int64_t base = 0;
  for (int64_t u = 0; u < total; ++u) {
    fn(u, base);
    for (int64_t k = (int64_t)rank - 1; k >= 0; --k) {
      if ((int64_t)k != axis) base += ts[(size_t)k];
      if (++m[(size_t)k] < ishape[(size_t)k]) break;
      if ((int64_t)k != axis) base -= ts[(size_t)k] * ishape[(size_t)k];
      m[(size_t)k] = 0;
    }
  }
}

std::unique_ptr<Kernel> scatter_factory(const OpDesc& d) {
  d.expect_arity(3, 1);
  const TensorRef* t = d.in[0];
  const TensorRef* idx = d.in[1];
  const TensorRef* val = d.in[2];
  const TensorRef* out = d.out[0];
  d.expect_same_dtype(*t, *out);
  d.expect_same_dtype(*t, *val);
  d.expect_shape(*out, t->shape);
  if (!dtype_is_integer(idx->dtype)) d.fail("indices must have an integer dtype");
  d.expect_shape(*val, idx->shape);
  const int64_t rank = t->rank();
  const int64_t axis = d.attrs.i("axis");
  if (axis < 0 || axis >= rank) d.fail("axis out of range");
  if (idx->rank() != rank) d.fail("indices must have the rank of the data");
  for (int64_t k = 0; k < rank; ++k)
    if (k != axis && idx->shape[(size_t)k] > t->shape[(size_t)k])
      d.fail("indices " + shape_str(idx->shape) + " exceed the data " + shape_str(t->shape) +
             " off the scatter axis");
  const int64_t n = t->shape[(size_t)axis];
  const int64_t axis_stride = row_major_strides(t->shape)[(size_t)axis];
  const size_t es = dtype_size(t->dtype);
  const Shape ishape = idx->shape, tshape = t->shape;
  return make_kernel(
      [=](RunContext&) {
        if (t->data != out->data) std::memcpy(out->data, t->data, out->nbytes());
        for_each_scatter(ishape, tshape, axis, [&](int64_t u, int64_t base) {
          int64_t i = read_index(idx, u);
          if (i < 0) i += n;
          if (i < 0 || i >= n) return;
          std::memcpy(out->data + (size_t)(base + i * axis_stride) * es,
                      val->data + (size_t)u * es, es);
        });
      });
}

enum class Reduction { Sum, Max, Min, Mul, None };

std::unique_ptr<Kernel> scatter_reduce_factory(const OpDesc& d) {
  if (d.in.size() < 2 || d.in.size() > 3 || !d.in[0] || !d.in[1] || d.out.size() != 1)
    d.fail("expected inputs (data, indices[, initial_values]) and one output");
  const TensorRef* src = d.in[0];
  const TensorRef* idx = d.in[1];
  const TensorRef* init = d.in.size() == 3 ? d.in[2] : nullptr;
  const TensorRef* out = d.out[0];
  d.expect_same_dtype(*src, *out);
  if (!dtype_is_integer(idx->dtype)) d.fail("indices must have an integer dtype");
  const int64_t rank = src->rank();
  const int64_t axis = d.attrs.i("axis");
  if (axis < 0 || axis >= rank) d.fail("axis out of range");
  const std::string red = d.attrs.s("reduction");
  Reduction r;
  if (red == "sum") r = Reduction::Sum;
  else if (red == "max") r = Reduction::Max;
  else if (red == "min") r = Reduction::Min;
  else if (red == "mul") r = Reduction::Mul;
  else if (red == "none") r = Reduction::None;
  else d.fail("unknown reduction '" + red + "'");
  if (out->rank() != rank) d.fail("output rank differs from the data rank");
  for (int64_t k = 0; k < rank; ++k)
    if (k != axis && out->shape[(size_t)k] != src->shape[(size_t)k])
      d.fail("output " + shape_str(out->shape) + " differs from the data " +
             shape_str(src->shape) + " off the reduction axis");
  if (init) {
    d.expect_same_dtype(*init, *out);
    d.expect_shape(*init, out->shape);
  }
  // The indices as a broadcast view over the data: `index_shape` is their
  // shape with singleton axes inserted by the builder.
  const Shape ishape = d.attrs.ints("index_shape");
  if ((int64_t)ishape.size() != rank || shape_nelms(ishape) != idx->nelms)
    d.fail("index_shape does not describe the indices");
  std::vector<int64_t> istr = row_major_strides(ishape);
  for (int64_t k = 0; k < rank; ++k) {
    if (ishape[(size_t)k] == src->shape[(size_t)k]) continue;
    if (ishape[(size_t)k] != 1) d.fail("indices do not broadcast to the data");
    istr[(size_t)k] = 0;
  }
  const int64_t n = out->shape[(size_t)axis];
  const auto ostr = row_major_strides(out->shape);
  const Shape sshape = src->shape;
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_NUMERIC(src->dtype, {
    using T = scalar_t;
    using C = ct_t<T>;
    k = make_kernel(
        [=](RunContext&) {
          const int64_t on = out->nelms;
          std::vector<C> acc((size_t)on);
          std::vector<char> touched((size_t)on, 0);
          const T* s = src->as<T>();
          for (int64_t j = 0; j < on; ++j) {
            if (init) acc[(size_t)j] = (C)init->as<T>()[j];
            else acc[(size_t)j] = r == Reduction::Mul ? (C)1 : (C)0;
          }
          const int64_t total = shape_nelms(sshape);
          std::vector<int64_t> m(sshape.size(), 0);
          int64_t ioff = 0, obase = 0;
          for (int64_t e = 0; e < total; ++e) {
            const int64_t i = read_index(idx, ioff);
            if (i >= 0 && i < n) {
              const size_t o = (size_t)(obase + i * ostr[(size_t)axis]);
              const C v = (C)s[e];
              switch (r) {
                case Reduction::Sum: acc[o] += v; break;
                case Reduction::Mul: acc[o] *= v; break;
                case Reduction::None: acc[o] = v; break;
                case Reduction::Max:
                  acc[o] = (touched[o] || init) ? std::max(acc[o], v) : v;
                  break;
                case Reduction::Min:
                  acc[o] = (touched[o] || init) ? std::min(acc[o], v) : v;
                  break;
              }
              touched[o] = 1;
            }
            for (int64_t q = (int64_t)sshape.size() - 1; q >= 0; --q) {
              ioff += istr[(size_t)q];
              if (q != axis) obase += ostr[(size_t)q];
              if (++m[(size_t)q] < sshape[(size_t)q]) break;
              ioff -= istr[(size_t)q] * sshape[(size_t)q];
              if (q != axis) obase -= ostr[(size_t)q] * sshape[(size_t)q];
              m[(size_t)q] = 0;
            }
          }
          T* o = out->as<T>();
          for (int64_t j = 0; j < on; ++j) o[j] = (T)acc[(size_t)j];
        });
  });
  if (!ok) d.fail(std::string("unsupported dtype ") + dtype_name(src->dtype));
  return k;
}

std::unique_ptr<Kernel> onehot_factory(const OpDesc& d) {
  d.expect_arity(3, 1);
  const TensorRef* idx = d.in[0];
  const TensorRef* vals = d.in[2];
  const TensorRef* out = d.out[0];
  d.expect_same_dtype(*vals, *out);
  if (vals->nelms != 2) d.fail("values must have 2 elements [off, on]");
  if (idx->dtype == DType::Bool) d.fail("indices must be numeric");
  const int64_t depth = d.attrs.i("depth");
  const int64_t axis = d.attrs.i("axis");
  if (depth < 1) d.fail("depth must be >= 1");
  if (axis < 0 || axis > idx->rank()) d.fail("axis out of range");
  Shape expect = idx->shape;
  expect.insert(expect.begin() + axis, depth);
  d.expect_shape(*out, expect);
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= idx->shape[(size_t)k];
  for (int64_t k = axis; k < idx->rank(); ++k) inner *= idx->shape[(size_t)k];
  const size_t es = dtype_size(out->dtype);
  const bool int_idx = dtype_is_integer(idx->dtype);
  return make_kernel(
      [=](RunContext&) {
        const uint8_t* off = vals->data;
        const uint8_t* on = vals->data + es;
        for (int64_t o = 0; o < outer; ++o)
          for (int64_t j = 0; j < inner; ++j) {
            const int64_t e = o * inner + j;
            int64_t c;
            if (int_idx) {
              c = read_index(idx, e);
            } else {
              double f = 0;
              IPUXL_DISPATCH_FLOAT(idx->dtype, { f = (double)(ct_t<scalar_t>)idx->as<scalar_t>()[e]; });
              c = std::isfinite(f) && std::fabs(f) < 9.0e18 ? (int64_t)f : depth;  // truncates
            }
            if (c < 0) c += depth;
            for (int64_t q = 0; q < depth; ++q)
              std::memcpy(out->data + (size_t)((o * depth + q) * inner + j) * es,
                          q == c ? on : off, es);
          }
      });
}

}  // namespace

IPUXL_REGISTER_KERNEL("Gather", gather_factory);
IPUXL_REGISTER_KERNEL("TiedGather", gather_factory);
IPUXL_REGISTER_KERNEL("Scatter", scatter_factory);
IPUXL_REGISTER_KERNEL("ScatterReduce", scatter_reduce_factory);
IPUXL_REGISTER_KERNEL("Onehot", onehot_factory);

}  // namespace ipuxl
