// ipuxl's Poplar: Graph (variables, constants, tile mappings, compute sets,
// vertices and their connections, host I/O and functions).
#include "impl.hpp"

#include <algorithm>
#include <cstring>
#include <poplar/exceptions.hpp>

namespace poplar {
namespace ipuxl_detail {

unsigned GraphImpl::addVertexTypes(const std::vector<VertexTypeInfo> &types) {
  unsigned added = 0;
  for (const auto &t : types) {
    if (typeByName.count(t.name)) continue; // adding a codelet twice is harmless (as in the SDK)
    typeByName[t.name] = static_cast<unsigned>(vertexTypes.size());
    vertexTypes.push_back(std::make_shared<VertexTypeInfo>(t));
    ++added;
  }
  return added;
}

std::string describeTensor(const Tensor &t, const GraphImpl &g) {
  std::string names;
  unsigned last = ~0u;
  for (const auto &r : t.ipuxlRep().regions) {
    if (r.var == last) continue;
    last = r.var;
    if (!names.empty()) names += ",";
    names += "'" + g.vars.at(r.var).name + "'";
    if (names.size() > 60) { names += ",..."; break; }
  }
  return "tensor " + t.shapeToString() + " " + t.elementType().toString() + " (of " + (names.empty() ? "no variable" : names) + ")";
}

namespace {
std::size_t prod(ArrayRef<std::size_t> s) {
  std::size_t p = 1;
  for (auto d : s) p *= d;
  return p;
}
} // namespace

} // namespace ipuxl_detail

using namespace ipuxl_detail;

Graph::Graph(const Target &target, unsigned r) : impl_(std::make_shared<GraphImpl>()) {
  // A replicated graph describes one replica: the target's IPUs are shared
  // out between the replicas.
  if (r == 0) throw poplar_error("Graph: the replication factor must be at least 1");
  if (target.getNumIPUs() % r != 0)
    throw poplar_error("Graph: a replication factor of " + std::to_string(r) + " does not divide the target's " +
                       std::to_string(target.getNumIPUs()) + " IPUs");
  Target perReplica = target.createVirtualTarget(target.getNumIPUs() / r, target.getTilesPerIPU());
  target_.reset(new Target(perReplica));
  impl_->target = perReplica;
  impl_->replicationFactor = r;
}
Graph::Graph(const Target &target, replication_factor r) : Graph(target, r.value) {}
Graph::Graph(const Device &device, replication_factor r) : Graph(device.getTarget(), r.value) {}
Graph::Graph(const Device &device, unsigned r) : Graph(device.getTarget(), r) {}
unsigned Graph::getReplicationFactor() const { return impl_->replicationFactor; }
Graph::Graph(std::shared_ptr<GraphImpl> impl, unsigned tileBase, Target target)
    : impl_(std::move(impl)), tileBase_(tileBase), target_(new Target(target)) {}
Graph::Graph(Graph &&) noexcept = default;
Graph &Graph::operator=(Graph &&) noexcept = default;
Graph::~Graph() = default;

const Target &Graph::getTarget() const { return *target_; }

Graph Graph::createVirtualGraph(unsigned numTilesPerIPU) { return createVirtualGraph(0, numTilesPerIPU); }
Graph Graph::createVirtualGraph(unsigned lower, unsigned upper) {
  if (lower >= upper || upper > target_->getNumTiles())
    throw poplar_error("Graph::createVirtualGraph: tile range [" + std::to_string(lower) + ", " +
                       std::to_string(upper) + ") is not within the graph's " +
                       std::to_string(target_->getNumTiles()) + " tiles");
  return Graph(impl_, tileBase_ + lower, target_->createVirtualTarget(1, upper - lower));
}
Graph Graph::getTopLevelGraph() { return Graph(impl_, 0, impl_->target); }

Tensor Graph::addVariable(const Type &type, ArrayRef<std::size_t> shape, const DebugContext &dc) {
  if (type.ipuxlSize() == 0) throw tensor_creation_error("Graph::addVariable: invalid element type");
  VarInfo v;
  v.type = type;
  v.n = prod(shape);
  v.name = dc.getPathName().empty() ? "var" + std::to_string(impl_->vars.size()) : dc.getPathName();
  v.tile.assign(v.n, -1);
  unsigned id = static_cast<unsigned>(impl_->vars.size());
  impl_->vars.push_back(std::move(v));
  return makeTensor(type, shape.vec(), {{id, 0, prod(shape), false}});
}

Tensor Graph::addVariable(const Type &type, ArrayRef<std::size_t> shape, VariableMappingMethod m,
                          const DebugContext &dc) {
  Tensor t = addVariable(type, shape, dc);
  if (m == VariableMappingMethod::LINEAR) {
    // Spread the elements evenly over the tiles, in order.
    std::size_t n = t.numElements(), tiles = target_->getNumTiles();
    auto &var = impl_->vars.back();
    for (std::size_t i = 0; i < n; ++i) var.tile[i] = static_cast<std::int32_t>(tileBase_ + i * tiles / n);
  }
  return t;
}

Tensor Graph::clone(const Tensor &t, const DebugContext &dc, TensorCloneMethod m) {
  return clone(t.elementType(), t, dc, m);
}
Tensor Graph::clone(const Type &type, const Tensor &t, const DebugContext &dc, TensorCloneMethod) {
  Tensor c = addVariable(type, t.shape(), dc);
  auto &var = impl_->vars.back();
  std::size_t i = 0;
  for (const auto &r : t.ipuxlRep().regions) {
    const auto &src = impl_->vars.at(r.var).tile;
    for (std::size_t e = r.begin; e < r.end; ++e) var.tile[i++] = src[e];
  }
  return c;
}

Tensor Graph::ipuxlAddConstant(const Type &type, ArrayRef<std::size_t> shape, int hostCode, const void *values,
                               std::size_t n, bool splat, const DebugContext &dc) {
  std::size_t total = prod(shape);
  if (!splat && n != total)
    throw tensor_creation_error("Graph::addConstant: " + std::to_string(n) + " values given for a shape of " +
                                std::to_string(total) + " elements");
  Tensor t = addVariable(type, shape, dc.getPathName().empty() ? DebugContext("constant") : dc);
  auto &var = impl_->vars.back();
  var.constant = true;
  var.hasInit = true;
  var.init.resize(total * type.ipuxlSize());
  if (splat) {
    std::vector<char> one(type.ipuxlSize());
    convertElements(hostCode, values, type.ipuxlCode(), one.data(), 1);
    for (std::size_t i = 0; i < total; ++i) std::memcpy(&var.init[i * one.size()], one.data(), one.size());
  } else {
    convertElements(hostCode, values, type.ipuxlCode(), var.init.data(), total);
  }
  auto rs = t.ipuxlRegions();
  for (auto &r : rs) r.constant = true;
  return makeTensor(type, t.shape(), rs);
}

Tensor Graph::addReplicationIndexConstant(const DebugContext &dc) {
  unsigned zero = 0;
  Tensor t = ipuxlAddConstant(UNSIGNED_INT, {}, T_UNSIGNED_INT, &zero, 1, true,
                              dc.getPathName().empty() ? DebugContext("replicationIndex") : dc);
  impl_->vars.back().replicationIndex = true;
  return t;
}

void Graph::ipuxlSetInitialValue(const Tensor &t, int hostCode, const void *values, std::size_t n, bool splat) {
  if (!splat && n != t.numElements())
    throw tensor_creation_error("Graph::setInitialValue: " + std::to_string(n) + " values given for " +
                                describeTensor(t, *impl_));
  std::size_t sz = t.elementType().ipuxlSize(), i = 0;
  std::vector<char> buf(sz);
  for (const auto &r : t.ipuxlRep().regions) {
    auto &var = impl_->vars.at(r.var);
    if (!var.hasInit) {
      var.init.assign(var.n * sz, 0);
      var.hasInit = true;
    }
    for (std::size_t e = r.begin; e < r.end; ++e, ++i) {
      const char *src = static_cast<const char *>(values) + (splat ? 0 : i) * (hostCode == -1 ? 8 : typeCodeSize(hostCode));
      convertElements(hostCode, src, var.type.ipuxlCode(), &var.init[e * sz], 1);
    }
  }
}

void Graph::setTileMapping(const Tensor &t, unsigned tile) {
  if (tile >= target_->getNumTiles())
    throw invalid_tile_mapping("Graph::setTileMapping: tile " + std::to_string(tile) + " is out of range (the graph has " +
                               std::to_string(target_->getNumTiles()) + " tiles) for " + describeTensor(t, *impl_));
  for (const auto &r : t.ipuxlRep().regions) {
    auto &m = impl_->vars.at(r.var).tile;
    std::fill(m.begin() + r.begin, m.begin() + r.end, static_cast<std::int32_t>(tileBase_ + tile));
  }
}

void Graph::setTileMapping(const Tensor &t, const TileToTensorMapping &mapping) {
  if (mapping.size() > target_->getNumTiles())
    throw invalid_tile_mapping("Graph::setTileMapping: mapping names " + std::to_string(mapping.size()) +
                               " tiles, the graph has " + std::to_string(target_->getNumTiles()));
  Tensor flat = t.flatten();
  for (std::size_t tile = 0; tile < mapping.size(); ++tile)
    for (const auto &iv : mapping[tile]) {
      if (iv.end() > flat.numElements())
        throw invalid_tile_mapping("Graph::setTileMapping: interval [" + std::to_string(iv.begin()) + ", " +
                                   std::to_string(iv.end()) + ") is outside " + describeTensor(t, *impl_));
      if (iv.size()) setTileMapping(flat.slice(iv.begin(), iv.end()), static_cast<unsigned>(tile));
    }
}

void Graph::setTileMapping(VertexRef v, unsigned tile) {
  if (tile >= target_->getNumTiles())
    throw invalid_tile_mapping("Graph::setTileMapping: vertex tile " + std::to_string(tile) + " is out of range (" +
                               std::to_string(target_->getNumTiles()) + " tiles)");
  impl_->vertices.at(v.getId()).tile = tileBase_ + tile;
}

unsigned Graph::getTileMapping(VertexRef v) const {
  auto t = impl_->vertices.at(v.getId()).tile;
  if (t < 0) throw invalid_tile_mapping("Graph::getTileMapping: the vertex has no tile mapping");
  return static_cast<unsigned>(t - tileBase_);
}

Graph::TileToTensorMapping Graph::getTileMapping(const Tensor &t, bool *complete) const {
  TileToTensorMapping out(target_->getNumTiles());
  std::size_t i = 0;
  bool all = true;
  for (const auto &r : t.ipuxlRep().regions) {
    const auto &m = impl_->vars.at(r.var).tile;
    for (std::size_t e = r.begin; e < r.end; ++e, ++i) {
      std::int64_t tile = static_cast<std::int64_t>(m[e]) - tileBase_;
      if (m[e] < 0 || tile < 0 || tile >= static_cast<std::int64_t>(out.size())) {
        all = false;
        continue;
      }
      auto &iv = out[static_cast<std::size_t>(tile)];
      if (!iv.empty() && iv.back().end() == i)
        iv.back() = Interval(iv.back().begin(), i + 1);
      else
        iv.emplace_back(i, i + 1);
    }
  }
  if (complete) *complete = all;
  return out;
}

Graph::TileToTensorMapping Graph::getTileMapping(const Tensor &t, bool requireComplete) const {
  bool complete = true;
  auto m = getTileMapping(t, &complete);
  if (requireComplete && !complete)
    throw invalid_tile_mapping("Graph::getTileMapping: " + describeTensor(t, *impl_) +
                               " is not completely mapped to tiles");
  return m;
}

ComputeSet Graph::addComputeSet(const DebugContext &dc) {
  ComputeSetInfo cs;
  cs.name = dc.getPathName().empty() ? "cs" + std::to_string(impl_->computeSets.size()) : dc.getPathName();
  impl_->computeSets.push_back(cs);
  return ComputeSet(static_cast<unsigned>(impl_->computeSets.size() - 1));
}

VertexRef Graph::addVertex(ComputeSet cs, StringRef vertexType) {
  if (cs.getId() >= impl_->computeSets.size()) throw poplar_error("Graph::addVertex: invalid compute set");
  auto it = impl_->typeByName.find(vertexType);
  if (it == impl_->typeByName.end())
    throw unknown_vertex_type("Graph::addVertex: unknown vertex type '" + vertexType +
                              "' (add its codelets with Graph::addCodelets, or the library's addCodelets)");
  VertexInst v;
  v.type = it->second;
  v.cs = cs.getId();
  v.fields.resize(impl_->vertexTypes[v.type]->fields.size());
  unsigned id = static_cast<unsigned>(impl_->vertices.size());
  impl_->vertices.push_back(std::move(v));
  impl_->computeSets[cs.getId()].vertices.push_back(id);
  return VertexRef(this, id);
}

VertexRef Graph::addVertex(ComputeSet cs, StringRef vertexType, ArrayRef<ConnectionDesc> connections) {
  VertexRef v = addVertex(cs, vertexType);
  for (const auto &c : connections) connect(v[c.field], c.tensor);
  return v;
}

namespace {
struct FieldLookup {
  VertexInst *vertex;
  const VertexTypeInfo *type;
  const FieldInfo *info;
  FieldConn *conn;
};
FieldLookup lookup(GraphImpl &g, const FieldRef &f) {
  unsigned vid = f.ipuxlVertex().getId();
  if (vid >= g.vertices.size()) throw poplar_error("invalid vertex reference");
  auto &v = g.vertices[vid];
  const auto &type = *g.vertexTypes[v.type];
  for (std::size_t i = 0; i < type.fields.size(); ++i)
    if (type.fields[i].name == f.ipuxlName()) {
      if (type.fields[i].kind == FK_OPAQUE)
        throw unknown_field("vertex type '" + type.name + "': member '" + f.ipuxlName() +
                            "' is not a field the graph can connect (its type is not an Input/Output/InOut, "
                            "Vector or scalar)");
      return {&v, &type, &type.fields[i], &v.fields[i]};
    }
  throw unknown_field("vertex type '" + type.name + "' has no field '" + f.ipuxlName() + "'");
}
bool isList(int kind) {
  return kind == FK_EDGE_VECTORLIST || kind == FK_VECTOR_OF_EDGE_VECTORS || kind == FK_VECTOR_OF_EDGE_SCALARS;
}
void checkEdge(const GraphImpl &g, const FieldLookup &l, const Tensor &t, bool scalar) {
  // elemCode 0: a PopLibs built-in field that takes any element type.
  if (l.info->elemCode != 0 && t.elementType().ipuxlCode() != l.info->elemCode)
    throw graph_connection_error("connect: field '" + l.info->name + "' of vertex type '" + l.type->name + "' has element type " +
                                 typeCodeName(l.info->elemCode) + ", " + describeTensor(t, g) + " has " +
                                 t.elementType().toString());
  if (scalar && t.numElements() != 1)
    throw graph_connection_error("connect: field '" + l.info->name + "' of vertex type '" + l.type->name +
                                 "' is a scalar edge; " + describeTensor(t, g) + " has " +
                                 std::to_string(t.numElements()) + " elements");
  if (l.info->dir != FD_IN && t.containsConstant())
    throw graph_connection_error("connect: field '" + l.info->name + "' of vertex type '" + l.type->name +
                                 "' writes its edge, but " + describeTensor(t, g) + " is a constant");
}
} // namespace

void Graph::connect(FieldRef field, const Tensor &t) {
  auto l = lookup(*impl_, field);
  int k = l.info->kind;
  if (field.ipuxlIsIndexed()) {
    if (!isList(k))
      throw graph_connection_error("connect: field '" + l.info->name + "' of '" + l.type->name + "' is not a vector field; it cannot be indexed");
    checkEdge(*impl_, l, t, k == FK_VECTOR_OF_EDGE_SCALARS);
    auto i = field.ipuxlIndex();
    if (l.conn->size >= 0 && static_cast<long>(i) >= l.conn->size)
      throw index_error("connect: index " + std::to_string(i) + " beyond the size " + std::to_string(l.conn->size) +
                        " set for field '" + l.info->name + "'");
    if (l.conn->list.size() <= i) {
      l.conn->list.resize(i + 1);
      l.conn->listSet.resize(i + 1, false);
    }
    l.conn->list[i] = t;
    l.conn->listSet[i] = true;
    l.conn->set = true;
    return;
  }
  if (k == FK_VALUE_SCALAR || k == FK_VALUE_VECTOR)
    throw graph_connection_error("connect: field '" + l.info->name + "' of '" + l.type->name +
                                 "' is not an edge; give it a value with Graph::setInitialValue");
  if (isList(k)) {
    // A whole tensor on a vector-of-edges field: one entry per outer row
    // (VectorList) or per element (Vector<Input<T>>).
    std::vector<Tensor> parts;
    if (k == FK_VECTOR_OF_EDGE_SCALARS) {
      Tensor f = t.flatten();
      for (std::size_t i = 0; i < f.numElements(); ++i) parts.push_back(f.slice(i, i + 1));
    } else if (t.rank() >= 2) {
      for (std::size_t i = 0; i < t.dim(0); ++i) parts.push_back(t[i].flatten());
    } else {
      parts.push_back(t);
    }
    connect(field, ArrayRef<Tensor>(parts));
    return;
  }
  checkEdge(*impl_, l, t, k == FK_EDGE_SCALAR);
  l.conn->tensor = t;
  l.conn->set = true;
}

void Graph::connect(FieldRef field, ArrayRef<Tensor> ts) {
  auto l = lookup(*impl_, field);
  if (!isList(l.info->kind)) {
    if (ts.size() == 1) return connect(field, ts[0]);
    throw graph_connection_error("connect: field '" + l.info->name + "' of '" + l.type->name +
                                 "' takes one tensor, " + std::to_string(ts.size()) + " given");
  }
  for (const auto &t : ts) checkEdge(*impl_, l, t, l.info->kind == FK_VECTOR_OF_EDGE_SCALARS);
  l.conn->list = ts.vec();
  l.conn->listSet.assign(ts.size(), true);
  l.conn->size = static_cast<long>(ts.size());
  l.conn->set = true;
}

void Graph::setFieldSize(FieldRef field, std::size_t size) {
  auto l = lookup(*impl_, field);
  if (!isList(l.info->kind) && l.info->kind != FK_VALUE_VECTOR)
    throw graph_connection_error("setFieldSize: field '" + l.info->name + "' of '" + l.type->name + "' is not a vector field");
  l.conn->size = static_cast<long>(size);
  if (isList(l.info->kind)) {
    l.conn->list.resize(size);
    l.conn->listSet.resize(size, false);
  }
}

std::size_t Graph::getFieldSize(FieldRef field) const {
  auto l = lookup(*impl_, field);
  if (l.conn->size < 0) throw no_size_specified("getFieldSize: no size set for field '" + l.info->name + "'");
  return static_cast<std::size_t>(l.conn->size);
}

void Graph::ipuxlSetFieldValue(const FieldRef &f, int hostCode, const void *values, std::size_t n) {
  auto l = lookup(*impl_, f);
  int k = l.info->kind;
  if (k != FK_VALUE_SCALAR && k != FK_VALUE_VECTOR)
    throw graph_connection_error("setInitialValue: field '" + l.info->name + "' of '" + l.type->name +
                                 "' is an edge; connect it to a tensor instead");
  if (k == FK_VALUE_SCALAR && n != 1)
    throw graph_connection_error("setInitialValue: field '" + l.info->name + "' is a scalar; " + std::to_string(n) + " values given");
  std::size_t sz = typeCodeSize(l.info->elemCode);
  l.conn->value.assign(n * sz + 1, 0); // +1: a non-null pointer for an empty vector
  convertElements(hostCode, values, l.info->elemCode, l.conn->value.data(), n);
  l.conn->valueCount = n;
  l.conn->set = true;
}

void Graph::setPerfEstimate(const VertexRef &v, std::uint64_t cycles, std::uint64_t flops) {
  auto &vi = impl_->vertices.at(v.getId());
  vi.hasPerf = true;
  vi.cycles = cycles;
  vi.flops = flops;
}

bool Graph::hasCodelet(StringRef vertexType) const { return impl_->typeByName.count(vertexType) != 0; }

void Graph::createHostWrite(StringRef handle, const Tensor &t, bool) {
  if (impl_->hostWrites.count(handle))
    throw poplar_error("Graph::createHostWrite: handle '" + handle + "' already exists");
  impl_->hostWrites[handle] = t;
}
void Graph::createHostRead(StringRef handle, const Tensor &t, bool) {
  if (impl_->hostReads.count(handle))
    throw poplar_error("Graph::createHostRead: handle '" + handle + "' already exists");
  impl_->hostReads[handle] = t;
}

namespace {
DataStream addStream(GraphImpl &g, const std::string &handle, const Type &type, std::size_t n, bool h2d,
                     bool broadcast = false) {
  if (g.streams.count(handle)) throw poplar_error("stream handle '" + handle + "' already exists");
  auto s = std::make_shared<StreamInfo>();
  s->handle = handle;
  s->type = type;
  s->numElements = n;
  s->hostToDevice = h2d;
  s->broadcast = broadcast;
  s->id = static_cast<unsigned>(g.streams.size());
  g.streams[handle] = s;
  return DataStream(s);
}
} // namespace

DataStream Graph::addHostToDeviceFIFO(StringRef handle, const Type &type, std::size_t n, ReplicatedStreamMode mode,
                                      const OptionFlags &) {
  return addStream(*impl_, handle, type, n, true, mode == ReplicatedStreamMode::BROADCAST);
}
DataStream Graph::addDeviceToHostFIFO(StringRef handle, const Type &type, std::size_t n, const OptionFlags &) {
  return addStream(*impl_, handle, type, n, false);
}

RemoteBuffer Graph::addRemoteBuffer(StringRef handle, const Type &type, std::size_t n, std::size_t repeats, bool, bool) {
  if (impl_->remoteBuffers.count(handle)) throw poplar_error("remote buffer '" + handle + "' already exists");
  if (repeats == 0) throw poplar_error("addRemoteBuffer: repeats must be at least 1");
  auto r = std::make_shared<RemoteBufferInfo>();
  r->handle = handle;
  r->type = type;
  r->numElements = n;
  r->repeats = repeats;
  r->id = static_cast<unsigned>(impl_->remoteBuffers.size());
  impl_->remoteBuffers[handle] = r;
  return RemoteBuffer(r);
}

FunctionBuffer Graph::addFunctionBuffer(const Function &f, FunctionBufferMappingType) {
  if (f.getId() >= impl_->functions.size())
    throw poplar_error("Graph::addFunctionBuffer: unknown function " + std::to_string(f.getId()));
  impl_->functionBuffers.push_back(f.getId());
  return FunctionBuffer(static_cast<unsigned>(impl_->functionBuffers.size() - 1), f.getId());
}

Function Graph::addFunction(const program::Program &p) {
  impl_->functions.push_back(p);
  return Function(static_cast<unsigned>(impl_->functions.size() - 1));
}

} // namespace poplar
