// ipuxl's Poplar: poplar::half, IEEE 754 binary16 stored in 16 bits, with
// round-to-nearest-even conversion from float (as the IPU's f32->f16).
#pragma once
#include <cstdint>
#include <cstring>
#include <ostream>

namespace poplar {

namespace ipuxl_detail {
inline std::uint16_t floatToHalfBits(float f) {
  std::uint32_t x;
  std::memcpy(&x, &f, 4);
  std::uint32_t sign = (x >> 16) & 0x8000u;
  std::uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) // inf or nan
    return static_cast<std::uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  if (absx >= 0x477ff000u) // rounds to >= 65520: overflow to inf
    return static_cast<std::uint16_t>(sign | 0x7c00u);
  if (absx < 0x38800000u) { // subnormal half (or zero)
    if (absx < 0x33000000u) return static_cast<std::uint16_t>(sign);
    std::uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    int shift = 126 - static_cast<int>(absx >> 23); // the 24-bit significand in units of 2^-24
    std::uint32_t h = mant >> shift;
    std::uint32_t rem = mant & ((1u << shift) - 1u), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  std::uint32_t h = ((absx >> 13) - (112u << 10));
  std::uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<std::uint16_t>(sign | h);
}
inline float halfBitsToFloat(std::uint16_t h) {
  std::uint32_t sign = (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
  std::uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu, x;
  if (e == 0) {
    if (m == 0) {
      x = sign;
    } else { // subnormal: normalise
      int shift = 0;
      while (!(m & 0x400u)) { m <<= 1; ++shift; }
      m &= 0x3ffu;
      x = sign | (static_cast<std::uint32_t>(113 - shift) << 23) | (m << 13);
    }
  } else if (e == 31) {
    x = sign | 0x7f800000u | (m << 13);
  } else {
    x = sign | ((e + 112u) << 23) | (m << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}
} // namespace ipuxl_detail

class half {
public:
  half() = default;
  half(float f) : bits_(ipuxl_detail::floatToHalfBits(f)) {}
  half(double d) : bits_(ipuxl_detail::floatToHalfBits(static_cast<float>(d))) {}
  half(int i) : bits_(ipuxl_detail::floatToHalfBits(static_cast<float>(i))) {}
  half(unsigned i) : bits_(ipuxl_detail::floatToHalfBits(static_cast<float>(i))) {}
  operator float() const { return ipuxl_detail::halfBitsToFloat(bits_); }
  static half fromBits(std::uint16_t b) { half h; h.bits_ = b; return h; }
  std::uint16_t bits() const { return bits_; }
  half &operator+=(half o) { return *this = half(float(*this) + float(o)); }
  half &operator-=(half o) { return *this = half(float(*this) - float(o)); }
  half &operator*=(half o) { return *this = half(float(*this) * float(o)); }
  half &operator/=(half o) { return *this = half(float(*this) / float(o)); }
  half operator-() const { return fromBits(static_cast<std::uint16_t>(bits_ ^ 0x8000u)); }

private:
  std::uint16_t bits_ = 0;
};

inline half operator+(half a, half b) { return half(float(a) + float(b)); }
inline half operator-(half a, half b) { return half(float(a) - float(b)); }
inline half operator*(half a, half b) { return half(float(a) * float(b)); }
inline half operator/(half a, half b) { return half(float(a) / float(b)); }
inline std::ostream &operator<<(std::ostream &os, half h) { return os << float(h); }

/// Conversions between float and half arrays (poplar::copyFloatToDeviceHalf etc.).
class Target;
void copyFloatToDeviceHalf(const Target &target, const float *src, void *dst, std::size_t n);
void copyDeviceHalfToFloat(const Target &target, const void *src, float *dst, std::size_t n);
void copyDoubleToDeviceHalf(const Target &target, const double *src, void *dst, std::size_t n);
void copyDeviceHalfToDouble(const Target &target, const void *src, double *dst, std::size_t n);

} // namespace poplar
