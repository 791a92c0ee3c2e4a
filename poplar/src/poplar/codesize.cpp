// ipuxl's Poplar: the IPU model's estimate of a program's control code and
// exchange code per tile, by the rules (and the figures) of ipuxl's PopXL
// model (cpp/model/code.cpp, and the figures of target.hpp): every tile runs the same control
// program, so each leaf program costs its control bytes on every tile;
// each exchange costs a program plus a few bytes per contiguous region on
// each tile that sends or receives. Code is counted per occurrence in the
// program tree (a function once), not per execution.
#include "engine_impl.hpp"

#include <set>

#include "../../../cpp/model/target.hpp"

namespace poplar {
namespace ipuxl_detail {

namespace {
// Bytes per tile: the PopXL model's accounting figures, read from its
// Target (cpp/model/target.hpp) so that the two models share one source.
const ipuxl::model::Target kFigures{};
const std::uint64_t kCcProgram = kFigures.cc_program, kCcCall = kFigures.cc_call,
                    kCcControl = kFigures.cc_control, kCcSync = kFigures.cc_sync;
const std::uint64_t kXcProgram = kFigures.xc_program, kXcRegion = kFigures.xc_region,
                    kHxcProgram = kFigures.hxc_program, kCopyDescriptor = kFigures.copy_descriptor;

struct Walker {
  const GraphImpl &g;
  ProgramCode &c;
  unsigned tiles;
  std::set<unsigned> functions;
  // Code bytes (all tiles) of the code instance being walked: the main
  // programs' or a Function body's, without the Functions it calls.
  std::vector<std::uint64_t> own{0};

  void add(std::vector<std::uint64_t> &into, unsigned t, std::uint64_t bytes) {
    into[t] += bytes;
    own.back() += bytes;
  }
  void control(std::uint64_t bytes) {
    for (unsigned t = 0; t < tiles; ++t) add(c.control, t, bytes);
  }
  std::int32_t tileOf(const VarRegion &r, std::size_t e) const { return g.vars[r.var].tile[e]; }

  /// Exchange regions of an edge read (or written) by a vertex on `tile`:
  /// each run of elements held by one other tile is a region on both tiles.
  void edgeRegions(const Tensor &t, unsigned tile, std::vector<std::uint64_t> &regions) {
    for (const auto &r : t.ipuxlRep().regions) {
      std::int32_t run = -2;
      for (std::size_t e = r.begin; e < r.end; ++e) {
        std::int32_t owner = tileOf(r, e);
        if (owner == run) continue;
        run = owner;
        if (owner >= 0 && static_cast<unsigned>(owner) != tile) {
          ++regions[tile];
          ++regions[static_cast<unsigned>(owner)];
        }
      }
    }
  }
  void exchangeCode(const std::vector<std::uint64_t> &regions, std::vector<std::uint64_t> &into,
                    std::uint64_t program) {
    for (unsigned t = 0; t < tiles; ++t)
      if (regions[t]) add(into, t, program + kXcRegion * regions[t]);
  }
  void execute(unsigned cs) {
    std::vector<std::uint64_t> regions(tiles, 0);
    for (unsigned vid : g.computeSets[cs].vertices) {
      const auto &v = g.vertices[vid];
      const auto &type = *g.vertexTypes[v.type];
      unsigned tile = static_cast<unsigned>(v.tile);
      own.back() += vertexStateBytes(g, v);
      for (std::size_t f = 0; f < type.fields.size(); ++f) {
        const auto &fc = v.fields[f];
        if (!fc.set || type.fields[f].kind == FK_VALUE_SCALAR || type.fields[f].kind == FK_VALUE_VECTOR ||
            type.fields[f].kind == FK_OPAQUE)
          continue;
        if (fc.tensor.valid()) edgeRegions(fc.tensor, tile, regions);
        for (const auto &x : fc.list)
          if (x.valid()) edgeRegions(x, tile, regions);
      }
    }
    exchangeCode(regions, c.internalExchange, kXcProgram);
    control(kCcProgram + kCcSync);
  }
  void copy(const Tensor &src, const Tensor &dst) {
    std::vector<std::int32_t> from;
    for (const auto &r : src.ipuxlRep().regions)
      for (std::size_t e = r.begin; e < r.end; ++e) from.push_back(tileOf(r, e));
    std::vector<std::uint64_t> regions(tiles, 0);
    std::vector<bool> onTile(tiles, false);
    std::size_t i = 0;
    std::pair<std::int32_t, std::int32_t> run{-2, -2};
    for (const auto &r : dst.ipuxlRep().regions)
      for (std::size_t e = r.begin; e < r.end; ++e, ++i) {
        std::pair<std::int32_t, std::int32_t> p{from[i], tileOf(r, e)};
        if (p.first < 0 || p.second < 0) continue;
        if (p.first == p.second) {
          onTile[static_cast<unsigned>(p.first)] = true;
        } else if (p != run) {
          ++regions[static_cast<unsigned>(p.first)];
          ++regions[static_cast<unsigned>(p.second)];
        }
        run = p;
      }
    exchangeCode(regions, c.internalExchange, kXcProgram);
    for (unsigned t = 0; t < tiles; ++t)
      if (onTile[t]) add(c.copyDescriptors, t, kCopyDescriptor);
    control(kCcProgram + kCcSync);
  }
  /// A host transfer (stream, remote buffer, print): packet handling on the tensor's tiles.
  void host(const Tensor &t) {
    std::vector<bool> on(tiles, false);
    for (const auto &r : t.ipuxlRep().regions)
      for (std::size_t e = r.begin; e < r.end; ++e)
        if (tileOf(r, e) >= 0) on[static_cast<unsigned>(tileOf(r, e))] = true;
    for (unsigned k = 0; k < tiles; ++k)
      if (on[k]) {
        add(c.hostExchange, k, kHxcProgram + kXcRegion);
        add(c.copyDescriptors, k, kCopyDescriptor); // the landing pad's copy
      }
    control(2 * (kCcProgram + kCcSync));
  }
  void collective(const CollectiveInfo &ci) {
    std::uint64_t steps = ci.groups.empty() ? 0 : ci.groups[0].size() - 1;
    std::vector<bool> on(tiles, false);
    for (const auto &t : ci.srcs)
      for (const auto &r : t.ipuxlRep().regions)
        for (std::size_t e = r.begin; e < r.end; ++e)
          if (tileOf(r, e) >= 0) on[static_cast<unsigned>(tileOf(r, e))] = true;
    for (unsigned k = 0; k < tiles; ++k)
      if (on[k] && steps) add(c.globalExchange, k, kHxcProgram + kXcRegion * steps);
    control(kCcProgram + kCcSync);
  }
  void predicate() {
    control(kCcControl);
    for (unsigned t = 0; t < tiles; ++t) add(c.internalExchange, t, kXcProgram); // the predicate, to every tile
  }

  void walk(const program::Program &prog) {
    const ProgramImpl &p = *prog.ipuxlImpl();
    switch (p.kind) {
    case ProgKind::Sequence: for (const auto &ch : p.children) walk(ch); return;
    case ProgKind::Execute: execute(p.cs); return;
    case ProgKind::CopyTensor: copy(p.src, p.dst); return;
    case ProgKind::CopyFromStream:
    case ProgKind::CopyFromRemote: host(p.dst); return;
    case ProgKind::CopyToStream:
    case ProgKind::CopyToRemote:
    case ProgKind::PrintTensor: host(p.src); return;
    case ProgKind::Repeat:
    case ProgKind::RepeatWhile:
      control(kCcControl);
      for (const auto &ch : p.children) walk(ch);
      return;
    case ProgKind::If:
    case ProgKind::Switch:
      predicate();
      for (const auto &ch : p.children) walk(ch);
      for (const auto &cs : p.cases) walk(cs.second);
      if (p.hasDefault) walk(p.defaultCase);
      return;
    case ProgKind::Call:
      control(kCcCall);
      ++c.functionCalls[p.cs];
      if (functions.insert(p.cs).second) {
        own.push_back(0);
        walk(g.functions.at(p.cs));
        c.functionCode[p.cs] = own.back();
        own.pop_back();
      }
      return;
    case ProgKind::Sync: control(kCcSync); return;
    case ProgKind::LoadFunction: control(kCcProgram + kCcSync); return;
    case ProgKind::Abort: control(kCcControl); return;
    case ProgKind::CrossReplica: collective(*p.collective); return;
    case ProgKind::WriteUndef:
    case ProgKind::Error: return;
    }
  }
};
} // namespace

std::uint64_t vertexStateBytes(const GraphImpl &g, const VertexInst &v) {
  // A 4-byte pointer per edge (plus 4 for its size when a vector), and the
  // bytes of value fields.
  const auto &type = *g.vertexTypes[v.type];
  if (type.stateBytes) {
    std::vector<std::size_t> edges;
    for (const auto &fc : v.fields) edges.push_back(fc.list.size() + (fc.tensor.valid() ? 1 : 0));
    return type.stateBytes(edges);
  }
  std::uint64_t state = 0;
  for (std::size_t f = 0; f < type.fields.size(); ++f) {
    const auto &fc = v.fields[f];
    switch (type.fields[f].kind) {
    case FK_EDGE_SCALAR: state += 4; break;
    case FK_EDGE_VECTOR: state += 8; break;
    case FK_EDGE_VECTORLIST:
    case FK_VECTOR_OF_EDGE_VECTORS: state += 8 + 8 * fc.list.size(); break;
    case FK_VECTOR_OF_EDGE_SCALARS: state += 8 + 4 * fc.list.size(); break;
    case FK_VALUE_SCALAR:
    case FK_VALUE_VECTOR: state += fc.valueCount * typeCodeSize(type.fields[f].elemCode); break;
    default: break;
    }
  }
  return state;
}

ProgramCode programCode(const GraphImpl &g, const std::vector<program::Program> &programs) {
  unsigned tiles = g.target.getNumTiles();
  ProgramCode c;
  for (auto *v : {&c.control, &c.internalExchange, &c.hostExchange, &c.globalExchange, &c.copyDescriptors})
    v->assign(tiles, 0);
  Walker w{g, c, tiles, {}};
  for (const auto &p : programs) w.walk(p);
  c.mainCode = w.own.front();
  return c;
}

} // namespace ipuxl_detail
} // namespace poplar
