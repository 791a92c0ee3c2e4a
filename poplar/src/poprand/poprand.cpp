// ipuxl's PopLibs: poprand. A counter-based generator: element i of a call
// draws from splitmix64(seed, modifier, i, run), so the values are the
// same whatever the tile mapping.
#include "../popops/builtin.hpp"

#include <cmath>
#include <popops/ElementWise.hpp>
#include <poprand/RandomGen.hpp>
#include <poprand/codelets.hpp>

namespace poprand {
namespace {
using popops::ipuxl::AnyElem;

enum class Dist { Uniform, Normal, TruncatedNormal, Bernoulli };
struct RandPlan {
  Dist dist;
  double a, b, c;
  int outCode;
  std::uint32_t modifier;
};

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

class RandomVertex : public poplar::Vertex {
public:
  poplar::Output<poplar::Vector<AnyElem>> out;
  poplar::Vector<poplar::Input<poplar::Vector<AnyElem>>> seed; // none, or two unsigned ints
  poplar::Vector<unsigned> offsets;                            // (flat begin, size) per run of out
  unsigned long long plan;
  std::uint64_t runs = 0; // not a field: how many times the vertex has run

  bool compute() {
    const RandPlan &p = *popops::ipuxl::planOf<RandPlan>(plan);
    std::uint64_t s = 0;
    if (seed.size()) {
      const unsigned *sv = reinterpret_cast<const unsigned *>(seed[0].data());
      s = (static_cast<std::uint64_t>(sv[1]) << 32) | sv[0];
    }
    std::uint64_t base = splitmix(splitmix(s) ^ (static_cast<std::uint64_t>(p.modifier) << 1) ^ splitmix(runs + 1));
    ++runs;
    std::size_t o = 0, sz = popops::ipuxl::sizeOf(p.outCode);
    char *dst = reinterpret_cast<char *>(out.data());
    for (std::size_t k = 0; k + 1 < offsets.size(); k += 2)
      for (unsigned j = 0; j < offsets[k + 1]; ++j, ++o) {
        std::uint64_t i = offsets[k] + j;
        auto u = [&](std::uint64_t salt) {
          return (static_cast<double>(splitmix(base ^ splitmix(i * 4 + salt)) >> 11) + 0.5) * (1.0 / 9007199254740992.0);
        };
        double v = 0;
        switch (p.dist) {
        case Dist::Uniform:
          if (popops::ipuxl::isIntegral(p.outCode))
            v = std::floor(p.a + u(0) * (p.b - p.a + 1));
          else
            v = p.a + u(0) * (p.b - p.a);
          break;
        case Dist::Normal:
          v = p.a + p.b * std::sqrt(-2.0 * std::log(u(0))) * std::cos(6.283185307179586 * u(1));
          break;
        case Dist::TruncatedNormal: {
          std::uint64_t salt = 0;
          do {
            v = std::sqrt(-2.0 * std::log(u(salt))) * std::cos(6.283185307179586 * u(salt + 1));
            salt += 2;
          } while (std::fabs(v) > p.c && salt < 1000);
          v = p.a + p.b * v;
          break;
        }
        case Dist::Bernoulli:
          v = u(0) < p.a ? 1.0 : 0.0;
          break;
        }
        popops::ipuxl::store(p.outCode, dst + o * sz, v);
      }
    return true;
  }
};

poplar::Tensor &masterSeed() {
  static poplar::Tensor t;
  return t;
}

poplar::Tensor generate(poplar::Graph &g, const poplar::Tensor *seed, std::uint32_t modifier, const poplar::Tensor &ref,
                        const poplar::Type &type, RandPlan plan, poplar::program::Sequence &prog,
                        const poplar::DebugContext &dc) {
  popops::ipuxl::requireCodelets(g, "poprand::ipuxl::Random", "poprand");
  const poplar::Tensor *s = seed ? seed : (masterSeed().valid() ? &masterSeed() : nullptr);
  if (s && (s->numElements() != 2 || s->elementType() != poplar::UNSIGNED_INT))
    throw poputil::poplibs_error("poprand: the seed must be a tensor of two UNSIGNED_INT elements, got " +
                                 s->elementType().toString() + " " + s->shapeToString());
  plan.outCode = type.ipuxlCode();
  plan.modifier = modifier;
  auto *p = new RandPlan(plan);
  poplar::Tensor out = g.clone(type, ref, poplar::DebugContext(dc, "random"));
  poplar::Tensor flat = out.flatten();
  poplar::ComputeSet cs = g.addComputeSet(poplar::DebugContext(dc, "random"));
  for (const auto &part : popops::ipuxl::partsByTile(g, out)) {
    std::vector<unsigned> offs;
    for (const auto &iv : part.intervals) {
      offs.push_back(static_cast<unsigned>(iv.begin()));
      offs.push_back(static_cast<unsigned>(iv.size()));
    }
    auto v = g.addVertex(cs, "poprand::ipuxl::Random");
    g.connect(v["out"], popops::ipuxl::gatherIntervals(flat, part.intervals));
    if (s)
      g.connect(v["seed"], std::vector<poplar::Tensor>{s->flatten()});
    else
      g.setFieldSize(v["seed"], 0);
    g.setInitialValue(v["offsets"], offs);
    g.setInitialValue(v["plan"], popops::ipuxl::keepPlan(p));
    g.setTileMapping(v, part.tile);
    g.setPerfEstimate(v, 20 + 4 * part.size);
  }
  prog.add(poplar::program::Execute(cs));
  return out;
}
} // namespace

void addCodelets(poplar::Graph &graph) {
  using namespace poplar::ipuxl_detail;
  using V = RandomVertex;
  popops::ipuxl::registerBuiltins(graph, {describe<V>("poprand::ipuxl::Random",
                                                      {field("out", &V::out), field("seed", &V::seed),
                                                       field("offsets", &V::offsets), field("plan", &V::plan)})});
}

poplar::Tensor uniform(poplar::Graph &g, const poplar::Tensor *seed, std::uint32_t m, const poplar::Tensor &ref,
                       const poplar::Type &t, double lo, double hi, poplar::program::Sequence &prog,
                       const poplar::DebugContext &dc) {
  if (!(hi >= lo)) throw poputil::poplibs_error("poprand::uniform: maxVal must not be below minVal");
  return generate(g, seed, m, ref, t, RandPlan{Dist::Uniform, lo, hi, 0, 0, 0}, prog, dc);
}
poplar::Tensor normal(poplar::Graph &g, const poplar::Tensor *seed, std::uint32_t m, const poplar::Tensor &ref,
                      const poplar::Type &t, double mean, double sd, poplar::program::Sequence &prog,
                      const poplar::DebugContext &dc) {
  if (!t.isFloatingPoint()) throw poputil::poplibs_error("poprand::normal: the output type must be FLOAT or HALF");
  return generate(g, seed, m, ref, t, RandPlan{Dist::Normal, mean, sd, 0, 0, 0}, prog, dc);
}
poplar::Tensor truncatedNormal(poplar::Graph &g, const poplar::Tensor *seed, std::uint32_t m, const poplar::Tensor &ref,
                               const poplar::Type &t, double mean, double sd, double alpha,
                               poplar::program::Sequence &prog, const poplar::DebugContext &dc) {
  if (!t.isFloatingPoint()) throw poputil::poplibs_error("poprand::truncatedNormal: the output type must be FLOAT or HALF");
  return generate(g, seed, m, ref, t, RandPlan{Dist::TruncatedNormal, mean, sd, alpha, 0, 0}, prog, dc);
}
poplar::Tensor bernoulli(poplar::Graph &g, const poplar::Tensor *seed, std::uint32_t m, const poplar::Tensor &ref,
                         const poplar::Type &t, double prob, poplar::program::Sequence &prog,
                         const poplar::DebugContext &dc) {
  if (prob < 0 || prob > 1) throw poputil::poplibs_error("poprand::bernoulli: prob must be in [0, 1]");
  return generate(g, seed, m, ref, t, RandPlan{Dist::Bernoulli, prob, 0, 0, 0, 0}, prog, dc);
}
poplar::Tensor dropout(poplar::Graph &g, const poplar::Tensor *seed, std::uint32_t m, const poplar::Tensor &input,
                       const poplar::Tensor &ref, double keep, double scale, poplar::program::Sequence &prog,
                       const poplar::DebugContext &dc) {
  if (input.shape() != ref.shape()) throw poputil::poplibs_error("poprand::dropout: input and reference shapes differ");
  poplar::Tensor mask = bernoulli(g, seed, m, ref, input.elementType(), keep, prog, dc);
  namespace pe = popops::expr;
  return popops::map(g, pe::_1 * pe::_2 * pe::Const(static_cast<float>(scale)), {input, mask}, prog, dc);
}
void setSeed(poplar::Graph &, const poplar::Tensor &seed, std::uint32_t, poplar::program::Sequence &,
             const poplar::DebugContext &) {
  masterSeed() = seed;
}

} // namespace poprand
