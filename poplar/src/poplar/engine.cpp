// ipuxl's Poplar: compilation (the graph's rules checked) and the Engine,
// which interprets the program tree on the host: compute sets run each
// vertex's compute() on its exchanged inputs; copies, streams, remote
// buffers and control flow act on the device memory of each variable.
#include "engine_impl.hpp"

#include <algorithm>
#include <cstring>
#include <iomanip>
#include <iostream>
#include <poplar/Engine.hpp>
#include <poplar/exceptions.hpp>
#include <set>
#include <sstream>

namespace poplar {
namespace ipuxl_detail {

namespace {

void collectReachable(const GraphImpl &g, const program::Program &p, std::set<unsigned> &cs,
                      std::set<unsigned> &fns) {
  const auto &n = *p.ipuxlImpl();
  if (n.kind == ProgKind::Execute) {
    if (n.cs >= g.computeSets.size()) throw poplar_error("Execute: unknown compute set");
    cs.insert(n.cs);
  }
  if (n.kind == ProgKind::Call) {
    if (n.cs >= g.functions.size()) throw poplar_error("Call: unknown function");
    if (fns.insert(n.cs).second) collectReachable(g, g.functions[n.cs], cs, fns);
  }
  for (const auto &c : n.children) collectReachable(g, c, cs, fns);
  for (const auto &c : n.cases) collectReachable(g, c.second, cs, fns);
  if (n.hasDefault) collectReachable(g, n.defaultCase, cs, fns);
}

std::string vertexName(const GraphImpl &g, unsigned vid) {
  const auto &v = g.vertices[vid];
  return "vertex " + std::to_string(vid) + " of type '" + g.vertexTypes[v.type]->name + "' in compute set '" +
         g.computeSets[v.cs].name + "'";
}

void checkComputeSet(const GraphImpl &g, unsigned csId) {
  const auto &cs = g.computeSets[csId];
  std::map<unsigned, std::vector<std::int64_t>> writer; // var -> writing vertex per element
  for (unsigned vid : cs.vertices) {
    const auto &v = g.vertices[vid];
    const auto &type = *g.vertexTypes[v.type];
    if (v.tile < 0) throw invalid_tile_mapping(vertexName(g, vid) + " has no tile mapping (use Graph::setTileMapping)");
    for (std::size_t f = 0; f < type.fields.size(); ++f) {
      const auto &fi = type.fields[f];
      const auto &fc = v.fields[f];
      if (fi.kind == FK_OPAQUE) continue;
      bool list = fi.kind == FK_EDGE_VECTORLIST || fi.kind == FK_VECTOR_OF_EDGE_VECTORS || fi.kind == FK_VECTOR_OF_EDGE_SCALARS;
      bool ok = fc.set;
      if (list && fc.size > 0 && !fc.set) ok = false;
      if (list && fc.size == 0) ok = true; // an empty vector field needs no edge
      if (list)
        for (bool b : fc.listSet) ok = ok && b;
      if (!ok)
        throw graph_connection_error("Field '" + fi.name + "' of " + vertexName(g, vid) +
                                     (fi.kind == FK_VALUE_SCALAR || fi.kind == FK_VALUE_VECTOR
                                          ? " has no value (use Graph::setInitialValue)"
                                          : " is not connected (use Graph::connect)"));
      if (fi.dir != FD_OUT && fi.dir != FD_INOUT) continue;
      std::vector<const Tensor *> ts;
      if (list)
        for (const auto &t : fc.list) ts.push_back(&t);
      else
        ts.push_back(&fc.tensor);
      for (const Tensor *t : ts)
        for (const auto &r : t->ipuxlRep().regions) {
          auto &w = writer[r.var];
          if (w.empty()) w.assign(g.vars[r.var].n, -1);
          for (std::size_t e = r.begin; e < r.end; ++e) {
            if (w[e] >= 0 && w[e] != static_cast<std::int64_t>(vid))
              throw graph_connection_error("Compute set '" + cs.name + "' writes element " + std::to_string(e) +
                                           " of variable '" + g.vars[r.var].name + "' twice: from " +
                                           vertexName(g, static_cast<unsigned>(w[e])) + " and from " + vertexName(g, vid));
            if (w[e] == static_cast<std::int64_t>(vid) && fi.dir == FD_OUT)
              throw graph_connection_error("Field '" + fi.name + "' of " + vertexName(g, vid) + " writes element " +
                                           std::to_string(e) + " of variable '" + g.vars[r.var].name + "' twice");
            w[e] = vid;
          }
        }
    }
  }
}

} // namespace

std::shared_ptr<CompiledGraph> compile(const Graph &graph, ArrayRef<program::Program> progs, const OptionFlags &opts) {
  const GraphImpl &g = graph.ipuxlImpl();
  for (const auto &v : g.vars) {
    std::size_t unmapped = 0, first = 0;
    for (std::size_t e = 0; e < v.n; ++e)
      if (v.tile[e] < 0) {
        if (!unmapped) first = e;
        ++unmapped;
      }
    if (unmapped)
      throw invalid_tile_mapping("Tensor '" + v.name + "' (" + v.type.toString() + ", " + std::to_string(v.n) +
                                 " elements) has no tile mapping for " + std::to_string(unmapped) +
                                 " elements (first: element " + std::to_string(first) +
                                 "); map it with Graph::setTileMapping or poputil::mapTensorLinearly");
  }
  std::set<unsigned> cs, fns;
  for (const auto &p : progs) collectReachable(g, p, cs, fns);
  for (unsigned c : cs) checkComputeSet(g, c);
  auto out = std::make_shared<CompiledGraph>();
  out->graph = graph.ipuxlShared();
  out->programs = progs.vec();
  out->options = opts;
  return out;
}

// ---- EngineImpl ----

EngineImpl::~EngineImpl() {
  for (auto &replica : bound)
    for (auto &cs : replica)
      for (auto &v : cs.vertices)
        if (v.obj) v.type->destroy(v.obj);
}

void EngineImpl::init() {
  g = compiled->graph.get();
  replicas = g->replicationFactor;
  // Each replica has its own copy of every variable, bound compute set,
  // stream connection and remote buffer.
  mems.resize(replicas);
  for (unsigned r = 0; r < replicas; ++r) {
    auto &m = mems[r];
    m.resize(g->vars.size());
    for (std::size_t i = 0; i < g->vars.size(); ++i) {
      const auto &v = g->vars[i];
      if (v.hasInit)
        m[i] = v.init;
      else
        m[i].assign(v.n * v.type.ipuxlSize(), 0);
      if (v.replicationIndex) std::memcpy(m[i].data(), &r, sizeof r);
    }
  }
  bound.resize(replicas);
  for (auto &b : bound) b.resize(g->computeSets.size());
  for (const auto &kv : g->streams) streams[kv.first].resize(replicas);
  for (const auto &kv : g->remoteBuffers)
    remote[kv.first].assign(replicas, std::vector<char>(kv.second->numElements * kv.second->repeats *
                                                        kv.second->type.ipuxlSize(), 0));
  // POPLAR_ENGINE_OPTIONS adds to (and overrides) the options the program gave.
  std::string env = readEnvironment("POPLAR_ENGINE_OPTIONS");
  if (!env.empty()) {
    std::istringstream is(env);
    OptionFlags extra;
    try {
      readJSON(is, extra);
    } catch (const parse_error &e) {
      throw invalid_option(std::string("POPLAR_ENGINE_OPTIONS: ") + e.what());
    }
    for (const auto &kv : extra) options.set(kv.first, kv.second);
  }
  auto flag = [&](const char *k) { return options.ipuxlHas(k) && options.at(k) == "true"; };
  autoReport = flag("autoReport.all") || flag("autoReport.outputExecutionProfile") || flag("autoReport.outputGraphProfile");
  reportDir = options.ipuxlHas("autoReport.directory") ? std::string(options.at("autoReport.directory")) : std::string(".");
}

void EngineImpl::gather(const Tensor &t, char *out) const {
  std::size_t sz = t.elementType().ipuxlSize();
  for (const auto &r : t.ipuxlRep().regions) {
    std::size_t bytes = (r.end - r.begin) * sz;
    std::memcpy(out, mem()[r.var].data() + r.begin * sz, bytes);
    out += bytes;
  }
}

void EngineImpl::scatter(const Tensor &t, const char *in) {
  std::size_t sz = t.elementType().ipuxlSize();
  for (const auto &r : t.ipuxlRep().regions) {
    if (r.constant) throw poplar_error("ipuxl: a program writes to a constant");
    std::size_t bytes = (r.end - r.begin) * sz;
    std::memcpy(mem()[r.var].data() + r.begin * sz, in, bytes);
    in += bytes;
  }
}

void EngineImpl::writeEveryReplica(const Tensor &t, const char *in) {
  // The host writes a tensor of every replica (readTensor reads replica 0's).
  for (unsigned r = 0; r < replicas; ++r) {
    cur = r;
    scatter(t, in);
  }
  cur = 0;
}

long long EngineImpl::readScalar(const Tensor &t) const {
  std::vector<char> buf(t.elementType().ipuxlSize());
  gather(t, buf.data());
  long long v = 0;
  convertElements(t.elementType().ipuxlCode(), buf.data(), T_LONGLONG, &v, 1);
  return v;
}

BoundComputeSet &EngineImpl::bind(unsigned csId) {
  auto &b = bound[cur][csId];
  if (b.built) return b;
  const auto &cs = g->computeSets[csId];
  b.vertices.resize(cs.vertices.size());
  for (std::size_t k = 0; k < cs.vertices.size(); ++k) {
    unsigned vid = cs.vertices[k];
    const auto &v = g->vertices[vid];
    auto &bv = b.vertices[k];
    bv.id = vid;
    bv.type = g->vertexTypes[v.type].get();
    // First size the scratch buffer for edges that are not one run of one variable.
    std::size_t scratch = 0;
    auto needs = [&](const Tensor &t) {
      return t.ipuxlRep().regions.size() == 1 ? 0 : t.numElements() * t.elementType().ipuxlSize();
    };
    for (std::size_t f = 0; f < bv.type->fields.size(); ++f) {
      const auto &fc = v.fields[f];
      int kind = bv.type->fields[f].kind;
      if (kind == FK_EDGE_SCALAR || kind == FK_EDGE_VECTOR) scratch += needs(fc.tensor);
      if (kind == FK_EDGE_VECTORLIST || kind == FK_VECTOR_OF_EDGE_VECTORS || kind == FK_VECTOR_OF_EDGE_SCALARS)
        for (const auto &t : fc.list) scratch += needs(t);
    }
    bv.scratch.assign(scratch + 8, 0);
    char *next = bv.scratch.data();
    bv.obj = bv.type->create();
    for (std::size_t f = 0; f < bv.type->fields.size(); ++f) {
      const auto &fi = bv.type->fields[f];
      const auto &fc = v.fields[f];
      if (fi.kind == FK_OPAQUE || !fc.set) {
        if (fi.kind != FK_OPAQUE && fc.size == 0) {
          FieldBinding empty;
          if (fi.kind == FK_EDGE_VECTORLIST || fi.kind == FK_VECTOR_OF_EDGE_VECTORS || fi.kind == FK_VECTOR_OF_EDGE_SCALARS)
            fi.bind(bv.obj, empty);
        }
        continue;
      }
      FieldBinding fb;
      auto edge = [&](const Tensor &t) {
        const auto &rep = t.ipuxlRep();
        std::size_t sz = rep.type.ipuxlSize();
        if (rep.regions.size() == 1) {
          const auto &r = rep.regions[0];
          fb.spans.push_back({mem()[r.var].data() + r.begin * sz, rep.n});
          return;
        }
        char *at = next;
        next += rep.n * sz;
        fb.spans.push_back({at, rep.n});
        for (const auto &r : rep.regions) {
          std::size_t bytes = (r.end - r.begin) * sz;
          char *devp = mem()[r.var].data() + r.begin * sz;
          if (fi.dir == FD_IN || fi.dir == FD_INOUT) bv.gathers.push_back({at, devp, bytes});
          if (fi.dir == FD_OUT || fi.dir == FD_INOUT) bv.scatters.push_back({devp, at, bytes});
          at += bytes;
        }
      };
      switch (fi.kind) {
      case FK_EDGE_SCALAR:
      case FK_EDGE_VECTOR:
        edge(fc.tensor);
        break;
      case FK_EDGE_VECTORLIST:
      case FK_VECTOR_OF_EDGE_VECTORS:
      case FK_VECTOR_OF_EDGE_SCALARS:
        for (const auto &t : fc.list) edge(t);
        break;
      case FK_VALUE_SCALAR:
      case FK_VALUE_VECTOR:
        fb.spans.push_back({const_cast<char *>(fc.value.data()), fc.valueCount});
        break;
      }
      fi.bind(bv.obj, fb);
    }
  }
  // Every replica runs the same compute set: its cost is computed once.
  b.cost = cur && bound[0][csId].built ? bound[0][csId].cost : costOf(csId, b);
  b.built = true;
  return b;
}

void EngineImpl::execute(unsigned csId) {
  auto &b = bind(csId);
  for (auto &v : b.vertices) {
    for (const auto &c : v.gathers) std::memcpy(c.dst, c.src, c.bytes);
    bool ok = true;
    if (v.type->multiVertex) {
      for (unsigned w = 0; w < 6; ++w) ok = v.type->compute(v.obj, w) && ok;
    } else {
      ok = v.type->compute(v.obj, 0);
    }
    if (!ok)
      throw application_runtime_error("Vertex " + std::to_string(v.id) + " of type '" + v.type->name +
                                      "' in compute set '" + g->computeSets[csId].name + "' returned false from compute()");
    for (const auto &c : v.scatters) std::memcpy(c.dst, c.src, c.bytes);
  }
  accountComputeSet(csId, b.cost);
}

namespace {
void formatElement(std::ostream &os, int code, const char *p, const PrintTensorFmt &fmt) {
  double v = 0;
  if (code == T_FLOAT || code == T_HALF) {
    convertElements(code, p, -1, &v, 1);
    if (fmt.floatFormat == PrintTensorFmt::FloatFormat::Scientific)
      os << std::scientific << std::setprecision(fmt.precision) << v << std::defaultfloat;
    else
      os << std::fixed << std::setprecision(fmt.precision) << v << std::defaultfloat;
    return;
  }
  if (code == T_BOOL) {
    os << (*p ? "true" : "false");
    return;
  }
  if (code == T_UNSIGNED_LONGLONG) {
    unsigned long long u;
    std::memcpy(&u, p, 8);
    os << u;
    return;
  }
  long long i = 0;
  convertElements(code, p, T_LONGLONG, &i, 1);
  os << i;
}

void formatTensor(std::ostream &os, const std::vector<std::size_t> &shape, std::size_t d, const char *data,
                  std::size_t sz, int code, const PrintTensorFmt &fmt, bool summarise, const std::string &indent) {
  if (shape.empty()) {
    formatElement(os, code, data, fmt);
    return;
  }
  std::size_t n = shape[d], inner = 1;
  for (std::size_t k = d + 1; k < shape.size(); ++k) inner *= shape[k];
  auto shown = [&](std::size_t i) { return !summarise || n <= 2 * fmt.edgeItems || i < fmt.edgeItems || i >= n - fmt.edgeItems; };
  os << fmt.openBracket;
  if (d + 1 == shape.size()) {
    bool dots = false;
    for (std::size_t i = 0; i < n; ++i) {
      if (!shown(i)) {
        if (!dots) os << fmt.separator << "...";
        dots = true;
        continue;
      }
      if (i) os << fmt.separator;
      formatElement(os, code, data + i * sz, fmt);
    }
  } else {
    bool dots = false;
    os << "\n";
    for (std::size_t i = 0; i < n; ++i) {
      if (!shown(i)) {
        if (!dots) os << indent << " ...\n";
        dots = true;
        continue;
      }
      os << indent << " ";
      formatTensor(os, shape, d + 1, data + i * inner * sz, sz, code, fmt, summarise, indent + " ");
      os << "\n";
    }
    os << indent;
  }
  os << fmt.closeBracket;
}
} // namespace

void EngineImpl::printTensor(const ProgramImpl &p) {
  const Tensor &t = p.src;
  std::vector<char> buf(t.numElements() * t.elementType().ipuxlSize() + 1);
  gather(t, buf.data());
  std::ostringstream os;
  os << (p.name.empty() ? std::string("<tensor>") : p.name) << ": ";
  bool summarise = t.numElements() > p.fmt.summariseThreshold && p.fmt.summariseThreshold > 0;
  formatTensor(os, t.shape(), 0, buf.data(), t.elementType().ipuxlSize(), t.elementType().ipuxlCode(), p.fmt, summarise, "");
  os << "\n";
  std::cout << os.str() << std::flush;
}

} // namespace ipuxl_detail

using namespace ipuxl_detail;

// ---- Executable ----
Executable::Executable(std::shared_ptr<CompiledGraph> c) : compiled_(std::move(c)) {}
Executable::Executable(Executable &&) noexcept = default;
Executable &Executable::operator=(Executable &&) noexcept = default;
Executable::~Executable() = default;

void Executable::serialize(std::ostream &) const {
  throw poplar_error("Executable::serialize is not implemented by ipuxl's Poplar (NotImplemented): its "
                     "executables hold host code and cannot be written to a file; compile the graph instead");
}
Executable Executable::deserialize(std::istream &) {
  throw poplar_error("Executable::deserialize is not implemented by ipuxl's Poplar (NotImplemented): "
                     "compile the graph instead");
}

Executable compileGraph(const Graph &graph, ArrayRef<program::Program> progs, const OptionFlags &opt, ProgressFunc,
                        const DebugContext &) {
  return Executable(compile(graph, progs, opt));
}
Executable compileGraph(Graph &&graph, ArrayRef<program::Program> progs, const OptionFlags &opt, ProgressFunc p,
                        const DebugContext &dc) {
  return compileGraph(static_cast<const Graph &>(graph), progs, opt, p, dc);
}

// ---- Engine ----
Engine::Engine(const Graph &graph, ArrayRef<program::Program> progs, const OptionFlags &opts, ProgressFunc,
               const DebugContext &)
    : impl_(new EngineImpl) {
  impl_->compiled = compile(graph, progs, opts);
  impl_->options = opts;
  impl_->init();
}
Engine::Engine(const Graph &graph, const program::Program &prog, const OptionFlags &opts, ProgressFunc p,
               const DebugContext &dc)
    : Engine(graph, ArrayRef<program::Program>(&prog, 1), opts, p, dc) {}
Engine::Engine(Executable &&exe, const OptionFlags &opts) : impl_(new EngineImpl) {
  if (!exe.ipuxlCompiled()) throw poplar_error("Engine: the executable is empty (moved from)");
  impl_->compiled = exe.ipuxlCompiled();
  impl_->options = impl_->compiled->options;
  for (const auto &kv : opts) impl_->options.set(kv.first, kv.second);
  impl_->init();
}
Engine::Engine(Engine &&) noexcept = default;
Engine &Engine::operator=(Engine &&) noexcept = default;
Engine::~Engine() {
  if (impl_ && impl_->autoReport) {
    try {
      impl_->writeReport();
    } catch (...) {
    }
  }
}

void Engine::load(const Device &device) {
  const Target &t = device.getTarget();
  const Target &gt = impl_->g->target;
  std::size_t need = std::size_t(gt.getNumTiles()) * impl_->replicas;
  if (t.getNumTiles() < need)
    throw poplar_error("Engine::load: the device has " + std::to_string(t.getNumTiles()) +
                       " tiles, the graph was made for " + std::to_string(need) +
                       (impl_->replicas > 1 ? " (" + std::to_string(impl_->replicas) + " replicas)" : std::string()));
  impl_->loaded = true;
}

void Engine::run(unsigned prog, const std::string &) {
  if (!impl_->loaded)
    throw poplar_error("Engine::run: the engine is not loaded onto a device (call Engine::load first)");
  if (prog >= impl_->compiled->programs.size())
    throw poplar_error("Engine::run: program " + std::to_string(prog) + " does not exist (the engine has " +
                       std::to_string(impl_->compiled->programs.size()) + ")");
  ++impl_->prof.programsRun;
  std::uint64_t before = impl_->prof.totalCycles;
  impl_->runAll(impl_->compiled->programs[prog]);
  impl_->prof.cyclesByProgram[prog] += impl_->prof.totalCycles - before;
  ++impl_->prof.runsByProgram[prog];
}

namespace {
std::vector<StreamConn> &streamsOf(EngineImpl &e, const std::string &handle) {
  auto it = e.streams.find(handle);
  if (it == e.streams.end()) throw stream_connection_error("Engine: the graph has no stream '" + handle + "'");
  return it->second;
}
StreamConn &streamOf(EngineImpl &e, const std::string &handle, unsigned replica) {
  auto &v = streamsOf(e, handle);
  if (replica >= v.size())
    throw stream_connection_error("Engine::connectStream('" + handle + "'): replica " + std::to_string(replica) +
                                  " does not exist (the graph has " + std::to_string(v.size()) + " replicas)");
  return v[replica];
}
StreamConn bufferConn(char *begin, char *end) {
  StreamConn c;
  c.kind = 1;
  c.begin = begin;
  c.end = end;
  return c;
}
} // namespace

// Without a replica index a connection serves every replica: each replica
// reads (writes) the same buffer with its own position, a function is
// called once per replica and transfer, and a StreamCallback (kept by
// replica 0) likewise.
void Engine::connectStream(StringRef handle, void *p) {
  const auto &s = *impl_->g->streams.at(handle);
  char *b = static_cast<char *>(p);
  for (auto &c : streamsOf(*impl_, handle)) c = bufferConn(b, b + s.numElements * s.type.ipuxlSize());
}
void Engine::connectStream(StringRef handle, void *begin, void *end) {
  if (static_cast<char *>(end) < static_cast<char *>(begin))
    throw stream_connection_error("Engine::connectStream: end is before begin for stream '" + handle + "'");
  for (auto &c : streamsOf(*impl_, handle)) c = bufferConn(static_cast<char *>(begin), static_cast<char *>(end));
}
void Engine::connectStream(StringRef handle, unsigned replica, void *p) {
  auto &c = streamOf(*impl_, handle, replica);
  const auto &s = *impl_->g->streams.at(handle);
  char *b = static_cast<char *>(p);
  c = bufferConn(b, b + s.numElements * s.type.ipuxlSize());
}
void Engine::connectStream(StringRef handle, unsigned replica, void *begin, void *end) {
  if (static_cast<char *>(end) < static_cast<char *>(begin))
    throw stream_connection_error("Engine::connectStream: end is before begin for stream '" + handle + "'");
  streamOf(*impl_, handle, replica) = bufferConn(static_cast<char *>(begin), static_cast<char *>(end));
}
void Engine::connectStreamToCallback(StringRef handle, std::function<void(void *)> f) {
  for (auto &c : streamsOf(*impl_, handle)) {
    c = StreamConn();
    c.kind = 2;
    c.fn = f;
  }
}
void Engine::connectStreamToCallback(StringRef handle, unsigned replica, std::function<void(void *)> f) {
  auto &c = streamOf(*impl_, handle, replica);
  c = StreamConn();
  c.kind = 2;
  c.fn = std::move(f);
}
void Engine::connectStreamToCallback(StringRef handle, std::unique_ptr<StreamCallback> f) {
  auto &v = streamsOf(*impl_, handle);
  for (std::size_t r = 0; r < v.size(); ++r) {
    v[r] = StreamConn();
    v[r].kind = r ? 4 : 3;
  }
  v[0].cb = std::move(f);
}
void Engine::connectStreamToCallback(StringRef handle, unsigned replica, std::unique_ptr<StreamCallback> f) {
  auto &c = streamOf(*impl_, handle, replica);
  c = StreamConn();
  c.kind = 3;
  c.cb = std::move(f);
}
void Engine::disconnectStream(StringRef handle) {
  for (auto &c : streamsOf(*impl_, handle)) c = StreamConn();
}

namespace {
const Tensor &hostTensor(const std::map<std::string, Tensor> &m, const std::string &handle, const char *what) {
  auto it = m.find(handle);
  if (it == m.end())
    throw poplar_error(std::string("Engine::") + what + ": no handle '" + handle + "' (create it with Graph::" +
                       (std::string(what) == "writeTensor" ? "createHostWrite" : "createHostRead") + ")");
  return it->second;
}
} // namespace

void Engine::writeTensor(StringRef handle, const void *buf) {
  const Tensor &t = hostTensor(impl_->g->hostWrites, handle, "writeTensor");
  impl_->writeEveryReplica(t, static_cast<const char *>(buf));
}
void Engine::writeTensor(StringRef handle, const void *begin, const void *end) {
  const Tensor &t = hostTensor(impl_->g->hostWrites, handle, "writeTensor");
  std::size_t want = t.numElements() * t.elementType().ipuxlSize();
  std::size_t got = static_cast<std::size_t>(static_cast<const char *>(end) - static_cast<const char *>(begin));
  if (got != want)
    throw poplar_error("Engine::writeTensor('" + handle + "'): the buffer holds " + std::to_string(got) +
                       " bytes, the tensor needs " + std::to_string(want));
  impl_->writeEveryReplica(t, static_cast<const char *>(begin));
}
void Engine::readTensor(StringRef handle, void *buf) {
  const Tensor &t = hostTensor(impl_->g->hostReads, handle, "readTensor");
  impl_->gather(t, static_cast<char *>(buf));
}
void Engine::readTensor(StringRef handle, void *begin, void *end) {
  const Tensor &t = hostTensor(impl_->g->hostReads, handle, "readTensor");
  std::size_t want = t.numElements() * t.elementType().ipuxlSize();
  std::size_t got = static_cast<std::size_t>(static_cast<char *>(end) - static_cast<char *>(begin));
  if (got != want)
    throw poplar_error("Engine::readTensor('" + handle + "'): the buffer holds " + std::to_string(got) +
                       " bytes, the tensor has " + std::to_string(want));
  impl_->gather(t, static_cast<char *>(begin));
}

void Engine::copyToRemoteBuffer(const void *src, const std::string &handle, std::uint64_t repeat, unsigned replica) {
  auto it = impl_->g->remoteBuffers.find(handle);
  if (it == impl_->g->remoteBuffers.end()) throw poplar_error("Engine::copyToRemoteBuffer: no remote buffer '" + handle + "'");
  if (repeat >= it->second->repeats) throw poplar_error("Engine::copyToRemoteBuffer: repeat index out of range");
  std::size_t bytes = it->second->numElements * it->second->type.ipuxlSize();
  if (replica >= impl_->replicas) throw poplar_error("Engine::copyToRemoteBuffer: replica index out of range");
  std::memcpy(impl_->remote[handle][replica].data() + repeat * bytes, src, bytes);
}
void Engine::copyFromRemoteBuffer(const std::string &handle, void *dst, std::uint64_t repeat, unsigned replica) {
  auto it = impl_->g->remoteBuffers.find(handle);
  if (it == impl_->g->remoteBuffers.end()) throw poplar_error("Engine::copyFromRemoteBuffer: no remote buffer '" + handle + "'");
  if (repeat >= it->second->repeats) throw poplar_error("Engine::copyFromRemoteBuffer: repeat index out of range");
  std::size_t bytes = it->second->numElements * it->second->type.ipuxlSize();
  if (replica >= impl_->replicas) throw poplar_error("Engine::copyFromRemoteBuffer: replica index out of range");
  std::memcpy(dst, impl_->remote[handle][replica].data() + repeat * bytes, bytes);
}

void Engine::printProfileSummary(std::ostream &out, const OptionFlags &opts) const { impl_->printSummary(out, opts); }
void Engine::resetExecutionProfile() { impl_->prof = ProfileCounters(); }
std::uint64_t Engine::ipuxlTotalCycles() const { return impl_->prof.totalCycles; }
const OptionFlags &Engine::getEngineOptions() const { return impl_->options; }
unsigned Engine::ipuxlNumPrograms() const { return static_cast<unsigned>(impl_->compiled->programs.size()); }

} // namespace poplar
