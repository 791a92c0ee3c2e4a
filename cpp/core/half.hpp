// Bulk float16 <-> float32 conversion, vectorised for the instruction-set
// level in use (F16C at the AVX2 and AVX-512 levels, the scalar f16 of
// dtype.hpp at the baseline) and split over the core's threads.
//
// Every level gives the same bits as f16::to_float / f16::from_float for
// every input: the hardware conversions are exact (half -> float) and round
// to nearest even (float -> half) as the scalar code does, and a vector of
// inputs holding a NaN (whose payload bits the hardware keeps and the
// scalar code does not) is converted by the scalar code. Results depend
// neither on the level nor on the thread count.
#pragma once

#include <cstdint>

#include "dtype.hpp"

namespace ipuxl {
namespace half {

// dst[i] = (float)src[i], i < n, on the calling thread.
void to_float(const f16* src, float* dst, int64_t n);
// dst[i] = f16(src[i]) (round to nearest even), i < n, on the calling thread.
void from_float(const float* src, f16* dst, int64_t n);
// The same over the core's threads (large arrays; small ones run inline).
void to_float_parallel(const f16* src, float* dst, int64_t n);
void from_float_parallel(const float* src, f16* dst, int64_t n);

}  // namespace half
}  // namespace ipuxl
