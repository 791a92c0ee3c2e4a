// ipuxl's PopLibs: popnn pooling. The windows are resolved when the graph
// is built into CSR tables (for each output field position, the input field
// positions of its window; and inverted, for each input position, the
// windows that hold it). Forward vertices own output elements, gradient
// vertices own input-gradient elements, one vertex per tile.
#include "../popops/builtin.hpp"
#include "../poputil/window.hpp"

#include <popnn/Pooling.hpp>
#include <poputil/TileMapping.hpp>

#include <cmath>
#include <limits>
#include <numeric>

namespace popnn {

const char *asString(const PoolingType &m) {
  switch (m) {
  case PoolingType::MAX: return "MAX";
  case PoolingType::AVG: return "AVG";
  case PoolingType::SUM: return "SUM";
  }
  return "?";
}

namespace pooling {

PoolParams::PoolParams(PoolingType type, std::vector<std::size_t> field, std::vector<std::size_t> kernel,
                       std::vector<unsigned> s, std::vector<int> lower, std::vector<int> upper, std::size_t chans,
                       std::size_t batch, poplar::Type t)
    : poolingType(type), inputFieldShape(std::move(field)), kernelShape(std::move(kernel)), stride(std::move(s)),
      inputTruncationOrPaddingLower(std::move(lower)), inputTruncationOrPaddingUpper(std::move(upper)),
      numChannels(chans), batchSize(batch), dType(t) {
  std::size_t n = inputFieldShape.size();
  if (kernelShape.size() != n || stride.size() != n || inputTruncationOrPaddingLower.size() != n ||
      inputTruncationOrPaddingUpper.size() != n)
    throw poputil::poplibs_error("popnn::pooling::PoolParams: kernelShape, stride and the paddings must have " +
                                 std::to_string(n) + " values (one per field dimension)");
  for (unsigned d = 0; d < n; ++d) {
    if (stride[d] == 0 || kernelShape[d] == 0)
      throw poputil::poplibs_error("popnn::pooling::PoolParams: a stride or kernel size of 0");
    if (poputil::ipuxl::windowSpan(static_cast<long>(inputFieldShape[d]), inputTruncationOrPaddingLower[d],
                                   inputTruncationOrPaddingUpper[d], static_cast<long>(kernelShape[d])) < 0)
      throw poputil::poplibs_error("popnn::pooling::PoolParams: the kernel (" + std::to_string(kernelShape[d]) +
                                   ") is larger than the padded field in dimension " + std::to_string(d));
  }
}

std::vector<std::size_t> PoolParams::getOutputFieldShape() const {
  std::vector<std::size_t> out;
  for (unsigned d = 0; d < getNumFieldDims(); ++d) {
    long span = poputil::ipuxl::windowSpan(static_cast<long>(inputFieldShape[d]), inputTruncationOrPaddingLower[d],
                                           inputTruncationOrPaddingUpper[d], static_cast<long>(kernelShape[d]));
    out.push_back(poputil::ipuxl::windowPositions(span, stride[d]));
  }
  return out;
}

namespace {
using popops::ipuxl::AnyElem;
using popops::ipuxl::load;
using popops::ipuxl::sizeOf;
using popops::ipuxl::store;

struct PoolPlan {
  PoolingType type;
  int code;
  std::size_t inField, outField;
  std::vector<std::size_t> winBegin; // window of output position f: win[winBegin[f] .. winBegin[f+1])
  std::vector<unsigned> win;
  std::vector<std::size_t> revBegin; // windows holding input position i: rev[revBegin[i] .. revBegin[i+1])
  std::vector<unsigned> rev;
  bool scaled;
};

std::size_t product(const std::vector<std::size_t> &v) {
  return std::accumulate(v.begin(), v.end(), std::size_t(1), std::multiplies<std::size_t>());
}

PoolPlan *makePlan(const PoolParams &p, bool scaled) {
  auto *plan = new PoolPlan{};
  plan->type = p.poolingType;
  plan->code = p.dType.ipuxlCode();
  plan->scaled = scaled;
  std::size_t n = p.getNumFieldDims();
  auto outShape = p.getOutputFieldShape();
  plan->inField = product(p.inputFieldShape);
  plan->outField = product(outShape);
  std::size_t kSize = product(p.kernelShape);
  std::vector<std::vector<unsigned>> perIn(plan->inField);
  std::vector<std::size_t> o(n), k(n);
  plan->winBegin.push_back(0);
  for (std::size_t f = 0; f < plan->outField; ++f) {
    for (std::size_t r = f, d = n; d-- > 0;) {
      o[d] = r % outShape[d];
      r /= outShape[d];
    }
    for (std::size_t kf = 0; kf < kSize; ++kf) {
      for (std::size_t r = kf, d = n; d-- > 0;) {
        k[d] = r % p.kernelShape[d];
        r /= p.kernelShape[d];
      }
      std::size_t flat = 0;
      bool ok = true;
      for (unsigned d = 0; d < n && ok; ++d) {
        long i = static_cast<long>(o[d] * p.stride[d] + k[d]) - p.inputTruncationOrPaddingLower[d];
        ok = i >= 0 && i < static_cast<long>(p.inputFieldShape[d]);
        flat = flat * p.inputFieldShape[d] + static_cast<std::size_t>(ok ? i : 0);
      }
      if (!ok) continue;
      plan->win.push_back(static_cast<unsigned>(flat));
      perIn[flat].push_back(static_cast<unsigned>(f));
    }
    plan->winBegin.push_back(plan->win.size());
  }
  plan->revBegin.push_back(0);
  for (const auto &v : perIn) {
    plan->rev.insert(plan->rev.end(), v.begin(), v.end());
    plan->revBegin.push_back(plan->rev.size());
  }
  return plan;
}

double loadAt(int code, const void *base, std::size_t i) {
  return load(code, static_cast<const char *>(base) + i * sizeOf(code));
}

/// Pooled elements (flat indices into [B][C][outField...] given by `offsets`).
class PoolVertex : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<AnyElem>> in;
  poplar::Output<poplar::Vector<AnyElem>> out;
  poplar::Vector<unsigned> offsets;
  unsigned long long plan;

  bool compute() {
    const PoolPlan &p = *popops::ipuxl::planOf<PoolPlan>(plan);
    char *dst = reinterpret_cast<char *>(out.data());
    std::size_t o = 0, sz = sizeOf(p.code);
    for (std::size_t r = 0; r + 1 < offsets.size(); r += 2)
      for (unsigned j = 0; j < offsets[r + 1]; ++j, ++o) {
        std::size_t flat = offsets[r] + j, f = flat % p.outField, base = (flat / p.outField) * p.inField;
        std::size_t b = p.winBegin[f], e = p.winBegin[f + 1];
        double acc = p.type == PoolingType::MAX ? -std::numeric_limits<double>::infinity() : 0.0;
        bool nan = false;
        for (std::size_t t = b; t < e; ++t) {
          double v = loadAt(p.code, in.data(), base + p.win[t]);
          if (p.type == PoolingType::MAX) {
            nan = nan || std::isnan(v);
            acc = v > acc ? v : acc;
          } else {
            acc += v;
          }
        }
        if (b == e) acc = 0;
        if (nan) acc = std::numeric_limits<double>::quiet_NaN();
        if (p.type == PoolingType::AVG && e > b) acc /= static_cast<double>(e - b);
        store(p.code, dst + o * sz, acc);
      }
    return true;
  }
};

/// Input-gradient elements (flat indices into [B][C][field...]). For MAX,
/// `in` and `pooled` are the forward input and output; AVG / SUM do not
/// read them.
class PoolGradVertex : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<AnyElem>> in;
  poplar::Input<poplar::Vector<AnyElem>> pooled;
  poplar::Input<poplar::Vector<AnyElem>> pooledGrad;
  poplar::Output<poplar::Vector<AnyElem>> out;
  poplar::Vector<unsigned> offsets;
  unsigned long long plan;

  bool compute() {
    const PoolPlan &p = *popops::ipuxl::planOf<PoolPlan>(plan);
    char *dst = reinterpret_cast<char *>(out.data());
    std::size_t o = 0, sz = sizeOf(p.code);
    bool isMax = p.type == PoolingType::MAX;
    for (std::size_t r = 0; r + 1 < offsets.size(); r += 2)
      for (unsigned j = 0; j < offsets[r + 1]; ++j, ++o) {
        std::size_t flat = offsets[r] + j, i = flat % p.inField, plane = flat / p.inField;
        double x = isMax ? loadAt(p.code, in.data(), flat) : 0.0, acc = 0;
        for (std::size_t t = p.revBegin[i]; t < p.revBegin[i + 1]; ++t) {
          std::size_t f = p.rev[t], of = plane * p.outField + f;
          std::size_t wb = p.winBegin[f], we = p.winBegin[f + 1];
          double g = loadAt(p.code, pooledGrad.data(), of), count = static_cast<double>(we - wb);
          if (isMax) {
            double m = loadAt(p.code, pooled.data(), of);
            if (x != m) continue;
            count = 0;
            for (std::size_t w = wb; w < we; ++w) count += loadAt(p.code, in.data(), plane * p.inField + p.win[w]) == m;
          }
          acc += p.scaled ? g / count : g;
        }
        store(p.code, dst + o * sz, acc);
      }
    return true;
  }
};

std::vector<std::size_t> shapeOf(const PoolParams &p, const std::vector<std::size_t> &field) {
  std::vector<std::size_t> s{p.batchSize, p.numChannels};
  s.insert(s.end(), field.begin(), field.end());
  return s;
}

void checkShape(const char *fn, const char *what, const poplar::Tensor &t, const std::vector<std::size_t> &want,
                const poplar::Type &type) {
  if (t.shape() != want || t.elementType() != type) {
    std::string w;
    for (std::size_t i = 0; i < want.size(); ++i) w += (i ? "," : "") + std::to_string(want[i]);
    throw poputil::poplibs_error(std::string(fn) + ": " + what + " is " + t.elementType().toString() + " " +
                                 t.shapeToString() + ", expected " + type.toString() + " {" + w + "}");
  }
}

poplar::Tensor perTile(poplar::Graph &g, const char *type, const std::vector<std::size_t> &shape, PoolPlan *plan,
                       const std::vector<std::pair<const char *, poplar::Tensor>> &ins, const poplar::Type &t,
                       poplar::program::Sequence &prog, const poplar::DebugContext &dc) {
  popops::ipuxl::requireCodelets(g, type, "popnn");
  poplar::Tensor out = g.addVariable(t, shape, poplar::DebugContext(dc, "out"));
  poputil::mapTensorLinearly(g, out);
  poplar::Tensor flat = out.flatten();
  poplar::ComputeSet cs = g.addComputeSet(poplar::DebugContext(dc, "Pool"));
  std::size_t perElem = plan->outField ? plan->win.size() / plan->outField + 1 : 1;
  for (const auto &part : popops::ipuxl::partsByTile(g, out)) {
    std::vector<unsigned> offs;
    for (const auto &iv : part.intervals) {
      offs.push_back(static_cast<unsigned>(iv.begin()));
      offs.push_back(static_cast<unsigned>(iv.size()));
    }
    auto v = g.addVertex(cs, type);
    for (const auto &kv : ins) g.connect(v[kv.first], kv.second.flatten());
    g.connect(v["out"], popops::ipuxl::gatherIntervals(flat, part.intervals));
    g.setInitialValue(v["offsets"], offs);
    g.setInitialValue(v["plan"], popops::ipuxl::keepPlan(plan));
    g.setTileMapping(v, part.tile);
    g.setPerfEstimate(v, 20 + part.size * perElem);
  }
  prog.add(poplar::program::Execute(cs));
  return out;
}
} // namespace

namespace ipuxl {
void addPoolingCodelets(poplar::Graph &graph) {
  using namespace poplar::ipuxl_detail;
  using P = PoolVertex;
  using G = PoolGradVertex;
  popops::ipuxl::registerBuiltins(
      graph, {describe<P>("popnn::ipuxl::Pool", {field("in", &P::in), field("out", &P::out),
                                                  field("offsets", &P::offsets), field("plan", &P::plan)}),
              describe<G>("popnn::ipuxl::PoolGrad",
                          {field("in", &G::in), field("pooled", &G::pooled), field("pooledGrad", &G::pooledGrad),
                           field("out", &G::out), field("offsets", &G::offsets), field("plan", &G::plan)})});
}
} // namespace ipuxl

poplar::Tensor pool(poplar::Graph &graph, const PoolParams &params, const poplar::Tensor &in,
                    poplar::program::Sequence &prog, const poplar::DebugContext &dc, const poplar::OptionFlags &) {
  checkShape("popnn::pooling::pool", "the input", in, shapeOf(params, params.inputFieldShape), params.dType);
  PoolPlan *plan = makePlan(params, false);
  return perTile(graph, "popnn::ipuxl::Pool", shapeOf(params, params.getOutputFieldShape()), plan, {{"in", in}},
                 params.dType, prog, dc);
}

poplar::Tensor poolInputGradient(poplar::Graph &graph, const PoolParams &params, const poplar::Tensor &in,
                                 const poplar::Tensor &pooled, const poplar::Tensor &pooledGradient,
                                 bool useScaledGradient, poplar::program::Sequence &prog,
                                 const poplar::DebugContext &dc, const poplar::OptionFlags &) {
  const char *fn = "popnn::pooling::poolInputGradient";
  if (params.poolingType != PoolingType::MAX)
    throw poputil::poplibs_error(std::string(fn) + ": the overload with the forward input and output is for MAX "
                                 "pooling; " + asString(params.poolingType) + " takes fwdChansPerGroup");
  auto outShape = shapeOf(params, params.getOutputFieldShape());
  checkShape(fn, "the input", in, shapeOf(params, params.inputFieldShape), params.dType);
  checkShape(fn, "pooled", pooled, outShape, params.dType);
  checkShape(fn, "pooledGradient", pooledGradient, outShape, params.dType);
  PoolPlan *plan = makePlan(params, useScaledGradient);
  return perTile(graph, "popnn::ipuxl::PoolGrad", shapeOf(params, params.inputFieldShape), plan,
                 {{"in", in}, {"pooled", pooled}, {"pooledGrad", pooledGradient}}, params.dType, prog, dc);
}

poplar::Tensor poolInputGradient(poplar::Graph &graph, const PoolParams &params, const unsigned,
                                 const poplar::Tensor &pooledGradient, bool useScaledGradient,
                                 poplar::program::Sequence &prog, const poplar::DebugContext &dc,
                                 const poplar::OptionFlags &) {
  const char *fn = "popnn::pooling::poolInputGradient";
  if (params.poolingType == PoolingType::MAX)
    throw poputil::poplibs_error(std::string(fn) + ": MAX pooling needs the forward input and output");
  checkShape(fn, "pooledGradient", pooledGradient, shapeOf(params, params.getOutputFieldShape()), params.dType);
  PoolPlan *plan = makePlan(params, useScaledGradient);
  return perTile(graph, "popnn::ipuxl::PoolGrad", shapeOf(params, params.inputFieldShape), plan,
                 // the vertex reads `in` and `pooled` for MAX only
                 {{"in", pooledGradient}, {"pooled", pooledGradient}, {"pooledGrad", pooledGradient}},
                 params.dType, prog, dc);
}

} // namespace pooling
} // namespace popnn
