#include "blas.hpp"

#include <vector>

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
  if (g_sgemm && M < lim && N < lim && K < lim && lda < lim && ldb < lim && ldc < lim) {
    g_sgemm(kRowMajor, ta ? kTrans : kNoTrans, tb ? kTrans : kNoTrans, (int)M, (int)N, (int)K,
            alpha, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
    return;
  }
  sgemm_fallback(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

}  // namespace blas
}  // namespace ipuxl
