#include "parallel.hpp"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace ipuxl {
namespace {

class Pool {
 public:
  explicit Pool(int threads) { resize(threads); }
  ~Pool() { stop(); }

  int size() const { return (int)workers_.size() + 1; }

  void resize(int threads) {
    stop();
    quit_ = false;
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { loop(i); });
  }

  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
    const int t = size();
    int64_t chunks = std::min<int64_t>(t, (n + grain - 1) / std::max<int64_t>(grain, 1));
    if (chunks <= 1 || running_.exchange(true)) {  // small, or nested: run inline
      fn(0, n);
      return;
    }
    fn_ = &fn;
    n_ = n;
    chunks_ = chunks;
    error_ = nullptr;
    pending_.store((int)chunks - 1, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lk(mu_);
      generation_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    run_chunk(0);
    while (pending_.load(std::memory_order_acquire) > 0) std::this_thread::yield();
    running_.store(false);
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void run_chunk(int64_t c) {
    int64_t b = n_ * c / chunks_, e = n_ * (c + 1) / chunks_;
    try {
      if (b < e) (*fn_)(b, e);
    } catch (...) {
      std::lock_guard<std::mutex> lk(err_mu_);
      if (!error_) error_ = std::current_exception();
    }
  }

  void loop(int idx) {
    uint64_t seen = generation_.load(std::memory_order_acquire);
    while (true) {
      // Spin for a short while, then sleep until the next job.
      auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
      while (generation_.load(std::memory_order_acquire) == seen && !quit_.load() &&
             std::chrono::steady_clock::now() < spin_until) {
      }
      if (generation_.load(std::memory_order_acquire) == seen && !quit_.load()) {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return generation_.load() != seen || quit_.load(); });
      }
      if (quit_.load()) return;
      seen = generation_.load(std::memory_order_acquire);
      if (idx < chunks_) {
        run_chunk(idx);
        pending_.fetch_sub(1, std::memory_order_acq_rel);
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
  std::mutex mu_, err_mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> quit_{false};
  std::atomic<bool> running_{false};
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0, chunks_ = 0;
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
