#include "parallel.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "kernel.hpp"
#include "options.hpp"

namespace ipuxl {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

using Clock = std::chrono::steady_clock;

// How long an idle worker polls before it sleeps: kernels of one program
// follow each other closely, and waking a sleeping vCPU is slow. Measured in
// time, not in pause instructions (a pause takes ~10 cycles on some cores and
// ~140 on others). Short, because on a busy machine a spinning worker spends
// the process's share of the CPU on nothing (a training step under load ran
// faster polling ~0.1 ms than ~1 ms), while a quiet machine's kernels follow
// each other within that time.
constexpr auto kSpinTime = std::chrono::microseconds(100);
// How long the caller polls for chunks other threads are still running
// before it sleeps until the last one finishes. Sleeping rather than
// polling (or yielding) leaves the CPU to that thread when it was
// descheduled, and costs nothing on a quiet machine, where the chunks end
// within microseconds of each other.
constexpr auto kWaitSpinTime = std::chrono::microseconds(30);

// Contention backoff. When other processes keep the CPUs busy (more runnable
// threads than cores), the scheduler preempts a worker in the middle of its
// chunk for a whole time slice (milliseconds), and the caller, done with
// its own share, waits for it: split over two threads, a job then takes
// longer than on one. A job whose caller waited more than kStragglerWait,
// and so long that the caller alone would have finished it sooner (its own
// units took `work`; all of them at that rate take work * total / mine),
// marks the CPUs contended: jobs run on the caller alone (the same chunks,
// in order, so the results are the same) for kBackoffMin, doubled for each
// such job within kBackoffMemory of the previous one, up to kBackoffMax;
// then they are split again. On a quiet machine a job almost never waits
// that long, so the backoff costs nothing there; with a busy process beside
// it, the small steps of a training loop run faster on the caller alone.
// The bound is the caller's whole share of the work, not a fraction of it:
// on a busy host, whose load the guest does not see, a worker's vCPU can run
// at a half to two thirds of the caller's speed, and a worker that slow is
// still worth waiting for (a lower bound put every job on the caller alone,
// slower than the two threads still were). The A/B runs behind both rules:
// bench/results/2026-11-28.md, eleventh and fifteenth sessions.
constexpr auto kStragglerWait = std::chrono::microseconds(250);
constexpr auto kBackoffMin = std::chrono::milliseconds(5);
constexpr auto kBackoffMax = std::chrono::milliseconds(160);
constexpr auto kBackoffMemory = std::chrono::seconds(1);

// A job is [0, n) cut into `chunks` fixed ranges (chunk c: [n*c/chunks,
// n*(c+1)/chunks)), claimed one at a time by whichever thread asks next: the
// caller and the woken workers. The ranges depend only on n and the chunk
// count, never on which thread runs them or when, so results are the same
// whatever the scheduling. A descheduled worker (a busy machine, other
// thread pools in the process) holds up the job by at most the one chunk it
// claimed; the others are taken by the threads that run.
//
// The job's generation, chunk count and next unclaimed chunk are one atomic
// word, so a claim (a compare-and-swap of that word) succeeds only for the
// job it names, and only for a chunk that job has; a successful claim keeps
// the job open (its caller waits for the chunk), so the job's parameters are
// stable while the chunk runs.
class Pool {
 public:
  explicit Pool(int threads) { resize(threads); }
  ~Pool() { stop(); }

  int size() const { return (int)workers_.size() + 1; }

  // Whether jobs run on the caller alone for now (contention backoff).
  bool backed_off() const {
    return Clock::now().time_since_epoch().count() < serial_until_.load(std::memory_order_relaxed);
  }

  void resize(int threads) {
    stop();
    quit_ = false;
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { loop(i); });
  }

  void run(int64_t n, int64_t chunks, const std::function<void(int64_t, int64_t)>& fn) {
    chunks = std::min<int64_t>({chunks, n, kMaxChunks});
    // Small, contended (kStragglerWait) or nested: inline, chunk after chunk.
    if (chunks <= 1 || workers_.empty() || backed_off() || running_.exchange(true)) {
      for (int64_t c = 0; c < std::max<int64_t>(chunks, 1); ++c)
        fn(n * c / std::max<int64_t>(chunks, 1), n * (c + 1) / std::max<int64_t>(chunks, 1));
      return;
    }
    const uint64_t g = open_job(n, fn);
    // Chunk 0 is the caller's before the job is published: a spinning
    // worker would otherwise often claim it first (the caller is still
    // publishing and waking), and which core computed which part of the
    // output would change from call to call. With one chunk per thread,
    // each core then keeps its part (of C, say) in its own cache from one
    // call to the next, instead of fetching it from the other core's.
    publish(pack(g, (uint64_t)chunks, 1));
    run_chunk(0, chunks);
    count_done(1);
    int64_t mine = 1;
    for (int64_t c; (c = claim(g)) >= 0; ++mine) {
      run_chunk(c, chunks);
      count_done(1);
    }
    finish_job(chunks, mine);
  }

  // Balanced job: [0, n) cut into one home range per thread (thread t's:
  // [n*t/homes, n*(t+1)/homes), the caller's is 0), each taken from its
  // front in pieces of `grain` units by its thread, then from its back by
  // any thread that has finished its own. On a quiet machine every thread
  // runs its own range, as with one fixed chunk per thread (and keeps its
  // part of the output in its cache from call to call); when one runs
  // slower (a busy host, a shared core) the others take over the end of
  // its range instead of waiting for it. Where [0, n) is cut changes from
  // call to call: callers' results must not depend on it.
  void run_balanced(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    const int64_t homes = std::min<int64_t>({size(), (n + grain - 1) / grain, kMaxHomes});
    if (n > kMaxUnits) return run(n, size(), fn);  // too many units for a range word
    if (homes <= 1 || backed_off() || running_.exchange(true)) {  // small, contended or nested
      fn(0, n);
      return;
    }
    const uint64_t g = open_job(n, fn);
    homes_.store(homes, std::memory_order_relaxed);
    grain_.store(grain, std::memory_order_relaxed);
    for (int64_t h = 0; h < homes; ++h)
      ranges_[h].w.store(range_word(g, n * h / homes, n * (h + 1) / homes),
                         std::memory_order_relaxed);
    publish(pack(g, 0, 0));  // no fixed chunks
    finish_job(n, run_pieces(g, 0, homes, grain));
  }

 private:
  // Sets up a job of n units of fn (nothing is claimable yet) and returns
  // its generation.
  uint64_t open_job(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    fn_.store(&fn, std::memory_order_relaxed);
    n_.store(n, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    job_start_ = Clock::now();
    return (++submitted_) & kGenMask;
  }

  // Makes a job visible to the workers (state_ is what they poll; stored
  // under mu_ so that a worker about to sleep sees it) and wakes sleepers.
  void publish(uint64_t state) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      state_.store(state, std::memory_order_release);
    }
    cv_.notify_all();
  }

  // Waits until done_ reaches `total` (chunks of a fixed job, units of a
  // balanced one; the caller ran `mine` of them), polling briefly and then
  // sleeping, and rethrows the job's first exception.
  void finish_job(int64_t total, int64_t mine) {
    const auto t0 = Clock::now();
    for (int64_t w = 0; done_.load(std::memory_order_acquire) < total; ++w) {
      if ((w & 63) == 63 && Clock::now() - t0 > kWaitSpinTime) {
        // The thread finishing a chunk reads waiting_ after counting it
        // (both sequentially consistent) and then notifies under wait_mu_:
        // either it sees waiting_ or this predicate sees its count.
        std::unique_lock<std::mutex> lk(wait_mu_);
        waiting_.store(true);
        wait_cv_.wait(lk, [&] { return done_.load() >= total; });
        waiting_.store(false);
        break;
      }
      cpu_relax();
    }
    note_wait(t0, mine, total);
    running_.store(false);
    if (error_) std::rethrow_exception(error_);
  }

  // The caller worked on `mine` of the job's `total` units from job_start_
  // to `waited_from` and then waited for the other threads until now:
  // starts or extends a contention backoff (kStragglerWait) if it waited
  // that long and the job took longer than the caller alone would have.
  void note_wait(Clock::time_point waited_from, int64_t mine, int64_t total) {
    const auto now = Clock::now();
    const auto wait = now - waited_from, work = waited_from - job_start_;
    if (wait <= kStragglerWait || mine <= 0) return;
    if (work + wait <= work * total / mine) return;
    backoff_level_ = now - last_contended_ < kBackoffMemory ? std::min(backoff_level_ + 1, 16) : 0;
    last_contended_ = now;
    const Clock::duration period =
        std::min<Clock::duration>(kBackoffMax, kBackoffMin * (int64_t{1} << backoff_level_));
    serial_until_.store((now + period).time_since_epoch().count(), std::memory_order_relaxed);
  }

  // Counts `units` finished (by any thread) and wakes a sleeping caller.
  void count_done(int64_t units) {
    done_.fetch_add(units);
    if (waiting_.load()) {
      std::lock_guard<std::mutex> lk(wait_mu_);
      wait_cv_.notify_one();
    }
  }

  // A home range of a balanced job: the job's generation (its low 24
  // bits) | front | back (20 bits each), in one word so that a claim from either end is
  // one compare-and-swap and a thread still holding an earlier job's
  // generation claims nothing.
  static constexpr int kUnitBits = 20;
  static constexpr int64_t kMaxUnits = (int64_t{1} << kUnitBits) - 1;
  static constexpr uint64_t kUnitMask = (uint64_t{1} << kUnitBits) - 1;
  static constexpr uint64_t kTagMask = (uint64_t{1} << (64 - 2 * kUnitBits)) - 1;
  static uint64_t range_word(uint64_t g, int64_t front, int64_t back) {
    return ((g & kTagMask) << (2 * kUnitBits)) | ((uint64_t)front << kUnitBits) | (uint64_t)back;
  }
  struct alignas(64) Range {
    std::atomic<uint64_t> w{0};
  };
  // Threads beyond the 64th (set_num_threads may ask for more) have no home
  // range and only take from the others'.
  static constexpr int64_t kMaxHomes = 64;

  // Claims up to `grain` units of home range h of job g, from its front
  // (its own thread) or its back (another thread); false when none is left.
  bool take(int64_t h, uint64_t g, int64_t grain, bool front, int64_t& b, int64_t& e) {
    std::atomic<uint64_t>& w = ranges_[h].w;
    uint64_t s = w.load(std::memory_order_acquire);
    for (;;) {
      if ((s >> (2 * kUnitBits)) != (g & kTagMask)) return false;
      const int64_t f = (int64_t)((s >> kUnitBits) & kUnitMask), k = (int64_t)(s & kUnitMask);
      if (f >= k) return false;
      const int64_t nb = front ? f : std::max(f, k - grain);
      const int64_t ne = front ? std::min(k, f + grain) : k;
      const uint64_t ns = front ? range_word(g, ne, k) : range_word(g, f, nb);
      if (w.compare_exchange_weak(s, ns, std::memory_order_acq_rel, std::memory_order_acquire)) {
        b = nb;
        e = ne;
        return true;
      }
    }
  }

  // Thread `me`'s part of balanced job g: its own range from the front,
  // then the others' from their backs. Returns the units it ran.
  int64_t run_pieces(uint64_t g, int64_t me, int64_t homes, int64_t grain) {
    int64_t b, e, ran = 0;
    auto piece = [&] {
      try {
        (*fn_.load(std::memory_order_relaxed))(b, e);
      } catch (...) {
        std::lock_guard<std::mutex> lk(err_mu_);
        if (!error_) error_ = std::current_exception();
      }
      count_done(e - b);
      ran += e - b;
    };
    if (me < homes)
      while (take(me, g, grain, true, b, e)) piece();
    for (int64_t d = 1; d <= homes; ++d) {
      const int64_t h = (me + d) % homes;
      if (h != me)
        while (take(h, g, grain, false, b, e)) piece();
    }
    return ran;
  }

  // state_: generation (40 bits) | chunk count (12 bits) | next chunk (12 bits).
  static constexpr int kBits = 12;
  static constexpr int64_t kMaxChunks = (int64_t{1} << kBits) - 1;
  static constexpr uint64_t kGenMask = (uint64_t{1} << (64 - 2 * kBits)) - 1;
  static uint64_t pack(uint64_t g, uint64_t chunks, uint64_t next) {
    return (g << (2 * kBits)) | (chunks << kBits) | next;
  }
  static uint64_t gen_of(uint64_t s) { return s >> (2 * kBits); }

  // Claims the next chunk of job g; -1 when g is not the current job or all
  // its chunks are taken.
  int64_t claim(uint64_t g) {
    uint64_t s = state_.load(std::memory_order_acquire);
    for (;;) {
      const uint64_t chunks = (s >> kBits) & (uint64_t)kMaxChunks;
      const uint64_t next = s & (uint64_t)kMaxChunks;
      if (gen_of(s) != g || next >= chunks) return -1;
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel,
                                       std::memory_order_acquire))
        return (int64_t)next;
    }
  }

  void run_chunk(int64_t c, int64_t chunks) {
    const int64_t n = n_.load(std::memory_order_relaxed);
    const int64_t b = n * c / chunks, e = n * (c + 1) / chunks;
    try {
      if (b < e) (*fn_.load(std::memory_order_relaxed))(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lk(err_mu_);
      if (!error_) error_ = std::current_exception();
    }
  }

  // Worker `me` (1 .. size()-1): runs each job it sees, then polls and
  // sleeps until the next.
  void loop(int64_t me) {
    uint64_t seen = gen_of(state_.load(std::memory_order_acquire));
    auto fresh = [&] { return gen_of(state_.load(std::memory_order_acquire)) != seen; };
    while (true) {
      const auto t0 = Clock::now();
      for (int64_t w = 0; !fresh() && !quit_.load(std::memory_order_relaxed); ++w) {
        if ((w & 63) == 63 && Clock::now() - t0 > kSpinTime) break;
        cpu_relax();
      }
      if (!fresh() && !quit_.load()) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return fresh() || quit_.load(); });
      }
      if (quit_.load()) return;
      const uint64_t s = state_.load(std::memory_order_acquire);
      seen = gen_of(s);
      const int64_t chunks = (int64_t)((s >> kBits) & (uint64_t)kMaxChunks);
      if (chunks == 0) {  // a balanced job (or a stale view of one: take() then claims nothing)
        run_pieces(seen, me, homes_.load(std::memory_order_relaxed),
                   grain_.load(std::memory_order_relaxed));
        continue;
      }
      for (int64_t c; (c = claim(seen)) >= 0;) {
        run_chunk(c, chunks);
        count_done(1);
      }
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;
  std::mutex mu_, err_mu_, wait_mu_;
  std::condition_variable cv_, wait_cv_;
  std::atomic<bool> waiting_{false};  // the caller sleeps on wait_cv_
  std::atomic<uint64_t> state_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<bool> quit_{false};
  std::atomic<bool> running_{false};
  std::atomic<const std::function<void(int64_t, int64_t)>*> fn_{nullptr};
  std::atomic<int64_t> n_{0};
  std::atomic<int64_t> homes_{0}, grain_{1};  // of the current balanced job
  // Contention backoff: jobs before serial_until_ (steady clock ticks) run
  // inline. The other three are touched only by the thread that submitted
  // the current job, while it holds running_.
  std::atomic<Clock::rep> serial_until_{0};
  Clock::time_point job_start_{}, last_contended_{};
  int backoff_level_ = 0;
  Range ranges_[kMaxHomes];
  uint64_t submitted_ = 0;
  std::exception_ptr error_;
};

// The configured thread count (options().num_threads), else the hardware's
// threads, at most 64.
int default_threads() {
  if (options().num_threads > 0) return options().num_threads;
  unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : (int)std::min(hc, 64u);
}

std::atomic<bool> g_pool_started{false};

Pool& pool() {
  static Pool p((g_pool_started = true, default_threads()));
  return p;
}

}  // namespace

int num_threads() { return pool().size(); }
void set_num_threads(int n) {
  if (n < 1 || n > kMaxThreads)
    throw Error("set_num_threads: " + std::to_string(n) + " threads is out of range (1 to " +
                std::to_string(kMaxThreads) + ")");
  pool().resize(n);
}
bool pool_started() { return g_pool_started.load(); }

bool contention_backoff() { return pool().backed_off(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t t = pool().size();
  pool().run(n, std::min<int64_t>(t, (n + grain - 1) / std::max<int64_t>(grain, 1)), fn);
}

void parallel_for_balanced(int64_t n, int64_t grain,
                           const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  pool().run_balanced(n, std::max<int64_t>(grain, 1), fn);
}

void parallel_for_chunks(int64_t n, int64_t chunks,
                         const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  pool().run(n, std::max<int64_t>(chunks, 1), fn);
}

}  // namespace ipuxl
