#include "collectives.hpp"

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <type_traits>

#include "../core/isa.hpp"

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
acc_t<T> widen(T x) {
  if constexpr (std::is_same_v<T, f16>) return (double)(float)x;
  else return (acc_t<T>)x;
}

template <class T>
acc_t<T> load(const T* p, int64_t i, int64_t n) {
  if (i >= n) return acc_t<T>(0);  // zero padding of a reduce-scatter's last slice
  return widen(p[i]);
}

template <class T>
T store(acc_t<T> v) {
  if constexpr (std::is_same_v<T, f16>) return f16((float)v);
  else if constexpr (std::is_same_v<T, bool>) return v != 0;
  else return (T)v;
}

// out[j] = reduce over members of in_m[offset + j], j < count (elements
// beyond n are zeros). Each element is folded over the members in rank
// order (v = x0; v = v op x1; ...), member by member over the whole range
// so that each pass is a simple loop the compiler vectorises.
template <class T>
void reduce(ReduceOp op, const std::vector<const T*>& ins, int64_t n, int64_t offset,
            int64_t count, acc_t<T>* out) {
  using A = acc_t<T>;
  const size_t g = ins.size();
  const int64_t valid = std::max<int64_t>(0, std::min(count, n - offset));
  // Zero padding: every reduction of zeros is zero.
  for (int64_t j = valid; j < count; ++j) out[j] = A(0);
  const T* p0 = ins[0] + offset;
  for (int64_t j = 0; j < valid; ++j) {
    A v = widen(p0[j]);
    if (op == ReduceOp::SquareAdd) v = v * v;
    if (op == ReduceOp::LogicalAnd || op == ReduceOp::LogicalOr) v = v != A(0) ? A(1) : A(0);
    out[j] = v;
  }
  for (size_t m = 1; m < g; ++m) {
    const T* p = ins[m] + offset;
    switch (op) {
      case ReduceOp::Add:
      case ReduceOp::Mean:
        for (int64_t j = 0; j < valid; ++j) out[j] += widen(p[j]);
        break;
      case ReduceOp::Mul:
        for (int64_t j = 0; j < valid; ++j) out[j] *= widen(p[j]);
        break;
      case ReduceOp::Min:
        for (int64_t j = 0; j < valid; ++j) out[j] = std::min(out[j], widen(p[j]));
        break;
      case ReduceOp::Max:
        for (int64_t j = 0; j < valid; ++j) out[j] = std::max(out[j], widen(p[j]));
        break;
      case ReduceOp::LogicalAnd:
        for (int64_t j = 0; j < valid; ++j)
          out[j] = (out[j] != A(0) && widen(p[j]) != A(0)) ? A(1) : A(0);
        break;
      case ReduceOp::LogicalOr:
        for (int64_t j = 0; j < valid; ++j)
          out[j] = (out[j] != A(0) || widen(p[j]) != A(0)) ? A(1) : A(0);
        break;
      case ReduceOp::SquareAdd:
        for (int64_t j = 0; j < valid; ++j) {
          const A x = widen(p[j]);
          out[j] += x * x;
        }
        break;
      case ReduceOp::Local: break;
    }
  }
  if (op == ReduceOp::Mean)
    for (int64_t j = 0; j < valid; ++j) out[j] = out[j] / (A)g;
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
      if constexpr (std::is_same_v<T, float>) {
        // Two float32 members: the float32 sum, product, min or max is
        // correctly rounded, so it equals the double result rounded once
        // (53 >= 2 * 24 + 2 bits) - the same bits, without widening. Each
        // element is read before any output of it is written (aliasing).
        const ReduceOp op = c.op;
        if (g == 2 && (op == ReduceOp::Add || op == ReduceOp::Mul || op == ReduceOp::Min ||
                       op == ReduceOp::Max)) {
          const float* a = ins[0];
          const float* b = ins[1];
          float* o0 = out_of(0);
          float* o1 = out_of(1);
          // Through a small local buffer: the loop over it vectorises (the
          // buffer aliases nothing), and a chunk is read whole before its
          // outputs are written, so in-place outputs stay correct. Compiled
          // for each ISA level (isa::run).
          auto run = [&](auto f) {
            isa::run(
                [&](int64_t b0, int64_t e0) {
                  constexpr int64_t kTile = 1024;
                  alignas(64) float r[kTile];
                  for (int64_t c0 = b0; c0 < e0; c0 += kTile) {
                    const int64_t cnt = std::min(kTile, e0 - c0);
                    for (int64_t j = 0; j < cnt; ++j) r[j] = f(a[c0 + j], b[c0 + j]);
                    if (o0) std::memcpy(o0 + c0, r, (size_t)cnt * sizeof(float));
                    if (o1) std::memcpy(o1 + c0, r, (size_t)cnt * sizeof(float));
                  }
                },
                0, n);
          };
          switch (op) {
            case ReduceOp::Add: run([](float x, float y) { return x + y; }); break;
            case ReduceOp::Mul: run([](float x, float y) { return x * y; }); break;
            case ReduceOp::Min: run([](float x, float y) { return std::min(x, y); }); break;
            default: run([](float x, float y) { return std::max(x, y); }); break;
          }
          return;
        }
      }
      // The outputs written here (others belong to another instance).
      int64_t first = -1;
      for (int64_t k = g - 1; k >= 0; --k)
        if (out_of(k)) first = k;
      if (first < 0) return;
      // A group of one: the value itself, unless the operator changes it.
      if (g == 1 && (c.op == ReduceOp::Add || c.op == ReduceOp::Mean ||
                     c.op == ReduceOp::Mul || c.op == ReduceOp::Min || c.op == ReduceOp::Max)) {
        if (n && out_of(0) != ins[0]) std::memmove(out_of(0), ins[0], (size_t)n * sizeof(T));
        return;
      }
      // In chunks that stay in cache, compiled for each ISA level (the
      // widening, accumulating and narrowing loops vectorise). Outputs may
      // alias inputs (in place): element j of an output depends on element
      // j of the inputs only, and each chunk is reduced before any output
      // of it is written. The result is narrowed once, into the first
      // output, and copied to the others.
      isa::run(
          [&](int64_t b0, int64_t e0) {
            constexpr int64_t kChunk = 2048;
            alignas(64) acc_t<T> acc[kChunk];
            T* o = out_of(first);
            for (int64_t c0 = b0; c0 < e0; c0 += kChunk) {
              const int64_t cnt = std::min(kChunk, e0 - c0);
              reduce<T>(c.op, ins, n, c0, cnt, acc);
              for (int64_t j = 0; j < cnt; ++j) o[c0 + j] = store<T>(acc[j]);
              for (int64_t k = first + 1; k < g; ++k)
                if (out_of(k)) std::memcpy(out_of(k) + c0, o + c0, (size_t)cnt * sizeof(T));
            }
          },
          0, n);
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
        acc.resize((size_t)m);
        reduce<T>(c.op, ins, n, k * m, m, acc.data());
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

namespace {

// The split all-reduce of run_collective_distributed (see collectives.hpp):
// `groups` all have members on every one of the `instances`; this is
// instance `me`, holding replicas [me * R, (me + 1) * R).
void all_reduce_split(const OpRecord& op, const std::vector<State*>& states,
                      const std::vector<std::vector<int>>& groups, int me, int instances,
                      const ExchangeFn& exchange, std::vector<uint8_t>& recv) {
  const int R = (int)states.size();
  const DType dt = states[0]->refs[(size_t)op.in[0]].dtype;
  const int64_t n = states[0]->refs[(size_t)op.in[0]].nelms;
  const size_t es = dtype_size(dt);
  const int64_t q = (n + instances - 1) / instances;
  auto lo = [&](int i) { return std::min<int64_t>(n, (int64_t)i * q); };
  auto cnt = [&](int i) { return std::min<int64_t>(n, (int64_t)(i + 1) * q) - lo(i); };
  auto in_of = [&](int r) { return states[(size_t)(r - me * R)]->refs[(size_t)op.in[0]].data; };
  auto out_of = [&](int r) { return states[(size_t)(r - me * R)]->refs[(size_t)op.out[0]].data; };
  auto home = [&](int r) { return r / R; };
  const std::string what = op.type + " op '" + op.name + "'";

  // 1. Reduce-scatter's exchange: every local member's slice p goes to
  // instance p; every remote member's slice `me` comes here. Listed by
  // peer, then group, then member (ascending): the peer lists the same.
  size_t remote = 0;
  for (const auto& g : groups)
    for (int r : g) remote += home(r) != me;
  const size_t mine = (size_t)cnt(me) * es;
  if (recv.size() < remote * mine) recv.resize(remote * mine);
  std::vector<Block> sends, recvs;
  size_t at = 0;
  for (int p = 0; p < instances; ++p) {
    if (p == me) continue;
    for (size_t gi = 0; gi < groups.size(); ++gi)
      for (int r : groups[gi]) {
        if (home(r) == me)
          sends.push_back({p, in_of(r) + (size_t)lo(p) * es, (size_t)cnt(p) * es});
        else if (home(r) == p) {
          recvs.push_back({p, recv.data() + at, mine});
          at += mine;
        }
      }
  }
  exchange(sends, recvs, what + " (reduce-scatter)");

  // 2. Reduce slice `me` of each group, every member in rank order, into
  // the first local member's output (an in-place output is read before it
  // is written, element by element; run_group's contract).
  // recvs were listed peer by peer; index them by (group, member).
  size_t k = 0;
  std::vector<std::vector<const uint8_t*>> remote_in(groups.size());
  for (size_t gi = 0; gi < groups.size(); ++gi) remote_in[gi].assign(groups[gi].size(), nullptr);
  for (int p = 0; p < instances; ++p) {
    if (p == me) continue;
    for (size_t gi = 0; gi < groups.size(); ++gi)
      for (size_t j = 0; j < groups[gi].size(); ++j)
        if (home(groups[gi][j]) == p) remote_in[gi][j] = static_cast<const uint8_t*>(recvs[k++].data);
  }
  std::vector<int> first(groups.size(), -1);
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    std::vector<const uint8_t*> gin;
    std::vector<uint8_t*> gout;
    for (size_t j = 0; j < groups[gi].size(); ++j) {
      const int r = groups[gi][j];
      const bool local = home(r) == me;
      gin.push_back(local ? in_of(r) + (size_t)lo(me) * es : remote_in[gi][j]);
      if (local && first[gi] < 0) {
        first[gi] = r;
        gout.push_back(out_of(r) + (size_t)lo(me) * es);
      } else {
        gout.push_back(nullptr);
      }
    }
    run_group(op, dt, gin, gout, cnt(me), cnt(me));
  }

  // 3. All-gather's exchange: slice `me` of each group's result to every
  // other instance, slice p of it from instance p, straight into the first
  // local member's output (its slice p was sent in step 1, which has
  // completed: MPI no longer reads it).
  sends.clear();
  recvs.clear();
  for (int p = 0; p < instances; ++p) {
    if (p == me) continue;
    for (size_t gi = 0; gi < groups.size(); ++gi) {
      uint8_t* o = out_of(first[gi]);
      sends.push_back({p, o + (size_t)lo(me) * es, mine});
      recvs.push_back({p, o + (size_t)lo(p) * es, (size_t)cnt(p) * es});
    }
  }
  exchange(sends, recvs, what + " (all-gather)");

  // 4. The other local members' outputs: copies of the first's (their
  // inputs were last read in steps 1-2).
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const uint8_t* o = out_of(first[gi]);
    for (int r : groups[gi])
      if (home(r) == me && r != first[gi] && n) std::memcpy(out_of(r), o, (size_t)n * es);
  }
}

// The handshake before a collective that crosses instances: each instance
// sends every other one a small description of the collective it is about
// to run, and compares what it receives with its own. Instances whose
// programs disagree (sizes, dtype, operator or grouping) would otherwise
// exchange messages of different lengths and reduce garbage, or reduce
// with different operators and all "succeed": this way every instance
// stops with an error naming the op before any data moves.
struct CollectiveHeader {
  int64_t magic, kind, reduce, dtype, in_elms, out_elms, total, groups_hash;
};
constexpr int64_t kHeaderMagic = 0x69707578636f6c31;  // "ipuxcol1"

const char* kind_name(int64_t k) {
  switch (k) {
    case (int64_t)CollectiveKind::AllReduce: return "all-reduce";
    case (int64_t)CollectiveKind::AllGather: return "all-gather";
    case (int64_t)CollectiveKind::ReduceScatter: return "reduce-scatter";
    default: return "?";
  }
}

const char* reduce_name(int64_t r) {
  static const char* names[] = {"add", "mean", "mul", "min", "max", "logical_and",
                                "logical_or", "square_add", "local"};
  return r >= 0 && r < 9 ? names[r] : "?";
}

std::string describe(const CollectiveHeader& h) {
  if (h.magic != kHeaderMagic) return "not a collective (another exchange)";
  const std::string dt = dtype_is_valid((int)h.dtype) ? dtype_name((DType)h.dtype) : "?";
  return std::string(kind_name(h.kind)) + "(" + reduce_name(h.reduce) + ") of " + dt + " x" +
         std::to_string(h.in_elms) + " -> x" + std::to_string(h.out_elms) + " over " +
         std::to_string(h.total) + " replicas, groups #" +
         std::to_string((uint64_t)h.groups_hash % 1000000);
}

void check_peers_agree(const OpRecord& op, const std::vector<std::vector<int>>& groups,
                       DType dt, int64_t n, int64_t m, int total, int me, int instances,
                       const ExchangeFn& exchange) {
  uint64_t hash = 1469598103934665603ull;  // FNV-1a over the groups' members
  for (const auto& g : groups) {
    for (int r : g) hash = (hash ^ (uint64_t)(uint32_t)r) * 1099511628211ull;
    hash = (hash ^ 0xffffffffull) * 1099511628211ull;
  }
  const CollectiveHeader mine{kHeaderMagic, (int64_t)op.collective.kind,
                              (int64_t)op.collective.op, (int64_t)dt, n, m, total,
                              (int64_t)hash};
  std::vector<CollectiveHeader> theirs((size_t)instances);
  std::vector<Block> sends, recvs;
  for (int p = 0; p < instances; ++p) {
    if (p == me) continue;
    sends.push_back({p, const_cast<CollectiveHeader*>(&mine), sizeof mine});
    recvs.push_back({p, &theirs[(size_t)p], sizeof mine});
  }
  const std::string what = op.type + " op '" + op.name + "'";
  exchange(sends, recvs, what + " (handshake)");
  for (int p = 0; p < instances; ++p) {
    if (p == me || std::memcmp(&theirs[(size_t)p], &mine, sizeof mine) == 0) continue;
    throw RunError(what + ": the instances disagree about this collective: instance " +
                   std::to_string(me) + " of " + std::to_string(instances) + " runs " +
                   describe(mine) + ", instance " + std::to_string(p) + " runs " +
                   describe(theirs[(size_t)p]) +
                   " (every instance must run the same program; a mismatch of size, dtype, "
                   "operator or replica grouping would reduce garbage)");
  }
}

}  // namespace

void run_collective_distributed(const OpRecord& op, const std::vector<State*>& states,
                                int offset, int total, const ExchangeFn& exchange,
                                std::vector<uint8_t>& recv) {
  const int R = (int)states.size();
  const int instances = total / R, me = offset / R;
  const auto groups = replica_groups(op.collective, total);
  const TensorRef& in0 = states[0]->refs[(size_t)op.in[0]];
  const int64_t n = in0.nelms;
  const int64_t m = states[0]->refs[(size_t)op.out[0]].nelms;
  const size_t item = (size_t)n * dtype_size(in0.dtype);
  bool crosses = false, everywhere = true;
  for (const auto& members : groups) {
    std::vector<char> has((size_t)instances, 0);
    for (int r : members) {
      crosses = crosses || r / R != members[0] / R;
      has[(size_t)(r / R)] = 1;
    }
    for (char h : has) everywhere = everywhere && h;
  }
  if (crosses)
    check_peers_agree(op, groups, in0.dtype, n, m, total, me, instances, exchange);
  if (crosses && everywhere && op.collective.kind == CollectiveKind::AllReduce &&
      item >= kSplitAllReduceBytes && !dtype_is_fp8(in0.dtype)) {
    all_reduce_split(op, states, groups, me, instances, exchange, recv);
    return;
  }
  auto local = [&](int r) { return r >= offset && r < offset + R; };
  // Other instances' inputs land in `recv` at their global replica's block
  // (this instance's blocks are not written: local members read their own
  // states). One message per replica and peer, no packing.
  uint8_t* all = nullptr;
  if (crosses) {
    if (recv.size() < (size_t)total * item) recv.resize((size_t)total * item);
    all = recv.data();
    std::vector<Block> sends, recvs;
    for (int p = 0; p < instances; ++p) {
      if (p == me) continue;
      for (int k = 0; k < R; ++k) {
        sends.push_back({p, states[(size_t)k]->refs[(size_t)op.in[0]].data, item});
        recvs.push_back({p, all + (size_t)(p * R + k) * item, item});
      }
    }
    exchange(sends, recvs, op.type + " op '" + op.name + "'");
  }
  for (const auto& members : groups) {
    bool any = false;
    for (int r : members) any = any || local(r);
    if (!any) continue;  // computed by the instances holding it
    std::vector<const uint8_t*> ins;
    std::vector<uint8_t*> outs;
    for (int r : members) {
      if (crosses && !local(r)) ins.push_back(all + (size_t)r * item);
      else ins.push_back(states[(size_t)(r - offset)]->refs[(size_t)op.in[0]].data);
      outs.push_back(local(r) ? states[(size_t)(r - offset)]->refs[(size_t)op.out[0]].data : nullptr);
    }
    run_group(op, in0.dtype, ins, outs, n, m);
  }
}

}  // namespace ipuxl
