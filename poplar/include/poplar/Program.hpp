// ipuxl's Poplar: control programs. A Program is a node of the program tree
// the Engine runs: Sequence, Execute, Copy (tensors, streams, remote buffers),
// Repeat, RepeatWhileTrue/False, If, Switch, Call, PrintTensor, WriteUndef, Sync.
#pragma once
#include <cstdint>
#include <memory>
#include <poplar/ArrayRef.hpp>
#include <poplar/DataStream.hpp>
#include <poplar/DebugContext.hpp>
#include <poplar/GraphElements.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Tensor.hpp>
#include <string>
#include <utility>
#include <vector>

namespace poplar {

enum class SyncType { INTERNAL, EXTERNAL, GLOBAL };
class PrintTensorFmt {
public:
  enum class SummariseMode { SUMMARISE, NO_SUMMARISE };
  enum class FloatFormat { Auto, Fixed, Scientific, None };
  PrintTensorFmt(unsigned summariseThreshold = 16, unsigned edgeItems = 3, unsigned precision = 7,
                 FloatFormat floatFormat = FloatFormat::Fixed, char separator = ' ', char openBracket = '[',
                 char closeBracket = ']')
      : summariseThreshold(summariseThreshold), edgeItems(edgeItems), precision(precision),
        floatFormat(floatFormat), separator(separator), openBracket(openBracket), closeBracket(closeBracket) {}
  unsigned summariseThreshold, edgeItems, precision;
  FloatFormat floatFormat;
  char separator, openBracket, closeBracket;
};

namespace ipuxl_detail {
struct ProgramImpl;
}

namespace program {

class Program {
public:
  Program();
  bool isEmpty() const;
  // ipuxl internals
  explicit Program(std::shared_ptr<ipuxl_detail::ProgramImpl> impl) : impl_(std::move(impl)) {}
  const std::shared_ptr<ipuxl_detail::ProgramImpl> &ipuxlImpl() const { return impl_; }

protected:
  std::shared_ptr<ipuxl_detail::ProgramImpl> impl_;
};

class Sequence : public Program {
public:
  Sequence(const DebugContext &dc = {});
  Sequence(std::initializer_list<Program> programs, const DebugContext &dc = {});
  explicit Sequence(ArrayRef<Program> programs, const DebugContext &dc = {});
  void add(const Program &p);
  Sequence &operator+=(const Program &p) { add(p); return *this; }
};

class Execute : public Program {
public:
  explicit Execute(ComputeSet cs, const DebugContext &dc = {});
  Execute(ComputeSet cs, const Tensor &consumedVars, const DebugContext &dc = {});
};

class Copy : public Program {
public:
  Copy(const Tensor &src, const Tensor &dst, bool dontOutline = false, const DebugContext &dc = {});
  Copy(const DataStream &stream, const Tensor &dst, bool optimiseMemory = false, const DebugContext &dc = {});
  Copy(const Tensor &src, const DataStream &stream, bool optimiseMemory = false, const DebugContext &dc = {});
  Copy(const DataStream &stream, const Tensor &dst, const OptionFlags &options, const DebugContext &dc = {});
  Copy(const Tensor &src, const DataStream &stream, const OptionFlags &options, const DebugContext &dc = {});
  Copy(const RemoteBuffer &buffer, const Tensor &dst, const DebugContext &dc = {});
  Copy(const RemoteBuffer &buffer, const Tensor &dst, const Tensor &offset, const DebugContext &dc = {});
  Copy(const Tensor &src, const RemoteBuffer &buffer, const DebugContext &dc = {});
  Copy(const Tensor &src, const RemoteBuffer &buffer, const Tensor &offset, const DebugContext &dc = {});
  /// Loads the code of `function` from `buffer` (made for that Function).
  Copy(const FunctionBuffer &buffer, const Function &function, const DebugContext &dc = {});
};

class Repeat : public Program {
public:
  Repeat(unsigned count, const Program &body, const DebugContext &dc = {});
};

class RepeatWhileTrue : public Program {
public:
  RepeatWhileTrue(const Program &cond, const Tensor &predicate, const Program &body,
                  const DebugContext &dc = {});
};

class RepeatWhileFalse : public Program {
public:
  RepeatWhileFalse(const Program &cond, const Tensor &predicate, const Program &body,
                   const DebugContext &dc = {});
};

class If : public Program {
public:
  If(const Tensor &predicate, const Program &trueBody, const Program &falseBody,
     const DebugContext &dc = {});
};

class Switch : public Program {
public:
  Switch(const Tensor &control, const DebugContext &dc = {});
  Switch(const Tensor &control, const Program &defaultCaseBody, const DebugContext &dc = {});
  Switch(const Tensor &control, const std::vector<std::pair<std::int32_t, Program>> &cases,
         const DebugContext &dc = {});
  Switch(const Tensor &control, const std::vector<std::pair<std::int32_t, Program>> &cases,
         const Program &defaultCaseBody, const DebugContext &dc = {});
  Switch &add(std::int32_t value, const Program &body);
  static Switch switchWithBoundsChecking(const Tensor &control,
                                         const std::vector<std::pair<std::int32_t, Program>> &cases,
                                         const DebugContext &dc = {});
};

class Call : public Program {
public:
  explicit Call(Function f, const DebugContext &dc = {});
};

class PrintTensor : public Program {
public:
  explicit PrintTensor(const Tensor &t, const DebugContext &dc = {});
  PrintTensor(StringRef title, const Tensor &t, const DebugContext &dc = {});
  PrintTensor(StringRef title, const Tensor &t, const PrintTensorFmt &fmt, const DebugContext &dc = {});
};

class WriteUndef : public Program {
public:
  explicit WriteUndef(const Tensor &t, const DebugContext &dc = {});
};

class Sync : public Program {
public:
  explicit Sync(SyncType type, const DebugContext &dc = {});
};

class AssumeEqualAcrossReplicas : public Program {
public:
  AssumeEqualAcrossReplicas(const Program &p, const DebugContext & = {}) : Program(p) {}
};

class ErrorProgram : public Program {
public:
  ErrorProgram(StringRef message, const Tensor &debugTensor, const DebugContext &dc = {});
};

class AbortOnCondition : public Program {
public:
  AbortOnCondition(const Tensor &predicate, StringRef message = "", const DebugContext &dc = {});
};

} // namespace program
} // namespace poplar
