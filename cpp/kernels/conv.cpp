// Convolutions with 1, 2 or 3 spatial axes (ONNX Conv semantics, NCHW):
//
//   Conv             (x [N,C,*in], w [M,C/G,*k] [, log2_scale]) -> y [N,M,*out]
//   ConvDataGrad     (dy [N,M,*out], w [M,C/G,*k] [, log2_scale]) -> dx [N,C,*in]
//   ConvWeightsGrad  (dy [N,M,*out], x [N,C,*in]) -> dw [M,C/G,*k]
//
// attributes: strides, pads (begin of each axis, then end of each axis),
// dilations (each one per spatial axis) and groups. ConvDataGrad is also the
// transposed convolution (ops.conv_transpose): dx's spatial shape is given
// by its output tensor and must satisfy out = floor((in + pad_b + pad_e -
// dil*(k-1) - 1) / stride) + 1 on every axis.
//
// Method, per shape (conv_factory_kind picks one path per op):
//  * Winograd F(2x2, 3x3) (conv_winograd.cpp): all three ops of 2-D 3x3
//    convolutions at unit strides and dilations with 32+ channels per group
//    on both sides: per block of 2x2 output tiles, 16 GEMMs over the input
//    channels (16 multiplications per tile and channel pair instead of 36;
//    the weight gradient's over the tiles, in a fixed number of partial
//    sums). It declines at run time when x, dy or w holds an infinity or
//    NaN, and the path below runs.
//  * direct kernels (1 or 2 spatial axes; each compiled per instruction-set
//    level with its own register blocking, see direct_task / wgrad_block):
//    - forward, any strides and dilations, output rows 8+ wide: the image
//      is copied once into a zero-padded buffer, and strips of an output row
//      (vectors over the width) x a block of output channels (weights packed
//      once per call as [ic*kh*kw][channel block], one broadcast each)
//      accumulate in registers over the whole reduction, in chunks of 16
//      input channels for long ones (partial sums kept in the output);
//      short reductions (C/G x kernel <= 64) copy the image instead into
//      column-unfolded planes (one per channel, kernel column and row phase;
//      see direct_task_cols), so strips run over the whole output plane;
//      where those row strips would leave a sixth or more of their lanes
//      past the rows' ends (14-wide rows) and the channels allow it (16+
//      input, output a multiple of 32 at AVX-512 / 16 at AVX2), the
//      channels-in-vectors form instead: a channels-last copy of the image,
//      and tiles of up to 14 positions x 32 output channels (see OcTask);
//    - data gradient of a unit-stride convolution: the same forward kernel
//      on dy, with the weights transposed per group and the taps reversed
//      (packed that way, no flipped copy), padded by reach - pad;
//    - weight gradient of a unit-stride convolution with fewer than 16
//      input or 8 output channels per group: dot products over positions
//      numbered along padded rows, MB output channels x 3 taps of a kernel
//      row per register block (declines on inf/NaN in x, see
//      run_weights_grad_direct; the data gradient likewise on inf/NaN
//      weights).
//    Threads take (image, group, channel blocks) / (group, input channels,
//    channel blocks); every output element is computed by one task in a
//    fixed order, so results are the same bits at any thread count.
//  * 1x1 convolutions with unit strides and no padding: one GEMM per image
//    and group on the input in place (the shared GEMM is ahead there).
//  * tap-decomposed GEMMs for the unit-stride weight gradients with 16+
//    input channels (faster there than the direct kernel) and the remaining
//    unit-stride forwards / data gradients with 16+ channels (outputs
//    narrower than 8): per kernel tap, W_tap @ the shifted padded image
//    (described at run_tap);
//  * otherwise (strided data and weight gradients, 3-D): a chunk of images
//    is unfolded (im2col) into a [C/G * prod(k), nb * prod(out)] matrix and
//    multiplied by the group's weights with blas::sgemm; the data gradient
//    multiplies by the transposed weights and folds the columns back
//    (col2im), the weight gradient multiplies the output gradient by the
//    transposed columns. Small images thread over images (fixed partial
//    sums for the weight gradient: kWgradParts).
// IPUXL_CONV_NO_WINOGRAD=1 turns the Winograd form off;
// IPUXL_CONV_NO_DIRECT=1 keeps the direct kernels to short forward
// reductions (C/G x kernel <= 64, as before they covered the long ones) and
// IPUXL_CONV_NO_TAP=1 turns the tap products off, IPUXL_CONV_NO_COLS=1 the
// column-unfolded form (short reductions then pad rows), for comparisons.
//
// Types: float32; float16 computes in float32 and rounds once; with a third
// input (an int32 scalar log2_scale) the operands are float8_143/152 (both
// the same format or mixed), decoded exactly to float32, and the result is
// multiplied by 2^log2_scale and rounded once to float16 (PopXL's
// conv_pow2scaled).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../core/blas.hpp"
#include "../core/fp8.hpp"
#include "../core/gemm.hpp"
#include "../core/parallel.hpp"
#include "common.hpp"
#include "conv_winograd.hpp"

namespace ipuxl {
namespace {

enum class ConvKind { Forward, DataGrad, WeightsGrad };

// Geometry of one convolution, spatial axes padded to 3 (leading 1s).
struct Geom {
  int64_t N = 0, C = 0, M = 0, G = 1, Cg = 0, Mg = 0;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1}, pad[3] = {0, 0, 0};
  int64_t Isp = 1, Ksp = 1, P = 1, K = 1;
  bool pointwise = false;  // 1x1 kernel, unit strides, no padding: columns == input
};

// Validates the attributes and the three tensor shapes (x-like, w-like,
// y-like) and fills the geometry.
Geom make_geom(const OpDesc& d, const Shape& xs, const Shape& ws, const Shape& ys) {
  const int64_t r = (int64_t)xs.size();
  if (r < 3 || r > 5)
    d.fail("the input must have rank 3, 4 or 5 (N, C and 1-3 spatial axes), got " +
           shape_str(xs));
  if ((int64_t)ws.size() != r || (int64_t)ys.size() != r)
    d.fail("the input " + shape_str(xs) + ", weights " + shape_str(ws) + " and output " +
           shape_str(ys) + " must have the same rank");
  const int64_t ns = r - 2;
  auto strides = d.attrs.ints("strides");
  auto pads = d.attrs.ints("pads");
  auto dils = d.attrs.ints("dilations");
  const int64_t G = d.attrs.i("groups", 1);
  if ((int64_t)strides.size() != ns || (int64_t)dils.size() != ns || (int64_t)pads.size() != 2 * ns)
    d.fail("strides and dilations need " + std::to_string(ns) + " values and pads " +
           std::to_string(2 * ns));
  Geom g;
  g.N = xs[0];
  g.C = xs[1];
  g.M = ws[0];
  g.G = G;
  if (G < 1 || g.C % G != 0 || g.M % G != 0)
    d.fail("groups " + std::to_string(G) + " must divide the input channels " +
           std::to_string(g.C) + " and the output channels " + std::to_string(g.M));
  g.Cg = g.C / G;
  g.Mg = g.M / G;
  if (ws[1] != g.Cg)
    d.fail("the weights " + shape_str(ws) + " must have C/groups = " + std::to_string(g.Cg) +
           " input channels");
  if (ys[0] != g.N || ys[1] != g.M)
    d.fail("the output " + shape_str(ys) + " must have batch " + std::to_string(g.N) +
           " and " + std::to_string(g.M) + " channels");
  const int64_t off = 3 - ns;
  for (int64_t i = 0; i < ns; ++i) {
    const int64_t s = strides[(size_t)i], dl = dils[(size_t)i];
    const int64_t pb = pads[(size_t)i], pe = pads[(size_t)(i + ns)];
    if (s < 1 || dl < 1 || pb < 0 || pe < 0) d.fail("strides and dilations must be >= 1, pads >= 0");
    const int64_t in = xs[(size_t)(i + 2)], kk = ws[(size_t)(i + 2)], o = ys[(size_t)(i + 2)];
    if (kk < 1) d.fail("kernel sizes must be >= 1, got " + shape_str(ws));
    const int64_t span = in + pb + pe - dl * (kk - 1) - 1;
    const int64_t expect = span < 0 ? 0 : span / s + 1;
    if (o != expect)
      d.fail("spatial axis " + std::to_string(i) + ": input " + std::to_string(in) +
             ", kernel " + std::to_string(kk) + ", stride " + std::to_string(s) + ", dilation " +
             std::to_string(dl) + " and pads " + std::to_string(pb) + "/" + std::to_string(pe) +
             " give an output of " + std::to_string(expect) + ", not " + std::to_string(o));
    g.in[off + i] = in;
    g.k[off + i] = kk;
    g.out[off + i] = o;
    g.stride[off + i] = s;
    g.dil[off + i] = dl;
    g.pad[off + i] = pb;
  }
  g.Isp = g.in[0] * g.in[1] * g.in[2];
  g.Ksp = g.k[0] * g.k[1] * g.k[2];
  g.P = g.out[0] * g.out[1] * g.out[2];
  g.K = g.Cg * g.Ksp;
  g.pointwise = g.Ksp == 1;
  for (int i = 0; i < 3; ++i)
    g.pointwise = g.pointwise && g.stride[i] == 1 && g.pad[i] == 0 && g.out[i] == g.in[i];
  return g;
}

// The Winograd form's problem (conv_winograd.hpp) for a 2-D 3x3 convolution
// at unit strides and dilations; N = 0 for any other.
conv_winograd::Problem winograd_problem(const Geom& g) {
  conv_winograd::Problem p;
  if (g.in[0] != 1 || g.k[0] != 1 || g.k[1] != 3 || g.k[2] != 3) return p;
  for (int i = 1; i < 3; ++i)
    if (g.stride[i] != 1 || g.dil[i] != 1) return p;
  p.N = g.N;
  p.G = g.G;
  p.Cg = g.Cg;
  p.Mg = g.Mg;
  p.IH = g.in[1];
  p.IW = g.in[2];
  p.OH = g.out[1];
  p.OW = g.out[2];
  p.ph = g.pad[1];
  p.pw = g.pad[2];
  return p;
}

// Fixed number of partial sums of a batch-split weight gradient: a number
// of the shapes only, so the result is the same bits at any thread count.
constexpr int64_t kWgradParts = 4;

// A float buffer whose data starts on a 64-byte line (whole-vector loads of
// aligned rows then never straddle two lines), zero-filled unless `zero` is
// false (for a buffer its user writes in full before reading it).
struct LineBuf {
  std::unique_ptr<float[]> v;
  float* p;
  explicit LineBuf(size_t n, bool zero = true)
      : v(zero ? new float[n + 16]() : new float[n + 16]) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(v.get());
    p = v.get() + ((64 - a % 64) % 64) / sizeof(float);
  }
  float* data() { return p; }
};

// Column budget (floats) of one chunk of images.
constexpr int64_t kColBudget = int64_t(1) << 21;

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

// How an operand reaches float32: in place (float32) or converted into a
// buffer at each run (float16 exactly; fp8 through its decode table).
struct FloatView {
  const TensorRef* t = nullptr;
  std::shared_ptr<std::vector<float>> buf;

  FloatView() = default;
  explicit FloatView(const TensorRef* ref) : t(ref) {
    if (t->dtype != DType::Float32) buf = std::make_shared<std::vector<float>>((size_t)t->nelms);
  }
  const float* get() const {
    if (!buf) return t->as<float>();
    float* o = buf->data();
    const int64_t n = t->nelms;
    if (t->dtype == DType::Float16) {
      const f16* s = t->as<f16>();
      parallel_for(n, kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) o[i] = (float)s[i];
      });
    } else {
      const float* lut = (t->dtype == DType::Float8_143 ? fp8::table143() : fp8::table152()).v;
      const uint8_t* s = t->data;
      parallel_for(n, kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) o[i] = lut[s[i]];
      });
    }
    return o;
  }
};

// The output: written in place (float32) or through a float buffer rounded
// once to float16 (times 2^log2_scale for the fp8 form).
struct FloatOut {
  const TensorRef* t = nullptr;
  std::shared_ptr<std::vector<float>> buf;

  FloatOut() = default;
  explicit FloatOut(const TensorRef* ref) : t(ref) {
    if (t->dtype != DType::Float32) buf = std::make_shared<std::vector<float>>((size_t)t->nelms);
  }
  float* get() const { return buf ? buf->data() : t->as<float>(); }
  void finish(int log2_scale, bool scaled) const {
    const int64_t n = t->nelms;
    const float* s = get();
    const float scale = scaled ? std::ldexp(1.0f, log2_scale) : 1.0f;
    if (!buf) {
      if (scaled) {
        float* o = t->as<float>();
        for (int64_t i = 0; i < n; ++i) o[i] *= scale;
      }
      return;
    }
    f16* o = t->as<f16>();
    parallel_for(n, kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = f16(s[i] * scale);
    });
  }
};

// Row-blocked products of one image and group: the output rows are taken
// in blocks whose columns (K x rows x OW floats) fit the L2 cache, so the
// unfolded block is still cached when the product packs it. `par` unfolds
// / folds the block's channels over the thread pool (the products thread
// themselves); inside a task that already runs per image it is false.
constexpr int64_t kL2Floats = int64_t(1) << 17;

int64_t rows_per_block(const Geom& g) {
  const int64_t R = g.out[0] * g.out[1];
  return std::max<int64_t>(1, std::min<int64_t>(R, kL2Floats / std::max<int64_t>(1, g.K * g.out[2])));
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

struct ConvPlan {
  ConvKind kind;
  Geom g;
  int64_t nb = 1;  // images per chunk
  bool batched = false;  // threads over images (run_*_batched)
  bool direct = false;   // run_forward_direct
  bool direct_dgrad = false;  // run_forward_direct on data_grad_as_forward(g)
  bool direct_wgrad = false;  // run_weights_grad_direct
  Geom fg;                    // that geometry
  bool tap = false;      // run_tap
  // conv_winograd::forward of the forward, or of the data gradient as a
  // forward (data_grad_as_forward), or conv_winograd::weights_grad; each
  // declines at run time on an infinity or NaN, and the form planned above
  // runs.
  bool winograd = false;
  conv_winograd::Problem wino;
  FloatView a, b;  // Forward: x, w; DataGrad: dy, w; WeightsGrad: dy, x
  FloatOut o;
  const TensorRef* log2_scale = nullptr;
  bool scaled = false;
  std::shared_ptr<std::vector<float>> col, tmp;  // columns, reordered rows
};

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

void run_forward(const ConvPlan& p, const float* X, const float* W, float* Y) {
  const Geom& g = p.g;
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
                      p.col->data(), true);
        continue;
      }
      float* col = p.col->data();
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
        float* tmp = p.tmp->data();
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

void run_data_grad(const ConvPlan& p, const float* DY, const float* W, float* DX) {
  const Geom& g = p.g;
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
        gather_rows(g, DY, n0, nb, gi, p.tmp->data());
        rows = p.tmp->data();
      }
      if (g.pointwise && nb == 1) {
        blas::sgemm(true, false, K, P, g.Mg, 1.0f, Wg, K, rows, P, 0.0f,
                    DX + (n0 * g.C + gi * g.Cg) * g.Isp, P);
        continue;
      }
      if (nb == 1) {
        image_data_grad(g, rows, Wg, DX + (n0 * g.C + gi * g.Cg) * g.Isp, p.col->data(), true);
        continue;
      }
      float* col = p.col->data();
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

void run_weights_grad(const ConvPlan& p, const float* DY, const float* X, float* DW) {
  const Geom& g = p.g;
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
        gather_rows(g, DY, n0, nb, gi, p.tmp->data());
        rows = p.tmp->data();
      }
      if (nb == 1 && !g.pointwise) {
        image_weights_grad(g, rows, X + (n0 * g.C + gi * g.Cg) * g.Isp, DWg, p.col->data(), true,
                           n0 > 0);
        continue;
      }
      const float* col;
      if (g.pointwise && nb == 1) {
        col = X + (n0 * g.C + gi * g.Cg) * g.Isp;
      } else {
        float* c = p.col->data();
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

// Tap-decomposed convolution for unit strides (1 or 2 spatial axes): no
// unfolded matrix at all. The image is copied once into a zero-padded
// buffer whose rows are exactly as wide as the output plus the kernel's
// reach (IWp = OW + (kw-1)*dw); positions are then numbered over padded rows
// (oh * IWp + ow, the last (kw-1)*dw of each row wasted), and kernel tap
// (kh, kw) reads every channel shifted by kh*dh*IWp + kw*dw: a plain strided
// matrix. So the output is a sum over taps of products
//   Y[m, pos] += Wtap[m, c] @ Xpad_shift[c, pos]
// (the GEMM reads the weights in place and packs the shifted image by plain
// row copies), accumulated in a channel-major block that stays in L2, whose
// rows are then copied into the output. The data gradient of a unit stride
// convolution is the same computation on dy with flipped, transposed
// weights; the weight gradient is one product per tap,
// Xpad_shift @ dy^T (dy in padded rows, packed once per image).
struct TapGeom {
  int64_t Cin, IH, IW, ph, pw, KH, KW, dh, dw, Mo, OH, OW;
  int64_t IHp, IWp, plane;  // padded rows, padded width, plane stride (with slack)
};

TapGeom make_tap_geom(int64_t Cin, int64_t IH, int64_t IW, int64_t ph, int64_t pw, int64_t KH,
                      int64_t KW, int64_t dh, int64_t dw, int64_t Mo, int64_t OH, int64_t OW) {
  TapGeom t{Cin, IH, IW, ph, pw, KH, KW, dh, dw, Mo, OH, OW, 0, 0, 0};
  t.IHp = OH + (KH - 1) * dh;
  t.IWp = OW + (KW - 1) * dw;
  t.plane = ((t.IHp * t.IWp + (KW - 1) * dw + 15) / 16) * 16;
  return t;
}

// xpad[c] = x[c] placed at (ph, pw) of an IHp x IWp zero plane (cropped).
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

// Direct forward convolution. For a short reduction (few input channels
// times kernel taps, e.g. the first layer of an image network) an im2col
// product would have K of a few dozen, where the GEMM spends more time
// packing and storing than multiplying; for a long one (a 3x3 64->64 layer)
// the shared GEMM reached ~60 GFLOP/s on one AVX-512 core against oneDNN's
// ~150 on its direct kernel. A task takes one image and group (and a range
// of channel blocks): it copies the image's channels once into a
// zero-padded buffer (so no tap needs bounds checks), then for every strip
// of an output row (NS vectors of the level's width) and block of MB output
// channels keeps the NS x MB accumulators in vector registers over the
// C/G x kernel taps: per tap NS loads and MB broadcast weights feed NS * MB
// multiply-adds. The register blocking is per instruction-set level (32
// registers at AVX-512, 16 below), and each level's copy is compiled for it
// (target attributes). 1 or 2 spatial axes, any strides and dilations.
constexpr int64_t kDirectMaxK = 64, kDirectPadV = 16;

bool direct_applies(const Geom& g) {
  if (!(g.in[0] == 1 && g.k[0] == 1 && g.out[2] >= 8 && !g.pointwise)) return false;
  return g.K <= kDirectMaxK || std::getenv("IPUXL_CONV_NO_DIRECT") == nullptr;
}

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
// two cache lines; see bench/README.md.)
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

// Estimated multiply-add time of a forward of OH rows of OW outputs whose
// kernel reaches `reach` columns past each, in the two row forms: strips of
// each row (direct_task) and, at unit strides, the flat form
// (direct_task_flat). In vectors, weighted by how well a strip's
// NS x MB accumulator chains cover the latency of two FMA pipes (4 cycles:
// 8 chains just cover it on paper, 4 cannot): 12 or more chains count 1 per
// vector, 8 count 1.25, 4 count 2. The flat form computes the reach's
// columns too and copies its rows out (2%), but every strip is whole.
// Measured (bench/README.md, "2026-11-27, third session (branch conv5)"):
// a 56-wide row at AVX2 is 3 + 2 + 2 vectors with 12, 8, 8 chains; flat,
// 7.25 vectors of 12 chains ran 64->64 56x56 b8 about 10% faster
// (torch/ipuxl paired 0.77-0.93 -> 0.90-0.97 at two threads, 0.81-0.85 ->
// 0.91-0.99 at one); a 14-wide row at AVX-512 is one vector of 8 chains,
// and 256->256 14x14 b8 went from 0.55 to 0.68-0.76.
struct DirectCost {
  double rows, flat;  // multiply-add time of the two forms, in vectors
};
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

// Whether the flat form should run a unit-stride forward rather than the
// strips of each row.
bool flat_pays(int64_t OH, int64_t OW, int64_t reach) {
  const DirectCost c = direct_cost(OH, OW, reach);
  return c.flat < c.rows;
}

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

// ---------------------------------------------------------------------------
// The channels-in-vectors form of a forward convolution (and of a data
// gradient run as one): vector lanes hold output channels, and a tile of R
// consecutive output positions of one row x NV vectors of channels keeps
// R x NV accumulators over every tap and input channel. Each image is
// copied once into a zero-padded channels-last buffer xl[row][col][Cg], so
// the input of tap (kh, kw) for position r of a tile is Cg contiguous floats
// at a fixed offset, and the weights are packed as [block][channel block of
// kOcCB][tap][channel][NV*V]: per (tap, channel) step NV vector loads of
// weights and R broadcasts of x feed R * NV multiply-adds, the GEMM
// micro-kernel's shape (14 x 2 vectors at AVX-512, 6 x 2 at AVX2). Unlike
// the row strips of direct_task no lane is spent past a row's end: a
// 14-wide row is one tile of 14 positions (strips of 16-lane vectors over
// the padded rows computed 240 positions for 196 there). Every output
// element is summed in one fixed order (channel blocks, then taps, then the
// block's channels), whatever the thread count. With `flipped`, as for
// run_forward_direct below.
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

// Output channels per block of the channels-in-vectors form at the level in
// use: two vectors (oc_task_avx512 / oc_task_avx2); 0 at the 4-wide levels,
// which have no such kernel.
int64_t oc_block() { return direct_v() >= 8 ? 2 * direct_v() : 0; }

// Whether run_forward_direct takes the channels-in-vectors form.
bool oc_form_applies(const Geom& g) {
  const int64_t nvv = oc_block();
  if (nvv == 0 || std::getenv("IPUXL_CONV_NO_OC") != nullptr) return false;
  if (g.in[0] != 1 || g.k[0] != 1) return false;
  if (g.Mg % nvv != 0 || g.Cg < 16 || g.K <= kDirectMaxK) return false;
  // Taken where the row forms spend a sixth or more of their lanes past the
  // rows' ends (estimated as flat_pays does): the channels-in-vectors tiles
  // waste none, but copy the image and store each tile's channels one by
  // one. 2 threads, paired torch/ipuxl against the row forms
  // (bench/README.md, "2026-11-27, fourth session (branch `conv6`)"): 3x3
  // 256->256 14x14 b8 (estimate 1.25) AVX-512 0.74-0.80 -> 0.82-0.92, AVX2
  // 0.76-0.86 -> 0.84-0.86; 128->128 28x28 (1.09-1.12) and 64->64 56x56
  // (1.04-1.06) level or slower, left on the row forms.
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

// Forward direct convolution of the whole batch. W is [M][Cg][taps] (the
// op's weights); with `flipped`, g is data_grad_as_forward of a convolution
// and W that convolution's weights, [G*Cg][Mg][taps] in g's terms, which the
// packing reads transposed per group with the taps reversed.
void run_forward_direct(const Geom& g, const float* X, const float* W, float* Y,
                        bool flipped = false) {
  if (oc_form_applies(g)) {
    run_forward_oc(g, X, W, Y, flipped);
    return;
  }
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
  // Short reductions: the column-unfolded form (direct_task_cols), whose
  // planes are CPH rows of OW per (channel, kernel column, row phase).
  // Its copy is Cg*KW floats per output position: a wide kernel row on a
  // large image (1x64 over 1000x1000) would make it 256 MB, so past 8 MB
  // per task the row-padded form runs.
  const int64_t sh = g.stride[1];
  const int64_t CPH = OH + (kh_n - 1) * g.dil[1] / sh;
  const bool cols = K <= kDirectMaxK && g.Cg * kw_n * sh * CPH * OW <= (int64_t(1) << 21) &&
                    std::getenv("IPUXL_CONV_NO_COLS") == nullptr;
  const bool flat = !cols && g.stride[1] == 1 && sw == 1 && flat_pays(OH, OW, reach_w);
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

// The data gradient of a convolution with unit strides is a forward
// convolution of dy (channels M, spatial out) with the weights transposed
// per group and the taps reversed, padded by reach - pad at the start of
// each axis (reach = (k-1)*dil); its output is dx (channels C, spatial in).
Geom data_grad_as_forward(const Geom& g) {
  Geom f = g;
  f.C = g.M;
  f.M = g.C;
  f.Cg = g.Mg;
  f.Mg = g.Cg;
  for (int a = 0; a < 3; ++a) {
    f.in[a] = g.out[a];
    f.out[a] = g.in[a];
    f.pad[a] = (g.k[a] - 1) * g.dil[a] - g.pad[a];
  }
  f.Isp = g.P;
  f.P = g.Isp;
  f.K = f.Cg * f.Ksp;
  f.pointwise = false;
  return f;
}

// Whether the data gradient of this unit-stride convolution (1 or 2
// spatial axes, a kernel bigger than 1x1) is a forward convolution
// (data_grad_as_forward) with pads in [0, reach] at both ends of each axis
// (dx reads only real dy rows or zeros).
bool data_grad_is_forward(const Geom& g) {
  if (!(g.in[0] == 1 && g.k[0] == 1 && g.stride[1] == 1 && g.stride[2] == 1) || g.pointwise)
    return false;
  if (g.P == 0 || g.N == 0 || g.Isp == 0) return false;
  for (int a = 1; a < 3; ++a) {
    const int64_t reach = (g.k[a] - 1) * g.dil[a];
    const int64_t pe = (g.out[a] - 1) + reach - g.pad[a] - (g.in[a] - 1);  // end padding used
    if (g.pad[a] > reach || pe < 0 || pe > reach) return false;
  }
  return true;
}

// Whether that forward runs on the direct kernels (rows of 8+).
bool direct_data_grad_applies(const Geom& g) {
  return data_grad_is_forward(g) && g.in[2] >= 8 && std::getenv("IPUXL_CONV_NO_DIRECT") == nullptr;
}

// Direct weight gradient for unit strides (1 or 2 spatial axes), with the
// positions numbered over padded rows as in the tap path: x is padded once
// per call into planes IWp = OW + (kw-1)*dw wide, dy laid out over the same
// rows (zeros in each row's last (kw-1)*dw columns and past the end), so
//   dw[m, c, kh, kw] = sum_n sum_p dyp[n, m, p] * xpad[n, c, p + kh*dh*IWp + kw*dw]
// is a plain dot product over a contiguous range of p. The micro-kernel
// keeps MB output channels x NT taps of one kernel row as vector
// accumulators over p (per vector of positions: MB loads of dy, NT shifted
// loads of x, MB*NT multiply-adds); the accumulators are carried in memory
// across images and summed across lanes once at the end. A task owns a
// block of output channels and a few input channels of one group and runs
// over every image in order, so each element of dw is summed in the same
// order whatever the thread count.
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

bool direct_wgrad_applies(const Geom& g) {
  if (!(g.in[0] == 1 && g.k[0] == 1 && g.stride[1] == 1 && g.stride[2] == 1) || g.pointwise)
    return false;
  return g.P > 0 && g.N > 0 && g.Isp > 0 && std::getenv("IPUXL_CONV_NO_DIRECT") == nullptr;
}

// Whether no value is an infinity or NaN (exponent bits all ones); an
// integer OR, so it vectorises without reassociating float sums.
bool all_finite(const float* v, int64_t n) {
  uint32_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, sizeof bits);
    bad |= (uint32_t)((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

// Returns false, with DW unspecified, when x holds an infinity or NaN: the
// padded rows multiply each row's wasted positions (zeros of dy) by x
// values the true sum never reads for that tap, and 0 * inf would turn a
// finite gradient into NaN.
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

std::unique_ptr<Kernel> conv_factory_kind(const OpDesc& d, ConvKind kind) {
  if (d.out.size() != 1) d.fail("expected 1 output");
  const bool scaled = d.in.size() == 3;
  if (d.in.size() != 2 && !(scaled && kind != ConvKind::WeightsGrad))
    d.fail("expected 2 inputs (3 with a log2 scale)");
  for (const TensorRef* t : d.in)
    if (!t) d.fail("an input is missing");
  const TensorRef* a = d.in[0];
  const TensorRef* b = d.in[1];
  const TensorRef* o = d.out[0];
  ConvPlan p;
  p.kind = kind;
  p.scaled = scaled;
  if (scaled) {
    p.log2_scale = d.in[2];
    if (p.log2_scale->dtype != DType::Int32 || p.log2_scale->nelms != 1)
      d.fail("the log2 scale '" + p.log2_scale->name + "' must be an int32 scalar");
    if (!dtype_is_fp8(a->dtype) || !dtype_is_fp8(b->dtype))
      d.fail("a scaled convolution needs float8 operands, got " + std::string(dtype_name(a->dtype)) +
             " and " + dtype_name(b->dtype));
    if (o->dtype != DType::Float16) d.fail("a scaled convolution produces float16");
  } else {
    if (a->dtype != DType::Float32 && a->dtype != DType::Float16)
      d.fail(std::string("expected float32 or float16 operands, got ") + dtype_name(a->dtype));
    d.expect_same_dtype(*a, *b);
    d.expect_same_dtype(*a, *o);
  }
  switch (kind) {
    case ConvKind::Forward: p.g = make_geom(d, a->shape, b->shape, o->shape); break;
    case ConvKind::DataGrad: p.g = make_geom(d, o->shape, b->shape, a->shape); break;
    case ConvKind::WeightsGrad: p.g = make_geom(d, b->shape, o->shape, a->shape); break;
  }
  const Geom& g = p.g;
  const int64_t colrow = std::max<int64_t>(1, g.K * g.P);
  p.nb = std::max<int64_t>(1, std::min<int64_t>(std::max<int64_t>(g.N, 1), kColBudget / colrow));
  if (g.pointwise && kind != ConvKind::WeightsGrad) p.nb = 1;
  // Threads over images when there are enough images and one image's
  // product is small (below ~16 MFLOP): single-threaded products on
  // private columns beat splitting each small product.
  const double image_flops = 2.0 * (double)g.M * (double)g.P * (double)g.K;
  // The choice depends on the shapes only, never on the thread count: the
  // weight gradient's two forms sum in different orders, and the forward and
  // data gradient's forms make products of different widths (one image, or
  // several), which OpenBLAS (the AVX2 rules of cpp/core/blas.cpp) rounds
  // differently at its block edges.
  const int64_t min_images = kWgradParts;
  p.batched = g.N >= min_images && image_flops < 1.6e7 && g.P > 0 && g.K > 0;
  if (p.batched) p.nb = 1;
  p.direct = kind == ConvKind::Forward && direct_applies(g);
  if (kind != ConvKind::DataGrad) p.wino = winograd_problem(g);
  if (kind == ConvKind::DataGrad && data_grad_is_forward(g))
    p.wino = winograd_problem(data_grad_as_forward(g));
  p.winograd = p.wino.N > 0 && conv_winograd::applies(p.wino);
  // The direct data gradient declines at run time when the weights hold an
  // infinity or NaN (its padding zeros of dy would meet them: NaN where dx is
  // finite); the other forms are planned for that case.
  if (kind == ConvKind::DataGrad && direct_data_grad_applies(g)) {
    p.direct_dgrad = true;
    p.fg = data_grad_as_forward(g);
  }
  // The direct weight gradient declines at run time when x holds an
  // infinity or NaN (see run_weights_grad_direct): the unfold + GEMM form is
  // then used, so its buffers are planned too (and the tap form, which has
  // the same limitation, is not).
  // Weight gradient at unit strides: the tap products where they apply (16+
  // input channels: on one AVX-512 core 116-137 GFLOP/s against the direct
  // kernel's 100-117 for the 3x3 32->64 and 64->64 layers), the direct
  // kernel for the narrower ones. Both read padded rows, so both decline
  // when x holds an infinity or NaN (see run_weights_grad_direct) and the
  // unfold + GEMM form runs: its buffers are planned too.
  // Below AVX-512, a weight gradient with a small output (Cg x Mg <= 2048)
  // runs faster as one unfold + GEMM per chunk of images than as a product
  // per tap ([Cg, positions] @ [positions, Mg], each too small to use the
  // narrower vectors well). Engine profile, 2 threads, ms per call,
  // tap / unfold: AVX2 32->64 28x28 b32 10.8-13.0 / 9.6-9.8, 16->32 28x28
  // b32 3.2 / 2.8, 32->32 5x5 56x56 b8 14.8 / 13.1 (but 64->64 56x56 b8
  // 20.1 / 24.1, 128->128 14x14 b16 13.0 / 13.6); SSE unfold faster on all
  // four (by 1-22%); at AVX-512 the tap form was level or faster.
  const bool small_wgrad_narrow = kind == ConvKind::WeightsGrad &&
                                  isa::current() != isa::Level::AVX512 && g.Cg * g.Mg <= 2048;
  const bool no_tap = std::getenv("IPUXL_CONV_NO_TAP") != nullptr || small_wgrad_narrow;
  p.tap = !p.direct && !p.direct_dgrad && tap_applies(g, kind) && !no_tap;
  p.direct_wgrad = kind == ConvKind::WeightsGrad && !p.tap && direct_wgrad_applies(g);
  if (p.tap && kind != ConvKind::WeightsGrad) p.batched = false;
  if (p.direct) p.batched = false;
  if (p.direct) p.nb = 1;
  if (!(g.pointwise && p.nb == 1) && !p.batched && !p.direct &&
      !(p.tap && kind != ConvKind::WeightsGrad))
    p.col = std::make_shared<std::vector<float>>(
        (size_t)(p.nb == 1 ? g.K * rows_per_block(g) * g.out[2] : g.K * g.P * p.nb));
  if (p.nb > 1) p.tmp = std::make_shared<std::vector<float>>((size_t)(g.Mg * g.P * p.nb));
  p.a = FloatView(a);
  p.b = FloatView(b);
  p.o = FloatOut(o);
  return make_kernel(
      [p](RunContext&) {
        int log2_scale = 0;
        if (p.scaled) {
          log2_scale = p.log2_scale->as<int32_t>()[0];
          if (log2_scale < -32 || log2_scale >= 32)
            throw RunError("conv_pow2scaled: the log2 scale " + std::to_string(log2_scale) +
                           " is outside the range [-32, 32) of a 6-bit signed integer");
        }
        const float* A = p.a.get();
        const float* B = p.b.get();
        float* O = p.o.get();
        // (WeightsGrad's inputs are (dy, x))
        if (p.winograd && (p.kind == ConvKind::WeightsGrad
                               ? conv_winograd::weights_grad(p.wino, A, B, O)
                               : conv_winograd::forward(p.wino, A, B, O,
                                                        p.kind == ConvKind::DataGrad))) {
          p.o.finish(log2_scale, p.scaled);
          return;
        }
        // WeightsGrad's inputs are (dy, x)
        if (p.direct_wgrad && run_weights_grad_direct(p.g, A, B, O)) {
          p.o.finish(log2_scale, p.scaled);
          return;
        }
        // (the tap weight gradient: only with a finite x, as above)
        if (p.tap && (p.kind != ConvKind::WeightsGrad || all_finite(B, p.b.t->nelms))) {
          // WeightsGrad's inputs are (dy, x): the padded operand is x.
          if (p.kind == ConvKind::WeightsGrad) run_tap(p.g, p.kind, B, A, O);
          else run_tap(p.g, p.kind, A, B, O);
          p.o.finish(log2_scale, p.scaled);
          return;
        }
        if (p.direct_dgrad && all_finite(B, p.b.t->nelms)) {
          run_forward_direct(p.fg, A, B, O, true);
          p.o.finish(log2_scale, p.scaled);
          return;
        }
        if (p.direct) {
          run_forward_direct(p.g, A, B, O);
          p.o.finish(log2_scale, p.scaled);
          return;
        }
        if (p.batched) {
          switch (p.kind) {
            case ConvKind::Forward: run_forward_batched(p.g, A, B, O); break;
            case ConvKind::DataGrad: run_data_grad_batched(p.g, A, B, O); break;
            case ConvKind::WeightsGrad: run_weights_grad_batched(p.g, A, B, O); break;
          }
          p.o.finish(log2_scale, p.scaled);
          return;
        }
        switch (p.kind) {
          case ConvKind::Forward: run_forward(p, A, B, O); break;
          case ConvKind::DataGrad: run_data_grad(p, A, B, O); break;
          case ConvKind::WeightsGrad: run_weights_grad(p, A, B, O); break;
        }
        p.o.finish(log2_scale, p.scaled);
      });
}

}  // namespace

IPUXL_REGISTER_KERNEL("Conv", [](const OpDesc& d) { return conv_factory_kind(d, ConvKind::Forward); });
IPUXL_REGISTER_KERNEL("ConvDataGrad",
                      [](const OpDesc& d) { return conv_factory_kind(d, ConvKind::DataGrad); });
IPUXL_REGISTER_KERNEL("ConvWeightsGrad",
                      [](const OpDesc& d) { return conv_factory_kind(d, ConvKind::WeightsGrad); });

}  // namespace ipuxl
