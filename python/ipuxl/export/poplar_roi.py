"""RoiAlign and RoiAlignGrad (``ops.roi_align`` and its input gradient) for
``ipuxl export poplar``.

PopLibs has no ROI align, and PopART's RoiAlignOpx grows it from its own
code, so the export writes one vertex (``codelets.cpp``, on tile 0) that
runs the Session's algorithm (``cpp/kernels/roi_align.cpp``: torchvision's
``roi_align`` with ``aligned=False``, average of a grid of bilinear samples
per bin, coordinates and sums in double, one rounding to float32). The box
coordinates are run-time data, so the taps cannot be constants as Resize's
are. float16 tensors are cast to float32 around the vertex, as the Session
rounds them. A batch index outside ``[0, N)`` makes ``compute()`` return
false, which the Engine reports naming the vertex.
"""
import numpy as np

from .poplar_nn import _dbg, _em, _ulist  # the emitter's shared small helpers

__all__ = ["ROI_KERNELS", "ROI_HELPERS", "ROI_CODELETS"]


def _roi_align(grad: bool):
    def emit(em, e):
        src, rois, batch = e.inputs
        out = e.outputs[0]
        x_shape = tuple(out.shape) if grad else tuple(src.shape)      # (N, C, H, W)
        bins = tuple(src.shape[2:]) if grad else tuple(out.shape[2:])  # (PH, PW)
        a = e.attrs
        scale = float(a["spatial_scale"])
        # the double scale as two floats (a vertex field is float): hi + lo
        # is the attribute to 2^-48 relative
        hi = float(np.float32(scale))
        lo = float(np.float32(scale - hi))
        em.codelets["RoiAlign"] = ROI_CODELETS["RoiAlign"]
        em.helpers.add("roiAlign")
        cast = lambda t: (f"popops::cast(graph, {em.t(t)}, poplar::FLOAT, prog, {_dbg(e)})"  # noqa: E731
                          if t.dtype.name != "float32" else em.t(t))
        v = em.fresh("roi")
        em.line(f"poplar::Tensor {v} = ipuxl_export::roiAlign(graph, {cast(src)}, {cast(rois)}, "
                f"{em.t(batch)}, {_ulist(x_shape)}, {_ulist(bins)}, {hi.hex()}f, {lo.hex()}f, "
                f"{int(a['sampling_ratio'])}u, {str(grad).lower()}, prog, {_dbg(e)});")
        if out.dtype.name != "float32":
            v = f"popops::cast(graph, {v}, {_em().ptype(out.dtype)}, prog, {_dbg(e)})"
        em.define(out, v)
    return emit


ROI_KERNELS = {"RoiAlign": _roi_align(False), "RoiAlignGrad": _roi_align(True)}

_ROI_ALIGN = r"""
// RoiAlign / RoiAlignGrad in one vertex on tile 0 (codelets.cpp): `src` is
// x [N,C,H,W] (forward) or dy [R,C,PH,PW] (gradient), the result is
// y [R,C,PH,PW] or dx [N,C,H,W]; float32.
static poplar::Tensor roiAlign(poplar::Graph &graph, const poplar::Tensor &src, const poplar::Tensor &rois,
                               const poplar::Tensor &batch, std::vector<std::size_t> xShape,
                               std::vector<std::size_t> bins, float scaleHi, float scaleLo, unsigned ratio,
                               bool grad, poplar::program::Sequence &prog, const std::string &dbg) {
  const std::size_t R = rois.dim(0);
  std::vector<std::size_t> outShape = grad ? xShape
                                           : std::vector<std::size_t>{R, xShape[1], bins[0], bins[1]};
  poplar::Tensor out = graph.addVariable(poplar::FLOAT, outShape, dbg + "/out");
  graph.setTileMapping(out, 0);
  poplar::ComputeSet cs = graph.addComputeSet(dbg);
  poplar::VertexRef v = graph.addVertex(cs, "RoiAlign");
  graph.connect(v["src"], src.flatten());
  graph.connect(v["rois"], rois.flatten());
  graph.connect(v["batch"], batch.flatten());
  graph.connect(v["out"], out.flatten());
  const char *names[] = {"N", "C", "H", "W"};
  for (int i = 0; i < 4; ++i) graph.setInitialValue(v[names[i]], unsigned(xShape[i]));
  graph.setInitialValue(v["PH"], unsigned(bins[0]));
  graph.setInitialValue(v["PW"], unsigned(bins[1]));
  graph.setInitialValue(v["scaleHi"], scaleHi);
  graph.setInitialValue(v["scaleLo"], scaleLo);
  graph.setInitialValue(v["ratio"], ratio);
  graph.setInitialValue(v["grad"], unsigned(grad ? 1 : 0));
  graph.setTileMapping(v, 0);
  prog.add(poplar::program::Execute(cs));
  return out;
}
"""

ROI_HELPERS = {"roiAlign": (_ROI_ALIGN, ())}

ROI_CODELETS = {
    "RoiAlign": r"""
// ROI align (torchvision's roi_align, aligned=False): each bin of each ROI
// averages a grid of bilinear samples of its image's channel plane; the
// gradient scatters the bin's gradient back through the same taps. Samples
// more than a pixel outside the map count 0; coordinates below 0 clamp to
// 0. Coordinates and sums in double, one rounding to float.
class RoiAlign : public Vertex {
public:
  Input<Vector<float>> src;
  Input<Vector<float>> rois;
  Input<Vector<int>> batch;
  Output<Vector<float>> out;
  unsigned N;
  unsigned C;
  unsigned H;
  unsigned W;
  unsigned PH;
  unsigned PW;
  unsigned ratio;
  unsigned grad;
  float scaleHi;
  float scaleLo;

  template <class F> void taps(const float *roi, unsigned ph, unsigned pw, F &&f) const {
    const double scale = double(scaleHi) + double(scaleLo);
    const double x1 = roi[0] * scale, y1 = roi[1] * scale, x2 = roi[2] * scale, y2 = roi[3] * scale;
    const double rw = x2 - x1 > 1.0 ? x2 - x1 : 1.0, rh = y2 - y1 > 1.0 ? y2 - y1 : 1.0;
    const double bh = rh / double(PH), bw = rw / double(PW);
    const long gh = ratio > 0 ? long(ratio) : long(std::ceil(rh / double(PH)));
    const long gw = ratio > 0 ? long(ratio) : long(std::ceil(rw / double(PW)));
    const double count = double(gh * gw > 1 ? gh * gw : 1);
    for (long iy = 0; iy < gh; ++iy) {
      const double y0 = y1 + ph * bh + (iy + 0.5) * bh / double(gh);
      for (long ix = 0; ix < gw; ++ix) {
        double y = y0, x = x1 + pw * bw + (ix + 0.5) * bw / double(gw);
        if (y < -1.0 || y > double(H) || x < -1.0 || x > double(W)) continue;
        if (y <= 0) y = 0;
        if (x <= 0) x = 0;
        long yl = long(y), xl = long(x), yh, xh;
        if (yl >= long(H) - 1) { yh = yl = long(H) - 1; y = double(yl); } else { yh = yl + 1; }
        if (xl >= long(W) - 1) { xh = xl = long(W) - 1; x = double(xl); } else { xh = xl + 1; }
        const double ly = y - double(yl), lx = x - double(xl), hy = 1.0 - ly, hx = 1.0 - lx;
        f(yl * long(W) + xl, hy * hx / count);
        f(yl * long(W) + xh, hy * lx / count);
        f(yh * long(W) + xl, ly * hx / count);
        f(yh * long(W) + xh, ly * lx / count);
      }
    }
  }

  bool compute() {
    const unsigned R = batch.size(), plane = H * W, nbins = PH * PW;
    for (unsigned r = 0; r < R; ++r)
      if (batch[r] < 0 || unsigned(batch[r]) >= N) return false;  // a batch index outside [0, N)
    if (!grad) {
      for (unsigned r = 0; r < R; ++r)
        for (unsigned c = 0; c < C; ++c) {
          const float *plane0 = &src[(unsigned(batch[r]) * C + c) * plane];
          for (unsigned ph = 0; ph < PH; ++ph)
            for (unsigned pw = 0; pw < PW; ++pw) {
              double s = 0.0;
              taps(&rois[4 * r], ph, pw, [&](long i, double w) { s += w * double(plane0[i]); });
              out[(r * C + c) * nbins + ph * PW + pw] = float(s);
            }
        }
      return true;
    }
    std::vector<double> acc(plane);
    for (unsigned n = 0; n < N; ++n)
      for (unsigned c = 0; c < C; ++c) {
        for (auto &a : acc) a = 0.0;
        for (unsigned r = 0; r < R; ++r) {
          if (unsigned(batch[r]) != n) continue;
          const float *dy = &src[(r * C + c) * nbins];
          for (unsigned ph = 0; ph < PH; ++ph)
            for (unsigned pw = 0; pw < PW; ++pw) {
              const double g = double(dy[ph * PW + pw]);
              taps(&rois[4 * r], ph, pw, [&](long i, double w) { acc[i] += w * g; });
            }
        }
        for (unsigned i = 0; i < plane; ++i) out[(n * C + c) * plane + i] = float(acc[i]);
      }
    return true;
  }
};
""",
}
