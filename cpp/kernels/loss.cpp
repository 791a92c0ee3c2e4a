// Negative log likelihood losses, following PopART's NllOp and
// NlllWithSoftmaxGradDirectOp.
//
// probs has shape [D1..Dn, C] (classes last) and dtype float16/float32;
// labels has shape [D1..Dn] and dtype int32/uint32; each of the
// N = D1*..*Dn samples picks p = probs[s, labels[s]].
//   Nll:        loss_s = -log(max(p, eps)), eps = 1e-7 (6.104e-5 for float16),
//               or -p when log_prob=1 (probs already hold log-probabilities).
//   NlllWithSoftmaxGradDirect (probs = softmax(logits)):
//               loss_s = -log(p + 1e-7) and
//               dx[s, c] = (probs[s, c] - onehot(labels[s])[c]) * g_s * scale.
// Attributes: reduction ("mean" | "sum" | "none"), has_ignore_index (0/1),
// ignore_index, log_prob (Nll only).
// A sample whose label equals ignore_index contributes 0 to the loss and a
// zero row to dx, and is not counted by the mean; a mean over only ignored
// samples is NaN for the loss (as PopART and PyTorch) and for dx (as PopART,
// which scales by 1/0; PyTorch gives zeros). A label outside [0, C) that is
// not ignored is a run-time error (RuntimeError naming the sample), as in
// PyTorch; the IPU's one-hot encoding would silently select p = 0. The mean divides by the number of counted
// samples, for the loss and for dx alike. (PopART's dx, without
// ignore_index, divides by probs.shape[0] instead, which differs from N when
// probs has rank > 2; ipuxl keeps dx the gradient of the returned loss.)
// g_s is loss_grad (dE/dl): a single value, or one per sample when it has
// the labels' shape. All arithmetic is in double; outputs are rounded once
// to the probs dtype.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "common.hpp"

namespace ipuxl {
namespace {

enum class Red { Mean, Sum, None };

struct NllShape {
  int64_t n = 0;  // samples
  int64_t c = 0;  // classes
};

NllShape check_probs_labels(const OpDesc& d, const TensorRef& probs, const TensorRef& labels) {
  if (probs.dtype != DType::Float16 && probs.dtype != DType::Float32)
    d.fail(std::string("probs must be float16 or float32, got ") + dtype_name(probs.dtype));
  if (labels.dtype != DType::Int32 && labels.dtype != DType::UInt32)
    d.fail(std::string("labels must be int32 or uint32, got ") + dtype_name(labels.dtype));
  if (probs.rank() == 0) d.fail("probs must have rank >= 1");
  Shape expect(probs.shape.begin(), probs.shape.end() - 1);
  if (labels.shape != expect)
    d.fail("labels have shape " + shape_str(labels.shape) + ", expected " + shape_str(expect) +
           " (all but the last dimension of probs " + shape_str(probs.shape) + ")");
  return {labels.nelms, probs.shape.back()};
}

Red parse_reduction(const OpDesc& d) {
  std::string r = d.attrs.s("reduction", "mean");
  if (r == "mean") return Red::Mean;
  if (r == "sum") return Red::Sum;
  if (r == "none") return Red::None;
  d.fail("reduction must be 'mean', 'sum' or 'none', got '" + r + "'");
}

void check_loss_out(const OpDesc& d, const TensorRef& loss, const TensorRef& probs,
                    const TensorRef& labels, Red red) {
  d.expect_same_dtype(probs, loss);
  d.expect_shape(loss, red == Red::None ? labels.shape : Shape{});
}

// Per-sample selection shared by both ops.
template <class L>
struct Selector {
  bool has_ignore;
  L ignore;  // the ignore index as the labels' type (PopART compares so)
  int64_t c;
  std::string op;  // for messages
  // The class of sample s, or -1 for an ignored sample; sets `counted`. A
  // label outside [0, C) that is not ignored is an error: the IPU would
  // silently treat it as probability 0, a loss of -log(eps).
  int64_t pick(const L* labels, int64_t s, bool* counted) const {
    L l = labels[s];
    *counted = !(has_ignore && l == ignore);
    int64_t li = (int64_t)l;
    if (li >= 0 && li < c) return li;
    if (*counted)
      throw RunError(op + ": label " + std::to_string(li) + " of sample " + std::to_string(s) +
                     " is outside [0, " + std::to_string(c) +
                     ") and is not the ignore_index; fix the labels or pass ignore_index");
    return -1;
  }
};

template <class T, class L>
std::unique_ptr<Kernel> nll_kernel(const OpDesc& d, NllShape sh, Red red) {
  const TensorRef* probs = d.in[0];
  const TensorRef* labels = d.in[1];
  const TensorRef* out = d.out[0];
  const bool log_prob = d.attrs.i("log_prob", 0) != 0;
  Selector<L> sel{d.attrs.i("has_ignore_index", 0) != 0, (L)d.attrs.i("ignore_index", 0), sh.c,
                 d.type + " op '" + d.name + "'"};
  const double eps = (double)(T)(std::is_same_v<T, f16> ? 6.104e-05 : 1.0e-7);
  return make_kernel(
      [=](RunContext&) {
        const T* P = probs->as<T>();
        const L* Lb = labels->as<L>();
        T* O = out->as<T>();
        double total = 0;
        int64_t count = 0;
        for (int64_t s = 0; s < sh.n; ++s) {
          bool counted;
          int64_t cls = sel.pick(Lb, s, &counted);
          double p = cls >= 0 ? (double)P[s * sh.c + cls] : 0.0;
          double loss = log_prob ? -p : -std::log(std::max(p, eps));
          if (!counted) loss = 0.0;
          count += counted;
          if (red == Red::None) O[s] = (T)loss;
          else total += loss;
        }
        if (red == Red::Sum) O[0] = (T)total;
        if (red == Red::Mean) O[0] = (T)(total * (1.0 / (double)(sel.has_ignore ? count : sh.n)));
      });
}

std::unique_ptr<Kernel> nll_factory(const OpDesc& d) {
  d.expect_arity(2, 1);
  NllShape sh = check_probs_labels(d, *d.in[0], *d.in[1]);
  Red red = parse_reduction(d);
  check_loss_out(d, *d.out[0], *d.in[0], *d.in[1], red);
  const bool f16_probs = d.in[0]->dtype == DType::Float16;
  const bool i32 = d.in[1]->dtype == DType::Int32;
  if (f16_probs)
    return i32 ? nll_kernel<f16, int32_t>(d, sh, red) : nll_kernel<f16, uint32_t>(d, sh, red);
  return i32 ? nll_kernel<float, int32_t>(d, sh, red) : nll_kernel<float, uint32_t>(d, sh, red);
}

template <class T, class L, class G>
std::unique_ptr<Kernel> nll_softmax_grad_kernel(const OpDesc& d, NllShape sh, Red red) {
  const TensorRef* probs = d.in[0];
  const TensorRef* labels = d.in[1];
  const TensorRef* grad = d.in[2];
  const TensorRef* loss_out = d.out[0];
  const TensorRef* dx = d.out[1];
  Selector<L> sel{d.attrs.i("has_ignore_index", 0) != 0, (L)d.attrs.i("ignore_index", 0), sh.c,
                 d.type + " op '" + d.name + "'"};
  const bool per_sample_grad = grad->nelms != 1;
  const double eps = (double)(T)1.0e-7;
  return make_kernel(
      [=](RunContext&) {
        const T* P = probs->as<T>();
        const L* Lb = labels->as<L>();
        const G* Gr = grad->as<G>();
        T* LO = loss_out->as<T>();
        T* DX = dx->as<T>();
        int64_t count = 0;
        if (red == Red::Mean) {
          if (sel.has_ignore) {
            for (int64_t s = 0; s < sh.n; ++s) {
              bool counted;
              sel.pick(Lb, s, &counted);
              count += counted;
            }
          } else {
            count = sh.n;
          }
        }
        const double scale = red == Red::Mean ? 1.0 / (double)count : 1.0;
        double total = 0;
        for (int64_t s = 0; s < sh.n; ++s) {
          bool counted;
          int64_t cls = sel.pick(Lb, s, &counted);
          const double mask = counted ? 1.0 : 0.0;
          const double g = (double)Gr[per_sample_grad ? s : 0] * scale;
          const T* prow = P + s * sh.c;
          T* drow = DX + s * sh.c;
          for (int64_t j = 0; j < sh.c; ++j) {
            double onehot = j == cls ? 1.0 : 0.0;
            drow[j] = (T)(mask * ((double)prow[j] - onehot) * g);
          }
          double p = cls >= 0 ? (double)prow[cls] : 0.0;
          double loss = mask * -std::log(p + eps);
          if (red == Red::None) LO[s] = (T)loss;
          else total += loss;
        }
        if (red != Red::None) LO[0] = (T)(total * scale);
      });
}

std::unique_ptr<Kernel> nll_softmax_grad_factory(const OpDesc& d) {
  d.expect_arity(3, 2);
  const TensorRef* probs = d.in[0];
  const TensorRef* labels = d.in[1];
  const TensorRef* grad = d.in[2];
  NllShape sh = check_probs_labels(d, *probs, *labels);
  Red red = parse_reduction(d);
  check_loss_out(d, *d.out[0], *probs, *labels, red);
  d.expect_same_dtype(*probs, *d.out[1]);
  d.expect_shape(*d.out[1], probs->shape);
  if (grad->dtype != DType::Float32 && grad->dtype != probs->dtype)
    d.fail(std::string("loss_grad must be float32 or the probs dtype, got ") +
           dtype_name(grad->dtype));
  if (grad->nelms != 1 && grad->shape != labels->shape)
    d.fail("loss_grad has shape " + shape_str(grad->shape) +
           ", expected a single value or the labels shape " + shape_str(labels->shape));
  const bool f16_probs = probs->dtype == DType::Float16;
  const bool i32 = labels->dtype == DType::Int32;
  const bool g32 = grad->dtype == DType::Float32;
  if (f16_probs) {
    if (i32) return g32 ? nll_softmax_grad_kernel<f16, int32_t, float>(d, sh, red)
                        : nll_softmax_grad_kernel<f16, int32_t, f16>(d, sh, red);
    return g32 ? nll_softmax_grad_kernel<f16, uint32_t, float>(d, sh, red)
               : nll_softmax_grad_kernel<f16, uint32_t, f16>(d, sh, red);
  }
  return i32 ? nll_softmax_grad_kernel<float, int32_t, float>(d, sh, red)
             : nll_softmax_grad_kernel<float, uint32_t, float>(d, sh, red);
}

}  // namespace

IPUXL_REGISTER_KERNEL("Nll", nll_factory);
IPUXL_REGISTER_KERNEL("NlllWithSoftmaxGradDirect", nll_softmax_grad_factory);

}  // namespace ipuxl
