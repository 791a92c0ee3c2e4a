// ipuxl's Poplar: Executable, a compiled graph and its programs. ipuxl
// compiles by validating the graph and keeping it with the programs; an
// Executable serialises to a file that names the process that made it (it
// loads back in that process only, see docs/poplar.md).
#pragma once
#include <iosfwd>
#include <memory>
#include <poplar/ArrayRef.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <vector>

namespace poplar {

class Graph;
class Target;
namespace ipuxl_detail {
struct CompiledGraph;
}

class Executable {
public:
  Executable(Executable &&) noexcept;
  Executable &operator=(Executable &&) noexcept;
  ~Executable();
  void serialize(std::ostream &out) const;
  static Executable deserialize(std::istream &in);
  // ipuxl
  explicit Executable(std::shared_ptr<ipuxl_detail::CompiledGraph> c);
  const std::shared_ptr<ipuxl_detail::CompiledGraph> &ipuxlCompiled() const { return compiled_; }

private:
  std::shared_ptr<ipuxl_detail::CompiledGraph> compiled_;
};

class ProgressFunc {
public:
  ProgressFunc() = default;
  template <class F> ProgressFunc(F) {}
};

Executable compileGraph(const Graph &graph, ArrayRef<program::Program> progs,
                        const OptionFlags &opt = {}, ProgressFunc progressCallBack = ProgressFunc(),
                        const DebugContext &debugContext = {});
Executable compileGraph(Graph &&graph, ArrayRef<program::Program> progs, const OptionFlags &opt = {},
                        ProgressFunc progressCallBack = ProgressFunc(), const DebugContext &debugContext = {});

} // namespace poplar
