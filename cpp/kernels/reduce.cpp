// Reductions over a set of axes (ReduceSum, ReduceMean, ReduceMax, ReduceMin,
// ReduceMedian, ReduceProd, ReduceL1, ReduceL2, ReduceLogSum,
// ReduceLogSumExp, ReduceSumSquare), the single-axis ArgMax / ArgMin, and the
// whole-tensor LambSquare and Histogram.
//
// Attributes of the Reduce* ops: `axes` (sorted, non-negative, unique; empty
// reduces nothing) and `keepdims` (0/1). The output keeps the input dtype.
//
// Accumulation:
//   * float16 / float32 / float64 accumulate in double and round once to the
//     output type (at least as accurate as the IPU's float partials);
//   * integers accumulate in 64 bits with two's-complement wrap-around and
//     are cast to the output type, so the result equals NumPy's (int64)
//     result cast back to the input dtype; integer mean is the 64-bit sum
//     divided by the count, truncated toward zero.
// Empty reductions follow NumPy: sum/l1/l2/sumsquare = 0, prod = 1,
// logsum/logsumexp = -inf, float mean = nan. max, min, median, integer mean
// and arg{max,min} of nothing are rejected when the kernel is built.
// max/min propagate NaN (as NumPy); median returns NaN when its group holds
// a NaN (as torch.median) and otherwise the lower of the two middle values
// for even counts (as PopART / torch.median).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "common.hpp"
#include "f16_block.hpp"

namespace ipuxl {
namespace {

template <class T>
constexpr bool is_float_v = std::is_floating_point_v<T> || std::is_same_v<T, f16>;

// Row-major offsets of every index of `dims` with the given strides.
std::vector<int64_t> enumerate_offsets(const Shape& dims, const std::vector<int64_t>& strides) {
  int64_t n = shape_nelms(dims);
  std::vector<int64_t> out;
  if (n == 0) return out;
  out.reserve((size_t)n);
  std::vector<int64_t> idx(dims.size(), 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(off);
    for (int64_t d = (int64_t)dims.size() - 1; d >= 0; --d) {
      off += strides[(size_t)d];
      if (++idx[(size_t)d] < dims[(size_t)d]) break;
      off -= strides[(size_t)d] * dims[(size_t)d];
      idx[(size_t)d] = 0;
    }
  }
  return out;
}

// Which input elements feed which output element: output o reads
// in[out_base[o] + red_off[r]] for r in [0, n_red).
struct ReducePlan {
  int64_t n_out = 0;
  int64_t n_red = 0;
  std::vector<int64_t> out_base;
  std::vector<int64_t> red_off;
};

ReducePlan make_plan(const OpDesc& d, const TensorRef& in, const TensorRef& out,
                     const std::vector<int64_t>& axes, bool keepdims) {
  const int64_t rank = in.rank();
  std::vector<bool> reduced((size_t)rank, false);
  for (int64_t a : axes) {
    if (a < 0 || a >= rank)
      d.fail("axis " + std::to_string(a) + " is out of range for input shape " +
             shape_str(in.shape));
    if (reduced[(size_t)a]) d.fail("axis " + std::to_string(a) + " is repeated");
    reduced[(size_t)a] = true;
  }
  Shape expect, kept_dims, red_dims;
  std::vector<int64_t> kept_st, red_st;
  auto st = contiguous_strides(in.shape);
  for (int64_t i = 0; i < rank; ++i) {
    if (reduced[(size_t)i]) {
      if (keepdims) expect.push_back(1);
      red_dims.push_back(in.shape[(size_t)i]);
      red_st.push_back(st[(size_t)i]);
    } else {
      expect.push_back(in.shape[(size_t)i]);
      kept_dims.push_back(in.shape[(size_t)i]);
      kept_st.push_back(st[(size_t)i]);
    }
  }
  d.expect_shape(out, expect);
  ReducePlan p;
  p.n_out = shape_nelms(kept_dims);
  p.n_red = shape_nelms(red_dims);
  p.out_base = enumerate_offsets(kept_dims, kept_st);
  // No output element: nothing is read (the input is empty), however many
  // elements the reduced axes would span; their offsets would only cost
  // memory (a (0, 2**40) input reduced over axis 1 asked for 8 TB).
  if (p.n_out > 0) p.red_off = enumerate_offsets(red_dims, red_st);
  return p;
}

// Wrap-around integer arithmetic without signed-overflow UB.
template <class T>
uint64_t to_u64(T v) {
  if constexpr (std::is_signed_v<T>) return (uint64_t)(int64_t)v;
  else return (uint64_t)v;
}
template <class T>
uint64_t abs_u64(T v) {
  if constexpr (std::is_signed_v<T>) return v < 0 ? (uint64_t)0 - to_u64(v) : to_u64(v);
  else return (uint64_t)v;
}
template <class T>
T from_u64(uint64_t v) {
  if constexpr (std::is_signed_v<T>) return (T)(int64_t)v;  // modular (C++20, gcc/clang)
  else return (T)v;
}

enum class Kind { Sum, Mean, Max, Min, Median, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

bool float_only(Kind k) { return k == Kind::L2 || k == Kind::LogSum || k == Kind::LogSumExp; }
bool needs_elements(Kind k) { return k == Kind::Max || k == Kind::Min || k == Kind::Median; }

// One reduction of n elements of `base` at offsets `off` (n may be 0 where allowed).
template <class T>
T reduce_group(Kind kind, const T* base, const int64_t* off, int64_t n,
               std::vector<double>& scratch) {
  if constexpr (is_float_v<T>) {
    auto at = [&](int64_t r) { return (double)base[off[r]]; };
    switch (kind) {
      case Kind::Sum: case Kind::Mean: {
        double s = 0;
        for (int64_t r = 0; r < n; ++r) s += at(r);
        return (T)(kind == Kind::Mean ? s / (double)n : s);  // 0/0 = nan for an empty mean
      }
      case Kind::Prod: {
        double s = 1;
        for (int64_t r = 0; r < n; ++r) s *= at(r);
        return (T)s;
      }
      case Kind::L1: {
        double s = 0;
        for (int64_t r = 0; r < n; ++r) s += std::fabs(at(r));
        return (T)s;
      }
      case Kind::SumSquare: case Kind::L2: {
        double s = 0;
        for (int64_t r = 0; r < n; ++r) s += at(r) * at(r);
        return (T)(kind == Kind::L2 ? std::sqrt(s) : s);
      }
      case Kind::LogSum: {
        double s = 0;
        for (int64_t r = 0; r < n; ++r) s += at(r);
        return (T)std::log(s);
      }
      case Kind::LogSumExp: {
        // Subtract the maximum so exp never overflows.
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t r = 0; r < n; ++r) {
          double v = at(r);
          if (std::isnan(v)) return (T)v;
          m = std::max(m, v);
        }
        if (std::isinf(m)) return (T)m;  // all -inf (or empty): -inf; any +inf: +inf
        double s = 0;
        for (int64_t r = 0; r < n; ++r) s += std::exp(at(r) - m);
        return (T)(m + std::log(s));
      }
      case Kind::Max: case Kind::Min: {
        double m = at(0);
        for (int64_t r = 1; r < n && !std::isnan(m); ++r) {
          double v = at(r);
          if (std::isnan(v) || (kind == Kind::Max ? v > m : v < m)) m = v;
        }
        return (T)m;
      }
      case Kind::Median: {
        scratch.resize((size_t)n);
        for (int64_t r = 0; r < n; ++r) {
          scratch[(size_t)r] = at(r);
          if (std::isnan(scratch[(size_t)r])) return (T)scratch[(size_t)r];
        }
        auto mid = scratch.begin() + (n - 1) / 2;
        std::nth_element(scratch.begin(), mid, scratch.end());
        return (T)*mid;
      }
    }
    return T{};
  } else {
    switch (kind) {
      case Kind::Sum: case Kind::L1: case Kind::SumSquare: case Kind::Prod: {
        uint64_t s = kind == Kind::Prod ? 1 : 0;
        for (int64_t r = 0; r < n; ++r) {
          T v = base[off[r]];
          if (kind == Kind::Sum) s += to_u64(v);
          else if (kind == Kind::L1) s += abs_u64(v);
          else if (kind == Kind::SumSquare) s += to_u64(v) * to_u64(v);
          else s *= to_u64(v);
        }
        return from_u64<T>(s);
      }
      case Kind::Mean: {
        uint64_t s = 0;
        for (int64_t r = 0; r < n; ++r) s += to_u64(base[off[r]]);
        if constexpr (std::is_signed_v<T>) return (T)((int64_t)s / n);
        else return (T)(s / (uint64_t)n);
      }
      case Kind::Max: case Kind::Min: {
        T m = base[off[0]];
        for (int64_t r = 1; r < n; ++r) {
          T v = base[off[r]];
          if (kind == Kind::Max ? v > m : v < m) m = v;
        }
        return m;
      }
      case Kind::Median: {
        std::vector<T> tmp((size_t)n);
        for (int64_t r = 0; r < n; ++r) tmp[(size_t)r] = base[off[r]];
        auto mid = tmp.begin() + (n - 1) / 2;
        std::nth_element(tmp.begin(), mid, tmp.end());
        return *mid;
      }
      default: break;  // float-only kinds are rejected by the factory
    }
    return T{};
  }
}

// Columns per block of a leading-axis sum (512 bytes of double accumulators),
// and the additions a thread takes at least.
constexpr int64_t kLeadingCols = 64;
constexpr int64_t kLeadingGrain = int64_t{1} << 16;

KernelFactory reduce_factory(Kind kind) {
  return [kind](const OpDesc& d) -> std::unique_ptr<Kernel> {
    d.expect_arity(1, 1);
    const TensorRef* in = d.in[0];
    const TensorRef* out = d.out[0];
    d.expect_same_dtype(*in, *out);
    if (in->dtype == DType::Bool) d.fail("bool inputs are not supported");
    if (float_only(kind) && !dtype_is_float(in->dtype))
      d.fail(std::string("expected a floating-point input, got ") + dtype_name(in->dtype));
    std::vector<int64_t> axes = d.attrs.ints("axes");
    const bool keepdims = d.attrs.i("keepdims", 0) != 0;
    auto plan = std::make_shared<ReducePlan>(make_plan(d, *in, *out, axes, keepdims));
    if (plan->n_red == 0 && plan->n_out > 0) {
      if (needs_elements(kind)) d.fail("cannot reduce over an empty set of elements");
      if (kind == Kind::Mean && !dtype_is_float(in->dtype))
        d.fail("the integer mean of an empty set of elements is undefined");
    }
    // Sum or mean over the leading axes of a row-major input (a bias
    // gradient: [rows, cols] -> [cols]): rows are added into one row of
    // double accumulators, a contiguous and vectorised pass, instead of a
    // strided walk down each column. Same order and precision as below.
    bool leading = (kind == Kind::Sum || kind == Kind::Mean) && plan->n_out > 0;
    for (int64_t o = 0; leading && o < plan->n_out; ++o) leading = plan->out_base[(size_t)o] == o;
    for (int64_t r = 0; leading && r < plan->n_red; ++r)
      leading = plan->red_off[(size_t)r] == r * plan->n_out;
    std::unique_ptr<Kernel> k;
    bool ok = IPUXL_DISPATCH_NUMERIC(in->dtype, {
      using T = scalar_t;
      k = make_kernel(
          [=](RunContext&) {
            const T* I = in->as<T>();
            T* O = out->as<T>();
            if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
              if (leading && plan->n_out == 1) {
                // A whole contiguous tensor (a scalar loss): 8 independent
                // double partial sums, vectorised, instead of one serial chain.
                const int64_t n_red = plan->n_red;
                double acc[8] = {};
                isa::run([&](int64_t, int64_t) {
                  const int64_t nv = n_red - n_red % 8;
                  for (int64_t r = 0; r < nv; r += 8)
                    for (int l = 0; l < 8; ++l) acc[l] += (double)I[r + l];
                  for (int64_t r = nv; r < n_red; ++r) acc[r % 8] += (double)I[r];
                }, 0, n_red);
                double sum = 0.0;
                for (int l = 0; l < 8; ++l) sum += acc[l];
                O[0] = (T)(kind == Kind::Mean ? sum / (double)n_red : sum);
                return;
              }
              if (leading) {
                // Blocks of kLeadingCols columns over the threads: each
                // column is summed down the rows in order by whichever
                // thread owns its block, so the split changes no bit.
                const int64_t n_out = plan->n_out, n_red = plan->n_red;
                const int64_t nblk = (n_out + kLeadingCols - 1) / kLeadingCols;
                const int64_t grain =
                    std::max<int64_t>(1, kLeadingGrain / std::max<int64_t>(1, n_red * kLeadingCols));
                parallel_for(nblk, grain, [&](int64_t b0, int64_t b1) {
                  for (int64_t blk = b0; blk < b1; ++blk) {
                    const int64_t o0 = blk * kLeadingCols;
                    const int64_t w = std::min<int64_t>(kLeadingCols, n_out - o0);
                    double A[kLeadingCols] = {};
                    isa::run([&](int64_t r0, int64_t r1) {  // vectorised per level
                      for (int64_t r = r0; r < r1; ++r) {
                        const T* row = I + r * n_out + o0;
                        for (int64_t o = 0; o < w; ++o) A[o] += (double)row[o];
                      }
                    }, 0, n_red);
                    for (int64_t o = 0; o < w; ++o)
                      O[o0 + o] = (T)(kind == Kind::Mean ? A[o] / (double)n_red : A[o]);
                  }
                });
                return;
              }
            }
            if constexpr (std::is_same_v<T, f16>) {
              if (leading) {
                // float16 bias gradients: rows converted in bulk, then the
                // double sums of the general path, in its order.
                const int64_t n_out = plan->n_out, n_red = plan->n_red;
                std::vector<double> acc((size_t)n_out, 0.0);
                double* A = acc.data();
                if (n_out == 1) {
                  alignas(64) float buf[f16blk::kBlock];
                  for (int64_t r0 = 0; r0 < n_red; r0 += f16blk::kBlock) {
                    const int64_t len = std::min<int64_t>(f16blk::kBlock, n_red - r0);
                    half::to_float(reinterpret_cast<const f16*>(I) + r0, buf, len);
                    for (int64_t r = 0; r < len; ++r) A[0] += (double)buf[r];
                  }
                } else {
                  std::vector<float> row((size_t)n_out);
                  float* R = row.data();
                  for (int64_t r = 0; r < n_red; ++r) {
                    half::to_float(reinterpret_cast<const f16*>(I) + r * n_out, R, n_out);
                    f16blk::run_exact([&](int64_t o0, int64_t o1) {
                      for (int64_t o = o0; o < o1; ++o) A[o] += (double)R[o];
                    }, 0, n_out);
                  }
                }
                for (int64_t o = 0; o < n_out; ++o)
                  O[o] = (T)(float)(kind == Kind::Mean ? A[o] / (double)n_red : A[o]);
                return;
              }
            }
            std::vector<double> scratch;
            const int64_t* roff = plan->red_off.data();
            for (int64_t o = 0; o < plan->n_out; ++o)
              O[o] = reduce_group<T>(kind, I + plan->out_base[(size_t)o], roff, plan->n_red,
                                     scratch);
          });
    });
    if (!ok) d.fail(std::string("unsupported dtype ") + dtype_name(in->dtype));
    return k;
  };
}

// ArgMax / ArgMin along attribute `axis` (non-negative), keepdims 0/1; int32
// output. Ties give the first index; a NaN counts as the extreme (NumPy).
KernelFactory arg_factory(bool is_max) {
  return [is_max](const OpDesc& d) -> std::unique_ptr<Kernel> {
    d.expect_arity(1, 1);
    const TensorRef* in = d.in[0];
    const TensorRef* out = d.out[0];
    if (out->dtype != DType::Int32) d.fail("the output must be int32");
    if (in->dtype == DType::Bool) d.fail("bool inputs are not supported");
    if (in->rank() == 0) d.fail("the input must have rank >= 1");
    const int64_t axis = d.attrs.i("axis");
    const bool keepdims = d.attrs.i("keepdims", 0) != 0;
    auto plan = std::make_shared<ReducePlan>(make_plan(d, *in, *out, {axis}, keepdims));
    if (plan->n_red == 0 && plan->n_out > 0) d.fail("cannot take the arg-extreme of an empty axis");
    if (plan->n_red > (int64_t)std::numeric_limits<int32_t>::max())
      d.fail("the reduced axis is too long for int32 indices");
    std::unique_ptr<Kernel> k;
    bool ok = IPUXL_DISPATCH_NUMERIC(in->dtype, {
      using T = scalar_t;
      using C = ct_t<T>;
      k = make_kernel(
          [=](RunContext&) {
            const T* I = in->as<T>();
            int32_t* O = out->as<int32_t>();
            const int64_t* roff = plan->red_off.data();
            for (int64_t o = 0; o < plan->n_out; ++o) {
              const T* base = I + plan->out_base[(size_t)o];
              int64_t best = 0;
              C bv = (C)base[roff[0]];
              for (int64_t r = 1; r < plan->n_red; ++r) {
                if constexpr (is_float_v<T>) {
                  if (std::isnan(bv)) break;
                }
                C v = (C)base[roff[r]];
                bool better = is_max ? v > bv : v < bv;
                if constexpr (is_float_v<T>) better = better || std::isnan(v);
                if (better) { bv = v; best = r; }
              }
              O[o] = (int32_t)best;
            }
          });
    });
    if (!ok) d.fail(std::string("unsupported dtype ") + dtype_name(in->dtype));
    return k;
  };
}

// LambSquare: sum of squares of every element, as a float32 scalar.
std::unique_ptr<Kernel> lamb_square_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  const TensorRef* in = d.in[0];
  const TensorRef* out = d.out[0];
  if (out->dtype != DType::Float32 || out->nelms != 1)
    d.fail("the output must be a float32 scalar");
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_FLOAT(in->dtype, {
    using T = scalar_t;
    k = make_kernel(
        [=](RunContext&) {
          const T* I = in->as<T>();
          double s = 0;
          for (int64_t i = 0; i < in->nelms; ++i) s += (double)I[i] * (double)I[i];
          *out->as<float>() = (float)s;
        });
  });
  if (!ok) d.fail(std::string("expected a floating-point input, got ") + dtype_name(in->dtype));
  return k;
}

// Histogram: out[i] counts elements x with levels[i-1] <= x < levels[i]
// (out[0]: x < levels[0]; last: x >= levels.back() and NaN), as uint32.
// Levels are rounded to the input dtype first, as the IPU holds them so.
std::unique_ptr<Kernel> histogram_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  const TensorRef* in = d.in[0];
  const TensorRef* out = d.out[0];
  std::vector<double> levels_d =
      d.attrs.has("levels") ? d.attrs.floats("levels") : std::vector<double>{};
  const bool absolute = d.attrs.i("absolute_of_input", 0) != 0;
  if (out->dtype != DType::UInt32) d.fail("the output must be uint32");
  d.expect_shape(*out, {(int64_t)levels_d.size() + 1});
  for (size_t i = 1; i < levels_d.size(); ++i)
    if (!(levels_d[i - 1] < levels_d[i])) d.fail("levels must be strictly increasing");
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_FLOAT(in->dtype, {
    using T = scalar_t;
    std::vector<float> levels;
    for (double l : levels_d) levels.push_back((float)(T)l);
    k = make_kernel(
        [=](RunContext&) {
          const T* I = in->as<T>();
          uint32_t* O = out->as<uint32_t>();
          std::fill(O, O + out->nelms, 0u);
          for (int64_t i = 0; i < in->nelms; ++i) {
            float x = (float)I[i];
            if (absolute) x = std::fabs(x);
            // bin = number of levels L with !(x < L): NaN lands in the last bin.
            size_t b = 0;
            while (b < levels.size() && !(x < levels[b])) ++b;
            O[b]++;
          }
        });
  });
  if (!ok) d.fail(std::string("expected a float16 or float32 input, got ") +
                  dtype_name(in->dtype));
  return k;
}

}  // namespace

IPUXL_REGISTER_KERNEL("ReduceSum", reduce_factory(Kind::Sum));
IPUXL_REGISTER_KERNEL("ReduceMean", reduce_factory(Kind::Mean));
IPUXL_REGISTER_KERNEL("ReduceMax", reduce_factory(Kind::Max));
IPUXL_REGISTER_KERNEL("ReduceMin", reduce_factory(Kind::Min));
IPUXL_REGISTER_KERNEL("ReduceMedian", reduce_factory(Kind::Median));
IPUXL_REGISTER_KERNEL("ReduceProd", reduce_factory(Kind::Prod));
IPUXL_REGISTER_KERNEL("ReduceL1", reduce_factory(Kind::L1));
IPUXL_REGISTER_KERNEL("ReduceL2", reduce_factory(Kind::L2));
IPUXL_REGISTER_KERNEL("ReduceLogSum", reduce_factory(Kind::LogSum));
IPUXL_REGISTER_KERNEL("ReduceLogSumExp", reduce_factory(Kind::LogSumExp));
IPUXL_REGISTER_KERNEL("ReduceSumSquare", reduce_factory(Kind::SumSquare));
IPUXL_REGISTER_KERNEL("ArgMax", arg_factory(true));
IPUXL_REGISTER_KERNEL("ArgMin", arg_factory(false));
IPUXL_REGISTER_KERNEL("LambSquare", lamb_square_factory);
IPUXL_REGISTER_KERNEL("Histogram", histogram_factory);

}  // namespace ipuxl
