// Rotary positional embeddings (popxl_addons.ops.rotary_pos_embed, RoFormer):
//
//   RotaryPosEmbed     (x, sin, cos) -> x rotated
//   RotaryPosEmbedGrad (dy, sin, cos) -> dy rotated back (the adjoint)
//
//   x    float (batch, seq, heads, hh)
//   sin, cos  same dtype (1 or batch, seq, rotary_dim / 2)
//   attr rotary_dim (even, <= hh)
//
// The first rotary_dim elements of the last axis are rotary_dim / 2 complex
// numbers stored interleaved (real, imaginary); pair i at position s turns
// by the angle whose sine and cosine are sin[b, s, i], cos[b, s, i]:
//   y_re = x_re cos - x_im sin,  y_im = x_im cos + x_re sin
// (the gradient turns the other way). The other elements pass unchanged.
// Each output is computed in float32 (float64 for float64) and rounded once.
#include <memory>
#include <string>

#include "common.hpp"

namespace ipuxl {
namespace {

std::unique_ptr<Kernel> rotary_factory(const OpDesc& d, bool inverse) {
  d.expect_arity(3, 1);
  const TensorRef* x = d.in[0];
  const TensorRef* sn = d.in[1];
  const TensorRef* cs = d.in[2];
  const TensorRef* o = d.out[0];
  if (x->rank() != 4) d.fail("x must have rank 4 (batch, seq, heads, hh), got " + shape_str(x->shape));
  if (sn->rank() != 3 || cs->rank() != 3) d.fail("sin and cos must have rank 3 (1 or batch, seq, rotary_dim / 2)");
  d.expect_same_dtype(*x, *sn);
  d.expect_same_dtype(*x, *cs);
  d.expect_same_dtype(*x, *o);
  d.expect_shape(*o, x->shape);
  const int64_t B = x->shape[0], S = x->shape[1], H = x->shape[2], D = x->shape[3];
  const int64_t R = d.attrs.i("rotary_dim");
  if (R < 0 || R % 2 != 0 || R > D) d.fail("rotary_dim must be even and in [0, hh]");
  if (sn->shape != cs->shape) d.fail("sin and cos must have the same shape");
  const int64_t SB = sn->shape[0];
  if ((SB != 1 && SB != B) || sn->shape[1] != S || sn->shape[2] != R / 2)
    d.fail("sin and cos must have shape (1 or " + std::to_string(B) + ", " + std::to_string(S) +
           ", " + std::to_string(R / 2) + "), got " + shape_str(sn->shape));
  const float sgn = inverse ? -1.0f : 1.0f;
  std::unique_ptr<Kernel> k;
  bool ok = IPUXL_DISPATCH_FLOAT(x->dtype, {
    using T = scalar_t;
    k = make_kernel([=](RunContext&) {
      const T* xp = x->as<T>();
      const T* sp = sn->as<T>();
      const T* cp = cs->as<T>();
      T* op = o->as<T>();
      parallel_for(B * S, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, H * D)),
                   [=](int64_t lo, int64_t hi) {
        for (int64_t bs = lo; bs < hi; ++bs) {
          const int64_t b = bs / S, s = bs % S;
          const int64_t trig = ((SB == 1 ? 0 : b) * S + s) * (R / 2);
          for (int64_t h = 0; h < H; ++h) {
            const T* xr = xp + (bs * H + h) * D;
            T* orow = op + (bs * H + h) * D;
            for (int64_t i = 0; i < R / 2; ++i) {
              using ct = ct_t<T>;
              const ct re = (ct)xr[2 * i], im = (ct)xr[2 * i + 1];
              const ct c = (ct)cp[trig + i];
              const ct sv = (ct)sgn * (ct)sp[trig + i];
              const ct yre = re * c - im * sv, yim = im * c + re * sv;
              orow[2 * i] = (T)yre;
              orow[2 * i + 1] = (T)yim;
            }
            for (int64_t j = R; j < D; ++j) orow[j] = xr[j];
          }
        }
      });
    });
  });
  if (!ok) d.fail(std::string("x must be a float tensor, got ") + dtype_name(x->dtype));
  return k;
}

std::unique_ptr<Kernel> rotary_fwd(const OpDesc& d) { return rotary_factory(d, false); }
std::unique_ptr<Kernel> rotary_grad(const OpDesc& d) { return rotary_factory(d, true); }

}  // namespace

IPUXL_REGISTER_KERNEL("RotaryPosEmbed", rotary_fwd);
IPUXL_REGISTER_KERNEL("RotaryPosEmbedGrad", rotary_grad);

}  // namespace ipuxl
