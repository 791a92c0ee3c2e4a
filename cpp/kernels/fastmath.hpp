// Branch-free float32 exp and tanh that compilers vectorise (Cephes
// polynomials: relative error within ~2 ulp over the whole range, with
// exact handling of +-inf and NaN). std::exp / std::tanh are scalar library
// calls, an order of magnitude slower in a loop.
//
// Everything is written as arithmetic and min/max/selects on floats so that
// the loops calling these stay free of control flow and vectorise.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ipuxl {
namespace fastmath {

inline float as_float(int32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// e^x = 2^n e^r for x already clamped to about [-88, 88]: returns e^r (its
// Cephes polynomial, r = x - n ln 2 in two parts) and n (as a float) in fn.
inline float exp_reduced(float x, float& fn) {
  // n = round(x / ln 2) by the 1.5 * 2^23 trick.
  const float magic = 12582912.0f;
  fn = (x * 1.44269504088896341f + magic) - magic;
  float r = x - fn * 0.693359375f;
  r = r - fn * -2.12194440e-4f;
  const float r2 = r * r;
  float p = 1.9875691500E-4f;
  p = p * r + 1.3981999507E-3f;
  p = p * r + 8.3334519073E-3f;
  p = p * r + 4.1665795894E-2f;
  p = p * r + 1.6666665459E-1f;
  p = p * r + 5.0000001201E-1f;
  return p * r2 + r + 1.0f;
}

// e^x. Overflows to +inf above ~88.72, underflows to 0 below ~-87.3 (the
// subnormal range is flushed, as on the IPU).
inline float exp(float x) {
  const float hi = 88.7228391f, lo = -87.3365448f;
  // Clamp with plain compares (std::fmin is a call); NaN passes through
  // every step below and comes out as NaN.
  float xc = x < lo ? lo : x;
  xc = xc > hi ? hi : xc;
  float fn;
  const float p = exp_reduced(xc, fn);
  // NaN input: p is NaN and carries it to the result; n must still be a
  // number (converting NaN to int, and shifting the negative result, is
  // undefined behaviour; UBSan reported it).
  fn = fn == fn ? fn : 0.0f;
  // 2^n as two factors so that n = 128 and n = -126 stay representable.
  int32_t n = (int32_t)fn;
  int32_t n1 = n >> 1, n2 = n - n1;
  float y = p * as_float((n1 + 127) << 23) * as_float((n2 + 127) << 23);
  y = x > hi ? INFINITY : y;
  y = x < lo ? 0.0f : y;
  return y;
}

// tanh(x): odd polynomial for |x| < 0.625, 1 - 2 / (e^{2|x|} + 1) beyond.
inline float tanh(float x) {
  float ax = std::fabs(x);
  float s = x * x;
  float small = ((((-5.70498872745E-3f * s + 2.06390887954E-2f) * s - 5.37397155531E-2f) * s +
                  1.33314422036E-1f) * s - 3.33332819422E-1f) * s * x + x;
  float e = fastmath::exp(2.0f * (ax > 44.0f ? 44.0f : ax));  // NaN stays NaN
  float big = std::copysign(1.0f - 2.0f / (e + 1.0f), x);
  return ax < 0.625f ? small : big;
}

// GELU, tanh approximation: 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715
// x^3), computed as x / (1 + e^z), z = -2u (the same function: 1 + tanh(u) =
// 2 / (1 + e^{-2u})). One exp and one division instead of tanh's two
// branches, and no cancellation in 1 + tanh(u) for negative x. The exp is
// inlined with a single 2^n scale (z is clamped to [-88, 88], where that
// is exact) and no special cases: about 30 vector operations, 25% fewer
// than fastmath::exp's general form, which matters in the GEMM epilogue.
// z > 88 (x below about -10) gives -0 (and NaN for -inf, as the tanh form);
// NaN stays NaN.
inline float gelu_tanh(float x) {
  const float a = -2.0f * 0.7978845608028654f, b = a * 0.044715f;
  float z = x * (a + b * (x * x));
  const bool tail = z > 88.0f;
  z = tail ? 88.0f : z;
  z = z < -88.0f ? -88.0f : z;
  float fn;
  const float p = exp_reduced(z, fn);
  fn = fn == fn ? fn : 0.0f;  // NaN x: p is NaN already; keep the shift defined
  const float e = p * as_float(((int32_t)fn + 127) << 23);  // n in [-127, 127]
  const float out = x / (1.0f + e);
  return tail ? x * 0.0f : out;
}

// d/dx of gelu_tanh: with s = 1 / (1 + e^z), z = -2u as above,
//   (1 + tanh u) / 2 = s,  1 - tanh^2 u = 4 s (1 - s),  1 - s = e^z s,
//   dy/dx = s + 2 x s (1 - s) u' = s (1 + 2 x (e^z s) u'),  u' = k (1 + 3 a x^2).
// e^z s = 1 - s lies in [0, 1]. Where z is clamped (|z| > 88: |x| above
// about 10) the result is the limit: 0 for negative x (the true value is
// below 1e-36 there), 1 for positive x; so no x, however large, overflows
// x u' into inf or NaN. NaN stays NaN.
inline float gelu_tanh_grad(float x) {
  const float k = 0.7978845608028654f, a = 0.044715f;
  const float x2 = x * x;
  float z = -2.0f * k * x * (1.0f + a * x2);
  const bool neg_tail = z > 88.0f, pos_tail = z < -88.0f;
  z = neg_tail ? 88.0f : z;
  z = pos_tail ? -88.0f : z;
  float fn;
  const float p = exp_reduced(z, fn);
  const float e = p * as_float(((int32_t)fn + 127) << 23);
  const float s = 1.0f / (1.0f + e);
  const float du = k * (1.0f + 3.0f * a * x2);
  float d = s * (1.0f + 2.0f * x * (e * s) * du);
  d = neg_tail ? 0.0f : d;
  return pos_tail ? 1.0f : d;
}

}  // namespace fastmath
}  // namespace ipuxl
