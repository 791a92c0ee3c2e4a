// The direct weight gradient (see wgrad_direct.hpp).
#include "wgrad_direct.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "../../core/isa.hpp"
#include "../../core/parallel.hpp"
#include "tap.hpp"

namespace ipuxl {
namespace conv {

namespace {

struct WgradTask {
  const float* dy;      // MB rows of dyp (stride ld), zeros past the group's channels
  const float* x;       // xpad plane of one channel, at the kernel row's offset
  const int64_t* toff;  // NT tap offsets into x (taps past the row repeat tap 0)
  float* acc;           // MB x NT vectors of partial sums (V floats each)
  int64_t ld, nvec;     // dy row stride, vectors of positions
};

template <int V, int MB, int NT>
__attribute__((always_inline)) inline void wgrad_block(const WgradTask& t) {
  typedef float Vf __attribute__((vector_size(V * sizeof(float)), aligned(4)));
  Vf acc[MB][NT];
  for (int j = 0; j < MB; ++j)
    for (int q = 0; q < NT; ++q) acc[j][q] = *reinterpret_cast<const Vf*>(t.acc + (j * NT + q) * V);
  const float* x[NT];
  for (int q = 0; q < NT; ++q) x[q] = t.x + t.toff[q];
  for (int64_t i = 0; i < t.nvec; ++i) {
    Vf xv[NT];
    for (int q = 0; q < NT; ++q) xv[q] = *reinterpret_cast<const Vf*>(x[q] + i * V);
    for (int j = 0; j < MB; ++j) {
      Vf d = *reinterpret_cast<const Vf*>(t.dy + j * t.ld + i * V);
#if IPUXL_X86 && defined(__GNUC__)
      // one load of d into a register, used NT times (GCC otherwise folds
      // NT loads of it into the multiply-adds: more loads than FMAs)
      __asm__("" : "+v"(d));
#endif
      for (int q = 0; q < NT; ++q) acc[j][q] += d * xv[q];
    }
  }
  for (int j = 0; j < MB; ++j)
    for (int q = 0; q < NT; ++q) *reinterpret_cast<Vf*>(t.acc + (j * NT + q) * V) = acc[j][q];
}

// Per-level copies: AVX-512 16 lanes x 8 channels x 3 taps (24 of 32
// registers), AVX2 8 x 4 x 3 (12 of 16), the baseline 4 x 2 x 3.
constexpr int kWgradNT = 3;
#if IPUXL_MULTI_ISA
IPUXL_TARGET_AVX512 void wgrad_block_avx512(const WgradTask& t) { wgrad_block<16, 8, kWgradNT>(t); }
IPUXL_TARGET_AVX2 void wgrad_block_avx2(const WgradTask& t) { wgrad_block<8, 4, kWgradNT>(t); }
#endif
void wgrad_block_base(const WgradTask& t) { wgrad_block<4, 2, kWgradNT>(t); }

struct WgradLevel {
  int V, MB;
  void (*fn)(const WgradTask&);
};

WgradLevel wgrad_level() {
#if IPUXL_MULTI_ISA
  switch (isa::current()) {
    case isa::Level::AVX512: return {16, 8, wgrad_block_avx512};
    case isa::Level::AVX2: return {8, 4, wgrad_block_avx2};
    default: break;
  }
#endif
  return {4, 2, wgrad_block_base};
}

}  // namespace

bool direct_wgrad_applies(const Geom& g) {
  if (!(g.in[0] == 1 && g.k[0] == 1 && g.stride[1] == 1 && g.stride[2] == 1) || g.pointwise)
    return false;
  return g.P > 0 && g.N > 0 && g.Isp > 0;
}

bool run_weights_grad_direct(const Geom& g, const float* DY, const float* X, float* DW) {
  const WgradLevel lv = wgrad_level();
  const int64_t V = lv.V, MB = lv.MB, NT = kWgradNT;
  const int64_t KH = g.k[1], KW = g.k[2], dh = g.dil[1], dw = g.dil[2];
  const int64_t OH = g.out[1], OW = g.out[2], taps = g.Ksp;
  TapGeom t = make_tap_geom(g.Cg, g.in[1], g.in[2], g.pad[1], g.pad[2], KH, KW, dh, dw, g.Mg, OH, OW);
  const int64_t npos = OH * t.IWp, npv = (npos + 15) / 16 * 16, nvec = (npos + V - 1) / V;
  // x planes hold every position a vector reads (zeros past the image)
  t.plane = (npv + (KH - 1) * dh * t.IWp + (KW - 1) * dw + 15) / 16 * 16;
  const int64_t mblocks = (g.Mg + MB - 1) / MB;
  // taps of a kernel row in blocks of NT (a short last block repeats tap 0
  // of the row; those sums are dropped)
  const int64_t kwb = (KW + NT - 1) / NT;
  std::vector<int64_t> toff((size_t)(kwb * NT));
  for (int64_t b = 0; b < kwb; ++b)
    for (int64_t q = 0; q < NT; ++q)
      toff[(size_t)(b * NT + q)] = b * NT + q < KW ? (b * NT + q) * dw : 0;
  // Positions in chunks whose MB rows of dy (36 KiB) stay in L1 while the
  // task's channels and kernel rows reuse them.
  // (Equal chunks: a short last one would pay the accumulators' loads and
  // stores for a few vectors.)
  const int64_t max_v = std::max<int64_t>(1, 9216 / (MB * V));
  const int64_t chunk_v = (nvec + (nvec + max_v - 1) / max_v - 1) / std::max<int64_t>(1, (nvec + max_v - 1) / max_v);
  // Tasks: (group, range of input channels, range of channel blocks), about
  // two per thread. A task pads its channels of each image into its own
  // planes and copies its blocks of dy into padded rows, one block at a time.
  // Every element of dw is one task's sum over the images and positions in
  // order, so the split (which depends on the thread count) does not change
  // a bit of the result.
  const int64_t want = 2 * num_threads();
  const int64_t cparts = std::min<int64_t>(g.Cg, want >= 2 * g.G ? 2 : 1);
  const int64_t mparts = std::min<int64_t>(mblocks, std::max<int64_t>(1, (want + g.G * cparts - 1) / (g.G * cparts)));
  const int64_t per_c = KH * kwb * MB * NT * V;  // accumulator floats per channel and block
  std::atomic<bool> nonfinite{false};
  parallel_for(g.G * cparts * mparts, 1, [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t gi = u / (cparts * mparts), cp = (u / mparts) % cparts, mp = u % mparts;
      const int64_t c0 = g.Cg * cp / cparts, c1 = g.Cg * (cp + 1) / cparts, cr = c1 - c0;
      const int64_t mb0 = mblocks * mp / mparts, mb1 = mblocks * (mp + 1) / mparts;
      if (cr == 0 || mb1 == mb0) continue;
      TapGeom tc = t;
      tc.Cin = cr;
      LineBuf xb((size_t)(cr * t.plane));
      LineBuf dyb((size_t)(MB * npv));  // waste columns and slack stay zero
      std::vector<float> acc((size_t)((mb1 - mb0) * cr * per_c), 0.0f);
      for (int64_t n = 0; n < g.N; ++n) {
        if (nonfinite.load(std::memory_order_relaxed)) break;
        tap_pad(tc, X + (n * g.C + gi * g.Cg + c0) * g.Isp, xb.data());
        if (!all_finite(xb.data(), cr * t.plane)) {
          nonfinite.store(true, std::memory_order_relaxed);
          break;
        }
        for (int64_t mb = mb0; mb < mb1; ++mb) {
          const int64_t nm = std::min<int64_t>(MB, g.Mg - mb * MB);
          for (int64_t j = 0; j < nm; ++j)
            for (int64_t r = 0; r < OH; ++r)
              std::memcpy(dyb.data() + j * npv + r * t.IWp,
                          DY + ((n * g.M + gi * g.Mg + mb * MB + j) * OH + r) * OW,
                          sizeof(float) * (size_t)OW);
          float* accm = acc.data() + (mb - mb0) * cr * per_c;
          for (int64_t v0 = 0; v0 < nvec; v0 += chunk_v) {
            const int64_t nv = std::min(chunk_v, nvec - v0);
            for (int64_t c = 0; c < cr; ++c)
              for (int64_t kh = 0; kh < KH; ++kh)
                for (int64_t b = 0; b < kwb; ++b) {
                  WgradTask wt{dyb.data() + v0 * V, xb.data() + c * t.plane + kh * dh * t.IWp + v0 * V,
                               toff.data() + b * NT, accm + c * per_c + (kh * kwb + b) * MB * NT * V,
                               npv, nv};
                  lv.fn(wt);
                }
          }
        }
      }
      // lanes summed in a fixed order
      for (int64_t mb = mb0; mb < mb1; ++mb)
        for (int64_t c = 0; c < cr; ++c)
          for (int64_t kh = 0; kh < KH; ++kh)
            for (int64_t b = 0; b < kwb; ++b)
              for (int64_t j = 0; j < MB; ++j) {
                const int64_t m = mb * MB + j;
                if (m >= g.Mg) break;
                for (int64_t q = 0; q < NT && b * NT + q < KW; ++q) {
                  const float* a = acc.data() + ((mb - mb0) * cr + c) * per_c +
                                   (((kh * kwb + b) * MB + j) * NT + q) * V;
                  float sum = 0.0f;
                  for (int64_t l = 0; l < V; ++l) sum += a[l];
                  DW[(gi * g.Mg + m) * g.K + (c0 + c) * taps + kh * KW + b * NT + q] = sum;
                }
              }
    }
  });
  return !nonfinite.load();
}

}  // namespace conv
}  // namespace ipuxl
