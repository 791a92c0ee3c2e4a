// Lowering and execution of a ProgramDesc.
#pragma once

#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "program.hpp"

namespace ipuxl {

// Host-side buffers of one Engine::run call.
struct StreamBinding {
  uint8_t* data = nullptr;
  int64_t items = 0;    // how many transfers the host array holds
  size_t item_bytes = 0;
  int64_t cursor = 0;   // transfers used so far in this run
};

// Host time spent in one Execute node, accumulated over runs when profiling.
struct ExecProfile {
  std::string label;
  double seconds = 0.0;
  int64_t calls = 0;
};

struct Exec {
  RunContext ctx;
  std::vector<StreamBinding> streams;  // indexed by stream id
  const ProgramDesc* desc = nullptr;
  bool profiling = false;
};

// A node of the lowered program tree.
struct Prog {
  virtual ~Prog() = default;
  virtual void run(Exec& ex) = 0;
  virtual void describe(std::ostream& os, int indent) const = 0;
  // Count of nodes by kind, for program-size reports.
  virtual void count(std::map<std::string, int64_t>& counts) const = 0;
};

struct Function {
  int graph = -1;
  std::string name;
  std::unique_ptr<Prog> body;
};

class Engine {
 public:
  explicit Engine(std::shared_ptr<const ProgramDesc> desc, int main_graph);

  // One host call: runs the main program once.
  void run(std::vector<StreamBinding> bindings);
  // Copy host bytes into a tensor / out of a tensor (variables and constants).
  void write_tensor(int tensor, const uint8_t* src, size_t nbytes);
  void read_tensor(int tensor, uint8_t* dst, size_t nbytes) const;

  // True when some op of the program writes the tensor's storage (a
  // variable the program updates, as opposed to one only the host writes).
  bool program_writes(int tensor) const;
  // Moves a main-graph variable's storage to caller-owned memory of the
  // same size, 64-byte aligned, that outlives the Engine (the Session's host
  // array, so the device copy and the host copy are one buffer).
  void bind_external(int tensor, uint8_t* data, size_t nbytes);
  // Back to the Engine's own storage, keeping the current values.
  void unbind_external(int tensor);
  const TensorRef& tensor(int id) const { return refs_.at(id); }
  int num_tensors() const { return (int)refs_.size(); }
  std::string describe() const;
  std::map<std::string, int64_t> program_counts() const;
  // Per-Execute host time, when profiling is on (off by default: it costs a
  // clock read per op).
  void set_profiling(bool on) { profiling_ = on; }
  std::vector<ExecProfile> profile() const;
  size_t arena_bytes() const { return arena_bytes_; }
  // Bytes all tensors would need without liveness-based reuse.
  size_t unplanned_bytes() const { return unplanned_bytes_; }
  uint64_t runs() const { return run_index_; }

 private:
  void allocate();
  // Offsets of every storage root: persistent tensors get their own bytes,
  // intermediates of each graph share bytes when their live ranges (in the
  // graph's schedule) do not overlap. Returns the total size.
  size_t plan_memory(std::vector<size_t>& offset);
  Function* function_for(int graph);
  std::unique_ptr<Prog> lower_graph_body(int graph);
  std::unique_ptr<Prog> lower_op(const OpRecord& op);
  std::unique_ptr<Prog> copy(int src, int dst) const;
  // Roots of tensors a graph's ops (or graphs it calls) write in place.
  const std::set<int>& written_roots(int graph);
  // Which inputs/outputs of a call can use the caller's tensors in place
  // instead of being copied in/out.
  void plan_call_binding(const OpRecord& op, int graph, int64_t carried,
                         std::vector<bool>& in_place_in, std::vector<bool>& in_place_out);
  std::unique_ptr<Prog> bind_call(const OpRecord& op, int graph,
                                  const std::vector<bool>& in_place_in,
                                  const std::vector<bool>& in_place_out);

  std::shared_ptr<const ProgramDesc> desc_;
  int main_graph_;
  std::vector<TensorRef> refs_;  // one per tensor id; fixed after allocate()
  std::vector<int> root_;        // storage owner of each tensor (alias resolution)
  std::unique_ptr<void, void (*)(void*)> arena_base_{nullptr, [](void*) {}};
  std::unique_ptr<uint8_t[], void (*)(uint8_t*)> arena_{nullptr, [](uint8_t*) {}};
  size_t arena_bytes_ = 0;
  size_t unplanned_bytes_ = 0;
  std::map<int, std::unique_ptr<Function>> functions_;
  std::unique_ptr<Prog> main_;
  uint64_t run_index_ = 0;
  bool profiling_ = false;
  bool elide_copies_ = true;
  uint64_t host_write_epoch_ = 1;
  std::set<int> program_written_;  // roots any op of the program writes
  std::vector<std::vector<int>> members_;  // tensors sharing each root's storage
  std::vector<uint8_t*> home_;             // each root's own buffer
  std::map<int, uint8_t*> arena_home_;     // bound variables' arena buffers
  std::map<int, std::set<int>> written_;
  std::vector<std::unique_ptr<ExecProfile>> profiles_;
};

}  // namespace ipuxl
