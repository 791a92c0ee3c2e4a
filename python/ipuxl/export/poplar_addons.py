"""popxl-addons' custom ops, LambSquare and Subsample for ``ipuxl export
poplar``.

popxl-addons builds ``RotaryPosEmbed`` and ``GroupQuantizeDecompress`` as
PopART custom ops with codelets of their own; the export writes each as
``popops::map`` expressions of the same arithmetic, on the Session's
rounding (``cpp/kernels/rotary.cpp``, ``group_quantize.cpp``):

* ``RotaryPosEmbed`` / ``RotaryPosEmbedGrad``: the first ``rotary_dim``
  elements of the last axis of ``x`` (batch, seq, heads, hh) are pairs
  (real, imaginary), each turned by the angle of ``sin``/``cos`` (1 or
  batch, seq, rotary_dim / 2) broadcast over the heads (and batch); the
  gradient turns the other way. Computed in float32 (``Cast`` inside the
  expression) and rounded once, as the Session; the other elements are
  copied. Agrees within float rounding (the Session's compiler may fuse a
  multiply-add).
* ``GroupQuantizeDecompress``: each uint16 of ``t`` (R, G, I) holds four
  4-bit ids, top nibble first; ``out[r, (g I + i) 4 + j] = id j * scale[r,
  g] + bias[r, g]``, the product and the sum each rounded to the output
  type: one map per nibble, written into the output's strided view.
* ``LambSquare``: PopART's LambSquareOpx, ``popops::reduce`` SQUARE_ADD of
  every element into a float32 scalar.
* ``Subsample``: PopART's SubsampleOpx, ``Tensor::subSample`` per axis
  (a view), copied into a new tensor.
"""
__all__ = ["ADDONS_KERNELS", "ADDONS_HELPERS"]

from .poplar_nn import _dbg, _em  # noqa: E402  (the emitter's shared small helpers)


def _rotary(inverse: bool):
    def emit(em, e):
        x, sin, cos = e.inputs
        _em().ptype(x.dtype)
        em.helpers.add("rotaryPosEmbed")
        em.define(e.outputs[0], f"ipuxl_export::rotaryPosEmbed(graph, {em.t(x)}, {em.t(sin)}, {em.t(cos)}, "
                                f"{int(e.attrs['rotary_dim'])}, {str(inverse).lower()}, prog, {_dbg(e)})")
    return emit


def _group_quantize_decompress(em, e):
    t, scale, bias = e.inputs
    _em().ptype(scale.dtype)
    em.helpers.add("groupQuantizeDecompress")
    em.define(e.outputs[0], f"ipuxl_export::groupQuantizeDecompress(graph, {em.t(t)}, {em.t(scale)}, "
                            f"{em.t(bias)}, prog, {_dbg(e)})")


def _lamb_square(em, e):
    x = e.inputs[0]
    _em().ptype(x.dtype)
    em.define(e.outputs[0], f"popops::reduce(graph, {em.t(x)}.flatten(), poplar::FLOAT, {{0u}}, "
                            f"popops::ReduceParams(popops::Operation::SQUARE_ADD), prog, {_dbg(e)})"
                            f".reshape({{}})")


def _subsample(em, e):
    from .poplar_ops import _copy_of

    view = em.t(e.inputs[0])
    for axis, s in enumerate(e.attrs["strides"]):
        if int(s) != 1:
            view += f".subSample({int(s)}, {axis})"
    _copy_of(em, e, view)


ADDONS_KERNELS = {
    "RotaryPosEmbed": _rotary(False), "RotaryPosEmbedGrad": _rotary(True),
    "GroupQuantizeDecompress": _group_quantize_decompress,
    "LambSquare": _lamb_square, "Subsample": _subsample,
}

_ROTARY = r"""
// popxl_addons' rotary positional embedding of x (batch, seq, heads, hh):
// pairs of the first R elements turned by sin/cos (1 or batch, seq, R/2),
// the other way for the gradient; float32 arithmetic, rounded once.
static poplar::Tensor rotaryPosEmbed(poplar::Graph &graph, const poplar::Tensor &x, const poplar::Tensor &sin,
                                     const poplar::Tensor &cos, unsigned R, bool inverse,
                                     poplar::program::Sequence &prog, const std::string &dbg) {
  namespace pe = popops::expr;
  const std::size_t B = x.dim(0), S = x.dim(1), H = x.dim(2), D = x.dim(3), P = R / 2;
  poplar::Tensor out = graph.clone(x, dbg + "/out");
  if (R < D) prog.add(poplar::program::Copy(x.slice(R, D, 3), out.slice(R, D, 3)));
  if (P == 0 || x.numElements() == 0) return out;
  poplar::Tensor xp = x.slice(0, R, 3).reshape({B, S, H, P, 2}), op = out.slice(0, R, 3).reshape({B, S, H, P, 2});
  auto part = [&](const poplar::Tensor &t, unsigned k) { return t.slice(k, k + 1, 4).reshape({B, S, H, P}); };
  auto trig = [&](const poplar::Tensor &t) {
    poplar::Tensor u = t.reshape({t.dim(0), S, 1, P}).broadcast(H, 2);
    return t.dim(0) == 1 ? u.broadcast(B, 0) : u;
  };
  const poplar::Type type = x.elementType();
  auto f = [](const pe::PlaceHolder &p) { return pe::Cast(p, poplar::FLOAT); };
  const std::vector<poplar::Tensor> in{part(xp, 0), part(xp, 1), trig(cos), trig(sin)};
  // re' = re c - im s, im' = im c + re s (inverse: s -> -s)
  if (!inverse) {
    popops::mapWithOutput(graph, pe::Cast(pe::Sub(pe::Mul(f(pe::_1), f(pe::_3)), pe::Mul(f(pe::_2), f(pe::_4))), type), in,
                          part(op, 0), prog, dbg + "/re");
    popops::mapWithOutput(graph, pe::Cast(pe::Add(pe::Mul(f(pe::_2), f(pe::_3)), pe::Mul(f(pe::_1), f(pe::_4))), type), in,
                          part(op, 1), prog, dbg + "/im");
  } else {
    popops::mapWithOutput(graph, pe::Cast(pe::Add(pe::Mul(f(pe::_1), f(pe::_3)), pe::Mul(f(pe::_2), f(pe::_4))), type), in,
                          part(op, 0), prog, dbg + "/re");
    popops::mapWithOutput(graph, pe::Cast(pe::Sub(pe::Mul(f(pe::_2), f(pe::_3)), pe::Mul(f(pe::_1), f(pe::_4))), type), in,
                          part(op, 1), prog, dbg + "/im");
  }
  return out;
}
"""

_GROUP_QUANTIZE = r"""
// popxl_addons' group_quantize_decompress: four 4-bit ids per uint16 of t
// (R, G, I), top nibble first, times scale plus bias (R, G, 1); the product
// and the sum each rounded to the output type. Out: (R, G * I * 4).
static poplar::Tensor groupQuantizeDecompress(poplar::Graph &graph, const poplar::Tensor &t,
                                              const poplar::Tensor &scale, const poplar::Tensor &bias,
                                              poplar::program::Sequence &prog, const std::string &dbg) {
  namespace pe = popops::expr;
  const std::size_t R = t.dim(0), G = t.dim(1), I = t.dim(2);
  const poplar::Type type = scale.elementType();
  poplar::Tensor out = graph.addVariable(type, {R, G, I, 4}, dbg + "/out");
  poputil::mapTensorLinearly(graph, out);
  if (out.numElements() == 0) return out.reshape({R, G * I * 4});
  const poplar::Tensor s = scale.broadcast(I, 2), b = bias.broadcast(I, 2);
  for (unsigned j = 0; j < 4; ++j) {
    const auto id = pe::Cast(pe::BitwiseAnd(pe::Shr(pe::Cast(pe::_1, poplar::UNSIGNED_INT), pe::Const(12u - 4u * j)),
                                            pe::Const(15u)), type);
    popops::mapWithOutput(graph, pe::Add(pe::Mul(id, pe::_2), pe::_3), {t, s, b},
                          out.slice(j, j + 1, 3).reshape({R, G, I}), prog, dbg + "/nibble" + std::to_string(j));
  }
  return out.reshape({R, G * I * 4});
}
"""

#: name -> (C++ source, helpers it needs), merged into poplar_codelets.HELPERS.
ADDONS_HELPERS = {
    "rotaryPosEmbed": (_ROTARY, ()),
    "groupQuantizeDecompress": (_GROUP_QUANTIZE, ()),
}
