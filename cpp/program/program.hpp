// The program description handed over by Python, and its validation.
//
// A ProgramDesc is a plain record of graphs, tensors, ops and host streams,
// filled once per Session through the bindings. Every fact a later layer
// relies on is a typed field here: what kind of op it is (a kernel, a call,
// a loop, a branch, host IO), which inputs it writes, whether it has side
// effects, where it is placed (IPU, tile set, execution context). No layer
// reads a trait from a string attribute.
//
// validate() checks the whole description before anything is lowered or
// allocated, so that later layers can index without checking again and the
// interpreter never runs an inconsistent program.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../core/kernel.hpp"

namespace ipuxl {

// Raised for features ipuxl does not implement; mapped to NotImplementedError.
struct NotImplemented : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Raised when storage cannot be allocated; mapped to MemoryError.
struct OutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Every enum below crosses the border with its numeric codes: the bindings
// export each one to Python (py::enum_, values named by the *_name
// functions of program.cpp, which are also the Python names), and the
// Python frontend reads its tables from there. kNum* bound the codes the
// bindings accept.
enum class TensorKind : int { Intermediate = 0, Input = 1, Constant = 2, Variable = 3 };
constexpr int kNumTensorKinds = 4;

// How the lowering treats an op: run by a kernel, or as program structure.
enum class OpKind : int {
  Kernel = 0,
  Call = 1,
  Repeat = 2,
  If = 3,
  HostLoad = 4,
  HostStore = 5,
  Collective = 6,   // across replicas: CollectiveDesc says which
  RemoteLoad = 7,   // from a remote buffer (Streaming Memory) into a tensor
  RemoteStore = 8,  // from a tensor into a remote buffer
  IpuCopy = 9,      // a Copy between IPUs: in[0] on the op's IPU (the source), out[0]
                    // on its tensor's IPU (the destination)
};
constexpr int kNumOpKinds = 10;

// What a Collective op computes, over the replicas of each group.
enum class CollectiveKind : int {
  AllReduce = 0,      // out = reduce(in) over the group; out has in's shape
  AllGather = 1,      // out = the group's inputs concatenated in rank order
  ReduceScatter = 2,  // out = rank k's slice of reduce(in) (in padded with zeros)
};
constexpr int kNumCollectiveKinds = 3;
// Reductions: PopXL's CollectiveOps, plus Local (no reduction: a replica
// keeps its own slice).
enum class ReduceOp : int { Add = 0, Mean = 1, Mul = 2, Min = 3, Max = 4, LogicalAnd = 5,
                            LogicalOr = 6, SquareAdd = 7, Local = 8 };
constexpr int kNumReduceOps = 9;

struct CollectiveDesc {
  CollectiveKind kind = CollectiveKind::AllReduce;
  ReduceOp op = ReduceOp::Add;
  // Group of each replica (replica index -> group id); members of a group in
  // ascending replica order have ranks 0, 1, ... Empty: one group of all.
  std::vector<int> group_of;
};

// A remote buffer: `entries` slots of one tensor shape per replica, held in
// Streaming Memory (host memory on the simulator), apart from device memory.
struct RemoteBufferDesc {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  int64_t entries = 1;
  size_t entry_bytes() const { return (size_t)shape_nelms(shape) * dtype_size(dtype); }
};

enum class TileSet : int { Compute = 0, IO = 1 };
constexpr int kNumTileSets = 2;

// PopART's execution contexts: which Poplar program an op of the main graph
// belongs to. Normal ops form the main program; WeightsFromHost ops run with
// weights_from_host, WeightsToHost ops with weights_to_host.
enum class ExecContext : int {
  Normal = 0,
  AccumulateOuterFragment = 1,
  WeightsFromHost = 2,
  WeightsToHost = 3,
  OptimizerFromHost = 4,
  Subgraph = 5,
};
constexpr int kNumExecContexts = 6;

// The IPU model's cost class of a kernel op (OpDef.cost, declared beside
// its shape rule): which estimator of cpp/model/costs.cpp prices it. Ops of
// any other kind are costed by their kind (Program). None: not declared; the
// model refuses a kernel op of class None.
enum class CostClass : int {
  None = 0,
  Elementwise,     // popops Unary/BinaryOp (CostParams: the per-vector figures)
  Matmul,          // poplin matmul on the AMP unit
  Conv,            // poplin convolution, forward: out = conv(in[0], weights in[1])
  ConvDataGrad,    // the gradient of the input: out = conv^T(dy in[0], weights in[1])
  ConvWeightsGrad, // the gradient of the weights: out = dy in[0] (x) x in[1]
  Pool,            // popnn pooling and its gradients
  Norm,            // popnn group/layer/batch normalisation: statistics, then whitening
  Reduce,          // popops::reduce
  Sort,            // TopK, ArgMax: costed like a reduction
  Scan,            // CumSum: costed like a reduction
  Softmax,         // popnn softmax
  Loss,            // a softmax-based loss
  Gather,          // popops::multiSlice / dynamicSlice
  Scatter,         // popops::multiUpdate / dynamicUpdate
  Copy,            // a copy that keeps its input's layout (identity, reshape)
  Rearrange,       // a copy into a new linear layout (transpose, slice, concat, split)
  View,            // an alias of its input: no program
  Fill,            // popops::fill
  Random,          // poprand
  Print,           // a host print (a stream to the host)
  CodeLoad,        // remote_code_load: moves a graph's code
  Collective,      // a kernel combining tensors of several IPUs (an in-model all-reduce)
  Program,         // not a kernel: costed by its kind (call, repeat, host IO, ...)
};
constexpr int kNumCostClasses = 24;

// Cost parameters of an op beside its class (OpDef.cost). Elementwise
// figures (popops PerformanceEstimation, shared/reference/ipu_model.md
// §3.1), each for [0] any type but float16, [1] float16; 0 leaves the
// class's default.
struct CostParams {
  std::string vertex;               // the vertex's op name ("Exp": popops::UnaryOp<Exp,float>)
  int64_t header[2] = {0, 0};       // worker cycles before the loop
  int64_t per_vector[2] = {0, 0};   // worker cycles per vector
  int64_t unroll[2] = {0, 0};       // elements per vector (0: the 64-bit vector width)
};

const char* tensor_kind_name(TensorKind k);
const char* op_kind_name(OpKind k);
const char* collective_kind_name(CollectiveKind k);
const char* reduce_op_name(ReduceOp r);
const char* tile_set_name(TileSet t);
const char* exec_context_name(ExecContext c);
const char* cost_class_name(CostClass c);

// Where a tensor or op lives: its virtual IPU and tile set.
struct Placement {
  int ipu = 0;
  TileSet tile_set = TileSet::Compute;
  bool operator==(const Placement& o) const { return ipu == o.ipu && tile_set == o.tile_set; }
};

struct TensorDesc {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  TensorKind kind = TensorKind::Intermediate;
  int graph = 0;
  Placement placement;
  std::vector<uint8_t> data;  // constants (and variables' initial values)
  int64_t nelms() const { return shape_nelms(shape); }
  size_t nbytes() const { return (size_t)nelms() * dtype_size(dtype); }
};

struct OpRecord {
  std::string type;    // the IR's op type (messages, profiles)
  std::string kernel;  // OpKind::Kernel: the registered kernel that runs it
  CostClass cost_class = CostClass::None;  // the IPU model's cost class (OpDef.cost)
  CostParams cost;                          // and its parameters
  std::string name;
  OpKind kind = OpKind::Kernel;
  int graph = 0;
  std::vector<int> in;   // tensor ids, -1 for an absent optional input
  std::vector<int> out;  // tensor ids
  Attrs attrs;           // kernel attributes only
  std::vector<int> graphs;                   // called graphs (Call, Repeat: 1; If: then, else)
  std::vector<std::pair<int, int>> aliases;  // (output index, input index) sharing storage
  std::vector<int> modified;                 // input indices the op writes
  bool side_effects = false;                 // must run even if no result is read
  Placement placement;
  ExecContext context = ExecContext::Normal;
  int stream = -1;          // HostLoad / HostStore
  int remote_buffer = -1;   // RemoteLoad / RemoteStore
  // Host-pass decisions (lowering/host_passes; never set in the faithful
  // program): a RemoteLoad whose output views its Streaming Memory entry
  // (view_remote_loads); a HostStore whose tensor lives in the run's host
  // array (direct_host_stores). The Engine checks what each relies on.
  bool view_streaming_memory = false;
  bool write_host_directly = false;
  // CostClass::CodeLoad: the graph whose code it loads (-1: none).
  int code_load_graph = -1;
  // Ops merged into one MultiExchange (popxl.transforms.merge_exchange)
  // share a group number: on the IPU their transfers are one exchange with
  // one sync (the IPU model's accounting; the engine runs them in order).
  int exchange_group = -1;
  CollectiveDesc collective;  // Collective
  int64_t trip_count = 0;   // Repeat
  // If: for each branch, the indices into `in` feeding the branch's inputs.
  std::vector<std::vector<int>> branch_inputs;
  // Host plan only: validated and built, but not run (nothing reads its results).
  bool skip = false;

  // Index into `in` of the caller tensor feeding input `i` of called graph
  // `branch` (0 for Call/Repeat). The one input mapping every layer uses.
  int caller_input(size_t branch, size_t i) const {
    return kind == OpKind::If ? branch_inputs[branch][i] : (int)i;
  }
  bool writes_input(int i) const {
    for (int m : modified)
      if (m == i) return true;
    return false;
  }
};

struct GraphDesc {
  std::string name;
  std::vector<int> inputs;
  std::vector<int> outputs;
  std::vector<int> ops;  // in schedule order
};

struct StreamDesc {
  std::string name;
  DType dtype = DType::Float32;
  Shape shape;
  bool host_to_device = true;
  size_t item_bytes() const { return (size_t)shape_nelms(shape) * dtype_size(dtype); }
};

class ProgramDesc {
 public:
  int add_graph(const std::string& name);
  int add_tensor(int graph, const std::string& name, DType dtype, const Shape& shape,
                 TensorKind kind, Placement placement = {});
  void set_tensor_data(int tensor, const uint8_t* data, size_t nbytes);
  int add_op(OpRecord op);
  int add_stream(const std::string& name, DType dtype, const Shape& shape, bool h2d);
  int add_remote_buffer(const std::string& name, DType dtype, const Shape& shape,
                        int64_t entries);
  void set_graph_io(int graph, std::vector<int> inputs, std::vector<int> outputs);

  // Checks every structural fact later layers rely on (call arities and
  // types, branch input maps, streams, aliases, modified indices, kernels
  // that exist, no recursion) and returns the graphs reachable from `main`,
  // each after every graph it calls. Iterative: call depth is bounded by
  // memory, not by the C stack.
  std::vector<int> validate(int main) const;

  std::vector<GraphDesc> graphs;
  std::vector<TensorDesc> tensors;
  std::vector<OpRecord> ops;
  std::vector<StreamDesc> streams;
  std::vector<RemoteBufferDesc> remote_buffers;
  int replicas = 1;  // replicas of this program in this process
  // Replicas of all processes (instances) together; 0: `replicas` (one
  // process). Collective groups (group_of) name global replicas.
  int global_replicas = 0;
  int total_replicas() const { return global_replicas > 0 ? global_replicas : replicas; }

  void check_graph(int g, const char* what) const;
  void check_tensor(int t, const char* what) const;

 private:
  void validate_op(const OpRecord& op) const;
};

}  // namespace ipuxl
