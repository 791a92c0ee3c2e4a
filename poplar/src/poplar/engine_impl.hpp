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
  int kind = 0; // 0: none, 1: buffer, 2: function, 3: StreamCallback, 4: replica 0's StreamCallback
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
  double globalExchange = 0; // cycles of cross-replica collectives (IPU-Links)
  std::uint64_t computeSetsRun = 0, copiesRun = 0, streamCopies = 0, programsRun = 0, collectivesRun = 0;
  std::map<std::string, std::uint64_t> cyclesByComputeSet;
  std::map<std::string, std::uint64_t> runsByComputeSet;
  std::map<unsigned, std::uint64_t> cyclesByProgram, runsByProgram; // Engine::run(index)
};

struct MemoryUse;

/// Control and exchange code per tile of the programs (codesize.cpp).
struct ProgramCode {
  std::vector<std::uint64_t> control, internalExchange, hostExchange, globalExchange, copyDescriptors;
  // Code of one instance, all tiles (control, exchange, copy descriptors and
  // vertex state; vertex code is per type): each Function's body without the
  // Functions it calls, and the rest (the programs' own code).
  std::map<unsigned, std::uint64_t> functionCode, functionCalls; // calls: Call sites in the tree walked
  std::uint64_t mainCode = 0;
};
/// Vertex state bytes of one vertex (its edge pointers and value fields).
std::uint64_t vertexStateBytes(const GraphImpl &g, const VertexInst &v);
ProgramCode programCode(const GraphImpl &g, const std::vector<program::Program> &programs);

/// Always-live variables and the not-always-live peak per tile (liveness.cpp).
struct Liveness {
  std::vector<bool> alwaysLive;              // per variable
  std::vector<std::uint64_t> notAlwaysLive;  // per tile: the most live at one step
};
Liveness liveness(const GraphImpl &g, const std::vector<program::Program> &programs);

/// Replicas: every replica has its own memory, bound compute sets, stream
/// connections and remote buffers; `cur` selects the one a leaf program
/// acts on. The interpreter runs the program tree once for a set of
/// replicas, each leaf for each replica in turn (see docs/poplar.md).
struct EngineImpl {
  std::shared_ptr<CompiledGraph> compiled;
  GraphImpl *g = nullptr;
  OptionFlags options;
  unsigned replicas = 1, cur = 0;
  bool quiet = false; // a replica after the first: the IPU model counts each step once
  std::vector<std::vector<std::vector<char>>> mems;     // [replica][variable] bytes
  std::vector<std::vector<BoundComputeSet>> bound;      // [replica][compute set]
  std::map<std::string, std::vector<StreamConn>> streams; // [handle][replica]
  std::map<std::string, std::vector<std::vector<char>>> remote; // [handle][replica]
  bool loaded = false;
  ProfileCounters prof;
  bool autoReport = false;
  std::string reportDir;

  ~EngineImpl();
  void init();
  std::vector<std::vector<char>> &mem() { return mems[cur]; }
  const std::vector<std::vector<char>> &mem() const { return mems[cur]; }
  void select(unsigned replica, bool first) {
    cur = replica;
    quiet = !first;
  }
  /// Runs p for the replicas in `active` (in order).
  void run(const program::Program &p, const std::vector<unsigned> &active);
  void runAll(const program::Program &p);
  BoundComputeSet &bind(unsigned cs);
  void execute(unsigned cs);
  void gather(const Tensor &t, char *out) const;
  void scatter(const Tensor &t, const char *in);
  void writeEveryReplica(const Tensor &t, const char *in);
  long long readScalar(const Tensor &t) const;
  void printTensor(const ProgramImpl &p);
  void readStream(const StreamInfo &s, unsigned replica, char *buf);
  void streamIn(const ProgramImpl &p, const std::vector<unsigned> &active);
  void streamOut(const ProgramImpl &p);
  void remoteCopy(const ProgramImpl &p, bool toRemote);
  void crossReplica(const ProgramImpl &p, const std::vector<unsigned> &active);
  // profile.cpp
  ComputeSetCost costOf(unsigned cs, const BoundComputeSet &b) const;
  void accountComputeSet(unsigned cs, const ComputeSetCost &c);
  void accountCopy(const Tensor &src, const Tensor &dst);
  void accountHost(std::size_t bytes);
  void accountSync();
  void accountCollective(const CollectiveInfo &c, const std::string &name);
  void printSummary(std::ostream &os, const OptionFlags &opts) const;
  void writeReport() const;
  void writeIpuxlProfile(std::ostream &os, const MemoryUse &m) const;
};

} // namespace ipuxl_detail
} // namespace poplar
