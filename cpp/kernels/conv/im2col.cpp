// The unfold + GEMM convolution (im2col; see im2col.hpp).
#include "im2col.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "../../core/blas.hpp"
#include "../../core/parallel.hpp"

namespace ipuxl {
namespace conv {

// Row-blocked products of one image and group: the output rows are taken
// in blocks whose columns (K x rows x OW floats) fit the L2 cache, so the
// unfolded block is still cached when the product packs it. `par` unfolds
// / folds the block's channels over the thread pool (the products thread
// themselves); inside a task that already runs per image it is false.
int64_t rows_per_block(const Geom& g) {
  const int64_t R = g.out[0] * g.out[1];
  return std::max<int64_t>(1, std::min<int64_t>(R, kL2Floats / std::max<int64_t>(1, g.K * g.out[2])));
}

namespace {

// Valid output range [lo, hi) of an axis for kernel offset kk: the outputs
// o whose input o*s - p + kk*dl lies in [0, in).
inline void valid_range(int64_t out, int64_t in, int64_t s, int64_t p, int64_t koff, int64_t* lo,
                        int64_t* hi) {
  // o*s - p + koff >= 0  <=>  o >= ceil((p - koff) / s)
  int64_t a = p - koff;
  int64_t l = a <= 0 ? 0 : (a + s - 1) / s;
  // o*s - p + koff <= in - 1  <=>  o <= floor((in - 1 + p - koff) / s)
  int64_t b = in - 1 + p - koff;
  int64_t h = b < 0 ? 0 : b / s + 1;
  *lo = std::min(l, out);
  *hi = std::max(*lo, std::min(h, out));
}

// Unfolds channel plane `src` ([in]) into its Ksp rows of `col` (row stride
// ld, starting at column 0 of this image).
void im2col_plane(const Geom& g, const float* src, float* col, int64_t ld, int64_t r0 = 0,
                  int64_t r1 = -1) {
  if (r1 < 0) r1 = g.out[0] * g.out[1];
  int64_t row = 0;
  for (int64_t kd = 0; kd < g.k[0]; ++kd)
    for (int64_t kh = 0; kh < g.k[1]; ++kh)
      for (int64_t kw = 0; kw < g.k[2]; ++kw, ++row) {
        float* dst = col + row * ld;
        int64_t dlo, dhi, hlo, hhi, wlo, whi;
        valid_range(g.out[0], g.in[0], g.stride[0], g.pad[0], kd * g.dil[0], &dlo, &dhi);
        valid_range(g.out[1], g.in[1], g.stride[1], g.pad[1], kh * g.dil[1], &hlo, &hhi);
        valid_range(g.out[2], g.in[2], g.stride[2], g.pad[2], kw * g.dil[2], &wlo, &whi);
        const int64_t OW = g.out[2], sw = g.stride[2];
        for (int64_t r = r0; r < r1; ++r) {
          {
            const int64_t od = r / g.out[1], oh = r % g.out[1];
            float* d = dst + (r - r0) * OW;
            if (od < dlo || od >= dhi || oh < hlo || oh >= hhi) {
              std::memset(d, 0, sizeof(float) * (size_t)OW);
              continue;
            }
            const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dil[0];
            const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dil[1];
            const float* s = src + (id * g.in[1] + ih) * g.in[2] + kw * g.dil[2] - g.pad[2];
            for (int64_t ow = 0; ow < wlo; ++ow) d[ow] = 0.0f;
            if (sw == 1) {
              if (whi > wlo) std::memcpy(d + wlo, s + wlo, sizeof(float) * (size_t)(whi - wlo));
            } else {
              for (int64_t ow = wlo; ow < whi; ++ow) d[ow] = s[ow * sw];
            }
            for (int64_t ow = whi; ow < OW; ++ow) d[ow] = 0.0f;
          }
        }
      }
}

// Folds the Ksp rows of `col` back onto channel plane `dst` (accumulating).
void col2im_plane(const Geom& g, const float* col, int64_t ld, float* dst, int64_t r0 = 0,
                  int64_t r1 = -1) {
  if (r1 < 0) r1 = g.out[0] * g.out[1];
  int64_t row = 0;
  for (int64_t kd = 0; kd < g.k[0]; ++kd)
    for (int64_t kh = 0; kh < g.k[1]; ++kh)
      for (int64_t kw = 0; kw < g.k[2]; ++kw, ++row) {
        const float* src = col + row * ld;
        int64_t dlo, dhi, hlo, hhi, wlo, whi;
        valid_range(g.out[0], g.in[0], g.stride[0], g.pad[0], kd * g.dil[0], &dlo, &dhi);
        valid_range(g.out[1], g.in[1], g.stride[1], g.pad[1], kh * g.dil[1], &hlo, &hhi);
        valid_range(g.out[2], g.in[2], g.stride[2], g.pad[2], kw * g.dil[2], &wlo, &whi);
        const int64_t OW = g.out[2], sw = g.stride[2];
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t od = r / g.out[1], oh = r % g.out[1];
          if (od < dlo || od >= dhi || oh < hlo || oh >= hhi) continue;
          {
            const float* s = src + (r - r0) * OW;
            const int64_t id = od * g.stride[0] - g.pad[0] + kd * g.dil[0];
            const int64_t ih = oh * g.stride[1] - g.pad[1] + kh * g.dil[1];
            float* d = dst + (id * g.in[1] + ih) * g.in[2] + kw * g.dil[2] - g.pad[2];
            if (sw == 1) {
              for (int64_t ow = wlo; ow < whi; ++ow) d[ow] += s[ow];
            } else {
              for (int64_t ow = wlo; ow < whi; ++ow) d[ow * sw] += s[ow];
            }
          }
        }
      }
}

template <class F>
void over_channels(const Geom& g, bool par, int64_t rows, F&& f) {
  if (!par) {
    for (int64_t c = 0; c < g.Cg; ++c) f(c);
    return;
  }
  parallel_for(g.Cg, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, g.Ksp * rows * g.out[2])),
               [&](int64_t c0, int64_t c1) {
                 for (int64_t c = c0; c < c1; ++c) f(c);
               });
}

void image_forward(const Geom& g, const float* x, const float* w, float* y, float* col, bool par) {
  const int64_t R = g.out[0] * g.out[1], rb = rows_per_block(g), OW = g.out[2];
  for (int64_t r0 = 0; r0 < R; r0 += rb) {
    const int64_t r1 = std::min(R, r0 + rb), cols = (r1 - r0) * OW;
    over_channels(g, par, r1 - r0, [&](int64_t c) {
      im2col_plane(g, x + c * g.Isp, col + c * g.Ksp * cols, cols, r0, r1);
    });
    blas::sgemm(false, false, g.Mg, cols, g.K, 1.0f, w, g.K, col, cols, 0.0f, y + r0 * OW, g.P);
  }
}

void image_data_grad(const Geom& g, const float* dy, const float* w, float* dx, float* col,
                     bool par) {
  const int64_t R = g.out[0] * g.out[1], rb = rows_per_block(g), OW = g.out[2];
  std::memset(dx, 0, sizeof(float) * (size_t)(g.Cg * g.Isp));
  for (int64_t r0 = 0; r0 < R; r0 += rb) {
    const int64_t r1 = std::min(R, r0 + rb), cols = (r1 - r0) * OW;
    blas::sgemm(true, false, g.K, cols, g.Mg, 1.0f, w, g.K, dy + r0 * OW, g.P, 0.0f, col, cols);
    over_channels(g, par, r1 - r0, [&](int64_t c) {
      col2im_plane(g, col + c * g.Ksp * cols, cols, dx + c * g.Isp, r0, r1);
    });
  }
}

void image_weights_grad(const Geom& g, const float* dy, const float* x, float* dw, float* col,
                        bool par, bool accumulate) {
  const int64_t R = g.out[0] * g.out[1], rb = rows_per_block(g), OW = g.out[2];
  for (int64_t r0 = 0; r0 < R; r0 += rb) {
    const int64_t r1 = std::min(R, r0 + rb), cols = (r1 - r0) * OW;
    over_channels(g, par, r1 - r0, [&](int64_t c) {
      im2col_plane(g, x + c * g.Isp, col + c * g.Ksp * cols, cols, r0, r1);
    });
    blas::sgemm(false, true, g.Mg, g.K, cols, 1.0f, dy + r0 * OW, g.P, col, cols,
                (accumulate || r0 > 0) ? 1.0f : 0.0f, dw, g.K);
  }
}

// dy chunk [nb images, Mg rows of group gi] -> rows [Mg, nb*P].
void gather_rows(const Geom& g, const float* y, int64_t n0, int64_t nb, int64_t gi, float* rows) {
  const int64_t P = g.P;
  parallel_for(g.Mg * nb, std::max<int64_t>(1, 16384 / std::max<int64_t>(P, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t u = b; u < e; ++u) {
                   const int64_t m = u / nb, i = u % nb;
                   std::memcpy(rows + m * nb * P + i * P,
                               y + ((n0 + i) * g.M + gi * g.Mg + m) * P, sizeof(float) * (size_t)P);
                 }
               });
}

}  // namespace

void run_forward_im2col(const Geom& g, const Im2colBuffers& p, const float* X, const float* W,
                        float* Y) {
  const int64_t P = g.P, K = g.K;
  for (int64_t n0 = 0; n0 < g.N; n0 += p.nb) {
    const int64_t nb = std::min(p.nb, g.N - n0);
    for (int64_t gi = 0; gi < g.G; ++gi) {
      const float* Wg = W + gi * g.Mg * K;
      if (g.pointwise && nb == 1) {
        blas::sgemm(false, false, g.Mg, P, K, 1.0f, Wg, K, X + (n0 * g.C + gi * g.Cg) * g.Isp, P,
                    0.0f, Y + (n0 * g.M + gi * g.Mg) * P, P);
        continue;
      }
      if (nb == 1) {
        image_forward(g, X + (n0 * g.C + gi * g.Cg) * g.Isp, Wg, Y + (n0 * g.M + gi * g.Mg) * P,
                      p.col, true);
        continue;
      }
      float* col = p.col;
      const int64_t ld = nb * P;
      parallel_for(nb * g.Cg, std::max<int64_t>(1, 32768 / std::max<int64_t>(g.Ksp * P, 1)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t u = b; u < e; ++u) {
                       const int64_t i = u / g.Cg, c = u % g.Cg;
                       im2col_plane(g, X + ((n0 + i) * g.C + gi * g.Cg + c) * g.Isp,
                                    col + c * g.Ksp * ld + i * P, ld);
                     }
                   });
      if (nb == 1) {
        blas::sgemm(false, false, g.Mg, P, K, 1.0f, Wg, K, col, ld, 0.0f,
                    Y + (n0 * g.M + gi * g.Mg) * P, P);
      } else {
        float* tmp = p.tmp;
        blas::sgemm(false, false, g.Mg, ld, K, 1.0f, Wg, K, col, ld, 0.0f, tmp, ld);
        parallel_for(g.Mg * nb, std::max<int64_t>(1, 16384 / std::max<int64_t>(P, 1)),
                     [&](int64_t b, int64_t e) {
                       for (int64_t u = b; u < e; ++u) {
                         const int64_t m = u / nb, i = u % nb;
                         std::memcpy(Y + ((n0 + i) * g.M + gi * g.Mg + m) * P,
                                     tmp + m * ld + i * P, sizeof(float) * (size_t)P);
                       }
                     });
      }
    }
  }
}

void run_data_grad_im2col(const Geom& g, const Im2colBuffers& p, const float* DY, const float* W,
                          float* DX) {
  const int64_t P = g.P, K = g.K;
  for (int64_t n0 = 0; n0 < g.N; n0 += p.nb) {
    const int64_t nb = std::min(p.nb, g.N - n0);
    for (int64_t gi = 0; gi < g.G; ++gi) {
      const float* Wg = W + gi * g.Mg * K;
      const int64_t ld = nb * P;
      const float* rows;
      if (nb == 1) {
        rows = DY + (n0 * g.M + gi * g.Mg) * P;
      } else {
        gather_rows(g, DY, n0, nb, gi, p.tmp);
        rows = p.tmp;
      }
      if (g.pointwise && nb == 1) {
        blas::sgemm(true, false, K, P, g.Mg, 1.0f, Wg, K, rows, P, 0.0f,
                    DX + (n0 * g.C + gi * g.Cg) * g.Isp, P);
        continue;
      }
      if (nb == 1) {
        image_data_grad(g, rows, Wg, DX + (n0 * g.C + gi * g.Cg) * g.Isp, p.col, true);
        continue;
      }
      float* col = p.col;
      blas::sgemm(true, false, K, ld, g.Mg, 1.0f, Wg, K, rows, ld, 0.0f, col, ld);
      parallel_for(nb * g.Cg, std::max<int64_t>(1, 32768 / std::max<int64_t>(g.Ksp * P, 1)),
                   [&](int64_t b, int64_t e) {
                     for (int64_t u = b; u < e; ++u) {
                       const int64_t i = u / g.Cg, c = u % g.Cg;
                       float* plane = DX + ((n0 + i) * g.C + gi * g.Cg + c) * g.Isp;
                       std::memset(plane, 0, sizeof(float) * (size_t)g.Isp);
                       col2im_plane(g, col + c * g.Ksp * ld + i * P, ld, plane);
                     }
                   });
    }
  }
}

void run_weights_grad_im2col(const Geom& g, const Im2colBuffers& p, const float* DY,
                             const float* X, float* DW) {
  const int64_t P = g.P, K = g.K;
  if (g.N == 0 || P == 0) {
    std::memset(DW, 0, sizeof(float) * (size_t)(g.M * K));
    return;
  }
  for (int64_t n0 = 0; n0 < g.N; n0 += p.nb) {
    const int64_t nb = std::min(p.nb, g.N - n0);
    const float beta = n0 == 0 ? 0.0f : 1.0f;
    for (int64_t gi = 0; gi < g.G; ++gi) {
      float* DWg = DW + gi * g.Mg * K;
      const int64_t ld = nb * P;
      const float* rows;
      if (nb == 1) {
        rows = DY + (n0 * g.M + gi * g.Mg) * P;
      } else {
        gather_rows(g, DY, n0, nb, gi, p.tmp);
        rows = p.tmp;
      }
      if (nb == 1 && !g.pointwise) {
        image_weights_grad(g, rows, X + (n0 * g.C + gi * g.Cg) * g.Isp, DWg, p.col, true,
                           n0 > 0);
        continue;
      }
      const float* col;
      if (g.pointwise && nb == 1) {
        col = X + (n0 * g.C + gi * g.Cg) * g.Isp;
      } else {
        float* c = p.col;
        parallel_for(nb * g.Cg, std::max<int64_t>(1, 32768 / std::max<int64_t>(g.Ksp * P, 1)),
                     [&](int64_t b, int64_t e) {
                       for (int64_t u = b; u < e; ++u) {
                         const int64_t i = u / g.Cg, cc = u % g.Cg;
                         im2col_plane(g, X + ((n0 + i) * g.C + gi * g.Cg + cc) * g.Isp,
                                      c + cc * g.Ksp * ld + i * P, ld);
                       }
                     });
        col = c;
      }
      blas::sgemm(false, true, g.Mg, K, ld, 1.0f, rows, ld, col, ld, beta, DWg, K);
    }
  }
}

// Batch-parallel forms, for images small enough that one image's product
// is cheap: threads take whole images, unfold each into their own column
// buffer and run single-threaded products (a nested parallel_for runs
// inline) straight into the output, with no reordering.
void run_forward_batched(const Geom& g, const float* X, const float* W, float* Y) {
  const int64_t P = g.P, K = g.K;
  parallel_for(g.N, 1, [&](int64_t n0, int64_t n1) {
    std::vector<float> col(g.pointwise ? 0 : (size_t)(K * rows_per_block(g) * g.out[2]));
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t gi = 0; gi < g.G; ++gi) {
        const float* src = X + (n * g.C + gi * g.Cg) * g.Isp;
        float* dst = Y + (n * g.M + gi * g.Mg) * P;
        if (g.pointwise)
          blas::sgemm(false, false, g.Mg, P, K, 1.0f, W + gi * g.Mg * K, K, src, P, 0.0f, dst, P);
        else
          image_forward(g, src, W + gi * g.Mg * K, dst, col.data(), false);
      }
  });
}

void run_data_grad_batched(const Geom& g, const float* DY, const float* W, float* DX) {
  const int64_t P = g.P, K = g.K;
  parallel_for(g.N, 1, [&](int64_t n0, int64_t n1) {
    std::vector<float> col(g.pointwise ? 0 : (size_t)(K * rows_per_block(g) * g.out[2]));
    for (int64_t n = n0; n < n1; ++n)
      for (int64_t gi = 0; gi < g.G; ++gi) {
        const float* rows = DY + (n * g.M + gi * g.Mg) * P;
        float* dst = DX + (n * g.C + gi * g.Cg) * g.Isp;
        if (g.pointwise)
          blas::sgemm(true, false, K, P, g.Mg, 1.0f, W + gi * g.Mg * K, K, rows, P, 0.0f, dst, P);
        else
          image_data_grad(g, rows, W + gi * g.Mg * K, dst, col.data(), false);
      }
  });
}

void run_weights_grad_batched(const Geom& g, const float* DY, const float* X, float* DW) {
  const int64_t P = g.P, K = g.K, T = std::max<int64_t>(1, std::min<int64_t>(kWgradParts, g.N));
  const int64_t wsize = g.M * K;
  std::vector<float> partial((size_t)((T - 1) * wsize));
  parallel_for(T, 1, [&](int64_t t0, int64_t t1) {
    std::vector<float> col(g.pointwise ? 0 : (size_t)(K * rows_per_block(g) * g.out[2]));
    for (int64_t t = t0; t < t1; ++t) {
      float* acc = t == 0 ? DW : partial.data() + (t - 1) * wsize;
      const int64_t a = g.N * t / T, b = g.N * (t + 1) / T;
      if (b == a) std::memset(acc, 0, sizeof(float) * (size_t)wsize);
      for (int64_t n = a; n < b; ++n)
        for (int64_t gi = 0; gi < g.G; ++gi) {
          const float* src = X + (n * g.C + gi * g.Cg) * g.Isp;
          const float* dy = DY + (n * g.M + gi * g.Mg) * P;
          float* dwg = acc + gi * g.Mg * K;
          if (g.pointwise)
            blas::sgemm(false, true, g.Mg, K, P, 1.0f, dy, P, src, P, n == a ? 0.0f : 1.0f, dwg, K);
          else
            image_weights_grad(g, dy, src, dwg, col.data(), false, n != a);
        }
    }
  });
  for (int64_t t = 1; t < T; ++t) {
    const float* src = partial.data() + (t - 1) * wsize;
    for (int64_t i = 0; i < wsize; ++i) DW[i] += src[i];
  }
}

}  // namespace conv
}  // namespace ipuxl
