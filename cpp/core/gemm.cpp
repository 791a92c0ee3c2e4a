// The core's float32 GEMM: one copy of the packed kernels (gemm_isa.inc) per
// instruction-set level, each compiled under its level's target pragma in
// its own namespace, and entry points that call the copy of the level in use
// (isa::current()).
#include "gemm.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include <time.h>
#include <unistd.h>

#include "isa.hpp"
#include "parallel.hpp"

#if IPUXL_MULTI_ISA
#include <immintrin.h>
#endif

// Keeps a vector value in a register: an empty asm that reads and writes it
// stops the compiler from folding its load into every use as a memory
// operand (one load per use instead of one).
#if defined(__x86_64__) || defined(__i386__)
#define IPUXL_IN_REGISTER(v) asm("" : "+v"(v))
#elif defined(__aarch64__)
#define IPUXL_IN_REGISTER(v) asm("" : "+w"(v))
#else
#define IPUXL_IN_REGISTER(v) ((void)0)
#endif

namespace ipuxl {
namespace gemm {

namespace {

float* alloc_floats(size_t n) {
  size_t bytes = ((n * sizeof(float)) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes > 0 ? bytes : 64);
  if (!p) throw std::bad_alloc();
  return static_cast<float*>(p);
}

// Depth of one k-block. A packed B slice (KC x NR floats, 64 KiB at NR 32)
// is reused from L2 by the row tiles of A; deeper blocks mean fewer passes
// over C and A. 512 relies on an L2 of 1 MiB or more per core (it holds the
// B slice and the MC x KC block of A); 256 would keep the slice in L1 but
// pass over C twice as often, and 1024 adds nothing once the slice is in L2.
constexpr int64_t kKC = 512;
// Rows of A per block: an MC x KC block of A stays in L2.
constexpr int64_t kMC = 16 * 14;
// Largest K of the small-K path (X^T @ G at a batch-sized K, run_smallk in
// gemm_isa.inc): up to 128 its block of C held in registers over the whole
// K beats run_block's packing of a short K; at most kKC, so that run_block
// would use one k-block too and both compute each element with the same
// chain.
constexpr int64_t kSmallKMax = 128;
static_assert(kSmallKMax <= kKC, "the small-K path must match run_block's single k-block");
// Whether C = alpha * A^T @ B + beta * C (B not pre-packed) takes the
// small-K path at a level of W floats per vector: drive() in gemm_isa.inc
// and the BLAS rule (uses_small_k_path) both ask this.
constexpr bool small_k_path(bool ta, bool tb, int64_t N, int64_t K, int W) {
  return ta && !tb && K <= kSmallKMax && N > W;
}
// Ways of the L1 data cache, as glibc reads them from CPUID (0 where the C
// library cannot tell): rows of A read in place a multiple of 4 KiB apart
// all fall in one L1 set (run_block), which holds this many lines.
int l1d_ways() {
  static const int ways = [] {
#ifdef _SC_LEVEL1_DCACHE_ASSOC
    const long v = sysconf(_SC_LEVEL1_DCACHE_ASSOC);
    return v > 0 && v < 64 ? (int)v : 0;
#else
    return 0;
#endif
  }();
  return ways;
}
// Products of fewer FLOPs run on the calling thread alone: below 0.5 MFLOP
// (the MNIST MLP's 10-wide layer at batch 8: 0.08) waking the workers costs
// more than the product, while from about 1 MFLOP (that layer at batches 80
// and 128) splitting already pays. The A/B runs: bench/results/2026-11-27.md,
// fifth session.
constexpr double kParallelMinFlops = 5.0e5;

// Arguments of a micro-kernel call (see ukernel in gemm_isa.inc).
struct Args {
  int64_t kc;
  const float* a;
  int64_t sa;
  const float* b;
  int64_t bs;
  float* c;
  int64_t ldc;
  float alpha, beta;
  int ncols;
  bool first, beta0;
};

// Where op(B) comes from: pre-packed panels (packed != nullptr), or B
// packed on the fly, or (one row tile per panel, op(B) not transposed) read
// in place.
struct BSource {
  const float* packed;
  bool tb;
  const float* B;
  int64_t ldb;
};

// One level's entry points.
struct Impl {
  int W;
  int (*choose_nr)(int64_t N);
  void (*pack_b)(bool tb, int64_t K, int64_t N, const float* B, int64_t ldb, int nr, float* data);
  void (*drive)(bool ta, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                const BSource& bsrc, float beta, float* C, int64_t ldc, int nr,
                const Epilogue* ep);
  void (*input_grad_update)(const float* G, int64_t B, int64_t N, float* W, const float* X,
                            int64_t M, float* DX, float alpha, float beta, int64_t r0,
                            int64_t r1);
  double (*fma_loop)(int64_t iters, float* sink);
};

// ---------------------------------------------------------------- baseline
// SSE2 on x86-64, NEON on aarch64, whatever the compiler makes of 16-byte
// vectors elsewhere: GCC vector extensions, no intrinsics.
namespace base {
struct Vec {
  typedef float V __attribute__((vector_size(16)));
  static constexpr int W = 4;
  static constexpr int MR = 6;  // 12 accumulators + 2 B vectors + 1 broadcast of 16 registers
  static constexpr int DR = 4;  // dot kernel: DR x 3 accumulators
  static V zero() { return V{0.0f, 0.0f, 0.0f, 0.0f}; }
  static V set1(float x) { return V{x, x, x, x}; }
  static V bcast(const float* p) { return set1(*p); }
  static V loadu(const float* p) {
    V v;
    std::memcpy(&v, p, sizeof(V));
    return v;
  }
  static V load(const float* p) { return *reinterpret_cast<const V*>(p); }
  static V fma(V a, V b, V c) { return a * b + c; }
  static V mul(V a, V b) { return a * b; }
  static V add(V a, V b) { return a + b; }
  static V loadn(const float* p, int n) {
    if (n >= W) return loadu(p);
    V v = zero();
    for (int i = 0; i < n; ++i) v[i] = p[i];
    return v;
  }
  // The masked-load interface of the wider levels (a lane count for a mask;
  // scalar, so run_block packs narrow panels here instead: kMaskedB).
  static int mask(int n) { return n; }
  static V loadm(const float* p, int n) { return loadn(p, n); }
  static void storen(float* p, V v, int n) {
    if (n >= W) {
      std::memcpy(p, &v, sizeof(V));
      return;
    }
    for (int i = 0; i < n; ++i) p[i] = v[i];
  }
  static void store(float* p, V v) { *reinterpret_cast<V*>(p) = v; }
  static float sum(V v) { return (v[0] + v[2]) + (v[1] + v[3]); }
};
#define IPUXL_GEMM_AVX2_TRANSPOSE 0
#include "gemm_isa.inc"
#undef IPUXL_GEMM_AVX2_TRANSPOSE
}  // namespace base

#if IPUXL_MULTI_ISA
#define IPUXL_DO_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define IPUXL_PUSH_TARGET(s) \
  IPUXL_DO_PRAGMA(clang attribute push(__attribute__((target(s))), apply_to = function))
#define IPUXL_POP_TARGET() _Pragma("clang attribute pop")
#else
#define IPUXL_PUSH_TARGET(s) _Pragma("GCC push_options") IPUXL_DO_PRAGMA(GCC target(s))
#define IPUXL_POP_TARGET() _Pragma("GCC pop_options")
#endif

// ---------------------------------------------------------------- AVX2 + FMA
IPUXL_PUSH_TARGET(IPUXL_AVX2_TARGET_STR)
namespace avx2 {
struct Vec {
  using V = __m256;
  static constexpr int W = 8;
  static constexpr int MR = 6;  // 12 accumulators + 2 B vectors + 1 broadcast of 16 ymm
  static constexpr int DR = 4;  // dot kernel: DR x 3 accumulators
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V load(const float* p) { return _mm256_load_ps(p); }
  static V loadu(const float* p) { return _mm256_loadu_ps(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static __m256i mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V loadn(const float* p, int n) {
    if (n <= 0) return zero();
    return n >= W ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask(n));
  }
  // The lanes of mask m (from mask()); the others are zero and not read.
  static V loadm(const float* p, __m256i m) { return _mm256_maskload_ps(p, m); }
  static void storen(float* p, V v, int n) {
    if (n >= W)
      _mm256_storeu_ps(p, v);
    else if (n > 0)
      store_tail(p, v, n);
  }
  // The first n (0 < n < 8) floats of v to p, in at most three plain
  // stores (4, 2, 1 floats) rather than one masked store: VMASKMOVPS to
  // memory is slow on AMD cores. The write-back of products with a
  // narrow last panel (N = 10, MNIST's last layer) ends every row with one,
  // so on AMD cores this store decides the speed of such products.
  static void store_tail(float* p, V v, int n) {
    __m128 q = _mm256_castps256_ps128(v);
    if (n >= 4) {
      _mm_storeu_ps(p, q);
      p += 4;
      n -= 4;
      q = _mm256_extractf128_ps(v, 1);
    }
    if (n >= 2) {
      _mm_storel_pi(reinterpret_cast<__m64*>(p), q);
      p += 2;
      n -= 2;
      q = _mm_movehl_ps(q, q);
    }
    if (n > 0) _mm_store_ss(p, q);
  }
  static void store(float* p, V v) { _mm256_store_ps(p, v); }
  static float sum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};
#define IPUXL_GEMM_AVX2_TRANSPOSE 1
#include "gemm_isa.inc"
#undef IPUXL_GEMM_AVX2_TRANSPOSE
}  // namespace avx2
IPUXL_POP_TARGET()

// ---------------------------------------------------------------- AVX-512
IPUXL_PUSH_TARGET(IPUXL_AVX512_TARGET_STR)
namespace avx512 {
struct Vec {
  using V = __m512;
  static constexpr int W = 16;
  static constexpr int MR = 14;  // 28 accumulators + 2 B vectors of 32 zmm
  static constexpr int DR = 8;   // dot kernel: DR x 3 accumulators
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V bcast(const float* p) { return _mm512_set1_ps(*p); }
  static V load(const float* p) { return _mm512_load_ps(p); }
  static V loadu(const float* p) { return _mm512_loadu_ps(p); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static __mmask16 mask(int n) { return (__mmask16)((1u << n) - 1u); }
  static V loadn(const float* p, int n) {
    if (n <= 0) return zero();
    return n >= W ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(mask(n), p);
  }
  // The lanes of mask m (from mask()); the others are zero and not read.
  static V loadm(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
  static void storen(float* p, V v, int n) {
    if (n >= W)
      _mm512_storeu_ps(p, v);
    else if (n > 0)
      _mm512_mask_storeu_ps(p, mask(n), v);
  }
  static void store(float* p, V v) { _mm512_store_ps(p, v); }
  static float sum(V v) {
    // upper 256 bits onto the lower in registers (a shuffle of 128-bit
    // lanes; GCC 12 warns on the 512-bit extract intrinsics)
    const __m512 h = _mm512_add_ps(v, _mm512_shuffle_f32x4(v, v, 0xEE));
    __m256 q = _mm512_castps512_ps256(h);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(q), _mm256_extractf128_ps(q, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
};
#define IPUXL_GEMM_AVX2_TRANSPOSE 1
#include "gemm_isa.inc"
#undef IPUXL_GEMM_AVX2_TRANSPOSE
}  // namespace avx512
IPUXL_POP_TARGET()
#endif  // IPUXL_MULTI_ISA

const Impl& impl_for(isa::Level l) {
#if IPUXL_MULTI_ISA
  if (l == isa::Level::AVX512) return avx512::kImpl;
  if (l == isa::Level::AVX2) return avx2::kImpl;
#endif
  (void)l;
  return base::kImpl;
}

const Impl& impl() { return impl_for(isa::current()); }

// C = beta * C for K == 0 (or alpha == 0); beta == 0 writes zeros.
void scale_c(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    if (beta == 0.0f)
      std::memset(c, 0, (size_t)N * sizeof(float));
    else if (beta != 1.0f)
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
  }
}

}  // namespace

bool has_kernel() { return true; }
const char* kernel_name() { return isa::level_name(isa::current()); }

void PackedB::Free::operator()(float* p) const { std::free(p); }

PackedB::PackedB(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb)
    : K_(K), N_(N), level_((int)isa::current()) {
  nr_ = impl_for((isa::Level)level_).choose_nr(N);
  const int64_t np = (N + nr_ - 1) / nr_;
  data_.reset(alloc_floats((size_t)(np * nr_ * std::max<int64_t>(K, 1))));
  repack(trans_b, B, ldb);
}

void PackedB::repack(bool trans_b, const float* B, int64_t ldb) {
  impl_for((isa::Level)level_).pack_b(trans_b, K_, N_, B, ldb, (int)nr_, data_.get());
}

void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           const Epilogue* ep) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0.0f) {
    scale_c(M, N, beta, C, ldc);
    if (ep && ep->fn) ep->fn(ep->ctx, C, ldc, 0, M, 0, N);
    return;
  }
  const Impl& im = impl();
  BSource src{nullptr, tb, B, ldb};
  im.drive(ta, M, N, K, alpha, A, lda, src, beta, C, ldc, im.choose_nr(N), ep);
}

void sgemm_packed(bool ta, int64_t M, float alpha, const float* A, int64_t lda,
                  const PackedB& Bp, float beta, float* C, int64_t ldc, const Epilogue* ep) {
  const int64_t N = Bp.N(), K = Bp.K();
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0.0f) {
    scale_c(M, N, beta, C, ldc);
    if (ep && ep->fn) ep->fn(ep->ctx, C, ldc, 0, M, 0, N);
    return;
  }
  BSource src{Bp.data(), false, nullptr, 0};
  impl_for((isa::Level)Bp.level()).drive(ta, M, N, K, alpha, A, lda, src, beta, C, ldc,
                                         (int)Bp.panel_width(), ep);
}

void input_grad_update(const float* G, int64_t B, int64_t N, float* W, const float* X, int64_t M,
                       float* DX, float alpha, float beta, int64_t r0, int64_t r1) {
  impl().input_grad_update(G, B, N, W, X, M, DX, alpha, beta, r0, r1);
}

double fma_loop(int level, int64_t iters, float* sink) {
  return impl_for((isa::Level)level).fma_loop(iters, sink);
}

int vector_width() { return impl().W; }

bool uses_small_k_path(bool trans_a, bool trans_b, int64_t N, int64_t K) {
  return small_k_path(trans_a, trans_b, N, K, impl().W);
}

// The FMA loop's iteration count for about `seconds` of `now` (a clock in
// seconds): grown 4x at a time until one run is long enough to time.
template <class Clock>
static int64_t calibrated_iters(int level, double seconds, Clock now) {
  float sink = 0.0f;
  int64_t iters = 1 << 16;
  for (;;) {
    const double t0 = now();
    fma_loop(level, iters, &sink);
    const double dt = now() - t0;
    if (dt > 0.02 || iters > (int64_t{1} << 40))
      return std::max<int64_t>(1, (int64_t)((double)iters * seconds / dt));
    iters *= 4;
  }
}

double fma_peak_gflops(int level, int threads, double seconds) {
  bool ok = false;
  for (isa::Level l : isa::supported()) ok = ok || (int)l == level;
  if (!ok) throw std::invalid_argument("fma_peak: this CPU does not support that level");
  threads = std::max(threads, 1);
  // Calibrate: iterations for about `seconds` on one thread.
  const int64_t iters = calibrated_iters(level, seconds, [] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  });
  // Best of three: every thread runs the same loop at once (own threads, not
  // the pool, so that none is left waiting for a descheduled worker).
  double best = 0.0;
  for (int rep = 0; rep < 3; ++rep) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> ts;
    std::vector<float> sinks((size_t)threads);
    for (int t = 1; t < threads; ++t)
      ts.emplace_back([&, t] {
        ready.fetch_add(1);
        while (!go.load()) {
        }
        fma_loop(level, iters, &sinks[(size_t)t]);
      });
    while (ready.load() < threads - 1) {
    }
    const auto t0 = std::chrono::steady_clock::now();
    go.store(true);
    const double flops = fma_loop(level, iters, &sinks[0]);
    for (auto& th : ts) th.join();
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, flops * threads / dt / 1e9);
  }
  return best;
}

double fma_peak_cpu_gflops(int level, double seconds) {
  bool ok = false;
  for (isa::Level l : isa::supported()) ok = ok || (int)l == level;
  if (!ok) throw std::invalid_argument("fma_peak_cpu: this CPU does not support that level");
  // This thread's CPU clock, not the wall clock: time the thread spends
  // descheduled (other processes on the same cores) is not counted, so the
  // figure is the rate of one core while it runs this loop, whatever the
  // load. A thread's CPU time goes on while it waits on its core's other
  // hardware thread, so on SMT siblings under load it reads low, not high.
  auto cpu_now = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  };
  float sink = 0.0f;
  const int64_t iters = calibrated_iters(level, seconds, cpu_now);
  double best = 0.0;
  for (int rep = 0; rep < 3; ++rep) {
    const double t0 = cpu_now();
    const double flops = fma_loop(level, iters, &sink);
    const double dt = cpu_now() - t0;
    if (dt > 0.0) best = std::max(best, flops / dt / 1e9);
  }
  return best;
}

}  // namespace gemm
}  // namespace ipuxl
