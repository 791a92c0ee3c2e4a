// The float16-partials GEMM of hgemm.hpp: op(B) packed into panels of 64
// float16 columns, op(A) read in place by broadcasts, a micro-tile of up to
// 14 x 64 in 28 registers of 32 float16 lanes. Only the functions below the
// target attribute use AVX512-FP16; they run only when the CPU has it.
#include "hgemm.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

#include "isa.hpp"
#include "parallel.hpp"

// The compilers that know AVX512-FP16's intrinsics (GCC 12, Clang 14).
#if IPUXL_MULTI_ISA && ((defined(__clang__) && __clang_major__ >= 14) || \
                        (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 12))
#define IPUXL_HGEMM 1
#include <immintrin.h>
#define IPUXL_TARGET_FP16 __attribute__((target("avx512fp16," IPUXL_AVX512_TARGET_STR)))
#else
#define IPUXL_HGEMM 0
#endif

namespace ipuxl {
namespace gemm {

namespace {

constexpr int kMR = 14;                  // rows of a micro-tile
constexpr int kNR = 64;                  // columns of a packed panel: two registers
constexpr int64_t kRowBlock = 8 * kMR;   // rows of a task (its A block stays in L2)
constexpr int64_t kKB = kHalfPartialsBlock;

bool cpu_has_fp16() {
#if IPUXL_HGEMM
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512fp16");
#else
  return false;
#endif
}

// Panel p of op(B): packed[k * kNR + c] = op(B)[k][p * kNR + c], zero past N.
void pack_panel(bool tb, int64_t K, int64_t N, const f16* B, int64_t ldb, int64_t p,
                uint16_t* dst) {
  const int64_t j0 = p * kNR;
  const int nc = (int)std::min<int64_t>(kNR, N - j0);
  if (!tb) {
    for (int64_t k = 0; k < K; ++k) {
      uint16_t* row = dst + k * kNR;
      std::memcpy(row, &B[k * ldb + j0], sizeof(uint16_t) * (size_t)nc);
      std::fill(row + nc, row + kNR, uint16_t(0));
    }
    return;
  }
  // op(B)[k][j] = B[j][k]: each stored row of B is one column of the panel.
  if (nc < kNR)
    for (int64_t k = 0; k < K; ++k) std::fill(dst + k * kNR + nc, dst + (k + 1) * kNR, uint16_t(0));
  for (int c = 0; c < nc; ++c) {
    const f16* col = &B[(j0 + c) * ldb];
    for (int64_t k = 0; k < K; ++k) dst[k * kNR + c] = col[k].bits;
  }
}

#if IPUXL_HGEMM
// Rows [0, R) of a micro-tile over one block of K (kc products): the float16
// sums of the block, then added in float32 into C (stored when first).
// a(r, k) = a[r * ars + k * aks]; bp: the panel's rows of this block.
template <int R>
IPUXL_TARGET_FP16 void ukernel(int64_t kc, const uint16_t* a, int64_t ars, int64_t aks,
                               const uint16_t* bp, float* C, int64_t ldc, int ncols,
                               bool first) {
  __m512h acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ph();
  for (int64_t k = 0; k < kc; ++k) {
    const __m512h b0 = _mm512_loadu_ph(bp + k * kNR);
    const __m512h b1 = _mm512_loadu_ph(bp + k * kNR + 32);
    const uint16_t* ak = a + k * aks;
#pragma GCC unroll 14
    for (int r = 0; r < R; ++r) {
      const __m512h av = _mm512_castsi512_ph(_mm512_set1_epi16((short)ak[r * ars]));
      acc[r][0] = _mm512_fmadd_ph(av, b0, acc[r][0]);
      acc[r][1] = _mm512_fmadd_ph(av, b1, acc[r][1]);
    }
  }
  for (int r = 0; r < R; ++r) {
    float* c = C + r * ldc;
    for (int h = 0; h < 4; ++h) {  // four quarters of 16 columns
      const int n = std::min(16, ncols - 16 * h);
      if (n <= 0) break;
      const __m512i bits = _mm512_castph_si512(acc[r][h >> 1]);
      const __m256i q = (h & 1) ? _mm512_extracti64x4_epi64(bits, 1) : _mm512_castsi512_si256(bits);
      __m512 v = _mm512_cvtxph_ps(_mm256_castsi256_ph(q));
      const __mmask16 m = n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u);
      if (!first) v = _mm512_add_ps(_mm512_maskz_loadu_ps(m, c + 16 * h), v);
      _mm512_mask_storeu_ps(c + 16 * h, m, v);
    }
  }
}

using Ukernel = void (*)(int64_t, const uint16_t*, int64_t, int64_t, const uint16_t*, float*,
                         int64_t, int, bool);
template <int... I>
constexpr std::array<Ukernel, sizeof...(I)> make_table(std::integer_sequence<int, I...>) {
  return {&ukernel<I + 1>...};
}
constexpr auto kKernels = make_table(std::make_integer_sequence<int, kMR>());

// Rows [i0, i1) of C against panel p, every block of K in turn.
void run_task(bool ta, int64_t i0, int64_t i1, int64_t N, int64_t K, const f16* A, int64_t lda,
              const uint16_t* panel, float* C, int64_t ldc, int64_t p) {
  const int ncols = (int)std::min<int64_t>(kNR, N - p * kNR);
  const int64_t ars = ta ? 1 : lda, aks = ta ? lda : 1;
  const uint16_t* a16 = reinterpret_cast<const uint16_t*>(A);
  for (int64_t k0 = 0; k0 < K; k0 += kKB) {
    const int64_t kc = std::min(kKB, K - k0);
    for (int64_t i = i0; i < i1; i += kMR) {
      const int rows = (int)std::min<int64_t>(kMR, i1 - i);
      kKernels[(size_t)rows - 1](kc, a16 + i * ars + k0 * aks, ars, aks, panel + k0 * kNR,
                                 C + i * ldc + p * kNR, ldc, ncols, k0 == 0);
    }
  }
}
#endif  // IPUXL_HGEMM

}  // namespace

bool half_partials_native() {
  static const bool has = cpu_has_fp16();
  return has && isa::current() == isa::Level::AVX512;
}

void hgemm_half_partials(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const f16* A,
                         int64_t lda, const f16* B, int64_t ldb, float* C, int64_t ldc) {
  if (!half_partials_native())
    throw std::logic_error("hgemm_half_partials: this CPU or level has no AVX512-FP16");
#if IPUXL_HGEMM
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    for (int64_t i = 0; i < M; ++i) std::fill(C + i * ldc, C + i * ldc + N, 0.0f);
    return;
  }
  const int64_t np = (N + kNR - 1) / kNR;
  thread_local std::vector<uint16_t> packed;  // the calling thread's, kept between products
  if ((int64_t)packed.size() < np * K * kNR) packed.resize((size_t)(np * K * kNR));
  uint16_t* pk = packed.data();
  parallel_for(np, std::max<int64_t>(1, 4096 / std::max<int64_t>(K, 1)),
               [&](int64_t p0, int64_t p1) {
                 for (int64_t p = p0; p < p1; ++p) pack_panel(tb, K, N, B, ldb, p, pk + p * K * kNR);
               });
  // Tasks: row blocks outer, panels inner, so that consecutive tasks of a
  // thread reuse its block of A from cache.
  const int64_t nrb = (M + kRowBlock - 1) / kRowBlock;
  const int64_t flops_per_task = 2 * std::min(M, kRowBlock) * kNR * K;
  // Each task writes its own block of C: the cut does not change a bit.
  parallel_for_balanced(nrb * np, std::max<int64_t>(1, (int64_t{1} << 21) / flops_per_task),
               [&](int64_t t0, int64_t t1) {
                 for (int64_t t = t0; t < t1; ++t) {
                   const int64_t rb = t / np, p = t % np;
                   run_task(ta, rb * kRowBlock, std::min(M, (rb + 1) * kRowBlock), N, K, A, lda,
                            pk + p * K * kNR, C, ldc, p);
                 }
               });
#endif
}

}  // namespace gemm
}  // namespace ipuxl
