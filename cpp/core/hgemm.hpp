// Float16 GEMM with float16 partials, on native float16 FMAs (AVX512-FP16).
//
// PopXL's matmul takes a partials type (ops.matmul's partials_type, or the
// session option partialsTypeMatMuls): "float" accumulates the products of
// float16 operands in float32 (the default; matmul.cpp converts and runs the
// float32 GEMM), "half" in float16, which the IPU's AMP units run at twice
// the rate, and which Graphcore's float16 PopXL applications choose. On a
// CPU with AVX512-FP16 the half partials run the same way here: a register
// of 32 float16 FMA lanes does twice the work of a float32 one.
//
// The contract of hgemm_half_partials: C[M,N] (float32) = op(A)[M,K] @
// op(B)[K,N], row-major float16 operands with row strides lda / ldb as
// stored (trans_a: A is stored [K, M]; trans_b: B is stored [N, K]). Along
// K, each block of kHalfPartialsBlock products accumulates in float16
// (fused multiply-adds, rounded to float16 after each), in order of k; the
// blocks' float16 sums are added in float32, first block first. So the
// partials are float16 as the option asks, and a long contraction loses no
// more than one block's float16 accumulation error (an IPU with half
// partials accumulates all of K in float16). Every element of C is computed
// by the same sequence of operations whatever the thread count.
#pragma once

#include <cstdint>

#include "dtype.hpp"

namespace ipuxl {
namespace gemm {

// Products of K accumulated in float16 before the float32 sum.
constexpr int64_t kHalfPartialsBlock = 256;

// Whether hgemm_half_partials can run: the CPU has AVX512-FP16 and the
// instruction-set level in use is AVX-512 (a lower level forced by the
// options turns the native float16 arithmetic off).
bool half_partials_native();

// See above. Throws std::logic_error when !half_partials_native().
void hgemm_half_partials(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
                         const f16* A, int64_t lda, const f16* B, int64_t ldb, float* C,
                         int64_t ldc);

}  // namespace gemm
}  // namespace ipuxl
