// Elementwise unary ops: math functions, activations, rounding, sign, clip
// and the NaN/Inf predicates.
//
// In-place forms ("...Inplace") are lowered with the output aliasing input 0;
// make_unary reads each element before writing it, so the out-of-place
// kernel serves both.
//
// Integer semantics (the IPU wraps, C++ would be UB): Neg and Abs wrap modulo
// 2^bits, so -INT_MIN == INT_MIN and abs(INT_MIN) == INT_MIN; unsigned Neg is
// the two's complement (modular) negation.
#include <cmath>
#include <limits>
#include <type_traits>

#include "fastmath.hpp"
#include "unary.hpp"

namespace ipuxl {
namespace {

template <class C>
constexpr bool is_int_v = std::is_integral_v<C> && !std::is_same_v<C, bool>;

// A double limit narrowed to the compute type without UB: out-of-range
// values become infinities.
template <class C>
C narrow_limit(double v) {
  if constexpr (std::is_same_v<C, float>) {
    constexpr double fmax = (double)std::numeric_limits<float>::max();
    constexpr float inf = std::numeric_limits<float>::infinity();
    if (v > fmax) return inf;
    if (v < -fmax) return -inf;
  }
  return (C)v;
}

// Registers an op whose output has the input's dtype. FloatOnly restricts it
// to float16/32/64 (the functor need not compile for integers).
template <bool FloatOnly, class Op>
KernelFactory same_type(Op op) {
  return [op](const OpDesc& d) -> std::unique_ptr<Kernel> {
    d.expect_arity(1, 1);
    d.expect_same_dtype(*d.in[0], *d.out[0]);
    std::unique_ptr<Kernel> k;
    const DType dt = d.in[0]->dtype;
    bool ok;
    if constexpr (FloatOnly) {
      ok = IPUXL_DISPATCH_FLOAT(dt, {
        using C = ct_t<scalar_t>;
        k = make_unary<scalar_t, scalar_t>(d, [op](C x) { return (C)op(x); });
      });
    } else {
      ok = IPUXL_DISPATCH_NUMERIC(dt, {
        using C = ct_t<scalar_t>;
        k = make_unary<scalar_t, scalar_t>(d, [op](C x) { return (C)op(x); });
      });
    }
    if (!ok)
      d.fail(std::string("unsupported dtype ") + dtype_name(dt) +
             (FloatOnly ? " (expected float16, float32 or float64)"
                        : " (expected a numeric type)"));
    return k;
  };
}

// Registers a predicate: numeric input, bool output.
template <class Op>
KernelFactory predicate(Op op) {
  return [op](const OpDesc& d) -> std::unique_ptr<Kernel> {
    d.expect_arity(1, 1);
    if (d.out[0]->dtype != DType::Bool) d.fail("the output must be bool");
    std::unique_ptr<Kernel> k;
    const DType dt = d.in[0]->dtype;
    bool ok = IPUXL_DISPATCH_NUMERIC(dt, {
      using C = ct_t<scalar_t>;
      k = make_unary<scalar_t, bool>(d, [op](C x) { return (bool)op(x); });
    });
    if (!ok) d.fail(std::string("unsupported dtype ") + dtype_name(dt));
    return k;
  };
}

struct SqrtF { template <class C> C operator()(C x) const { return std::sqrt(x); } };
// float32 (and float16, computed in float) use the vectorisable fastmath
// versions; float64 keeps the library functions.
template <class C> C exp_c(C x) {
  if constexpr (std::is_same_v<C, float>) return fastmath::exp(x);
  else return std::exp(x);
}
template <class C> C tanh_c(C x) {
  if constexpr (std::is_same_v<C, float>) return fastmath::tanh(x);
  else return std::tanh(x);
}
struct ExpF { template <class C> C operator()(C x) const { return exp_c(x); } };
struct LogF { template <class C> C operator()(C x) const { return std::log(x); } };
struct SinF { template <class C> C operator()(C x) const { return std::sin(x); } };
struct CosF { template <class C> C operator()(C x) const { return std::cos(x); } };
struct TanhF { template <class C> C operator()(C x) const { return tanh_c(x); } };
struct CeilF { template <class C> C operator()(C x) const { return std::ceil(x); } };
struct FloorF { template <class C> C operator()(C x) const { return std::floor(x); } };

// PopART's Gelu is the tanh approximation:
//   0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
struct GeluF {
  template <class C> C operator()(C x) const {
    if constexpr (std::is_same_v<C, float>) return fastmath::gelu_tanh(x);
    const C k = (C)0.7978845608028654;  // sqrt(2/pi)
    return (C)0.5 * x * ((C)1 + tanh_c(k * (x + (C)0.044715 * x * x * x)));
  }
};
// GeluErf is the exact form 0.5 x (1 + erf(x / sqrt 2)).
struct GeluErfF {
  template <class C> C operator()(C x) const {
    return (C)0.5 * x * ((C)1 + std::erf(x * (C)0.7071067811865476));
  }
};
// Swish (SiLU): x * sigmoid(x), written as x / (1 + e^-x), which is -0 rather
// than NaN for very negative x (e^-x overflows to inf).
struct SwishF {
  template <class C> C operator()(C x) const { return x / ((C)1 + exp_c(-x)); }
};

struct AbsF {
  template <class C> C operator()(C x) const {
    if constexpr (is_int_v<C>) {
      if constexpr (std::is_signed_v<C>) return x < 0 ? wrap_neg(x) : x;
      else return x;
    } else {
      return std::abs(x);
    }
  }
};
struct NegF { template <class C> C operator()(C x) const { return wrap_neg(x); } };

// max(x, 0); NaN propagates (as in PyTorch).
struct ReluF {
  template <class C> C operator()(C x) const {
    if constexpr (is_int_v<C>) return x > 0 ? x : (C)0;
    else return x > 0 ? x : (x != x ? x : (C)0);
  }
};
// -1, 0 or 1; NaN gives 0 (PopXL's documented behaviour).
struct SignF {
  template <class C> C operator()(C x) const {
    if constexpr (is_int_v<C> && !std::is_signed_v<C>) return x > 0 ? (C)1 : (C)0;
    else return x > 0 ? (C)1 : (x < 0 ? (C)-1 : (C)0);
  }
};

struct IsNaNF {
  template <class C> bool operator()(C x) const {
    if constexpr (is_int_v<C>) return false;
    else return std::isnan(x);
  }
};
struct IsInfF {
  template <class C> bool operator()(C x) const {
    if constexpr (is_int_v<C>) return false;
    else return std::isinf(x);
  }
};

// Clip to [min, max] (attributes "min"/"max", doubles; +-inf mean no bound).
// The result is min(max(x, lo), hi): when min > max every element becomes
// max, as in NumPy and PyTorch. NaN propagates. For integers the bounds are
// rounded inward (ceil(min), floor(max)) and saturated to the type's range.
std::unique_ptr<Kernel> clip_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  d.expect_same_dtype(*d.in[0], *d.out[0]);
  const double mn = d.attrs.f("min", -std::numeric_limits<double>::infinity());
  const double mx = d.attrs.f("max", std::numeric_limits<double>::infinity());
  if (std::isnan(mn) || std::isnan(mx)) d.fail("min and max must not be NaN");
  std::unique_ptr<Kernel> k;
  const DType dt = d.in[0]->dtype;
  bool ok = IPUXL_DISPATCH_NUMERIC(dt, {
    using C = ct_t<scalar_t>;
    C lo, hi;
    if constexpr (is_int_v<C>) {
      lo = saturate_cast<C>(std::ceil(mn));
      hi = saturate_cast<C>(std::floor(mx));
    } else {
      lo = narrow_limit<C>(mn);
      hi = narrow_limit<C>(mx);
    }
    k = make_unary<scalar_t, scalar_t>(d, [lo, hi](C x) {
      if constexpr (!is_int_v<C>) {
        if (x != x) return x;
      }
      C r = x < lo ? lo : x;
      return r > hi ? hi : r;
    });
  });
  if (!ok) d.fail(std::string("unsupported dtype ") + dtype_name(dt));
  return k;
}

// The operands of an activation's gradient (dy, fwd) -> dx (GeluGrad,
// TanhGrad, ReluGrad): one dtype and one shape for all three.
struct GradOperands {
  const TensorRef* g;
  const TensorRef* fwd;
  const TensorRef* o;
};
GradOperands grad_operands(const OpDesc& d) {
  d.expect_arity(2, 1);
  const GradOperands r{d.in[0], d.in[1], d.out[0]};
  d.expect_same_dtype(*r.g, *r.fwd);
  d.expect_same_dtype(*r.g, *r.o);
  d.expect_shape(*r.fwd, r.g->shape);
  d.expect_shape(*r.o, r.g->shape);
  return r;
}

// GeluGrad (dy, x) -> dx = dy * gelu'(x), the tanh approximation's exact
// derivative (PopART's GeluGradOp): one pass instead of the ~10 elementwise
// ops of its decomposition. float32 uses fastmath::gelu_tanh_grad, vectorised
// for the level in use; float16 computes in float; float64 in double.
std::unique_ptr<Kernel> gelu_grad_factory(const OpDesc& d) {
  const GradOperands ops = grad_operands(d);
  const TensorRef *g = ops.g, *x = ops.fwd, *o = ops.o;
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_FLOAT(g->dtype, {
    using T = scalar_t;
    using C = ct_t<T>;
    k = make_kernel([=](RunContext&) {
      const T* G = g->as<T>();
      const T* X = x->as<T>();
      T* O = o->as<T>();
      if constexpr (std::is_same_v<T, f16>) {
        const f16* ins[2] = {g->as<f16>(), x->as<f16>()};
        f16blk::map<2>(o->nelms, ins, o->as<f16>(),
                       [](float gv, float xv) { return gv * fastmath::gelu_tanh_grad(xv); });
        return;
      }
      elementwise_for<T>(o->nelms, kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const C xv = (C)X[i];
          C dv;
          if constexpr (std::is_same_v<C, float>) {
            dv = fastmath::gelu_tanh_grad(xv);
          } else {
            const C kk = (C)0.7978845608028654, aa = (C)0.044715;
            const C t = tanh_c(kk * (xv + aa * xv * xv * xv));
            dv = (C)0.5 * ((C)1 + t) +
                 (C)0.5 * xv * ((C)1 - t * t) * kk * ((C)1 + (C)3 * aa * xv * xv);
          }
          O[i] = (T)((C)G[i] * dv);
        }
      });
    });
  });
  if (!ok) d.fail(std::string("expected a floating-point input, got ") + dtype_name(g->dtype));
  return k;
}

// TanhGrad (dy, y) -> dx = dy * (1 - y*y) from the forward output (PopART's
// TanhGradOp): one pass for the three ops and the constant of its
// decomposition, rounded as they are (y*y, then 1 - that, then the product).
// float16 computes in float and rounds once.
std::unique_ptr<Kernel> tanh_grad_factory(const OpDesc& d) {
  const GradOperands ops = grad_operands(d);
  const TensorRef *g = ops.g, *y = ops.fwd, *o = ops.o;
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_FLOAT(g->dtype, {
    using T = scalar_t;
    using C = ct_t<T>;
    k = make_kernel([=](RunContext&) {
      if constexpr (std::is_same_v<T, f16>) {
        const f16* ins[2] = {g->as<f16>(), y->as<f16>()};
        f16blk::map<2>(o->nelms, ins, o->as<f16>(),
                       [](float gv, float yv) { return gv * (1.0f - yv * yv); });
        return;
      }
      const T* G = g->as<T>();
      const T* Y = y->as<T>();
      T* O = o->as<T>();
      elementwise_for<T>(o->nelms, kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const C yv = (C)Y[i];
          const C yy = yv * yv;
          O[i] = (T)((C)G[i] * ((C)1 - yy));
        }
      });
    });
  });
  if (!ok) d.fail(std::string("expected a floating-point input, got ") + dtype_name(g->dtype));
  return k;
}

// ReluGrad (dy, y) -> dx = dy where y > 0, else 0, from the forward output
// (PopART's ReluGradOp). A NaN y gives 0, as the comparison it replaces.
std::unique_ptr<Kernel> relu_grad_factory(const OpDesc& d) {
  const GradOperands ops = grad_operands(d);
  const TensorRef *g = ops.g, *y = ops.fwd, *o = ops.o;
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_FLOAT(g->dtype, {
    using T = scalar_t;
    using C = ct_t<T>;
    k = make_kernel([=](RunContext&) {
      const T* G = g->as<T>();
      const T* Y = y->as<T>();
      T* O = o->as<T>();
      elementwise_for<T>(o->nelms, kElementwiseGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) O[i] = (C)Y[i] > (C)0 ? G[i] : T((C)0);
      });
    });
  });
  if (!ok) d.fail(std::string("expected a floating-point input, got ") + dtype_name(g->dtype));
  return k;
}

}  // namespace

IPUXL_REGISTER_KERNEL("GeluGrad", gelu_grad_factory);
IPUXL_REGISTER_KERNEL("ReluGrad", relu_grad_factory);
IPUXL_REGISTER_KERNEL("TanhGrad", tanh_grad_factory);
IPUXL_REGISTER_KERNEL("Sqrt", same_type<true>(SqrtF{}));
IPUXL_REGISTER_KERNEL("Exp", same_type<true>(ExpF{}));
IPUXL_REGISTER_KERNEL("ExpInplace", same_type<true>(ExpF{}));
IPUXL_REGISTER_KERNEL("Log", same_type<true>(LogF{}));
IPUXL_REGISTER_KERNEL("Sin", same_type<true>(SinF{}));
IPUXL_REGISTER_KERNEL("Cos", same_type<true>(CosF{}));
IPUXL_REGISTER_KERNEL("Tanh", same_type<true>(TanhF{}));
IPUXL_REGISTER_KERNEL("Ceil", same_type<true>(CeilF{}));
IPUXL_REGISTER_KERNEL("Floor", same_type<true>(FloorF{}));
IPUXL_REGISTER_KERNEL("Gelu", same_type<true>(GeluF{}));
IPUXL_REGISTER_KERNEL("GeluInplace", same_type<true>(GeluF{}));
IPUXL_REGISTER_KERNEL("GeluErf", same_type<true>(GeluErfF{}));
IPUXL_REGISTER_KERNEL("GeluErfInplace", same_type<true>(GeluErfF{}));
IPUXL_REGISTER_KERNEL("Swish", same_type<true>(SwishF{}));
IPUXL_REGISTER_KERNEL("SwishInplace", same_type<true>(SwishF{}));
IPUXL_REGISTER_KERNEL("Abs", same_type<false>(AbsF{}));
IPUXL_REGISTER_KERNEL("Neg", same_type<false>(NegF{}));
IPUXL_REGISTER_KERNEL("Relu", same_type<false>(ReluF{}));
IPUXL_REGISTER_KERNEL("ReluInplace", same_type<false>(ReluF{}));
IPUXL_REGISTER_KERNEL("Sign", same_type<false>(SignF{}));
IPUXL_REGISTER_KERNEL("IsNaN", predicate(IsNaNF{}));
IPUXL_REGISTER_KERNEL("IsInf", predicate(IsInfF{}));
IPUXL_REGISTER_KERNEL("Clip", clip_factory);

}  // namespace ipuxl
