#include "state.hpp"

#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <string>

namespace ipuxl {

namespace {

std::unique_ptr<Kernel> build_kernel(const ProgramDesc& desc, const Aliasing& al, State& s,
                                     int op_id, const std::set<int>& program_written) {
  const auto& op = desc.ops[op_id];
  const KernelFactory* f = KernelRegistry::find(op.kernel);
  if (!f)  // validate() checked; kept for a clear error if the registry changes
    throw NotImplemented("ipuxl core has no kernel '" + op.kernel + "' (op '" + op.name + "')");
  OpDesc d;
  d.type = op.kernel;  // the kernel being built (a host pass may have replaced the op's)
  d.name = op.name;
  d.attrs = op.attrs;
  for (size_t i = 0; i < op.in.size(); ++i) {
    int t = op.in[i];
    d.in.push_back(t < 0 ? nullptr : &s.refs[t]);
    if (t < 0) continue;
    auto kind = desc.tensors[al.root[t]].kind;
    if ((kind == TensorKind::Variable || kind == TensorKind::Constant) &&
        !program_written.count(al.root[t]))
      d.host_only_inputs.push_back((int)i);
  }
  for (int t : op.out) d.out.push_back(&s.refs[t]);
  auto k = (*f)(d);
  if (!k) d.fail("kernel factory returned nothing");
  return k;
}

}  // namespace

std::unique_ptr<State> make_state(const ProgramDesc& desc, const Aliasing& al,
                                  const MemoryPlan& plan, const Executable& exe,
                                  const std::vector<int>& skipped_ops,
                                  const std::set<int>& program_written, int replica) {
  auto s = std::make_unique<State>();
  s->replica = replica;
  const auto& ts = desc.tensors;
  // Zeroed, 64-byte aligned storage. calloc hands large blocks straight from
  // fresh (lazily zeroed) pages, so buffers that are never touched -- a
  // called graph's own input buffers when every call site binds the
  // caller's tensors -- cost address space but no memory.
  void* base = std::calloc(plan.total + 64, 1);
  if (!base) {
    // Name the largest tensors: that is where the memory goes.
    std::vector<int> roots;
    for (size_t i = 0; i < ts.size(); ++i)
      if (al.root[i] == (int)i) roots.push_back((int)i);
    std::sort(roots.begin(), roots.end(),
              [&](int a, int b) { return ts[a].nbytes() > ts[b].nbytes(); });
    std::string msg = "out of host memory: the program needs " + std::to_string(plan.total) +
                      " bytes of device storage; largest tensors:";
    for (size_t k = 0; k < roots.size() && k < 3; ++k)
      msg += " '" + ts[roots[k]].name + "' " + dtype_name(ts[roots[k]].dtype) +
             shape_str(ts[roots[k]].shape) + " (" + std::to_string(ts[roots[k]].nbytes()) +
             " bytes)" + (k + 1 < roots.size() && k < 2 ? "," : "");
    throw OutOfMemory(msg);
  }
  s->arena = std::unique_ptr<void, void (*)(void*)>(base, [](void* p) { std::free(p); });
  s->arena_bytes = plan.total;
  uint8_t* data = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(base) + 63) & ~uintptr_t(63));
  s->refs.resize(ts.size());
  s->home.assign(ts.size(), nullptr);
  for (size_t i = 0; i < ts.size(); ++i) {
    auto& r = s->refs[i];
    r.dtype = ts[i].dtype;
    r.shape = ts[i].shape;
    r.nelms = ts[i].nelms();
    r.name = ts[i].name;
    r.data = data + plan.offset[al.root[i]];
  }
  for (size_t i = 0; i < ts.size(); ++i) {
    if (al.root[i] == (int)i) s->home[i] = s->refs[i].data;
    if (!ts[i].data.empty()) std::memcpy(s->refs[i].data, ts[i].data.data(), ts[i].data.size());
  }
  s->kernels.reserve(exe.kernel_ops.size());
  for (int op_id : exe.kernel_ops) s->kernels.push_back(build_kernel(desc, al, *s, op_id, program_written));
  for (int op_id : skipped_ops) build_kernel(desc, al, *s, op_id, program_written);
  s->carry_bufs.resize(exe.carries.size());
  for (size_t c = 0; c < exe.carries.size(); ++c)
    for (auto [src, dst] : exe.carries[c].staged)
      s->carry_bufs[c].emplace_back(desc.tensors[src].nbytes());
  for (const auto& rb : desc.remote_buffers) {
    const size_t bytes = (size_t)rb.entries * rb.entry_bytes();
    s->remote.emplace_back();
    try {
      s->remote.back().assign(bytes, 0);
    } catch (const std::bad_alloc&) {
      throw OutOfMemory("out of host memory for remote buffer '" + rb.name + "' (" +
                        std::to_string(bytes) + " bytes of Streaming Memory)");
    }
  }
  return s;
}

}  // namespace ipuxl
