// ipuxl's PopLibs: scaledAddTo, zero, fill, cast (all popops::map
// expressions), dynamicSlice/dynamicUpdate (a vertex that reads its offset
// at run time) and popops::addCodelets.
#include "builtin.hpp"

#include <algorithm>
#include <popops/Cast.hpp>
#include <popops/DynamicSlice.hpp>
#include <popops/ElementWise.hpp>
#include <popops/Fill.hpp>
#include <popops/ScaledAdd.hpp>
#include <popops/Zero.hpp>
#include <popops/codelets.hpp>
#include <poputil/TileMapping.hpp>

namespace popops {
namespace ipuxl {
poplar::ipuxl_detail::VertexTypeInfo mapVertexType();
std::vector<poplar::ipuxl_detail::VertexTypeInfo> reduceVertexTypes();
std::vector<poplar::ipuxl_detail::VertexTypeInfo> multiSliceVertexTypes();
std::vector<poplar::ipuxl_detail::VertexTypeInfo> topKVertexTypes();

namespace {
struct SlicePlan {
  std::vector<std::size_t> shape, dims, sizes; // of the full tensor
  std::size_t elemSize;
  int offsetCode;
};

/// Copies between the full tensor and its slice at the run-time offsets.
template <bool Update> class DynamicSliceVertex : public poplar::Vertex {
public:
  typename std::conditional<Update, poplar::InOut<poplar::Vector<AnyElem>>, poplar::Input<poplar::Vector<AnyElem>>>::type base;
  typename std::conditional<Update, poplar::Input<poplar::Vector<AnyElem>>, poplar::Output<poplar::Vector<AnyElem>>>::type sub;
  poplar::Input<poplar::Vector<AnyElem>> offset;
  unsigned long long plan;

  bool compute() {
    const SlicePlan &p = *planOf<SlicePlan>(plan);
    std::size_t r = p.shape.size();
    std::vector<std::size_t> begin(r, 0), subShape = p.shape;
    for (std::size_t k = 0; k < p.dims.size(); ++k) {
      double o = load(p.offsetCode, reinterpret_cast<const char *>(offset.data()) + k * sizeOf(p.offsetCode));
      std::size_t d = p.dims[k];
      std::size_t maxBegin = p.shape[d] - p.sizes[k];
      // Offsets beyond the end are clamped so the slice stays in range.
      begin[d] = std::min(static_cast<std::size_t>(std::max(0.0, o)), maxBegin);
      subShape[d] = p.sizes[k];
    }
    std::size_t n = 1;
    for (auto s : subShape) n *= s;
    std::vector<std::size_t> idx(r, 0), stride(r, 1);
    for (std::size_t k = r; k-- > 1;) stride[k - 1] = stride[k] * p.shape[k];
    char *full = const_cast<char *>(reinterpret_cast<const char *>(base.data()));
    char *part = const_cast<char *>(reinterpret_cast<const char *>(sub.data()));
    for (std::size_t i = 0; i < n; ++i) {
      std::size_t flat = 0;
      for (std::size_t k = 0; k < r; ++k) flat += (begin[k] + idx[k]) * stride[k];
      if (Update)
        std::memcpy(full + flat * p.elemSize, part + i * p.elemSize, p.elemSize);
      else
        std::memcpy(part + i * p.elemSize, full + flat * p.elemSize, p.elemSize);
      for (std::size_t k = r; k-- > 0;) {
        if (++idx[k] < subShape[k]) break;
        idx[k] = 0;
      }
    }
    return true;
  }
};

SlicePlan *slicePlan(const poplar::Tensor &t, const poplar::Tensor &offset, const std::vector<std::size_t> &dims,
                     const std::vector<std::size_t> &sizes, const char *op) {
  if (dims.size() != sizes.size())
    throw poputil::poplibs_error(std::string(op) + ": dims and sizes differ in length");
  if (offset.numElements() != dims.size())
    throw poputil::poplibs_error(std::string(op) + ": the offset tensor has " + std::to_string(offset.numElements()) +
                                 " elements, one per sliced dimension (" + std::to_string(dims.size()) + ") expected");
  if (offset.elementType().isFloatingPoint())
    throw poputil::poplibs_error(std::string(op) + ": the offset tensor must be of an integral type");
  for (std::size_t k = 0; k < dims.size(); ++k) {
    if (dims[k] >= t.rank()) throw poputil::poplibs_error(std::string(op) + ": dimension out of range");
    if (sizes[k] > t.dim(static_cast<unsigned>(dims[k])))
      throw poputil::poplibs_error(std::string(op) + ": slice size " + std::to_string(sizes[k]) + " exceeds dimension " +
                                   std::to_string(dims[k]) + " of " + t.shapeToString());
  }
  return new SlicePlan{t.shape(), dims, sizes, t.elementType().ipuxlSize(), offset.elementType().ipuxlCode()};
}

unsigned tileOfFirst(const poplar::Graph &graph, const poplar::Tensor &t) {
  auto m = graph.getTileMapping(t);
  for (unsigned i = 0; i < m.size(); ++i)
    if (!m[i].empty()) return i;
  return 0;
}
} // namespace

std::vector<poplar::ipuxl_detail::VertexTypeInfo> sliceVertexTypes() {
  using namespace poplar::ipuxl_detail;
  using S = DynamicSliceVertex<false>;
  using U = DynamicSliceVertex<true>;
  return {describe<S>("popops::ipuxl::DynamicSlice", {field("base", &S::base), field("sub", &S::sub),
                                                      field("offset", &S::offset), field("plan", &S::plan)}),
          describe<U>("popops::ipuxl::DynamicUpdate", {field("base", &U::base), field("sub", &U::sub),
                                                       field("offset", &U::offset), field("plan", &U::plan)})};
}
} // namespace ipuxl

using namespace ipuxl;
namespace pe = popops::expr;

void addCodelets(poplar::Graph &graph) {
  std::vector<poplar::ipuxl_detail::VertexTypeInfo> types{mapVertexType()};
  for (auto &t : reduceVertexTypes()) types.push_back(t);
  for (auto &t : sliceVertexTypes()) types.push_back(t);
  for (auto &t : multiSliceVertexTypes()) types.push_back(t);
  for (auto &t : topKVertexTypes()) types.push_back(t);
  registerBuiltins(graph, types);
}

void scaledAddTo(poplar::Graph &g, poplar::Tensor A, poplar::Tensor B, float scaleB, poplar::program::Sequence &p,
                 const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  mapInPlace(g, pe::_1 + pe::Const(scaleB) * pe::_2, {A, B}, p, dc, o);
}
void scaledAddTo(poplar::Graph &g, poplar::Tensor A, poplar::Tensor B, poplar::Tensor scaleB, poplar::program::Sequence &p,
                 const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  mapInPlace(g, pe::_1 + pe::Cast(pe::_3, A.elementType()) * pe::_2, {A, B, scaleB.reshape({})}, p, dc, o);
}
void scaledAddTo(poplar::Graph &g, poplar::Tensor A, float scaleA, poplar::Tensor B, float scaleB,
                 poplar::program::Sequence &p, const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  mapInPlace(g, pe::Const(scaleA) * pe::_1 + pe::Const(scaleB) * pe::_2, {A, B}, p, dc, o);
}
void scaledAddTo(poplar::Graph &g, poplar::Tensor A, poplar::Tensor scaleA, poplar::Tensor B, poplar::Tensor scaleB,
                 poplar::program::Sequence &p, const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  mapInPlace(g, pe::Cast(pe::_3, A.elementType()) * pe::_1 + pe::Cast(pe::_4, A.elementType()) * pe::_2,
             {A, B, scaleA.reshape({}), scaleB.reshape({})}, p, dc, o);
}
void scaledSubtractFrom(poplar::Graph &g, poplar::Tensor A, poplar::Tensor B, float scaleB, poplar::program::Sequence &p,
                        const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  mapInPlace(g, pe::_1 - pe::Const(scaleB) * pe::_2, {A, B}, p, dc, o);
}
void scaledSubtractFrom(poplar::Graph &g, poplar::Tensor A, poplar::Tensor B, poplar::Tensor scaleB,
                        poplar::program::Sequence &p, const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  mapInPlace(g, pe::_1 - pe::Cast(pe::_3, A.elementType()) * pe::_2, {A, B, scaleB.reshape({})}, p, dc, o);
}

void zero(poplar::Graph &g, poplar::Tensor t, poplar::program::Sequence &p, const poplar::DebugContext &dc) {
  mapWithOutput(g, pe::Cast(pe::Const(0), t.elementType()), {}, t, p, dc);
}
void fill(poplar::Graph &g, poplar::Tensor t, double v, poplar::program::Sequence &p, const poplar::DebugContext &dc) {
  mapWithOutput(g, pe::Cast(pe::Const(v), t.elementType()), {}, t, p, dc);
}

poplar::Tensor cast(poplar::Graph &g, const poplar::Tensor &t, const poplar::Type &type, poplar::program::Sequence &p,
                    const poplar::DebugContext &dc) {
  poplar::Tensor out = g.clone(type, t, poplar::DebugContext(dc, "cast"));
  mapWithOutput(g, pe::Cast(pe::_1, type), {t}, out, p, dc);
  return out;
}
void cast(poplar::Graph &g, poplar::Tensor src, poplar::Tensor dst, poplar::program::Sequence &p,
          const poplar::DebugContext &dc) {
  if (src.shape() != dst.shape()) throw poputil::poplibs_error("popops::cast: source and destination shapes differ");
  mapWithOutput(g, pe::Cast(pe::_1, dst.elementType()), {src}, dst, p, dc);
}

poplar::Tensor dynamicSlice(poplar::Graph &g, const poplar::Tensor &t, const poplar::Tensor &offset,
                            const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                            poplar::program::Sequence &prog, const poplar::DebugContext &dc,
                            const poplar::OptionFlags &) {
  requireCodelets(g, "popops::ipuxl::DynamicSlice", "popops");
  auto *plan = slicePlan(t, offset, dims, sizes, "popops::dynamicSlice");
  auto shape = t.shape();
  for (std::size_t k = 0; k < dims.size(); ++k) shape[dims[k]] = sizes[k];
  poplar::Tensor out = g.addVariable(t.elementType(), shape, poplar::DebugContext(dc, "slice"));
  poputil::mapTensorLinearly(g, out);
  poplar::ComputeSet cs = g.addComputeSet(poplar::DebugContext(dc, "dynamicSlice"));
  // One vertex reads the whole tensor (ipuxl's simple plan; PopLibs splits it).
  auto v = g.addVertex(cs, "popops::ipuxl::DynamicSlice");
  g.connect(v["base"], t.flatten());
  g.connect(v["sub"], out.flatten());
  g.connect(v["offset"], offset.flatten());
  g.setInitialValue(v["plan"], keepPlan(plan));
  g.setTileMapping(v, tileOfFirst(g, out));
  g.setPerfEstimate(v, 20 + out.numElements());
  prog.add(poplar::program::Execute(cs));
  return out;
}

void dynamicUpdate(poplar::Graph &g, const poplar::Tensor &t, const poplar::Tensor &s, const poplar::Tensor &offset,
                   const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                   poplar::program::Sequence &prog, const poplar::DebugContext &dc, const poplar::OptionFlags &) {
  requireCodelets(g, "popops::ipuxl::DynamicUpdate", "popops");
  auto *plan = slicePlan(t, offset, dims, sizes, "popops::dynamicUpdate");
  auto shape = t.shape();
  for (std::size_t k = 0; k < dims.size(); ++k) shape[dims[k]] = sizes[k];
  if (s.shape() != shape) throw poputil::poplibs_error("popops::dynamicUpdate: the update " + s.shapeToString() +
                                                       " does not have the slice's shape");
  if (s.elementType() != t.elementType()) throw poputil::poplibs_error("popops::dynamicUpdate: element types differ");
  poplar::ComputeSet cs = g.addComputeSet(poplar::DebugContext(dc, "dynamicUpdate"));
  auto v = g.addVertex(cs, "popops::ipuxl::DynamicUpdate");
  g.connect(v["base"], t.flatten());
  g.connect(v["sub"], s.flatten());
  g.connect(v["offset"], offset.flatten());
  g.setInitialValue(v["plan"], keepPlan(plan));
  g.setTileMapping(v, tileOfFirst(g, t));
  g.setPerfEstimate(v, 20 + s.numElements());
  prog.add(poplar::program::Execute(cs));
}

} // namespace popops
