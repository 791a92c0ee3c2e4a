// ipuxl's Poplar: Graph, the variables with their tile mappings, compute
// sets of vertices, codelets, host streams, remote buffers and functions a
// program runs over. A virtual graph (createVirtualGraph) shares its parent's
// objects and sees a window of its tiles.
#pragma once
// The SDK's headers bring these in, and programs (the MNIST example) rely on it.
#include <cassert>
#include <cmath>
#include <cstring>
#include <cstdint>
#include <memory>
#include <sstream>
#include <type_traits>
#include <poplar/ArrayRef.hpp>
#include <poplar/DataStream.hpp>
#include <poplar/DebugContext.hpp>
#include <poplar/Device.hpp>
#include <poplar/FunctionBufferMappingType.hpp>
#include <poplar/GraphElements.hpp>
#include <poplar/HalfFloat.hpp>
#include <poplar/Interval.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <poplar/StringRef.hpp>
#include <poplar/Target.hpp>
#include <poplar/Tensor.hpp>
#include <poplar/exceptions.hpp>
#include <string>
#include <vector>

namespace poplar {

namespace ipuxl_detail {
struct GraphImpl;
/// Converts n host elements of C++ type `from` (a TypeCode) to device type `to`.
void convertElements(int fromCode, const void *src, int toCode, void *dst, std::size_t n);
template <class T> struct HostCode;
#define POPLAR_IPUXL_HOSTCODE(CT, C)                                                               \
  template <> struct HostCode<CT> {                                                                \
    static constexpr int value = C;                                                                \
  };
POPLAR_IPUXL_HOSTCODE(float, T_FLOAT)
POPLAR_IPUXL_HOSTCODE(double, -1)
POPLAR_IPUXL_HOSTCODE(half, T_HALF)
POPLAR_IPUXL_HOSTCODE(int, T_INT)
POPLAR_IPUXL_HOSTCODE(unsigned, T_UNSIGNED_INT)
POPLAR_IPUXL_HOSTCODE(short, T_SHORT)
POPLAR_IPUXL_HOSTCODE(unsigned short, T_UNSIGNED_SHORT)
POPLAR_IPUXL_HOSTCODE(char, T_CHAR)
POPLAR_IPUXL_HOSTCODE(signed char, T_SIGNED_CHAR)
POPLAR_IPUXL_HOSTCODE(unsigned char, T_UNSIGNED_CHAR)
POPLAR_IPUXL_HOSTCODE(bool, T_BOOL)
POPLAR_IPUXL_HOSTCODE(long long, T_LONGLONG)
POPLAR_IPUXL_HOSTCODE(unsigned long long, T_UNSIGNED_LONGLONG)
POPLAR_IPUXL_HOSTCODE(long, T_LONGLONG)
POPLAR_IPUXL_HOSTCODE(unsigned long, T_UNSIGNED_LONGLONG)
#undef POPLAR_IPUXL_HOSTCODE
} // namespace ipuxl_detail

/// How many times a graph is replicated (Graph's constructor).
struct replication_factor {
  explicit replication_factor(unsigned v) : value(v) {}
  unsigned value;
};

enum class VariableMappingMethod { NONE, LINEAR };
enum class TensorCloneMethod {
  PRESERVE_ORDER_AND_ALIASES, CREATE_NEW_ORDER, PRESERVE_ORDER_UNLESS_ALIASES,
  GATHER_AND_PRESERVE_TILE_ORDER_AND_ALIASES
};
enum class CodeletFileType { PreprocessedAsmSource, AsmSource, CSource, CppSource, IrSource, Object, Auto };

struct VertexPerfEstimate {
  std::uint64_t cycles = 0, flops = 0;
  VertexPerfEstimate() = default;
  VertexPerfEstimate(std::uint64_t c, std::uint64_t f = 0) : cycles(c), flops(f) {}
};

class Graph {
public:
  using TileToTensorMapping = std::vector<std::vector<Interval>>;
  struct ConnectionDesc {
    std::string field;
    Tensor tensor;
    ConnectionDesc(StringRef f, Tensor t) : field(f), tensor(std::move(t)) {}
  };

  /// A graph replicated r times: each replica gets target.getNumIPUs() / r
  /// IPUs (getTarget() describes one replica) and its own copy of every variable.
  explicit Graph(const Target &target, replication_factor r = replication_factor(1));
  explicit Graph(const Device &device, replication_factor r = replication_factor(1));
  Graph(const Target &target, unsigned replicationFactor);
  Graph(const Device &device, unsigned replicationFactor);
  Graph(Graph &&) noexcept;
  Graph &operator=(Graph &&) noexcept;
  ~Graph();

  const Target &getTarget() const;
  Graph createVirtualGraph(unsigned numTilesPerIPU);
  Graph createVirtualGraph(unsigned lowerTile, unsigned upperTile);
  Graph getTopLevelGraph();
  unsigned getReplicationFactor() const;

  // Variables and constants
  Tensor addVariable(const Type &type, ArrayRef<std::size_t> shape, const DebugContext &dc = {});
  Tensor addVariable(const Type &type, ArrayRef<std::size_t> shape, VariableMappingMethod m,
                     const DebugContext &dc = {});
  Tensor clone(const Tensor &t, const DebugContext &dc = {},
               TensorCloneMethod m = TensorCloneMethod::PRESERVE_ORDER_UNLESS_ALIASES);
  Tensor clone(const Type &type, const Tensor &t, const DebugContext &dc = {},
               TensorCloneMethod m = TensorCloneMethod::PRESERVE_ORDER_UNLESS_ALIASES);
  template <class T>
  Tensor addConstant(const Type &type, ArrayRef<std::size_t> shape, ArrayRef<T> values,
                     const DebugContext &dc = {}) {
    return ipuxlAddConstant(type, shape, ipuxl_detail::HostCode<T>::value, values.data(),
                            values.size(), false, dc);
  }
  template <class T>
  Tensor addConstant(const Type &type, ArrayRef<std::size_t> shape, const T *values,
                     const DebugContext &dc = {}) {
    std::size_t n = 1;
    for (auto d : shape) n *= d;
    return ipuxlAddConstant(type, shape, ipuxl_detail::HostCode<T>::value, values, n, false, dc);
  }
  template <class T, class = typename std::enable_if<std::is_arithmetic<T>::value ||
                                                     std::is_same<T, half>::value>::type>
  Tensor addConstant(const Type &type, ArrayRef<std::size_t> shape, T value, const DebugContext &dc = {}) {
    return ipuxlAddConstant(type, shape, ipuxl_detail::HostCode<T>::value, &value, 1, true, dc);
  }
  Tensor addConstantHalf(const Type &type, ArrayRef<std::size_t> shape, std::uint16_t bits,
                         const DebugContext &dc = {}) {
    half h = half::fromBits(bits);
    return ipuxlAddConstant(type, shape, ipuxl_detail::T_HALF, &h, 1, true, dc);
  }
  template <class T> void setInitialValue(const Tensor &t, T value) {
    ipuxlSetInitialValue(t, ipuxl_detail::HostCode<T>::value, &value, 1, true);
  }
  template <class T> void setInitialValue(const Tensor &t, ArrayRef<T> values) {
    ipuxlSetInitialValue(t, ipuxl_detail::HostCode<T>::value, values.data(), values.size(), false);
  }
  template <class T> void setInitialValue(const Tensor &t, const std::vector<T> &values) {
    ipuxlSetInitialValue(t, ipuxl_detail::HostCode<T>::value, values.data(), values.size(), false);
  }
  /// A vertex field that is not an edge (a scalar or Vector member).
  template <class T> void setInitialValue(const FieldRef &f, T value) {
    ipuxlSetFieldValue(f, ipuxl_detail::HostCode<T>::value, &value, 1);
  }
  template <class T> void setInitialValue(const FieldRef &f, ArrayRef<T> values) {
    ipuxlSetFieldValue(f, ipuxl_detail::HostCode<T>::value, values.data(), values.size());
  }
  template <class T> void setInitialValue(const FieldRef &f, const std::vector<T> &values) {
    ipuxlSetFieldValue(f, ipuxl_detail::HostCode<T>::value, values.data(), values.size());
  }
  bool isConstant(const Tensor &t) const { return t.containsConstant(); }
  /// A scalar UNSIGNED_INT constant holding each replica's index (0 .. replicas - 1); map it to a tile.
  Tensor addReplicationIndexConstant(const DebugContext &dc = {});

  // Tile mapping
  void setTileMapping(const Tensor &t, unsigned tile);
  void setTileMapping(const Tensor &t, const TileToTensorMapping &mapping);
  void setTileMapping(VertexRef v, unsigned tile);
  TileToTensorMapping getTileMapping(const Tensor &t, bool requireComplete = true) const;
  TileToTensorMapping getTileMapping(const Tensor &t, bool *isComplete) const;
  unsigned getTileMapping(VertexRef v) const;

  // Compute
  ComputeSet addComputeSet(const DebugContext &dc = {});
  VertexRef addVertex(ComputeSet cs, StringRef vertexType);
  VertexRef addVertex(ComputeSet cs, StringRef vertexType, ArrayRef<ConnectionDesc> connections);
  void connect(FieldRef field, const Tensor &t);
  void connect(FieldRef field, ArrayRef<Tensor> tensors);
  void connect(FieldRef field, const std::vector<Tensor> &tensors) { connect(field, ArrayRef<Tensor>(tensors)); }
  void setFieldSize(FieldRef field, std::size_t size);
  std::size_t getFieldSize(FieldRef field) const;
  void setPerfEstimate(const VertexRef &v, std::uint64_t cycles, std::uint64_t flops = 0);
  void setPerfEstimate(const VertexRef &v, const VertexPerfEstimate &e) { setPerfEstimate(v, e.cycles, e.flops); }
  void setCycleEstimate(const VertexRef &v, std::uint64_t cycles) { setPerfEstimate(v, cycles); }

  /// Compiles (for the host) and loads the codelets of a C++ file or of a
  /// `.gp` object made by ipuxl's popc; returns whether any vertex type was added.
  bool addCodelets(StringRef src, CodeletFileType type = CodeletFileType::Auto,
                   StringRef compileFlags = "", StringRef targetName = "");
  void addCodelets(ArrayRef<std::string> xs, StringRef compileFlags = "");
  void addCodelets(std::stringstream &stream, StringRef compileFlags = "",
                   CodeletFileType type = CodeletFileType::CppSource, StringRef targetName = "");
  bool hasCodelet(StringRef vertexType) const;

  // Host I/O
  void createHostWrite(StringRef handle, const Tensor &t, bool rearrangeOnHost = false);
  void createHostRead(StringRef handle, const Tensor &t, bool rearrangeOnHost = false);
  DataStream addHostToDeviceFIFO(StringRef handle, const Type &type, std::size_t numElements,
                                 ReplicatedStreamMode mode = ReplicatedStreamMode::REPLICATE,
                                 const OptionFlags &options = {});
  DataStream addDeviceToHostFIFO(StringRef handle, const Type &type, std::size_t numElements,
                                 const OptionFlags &options = {});
  RemoteBuffer addRemoteBuffer(StringRef handle, const Type &type, std::size_t numElements,
                               std::size_t repeats = 1, bool rearrangeOnHost = false,
                               bool optimiseMemory = false);

  Function addFunction(const program::Program &program);
  /// A buffer for `function`'s code (in remote memory for REMOTE), loaded
  /// with program::Copy(buffer, function). ipuxl: the code also comes with
  /// the executable, so a Call before the first load runs it.
  FunctionBuffer addFunctionBuffer(const Function &function, FunctionBufferMappingType mappingType);

  // ipuxl internals
  ipuxl_detail::GraphImpl &ipuxlImpl() const { return *impl_; }
  std::shared_ptr<ipuxl_detail::GraphImpl> ipuxlShared() const { return impl_; }
  unsigned ipuxlTileBase() const { return tileBase_; }
  Tensor ipuxlAddConstant(const Type &type, ArrayRef<std::size_t> shape, int hostCode, const void *values,
                          std::size_t n, bool splat, const DebugContext &dc);
  void ipuxlSetInitialValue(const Tensor &t, int hostCode, const void *values, std::size_t n, bool splat);
  void ipuxlSetFieldValue(const FieldRef &f, int hostCode, const void *values, std::size_t n);

private:
  Graph(std::shared_ptr<ipuxl_detail::GraphImpl> impl, unsigned tileBase, Target target);
  std::shared_ptr<ipuxl_detail::GraphImpl> impl_;
  unsigned tileBase_ = 0;
  std::unique_ptr<Target> target_;
};

} // namespace poplar
