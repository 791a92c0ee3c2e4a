#include "gemm.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "parallel.hpp"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace ipuxl {
namespace gemm {

namespace {

float* alloc_floats(size_t n) {
  size_t bytes = ((n * sizeof(float)) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes > 0 ? bytes : 64);
  if (!p) throw std::bad_alloc();
  return static_cast<float*>(p);
}

// A thread's packing buffer: grows, never shrinks, freed at thread exit.
struct Scratch {
  float* p = nullptr;
  size_t n = 0;
  ~Scratch() { std::free(p); }
  float* get(size_t need) {
    if (need > n) {
      std::free(p);
      p = nullptr;
      n = 0;
      p = alloc_floats(need);
      n = need;
    }
    return p;
  }
};
thread_local Scratch t_scratch;

// ---------------------------------------------------------------------------
// Vector traits. Each defines the vector type V, its width W, the largest
// micro-tile height MR (registers: MR * NV accumulators + NV loads of B + one
// broadcast must fit), and loads/stores with a count of valid lanes.
#if defined(__AVX512F__)
#define IPUXL_GEMM_SIMD 1
constexpr const char* kName = "avx512";
struct Vec {
  using V = __m512;
  static constexpr int W = 16;
  static constexpr int MR = 14;  // 28 accumulators + 2 B vectors of 32 zmm
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V bcast(const float* p) { return _mm512_set1_ps(*p); }
  static V load(const float* p) { return _mm512_load_ps(p); }
  static V loadu(const float* p) { return _mm512_loadu_ps(p); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static __mmask16 mask(int n) { return (__mmask16)((1u << n) - 1u); }
  static V loadn(const float* p, int n) {
    if (n <= 0) return zero();
    return n >= W ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(mask(n), p);
  }
  static void storen(float* p, V v, int n) {
    if (n >= W)
      _mm512_storeu_ps(p, v);
    else
      _mm512_mask_storeu_ps(p, mask(n), v);
  }
  static void store(float* p, V v) { _mm512_store_ps(p, v); }
  static float sum(V v) {
    // through memory: GCC 12 warns on the 512-bit extract intrinsics
    alignas(64) float t[16];
    _mm512_store_ps(t, v);
    __m256 q = _mm256_add_ps(_mm256_load_ps(t), _mm256_load_ps(t + 8));
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(q), _mm256_extractf128_ps(q, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static constexpr int DR = 8;  // dot kernel: DR x 3 accumulators
};
#elif defined(__AVX2__) && defined(__FMA__)
#define IPUXL_GEMM_SIMD 1
constexpr const char* kName = "avx2";
struct Vec {
  using V = __m256;
  static constexpr int W = 8;
  static constexpr int MR = 6;  // 12 accumulators + 2 B vectors + 1 broadcast of 16 ymm
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V bcast(const float* p) { return _mm256_broadcast_ss(p); }
  static V load(const float* p) { return _mm256_load_ps(p); }
  static V loadu(const float* p) { return _mm256_loadu_ps(p); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static __m256i mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V loadn(const float* p, int n) {
    if (n <= 0) return zero();
    return n >= W ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, mask(n));
  }
  static void storen(float* p, V v, int n) {
    if (n >= W)
      _mm256_storeu_ps(p, v);
    else
      _mm256_maskstore_ps(p, mask(n), v);
  }
  static void store(float* p, V v) { _mm256_store_ps(p, v); }
  static float sum(V v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
  }
  static constexpr int DR = 4;  // dot kernel: DR x 3 accumulators
};
#else
#define IPUXL_GEMM_SIMD 0
constexpr const char* kName = "portable";
#endif

// Depth of one k-block. A packed B slice (KC x NR floats, 64 KiB at NR 32)
// is reused from L2 by the row tiles of A; deeper blocks mean fewer passes
// over C and A. Measured on Zen 5 (bench/gemm.py shapes and 1024^3): KC 512
// is 2-10% faster than 256 (the L1-resident choice), 1024 no better.
constexpr int64_t kKC = 512;
// Rows of A per block: an MC x KC block of A stays in L2.
constexpr int64_t kMC = 16 * 14;

#if IPUXL_GEMM_SIMD
constexpr int W = Vec::W;
constexpr int MRMAX = Vec::MR;
constexpr int NRMAX = 2 * W;

// Micro-kernel: C[0:MR, 0:ncols] (+)= alpha * a[MR, kc] @ b[kc, NV*W].
// AT: a(i,k) = a[k*sa + i] (A^T stored; also the layout of consecutive
// rows), else a(i,k) = a[i*sa + k]. b advances by bs floats per k (NV*W
// when packed, ldb when read in place). first: this k-block applies beta
// (beta0: beta == 0, C is not read); later blocks accumulate into C.
struct Args {
  int64_t kc;
  const float* a;
  int64_t sa;
  const float* b;
  int64_t bs;
  float* c;
  int64_t ldc;
  float alpha, beta;
  int ncols;
  bool first, beta0;
};

template <int MR, int NV, bool AT>
void ukernel(const Args& g) {
  using V = typename Vec::V;
  V acc[MR][NV];
  for (int i = 0; i < MR; ++i)
    for (int v = 0; v < NV; ++v) acc[i][v] = Vec::zero();
  const float* b = g.b;
  const int64_t bs = g.bs;
  int64_t kc = g.kc;
  // B read in place (not packed): fetch rows ahead, the hardware prefetcher
  // does not follow a large row stride well.
  const bool stream_b = bs != NV * W;
  if (AT) {
    const float* a = g.a;
    const int64_t sa = g.sa;
    for (; kc > 0; --kc) {
      V bv[NV];
      for (int v = 0; v < NV; ++v) bv[v] = Vec::loadu(b + v * W);
      for (int i = 0; i < MR; ++i) {
        V ai = Vec::bcast(a + i);
        for (int v = 0; v < NV; ++v) acc[i][v] = Vec::fma(ai, bv[v], acc[i][v]);
      }
      a += sa;
      b += bs;
    }
  } else {
    // Rows of A in groups of three off one base pointer each (base,
    // base + sa, base + 2*sa), so the broadcasts address memory directly
    // without running out of general-purpose registers.
    constexpr int NG = (MR + 2) / 3;
    const float* base[NG];
    const int64_t s1 = g.sa, s2 = 2 * g.sa;
    for (int q = 0; q < NG; ++q) base[q] = g.a + 3 * q * g.sa;
    auto row = [&](int i) -> const float* {
      return base[i / 3] + (i % 3 == 0 ? 0 : (i % 3 == 1 ? s1 : s2));
    };
    for (; kc >= 4; kc -= 4) {
      if (stream_b)
        for (int u = 0; u < 4; ++u)
          for (int v = 0; v < NV * W; v += 16) _mm_prefetch((const char*)(b + (u + 16) * bs + v), _MM_HINT_T0);
      for (int u = 0; u < 4; ++u) {
        V bv[NV];
        for (int v = 0; v < NV; ++v) bv[v] = Vec::loadu(b + u * bs + v * W);
        for (int i = 0; i < MR; ++i) {
          V ai = Vec::bcast(row(i) + u);
          for (int v = 0; v < NV; ++v) acc[i][v] = Vec::fma(ai, bv[v], acc[i][v]);
        }
      }
      for (int q = 0; q < NG; ++q) base[q] += 4;
      b += 4 * bs;
    }
    for (; kc > 0; --kc) {
      V bv[NV];
      for (int v = 0; v < NV; ++v) bv[v] = Vec::loadu(b + v * W);
      for (int i = 0; i < MR; ++i) {
        V ai = Vec::bcast(row(i));
        for (int v = 0; v < NV; ++v) acc[i][v] = Vec::fma(ai, bv[v], acc[i][v]);
      }
      for (int q = 0; q < NG; ++q) base[q] += 1;
      b += bs;
    }
  }
  const V va = Vec::set1(g.alpha);
  const V vb = Vec::set1(g.first ? g.beta : 1.0f);
  const bool read_c = !(g.first && g.beta0);
  const bool unit_alpha = g.alpha == 1.0f;
  for (int i = 0; i < MR; ++i) {
    float* c = g.c + i * g.ldc;
    for (int v = 0; v < NV; ++v) {
      const int n = g.ncols - v * W;
      if (n <= 0) break;
      V r = unit_alpha ? acc[i][v] : Vec::mul(va, acc[i][v]);
      if (read_c) r = Vec::fma(vb, Vec::loadn(c + v * W, n), r);
      Vec::storen(c + v * W, r, n);
    }
  }
}

using KernelFn = void (*)(const Args&);

template <int NV, bool AT, int... I>
constexpr auto make_row(std::integer_sequence<int, I...>) {
  return std::array<KernelFn, sizeof...(I) + 1>{nullptr, &ukernel<I + 1, NV, AT>...};
}

// kTable[nv-1][at][mr]
const std::array<KernelFn, MRMAX + 1> kTable[2][2] = {
    {make_row<1, false>(std::make_integer_sequence<int, MRMAX>{}),
     make_row<1, true>(std::make_integer_sequence<int, MRMAX>{})},
    {make_row<2, false>(std::make_integer_sequence<int, MRMAX>{}),
     make_row<2, true>(std::make_integer_sequence<int, MRMAX>{})}};

// Dot-product kernel for C = op(A) @ B^T when op(A) has few rows (one micro
// tile) and A is row-major: both A rows and B^T rows are contiguous in k, so
// B is streamed once without the transposing pack. C[R rows, 3 cols].
template <int R, int J>
void dot_kernel(int64_t K, const float* a, int64_t lda, const float* bt, int64_t ldb, float* c,
                int64_t ldc, float alpha, float beta) {
  using V = typename Vec::V;
  V acc[R][J];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < J; ++j) acc[i][j] = Vec::zero();
  int64_t k = 0;
  for (; k + W <= K; k += W) {
    V bv[J];
    for (int j = 0; j < J; ++j) bv[j] = Vec::loadu(bt + j * ldb + k);
    for (int i = 0; i < R; ++i) {
      V ai = Vec::loadu(a + i * lda + k);
      for (int j = 0; j < J; ++j) acc[i][j] = Vec::fma(ai, bv[j], acc[i][j]);
    }
  }
  if (k < K) {
    const int n = (int)(K - k);
    V bv[J];
    for (int j = 0; j < J; ++j) bv[j] = Vec::loadn(bt + j * ldb + k, n);
    for (int i = 0; i < R; ++i) {
      V ai = Vec::loadn(a + i * lda + k, n);
      for (int j = 0; j < J; ++j) acc[i][j] = Vec::fma(ai, bv[j], acc[i][j]);
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < J; ++j) {
      const float r = alpha * Vec::sum(acc[i][j]);
      float& o = c[i * ldc + j];
      o = beta == 0.0f ? r : r + beta * o;
    }
}

using DotFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t,
                       float, float);
template <int J, int... I>
constexpr auto make_dot_row(std::integer_sequence<int, I...>) {
  return std::array<DotFn, sizeof...(I) + 1>{nullptr, &dot_kernel<I + 1, J>...};
}
constexpr int kDotJ = 3;
// kDot[j-1][r]: r rows x j columns
const std::array<DotFn, Vec::DR + 1> kDot[kDotJ] = {
    make_dot_row<1>(std::make_integer_sequence<int, Vec::DR>{}),
    make_dot_row<2>(std::make_integer_sequence<int, Vec::DR>{}),
    make_dot_row<3>(std::make_integer_sequence<int, Vec::DR>{})};

// Rows [0, M) x columns [j0, j1) of C = alpha * A @ B^T + beta * C by dot
// products, rows in balanced groups of at most DR.
void run_dot(int64_t M, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
             int64_t ldb, float beta, float* C, int64_t ldc, int64_t j0, int64_t j1) {
  const int64_t ng = (M + Vec::DR - 1) / Vec::DR;
  for (int64_t j = j0; j < j1; j += kDotJ) {
    const int jn = (int)std::min<int64_t>(kDotJ, j1 - j);
    for (int64_t g = 0; g < ng; ++g) {
      const int64_t r0 = M * g / ng, r1 = M * (g + 1) / ng;
      kDot[jn - 1][(size_t)(r1 - r0)](K, A + r0 * lda, lda, B + j * ldb, ldb, C + r0 * ldc + j,
                                      ldc, alpha, beta);
    }
  }
}

// Packs columns [j0, j0+ncols) of op(B), all K rows, as dst[k*nr + j],
// zero-padding to nr.
void pack_panel(bool tb, int64_t K, const float* B, int64_t ldb, int64_t j0, int ncols, int nr,
                float* dst) {
  if (!tb) {
    const float* src = B + j0;
    for (int64_t k = 0; k < K; ++k, src += ldb, dst += nr)
      for (int v = 0; v < nr; v += W) Vec::store(dst + v, Vec::loadn(src + v, ncols - v));
    return;
  }
  // op(B)(k, j) = B[j*ldb + k]: a transposing copy, 8 x 8 blocks through
  // registers where whole blocks are available.
  const float* src = B + j0 * ldb;
  int64_t k = 0;
#if defined(__AVX2__)
  if (ncols == nr) {
    for (; k + 8 <= K; k += 8) {
      for (int j = 0; j < nr; j += 8) {
        const float* s = src + j * ldb + k;
        __m256 r0 = _mm256_loadu_ps(s), r1 = _mm256_loadu_ps(s + ldb),
               r2 = _mm256_loadu_ps(s + 2 * ldb), r3 = _mm256_loadu_ps(s + 3 * ldb),
               r4 = _mm256_loadu_ps(s + 4 * ldb), r5 = _mm256_loadu_ps(s + 5 * ldb),
               r6 = _mm256_loadu_ps(s + 6 * ldb), r7 = _mm256_loadu_ps(s + 7 * ldb);
        __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1),
               t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3),
               t4 = _mm256_unpacklo_ps(r4, r5), t5 = _mm256_unpackhi_ps(r4, r5),
               t6 = _mm256_unpacklo_ps(r6, r7), t7 = _mm256_unpackhi_ps(r6, r7);
        __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
               u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
               u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
               u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
        float* d = dst + k * nr + j;
        _mm256_store_ps(d + 0 * nr, _mm256_permute2f128_ps(u0, u4, 0x20));
        _mm256_store_ps(d + 1 * nr, _mm256_permute2f128_ps(u1, u5, 0x20));
        _mm256_store_ps(d + 2 * nr, _mm256_permute2f128_ps(u2, u6, 0x20));
        _mm256_store_ps(d + 3 * nr, _mm256_permute2f128_ps(u3, u7, 0x20));
        _mm256_store_ps(d + 4 * nr, _mm256_permute2f128_ps(u0, u4, 0x31));
        _mm256_store_ps(d + 5 * nr, _mm256_permute2f128_ps(u1, u5, 0x31));
        _mm256_store_ps(d + 6 * nr, _mm256_permute2f128_ps(u2, u6, 0x31));
        _mm256_store_ps(d + 7 * nr, _mm256_permute2f128_ps(u3, u7, 0x31));
      }
    }
  }
#endif
  for (; k < K; ++k) {
    float* d = dst + k * nr;
    for (int j = 0; j < ncols; ++j) d[j] = src[j * ldb + k];
    for (int j = ncols; j < nr; ++j) d[j] = 0.0f;
  }
}

// Where op(B) comes from: pre-packed panels, or packed on the fly, or (one
// row tile per panel, op(B) not transposed) read in place.
struct BSource {
  const PackedB* packed;
  bool tb;
  const float* B;
  int64_t ldb;
};

// Computes rows [i0, i1) x panels [p0, p1) of C.
void run_block(bool ta, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const BSource& bsrc, float beta, float* C, int64_t ldc, int nr, int64_t i0,
               int64_t i1, int64_t p0, int64_t p1) {
  const int nv = nr / W;
  const int64_t m = i1 - i0;
  if (m <= 0 || p1 <= p0) return;
  const int64_t mc_blocks = (m + kMC - 1) / kMC;
  const int64_t k_blocks = (K + kKC - 1) / kKC;
  const bool one_tile = m <= MRMAX;
  float* buf = nullptr;
  if (!bsrc.packed) buf = t_scratch.get((size_t)(K * nr));
  const auto& table = kTable[nv - 1][ta ? 1 : 0];
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t j0 = p * nr;
    const int ncols = (int)std::min<int64_t>(nr, N - j0);
    const float* bp;
    int64_t bs = nr;
    if (bsrc.packed) {
      bp = bsrc.packed->panel(p);
    } else if (one_tile && !bsrc.tb && ncols == nr) {
      // Each element of B is used by one micro-tile only: packing buys no
      // reuse, so the kernel streams B in place.
      bp = bsrc.B + j0;
      bs = bsrc.ldb;
    } else {
      pack_panel(bsrc.tb, K, bsrc.B, bsrc.ldb, j0, ncols, nr, buf);
      bp = buf;
    }
    for (int64_t mb = 0; mb < mc_blocks; ++mb) {
      const int64_t r0 = i0 + m * mb / mc_blocks, r1 = i0 + m * (mb + 1) / mc_blocks;
      const int64_t nt = (r1 - r0 + MRMAX - 1) / MRMAX;
      for (int64_t kb = 0; kb < k_blocks; ++kb) {
        const int64_t k0 = K * kb / k_blocks, k1 = K * (kb + 1) / k_blocks;
        Args g;
        g.kc = k1 - k0;
        g.sa = lda;
        g.b = bp + k0 * bs;
        g.bs = bs;
        g.ldc = ldc;
        g.alpha = alpha;
        g.beta = beta;
        g.ncols = ncols;
        g.first = kb == 0;
        g.beta0 = beta == 0.0f;
        // Balanced row tiles: heights differ by at most one, none above MRMAX.
        for (int64_t t = 0; t < nt; ++t) {
          const int64_t a0 = r0 + (r1 - r0) * t / nt, a1 = r0 + (r1 - r0) * (t + 1) / nt;
          g.a = ta ? A + k0 * lda + a0 : A + a0 * lda + k0;
          g.c = C + a0 * ldc + j0;
          table[(size_t)(a1 - a0)](g);
        }
      }
    }
  }
}

// Splits rows x panels over the pool (one parallel_for) when the product is
// large enough to pay for waking the workers.
void drive(bool ta, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
           const BSource& bsrc, float beta, float* C, int64_t ldc, int nr, const Epilogue* ep) {
  auto finish = [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    if (ep && ep->fn && i0 < i1 && j0 < j1) ep->fn(ep->ctx, C, ldc, i0, i1, j0, j1);
  };
  const int64_t np = (N + nr - 1) / nr;
  const double flops = 2.0 * (double)M * (double)N * (double)K;
  const int T = num_threads();
  if (!bsrc.packed && bsrc.tb && !ta && M <= MRMAX && K >= 64) {
    // One micro-tile of rows: every element of B is used once, so dot
    // products over contiguous rows of B^T beat packing B^T.
    if (T <= 1 || flops < 3.0e6) {
      run_dot(M, K, alpha, A, lda, bsrc.B, bsrc.ldb, beta, C, ldc, 0, N);
      finish(0, M, 0, N);
      return;
    }
    const int64_t nj = (N + kDotJ - 1) / kDotJ;
    parallel_for(nj, 1, [&](int64_t b, int64_t e) {
      run_dot(M, K, alpha, A, lda, bsrc.B, bsrc.ldb, beta, C, ldc, b * kDotJ,
              std::min(N, e * kDotJ));
      finish(0, M, b * kDotJ, std::min(N, e * kDotJ));
    });
    return;
  }
  if (T <= 1 || flops < 3.0e6) {
    run_block(ta, N, K, alpha, A, lda, bsrc, beta, C, ldc, nr, 0, M, 0, np);
    finish(0, M, 0, N);
    return;
  }
  // Grid tr x tp of threads: minimise the largest share of micro-tiles, plus
  // the packing each thread does (a row split packs the same panels twice).
  const int64_t ntiles = (M + MRMAX - 1) / MRMAX;
  int best_tr = 1;
  double best = 1e300;
  for (int tr = 1; tr <= T; ++tr) {
    if (T % tr) continue;
    const int tp = T / tr;
    const double rows = (double)((ntiles + tr - 1) / tr) * MRMAX;
    const double panels = (double)((np + tp - 1) / tp);
    const double cost = panels * nr * (double)K * (rows + (bsrc.packed ? 0.0 : 4.0));
    if (cost < best * 0.999) {
      best = cost;
      best_tr = tr;
    }
  }
  const int tr = best_tr, tp = T / tr;
  parallel_for(T, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      const int64_t r = c / tp, q = c % tp;
      // Row shares in whole tiles, so tiles stay full height.
      const int64_t i0 = std::min(M, ntiles * r / tr * MRMAX);
      const int64_t i1 = r + 1 == tr ? M : std::min(M, ntiles * (r + 1) / tr * MRMAX);
      run_block(ta, N, K, alpha, A, lda, bsrc, beta, C, ldc, nr, i0, i1, np * q / tp,
                np * (q + 1) / tp);
      finish(i0, i1, std::min(N, np * q / tp * nr), std::min(N, np * (q + 1) / tp * nr));
    }
  });
}

int choose_nr(int64_t N) { return N <= W ? W : NRMAX; }
#endif  // IPUXL_GEMM_SIMD

#if !IPUXL_GEMM_SIMD
// Portable path: unit-stride inner loop over columns of C.
void sgemm_loops(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                 int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    if (beta == 0.0f) {
      for (int64_t j = 0; j < N; ++j) c[j] = 0.0f;
    } else if (beta != 1.0f) {
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
    }
    for (int64_t k = 0; k < K; ++k) {
      const float a = alpha * (ta ? A[k * lda + i] : A[i * lda + k]);
      if (!tb) {
        const float* b = B + k * ldb;
        for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
      } else {
        for (int64_t j = 0; j < N; ++j) c[j] += a * B[j * ldb + k];
      }
    }
  }
}

#endif

// C = beta * C for K == 0 (or alpha == 0); beta == 0 writes zeros.
void scale_c(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    if (beta == 0.0f)
      std::memset(c, 0, (size_t)N * sizeof(float));
    else if (beta != 1.0f)
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
  }
}

}  // namespace

bool has_kernel() { return IPUXL_GEMM_SIMD != 0; }
const char* kernel_name() { return kName; }

void PackedB::Free::operator()(float* p) const { std::free(p); }

PackedB::PackedB(bool trans_b, int64_t K, int64_t N, const float* B, int64_t ldb)
    : K_(K), N_(N) {
#if IPUXL_GEMM_SIMD
  nr_ = choose_nr(N);
#else
  nr_ = 1;
#endif
  const int64_t np = (N + nr_ - 1) / nr_;
  data_.reset(alloc_floats((size_t)(np * nr_ * std::max<int64_t>(K, 1))));
  repack(trans_b, B, ldb);
}

void PackedB::repack(bool trans_b, const float* B, int64_t ldb) {
  const int64_t np = (N_ + nr_ - 1) / nr_;
#if IPUXL_GEMM_SIMD
  for (int64_t p = 0; p < np; ++p)
    pack_panel(trans_b, K_, B, ldb, p * nr_, (int)std::min<int64_t>(nr_, N_ - p * nr_), (int)nr_,
               data_.get() + p * nr_ * K_);
#else
  // One column per panel: data[j*K + k] = op(B)(k, j).
  for (int64_t j = 0; j < np; ++j)
    for (int64_t k = 0; k < K_; ++k)
      data_.get()[j * K_ + k] = trans_b ? B[j * ldb + k] : B[k * ldb + j];
#endif
}

void sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
           int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
           const Epilogue* ep) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0.0f) {
    scale_c(M, N, beta, C, ldc);
    if (ep && ep->fn) ep->fn(ep->ctx, C, ldc, 0, M, 0, N);
    return;
  }
#if IPUXL_GEMM_SIMD
  BSource src{nullptr, tb, B, ldb};
  drive(ta, M, N, K, alpha, A, lda, src, beta, C, ldc, choose_nr(N), ep);
#else
  sgemm_loops(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (ep && ep->fn) ep->fn(ep->ctx, C, ldc, 0, M, 0, N);
#endif
}

void sgemm_packed(bool ta, int64_t M, float alpha, const float* A, int64_t lda,
                  const PackedB& Bp, float beta, float* C, int64_t ldc, const Epilogue* ep) {
  const int64_t N = Bp.N(), K = Bp.K();
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0.0f) {
    scale_c(M, N, beta, C, ldc);
    if (ep && ep->fn) ep->fn(ep->ctx, C, ldc, 0, M, 0, N);
    return;
  }
#if IPUXL_GEMM_SIMD
  BSource src{&Bp, false, nullptr, 0};
  drive(ta, M, N, K, alpha, A, lda, src, beta, C, ldc, (int)Bp.panel_width(), ep);
#else
  // Packed panels of width one are op(B) transposed: B^T stored, ldb = K.
  sgemm_loops(ta, true, M, N, K, alpha, A, lda, Bp.panel(0), K, beta, C, ldc);
  if (ep && ep->fn) ep->fn(ep->ctx, C, ldc, 0, M, 0, N);
#endif
}

}  // namespace gemm
}  // namespace ipuxl
