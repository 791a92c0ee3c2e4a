// A small persistent thread pool for data-parallel kernels.
//
// parallel_for splits [0, n) into contiguous chunks and runs them on the
// calling thread plus the pool's workers, each chunk claimed by whichever
// thread asks next. The chunk boundaries depend only on n, the grain (or the
// chunk count) and the thread count, never on the scheduling, so results are
// deterministic. Workers spin briefly after each job (kernels come in quick
// succession within a program) and then sleep, so an idle engine costs no
// CPU. IPUXL_NUM_THREADS sets the thread count
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

// Runs fn(begin, end) over exactly min(chunks, n) chunks covering [0, n)
// (chunk c: [n*c/chunks, n*(c+1)/chunks)), in any order, on the caller and
// the workers. More chunks than threads balance the load when a thread is
// descheduled or slower: the others take the remaining chunks.
void parallel_for_chunks(int64_t n, int64_t chunks,
                         const std::function<void(int64_t, int64_t)>& fn);

}  // namespace ipuxl
