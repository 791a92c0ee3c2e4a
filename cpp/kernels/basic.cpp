// Data-movement basics: Init (zero / undef), Identity and the no-op used by
// pure views whose outputs alias their inputs.
#include <cstring>

#include "common.hpp"

namespace ipuxl {
namespace {

std::unique_ptr<Kernel> init_factory(const OpDesc& d) {
  d.expect_arity(0, 1);
  const TensorRef* o = d.out[0];
  std::string kind = d.attrs.s("init_type", "zero");
  if (kind != "zero" && kind != "undef") d.fail("init_type must be 'zero' or 'undef'");
  // 'undef' leaves the contents unspecified on the IPU; zero them too, so a
  // program that reads undefined data is at least deterministic here.
  return make_kernel([o](RunContext&) { std::memset(o->data, 0, o->nbytes()); });
}

std::unique_ptr<Kernel> identity_factory(const OpDesc& d) {
  d.expect_arity(1, 1);
  d.expect_same_dtype(*d.in[0], *d.out[0]);
  if (d.in[0]->nelms != d.out[0]->nelms)
    d.fail("input and output must have the same number of elements");
  const TensorRef* i = d.in[0];
  const TensorRef* o = d.out[0];
  return make_kernel([i, o](RunContext&) {
    if (i->data != o->data) std::memcpy(o->data, i->data, o->nbytes());
  });
}

// Views declared as aliases need no work: the output shares the input's storage.
std::unique_ptr<Kernel> alias_factory(const OpDesc& d) {
  if (d.in.empty() || d.out.size() != 1 || !d.in[0]) d.fail("expected an input and one output");
  if (d.in[0]->data != d.out[0]->data)
    d.fail("view op output must alias its input (missing alias declaration)");
  return make_kernel([](RunContext&) {});
}

// Code is always resident in the simulator: loading it is a no-op.
std::unique_ptr<Kernel> code_load_factory(const OpDesc& d) {
  d.expect_arity(0, 0);
  return make_kernel([](RunContext&) {});
}

}  // namespace

IPUXL_REGISTER_KERNEL("RemoteCodeLoad", code_load_factory);
IPUXL_REGISTER_KERNEL("Init", init_factory);
IPUXL_REGISTER_KERNEL("Identity", identity_factory);
IPUXL_REGISTER_KERNEL("Reshape", identity_factory);
IPUXL_REGISTER_KERNEL("Detach", identity_factory);
IPUXL_REGISTER_KERNEL("ReshapeInplace", alias_factory);
IPUXL_REGISTER_KERNEL("DetachInplace", alias_factory);
IPUXL_REGISTER_KERNEL("IdentityInplace", alias_factory);

}  // namespace ipuxl
