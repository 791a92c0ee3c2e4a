// Random ops: RandomUniform, RandomNormal, Dropout, ShapedDropout and
// ModifyRandomSeed.
//
// Every random number comes from Philox4x32-10 (Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3", SC'11), a counter-based generator:
// the 128-bit block for counter c under key (seed[0], seed[1]) is a pure
// function of (c, seed), so the same seed tensor value gives bit-identical
// results on every run, thread count and platform. Element i of an output
// draws from counter block i / 4 (word i % 4); a seed tensor is uint32 of
// shape (2,), as made by popxl.create_seeds / split_random_seed.
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "common.hpp"

namespace ipuxl {
namespace {

struct Block {
  uint32_t w[4];
};

// Philox4x32 with 10 rounds. Known answer: counter 0, key 0 gives
// {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}.
Block philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                    uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c[4] = {c0, c1, c2, c3};
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = (uint64_t)kM0 * c[0];
    const uint64_t p1 = (uint64_t)kM1 * c[2];
    const uint32_t n0 = (uint32_t)(p1 >> 32) ^ c[1] ^ k0;
    const uint32_t n1 = (uint32_t)p1;
    const uint32_t n2 = (uint32_t)(p0 >> 32) ^ c[3] ^ k1;
    const uint32_t n3 = (uint32_t)p0;
    c[0] = n0; c[1] = n1; c[2] = n2; c[3] = n3;
    k0 += kW0;
    k1 += kW1;
  }
  return Block{{c[0], c[1], c[2], c[3]}};
}

// Stream ids keep the op kinds' number sequences apart for the same seed.
constexpr uint32_t kStreamUniform = 0, kStreamNormal = 1, kStreamDropout = 2, kStreamSeed = 3;

Block block_at(const uint32_t seed[2], uint64_t block, uint32_t stream) {
  return philox4x32_10((uint32_t)block, (uint32_t)(block >> 32), stream, 0u, seed[0], seed[1]);
}

void expect_seed(const OpDesc& d, const TensorRef* s) {
  if (!s) d.fail("seed input is missing");
  if (s->dtype != DType::UInt32 || s->nelms != 2 || s->rank() != 1)
    d.fail("seed tensor '" + s->name + "' must be uint32 of shape (2,), got " +
           dtype_name(s->dtype) + " " + shape_str(s->shape));
}

void read_seed(const TensorRef* s, uint32_t out[2]) {
  const uint32_t* p = s->as<uint32_t>();
  out[0] = p[0];
  out[1] = p[1];
}

// 32 random bits to [0, 1) with 2^-32 resolution.
inline double unit_open_right(uint32_t w) { return (double)w * (1.0 / 4294967296.0); }
// 32 random bits to (0, 1], safe for log().
inline double unit_open_left(uint32_t w) { return ((double)w + 1.0) * (1.0 / 4294967296.0); }

// The largest value of storage type T strictly below `high`.
template <class T>
T below(double high) {
  if constexpr (std::is_same_v<T, f16>) {
    f16 h(high);
    auto down = [](f16 x) {
      f16 r;
      if ((x.bits & 0x7fffu) == 0) r.bits = 0x8001u;          // +-0 -> -min subnormal
      else if (x.bits & 0x8000u) r.bits = (uint16_t)(x.bits + 1);  // negative: away from 0
      else r.bits = (uint16_t)(x.bits - 1);
      return r;
    };
    while ((double)(float)h >= high) h = down(h);
    return h;
  } else {
    T h = (T)high;
    while ((double)h >= high) h = std::nextafter(h, -std::numeric_limits<T>::infinity());
    return h;
  }
}

// ---------------------------------------------------------- RandomUniform

// Values low + (high - low) * u, u uniform in [0, 1); results that would
// round up to `high` in the output type are moved just below it, so the
// output lies in [low, high) whenever low < high.
std::unique_ptr<Kernel> random_uniform_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  expect_seed(d, d.in[0]);
  const TensorRef* s = d.in[0];
  const TensorRef* o = d.out[0];
  const double low = d.attrs.f("low", 0.0), high = d.attrs.f("high", 1.0);
  if (!std::isfinite(low) || !std::isfinite(high) || low > high)
    d.fail("need finite low <= high");
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_FLOAT(o->dtype, {
    using T = scalar_t;
    const T top = below<T>(high);
    const bool clamp = low < high;
    k = make_kernel(
        [=](RunContext&) {
          uint32_t seed[2];
          read_seed(s, seed);
          T* out = o->as<T>();
          const double range = high - low;
          for (int64_t b = 0; b * 4 < o->nelms; ++b) {
            const Block blk = block_at(seed, (uint64_t)b, kStreamUniform);
            for (int j = 0; j < 4 && b * 4 + j < o->nelms; ++j) {
              T v = T(low + range * unit_open_right(blk.w[j]));
              if (clamp && (double)(ct_t<T>)v >= high) v = top;
              out[b * 4 + j] = v;
            }
          }
        });
  });
  if (!ok) d.fail(std::string("output dtype must be floating point, got ") + dtype_name(o->dtype));
  return k;
}

// ----------------------------------------------------------- RandomNormal

// Box-Muller: words (0, 1) and (2, 3) of each block give two pairs of
// independent standard normals, scaled to mean + std * z.
std::unique_ptr<Kernel> random_normal_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  expect_seed(d, d.in[0]);
  const TensorRef* s = d.in[0];
  const TensorRef* o = d.out[0];
  const double mean = d.attrs.f("mean", 0.0), stddev = d.attrs.f("std", 1.0);
  if (!std::isfinite(mean) || !std::isfinite(stddev) || stddev < 0.0)
    d.fail("need finite mean and std >= 0");
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_FLOAT(o->dtype, {
    using T = scalar_t;
    k = make_kernel(
        [=](RunContext&) {
          constexpr double kTwoPi = 6.283185307179586476925286766559;
          uint32_t seed[2];
          read_seed(s, seed);
          T* out = o->as<T>();
          for (int64_t b = 0; b * 4 < o->nelms; ++b) {
            const Block blk = block_at(seed, (uint64_t)b, kStreamNormal);
            double z[4];
            for (int p = 0; p < 2; ++p) {
              const double r = std::sqrt(-2.0 * std::log(unit_open_left(blk.w[2 * p])));
              const double a = kTwoPi * unit_open_right(blk.w[2 * p + 1]);
              z[2 * p] = r * std::cos(a);
              z[2 * p + 1] = r * std::sin(a);
            }
            for (int j = 0; j < 4 && b * 4 + j < o->nelms; ++j)
              out[b * 4 + j] = T(mean + stddev * z[j]);
          }
        });
  });
  if (!ok) d.fail(std::string("output dtype must be floating point, got ") + dtype_name(o->dtype));
  return k;
}

// ------------------------------------------------ Dropout / ShapedDropout

// Mask element i is kept when its uniform u_i >= ratio (probability
// 1 - ratio); kept values are divided by (1 - ratio), in the compute type.
void dropout_mask(const uint32_t seed[2], int64_t n, double ratio, std::vector<uint8_t>& keep) {
  keep.resize((size_t)n);
  for (int64_t b = 0; b * 4 < n; ++b) {
    const Block blk = block_at(seed, (uint64_t)b, kStreamDropout);
    for (int j = 0; j < 4 && b * 4 + j < n; ++j)
      keep[(size_t)(b * 4 + j)] = unit_open_right(blk.w[j]) >= ratio ? 1 : 0;
  }
}

double checked_ratio(const OpDesc& d) {
  const double ratio = d.attrs.f("ratio");
  if (!(ratio >= 0.0 && ratio < 1.0))
    d.fail("ratio " + std::to_string(ratio) + " is not in [0, 1)");
  return ratio;
}

// inputs: [t, seed]; attrs: ratio, and for ShapedDropout `shape`, the mask
// shape, which broadcasts to t's shape.
std::unique_ptr<Kernel> dropout_factory_impl(const OpDesc& d, bool shaped) {
  d.expect_arity(2, 1);
  const TensorRef* x = d.in[0];
  expect_seed(d, d.in[1]);
  const TensorRef* s = d.in[1];
  const TensorRef* o = d.out[0];
  d.expect_same_dtype(*x, *o);
  d.expect_shape(*o, x->shape);
  const double ratio = checked_ratio(d);
  Shape mshape = x->shape;
  if (shaped) {
    mshape = d.attrs.ints("shape");
    for (int64_t v : mshape)
      if (v < 0) d.fail("mask shape " + shape_str(mshape) + " has a negative dimension");
    bool okb = false;
    Shape bs = broadcast_shapes(mshape, x->shape, &okb);
    if (!okb || bs != x->shape)
      d.fail("mask shape " + shape_str(mshape) + " does not broadcast to the input shape " +
             shape_str(x->shape));
  }
  std::vector<int64_t> strides[1] = {broadcast_strides(d, mshape, x->shape)};
  const int64_t mn = shape_nelms(mshape);
  const Shape oshape = o->shape;
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_FLOAT(x->dtype, {
    using T = scalar_t;
    using C = ct_t<T>;
    k = make_kernel(
        [=](RunContext&) {
          uint32_t seed[2];
          read_seed(s, seed);
          std::vector<uint8_t> keep;
          dropout_mask(seed, mn, ratio, keep);
          const C div = (C)(1.0 - ratio);
          const T* in = x->as<T>();
          T* out = o->as<T>();
          std::vector<int64_t> st[1] = {strides[0]};
          for_each_broadcast<1>(oshape, st, [&](int64_t base, int64_t len, const int64_t* offs,
                                                const int64_t* inner) {
            for (int64_t j = 0; j < len; ++j) {
              const int64_t i = base + j;
              out[i] = keep[(size_t)(offs[0] + j * inner[0])] ? T((C)in[i] / div) : T(0);
            }
          });
        });
  });
  if (!ok) d.fail(std::string("input must be floating point, got ") + dtype_name(x->dtype));
  return k;
}

std::unique_ptr<Kernel> dropout_factory(const OpDesc& d) { return dropout_factory_impl(d, false); }
std::unique_ptr<Kernel> shaped_dropout_factory(const OpDesc& d) {
  return dropout_factory_impl(d, true);
}

// ------------------------------------------------------- ModifyRandomSeed

// New seed = the first two words of the Philox block for counter
// (modifier, 0, kStreamSeed) under the old seed: distinct modifiers give
// unrelated seeds, and the result never equals a data block of the old seed.
std::unique_ptr<Kernel> modify_seed_factory(const OpDesc& d) {
  d.expect_arity(2, 1);
  expect_seed(d, d.in[0]);
  const TensorRef* s = d.in[0];
  const TensorRef* m = d.in[1];
  const TensorRef* o = d.out[0];
  if (m->nelms != 1 || m->dtype == DType::Bool || dtype_is_float(m->dtype))
    d.fail("modifier '" + m->name + "' must be an integer scalar");
  d.expect_same_dtype(*s, *o);
  d.expect_shape(*o, s->shape);
  return make_kernel([=](RunContext&) {
    uint64_t mod = 0;
    IPUXL_DISPATCH_INT(m->dtype, { mod = (uint64_t)m->as<scalar_t>()[0]; });
    uint32_t seed[2];
    read_seed(s, seed);
    const Block blk =
        philox4x32_10((uint32_t)mod, (uint32_t)(mod >> 32), kStreamSeed, 0x5eed5eedu, seed[0],
                      seed[1]);
    uint32_t* out = o->as<uint32_t>();
    out[0] = blk.w[0];
    out[1] = blk.w[1];
  });
}

}  // namespace

IPUXL_REGISTER_KERNEL("RandomUniform", random_uniform_factory);
IPUXL_REGISTER_KERNEL("RandomNormal", random_normal_factory);
IPUXL_REGISTER_KERNEL("Dropout", dropout_factory);
IPUXL_REGISTER_KERNEL("ShapedDropout", shaped_dropout_factory);
IPUXL_REGISTER_KERNEL("ModifyRandomSeed", modify_seed_factory);

}  // namespace ipuxl
