#include "collectives.hpp"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace ipuxl {

std::vector<std::vector<int>> replica_groups(const CollectiveDesc& c, int replicas) {
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < replicas; ++r) {
    int g = c.group_of.empty() ? 0 : c.group_of[(size_t)r];
    if ((int)groups.size() <= g) groups.resize((size_t)g + 1);
    groups[(size_t)g].push_back(r);
  }
  return groups;
}

namespace {

template <class T>
using acc_t = std::conditional_t<std::is_floating_point_v<T> || std::is_same_v<T, f16>, double,
                                 std::conditional_t<std::is_signed_v<T> && !std::is_same_v<T, bool>,
                                                    int64_t, uint64_t>>;

template <class T>
acc_t<T> load(const T* p, int64_t i, int64_t n) {
  if (i >= n) return acc_t<T>(0);  // zero padding of a reduce-scatter's last slice
  if constexpr (std::is_same_v<T, f16>) return (double)(float)p[i];
  else return (acc_t<T>)p[i];
}

template <class T>
T store(acc_t<T> v) {
  if constexpr (std::is_same_v<T, f16>) return f16((float)v);
  else if constexpr (std::is_same_v<T, bool>) return v != 0;
  else return (T)v;
}

// out[j] = reduce over members of in_m[offset + j], j < count (elements
// beyond n are zeros).
template <class T>
void reduce(ReduceOp op, const std::vector<const T*>& ins, int64_t n, int64_t offset,
            int64_t count, std::vector<acc_t<T>>& out) {
  using A = acc_t<T>;
  out.assign((size_t)count, A(0));
  const size_t g = ins.size();
  for (int64_t j = 0; j < count; ++j) {
    const int64_t i = offset + j;
    A v = load(ins[0], i, n);
    if (op == ReduceOp::SquareAdd) v = v * v;
    if (op == ReduceOp::LogicalAnd || op == ReduceOp::LogicalOr) v = v != A(0) ? A(1) : A(0);
    for (size_t m = 1; m < g; ++m) {
      A x = load(ins[m], i, n);
      switch (op) {
        case ReduceOp::Add:
        case ReduceOp::Mean: v += x; break;
        case ReduceOp::Mul: v *= x; break;
        case ReduceOp::Min: v = std::min(v, x); break;
        case ReduceOp::Max: v = std::max(v, x); break;
        case ReduceOp::LogicalAnd: v = (v != A(0) && x != A(0)) ? A(1) : A(0); break;
        case ReduceOp::LogicalOr: v = (v != A(0) || x != A(0)) ? A(1) : A(0); break;
        case ReduceOp::SquareAdd: v += x * x; break;
        case ReduceOp::Local: break;
      }
    }
    if (op == ReduceOp::Mean) v = v / (A)g;
    out[(size_t)j] = v;
  }
}

// ins[k] / outs[k]: member k's input / output (outs[k] null: a member of
// another instance, whose output is not written here).
template <class T>
void run_typed(const CollectiveDesc& c, const std::vector<const uint8_t*>& in_bytes,
               const std::vector<uint8_t*>& out_bytes, int64_t n, int64_t m) {
  const int64_t g = (int64_t)in_bytes.size();
  std::vector<const T*> ins;
  for (const uint8_t* p : in_bytes) ins.push_back(reinterpret_cast<const T*>(p));
  auto out_of = [&](int64_t k) { return reinterpret_cast<T*>(out_bytes[(size_t)k]); };
  std::vector<acc_t<T>> acc;
  switch (c.kind) {
    case CollectiveKind::AllReduce: {
      reduce<T>(c.op, ins, n, 0, n, acc);  // computed before any output (outputs may alias inputs)
      for (int64_t k = 0; k < g; ++k) {
        T* out = out_of(k);
        if (out == nullptr) continue;
        for (int64_t j = 0; j < n; ++j) out[j] = store<T>(acc[(size_t)j]);
      }
      return;
    }
    case CollectiveKind::AllGather: {
      std::vector<uint8_t> all((size_t)(n * g) * sizeof(T));
      for (int64_t k = 0; k < g; ++k)
        if (n) std::memcpy(all.data() + k * n * sizeof(T), ins[(size_t)k], (size_t)n * sizeof(T));
      for (int64_t k = 0; k < g; ++k)
        if (m && out_of(k)) std::memcpy(out_of(k), all.data(), (size_t)m * sizeof(T));
      return;
    }
    case CollectiveKind::ReduceScatter: {
      // Bytes, not std::vector<T>: std::vector<bool> has no data().
      std::vector<std::vector<uint8_t>> slices((size_t)g);
      for (int64_t k = 0; k < g; ++k) {
        if (out_of(k) == nullptr) continue;  // another instance's slice
        slices[(size_t)k].resize((size_t)m * sizeof(T));
        T* dst = reinterpret_cast<T*>(slices[(size_t)k].data());
        if (c.op == ReduceOp::Local) {  // rank k keeps its own slice k
          for (int64_t j = 0; j < m; ++j) dst[j] = store<T>(load(ins[(size_t)k], k * m + j, n));
          continue;
        }
        reduce<T>(c.op, ins, n, k * m, m, acc);
        for (int64_t j = 0; j < m; ++j) dst[j] = store<T>(acc[(size_t)j]);
      }
      for (int64_t k = 0; k < g; ++k)
        if (m && out_of(k)) std::memcpy(out_of(k), slices[(size_t)k].data(), (size_t)m * sizeof(T));
      return;
    }
  }
}

}  // namespace

static void run_group(const OpRecord& op, DType dt, const std::vector<const uint8_t*>& ins,
               const std::vector<uint8_t*>& outs, int64_t n, int64_t m) {
  const bool moves_only = op.collective.kind == CollectiveKind::AllGather ||
                          (op.collective.kind == CollectiveKind::ReduceScatter &&
                           op.collective.op == ReduceOp::Local);
  if (dtype_is_fp8(dt)) {  // one byte per element, moved but never reduced
    if (!moves_only)
      throw Error(op.type + " op '" + op.name + "': cannot reduce " + dtype_name(dt) +
                  " values (float8 collectives only move data)");
    run_typed<uint8_t>(op.collective, ins, outs, n, m);
    return;
  }
  bool ok = IPUXL_DISPATCH_ALL(dt, { run_typed<scalar_t>(op.collective, ins, outs, n, m); });
  if (!ok) throw Error(op.type + " op '" + op.name + "': unsupported dtype " + dtype_name(dt));
}

void run_collective(const OpRecord& op, const std::vector<State*>& states) {
  const auto groups = replica_groups(op.collective, (int)states.size());
  const TensorRef& in0 = states[0]->refs[(size_t)op.in[0]];
  const int64_t n = in0.nelms;
  const int64_t m = states[0]->refs[(size_t)op.out[0]].nelms;
  for (const auto& members : groups) {
    std::vector<const uint8_t*> ins;
    std::vector<uint8_t*> outs;
    for (int r : members) {
      ins.push_back(states[(size_t)r]->refs[(size_t)op.in[0]].data);
      outs.push_back(states[(size_t)r]->refs[(size_t)op.out[0]].data);
    }
    run_group(op, in0.dtype, ins, outs, n, m);
  }
}

void run_collective_distributed(const OpRecord& op, const std::vector<State*>& states,
                                int offset, int total, const ExchangeFn& exchange) {
  const int R = (int)states.size();
  const auto groups = replica_groups(op.collective, total);
  const TensorRef& in0 = states[0]->refs[(size_t)op.in[0]];
  const int64_t n = in0.nelms;
  const int64_t m = states[0]->refs[(size_t)op.out[0]].nelms;
  const size_t item = (size_t)n * dtype_size(in0.dtype);
  bool crosses = false;
  for (const auto& members : groups)
    for (int r : members) crosses = crosses || r / R != members[0] / R;
  auto local = [&](int r) { return r >= offset && r < offset + R; };
  std::vector<uint8_t> all;
  if (crosses) {
    std::vector<uint8_t> mine((size_t)R * item);
    for (int r = 0; r < R; ++r)
      if (item) std::memcpy(mine.data() + (size_t)r * item, states[(size_t)r]->refs[(size_t)op.in[0]].data, item);
    all.resize((size_t)total * item);
    exchange(mine.data(), mine.size(), all.data(), op.type + " op '" + op.name + "'");
  }
  for (const auto& members : groups) {
    bool any = false;
    for (int r : members) any = any || local(r);
    if (!any) continue;  // computed by the instances holding it
    std::vector<const uint8_t*> ins;
    std::vector<uint8_t*> outs;
    for (int r : members) {
      if (crosses) ins.push_back(all.data() + (size_t)r * item);
      else ins.push_back(states[(size_t)(r - offset)]->refs[(size_t)op.in[0]].data);
      outs.push_back(local(r) ? states[(size_t)(r - offset)]->refs[(size_t)op.out[0]].data : nullptr);
    }
    run_group(op, in0.dtype, ins, outs, n, m);
  }
}

}  // namespace ipuxl
