// The Engine: one compiled program and the states it runs over.
//
// Construction validates the description, lowers it to the program tree,
// plans memory, compiles flat code and builds the replica state(s). A
// faithful description (the program as PopXL would build it, before host
// speed-ups) may be given as well: it is validated and lowered for
// describe() and reports, and never run.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "collectives.hpp"
#include "state.hpp"

namespace ipuxl {

// Host-side buffers of one run: a stream's array holds `items` transfers.
struct StreamBinding {
  uint8_t* data = nullptr;
  int64_t items = 0;     // how many transfers the host array holds
  size_t item_bytes = 0;  // bytes of one replica's tensor; a transfer holds one per replica
  int64_t cursor = 0;    // transfers used so far in this run
};

// Host time spent in one kernel slot, accumulated over runs when profiling.
struct ExecProfile {
  std::string label;
  double seconds = 0.0;
  int64_t calls = 0;
};

class Engine {
 public:
  Engine(std::shared_ptr<const ProgramDesc> desc, int main_graph,
         std::shared_ptr<const ProgramDesc> faithful = nullptr);

  // One host call: runs the main program once and returns how many transfers
  // of each stream it used; output transfers it did not store are zeroed.
  // On failure the device state is whatever the program had written so far
  // (the Session says so). `poll`, when given, is called between program
  // steps at most every kPollSeconds of wall time; whatever it throws (a
  // KeyboardInterrupt from a pending signal) ends the run as any failure.
  std::vector<int64_t> run(std::vector<StreamBinding> bindings,
                           std::function<void()> poll = nullptr);
  static constexpr double kPollSeconds = 0.05;
  // One engine is not safe to use from several threads at once: every
  // caller of the methods below from a language binding holds this mutex
  // (the Python bindings take it with the GIL released).
  std::mutex& mutex() const { return mutex_; }
  // Runs the weights_from_host / weights_to_host program (main-graph ops
  // placed in those execution contexts); nothing when it is empty.
  void run_weights_program(bool from_host);
  bool has_weights_program(bool from_host) const;
  int num_streams() const { return (int)desc_->streams.size(); }
  bool stream_is_input(int s) const {
    return s >= 0 && s < num_streams() && desc_->streams[(size_t)s].host_to_device;
  }

  // Host access to a tensor of one replica's state (write: replica -1 writes
  // every replica).
  void write_tensor(int tensor, const uint8_t* src, size_t nbytes, int replica = -1);
  void read_tensor(int tensor, uint8_t* dst, size_t nbytes, int replica = 0) const;
  // Host access to one entry of a remote buffer of one replica.
  void write_remote(int buffer, int64_t entry, int replica, const uint8_t* src, size_t nbytes);
  void read_remote(int buffer, int64_t entry, int replica, uint8_t* dst, size_t nbytes) const;
  int replicas() const { return (int)states_.size(); }
  // This engine is one of several instances (processes) of `total` replicas
  // and holds replicas [offset, offset + replicas()): collectives whose
  // groups cross instances go through `exchange` (see collectives.hpp).
  void set_distributed(int offset, int total, ExchangeFn exchange);
  // True when some op of the program writes the tensor's storage.
  bool program_writes(int tensor) const;
  // Moves a main-graph variable's storage to caller-owned memory of the
  // same size, 64-byte aligned, that outlives the Engine (the Session's host
  // array, so the device copy and the host copy are one buffer).
  void bind_external(int tensor, uint8_t* data, size_t nbytes);
  // Back to the Engine's own storage, keeping the current values.
  void unbind_external(int tensor);

  const TensorRef& tensor(int id) const { return state().refs.at((size_t)id); }
  int num_tensors() const { return (int)desc_->tensors.size(); }
  // The faithful program when one was given, else the program that runs.
  std::string describe(bool host = false) const;
  std::map<std::string, int64_t> program_counts(bool host = false) const;
  void set_profiling(bool on) { profiling_ = on; }
  std::vector<ExecProfile> profile() const { return profiles_; }
  size_t arena_bytes() const { return plan_.total; }
  size_t unplanned_bytes() const { return plan_.unplanned; }
  uint64_t runs() const { return run_index_.load(); }
  // False after a program failed part-way (its writes so far are kept):
  // the device values are not those of any complete run.
  bool state_defined() const { return state_defined_.load(); }

 private:
  State& state() const { return *states_[0]; }
  void check_replica(int replica, const char* what) const;
  uint8_t* remote_slot(int buffer, int64_t entry, int replica, size_t nbytes,
                       const char* what) const;
  void execute(int program, std::vector<StreamBinding>& streams);

  std::shared_ptr<const ProgramDesc> desc_;
  std::shared_ptr<const ProgramDesc> faithful_;
  int main_graph_;
  Aliasing al_;
  MemoryPlan plan_;
  Lowered low_;
  Lowered faithful_low_;
  Executable exe_;
  std::set<int> program_written_;  // roots any op of the program writes
  // Per op: a RemoteLoad whose tensor views its Streaming Memory entry
  // instead of receiving a copy (OpRecord::view_streaming_memory).
  std::vector<uint8_t> view_load_;
  // (stream, tensor) of each HostStore whose tensor is computed straight
  // into the run's host array (OpRecord::write_host_directly).
  std::vector<std::pair<int, int>> direct_stores_;
  // Points each direct store's tensor (and its aliases) at its transfer in
  // the host array for this run, where the array allows; returns what to
  // restore: (state, tensor, arena home).
  std::vector<std::tuple<State*, int, uint8_t*>> bind_direct_stores(
      const std::vector<StreamBinding>& bindings);
  void unbind_direct_stores(const std::vector<std::tuple<State*, int, uint8_t*>>& bound);
  std::vector<std::unique_ptr<State>> states_;
  std::vector<ExecProfile> profiles_;  // per kernel slot
  // Read without the mutex (Session checks them after a failed run).
  std::atomic<uint64_t> run_index_{0};
  bool profiling_ = false;
  std::atomic<bool> state_defined_{true};
  std::function<void()> poll_;  // this run's signal check, or empty
  mutable std::mutex mutex_;
  int dist_offset_ = 0;
  int dist_total_ = 0;  // 0: not distributed
  ExchangeFn exchange_;
  std::vector<uint8_t> dist_recv_;  // the exchange's receive buffer, reused
};

}  // namespace ipuxl
