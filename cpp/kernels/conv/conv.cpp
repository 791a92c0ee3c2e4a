// Convolutions with 1, 2 or 3 spatial axes (ONNX Conv semantics, NCHW):
//
//   Conv             (x [N,C,*in], w [M,C/G,*k] [, log2_scale]) -> y [N,M,*out]
//   ConvDataGrad     (dy [N,M,*out], w [M,C/G,*k] [, log2_scale]) -> dx [N,C,*in]
//   ConvWeightsGrad  (dy [N,M,*out], x [N,C,*in]) -> dw [M,C/G,*k]
//
// attributes: strides, pads (begin of each axis, then end of each axis),
// dilations (each one per spatial axis) and groups. ConvDataGrad is also the
// transposed convolution (ops.conv_transpose): dx's spatial shape is given
// by its output tensor and must satisfy out = floor((in + pad_b + pad_e -
// dil*(k-1) - 1) / stride) + 1 on every axis.
//
// How each shape is run: plan.hpp (the plan picks one algorithm of this
// directory per op when its kernel is built, from the shape and the
// ConvOptions).
//
// Types: float32; float16 computes in float32 and rounds once; with a third
// input (an int32 scalar log2_scale) the operands are float8_143/152 (both
// the same format or mixed), decoded exactly to float32, and the result is
// multiplied by 2^log2_scale and rounded once to float16 (PopXL's
// conv_pow2scaled).
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../../core/fp8.hpp"
#include "../common.hpp"
#include "channels_in_vectors.hpp"
#include "direct.hpp"
#include "im2col.hpp"
#include "plan.hpp"
#include "tap.hpp"
#include "wgrad_direct.hpp"

namespace ipuxl {
namespace conv {
namespace {

// How an operand reaches float32: in place (float32) or converted into a
// buffer at each run (float16 exactly; fp8 through its decode table).
struct FloatView {
  const TensorRef* t = nullptr;
  std::shared_ptr<std::vector<float>> buf;

  FloatView() = default;
  explicit FloatView(const TensorRef* ref) : t(ref) {
    if (t->dtype != DType::Float32) buf = std::make_shared<std::vector<float>>((size_t)t->nelms);
  }
  const float* get() const {
    if (!buf) return t->as<float>();
    float* o = buf->data();
    const int64_t n = t->nelms;
    if (t->dtype == DType::Float16) {
      const f16* s = t->as<f16>();
      parallel_for(n, kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) o[i] = (float)s[i];
      });
    } else {
      const float* lut = (t->dtype == DType::Float8_143 ? fp8::table143() : fp8::table152()).v;
      const uint8_t* s = t->data;
      parallel_for(n, kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) o[i] = lut[s[i]];
      });
    }
    return o;
  }
};

// The output: written in place (float32) or through a float buffer rounded
// once to float16 (times 2^log2_scale for the fp8 form).
struct FloatOut {
  const TensorRef* t = nullptr;
  std::shared_ptr<std::vector<float>> buf;

  FloatOut() = default;
  explicit FloatOut(const TensorRef* ref) : t(ref) {
    if (t->dtype != DType::Float32) buf = std::make_shared<std::vector<float>>((size_t)t->nelms);
  }
  float* get() const { return buf ? buf->data() : t->as<float>(); }
  void finish(int log2_scale, bool scaled) const {
    const int64_t n = t->nelms;
    const float* s = get();
    const float scale = scaled ? std::ldexp(1.0f, log2_scale) : 1.0f;
    if (!buf) {
      if (scaled) {
        float* o = t->as<float>();
        for (int64_t i = 0; i < n; ++i) o[i] *= scale;
      }
      return;
    }
    f16* o = t->as<f16>();
    parallel_for(n, kElementwiseGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) o[i] = f16(s[i] * scale);
    });
  }
};

// The plan and the operands of one op.
struct ConvKernel {
  ConvPlan plan;
  FloatView a, b;  // Forward: x, w; DataGrad: dy, w; WeightsGrad: dy, x
  FloatOut o;
  const TensorRef* log2_scale = nullptr;
  bool scaled = false;
};

// Runs the plan's path on float32 operands A, B (the op's inputs) into O;
// false when it declined (an infinity or NaN it cannot carry), so the
// unfold form must run.
bool run_path(const ConvPlan& p, const float* A, const float* B, int64_t b_nelms, float* O) {
  // (WeightsGrad's inputs are (dy, x))
  if (p.winograd && (p.kind == ConvKind::WeightsGrad
                         ? conv_winograd::weights_grad(p.wino, A, B, O)
                         : conv_winograd::forward(p.wino, A, B, O, p.kind == ConvKind::DataGrad)))
    return true;
  switch (p.path) {
    case Path::Unfold: return false;
    case Path::DirectWeightsGrad: return run_weights_grad_direct(p.g, A, B, O);
    case Path::Tap:
      // the tap weight gradient only with a finite x, as the direct one
      if (p.kind == ConvKind::WeightsGrad) {
        if (!all_finite(B, b_nelms)) return false;
        run_tap(p.g, p.kind, B, A, O);  // the padded operand is x
      } else {
        run_tap(p.g, p.kind, A, B, O);
      }
      return true;
    case Path::DirectDataGrad:
      if (!all_finite(B, b_nelms)) return false;
      [[fallthrough]];
    case Path::Direct: {
      const bool flipped = p.path == Path::DirectDataGrad;
      if (p.oc) run_forward_oc(p.fg, A, B, O, flipped);
      else run_forward_direct(p.fg, p.form, A, B, O, flipped);
      return true;
    }
  }
  return false;
}

void run_unfold(const ConvPlan& p, const float* A, const float* B, float* O) {
  if (p.batched) {
    switch (p.kind) {
      case ConvKind::Forward: run_forward_batched(p.g, A, B, O); break;
      case ConvKind::DataGrad: run_data_grad_batched(p.g, A, B, O); break;
      case ConvKind::WeightsGrad: run_weights_grad_batched(p.g, A, B, O); break;
    }
    return;
  }
  const Im2colBuffers bufs{p.nb, p.col ? p.col->data() : nullptr,
                           p.tmp ? p.tmp->data() : nullptr};
  switch (p.kind) {
    case ConvKind::Forward: run_forward_im2col(p.g, bufs, A, B, O); break;
    case ConvKind::DataGrad: run_data_grad_im2col(p.g, bufs, A, B, O); break;
    case ConvKind::WeightsGrad: run_weights_grad_im2col(p.g, bufs, A, B, O); break;
  }
}

std::unique_ptr<Kernel> conv_factory_kind(const OpDesc& d, ConvKind kind) {
  if (d.out.size() != 1) d.fail("expected 1 output");
  const bool scaled = d.in.size() == 3;
  if (d.in.size() != 2 && !(scaled && kind != ConvKind::WeightsGrad))
    d.fail("expected 2 inputs (3 with a log2 scale)");
  for (const TensorRef* t : d.in)
    if (!t) d.fail("an input is missing");
  const TensorRef* a = d.in[0];
  const TensorRef* b = d.in[1];
  const TensorRef* o = d.out[0];
  ConvKernel p;
  p.scaled = scaled;
  if (scaled) {
    p.log2_scale = d.in[2];
    if (p.log2_scale->dtype != DType::Int32 || p.log2_scale->nelms != 1)
      d.fail("the log2 scale '" + p.log2_scale->name + "' must be an int32 scalar");
    if (!dtype_is_fp8(a->dtype) || !dtype_is_fp8(b->dtype))
      d.fail("a scaled convolution needs float8 operands, got " + std::string(dtype_name(a->dtype)) +
             " and " + dtype_name(b->dtype));
    if (o->dtype != DType::Float16) d.fail("a scaled convolution produces float16");
  } else {
    if (a->dtype != DType::Float32 && a->dtype != DType::Float16)
      d.fail(std::string("expected float32 or float16 operands, got ") + dtype_name(a->dtype));
    d.expect_same_dtype(*a, *b);
    d.expect_same_dtype(*a, *o);
  }
  Geom g;
  switch (kind) {
    case ConvKind::Forward: g = make_geom(d, a->shape, b->shape, o->shape); break;
    case ConvKind::DataGrad: g = make_geom(d, o->shape, b->shape, a->shape); break;
    case ConvKind::WeightsGrad: g = make_geom(d, b->shape, o->shape, a->shape); break;
  }
  p.plan = make_plan(kind, g, conv_options());
  p.a = FloatView(a);
  p.b = FloatView(b);
  p.o = FloatOut(o);
  return make_kernel([p](RunContext&) {
    int log2_scale = 0;
    if (p.scaled) {
      log2_scale = p.log2_scale->as<int32_t>()[0];
      if (log2_scale < -32 || log2_scale >= 32)
        throw RunError("conv_pow2scaled: the log2 scale " + std::to_string(log2_scale) +
                       " is outside the range [-32, 32) of a 6-bit signed integer");
    }
    const float* A = p.a.get();
    const float* B = p.b.get();
    float* O = p.o.get();
    if (!run_path(p.plan, A, B, p.b.t->nelms, O)) run_unfold(p.plan, A, B, O);
    p.o.finish(log2_scale, p.scaled);
  });
}

}  // namespace
}  // namespace conv

IPUXL_REGISTER_KERNEL("Conv", [](const OpDesc& d) {
  return conv::conv_factory_kind(d, conv::ConvKind::Forward);
});
IPUXL_REGISTER_KERNEL("ConvDataGrad", [](const OpDesc& d) {
  return conv::conv_factory_kind(d, conv::ConvKind::DataGrad);
});
IPUXL_REGISTER_KERNEL("ConvWeightsGrad", [](const OpDesc& d) {
  return conv::conv_factory_kind(d, conv::ConvKind::WeightsGrad);
});

}  // namespace ipuxl
