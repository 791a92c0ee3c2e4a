// ipuxl's Poplar: Interval, a half-open range [begin, end) of flat element indices.
#pragma once
#include <cstddef>
#include <ostream>

namespace poplar {

template <class T> class GenericInterval {
public:
  GenericInterval() = default;
  GenericInterval(T begin, T end) : begin_(begin), end_(end) {}
  T begin() const { return begin_; }
  T end() const { return end_; }
  T size() const { return end_ - begin_; }
  bool operator==(const GenericInterval &o) const { return begin_ == o.begin_ && end_ == o.end_; }
  bool operator!=(const GenericInterval &o) const { return !(*this == o); }
  bool operator<(const GenericInterval &o) const {
    return begin_ < o.begin_ || (begin_ == o.begin_ && end_ < o.end_);
  }

private:
  T begin_ = 0, end_ = 0;
};

using Interval = GenericInterval<std::size_t>;

inline std::ostream &operator<<(std::ostream &os, const Interval &i) {
  return os << "[" << i.begin() << ", " << i.end() << ")";
}

} // namespace poplar
