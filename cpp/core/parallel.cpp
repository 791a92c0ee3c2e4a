#include "parallel.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ipuxl {
namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Polls (about a millisecond) before an idle worker sleeps: kernels of one
// program follow each other closely, and waking a sleeping vCPU is slow.
constexpr int64_t kSpins = 20000;

// A job has one chunk per thread: chunk 0 runs on the caller, chunk i on
// worker i. A chunk is claimed by writing the job's generation into its
// slot, so when worker i is descheduled (other thread pools in the process,
// a busy machine) the caller claims chunk i and runs it itself instead of
// waiting; it waits only for chunks a worker has actually started.
class Pool {
 public:
  explicit Pool(int threads) { resize(threads); }
  ~Pool() { stop(); }

  int size() const { return (int)workers_.size() + 1; }

  void resize(int threads) {
    stop();
    quit_ = false;
    slots_ = std::vector<Slot>((size_t)std::max(threads, 1));
    const uint64_t start = generation_.load();
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i, start] { loop(i, start); });
  }

  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    const int t = size();
    int64_t chunks = std::min<int64_t>(t, (n + grain - 1) / std::max<int64_t>(grain, 1));
    if (chunks <= 1 || running_.exchange(true)) {  // small or nested: inline
      fn(0, n);
      return;
    }
    fn_.store(&fn, std::memory_order_relaxed);
    n_.store(n, std::memory_order_relaxed);
    chunks_.store(chunks, std::memory_order_relaxed);
    done_.store(0, std::memory_order_relaxed);
    error_ = nullptr;
    const uint64_t g = ++submitted_;
    {
      std::lock_guard<std::mutex> lk(mu_);
      generation_.store(g, std::memory_order_release);
    }
    cv_.notify_all();
    run_chunk(0);
    int64_t mine = 1;
    for (int64_t c = 1; c < chunks; ++c)
      if (claim(c, g)) {
        run_chunk(c);
        ++mine;
      }
    while (done_.load(std::memory_order_acquire) + mine < chunks) cpu_relax();
    running_.store(false);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  struct alignas(64) Slot {
    std::atomic<uint64_t> claimed{0};  // generation of the last job that claimed it
    Slot() = default;
    Slot(const Slot&) {}
  };

  bool claim(int64_t c, uint64_t g) {
    uint64_t s = slots_[(size_t)c].claimed.load(std::memory_order_acquire);
    while (s < g)
      if (slots_[(size_t)c].claimed.compare_exchange_weak(s, g, std::memory_order_acq_rel))
        return true;
    return false;
  }

  void run_chunk(int64_t c) {
    const int64_t n = n_.load(std::memory_order_relaxed);
    const int64_t k = chunks_.load(std::memory_order_relaxed);
    const int64_t b = n * c / k, e = n * (c + 1) / k;
    try {
      if (b < e) (*fn_.load(std::memory_order_relaxed))(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lk(err_mu_);
      if (!error_) error_ = std::current_exception();
    }
  }

  void loop(int idx, uint64_t seen) {
    while (true) {
      for (int64_t spins = 0; spins < kSpins; ++spins) {
        if (generation_.load(std::memory_order_acquire) != seen || quit_.load()) break;
        cpu_relax();
      }
      if (generation_.load(std::memory_order_acquire) == seen && !quit_.load()) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return generation_.load() != seen || quit_.load(); });
      }
      if (quit_.load()) return;
      seen = generation_.load(std::memory_order_acquire);
      // A successful claim keeps job `seen` open (its caller waits for this
      // chunk), so the job's parameters are stable while it runs.
      if (idx < chunks_.load(std::memory_order_relaxed) && claim(idx, seen)) {
        run_chunk(idx);
        done_.fetch_add(1, std::memory_order_acq_rel);
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
  std::vector<Slot> slots_;
  std::mutex mu_, err_mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<bool> quit_{false};
  std::atomic<bool> running_{false};
  std::atomic<const std::function<void(int64_t, int64_t)>*> fn_{nullptr};
  std::atomic<int64_t> n_{0}, chunks_{0};
  uint64_t submitted_ = 0;
  std::exception_ptr error_;
};

int default_threads() {
  if (const char* e = std::getenv("IPUXL_NUM_THREADS")) {
    int v = std::atoi(e);
    if (v > 0) return v;
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc == 0 ? 1 : (int)std::min(hc, 64u);
}

Pool& pool() {
  static Pool p(default_threads());
  return p;
}

}  // namespace

int num_threads() { return pool().size(); }
void set_num_threads(int n) { pool().resize(n < 1 ? 1 : n); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  pool().run(n, grain, fn);
}

}  // namespace ipuxl
