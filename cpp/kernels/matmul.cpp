// MatMul with NumPy matmul semantics: 1-D operands are promoted (and the
// promoted axis dropped from the output), leading batch axes broadcast.
// float32 uses the installed BLAS; float16 computes in float32 partials and
// rounds once (as the IPU's AMP with float partials), or, with half partials
// (partials_type "half") on a CPU with AVX512-FP16, accumulates in float16
// (core/hgemm.hpp); other types use the reference loop with a wide
// accumulator.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "../core/blas.hpp"
#include "../core/gemm.hpp"
#include "../core/half.hpp"
#include "../core/hgemm.hpp"
#include "../core/isa.hpp"
#include "../core/parallel.hpp"
#include "fastmath.hpp"
#include "common.hpp"
#include "f16_block.hpp"

namespace ipuxl {
namespace {

std::unique_ptr<Kernel> matmul_factory_impl(const OpDesc& d, const TensorRef* bias, bool gelu);

// Bias add (and GELU) fused into the GEMM by the lowering: applied by the
// thread that computed each block of the result, while it is in cache.
struct BiasEpilogue {
  const float* bias;
  bool gelu;
  static void apply(const void* c, float* C, int64_t ldc, int64_t i0, int64_t i1, int64_t j0,
                    int64_t j1) {
    const auto* e = static_cast<const BiasEpilogue*>(c);
    const float* bias = e->bias;
    // Vectorised for the instruction-set level in use (isa::run).
    if (e->gelu) {
      isa::run([&](int64_t b, int64_t end) {
        for (int64_t i = b; i < end; ++i) {
          float* row = C + i * ldc;
          for (int64_t j = j0; j < j1; ++j)
            row[j] = fastmath::gelu_tanh(row[j] + bias[j]);  // the Gelu kernel's formula
        }
      }, i0, i1);
    } else {
      isa::run([&](int64_t b, int64_t end) {
        for (int64_t i = b; i < end; ++i) {
          float* row = C + i * ldc;
          for (int64_t j = j0; j < j1; ++j) row[j] += bias[j];
        }
      }, i0, i1);
    }
  }
};

// The float16 bias (and GELU) epilogue on a float32 product C [M, N]:
// out = f16(gelu(f16(f16(C) + bias))) (without GELU: f16(f16(C) + bias)),
// the roundings of the unfused MatMul, Add and Gelu float16 kernels, with
// their float formulas (f16_block.hpp), in one pass over C.
void half_epilogue(const float* C, const f16* bias, bool gelu, int64_t M, int64_t N, f16* out) {
  std::vector<float> bf((size_t)N);
  half::to_float(bias, bf.data(), N);
  const float* bp = bf.data();
  parallel_for(M, std::max<int64_t>(1, f16blk::kGrain / std::max<int64_t>(N, 1)),
               [&](int64_t r0, int64_t r1) {
    alignas(64) float v[f16blk::kBlock];
    alignas(64) f16 h[f16blk::kBlock];
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t j0 = 0; j0 < N; j0 += f16blk::kBlock) {
        const int64_t len = std::min<int64_t>(f16blk::kBlock, N - j0);
        f16* dst = out + r * N + j0;
        half::from_float(C + r * N + j0, h, len);  // the product, rounded
        half::to_float(h, v, len);
        const float* bj = bp + j0;
        f16blk::run_exact([&](int64_t, int64_t m) {
          for (int64_t i = 0; i < m; ++i) v[i] += bj[i];
        }, 0, len);
        if (!gelu) {
          half::from_float(v, dst, len);
          continue;
        }
        half::from_float(v, h, len);  // the sum, rounded
        half::to_float(h, v, len);
        f16blk::run_exact([&](int64_t, int64_t m) {
          for (int64_t i = 0; i < m; ++i) v[i] = fastmath::gelu_tanh(v[i]);
        }, 0, len);
        half::from_float(v, dst, len);
      }
    }
  });
}

// Whether a float16 product runs on float16 partials: the op asks for half
// partials (ops.matmul's partials_type, or partialsTypeMatMuls) and the CPU
// has native float16 FMAs at the level in use. Elsewhere half partials
// accumulate in float32, the more accurate choice at no cost in speed.
bool native_half_partials(const OpDesc& d) {
  return d.attrs.s("partials_type", "float") == "half" && gemm::half_partials_native();
}

// C = alpha * op(A) @ op(B) + beta * C into the third input, which the output
// aliases: a weight update scaled_add_(W, X^T @ G, b=-lr) folded by the
// lowering, so the gradient is never stored and W is read and written once.
std::unique_ptr<Kernel> accumulate_factory(const OpDesc& d) {
  d.expect_arity(3, 1);
  const TensorRef* a = d.in[0];
  const TensorRef* b = d.in[1];
  const TensorRef* c = d.in[2];
  const TensorRef* o = d.out[0];
  const DType dt = c->dtype;
  for (const TensorRef* t : {a, b, c})
    if (t->dtype != dt || (dt != DType::Float32 && dt != DType::Float16) || t->rank() != 2)
      d.fail("an accumulating product needs 2-D float32 (or all float16) operands; '" +
             t->name + "' is " + dtype_name(t->dtype) + shape_str(t->shape));
  if (o->data != c->data)
    d.fail("the output must alias the accumulated input '" + c->name + "'");
  const bool ta = d.attrs.i("trans_lhs", 0) != 0, tb = d.attrs.i("trans_rhs", 0) != 0;
  const int64_t M = a->shape[ta ? 1 : 0], K = a->shape[ta ? 0 : 1];
  const int64_t K2 = b->shape[tb ? 1 : 0], N = b->shape[tb ? 0 : 1];
  if (K != K2)
    d.fail("contraction dimensions differ: " + shape_str(a->shape) + " @ " + shape_str(b->shape));
  d.expect_shape(*c, Shape{M, N});
  d.expect_shape(*o, Shape{M, N});
  const float alpha = (float)d.attrs.f("alpha", 1.0), beta = (float)d.attrs.f("beta", 1.0);
  const blas::SgemmImpl impl = blas::plan(ta, tb, M, N, K);  // a fixed rule of the shape
  if (dt == DType::Float16) {
    // The unfused ops' roundings: the product to float16 (MatMul), then
    // C = f16(beta * C + alpha * product) (ScaledAdd's float formula).
    const bool half_partials = native_half_partials(d);
    return make_kernel([=](RunContext&) {
      thread_local std::vector<float> fa, fb, fp;
      const int64_t na = a->nelms, nbb = b->nelms, no = o->nelms;
      if ((int64_t)fp.size() < no) fp.resize((size_t)no);
      if (half_partials) {
        gemm::hgemm_half_partials(ta, tb, M, N, K, a->as<f16>(), ta ? M : K, b->as<f16>(),
                                  tb ? K : N, fp.data(), N);
      } else {
        if ((int64_t)fa.size() < na) fa.resize((size_t)na);
        if ((int64_t)fb.size() < nbb) fb.resize((size_t)nbb);
        // Transposed operands converted transposed: the unfused MatMul's GEMM.
        f16blk::to_float_op(a->as<f16>(), fa.data(), na, ta, K, M);
        f16blk::to_float_op(b->as<f16>(), fb.data(), nbb, tb, N, K);
        blas::sgemm_with(blas::SgemmImpl::Auto, false, false, M, N, K, 1.0f, fa.data(), K,
                         fb.data(), N, 0.0f, fp.data(), N);
      }
      const float* P = fp.data();
      f16* W = o->as<f16>();
      parallel_for(no, f16blk::kGrain, [&](int64_t i0, int64_t i1) {
        alignas(64) float pv[f16blk::kBlock], wv[f16blk::kBlock];
        alignas(64) f16 h[f16blk::kBlock];
        for (int64_t s = i0; s < i1; s += f16blk::kBlock) {
          const int64_t len = std::min<int64_t>(f16blk::kBlock, i1 - s);
          half::from_float(P + s, h, len);  // the product, rounded
          half::to_float(h, pv, len);
          half::to_float(W + s, wv, len);
          f16blk::run_exact([&](int64_t, int64_t m) {
            for (int64_t i = 0; i < m; ++i) wv[i] = beta * wv[i] + alpha * pv[i];
          }, 0, len);
          half::from_float(wv, W + s, len);
        }
      });
    });
  }
  return make_kernel(
      [=](RunContext&) {
        blas::sgemm_with(impl, ta, tb, M, N, K, alpha, a->as<float>(), ta ? M : K,
                         b->as<float>(), tb ? K : N, beta, o->as<float>(), N);
      });
}

std::unique_ptr<Kernel> matmul_factory(const OpDesc& d) {
  const std::string epilogue = d.attrs.s("epilogue", "");
  if (epilogue == "accumulate") return accumulate_factory(d);
  if (!epilogue.empty()) {
    if (epilogue != "bias" && epilogue != "bias_gelu")
      d.fail("epilogue must be 'bias', 'bias_gelu' or 'accumulate', got '" + epilogue + "'");
    d.expect_arity(3, 1);
    const TensorRef* bias = d.in[2];
    const DType dt = d.in[0]->dtype;
    if (bias->dtype != dt || (dt != DType::Float32 && dt != DType::Float16))
      d.fail("a fused epilogue needs float32 or float16 operands and a bias of their dtype");
    if (d.out[0]->rank() != 2 || bias->nelms != d.out[0]->shape[1])
      d.fail("a fused bias must have one value per output column of a 2-D product");
    OpDesc plain = d;
    plain.in.pop_back();
    plain.attrs.values.erase("epilogue");
    return matmul_factory_impl(plain, bias, epilogue == "bias_gelu");
  }
  return matmul_factory_impl(d, nullptr, false);
}

// Batched products up to this many multiply-adds each run whole, several
// per thread (each GEMM alone would split a tiny product over the pool);
// a thread gets at least kBatchSplitMinMacs of them.
constexpr int64_t kBatchSplitMaxMacs = int64_t(1) << 21;
constexpr int64_t kBatchSplitMinMacs = int64_t(1) << 16;

// Runs one(i) for the nb products of a batched matmul of `macs`
// multiply-adds each. Small products (attention heads) go whole to a
// thread, so each is computed exactly as it would be alone (the GEMM splits
// only rows and columns of C, never K); up to four chunks per thread,
// claimed by whichever thread is free (a descheduled thread holds up one
// chunk, not a half). Larger products run one after the other, each split
// by the GEMM itself.
template <class One>
void run_batched(int64_t nb, int64_t macs, const One& one) {
  if (nb > 1 && macs <= kBatchSplitMaxMacs) {
    const int64_t per = std::max<int64_t>(1, kBatchSplitMinMacs / std::max<int64_t>(macs, 1));
    parallel_for_chunks(nb, std::min<int64_t>(4 * num_threads(), (nb + per - 1) / per),
                        [&](int64_t b0, int64_t b1) {
                          for (int64_t i = b0; i < b1; ++i) one(i);
                        });
    return;
  }
  for (int64_t i = 0; i < nb; ++i) one(i);
}

std::unique_ptr<Kernel> matmul_factory_impl(const OpDesc& d, const TensorRef* bias, bool gelu) {
  d.expect_arity(2, 1);
  d.expect_same_dtype(*d.in[0], *d.in[1]);
  d.expect_same_dtype(*d.in[0], *d.out[0]);
  const TensorRef* a = d.in[0];
  const TensorRef* b = d.in[1];
  const TensorRef* o = d.out[0];
  if (a->rank() == 0 || b->rank() == 0) d.fail("operands must have rank >= 1");
  // trans_lhs / trans_rhs: the operand is stored with its last two axes
  // swapped (a folded Transpose); float32 and float16.
  const bool ta = d.attrs.i("trans_lhs", 0) != 0, tb = d.attrs.i("trans_rhs", 0) != 0;
  if ((ta || tb) && a->dtype != DType::Float32 && a->dtype != DType::Float16)
    d.fail("transposed operands are supported for float32 and float16 only");
  if ((ta && a->rank() < 2) || (tb && b->rank() < 2))
    d.fail("a transposed operand must have rank >= 2");
  Shape as = a->shape, bs = b->shape;
  if (ta) std::swap(as[as.size() - 1], as[as.size() - 2]);
  if (tb) std::swap(bs[bs.size() - 1], bs[bs.size() - 2]);
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back();
  const int64_t K2 = bs[bs.size() - 2], N = bs.back();
  if (K != K2)
    d.fail("contraction dimensions differ: " + shape_str(a->shape) + " @ " + shape_str(b->shape));
  Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  bool ok = false;
  Shape batch = broadcast_shapes(ab, bb, &ok);
  if (!ok) d.fail("batch dimensions do not broadcast: " + shape_str(a->shape) + " @ " +
                  shape_str(b->shape));
  Shape expect = batch;
  if (a->rank() > 1) expect.push_back(M);
  if (b->rank() > 1) expect.push_back(N);
  d.expect_shape(*o, expect);

  const int64_t nb = shape_nelms(batch);
  std::vector<int64_t> a_off((size_t)nb), b_off((size_t)nb);
  {
    Shape ab_full = ab, bb_full = bb;
    auto sa = broadcast_strides(d, ab_full, batch);
    auto sb = broadcast_strides(d, bb_full, batch);
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
  }
  const DType dt = a->dtype;
  if (bias && ((dt != DType::Float32 && dt != DType::Float16) || nb != 1))
    d.fail("a fused epilogue needs a single float32 or float16 product");
  bool rhs_fixed = false;
  for (int i : d.host_only_inputs) rhs_fixed = rhs_fixed || i == 1;
  // Pre-packing saves every product the packing of B, a large share of the
  // work at batch-sized M (bench/gemm.py's core+pack column shows it). Above
  // kPrepackMaxM the packing is
  // a negligible share and the packed copy not worth its memory.
  constexpr int64_t kPrepackMaxM = 1024;
  // The core's GEMM or the BLAS, by the fixed rule of the level and the
  // shape (blas.cpp; the fused epilogues are the core's).
  const blas::SgemmImpl impl =
      dt == DType::Float32 && !bias
          ? blas::plan(ta, tb, M, N, K, rhs_fixed && nb == 1 && M <= kPrepackMaxM)
          : blas::SgemmImpl::Core;
  if (dt == DType::Float32 && rhs_fixed && nb == 1 && M > 0 && M <= kPrepackMaxM && N > 0 &&
      K > 0 && impl == blas::SgemmImpl::Core) {
    // The rhs changes only when the host writes it: pack it once per host
    // write instead of in every product (a weight matrix at inference).
    auto packed = std::make_shared<gemm::PackedB>();
    auto epoch = std::make_shared<uint64_t>(0);
    return make_kernel(
        [=](RunContext& ctx) {
          if (*epoch != ctx.host_write_epoch) {
            if (packed->K() == K && packed->N() == N)
              packed->repack(tb, b->as<float>(), tb ? K : N);
            else
              *packed = gemm::PackedB(tb, K, N, b->as<float>(), tb ? K : N);
            *epoch = ctx.host_write_epoch;
          }
          BiasEpilogue ec{bias ? bias->as<float>() : nullptr, gelu};
          gemm::Epilogue ep{&BiasEpilogue::apply, &ec};
          gemm::sgemm_packed(ta, M, 1.0f, a->as<float>(), ta ? M : K, *packed, 0.0f,
                             o->as<float>(), N, bias ? &ep : nullptr);
        });
  }
  if (dt == DType::Float32) {
    return make_kernel(
        [=](RunContext&) {
          const float* A = a->as<float>();
          const float* B = b->as<float>();
          float* O = o->as<float>();
          if (bias) {  // the lowering fuses only single (non-batched) products
            BiasEpilogue ec{bias->as<float>(), gelu};
            gemm::Epilogue ep{&BiasEpilogue::apply, &ec};
            gemm::sgemm(ta, tb, M, N, K, 1.0f, A, ta ? M : K, B, tb ? K : N, 0.0f, O, N, &ep);
            return;
          }
          auto one = [&](int64_t i) {
            blas::sgemm_with(impl, ta, tb, M, N, K, 1.0f, A + a_off[(size_t)i], ta ? M : K,
                             B + b_off[(size_t)i], tb ? K : N, 0.0f, O + i * M * N, N);
          };
          run_batched(nb, M * N * K, one);
        });
  }
  if (dt == DType::Float16) {
    // Both operands converted to float32 once (F16C, half.hpp), the float32
    // products (each rounded once to float16 at the end), as the IPU's AMP
    // with float partials. Batched products are split over the threads as
    // the float32 ones: each product is computed as it would be alone, so
    // the results do not depend on the thread count. A fused epilogue
    // rounds as the unfused ops would: the product to float16, the sum with
    // the bias to float16, then GELU of that (half_epilogue).
    // With native half partials the float16 operands go to the float16
    // GEMM as stored, transposed or not (hgemm.hpp).
    const bool half_partials = native_half_partials(d);
    return make_kernel(
        [=](RunContext&) {
          const int64_t na = a->nelms, nbb = b->nelms, no = o->nelms;
          // Per-thread scratch, kept between runs: fresh pages for every
          // product cost more than the conversions.
          thread_local std::vector<float> fa, fb, fo;
          if ((int64_t)fo.size() < no) fo.resize((size_t)no);
          float* O = fo.data();
          if (half_partials) {
            const f16* A = a->as<f16>();
            const f16* B = b->as<f16>();
            run_batched(nb, M * N * K, [&](int64_t i) {
              gemm::hgemm_half_partials(ta, tb, M, N, K, A + a_off[(size_t)i], ta ? M : K,
                                        B + b_off[(size_t)i], tb ? K : N, O + i * M * N, N);
            });
          } else {
            if ((int64_t)fa.size() < na) fa.resize((size_t)na);
            if ((int64_t)fb.size() < nbb) fb.resize((size_t)nbb);
            // A transposed operand is converted transposed (its stored last
            // two axes are [K, M] / [N, K]): the product is then the unfused
            // Transpose + MatMul's, bit for bit.
            f16blk::to_float_op(a->as<f16>(), fa.data(), na, ta, K, M);
            f16blk::to_float_op(b->as<f16>(), fb.data(), nbb, tb, N, K);
            const float* A = fa.data();
            const float* B = fb.data();
            run_batched(nb, M * N * K, [&](int64_t i) {
              blas::sgemm_with(blas::SgemmImpl::Auto, false, false, M, N, K, 1.0f,
                               A + a_off[(size_t)i], K, B + b_off[(size_t)i], N, 0.0f,
                               O + i * M * N, N);
            });
          }
          if (bias)
            half_epilogue(O, bias->as<f16>(), gelu, M, N, o->as<f16>());
          else
            half::from_float_parallel(O, o->as<f16>(), no);
        });
  }
  std::unique_ptr<Kernel> k;
  bool ok2 = IPUXL_DISPATCH_NUMERIC(dt, {
    using T = scalar_t;
    using Acc = std::conditional_t<std::is_floating_point_v<T> || std::is_same_v<T, f16>, double,
                                   std::conditional_t<std::is_signed_v<T>, int64_t, uint64_t>>;
    k = make_kernel(
        [=](RunContext&) {
          const T* A = a->as<T>();
          const T* B = b->as<T>();
          T* O = o->as<T>();
          for (int64_t i = 0; i < nb; ++i)
            blas::gemm_ref<T, Acc>(M, N, K, A + a_off[(size_t)i], B + b_off[(size_t)i],
                                   O + i * M * N);
        });
  });
  if (!ok2) d.fail(std::string("unsupported dtype ") + dtype_name(dt));
  return k;
}

// ---------------------------------------------------------------- fused input gradient + update
// dX = G @ W^T and then W = beta*W + alpha*(X^T @ G), in one pass over W
// (the lowering fuses a layer's input gradient with its folded SGD update
// when the batch is small: prefer_fused_input_grad_update). At batch 8 both
// products are limited by moving W, not by arithmetic: separately they read
// W twice and write it once, fused each row of W is read once, used for its
// dX column while in L1, then updated (gemm::input_grad_update, one copy per
// instruction-set level). G [B, N], W [M, N], X [B, M], dX [B, M].
constexpr int64_t kFusedMaxBatch = 16;

std::unique_ptr<Kernel> input_grad_update_factory(const OpDesc& d) {
  d.expect_arity(3, 2);
  const TensorRef* g = d.in[0];
  const TensorRef* w = d.in[1];
  const TensorRef* x = d.in[2];
  const TensorRef* dx = d.out[0];
  const TensorRef* wo = d.out[1];
  for (const TensorRef* t : {g, w, x, dx, wo})
    if (t->dtype != DType::Float32 || t->rank() != 2)
      d.fail("needs 2-D float32 tensors; '" + t->name + "' is " + dtype_name(t->dtype) +
             shape_str(t->shape));
  if (wo->data != w->data) d.fail("the updated output must alias the weight '" + w->name + "'");
  const int64_t B = g->shape[0], N = g->shape[1], M = w->shape[0];
  if (B < 1 || B > kFusedMaxBatch)
    d.fail("batch " + std::to_string(B) + " of '" + g->name + "' is outside [1, " +
           std::to_string(kFusedMaxBatch) + "]");
  d.expect_shape(*w, Shape{M, N});
  d.expect_shape(*x, Shape{B, M});
  d.expect_shape(*dx, Shape{B, M});
  d.expect_shape(*wo, Shape{M, N});
  for (const TensorRef* t : {g, w, x}) {
    const uint8_t *p = dx->data, *q = t->data;
    if (p < q + t->nbytes() && q < p + dx->nbytes())
      d.fail("the input gradient '" + dx->name + "' overlaps the operand '" + t->name + "'");
  }
  const float alpha = (float)d.attrs.f("alpha", 1.0), beta = (float)d.attrs.f("beta", 1.0);
  // Rows per task: enough work (~4 B N flops each) to pay for a wake-up.
  const int64_t grain = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, N * B / 8));
  return make_kernel(
      [=](RunContext&) {
        const float* G = g->as<float>();
        const float* X = x->as<float>();
        float* W = wo->as<float>();
        float* DX = dx->as<float>();
        parallel_for(M, grain, [&](int64_t r0, int64_t r1) {
          gemm::input_grad_update(G, B, N, W, X, M, DX, alpha, beta, r0, r1);
        });
      });
}

}  // namespace

IPUXL_REGISTER_KERNEL("MatMul", matmul_factory);
IPUXL_REGISTER_KERNEL("MatMulInputGradUpdate", input_grad_update_factory);

}  // namespace ipuxl
