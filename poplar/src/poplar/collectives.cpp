// ipuxl's Poplar: running a cross-replica collective (the programs ipuxl's
// gcl adds) and its cost in the IPU model. Each group's members' source
// values are read from their memories, combined in double precision (exact
// for float, half and 32-bit integers) and written to each member's
// destination.
#include "engine_impl.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <poplar/exceptions.hpp>

namespace poplar {
namespace ipuxl_detail {

namespace {
// The IPU model's figures for a collective over the IPU-Links, as ipuxl's
// PopXL model (shared/reference/ipu_model.md §5): ring steps, each a global
// sync plus the moved bytes at the links' bandwidth.
constexpr double kLinkBytesPerSecond = 32e9;
constexpr std::uint64_t kGlobalSyncCycles = 500;
constexpr std::uint64_t kSupervisorCycles = 11;
constexpr std::uint64_t kMemcpyBytesPerCycle = 8;

double combine(CollectiveInfo::Op op, double a, double b) {
  switch (op) {
  case CollectiveInfo::ADD:
  case CollectiveInfo::MEAN:
  case CollectiveInfo::SQUARE_ADD: return a + b;
  case CollectiveInfo::MUL: return a * b;
  case CollectiveInfo::MIN: return std::min(a, b);
  case CollectiveInfo::MAX: return std::max(a, b);
  case CollectiveInfo::LOGICAL_AND: return (a != 0 && b != 0) ? 1 : 0;
  case CollectiveInfo::LOGICAL_OR: return (a != 0 || b != 0) ? 1 : 0;
  case CollectiveInfo::LOCAL: return a;
  }
  return a;
}

/// The reduction over a group of each element of `values` ([member][element]),
/// or for LOCAL each member's own values.
std::vector<double> reduceGroup(CollectiveInfo::Op op, const std::vector<std::vector<double>> &values) {
  std::vector<double> out = values[0];
  if (op == CollectiveInfo::SQUARE_ADD)
    for (auto &v : out) v *= v;
  for (std::size_t m = 1; m < values.size(); ++m)
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = combine(op, out[i], op == CollectiveInfo::SQUARE_ADD ? values[m][i] * values[m][i] : values[m][i]);
  if (op == CollectiveInfo::MEAN)
    for (auto &v : out) v /= static_cast<double>(values.size());
  return out;
}
} // namespace

void EngineImpl::crossReplica(const ProgramImpl &p, const std::vector<unsigned> &active) {
  const CollectiveInfo &c = *p.collective;
  std::vector<bool> on(replicas, false);
  for (unsigned r : active) on[r] = true;
  for (const auto &grp : c.groups) {
    std::size_t n = std::count_if(grp.begin(), grp.end(), [&](unsigned r) { return on[r]; });
    if (n && n != grp.size())
      throw poplar::runtime_error("Collective '" + p.name + "': only " + std::to_string(n) + " of the " +
                                  std::to_string(grp.size()) + " replicas of a group reach it (the replicas took "
                                  "different control-flow paths; on an IPU this would hang)");
  }
  auto readDouble = [&](const Tensor &t) {
    std::size_t n = t.numElements();
    std::vector<char> raw(n * t.elementType().ipuxlSize() + 1);
    gather(t, raw.data());
    std::vector<double> v(n);
    convertElements(t.elementType().ipuxlCode(), raw.data(), -1, v.data(), n);
    return v;
  };
  auto writeDouble = [&](const Tensor &t, const std::vector<double> &v) {
    std::vector<char> raw(t.numElements() * t.elementType().ipuxlSize() + 1);
    convertElements(-1, v.data(), t.elementType().ipuxlCode(), raw.data(), t.numElements());
    scatter(t, raw.data());
  };
  for (std::size_t k = 0; k < c.srcs.size(); ++k) {
    const Tensor &src = c.srcs[k], &dst = c.dsts[k];
    for (const auto &grp : c.groups) {
      if (!on[grp[0]]) continue;
      std::vector<std::vector<double>> values;
      for (unsigned r : grp) {
        select(r, false);
        values.push_back(readDouble(src));
      }
      std::vector<double> reduced;
      if (c.kind != CollectiveInfo::AllGather && c.kind != CollectiveInfo::Broadcast && c.op != CollectiveInfo::LOCAL)
        reduced = reduceGroup(c.op, values);
      for (std::size_t m = 0; m < grp.size(); ++m) {
        select(grp[m], false);
        std::vector<double> out;
        switch (c.kind) {
        case CollectiveInfo::AllReduce:
          out = c.op == CollectiveInfo::LOCAL ? values[m] : reduced;
          break;
        case CollectiveInfo::ReduceScatter: {
          const std::vector<double> &full = c.op == CollectiveInfo::LOCAL ? values[m] : reduced;
          std::size_t part = dst.numElements();
          out.assign(part, 0.0); // the last parts are zero-padded
          for (std::size_t i = 0; i < part && m * part + i < full.size(); ++i) out[i] = full[m * part + i];
          break;
        }
        case CollectiveInfo::AllGather:
          for (const auto &v : values) out.insert(out.end(), v.begin(), v.end());
          break;
        case CollectiveInfo::Broadcast:
          out = values[c.root];
          break;
        }
        writeDouble(dst, out);
      }
    }
  }
  select(active[0], true);
  accountCollective(c, p.name);
}

void EngineImpl::accountCollective(const CollectiveInfo &c, const std::string &name) {
  if (quiet) return;
  const std::size_t G = c.groups.empty() ? 1 : c.groups[0].size();
  std::uint64_t bytes = 0, perTile = 0;
  const unsigned tiles = g->target.getNumTiles();
  for (std::size_t k = 0; k < c.srcs.size(); ++k) {
    // The unsharded size: a reduce-scatter's input, an all-gather's output.
    const Tensor &t = c.kind == CollectiveInfo::AllGather ? c.dsts[k] : c.srcs[k];
    bytes += t.numElements() * t.elementType().ipuxlSize();
  }
  perTile = (bytes + tiles - 1) / tiles;
  ++prof.collectivesRun;
  // Collectives appear among the profile's ops, with the compute sets.
  auto count = [&](std::uint64_t cycles) {
    prof.totalCycles += cycles;
    prof.cyclesByComputeSet[name] += cycles;
    prof.runsByComputeSet[name] += 1;
  };
  if (G <= 1 || bytes == 0) {
    count(kSupervisorCycles + (perTile + kMemcpyBytesPerCycle - 1) / kMemcpyBytesPerCycle);
    return;
  }
  // All-reduce: a reduce-scatter then an all-gather, 2(G-1)/G of the bytes
  // over the links in 2(G-1) steps; the others (G-1)/G in G-1 steps.
  const std::uint64_t steps = c.kind == CollectiveInfo::AllReduce ? 2 : 1;
  const double bpc = kLinkBytesPerSecond / g->target.getTileClockFrequency();
  const double moved = static_cast<double>(steps * (G - 1)) / static_cast<double>(G) * static_cast<double>(bytes);
  double exchange = static_cast<double>(steps * (G - 1) * kGlobalSyncCycles) + std::ceil(moved / bpc);
  const bool reduces = c.kind != CollectiveInfo::AllGather && c.op != CollectiveInfo::LOCAL;
  // On-tile work per ring step: add (or copy) one 1/G slice of each tile's part.
  std::uint64_t perStep = ((perTile + G - 1) / G + kMemcpyBytesPerCycle - 1) / kMemcpyBytesPerCycle;
  std::uint64_t compute = steps * (G - 1) * (kSupervisorCycles + (reduces ? 2 : 1) * perStep);
  prof.globalExchange += exchange;
  count(static_cast<std::uint64_t>(exchange) + compute);
}

} // namespace ipuxl_detail
} // namespace poplar
