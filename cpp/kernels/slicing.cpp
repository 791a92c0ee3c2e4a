// Slicing family: Slice / SliceInplace (per-axis start and step, any non-zero
// step), Subsample (every n-th element per axis), Split (one input, several
// outputs along an axis) and Concat / ConcatInplace.
//
// The Python builders resolve Python-style slice bounds (negative indices,
// clamping) into a start and a step per axis; the factories re-check that the
// resulting view stays inside the input. SliceInplace and ConcatInplace are
// PopXL views; ipuxl copies them (the builder marks them `_view_copy`)
// unless the view is the whole input, which the builder declares as a true
// alias, in which case the kernel does nothing.
#include <cstring>
#include <vector>

#include "shape_common.hpp"

namespace ipuxl {
namespace {

std::unique_ptr<Kernel> slice_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  const TensorRef* in = d.in[0];
  const TensorRef* out = d.out[0];
  d.expect_same_dtype(*in, *out);
  const auto starts = d.attrs.ints("starts");
  const auto steps = d.attrs.ints("steps");
  const int64_t rank = in->rank();
  if ((int64_t)starts.size() != rank || (int64_t)steps.size() != rank)
    d.fail("starts and steps must have one entry per axis (rank " + std::to_string(rank) + ")");
  if (out->rank() != rank) d.fail("output rank differs from the input rank");
  const auto st = row_major_strides(in->shape);
  StridedView v;
  v.shape = out->shape;
  for (int64_t k = 0; k < rank; ++k) {
    if (steps[(size_t)k] == 0) d.fail("step must not be zero");
    v.strides.push_back(steps[(size_t)k] * st[(size_t)k]);
    v.base += starts[(size_t)k] * st[(size_t)k];
  }
  if (in->data == out->data && out->nelms > 0) {
    // Aliased output: only the whole, unreversed input is a valid alias.
    for (int64_t k = 0; k < rank; ++k) {
      const int64_t n = in->shape[(size_t)k];
      if (out->shape[(size_t)k] != n || starts[(size_t)k] != 0 || (n > 1 && steps[(size_t)k] != 1))
        d.fail("an aliased slice must select the whole input");
    }
    return make_kernel([](RunContext&) {});
  }
  return make_view_copy_kernel(d, in, out, v);
}

std::unique_ptr<Kernel> subsample_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  const TensorRef* in = d.in[0];
  const TensorRef* out = d.out[0];
  const auto strides = d.attrs.ints("strides");
  if ((int64_t)strides.size() != in->rank()) d.fail("strides must have one entry per axis");
  const auto st = row_major_strides(in->shape);
  StridedView v;
  for (size_t k = 0; k < strides.size(); ++k) {
    if (strides[k] < 1) d.fail("strides must be >= 1");
    v.shape.push_back((in->shape[k] + strides[k] - 1) / strides[k]);
    v.strides.push_back(strides[k] * st[k]);
  }
  return make_view_copy_kernel(d, in, out, v);
}

std::unique_ptr<Kernel> split_factory(const OpDesc& d) {
  if (d.in.size() != 1 || !d.in[0]) d.fail("expected one input");
  const TensorRef* in = d.in[0];
  const int64_t rank = in->rank();
  const int64_t axis = d.attrs.i("axis");
  if (axis < 0 || axis >= rank) d.fail("axis out of range");
  const auto splits = d.attrs.ints("splits");
  if (splits.size() != d.out.size()) d.fail("one output per split is required");
  int64_t total = 0;
  for (int64_t s : splits) {
    if (s < 0) d.fail("split sizes must be >= 0");
    total += s;
  }
  if (total != in->shape[(size_t)axis]) d.fail("split sizes do not sum to the axis length");
  const auto st = row_major_strides(in->shape);
  std::vector<std::unique_ptr<Kernel>> parts;
  int64_t offset = 0;
  for (size_t j = 0; j < splits.size(); ++j) {
    StridedView v;
    v.shape = in->shape;
    v.shape[(size_t)axis] = splits[j];
    v.strides = st;
    v.base = offset * st[(size_t)axis];
    offset += splits[j];
    parts.push_back(make_view_copy_kernel(d, in, d.out[j], v));
  }
  auto shared = std::make_shared<std::vector<std::unique_ptr<Kernel>>>(std::move(parts));
  return make_kernel(
      [shared](RunContext& ctx) {
        for (auto& k : *shared) k->run(ctx);
      });
}

std::unique_ptr<Kernel> concat_factory(const OpDesc& d) {
  if (d.in.empty() || d.out.size() != 1) d.fail("expected at least one input and one output");
  const TensorRef* out = d.out[0];
  const int64_t rank = out->rank();
  const int64_t axis = d.attrs.i("axis");
  if (axis < 0 || axis >= rank) d.fail("axis out of range");
  int64_t along = 0;
  for (const TensorRef* t : d.in) {
    if (!t) d.fail("missing input");
    d.expect_same_dtype(*t, *out);
    if (t->rank() != rank) d.fail("inputs must have the output's rank");
    for (int64_t k = 0; k < rank; ++k)
      if (k != axis && t->shape[(size_t)k] != out->shape[(size_t)k])
        d.fail("input '" + t->name + "' " + shape_str(t->shape) +
               " does not match the output " + shape_str(out->shape) + " off the concat axis");
    along += t->shape[(size_t)axis];
  }
  if (along != out->shape[(size_t)axis]) d.fail("input lengths do not sum to the output axis");
  if (d.in.size() == 1 && d.in[0]->data == out->data) return make_kernel([](RunContext&) {});
  for (const TensorRef* t : d.in)
    if (t->nelms > 0 && t->data == out->data)
      d.fail("output must not share storage with an input (a copied view cannot alias)");
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < axis; ++k) outer *= out->shape[(size_t)k];
  for (int64_t k = axis + 1; k < rank; ++k) inner *= out->shape[(size_t)k];
  const size_t es = dtype_size(out->dtype);
  std::vector<const TensorRef*> ins(d.in.begin(), d.in.end());
  const int64_t out_row = out->shape[(size_t)axis] * inner;
  return make_kernel(
      [ins, out, outer, inner, out_row, es, axis](RunContext&) {
        int64_t off = 0;
        for (const TensorRef* t : ins) {
          const int64_t chunk = t->shape[(size_t)axis] * inner;
          if (chunk > 0)
            for (int64_t o = 0; o < outer; ++o)
              std::memcpy(out->data + (size_t)(o * out_row + off) * es,
                          t->data + (size_t)(o * chunk) * es, (size_t)chunk * es);
          off += chunk;
        }
      });
}

}  // namespace

IPUXL_REGISTER_KERNEL("Slice", slice_factory);
IPUXL_REGISTER_KERNEL("SliceInplace", slice_factory);
IPUXL_REGISTER_KERNEL("Subsample", subsample_factory);
IPUXL_REGISTER_KERNEL("Split", split_factory);
IPUXL_REGISTER_KERNEL("Concat", concat_factory);
IPUXL_REGISTER_KERNEL("ConcatInplace", concat_factory);

}  // namespace ipuxl
