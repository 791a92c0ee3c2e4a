// Graphcore's 8-bit floating-point formats (poplar QUARTER), as PopXL's
// float8_143 and float8_152 store them: one byte, sign bit first.
//
//   float8_143: 4 exponent bits, 3 mantissa bits, exponent bias 8
//   float8_152: 5 exponent bits, 2 mantissa bits, exponent bias 16
//
// Every exponent code is a number (subnormals when it is 0); there are no
// infinities and a single NaN, the byte 0x80 (the code of -0). So -0 and
// negative values that round to zero are stored as +0 (0x00).
//
// Conversions carry a power-of-two scale, as PopXL's pow2scale casts:
// encode stores `x * 2^log2_scale`, decode returns `value * 2^log2_scale`.
// Encoding rounds to nearest, ties to even. NaN and +-inf give NaN; a finite
// value whose rounded magnitude exceeds the largest number (240 for 1.4.3,
// 57344 for 1.5.2) gives NaN when `nan_on_overflow`, otherwise saturates to
// the largest number of its sign.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace ipuxl {
namespace fp8 {

struct Format {
  int ebits, mbits, bias;
};
constexpr Format kF143{4, 3, 8};
constexpr Format kF152{5, 2, 16};
constexpr uint8_t kNaN = 0x80;

// The largest finite magnitude of a format.
inline double max_value(const Format& f) {
  const int emax = (1 << f.ebits) - 1 - f.bias;
  return std::ldexp(2.0 - std::ldexp(1.0, -f.mbits), emax);
}

// The value of byte b (NaN for 0x80), times 2^log2_scale.
inline double decode(uint8_t b, const Format& f, int log2_scale = 0) {
  if (b == kNaN) return std::numeric_limits<double>::quiet_NaN();
  const int e = (b >> f.mbits) & ((1 << f.ebits) - 1);
  const int m = b & ((1 << f.mbits) - 1);
  double v = (e == 0) ? std::ldexp((double)m, 1 - f.bias - f.mbits)
                      : std::ldexp((double)((1 << f.mbits) + m), e - f.bias - f.mbits);
  v = std::ldexp(v, log2_scale);
  return (b & 0x80) ? -v : v;
}

// The byte holding x * 2^log2_scale (see the header comment).
inline uint8_t encode(double x, const Format& f, int log2_scale, bool nan_on_overflow) {
  if (std::isnan(x) || std::isinf(x)) return kNaN;
  double v = std::ldexp(x, log2_scale);
  const bool neg = v < 0;
  double a = std::fabs(v);
  const int emin = 1 - f.bias;  // exponent of the smallest normal
  // Quantum (spacing of representable numbers) at a's binade.
  int e;
  std::frexp(a, &e);  // a = frac * 2^e, frac in [0.5, 1)
  int qexp = (e - 1 < emin ? emin : e - 1) - f.mbits;
  double q = std::nearbyint(std::ldexp(a, -qexp));  // current rounding mode: to nearest even
  double r = std::ldexp(q, qexp);
  const double mx = max_value(f);
  if (r > mx) {
    if (nan_on_overflow) return kNaN;
    r = mx;
  }
  if (r == 0.0) return 0x00;
  int re;
  std::frexp(r, &re);
  uint8_t code;
  if (re - 1 < emin) {  // subnormal
    code = (uint8_t)std::ldexp(r, -(emin - f.mbits));
  } else {
    const int biased = re - 1 + f.bias;
    const int man = (int)std::ldexp(r, -(re - 1 - f.mbits)) - (1 << f.mbits);
    code = (uint8_t)((biased << f.mbits) | man);
  }
  return (uint8_t)(code | (neg ? 0x80 : 0x00));
}

// 256-entry decode table (scale 0) of a format, in float.
struct DecodeTable {
  float v[256];
  explicit DecodeTable(const Format& f) {
    for (int i = 0; i < 256; ++i) v[i] = (float)decode((uint8_t)i, f, 0);
  }
};
inline const DecodeTable& table143() {
  static const DecodeTable t(kF143);
  return t;
}
inline const DecodeTable& table152() {
  static const DecodeTable t(kF152);
  return t;
}

}  // namespace fp8
}  // namespace ipuxl
