// Element types shared by the Python frontend and the C++ core.
//
// The numeric codes are part of the Python<->C++ contract: the bindings
// export this enum (ipuxl._core.DType, named by dtype_name) and
// ipuxl/dtypes.py reads each dtype's code from there.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace ipuxl {

enum class DType : int {
  Bool = 0,
  Int8 = 1,
  UInt8 = 2,
  Int16 = 3,
  UInt16 = 4,
  Int32 = 5,
  UInt32 = 6,
  Int64 = 7,
  UInt64 = 8,
  Float16 = 9,
  Float32 = 10,
  Float64 = 11,
  // Graphcore's 8-bit floats (popxl.float8_143 / float8_152), one byte each;
  // conversions in fp8.hpp. Only data movement, host IO, the pow2-scaled
  // casts and the pow2-scaled matmul/conv read them: arithmetic kernels
  // dispatch on the types above and reject these.
  Float8_143 = 12,
  Float8_152 = 13,
};

constexpr int kNumDTypes = 14;

inline size_t dtype_size(DType t) {
  switch (t) {
    case DType::Bool: case DType::Int8: case DType::UInt8: return 1;
    case DType::Float8_143: case DType::Float8_152: return 1;
    case DType::Int16: case DType::UInt16: case DType::Float16: return 2;
    case DType::Int32: case DType::UInt32: case DType::Float32: return 4;
    case DType::Int64: case DType::UInt64: case DType::Float64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t);

inline bool dtype_is_float(DType t) {
  return t == DType::Float16 || t == DType::Float32 || t == DType::Float64;
}
inline bool dtype_is_fp8(DType t) { return t == DType::Float8_143 || t == DType::Float8_152; }
inline bool dtype_is_valid(int code) { return code >= 0 && code < kNumDTypes; }

// IEEE binary16 stored as bits. Arithmetic happens in float: every operator
// converts to float (implicitly), so templated kernels work unchanged and
// round once per op, which matches IPU float16 ops computed at fp32 internally.
struct f16 {
  uint16_t bits = 0;
  f16() = default;
  f16(float f) : bits(from_float(f)) {}  // NOLINT: implicit on purpose
  f16(double d) : bits(from_float(static_cast<float>(d))) {}  // NOLINT
  f16(int i) : bits(from_float(static_cast<float>(i))) {}  // NOLINT
  operator float() const { return to_float(bits); }  // NOLINT

  static float to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t out;
    if (exp == 0) {
      if (man == 0) {
        out = sign;
      } else {  // subnormal: normalise
        int e = -1;
        do { ++e; man <<= 1; } while ((man & 0x400u) == 0);
        out = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3ffu) << 13);
      }
    } else if (exp == 31) {
      out = sign | 0x7f800000u | (man << 13);
    } else {
      out = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    std::memcpy(&f, &out, 4);
    return f;
  }

  // Round to nearest even, with overflow to inf and NaN kept quiet.
  static uint16_t from_float(float f) {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) {  // inf or nan
      return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
    }
    if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // overflow
    if (absx < 0x38800000u) {  // subnormal or zero in half
      if (absx < 0x33000000u) return (uint16_t)sign;  // < 2^-25 rounds to 0
      uint32_t e = absx >> 23;
      uint32_t m = (absx & 0x7fffffu) | 0x800000u;
      int shift = 126 - (int)e;  // 113 - e + 13
      uint32_t half_m = m >> shift;
      uint32_t rem = m & ((1u << shift) - 1);
      uint32_t halfway = 1u << (shift - 1);
      if (rem > halfway || (rem == halfway && (half_m & 1u))) ++half_m;
      return (uint16_t)(sign | half_m);
    }
    uint32_t r = absx + 0xc8000fffu + ((absx >> 13) & 1u);  // rebias and round
    return (uint16_t)(sign | (r >> 13));
  }
};

// Computation type for a storage type: float16 computes in float.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<f16> { using type = float; };
template <> struct compute_type<bool> { using type = bool; };
template <class T> using ct_t = typename compute_type<T>::type;

template <class T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::Int8; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::Int16; };
template <> struct dtype_of<uint16_t> { static constexpr DType value = DType::UInt16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<uint32_t> { static constexpr DType value = DType::UInt32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<uint64_t> { static constexpr DType value = DType::UInt64; };
template <> struct dtype_of<f16> { static constexpr DType value = DType::Float16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };

}  // namespace ipuxl

// Dispatch helpers: run BODY with `scalar_t` bound to the C++ type of DT.
// Unsupported types fall to the caller's default via the returned bool.
#define IPUXL_CASE(DT, CT, ...) \
  case ::ipuxl::DType::DT: { using scalar_t = CT; __VA_ARGS__; return true; }

#define IPUXL_DISPATCH_FLOAT(DTYPE, ...)                          \
  [&]() -> bool {                                                 \
    switch (DTYPE) {                                              \
      IPUXL_CASE(Float16, ::ipuxl::f16, __VA_ARGS__)              \
      IPUXL_CASE(Float32, float, __VA_ARGS__)                     \
      IPUXL_CASE(Float64, double, __VA_ARGS__)                    \
      default: return false;                                      \
    }                                                             \
  }()

#define IPUXL_DISPATCH_INT(DTYPE, ...)                            \
  [&]() -> bool {                                                 \
    switch (DTYPE) {                                              \
      IPUXL_CASE(Int8, int8_t, __VA_ARGS__)                       \
      IPUXL_CASE(UInt8, uint8_t, __VA_ARGS__)                     \
      IPUXL_CASE(Int16, int16_t, __VA_ARGS__)                     \
      IPUXL_CASE(UInt16, uint16_t, __VA_ARGS__)                   \
      IPUXL_CASE(Int32, int32_t, __VA_ARGS__)                     \
      IPUXL_CASE(UInt32, uint32_t, __VA_ARGS__)                   \
      IPUXL_CASE(Int64, int64_t, __VA_ARGS__)                     \
      IPUXL_CASE(UInt64, uint64_t, __VA_ARGS__)                   \
      default: return false;                                      \
    }                                                             \
  }()

#define IPUXL_DISPATCH_NUMERIC(DTYPE, ...) \
  (IPUXL_DISPATCH_FLOAT(DTYPE, __VA_ARGS__) || IPUXL_DISPATCH_INT(DTYPE, __VA_ARGS__))

#define IPUXL_DISPATCH_ALL(DTYPE, ...)                                        \
  (IPUXL_DISPATCH_NUMERIC(DTYPE, __VA_ARGS__) ||                              \
   [&]() -> bool {                                                            \
     switch (DTYPE) { IPUXL_CASE(Bool, bool, __VA_ARGS__) default: return false; } \
   }())
