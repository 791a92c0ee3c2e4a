// ipuxl's Poplar runtime (internal): the Engine's state — device memory per
// variable, compute sets bound to that memory, stream connections, remote
// buffers — and the IPU model's counters.
#pragma once
#include "impl.hpp"

#include <poplar/StreamCallback.hpp>
#include <functional>

namespace poplar {
namespace ipuxl_detail {

struct ByteCopy {
  char *dst;
  const char *src;
  std::size_t bytes;
};

struct BoundVertex {
  unsigned id;
  void *obj = nullptr;
  const VertexTypeInfo *type = nullptr;
  std::vector<ByteCopy> gathers, scatters; // around compute(): exchange into/out of vertex buffers
  std::vector<char> scratch;
};

/// The IPU model's static figures for one compute set, per tile.
struct ComputeSetCost {
  std::vector<std::uint64_t> computeWithIdle; // cycles: the busiest worker x workers
  std::vector<std::uint64_t> computeBusy;     // cycles: sum of vertex cycles
  std::vector<std::uint64_t> exchange;        // cycles to receive/send off-tile edge data
  std::uint64_t maxTile = 0;                  // the slowest tile, compute + exchange
  std::uint64_t vertices = 0;
};

struct BoundComputeSet {
  bool built = false;
  std::vector<BoundVertex> vertices;
  ComputeSetCost cost;
};

struct StreamConn {
  int kind = 0; // 0: none, 1: buffer, 2: function, 3: StreamCallback
  char *begin = nullptr, *end = nullptr;
  std::size_t pos = 0;
  std::function<void(void *)> fn;
  std::unique_ptr<StreamCallback> cb;
  std::vector<char> prefetched;
  bool hasPrefetched = false;
};

struct ProfileCounters {
  std::uint64_t totalCycles = 0;
  double avgComputeWithIdle = 0, avgComputeBusy = 0, avgExchange = 0, hostExchange = 0, sync = 0;
  std::uint64_t computeSetsRun = 0, copiesRun = 0, streamCopies = 0, programsRun = 0;
  std::map<std::string, std::uint64_t> cyclesByComputeSet;
  std::map<std::string, std::uint64_t> runsByComputeSet;
};

struct MemoryUse;

struct EngineImpl {
  std::shared_ptr<CompiledGraph> compiled;
  GraphImpl *g = nullptr;
  OptionFlags options;
  std::vector<std::vector<char>> mem;
  std::vector<BoundComputeSet> computeSets;
  std::map<std::string, StreamConn> streams;
  std::map<std::string, std::vector<char>> remote;
  bool loaded = false;
  ProfileCounters prof;
  bool autoReport = false;
  std::string reportDir;

  ~EngineImpl();
  void init();
  void run(const program::Program &p);
  BoundComputeSet &bind(unsigned cs);
  void execute(unsigned cs);
  void gather(const Tensor &t, char *out) const;
  void scatter(const Tensor &t, const char *in);
  long long readScalar(const Tensor &t) const;
  void printTensor(const ProgramImpl &p);
  void streamIn(const ProgramImpl &p);
  void streamOut(const ProgramImpl &p);
  void remoteCopy(const ProgramImpl &p, bool toRemote);
  // profile.cpp
  ComputeSetCost costOf(unsigned cs, const BoundComputeSet &b) const;
  void accountComputeSet(unsigned cs, const ComputeSetCost &c);
  void accountCopy(const Tensor &src, const Tensor &dst);
  void accountHost(std::size_t bytes);
  void accountSync();
  void printSummary(std::ostream &os, const OptionFlags &opts) const;
  void writeReport() const;
  void writeIpuxlProfile(std::ostream &os, const MemoryUse &m) const;
};

} // namespace ipuxl_detail
} // namespace poplar
