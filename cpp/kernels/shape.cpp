// Transpose (axis permutation). TransposeInplace is PopXL's in-place view;
// ipuxl materialises it as a copy because the permuted layout cannot share
// the input's storage (the Python builder marks it `_view_copy`). When the
// permutation keeps the memory order (it only moves size-1 axes) the
// builder declares a true alias instead and the kernel does nothing.
#include <vector>

#include "shape_common.hpp"

namespace ipuxl {
namespace {

std::unique_ptr<Kernel> transpose_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  const TensorRef* in = d.in[0];
  const TensorRef* out = d.out[0];
  d.expect_same_dtype(*in, *out);
  const std::vector<int64_t> perm = d.attrs.ints("perm");
  const int64_t rank = in->rank();
  if ((int64_t)perm.size() != rank)
    d.fail("perm has " + std::to_string(perm.size()) + " entries for a tensor of rank " +
           std::to_string(rank));
  std::vector<bool> seen((size_t)rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= rank || seen[(size_t)p]) d.fail("perm is not a permutation of the axes");
    seen[(size_t)p] = true;
  }
  const auto in_strides = row_major_strides(in->shape);
  StridedView v;
  for (int64_t p : perm) {
    v.shape.push_back(in->shape[(size_t)p]);
    v.strides.push_back(in_strides[(size_t)p]);
  }
  if (in->data == out->data && out->nelms > 0) {
    // Aliased output: only valid when the permutation keeps the memory order
    // of the non-unit axes, so the bytes are already right.
    d.expect_shape(*out, v.shape);
    int64_t last = -1;
    for (int64_t p : perm) {
      if (in->shape[(size_t)p] == 1) continue;
      if (p < last) d.fail("an aliased transpose must keep the memory order of the axes");
      last = p;
    }
    return make_kernel([](RunContext&) {});
  }
  return make_view_copy_kernel(d, in, out, v);
}

}  // namespace

IPUXL_REGISTER_KERNEL("Transpose", transpose_factory);
IPUXL_REGISTER_KERNEL("TransposeInplace", transpose_factory);

}  // namespace ipuxl
