// The state of one replica: its storage and its kernel instances.
//
// A State is built from a compiled program (its memory plan and kernel
// slots) and owns nothing else of it: any number of States run the same
// Executable. Every tensor's TensorRef points into the State's arena (or,
// for a variable bound to host memory, into the host array); call sites
// repoint a called graph's tensors at the caller's storage while they run.
#pragma once

#include <cstddef>
#include <map>
#include <new>
#include <memory>
#include <set>
#include <vector>

#include "executable.hpp"

namespace ipuxl {

// Allocates 64-byte aligned, as the arena's tensors are, so that a tensor
// can view a Streaming Memory entry (Engine: view_streaming_memory).
template <class T>
struct Aligned64 {
  using value_type = T;
  Aligned64() = default;
  template <class U> Aligned64(const Aligned64<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64)));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <class U> bool operator==(const Aligned64<U>&) const { return true; }
  template <class U> bool operator!=(const Aligned64<U>&) const { return false; }
};

struct State {
  std::unique_ptr<void, void (*)(void*)> arena{nullptr, [](void*) {}};
  size_t arena_bytes = 0;
  std::vector<TensorRef> refs;                   // one per tensor id
  std::vector<uint8_t*> home;                    // each root's own storage
  std::vector<std::unique_ptr<Kernel>> kernels;  // one per kernel slot
  std::vector<std::vector<std::vector<uint8_t>>> carry_bufs;  // per carry, per staged pair
  // This replica's Streaming Memory: per remote buffer, entries x entry bytes.
  std::vector<std::vector<uint8_t, Aligned64<uint8_t>>> remote;
  int replica = 0;
  std::map<int, uint8_t*> arena_home;            // bound variables' arena storage
  uint64_t host_write_epoch = 1;
};

// Builds a State: allocates and zeroes the arena, places every root at its
// planned offset, copies constants' and variables' initial data, and builds
// every kernel (also those of skipped ops, whose factories validate them).
// `host_only` lists the roots no op of the program writes: kernels may cache
// work derived from them until the host writes any tensor.
std::unique_ptr<State> make_state(const ProgramDesc& desc, const Aliasing& al,
                                  const MemoryPlan& plan, const Executable& exe,
                                  const std::vector<int>& skipped_ops,
                                  const std::set<int>& program_written, int replica);

}  // namespace ipuxl
