// Direct forward convolution (see direct.hpp).
//
// Direct forward convolution. For a short reduction (few input channels
// times kernel taps, e.g. the first layer of an image network) an im2col
// product would have K of a few dozen, where the GEMM spends more time
// packing and storing than multiplying; for a long one (a 3x3 64->64 layer)
// a kernel that keeps its accumulators in registers over the whole
// reduction avoids the GEMM's packing of the unfolded image altogether.
// A task takes one image and group (and a range
// of channel blocks): it copies the image's channels once into a
// zero-padded buffer (so no tap needs bounds checks), then for every strip
// of an output row (NS vectors of the level's width) and block of MB output
// channels keeps the NS x MB accumulators in vector registers over the
// C/G x kernel taps: per tap NS loads and MB broadcast weights feed NS * MB
// multiply-adds. The register blocking is per instruction-set level (32
// registers at AVX-512, 16 below), and each level's copy is compiled for it
// (target attributes). 1 or 2 spatial axes, any strides and dilations.
#include "direct.hpp"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "../../core/isa.hpp"
#include "../../core/parallel.hpp"

namespace ipuxl {
namespace conv {

bool direct_applies(const Geom& g) {
  return g.in[0] == 1 && g.k[0] == 1 && g.out[2] >= 8 && !g.pointwise;
}

namespace {

// Everything one image-and-group task needs (see run_forward_direct).
struct DirectTask {
  const float* pad;     // padded image, [Cg][PH][sw phases][PWj]
  const int64_t* offs;  // per tap: offset from a strip's base in `pad`
  const float* w;       // [mblocks][K][MB] weights, zero beyond Mg
  float* y;             // output of this image and group, [Mg][OH][OW]
  int64_t K, Mg, OH, OW, row_step;  // row_step: floats between output rows' bases
  int64_t taps;         // kernel taps per input channel (K = Cg * taps)
  // Flat form (unit strides, see direct_task_flat): positions numbered along
  // padded rows of `pitch` floats, partial sums in ys (MB rows of ys_ld).
  bool flat;
  int64_t pitch;
  float* ys;
  int64_t ys_ld;
  // Column-unfolded form (short reductions, see direct_task_cols): `pad`
  // holds per (channel, kernel column, row phase) planes OW wide, so every
  // tap reads the output plane's positions contiguously.
  bool cols = false;
};

// Accumulates NS vectors x MB channels over taps [k0, k1) at `base` and
// stores the nw valid columns of each of the nm valid channels at y (row
// stride plane = OH*OW between channels). With `add`, the accumulators
// start from y's values (a later chunk of taps; see direct_task), else from
// zero. spill (only without add): the caller lets a short strip store whole
// vectors, past the row's end into the start of the next row of the same
// channel, which it writes afterwards (a per-channel memcpy of the tail cost
// more than the multiply-adds of a 28-wide MNIST row).
template <int V, int NS, int MB>
__attribute__((always_inline)) inline void direct_strip(const float* base, const int64_t* offs,
                                                        const float* w, int64_t k0, int64_t k1,
                                                        float* y, int64_t plane, int64_t nm,
                                                        int64_t nw, bool spill, bool add) {
  typedef float Vf __attribute__((vector_size(V * sizeof(float)), aligned(4)));
  Vf acc[MB][NS];
  if (!add) {
    for (int j = 0; j < MB; ++j)
      for (int s = 0; s < NS; ++s) acc[j][s] = Vf{};
  } else {
    for (int j = 0; j < MB; ++j) {
      const float* src = y + std::min<int64_t>(j, nm - 1) * plane;
      if (nw == NS * V) {
        for (int s = 0; s < NS; ++s) acc[j][s] = *reinterpret_cast<const Vf*>(src + s * V);
      } else {
        for (int s = 0; s < NS; ++s)
          for (int i = 0; i < V; ++i) acc[j][s][i] = s * V + i < nw ? src[s * V + i] : 0.0f;
      }
    }
  }
  for (int64_t k = k0; k < k1; ++k) {
    const float* p = base + offs[k];
    Vf v[NS];
    for (int s = 0; s < NS; ++s) v[s] = *reinterpret_cast<const Vf*>(p + s * V);
    const float* wk = w + k * MB;
    for (int j = 0; j < MB; ++j) {
      const float b = wk[j];
      for (int s = 0; s < NS; ++s) acc[j][s] += b * v[s];
    }
  }
  for (int64_t j = 0; j < nm; ++j) {
    float* dst = y + j * plane;
    if (nw == NS * V || spill) {
      for (int s = 0; s < NS; ++s) *reinterpret_cast<Vf*>(dst + s * V) = acc[j][s];
    } else {
      for (int s = 0; s < NS; ++s)
        for (int i = 0; i < V && s * V + i < nw; ++i) dst[s * V + i] = acc[j][s][i];
    }
  }
}

// One task's output rows: strips of up to NSMAX vectors, MB channels at a
// time (the last strip of a row takes as few vectors as cover it, and NSMAX
// + 1 vectors left go as 2 + 2). Rows are
// written in increasing order, so every row but a channel's last may spill
// its last strip into the next (see direct_strip). Long reductions run in
// chunks of taps of kDirectChunkC input channels over all rows, the partial
// sums kept in y: a chunk's padded rows and weights stay in the L1 cache
// while it sweeps the rows (all the channels' rows of one output row of a
// 64-channel 3x3 layer did not fit it).
constexpr int64_t kDirectChunkC = 16;

// Taps per chunk of a task's reduction: kDirectChunkC input channels' worth
// for a long one, the whole reduction for a short one.
inline int64_t tap_chunk(const DirectTask& t) {
  return t.K > 2 * kDirectChunkC * t.taps ? kDirectChunkC * t.taps : t.K;
}

// Vectors in the strip that starts a row's remaining nv vectors: NSMAX, or
// all that are left when fewer, except that NSMAX + 1 go as 2 + 2 rather
// than NSMAX and a lone vector, whose MB accumulator chains (4 at AVX2) are
// too few to hide the multiply-add latency (a 28-wide row at AVX2, a 56-wide
// one at AVX-512). Shared by direct_task, direct_task_cols and flat_pays.
constexpr int64_t strip_vectors(int64_t nv, int64_t nsmax) {
  return nsmax > 2 && nv == nsmax + 1 ? 2 : (nv < nsmax ? nv : nsmax);
}

template <int V, int NSMAX, int MB>
__attribute__((always_inline)) inline void direct_task(const DirectTask& t) {
  const int64_t mblocks = (t.Mg + MB - 1) / MB, plane = t.OH * t.OW;
  const int64_t over = (t.OW + V - 1) / V * V - t.OW;  // floats a row's last strip spills
  const int64_t chunk = tap_chunk(t);
  for (int64_t mb = 0; mb < mblocks; ++mb) {
    const int64_t nm = std::min<int64_t>(MB, t.Mg - mb * MB);
    const float* w = t.w + mb * t.K * MB;
    for (int64_t k0 = 0; k0 < t.K; k0 += chunk) {
      const int64_t k1 = std::min(t.K, k0 + chunk);
      const bool add = k0 > 0;
      for (int64_t oh = 0; oh < t.OH; ++oh) {
        float* yrow = t.y + mb * MB * plane + oh * t.OW;
        const float* brow = t.pad + oh * t.row_step;
        const bool spill = !add && oh + 1 < t.OH && over <= t.OW;
        for (int64_t ow = 0; ow < t.OW;) {
          const int64_t left = t.OW - ow, nv = (left + V - 1) / V;
          const float* base = brow + ow;
          const int64_t ns = strip_vectors(nv, NSMAX), nw = std::min<int64_t>(left, ns * V);
          if (ns == NSMAX)
            direct_strip<V, NSMAX, MB>(base, t.offs, w, k0, k1, yrow + ow, plane, nm, nw, spill, add);
          else if (ns == 2)
            direct_strip<V, (NSMAX > 2 ? 2 : 1), MB>(base, t.offs, w, k0, k1, yrow + ow, plane, nm,
                                                    nw, spill, add);
          else
            direct_strip<V, 1, MB>(base, t.offs, w, k0, k1, yrow + ow, plane, nm, nw, spill, add);
          ow += ns * V;
        }
      }
    }
  }
}

// The flat form for unit strides: output positions are numbered along the
// padded rows (oh * pitch + ow, pitch = OW + the kernel's reach), so a strip
// of NS whole vectors runs across row ends and every strip is full; the
// (kw-1)*dw columns at each row's end are computed and dropped. A 56-wide
// row of a 3x3 layer is 58 positions (3.6 vectors of 16) instead of 3 full
// strips and a half-empty one. The sums go to a scratch block (partial sums
// of the chunks of taps included), whose rows are then copied out. (Keeping
// them in y instead, with masked writes for the vectors that straddle a row
// end, was slower at AVX-512: y's rows are not line-aligned, so most of its
// 64-byte accesses, four per element over the chunks of taps, split across
// two cache lines.)
template <int V, int NS, int MB>
__attribute__((always_inline)) inline void direct_task_flat(const DirectTask& t) {
  const int64_t mblocks = (t.Mg + MB - 1) / MB, plane = t.OH * t.OW;
  const int64_t npos = t.OH * t.pitch;
  const int64_t chunk = tap_chunk(t);
  for (int64_t mb = 0; mb < mblocks; ++mb) {
    const int64_t nm = std::min<int64_t>(MB, t.Mg - mb * MB);
    const float* w = t.w + mb * t.K * MB;
    for (int64_t k0 = 0; k0 < t.K; k0 += chunk) {
      const int64_t k1 = std::min(t.K, k0 + chunk);
      for (int64_t p = 0; p < npos; p += NS * V)
        direct_strip<V, NS, MB>(t.pad + p, t.offs, w, k0, k1, t.ys + p, t.ys_ld, MB, NS * V, false,
                                k0 > 0);
    }
    for (int64_t j = 0; j < nm; ++j)
      for (int64_t oh = 0; oh < t.OH; ++oh)
        std::memcpy(t.y + (mb * MB + j) * plane + oh * t.OW, t.ys + j * t.ys_ld + oh * t.pitch,
                    sizeof(float) * (size_t)t.OW);
  }
}

// The column-unfolded form for short reductions (C/G x kernel <= 64: MNIST's
// 5x5 1->32 layer, a 3-channel stem at stride 2): the image is copied once
// per kernel column kw and row phase a (of the row stride sh) into planes
// X[c][kw][a][i][ow] = padded x[i*sh + a][ow*sw + kw*dw], OW wide, so tap
// (c, kh, kw) reads output position p = oh*OW + ow at a fixed offset plus p.
// Strips then run over the whole output plane: no lane is wasted at row ends
// (a 28-wide row is 28 lanes, not 32; 56-wide at stride 2 not 64) and each
// vector stores straight into y. The copy is Cg*KW floats per position, a
// few percent of the K * MB multiply-adds per position.
template <int V, int NSMAX, int MB>
__attribute__((always_inline)) inline void direct_task_cols(const DirectTask& t) {
  const int64_t mblocks = (t.Mg + MB - 1) / MB, plane = t.OH * t.OW;
  // Channel blocks innermost: a strip's inputs (K taps x NSMAX vectors) and
  // all the blocks' weights stay in L1 while every block uses them (blocks
  // outermost streamed the planes from L2 once per block).
  const int64_t chunk = tap_chunk(t);
  for (int64_t k0 = 0; k0 < t.K; k0 += chunk) {
    const int64_t k1 = std::min(t.K, k0 + chunk);
    const bool add = k0 > 0;
    for (int64_t p = 0; p < plane;) {
      const int64_t left = plane - p, nv = (left + V - 1) / V;
      const int64_t ns = strip_vectors(nv, NSMAX);
      const int64_t nw = std::min<int64_t>(left, ns * V);
      for (int64_t mb = 0; mb < mblocks; ++mb) {
        const int64_t nm = std::min<int64_t>(MB, t.Mg - mb * MB);
        const float* w = t.w + mb * t.K * MB;
        float* y = t.y + mb * MB * plane + p;
        if (ns == NSMAX) direct_strip<V, NSMAX, MB>(t.pad + p, t.offs, w, k0, k1, y, plane, nm, nw, false, add);
        else if (ns == 2) direct_strip<V, (NSMAX > 2 ? 2 : 1), MB>(t.pad + p, t.offs, w, k0, k1, y, plane, nm, nw, false, add);
        else direct_strip<V, 1, MB>(t.pad + p, t.offs, w, k0, k1, y, plane, nm, nw, false, add);
      }
      p += ns * V;
    }
  }
}

template <int V, int NSMAX, int MB>
__attribute__((always_inline)) inline void direct_task_any(const DirectTask& t) {
  if (t.cols) direct_task_cols<V, NSMAX, MB>(t);
  else if (t.flat) direct_task_flat<V, NSMAX, MB>(t);
  else direct_task<V, NSMAX, MB>(t);
}

// Per-level copies. AVX-512: 16 lanes, up to 3 vectors x 8 channels of
// accumulators in 32 registers; AVX2: 8 lanes, 3 x 4 in 16 registers; the
// baseline (no FMA: a multiply needs a spare register): 4 lanes, 2 x 4.
// Channel blocks of 4 or 8 divide the usual channel counts (a block of 6
// computed 36 channels for MNIST's 32).
#if IPUXL_MULTI_ISA
IPUXL_TARGET_AVX512 void direct_task_avx512(const DirectTask& t) { direct_task_any<16, 3, 8>(t); }
IPUXL_TARGET_AVX2 void direct_task_avx2(const DirectTask& t) { direct_task_any<8, 3, 4>(t); }
#endif
void direct_task_base(const DirectTask& t) { direct_task_any<4, 2, 4>(t); }

}  // namespace

// Vector width of the level in use (floats).
int64_t direct_v() {
#if IPUXL_MULTI_ISA
  switch (isa::current()) {
    case isa::Level::AVX512: return 16;
    case isa::Level::AVX2: return 8;
    default: break;
  }
#endif
  return 4;
}

int direct_mb() {
#if IPUXL_MULTI_ISA
  if (isa::current() == isa::Level::AVX512) return 8;
#endif
  return 4;
}

// Vectors per strip at most (NSMAX of the level's direct_task_any).
int64_t direct_nsmax() { return direct_v() == 4 ? 2 : 3; }

DirectCost direct_cost(int64_t OH, int64_t OW, int64_t reach) {
  const int64_t V = direct_v(), NSMAX = direct_nsmax(), MB = direct_mb();
  auto weight = [&](int64_t ns) {
    const int64_t chains = ns * MB;
    return chains >= 12 ? 1.0 : chains >= 8 ? 1.25 : 2.0;
  };
  // the strips direct_task cuts a row into
  double row = 0.0;
  for (int64_t left = OW; left > 0;) {
    const int64_t ns = strip_vectors((left + V - 1) / V, NSMAX);
    row += (double)ns * weight(ns);
    left -= ns * V;
  }
  const int64_t strip = NSMAX * V;
  const double flat = (double)((OH * (OW + reach) + strip - 1) / strip * NSMAX) * 1.02;
  return {row * (double)OH, flat};
}

bool flat_pays(int64_t OH, int64_t OW, int64_t reach) {
  const DirectCost c = direct_cost(OH, OW, reach);
  return c.flat < c.rows;
}

namespace {

void direct_task_run(const DirectTask& t) {
#if IPUXL_MULTI_ISA
  switch (isa::current()) {
    case isa::Level::AVX512: direct_task_avx512(t); return;
    case isa::Level::AVX2: direct_task_avx2(t); return;
    default: break;
  }
#endif
  direct_task_base(t);
}

// d[j] = s[j * stride] for j < n (one column phase of a padded row). The
// stride-2 loop has a constant stride and unaliased pointers, so the
// compiler turns it into vector loads and shuffles.
void strided_copy(const float* __restrict s, float* __restrict d, int64_t n, int64_t stride) {
  if (stride == 1) {
    if (n > 0) std::memcpy(d, s, sizeof(float) * (size_t)n);
    return;
  }
  if (stride == 2) {
    for (int64_t j = 0; j < n; ++j) d[j] = s[2 * j];
    return;
  }
  for (int64_t j = 0; j < n; ++j) d[j] = s[j * stride];
}

// The column-unfolded planes of one image and group (see direct_task_cols):
// buf[((c*KW + kw)*sh + a)*CPH + i][ow] = x[c][i*sh + a - pad_h][ow*sw +
// kw*dw - pad_w], zero outside the image. Every float of the planes is
// written.
void fill_cols(const Geom& g, const float* x, int64_t CPH, float* buf) {
  const int64_t IH = g.in[1], IW = g.in[2], OW = g.out[2], KW = g.k[2];
  const int64_t sh = g.stride[1], sw = g.stride[2];
  for (int64_t c = 0; c < g.Cg; ++c)
    for (int64_t kw = 0; kw < KW; ++kw) {
      // output column ow reads input column ow*sw + kw*dw - pad_w: inside
      // the image for ow in [j0, j1)
      const int64_t lo = g.pad[2] - kw * g.dil[2], hi = IW + lo;  // ow*sw in [lo, hi)
      const int64_t j0 = std::min<int64_t>(OW, lo <= 0 ? 0 : (lo + sw - 1) / sw);
      const int64_t j1 = std::max<int64_t>(j0, std::min<int64_t>(OW, hi <= 0 ? 0 : (hi + sw - 1) / sw));
      for (int64_t a = 0; a < sh; ++a)
        for (int64_t i = 0; i < CPH; ++i) {
          float* dst = buf + (((c * KW + kw) * sh + a) * CPH + i) * OW;
          const int64_t ih = i * sh + a - g.pad[1];
          if (ih < 0 || ih >= IH) {
            std::fill(dst, dst + OW, 0.0f);
            continue;
          }
          std::fill(dst, dst + j0, 0.0f);
          strided_copy(x + (c * IH + ih) * IW + (j0 * sw - lo), dst + j0, j1 - j0, sw);
          std::fill(dst + j1, dst + OW, 0.0f);
        }
    }
}

}  // namespace

bool cols_fit(const Geom& g) {
  const int64_t sh = g.stride[1], CPH = g.out[1] + (g.k[1] - 1) * g.dil[1] / sh;
  return g.K <= kDirectMaxK && g.Cg * g.k[2] * sh * CPH * g.out[2] <= (int64_t(1) << 21);
}

void run_forward_direct(const Geom& g, DirectForm form, const float* X, const float* W, float* Y,
                        bool flipped) {
  const int64_t OH = g.out[1], OW = g.out[2], IH = g.in[1], IW = g.in[2];
  const int64_t kh_n = g.k[1], kw_n = g.k[2], K = g.K, taps = g.Ksp;
  // Padded image: rows -pad_h .. (OH-1)*sh - pad_h + (kh-1)*dh; each row
  // split into sw column phases (padded column j*sw + q in phase q, column
  // j), so that for any stride a tap reads contiguous columns of one phase:
  // tap kw reads phase (kw*dw) % sw from column ow + (kw*dw) / sw. Columns
  // run to a whole number of the widest vectors past OW (strips read them).
  const int64_t sw = g.stride[2];
  const int64_t PH = (OH - 1) * g.stride[1] + (kh_n - 1) * g.dil[1] + 1;
  const int64_t reach_w = (kw_n - 1) * g.dil[2];
  // The column-unfolded form's planes (direct_task_cols): CPH rows of OW
  // per (channel, kernel column, row phase).
  const int64_t sh = g.stride[1];
  const int64_t CPH = OH + (kh_n - 1) * g.dil[1] / sh;
  const bool cols = form == DirectForm::Cols;
  const bool flat = form == DirectForm::Flat;
  const int64_t PWj = flat ? OW + reach_w
                           : (OW + kDirectPadV - 1) / kDirectPadV * kDirectPadV + reach_w / sw + 1;
  // flat strips read up to 3 vectors of the widest level past the last row
  const int64_t slack = flat ? 3 * kDirectPadV + reach_w + kDirectPadV : 0;
  const int64_t ys_ld = flat ? (OH * PWj + 3 * kDirectPadV - 1) / (3 * kDirectPadV) * (3 * kDirectPadV) : 0;
  // Tap k = (c, kh, kw) reads the padded image at offs[k] from a strip's base.
  std::vector<int64_t> offs((size_t)K);
  {
    int64_t k = 0;
    for (int64_t c = 0; c < g.Cg; ++c)
      for (int64_t kh = 0; kh < kh_n; ++kh)
        for (int64_t kw = 0; kw < kw_n; ++kw, ++k)
          offs[(size_t)k] =
              cols ? (((c * kw_n + kw) * sh + (kh * g.dil[1]) % sh) * CPH + (kh * g.dil[1]) / sh) * OW
                   : ((c * PH + kh * g.dil[1]) * sw + (kw * g.dil[2]) % sw) * PWj +
                         (kw * g.dil[2]) / sw;
  }
  // Weights per group as [mblocks][K][MB] (one tap's MB values adjacent,
  // zeros past the group's channels), packed once per call.
  const int64_t MB = direct_mb(), mblocks = (g.Mg + MB - 1) / MB;
  std::vector<float> wb((size_t)(g.G * mblocks * K * MB), 0.0f);
  parallel_for(g.G * g.Mg, std::max<int64_t>(1, 16384 / std::max<int64_t>(K, 1)),
               [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t gi = u / g.Mg, m = u % g.Mg;
      float* dst = wb.data() + ((gi * mblocks + m / MB) * K) * MB + m % MB;
      if (!flipped) {
        const float* src = W + (gi * g.Mg + m) * K;
        for (int64_t k = 0; k < K; ++k) dst[k * MB] = src[k];
      } else {
        // this output channel m is input channel m of the original
        // convolution; tap k = (c, t) is its output channel c, tap taps-1-t
        for (int64_t c = 0; c < g.Cg; ++c) {
          const float* src = W + ((gi * g.Cg + c) * g.Mg + m) * taps;
          for (int64_t t = 0; t < taps; ++t) dst[(c * taps + t) * MB] = src[taps - 1 - t];
        }
      }
    }
  });
  // Tasks: (image, group, range of channel blocks). Splitting the channel
  // blocks gives both threads work when there are few images; each task
  // pads its own copy of the image. Every output element is computed by one
  // task with the same instructions, so the result does not depend on the
  // split or the thread count.
  const int64_t images = g.N * g.G, T = num_threads();
  const int64_t split = images >= 4 * T ? 1 : std::min<int64_t>(mblocks, (4 * T + images - 1) / images);
  // Up to 4 chunks per thread, claimed in turn: a thread that another
  // process delays for a while no longer holds up a fixed half of the work
  // (the units of a chunk run in order; chunks never share an element).
  const int64_t work_per_unit = std::max<int64_t>(1, g.Mg * g.P * K / split);
  const int64_t units = images * split;
  const int64_t chunks = T == 1 || units * work_per_unit < 65536 ? 1 : std::min<int64_t>(units, 4 * T);
  parallel_for_chunks(units, chunks, [&](int64_t u0, int64_t u1) {
    // (cols: strips read up to 3 vectors of the widest level past a plane)
    const size_t pad_n = cols ? (size_t)(g.Cg * kw_n * sh * CPH * OW + 3 * kDirectPadV)
                              : (size_t)(g.Cg * PH * sw * PWj + slack);
    // (pad: every float is written below before any is read, so no zero fill
    // of the ~1 MB per chunk)
    LineBuf pad(pad_n, false), ys((size_t)(MB * ys_ld));
    int64_t padded = -1;
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t img = u / split, part = u % split, gi = img % g.G, n = img / g.G;
      const int64_t mb0 = mblocks * part / split, mb1 = mblocks * (part + 1) / split;
      if (mb1 == mb0) continue;
      if (padded != img) {
        padded = img;
        // every float of the buffer is written: zeros around the image
        const float* src_img = X + (n * g.C + gi * g.Cg) * g.Isp;
        if (cols) {
          // (compiled for the level in use: the stride-2 column copies of a
          // stem layer ran as 4-wide SSE, 15% of its time at AVX-512)
          isa::run([&](int64_t, int64_t) { fill_cols(g, src_img, CPH, pad.data()); }, 0, 1);
          std::fill(pad.data() + (pad_n - 3 * kDirectPadV), pad.data() + pad_n, 0.0f);
        } else
        for (int64_t c = 0; c < g.Cg; ++c)
          for (int64_t r = 0; r < PH; ++r) {
            const int64_t ih = r - g.pad[1];
            float* row = pad.data() + (c * PH + r) * sw * PWj;
            if (ih < 0 || ih >= IH) {
              std::fill(row, row + sw * PWj, 0.0f);
              continue;
            }
            const float* src = src_img + (c * IH + ih) * IW;
            // padded column j*sw + q holds input column j*sw + q - pad_w
            if (sw == 1) {
              const int64_t j0 = std::min<int64_t>(PWj, std::max<int64_t>(0, g.pad[2]));
              const int64_t j1 = std::max<int64_t>(j0, std::min<int64_t>(PWj, IW + g.pad[2]));
              std::fill(row, row + j0, 0.0f);
              if (j1 > j0)
                std::memcpy(row + j0, src + j0 - g.pad[2], sizeof(float) * (size_t)(j1 - j0));
              std::fill(row + j1, row + PWj, 0.0f);
              continue;
            }
            // phase q, column j reads input column j*sw + q - pad_w: zeros
            // outside [j0, j1), a branch-free strided copy inside (the
            // per-element bounds test cost as much as the stem's products)
            for (int64_t q = 0; q < sw; ++q) {
              float* dst = row + q * PWj;
              const int64_t lo = g.pad[2] - q, hi = IW + g.pad[2] - q;  // j*sw in [lo, hi)
              const int64_t j0 = std::min<int64_t>(PWj, lo <= 0 ? 0 : (lo + sw - 1) / sw);
              const int64_t j1 = std::max<int64_t>(j0, std::min<int64_t>(PWj, hi <= 0 ? 0 : (hi + sw - 1) / sw));
              std::fill(dst, dst + j0, 0.0f);
              strided_copy(src + (j0 * sw + q - g.pad[2]), dst + j0, j1 - j0, sw);
              std::fill(dst + j1, dst + PWj, 0.0f);
            }
          }
        if (!cols) std::fill(pad.data() + g.Cg * PH * sw * PWj, pad.data() + pad_n, 0.0f);
      }
      const int64_t m0 = mb0 * MB, m1 = std::min<int64_t>(g.Mg, mb1 * MB);
      DirectTask t{pad.data(), offs.data(), wb.data() + (gi * mblocks + mb0) * K * MB,
                   Y + (n * g.M + gi * g.Mg + m0) * g.P, K, m1 - m0, OH, OW,
                   g.stride[1] * sw * PWj, taps, flat, PWj, ys.data(), ys_ld, cols};
      direct_task_run(t);
    }
  });
}

}  // namespace conv
}  // namespace ipuxl
