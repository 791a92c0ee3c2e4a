#include "executable.hpp"

namespace ipuxl {

namespace {

class Compiler {
 public:
  explicit Compiler(Executable& x) : x_(x) {}

  int pc() const { return (int)x_.code.size(); }
  void emit(Instr i) { x_.code.push_back(i); }

  // Depth of this recursion is the nesting of one Function's body tree
  // (a few levels), never the call depth: calls are jumps to entry pcs.
  void node(const Node& n, const std::vector<int>& fn_entry) {
    switch (n.kind) {
      case NodeKind::Sequence:
        for (const auto& c : n.body) node(c, fn_entry);
        return;
      case NodeKind::Execute:
        x_.kernel_ops.push_back(n.op);
        emit({Code::Exec, (int32_t)x_.kernel_ops.size() - 1});
        return;
      case NodeKind::Copy:
        emit({Code::Copy, n.src, n.dst});
        return;
      case NodeKind::Bind:
        if (n.bind.empty()) return;
        x_.binds.push_back(n.bind);
        emit({Code::Bind, (int32_t)x_.binds.size() - 1});
        return;
      case NodeKind::Call:
        emit({Code::Call, fn_entry[n.fn]});
        return;
      case NodeKind::Repeat: {
        const int slot = x_.num_counters++;
        const int begin = pc();
        emit({Code::RepeatBegin, slot, -1, n.count});
        node(n.body[0], fn_entry);
        emit({Code::RepeatEnd, slot, begin + 1});
        x_.code[begin].b = pc();
        return;
      }
      case NodeKind::If: {
        const int at = pc();
        emit({Code::If, n.cond});
        node(n.body[0], fn_entry);
        const int jump = pc();
        emit({Code::Jump});
        x_.code[at].b = pc();
        node(n.body[1], fn_entry);
        x_.code[jump].a = pc();
        x_.code[at].n = pc();
        return;
      }
      case NodeKind::StreamIn:
        emit({Code::StreamIn, n.stream, n.dst});
        return;
      case NodeKind::StreamOut:
        emit({Code::StreamOut, n.stream, n.src});
        return;
      case NodeKind::Carry:
        x_.carries.push_back(CarryPlan{n.carry_direct, n.carry_staged});
        emit({Code::Carry, (int32_t)x_.carries.size() - 1});
        return;
      case NodeKind::Collective:
        emit({Code::Collective, n.op});
        return;
      case NodeKind::RemoteLoad:
        emit({Code::RemoteLoad, n.op});
        return;
      case NodeKind::RemoteStore:
        emit({Code::RemoteStore, n.op});
        return;
    }
  }

 private:
  Executable& x_;
};

}  // namespace

Executable compile(const Lowered& low) {
  Executable x;
  Compiler c(x);
  std::vector<int> fn_entry(low.functions.size(), -1);
  // Functions come callees first, so every call finds its entry.
  for (size_t f = 0; f < low.functions.size(); ++f) {
    fn_entry[f] = c.pc();
    c.node(low.functions[f].body, fn_entry);
    c.emit({Code::Ret});
  }
  for (int p = 0; p < kNumPrograms; ++p) {
    x.entry[p] = c.pc();
    c.node(low.programs[p], fn_entry);
    c.emit({Code::End});
  }
  return x;
}

}  // namespace ipuxl
