// The unfold + GEMM convolution (im2col), the form for every shape the
// direct, tap and Winograd forms leave (strided data and weight gradients,
// 3-D): a chunk of images is unfolded into a [C/G * prod(k), nb * prod(out)]
// matrix and multiplied by the group's weights with blas::sgemm; the data
// gradient multiplies by the transposed weights and folds the columns back
// (col2im), the weight gradient multiplies the output gradient by the
// transposed columns. 1x1 convolutions with unit strides and no padding are
// one GEMM per image and group on the input in place. The batched forms
// thread over images instead (small images; fixed partial sums for the
// weight gradient: kWgradParts).
#pragma once

#include <cstdint>

#include "geom.hpp"

namespace ipuxl {
namespace conv {

// Column budget (floats) of one chunk of images.
constexpr int64_t kColBudget = int64_t(1) << 21;

// Floats of the L2 cache a block of unfolded rows is sized to.
constexpr int64_t kL2Floats = int64_t(1) << 17;

// Output rows per block of the one-image products (K x rows x OW floats
// within kL2Floats).
int64_t rows_per_block(const Geom& g);

// The plan's buffers of the chunked forms: nb images per chunk; col the
// unfolded columns (K * rows_per_block * OW floats for nb == 1, else
// K * P * nb; unused by a pointwise chunk of one image); tmp the reordered
// rows of a chunk (Mg * P * nb floats, only for nb > 1).
struct Im2colBuffers {
  int64_t nb = 1;
  float* col = nullptr;
  float* tmp = nullptr;
};

// Y = conv(X, W), DX = its data gradient from DY, DW its weight gradient
// from DY and X, in chunks of images, each product threaded.
void run_forward_im2col(const Geom& g, const Im2colBuffers& p, const float* X, const float* W,
                        float* Y);
void run_data_grad_im2col(const Geom& g, const Im2colBuffers& p, const float* DY, const float* W,
                          float* DX);
void run_weights_grad_im2col(const Geom& g, const Im2colBuffers& p, const float* DY,
                             const float* X, float* DW);

// The same three with threads over images, single-threaded products.
void run_forward_batched(const Geom& g, const float* X, const float* W, float* Y);
void run_data_grad_batched(const Geom& g, const float* DY, const float* W, float* DX);
void run_weights_grad_batched(const Geom& g, const float* DY, const float* X, float* DW);

}  // namespace conv
}  // namespace ipuxl
