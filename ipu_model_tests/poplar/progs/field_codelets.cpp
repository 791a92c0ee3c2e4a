// Codelets with every field kind, half, MultiVertex workers, templates,
// namespaces and IPU-only code under __IPU__.
#include <poplar/HalfFloat.hpp>
#include <poplar/Vertex.hpp>

using namespace poplar;

// Scalar edges and a scalar parameter: out = a * k + b
class ScalarEdges : public Vertex {
public:
  Input<float> a;
  Input<float> b;
  Output<float> out;
  unsigned k;
  bool compute() {
    *out = a * static_cast<float>(k) + *b;
    return true;
  }
};

// InOut vector of int plus a vector of value parameters: x[i] += add[i % add.size()]
class InOutInts : public Vertex {
public:
  InOut<Vector<int>> x;
  Vector<int> add;
  bool compute() {
    for (unsigned i = 0; i < x.size(); ++i) x[i] += add[i % add.size()];
    return true;
  }
};

// A vector of input vectors: out[i] = sum over j of ins[j][i]
class SumRows : public Vertex {
public:
  Vector<Input<Vector<float>>> ins;
  Output<Vector<float>> out;
  bool compute() {
    for (unsigned i = 0; i < out.size(); ++i) {
      float s = 0;
      for (unsigned j = 0; j < ins.size(); ++j) s += ins[j][i];
      out[i] = s;
    }
    return true;
  }
};

// A VectorList: out[j] = max of list entry j (entries of different sizes)
class ListMax : public Vertex {
public:
  Input<VectorList<float, VectorListLayout::DELTAN>> in;
  Output<Vector<float>> out;
  bool compute() {
    for (unsigned j = 0; j < in.size(); ++j) {
      float m = in[j][0];
      for (unsigned i = 1; i < in[j].size(); ++i) m = in[j][i] > m ? in[j][i] : m;
      out[j] = m;
    }
    return true;
  }
};

// half in and out: y = x * 0.5 + 1 computed in half
class HalfAffine : public Vertex {
public:
  Input<Vector<half>> x;
  Output<Vector<half>> y;
  bool compute() {
    for (unsigned i = 0; i < x.size(); ++i) y[i] = x[i] * half(0.5f) + half(1.0f);
    return true;
  }
};

// MultiVertex: worker w handles elements w, w + numWorkers(), ...; count[w] records it ran
class Workers : public MultiVertex {
public:
  Input<Vector<float>> in;
  Output<Vector<float>> out;
  Output<Vector<unsigned>> ran;
  bool compute(unsigned workerId) {
    for (unsigned i = workerId; i < in.size(); i += numWorkers()) out[i] = in[i] * 2 + static_cast<float>(workerId) * 0;
    ran[workerId] = workerId + 100;
    return true;
  }
};

template <typename T> class Scale : public Vertex {
public:
  Input<Vector<T>> in;
  Output<Vector<T>> out;
  T factor;
  bool compute() {
    for (unsigned i = 0; i < in.size(); ++i) out[i] = in[i] * factor;
    return true;
  }
};
template class Scale<float>;
template class Scale<int>;

namespace mylib {
class Negate : public SupervisorVertex {
public:
  InOut<Vector<float>> x;
  bool compute() {
#ifdef __IPU__
    this does not compile on the host, and is skipped as on the IPUModel
#endif
    for (auto &v : x) v = -v;
    return true;
  }
};
} // namespace mylib

class Fails : public Vertex {
public:
  Input<float> x;
  bool compute() { return *x < 0; }
};
