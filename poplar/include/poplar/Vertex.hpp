// ipuxl's Poplar: the codelet API. Vertex, MultiVertex and SupervisorVertex
// and the field types Input, Output, InOut, Vector, VectorList, compiled for
// the host (as the IPUModel does). A field points at the data the runtime
// laid out for it; compute() reads and writes through it.
#pragma once
#include <cstddef>
#include <poplar/HalfFloat.hpp>
#include <poplar/VertexRegistry.hpp>
#include <type_traits>
#include <utility>
#include <vector>

namespace poplar {

enum class VectorLayout { ONE_PTR, SPAN, SCALED_PTR32, SCALED_PTR64, SCALED_PTR128, SHORT_SPAN, COMPACT_PTR };
enum class VectorListLayout { COMPACT_PTR, DELTAN, DELTANELEMENTS, SCALED_PTR64, ONE_PTR };
static constexpr auto ONE_PTR = VectorLayout::ONE_PTR;
static constexpr auto SPAN = VectorLayout::SPAN;
static constexpr auto SCALED_PTR32 = VectorLayout::SCALED_PTR32;
static constexpr auto SCALED_PTR64 = VectorLayout::SCALED_PTR64;
static constexpr auto SHORT_SPAN = VectorLayout::SHORT_SPAN;
static constexpr auto COMPACT_PTR = VectorLayout::COMPACT_PTR;
static constexpr auto DELTAN = VectorListLayout::DELTAN;
static constexpr auto DELTANELEMENTS = VectorListLayout::DELTANELEMENTS;
static constexpr auto COMPACT_DELTAN = VectorListLayout::COMPACT_PTR;

/// Marks a vertex whose compute() is in IPU assembly (as in the SDK); on the
/// host the C++ compute() runs.
#define IS_EXTERNAL_CODELET(X) static const bool isExternalCodelet = (X)

class Vertex {
public:
  static constexpr bool isExternalCodelet = false;
};
class MultiVertex {
public:
  static constexpr bool isExternalCodelet = false;
  static unsigned numWorkers() { return 6; }
};
class SupervisorVertex {
public:
  static constexpr bool isExternalCodelet = false;
};

/// A contiguous run of elements (what a Vector edge and a VectorList entry see).
template <class T> class ipuxlSpan {
public:
  ipuxlSpan() = default;
  ipuxlSpan(T *p, std::size_t n) : p_(p), n_(n) {}
  T &operator[](std::size_t i) const { return p_[i]; }
  std::size_t size() const { return n_; }
  T *begin() const { return p_; }
  T *end() const { return p_ + n_; }
  T *data() const { return p_; }
  const ipuxlSpan *operator->() const { return this; }
  T &operator*() const { return *p_; }
  operator T *() const { return p_; }

protected:
  T *p_ = nullptr;
  std::size_t n_ = 0;
};

template <class T, VectorLayout L = VectorLayout::SPAN, unsigned Align = alignof(T), bool Interleaved = false>
class Vector;
template <class T, VectorListLayout L = VectorListLayout::DELTAN, unsigned Align = alignof(T), bool Interleaved = false>
class VectorList;

namespace ipuxl_detail {
template <class T> struct IsVector : std::false_type {};
template <class T, VectorLayout L, unsigned A, bool I> struct IsVector<Vector<T, L, A, I>> : std::true_type {
  using elem = T;
};
template <class T> struct IsVectorList : std::false_type {};
template <class T, VectorListLayout L, unsigned A, bool I>
struct IsVectorList<VectorList<T, L, A, I>> : std::true_type {
  using elem = T;
};
template <class T> struct ElemCode { static constexpr int value = 0; };
template <> struct ElemCode<float> { static constexpr int value = 1; };
template <> struct ElemCode<half> { static constexpr int value = 2; };
template <> struct ElemCode<int> { static constexpr int value = 3; };
template <> struct ElemCode<unsigned> { static constexpr int value = 4; };
template <> struct ElemCode<short> { static constexpr int value = 5; };
template <> struct ElemCode<unsigned short> { static constexpr int value = 6; };
template <> struct ElemCode<char> { static constexpr int value = 7; };
template <> struct ElemCode<signed char> { static constexpr int value = 8; };
template <> struct ElemCode<unsigned char> { static constexpr int value = 9; };
template <> struct ElemCode<bool> { static constexpr int value = 10; };
template <> struct ElemCode<long long> { static constexpr int value = 11; };
template <> struct ElemCode<unsigned long long> { static constexpr int value = 12; };
template <class T> struct ElemCode<const T> : ElemCode<T> {};

/// Edge fields of one direction: scalar, vector or vector list of T.
template <class T, bool Writable, class Enable = void> class Edge {
public: // scalar edge
  using elem_type = T;
  using ref = typename std::conditional<Writable, T &, const T &>::type;
  using ptr = typename std::conditional<Writable, T *, const T *>::type;
  static constexpr int kind = FK_EDGE_SCALAR;
  Edge() = default;
  ref operator*() const { return *p_; }
  ptr operator->() const { return p_; }
  operator ref() const { return *p_; }
  ref operator[](std::size_t i) const { return p_[i]; }
  template <class U, bool W = Writable, class = typename std::enable_if<W>::type>
  const Edge &operator=(const U &v) const { *p_ = v; return *this; }
  void ipuxlBind(const FieldBinding &b) { p_ = reinterpret_cast<T *>(b.spans.at(0).data); }

private:
  T *p_ = nullptr;
};

template <class V, bool Writable>
class Edge<V, Writable, typename std::enable_if<IsVector<V>::value>::type>
    : public ipuxlSpan<typename std::conditional<Writable, typename IsVector<V>::elem,
                                                 const typename IsVector<V>::elem>::type> {
public:
  using elem_type = typename IsVector<V>::elem;
  static constexpr int kind = FK_EDGE_VECTOR;
  using base = ipuxlSpan<typename std::conditional<Writable, elem_type, const elem_type>::type>;
  const base *operator->() const { return this; }
  void ipuxlBind(const FieldBinding &b) {
    this->p_ = reinterpret_cast<elem_type *>(b.spans.at(0).data);
    this->n_ = b.spans.at(0).n;
  }
};

template <class V, bool Writable>
class Edge<V, Writable, typename std::enable_if<IsVectorList<V>::value>::type> {
public:
  using elem_type = typename IsVectorList<V>::elem;
  using span = ipuxlSpan<typename std::conditional<Writable, elem_type, const elem_type>::type>;
  static constexpr int kind = FK_EDGE_VECTORLIST;
  span operator[](std::size_t i) const { return spans_[i]; }
  std::size_t size() const { return spans_.size(); }
  const span *begin() const { return spans_.data(); }
  const span *end() const { return spans_.data() + spans_.size(); }
  const Edge *operator->() const { return this; }
  void ipuxlBind(const FieldBinding &b) {
    spans_.clear();
    for (auto &s : b.spans) spans_.emplace_back(reinterpret_cast<elem_type *>(s.data), s.n);
  }

private:
  std::vector<span> spans_;
};
} // namespace ipuxl_detail

template <class T> class Input : public ipuxl_detail::Edge<T, false> {
public:
  static constexpr int dir = ipuxl_detail::FD_IN;
};
template <class T> class Output : public ipuxl_detail::Edge<T, true> {
public:
  static constexpr int dir = ipuxl_detail::FD_OUT;
  using ipuxl_detail::Edge<T, true>::operator=;
};
template <class T> class InOut : public ipuxl_detail::Edge<T, true> {
public:
  static constexpr int dir = ipuxl_detail::FD_INOUT;
  using ipuxl_detail::Edge<T, true>::operator=;
};

/// A vertex member vector: of values (set with setInitialValue) or of edges
/// (Vector<Input<Vector<float>>>, connected element by element).
template <class T, VectorLayout L, unsigned Align, bool Interleaved> class Vector {
public:
  using value_type = T;
  T &operator[](std::size_t i) { return p_[i]; }
  const T &operator[](std::size_t i) const { return p_[i]; }
  std::size_t size() const { return n_; }
  T *begin() { return p_; }
  T *end() { return p_ + n_; }
  const T *begin() const { return p_; }
  const T *end() const { return p_ + n_; }
  T *data() { return p_; }
  const T *data() const { return p_; }
  void ipuxlBindValues(const ipuxl_detail::FieldBinding &b) {
    p_ = reinterpret_cast<T *>(b.spans.at(0).data);
    n_ = b.spans.at(0).n;
  }
  void ipuxlBindEdges(const ipuxl_detail::FieldBinding &b) {
    own_.assign(b.spans.size(), T());
    for (std::size_t i = 0; i < b.spans.size(); ++i) {
      ipuxl_detail::FieldBinding one;
      one.spans.push_back(b.spans[i]);
      own_[i].ipuxlBind(one);
    }
    p_ = own_.data();
    n_ = own_.size();
  }

private:
  std::vector<T> own_;
  T *p_ = nullptr;
  std::size_t n_ = 0;
};

template <class T, VectorListLayout L, unsigned Align, bool Interleaved> class VectorList {};

namespace ipuxl_detail {
template <class M> struct IsEdge : std::false_type {};
template <class T> struct IsEdge<Input<T>> : std::true_type {};
template <class T> struct IsEdge<Output<T>> : std::true_type {};
template <class T> struct IsEdge<InOut<T>> : std::true_type {};

template <class M, class Enable = void> struct FieldTraits {
  static void fill(FieldInfo &f) { f.kind = FK_OPAQUE; }
  template <class C> static void bind(C *, M C::*, const FieldBinding &) {}
};
template <class M> struct FieldTraits<M, typename std::enable_if<IsEdge<M>::value>::type> {
  static void fill(FieldInfo &f) {
    f.kind = M::kind;
    f.dir = M::dir;
    f.elemCode = ElemCode<typename M::elem_type>::value;
  }
  template <class C> static void bind(C *o, M C::*p, const FieldBinding &b) { (o->*p).ipuxlBind(b); }
};
template <class M>
struct FieldTraits<M, typename std::enable_if<std::is_arithmetic<M>::value || std::is_same<M, half>::value>::type> {
  static void fill(FieldInfo &f) {
    f.kind = FK_VALUE_SCALAR;
    f.elemCode = ElemCode<M>::value;
  }
  template <class C> static void bind(C *o, M C::*p, const FieldBinding &b) {
    o->*p = *reinterpret_cast<const M *>(b.spans.at(0).data);
  }
};
template <class M> struct FieldTraits<M, typename std::enable_if<IsVector<M>::value>::type> {
  using E = typename IsVector<M>::elem;
  static void fill(FieldInfo &f) {
    if (IsEdge<E>::value) {
      FieldInfo inner;
      FieldTraits<E>::fill(inner);
      f.kind = inner.kind == FK_EDGE_VECTOR ? FK_VECTOR_OF_EDGE_VECTORS
             : inner.kind == FK_EDGE_SCALAR ? FK_VECTOR_OF_EDGE_SCALARS : FK_OPAQUE;
      f.dir = inner.dir;
      f.elemCode = inner.elemCode;
    } else {
      f.kind = ElemCode<E>::value ? FK_VALUE_VECTOR : FK_OPAQUE;
      f.elemCode = ElemCode<E>::value;
    }
  }
  template <class C> static void bind(C *o, M C::*p, const FieldBinding &b) { bindImpl(o->*p, b, IsEdge<E>()); }
  static void bindImpl(M &v, const FieldBinding &b, std::true_type) { v.ipuxlBindEdges(b); }
  static void bindImpl(M &v, const FieldBinding &b, std::false_type) { v.ipuxlBindValues(b); }
};

template <class C, class M> FieldInfo field(const char *name, M C::*p) {
  FieldInfo f;
  f.name = name;
  FieldTraits<M>::fill(f);
  f.bind = [p](void *o, const FieldBinding &b) { FieldTraits<M>::bind(static_cast<C *>(o), p, b); };
  return f;
}

template <class C> auto callCompute(C *c, unsigned w, int) -> decltype(c->compute(w)) { return c->compute(w); }
template <class C> auto callCompute(C *c, unsigned, long) -> decltype(c->compute()) { return c->compute(); }

template <class C> VertexTypeInfo describe(const char *name, std::vector<FieldInfo> fields) {
  VertexTypeInfo t;
  t.name = name;
  t.fields = std::move(fields);
  t.create = []() -> void * { return new C(); };
  t.destroy = [](void *o) { delete static_cast<C *>(o); };
  t.compute = [](void *o, unsigned w) -> bool { return static_cast<bool>(callCompute(static_cast<C *>(o), w, 0)); };
  t.multiVertex = std::is_base_of<MultiVertex, C>::value;
  t.supervisor = std::is_base_of<SupervisorVertex, C>::value;
  return t;
}
} // namespace ipuxl_detail

} // namespace poplar
