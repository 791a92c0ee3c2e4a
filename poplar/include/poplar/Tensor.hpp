// ipuxl's Poplar: Tensor, a view over graph variables. A tensor is its
// shape, its element type and, in row-major order, the runs of variable
// elements it covers; slicing, reshaping, shuffling and concatenation make
// new views of the same variables (no data moves until a program copies).
#pragma once
#include <cstddef>
#include <memory>
#include <ostream>
#include <poplar/ArrayRef.hpp>
#include <poplar/Interval.hpp>
#include <poplar/Type.hpp>
#include <string>
#include <vector>

namespace poplar {

namespace ipuxl_detail {
struct TensorRep;
/// A run of consecutive elements [begin, end) of one variable of a graph.
struct VarRegion {
  unsigned var;
  std::size_t begin, end;
  bool constant; // the variable is a constant (Graph::addConstant)
};
} // namespace ipuxl_detail

enum class UpsampleMethod { REPEAT };

class Tensor {
public:
  Tensor();
  Tensor(const Tensor &) = default;
  Tensor &operator=(const Tensor &) = default;
  Tensor(Tensor &&) = default;
  Tensor &operator=(Tensor &&) = default;
  ~Tensor() = default;

  bool valid() const { return static_cast<bool>(rep_); }
  Type elementType() const;
  std::size_t numElements() const;
  unsigned rank() const;
  std::size_t dim(unsigned i) const;
  std::vector<std::size_t> shape() const;
  std::string shapeToString() const;

  Tensor operator[](std::size_t i) const;
  Tensor index(ArrayRef<std::size_t> indices) const;
  Tensor slice(std::size_t begin, std::size_t end, unsigned dimension = 0) const;
  Tensor slice(const Interval &region, unsigned dimension = 0) const;
  Tensor slice(ArrayRef<std::size_t> begin, ArrayRef<std::size_t> end) const;
  std::vector<Tensor> slices(ArrayRef<Interval> intervals, unsigned dimension = 0) const;
  std::vector<Tensor> slices(const std::vector<std::vector<Interval>> &intervals,
                             unsigned dimension = 0) const;
  Tensor reshape(ArrayRef<std::size_t> shape) const;
  Tensor reshapePartial(unsigned beginIndex, unsigned endIndex, ArrayRef<std::size_t> newDims) const;
  Tensor flatten() const;
  Tensor flatten(unsigned dimBegin, unsigned dimEnd) const;
  Tensor dimShuffle(ArrayRef<unsigned> permutation) const;
  Tensor dimShufflePartial(ArrayRef<unsigned> source, ArrayRef<unsigned> destination) const;
  Tensor dimRoll(unsigned dimIdx, unsigned newIdx = 0) const;
  Tensor transpose() const;
  Tensor broadcast(unsigned n, unsigned dim) const;
  Tensor expand(ArrayRef<std::size_t> indices) const;
  Tensor squeeze(ArrayRef<std::size_t> indices) const;
  Tensor reverse(unsigned dimension) const;
  Tensor subSample(unsigned stride, unsigned dimension) const;
  Tensor upsample(unsigned scale, unsigned dimension, UpsampleMethod method) const;
  /// The same elements seen as `type` (which must have the same size).
  Tensor reinterpret(const Type &type) const;

  bool isContiguous() const;
  bool containsConstant() const;
  bool intersectsWith(const Tensor &other) const;
  bool containsAliases() const;
  std::vector<Interval> getContiguousRegions() const;
  /// The variable regions, in order (ipuxl: each region names its variable).
  std::vector<ipuxl_detail::VarRegion> ipuxlRegions() const;

  bool operator==(const Tensor &o) const;
  bool operator!=(const Tensor &o) const { return !(*this == o); }

  // ipuxl internals
  explicit Tensor(std::shared_ptr<const ipuxl_detail::TensorRep> rep) : rep_(std::move(rep)) {}
  const ipuxl_detail::TensorRep &ipuxlRep() const;

private:
  std::shared_ptr<const ipuxl_detail::TensorRep> rep_;
};

Tensor concat(ArrayRef<Tensor> ts, unsigned dimension = 0);
Tensor concat(const Tensor &a, const Tensor &b, unsigned dimension = 0);
Tensor append(const Tensor &a, const Tensor &b, unsigned dimension);
std::ostream &operator<<(std::ostream &os, const Tensor &t);

} // namespace poplar
