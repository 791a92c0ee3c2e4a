// ipuxl's Poplar: the IPU model of a Poplar program. Each compute set costs,
// per tile, its vertices' cycles (setPerfEstimate, or a default from the
// edge sizes) spread over the tile's six workers, plus the exchange of the
// edge data held on other tiles; copies cost the exchange between tiles,
// streams the host link; each step ends with a sync. Memory per tile comes
// from the variables' real tile mappings and the vertices placed there.
// printProfileSummary prints it; autoReport writes profile.json.
#include "engine_impl.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <iomanip>
#include <numeric>
#include <poplar/exceptions.hpp>
#include <set>
#include <sstream>

#include "../../../cpp/model/target.hpp"

namespace poplar {
namespace ipuxl_detail {

namespace {
// IPU figures the model uses (see docs/poplar.md): the host link's bytes
// per tile cycle are the Session model's (cpp/model/target.hpp), one
// source for both; a sync between steps costs 150 cycles (tutorial 6's
// IPUModel profile; the Session's model, which counts syncs per plan
// step, keeps its own figure); vertex code per type per tile.
const ipuxl::model::Target kTarget{};
const double kHostBytesPerCycle = std::round(kTarget.host_bytes_per_second / kTarget.clock_hz * 1e6) / 1e6;
constexpr std::uint64_t kSyncCycles = 150;
constexpr std::uint64_t kVertexCodeBytes = 256;

std::string withCommas(double v, int decimals) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(decimals) << v;
  std::string s = os.str();
  std::size_t dot = s.find('.');
  std::string ip = dot == std::string::npos ? s : s.substr(0, dot);
  std::string frac = dot == std::string::npos ? "" : s.substr(dot);
  std::string out;
  int neg = ip.size() && ip[0] == '-';
  for (std::size_t i = neg; i < ip.size(); ++i) {
    out += ip[i];
    std::size_t left = ip.size() - i - 1;
    if (left && left % 3 == 0) out += ',';
  }
  return (neg ? "-" : "") + out + frac;
}

std::uint64_t defaultCycles(const VertexInst &v, const VertexTypeInfo &t) {
  // No setPerfEstimate: 10 cycles of overhead plus one per edge element,
  // at two elements a cycle (ipuxl's choice, documented).
  std::size_t elems = 0;
  for (std::size_t f = 0; f < t.fields.size(); ++f) {
    const auto &fc = v.fields[f];
    if (!fc.set) continue;
    if (fc.tensor.valid()) elems += fc.tensor.numElements();
    for (const auto &x : fc.list) elems += x.valid() ? x.numElements() : 0;
  }
  return 10 + (elems + 1) / 2;
}
} // namespace

ComputeSetCost EngineImpl::costOf(unsigned csId, const BoundComputeSet &) const {
  const auto &cs = g->computeSets[csId];
  unsigned tiles = g->target.getNumTiles(), workers = g->target.getNumWorkerContexts();
  ComputeSetCost c;
  c.computeWithIdle.assign(tiles, 0);
  c.computeBusy.assign(tiles, 0);
  c.exchange.assign(tiles, 0);
  std::vector<std::vector<std::uint64_t>> load(tiles);
  std::vector<std::uint64_t> bytesIn(tiles, 0), sentBytes(tiles, 0);
  // A tile receives each remote element once, however many of its vertices
  // read it: visit the vertices tile by tile and stamp each element with the
  // last tile that received it.
  std::vector<unsigned> order(cs.vertices.begin(), cs.vertices.end());
  std::stable_sort(order.begin(), order.end(), [&](unsigned a, unsigned b) {
    return g->vertices[a].tile < g->vertices[b].tile;
  });
  std::map<unsigned, std::vector<std::int32_t>> stamp;
  for (unsigned vid : order) {
    const auto &v = g->vertices[vid];
    const auto &t = *g->vertexTypes[v.type];
    unsigned tile = static_cast<unsigned>(v.tile);
    std::uint64_t cyc = v.hasPerf ? v.cycles : defaultCycles(v, t);
    auto &l = load[tile];
    if (l.empty()) l.assign(workers, 0);
    // A MultiVertex runs on every worker context; so does a
    // SupervisorVertex, whose supervisor launches its work on all of them
    // (PopLibs' ConvPartial1x1Out, ReduceAdd): its estimate is per context.
    if (t.multiVertex || t.supervisor) {
      for (auto &w : l) w += cyc;
      c.computeBusy[tile] += cyc * workers;
    } else {
      *std::min_element(l.begin(), l.end()) += cyc;
      c.computeBusy[tile] += cyc;
    }
    ++c.vertices;
    for (std::size_t f = 0; f < t.fields.size(); ++f) {
      const auto &fi = t.fields[f];
      const auto &fc = v.fields[f];
      if (!fc.set || fi.kind == FK_VALUE_SCALAR || fi.kind == FK_VALUE_VECTOR || fi.kind == FK_OPAQUE) continue;
      bool in = fi.dir == FD_IN || fi.dir == FD_INOUT, out = fi.dir == FD_OUT || fi.dir == FD_INOUT;
      auto visit = [&](const Tensor &x) {
        std::size_t sz = x.elementType().ipuxlSize();
        for (const auto &r : x.ipuxlRep().regions) {
          const auto &map = g->vars[r.var].tile;
          std::vector<std::int32_t> *st = nullptr;
          if (in) {
            auto &s = stamp[r.var];
            if (s.empty()) s.assign(g->vars[r.var].n, -1);
            st = &s;
          }
          for (std::size_t e = r.begin; e < r.end; ++e) {
            if (static_cast<unsigned>(map[e]) == tile) continue;
            if (in && (*st)[e] != static_cast<std::int32_t>(tile)) {
              (*st)[e] = static_cast<std::int32_t>(tile);
              bytesIn[tile] += sz;
            }
            if (out) sentBytes[tile] += sz;
          }
        }
      };
      if (fc.tensor.valid()) visit(fc.tensor);
      for (const auto &x : fc.list) visit(x);
    }
  }
  unsigned bpc = g->target.getExchangeBytesPerCycle();
  for (unsigned tile = 0; tile < tiles; ++tile) {
    if (!load[tile].empty()) c.computeWithIdle[tile] = *std::max_element(load[tile].begin(), load[tile].end()) * workers;
    std::uint64_t bytes = sentBytes[tile] + bytesIn[tile];
    c.exchange[tile] = (bytes + bpc - 1) / bpc;
    c.maxTile = std::max(c.maxTile, c.computeWithIdle[tile] + c.exchange[tile]);
  }
  return c;
}

void EngineImpl::accountComputeSet(unsigned csId, const ComputeSetCost &c) {
  if (quiet) return; // another replica of a step already counted
  double tiles = g->target.getNumTiles();
  double incl = std::accumulate(c.computeWithIdle.begin(), c.computeWithIdle.end(), 0.0);
  double busy = std::accumulate(c.computeBusy.begin(), c.computeBusy.end(), 0.0);
  double ex = std::accumulate(c.exchange.begin(), c.exchange.end(), 0.0);
  prof.avgComputeWithIdle += incl / tiles;
  prof.avgComputeBusy += busy / tiles;
  prof.avgExchange += ex / tiles;
  prof.totalCycles += c.maxTile;
  const auto &name = g->computeSets[csId].name;
  prof.cyclesByComputeSet[name] += c.maxTile;
  prof.runsByComputeSet[name] += 1;
  ++prof.computeSetsRun;
  accountSync();
}

void EngineImpl::accountCopy(const Tensor &src, const Tensor &dst) {
  if (quiet) return; // another replica of a step already counted
  // Bytes each tile receives: destination elements whose source lives elsewhere.
  unsigned tiles = g->target.getNumTiles();
  std::vector<std::uint64_t> bytes(tiles, 0);
  std::size_t sz = src.elementType().ipuxlSize();
  std::vector<std::int32_t> srcTiles;
  srcTiles.reserve(src.numElements());
  for (const auto &r : src.ipuxlRep().regions)
    for (std::size_t e = r.begin; e < r.end; ++e) srcTiles.push_back(g->vars[r.var].tile[e]);
  std::size_t i = 0;
  for (const auto &r : dst.ipuxlRep().regions)
    for (std::size_t e = r.begin; e < r.end; ++e, ++i) {
      auto dt = g->vars[r.var].tile[e];
      if (dt != srcTiles[i] && dt >= 0) bytes[static_cast<unsigned>(dt)] += sz;
    }
  unsigned bpc = g->target.getExchangeBytesPerCycle();
  std::uint64_t mx = 0;
  double sum = 0;
  for (auto b : bytes) {
    std::uint64_t cyc = (b + bpc - 1) / bpc;
    mx = std::max(mx, cyc);
    sum += static_cast<double>(cyc);
  }
  prof.avgExchange += sum / tiles;
  prof.totalCycles += mx;
  ++prof.copiesRun;
  accountSync();
}

void EngineImpl::accountHost(std::size_t bytes) {
  if (quiet) return; // another replica of a step already counted
  double cyc = std::ceil(static_cast<double>(bytes) / kHostBytesPerCycle);
  // The data lands in a buffer and is exchanged to the tiles that hold it,
  // spread evenly (the model does not track stream buffer placement).
  double tiles = g->target.getNumTiles();
  double spread = std::ceil(static_cast<double>(bytes) / tiles / g->target.getExchangeBytesPerCycle());
  prof.hostExchange += cyc;
  prof.avgExchange += spread;
  prof.totalCycles += static_cast<std::uint64_t>(cyc + spread);
  ++prof.streamCopies;
  accountSync();
}

void EngineImpl::accountSync() {
  if (quiet) return; // another replica of a step already counted
  std::uint64_t s = kSyncCycles + g->target.ipuxlMinSyncDelay();
  prof.sync += static_cast<double>(s);
  prof.totalCycles += s;
}

struct MemoryUse {
  std::vector<std::uint64_t> vars, consts, vertexState, code;
  std::vector<std::uint64_t> notAlwaysLive; // the peak of the other variables (liveness.cpp)
  std::vector<std::uint64_t> stack;         // the workers' stacks and runtime words of every tile
  ProgramCode programs; // control and exchange code (codesize.cpp)
  std::uint64_t exchange(unsigned t) const {
    return programs.internalExchange[t] + programs.hostExchange[t] + programs.globalExchange[t];
  }
  std::uint64_t total(unsigned t) const {
    return vars[t] + consts[t] + vertexState[t] + code[t] + programs.control[t] + exchange(t) +
           programs.copyDescriptors[t] + notAlwaysLive[t] + stack[t];
  }
};

static MemoryUse memoryOf(const GraphImpl &g, const std::vector<program::Program> &programs) {
  unsigned tiles = g.target.getNumTiles();
  MemoryUse m;
  m.programs = programCode(g, programs);
  m.vars.assign(tiles, 0);
  m.consts.assign(tiles, 0);
  m.vertexState.assign(tiles, 0);
  m.code.assign(tiles, 0);
  // The stack and runtime words every tile holds, by the PopXL model's figures (target.hpp).
  const ipuxl::model::Target figures{};
  m.stack.assign(tiles, static_cast<std::uint64_t>(figures.stack_bytes + figures.runtime_bytes));
  Liveness live = liveness(g, programs);
  m.notAlwaysLive = live.notAlwaysLive;
  for (std::size_t i = 0; i < g.vars.size(); ++i) {
    const auto &v = g.vars[i];
    if (!live.alwaysLive[i]) continue;
    std::size_t sz = v.type.ipuxlSize();
    auto &dst = v.constant ? m.consts : m.vars;
    for (auto t : v.tile)
      if (t >= 0 && static_cast<unsigned>(t) < tiles) dst[static_cast<unsigned>(t)] += sz;
  }
  std::set<std::pair<unsigned, unsigned>> codeOnTile;
  for (const auto &v : g.vertices) {
    if (v.tile < 0) continue;
    unsigned tile = static_cast<unsigned>(v.tile);
    m.vertexState[tile] += vertexStateBytes(g, v);
    if (codeOnTile.insert({tile, v.type}).second) {
      const auto &type = *g.vertexTypes[v.type];
      m.code[tile] += type.codeBytes ? type.codeBytes : kVertexCodeBytes;
    }
  }
  return m;
}

void EngineImpl::printSummary(std::ostream &os, const OptionFlags &opts) const {
  const Target &t = g->target;
  unsigned tiles = t.getNumTiles();
  auto line = [&](const std::string &label, const std::string &value) {
    os << "  " << std::left << std::setw(54) << (label + ":") << value << "\n";
  };
  os << "Target:\n";
  line("Number of IPUs", std::to_string(t.getNumIPUs()));
  line("Tiles per IPU", withCommas(t.getTilesPerIPU(), 0));
  line("Total Tiles", withCommas(tiles, 0));
  line("Memory Per-Tile", withCommas(t.getBytesPerTile() / 1024.0, 1) + " kB");
  line("Total Memory", withCommas(t.getMemoryBytes() / 1048576.0, 1) + " MB");
  line("Clock Speed (approx)", withCommas(t.getTileClockFrequency() / 1e6, 1) + " MHz");
  line("Architecture", t.getTargetArchString() + " (IPU model of ipuxl)");
  if (replicas > 1) line("Replicas", std::to_string(replicas) + " (the figures below are per replica)");
  os << "\nGraph:\n";
  std::uint64_t edges = 0;
  for (const auto &v : g->vertices)
    for (const auto &f : v.fields) edges += (f.tensor.valid() ? 1 : 0) + f.list.size();
  line("Number of vertices", withCommas(static_cast<double>(g->vertices.size()), 0));
  line("Number of edges", withCommas(static_cast<double>(edges), 0));
  line("Number of variables", withCommas(static_cast<double>(g->vars.size()), 0));
  line("Number of compute sets", withCommas(static_cast<double>(g->computeSets.size()), 0));
  line("Number of vertex types", withCommas(static_cast<double>(g->vertexTypes.size()), 0));

  MemoryUse m = memoryOf(*g, compiled->programs);
  std::uint64_t vars = 0, consts = 0, state = 0, code = 0, control = 0, exchange = 0, descriptors = 0, maxUse = 0;
  std::uint64_t nal = 0, stack = 0;
  unsigned maxTile = 0, over = 0;
  for (unsigned i = 0; i < tiles; ++i) {
    vars += m.vars[i];
    consts += m.consts[i];
    state += m.vertexState[i];
    code += m.code[i];
    control += m.programs.control[i];
    exchange += m.exchange(i);
    descriptors += m.programs.copyDescriptors[i];
    nal += m.notAlwaysLive[i];
    stack += m.stack[i];
    if (m.total(i) > maxUse) {
      maxUse = m.total(i);
      maxTile = i;
    }
    if (m.total(i) > t.getBytesPerTile()) ++over;
  }
  std::uint64_t total = vars + consts + state + code + control + exchange + descriptors + nal + stack;
  os << "\nMemory Usage:\n";
  os << "  Total for all IPUs:\n";
  line("  Total", withCommas(static_cast<double>(total), 0) + " B (" +
                      withCommas(100.0 * total / static_cast<double>(t.getMemoryBytes()), 1) + "% of the IPU memory)");
  line("  Variables", withCommas(static_cast<double>(vars), 0) + " B");
  line("  Constants", withCommas(static_cast<double>(consts), 0) + " B");
  line("  Vertex state", withCommas(static_cast<double>(state), 0) + " B");
  line("  Vertex code", withCommas(static_cast<double>(code), 0) + " B");
  line("  Control code", withCommas(static_cast<double>(control), 0) + " B");
  line("  Exchange code", withCommas(static_cast<double>(exchange), 0) + " B");
  line("  Copy descriptors", withCommas(static_cast<double>(descriptors), 0) + " B");
  line("  Stack", withCommas(static_cast<double>(stack), 0) + " B");
  line("  Not always live (peak)", withCommas(static_cast<double>(nal), 0) + " B");
  line("Tile with most memory", "tile " + std::to_string(maxTile) + ", " + withCommas(static_cast<double>(maxUse), 0) +
                                    " B (" + withCommas(100.0 * maxUse / t.getBytesPerTile(), 1) + "%)");
  line("Average per tile", withCommas(static_cast<double>(total) / tiles, 1) + " B");
  line("Tiles over their memory", std::to_string(over));
  if (opts.ipuxlHas("showPerTile") && opts.at("showPerTile") == "true") {
    os << "  Per tile (bytes):\n";
    for (unsigned i = 0; i < tiles; ++i)
      if (m.total(i)) os << "    tile " << i << ": " << m.total(i) << "\n";
  }

  os << "\nExecution:\n\nPrograms executed:\n\n<anonymous>.\n\n";
  double total_c = static_cast<double>(prof.totalCycles);
  auto pct = [&](double v) { return " (" + withCommas(total_c > 0 ? 100.0 * v / total_c : 0.0, 1) + "% of total)"; };
  line("Total cycles", withCommas(total_c, 0) + " (approx " + withCommas(total_c / (t.getTileClockFrequency() / 1e6), 1) +
                           " microseconds)");
  line("Tile average compute cycles (including idle threads)", withCommas(prof.avgComputeWithIdle, 1) + pct(prof.avgComputeWithIdle));
  line("Tile average compute cycles (excluding idle threads)", withCommas(prof.avgComputeBusy, 1) + pct(prof.avgComputeBusy));
  line("Tile average IPU exchange cycles", withCommas(prof.avgExchange, 1) + pct(prof.avgExchange));
  line("Tile average global exchange cycles", withCommas(prof.globalExchange, 1) + pct(prof.globalExchange));
  line("Tile average host exchange cycles", withCommas(prof.hostExchange, 1) + pct(prof.hostExchange));
  line("Tile average sync cycles", withCommas(prof.sync, 1) + pct(prof.sync));
  if (opts.ipuxlHas("showExecutionSteps") && opts.at("showExecutionSteps") == "true") {
    os << "\n  Compute sets executed (cycles of the slowest tile, times run):\n";
    for (const auto &kv : prof.cyclesByComputeSet)
      os << "    " << kv.first << ": " << withCommas(static_cast<double>(kv.second), 0) << " cycles, "
         << prof.runsByComputeSet.at(kv.first) << " runs\n";
    os << "  Copies between tiles: " << prof.copiesRun << "; host stream transfers: " << prof.streamCopies << "\n";
  }
}

void EngineImpl::writeReport() const {
  MemoryUse m = memoryOf(*g, compiled->programs);
  std::string dir = reportDir.empty() ? "." : reportDir;
  std::ostringstream f;
  const Target &t = g->target;
  f << "{\n  \"format\": \"ipuxl-poplar-profile-1\",\n";
  f << "  \"target\": {\"arch\": \"" << t.getTargetArchString() << "\", \"numIPUs\": " << t.getNumIPUs()
    << ", \"tilesPerIPU\": " << t.getTilesPerIPU() << ", \"bytesPerTile\": " << t.getBytesPerTile() << "},\n";
  f << "  \"graph\": {\"vertices\": " << g->vertices.size() << ", \"variables\": " << g->vars.size()
    << ", \"computeSets\": " << g->computeSets.size() << "},\n";
  f << "  \"memory\": {\"perTile\": [";
  for (unsigned i = 0; i < t.getNumTiles(); ++i) f << (i ? "," : "") << m.total(i);
  f << "]},\n";
  f << "  \"execution\": {\"totalCycles\": " << prof.totalCycles << ", \"tileAverageComputeWithIdle\": "
    << prof.avgComputeWithIdle << ", \"tileAverageCompute\": " << prof.avgComputeBusy
    << ", \"tileAverageExchange\": " << prof.avgExchange << ", \"hostExchange\": " << prof.hostExchange
    << ", \"sync\": " << prof.sync << ", \"globalExchange\": " << prof.globalExchange
    << ", \"replicas\": " << replicas << ", \"computeSets\": {";
  bool first = true;
  for (const auto &kv : prof.cyclesByComputeSet) {
    f << (first ? "" : ", ") << "\"" << kv.first << "\": " << kv.second;
    first = false;
  }
  f << "}},\n  \"poplarVersion\": \"ipuxl's Poplar (IPU model)\"\n}\n";
  // profile.pop (this summary) where the SDK writes its report, for ipuxl's
  // libpva; profile.json in the format of ipuxl's profiles (ipuxl.profile.load,
  // `ipuxl profile --compare`).
  {
    std::ofstream out(dir + "/profile.pop");
    if (!out) throw poplar_error("autoReport: cannot write " + dir + "/profile.pop");
    out << f.str();
  }
  std::ofstream out(dir + "/profile.json");
  if (!out) throw poplar_error("autoReport: cannot write " + dir + "/profile.json");
  writeIpuxlProfile(out, m);
}

void EngineImpl::writeIpuxlProfile(std::ostream &f, const MemoryUse &m) const {
  const Target &t = g->target;
  unsigned tiles = t.getNumTiles();
  auto arr = [&](const std::vector<std::uint64_t> &v) {
    std::ostringstream os;
    os << "[";
    for (std::size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
    return os.str() + "]";
  };
  std::vector<std::uint64_t> zeros(tiles, 0);
  auto str = [](const std::string &s) {
    std::string o = "\"";
    for (char c : s) {
      if (c == '"' || c == '\\') o += '\\';
      o += c;
    }
    return o + "\"";
  };
  f << "{\"format\": \"ipuxl-profile-1\", \"name\": \"poplar\", \"runs\": " << prof.programsRun << ",\n";
  f << " \"target\": {\"version\": " << str(t.getTargetArchString()) << ", \"num_ipus\": " << t.getNumIPUs()
    << ", \"tiles_per_ipu\": " << t.getTilesPerIPU() << ", \"memory_per_tile\": " << t.getBytesPerTile()
    << ", \"clock_hz\": " << t.getTileClockFrequency() << ", \"num_io_tiles\": 0},\n";
  const char *cats[] = {"vertexCode", "vertexInstanceState", "controlCode", "internalExchangeCode", "hostExchangeCode",
                        "globalExchangeCode", "copyDescriptor", "stack", "variables", "constants", "notAlwaysLive"};
  f << " \"categories\": [";
  for (int i = 0; i < 11; ++i) f << (i ? ", " : "") << "\"" << cats[i] << "\"";
  f << "],\n \"per_tile\": {";
  for (int i = 0; i < 11; ++i) {
    std::string c = cats[i];
    const auto &v = c == "vertexCode" ? m.code : c == "vertexInstanceState" ? m.vertexState
                  : c == "variables" ? m.vars : c == "constants" ? m.consts
                  : c == "controlCode" ? m.programs.control : c == "internalExchangeCode" ? m.programs.internalExchange
                  : c == "hostExchangeCode" ? m.programs.hostExchange
                  : c == "globalExchangeCode" ? m.programs.globalExchange
                  : c == "copyDescriptor" ? m.programs.copyDescriptors
                  : c == "notAlwaysLive" ? m.notAlwaysLive : c == "stack" ? m.stack : zeros;
    f << (i ? ", " : "") << "\"" << c << "\": " << arr(v);
  }
  f << "},\n \"ops\": {";
  std::vector<std::string> names;
  for (const auto &kv : prof.cyclesByComputeSet) names.push_back(kv.first);
  auto col = [&](const char *key, const std::function<std::string(const std::string &)> &fn, bool first = false) {
    f << (first ? "" : ", ") << "\"" << key << "\": [";
    for (std::size_t i = 0; i < names.size(); ++i) f << (i ? "," : "") << fn(names[i]);
    f << "]";
  };
  col("name", [&](const std::string &n) { return str(n); }, true);
  col("graph", [&](const std::string &) { return std::string("\"main\""); });
  col("kind", [&](const std::string &) { return std::string("\"compute\""); });
  col("cost_class", [&](const std::string &) { return std::string("\"compute set\""); });
  col("cycles", [&](const std::string &n) {
    return std::to_string(prof.cyclesByComputeSet.at(n) / std::max<std::uint64_t>(1, prof.runsByComputeSet.at(n)));
  });
  col("executions", [&](const std::string &n) { return std::to_string(prof.runsByComputeSet.at(n)); });
  col("ipu", [&](const std::string &) { return std::string("0"); });
  // Graphs: the programs' own code, then each Function (named by its
  // index, Graph::addFunction's order) with the code of its body.
  f << "},\n \"graphs\": [{\"name\": \"main\", \"main\": true, \"code_instances\": 1, \"code_bytes\": "
    << m.programs.mainCode << ", \"cycles\": " << prof.totalCycles
    << ", \"executions\": 1, \"call_sites\": 0, \"if_sites\": 0}";
  for (const auto &kv : m.programs.functionCode)
    f << ", {\"name\": \"function" << kv.first << "\", \"main\": false, \"function\": true, \"index\": " << kv.first
      << ", \"code_instances\": 1, \"code_bytes\": " << kv.second << ", \"call_sites\": "
      << m.programs.functionCalls.at(kv.first) << ", \"if_sites\": 0, \"cycles\": 0, \"executions\": 0}";
  // Programs: the cycles of the runs of each, and the code each holds
  // walked alone (the Functions it calls included), summed over tiles.
  f << "],\n \"programs\": [";
  const auto &progs = compiled->programs;
  auto sum = [](const std::vector<std::uint64_t> &v) { return std::accumulate(v.begin(), v.end(), std::uint64_t(0)); };
  for (std::size_t i = 0; i < progs.size(); ++i) {
    ProgramCode pc = programCode(*g, {progs[i]});
    auto c = prof.cyclesByProgram.find(static_cast<unsigned>(i));
    std::uint64_t runs = c == prof.cyclesByProgram.end() ? 0 : prof.runsByProgram.at(c->first);
    f << (i ? ", " : "") << "{\"index\": " << i << ", \"runs\": " << runs
      << ", \"cycles\": " << (c == prof.cyclesByProgram.end() ? 0 : c->second) << ", \"code\": {\"controlCode\": "
      << sum(pc.control) << ", \"internalExchangeCode\": " << sum(pc.internalExchange)
      << ", \"hostExchangeCode\": " << sum(pc.hostExchange) << ", \"globalExchangeCode\": "
      << sum(pc.globalExchange) << ", \"copyDescriptor\": " << sum(pc.copyDescriptors) << "}}";
  }
  f << "],\n";
  f << " \"steps\": {\"name\": [], \"cycles\": [], \"live_bytes\": []},\n";
  // Tensors: each variable with the tiles it spans.
  std::vector<std::string> tn;
  std::vector<std::uint64_t> first, span, bytes, per;
  for (const auto &v : g->vars) {
    std::int64_t lo = -1, hi = -1;
    for (auto tl : v.tile)
      if (tl >= 0) {
        lo = lo < 0 ? tl : std::min<std::int64_t>(lo, tl);
        hi = std::max<std::int64_t>(hi, tl);
      }
    if (lo < 0) continue;
    std::uint64_t b = v.n * v.type.ipuxlSize(), n = static_cast<std::uint64_t>(hi - lo + 1);
    tn.push_back(str(v.name));
    first.push_back(static_cast<std::uint64_t>(lo));
    span.push_back(n);
    bytes.push_back(b);
    per.push_back((b + n - 1) / n);
  }
  f << " \"tensors\": {\"name\": [";
  for (std::size_t i = 0; i < tn.size(); ++i) f << (i ? "," : "") << tn[i];
  f << "], \"ipu\": " << arr(std::vector<std::uint64_t>(tn.size(), 0)) << ", \"first_tile\": " << arr(first)
    << ", \"tiles\": " << arr(span) << ", \"bytes_per_tile\": " << arr(per) << ", \"bytes\": " << arr(bytes)
    << ", \"always_live\": [";
  for (std::size_t i = 0; i < tn.size(); ++i) f << (i ? "," : "") << "true";
  f << "]},\n \"vertex_types\": {},\n \"total_cycles\": " << prof.totalCycles << "\n}\n";
}

} // namespace ipuxl_detail
} // namespace poplar
