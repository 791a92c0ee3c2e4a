// The channels-in-vectors form of a forward convolution (see
// channels_in_vectors.hpp).
#include "channels_in_vectors.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "../../core/isa.hpp"
#include "../../core/parallel.hpp"
#include "direct.hpp"

namespace ipuxl {
namespace conv {

namespace {

constexpr int64_t kOcCB = 16;

struct OcTask {
  const float* xl;      // the image's padded channels-last copy (one group)
  const int64_t* toff;  // per tap: offset of its input in xl (floats)
  const float* w;       // this block's packed weights (see run_forward_oc)
  float* y;             // the block's first output channel of this image
  int64_t taps, Cg, OH, OW, PW, sh, sw;
};

template <int V, int R, int NV>
__attribute__((always_inline)) inline void oc_tile(const float* a, int64_t sx, const int64_t* toff,
                                                   int64_t taps, int64_t Cg, const float* w,
                                                   float* out) {
  typedef float Vf __attribute__((vector_size(V * sizeof(float)), aligned(4)));
  Vf acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = Vf{};
  // Rows of the tile in groups of three off one base pointer each (base,
  // base + sx, base + 2 sx), as in the GEMM micro-kernel, so every
  // broadcast addresses memory directly.
  constexpr int NG = (R + 2) / 3;
  const int64_t s1 = sx, s2 = 2 * sx;
  // Input channels in blocks of kOcCB, taps inside a block: the tile's
  // inputs for one block (kOcCB channels at every position the taps reach)
  // stay in L1 while all the taps use them; all channels per tap streamed
  // R lines of Cg floats per tap through it.
  for (int64_t c0 = 0; c0 < Cg; c0 += kOcCB) {
    const int64_t cn = std::min<int64_t>(kOcCB, Cg - c0);
    for (int64_t t = 0; t < taps; ++t) {
      const float* base[NG];
      for (int q = 0; q < NG; ++q) base[q] = a + toff[t] + c0 + 3 * q * sx;
      for (int64_t c = 0; c < cn; ++c) {
        Vf bv[NV];
        for (int v = 0; v < NV; ++v) bv[v] = *reinterpret_cast<const Vf*>(w + v * V);
        for (int r = 0; r < R; ++r) {
          const float xv = base[r / 3][r % 3 == 0 ? 0 : (r % 3 == 1 ? s1 : s2)];
          for (int v = 0; v < NV; ++v) acc[r][v] += xv * bv[v];
        }
        for (int q = 0; q < NG; ++q) base[q] += 1;
        w += NV * V;
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) *reinterpret_cast<Vf*>(out + (r * NV + v) * V) = acc[r][v];
}

template <int V, int NV, int R>
__attribute__((always_inline)) inline bool oc_tile_if(int nr, const float* a, int64_t sx,
                                                      const OcTask& t, float* out) {
  if (nr != R) return false;
  oc_tile<V, R, NV>(a, sx, t.toff, t.taps, t.Cg, t.w, out);
  return true;
}

template <int V, int NV, int... I>
__attribute__((always_inline)) inline void oc_tile_n(int nr, const float* a, int64_t sx,
                                                     const OcTask& t, float* out,
                                                     std::integer_sequence<int, I...>) {
  (oc_tile_if<V, NV, I + 1>(nr, a, sx, t, out) || ...);
}

// One task: every row of one image for one block of NV*V output channels,
// in tiles of at most RMAX positions (balanced: 28 -> 14 + 14, 56 -> 4 x 14).
template <int V, int NV, int RMAX>
__attribute__((always_inline)) inline void oc_task(const OcTask& t) {
  constexpr int NVV = NV * V;
  alignas(64) float out[RMAX * NVV];
  const int64_t plane = t.OH * t.OW, nt = (t.OW + RMAX - 1) / RMAX;
  const int64_t sx = t.sw * t.Cg;
  for (int64_t oh = 0; oh < t.OH; ++oh) {
    for (int64_t q = 0; q < nt; ++q) {
      const int64_t ow0 = t.OW * q / nt, ow1 = t.OW * (q + 1) / nt;
      const int nr = (int)(ow1 - ow0);
      const float* a = t.xl + ((oh * t.sh) * t.PW + ow0 * t.sw) * t.Cg;
      oc_tile_n<V, NV>(nr, a, sx, t, out, std::make_integer_sequence<int, RMAX>());
      float* y = t.y + oh * t.OW + ow0;
      for (int64_t j = 0; j < NVV; ++j)
        for (int r = 0; r < nr; ++r) y[j * plane + r] = out[r * NVV + j];
    }
  }
}

#if IPUXL_MULTI_ISA
IPUXL_TARGET_AVX512 void oc_task_avx512(const OcTask& t) { oc_task<16, 2, 14>(t); }
IPUXL_TARGET_AVX2 void oc_task_avx2(const OcTask& t) { oc_task<8, 2, 6>(t); }
#endif

}  // namespace

int64_t oc_block() { return direct_v() >= 8 ? 2 * direct_v() : 0; }

bool oc_form_applies(const Geom& g) {
  const int64_t nvv = oc_block();
  if (nvv == 0) return false;
  if (g.in[0] != 1 || g.k[0] != 1) return false;
  if (g.Mg % nvv != 0 || g.Cg < 16 || g.K <= kDirectMaxK) return false;
  // Taken where the row forms spend a sixth or more of their lanes past the
  // rows' ends (estimated as flat_pays does): the channels-in-vectors tiles
  // waste none, but copy the image and store each tile's channels one by
  // one, which the row forms' whole-vector stores do not; below that
  // fraction (a 3x3 layer on 28x28 or 56x56 planes: estimates 1.04-1.12)
  // the copy and the scattered stores cost more than the lanes saved.
  const int64_t OH = g.out[1], OW = g.out[2];
  const DirectCost c = direct_cost(OH, OW, (g.k[2] - 1) * g.dil[2]);
  const bool unit = g.stride[1] == 1 && g.stride[2] == 1;
  const double rows = unit ? std::min(c.rows, c.flat) : c.rows;
  if (rows < 1.15 * (double)(OH * OW) / (double)direct_v()) return false;
  // the channels-last copies of all images at once
  const int64_t PH = (g.out[1] - 1) * g.stride[1] + (g.k[1] - 1) * g.dil[1] + 1;
  const int64_t PW = (g.out[2] - 1) * g.stride[2] + (g.k[2] - 1) * g.dil[2] + 1;
  return g.N * g.C * PH * PW <= (int64_t(1) << 24);
}

void run_forward_oc(const Geom& g, const float* X, const float* W, float* Y, bool flipped) {
  const int64_t OH = g.out[1], OW = g.out[2], IH = g.in[1], IW = g.in[2];
  const int64_t KH = g.k[1], KW = g.k[2], taps = g.Ksp, Cg = g.Cg;
  const int64_t sh = g.stride[1], sw = g.stride[2];
  const int64_t PH = (OH - 1) * sh + (KH - 1) * g.dil[1] + 1;
  const int64_t PW = (OW - 1) * sw + (KW - 1) * g.dil[2] + 1;
  const int64_t NVV = oc_block(), mblocks = g.Mg / NVV, images = g.N * g.G;
  const int64_t img_n = PH * PW * Cg;
  // Channels-last padded copies of every image and group: element (r, c,
  // ch) holds x[ch][r - pad_h][c - pad_w], or zero outside the image.
  LineBuf xl((size_t)(images * img_n), false);
  parallel_for(images, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t n = i / g.G, gi = i % g.G;
      const float* src = X + (n * g.C + gi * Cg) * g.Isp;
      float* dst = xl.data() + i * img_n;
      for (int64_t r = 0; r < PH; ++r) {
        const int64_t ih = r - g.pad[1];
        float* row = dst + r * PW * Cg;
        if (ih < 0 || ih >= IH) {
          std::fill(row, row + PW * Cg, 0.0f);
          continue;
        }
        for (int64_t c = 0; c < PW; ++c) {
          const int64_t iw = c - g.pad[2];
          float* px = row + c * Cg;
          if (iw < 0 || iw >= IW) {
            std::fill(px, px + Cg, 0.0f);
            continue;
          }
          const float* s = src + ih * IW + iw;
          for (int64_t ch = 0; ch < Cg; ++ch) px[ch] = s[ch * g.Isp];
        }
      }
    }
  });
  // Weights as [group][block][channel block][tap][channel][NVV] (the order
  // oc_tile reads them), one task per (group, block, channel block): it
  // reads NVV rows of kOcCB * taps floats and writes one contiguous run.
  LineBuf wp((size_t)(g.G * g.Mg * taps * Cg), false);
  const int64_t cblocks = (Cg + kOcCB - 1) / kOcCB;
  parallel_for(g.G * mblocks * cblocks, std::max<int64_t>(1, 256 / std::max<int64_t>(taps, 1)),
               [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t gb = u / cblocks, c0 = u % cblocks * kOcCB, gi = gb / mblocks;
      const int64_t m0 = gb % mblocks * NVV, cn = std::min<int64_t>(kOcCB, Cg - c0);
      // written in order; the reads stay within NVV rows of kOcCB * taps
      // floats (in L1). flipped: output channel m is input channel m of the
      // original convolution, and tap t its tap taps-1-t of output channel c.
      float* dst = wp.data() + (gb * Cg + c0) * taps * NVV;
      for (int64_t t = 0; t < taps; ++t)
        for (int64_t c = c0; c < c0 + cn; ++c) {
          const float* src = flipped ? W + ((gi * Cg + c) * g.Mg + m0) * taps + taps - 1 - t
                                     : W + ((gi * g.Mg + m0) * Cg + c) * taps + t;
          const int64_t step = flipped ? taps : Cg * taps;
          for (int64_t j = 0; j < NVV; ++j) *dst++ = src[j * step];
        }
    }
  });
  std::vector<int64_t> toff((size_t)taps);
  for (int64_t kh = 0; kh < KH; ++kh)
    for (int64_t kw = 0; kw < KW; ++kw)
      toff[(size_t)(kh * KW + kw)] = (kh * g.dil[1] * PW + kw * g.dil[2]) * Cg;
  // Units (group, block, image), images innermost: a block's weights
  // (taps x Cg x NVV floats) stay in the core's cache over its images.
  const int64_t units = g.G * mblocks * g.N, T = num_threads();
  const int64_t chunks = T == 1 ? 1 : std::min<int64_t>(units, 4 * T);
  parallel_for_chunks(units, chunks, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t n = u % g.N, gb = u / g.N, gi = gb / mblocks, mb = gb % mblocks;
      OcTask t{xl.data() + (n * g.G + gi) * img_n, toff.data(),
               wp.data() + (gi * mblocks + mb) * taps * Cg * NVV,
               Y + (n * g.M + gi * g.Mg + mb * NVV) * g.P, taps, Cg, OH, OW, PW, sh, sw};
#if IPUXL_MULTI_ISA
      if (isa::current() == isa::Level::AVX512) oc_task_avx512(t);
      else oc_task_avx2(t);
#endif
    }
  });
}

}  // namespace conv
}  // namespace ipuxl
