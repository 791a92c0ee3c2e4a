// ipuxl's Poplar: the control program constructors (each makes a node of
// the program tree; the Engine interprets it).
#include "impl.hpp"

#include <poplar/exceptions.hpp>

namespace poplar {
using namespace ipuxl_detail;

namespace {
std::shared_ptr<ProgramImpl> node(ProgKind k, const DebugContext &dc) {
  auto p = std::make_shared<ProgramImpl>();
  p->kind = k;
  p->name = dc.getPathName();
  return p;
}
void checkScalarPredicate(const Tensor &t, const char *what) {
  if (t.numElements() != 1)
    throw control_program_error(std::string(what) + ": the predicate must have one element, it has " +
                                std::to_string(t.numElements()) + " (shape " + t.shapeToString() + ")");
  if (t.elementType().isFloatingPoint())
    throw control_program_error(std::string(what) + ": the predicate must be of an integral or bool type, not " +
                                t.elementType().toString());
}
void checkSameSize(const Tensor &a, std::size_t n, const Type &type, const std::string &what) {
  if (a.numElements() != n)
    throw poplar_error(what + ": the tensor has " + std::to_string(a.numElements()) + " elements, the other side " +
                       std::to_string(n));
  if (a.elementType() != type)
    throw poplar_error(what + ": element types differ (" + a.elementType().toString() + " and " + type.toString() + ")");
}
} // namespace

namespace program {

Program::Program() : impl_(node(ProgKind::Sequence, {})) {}
bool Program::isEmpty() const { return impl_->kind == ProgKind::Sequence && impl_->children.empty(); }

Sequence::Sequence(const DebugContext &dc) : Program(node(ProgKind::Sequence, dc)) {}
Sequence::Sequence(std::initializer_list<Program> ps, const DebugContext &dc) : Sequence(dc) {
  for (const auto &p : ps) add(p);
}
Sequence::Sequence(ArrayRef<Program> ps, const DebugContext &dc) : Sequence(dc) {
  for (const auto &p : ps) add(p);
}
void Sequence::add(const Program &p) { impl_->children.push_back(p); }

Execute::Execute(ComputeSet cs, const DebugContext &dc) : Program(node(ProgKind::Execute, dc)) { impl_->cs = cs.getId(); }
Execute::Execute(ComputeSet cs, const Tensor &, const DebugContext &dc) : Execute(cs, dc) {}

Copy::Copy(const Tensor &src, const Tensor &dst, bool, const DebugContext &dc) : Program(node(ProgKind::CopyTensor, dc)) {
  if (src.numElements() != dst.numElements())
    throw graph_connection_error("Copy: source " + src.shapeToString() + " has " + std::to_string(src.numElements()) +
                                 " elements, destination " + dst.shapeToString() + " has " + std::to_string(dst.numElements()));
  if (src.elementType() != dst.elementType())
    throw graph_connection_error("Copy: source is " + src.elementType().toString() + ", destination is " +
                                 dst.elementType().toString());
  if (dst.containsConstant()) throw graph_connection_error("Copy: the destination is a constant");
  impl_->src = src;
  impl_->dst = dst;
}
Copy::Copy(const DataStream &s, const Tensor &dst, bool, const DebugContext &dc) : Program(node(ProgKind::CopyFromStream, dc)) {
  if (!s.ipuxlInfo().hostToDevice) throw poplar_error("Copy: stream '" + s.handle() + "' is device-to-host; it cannot be read");
  checkSameSize(dst, s.numElements(), s.elementType(), "Copy from stream '" + s.handle() + "'");
  if (dst.containsConstant()) throw graph_connection_error("Copy: the destination is a constant");
  impl_->stream = std::make_shared<StreamInfo>(s.ipuxlInfo());
  impl_->dst = dst;
}
Copy::Copy(const Tensor &src, const DataStream &s, bool, const DebugContext &dc) : Program(node(ProgKind::CopyToStream, dc)) {
  if (s.ipuxlInfo().hostToDevice) throw poplar_error("Copy: stream '" + s.handle() + "' is host-to-device; it cannot be written");
  checkSameSize(src, s.numElements(), s.elementType(), "Copy to stream '" + s.handle() + "'");
  impl_->stream = std::make_shared<StreamInfo>(s.ipuxlInfo());
  impl_->src = src;
}
Copy::Copy(const DataStream &s, const Tensor &dst, const OptionFlags &, const DebugContext &dc) : Copy(s, dst, false, dc) {}
Copy::Copy(const Tensor &src, const DataStream &s, const OptionFlags &, const DebugContext &dc) : Copy(src, s, false, dc) {}
Copy::Copy(const RemoteBuffer &b, const Tensor &dst, const DebugContext &dc) : Program(node(ProgKind::CopyFromRemote, dc)) {
  checkSameSize(dst, b.numElements(), b.elementType(), "Copy from remote buffer '" + b.handle() + "'");
  impl_->remote = std::make_shared<RemoteBufferInfo>(b.ipuxlInfo());
  impl_->dst = dst;
}
Copy::Copy(const RemoteBuffer &b, const Tensor &dst, const Tensor &offset, const DebugContext &dc) : Copy(b, dst, dc) {
  impl_->aux = offset;
}
Copy::Copy(const Tensor &src, const RemoteBuffer &b, const DebugContext &dc) : Program(node(ProgKind::CopyToRemote, dc)) {
  checkSameSize(src, b.numElements(), b.elementType(), "Copy to remote buffer '" + b.handle() + "'");
  impl_->remote = std::make_shared<RemoteBufferInfo>(b.ipuxlInfo());
  impl_->src = src;
}
Copy::Copy(const Tensor &src, const RemoteBuffer &b, const Tensor &offset, const DebugContext &dc) : Copy(src, b, dc) {
  impl_->aux = offset;
}

Repeat::Repeat(unsigned count, const Program &body, const DebugContext &dc) : Program(node(ProgKind::Repeat, dc)) {
  impl_->count = count;
  impl_->children.push_back(body);
}

RepeatWhileTrue::RepeatWhileTrue(const Program &cond, const Tensor &pred, const Program &body, const DebugContext &dc)
    : Program(node(ProgKind::RepeatWhile, dc)) {
  checkScalarPredicate(pred, "RepeatWhileTrue");
  impl_->children = {cond, body};
  impl_->aux = pred;
  impl_->whileTrue = true;
}
RepeatWhileFalse::RepeatWhileFalse(const Program &cond, const Tensor &pred, const Program &body, const DebugContext &dc)
    : Program(node(ProgKind::RepeatWhile, dc)) {
  checkScalarPredicate(pred, "RepeatWhileFalse");
  impl_->children = {cond, body};
  impl_->aux = pred;
  impl_->whileTrue = false;
}

If::If(const Tensor &pred, const Program &t, const Program &f, const DebugContext &dc) : Program(node(ProgKind::If, dc)) {
  checkScalarPredicate(pred, "If");
  impl_->children = {t, f};
  impl_->aux = pred;
}

Switch::Switch(const Tensor &control, const DebugContext &dc) : Program(node(ProgKind::Switch, dc)) {
  if (control.numElements() != 1 || control.elementType().isFloatingPoint())
    throw control_program_error("Switch: the control tensor must be a scalar of an integral type, got " +
                                control.elementType().toString() + " " + control.shapeToString());
  impl_->aux = control;
}
Switch::Switch(const Tensor &control, const Program &def, const DebugContext &dc) : Switch(control, dc) {
  impl_->defaultCase = def;
  impl_->hasDefault = true;
}
Switch::Switch(const Tensor &control, const std::vector<std::pair<std::int32_t, Program>> &cases, const DebugContext &dc)
    : Switch(control, dc) {
  for (const auto &c : cases) add(c.first, c.second);
}
Switch::Switch(const Tensor &control, const std::vector<std::pair<std::int32_t, Program>> &cases, const Program &def,
               const DebugContext &dc)
    : Switch(control, def, dc) {
  for (const auto &c : cases) add(c.first, c.second);
}
Switch &Switch::add(std::int32_t value, const Program &body) {
  for (const auto &c : impl_->cases)
    if (c.first == value) throw control_program_error("Switch: case " + std::to_string(value) + " given twice");
  impl_->cases.emplace_back(value, body);
  return *this;
}
Switch Switch::switchWithBoundsChecking(const Tensor &control, const std::vector<std::pair<std::int32_t, Program>> &cases,
                                        const DebugContext &dc) {
  Switch s(control, cases, dc);
  auto p = node(ProgKind::Abort, dc);
  p->name = "Switch: control value out of range";
  s.impl_->defaultCase = Program(p);
  s.impl_->hasDefault = true;
  return s;
}

Copy::Copy(const FunctionBuffer &buffer, const Function &f, const DebugContext &dc)
    : Program(node(ProgKind::LoadFunction, dc)) {
  if (buffer.ipuxlFunction() != f.getId())
    throw poplar_error("Copy: FunctionBuffer " + std::to_string(buffer.getId()) + " holds the code of function " +
                       std::to_string(buffer.ipuxlFunction()) + ", not of function " + std::to_string(f.getId()));
  impl_->cs = f.getId();
}

Call::Call(Function f, const DebugContext &dc) : Program(node(ProgKind::Call, dc)) { impl_->cs = f.getId(); }

PrintTensor::PrintTensor(const Tensor &t, const DebugContext &dc) : PrintTensor("", t, dc) {}
PrintTensor::PrintTensor(StringRef title, const Tensor &t, const DebugContext &dc) : PrintTensor(title, t, PrintTensorFmt(), dc) {}
PrintTensor::PrintTensor(StringRef title, const Tensor &t, const PrintTensorFmt &fmt, const DebugContext &dc)
    : Program(node(ProgKind::PrintTensor, dc)) {
  impl_->name = title;
  impl_->src = t;
  impl_->fmt = fmt;
}

WriteUndef::WriteUndef(const Tensor &t, const DebugContext &dc) : Program(node(ProgKind::WriteUndef, dc)) { impl_->dst = t; }
Sync::Sync(SyncType, const DebugContext &dc) : Program(node(ProgKind::Sync, dc)) {}

ErrorProgram::ErrorProgram(StringRef message, const Tensor &debugTensor, const DebugContext &dc)
    : Program(node(ProgKind::Error, dc)) {
  impl_->name = message;
  impl_->src = debugTensor;
}
AbortOnCondition::AbortOnCondition(const Tensor &pred, StringRef message, const DebugContext &dc)
    : Program(node(ProgKind::Abort, dc)) {
  checkScalarPredicate(pred, "AbortOnCondition");
  impl_->aux = pred;
  impl_->name = message.empty() ? std::string("AbortOnCondition") : std::string(message);
}

} // namespace program
} // namespace poplar
