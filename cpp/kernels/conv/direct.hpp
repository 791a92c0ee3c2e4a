// Direct forward convolutions (1 or 2 spatial axes, any strides and
// dilations, output rows 8+ wide), each compiled per instruction-set level
// with its own register blocking: the image is copied once into a
// zero-padded buffer, and strips of an output row (vectors over the width)
// x a block of output channels (weights packed once per call as
// [ic*kh*kw][channel block], one broadcast each) accumulate in registers
// over the whole reduction, in chunks of 16 input channels for long ones
// (partial sums kept in the output). Three layouts of the same sums
// (DirectForm): strips of each padded row; the flat form (unit strides:
// positions numbered along padded rows, so strips run across row ends);
// and, for short reductions (C/G x kernel <= 64), column-unfolded planes
// (one per channel, kernel column and row phase), so strips run over the
// whole output plane. Every output element is computed by one task in a
// fixed order, so results are the same bits at any thread count.
#pragma once

#include <cstdint>

#include "geom.hpp"

namespace ipuxl {
namespace conv {

enum class DirectForm { Rows, Flat, Cols };

// Whether the direct kernels can run this forward's shape (1 or 2 spatial
// axes, a kernel bigger than 1x1 or a stride or padding, rows of 8+).
bool direct_applies(const Geom& g);

// Vector width (floats), channels per register block, and vectors per
// strip at most of the direct kernels at the level in use.
int64_t direct_v();
int direct_mb();
int64_t direct_nsmax();

// Estimated multiply-add time of a forward of OH rows of OW outputs whose
// kernel reaches `reach` columns past each, in the two row forms: strips of
// each row (direct_task) and, at unit strides, the flat form
// (direct_task_flat). In vectors, weighted by how well a strip's
// NS x MB accumulator chains cover the latency of two FMA pipes (4 cycles:
// 8 chains just cover it on paper, 4 cannot): 12 or more chains count 1 per
// vector, 8 count 1.25, 4 count 2. The flat form computes the reach's
// columns too and copies its rows out (2%), but every strip is whole. (A
// 56-wide row at AVX2 is 3 + 2 + 2 vectors with 12, 8, 8 chains against
// 7.25 vectors of 12 chains flat; a 14-wide row at AVX-512 is one vector of
// 8 chains. The weights rank the forms; they are not a timing.)
struct DirectCost {
  double rows, flat;  // multiply-add time of the two forms, in vectors
};
DirectCost direct_cost(int64_t OH, int64_t OW, int64_t reach);

// Whether the flat form should run a unit-stride forward rather than the
// strips of each row (direct_cost).
bool flat_pays(int64_t OH, int64_t OW, int64_t reach);

// Whether the column-unfolded form can run this short reduction: C/G x
// kernel <= 64, and its copy (Cg*KW floats per output position) within 8 MB
// per task: a wide kernel row on a large image (1x64 over 1000x1000) would
// make it 256 MB, and the row-padded form runs instead.
bool cols_fit(const Geom& g);

// Forward direct convolution of the whole batch in the given form. W is
// [M][Cg][taps] (the op's weights); with `flipped`, g is
// data_grad_as_forward of a convolution and W that convolution's weights,
// [G*Cg][Mg][taps] in g's terms, which the packing reads transposed per
// group with the taps reversed.
void run_forward_direct(const Geom& g, DirectForm form, const float* X, const float* W, float* Y,
                        bool flipped);

}  // namespace conv
}  // namespace ipuxl
