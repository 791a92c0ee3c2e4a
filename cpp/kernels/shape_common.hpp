// Helpers shared by the data-movement kernels (shape, slicing, gather and
// dynamic slice families): strided copies of views and reading index tensors.
//
// Data movement never looks at values, so copies work on raw elements of the
// dtype's size (1, 2, 4 or 8 bytes) instead of dispatching on the dtype.
#pragma once

#include <algorithm>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "../core/kernel.hpp"
#include "../core/parallel.hpp"

namespace ipuxl {

// A strided view of a tensor: element `idx` (a multi-index over `shape`) is
// element `base + sum_k idx[k] * strides[k]` of the viewed tensor. Strides may
// be negative (reversed slices) or zero.
struct StridedView {
  Shape shape;
  std::vector<int64_t> strides;
  int64_t base = 0;
};

// Whether every element of the view lies inside a tensor of `nelms` elements.
inline bool view_in_bounds(const StridedView& v, int64_t nelms) {
  if (v.shape.size() != v.strides.size()) return false;
  for (int64_t d : v.shape) {
    if (d < 0) return false;
    if (d == 0) return true;  // no element is ever read
  }
  int64_t lo = v.base, hi = v.base;
  for (size_t k = 0; k < v.shape.size(); ++k) {
    const int64_t span = (v.shape[k] - 1) * v.strides[k];
    if (span < 0) lo += span; else hi += span;
  }
  return lo >= 0 && hi < nelms;
}

namespace detail {
// Copies rows [r0, r1) of the view (a row: the innermost axis) to out.
template <class U>
void strided_copy_rows(const U* in, U* out, const StridedView& v, int64_t r0, int64_t r1) {
  const int64_t rank = (int64_t)v.shape.size();
  const int64_t inner_n = v.shape[(size_t)rank - 1];
  const int64_t inner_s = v.strides[(size_t)rank - 1];
  std::vector<int64_t> idx((size_t)rank, 0);
  int64_t off = v.base;
  for (int64_t d = rank - 2, r = r0; d >= 0; --d) {  // the multi-index of row r0
    idx[(size_t)d] = r % v.shape[(size_t)d];
    r /= v.shape[(size_t)d];
    off += idx[(size_t)d] * v.strides[(size_t)d];
  }
  for (int64_t row = r0; row < r1; ++row) {
    const U* p = in + off;
    U* q = out + row * inner_n;
    if (inner_s == 1) {
      std::memcpy(q, p, (size_t)inner_n * sizeof(U));
    } else {
      for (int64_t j = 0; j < inner_n; ++j) q[j] = p[j * inner_s];
    }
    for (int64_t d = rank - 2; d >= 0; --d) {
      off += v.strides[(size_t)d];
      if (++idx[(size_t)d] < v.shape[(size_t)d]) break;
      off -= v.strides[(size_t)d] * v.shape[(size_t)d];
      idx[(size_t)d] = 0;
    }
  }
}

// Copies of at least this many bytes are split by rows over the core's
// threads (each row is written by one thread: the same bytes either way).
constexpr int64_t kParallelCopyBytes = int64_t{1} << 18;

template <class U>
void strided_copy_t(const U* in, U* out, const StridedView& v) {
  const int64_t rank = (int64_t)v.shape.size();
  const int64_t total = shape_nelms(v.shape);
  if (total == 0) return;
  if (rank == 0) {
    out[0] = in[v.base];
    return;
  }
  const int64_t inner_n = v.shape[(size_t)rank - 1];
  const int64_t rows = total / inner_n;
  if (total * (int64_t)sizeof(U) < kParallelCopyBytes || rows < 2) {
    strided_copy_rows(in, out, v, 0, rows);
    return;
  }
  const int64_t row_bytes = inner_n * (int64_t)sizeof(U);
  parallel_for(rows, std::max<int64_t>(1, (kParallelCopyBytes / 4) / row_bytes),
               [&](int64_t r0, int64_t r1) { strided_copy_rows(in, out, v, r0, r1); });
}
}  // namespace detail

// out (contiguous, row-major over v.shape) <- the view v of `in`. The caller
// has checked view_in_bounds; `in` and `out` must not overlap.
inline void strided_copy(const uint8_t* in, uint8_t* out, size_t elem_size, const StridedView& v) {
  switch (elem_size) {
    case 1: detail::strided_copy_t(in, out, v); break;
    case 2: detail::strided_copy_t(reinterpret_cast<const uint16_t*>(in),
                                   reinterpret_cast<uint16_t*>(out), v); break;
    case 4: detail::strided_copy_t(reinterpret_cast<const uint32_t*>(in),
                                   reinterpret_cast<uint32_t*>(out), v); break;
    case 8: detail::strided_copy_t(reinterpret_cast<const uint64_t*>(in),
                                   reinterpret_cast<uint64_t*>(out), v); break;
    default: throw RunError("strided_copy: unsupported element size");
  }
}

// A kernel copying the view `v` of input `in` into output `out`, after
// checking dtypes, the output shape and that the view stays inside `in`.
inline std::unique_ptr<Kernel> make_view_copy_kernel(const OpDesc& d, const TensorRef* in,
                                                     const TensorRef* out, StridedView v) {
  d.expect_same_dtype(*in, *out);
  d.expect_shape(*out, v.shape);
  if (!view_in_bounds(v, in->nelms)) d.fail("internal error: view reads outside its input");
  if (out->nelms > 0 && in->data == out->data)
    d.fail("output must not share storage with the input (a copied view cannot alias)");
  const size_t es = dtype_size(in->dtype);
  return make_kernel([in, out, v, es](RunContext&) { strided_copy(in->data, out->data, es, v); });
}

// Row-major strides (in elements) of a shape.
inline std::vector<int64_t> row_major_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t k = (int64_t)s.size() - 2; k >= 0; --k)
    st[(size_t)k] = st[(size_t)k + 1] * s[(size_t)k + 1];
  return st;
}

inline bool dtype_is_integer(DType t) {
  switch (t) {
    case DType::Int8: case DType::UInt8: case DType::Int16: case DType::UInt16:
    case DType::Int32: case DType::UInt32: case DType::Int64: case DType::UInt64:
      return true;
    default:
      return false;
  }
}

// Reads element i of an integer tensor as int64 (uint64 values above the
// int64 range saturate; they are out of range for any axis anyway).
inline int64_t read_index(const TensorRef* t, int64_t i) {
  switch (t->dtype) {
    case DType::Int8: return t->as<int8_t>()[i];
    case DType::UInt8: return t->as<uint8_t>()[i];
    case DType::Int16: return t->as<int16_t>()[i];
    case DType::UInt16: return t->as<uint16_t>()[i];
    case DType::Int32: return t->as<int32_t>()[i];
    case DType::UInt32: return t->as<uint32_t>()[i];
    case DType::Int64: return t->as<int64_t>()[i];
    case DType::UInt64: {
      uint64_t u = t->as<uint64_t>()[i];
      return u > (uint64_t)std::numeric_limits<int64_t>::max()
                 ? std::numeric_limits<int64_t>::max()
                 : (int64_t)u;
    }
    default: throw RunError("read_index: '" + t->name + "' is not an integer tensor");
  }
}

}  // namespace ipuxl
