#include "blas.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <mutex>
#include <stdexcept>
#include <tuple>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#endif

#include "gemm.hpp"
#include "isa.hpp"
#include "kernel.hpp"
#include "parallel.hpp"

namespace ipuxl {
namespace blas {

namespace {
// cblas_sgemm with 32-bit integers (enum arguments are ints).
using sgemm_fn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                          int, float, float*, int);
sgemm_fn g_sgemm = nullptr;
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

bool fits_int32(int64_t M, int64_t N, int64_t K, int64_t lda, int64_t ldb, int64_t ldc) {
  const int64_t lim = 0x7fffffff;
  return M < lim && N < lim && K < lim && lda < lim && ldb < lim && ldc < lim;
}

// The installed BLAS runs single-threaded (set at import); large products
// are split into column blocks (row blocks when N is narrow) over the core's
// pool, so one set of threads serves every kernel.
void sgemm_blas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  auto block = [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    const float* a = ta ? A + i0 : A + i0 * lda;
    const float* b = tb ? B + j0 * ldb : B + j0;
    float* c = C + i0 * ldc + j0;
    g_sgemm(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, (int)(i1 - i0),
            (int)(j1 - j0), (int)K, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
  };
  const double flops = 2.0 * (double)M * (double)N * (double)K;
  const int threads = num_threads();
  if (threads <= 1 || flops < 4.0e6) {
    block(0, M, 0, N);
    return;
  }
  const int64_t q = 16;  // column blocks stay multiples of a cache line of floats
  if (N >= 2 * q * threads || N >= M) {
    int64_t nb = (N + q - 1) / q;
    parallel_for(nb, 1, [&](int64_t b0, int64_t b1) {
      block(0, M, b0 * q, std::min(N, b1 * q));
    });
  } else {
    parallel_for(M, 1, [&](int64_t i0, int64_t i1) { block(i0, i1, 0, N); });
  }
}
}  // namespace

void set_sgemm(void* fn) { g_sgemm = reinterpret_cast<sgemm_fn>(fn); }
void* sgemm_ptr() { return reinterpret_cast<void*>(g_sgemm); }

namespace {

struct PlanKey {
  int level, threads;
  bool ta, tb, packed;
  int64_t M, N, K;
  bool operator<(const PlanKey& o) const {
    return std::tie(level, threads, ta, tb, packed, M, N, K) <
           std::tie(o.level, o.threads, o.ta, o.tb, o.packed, o.M, o.N, o.K);
  }
};

std::mutex g_plan_mu;
std::map<PlanKey, SgemmImpl> g_plans;

// Seconds per call of fn(reps), the best of `rounds` alternating rounds for
// each of the two candidates (the best is the least disturbed by other
// processes on the machine).
template <class F1, class F2>
std::pair<double, double> race(F1&& a, F2&& b, int rounds) {
  using clock = std::chrono::steady_clock;
  a(1);
  b(1);
  auto once = [](auto& f, int reps) {
    const auto t0 = clock::now();
    f(reps);
    return std::chrono::duration<double>(clock::now() - t0).count() / reps;
  };
  // Repetitions per timing: about 200 us of the slower one, at most 64.
  const double t1 = std::max(once(a, 1), once(b, 1));
  const int reps = (int)std::max(1.0, std::min(64.0, 2e-4 / std::max(t1, 1e-9)));
  double ta = 1e30, tb = 1e30;
  for (int r = 0; r < rounds; ++r) {
    ta = std::min(ta, once(a, reps));
    tb = std::min(tb, once(b, reps));
  }
  return {ta, tb};
}

// Scratch operands of a measurement, mapped and unmapped directly: through
// malloc, freeing them would raise glibc's mmap threshold and leave later
// allocations (and their pages) in the heap for good.
struct Mapped {
  float* p = nullptr;
  size_t bytes = 0;
  explicit Mapped(size_t n) : bytes(std::max<size_t>(n, 1) * sizeof(float)) {
#if defined(__unix__) || defined(__APPLE__)
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) throw std::bad_alloc();
    p = static_cast<float*>(m);
#else
    p = new float[bytes / sizeof(float)];
#endif
  }
  ~Mapped() {
#if defined(__unix__) || defined(__APPLE__)
    munmap(p, bytes);
#else
    delete[] p;
#endif
  }
  Mapped(const Mapped&) = delete;
  Mapped& operator=(const Mapped&) = delete;
  float* data() { return p; }
  size_t size() const { return bytes / sizeof(float); }
};

SgemmImpl measure(bool ta, bool tb, int64_t M, int64_t N, int64_t K, bool packed) {
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
  Mapped A((size_t)(M * K)), B((size_t)(K * N)), C((size_t)(M * N));
  for (size_t i = 0; i < A.size(); ++i) A.data()[i] = 0.25f + (float)(i % 7) * 0.125f;
  for (size_t i = 0; i < B.size(); ++i) B.data()[i] = 0.5f - (float)(i % 5) * 0.125f;
  std::unique_ptr<gemm::PackedB> pb;
  if (packed) pb = std::make_unique<gemm::PackedB>(tb, K, N, B.data(), ldb);
  auto core = [&](int reps) {
    for (int r = 0; r < reps; ++r) {
      if (pb)
        gemm::sgemm_packed(ta, M, 1.0f, A.data(), lda, *pb, 0.0f, C.data(), N);
      else
        gemm::sgemm(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C.data(), N);
    }
  };
  auto lib = [&](int reps) {
    for (int r = 0; r < reps; ++r)
      sgemm_blas(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C.data(), N);
  };
  const auto [t_core, t_blas] = race(core, lib, 5);
  // The BLAS must win clearly: the core's kernel is the one without a
  // second library in the hot path, and a near tie is within the noise.
  return t_blas < 0.95 * t_core ? SgemmImpl::Blas : SgemmImpl::Core;
}

SgemmImpl forced() {
  const char* e = std::getenv("IPUXL_GEMM");
  if (!e || !*e || std::strcmp(e, "auto") == 0) return SgemmImpl::Auto;
  if (std::strcmp(e, "core") == 0) return SgemmImpl::Core;
  if (std::strcmp(e, "blas") == 0) return SgemmImpl::Blas;
  throw Error(std::string("IPUXL_GEMM=") + e + " is not one of auto, core, blas");
}

}  // namespace

SgemmImpl plan(bool ta, bool tb, int64_t M, int64_t N, int64_t K, bool packed) {
  if (!g_sgemm || M <= 0 || N <= 0 || K <= 0 || !fits_int32(M, N, K, M + K, N + K, N))
    return SgemmImpl::Core;
  static const SgemmImpl force = forced();
  if (force != SgemmImpl::Auto) return force;
  const PlanKey key{(int)isa::current(), num_threads(), ta, tb, packed, M, N, K};
  std::lock_guard<std::mutex> lk(g_plan_mu);
  auto it = g_plans.find(key);
  if (it != g_plans.end()) return it->second;
  const SgemmImpl choice = measure(ta, tb, M, N, K, packed);
  g_plans[key] = choice;
  return choice;
}

std::string sgemm_plan_name(bool ta, bool tb, int64_t M, int64_t N, int64_t K, bool packed) {
  return plan(ta, tb, M, N, K, packed) == SgemmImpl::Blas ? "blas" : "core";
}

void sgemm_with(SgemmImpl impl, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (impl == SgemmImpl::Auto) impl = plan(ta, tb, M, N, K);
  const bool use_blas = impl == SgemmImpl::Blas && g_sgemm && K > 0 &&
                        fits_int32(M, N, K, lda, ldb, ldc);
  if (use_blas)
    sgemm_blas(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else
    gemm::sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

bool prefer_fused_input_grad_update(int64_t batch, int64_t rows, int64_t cols) {
  if (batch < 1 || batch > 16 || rows < 1 || cols < 1) return false;  // the kernel's range
  if (const char* e = std::getenv("IPUXL_FUSED_UPDATE")) {  // for benchmarks: always, never
    if (std::strcmp(e, "always") == 0) return true;
    if (std::strcmp(e, "never") == 0) return false;
    if (*e && std::strcmp(e, "auto") != 0)
      throw Error(std::string("IPUXL_FUSED_UPDATE=") + e + " is not one of auto, always, never");
  }
  // Rules from bench/fused_update.py (Zen 4, 2 threads, 20th percentiles of
  // alternating calls; see bench/README.md). Fusing saves a second read and
  // a write of W, so it pays where moving W dominates: a large W, a small
  // batch. Short rows lose (B horizontal sums per row of W, and the GEMMs'
  // register tiles are better used), and so does a batch of 16 on a W of
  // 2^16 elements or fewer.
  const int64_t elems = rows * cols;
  switch (isa::current()) {
    case isa::Level::AVX512:
      // 1.03-1.2x for 512- and 784x512 at batches 1-16 and 64x1024 at 1-8;
      // 0.6-0.95x for W of 96x96 to 1024x64.
      return cols >= 256 && elems >= (1 << 16) && (batch <= 8 || elems >= (1 << 18));
    case isa::Level::AVX2:
      // 1.0-1.2x at batches 4-8 (1.5-1.8x for 64x1024); 0.8-0.9x at batch 1
      // (the GEMMs' dot-product path) and at 16.
      return cols >= 256 && elems >= (1 << 16) && batch >= 2 && batch <= 8;
    default:
      // 4-wide vectors: the GEMMs are slow, fusing wins 1.0-3.9x except a
      // batch of 16 on a small W (0.7-0.8x) and 10-column outputs.
      return cols >= 64 && (batch <= 8 || elems >= (1 << 18));
  }
}

void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  sgemm_with(SgemmImpl::Auto, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void test_sgemm(int impl, int64_t repeat, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
                float beta, float* C, int64_t ldc) {
  if (impl < 0 || impl > 3) throw std::invalid_argument("test_sgemm: impl must be 0..3");
  if (impl == 3) {
    gemm::PackedB pb(tb, K, N, B, ldb);
    for (int64_t r = 0; r < repeat; ++r) gemm::sgemm_packed(ta, M, alpha, A, lda, pb, beta, C, ldc);
    return;
  }
  for (int64_t r = 0; r < repeat; ++r)
    sgemm_with((SgemmImpl)impl, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace blas
}  // namespace ipuxl
