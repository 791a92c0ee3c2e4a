// Tap-decomposed convolution (see tap.hpp).
#include "tap.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "../../core/blas.hpp"
#include "../../core/gemm.hpp"
#include "../../core/parallel.hpp"

namespace ipuxl {
namespace conv {

TapGeom make_tap_geom(int64_t Cin, int64_t IH, int64_t IW, int64_t ph, int64_t pw, int64_t KH,
                      int64_t KW, int64_t dh, int64_t dw, int64_t Mo, int64_t OH, int64_t OW) {
  TapGeom t{Cin, IH, IW, ph, pw, KH, KW, dh, dw, Mo, OH, OW, 0, 0, 0};
  t.IHp = OH + (KH - 1) * dh;
  t.IWp = OW + (KW - 1) * dw;
  t.plane = ((t.IHp * t.IWp + (KW - 1) * dw + 15) / 16) * 16;
  return t;
}

void tap_pad(const TapGeom& t, const float* x, float* xpad) {
  std::fill(xpad, xpad + t.Cin * t.plane, 0.0f);
  for (int64_t c = 0; c < t.Cin; ++c)
    for (int64_t ih = 0; ih < t.IH; ++ih) {
      const int64_t r = ih + t.ph;
      if (r < 0 || r >= t.IHp) continue;
      const int64_t c0 = std::max<int64_t>(0, -t.pw), c1 = std::min<int64_t>(t.IW, t.IWp - t.pw);
      if (c1 > c0)
        std::memcpy(xpad + c * t.plane + r * t.IWp + t.pw + c0, x + (c * t.IH + ih) * t.IW + c0,
                    sizeof(float) * (size_t)(c1 - c0));
    }
}

namespace {

int64_t tap_rows_per_block(const TapGeom& t) {
  return std::max<int64_t>(1, std::min<int64_t>(t.OH, (int64_t(1) << 15) / std::max<int64_t>(1, t.IWp * t.Mo)));
}

// y[Mo, OH, OW] = sum over taps of wt[tap] [Mo, Cin] @ the shifted padded
// input [Cin, positions]: the weights are the GEMM's A (read in place), the
// shifted image its B (rows of the padded planes, packed by plain copies),
// and the product [Mo, positions] comes out channel-major, so each output
// row is one contiguous copy. ct: a Mo x (rows_per_block * IWp) buffer.
void tap_forward(const TapGeom& t, const float* xpad, const float* wt, float* y, float* ct) {
  const int64_t rb = tap_rows_per_block(t);
  for (int64_t r0 = 0; r0 < t.OH; r0 += rb) {
    const int64_t r1 = std::min(t.OH, r0 + rb), npos = (r1 - r0) * t.IWp;
    int64_t tap = 0;
    for (int64_t kh = 0; kh < t.KH; ++kh)
      for (int64_t kw = 0; kw < t.KW; ++kw, ++tap) {
        const float* b = xpad + (r0 + kh * t.dh) * t.IWp + kw * t.dw;
        blas::sgemm(false, false, t.Mo, npos, t.Cin, 1.0f, wt + tap * t.Mo * t.Cin, t.Cin, b,
                    t.plane, tap == 0 ? 0.0f : 1.0f, ct, npos);
      }
    for (int64_t m = 0; m < t.Mo; ++m)
      for (int64_t r = r0; r < r1; ++r)
        std::memcpy(y + (m * t.OH + r) * t.OW, ct + m * npos + (r - r0) * t.IWp,
                    sizeof(float) * (size_t)t.OW);
  }
}

// dwt[tap] [Cin, Mo] (+)= shifted xpad [Cin, OH*IWp] @ dyp^T, where dyp is dy
// laid out over padded rows (zeros in the wasted columns) and packed once
// into `dyp_packed` as the B of all the taps' products (the image is the A,
// read in place).
void tap_weights(const TapGeom& t, const float* xpad, const float* dyp, gemm::PackedB* dyp_packed,
                 float* dwt, bool acc) {
  const int64_t npos = t.OH * t.IWp;
  if (dyp_packed->K() == npos && dyp_packed->N() == t.Mo)
    dyp_packed->repack(true, dyp, npos);
  else
    *dyp_packed = gemm::PackedB(true, npos, t.Mo, dyp, npos);
  int64_t tap = 0;
  for (int64_t kh = 0; kh < t.KH; ++kh)
    for (int64_t kw = 0; kw < t.KW; ++kw, ++tap)
      gemm::sgemm_packed(false, t.Cin, 1.0f, xpad + kh * t.dh * t.IWp + kw * t.dw, t.plane,
                         *dyp_packed, acc ? 1.0f : 0.0f, dwt + tap * t.Cin * t.Mo, t.Mo);
}

}  // namespace

bool tap_applies(const Geom& g, ConvKind kind) {
  if (!(g.in[0] == 1 && g.k[0] == 1 && g.stride[1] == 1 && g.stride[2] == 1) || g.pointwise)
    return false;
  if (g.P == 0 || g.N == 0 || g.Isp == 0) return false;
  const int64_t cin = kind == ConvKind::DataGrad ? g.Mg : g.Cg;
  const int64_t cout = kind == ConvKind::DataGrad ? g.Cg : g.Mg;
  if (cin < 16 || cout < 8) return false;
  if (kind == ConvKind::DataGrad) {
    // dx is a unit-stride convolution of dy padded by (k-1)*d - pad on each side
    for (int a = 1; a < 3; ++a) {
      const int64_t reach = (g.k[a] - 1) * g.dil[a];
      const int64_t pe = (g.out[a] - 1) + reach - g.pad[a] - (g.in[a] - 1);  // end padding used
      if (g.pad[a] > reach || pe < 0 || pe > reach) return false;
    }
  }
  return true;
}

void run_tap(const Geom& g, ConvKind kind, const float* A, const float* B, float* O) {
  const int64_t taps = g.k[1] * g.k[2];
  // Per-group weight layouts: forward wt[g][tap][m][c]; data grad
  // wt[g][tap'][c][m] with the taps flipped.
  std::vector<float> wt;
  if (kind != ConvKind::WeightsGrad) {
    wt.resize((size_t)(g.G * taps * g.Mg * g.Cg));
    for (int64_t gi = 0; gi < g.G; ++gi)
      for (int64_t m = 0; m < g.Mg; ++m)
        for (int64_t c = 0; c < g.Cg; ++c)
          for (int64_t tap = 0; tap < taps; ++tap) {
            const float v = B[(gi * g.Mg + m) * g.K + c * g.Ksp + tap];
            if (kind == ConvKind::Forward)
              wt[(size_t)(((gi * taps + tap) * g.Mg + m) * g.Cg + c)] = v;
            else
              wt[(size_t)(((gi * taps + (taps - 1 - tap)) * g.Cg + c) * g.Mg + m)] = v;
          }
  }
  TapGeom t = kind == ConvKind::DataGrad
      ? make_tap_geom(g.Mg, g.out[1], g.out[2], (g.k[1] - 1) * g.dil[1] - g.pad[1],
                      (g.k[2] - 1) * g.dil[2] - g.pad[2], g.k[1], g.k[2], g.dil[1], g.dil[2], g.Cg,
                      g.in[1], g.in[2])
      : make_tap_geom(g.Cg, g.in[1], g.in[2], g.pad[1], g.pad[2], g.k[1], g.k[2], g.dil[1],
                      g.dil[2], g.Mg, g.out[1], g.out[2]);
  const int64_t in_ch = kind == ConvKind::DataGrad ? g.M : g.C;
  const int64_t in_sp = kind == ConvKind::DataGrad ? g.P : g.Isp;
  const int64_t out_ch = kind == ConvKind::DataGrad ? g.C : g.M;
  const int64_t out_sp = kind == ConvKind::DataGrad ? g.Isp : g.P;
  // The weight gradient sums a fixed number of image ranges (the same bits
  // at any thread count); the others split the images when there are enough.
  const int64_t T = kind == ConvKind::WeightsGrad
      ? std::max<int64_t>(1, std::min<int64_t>(kWgradParts, g.N))
      : std::max<int64_t>(1, std::min<int64_t>(num_threads(), g.N));
  const bool batched = kind == ConvKind::WeightsGrad ? T > 1 : g.N >= 2 * num_threads();
  const int64_t units = batched ? T : 1;
  const int64_t wsize = g.G * taps * g.Mg * g.Cg;
  std::vector<float> partial(kind == ConvKind::WeightsGrad ? (size_t)(units * wsize) : 0);
  auto images = [&](int64_t u, int64_t n0, int64_t n1) {
    std::vector<float> xpad((size_t)(t.Cin * t.plane));
    std::vector<float> ct(kind == ConvKind::WeightsGrad ? 0
                          : (size_t)(tap_rows_per_block(t) * t.IWp * t.Mo));
    std::vector<float> dyp(kind == ConvKind::WeightsGrad ? (size_t)(g.Mg * g.out[1] * t.IWp) : 0);
    gemm::PackedB dyp_packed;
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t gi = 0; gi < g.G; ++gi) {
        const int64_t cin_g = kind == ConvKind::DataGrad ? g.Mg : g.Cg;
        tap_pad(t, A + (n * in_ch + gi * cin_g) * in_sp, xpad.data());
        if (kind == ConvKind::WeightsGrad) {
          // A is x here (pad above used x's geometry); dy comes in B.
          const float* dy = B + (n * g.M + gi * g.Mg) * g.P;
          for (int64_t m = 0; m < g.Mg; ++m)
            for (int64_t r = 0; r < g.out[1]; ++r) {
              float* d = dyp.data() + (m * g.out[1] + r) * t.IWp;
              std::memcpy(d, dy + (m * g.out[1] + r) * g.out[2], sizeof(float) * (size_t)g.out[2]);
              std::fill(d + g.out[2], d + t.IWp, 0.0f);
            }
          tap_weights(t, xpad.data(), dyp.data(), &dyp_packed,
                      partial.data() + u * wsize + gi * taps * g.Mg * g.Cg, n != n0);
        } else {
          const int64_t cout_g = kind == ConvKind::DataGrad ? g.Cg : g.Mg;
          tap_forward(t, xpad.data(), wt.data() + gi * taps * g.Mg * g.Cg,
                      O + (n * out_ch + gi * cout_g) * out_sp, ct.data());
        }
      }
  };
  if (batched) {
    parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
      for (int64_t u = t0; u < t1; ++u) images(u, g.N * u / T, g.N * (u + 1) / T);
    });
  } else {
    images(0, 0, g.N);
  }
  if (kind == ConvKind::WeightsGrad) {
    for (int64_t u = 1; u < units; ++u)
      for (int64_t i = 0; i < wsize; ++i) partial[(size_t)i] += partial[(size_t)(u * wsize + i)];
    for (int64_t gi = 0; gi < g.G; ++gi)
      for (int64_t tap = 0; tap < taps; ++tap)
        for (int64_t m = 0; m < g.Mg; ++m)
          for (int64_t c = 0; c < g.Cg; ++c)
            O[(gi * g.Mg + m) * g.K + c * g.Ksp + tap] =
                partial[(size_t)(((gi * taps + tap) * g.Cg + c) * g.Mg + m)];
  }
}

}  // namespace conv
}  // namespace ipuxl
