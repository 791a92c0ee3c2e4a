// GEMM entry point of the core. float32 products run on the core's own
// packed SIMD GEMM (gemm.hpp) or on an optimised BLAS installed at import
// time (scipy-openblas32's cblas_sgemm, looked up by the Python package),
// whichever is faster for the shape; a portable loop nest is the last resort.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ipuxl {
namespace blas {

void set_sgemm(void* fn);
void* sgemm_ptr();

// Row-major C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C.
// lda/ldb/ldc are row strides of A, B and C as stored.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc);

// Which implementation sgemm uses: Auto picks per shape (plan()); Core
// forces the core's GEMM, Blas the installed BLAS (Core when none is
// installed).
enum class SgemmImpl { Auto = 0, Core = 1, Blas = 2 };

// The implementation for this product: a fixed rule of the instruction-set
// level and the shape, from measurements (blas.cpp), so that a program's
// numbers never depend on the machine's load. packed: the caller holds
// op(B) pre-packed (gemm::PackedB). Core without a BLAS.
// The core's options (options.hpp, from IPUXL_GEMM) can force a choice
// (for benchmarks).
SgemmImpl plan(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, bool packed = false);
// plan() as "core" or "blas".
// Whether plan() can choose the BLAS at the level in use (else the BLAS
// need not be loaded at all).
bool blas_can_be_chosen();
std::string sgemm_plan_name(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                            bool packed);

// Whether dX = G @ W^T and W = beta*W + alpha*X^T @ G (G [batch, cols],
// W [rows, cols], X [batch, rows]) are faster as one MatMulInputGradUpdate
// pass over W than as two GEMMs, at the level in use (a fixed rule per
// level, blas.cpp; bench/fused_update.py prints it beside its timings).
// Always / Never force the answer within the kernel's range (batch 1 to 16;
// IPUXL_FUSED_UPDATE, read by the Python settings and passed by the host
// pass that asks).
enum class FusedUpdate : int { Auto = 0, Always = 1, Never = 2 };
bool prefer_fused_input_grad_update(int64_t batch, int64_t rows, int64_t cols,
                                    FusedUpdate mode = FusedUpdate::Auto);
void sgemm_with(SgemmImpl impl, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                float alpha, const float* A, int64_t lda, const float* B, int64_t ldb,
                float beta, float* C, int64_t ldc);

// Runs sgemm_with(impl, ...) `repeat` times back to back (for benchmarks
// without interpreter overhead). impl 3: the core's GEMM with op(B) packed
// once before the repetitions (gemm::PackedB), so it times what a caller
// holding pre-packed weights pays per product.
void test_sgemm(int impl, int64_t repeat, bool trans_a, bool trans_b, int64_t M, int64_t N,
                int64_t K, float alpha, const float* A, int64_t lda, const float* B,
                int64_t ldb, float beta, float* C, int64_t ldc);

// Generic fallback for any arithmetic type T (double, integers; float16 is
// widened to float by the caller). Accumulates in Acc.
template <class T, class Acc>
void gemm_ref(int64_t M, int64_t N, int64_t K, const T* A, const T* B, T* C) {
  for (int64_t i = 0; i < M; ++i) {
    Acc* row = new Acc[(size_t)(N > 0 ? N : 1)]();
    for (int64_t k = 0; k < K; ++k) {
      Acc a = (Acc)A[i * K + k];
      const T* b = B + k * N;
      for (int64_t j = 0; j < N; ++j) row[j] += a * (Acc)b[j];
    }
    for (int64_t j = 0; j < N; ++j) C[i * N + j] = (T)row[j];
    delete[] row;
  }
}

}  // namespace blas
}  // namespace ipuxl
