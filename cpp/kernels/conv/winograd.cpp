// Winograd F(2x2, 3x3) convolution (see winograd.hpp).
//
// With d the 4x4 inputs under a 2x2 block of outputs and g a 3x3 kernel,
//   Y = A^T [ (G g G^T) (.) (B^T d B) ] A
// where (.) multiplies elementwise and
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
//   G   = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]
//   A^T = [1 1 1 0; 0 1 -1 -1].
// Summed over input channels, the elementwise products become 16 matrix
// products per group: for each of the 16 positions xi of a 4x4 block,
//   M_xi[m][tile] = sum_c U_xi[m][c] V_xi[tile][c]
// with U = G g G^T per (m, c) and V = B^T d B per (tile, c). The
// multiplications drop from 36 to 16 per (tile, input channel, output
// channel); the transforms only add and halve.
//
// Steps, per call:
//  1. U for every (group, xi) as an Mg x Cg matrix (the kernel transform);
//  2. a channels-last, zero-padded copy of the input (every 4x4 block's
//     inputs for one channel block are then contiguous runs of channels),
//     made by 8x8 transposes in registers, checking on the way that every
//     value is finite;
//  3. the tiles (2x2 output blocks) of each group in blocks of T: V for the
//     block (16 x T x Cg floats, vectorised over channels), the 16 products
//     (the core's GEMM, M_xi = U_xi V_xi^T: Mg x T each), and the output
//     transform, vectorised over the tiles of one row of tiles, which writes
//     each output row's pairs of columns in place. Blocks run on the
//     threads; the blocks are cut by the shape alone and every output is
//     computed by one block in a fixed order, so results are the same bits
//     at any thread count.
//
// Accuracy: the transforms use only 1 and 1/2, and the products sum over
// the same channels as the direct form, so the result differs from it by a
// few float32 roundings: each input passes through two additions before
// the products, each sum of products through up to eight after (the tests
// compare with PyTorch's float64 result at the direct forms' tolerance).
//
// Memory: the input copy (at most 2^24 floats, see applies), the
// transformed kernels and each thread's block buffers are kept by the
// threads for their next call (grown, never shrunk).
#include "winograd.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "../../core/gemm.hpp"
#include "../../core/isa.hpp"
#include "../../core/parallel.hpp"

namespace ipuxl {
namespace conv_winograd {
namespace {

constexpr int64_t kXi = 16;  // positions of a transformed 4x4 block

// The copy of a function compiled for the level in use (f_avx512, f_avx2,
// f_base): AT_LEVEL(block_in)(b).
template <class Fn>
Fn at_level(Fn avx512, Fn avx2, Fn base) {
#if IPUXL_MULTI_ISA
  switch (isa::current()) {
    case isa::Level::AVX512: return avx512;
    case isa::Level::AVX2: return avx2;
    default: break;
  }
#else
  (void)avx512;
  (void)avx2;
#endif
  return base;
}
#if IPUXL_MULTI_ISA
#define AT_LEVEL(f) at_level(f##_avx512, f##_avx2, f##_base)
#else
#define AT_LEVEL(f) f##_base
#endif

struct FreeFloats {
  void operator()(float* p) const { std::free(p); }
};
using Floats = std::unique_ptr<float, FreeFloats>;

// n floats starting on a 64-byte line, not initialised.
Floats floats(int64_t n) {
  const size_t bytes = ((size_t)std::max<int64_t>(n, 1) * sizeof(float) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, bytes);
  if (!p) throw std::bad_alloc();
  return Floats(static_cast<float*>(p));
}

// A thread's buffer of one role: grows, never shrinks, freed at thread exit
// (a fresh 4-7 MB allocation per call cost its page faults every call).
struct Scratch {
  Floats buf;
  int64_t cap = 0;
  float* get(int64_t n) {
    if (n > cap) {
      buf = floats(n);
      cap = n;
    }
    return buf.get();
  }
};
thread_local Scratch t_weights, t_input, t_v, t_m;

// Tiles per block: the block's transformed inputs (16 x T x Cg floats) and
// products (16 x Mg x T) stay in the core's L2 cache (1 MiB together) from
// the input transform through the 16 products to the output transform. A
// multiple of 32: whole panels of the products' columns at every level.
int64_t block_tiles(const Problem& p) {
  const int64_t t = 16384 / (p.Cg + p.Mg) / 32 * 32;
  return std::min<int64_t>(256, std::max<int64_t>(32, t));
}

// The sizes everything below shares: tiles per row (TW) and column (TH) of
// an image, the padded copy's rows (PH) and columns (PW), the tiles of a
// group over the batch and their blocks. vs, ms, us: floats between the 16
// planes of a block's V and M and of a group's U, a line more than a plane,
// so that the 16 values of one tile (read or written together) fall in 16
// different sets of the L1 cache (planes a multiple of 4 KiB apart all fell
// in one set of 12 ways: the transforms ran 2-3 times slower, the kernel
// transform of 256 x 256 channels 4 times).
struct Layout {
  int64_t TH, TW, PH, PW, tiles, T, blocks, vs, ms, us;
  Layout(const Problem& p)
      : TH((p.OH + 1) / 2), TW((p.OW + 1) / 2), PH(2 * TH + 2), PW(2 * TW + 2),
        tiles(p.N * TH * TW), T(block_tiles(p)), blocks((tiles + T - 1) / T),
        vs(T * p.Cg + 16), ms(p.Mg * T + 16), us(p.Mg * p.Cg + 16) {}
};

bool finite_bits(uint32_t bits) { return (bits & 0x7f800000u) != 0x7f800000u; }

// U[gi][xi][m][c] = (G g G^T)[xi] of the kernel of output channel m and
// input channel c of group gi. Returns false if a weight is not finite.
bool transform_weights(const Problem& p, const Layout& L, const float* W, bool flipped, float* U) {
  std::atomic<bool> finite{true};
  parallel_for(p.G * p.Mg, std::max<int64_t>(1, 1024 / p.Cg), [&](int64_t u0, int64_t u1) {
    uint32_t bad = 0;
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t gi = u / p.Mg, m = u % p.Mg;
      for (int64_t c = 0; c < p.Cg; ++c) {
        float g[9];
        for (int t = 0; t < 9; ++t) {
          g[t] = flipped ? W[((gi * p.Cg + c) * p.Mg + m) * 9 + 8 - t]
                         : W[((gi * p.Mg + m) * p.Cg + c) * 9 + t];
          uint32_t bits;
          std::memcpy(&bits, &g[t], sizeof bits);
          bad |= (uint32_t)!finite_bits(bits);
        }
        float a[4][3];  // G g
        for (int j = 0; j < 3; ++j) {
          a[0][j] = g[j];
          a[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
          a[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
          a[3][j] = g[6 + j];
        }
        float* dst = U + gi * kXi * L.us + m * p.Cg + c;
        const int64_t step = L.us;  // between positions xi
        for (int r = 0; r < 4; ++r) {  // (G g) G^T
          dst[(r * 4 + 0) * step] = a[r][0];
          dst[(r * 4 + 1) * step] = 0.5f * (a[r][0] + a[r][1] + a[r][2]);
          dst[(r * 4 + 2) * step] = 0.5f * (a[r][0] - a[r][1] + a[r][2]);
          dst[(r * 4 + 3) * step] = a[r][2];
        }
      }
    }
    if (bad) finite.store(false, std::memory_order_relaxed);
  });
  return finite.load();
}

// Values of type T (a float, or a vector of V floats of GCC's vector
// extension, compiled for the level of the function that inlines it) at any
// alignment.
// (Everything a level's block_in / block_out calls is always_inline: a
// function GCC chose not to inline would be compiled for the baseline,
// its 16-float vectors split into 4-float ones.)
#define IPUXL_WINO_INLINE __attribute__((always_inline)) inline
template <class T>
IPUXL_WINO_INLINE T ld(const float* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <class T>
IPUXL_WINO_INLINE void st(float* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

// V = B^T d B of one tile for the channels of one T: d[r][q] at
// b + r * rs + q * cs, V[xi] stored at v + xi * vs.
template <class T>
IPUXL_WINO_INLINE void tile_in(const float* b, int64_t rs, int64_t cs, float* v, int64_t vs) {
  T d[4][4], e[4][4];
  for (int r = 0; r < 4; ++r)
    for (int q = 0; q < 4; ++q) d[r][q] = ld<T>(b + r * rs + q * cs);
  for (int q = 0; q < 4; ++q) {  // B^T d
    e[0][q] = d[0][q] - d[2][q];
    e[1][q] = d[1][q] + d[2][q];
    e[2][q] = d[2][q] - d[1][q];
    e[3][q] = d[1][q] - d[3][q];
  }
  for (int r = 0; r < 4; ++r) {  // (B^T d) B
    st<T>(v + (r * 4 + 0) * vs, e[r][0] - e[r][2]);
    st<T>(v + (r * 4 + 1) * vs, e[r][1] + e[r][2]);
    st<T>(v + (r * 4 + 2) * vs, e[r][2] - e[r][1]);
    st<T>(v + (r * 4 + 3) * vs, e[r][1] - e[r][3]);
  }
}

// A^T M A of the tiles of one T: M[xi] at s + xi * ss; y[r][q] is output
// row r, column q of each tile.
template <class T>
IPUXL_WINO_INLINE void tile_out(const float* s, int64_t ss, T y[2][2]) {
  T mm[16];
  for (int x = 0; x < 16; ++x) mm[x] = ld<T>(s + x * ss);
  for (int r = 0; r < 2; ++r) {
    T a[4];  // row r of A^T M
    for (int q = 0; q < 4; ++q)
      a[q] = r == 0 ? mm[q] + mm[4 + q] + mm[8 + q] : mm[4 + q] - mm[8 + q] - mm[12 + q];
    y[r][0] = a[0] + a[1] + a[2];  // (A^T M) A
    y[r][1] = a[1] - a[2] - a[3];
  }
}

// Vectors of V floats and of V ints (GCC's vector extension; a dependent
// vector_size in a template is ignored, hence one specialisation each).
template <int V>
struct Vec;
template <>
struct Vec<16> {
  typedef float F __attribute__((vector_size(64)));
  typedef int I __attribute__((vector_size(64)));
};
template <>
struct Vec<8> {
  typedef float F __attribute__((vector_size(32)));
  typedef int I __attribute__((vector_size(32)));
};
template <>
struct Vec<4> {
  typedef float F __attribute__((vector_size(16)));
  typedef int I __attribute__((vector_size(16)));
};

// lanes 0, V, 1, V + 1, ... of (a, b) (lo) and the second halves (hi): the
// two columns of V tiles side by side, as they lie in an output row.
template <int V, class F>
IPUXL_WINO_INLINE void zip(F a, F b, F* lo, F* hi) {
  if constexpr (V == 16) {
    *lo = __builtin_shufflevector(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    *hi = __builtin_shufflevector(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  } else if constexpr (V == 8) {
    *lo = __builtin_shufflevector(a, b, 0, 8, 1, 9, 2, 10, 3, 11);
    *hi = __builtin_shufflevector(a, b, 4, 12, 5, 13, 6, 14, 7, 15);
  } else {
    static_assert(V == 4, "vectors of 4, 8 or 16 floats");
    *lo = __builtin_shufflevector(a, b, 0, 4, 1, 5);
    *hi = __builtin_shufflevector(a, b, 2, 6, 3, 7);
  }
}

// dst[j * ds + i] = src[i * ss + j] for i, j < 8 (eight rows of eight
// floats transposed in registers), with bad |= a lane per non-finite value.
IPUXL_WINO_INLINE void transpose8(const float* src, int64_t ss, float* dst, int64_t ds,
                                  Vec<8>::I* bad) {
  typedef Vec<8>::F F;
  typedef Vec<8>::I I;
  F r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) {
    r[i] = ld<F>(src + i * ss);
    const I bits = (I)r[i];
    *bad |= (bits & 0x7f800000) == 0x7f800000;
  }
  for (int i = 0; i < 8; i += 2) {  // pairs of rows interleaved
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int h = 0; h < 8; h += 4)  // then pairs of pairs
    for (int k = 0; k < 2; ++k) {
      u[h + 2 * k] = __builtin_shufflevector(t[h + k], t[h + k + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      u[h + 2 * k + 1] = __builtin_shufflevector(t[h + k], t[h + k + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  for (int j = 0; j < 4; ++j) {  // then the 128-bit halves
    st<F>(dst + j * ds, __builtin_shufflevector(u[j], u[j + 4], 0, 1, 2, 3, 8, 9, 10, 11));
    st<F>(dst + (j + 4) * ds, __builtin_shufflevector(u[j], u[j + 4], 4, 5, 6, 7, 12, 13, 14, 15));
  }
}

// Rows [u0, u1) (image-group ig = u / PH, padded row r = u % PH) of xl:
// xl[ig][r][q][c] = x[n][gi*Cg + c][r - ph][q - pw], zero outside the image
// (and up to the last tile's reach). Returns whether every value read is
// finite.
struct CopyIO {
  const Problem* p;
  const Layout* L;
  const float* X;
  float* xl;
};

IPUXL_WINO_INLINE bool copy_rows_impl(const CopyIO& io, int64_t u0, int64_t u1) {
  const Problem& p = *io.p;
  const Layout& L = *io.L;
  const int64_t plane = p.IH * p.IW, img = L.PH * L.PW * p.Cg, Cg = p.Cg;
  Vec<8>::I bad = {};
  uint32_t bad1 = 0;
  auto check = [&](float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    bad1 |= (uint32_t)((bits & 0x7f800000u) == 0x7f800000u);
  };
  for (int64_t u = u0; u < u1; ++u) {
    const int64_t ig = u / L.PH, r = u % L.PH, ih = r - p.ph;
    const int64_t n = ig / p.G, gi = ig % p.G;
    float* row = io.xl + ig * img + r * L.PW * Cg;
    if (ih < 0 || ih >= p.IH) {
      std::memset(row, 0, sizeof(float) * (size_t)(L.PW * Cg));
      continue;
    }
    // columns q in [q0, q1) hold input columns q - pw
    const int64_t q0 = std::min<int64_t>(L.PW, p.pw), q1 = std::min<int64_t>(L.PW, p.pw + p.IW);
    std::memset(row, 0, sizeof(float) * (size_t)(q0 * Cg));
    std::memset(row + q1 * Cg, 0, sizeof(float) * (size_t)((L.PW - q1) * Cg));
    const float* src = io.X + (n * p.G + gi) * Cg * plane + ih * p.IW - p.pw;
    const int64_t cv = Cg / 8 * 8, qv = q0 + (q1 - q0) / 8 * 8;
    for (int64_t c = 0; c < cv; c += 8) {
      for (int64_t q = q0; q < qv; q += 8)
        transpose8(src + c * plane + q, plane, row + q * Cg + c, Cg, &bad);
      for (int64_t q = qv; q < q1; ++q)
        for (int64_t k = c; k < c + 8; ++k) check(row[q * Cg + k] = src[k * plane + q]);
    }
    for (int64_t c = cv; c < Cg; ++c)
      for (int64_t q = q0; q < q1; ++q) check(row[q * Cg + c] = src[c * plane + q]);
  }
  for (int i = 0; i < 8; ++i) bad1 |= (uint32_t)(bad[i] != 0);
  return bad1 == 0;
}

#if IPUXL_MULTI_ISA
IPUXL_TARGET_AVX512 bool copy_rows_avx512(const CopyIO& io, int64_t u0, int64_t u1) {
  return copy_rows_impl(io, u0, u1);
}
IPUXL_TARGET_AVX2 bool copy_rows_avx2(const CopyIO& io, int64_t u0, int64_t u1) {
  return copy_rows_impl(io, u0, u1);
}
#endif
bool copy_rows_base(const CopyIO& io, int64_t u0, int64_t u1) { return copy_rows_impl(io, u0, u1); }

// The channels-last copy of the whole input (see copy_rows_impl); returns
// whether every input is finite.
bool channels_last(const Problem& p, const Layout& L, const float* X, float* xl) {
  std::atomic<bool> finite{true};
  const CopyIO io{&p, &L, X, xl};
  parallel_for(p.N * p.G * L.PH, 8, [&](int64_t u0, int64_t u1) {
    if (!AT_LEVEL(copy_rows)(io, u0, u1)) finite.store(false, std::memory_order_relaxed);
  });
  return finite.load();
}

// The transforms of one block at vectors of V floats (see run_block).
struct BlockIO {
  const Problem* p;
  const Layout* L;
  int64_t gi, t0, nt;
  const float* xl;  // channels-last input
  float* V;         // [16][T][Cg]
  const float* M;   // [16][Mg][T]
  float* Y;
};

template <int V>
IPUXL_WINO_INLINE void block_in(const BlockIO& b) {
  typedef typename Vec<V>::F F;
  const Problem& p = *b.p;
  const Layout& L = *b.L;
  const int64_t Cg = p.Cg, per_img = L.TH * L.TW, img = L.PH * L.PW * Cg;
  const int64_t rs = L.PW * Cg, vs = L.vs, cv = Cg / V * V;
  for (int64_t i = 0; i < b.nt; ++i) {
    const int64_t t = b.t0 + i, n = t / per_img, ty = t % per_img / L.TW, tx = t % L.TW;
    const float* src = b.xl + (n * p.G + b.gi) * img + (2 * ty * L.PW + 2 * tx) * Cg;
    float* v = b.V + i * Cg;
    for (int64_t c = 0; c < cv; c += V) tile_in<F>(src + c, rs, Cg, v + c, vs);
    for (int64_t c = cv; c < Cg; ++c) tile_in<float>(src + c, rs, Cg, v + c, vs);
  }
}

template <int V>
IPUXL_WINO_INLINE void block_out(const BlockIO& b) {
  typedef typename Vec<V>::F F;
  const Problem& p = *b.p;
  const Layout& L = *b.L;
  const int64_t Mg = p.Mg, T = L.T, per_img = L.TH * L.TW, plane = p.OH * p.OW;
  const int64_t ss = L.ms;
  for (int64_t m = 0; m < Mg; ++m) {
    for (int64_t i = 0; i < b.nt;) {
      // one row of tiles: tiles i .. i + run - 1 share the image and row
      const int64_t t = b.t0 + i, n = t / per_img, ty = t % per_img / L.TW, tx = t % L.TW;
      const int64_t run = std::min<int64_t>(b.nt - i, L.TW - tx);
      float* y = b.Y + ((n * p.G + b.gi) * Mg + m) * plane + 2 * ty * p.OW + 2 * tx;
      const float* s = b.M + m * T + i;
      const int nr = (int)std::min<int64_t>(2, p.OH - 2 * ty);
      // tiles whose four outputs exist: both rows, and both columns (all but
      // the last tile of an odd-width row)
      const int64_t whole = nr == 2 ? std::min<int64_t>(run, p.OW / 2 - tx) : 0;
      int64_t j = 0;
      for (; j + V <= whole; j += V) {
        F o[2][2], lo, hi;
        tile_out<F>(s + j, ss, o);
        for (int r = 0; r < 2; ++r) {
          zip<V>(o[r][0], o[r][1], &lo, &hi);
          st<F>(y + r * p.OW + 2 * j, lo);
          st<F>(y + r * p.OW + 2 * j + V, hi);
        }
      }
      if (j < whole) {
        // the last whole tiles of the row, fewer than V: one vector
        // computed (the lanes past them read other products of the
        // buffer), the valid columns copied out
        F o[2][2], lo, hi;
        tile_out<F>(s + j, ss, o);
        alignas(64) float tmp[2 * V];
        for (int r = 0; r < 2; ++r) {
          zip<V>(o[r][0], o[r][1], &lo, &hi);
          st<F>(tmp, lo);
          st<F>(tmp + V, hi);
          std::memcpy(y + r * p.OW + 2 * j, tmp, sizeof(float) * (size_t)(2 * (whole - j)));
        }
        j = whole;
      }
      for (; j < run; ++j) {
        float o[2][2];
        tile_out<float>(s + j, ss, o);
        const int nc = (int)std::min<int64_t>(2, p.OW - 2 * (tx + j));
        for (int r = 0; r < nr; ++r)
          for (int q = 0; q < nc; ++q) y[r * p.OW + 2 * j + q] = o[r][q];
      }
      i += run;
    }
  }
}

// The even and the odd lanes of (lo, hi): the first and second columns of
// V tiles, as they lie in an output row (the inverse of zip).
template <int V, class F>
IPUXL_WINO_INLINE void unzip(F lo, F hi, F* even, F* odd) {
  if constexpr (V == 16) {
    *even = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    *odd = __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  } else if constexpr (V == 8) {
    *even = __builtin_shufflevector(lo, hi, 0, 2, 4, 6, 8, 10, 12, 14);
    *odd = __builtin_shufflevector(lo, hi, 1, 3, 5, 7, 9, 11, 13, 15);
  } else {
    static_assert(V == 4, "vectors of 4, 8 or 16 floats");
    *even = __builtin_shufflevector(lo, hi, 0, 2, 4, 6);
    *odd = __builtin_shufflevector(lo, hi, 1, 3, 5, 7);
  }
}

// dM = A dY A^T of the tiles of one T, dY = [[a, b], [c, d]] (the output
// gradient of a tile's 2x2 outputs): the gradient of M for Y = A^T M A.
// dM[xi] stored at out + xi * ss.
template <class T>
IPUXL_WINO_INLINE void tile_dy(T a, T b, T c, T d, float* out, int64_t ss) {
  const T rp[4] = {a, a + c, a - c, -c};  // A dY: rows (rp, rq)
  const T rq[4] = {b, b + d, b - d, -d};
  for (int r = 0; r < 4; ++r) {  // (A dY) A^T
    st<T>(out + (r * 4 + 0) * ss, rp[r]);
    st<T>(out + (r * 4 + 1) * ss, rp[r] + rq[r]);
    st<T>(out + (r * 4 + 2) * ss, rp[r] - rq[r]);
    st<T>(out + (r * 4 + 3) * ss, -rq[r]);
  }
}

// The weight gradient's transform of one block's output gradients:
// dM[xi][m][i] (rows T floats apart, planes L.ms) of tiles t0 + i, zeros
// for the outputs a tile at the bottom or right edge does not have.
struct DyIO {
  const Problem* p;
  const Layout* L;
  int64_t gi, t0, nt;
  const float* dY;
  float* dM;
};

// Returns whether every dY value read is finite.
template <int V>
IPUXL_WINO_INLINE bool block_dy(const DyIO& b) {
  typedef typename Vec<V>::F F;
  typedef typename Vec<V>::I I;
  const Problem& p = *b.p;
  const Layout& L = *b.L;
  const int64_t Mg = p.Mg, T = L.T, per_img = L.TH * L.TW, plane = p.OH * p.OW, ss = L.ms;
  I bad = {};
  uint32_t bad1 = 0;
  auto check = [&](F v) {
    const I bits = (I)v;
    bad |= (bits & 0x7f800000) == 0x7f800000;
  };
  for (int64_t m = 0; m < Mg; ++m) {
    for (int64_t i = 0; i < b.nt;) {
      const int64_t t = b.t0 + i, n = t / per_img, ty = t % per_img / L.TW, tx = t % L.TW;
      const int64_t run = std::min<int64_t>(b.nt - i, L.TW - tx);
      const float* y = b.dY + ((n * p.G + b.gi) * Mg + m) * plane + 2 * ty * p.OW + 2 * tx;
      float* d = b.dM + m * T + i;
      const int nr = (int)std::min<int64_t>(2, p.OH - 2 * ty);
      const int64_t whole = nr == 2 ? std::min<int64_t>(run, p.OW / 2 - tx) : 0;
      int64_t j = 0;
      for (; j + V <= whole; j += V) {
        F a, bb, c, dd;
        const F r0 = ld<F>(y + 2 * j), r0h = ld<F>(y + 2 * j + V);
        const F r1 = ld<F>(y + p.OW + 2 * j), r1h = ld<F>(y + p.OW + 2 * j + V);
        check(r0);
        check(r0h);
        check(r1);
        check(r1h);
        unzip<V>(r0, r0h, &a, &bb);
        unzip<V>(r1, r1h, &c, &dd);
        tile_dy<F>(a, bb, c, dd, d + j, ss);
      }
      for (; j < run; ++j) {
        const int nc = (int)std::min<int64_t>(2, p.OW - 2 * (tx + j));
        float v[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
        for (int r = 0; r < nr; ++r)
          for (int q = 0; q < nc; ++q) {
            v[r][q] = y[r * p.OW + 2 * j + q];
            uint32_t bits;
            std::memcpy(&bits, &v[r][q], sizeof bits);
            bad1 |= (uint32_t)((bits & 0x7f800000u) == 0x7f800000u);
          }
        tile_dy<float>(v[0][0], v[0][1], v[1][0], v[1][1], d + j, ss);
      }
      i += run;
    }
  }
  for (int k = 0; k < V; ++k) bad1 |= (uint32_t)(bad[k] != 0);
  return bad1 == 0;
}

#if IPUXL_MULTI_ISA
IPUXL_TARGET_AVX512 void block_in_avx512(const BlockIO& b) { block_in<16>(b); }
IPUXL_TARGET_AVX512 void block_out_avx512(const BlockIO& b) { block_out<16>(b); }
IPUXL_TARGET_AVX512 bool block_dy_avx512(const DyIO& b) { return block_dy<16>(b); }
IPUXL_TARGET_AVX2 void block_in_avx2(const BlockIO& b) { block_in<8>(b); }
IPUXL_TARGET_AVX2 void block_out_avx2(const BlockIO& b) { block_out<8>(b); }
IPUXL_TARGET_AVX2 bool block_dy_avx2(const DyIO& b) { return block_dy<8>(b); }
#endif
void block_in_base(const BlockIO& b) { block_in<4>(b); }
void block_out_base(const BlockIO& b) { block_out<4>(b); }
bool block_dy_base(const DyIO& b) { return block_dy<4>(b); }





// Tiles [t0, t1) of group gi: input transform, 16 products, output transform.
void run_block(const Problem& p, const Layout& L, int64_t gi, int64_t t0, int64_t t1,
               const float* xl, const float* U, float* Y, float* V, float* Mp) {
  const int64_t nt = t1 - t0, T = L.T, Cg = p.Cg, Mg = p.Mg;
  const BlockIO b{&p, &L, gi, t0, nt, xl, V, Mp, Y};
  AT_LEVEL(block_in)(b);
  // M_xi [Mg x nt] = U_xi [Mg x Cg] @ V_xi^T (V_xi is nt x Cg)
  for (int64_t x = 0; x < kXi; ++x)
    gemm::sgemm(false, true, Mg, nt, Cg, 1.0f, U + (gi * kXi + x) * L.us, Cg, V + x * L.vs,
                Cg, 0.0f, Mp + x * L.ms, T);
  AT_LEVEL(block_out)(b);
}

}  // namespace

bool applies(const Problem& p) {
  if (p.Cg < 32 || p.Mg < 32 || p.OH < 2 || p.OW < 2) return false;
  const Layout L(p);
  return p.N * p.G * L.PH * L.PW * p.Cg <= (int64_t(1) << 24);
}

bool forward(const Problem& p, const float* X, const float* W, float* Y, bool flipped) {
  const Layout L(p);
  float* U = t_weights.get(p.G * kXi * L.us);
  if (!transform_weights(p, L, W, flipped, U)) return false;
  float* xl = t_input.get(p.N * p.G * L.PH * L.PW * p.Cg);
  if (!channels_last(p, L, X, xl)) return false;
  const int64_t units = p.G * L.blocks, threads = num_threads();
  const int64_t chunks = threads == 1 ? 1 : std::min<int64_t>(units, 4 * threads);
  parallel_for_chunks(units, chunks, [&](int64_t u0, int64_t u1) {
    float* V = t_v.get(kXi * L.vs);
    float* Mp = t_m.get(kXi * L.ms);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t gi = u / L.blocks, b = u % L.blocks;
      const int64_t t0 = b * L.T, t1 = std::min(L.tiles, t0 + L.T);
      run_block(p, L, gi, t0, t1, xl, U, Y, V, Mp);
    }
  });
  return true;
}

namespace {

// Fixed number of partial sums of the weight gradient over the tiles (a
// number of the shape only, so the result is the same bits at any thread
// count): part k sums blocks [blocks*k/P, blocks*(k+1)/P) in order.
constexpr int64_t kGradParts = 4;

}  // namespace

bool weights_grad(const Problem& p, const float* dY, const float* X, float* dW) {
  const Layout L(p);
  float* xl = t_input.get(p.N * p.G * L.PH * L.PW * p.Cg);
  if (!channels_last(p, L, X, xl)) return false;
  const int64_t P = std::min<int64_t>(kGradParts, L.blocks);
  // dU[part][gi][xi] (Mg x Cg, planes L.us apart)
  float* dU = t_weights.get(P * p.G * kXi * L.us);
  std::atomic<bool> finite{true};
  const int64_t units = p.G * P;
  parallel_for_chunks(units, num_threads() == 1 ? 1 : units, [&](int64_t u0, int64_t u1) {
    float* V = t_v.get(kXi * L.vs);
    float* dM = t_m.get(kXi * L.ms);
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t gi = u / P, part = u % P;
      const int64_t b0 = L.blocks * part / P, b1 = L.blocks * (part + 1) / P;
      float* acc = dU + (part * p.G + gi) * kXi * L.us;
      for (int64_t b = b0; b < b1; ++b) {
        const int64_t t0 = b * L.T, nt = std::min(L.tiles, t0 + L.T) - t0;
        AT_LEVEL(block_in)(BlockIO{&p, &L, gi, t0, nt, xl, V, nullptr, nullptr});
        if (!AT_LEVEL(block_dy)(DyIO{&p, &L, gi, t0, nt, dY, dM}))
          finite.store(false, std::memory_order_relaxed);
        // dU_xi [Mg x Cg] (+)= dM_xi [Mg x nt] @ V_xi [nt x Cg]
        for (int64_t x = 0; x < kXi; ++x)
          gemm::sgemm(false, false, p.Mg, p.Cg, nt, 1.0f, dM + x * L.ms, L.T, V + x * L.vs, p.Cg,
                      b == b0 ? 0.0f : 1.0f, acc + x * L.us, p.Cg);
      }
    }
  });
  if (!finite.load()) return false;
  // dW = G^T dU G, the parts summed in order
  parallel_for(p.G * p.Mg, std::max<int64_t>(1, 1024 / p.Cg), [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t gi = u / p.Mg, m = u % p.Mg;
      for (int64_t c = 0; c < p.Cg; ++c) {
        float du[16];
        for (int x = 0; x < 16; ++x) {
          float v = 0.0f;
          for (int64_t part = 0; part < P; ++part)
            v += dU[((part * p.G + gi) * kXi + x) * L.us + m * p.Cg + c];
          du[x] = v;
        }
        float t[3][4];  // G^T dU
        for (int j = 0; j < 4; ++j) {
          t[0][j] = du[j] + 0.5f * (du[4 + j] + du[8 + j]);
          t[1][j] = 0.5f * (du[4 + j] - du[8 + j]);
          t[2][j] = 0.5f * (du[4 + j] + du[8 + j]) + du[12 + j];
        }
        float* dst = dW + ((gi * p.Mg + m) * p.Cg + c) * 9;
        for (int i = 0; i < 3; ++i) {  // (G^T dU) G
          dst[i * 3 + 0] = t[i][0] + 0.5f * (t[i][1] + t[i][2]);
          dst[i * 3 + 1] = 0.5f * (t[i][1] - t[i][2]);
          dst[i * 3 + 2] = 0.5f * (t[i][1] + t[i][2]) + t[i][3];
        }
      }
    }
  });
  return true;
}

}  // namespace conv_winograd
}  // namespace ipuxl
