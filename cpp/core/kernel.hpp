// The contract between the engine and op kernels.
//
// Every op type that is not control flow (Call, Repeat, If) or host IO is run
// by a Kernel. The engine allocates every tensor once, at compile time, so a
// kernel is built with fixed TensorRefs and `run()` does only arithmetic.
// A factory validates everything it relies on (counts, dtypes, shapes,
// attributes) and throws ipuxl::Error naming the op, so that run() can never
// read or write out of bounds.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "dtype.hpp"

namespace ipuxl {

using Shape = std::vector<int64_t>;

// Raised for invalid programs or inputs; mapped to Python ValueError.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// Raised for runtime failures (stream exhausted, index out of range, ...);
// mapped to Python RuntimeError.
struct RunError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string shape_str(const Shape& s);
int64_t shape_nelms(const Shape& s);

// A tensor as a kernel sees it: fixed type, shape and storage.
struct TensorRef {
  DType dtype = DType::Float32;
  Shape shape;
  int64_t nelms = 0;
  uint8_t* data = nullptr;
  std::string name;

  size_t nbytes() const { return (size_t)nelms * dtype_size(dtype); }
  int64_t rank() const { return (int64_t)shape.size(); }
  template <class T> T* as() const { return reinterpret_cast<T*>(data); }
};

using AttrValue = std::variant<int64_t, double, std::string, std::vector<int64_t>,
                               std::vector<double>>;

// Op attributes as passed from Python. Getters throw Error naming the op and
// the attribute when one is missing or has the wrong type.
class Attrs {
 public:
  std::map<std::string, AttrValue> values;
  std::string op_name;

  bool has(const std::string& k) const { return values.count(k) != 0; }
  int64_t i(const std::string& k) const;
  int64_t i(const std::string& k, int64_t dflt) const;
  double f(const std::string& k) const;
  double f(const std::string& k, double dflt) const;
  std::string s(const std::string& k) const;
  std::string s(const std::string& k, const std::string& dflt) const;
  std::vector<int64_t> ints(const std::string& k) const;
  std::vector<int64_t> ints(const std::string& k, const std::vector<int64_t>& dflt) const;
  std::vector<double> floats(const std::string& k) const;
};

// What a kernel factory receives.
struct OpDesc {
  std::string type;  // e.g. "Add"
  std::string name;  // the op's name in the IR, for messages
  Attrs attrs;
  std::vector<TensorRef*> in;   // nullptr for an absent optional input
  std::vector<TensorRef*> out;
  // Inputs that only the host ever writes (weights no op updates,
  // constants): a kernel may cache work derived from them until
  // RunContext::host_write_epoch moves.
  std::vector<int> host_only_inputs;

  [[noreturn]] void fail(const std::string& msg) const;
  // Checks that the op has exactly n_in inputs (all present) and n_out outputs.
  void expect_arity(size_t n_in, size_t n_out) const;
  void expect_same_dtype(const TensorRef& a, const TensorRef& b) const;
  void expect_shape(const TensorRef& t, const Shape& s) const;
};

// Services a running kernel may use.
struct RunContext {
  uint64_t run_index = 0;  // number of Engine::run calls before this one
  // Changes whenever the host writes any tensor (weights_from_host, ...):
  // kernels caching a transformed copy of a tensor no op writes (a packed
  // weight matrix) refresh it when this moves.
  uint64_t host_write_epoch = 0;
  int replica = 0;  // the replica whose state the kernel runs on
};

class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void run(RunContext& ctx) = 0;
};

// A kernel from a lambda: most kernels are a closure over TensorRefs.
class FnKernel : public Kernel {
 public:
  explicit FnKernel(std::function<void(RunContext&)> fn) : fn_(std::move(fn)) {}
  void run(RunContext& ctx) override { fn_(ctx); }

 private:
  std::function<void(RunContext&)> fn_;
};

using KernelFactory = std::function<std::unique_ptr<Kernel>(const OpDesc&)>;

class KernelRegistry {
 public:
  static bool add(const std::string& op_type, KernelFactory f);
  static const KernelFactory* find(const std::string& op_type);
  static std::vector<std::string> names();
};

template <class F>
std::unique_ptr<Kernel> make_kernel(F&& f) {
  return std::make_unique<FnKernel>(std::forward<F>(f));
}

}  // namespace ipuxl

#define IPUXL_CONCAT_(a, b) a##b
#define IPUXL_CONCAT(a, b) IPUXL_CONCAT_(a, b)
// Registers FACTORY (a callable OpDesc -> unique_ptr<Kernel>) for op TYPE.
#define IPUXL_REGISTER_KERNEL(TYPE, FACTORY)                                    \
  static const bool IPUXL_CONCAT(ipuxl_kernel_reg_, __COUNTER__) =              \
      ::ipuxl::KernelRegistry::add(TYPE, FACTORY)
