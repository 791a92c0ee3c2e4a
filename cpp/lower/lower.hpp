// Lowering of a validated ProgramDesc into a Poplar-shaped program tree.
//
// Each called graph becomes one Function whose body exists once, however
// many call sites it has; a call site is a Sequence that binds or copies the
// caller's tensors into the graph's inputs, calls the Function and binds or
// copies the outputs back (a copy is elided, by binding the caller's tensor
// in place, only where no observable write can differ). `repeat` runs its
// body n times with loop-carried copies; `conditional` is an If with one
// call-site Sequence per branch; host IO are stream copies.
//
// The tree is data: it runs nowhere. describe() prints it, the executor
// compiles it to flat code, and models of the IPU read it. Lowering is
// iterative over the call graph, so depth is bounded by memory only.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "../memory/plan.hpp"
#include "../program/program.hpp"

namespace ipuxl {

// The Poplar program a leaf step of a program tree is, as profiles name
// steps (program_step_name: "Execute", "Copy", "Call", ...).
enum class ProgramStep : int {
  Execute, Collective, RemoteCopy, Copy, IpuCopy, Call, Repeat, If, StreamCopy,
};
const char* program_step_name(ProgramStep s);

enum class NodeKind {
  Sequence, Execute, Copy, Bind, Call, Repeat, If, StreamIn, StreamOut, Carry,
  Collective,   // op: a collective across replicas
  RemoteLoad,   // op: Streaming Memory -> tensor
  RemoteStore,  // op: tensor -> Streaming Memory
};

// Points every tensor of `group` (one storage root of a called graph) at the
// caller tensor `to`, or back at the group's own storage when `to` is -1.
struct BindItem {
  std::vector<int> group;
  int to = -1;
};

struct Node {
  NodeKind kind = NodeKind::Sequence;
  int op = -1;              // Execute, StreamIn/Out, and the op a call site lowers
  int src = -1, dst = -1;   // Copy; StreamIn: dst; StreamOut: src
  int stream = -1;          // StreamIn / StreamOut
  int fn = -1;              // Call
  int64_t count = 0;        // Repeat
  int cond = -1;            // If: the condition tensor
  std::vector<BindItem> bind;
  int64_t rebound = 0;      // Bind: caller tensors used in place (elided copies)
  bool inter_ipu = false;   // Copy: an ipu_copy between IPUs (op: the IpuCopy op)
  std::vector<std::pair<int, int>> carry_direct, carry_staged;  // Carry: (src, dst)
  std::vector<Node> body;   // Sequence: children; Repeat: [body]; If: [then, else]
};

struct Function {
  int graph = -1;
  std::string name;
  Node body;
};

// The programs a Session runs, as Poplar names them: the main program and
// the weight-transfer programs holding main-graph ops of those contexts.
enum ProgramId { kMainProgram = 0, kWeightsFromHostProgram = 1, kWeightsToHostProgram = 2 };
constexpr int kNumPrograms = 3;
const char* program_name(int id);

struct Lowered {
  std::vector<Function> functions;
  std::vector<int> fn_of_graph;  // function index per graph, -1 for the main graph / unreachable
  Node programs[kNumPrograms];
  std::vector<int> skipped_ops;  // kernel ops validated and built but never run
};

Lowered lower_program(const ProgramDesc& desc, int main, const std::vector<int>& order,
                      const Aliasing& al, const std::vector<std::set<int>>& written);

// A readable listing: every Function, then every non-empty program.
// Placement and execution context are shown where they differ from the default.
std::string describe(const Lowered& low, const ProgramDesc& desc);
std::map<std::string, int64_t> count_nodes(const Lowered& low);

}  // namespace ipuxl
