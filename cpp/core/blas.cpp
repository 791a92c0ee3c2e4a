#include "blas.hpp"

#include <algorithm>
#include <stdexcept>

#include "gemm.hpp"
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

void sgemm_with(SgemmImpl impl, bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
                int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  bool use_blas = g_sgemm && K > 0 && fits_int32(M, N, K, lda, ldb, ldc);
  if (impl == SgemmImpl::Core) use_blas = false;
  // Auto: the core's kernel wherever it has SIMD (it beats single-threaded
  // OpenBLAS per core on every measured shape, see bench/gemm.py); the BLAS
  // only when the core was built without a SIMD micro-kernel.
  if (impl == SgemmImpl::Auto && gemm::has_kernel()) use_blas = false;
  if (use_blas)
    sgemm_blas(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else
    gemm::sgemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
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
