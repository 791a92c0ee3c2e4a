// DynamicSlice / DynamicUpdate / DynamicUpdateInplace: slices whose start
// offsets are read from an index tensor when the op runs.
//
// Offsets follow Poplar's dynamic-slice vertices (popops DynamicSlice*): an
// offset is read as unsigned, an offset >= the axis length becomes 0, and a
// slice that runs past the end of an axis wraps around to its start. So no
// index value can make a kernel read or write outside a tensor.
#include <cstring>
#include <vector>

#include "shape_common.hpp"

namespace ipuxl {
namespace {

struct DynSpec {
  std::vector<int64_t> axes, sizes;
  Shape full;  // the sliced tensor's shape
  Shape part;  // the slice's shape
};

DynSpec dyn_spec(const OpDesc& d, const TensorRef* t, const TensorRef* index) {
  DynSpec s;
  s.axes = d.attrs.ints("axes");
  s.sizes = d.attrs.ints("sizes");
  if (s.axes.size() != s.sizes.size()) d.fail("axes and sizes must have the same length");
  if (!dtype_is_integer(index->dtype)) d.fail("index must have an integer dtype");
  if (index->nelms != (int64_t)s.axes.size())
    d.fail("index " + shape_str(index->shape) + " must have one element per axis (" +
           std::to_string(s.axes.size()) + ")");
  s.full = t->shape;
  s.part = t->shape;
  std::vector<bool> seen(t->shape.size(), false);
  for (size_t j = 0; j < s.axes.size(); ++j) {
    const int64_t a = s.axes[j];
    if (a < 0 || a >= t->rank() || seen[(size_t)a]) d.fail("axes must be distinct axes of t");
    seen[(size_t)a] = true;
    if (s.sizes[j] < 0 || s.sizes[j] > t->shape[(size_t)a])
      d.fail("size " + std::to_string(s.sizes[j]) + " is out of range for axis " +
             std::to_string(a) + " of length " + std::to_string(t->shape[(size_t)a]));
    s.part[(size_t)a] = s.sizes[j];
  }
  return s;
}

// For each axis, the element offsets (in the full tensor) of the slice's
// coordinates, with Poplar's offset rules applied.
std::vector<std::vector<int64_t>> slice_positions(const DynSpec& s, const TensorRef* index) {
  const auto st = row_major_strides(s.full);
  std::vector<std::vector<int64_t>> pos(s.full.size());
  for (size_t k = 0; k < s.full.size(); ++k) {
    pos[k].resize((size_t)s.part[k]);
    for (int64_t j = 0; j < s.part[k]; ++j) pos[k][(size_t)j] = j * st[k];
  }
  for (size_t j = 0; j < s.axes.size(); ++j) {
    const size_t a = (size_t)s.axes[j];
    const int64_t n = s.full[a];
    int64_t o = read_index(index, (int64_t)j);
    if (o < 0 || o >= n) o = 0;  // negative values are huge as unsigned
    for (int64_t q = 0; q < s.part[a]; ++q) pos[a][(size_t)q] = ((o + q) % n) * st[a];
  }
  return pos;
}

// Calls fn(part_offset, full_offset) for every element of the slice.
template <class F>
void for_each_position(const Shape& part, const std::vector<std::vector<int64_t>>& pos, F&& fn) {
  const int64_t total = shape_nelms(part);
  if (total == 0) return;
  const size_t rank = part.size();
  std::vector<int64_t> m(rank, 0);
  for (int64_t u = 0; u < total; ++u) {
    int64_t off = 0;
    for (size_t k = 0; k < rank; ++k) off += pos[k][(size_t)m[k]];
    fn(u, off);
    for (int64_t k = (int64_t)rank - 1; k >= 0; --k) {
      if (++m[(size_t)k] < part[(size_t)k]) break;
      m[(size_t)k] = 0;
    }
  }
}

std::unique_ptr<Kernel> dynamic_slice_factory(const OpDesc& d) {
  d.expect_arity(2, 1);
  const TensorRef* t = d.in[0];
  const TensorRef* index = d.in[1];
  const TensorRef* out = d.out[0];
  d.expect_same_dtype(*t, *out);
  const DynSpec s = dyn_spec(d, t, index);
  d.expect_shape(*out, s.part);
  const size_t es = dtype_size(t->dtype);
  return make_kernel(
      [=](RunContext&) {
        const auto pos = slice_positions(s, index);
        for_each_position(s.part, pos, [&](int64_t u, int64_t off) {
          std::memcpy(out->data + (size_t)u * es, t->data + (size_t)off * es, es);
        });
      });
}

// `inplace`: the output must alias t (DynamicUpdateInplace).
std::unique_ptr<Kernel> dynamic_update_factory(const OpDesc& d, bool inplace) {
  d.expect_arity(3, 1);
  const TensorRef* t = d.in[0];
  const TensorRef* index = d.in[1];
  const TensorRef* upd = d.in[2];
  const TensorRef* out = d.out[0];
  d.expect_same_dtype(*t, *out);
  d.expect_same_dtype(*t, *upd);
  d.expect_shape(*out, t->shape);
  const DynSpec s = dyn_spec(d, t, index);
  d.expect_shape(*upd, s.part);
  if (upd->nelms > 0 && upd->data == out->data) d.fail("t_update must not alias the output");
  if (inplace && t->data != out->data && t->nelms > 0)
    d.fail("the in-place update's output must alias t (missing alias declaration)");
  const size_t es = dtype_size(t->dtype);
  return make_kernel(
      [=](RunContext&) {
        if (t->data != out->data) std::memcpy(out->data, t->data, out->nbytes());
        const auto pos = slice_positions(s, index);
        for_each_position(s.part, pos, [&](int64_t u, int64_t off) {
          std::memcpy(out->data + (size_t)off * es, upd->data + (size_t)u * es, es);
        });
      });
}

}  // namespace

IPUXL_REGISTER_KERNEL("DynamicSlice", dynamic_slice_factory);
IPUXL_REGISTER_KERNEL("DynamicUpdate",
                      [](const OpDesc& d) { return dynamic_update_factory(d, false); });
IPUXL_REGISTER_KERNEL("DynamicUpdateInplace",
                      [](const OpDesc& d) { return dynamic_update_factory(d, true); });

}  // namespace ipuxl
