// ipuxl's Poplar: ArrayRef, a non-owning view of a contiguous sequence
// (std::vector, std::array, initializer list or pointer + size), as in the SDK.
#pragma once
#include <array>
#include <cstddef>
#include <initializer_list>
#include <vector>

namespace poplar {

template <class T> class ArrayRef {
public:
  using value_type = T;
  using const_iterator = const T *;
  ArrayRef() = default;
  ArrayRef(const T *p, std::size_t n) : p_(p), n_(n) {}
  ArrayRef(const std::vector<T> &v) : p_(v.data()), n_(v.size()) {}
  template <std::size_t N> ArrayRef(const std::array<T, N> &a) : p_(a.data()), n_(N) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  // The list lives until the end of the full expression, as long as the call.
  ArrayRef(std::initializer_list<T> l) : p_(l.begin()), n_(l.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  const T *data() const { return p_; }
  std::size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  const T &operator[](std::size_t i) const { return p_[i]; }
  const T &front() const { return p_[0]; }
  const T &back() const { return p_[n_ - 1]; }
  const T *begin() const { return p_; }
  const T *end() const { return p_ + n_; }
  std::vector<T> vec() const { return std::vector<T>(p_, p_ + n_); }
  operator std::vector<T>() const { return vec(); }

private:
  const T *p_ = nullptr;
  std::size_t n_ = 0;
};

template <class T> bool operator==(ArrayRef<T> a, ArrayRef<T> b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i])) return false;
  return true;
}

} // namespace poplar
