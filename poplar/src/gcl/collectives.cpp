// ipuxl's gcl: the collectives add a CrossReplica program node that the
// Engine runs over the replicas of each group (poplar/src/poplar/collectives.cpp).
#include "../poplar/impl.hpp"

#include <gcl/Collectives.hpp>
#include <istream>
#include <ostream>
#include <poputil/TileMapping.hpp>
#include <poputil/exceptions.hpp>

namespace gcl {
namespace {
using poplar::ipuxl_detail::CollectiveInfo;

const char *const kOpNames[] = {"ADD", "MEAN", "MUL", "MIN", "MAX", "LOGICAL_AND", "LOGICAL_OR", "SQUARE_ADD", "LOCAL"};

CollectiveInfo::Op opOf(CollectiveOperator op) { return static_cast<CollectiveInfo::Op>(static_cast<int>(op)); }

CommGroup allReplicas() { return CommGroup(CommGroupType::ALL, 0); }

void addCollective(poplar::Graph &graph, CollectiveInfo::Kind kind, CollectiveOperator op, const CommGroup &group,
                   std::vector<poplar::Tensor> srcs, std::vector<poplar::Tensor> dsts, poplar::program::Sequence &prog,
                   const poplar::DebugContext &dc, const char *name, unsigned root = 0) {
  auto c = std::make_shared<CollectiveInfo>();
  c->kind = kind;
  c->op = opOf(op);
  c->groups = replicaGroups(group, graph.getReplicationFactor());
  c->srcs = std::move(srcs);
  c->dsts = std::move(dsts);
  c->root = root;
  if (root >= c->groups[0].size())
    throw poputil::poplibs_error(std::string(name) + ": root replica " + std::to_string(root) +
                                 " is not a rank of a group of " + std::to_string(c->groups[0].size()));
  auto node = std::make_shared<poplar::ipuxl_detail::ProgramImpl>();
  node->kind = poplar::ipuxl_detail::ProgKind::CrossReplica;
  node->name = dc.getPathName().empty() ? std::string(name) : dc.getPathName();
  node->collective = c;
  prog.add(poplar::program::Program(node));
}

std::vector<poplar::Tensor> clones(poplar::Graph &graph, const std::vector<poplar::Tensor> &ts,
                                   const poplar::DebugContext &dc) {
  std::vector<poplar::Tensor> out;
  for (const auto &t : ts) out.push_back(graph.clone(t, {dc, "out"}));
  return out;
}
} // namespace

std::istream &operator>>(std::istream &is, CollectiveOperator &op) {
  std::string s;
  is >> s;
  for (int k = 0; k < 9; ++k)
    if (s == kOpNames[k]) {
      op = static_cast<CollectiveOperator>(k);
      return is;
    }
  throw poputil::poplibs_error("gcl: unknown CollectiveOperator '" + s + "'");
}
std::ostream &operator<<(std::ostream &os, const CollectiveOperator &op) {
  return os << kOpNames[static_cast<int>(op)];
}

std::vector<std::vector<unsigned>> replicaGroups(const CommGroup &group, unsigned n) {
  unsigned k = group.replicaGroupSize == 0 || group.type == CommGroupType::ALL ? n : group.replicaGroupSize;
  unsigned s = group.type == CommGroupType::CONSECUTIVE ? std::max(1u, group.replicaGroupStride) : 1;
  std::string what = "gcl: a CommGroup of size " + std::to_string(k) +
                     (s > 1 ? " and stride " + std::to_string(s) : std::string());
  if (k == 0 || n % (k * s) != 0)
    throw poputil::poplibs_error(what + " does not divide the " + std::to_string(n) + " replicas");
  std::vector<std::vector<unsigned>> groups;
  if (group.type == CommGroupType::ORTHOGONAL && k != n) {
    unsigned m = n / k;
    for (unsigned j = 0; j < m; ++j) {
      groups.emplace_back();
      for (unsigned i = 0; i < k; ++i) groups.back().push_back(j + i * m);
    }
    return groups;
  }
  for (unsigned base = 0; base < n; base += k * s)
    for (unsigned j = 0; j < s; ++j) {
      groups.emplace_back();
      for (unsigned i = 0; i < k; ++i) groups.back().push_back(base + j + i * s);
    }
  return groups;
}

std::vector<poplar::Tensor> allReduceCrossReplica(poplar::Graph &graph, const std::vector<poplar::Tensor> &datas,
                                                  CollectiveOperator op, poplar::program::Sequence &prog,
                                                  const CommGroup &group, const poplar::DebugContext &dc,
                                                  const poplar::OptionFlags &) {
  auto outs = clones(graph, datas, dc);
  addCollective(graph, CollectiveInfo::AllReduce, op, group, datas, outs, prog, dc, "gcl::allReduceCrossReplica");
  return outs;
}
std::vector<poplar::Tensor> allReduceCrossReplica(poplar::Graph &graph, const std::vector<poplar::Tensor> &datas,
                                                  CollectiveOperator op, poplar::program::Sequence &prog,
                                                  const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  return allReduceCrossReplica(graph, datas, op, prog, allReplicas(), dc, o);
}
poplar::Tensor allReduceCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, CollectiveOperator op,
                                     poplar::program::Sequence &prog, const CommGroup &group,
                                     const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  return allReduceCrossReplica(graph, std::vector<poplar::Tensor>{data}, op, prog, group, dc, o)[0];
}
poplar::Tensor allReduceCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, CollectiveOperator op,
                                     poplar::program::Sequence &prog, const poplar::DebugContext &dc,
                                     const poplar::OptionFlags &o) {
  return allReduceCrossReplica(graph, data, op, prog, allReplicas(), dc, o);
}

void allReduceToDestinationCrossReplica(poplar::Graph &graph, const poplar::Tensor &data,
                                        const poplar::Tensor &destination, CollectiveOperator op,
                                        poplar::program::Sequence &prog, const CommGroup &group,
                                        const poplar::DebugContext &dc, const poplar::OptionFlags &) {
  if (destination.shape() != data.shape() || destination.elementType() != data.elementType())
    throw poputil::poplibs_error("gcl::allReduceToDestinationCrossReplica: the destination " +
                                 destination.shapeToString() + " " + destination.elementType().toString() +
                                 " differs from the data " + data.shapeToString() + " " + data.elementType().toString());
  addCollective(graph, CollectiveInfo::AllReduce, op, group, {data}, {destination}, prog, dc,
                "gcl::allReduceToDestinationCrossReplica");
}
void allReduceToDestinationCrossReplica(poplar::Graph &graph, const poplar::Tensor &data,
                                        const poplar::Tensor &destination, CollectiveOperator op,
                                        poplar::program::Sequence &prog, const poplar::DebugContext &dc,
                                        const poplar::OptionFlags &o) {
  allReduceToDestinationCrossReplica(graph, data, destination, op, prog, allReplicas(), dc, o);
}

void allReduceInPlaceCrossReplica(poplar::Graph &graph, std::vector<poplar::Tensor> &datas, CollectiveOperator op,
                                  poplar::program::Sequence &prog, const CommGroup &group,
                                  const poplar::DebugContext &dc, const poplar::OptionFlags &) {
  addCollective(graph, CollectiveInfo::AllReduce, op, group, datas, datas, prog, dc, "gcl::allReduceInPlaceCrossReplica");
}
void allReduceInPlaceCrossReplica(poplar::Graph &graph, std::vector<poplar::Tensor> &datas, CollectiveOperator op,
                                  poplar::program::Sequence &prog, const poplar::DebugContext &dc,
                                  const poplar::OptionFlags &o) {
  allReduceInPlaceCrossReplica(graph, datas, op, prog, allReplicas(), dc, o);
}
void allReduceInPlaceCrossReplica(poplar::Graph &graph, poplar::Tensor &data, CollectiveOperator op,
                                  poplar::program::Sequence &prog, const CommGroup &group,
                                  const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  std::vector<poplar::Tensor> v{data};
  allReduceInPlaceCrossReplica(graph, v, op, prog, group, dc, o);
}
void allReduceInPlaceCrossReplica(poplar::Graph &graph, poplar::Tensor &data, CollectiveOperator op,
                                  poplar::program::Sequence &prog, const poplar::DebugContext &dc,
                                  const poplar::OptionFlags &o) {
  allReduceInPlaceCrossReplica(graph, data, op, prog, allReplicas(), dc, o);
}

std::vector<poplar::Tensor> reduceScatterCrossReplica(poplar::Graph &graph, const std::vector<poplar::Tensor> &datas,
                                                      CollectiveOperator op, poplar::program::Sequence &prog,
                                                      const CommGroup &group, const poplar::DebugContext &dc,
                                                      const poplar::OptionFlags &) {
  std::size_t k = replicaGroups(group, graph.getReplicationFactor())[0].size();
  std::vector<poplar::Tensor> outs;
  for (const auto &d : datas) {
    if (d.rank() != 1)
      throw poputil::poplibs_error("gcl::reduceScatterCrossReplica: the data must be rank 1, got " + d.shapeToString());
    poplar::Tensor out = graph.addVariable(d.elementType(), {(d.numElements() + k - 1) / k}, {dc, "out"});
    poputil::mapTensorLinearly(graph, out);
    outs.push_back(out);
  }
  addCollective(graph, CollectiveInfo::ReduceScatter, op, group, datas, outs, prog, dc, "gcl::reduceScatterCrossReplica");
  return outs;
}
poplar::Tensor reduceScatterCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, CollectiveOperator op,
                                         poplar::program::Sequence &prog, const CommGroup &group,
                                         const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  return reduceScatterCrossReplica(graph, std::vector<poplar::Tensor>{data}, op, prog, group, dc, o)[0];
}
poplar::Tensor reduceScatterCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, CollectiveOperator op,
                                         poplar::program::Sequence &prog, const poplar::DebugContext &dc,
                                         const poplar::OptionFlags &o) {
  return reduceScatterCrossReplica(graph, data, op, prog, allReplicas(), dc, o);
}

std::vector<poplar::Tensor> allGatherCrossReplica(poplar::Graph &graph, const std::vector<poplar::Tensor> &datas,
                                                  poplar::program::Sequence &prog, const CommGroup &group,
                                                  const poplar::DebugContext &dc, const poplar::OptionFlags &) {
  std::size_t k = replicaGroups(group, graph.getReplicationFactor())[0].size();
  std::vector<poplar::Tensor> outs;
  for (const auto &d : datas) {
    // Each gathered slice is mapped as the data is.
    std::vector<poplar::Tensor> parts;
    for (std::size_t j = 0; j < k; ++j) parts.push_back(graph.clone(d, {dc, "out"}).expand({0}));
    outs.push_back(poplar::concat(parts, 0));
  }
  addCollective(graph, CollectiveInfo::AllGather, CollectiveOperator::LOCAL, group, datas, outs, prog, dc,
                "gcl::allGatherCrossReplica");
  return outs;
}
poplar::Tensor allGatherCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, poplar::program::Sequence &prog,
                                     const CommGroup &group, const poplar::DebugContext &dc,
                                     const poplar::OptionFlags &o) {
  return allGatherCrossReplica(graph, std::vector<poplar::Tensor>{data}, prog, group, dc, o)[0];
}
poplar::Tensor allGatherCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, poplar::program::Sequence &prog,
                                     const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  return allGatherCrossReplica(graph, data, prog, allReplicas(), dc, o);
}

poplar::Tensor broadcastCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, poplar::program::Sequence &prog,
                                     const CommGroup &group, unsigned root, const poplar::DebugContext &dc,
                                     const poplar::OptionFlags &) {
  poplar::Tensor out = graph.clone(data, {dc, "out"});
  addCollective(graph, CollectiveInfo::Broadcast, CollectiveOperator::LOCAL, group, {data}, {out}, prog, dc,
                "gcl::broadcastCrossReplica", root);
  return out;
}

} // namespace gcl
