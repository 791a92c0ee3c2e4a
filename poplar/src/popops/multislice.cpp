// ipuxl's PopLibs: popops multiSlice / multiUpdate / multiUpdateAdd /
// multiUpdateMax / multiUpdateMul and the tensors they work on.
//
// The plan: t, seen as [A, D, B] around the sliced dimension D, is split
// in column chunks of B; one vertex per chunk reads every offset and
// copies (or combines) the chunk's columns of each slice. A tensor made by
// createSliceableTensor has chunk k on tile k, so a vertex only exchanges
// its slices and the offsets.
#include "builtin.hpp"

#include <algorithm>
#include <popops/DynamicSlice.hpp>
#include <poputil/TileMapping.hpp>

namespace popops {
namespace ipuxl {
namespace {

enum class SliceOp { Slice, Update, Add, Max, Mul };

struct MultiPlan {
  SliceOp op;
  std::size_t A, D, size, N; // outer elements, sliced dimension, slice size, number of offsets
  int code, offsetCode, scaleCode;
  bool remap; // out-of-range offsets read slice 0 (multiSlice's remapOutOfBoundIndices)
};

/// One column chunk: base is [A, D, w], sub is [N, A, size, w] (w from base's size).
template <bool Slice, bool Scaled> class MultiSliceVertex : public poplar::Vertex {
public:
  typename std::conditional<Slice, poplar::Input<poplar::Vector<AnyElem>>, poplar::InOut<poplar::Vector<AnyElem>>>::type base;
  typename std::conditional<Slice, poplar::Output<poplar::Vector<AnyElem>>, poplar::Input<poplar::Vector<AnyElem>>>::type sub;
  poplar::Input<poplar::Vector<AnyElem>> offsets;
  poplar::Input<poplar::Vector<AnyElem>> scale; // Scaled only; otherwise connected to offsets and unused
  unsigned long long plan;

  bool compute() {
    const MultiPlan &p = *planOf<MultiPlan>(plan);
    const std::size_t es = sizeOf(p.code);
    const std::size_t rows = p.A * p.D, w = rows != 0 ? base.size() / rows : 0;
    char *b = const_cast<char *>(reinterpret_cast<const char *>(base.data()));
    char *s = const_cast<char *>(reinterpret_cast<const char *>(sub.data()));
    const char *o = reinterpret_cast<const char *>(offsets.data());
    const double k = Scaled ? load(p.scaleCode, reinterpret_cast<const char *>(scale.data())) : 1.0;
    const std::size_t run = p.size * w; // elements of one slice row (fixed a)
    for (std::size_t i = 0; i < p.N; ++i) {
      double off = load(p.offsetCode, o + i * sizeOf(p.offsetCode));
      bool fits = off >= 0 && off + static_cast<double>(p.size) <= static_cast<double>(p.D);
      std::size_t at = fits ? static_cast<std::size_t>(off) : 0;
      if (!fits && !(Slice && p.remap)) {
        if (Slice) std::memset(s + i * p.A * run * es, 0, p.A * run * es);
        continue; // an update outside t is dropped
      }
      for (std::size_t a = 0; a < p.A; ++a) {
        char *full = b + (a * p.D + at) * w * es;
        char *part = s + (i * p.A + a) * run * es;
        switch (p.op) {
        case SliceOp::Slice: std::memcpy(part, full, run * es); break;
        case SliceOp::Update: std::memcpy(full, part, run * es); break;
        default:
          for (std::size_t e = 0; e < run; ++e) {
            double x = load(p.code, full + e * es), y = load(p.code, part + e * es);
            double r = p.op == SliceOp::Add ? x + k * y : p.op == SliceOp::Max ? std::max(x, y) : x * y;
            store(p.code, full + e * es, r);
          }
        }
      }
    }
    return true;
  }
};

struct Geometry {
  std::size_t A, D, B, size, N;
};

Geometry geometry(const poplar::Tensor &t, const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                  const char *op) {
  if (dims.size() != 1 || sizes.size() != 1)
    throw poputil::poplibs_error(std::string(op) + ": dims and sizes must have one entry each (got " +
                                 std::to_string(dims.size()) + " and " + std::to_string(sizes.size()) + ")");
  if (dims[0] >= t.rank())
    throw poputil::poplibs_error(std::string(op) + ": dimension " + std::to_string(dims[0]) + " is out of range for " +
                                 t.shapeToString());
  Geometry g{1, t.dim(static_cast<unsigned>(dims[0])), 1, sizes[0], 0};
  if (g.size > g.D)
    throw poputil::poplibs_error(std::string(op) + ": slice size " + std::to_string(g.size) + " exceeds dimension " +
                                 std::to_string(dims[0]) + " of " + t.shapeToString());
  for (unsigned k = 0; k < t.rank(); ++k) {
    if (k < dims[0]) g.A *= t.dim(k);
    if (k > dims[0]) g.B *= t.dim(k);
  }
  return g;
}

poplar::Tensor offsetsColumn(const poplar::Tensor &offsets, const char *op) {
  if (offsets.elementType().isFloatingPoint())
    throw poputil::poplibs_error(std::string(op) + ": offsets must be of an integral type, not " +
                                 offsets.elementType().toString());
  if (offsets.rank() == 2 && offsets.dim(1) != 1)
    throw poputil::poplibs_error(std::string(op) + ": offsets must be {N, 1} (one sliced dimension), got " +
                                 offsets.shapeToString());
  if (offsets.rank() > 2 || offsets.rank() == 0)
    throw poputil::poplibs_error(std::string(op) + ": offsets must be {N} or {N, 1}, got " + offsets.shapeToString());
  return offsets.flatten();
}

std::vector<std::size_t> sliceShape(const poplar::Tensor &t, std::size_t dim, std::size_t size, std::size_t n) {
  auto shape = t.shape();
  shape[dim] = size;
  shape.insert(shape.begin(), n);
  return shape;
}

/// Column chunks [b0, b1) of B, one per tile at most.
std::vector<std::pair<std::size_t, std::size_t>> chunks(std::size_t B, unsigned tiles) {
  std::size_t n = std::max<std::size_t>(1, std::min<std::size_t>(B, tiles));
  std::vector<std::pair<std::size_t, std::size_t>> out;
  std::size_t per = (B + n - 1) / n;
  for (std::size_t b = 0; b < B; b += per) out.push_back({b, std::min(B, b + per)});
  if (out.empty()) out.push_back({0, B});
  return out;
}

unsigned tileOf(const poplar::Graph &graph, const poplar::Tensor &t) {
  auto m = graph.getTileMapping(t);
  for (unsigned i = 0; i < m.size(); ++i)
    if (!m[i].empty()) return i;
  return 0;
}

/// One compute set: for each group k, ts[k] ([A, D, B]) sliced into (or
/// updated from) ss[k] ([N, A, size, B]) at offs[k].
void addMulti(poplar::Graph &graph, SliceOp op, const std::vector<poplar::Tensor> &ts,
              const std::vector<poplar::Tensor> &ss, const std::vector<poplar::Tensor> &offs,
              const poplar::Tensor *scale, const Geometry &geo, bool remap, poplar::program::Sequence &prog,
              const poplar::DebugContext &dc, const char *name) {
  const bool slice = op == SliceOp::Slice, scaled = scale != nullptr;
  const char *vtype = slice ? "popops::ipuxl::MultiSlice"
                            : scaled ? "popops::ipuxl::MultiUpdateScaled" : "popops::ipuxl::MultiUpdate";
  requireCodelets(graph, vtype, "popops");
  auto *plan = new MultiPlan{op, geo.A, geo.D, geo.size, geo.N, ts[0].elementType().ipuxlCode(),
                             offs[0].elementType().ipuxlCode(),
                             scaled ? scale->elementType().ipuxlCode() : ts[0].elementType().ipuxlCode(), remap};
  poplar::ComputeSet cs = graph.addComputeSet(poplar::DebugContext(dc, name));
  for (std::size_t k = 0; k < ts.size(); ++k) {
    poplar::Tensor t3 = ts[k].reshape({geo.A, geo.D, geo.B});
    poplar::Tensor s4 = ss[k].reshape({geo.N, geo.A, geo.size, geo.B});
    for (const auto &c : chunks(geo.B, graph.getTarget().getNumTiles())) {
      poplar::Tensor bc = t3.slice(c.first, c.second, 2), sc = s4.slice(c.first, c.second, 3);
      auto v = graph.addVertex(cs, vtype);
      graph.connect(v["base"], bc.flatten());
      graph.connect(v["sub"], sc.flatten());
      graph.connect(v["offsets"], offs[k]);
      graph.connect(v["scale"], scaled ? scale->flatten() : offs[k]);
      graph.setInitialValue(v["plan"], keepPlan(plan));
      graph.setTileMapping(v, tileOf(graph, bc));
      std::size_t work = geo.N * geo.A * geo.size * (c.second - c.first);
      graph.setPerfEstimate(v, 20 + 4 * geo.N + (op == SliceOp::Slice || op == SliceOp::Update ? work / 2 : 2 * work));
    }
  }
  prog.add(poplar::program::Execute(cs));
}

/// t ([G, ...]) and offsets ([G, N] or [G, N, 1]) of a grouped operation, per group.
struct Groups {
  std::vector<poplar::Tensor> ts, offs;
  Geometry geo;
};
Groups groupsOf(const poplar::Tensor &t, const poplar::Tensor &offsets, const std::vector<std::size_t> &dims,
                const std::vector<std::size_t> &sizes, const char *op) {
  if (t.rank() < 2 || offsets.rank() < 2 || offsets.dim(0) != t.dim(0))
    throw poputil::poplibs_error(std::string(op) + ": t " + t.shapeToString() + " and offsets " +
                                 offsets.shapeToString() + " must share their first (group) dimension");
  Groups g;
  g.geo = geometry(t[0], dims, sizes, op);
  for (std::size_t k = 0; k < t.dim(0); ++k) {
    g.ts.push_back(t[k]);
    g.offs.push_back(offsetsColumn(offsets[k], op));
  }
  g.geo.N = g.offs[0].numElements();
  return g;
}

void checkUpdate(const poplar::Tensor &t, const poplar::Tensor &s, const Geometry &geo, std::size_t dim, const char *op) {
  auto want = sliceShape(t, dim, geo.size, geo.N);
  if (s.shape() != want) {
    std::string w = "{";
    for (std::size_t i = 0; i < want.size(); ++i) w += (i ? "," : "") + std::to_string(want[i]);
    throw poputil::poplibs_error(std::string(op) + ": the slices are " + s.shapeToString() + ", expected " + w + "}");
  }
  if (s.elementType() != t.elementType())
    throw poputil::poplibs_error(std::string(op) + ": the slices are " + s.elementType().toString() + ", t is " +
                                 t.elementType().toString());
}

void update(poplar::Graph &graph, SliceOp op, const poplar::Tensor &t, const poplar::Tensor &s,
            const poplar::Tensor &offsets, const poplar::Tensor *scale, const std::vector<std::size_t> &dims,
            const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog, const poplar::DebugContext &dc,
            const char *name) {
  Geometry geo = geometry(t, dims, sizes, name);
  poplar::Tensor off = offsetsColumn(offsets, name);
  geo.N = off.numElements();
  checkUpdate(t, s, geo, dims[0], name);
  // The scale may be of t's type or another (a float scale of half data).
  if (scale && scale->numElements() != 1)
    throw poputil::poplibs_error(std::string(name) + ": scale must have one element, it has " +
                                 std::to_string(scale->numElements()));
  addMulti(graph, op, {t}, {s}, {off}, scale, geo, false, prog, dc, name);
}

void groupedUpdate(poplar::Graph &graph, SliceOp op, const poplar::Tensor &t, const poplar::Tensor &s,
                   const poplar::Tensor &offsets, const poplar::Tensor *scale, const std::vector<std::size_t> &dims,
                   const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog,
                   const poplar::DebugContext &dc, const char *name) {
  Groups g = groupsOf(t, offsets, dims, sizes, name);
  if (s.rank() < 1 || s.dim(0) != t.dim(0))
    throw poputil::poplibs_error(std::string(name) + ": the slices " + s.shapeToString() + " need " +
                                 std::to_string(t.dim(0)) + " groups");
  checkUpdate(t[0], s[0], g.geo, dims[0], name);
  if (scale && scale->numElements() != 1)
    throw poputil::poplibs_error(std::string(name) + ": scale must have one element");
  std::vector<poplar::Tensor> ss;
  for (std::size_t k = 0; k < t.dim(0); ++k) ss.push_back(s[k]);
  addMulti(graph, op, g.ts, ss, g.offs, scale, g.geo, false, prog, dc, name);
}

poplar::Tensor constantOffsets(poplar::Graph &graph, poplar::ArrayRef<unsigned> offsets) {
  std::vector<unsigned> v(offsets.begin(), offsets.end());
  poplar::Tensor c = graph.addConstant(poplar::UNSIGNED_INT, {v.size()}, poplar::ArrayRef<unsigned>(v), "offsets");
  graph.setTileMapping(c, 0);
  return c;
}
/// Chunk k of t (one group's) on tile first + k (wrapping): see the file's comment.
void mapSliceable(poplar::Graph &g, const poplar::Tensor &t, const std::vector<std::size_t> &dims,
                  const std::vector<std::size_t> &sizes, unsigned first) {
  Geometry geo = geometry(t, dims, sizes.empty() ? std::vector<std::size_t>{1} : sizes, "popops::createSliceableTensor");
  poplar::Tensor t3 = t.reshape({geo.A, geo.D, geo.B});
  unsigned tiles = g.getTarget().getNumTiles(), tile = first;
  for (const auto &c : chunks(geo.B, tiles)) g.setTileMapping(t3.slice(c.first, c.second, 2), tile++ % tiles);
}
} // namespace

std::vector<poplar::ipuxl_detail::VertexTypeInfo> multiSliceVertexTypes() {
  using namespace poplar::ipuxl_detail;
  using S = MultiSliceVertex<true, false>;
  using U = MultiSliceVertex<false, false>;
  using K = MultiSliceVertex<false, true>;
  auto fields = [](auto *tag) {
    using V = typename std::remove_pointer<decltype(tag)>::type;
    return std::vector<FieldInfo>{field("base", &V::base), field("sub", &V::sub), field("offsets", &V::offsets),
                                  field("scale", &V::scale), field("plan", &V::plan)};
  };
  return {describe<S>("popops::ipuxl::MultiSlice", fields(static_cast<S *>(nullptr))),
          describe<U>("popops::ipuxl::MultiUpdate", fields(static_cast<U *>(nullptr))),
          describe<K>("popops::ipuxl::MultiUpdateScaled", fields(static_cast<K *>(nullptr)))};
}
} // namespace ipuxl

using namespace ipuxl;

poplar::Tensor createSliceableTensor(poplar::Graph &g, const poplar::Type &type, const std::vector<std::size_t> &shape,
                                     const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                                     std::size_t, const poplar::DebugContext &dc) {
  poplar::Tensor t = g.addVariable(type, shape, dc);
  if (dims.size() != 1 || t.numElements() == 0) {
    poputil::mapTensorLinearly(g, t);
    return t;
  }
  mapSliceable(g, t, dims, sizes, 0);
  return t;
}
poplar::Tensor createSliceableTensor(poplar::Graph &g, const poplar::Type &type, const std::vector<std::size_t> &shape,
                                     const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                                     const SlicePlan &, const poplar::OptionFlags &, const poplar::DebugContext &dc) {
  return createSliceableTensor(g, type, shape, dims, sizes, 0, dc);
}

poplar::Tensor createSliceTensor(poplar::Graph &g, const poplar::Type &type, const std::vector<std::size_t> &shape,
                                 const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                                 std::size_t numIndices, const SlicePlan &, const poplar::OptionFlags &,
                                 const poplar::DebugContext &dc) {
  if (dims.size() != sizes.size())
    throw poputil::poplibs_error("popops::createSliceTensor: dims and sizes differ in length");
  auto s = shape;
  for (std::size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] >= s.size()) throw poputil::poplibs_error("popops::createSliceTensor: dimension out of range");
    s[dims[k]] = sizes[k];
  }
  s.insert(s.begin(), numIndices);
  poplar::Tensor out = g.addVariable(type, s, dc);
  poputil::mapTensorLinearly(g, out);
  return out;
}
poplar::Tensor createSliceTensor(poplar::Graph &g, const poplar::Tensor &t, const std::vector<std::size_t> &dims,
                                 const std::vector<std::size_t> &sizes, std::size_t numIndices,
                                 const poplar::DebugContext &dc) {
  return createSliceTensor(g, t.elementType(), t.shape(), dims, sizes, numIndices, SlicePlan(), {}, dc);
}

poplar::Tensor createIndicesTensor(poplar::Graph &g, const std::vector<std::size_t> &dims, std::size_t numIndices,
                                   const SlicePlan &, const poplar::OptionFlags &, const poplar::DebugContext &dc) {
  poplar::Tensor t = g.addVariable(poplar::UNSIGNED_INT, {numIndices, dims.size()}, dc);
  poputil::mapTensorLinearly(g, t);
  return t;
}

poplar::Tensor multiSlice(poplar::Graph &g, const poplar::Tensor &t, const poplar::Tensor &offsets,
                          const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                          poplar::program::Sequence &prog, const SlicePlan &, const poplar::OptionFlags &options,
                          const poplar::DebugContext &dc) {
  const char *name = "popops::multiSlice";
  Geometry geo = geometry(t, dims, sizes, name);
  poplar::Tensor off = offsetsColumn(offsets, name);
  geo.N = off.numElements();
  bool remap = options.ipuxlHas("remapOutOfBoundIndices") && options.at("remapOutOfBoundIndices") == "true";
  poplar::Tensor out = createSliceTensor(g, t, dims, sizes, geo.N, poplar::DebugContext(dc, "multiSlice"));
  if (geo.N) addMulti(g, SliceOp::Slice, {t}, {out}, {off}, nullptr, geo, remap, prog, dc, name);
  return out;
}
poplar::Tensor multiSlice(poplar::Graph &g, const poplar::Tensor &t, poplar::ArrayRef<unsigned> offsets, std::size_t dim,
                          poplar::program::Sequence &prog, const poplar::DebugContext &dc,
                          const poplar::OptionFlags &options) {
  return multiSlice(g, t, constantOffsets(g, offsets), {dim}, {1}, prog, SlicePlan(), options, dc);
}

void multiUpdate(poplar::Graph &g, const poplar::Tensor &t, const poplar::Tensor &s, const poplar::Tensor &offsets,
                 const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                 poplar::program::Sequence &prog, const SlicePlan &, const poplar::OptionFlags &,
                 const poplar::DebugContext &dc) {
  update(g, SliceOp::Update, t, s, offsets, nullptr, dims, sizes, prog, dc, "popops::multiUpdate");
}
void multiUpdateAdd(poplar::Graph &g, const poplar::Tensor &t, const poplar::Tensor &s, const poplar::Tensor &offsets,
                    const poplar::Tensor &scale, const std::vector<std::size_t> &dims,
                    const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog, const SlicePlan &,
                    const poplar::OptionFlags &, const poplar::DebugContext &dc) {
  update(g, SliceOp::Add, t, s, offsets, &scale, dims, sizes, prog, dc, "popops::multiUpdateAdd");
}
void multiUpdateAdd(poplar::Graph &g, const poplar::Tensor &t, const poplar::Tensor &s,
                    poplar::ArrayRef<unsigned> offsets, const poplar::Tensor &scale, std::size_t dim,
                    poplar::program::Sequence &prog, const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  multiUpdateAdd(g, t, s, constantOffsets(g, offsets), scale, {dim}, {1}, prog, SlicePlan(), o, dc);
}
void multiUpdateMax(poplar::Graph &g, const poplar::Tensor &t, const poplar::Tensor &s, const poplar::Tensor &offsets,
                    const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                    poplar::program::Sequence &prog, const SlicePlan &, const poplar::OptionFlags &,
                    const poplar::DebugContext &dc) {
  update(g, SliceOp::Max, t, s, offsets, nullptr, dims, sizes, prog, dc, "popops::multiUpdateMax");
}
void multiUpdateMul(poplar::Graph &g, const poplar::Tensor &t, const poplar::Tensor &s, const poplar::Tensor &offsets,
                    const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                    poplar::program::Sequence &prog, const SlicePlan &, const poplar::OptionFlags &,
                    const poplar::DebugContext &dc) {
  update(g, SliceOp::Mul, t, s, offsets, nullptr, dims, sizes, prog, dc, "popops::multiUpdateMul");
}

poplar::Tensor createGroupedSliceableTensor(poplar::Graph &g, const poplar::Type &type, std::size_t groupSize,
                                            const std::vector<std::size_t> &shape, const std::vector<std::size_t> &dims,
                                            const std::vector<std::size_t> &sizes, const SlicePlan &,
                                            const poplar::OptionFlags &, const poplar::DebugContext &dc) {
  auto full = shape;
  full.insert(full.begin(), groupSize);
  poplar::Tensor t = g.addVariable(type, full, dc);
  if (dims.size() != 1 || t.numElements() == 0) {
    poputil::mapTensorLinearly(g, t);
    return t;
  }
  // Each group's chunks start where the previous group's ended.
  std::size_t B = 1;
  for (std::size_t k = dims[0] + 1; k < shape.size(); ++k) B *= shape[k];
  unsigned per = static_cast<unsigned>(chunks(B, g.getTarget().getNumTiles()).size());
  for (std::size_t k = 0; k < groupSize; ++k) mapSliceable(g, t[k], dims, sizes, static_cast<unsigned>(k * per));
  return t;
}
poplar::Tensor createGroupedSliceTensor(poplar::Graph &g, const poplar::Type &type, std::size_t groupSize,
                                        const std::vector<std::size_t> &shape, const std::vector<std::size_t> &dims,
                                        const std::vector<std::size_t> &sizes, std::size_t numIndices,
                                        const SlicePlan &plan, const poplar::OptionFlags &o,
                                        const poplar::DebugContext &dc) {
  poplar::Tensor one = createSliceTensor(g, type, shape, dims, sizes, numIndices, plan, o, dc);
  auto s = one.shape();
  s.insert(s.begin(), groupSize);
  poplar::Tensor out = g.addVariable(type, s, dc);
  poputil::mapTensorLinearly(g, out);
  return out;
}
poplar::Tensor createGroupedIndicesTensor(poplar::Graph &g, std::size_t groupSize, const std::vector<std::size_t> &dims,
                                          std::size_t numIndices, const SlicePlan &, const poplar::OptionFlags &,
                                          const poplar::DebugContext &dc) {
  poplar::Tensor t = g.addVariable(poplar::UNSIGNED_INT, {groupSize, numIndices, dims.size()}, dc);
  poputil::mapTensorLinearly(g, t);
  return t;
}

poplar::Tensor groupedMultiSlice(poplar::Graph &g, const poplar::Tensor &t, const poplar::Tensor &offsets,
                                 const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                                 poplar::program::Sequence &prog, const SlicePlan &, const poplar::OptionFlags &options,
                                 const poplar::DebugContext &dc) {
  const char *name = "popops::groupedMultiSlice";
  Groups gr = groupsOf(t, offsets, dims, sizes, name);
  bool remap = options.ipuxlHas("remapOutOfBoundIndices") && options.at("remapOutOfBoundIndices") == "true";
  auto s = sliceShape(t[0], dims[0], sizes[0], gr.geo.N);
  s.insert(s.begin(), t.dim(0));
  poplar::Tensor out = g.addVariable(t.elementType(), s, {dc, "groupedMultiSlice"});
  poputil::mapTensorLinearly(g, out);
  std::vector<poplar::Tensor> outs;
  for (std::size_t k = 0; k < t.dim(0); ++k) outs.push_back(out[k]);
  if (gr.geo.N) addMulti(g, SliceOp::Slice, gr.ts, outs, gr.offs, nullptr, gr.geo, remap, prog, dc, name);
  return out;
}
void groupedMultiUpdate(poplar::Graph &g, const poplar::Tensor &t, const poplar::Tensor &s,
                        const poplar::Tensor &offsets, const std::vector<std::size_t> &dims,
                        const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog, const SlicePlan &,
                        const poplar::OptionFlags &, const poplar::DebugContext &dc) {
  groupedUpdate(g, SliceOp::Update, t, s, offsets, nullptr, dims, sizes, prog, dc, "popops::groupedMultiUpdate");
}
void groupedMultiUpdateAdd(poplar::Graph &g, const poplar::Tensor &t, const poplar::Tensor &s,
                           const poplar::Tensor &offsets, const poplar::Tensor &scale,
                           const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                           poplar::program::Sequence &prog, const SlicePlan &, const poplar::OptionFlags &,
                           const poplar::DebugContext &dc) {
  groupedUpdate(g, SliceOp::Add, t, s, offsets, &scale, dims, sizes, prog, dc, "popops::groupedMultiUpdateAdd");
}
void groupedMultiUpdateMax(poplar::Graph &g, const poplar::Tensor &t, const poplar::Tensor &s,
                           const poplar::Tensor &offsets, const std::vector<std::size_t> &dims,
                           const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog, const SlicePlan &,
                           const poplar::OptionFlags &, const poplar::DebugContext &dc) {
  groupedUpdate(g, SliceOp::Max, t, s, offsets, nullptr, dims, sizes, prog, dc, "popops::groupedMultiUpdateMax");
}
void groupedMultiUpdateMul(poplar::Graph &g, const poplar::Tensor &t, const poplar::Tensor &s,
                           const poplar::Tensor &offsets, const std::vector<std::size_t> &dims,
                           const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog, const SlicePlan &,
                           const poplar::OptionFlags &, const poplar::DebugContext &dc) {
  groupedUpdate(g, SliceOp::Mul, t, s, offsets, nullptr, dims, sizes, prog, dc, "popops::groupedMultiUpdateMul");
}

namespace embedding {
SlicePlan plan(const poplar::Graph &, const poplar::Type &, std::size_t, std::size_t, const std::vector<std::size_t> &,
               const poplar::OptionFlags &) {
  return SlicePlan();
}
SlicePlan plan(const poplar::Graph &, const poplar::Type &, std::size_t, std::size_t, std::size_t,
               const std::vector<std::size_t> &, const poplar::OptionFlags &) {
  return SlicePlan();
}
} // namespace embedding

} // namespace popops
