// The lowered program compiled to flat code for the host interpreter.
//
// Every Function body is emitted once, followed by a return; call sites jump
// to it and a stack of return addresses replaces recursion, so a program of
// any call depth runs on a bounded C stack. Kernels are referenced by slot:
// each replica state holds its own kernel instance per slot (built from the
// same op description against that state's storage).
#pragma once

#include <cstdint>
#include <vector>

#include "../lower/lower.hpp"

namespace ipuxl {

enum class Code : uint8_t {
  Exec,         // a: kernel slot
  Copy,         // a: src tensor, b: dst tensor
  Bind,         // a: bind table
  Call,         // a: entry pc
  Ret,
  RepeatBegin,  // a: counter slot, b: pc after the loop, n: trip count
  RepeatEnd,    // a: counter slot, b: first pc of the body
  If,           // a: condition tensor, b: pc of the else part, n: pc after the If
  Jump,         // a: target pc
  StreamIn,     // a: stream, b: tensor
  StreamOut,    // a: stream, b: tensor
  Carry,        // a: carry table
  Collective,   // a: op
  RemoteLoad,   // a: op
  RemoteStore,  // a: op
  End,          // end of a program
};

struct Instr {
  Code code;
  int32_t a = -1;
  int32_t b = -1;
  int64_t n = 0;
};

struct CarryPlan {
  std::vector<std::pair<int, int>> direct, staged;  // (src tensor, dst tensor)
};

struct Executable {
  std::vector<Instr> code;
  int entry[kNumPrograms] = {-1, -1, -1};
  std::vector<int> kernel_ops;  // op id of each kernel slot
  std::vector<std::vector<BindItem>> binds;
  std::vector<CarryPlan> carries;
  int num_counters = 0;
};

Executable compile(const Lowered& low);

}  // namespace ipuxl
