// ipuxl's Poplar runtime: the internal objects behind Graph, Tensor,
// Program and Engine. Not installed; PopLibs' built-ins include it.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <poplar/DataStream.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <poplar/Tensor.hpp>
#include <poplar/VertexRegistry.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace poplar {
namespace ipuxl_detail {

struct TensorRep {
  Type type;
  std::vector<std::size_t> shape;
  std::vector<VarRegion> regions; // row-major order, adjacent runs merged
  std::vector<std::size_t> starts; // flat index where each region starts
  std::size_t n = 0;
};

/// Builds a tensor from its regions (merging adjacent runs of one variable).
Tensor makeTensor(Type type, std::vector<std::size_t> shape, const std::vector<VarRegion> &regions);
/// The regions covering flat elements [b, e) of t, appended to out.
void appendFlatRange(const TensorRep &t, std::size_t b, std::size_t e, std::vector<VarRegion> &out);
std::size_t product(const std::vector<std::size_t> &v);

struct VarInfo {
  Type type;
  std::size_t n = 0;
  std::string name;
  std::vector<std::int32_t> tile; // per element; -1: unmapped
  bool constant = false;
  bool hasInit = false;
  bool replicationIndex = false; // addReplicationIndexConstant: each replica's index (UNSIGNED_INT)
  std::vector<char> init; // n * size bytes when hasInit
};

struct FieldConn {
  bool set = false;
  Tensor tensor;                // edge scalar / vector / value via tensor
  std::vector<Tensor> list;     // vector list / vector of edges
  std::vector<bool> listSet;
  long size = -1;               // setFieldSize
  std::vector<char> value;      // value fields (setInitialValue)
  std::size_t valueCount = 0;
};

struct VertexInst {
  unsigned type = 0;
  unsigned cs = 0;
  std::int64_t tile = -1;
  bool hasPerf = false;
  std::uint64_t cycles = 0, flops = 0;
  std::vector<FieldConn> fields;
};

struct ComputeSetInfo {
  std::string name;
  std::vector<unsigned> vertices;
};

struct GraphImpl {
  Target target;                 // of one replica
  unsigned replicationFactor = 1;
  std::vector<VarInfo> vars;
  std::vector<VertexInst> vertices;
  std::vector<ComputeSetInfo> computeSets;
  std::vector<std::shared_ptr<VertexTypeInfo>> vertexTypes;
  std::map<std::string, unsigned> typeByName;
  std::map<std::string, Tensor> hostWrites, hostReads;
  std::map<std::string, std::shared_ptr<StreamInfo>> streams;
  std::map<std::string, std::shared_ptr<RemoteBufferInfo>> remoteBuffers;
  std::vector<program::Program> functions;
  std::vector<unsigned> functionBuffers;   // the Function of each FunctionBuffer
  std::vector<std::string> codeletSources; // for the profile
  /// Registers vertex types (from a codelet object or PopLibs); returns how many were new.
  unsigned addVertexTypes(const std::vector<VertexTypeInfo> &types);
};

enum class ProgKind {
  Sequence, Execute, CopyTensor, CopyFromStream, CopyToStream, CopyFromRemote, CopyToRemote, Repeat,
  RepeatWhile, If, Switch, Call, PrintTensor, WriteUndef, Sync, Error, Abort, CrossReplica, LoadFunction
};

/// A collective across replicas (made by ipuxl's gcl): for each pair k,
/// srcs[k] of every replica of a group combine into dsts[k] of each.
struct CollectiveInfo {
  enum Kind { AllReduce, ReduceScatter, AllGather, Broadcast };
  enum Op { ADD, MEAN, MUL, MIN, MAX, LOGICAL_AND, LOGICAL_OR, SQUARE_ADD, LOCAL };
  Kind kind = AllReduce;
  Op op = ADD;
  std::vector<std::vector<unsigned>> groups; // replicas, in rank order, partitioning all replicas
  std::vector<Tensor> srcs, dsts;
  unsigned root = 0;                         // Broadcast: the rank in its group that sends
};

struct ProgramImpl {
  ProgKind kind = ProgKind::Sequence;
  std::string name;
  std::vector<program::Program> children; // Sequence; Repeat body [0]; If [then, else]; While [cond, body]
  unsigned cs = 0;                        // Execute; Call, LoadFunction: function id
  Tensor src, dst, aux;                   // copies, predicates, control, offset (aux)
  std::shared_ptr<const StreamInfo> stream;
  std::shared_ptr<const RemoteBufferInfo> remote;
  unsigned count = 0;                     // Repeat
  bool whileTrue = true;
  std::vector<std::pair<std::int32_t, program::Program>> cases; // Switch
  program::Program defaultCase{std::shared_ptr<ProgramImpl>()}; // set when hasDefault
  bool hasDefault = false;
  PrintTensorFmt fmt;
  std::shared_ptr<const CollectiveInfo> collective; // CrossReplica
};

/// A graph and its programs after validation (what an Executable holds).
struct CompiledGraph {
  std::shared_ptr<GraphImpl> graph;
  std::vector<program::Program> programs;
  OptionFlags options;
};

/// Checks the graph's rules (mappings, connections, one writer per element)
/// for everything the programs reach; throws the SDK's error types.
std::shared_ptr<CompiledGraph> compile(const Graph &graph, ArrayRef<program::Program> progs,
                                       const OptionFlags &opts);

/// The value of the environment variable `name` (empty when unset). The
/// only place ipuxl's Poplar reads the environment.
std::string readEnvironment(const char *name);

/// The folder of ipuxl's Poplar headers (found from libpoplar.so's own path).
std::string includeDir();

/// Compiles a codelet source for the host into a shared object at `out`;
/// throws graph_program_compilation_error with the compiler's message.
void compileCodeletObject(const std::string &src, const std::string &out, const std::string &flags);
/// Loads the vertex types of a codelet object.
std::vector<VertexTypeInfo> loadCodeletObject(const std::string &path);

std::string describeTensor(const Tensor &t, const GraphImpl &g);

} // namespace ipuxl_detail
} // namespace poplar
