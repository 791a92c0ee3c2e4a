// Packed, register-blocked float32 GEMM (Goto/BLIS style) for the core.
//
// C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C, row-major, with row
// strides lda/ldb/ldc of A, B and C as stored. op(B) is packed into panels
// of NR columns (K rows each, NR floats per row, zero padded); op(A) is read
// in place, both for A and A^T, by the micro-kernel's broadcasts. The
// micro-kernel keeps an MR x NR block of C in vector registers:
//   AVX-512: MR <= 14, NR = 32 (or 16 for narrow N)
//   AVX2+FMA: MR <= 6, NR = 16 (or 8)
// Large products are split over the core's thread pool with a single
// parallel_for; every thread packs only the B panels it uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ipuxl {
namespace gemm {

// True when the core was compiled with a SIMD micro-kernel (AVX-512 or
// AVX2+FMA); otherwise sgemm() below still works but is a plain loop nest.
bool has_kernel();
// "avx512", "avx2" or "portable".
const char* kernel_name();

// Work applied to finished blocks of C by the thread that computed them,
// while they are still in its cache (bias add, activation): fn(ctx, C, ldc,
// i0, i1, j0, j1) must transform exactly rows [i0, i1) x columns [j0, j1).
struct Epilogue {
  void (*fn)(const void* ctx, float* C, int64_t ldc, int64_t i0, int64_t i1, int64_t j0,
             int64_t j1) = nullptr;
  const void* ctx = nullptr;
};

// Same contract as blas::sgemm (which calls it for the shapes where it is the
// faster choice). M, N or K may be zero; beta == 0 never reads C.
void sgemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
           const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
           int64_t ldc, const Epilogue* ep = nullptr);

// op(B)[K,N] packed once into the micro-kernel's panel layout, for a B
// (weights) used by many products before it changes. Holds a copy: the
// caller re-packs (pack_b again, or repack) after B is updated.
class PackedB {
 public:
  PackedB() = default;
  PackedB(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb);
  // Re-pack from new values of a B with the same shape (no reallocation).
  void repack(bool trans_b, const float* B, int64_t ldb);
  int64_t K() const { return K_; }
  int64_t N() const { return N_; }
  int64_t panel_width() const { return nr_; }
  const float* panel(int64_t p) const { return data_.get() + p * nr_ * K_; }

 private:
  struct Free {
    void operator()(float* p) const;
  };
  int64_t K_ = 0, N_ = 0, nr_ = 0;
  std::unique_ptr<float, Free> data_;
};

// C = alpha * op(A) @ Bp + beta * C with a pre-packed B (K and N from Bp).
void sgemm_packed(bool trans_a, int64_t M, float alpha, const float* A, int64_t lda,
                  const PackedB& Bp, float beta, float* C, int64_t ldc,
                  const Epilogue* ep = nullptr);

}  // namespace gemm
}  // namespace ipuxl
