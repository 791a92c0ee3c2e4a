// A small persistent thread pool for data-parallel kernels.
//
// parallel_for splits [0, n) into contiguous chunks and runs them on the
// calling thread plus the pool's workers. Workers spin briefly after each
// job (kernels come in quick succession within a program) and then sleep,
// so an idle engine costs no CPU. IPUXL_NUM_THREADS sets the thread count
// (default: the hardware concurrency).
#pragma once

#include <cstdint>
#include <functional>

namespace ipuxl {

int num_threads();
void set_num_threads(int n);

// Runs fn(begin, end) over chunks covering [0, n). Work below `grain`
// elements per thread runs inline on the caller.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace ipuxl
