// float16 kernels computed in float32, a block at a time.
//
// A float16 op is defined as: each input converted to float (exact), the
// op's float32 formula, the result rounded to float16 (round to nearest
// even) once. The helpers here do exactly that on blocks of kBlock
// elements: the bulk F16C / AVX-512 conversions of core/half.hpp (the
// same bits as the scalar f16 rules at every level, NaNs included) into
// float buffers on the stack, the float loop compiled for the level in use,
// and one bulk conversion back.
//
// Same bits at every level: the float loop runs through run_exact, which
// compiles it per level with floating-point contraction off, so that no
// level fuses a*b + c into one FMA that another level rounds twice. The
// results are therefore those of the baseline (SSE2, no FMA) build of the
// same formula, at every level and thread count.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../core/half.hpp"
#include "../core/isa.hpp"
#include "../core/parallel.hpp"

namespace ipuxl {
namespace f16blk {

// Elements per block: a few float buffers of this size stay in L1.
constexpr int64_t kBlock = 512;
// Elements per thread below which a kernel stays on one thread.
constexpr int64_t kGrain = 32768;

#define IPUXL_NO_CONTRACT __attribute__((optimize("fp-contract=off")))

#if IPUXL_MULTI_ISA && defined(__GNUC__) && !defined(__clang__)
template <class F>
IPUXL_TARGET_AVX512 IPUXL_FLATTEN IPUXL_NO_CONTRACT void run_exact_avx512(const F& f, int64_t b,
                                                                          int64_t e) {
  f(b, e);
}
template <class F>
IPUXL_TARGET_AVX2 IPUXL_FLATTEN IPUXL_NO_CONTRACT void run_exact_avx2(const F& f, int64_t b,
                                                                      int64_t e) {
  f(b, e);
}
template <class F>
IPUXL_FLATTEN IPUXL_NO_CONTRACT void run_exact_base(const F& f, int64_t b, int64_t e) {
  f(b, e);
}
#define IPUXL_F16_LEVELS 1
#else
#define IPUXL_F16_LEVELS 0
#endif

// f(b, e) compiled for the level in use, without FP contraction.
template <class F>
inline void run_exact(const F& f, int64_t b, int64_t e) {
#if IPUXL_F16_LEVELS
  switch (isa::current()) {
    case isa::Level::AVX512: run_exact_avx512(f, b, e); return;
    case isa::Level::AVX2: run_exact_avx2(f, b, e); return;
    default: run_exact_base(f, b, e); return;
  }
#else
  // clang: contraction across statements is off by default (-ffp-contract=on).
  f(b, e);
#endif
}

// out[i] = f(in[0][i], ..., in[N-1][i]) for i < n, float16 in and out, f
// taking and returning floats. out may alias an input (each block is read
// before it is written). Split over the core's threads.
template <int N, class F>
void map(int64_t n, const f16* const (&in)[N], f16* out, const F& f) {
  ::ipuxl::parallel_for(n, kGrain, [&](int64_t b, int64_t e) {
    alignas(64) float buf[N > 0 ? N : 1][kBlock];
    alignas(64) float ob[kBlock];
    for (int64_t s = b; s < e; s += kBlock) {
      const int64_t len = std::min<int64_t>(kBlock, e - s);
      for (int k = 0; k < N; ++k) half::to_float(in[k] + s, buf[k], len);
      run_exact(
          [&](int64_t, int64_t m) {
            for (int64_t i = 0; i < m; ++i) {
              if constexpr (N == 1) ob[i] = f(buf[0][i]);
              else if constexpr (N == 2) ob[i] = f(buf[0][i], buf[1][i]);
              else ob[i] = f(buf[0][i], buf[1][i], buf[2][i]);
            }
          },
          0, len);
      half::from_float(ob, out + s, len);
    }
  });
}

// out[r, j] = f(a[r, j], row[j]) for rows r < rows of length cols: the
// bias-add pattern, `row` already converted to float.
template <class F>
void map_rows(int64_t rows, int64_t cols, const f16* a, const float* row, f16* out, const F& f) {
  ::ipuxl::parallel_for(rows, std::max<int64_t>(1, kGrain / std::max<int64_t>(cols, 1)),
                        [&](int64_t r0, int64_t r1) {
    alignas(64) float ab[kBlock];
    alignas(64) float ob[kBlock];
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t j0 = 0; j0 < cols; j0 += kBlock) {
        const int64_t len = std::min<int64_t>(kBlock, cols - j0);
        const int64_t off = r * cols + j0;
        half::to_float(a + off, ab, len);
        const float* rw = row + j0;
        run_exact(
            [&](int64_t, int64_t m) {
              for (int64_t i = 0; i < m; ++i) ob[i] = f(ab[i], rw[i]);
            },
            0, len);
        half::from_float(ob, out + off, len);
      }
    }
  });
}

// float copies of nmat row-major float16 matrices [rows, cols], each
// transposed: dst[m][j][i] = src[m][i][j]. A float16 MatMul with a folded
// transpose converts its operand this way and runs the plain product, the
// same float32 GEMM (and so the same bits) as the unfused Transpose +
// MatMul.
inline void to_float_transposed(const f16* src, float* dst, int64_t nmat, int64_t rows,
                                int64_t cols) {
  constexpr int64_t T = 32;
  const int64_t rb = (rows + T - 1) / T;
  ::ipuxl::parallel_for(nmat * rb, std::max<int64_t>(1, kGrain / std::max<int64_t>(T * cols, 1)),
                        [&](int64_t u0, int64_t u1) {
    alignas(64) float tile[T][T];
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t m = u / rb, i0 = (u % rb) * T, i1 = std::min(rows, i0 + T);
      const f16* s = src + m * rows * cols;
      float* d = dst + m * rows * cols;
      for (int64_t j0 = 0; j0 < cols; j0 += T) {
        const int64_t j1 = std::min(cols, j0 + T);
        for (int64_t i = i0; i < i1; ++i) half::to_float(s + i * cols + j0, tile[i - i0], j1 - j0);
        for (int64_t j = j0; j < j1; ++j)
          for (int64_t i = i0; i < i1; ++i) d[j * rows + i] = tile[i - i0][j - j0];
      }
    }
  });
}

// op(X) of a float16 operand [..., r, c] as float, transposed when `t`.
inline void to_float_op(const f16* src, float* dst, int64_t n, bool t, int64_t r, int64_t c) {
  if (t && n > 0) to_float_transposed(src, dst, n / (r * c), r, c);
  else half::to_float_parallel(src, dst, n);
}

}  // namespace f16blk
}  // namespace ipuxl
