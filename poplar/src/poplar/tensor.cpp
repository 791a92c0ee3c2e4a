// ipuxl's Poplar: Tensor views (slice, reshape, dimShuffle, concat,
// broadcast, ...) as operations on runs of variable elements.
#include "impl.hpp"

#include <algorithm>
#include <numeric>
#include <poplar/exceptions.hpp>
#include <sstream>

namespace poplar {
namespace ipuxl_detail {

std::size_t product(const std::vector<std::size_t> &v) {
  std::size_t p = 1;
  for (auto d : v) p *= d;
  return p;
}

Tensor makeTensor(Type type, std::vector<std::size_t> shape, const std::vector<VarRegion> &regions) {
  auto rep = std::make_shared<TensorRep>();
  rep->type = type;
  rep->shape = std::move(shape);
  for (const auto &r : regions) {
    if (r.end == r.begin) continue;
    if (!rep->regions.empty() && rep->regions.back().var == r.var && rep->regions.back().end == r.begin)
      rep->regions.back().end = r.end;
    else
      rep->regions.push_back(r);
  }
  std::size_t at = 0;
  rep->starts.reserve(rep->regions.size());
  for (const auto &r : rep->regions) {
    rep->starts.push_back(at);
    at += r.end - r.begin;
  }
  rep->n = at;
  if (at != product(rep->shape))
    throw poplar_error("ipuxl internal: tensor regions hold " + std::to_string(at) + " elements, shape " +
                       std::to_string(product(rep->shape)));
  return Tensor(std::shared_ptr<const TensorRep>(rep));
}

void appendFlatRange(const TensorRep &t, std::size_t b, std::size_t e, std::vector<VarRegion> &out) {
  if (b >= e) return;
  auto it = std::upper_bound(t.starts.begin(), t.starts.end(), b);
  std::size_t i = static_cast<std::size_t>(it - t.starts.begin()) - 1;
  while (b < e) {
    const auto &r = t.regions[i];
    std::size_t off = b - t.starts[i];
    std::size_t len = std::min(e - b, (r.end - r.begin) - off);
    out.push_back({r.var, r.begin + off, r.begin + off + len, r.constant});
    b += len;
    ++i;
  }
}

namespace {
/// Builds the result of a general index mapping: element i of the result is
/// element src(i) (a flat index) of t.
template <class F> Tensor mapIndices(const TensorRep &t, std::vector<std::size_t> shape, F src) {
  std::size_t n = product(shape);
  std::vector<VarRegion> out;
  std::size_t ri = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t s = src(i);
    if (!(ri < t.regions.size() && s >= t.starts[ri] && s < t.starts[ri] + (t.regions[ri].end - t.regions[ri].begin))) {
      auto it = std::upper_bound(t.starts.begin(), t.starts.end(), s);
      ri = static_cast<std::size_t>(it - t.starts.begin()) - 1;
    }
    std::size_t e = t.regions[ri].begin + (s - t.starts[ri]);
    if (!out.empty() && out.back().var == t.regions[ri].var && out.back().end == e)
      ++out.back().end;
    else
      out.push_back({t.regions[ri].var, e, e + 1, t.regions[ri].constant});
  }
  return makeTensor(t.type, std::move(shape), out);
}

std::vector<std::size_t> stridesOf(const std::vector<std::size_t> &shape) {
  std::vector<std::size_t> s(shape.size(), 1);
  for (std::size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

std::string shapeStr(const std::vector<std::size_t> &s) {
  std::ostringstream os;
  os << "{";
  for (std::size_t i = 0; i < s.size(); ++i) os << (i ? "," : "") << s[i];
  os << "}";
  return os.str();
}
} // namespace

} // namespace ipuxl_detail

using namespace ipuxl_detail;

Tensor::Tensor() = default;

const TensorRep &Tensor::ipuxlRep() const {
  if (!rep_) throw poplar_error("Tensor: use of an invalid (default-constructed) tensor");
  return *rep_;
}
Type Tensor::elementType() const { return ipuxlRep().type; }
std::size_t Tensor::numElements() const { return ipuxlRep().n; }
unsigned Tensor::rank() const { return static_cast<unsigned>(ipuxlRep().shape.size()); }
std::size_t Tensor::dim(unsigned i) const {
  const auto &r = ipuxlRep();
  if (i >= r.shape.size())
    throw index_error("Tensor::dim: dimension " + std::to_string(i) + " out of range for a tensor of rank " +
                      std::to_string(r.shape.size()));
  return r.shape[i];
}
std::vector<std::size_t> Tensor::shape() const { return ipuxlRep().shape; }
std::string Tensor::shapeToString() const { return shapeStr(ipuxlRep().shape); }
std::vector<VarRegion> Tensor::ipuxlRegions() const { return ipuxlRep().regions; }

Tensor Tensor::slice(std::size_t begin, std::size_t end, unsigned d) const {
  const auto &t = ipuxlRep();
  if (d >= t.shape.size())
    throw index_error("Tensor::slice: dimension " + std::to_string(d) + " out of range for shape " + shapeStr(t.shape));
  if (begin > end || end > t.shape[d])
    throw index_error("Tensor::slice: [" + std::to_string(begin) + ", " + std::to_string(end) +
                      ") out of range for dimension " + std::to_string(d) + " of shape " + shapeStr(t.shape));
  auto shape = t.shape;
  shape[d] = end - begin;
  std::size_t outer = 1, inner = 1;
  for (unsigned i = 0; i < d; ++i) outer *= t.shape[i];
  for (std::size_t i = d + 1; i < t.shape.size(); ++i) inner *= t.shape[i];
  std::vector<VarRegion> out;
  for (std::size_t o = 0; o < outer; ++o) {
    std::size_t base = o * t.shape[d] * inner;
    appendFlatRange(t, base + begin * inner, base + end * inner, out);
  }
  return makeTensor(t.type, shape, out);
}
Tensor Tensor::slice(const Interval &r, unsigned d) const { return slice(r.begin(), r.end(), d); }
Tensor Tensor::slice(ArrayRef<std::size_t> b, ArrayRef<std::size_t> e) const {
  if (b.size() != rank() || e.size() != rank())
    throw index_error("Tensor::slice: begin and end need " + std::to_string(rank()) + " indices");
  Tensor r = *this;
  for (unsigned d = 0; d < rank(); ++d) r = r.slice(b[d], e[d], d);
  return r;
}
std::vector<Tensor> Tensor::slices(ArrayRef<Interval> intervals, unsigned d) const {
  std::vector<Tensor> out;
  for (const auto &i : intervals) out.push_back(slice(i, d));
  return out;
}
std::vector<Tensor> Tensor::slices(const std::vector<std::vector<Interval>> &intervals, unsigned d) const {
  std::vector<Tensor> out;
  for (const auto &seq : intervals) {
    std::vector<Tensor> parts;
    for (const auto &i : seq) parts.push_back(slice(i, d));
    out.push_back(concat(parts, d));
  }
  return out;
}
Tensor Tensor::operator[](std::size_t i) const {
  const auto &t = ipuxlRep();
  if (t.shape.empty()) throw index_error("Tensor::operator[]: cannot index a scalar (rank 0) tensor");
  if (i >= t.shape[0])
    throw index_error("Tensor::operator[]: index " + std::to_string(i) + " out of range for shape " + shapeStr(t.shape));
  std::size_t inner = t.n / t.shape[0];
  std::vector<VarRegion> out;
  appendFlatRange(t, i * inner, (i + 1) * inner, out);
  return makeTensor(t.type, std::vector<std::size_t>(t.shape.begin() + 1, t.shape.end()), out);
}
Tensor Tensor::index(ArrayRef<std::size_t> indices) const {
  Tensor r = *this;
  for (auto i : indices) r = r[i];
  return r;
}
Tensor Tensor::reshape(ArrayRef<std::size_t> s) const {
  const auto &t = ipuxlRep();
  std::vector<std::size_t> shape = s.vec();
  if (product(shape) != t.n)
    throw tensor_creation_error("Tensor::reshape: shape " + shapeStr(shape) + " has " + std::to_string(product(shape)) +
                                " elements, the tensor (shape " + shapeStr(t.shape) + ") has " + std::to_string(t.n));
  return makeTensor(t.type, shape, t.regions);
}
Tensor Tensor::reshapePartial(unsigned b, unsigned e, ArrayRef<std::size_t> dims) const {
  auto s = shape();
  if (b > e || e > s.size()) throw index_error("Tensor::reshapePartial: bad dimension range");
  std::vector<std::size_t> ns(s.begin(), s.begin() + b);
  ns.insert(ns.end(), dims.begin(), dims.end());
  ns.insert(ns.end(), s.begin() + e, s.end());
  return reshape(ns);
}
Tensor Tensor::flatten() const { return reshape({numElements()}); }
Tensor Tensor::flatten(unsigned b, unsigned e) const {
  auto s = shape();
  if (b >= e || e > s.size()) throw index_error("Tensor::flatten: bad dimension range");
  std::size_t p = 1;
  for (unsigned i = b; i < e; ++i) p *= s[i];
  return reshapePartial(b, e, {p});
}
Tensor Tensor::dimShuffle(ArrayRef<unsigned> perm) const {
  const auto &t = ipuxlRep();
  std::size_t r = t.shape.size();
  std::vector<bool> seen(r, false);
  if (perm.size() != r) throw index_error("Tensor::dimShuffle: permutation size does not match rank " + std::to_string(r));
  for (auto p : perm) {
    if (p >= r || seen[p]) throw index_error("Tensor::dimShuffle: invalid permutation");
    seen[p] = true;
  }
  bool identity = true;
  for (std::size_t i = 0; i < r; ++i) identity = identity && perm[i] == i;
  if (identity) return *this;
  std::vector<std::size_t> shape(r), srcStride = stridesOf(t.shape);
  for (std::size_t i = 0; i < r; ++i) shape[i] = t.shape[perm[i]];
  std::vector<std::size_t> idx(r, 0);
  std::size_t src = 0;
  // Walk the result in row-major order, tracking the source flat index.
  return mapIndices(t, shape, [&](std::size_t i) {
    if (i > 0) {
      for (std::size_t d = r; d-- > 0;) {
        ++idx[d];
        src += srcStride[perm[d]];
        if (idx[d] < shape[d]) break;
        src -= srcStride[perm[d]] * shape[d];
        idx[d] = 0;
      }
    }
    return src;
  });
}
Tensor Tensor::dimShufflePartial(ArrayRef<unsigned> source, ArrayRef<unsigned> destination) const {
  unsigned r = rank();
  if (source.size() != destination.size()) throw index_error("Tensor::dimShufflePartial: sizes differ");
  std::vector<int> perm(r, -1);
  std::vector<bool> used(r, false);
  for (std::size_t i = 0; i < source.size(); ++i) {
    perm[destination[i]] = static_cast<int>(source[i]);
    used[source[i]] = true;
  }
  unsigned next = 0;
  for (unsigned i = 0; i < r; ++i) {
    if (perm[i] >= 0) continue;
    while (used[next]) ++next;
    perm[i] = static_cast<int>(next++);
  }
  std::vector<unsigned> p(perm.begin(), perm.end());
  return dimShuffle(p);
}
Tensor Tensor::dimRoll(unsigned dimIdx, unsigned newIdx) const { return dimShufflePartial({dimIdx}, {newIdx}); }
Tensor Tensor::transpose() const {
  if (rank() != 2) throw index_error("Tensor::transpose: needs a rank-2 tensor, got shape " + shapeToString());
  return dimShuffle({1, 0});
}
Tensor Tensor::broadcast(unsigned n, unsigned d) const {
  const auto &t = ipuxlRep();
  if (d >= t.shape.size()) throw index_error("Tensor::broadcast: dimension out of range");
  std::vector<Tensor> copies(n, *this);
  if (n == 0) return slice(0, 0, d);
  return concat(copies, d);
}
Tensor Tensor::expand(ArrayRef<std::size_t> indices) const {
  auto s = shape();
  for (std::size_t k = 0; k < indices.size(); ++k) {
    if (indices[k] > s.size()) throw index_error("Tensor::expand: index out of range");
    s.insert(s.begin() + indices[k], 1);
  }
  return reshape(s);
}
Tensor Tensor::squeeze(ArrayRef<std::size_t> indices) const {
  auto s = shape();
  std::vector<std::size_t> idx = indices.vec();
  std::sort(idx.rbegin(), idx.rend());
  for (auto i : idx) {
    if (i >= s.size() || s[i] != 1) throw index_error("Tensor::squeeze: dimension " + std::to_string(i) + " is not of size 1");
    s.erase(s.begin() + i);
  }
  return reshape(s);
}
Tensor Tensor::reverse(unsigned d) const {
  const auto &t = ipuxlRep();
  if (d >= t.shape.size()) throw index_error("Tensor::reverse: dimension out of range");
  std::vector<Tensor> parts;
  for (std::size_t i = t.shape[d]; i-- > 0;) parts.push_back(slice(i, i + 1, d));
  return parts.empty() ? *this : concat(parts, d);
}
Tensor Tensor::subSample(unsigned stride, unsigned d) const {
  const auto &t = ipuxlRep();
  if (d >= t.shape.size() || stride == 0) throw index_error("Tensor::subSample: bad dimension or stride");
  std::vector<Tensor> parts;
  for (std::size_t i = 0; i < t.shape[d]; i += stride) parts.push_back(slice(i, i + 1, d));
  return parts.empty() ? slice(0, 0, d) : concat(parts, d);
}
Tensor Tensor::upsample(unsigned scale, unsigned d, UpsampleMethod) const {
  const auto &t = ipuxlRep();
  if (d >= t.shape.size()) throw index_error("Tensor::upsample: dimension out of range");
  std::vector<Tensor> parts;
  for (std::size_t i = 0; i < t.shape[d]; ++i)
    for (unsigned k = 0; k < scale; ++k) parts.push_back(slice(i, i + 1, d));
  return parts.empty() ? slice(0, 0, d) : concat(parts, d);
}
Tensor Tensor::reinterpret(const Type &type) const {
  const auto &t = ipuxlRep();
  if (type.ipuxlSize() != t.type.ipuxlSize())
    throw type_error("Tensor::reinterpret: " + t.type.toString() + " and " + type.toString() +
                     " differ in size; ipuxl reinterprets between types of one size only");
  return makeTensor(type, t.shape, t.regions);
}
bool Tensor::containsConstant() const {
  for (const auto &r : ipuxlRep().regions)
    if (r.constant) return true;
  return false;
}
bool Tensor::isContiguous() const { return ipuxlRep().regions.size() <= 1; }
bool Tensor::intersectsWith(const Tensor &o) const {
  for (const auto &a : ipuxlRep().regions)
    for (const auto &b : o.ipuxlRep().regions)
      if (a.var == b.var && a.begin < b.end && b.begin < a.end) return true;
  return false;
}
bool Tensor::containsAliases() const {
  auto rs = ipuxlRep().regions;
  std::sort(rs.begin(), rs.end(), [](const VarRegion &a, const VarRegion &b) {
    return a.var < b.var || (a.var == b.var && a.begin < b.begin);
  });
  for (std::size_t i = 1; i < rs.size(); ++i)
    if (rs[i].var == rs[i - 1].var && rs[i].begin < rs[i - 1].end) return true;
  return false;
}
std::vector<Interval> Tensor::getContiguousRegions() const {
  std::vector<Interval> out;
  const auto &t = ipuxlRep();
  for (std::size_t i = 0; i < t.regions.size(); ++i)
    out.emplace_back(t.starts[i], t.starts[i] + (t.regions[i].end - t.regions[i].begin));
  return out;
}
bool Tensor::operator==(const Tensor &o) const {
  const auto &a = ipuxlRep(), &b = o.ipuxlRep();
  if (a.type != b.type || a.shape != b.shape || a.regions.size() != b.regions.size()) return false;
  for (std::size_t i = 0; i < a.regions.size(); ++i)
    if (a.regions[i].var != b.regions[i].var || a.regions[i].begin != b.regions[i].begin ||
        a.regions[i].end != b.regions[i].end)
      return false;
  return true;
}

Tensor concat(ArrayRef<Tensor> ts, unsigned d) {
  if (ts.empty()) throw tensor_creation_error("concat: no tensors given");
  const auto &first = ts[0].ipuxlRep();
  if (d >= first.shape.size()) throw index_error("concat: dimension " + std::to_string(d) + " out of range");
  auto shape = first.shape;
  shape[d] = 0;
  for (const auto &t : ts) {
    const auto &r = t.ipuxlRep();
    if (r.type != first.type) throw tensor_creation_error("concat: element types differ (" + first.type.toString() + ", " + r.type.toString() + ")");
    if (r.shape.size() != first.shape.size()) throw tensor_creation_error("concat: ranks differ");
    for (std::size_t i = 0; i < r.shape.size(); ++i)
      if (i != d && r.shape[i] != first.shape[i])
        throw tensor_creation_error("concat: shapes " + shapeStr(first.shape) + " and " + shapeStr(r.shape) +
                                    " differ outside dimension " + std::to_string(d));
    shape[d] += r.shape[d];
  }
  std::size_t outer = 1;
  for (unsigned i = 0; i < d; ++i) outer *= shape[i];
  std::vector<VarRegion> out;
  for (std::size_t o = 0; o < outer; ++o)
    for (const auto &t : ts) {
      const auto &r = t.ipuxlRep();
      std::size_t chunk = outer ? r.n / outer : 0;
      appendFlatRange(r, o * chunk, (o + 1) * chunk, out);
    }
  return makeTensor(first.type, shape, out);
}
Tensor concat(const Tensor &a, const Tensor &b, unsigned d) { return concat(std::vector<Tensor>{a, b}, d); }
Tensor append(const Tensor &a, const Tensor &b, unsigned d) { return concat(a, b.expand({d}), d); }

std::ostream &operator<<(std::ostream &os, const Tensor &t) {
  os << "Tensor(" << t.elementType() << ", " << t.shapeToString() << ")";
  return os;
}

} // namespace poplar
