// ipuxl's gcl: collectives across the replicas of a replicated graph
// (Graph(target, replication_factor(n))). Each function adds to `prog` a
// program that, when every replica of each group reaches it, combines the
// group's values; replicas are grouped by a CommGroup. See docs/poplar.md
// for how ipuxl runs replicas and what a collective costs in its IPU model.
#pragma once
#include <iosfwd>
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <vector>

namespace gcl {

/// How the group's values combine. LOCAL keeps each replica's own value;
/// SQUARE_ADD sums the squares; MEAN divides the sum by the group's size.
enum class CollectiveOperator { ADD, MEAN, MUL, MIN, MAX, LOGICAL_AND, LOGICAL_OR, SQUARE_ADD, LOCAL };
std::istream &operator>>(std::istream &is, CollectiveOperator &op);
std::ostream &operator<<(std::ostream &os, const CollectiveOperator &op);

/// ALL: one group of every replica. CONSECUTIVE with size k and stride s:
/// groups of k replicas s apart ({0, s, .., (k-1)s}, {1, 1+s, ..}, .. then the
/// next block of k*s); stride 1 gives {0..k-1}, {k..2k-1}, ... ORTHOGONAL with
/// size k: m = N/k groups {0, m, 2m, ..}, {1, m+1, ..}, .. {m-1, .., N-1}.
enum class CommGroupType { ALL, CONSECUTIVE, ORTHOGONAL };

/// A group specification; a replicaGroupSize of 0 means all replicas.
struct CommGroup {
  CommGroupType type = CommGroupType::ALL;
  unsigned replicaGroupSize = 0;
  unsigned replicaGroupStride = 1;
  CommGroup() = default;
  CommGroup(const CommGroupType &groupType, unsigned groupSize, unsigned groupStride = 1)
      : type(groupType), replicaGroupSize(groupSize), replicaGroupStride(groupStride) {}
};

/// The groups of `group` for `replicas` replicas, each in rank order (ipuxl:
/// what the collectives use; throws poputil::poplibs_error when the group
/// does not divide the replicas).
std::vector<std::vector<unsigned>> replicaGroups(const CommGroup &group, unsigned replicas);

/// A new tensor (data's shape and mapping): op over the group of each element of data.
poplar::Tensor allReduceCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, CollectiveOperator op,
                                     poplar::program::Sequence &prog, const CommGroup &group,
                                     const poplar::DebugContext &debugContext = {},
                                     const poplar::OptionFlags &options = {});
poplar::Tensor allReduceCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, CollectiveOperator op,
                                     poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {},
                                     const poplar::OptionFlags &options = {});
std::vector<poplar::Tensor> allReduceCrossReplica(poplar::Graph &graph, const std::vector<poplar::Tensor> &datas,
                                                  CollectiveOperator op, poplar::program::Sequence &prog,
                                                  const CommGroup &group, const poplar::DebugContext &debugContext = {},
                                                  const poplar::OptionFlags &options = {});
std::vector<poplar::Tensor> allReduceCrossReplica(poplar::Graph &graph, const std::vector<poplar::Tensor> &datas,
                                                  CollectiveOperator op, poplar::program::Sequence &prog,
                                                  const poplar::DebugContext &debugContext = {},
                                                  const poplar::OptionFlags &options = {});
/// The all-reduce written into `destination` (data's shape and type).
void allReduceToDestinationCrossReplica(poplar::Graph &graph, const poplar::Tensor &data,
                                        const poplar::Tensor &destination, CollectiveOperator op,
                                        poplar::program::Sequence &prog, const CommGroup &group,
                                        const poplar::DebugContext &debugContext = {},
                                        const poplar::OptionFlags &options = {});
void allReduceToDestinationCrossReplica(poplar::Graph &graph, const poplar::Tensor &data,
                                        const poplar::Tensor &destination, CollectiveOperator op,
                                        poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {},
                                        const poplar::OptionFlags &options = {});
/// The all-reduce written back into data.
void allReduceInPlaceCrossReplica(poplar::Graph &graph, poplar::Tensor &data, CollectiveOperator op,
                                  poplar::program::Sequence &prog, const CommGroup &group,
                                  const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {});
void allReduceInPlaceCrossReplica(poplar::Graph &graph, poplar::Tensor &data, CollectiveOperator op,
                                  poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {},
                                  const poplar::OptionFlags &options = {});
void allReduceInPlaceCrossReplica(poplar::Graph &graph, std::vector<poplar::Tensor> &datas, CollectiveOperator op,
                                  poplar::program::Sequence &prog, const CommGroup &group,
                                  const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {});
void allReduceInPlaceCrossReplica(poplar::Graph &graph, std::vector<poplar::Tensor> &datas, CollectiveOperator op,
                                  poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {},
                                  const poplar::OptionFlags &options = {});
/// data must be rank 1 ({n}); the result is {ceil(n / k)} for a group of k:
/// the member of rank j gets elements [j*m, (j+1)*m) of the reduction, zero
/// past n.
poplar::Tensor reduceScatterCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, CollectiveOperator op,
                                         poplar::program::Sequence &prog, const CommGroup &group,
                                         const poplar::DebugContext &debugContext = {},
                                         const poplar::OptionFlags &options = {});
poplar::Tensor reduceScatterCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, CollectiveOperator op,
                                         poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {},
                                         const poplar::OptionFlags &options = {});
std::vector<poplar::Tensor> reduceScatterCrossReplica(poplar::Graph &graph, const std::vector<poplar::Tensor> &datas,
                                                      CollectiveOperator op, poplar::program::Sequence &prog,
                                                      const CommGroup &group,
                                                      const poplar::DebugContext &debugContext = {},
                                                      const poplar::OptionFlags &options = {});
/// {k, data's shape}: slice j is the data of the group's member of rank j.
poplar::Tensor allGatherCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, poplar::program::Sequence &prog,
                                     const CommGroup &group, const poplar::DebugContext &debugContext = {},
                                     const poplar::OptionFlags &options = {});
poplar::Tensor allGatherCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, poplar::program::Sequence &prog,
                                     const poplar::DebugContext &debugContext = {},
                                     const poplar::OptionFlags &options = {});
std::vector<poplar::Tensor> allGatherCrossReplica(poplar::Graph &graph, const std::vector<poplar::Tensor> &datas,
                                                  poplar::program::Sequence &prog, const CommGroup &group,
                                                  const poplar::DebugContext &debugContext = {},
                                                  const poplar::OptionFlags &options = {});
/// data of the group's member of rank rootReplica, on every member.
poplar::Tensor broadcastCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, poplar::program::Sequence &prog,
                                     const CommGroup &group, unsigned rootReplica = 0,
                                     const poplar::DebugContext &debugContext = {},
                                     const poplar::OptionFlags &options = {});

} // namespace gcl

namespace popops {
/// Older SDKs name the operator popops::CollectiveOperator.
using CollectiveOperator = gcl::CollectiveOperator;
} // namespace popops
