"""Random ops for ``ipuxl export poplar``: RandomUniform, RandomNormal,
Dropout, ShapedDropout and ModifyRandomSeed.

ipuxl's Session draws from Philox4x32-10 keyed by the op's seed tensor
(``cpp/kernels/random.cpp``): element ``i`` of an output takes word ``i %
4`` of the block for counter ``(i / 4, stream)``. poprand's generator is
the IPU's, not this one, so ``poprand::uniform`` / ``normal`` / ``dropout``
could not reproduce a Session's numbers. The exported program instead
carries the same generator as two vertices of ``codelets.cpp``
(``PhiloxDraw``, ``PhiloxSeed``), so its float32 samples, dropout masks and
derived seeds are bit-identical to ``Session.run``. float16 outputs are
drawn in float32 and cast, so they may differ from the Session's (which
rounds from double once) in the last bit.

Dropout: the keep mask (``u >= ratio``) of the mask shape is broadcast to
the input and applied with one ``popops::map``: ``Select(x / (1 - ratio),
0, keep)``, the division in float as the Session's.
"""
import struct

import numpy as np

__all__ = ["RANDOM_KERNELS", "RANDOM_HELPERS", "RANDOM_CODELETS"]


def _em():
    from . import poplar_emit

    return poplar_emit


def _dbg(e) -> str:
    return _em().cstr(e.name)


def _words(v: float) -> str:
    """A double as its two 32-bit words (low, high), so the vertex gets it exactly."""
    lo, hi = struct.unpack("<II", struct.pack("<d", float(v)))
    return f"{lo}u, {hi}u"


def _ulist(vals) -> str:
    return "{" + ", ".join(f"{int(v)}u" for v in vals) + "}"


def _float_out(em, e, ref: str, dtype) -> str:
    if dtype.name == "float32":
        return ref
    ptype = _em().ptype(dtype)  # float64 has no Poplar type: refused, naming the dtype
    return f"popops::cast(graph, {ref}, {ptype}, prog, {_dbg(e)})"


def _use(em):
    em.codelets["PhiloxCore"] = RANDOM_CODELETS["PhiloxCore"]
    em.codelets["PhiloxDraw"] = RANDOM_CODELETS["PhiloxDraw"]
    em.helpers.add("philox")


def _draw(mode: int, a: str, b: str):
    def emit(em, e):
        _use(em)
        out = e.outputs[0]
        ref = (f"ipuxl_export::philoxDraw(graph, {em.t(e.inputs[0])}, {mode}, "
               f"{{{_words(e.attrs[a])}, {_words(e.attrs[b])}}}, {_ulist(out.shape)}, prog, {_dbg(e)})")
        em.define(out, _float_out(em, e, ref, out.dtype))
    return emit


def _dropout(em, e, mshape=None):
    """``mshape``: ShapedDropout's mask shape (None: the input's)."""
    x, seed = e.inputs[0], e.inputs[1]
    if x.dtype.name not in ("float32", "float16"):
        raise NotImplementedError(f"Poplar export: op {e.type} ({e.name!r}) on {x.dtype.name} tensor "
                                  f"{x.id!r} (float32 and float16 only)")
    _use(em)
    em.helpers.add("broadcastTo")
    ratio = float(e.attrs["ratio"])
    mshape = list(x.shape) if mshape is None else list(mshape)
    keep = em.fresh("keep")
    em.line(f"poplar::Tensor {keep} = ipuxl_export::philoxKeep(graph, {em.t(seed)}, {{{_words(ratio)}}}, "
            f"{_ulist(mshape)}, prog, {_dbg(e)});")
    div = float(np.float32(1.0 - ratio)).hex()
    pe = "popops::expr"
    expr = f"{pe}::Select({pe}::_1 / {pe}::Const({div}f), {pe}::Const(0.0f), {pe}::_2)"
    em.define(e.outputs[0], f"popops::map(graph, {expr}, {{{em.t(x)}, ipuxl_export::broadcastTo({keep}, "
                            f"{_ulist(x.shape)})}}, prog, {_dbg(e)})")


def _modify_seed(em, e):
    seed, mod = e.inputs[0], e.inputs[1]
    em.codelets["PhiloxCore"] = RANDOM_CODELETS["PhiloxCore"]
    em.codelets["PhiloxSeed"] = RANDOM_CODELETS["PhiloxSeed"]
    em.helpers.add("philox")
    signed = not mod.dtype.name.startswith("uint")
    em.define(e.outputs[0], f"ipuxl_export::philoxSeed(graph, {em.t(seed)}, {em.t(mod)}, "
                            f"{str(signed).lower()}, prog, {_dbg(e)})")


RANDOM_KERNELS = {
    "RandomUniform": _draw(0, "low", "high"),
    "RandomNormal": _draw(1, "mean", "std"),
    "Dropout": _dropout,
    "ShapedDropout": lambda em, e: _dropout(em, e, e.attrs["shape"]),
    "ModifyRandomSeed": _modify_seed,
}

_PHILOX = r"""
// ipuxl's random numbers (the generator of ipuxl's Session): vertices
// PhiloxDraw / PhiloxKeep / PhiloxSeed of codelets.cpp, one per op, on tile 0.
static poplar::Tensor philoxDraw(poplar::Graph &graph, const poplar::Tensor &seed, unsigned mode,
                                 std::vector<unsigned> params, std::vector<std::size_t> shape,
                                 poplar::program::Sequence &prog, const std::string &dbg) {
  poplar::Tensor out = graph.addVariable(mode == 2 ? poplar::BOOL : poplar::FLOAT, shape, dbg + "/random");
  poputil::mapTensorLinearly(graph, out);
  poplar::ComputeSet cs = graph.addComputeSet(dbg);
  poplar::VertexRef v = graph.addVertex(cs, mode == 2 ? "PhiloxKeep" : "PhiloxDraw");
  graph.connect(v["seed"], seed.flatten());
  graph.connect(v["out"], out.flatten());
  params.insert(params.begin(), mode);
  graph.setInitialValue(v["params"], params);
  graph.setTileMapping(v, 0);
  prog.add(poplar::program::Execute(cs));
  return out;
}
static poplar::Tensor philoxKeep(poplar::Graph &graph, const poplar::Tensor &seed, std::vector<unsigned> ratio,
                                 std::vector<std::size_t> shape, poplar::program::Sequence &prog,
                                 const std::string &dbg) {
  ratio.push_back(0u);
  ratio.push_back(0u);
  return philoxDraw(graph, seed, 2, ratio, shape, prog, dbg);
}
static poplar::Tensor philoxSeed(poplar::Graph &graph, const poplar::Tensor &seed, poplar::Tensor mod, bool isSigned,
                                 poplar::program::Sequence &prog, const std::string &dbg) {
  poplar::Type t = isSigned ? poplar::INT : poplar::UNSIGNED_INT;
  if (mod.elementType() != t) mod = popops::cast(graph, mod, t, prog, dbg + "/modifier");
  poplar::Tensor out = graph.addVariable(poplar::UNSIGNED_INT, {2}, dbg + "/seed");
  graph.setTileMapping(out, 0);
  poplar::ComputeSet cs = graph.addComputeSet(dbg);
  poplar::VertexRef v = graph.addVertex(cs, "PhiloxSeed");
  graph.connect(v["seed"], seed.flatten());
  graph.connect(v["modifier"], mod.reinterpret(poplar::UNSIGNED_INT).flatten());
  graph.connect(v["out"], out);
  graph.setInitialValue(v["signExtend"], unsigned(isSigned));
  graph.setTileMapping(v, 0);
  prog.add(poplar::program::Execute(cs));
  return out;
}
"""

RANDOM_HELPERS = {"philox": (_PHILOX, ())}

_PHILOX_CORE = r"""
#include <cstring>

// Philox4x32-10 (Salmon et al., SC'11), as ipuxl's Session: block for
// counter (c0, c1, c2, c3) under key (k0, k1).
static void philox4x32(unsigned c[4], unsigned k0, unsigned k1) {
  for (int r = 0; r < 10; ++r) {
    const unsigned long long p0 = 0xD2511F53ull * c[0], p1 = 0xCD9E8D57ull * c[2];
    const unsigned n0 = unsigned(p1 >> 32) ^ c[1] ^ k0, n1 = unsigned(p1);
    const unsigned n2 = unsigned(p0 >> 32) ^ c[3] ^ k1, n3 = unsigned(p0);
    c[0] = n0; c[1] = n1; c[2] = n2; c[3] = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}
static double wordsToDouble(unsigned lo, unsigned hi) {
  unsigned long long b = (static_cast<unsigned long long>(hi) << 32) | lo;
  double d;
  std::memcpy(&d, &b, 8);
  return d;
}
"""

RANDOM_CODELETS = {
    "PhiloxCore": _PHILOX_CORE,  # sorts before the vertices that use it
    "PhiloxDraw": r"""
// params: mode (0 uniform: low, high; 1 normal: mean, std), then two
// doubles as (low word, high word). Element i: word i % 4 of the block for
// counter (i / 4, stream), stream 0 (uniform) or 1 (normal).
class PhiloxDraw : public Vertex {
public:
  Input<Vector<unsigned>> seed;
  Output<Vector<float>> out;
  Vector<unsigned> params;

  bool compute() {
    const unsigned mode = params[0];
    const double a = wordsToDouble(params[1], params[2]), b = wordsToDouble(params[3], params[4]);
    const unsigned n = out.size();
    float top = float(b);
    while (double(top) >= b) top = std::nextafter(top, -INFINITY);
    for (unsigned blk = 0; blk * 4 < n; ++blk) {
      unsigned c[4] = {blk, 0u, mode, 0u};
      philox4x32(c, seed[0], seed[1]);
      double z[4];
      if (mode == 0) {
        for (int j = 0; j < 4; ++j) z[j] = a + (b - a) * (double(c[j]) * (1.0 / 4294967296.0));
      } else {
        for (int p = 0; p < 2; ++p) {
          const double r = std::sqrt(-2.0 * std::log((double(c[2 * p]) + 1.0) * (1.0 / 4294967296.0)));
          const double t = 6.283185307179586476925286766559 * (double(c[2 * p + 1]) * (1.0 / 4294967296.0));
          z[2 * p] = a + b * (r * std::cos(t));
          z[2 * p + 1] = a + b * (r * std::sin(t));
        }
      }
      for (unsigned j = 0; j < 4 && blk * 4 + j < n; ++j) {
        float v = float(z[j]);
        if (mode == 0 && a < b && double(v) >= b) v = top;  // [low, high) in float
        out[blk * 4 + j] = v;
      }
    }
    return true;
  }
};

// Dropout's keep mask: element i kept when its uniform (stream 2) is >= the ratio.
class PhiloxKeep : public Vertex {
public:
  Input<Vector<unsigned>> seed;
  Output<Vector<bool>> out;
  Vector<unsigned> params;  // mode 2, then the ratio as two words

  bool compute() {
    const double ratio = wordsToDouble(params[1], params[2]);
    const unsigned n = out.size();
    for (unsigned blk = 0; blk * 4 < n; ++blk) {
      unsigned c[4] = {blk, 0u, 2u, 0u};
      philox4x32(c, seed[0], seed[1]);
      for (unsigned j = 0; j < 4 && blk * 4 + j < n; ++j)
        out[blk * 4 + j] = double(c[j]) * (1.0 / 4294967296.0) >= ratio;
    }
    return true;
  }
};
""",
    "PhiloxSeed": r"""
// A derived seed: the first two words of the block for counter
// (modifier low, modifier high, 3, 0x5eed5eed) under the old seed.
class PhiloxSeed : public Vertex {
public:
  Input<Vector<unsigned>> seed;
  Input<Vector<unsigned>> modifier;
  Output<Vector<unsigned>> out;
  unsigned signExtend;

  bool compute() {
    const unsigned m = modifier[0];
    const unsigned hi = signExtend && (m & 0x80000000u) ? 0xFFFFFFFFu : 0u;
    unsigned c[4] = {m, hi, 3u, 0x5eed5eedu};
    philox4x32(c, seed[0], seed[1]);
    out[0] = c[0];
    out[1] = c[1];
    return true;
  }
};
""",
}
