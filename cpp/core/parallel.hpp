// A small persistent thread pool for data-parallel kernels.
//
// parallel_for splits [0, n) into contiguous chunks and runs them on the
// calling thread plus the pool's workers, each chunk claimed by whichever
// thread asks next. The chunk boundaries depend only on n, the grain (or the
// chunk count) and the thread count, never on the scheduling, so results are
// deterministic. parallel_for_balanced moves its boundaries with the
// threads' speeds, for work whose results do not depend on them. Workers
// spin briefly after each job (kernels come in quick succession within a
// program) and then sleep, so an idle engine costs no CPU. When other
// processes keep the CPUs busy, jobs run on the caller alone for a while
// (contention_backoff). The thread count is the core's options'
// (configure(), options.hpp; default: the hardware concurrency, at most 64).
#pragma once

#include <cstdint>
#include <functional>

namespace ipuxl {

int num_threads();
// Resizes the pool to n threads (the caller included); throws ipuxl::Error
// (ValueError) for n outside 1..kMaxThreads (options.hpp).
void set_num_threads(int n);
// Whether the pool has been created (its first use); configure() resizes
// a running pool and otherwise leaves its creation to the first use.
bool pool_started();

// Whether jobs now run on the calling thread alone because a recent job's
// caller waited long for a preempted worker (the CPUs are contended; see
// kStragglerWait in parallel.cpp). Results are the same either way.
bool contention_backoff();

// Runs fn(begin, end) over chunks covering [0, n). Work below `grain`
// elements per thread runs inline on the caller.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

// Runs fn(begin, end) over exactly min(chunks, n) chunks covering [0, n)
// (chunk c: [n*c/chunks, n*(c+1)/chunks)), in any order, on the caller and
// the workers. More chunks than threads balance the load when a thread is
// descheduled or slower: the others take the remaining chunks.
void parallel_for_chunks(int64_t n, int64_t chunks,
                         const std::function<void(int64_t, int64_t)>& fn);

// Runs fn(begin, end) over pieces covering [0, n) exactly once, balanced
// over the threads as they run: each thread has a home range (thread t of
// T: [n*t/T, n*(t+1)/T), the caller's is t = 0) that it takes from the
// front, `grain` units at a time, and then takes the rest of the others'
// ranges from their backs. On a quiet machine each thread runs its own
// range, so its part of the output stays in its core's cache from one
// call to the next; when a thread runs slower (a busy host, a core shared
// with another process) the others finish its range instead of waiting.
// The pieces change from call to call: only for work whose results do not
// depend on how [0, n) is cut.
void parallel_for_balanced(int64_t n, int64_t grain,
                           const std::function<void(int64_t, int64_t)>& fn);

}  // namespace ipuxl
