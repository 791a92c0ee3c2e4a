// ipuxl's Poplar: element types (poplar::FLOAT, HALF, INT, ...).
// Headers of ipuxl's Poplar are C++11, as the tutorials build with -std=c++11.
#pragma once
#include <cstddef>
#include <ostream>
#include <string>

namespace poplar {

namespace ipuxl_detail {
/// Element type codes shared by Type and the vertex field machinery.
enum TypeCode : int {
  T_NONE = 0, T_FLOAT, T_HALF, T_INT, T_UNSIGNED_INT, T_SHORT, T_UNSIGNED_SHORT, T_CHAR,
  T_SIGNED_CHAR, T_UNSIGNED_CHAR, T_BOOL, T_LONGLONG, T_UNSIGNED_LONGLONG, T_QUARTER
};
std::size_t typeCodeSize(int code);
const char *typeCodeName(int code);
} // namespace ipuxl_detail

class Type {
public:
  Type() = default;
  explicit Type(int code) : code_(code) {}
  std::string toString() const { return ipuxl_detail::typeCodeName(code_); }
  bool operator==(const Type &o) const { return code_ == o.code_; }
  bool operator!=(const Type &o) const { return code_ != o.code_; }
  bool operator<(const Type &o) const { return code_ < o.code_; }
  /// ipuxl: the element size in bytes.
  std::size_t ipuxlSize() const { return ipuxl_detail::typeCodeSize(code_); }
  int ipuxlCode() const { return code_; }
  bool isFloatingPoint() const { return code_ == ipuxl_detail::T_FLOAT || code_ == ipuxl_detail::T_HALF; }

private:
  int code_ = ipuxl_detail::T_NONE;
};

inline std::ostream &operator<<(std::ostream &os, const Type &t) { return os << t.toString(); }

extern const Type BOOL;
extern const Type CHAR;
extern const Type UNSIGNED_CHAR;
extern const Type SIGNED_CHAR;
extern const Type UNSIGNED_SHORT;
extern const Type SHORT;
extern const Type UNSIGNED_INT;
extern const Type INT;
extern const Type UNSIGNED_LONG;
extern const Type LONG;
extern const Type UNSIGNED_LONGLONG;
extern const Type LONGLONG;
extern const Type HALF;
extern const Type FLOAT;

class half;
/// The poplar Type of a C++ element type (equivalentDeviceType<T>().value).
template <class T> struct equivalent_device_type;
#define POPLAR_IPUXL_EQUIV(CT, PT)                                                                 \
  template <> struct equivalent_device_type<CT> {                                                  \
    const Type &value = PT;                                                                        \
  };
POPLAR_IPUXL_EQUIV(float, FLOAT)
POPLAR_IPUXL_EQUIV(half, HALF)
POPLAR_IPUXL_EQUIV(int, INT)
POPLAR_IPUXL_EQUIV(unsigned, UNSIGNED_INT)
POPLAR_IPUXL_EQUIV(short, SHORT)
POPLAR_IPUXL_EQUIV(unsigned short, UNSIGNED_SHORT)
POPLAR_IPUXL_EQUIV(char, CHAR)
POPLAR_IPUXL_EQUIV(signed char, SIGNED_CHAR)
POPLAR_IPUXL_EQUIV(unsigned char, UNSIGNED_CHAR)
POPLAR_IPUXL_EQUIV(bool, BOOL)
POPLAR_IPUXL_EQUIV(long long, LONGLONG)
POPLAR_IPUXL_EQUIV(unsigned long long, UNSIGNED_LONGLONG)
POPLAR_IPUXL_EQUIV(long, LONGLONG)
POPLAR_IPUXL_EQUIV(unsigned long, UNSIGNED_LONGLONG)
#undef POPLAR_IPUXL_EQUIV
template <class T> struct equivalent_device_type<const T> : equivalent_device_type<T> {};

} // namespace poplar
