// Packed, register-blocked float32 GEMM (Goto/BLIS style) for the core.
//
// C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C, row-major, with row
// strides lda/ldb/ldc of A, B and C as stored. op(B) is packed into panels
// of NR columns (K rows each, NR floats per row, zero padded); op(A) is read
// in place, both for A and A^T, by the micro-kernel's broadcasts. The
// micro-kernel keeps an MR x NR block of C in vector registers:
//   AVX-512: MR <= 14, NR = 32 (or 16 for narrow N)
//   AVX2+FMA: MR <= 6, NR = 16 (or 8)
//   baseline (SSE2 / NEON, 4-wide): MR <= 6, NR = 8 (or 4)
// One copy per instruction-set level is compiled (gemm_isa.inc); the level
// in use is isa::current() (isa.hpp). Large products are split over the
// core's thread pool with a single parallel_for; every thread packs only
// the B panels it uses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace ipuxl {
namespace gemm {

// Always true: every level has a packed SIMD micro-kernel.
bool has_kernel();
// The level whose kernels run: "avx512", "avx2", "sse" (or "neon", "generic").
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
  const float* data() const { return data_.get(); }
  int level() const { return level_; }  // the isa::Level whose layout this is

 private:
  struct Free {
    void operator()(float* p) const;
  };
  int64_t K_ = 0, N_ = 0, nr_ = 0;
  int level_ = 0;
  std::unique_ptr<float, Free> data_;
};

// C = alpha * op(A) @ Bp + beta * C with a pre-packed B (K and N from Bp).
void sgemm_packed(bool trans_a, int64_t M, float alpha, const float* A, int64_t lda,
                  const PackedB& Bp, float beta, float* C, int64_t ldc,
                  const Epilogue* ep = nullptr);

// Rows [r0, r1) of MatMulInputGradUpdate at the level in use: DX[:, r] =
// G @ W[r, :] with the old W[r, :], then W[r, :] = beta * W[r, :] + alpha *
// sum_b X[b, r] * G[b, :]. G [B, N], W [M, N], X and DX [B, M], B <= 16.
void input_grad_update(const float* G, int64_t B, int64_t N, float* W, const float* X, int64_t M,
                       float* DX, float alpha, float beta, int64_t r0, int64_t r1);

// FMA probe of level `level` (an isa::Level the CPU supports): `iters`
// rounds of independent vector multiply-adds on one thread; returns the
// flops done (*sink receives a value depending on all of them).
double fma_loop(int level, int64_t iters, float* sink);

// Measured float32 FMA throughput of `level` (GFLOP/s): `threads` threads
// each running fma_loop for about `seconds`, best of three. Throws
// std::invalid_argument for a level the CPU lacks.
double fma_peak_gflops(int level, int threads, double seconds);

// The same loop on the calling thread, timed by that thread's CPU clock
// (GFLOP per CPU-second, best of three runs of about `seconds` CPU
// seconds): one core's rate while it runs, which other processes' load
// does not lower. Throws std::invalid_argument for a level the CPU lacks.
double fma_peak_cpu_gflops(int level, double seconds);

// Floats per vector of the level in use.
int vector_width();

// Whether sgemm computes C = alpha * A^T @ B + beta * C (trans_a, not
// trans_b, B not pre-packed) on its small-K path at the level in use: K up
// to kSmallKMax and more than one vector of columns. The BLAS rule
// (blas.cpp) keeps these products on the core.
bool uses_small_k_path(bool trans_a, bool trans_b, int64_t N, int64_t K);

}  // namespace gemm
}  // namespace ipuxl
