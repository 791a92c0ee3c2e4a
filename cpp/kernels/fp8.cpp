// float8 kernels (formats and rounding in core/fp8.hpp):
//
//   Pow2ScaleThenCast (x float16/float32, log2_scale int32 scalar) -> fp8
//       bytes of x * 2^log2_scale, NaN on overflow (PopXL's
//       pow2scale_cast_to_fp8)
//   CastThenPow2Scale (x fp8, log2_scale) -> float16/float32
//       value(x) * 2^log2_scale (pow2scale_cast_from_fp8)
//   MatMulPow2Scaled  (a fp8, b fp8, log2_scale) -> float16
//       numpy.matmul of the decoded operands (float32 accumulation through
//       blas::sgemm) times 2^log2_scale, rounded once (matmul_pow2scaled)
//
// A log2 scale outside [-32, 32) is a RunError at run time (PopART's
// throwIfLog2ScaleTensorNotInRange, on by default).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "../core/blas.hpp"
#include "../core/fp8.hpp"
#include "../core/parallel.hpp"
#include "common.hpp"

namespace ipuxl {
namespace {

const fp8::Format& format_of(DType t) { return t == DType::Float8_143 ? fp8::kF143 : fp8::kF152; }

int read_log2_scale(const TensorRef* s, const std::string& op) {
  const int32_t v = s->as<int32_t>()[0];
  if (v < -32 || v >= 32)
    throw RunError(op + ": the log2 scale " + std::to_string(v) +
                   " is outside the range [-32, 32) of a 6-bit signed integer");
  return (int)v;
}

void check_scale(const OpDesc& d, const TensorRef* s) {
  if (!s || s->dtype != DType::Int32 || s->nelms != 1)
    d.fail("the log2 scale must be an int32 scalar");
}

std::unique_ptr<Kernel> to_fp8_factory(const OpDesc& d) {
  d.expect_arity(2, 1);
  const TensorRef* x = d.in[0];
  const TensorRef* o = d.out[0];
  check_scale(d, d.in[1]);
  if (x->dtype != DType::Float16 && x->dtype != DType::Float32)
    d.fail(std::string("expected a float16 or float32 input, got ") + dtype_name(x->dtype));
  if (!dtype_is_fp8(o->dtype)) d.fail("the output must be float8_143 or float8_152");
  d.expect_shape(*o, x->shape);
  const TensorRef* s = d.in[1];
  const fp8::Format f = format_of(o->dtype);
  const bool half = x->dtype == DType::Float16;
  return make_kernel(
      [=](RunContext&) {
        const int sc = read_log2_scale(s, "pow2scale_cast_to_fp8");
        uint8_t* O = o->data;
        parallel_for(o->nelms, kElementwiseGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            const double v = half ? (double)(float)x->as<f16>()[i] : (double)x->as<float>()[i];
            O[i] = fp8::encode(v, f, sc, true);
          }
        });
      });
}

std::unique_ptr<Kernel> from_fp8_factory(const OpDesc& d) {
  d.expect_arity(2, 1);
  const TensorRef* x = d.in[0];
  const TensorRef* o = d.out[0];
  check_scale(d, d.in[1]);
  if (!dtype_is_fp8(x->dtype)) d.fail("the input must be float8_143 or float8_152");
  if (o->dtype != DType::Float16 && o->dtype != DType::Float32)
    d.fail(std::string("the output must be float16 or float32, got ") + dtype_name(o->dtype));
  d.expect_shape(*o, x->shape);
  const TensorRef* s = d.in[1];
  const fp8::Format f = format_of(x->dtype);
  const bool half = o->dtype == DType::Float16;
  return make_kernel(
      [=](RunContext&) {
        const int sc = read_log2_scale(s, "pow2scale_cast_from_fp8");
        double table[256];
        for (int i = 0; i < 256; ++i) table[i] = fp8::decode((uint8_t)i, f, sc);
        const uint8_t* X = x->data;
        parallel_for(o->nelms, kElementwiseGrain, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            if (half) o->as<f16>()[i] = f16((float)table[X[i]]);
            else o->as<float>()[i] = (float)table[X[i]];
          }
        });
      });
}

std::unique_ptr<Kernel> matmul_pow2_factory(const OpDesc& d) {
  d.expect_arity(3, 1);
  const TensorRef* a = d.in[0];
  const TensorRef* b = d.in[1];
  const TensorRef* o = d.out[0];
  check_scale(d, d.in[2]);
  if (!dtype_is_fp8(a->dtype) || !dtype_is_fp8(b->dtype))
    d.fail("a scaled matmul needs float8 operands");
  if (o->dtype != DType::Float16) d.fail("a scaled matmul produces float16");
  if (a->rank() == 0 || b->rank() == 0) d.fail("operands must have rank >= 1");
  Shape as = a->shape, bs = b->shape;
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), K2 = bs[bs.size() - 2], N = bs.back();
  if (K != K2) d.fail("contraction dimensions differ: " + shape_str(a->shape) + " @ " + shape_str(b->shape));
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  bool ok = false;
  Shape batch = broadcast_shapes(ab, bb, &ok);
  if (!ok) d.fail("batch dimensions do not broadcast");
  Shape expect = batch;
  if (a->rank() > 1) expect.push_back(M);
  if (b->rank() > 1) expect.push_back(N);
  d.expect_shape(*o, expect);
  const int64_t nb = shape_nelms(batch);
  auto sa = broadcast_strides(d, ab, batch);
  auto sb = broadcast_strides(d, bb, batch);
  std::vector<int64_t> a_off((size_t)nb), b_off((size_t)nb);
  std::vector<int64_t> idx(batch.size(), 0);
  for (int64_t i = 0; i < nb; ++i) {
    int64_t oa = 0, ob = 0;
    for (size_t k = 0; k < batch.size(); ++k) { oa += idx[k] * sa[k]; ob += idx[k] * sb[k]; }
    a_off[(size_t)i] = oa * M * K;
    b_off[(size_t)i] = ob * K * N;
    for (int64_t k = (int64_t)batch.size() - 1; k >= 0; --k) {
      if (++idx[(size_t)k] < batch[(size_t)k]) break;
      idx[(size_t)k] = 0;
    }
  }
  const TensorRef* s = d.in[2];
  const fp8::Format fa = format_of(a->dtype), fb = format_of(b->dtype);
  return make_kernel(
      [=](RunContext&) {
        const int sc = read_log2_scale(s, "matmul_pow2scaled");
        float ta[256], tb[256];
        for (int i = 0; i < 256; ++i) {
          ta[i] = (float)fp8::decode((uint8_t)i, fa, 0);
          tb[i] = (float)fp8::decode((uint8_t)i, fb, 0);
        }
        std::vector<float> A((size_t)a->nelms), B((size_t)b->nelms), C((size_t)(M * N));
        for (int64_t i = 0; i < a->nelms; ++i) A[(size_t)i] = ta[a->data[i]];
        for (int64_t i = 0; i < b->nelms; ++i) B[(size_t)i] = tb[b->data[i]];
        const float scale = std::ldexp(1.0f, sc);
        f16* O = o->as<f16>();
        for (int64_t i = 0; i < nb; ++i) {
          blas::sgemm(false, false, M, N, K, 1.0f, A.data() + a_off[(size_t)i], K,
                      B.data() + b_off[(size_t)i], N, 0.0f, C.data(), N);
          for (int64_t j = 0; j < M * N; ++j) O[i * M * N + j] = f16(C[(size_t)j] * scale);
        }
      });
}

// Fp8MseScale (x float16/float32) -> int32 scalar: the power-of-two scale
// of popxl.fp8_utils.host_fp8_mse_scale (its MSE search over a log2
// histogram, evaluated in double in the same order, so the result is the
// same). attrs: format_span, min_src_index, num_candidates, quantisation_error.
std::unique_ptr<Kernel> mse_scale_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  const TensorRef* x = d.in[0];
  const TensorRef* o = d.out[0];
  if (x->dtype != DType::Float16 && x->dtype != DType::Float32)
    d.fail(std::string("expected a float16 or float32 input, got ") + dtype_name(x->dtype));
  if (o->dtype != DType::Int32 || o->nelms != 1) d.fail("the output must be an int32 scalar");
  const int64_t span = d.attrs.i("format_span"), start0 = d.attrs.i("min_src_index");
  const int64_t ncand = d.attrs.i("num_candidates");
  const double qerr = d.attrs.f("quantisation_error");
  if (span < 1 || start0 < 0 || ncand < 1 || start0 + ncand > 253 || ncand > 63)
    d.fail("bad fp8 scale search parameters");
  return make_kernel(
      [=](RunContext&) {
        // fp32 binades 2^-126 .. 2^126 (253 limits), histogram with
        // under- and overflow bins at the ends.
        constexpr int kLo = -126, kN = 253;
        double limits[kN];
        for (int i = 0; i < kN; ++i) limits[i] = std::ldexp(1.0, kLo + i);
        double hist[kN + 1] = {};
        for (int64_t i = 0; i < x->nelms; ++i) {
          const double a = std::fabs(x->dtype == DType::Float16 ? (double)(float)x->as<f16>()[i]
                                                                 : (double)x->as<float>()[i]);
          if (a < limits[0]) hist[0] += 1;
          else if (a > limits[kN - 1]) hist[kN] += 1;
          else if (!std::isnan(a)) {
            int e;
            std::frexp(a, &e);
            hist[e - kLo] += 1;
          }
        }
        double total = 0.0;
        for (int i = 0; i <= kN; ++i) total += hist[i];
        for (int i = 0; i <= kN; ++i) hist[i] = hist[i] / total;
        std::vector<double> mses((size_t)ncand);
        for (int64_t index = 0; index < ncand; ++index) {
          const int64_t start = start0 + index;
          double mse = 0.0;
          for (int64_t i = 0; i < start; ++i) {
            if (i == 0) mse += (limits[0] / 2) * (limits[0] / 2);
            mse += (limits[i] * limits[i]) * hist[i + 1];
          }
          for (int64_t i = start; i < std::min<int64_t>(start + span, kN); ++i)
            mse += limits[i] * limits[i] * hist[i + 1] * qerr;
          for (int64_t i = start + span; i < kN; ++i) {
            const double dd = limits[index + span - 1] - limits[i];
            mse += (dd * dd) * hist[i + 1];
          }
          mses[(size_t)index] = mse;
        }
        double best = mses[0];
        for (double m : mses) best = std::min(best, m);
        std::vector<int64_t> biases;
        for (int64_t index = 0; index < ncand; ++index)
          if (mses[(size_t)index] == best) biases.push_back(index - 31);
        o->as<int32_t>()[0] = (int32_t)(-biases[biases.size() / 2]);
      });
}

}  // namespace

IPUXL_REGISTER_KERNEL("Fp8MseScale", mse_scale_factory);
IPUXL_REGISTER_KERNEL("Pow2ScaleThenCast", to_fp8_factory);
IPUXL_REGISTER_KERNEL("CastThenPow2Scale", from_fp8_factory);
IPUXL_REGISTER_KERNEL("MatMulPow2Scaled", matmul_pow2_factory);

}  // namespace ipuxl
