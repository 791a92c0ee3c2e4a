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
  // Row blocks for X^T @ G with a batch-sized K (K < 64) and for any other
  // A^T @ B at least as tall as it is wide: each block's stretch of every
  // row of C is then whole and contiguous, and each call packs only its own
  // rows of A^T (column blocks would walk C's rows at a stride of N and pack
  // the whole of A^T in every call). Row blocks also where C is too narrow
  // for column blocks (N < 64 and below M). Otherwise column blocks: each
  // call then packs only its slice of B.
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
// The rule, and what each line relies on (bench/gemm.py shows the choice
// per shape, its `plan` column, and the ratio to the best peer; the A/B
// runs behind each line are in bench/results/2026-11-27.md):
// * A pre-packed B (a weight no op writes): the core, which packs it once
//   per host write where OpenBLAS would pack it on every call.
// * AVX-512: the core. Its packed kernel runs level with OpenBLAS's.
// * SSE and portable levels: the core (OpenBLAS's SSE kernels are not
//   faster).
// * AVX2, op(A) = A: the core. Its kernel keeps every accumulator in
//   registers and, in the steady state of a training loop, runs at or above
//   OpenBLAS's Haswell kernel on the products of the MLP and transformer
//   steps.
// * AVX2, X^T @ G with a batch-sized K (the weight gradients): the core's
//   small-K path (gemm_isa.inc, run_smallk; K up to 128, more than 8
//   columns), which keeps its block of C in registers over the short K
//   that OpenBLAS's packing does not amortise.
// * AVX2, any other A^T @ B with every side at least 64: OpenBLAS. The core
//   packs A^T first, and that pass is what it loses there.
// * AVX2, X^T @ G with at most 8 columns and K < 64: OpenBLAS (too few
//   columns for the small-K path's register tile; level on one thread,
//   ahead on two).
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
  // Rules from bench/fused_update.py (fused / two GEMMs, 2 threads; it
  // prints this rule's decision beside its timings). Fusing saves a second read and
  // a write of W, so it pays where moving W dominates: a large W, a small
  // batch. Short rows lose (B horizontal sums per row of W, and the GEMMs'
  // register tiles are better used), and so does a batch of 16 on a W of
  // 2^16 elements or fewer.
  const int64_t elems = rows * cols;
  switch (isa::current()) {
    case isa::Level::AVX512:
      // faster for W of 512x512 and 784x512 at batches 1-16 and 64x1024 at
      // 1-8; slower for W of 96x96 to 1024x64.
      return cols >= 256 && elems >= (1 << 16) && (batch <= 8 || elems >= (1 << 18));
    case isa::Level::AVX2:
      // faster at batches 4-8 (taken from batch 2); slower at batch 1 (the
      // GEMMs' dot-product path is ahead there) and at 16.
      return cols >= 256 && elems >= (1 << 16) && batch >= 2 && batch <= 8;
    default:
      // 4-wide vectors: the GEMMs are slow, and fusing wins except for a
      // batch of 16 on a small W and for narrow (10-column) outputs.
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
