#include "common.hpp"

namespace ipuxl {

std::vector<int64_t> contiguous_strides(const Shape& s) {
  std::vector<int64_t> st(s.size(), 1);
  for (int64_t i = (int64_t)s.size() - 2; i >= 0; --i) st[i] = st[i + 1] * s[i + 1];
  return st;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, bool* ok) {
  *ok = true;
  size_t r = std::max(a.size(), b.size());
  Shape out(r, 1);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da == db || db == 1) out[i] = da;
    else if (da == 1) out[i] = db;
    else { *ok = false; return {}; }
  }
  return out;
}

std::vector<int64_t> broadcast_strides(const OpDesc& d, const Shape& in, const Shape& out) {
  if (in.size() > out.size())
    d.fail("input shape " + shape_str(in) + " has higher rank than the output " + shape_str(out));
  auto cs = contiguous_strides(in);
  std::vector<int64_t> st(out.size(), 0);
  size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == out[off + i]) st[off + i] = in[i] == 1 ? 0 : cs[i];
    else if (in[i] == 1) st[off + i] = 0;
    else d.fail("input shape " + shape_str(in) + " does not broadcast to " + shape_str(out));
  }
  return st;
}

AxisSplit split_at_axis(const OpDesc& d, const TensorRef& t, int64_t axis) {
  if (t.rank() == 0) d.fail("the input must have rank >= 1");
  if (axis < 0 || axis >= t.rank())
    d.fail("axis " + std::to_string(axis) + " is out of range for input shape " +
           shape_str(t.shape));
  AxisSplit s;
  s.n = t.shape[(size_t)axis];
  for (int64_t i = 0; i < axis; ++i) s.outer *= t.shape[(size_t)i];
  for (int64_t i = axis + 1; i < t.rank(); ++i) s.inner *= t.shape[(size_t)i];
  return s;
}

}  // namespace ipuxl
