#include "blas.hpp"

#include <algorithm>
#include <vector>

#include "parallel.hpp"

namespace ipuxl {
namespace blas {

namespace {
// cblas_sgemm with 32-bit integers (enum arguments are ints).
using sgemm_fn = void (*)(int, int, int, int, int, int, float, const float*, int, const float*,
                          int, float, float*, int);
sgemm_fn g_sgemm = nullptr;
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

// Blocked fallback: packs nothing, but keeps the inner loop unit-stride.
void sgemm_fallback(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                    const float* A, int64_t lda, const float* B, int64_t ldb, float beta,
                    float* C, int64_t ldc) {
  std::vector<float> brow((size_t)N);
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    if (beta == 0.0f) {
      for (int64_t j = 0; j < N; ++j) c[j] = 0.0f;
    } else if (beta != 1.0f) {
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
    }
    for (int64_t k = 0; k < K; ++k) {
      float a = alpha * (ta ? A[k * lda + i] : A[i * lda + k]);
      if (a == 0.0f) continue;
      if (!tb) {
        const float* b = B + k * ldb;
        for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
      } else {
        for (int64_t j = 0; j < N; ++j) c[j] += a * B[j * ldb + k];
      }
    }
  }
}
}  // namespace

void set_sgemm(void* fn) { g_sgemm = reinterpret_cast<sgemm_fn>(fn); }
void* sgemm_ptr() { return reinterpret_cast<void*>(g_sgemm); }

void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
    return;
  }
  const int64_t lim = 0x7fffffff;
  const bool use_blas =
      g_sgemm && M < lim && N < lim && K < lim && lda < lim && ldb < lim && ldc < lim;
  // The BLAS runs single-threaded (set at import); large products are split
  // into column blocks (row blocks when N is narrow) over the core's pool, so
  // one set of threads serves every kernel and none oversubscribe the cores.
  auto block = [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    const float* a = ta ? A + i0 : A + i0 * lda;
    const float* b = tb ? B + j0 * ldb : B + j0;
    float* c = C + i0 * ldc + j0;
    if (use_blas)
      g_sgemm(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, (int)(i1 - i0),
              (int)(j1 - j0), (int)K, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
    else
      sgemm_fallback(ta, tb, i1 - i0, j1 - j0, K, alpha, a, lda, b, ldb, beta, c, ldc);
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

}  // namespace blas
}  // namespace ipuxl
