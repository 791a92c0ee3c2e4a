// SparseMatMul (popxl_addons.ops.static_sparse_ops.dense_const_sparse_matmul):
// dense x constant sparse = dense.
//
//   in:  lhs float16/float32 (..., m, k)
//   out: same dtype (..., m, n)
//   attrs: the right-hand side (k, n) in CSR form: nz (values), cols (column
//          of each value), rows (k + 1 row pointers), output_cols (n)
//
// out[..., r, c] = sum_p lhs[..., r, row(p)] * nz[p] over the values p in
// column c, accumulated in float32 (float64 for float64) and rounded once. The values are first
// rounded to lhs's dtype, as popsparse keeps them on the device in it.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "common.hpp"

namespace ipuxl {
namespace {

std::unique_ptr<Kernel> sparse_matmul_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  const TensorRef* a = d.in[0];
  const TensorRef* o = d.out[0];
  d.expect_same_dtype(*a, *o);
  if (a->rank() < 1) d.fail("the dense left-hand side must have rank >= 1");
  const std::vector<double> nz_in = d.attrs.floats("nz");
  const std::vector<int64_t> cols = d.attrs.ints("cols");
  const std::vector<int64_t> rows = d.attrs.ints("rows");
  const int64_t n = d.attrs.i("output_cols");
  const int64_t k = a->shape.back();
  if (n < 0) d.fail("output_cols must be >= 0");
  if ((int64_t)rows.size() != k + 1)
    d.fail("the CSR matrix has " + std::to_string((int64_t)rows.size() - 1) +
           " rows; the left-hand side has " + std::to_string(k) + " columns");
  if (cols.size() != nz_in.size()) d.fail("the CSR matrix has different numbers of values and columns");
  if (rows[0] != 0 || rows[(size_t)k] != (int64_t)nz_in.size())
    d.fail("the CSR row pointers must start at 0 and end at the number of values");
  for (int64_t r = 0; r < k; ++r)
    if (rows[(size_t)r + 1] < rows[(size_t)r]) d.fail("the CSR row pointers must not decrease");
  for (int64_t c : cols)
    if (c < 0 || c >= n) d.fail("a CSR column index is outside [0, output_cols)");
  Shape oshape = a->shape;
  oshape.back() = n;
  d.expect_shape(*o, oshape);
  const int64_t m = k == 0 ? (n == 0 ? 0 : o->nelms / n) : a->nelms / k;
  std::unique_ptr<Kernel> kern;
  bool ok = IPUXL_DISPATCH_FLOAT(a->dtype, {
    using T = scalar_t;
    using ct = ct_t<T>;
    std::vector<ct> nz(nz_in.size());
    for (size_t p = 0; p < nz.size(); ++p) nz[p] = (ct)(T)nz_in[p];
    kern = make_kernel([=](RunContext&) {
      const T* ap = a->as<T>();
      T* op = o->as<T>();
      parallel_for(m, std::max<int64_t>(1, 65536 / std::max<int64_t>(1, (int64_t)nz.size() + n)),
                   [&](int64_t lo, int64_t hi) {
        std::vector<ct> acc((size_t)n);
        for (int64_t r = lo; r < hi; ++r) {
          std::fill(acc.begin(), acc.end(), ct(0));
          const T* arow = ap + r * k;
          for (int64_t kk = 0; kk < k; ++kk) {
            const ct v = (ct)arow[kk];
            for (int64_t p = rows[(size_t)kk]; p < rows[(size_t)kk + 1]; ++p)
              acc[(size_t)cols[(size_t)p]] += v * nz[(size_t)p];
          }
          for (int64_t c = 0; c < n; ++c) op[r * n + c] = (T)acc[(size_t)c];
        }
      });
    });
  });
  if (!ok) d.fail(std::string("the left-hand side must be float16 or float32, got ") +
                  dtype_name(a->dtype));
  return kern;
}

}  // namespace

IPUXL_REGISTER_KERNEL("SparseMatMul", sparse_matmul_factory);

}  // namespace ipuxl
