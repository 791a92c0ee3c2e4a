// ipuxl's Poplar: Engine, which runs a graph's control programs on the host
// (the IPU model): vertices' compute(), copies, streams and control flow,
// while the IPU model accounts the cycles and memory the program would take.
#pragma once
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <poplar/DataStream.hpp>
#include <poplar/Device.hpp>
#include <poplar/Executable.hpp>
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <poplar/StreamCallback.hpp>
#include <poplar/StringRef.hpp>
#include <string>
#include <vector>

namespace poplar {

namespace ipuxl_detail {
struct EngineImpl;
}

class Engine {
public:
  Engine(const Graph &graph, ArrayRef<program::Program> progs, const OptionFlags &opts = {},
         ProgressFunc progress = ProgressFunc(), const DebugContext &dc = {});
  Engine(const Graph &graph, const program::Program &prog, const OptionFlags &opts = {},
         ProgressFunc progress = ProgressFunc(), const DebugContext &dc = {});
  Engine(const Graph &graph, std::initializer_list<program::Program> progs, const OptionFlags &opts = {})
      : Engine(graph, ArrayRef<program::Program>(progs), opts) {}
  explicit Engine(Executable &&exe, const OptionFlags &opts = {});
  Engine(Engine &&) noexcept;
  Engine &operator=(Engine &&) noexcept;
  ~Engine();

  void load(const Device &device);
  void prepare(const Device &device) { load(device); }
  void deploy() {}
  void run(unsigned prog = 0, const std::string &debugName = "");
  void loadAndRun(const Device &device, unsigned prog = 0) { load(device); run(prog); }

  void connectStream(StringRef handle, void *p);
  void connectStream(StringRef handle, void *begin, void *end);
  void connectStream(const DataStream &s, void *p) { connectStream(s.handle(), p); }
  void connectStream(const DataStream &s, void *begin, void *end) { connectStream(s.handle(), begin, end); }
  /// With a replica index: that replica's stream (a graph's streams are per
  /// replica); without: every replica's (see docs/poplar.md).
  void connectStream(StringRef handle, unsigned replicaIndex, void *p);
  void connectStream(StringRef handle, unsigned replicaIndex, void *begin, void *end);
  void connectStreamToCallback(StringRef handle, std::function<void(void *)> f);
  void connectStreamToCallback(StringRef handle, unsigned replicaIndex, std::function<void(void *)> f);
  void connectStreamToCallback(StringRef handle, std::unique_ptr<StreamCallback> f);
  void connectStreamToCallback(StringRef handle, unsigned replicaIndex, std::unique_ptr<StreamCallback> f);
  void disconnectStream(StringRef handle);

  /// writeTensor writes the tensor of every replica; readTensor reads replica 0's.
  void writeTensor(StringRef handle, const void *buf);
  void writeTensor(StringRef handle, const void *begin, const void *end);
  void readTensor(StringRef handle, void *buf);
  void readTensor(StringRef handle, void *begin, void *end);

  void copyToRemoteBuffer(const void *src, const std::string &handle, std::uint64_t repeatIndex,
                          unsigned replicationIndex = 0);
  void copyFromRemoteBuffer(const std::string &handle, void *dst, std::uint64_t repeatIndex,
                            unsigned replicationIndex = 0);

  void printProfileSummary(std::ostream &out, const OptionFlags &opts = {}) const;
  void resetExecutionProfile();
  std::uint64_t ipuxlTotalCycles() const;
  const OptionFlags &getEngineOptions() const;
  unsigned ipuxlNumPrograms() const;

private:
  std::unique_ptr<ipuxl_detail::EngineImpl> impl_;
};

} // namespace poplar
