"""Resize and ResizeGrad (``ops.interpolate`` and its adjoint) for ``ipuxl
export poplar``.

The taps of each axis (source indices and weights per output position)
are computed here as the Session computes them (``cpp/kernels/resize.cpp``,
ONNX Resize's coordinate formulas in float32 arithmetic, indices clamped
at the edges) and written into the program as constants. Each axis that
is not the identity is then one pass: for each tap ``k``,
``popops::multiSlice`` of the ``out`` source slices at the tap's indices
(static offsets), scaled by the tap's weights (``popops::map``, float32)
and summed; the adjoint scatters with ``popops::multiUpdateAdd`` instead.
The Session keeps every axis in double and rounds once, these round to
float32 between axes: nearest mode is exact (it copies elements), linear
and cubic agree within float rounding.
"""
import math
from typing import List, Tuple

import numpy as np

__all__ = ["RESIZE_KERNELS", "RESIZE_HELPERS", "axis_taps"]

from .poplar_nn import _dbg, _em, _ulist  # noqa: E402  (the emitter's shared small helpers)


def axis_taps(n_in: int, n_out: int, scale: float, mode: str, nearest: str, ctm: str,
              a: float) -> Tuple[List[List[int]], List[List[float]], bool]:
    """``(indices, weights, identity)``: for each tap ``k`` the source index
    and weight of every output position, as resize.cpp's make_taps."""
    f32 = np.float32
    ntaps = {"nearest": 1, "linear": 2, "cubic": 4}[mode]
    idx = [[0] * n_out for _ in range(ntaps)]
    w = [[0.0] * n_out for _ in range(ntaps)]

    def clamp(i):
        return max(0, min(n_in - 1, int(i)))

    ident = n_in == n_out
    inv = f32(1.0 / scale)
    for o in range(n_out):
        fo = f32(o)
        if ctm == "half_pixel":
            xf = (fo + f32(0.5)) * inv - f32(0.5)
        elif ctm == "pytorch_half_pixel":
            xf = (fo + f32(0.5)) * inv - f32(0.5) if n_out > 1 else f32(0.0)
        elif ctm == "align_corners":
            xf = f32(f32((n_in - 1) / (n_out - 1)) * fo) if n_out > 1 else f32(0.0)
        elif ctm == "asymmetric":
            xf = fo * inv
        else:
            raise NotImplementedError(f"Poplar export: Resize coordinate_transformation_mode {ctm!r}")
        x = float(xf)
        fl = math.floor(x)
        if ntaps == 1:
            frac = x - fl
            if nearest == "round_prefer_floor":
                r = fl if frac == 0.5 else _round_half_away(x)
            elif nearest == "round_prefer_ceil":
                r = fl + 1 if frac == 0.5 else _round_half_away(x)
            elif nearest == "floor":
                r = fl
            elif nearest == "ceil":
                r = math.ceil(x)
            else:
                raise NotImplementedError(f"Poplar export: Resize nearest_mode {nearest!r}")
            idx[0][o], w[0][o] = clamp(r), 1.0
            ident = ident and idx[0][o] == o
        elif ntaps == 2:
            r = f32(xf - f32(fl))
            idx[0][o], idx[1][o] = clamp(fl), clamp(fl + 1)
            w[0][o], w[1][o] = float(f32(1.0) - r), float(r)
            ident = ident and float(r) == 0.0 and idx[0][o] == o
        else:
            r = x - fl
            c = [((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a,
                 ((a + 2) * r - (a + 3)) * r * r + 1,
                 ((a + 2) * (1 - r) - (a + 3)) * (1 - r) * (1 - r) + 1,
                 ((a * (2 - r) - 5 * a) * (2 - r) + 8 * a) * (2 - r) - 4 * a]
            for k in range(4):
                idx[k][o], w[k][o] = clamp(fl - 1 + k), c[k]
            ident = ident and r == 0.0 and fl == o
    return idx, w, ident


def _round_half_away(x: float) -> float:
    """std::round: halves away from zero."""
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def _resize(adjoint: bool):
    def emit(em, e):
        x, out = e.inputs[0], e.outputs[0]
        _em().ptype(x.dtype)
        a = e.attrs
        xs = tuple(out.shape) if adjoint else tuple(x.shape)   # the forward input's shape
        ys = tuple(x.shape) if adjoint else tuple(out.shape)   # the forward output's shape
        em.helpers.add("resizeAxis")
        cur = f"popops::cast(graph, {em.t(x)}, poplar::FLOAT, prog, {_dbg(e)})"
        shape = list(ys if adjoint else xs)
        order = range(len(xs) - 1, -1, -1) if adjoint else range(len(xs))
        v = em.fresh("resize")
        em.line(f"poplar::Tensor {v} = {cur};")
        for ax in order:
            idx, w, ident = axis_taps(xs[ax], ys[ax], float(a["scales"][ax]), a["mode"],
                                      a.get("nearest_mode", "round_prefer_floor"),
                                      a.get("coordinate_transformation_mode", "half_pixel"),
                                      float(a.get("cubic_coeff_a", -0.75)))
            if ident:
                continue
            taps = "{" + ", ".join("{" + ", ".join(f"{i}u" for i in row) + "}" for row in idx) + "}"
            weights = "{" + ", ".join("{" + ", ".join(f"{float(np.float32(x_)).hex()}f" for x_ in row) + "}"
                                      for row in w) + "}"
            n_new = xs[ax] if adjoint else ys[ax]
            em.line(f"{v} = ipuxl_export::resizeAxis(graph, {v}, {ax}, {n_new}, {taps}, {weights}, "
                    f"{str(adjoint).lower()}, prog, {_dbg(e)});")
            shape[ax] = n_new
        em.define(out, f"popops::cast(graph, {v}, {_em().ptype(out.dtype)}, prog, {_dbg(e)})"
                       f".reshape({_ulist(out.shape)})")
    return emit


RESIZE_KERNELS = {"Resize": _resize(False), "ResizeGrad": _resize(True)}

_RESIZE_AXIS = r"""
// One axis of a separable resize (float32): out[.., j, ..] = sum_k w[k][j] *
// x[.., idx[k][j], ..] with `n` outputs along `axis`; the adjoint scatters
// instead: out[.., idx[k][j], ..] += w[k][j] * x[.., j, ..] (`n` inputs).
static poplar::Tensor resizeAxis(poplar::Graph &graph, const poplar::Tensor &x, unsigned axis, std::size_t n,
                                 const std::vector<std::vector<unsigned>> &idx,
                                 const std::vector<std::vector<float>> &w, bool adjoint,
                                 poplar::program::Sequence &prog, const std::string &dbg) {
  namespace pe = popops::expr;
  std::vector<unsigned> front{axis};  // axis moved outermost
  for (unsigned d = 0; d < x.rank(); ++d)
    if (d != axis) front.push_back(d);
  std::vector<std::size_t> shape = x.shape();
  shape[axis] = n;
  const std::size_t m = idx[0].size();  // output positions of the forward pass
  auto weightsOf = [&](std::size_t k, const std::vector<std::size_t> &like) {
    poplar::Tensor c = graph.addConstant<float>(poplar::FLOAT, {m}, w[k], dbg + "/weights");
    poputil::mapTensorLinearly(graph, c);
    std::vector<std::size_t> s(like.size(), 1);
    s[0] = m;
    return broadcastTo(c.reshape(s), like);
  };
  if (!adjoint) {
    poplar::Tensor acc;
    for (std::size_t k = 0; k < idx.size(); ++k) {
      poplar::Tensor g = popops::multiSlice(graph, x, idx[k], axis, prog, dbg + "/taps");  // [m, .. 1 at axis ..]
      g = g.squeeze({axis + 1});  // [m, other dims]
      poplar::Tensor term = popops::map(graph, pe::Mul(pe::_1, pe::_2), {g, weightsOf(k, g.shape())}, prog, dbg + "/scale");
      acc = k == 0 ? term : popops::add(graph, acc, term, prog, dbg + "/sum");
    }
    std::vector<unsigned> back(x.rank());  // acc has the axis outermost
    for (unsigned d = 0; d < x.rank(); ++d) back[front[d]] = d;
    return acc.dimShuffle(back);
  }
  poplar::Tensor out = graph.addVariable(poplar::FLOAT, shape, dbg + "/adjoint");
  poputil::mapTensorLinearly(graph, out);
  popops::zero(graph, out, prog, dbg + "/zero");
  poplar::Tensor xm = x.dimShuffle(front);  // [m, other dims]
  poplar::Tensor one = graph.addConstant<float>(poplar::FLOAT, {}, 1.0f, dbg + "/one");
  graph.setTileMapping(one, 0);
  for (std::size_t k = 0; k < idx.size(); ++k) {
    poplar::Tensor s = popops::map(graph, pe::Mul(pe::_1, pe::_2), {xm, weightsOf(k, xm.shape())}, prog, dbg + "/scale");
    popops::multiUpdateAdd(graph, out, s.expand({axis + 1}), idx[k], one, axis, prog, dbg + "/scatter");
  }
  return out;
}
"""

#: name -> (C++ source, helpers it needs), merged into poplar_codelets.HELPERS.
RESIZE_HELPERS = {"resizeAxis": (_RESIZE_AXIS, ("broadcastTo",))}
