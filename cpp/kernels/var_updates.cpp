// Variable-update kernels (popxl.ops.var_updates):
//   Accumulate        t = g(t, X, f)        in place, six accumulation modes
//   AccumulatorScale  t *= f                in place
//   SparseAccumulate  t[.., idx, ..] += f*X in place (gather-gradient layout)
//   CopyVarUpdate     t = X                 in place
//   AdamUpdater       updater term for Adam / Lamb / AdaMax (out of place);
//                     increments the time step input in place
//   AdamVarUpdate     w -= lr * trust_ratio * x   in place
//
// The updated tensor and the update may have different dtypes (mixed
// precision, as PopART's poplibs calls): every kernel computes in double and
// rounds once into the stored type. Integer results are truncated toward
// zero and saturate at the type's range (never UB). Factors are either a
// constant attribute or a scalar tensor of any numeric dtype.
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "common.hpp"

namespace ipuxl {
namespace {

bool is_numeric(DType t) { return t != DType::Bool; }

// Element i of a numeric tensor, as double.
double load_double(const TensorRef& t, int64_t i) {
  double v = 0.0;
  IPUXL_DISPATCH_NUMERIC(t.dtype, { v = (double)(ct_t<scalar_t>)t.as<scalar_t>()[i]; });
  return v;
}

// Whole tensor as doubles (used when the update's dtype differs from the
// updated tensor's, so kernels are instantiated per target type only).
void load_all(const TensorRef& t, std::vector<double>& out) {
  out.resize((size_t)t.nelms);
  IPUXL_DISPATCH_NUMERIC(t.dtype, {
    const scalar_t* p = t.as<scalar_t>();
    for (int64_t i = 0; i < t.nelms; ++i) out[(size_t)i] = (double)(ct_t<scalar_t>)p[i];
  });
}

// Round a double into storage type T; integers truncate and saturate.
template <class T>
T store(double v) {
  if constexpr (std::is_integral_v<T>) {
    if (std::isnan(v)) return T(0);
    const double lo = (double)std::numeric_limits<T>::lowest();
    const double hi = (double)std::numeric_limits<T>::max();
    if (v <= lo) return std::numeric_limits<T>::lowest();
    if (v >= hi) return std::numeric_limits<T>::max();
    return (T)v;
  } else {
    return T(v);
  }
}

void store_double(const TensorRef& t, int64_t i, double v) {
  IPUXL_DISPATCH_NUMERIC(t.dtype, { t.as<scalar_t>()[i] = store<scalar_t>(v); });
}

// A hyper-parameter: a scalar tensor when connected, else the constant.
struct Factor {
  const TensorRef* t = nullptr;
  double c = 0.0;
  double get() const { return t ? load_double(*t, 0) : c; }
};

Factor factor_input(const OpDesc& d, size_t idx, const std::string& attr, double dflt,
                    const char* what) {
  Factor f;
  f.c = d.attrs.f(attr, dflt);
  if (idx < d.in.size() && d.in[idx]) {
    const TensorRef* t = d.in[idx];
    if (!is_numeric(t->dtype))
      d.fail(std::string(what) + " tensor '" + t->name + "' must be numeric, got " +
             dtype_name(t->dtype));
    if (t->nelms != 1)
      d.fail(std::string(what) + " tensor '" + t->name + "' must have exactly one element, has " +
             "shape " + shape_str(t->shape));
    f.t = t;
  }
  return f;
}

void expect_numeric(const OpDesc& d, const TensorRef* t, const char* what) {
  if (!t) d.fail(std::string(what) + " input is missing");
  if (!is_numeric(t->dtype))
    d.fail(std::string(what) + " tensor '" + t->name + "' must be numeric, got " +
           dtype_name(t->dtype));
}

// The in-place output must have the updated tensor's type and shape.
void expect_inplace_out(const OpDesc& d, const TensorRef* t) {
  if (d.out.size() != 1) d.fail("expected one output");
  d.expect_same_dtype(*t, *d.out[0]);
  d.expect_shape(*d.out[0], t->shape);
}

// ------------------------------------------------------------ Accumulate

enum class AccMode {
  Add,
  DampenedAdd,
  DampenedAddSquare,
  Mean,
  MovingAverage,
  MovingAverageSquare
};

AccMode parse_acc_mode(const OpDesc& d) {
  const std::string m = d.attrs.s("mode");
  if (m == "add") return AccMode::Add;
  if (m == "dampened_add") return AccMode::DampenedAdd;
  if (m == "dampened_add_square") return AccMode::DampenedAddSquare;
  if (m == "mean") return AccMode::Mean;
  if (m == "moving_average") return AccMode::MovingAverage;
  if (m == "moving_average_square") return AccMode::MovingAverageSquare;
  d.fail("unknown accumulation mode '" + m + "'");
}

// o[i] = g(t[i], x[i]) for one mode; X is T (same dtype) or double.
template <class T, class X>
void accumulate_loop(AccMode mode, const T* t, const X* x, T* o, int64_t n, double f) {
  using C = ct_t<T>;
  switch (mode) {
    case AccMode::Add:
      if constexpr (std::is_integral_v<T> && std::is_same_v<T, X>) {
        // Same integer type: exact, wrapping like the IPU's integer add.
        using U = std::make_unsigned_t<T>;
        for (int64_t i = 0; i < n; ++i) o[i] = (T)(U)((U)t[i] + (U)x[i]);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i] = store<T>((double)(C)t[i] + (double)x[i]);
      }
      break;
    case AccMode::DampenedAdd:
      for (int64_t i = 0; i < n; ++i) o[i] = store<T>((double)(C)t[i] + f * (double)x[i]);
      break;
    case AccMode::DampenedAddSquare:
      for (int64_t i = 0; i < n; ++i) {
        const double xv = (double)x[i];
        o[i] = store<T>((double)(C)t[i] + f * xv * xv);
      }
      break;
    case AccMode::Mean: {
      // f is the number of values accumulated so far.
      const double a = f / (f + 1.0), b = 1.0 / (f + 1.0);
      for (int64_t i = 0; i < n; ++i) o[i] = store<T>(a * (double)(C)t[i] + b * (double)x[i]);
      break;
    }
    case AccMode::MovingAverage:
      for (int64_t i = 0; i < n; ++i)
        o[i] = store<T>(f * (double)(C)t[i] + (1.0 - f) * (double)x[i]);
      break;
    case AccMode::MovingAverageSquare:
      for (int64_t i = 0; i < n; ++i) {
        const double xv = (double)x[i];
        o[i] = store<T>(f * (double)(C)t[i] + (1.0 - f) * xv * xv);
      }
      break;
  }
}

// inputs: [t, X, f-or-step (optional)]; attrs: mode, factor.
std::unique_ptr<Kernel> accumulate_factory(const OpDesc& d) {
  if (d.in.size() < 2 || d.in.size() > 3) d.fail("expected 2 or 3 inputs");
  const TensorRef* t = d.in[0];
  const TensorRef* x = d.in[1];
  expect_numeric(d, t, "accumulator");
  expect_numeric(d, x, "update");
  expect_inplace_out(d, t);
  if (x->shape != t->shape)
    d.fail("update '" + x->name + "' has shape " + shape_str(x->shape) +
           " but the accumulator '" + t->name + "' has shape " + shape_str(t->shape) +
           " (no broadcasting)");
  const AccMode mode = parse_acc_mode(d);
  if (mode != AccMode::Add && !d.attrs.has("factor") && (d.in.size() < 3 || !d.in[2]))
    d.fail("this accumulation mode needs a factor (attribute or tensor)");
  const Factor f = factor_input(d, 2, "factor", 1.0, "factor");
  const TensorRef* o = d.out[0];
  // The update as doubles when its dtype differs, kept between runs (a new
  // vector per run cost an allocation and a zero fill of 8 bytes a value).
  auto xs = std::make_shared<std::vector<double>>();
  std::unique_ptr<Kernel> k;
  IPUXL_DISPATCH_NUMERIC(t->dtype, {
    using T = scalar_t;
    k = make_kernel(
        [=](RunContext&) {
          const double fv = f.get();
          if (x->dtype == t->dtype) {
            accumulate_loop<T, T>(mode, t->as<T>(), x->as<T>(), o->as<T>(), t->nelms, fv);
          } else {
            load_all(*x, *xs);
            accumulate_loop<T, double>(mode, t->as<T>(), xs->data(), o->as<T>(), t->nelms, fv);
          }
        });
  });
  return k;
}

// ------------------------------------------------------ AccumulatorScale

// inputs: [t, f (optional)]; attrs: factor. A constant factor of 0 zeroes
// the tensor outright (so NaN/inf are cleared too, as PopART does).
std::unique_ptr<Kernel> accumulator_scale_factory(const OpDesc& d) {
  if (d.in.empty() || d.in.size() > 2) d.fail("expected 1 or 2 inputs");
  const TensorRef* t = d.in[0];
  expect_numeric(d, t, "accumulator");
  expect_inplace_out(d, t);
  const Factor f = factor_input(d, 1, "factor", 1.0, "factor");
  const TensorRef* o = d.out[0];
  const bool zero = f.t == nullptr && f.c == 0.0;
  std::unique_ptr<Kernel> k;
  IPUXL_DISPATCH_NUMERIC(t->dtype, {
    using T = scalar_t;
    using C = ct_t<T>;
    k = make_kernel(
        [=](RunContext&) {
          T* out = o->as<T>();
          const T* in = t->as<T>();
          if (zero) {
            for (int64_t i = 0; i < o->nelms; ++i) out[i] = T(0);
            return;
          }
          const double fv = f.get();
          for (int64_t i = 0; i < o->nelms; ++i) out[i] = store<T>(fv * (double)(C)in[i]);
        });
  });
  return k;
}

// ------------------------------------------------------ SparseAccumulate

// inputs: [t, X, f (optional), indices, W (optional, layout only)];
// attrs: mode ("add" | "dampened_add"), factor, axis.
// X has the layout of gather(t, indices, axis):
//   X.shape == t.shape[:axis] + indices.shape + t.shape[axis+1:]
// and slice k of X is added to slice indices[k] of t. Indices outside
// [0, t.shape[axis]) are skipped (poplibs multiUpdateAdd ignores them).
std::unique_ptr<Kernel> sparse_accumulate_factory(const OpDesc& d) {
  if (d.in.size() < 4 || d.in.size() > 5) d.fail("expected 4 or 5 inputs");
  const TensorRef* t = d.in[0];
  const TensorRef* x = d.in[1];
  const TensorRef* idx = d.in[3];
  expect_numeric(d, t, "accumulator");
  expect_numeric(d, x, "update");
  if (!idx) d.fail("indices input is missing");
  if (dtype_is_float(idx->dtype) || idx->dtype == DType::Bool)
    d.fail("indices '" + idx->name + "' must be an integer tensor, got " +
           dtype_name(idx->dtype));
  expect_inplace_out(d, t);
  if (t->rank() == 0) d.fail("the accumulator must have rank >= 1");
  const int64_t axis = d.attrs.i("axis", 0);
  if (axis < 0 || axis >= t->rank()) d.fail("axis " + std::to_string(axis) + " out of range");
  Shape expect(t->shape.begin(), t->shape.begin() + axis);
  expect.insert(expect.end(), idx->shape.begin(), idx->shape.end());
  expect.insert(expect.end(), t->shape.begin() + axis + 1, t->shape.end());
  if (x->shape != expect)
    d.fail("update '" + x->name + "' has shape " + shape_str(x->shape) + ", expected " +
           shape_str(expect) + " (accumulator shape with axis " + std::to_string(axis) +
           " replaced by the indices shape)");
  const std::string mode = d.attrs.s("mode");
  if (mode != "add" && mode != "dampened_add") d.fail("unknown mode '" + mode + "'");
  const bool dampened = mode == "dampened_add";
  const Factor f = factor_input(d, 2, "factor", 1.0, "factor");
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= t->shape[(size_t)i];
  for (int64_t i = axis + 1; i < t->rank(); ++i) inner *= t->shape[(size_t)i];
  const int64_t dim = t->shape[(size_t)axis];
  const int64_t kn = idx->nelms;
  const TensorRef* o = d.out[0];
  auto xbuf = std::make_shared<std::vector<double>>();  // kept between runs
  std::unique_ptr<Kernel> k;
  IPUXL_DISPATCH_NUMERIC(t->dtype, {
    using T = scalar_t;
    using C = ct_t<T>;
    k = make_kernel(
        [=](RunContext&) {
          if (o->data != t->data) std::memcpy(o->data, t->data, o->nbytes());
          const double fv = dampened ? f.get() : 1.0;
          std::vector<double>& xs = *xbuf;
          load_all(*x, xs);
          T* out = o->as<T>();
          for (int64_t kk = 0; kk < kn; ++kk) {
            double iv = load_double(*idx, kk);
            if (!(iv >= 0.0 && iv < (double)dim)) continue;
            const int64_t r = (int64_t)iv;
            for (int64_t a = 0; a < outer; ++a) {
              T* dst = out + (a * dim + r) * inner;
              const double* src = xs.data() + (a * kn + kk) * inner;
              for (int64_t j = 0; j < inner; ++j)
                dst[j] = store<T>((double)(C)dst[j] + fv * src[j]);
            }
          }
        });
  });
  return k;
}

// --------------------------------------------------------- CopyVarUpdate

std::unique_ptr<Kernel> copy_var_update_factory(const OpDesc& d) {
  d.expect_arity(2, 1);
  const TensorRef* t = d.in[0];
  const TensorRef* x = d.in[1];
  d.expect_same_dtype(*t, *x);
  if (x->shape != t->shape)
    d.fail("source '" + x->name + "' has shape " + shape_str(x->shape) + " but the target '" +
           t->name + "' has shape " + shape_str(t->shape));
  expect_inplace_out(d, t);
  const TensorRef* o = d.out[0];
  return make_kernel(
      [=](RunContext&) {
        if (o->data != x->data) std::memmove(o->data, x->data, o->nbytes());
      });
}

// ------------------------------------------------------------ AdamUpdater

enum class AdamMode { Adam, AdamNoBias, Lamb, LambNoBias, AdaMax };

// inputs: [w?, m, v, step?, wd?, beta1?, beta2?, eps?] (PopART's indices);
// attrs: mode, weight_decay, beta1, beta2, epsilon.
//   mc = m / (1 - b1^t)        (bias-corrected modes, t after the increment)
//   vc = v / (1 - b2^t)        (Adam/Lamb; AdaMax and no-bias modes: vc = v)
//   x  = mc / (sqrt(vc) + eps) (AdaMax: mc / (vc + eps))  [+ wd * w]
std::unique_ptr<Kernel> adam_updater_factory(const OpDesc& d) {
  if (d.in.size() < 3 || d.in.size() > 8) d.fail("expected between 3 and 8 inputs");
  if (d.out.size() != 1) d.fail("expected one output");
  const std::string ms = d.attrs.s("mode");
  AdamMode mode;
  if (ms == "adam") mode = AdamMode::Adam;
  else if (ms == "adam_no_bias") mode = AdamMode::AdamNoBias;
  else if (ms == "lamb") mode = AdamMode::Lamb;
  else if (ms == "lamb_no_bias") mode = AdamMode::LambNoBias;
  else if (ms == "adamax") mode = AdamMode::AdaMax;
  else d.fail("unknown mode '" + ms + "'");
  auto opt = [&](size_t i) -> const TensorRef* { return i < d.in.size() ? d.in[i] : nullptr; };
  const TensorRef* w = opt(0);
  const TensorRef* m = d.in[1];
  const TensorRef* v = d.in[2];
  const TensorRef* step = opt(3);
  expect_numeric(d, m, "first order momentum");
  expect_numeric(d, v, "second order momentum");
  if (v->shape != m->shape)
    d.fail("momenta '" + m->name + "' " + shape_str(m->shape) + " and '" + v->name + "' " +
           shape_str(v->shape) + " must have the same shape");
  if (w) {
    expect_numeric(d, w, "weight");
    if (w->shape != m->shape)
      d.fail("weight '" + w->name + "' " + shape_str(w->shape) +
             " must have the momenta's shape " + shape_str(m->shape));
  }
  const TensorRef* o = d.out[0];
  if (o->dtype != (w ? w->dtype : m->dtype))
    d.fail("the updater must have the dtype of the weight (or of the first order momentum)");
  d.expect_shape(*o, m->shape);
  const bool bias = mode == AdamMode::Adam || mode == AdamMode::Lamb || mode == AdamMode::AdaMax;
  if (bias && !step) d.fail("mode '" + ms + "' needs the time step input");
  if (step) {
    expect_numeric(d, step, "time step");
    if (step->nelms != 1) d.fail("time step '" + step->name + "' must have one element");
  }
  const Factor wd = factor_input(d, 4, "weight_decay", 0.0, "weight decay");
  const Factor b1 = factor_input(d, 5, "beta1", 0.9, "beta1");
  const Factor b2 = factor_input(d, 6, "beta2", 0.999, "beta2");
  const Factor eps = factor_input(d, 7, "epsilon", 1e-7, "epsilon");
  const bool use_wd = wd.t != nullptr || wd.c != 0.0;
  if (use_wd && !w) d.fail("weight decay needs the weight input");
  const bool adamax = mode == AdamMode::AdaMax;
  // m, v and w as doubles, kept between runs (see accumulate_factory).
  auto bufs = std::make_shared<std::array<std::vector<double>, 3>>();
  std::unique_ptr<Kernel> k;
  IPUXL_DISPATCH_NUMERIC(o->dtype, {
    using T = scalar_t;
    k = make_kernel(
        [=](RunContext&) {
          double b1c = 1.0, b2c = 1.0;
          if (step) {
            // The op owns the step counter: increment it first.
            const double tnew = load_double(*step, 0) + 1.0;
            store_double(*step, 0, tnew);
            const double ts = load_double(*step, 0);
            if (bias) {
              b1c = 1.0 - std::pow(b1.get(), ts);
              if (!adamax) b2c = 1.0 - std::pow(b2.get(), ts);
            }
          }
          const double e = eps.get();
          const double wdv = use_wd ? wd.get() : 0.0;
          std::vector<double>& ms_ = (*bufs)[0];
          std::vector<double>& vs_ = (*bufs)[1];
          std::vector<double>& ws_ = (*bufs)[2];
          load_all(*m, ms_);
          load_all(*v, vs_);
          if (use_wd) load_all(*w, ws_);
          T* out = o->as<T>();
          for (int64_t i = 0; i < o->nelms; ++i) {
            const double mh = ms_[(size_t)i] / b1c;
            double vh = vs_[(size_t)i] / b2c;
            if (!adamax) vh = std::sqrt(vh);
            double r = mh / (vh + e);
            if (use_wd) r += wdv * ws_[(size_t)i];
            out[i] = store<T>(r);
          }
        });
  });
  return k;
}

// ---------------------------------------------------------- AdamVarUpdate

// inputs: [w, x, r1sq, r2sq, lr?, mwn?]; attrs: lr, mwn, has_mwn.
//   ratio = 1 if r1sq == 0, r2sq == 0 or mwn == 0,
//           else min(sqrt(r1sq), mwn) / sqrt(r2sq)   (no min without mwn)
//   w -= lr * ratio * x
std::unique_ptr<Kernel> adam_var_update_factory(const OpDesc& d) {
  if (d.in.size() < 4 || d.in.size() > 6) d.fail("expected between 4 and 6 inputs");
  const TensorRef* w = d.in[0];
  const TensorRef* x = d.in[1];
  const TensorRef* r1 = d.in[2];
  const TensorRef* r2 = d.in[3];
  expect_numeric(d, w, "weight");
  expect_numeric(d, x, "updater");
  expect_numeric(d, r1, "r1");
  expect_numeric(d, r2, "r2");
  if (r1->nelms != 1 || r2->nelms != 1) d.fail("r1 and r2 must have exactly one element");
  if (x->shape != w->shape)
    d.fail("updater '" + x->name + "' " + shape_str(x->shape) + " must have the weight's shape " +
           shape_str(w->shape));
  expect_inplace_out(d, w);
  const Factor lr = factor_input(d, 4, "lr", 0.0, "learning rate");
  const Factor mwn = factor_input(d, 5, "mwn", 0.0, "max weight norm");
  const bool has_mwn = mwn.t != nullptr || d.attrs.i("has_mwn", 0) != 0;
  const TensorRef* o = d.out[0];
  std::unique_ptr<Kernel> k;
  IPUXL_DISPATCH_NUMERIC(w->dtype, {
    using T = scalar_t;
    using C = ct_t<T>;
    k = make_kernel(
        [=](RunContext&) {
          const double r1sq = load_double(*r1, 0), r2sq = load_double(*r2, 0);
          double ratio = 1.0;
          if (r1sq != 0.0 && r2sq != 0.0) {
            double num = std::sqrt(r1sq);
            bool unit = false;
            if (has_mwn) {
              const double c = mwn.get();
              if (c == 0.0) unit = true;
              else num = std::min(num, c);
            }
            if (!unit) ratio = num / std::sqrt(r2sq);
          }
          const double scale = lr.get() * ratio;
          std::vector<double> xs;
          load_all(*x, xs);
          const T* in = w->as<T>();
          T* out = o->as<T>();
          for (int64_t i = 0; i < o->nelms; ++i)
            out[i] = store<T>((double)(C)in[i] - scale * xs[(size_t)i]);
        });
  });
  return k;
}

}  // namespace

IPUXL_REGISTER_KERNEL("Accumulate", accumulate_factory);
IPUXL_REGISTER_KERNEL("AccumulatorScale", accumulator_scale_factory);
IPUXL_REGISTER_KERNEL("SparseAccumulate", sparse_accumulate_factory);
IPUXL_REGISTER_KERNEL("CopyVarUpdate", copy_var_update_factory);
IPUXL_REGISTER_KERNEL("AdamUpdater", adam_updater_factory);
IPUXL_REGISTER_KERNEL("AdamVarUpdate", adam_var_update_factory);

}  // namespace ipuxl
