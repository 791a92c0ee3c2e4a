// Bulk float16 conversions (half.hpp): one copy per instruction-set level.
#include "half.hpp"

#include "isa.hpp"
#include "parallel.hpp"

#if IPUXL_MULTI_ISA
#include <immintrin.h>
#endif

namespace ipuxl {
namespace half {
namespace {

void to_float_scalar(const f16* s, float* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i] = f16::to_float(s[i].bits);
}

void from_float_scalar(const float* s, f16* d, int64_t n) {
  for (int64_t i = 0; i < n; ++i) d[i].bits = f16::from_float(s[i]);
}

#if IPUXL_MULTI_ISA
// 8 halves at a time; a group holding a NaN ((h & 0x7fff) > 0x7c00) goes
// through the scalar code.
IPUXL_TARGET_AVX2 void to_float_avx2(const f16* s, float* d, int64_t n) {
  const __m128i abs_mask = _mm_set1_epi16(0x7fff), inf = _mm_set1_epi16(0x7c00);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i nan = _mm_cmpgt_epi16(_mm_and_si128(h, abs_mask), inf);
    if (_mm_testz_si128(nan, nan))
      _mm256_storeu_ps(d + i, _mm256_cvtph_ps(h));
    else
      to_float_scalar(s + i, d + i, 8);
  }
  to_float_scalar(s + i, d + i, n - i);
}

IPUXL_TARGET_AVX2 void from_float_avx2(const float* s, f16* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(s + i);
    if (_mm256_movemask_ps(_mm256_cmp_ps(x, x, _CMP_UNORD_Q)) == 0)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i),
                       _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    else
      from_float_scalar(s + i, d + i, 8);
  }
  from_float_scalar(s + i, d + i, n - i);
}

IPUXL_TARGET_AVX512 void to_float_avx512(const f16* s, float* d, int64_t n) {
  const __m256i abs_mask = _mm256_set1_epi16(0x7fff), inf = _mm256_set1_epi16(0x7c00);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    if (_mm256_cmpgt_epi16_mask(_mm256_and_si256(h, abs_mask), inf) == 0)
      _mm512_storeu_ps(d + i, _mm512_cvtph_ps(h));
    else
      to_float_scalar(s + i, d + i, 16);
  }
  to_float_avx2(s + i, d + i, n - i);
}

IPUXL_TARGET_AVX512 void from_float_avx512(const float* s, f16* d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(s + i);
    if (_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q) == 0)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i),
                          _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    else
      from_float_scalar(s + i, d + i, 16);
  }
  from_float_avx2(s + i, d + i, n - i);
}
#endif

// Elements per thread below which a conversion runs on the caller.
constexpr int64_t kGrain = 1 << 15;

}  // namespace

void to_float(const f16* src, float* dst, int64_t n) {
#if IPUXL_MULTI_ISA
  switch (isa::current()) {
    case isa::Level::AVX512: to_float_avx512(src, dst, n); return;
    case isa::Level::AVX2: to_float_avx2(src, dst, n); return;
    default: break;
  }
#endif
  to_float_scalar(src, dst, n);
}

void from_float(const float* src, f16* dst, int64_t n) {
#if IPUXL_MULTI_ISA
  switch (isa::current()) {
    case isa::Level::AVX512: from_float_avx512(src, dst, n); return;
    case isa::Level::AVX2: from_float_avx2(src, dst, n); return;
    default: break;
  }
#endif
  from_float_scalar(src, dst, n);
}

void to_float_parallel(const f16* src, float* dst, int64_t n) {
  ::ipuxl::parallel_for(n, kGrain, [&](int64_t b, int64_t e) { to_float(src + b, dst + b, e - b); });
}

void from_float_parallel(const float* src, f16* dst, int64_t n) {
  ::ipuxl::parallel_for(n, kGrain,
                        [&](int64_t b, int64_t e) { from_float(src + b, dst + b, e - b); });
}

}  // namespace half
}  // namespace ipuxl
