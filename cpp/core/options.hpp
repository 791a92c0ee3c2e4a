// The core's options: everything the core would otherwise read from the
// environment. The Python package reads and validates the settings once
// (python/ipuxl/settings.py) and hands them over here with configure(), at
// import (python/ipuxl/_core_loader.py). No file of the core reads an
// environment variable.
//
//   num_threads    threads of the kernels' pool: 1..kMaxThreads, or 0 for
//                  the hardware's threads (at most 64)
//   isa            instruction-set level: a level name of this build
//                  ("sse", "avx2", "avx512"; "neon" or "generic"
//                  elsewhere) or "best"
//   gemm           float32 GEMM: Auto (the fixed per-shape rule), or Core
//                  or Blas forced (for benchmarks)
//   blas_allowed   false: the BLAS is never chosen (it is not loaded)
//   profile_clock  the engine profiler's clock: Wall, or Thread (the
//                  calling thread's CPU time, which a loaded machine does
//                  not inflate)
#pragma once

#include <string>

#include "blas.hpp"

namespace ipuxl {

// The most threads the pool takes: far more than any host's cores, few
// enough that a typo cannot exhaust the process's thread slots.
constexpr int kMaxThreads = 1024;

enum class ProfileClock : int { Wall = 0, Thread = 1 };

struct CoreOptions {
  int num_threads = 0;
  std::string isa = "best";
  blas::SgemmImpl gemm = blas::SgemmImpl::Auto;
  bool blas_allowed = true;
  ProfileClock profile_clock = ProfileClock::Wall;
};

// The options in effect (the defaults until configure() runs).
const CoreOptions& options();

// Validates and applies `o`: the instruction-set level, the pool's thread
// count (resized at once when the pool already runs) and the rest. Throws
// ipuxl::Error (ValueError in Python) for a level this build or CPU lacks
// or a thread count out of range, and then changes nothing. The isa error's
// message starts with the level asked for, so the caller can prefix the
// setting's name.
void configure(const CoreOptions& o);

}  // namespace ipuxl
