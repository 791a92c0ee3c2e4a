"""C++ written into exported Poplar programs (``ipuxl export poplar``):

* :data:`HELPERS`: functions of ``program.cpp`` composing PopLibs calls for
  ops with no single call in ipuxl's PopLibs subset (group / layer norm and
  its gradient, softmax on any axis and its gradient), and small tensor
  utilities. Each is ``(source, names of the helpers it uses)``; a program
  carries only those its ops use.
* :data:`CODELETS`: vertices of ``codelets.cpp`` for ops PopLibs has no
  call for at all (the NLL loss with its softmax gradient, whose labels
  and ignore index popnn's ``calcLoss`` does not take).

Everything uses only the documented Poplar / PopLibs API.
"""

__all__ = ["HELPERS", "CODELETS"]

_CONSTANT_FROM = r"""
static float halfToFloat(std::uint16_t h) {
  const std::uint32_t s = (h >> 15) & 1, e = (h >> 10) & 0x1F, m = h & 0x3FF;
  float v = e == 0 ? std::ldexp(float(m), -24) : e == 31 ? (m ? NAN : INFINITY)
                   : std::ldexp(float(m | 0x400), int(e) - 25);
  return s ? -v : v;
}

// A constant whose values are array `key` of weights.npz.
static poplar::Tensor constantFrom(poplar::Graph &graph, const std::map<std::string, HostArray> &data,
                                   const std::string &key, const poplar::Type &type,
                                   std::vector<std::size_t> shape, const std::string &descr) {
  std::size_t n = 1;
  for (auto d : shape) n *= d;
  const HostArray &a = lookup(data, key, descr, n, "weights.npz");
  const char *p = a.data.data();
  if (descr == "<f4") {
    std::vector<float> v(n); std::memcpy(v.data(), p, 4 * n);
    return graph.addConstant<float>(type, shape, v, key);
  }
  if (descr == "<f2") {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) { std::uint16_t h; std::memcpy(&h, p + 2 * i, 2); v[i] = halfToFloat(h); }
    return graph.addConstant<float>(type, shape, v, key);
  }
  if (descr == "<u4") {
    std::vector<unsigned> v(n); std::memcpy(v.data(), p, 4 * n);
    return graph.addConstant<unsigned>(type, shape, v, key);
  }
  std::vector<int> v(n);
  const std::size_t es = itemSize(descr);
  for (std::size_t i = 0; i < n; ++i) {
    if (es == 4) { std::int32_t x; std::memcpy(&x, p + 4 * i, 4); v[i] = x; }
    else if (es == 2) { std::int16_t x; std::memcpy(&x, p + 2 * i, 2); v[i] = descr[1] == 'u' ? std::uint16_t(x) : x; }
    else v[i] = descr[1] == 'i' ? int(std::int8_t(p[i])) : int((unsigned char)p[i]);
  }
  return graph.addConstant<int>(type, shape, v, key);
}
"""

_OFFSET_OF = r"""
// A remote buffer offset: the scalar as the one-element UNSIGNED_INT tensor Copy takes.
static poplar::Tensor offsetOf(poplar::Graph &graph, const poplar::Tensor &t, poplar::program::Sequence &prog) {
  poplar::Tensor u = t.elementType() == poplar::UNSIGNED_INT ? t
                     : popops::cast(graph, t, poplar::UNSIGNED_INT, prog, "offset");
  return u.reshape({1});
}
"""

_BROADCAST_TO = r"""
// t broadcast (NumPy rules) to `shape`, as a view.
static poplar::Tensor broadcastTo(poplar::Tensor t, const std::vector<std::size_t> &shape) {
  while (t.rank() < shape.size()) t = t.expand({0});
  for (unsigned d = 0; d < shape.size(); ++d)
    if (t.dim(d) != shape[d]) t = t.broadcast(shape[d], d);
  return t;
}
"""

_SCALAR_LIKE = r"""
// A scalar constant of `like`'s element type (a scale of scaledAddTo).
static poplar::Tensor scalarLike(poplar::Graph &graph, const poplar::Tensor &like, float v) {
  poplar::Tensor c = graph.addConstant<float>(like.elementType(), {}, v, "scale");
  graph.setTileMapping(c, 0);
  return c;
}
"""

_SOFTMAX = r"""
// The permutation moving `axis` last, and its inverse.
static std::vector<unsigned> axisLast(unsigned rank, unsigned axis) {
  std::vector<unsigned> p;
  for (unsigned d = 0; d < rank; ++d) if (d != axis) p.push_back(d);
  p.push_back(axis);
  return p;
}
static std::vector<unsigned> inversePerm(const std::vector<unsigned> &p) {
  std::vector<unsigned> q(p.size());
  for (unsigned i = 0; i < p.size(); ++i) q[p[i]] = i;
  return q;
}

// Softmax over `axis`: popnn's SOFTMAX_STABLE over the rows of a 2-D view.
static poplar::Tensor softmaxAxis(poplar::Graph &graph, const poplar::Tensor &x, unsigned axis,
                                  poplar::program::Sequence &prog, const std::string &dbg) {
  const auto perm = axisLast(x.rank(), axis);
  poplar::Tensor moved = x.dimShuffle(perm);
  const std::size_t n = moved.dim(moved.rank() - 1);
  poplar::Tensor y = popnn::nonLinearity(graph, popnn::NonLinearityType::SOFTMAX_STABLE,
                                         moved.reshape({moved.numElements() / n, n}), prog, dbg);
  return y.reshape(moved.shape()).dimShuffle(inversePerm(perm));
}
"""

_SOFTMAX_GRAD = r"""
// dx = y (g - sum(g y, axis)).
static poplar::Tensor softmaxGrad(poplar::Graph &graph, const poplar::Tensor &g, const poplar::Tensor &y,
                                  unsigned axis, poplar::program::Sequence &prog, const std::string &dbg) {
  poplar::Tensor gy = popops::mul(graph, g, y, prog, dbg);
  poplar::Tensor s = popops::reduce(graph, gy, y.elementType(), {axis},
                                    popops::ReduceParams(popops::Operation::ADD), prog, dbg);
  poplar::Tensor centred = popops::sub(graph, g, s.expand({axis}), prog, dbg);
  return popops::mul(graph, y, centred, prog, dbg);
}
"""

_GROUP_NORM = r"""
// The per-channel view of a weight for an (N, C, ...) input: (C, 1, ...).
static poplar::Tensor perChannel(const poplar::Tensor &w, std::size_t rank) {
  std::vector<std::size_t> s{w.numElements()};
  for (std::size_t d = 2; d < rank; ++d) s.push_back(1);
  return w.reshape(s);
}

static poplar::Tensor asFloat(poplar::Graph &graph, const poplar::Tensor &t, poplar::program::Sequence &prog,
                              const std::string &dbg) {
  return t.elementType() == poplar::FLOAT ? t : popops::cast(graph, t, poplar::FLOAT, prog, dbg);
}

// Group normalisation (PopART's GroupNormOpx, popnn::gn): statistics per
// sample and group of channels in float32, biased variance; returns
// {y, mean, 1/sqrt(var + eps)}, the statistics of shape (N * groups).
static std::vector<poplar::Tensor> groupNorm(poplar::Graph &graph, const poplar::Tensor &x, const poplar::Tensor &w,
                                             const poplar::Tensor &b, unsigned groups, float eps,
                                             poplar::program::Sequence &prog, const std::string &dbg) {
  using namespace popops::expr;
  const std::size_t rows = x.dim(0) * groups, m = x.numElements() / rows;
  poplar::Tensor xg = asFloat(graph, x.reshape({rows, m}), prog, dbg);
  poplar::Tensor mean = popops::reduce(graph, xg, poplar::FLOAT, {1},
                                       popops::ReduceParams(popops::Operation::ADD), prog, dbg);
  popops::mulInPlace(graph, mean, 1.0f / float(m), prog, dbg);
  poplar::Tensor centred = popops::sub(graph, xg, mean.expand({1}), prog, dbg);
  poplar::Tensor var = popops::reduce(graph, centred, poplar::FLOAT, {1},
                                      popops::ReduceParams(popops::Operation::SQUARE_ADD), prog, dbg);
  poplar::Tensor inv = popops::map(graph, Inv(Sqrt(_1 * Const(1.0f / float(m)) + Const(eps))), {var}, prog, dbg);
  poplar::Tensor yn = popops::mul(graph, centred, inv.expand({1}), prog, dbg).reshape(x.shape());
  if (x.elementType() != poplar::FLOAT) yn = popops::cast(graph, yn, x.elementType(), prog, dbg);
  poplar::Tensor y = popops::mul(graph, yn, perChannel(w, x.rank()), prog, dbg);
  popops::addInPlace(graph, y, perChannel(b, x.rank()), prog, dbg);
  return {y, mean, inv};
}
"""

_GROUP_NORM_GRAD = r"""
// The gradient of groupNorm: {dx, dweight, dbias} from the input, weight,
// saved statistics and the output's gradient g.
static std::vector<poplar::Tensor> groupNormGrad(poplar::Graph &graph, const poplar::Tensor &x,
                                                 const poplar::Tensor &w, const poplar::Tensor &mean,
                                                 const poplar::Tensor &inv, const poplar::Tensor &g, unsigned groups,
                                                 poplar::program::Sequence &prog, const std::string &dbg) {
  const std::size_t rows = x.dim(0) * groups, m = x.numElements() / rows;
  poplar::Tensor meanF = asFloat(graph, mean, prog, dbg).reshape({rows, 1});
  poplar::Tensor invF = asFloat(graph, inv, prog, dbg).reshape({rows, 1});
  poplar::Tensor xg = asFloat(graph, x.reshape({rows, m}), prog, dbg);
  poplar::Tensor xhat = popops::mul(graph, popops::sub(graph, xg, meanF, prog, dbg), invF, prog, dbg);
  poplar::Tensor gF = asFloat(graph, g, prog, dbg);
  std::vector<std::size_t> dims{0};
  for (std::size_t d = 2; d < x.rank(); ++d) dims.push_back(d);
  poplar::Tensor db = popops::reduce(graph, gF, w.elementType(), dims,
                                     popops::ReduceParams(popops::Operation::ADD), prog, dbg);
  poplar::Tensor gx = popops::mul(graph, gF, xhat.reshape(x.shape()), prog, dbg);
  poplar::Tensor dw = popops::reduce(graph, gx, w.elementType(), dims,
                                     popops::ReduceParams(popops::Operation::ADD), prog, dbg);
  poplar::Tensor dxhat = popops::mul(graph, gF, asFloat(graph, perChannel(w, x.rank()), prog, dbg), prog, dbg)
                             .reshape({rows, m});
  poplar::Tensor m1 = popops::reduce(graph, dxhat, poplar::FLOAT, {1},
                                     popops::ReduceParams(popops::Operation::ADD), prog, dbg);
  poplar::Tensor m2 = popops::reduce(graph, popops::mul(graph, dxhat, xhat, prog, dbg), poplar::FLOAT, {1},
                                     popops::ReduceParams(popops::Operation::ADD), prog, dbg);
  popops::mulInPlace(graph, m1, 1.0f / float(m), prog, dbg);
  popops::mulInPlace(graph, m2, 1.0f / float(m), prog, dbg);
  using namespace popops::expr;
  poplar::Tensor dx = popops::map(graph, _4 * (_1 - _2 - _3 * _5),
                                  {dxhat, m1.expand({1}).broadcast(m, 1), xhat, invF.broadcast(m, 1),
                                   m2.expand({1}).broadcast(m, 1)}, prog, dbg).reshape(x.shape());
  if (x.elementType() != poplar::FLOAT) dx = popops::cast(graph, dx, x.elementType(), prog, dbg);
  return {dx, dw.reshape(w.shape()), db.reshape(w.shape())};
}
"""

_NLL = r"""
// NLL of probabilities with the gradient of softmax + NLL (PopART's
// NlllWithSoftmaxGradDirectOpx): one vertex on tile 0 (codelets.cpp).
static std::vector<poplar::Tensor> nllSoftmaxGrad(poplar::Graph &graph, const poplar::Tensor &probs,
                                                  const poplar::Tensor &labels, const poplar::Tensor &lossGrad,
                                                  unsigned reduction, unsigned hasIgnore, int ignoreIndex, unsigned mode,
                                                  std::vector<std::size_t> lossShape,
                                                  poplar::program::Sequence &prog, const std::string &dbg) {
  const std::size_t classes = probs.dim(probs.rank() - 1), rows = probs.numElements() / classes;
  std::size_t nLoss = 1;
  for (auto d : lossShape) nLoss *= d;
  poplar::Tensor loss = graph.addVariable(poplar::FLOAT, lossShape, dbg + "/loss");
  poplar::Tensor dx = graph.addVariable(poplar::FLOAT, probs.shape(), dbg + "/dx");
  graph.setTileMapping(loss, 0);
  poputil::mapTensorLinearly(graph, dx);
  poplar::ComputeSet cs = graph.addComputeSet(dbg);
  poplar::VertexRef v = graph.addVertex(cs, "NllSoftmaxGrad");
  graph.connect(v["probs"], probs.flatten());
  graph.connect(v["labels"], labels.flatten());
  graph.connect(v["lossGrad"], lossGrad.flatten());
  graph.connect(v["loss"], loss.flatten());
  graph.connect(v["dx"], dx.flatten());
  graph.setInitialValue(v["classes"], unsigned(classes));
  graph.setInitialValue(v["reduction"], reduction);
  graph.setInitialValue(v["hasIgnore"], hasIgnore);
  graph.setInitialValue(v["ignoreIndex"], ignoreIndex);
  graph.setInitialValue(v["mode"], mode);
  graph.setTileMapping(v, 0);
  prog.add(poplar::program::Execute(cs));
  (void)rows; (void)nLoss;
  return {loss, dx};
}
"""

_ADAM = r"""
// Adam / Lamb / AdaMax updater term (PopART's AdamUpdaterOpx): one vertex
// on tile 0 (codelets.cpp). `step` is incremented in place first.
static poplar::Tensor adamUpdater(poplar::Graph &graph, const poplar::Tensor &w, const poplar::Tensor &m,
                                  const poplar::Tensor &v, poplar::Tensor step, bool useWd, bool hasStep,
                                  bool bias, bool adamax, float wd, float b1, float b2, float eps,
                                  poplar::program::Sequence &prog, const std::string &dbg) {
  if (!hasStep) {
    step = graph.addVariable(poplar::FLOAT, {1}, dbg + "/no_step");
    graph.setTileMapping(step, 0);
  }
  poplar::Tensor out = graph.clone(m, dbg + "/updater");
  poplar::ComputeSet cs = graph.addComputeSet(dbg);
  poplar::VertexRef vx = graph.addVertex(cs, "AdamUpdater");
  graph.connect(vx["m"], m.flatten());
  graph.connect(vx["v"], v.flatten());
  graph.connect(vx["w"], w.flatten());
  graph.connect(vx["step"], step.flatten());
  graph.connect(vx["out"], out.flatten());
  graph.setInitialValue(vx["wd"], wd);
  graph.setInitialValue(vx["b1"], b1);
  graph.setInitialValue(vx["b2"], b2);
  graph.setInitialValue(vx["eps"], eps);
  graph.setInitialValue(vx["flags"], unsigned((useWd ? 1 : 0) | (hasStep ? 2 : 0) | (bias ? 4 : 0) |
                                               (adamax ? 8 : 0)));
  graph.setTileMapping(vx, 0);
  prog.add(poplar::program::Execute(cs));
  return out;
}
"""

_GCL = ""  # the collectives are gcl's own calls (gcl/Collectives.hpp)

#: name -> (C++ source, helpers it needs).
HELPERS = {
    "constantFrom": (_CONSTANT_FROM, ()),
    "offsetOf": (_OFFSET_OF, ()),
    "broadcastTo": (_BROADCAST_TO, ()),
    "scalarLike": (_SCALAR_LIKE, ()),
    "softmaxAxis": (_SOFTMAX, ()),
    "softmaxGrad": (_SOFTMAX_GRAD, ()),
    "groupNorm": (_GROUP_NORM, ()),
    "groupNormGrad": (_GROUP_NORM_GRAD, ("groupNorm",)),
    "nllSoftmaxGrad": (_NLL, ()),
    "adamUpdater": (_ADAM, ()),
    "gcl": (_GCL, ()),
    # The FunctionBuffer of each code-loaded Function, by F[] slot (RemoteCodeLoad).
    "functionBuffers": ("static std::map<unsigned, poplar::FunctionBuffer> FB;\n", ()),
    "poplinConv": ("", ()),      # headers only (poplar_ops.extra_includes)
    "popnnPooling": ("", ()),
    "popopsTopK": ("", ()),
}

CODELETS = {
    "AdamUpdater": r"""
// mc = m / (1 - b1^t), vc = v / (1 - b2^t) (bias flag; AdaMax: vc = v),
// out = mc / (sqrt(vc) + eps) (AdaMax: mc / (vc + eps)) [+ wd * w], in
// double, t the step after its increment.
class AdamUpdater : public Vertex {
public:
  Input<Vector<float>> m;
  Input<Vector<float>> v;
  Input<Vector<float>> w;
  InOut<Vector<float>> step;
  Output<Vector<float>> out;
  float wd;
  float b1;
  float b2;
  float eps;
  unsigned flags;  // 1: weight decay, 2: has step, 4: bias correction, 8: AdaMax

  bool compute() {
    double b1c = 1.0, b2c = 1.0;
    if (flags & 2) {
      step[0] = float(double(step[0]) + 1.0);
      const double ts = double(step[0]);
      if (flags & 4) {
        b1c = 1.0 - std::pow(double(b1), ts);
        if (!(flags & 8)) b2c = 1.0 - std::pow(double(b2), ts);
      }
    }
    for (unsigned i = 0; i < out.size(); ++i) {
      const double mh = double(m[i]) / b1c;
      double vh = double(v[i]) / b2c;
      if (!(flags & 8)) vh = std::sqrt(vh);
      double r = mh / (vh + double(eps));
      if (flags & 1) r += double(wd) * double(w[i]);
      out[i] = float(r);
    }
    return true;
  }
};
""",
    "NllSoftmaxGrad": r"""
// Per row s of probs (rows x classes): loss_s = -log(p[s, label_s] + 1e-7)
// and dx[s, :] = (p[s, :] - onehot(label_s)) * lossGrad; rows with the
// ignore index give 0. reduction 0: per row; 1: sum; 2: mean over the
// counted rows (dx divided by their number too).
class NllSoftmaxGrad : public Vertex {
public:
  Input<Vector<float>> probs;
  Input<Vector<int>> labels;
  Input<Vector<float>> lossGrad;
  Output<Vector<float>> loss;
  Output<Vector<float>> dx;
  unsigned classes;
  unsigned reduction;
  unsigned hasIgnore;
  int ignoreIndex;
  unsigned mode;  // 0: -log(p + 1e-7) (NlllWithSoftmaxGradDirect); 1: -log(max(p, 1e-7)) (Nll); 2: -p (log_prob)

  bool compute() {
    const unsigned rows = labels.size();
    unsigned counted = 0;
    for (unsigned s = 0; s < rows; ++s)
      if (!(hasIgnore && labels[s] == ignoreIndex)) ++counted;
    const float div = reduction == 2 ? (counted ? float(counted) : 1.0f) : 1.0f;
    double total = 0.0;
    for (unsigned s = 0; s < rows; ++s) {
      const bool ignored = hasIgnore && labels[s] == ignoreIndex;
      const float g = lossGrad.size() == 1 ? lossGrad[0] : lossGrad[s];
      const double pl = ignored ? 1.0 : double(probs[s * classes + labels[s]]);
      const double eps = double(1.0e-7f);
      const float l = ignored ? 0.0f
                      : float(mode == 2 ? -pl : mode == 1 ? -std::log(pl > eps ? pl : eps) : -std::log(pl + eps));
      if (reduction == 0) loss[s] = l;
      total += l;
      for (unsigned c = 0; c < classes; ++c) {
        const float p = probs[s * classes + c];
        const float y = int(c) == labels[s] ? 1.0f : 0.0f;
        dx[s * classes + c] = ignored ? 0.0f : (p - y) * g / div;
      }
    }
    if (reduction != 0) loss[0] = float(reduction == 2 ? total / div : total);
    return true;
  }
};
""",
}

# The random ops' generator (poplar_random.py).
from .poplar_random import RANDOM_CODELETS, RANDOM_HELPERS  # noqa: E402

HELPERS.update(RANDOM_HELPERS)
CODELETS.update(RANDOM_CODELETS)

# CumSum and ScatterReduce (poplar_scan.py).
from .poplar_scan import SCAN_CODELETS, SCAN_HELPERS  # noqa: E402

HELPERS.update(SCAN_HELPERS)
CODELETS.update(SCAN_CODELETS)

# Gather, arg-extrema, one-hot and the norm-like reductions (poplar_index.py).
from .poplar_index import INDEX_HELPERS  # noqa: E402

HELPERS.update(INDEX_HELPERS)

# popxl-addons' custom ops (poplar_addons.py).
from .poplar_addons import ADDONS_HELPERS  # noqa: E402

HELPERS.update(ADDONS_HELPERS)

# PrintTensor, BatchNormInference, Histogram, ReduceMedian (poplar_misc.py).
from .poplar_misc import MISC_HELPERS  # noqa: E402

HELPERS.update(MISC_HELPERS)

# Resize and its adjoint (poplar_resize.py).
from .poplar_resize import RESIZE_HELPERS  # noqa: E402
from .poplar_roi import ROI_HELPERS  # noqa: E402

HELPERS.update(RESIZE_HELPERS)
HELPERS.update(ROI_HELPERS)  # RoiAlign(+Grad) (poplar_roi.py), with its vertex
