#include "blas.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <stdexcept>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/mman.h>
#endif

#include "gemm.hpp"
#include "isa.hpp"
#include "kernel.hpp"
#include "options.hpp"
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
// are split into column blocks (row blocks when N is narrow, or for X^T @ G
// with a small K) over the core's pool, so one set of threads serves every
// kernel.
void sgemm_blas(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  auto block = [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    const float* a = ta ? A + i0 : A + i0 * lda;
    const float* b = tb ? B + j0 * ldb : B + j0;
    float* c = C + i0 * ldc + j0;
    g_sgemm(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, (int)(i1 - i0),
            (int)(j1 - j0), (int)K, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
  };
  // Small products run as one call. Larger ones are split into blocks over
  // the pool, and the split is a function of the shape alone, never of the
  // thread count: OpenBLAS rounds an element differently depending on where
  // it falls in a call (edge kernels), so a split that followed the threads
  // would change results between 1, 2 and 3 threads. Threads only decide
  // who runs which block.
  const double flops = 2.0 * (double)M * (double)N * (double)K;
  if (flops < 4.0e6) {
    block(0, M, 0, N);
    return;
  }
  const int64_t q = 16;      // blocks stay multiples of a cache line of floats
  const int64_t kParts = 8;  // enough blocks to balance a loaded pool
  // X^T @ G with a batch-sized K (IPUXL_GEMM=blas): row blocks, so that each
  // block's stretch of every row of C is whole and contiguous (column
  // blocks made each call walk 784 half-rows at a stride of N). Any other
  // A^T @ B with at least as many rows as columns: row blocks too, since
  // each column block's call packed the whole of A^T again. Two threads,
  // AVX2, calls alternating in one process (bench/README.md, "2026-11-27,
  // sixth session"): 1024^3 1.04, 512^3 1.03, 784x512x256 1.08,
  // 1024x256x512 1.21; wider than tall lost (256x1024x512 0.90).
  const bool rows = (ta && (K < 64 || M >= N) && M >= 4 * q) || !(N >= 4 * q || N >= M);
  const int64_t units = rows ? (M + q - 1) / q : (N + q - 1) / q;
  parallel_for_chunks(units, std::min(units, kParts), [&](int64_t u0, int64_t u1) {
    if (rows) block(u0 * q, std::min(M, u1 * q), 0, N);
    else block(0, M, u0 * q, std::min(N, u1 * q));
  });
}
}  // namespace

void set_sgemm(void* fn) { g_sgemm = reinterpret_cast<sgemm_fn>(fn); }
void* sgemm_ptr() { return reinterpret_cast<void*>(g_sgemm); }

namespace {

// The implementation each shape uses is a fixed rule of the instruction-set
// level and the shape, never a timing taken while the program compiles: the
// two GEMMs round differently, and a choice that followed the machine's load
// would give the same program different numbers from one run to the next.
// The rules come from bench/gemm.py (bench/README.md, "Instruction-set
// levels"; one Zen 4 core, alternating calls):
// * AVX-512: the core's packed kernel runs at 87-94% of the FMA peak, level
//   with OpenBLAS (1.0-1.06x), so the core.
// * AVX2, op(A) = A: the core. Until the eighth session OpenBLAS's Haswell
//   kernel took every product with all sides at least 64 (89% of peak
//   against the core's 74-79%, measured while GCC kept core accumulators on
//   the stack). With that fixed (88% of the one-thread peak on Zen 4), and
//   timed in the steady state (bench/gemm.py's warm-up), the core is ahead:
//   core / OpenBLAS GFLOP/s ratios, two threads, alternating calls, Zen 4
//   (bench/README.md, "2026-11-27, ninth session"): 128x512x784 1.25,
//   G @ W^T at 128 x 784 x 512 1.19, 80 x 512 x 512 1.48, 256x1024x256
//   1.20, 64^3 1.39-1.58, 512^3 0.84-1.08, 1024^3 0.96-1.03; the MNIST
//   step at batch 128, 1.02-1.20 (median 1.07, alternating processes).
// * AVX2, A^T @ B beyond the small-K path (K > 128): OpenBLAS, every side
//   at least 64. The core packs A^T and is behind there: 512x512x192 0.84,
//   784x512x256 0.85-0.87, 1024x256x256 0.84, 512^3 0.83-1.19.
// * SSE and portable levels: the core (OpenBLAS's SSE kernels are not faster).
// A pre-packed B (a weight no op writes) is the core's own advantage: core.
// * AVX2, X^T @ G with a batch-sized K (the weight gradients): the core's
//   small-K path (gemm_isa.inc, run_smallk; K up to 128, more than 8
//   columns). It was behind OpenBLAS's Haswell kernels (130-135 / 81-83 us
//   against ~100 / ~62 for the MNIST layers' 784x512 / 512x512 products at
//   K = 8; Intel Xeon model 207, bench/README.md, branch perf3); with its
//   accumulators in registers it is ahead on the same machine: core / BLAS
//   time 0.77-0.99 on one thread (80x512 at K = 10: 1.07) and 0.58-0.98 on
//   two at K = 8 to 48, 0.74-0.88 at K = 64 to 128 (calls alternating in
//   one process, bench/README.md, "2026-11-27, sixth session").
// * AVX2, X^T @ G with at most 8 columns and K < 64: OpenBLAS (level with
//   the core on one thread, ahead on two).
SgemmImpl rule(isa::Level level, bool packed, bool ta, bool tb, int64_t M, int64_t N,
               int64_t K) {
  if (packed) return SgemmImpl::Core;
  if (level == isa::Level::AVX2 && gemm::uses_small_k_path(ta, tb, N, K)) return SgemmImpl::Core;
  if (level == isa::Level::AVX2 && ta && M >= 64 && N >= 64 && K >= 64) return SgemmImpl::Blas;
  if (level == isa::Level::AVX2 && ta && !tb && K < 64) return SgemmImpl::Blas;
  return SgemmImpl::Core;
}

}  // namespace

SgemmImpl plan(bool ta, bool tb, int64_t M, int64_t N, int64_t K, bool packed) {
  if (!g_sgemm || M <= 0 || N <= 0 || K <= 0 || !fits_int32(M, N, K, M + K, N + K, N))
    return SgemmImpl::Core;
  const SgemmImpl force = options().gemm;
  if (force != SgemmImpl::Auto) return force;
  return rule(isa::current(), packed, ta, tb, M, N, K);
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

bool blas_can_be_chosen() {
  if (!options().blas_allowed) return false;
  if (options().gemm == SgemmImpl::Blas) return true;
  if (options().gemm == SgemmImpl::Core) return false;
  return isa::current() == isa::Level::AVX2;
}

bool prefer_fused_input_grad_update(int64_t batch, int64_t rows, int64_t cols, FusedUpdate mode) {
  if (batch < 1 || batch > 16 || rows < 1 || cols < 1) return false;  // the kernel's range
  if (mode == FusedUpdate::Always) return true;  // forced, for benchmarks and tests
  if (mode == FusedUpdate::Never) return false;
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
