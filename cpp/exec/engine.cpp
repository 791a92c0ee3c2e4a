#include "engine.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>

#include <time.h>

#include "collectives.hpp"
#include "../core/options.hpp"
#include "../core/parallel.hpp"

namespace ipuxl {

namespace {
// The signal poll's clock: the coarse monotonic clock costs a few
// nanoseconds (no syscall) and its millisecond resolution is plenty for a
// poll every Engine::kPollSeconds, so it is read before every step.
double coarse_clock() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The profiler's clock, in seconds: wall time, or (the core's options,
// ProfileClock::Thread) the calling thread's CPU time, which a loaded
// machine does not inflate (with one thread it is all of a kernel's work;
// with more threads it misses the workers' share).
double profile_clock() {
  if (options().profile_clock == ProfileClock::Thread) {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace


Engine::Engine(std::shared_ptr<const ProgramDesc> desc, int main_graph,
               std::shared_ptr<const ProgramDesc> faithful)
    : desc_(std::move(desc)), faithful_(std::move(faithful)), main_graph_(main_graph) {
  const auto order = desc_->validate(main_graph_);
  al_ = resolve_aliases(*desc_);
  const auto written = written_roots(*desc_, al_, order);
  for (int g : order) program_written_.insert(written[g].begin(), written[g].end());
  low_ = lower_program(*desc_, main_graph_, order, al_, written);
  plan_ = plan_memory(*desc_, al_);
  exe_ = compile(low_);
  if (faithful_) {
    const auto f_order = faithful_->validate(main_graph_);
    const auto f_al = resolve_aliases(*faithful_);
    faithful_low_ = lower_program(*faithful_, main_graph_, f_order, f_al,
                                  written_roots(*faithful_, f_al, f_order));
  }
  if (desc_->replicas < 1) throw Error("Engine: the program needs at least one replica");
  view_load_.assign(desc_->ops.size(), 0);
  for (size_t i = 0; i < desc_->ops.size(); ++i) {
    const auto& op = desc_->ops[i];
    if (!op.view_streaming_memory) continue;
    const int t = op.out[0];
    if (op.in[0] >= 0 || al_.root[(size_t)t] != t ||
        desc_->tensors[(size_t)t].kind != TensorKind::Intermediate)
      throw Error("RemoteLoad op '" + op.name + "': only a load into a new intermediate "
                  "tensor can view Streaming Memory");
    view_load_[i] = 1;
  }
  std::vector<int> stores_of(desc_->streams.size(), 0);
  for (const auto& op : desc_->ops)
    if (op.kind == OpKind::HostStore) stores_of[(size_t)op.stream]++;
  for (const auto& op : desc_->ops) {
    if (!op.write_host_directly) continue;
    // What the host pass direct_host_stores checked, and what the run
    // relies on: the store runs once per run at transfer 0 (the stream's
    // only store, at the top of the main program) and the storage of its
    // tensor (the tensor's own, or that of the main-graph intermediate it
    // views, of the same size) may live in the host array.
    const int t = op.in[0], root = al_.root[(size_t)t];
    const auto& rd = desc_->tensors[(size_t)root];
    if (op.graph != main_graph_ || op.context != ExecContext::Normal ||
        stores_of[(size_t)op.stream] != 1 || rd.kind != TensorKind::Intermediate ||
        rd.graph != main_graph_ || rd.nbytes() != desc_->tensors[(size_t)t].nbytes())
      throw Error("HostStore op '" + op.name + "': only the one store of a stream, in the main "
                  "program, of (a whole view of) a main-graph intermediate can write the host "
                  "array directly");
    direct_stores_.emplace_back(op.stream, root);
  }
  for (int r = 0; r < desc_->replicas; ++r)
    states_.push_back(
        make_state(*desc_, al_, plan_, exe_, low_.skipped_ops, program_written_, r));
  profiles_.resize(exe_.kernel_ops.size());
  for (size_t k = 0; k < exe_.kernel_ops.size(); ++k) {
    const auto& op = desc_->ops[exe_.kernel_ops[k]];
    profiles_[k].label = op.kernel + ":" + op.name;
  }
}

namespace {

bool truth(const TensorRef& c) {
  // Floating point -0.0 has a sign bit only: compare values, not bytes.
  switch (c.dtype) {
    case DType::Float32: return *c.as<float>() != 0.0f;
    case DType::Float16: return (float)*c.as<f16>() != 0.0f;
    case DType::Float64: return *c.as<double>() != 0.0;
    default: break;
  }
  for (size_t i = 0; i < dtype_size(c.dtype); ++i)
    if (c.data[i] != 0) return true;
  return false;
}

int64_t scalar_index(const TensorRef& t) {
  switch (t.dtype) {
    case DType::Int32: return *t.as<int32_t>();
    case DType::UInt32: return (int64_t)*t.as<uint32_t>();
    case DType::Int64: return *t.as<int64_t>();
    case DType::UInt64: {
      uint64_t v = *t.as<uint64_t>();
      return v > (uint64_t)INT64_MAX ? -1 : (int64_t)v;
    }
    default: return -1;
  }
}

// Streaming Memory transfers and host streams: large entries (weights,
// optimizer state, a batch of activations) are copied by the thread pool in
// chunks.
void copy_bytes(uint8_t* dst, const uint8_t* src, size_t n) {
  constexpr size_t kChunk = size_t(1) << 18;
  if (n < 2 * kChunk || num_threads() < 2) {
    std::memcpy(dst, src, n);
    return;
  }
  parallel_for((int64_t)((n + kChunk - 1) / kChunk), 1, [&](int64_t b, int64_t e) {
    const size_t lo = (size_t)b * kChunk, hi = std::min(n, (size_t)e * kChunk);
    std::memcpy(dst + lo, src + lo, hi - lo);
  });
}

}  // namespace

void Engine::execute(int program, std::vector<StreamBinding>& streams) {
  const auto& desc = *desc_;
  const Instr* code = exe_.code.data();
  const int R = (int)states_.size();
  // Replicas run in lockstep: one pass over the code, each instruction
  // applied to every active replica. A conditional whose replicas disagree
  // runs its then-part for some and its else-part for the others.
  std::vector<State*> active;
  for (auto& s : states_) active.push_back(s.get());
  struct Divergence {
    int else_pc, end_pc;
    bool in_else;
    std::vector<State*> else_set, outer;
  };
  std::vector<Divergence> div;
  std::vector<int64_t> counters((size_t)exe_.num_counters, 0);
  std::vector<int> returns;
  RunContext ctx;
  ctx.run_index = run_index_;
  int pc = exe_.entry[program];
  // The signal poll: the clock is read every `stride` steps, a stride that
  // doubles (up to 128) while steps are quick and drops to 1 when the last
  // stride took over half a millisecond, so that reading it costs well
  // under a nanosecond a step in loops of tiny kernels and a poll is never
  // more than a few slow steps late.
  const bool polling = static_cast<bool>(poll_);
  double last_read = polling ? coarse_clock() : 0.0;
  double next_poll = last_read + kPollSeconds;
  int stride = 1, countdown = 1;
  for (;;) {
    if (polling && --countdown == 0) {
      const double now = coarse_clock();
      stride = now - last_read < 0.5e-3 ? std::min(stride * 2, 128) : 1;
      countdown = stride;
      last_read = now;
      if (now >= next_poll) {
        poll_();  // may throw: the run stops between two steps
        last_read = coarse_clock();
        next_poll = last_read + kPollSeconds;
      }
    }
    if (!div.empty() && div.back().in_else && pc == div.back().end_pc) {
      active = std::move(div.back().outer);
      div.pop_back();
      continue;
    }
    const Instr& in = code[pc];
    switch (in.code) {
      case Code::Exec: {
        for (State* s : active) {
          ctx.host_write_epoch = s->host_write_epoch;
          ctx.replica = s->replica;
          Kernel* k = s->kernels[(size_t)in.a].get();
          if (!profiling_) {
            k->run(ctx);
          } else {
            const double t0 = profile_clock();
            k->run(ctx);
            auto& p = profiles_[(size_t)in.a];
            p.seconds += profile_clock() - t0;
            p.calls++;
          }
        }
        ++pc;
        break;
      }
      case Code::Copy:
        for (State* s : active) {
          const TensorRef& src = s->refs[(size_t)in.a];
          const TensorRef& dst = s->refs[(size_t)in.b];
          if (src.data != dst.data) std::memcpy(dst.data, src.data, src.nbytes());
        }
        ++pc;
        break;
      case Code::Bind:
        for (State* s : active)
          for (const auto& it : exe_.binds[(size_t)in.a]) {
            uint8_t* p = it.to >= 0 ? s->refs[(size_t)it.to].data
                                    : s->home[(size_t)al_.root[(size_t)it.group[0]]];
            for (int m : it.group) s->refs[(size_t)m].data = p;
          }
        ++pc;
        break;
      case Code::Call:
        returns.push_back(pc + 1);
        pc = in.a;
        break;
      case Code::Ret:
        pc = returns.back();
        returns.pop_back();
        break;
      case Code::RepeatBegin:
        if (in.n <= 0) {
          pc = in.b;
        } else {
          counters[(size_t)in.a] = in.n;
          ++pc;
        }
        break;
      case Code::RepeatEnd:
        pc = --counters[(size_t)in.a] > 0 ? in.b : pc + 1;
        break;
      case Code::If: {
        std::vector<State*> yes, no;
        for (State* s : active) (truth(s->refs[(size_t)in.a]) ? yes : no).push_back(s);
        if (no.empty()) {
          ++pc;
        } else if (yes.empty()) {
          pc = in.b;
        } else {  // replicas disagree: then-part for `yes`, else-part for `no`
          div.push_back(Divergence{in.b, (int)in.n, false, std::move(no), active});
          active = std::move(yes);
          ++pc;
        }
        break;
      }
      case Code::Jump:
        // The end of a then-part whose replicas diverged: now the others.
        if (!div.empty() && !div.back().in_else && pc + 1 == div.back().else_pc) {
          div.back().in_else = true;
          active = div.back().else_set;
          pc = div.back().else_pc;
        } else {
          pc = in.a;
        }
        break;
      case Code::StreamIn: {
        auto& b = streams[(size_t)in.a];
        if (b.data == nullptr || b.cursor >= b.items)
          throw RunError("[StepIOSplitter] IStepIO unexpectedly did not provide input data for "
                         "stream '" + desc.streams[(size_t)in.a].name + "': it holds " +
                         std::to_string(b.items) +
                         " transfer(s) and all were consumed in this run (num_host_transfers "
                         "limits host_load executions per stream per run)");
        for (State* s : active)
          copy_bytes(s->refs[(size_t)in.b].data,
                     b.data + (b.cursor * R + s->replica) * b.item_bytes, b.item_bytes);
        b.cursor++;
        ++pc;
        break;
      }
      case Code::StreamOut: {
        auto& b = streams[(size_t)in.a];
        if (b.data == nullptr || b.cursor >= b.items)
          throw RunError("host_store to stream '" + desc.streams[(size_t)in.a].name +
                         "': no space left in the " + std::to_string(b.items) +
                         " transfer(s) of the output buffer (num_host_transfers limits "
                         "host_store executions per stream per run)");
        for (State* s : active) {
          uint8_t* dst = b.data + (b.cursor * R + s->replica) * b.item_bytes;
          const uint8_t* src = s->refs[(size_t)in.b].data;
          if (dst != src) copy_bytes(dst, src, b.item_bytes);  // equal: computed in place
        }
        b.cursor++;
        ++pc;
        break;
      }
      case Code::Carry: {
        // All carried values are read before any is written: staged sources
        // (outputs that are body inputs) go through buffers first.
        const auto& c = exe_.carries[(size_t)in.a];
        for (State* s : active) {
          auto& bufs = s->carry_bufs[(size_t)in.a];
          for (size_t k = 0; k < c.staged.size(); ++k)
            std::memcpy(bufs[k].data(), s->refs[(size_t)c.staged[k].first].data, bufs[k].size());
          for (auto [src, dst] : c.direct)
            std::memcpy(s->refs[(size_t)dst].data, s->refs[(size_t)src].data,
                        s->refs[(size_t)src].nbytes());
          for (size_t k = 0; k < c.staged.size(); ++k)
            std::memcpy(s->refs[(size_t)c.staged[k].second].data, bufs[k].data(), bufs[k].size());
        }
        ++pc;
        break;
      }
      case Code::Collective: {
        const auto& op = desc.ops[(size_t)in.a];
        if ((int)active.size() != R)
          throw RunError(op.type + " op '" + op.name + "': a collective inside a conditional "
                         "whose replicas took different branches (only " +
                         std::to_string(active.size()) + " of " + std::to_string(R) +
                         " replicas reached it)");
        std::vector<State*> all;
        for (auto& s : states_) all.push_back(s.get());
        if (dist_total_ > 0)
          run_collective_distributed(op, all, dist_offset_, dist_total_, exchange_, dist_recv_);
        else run_collective(op, all);
        ++pc;
        break;
      }
      case Code::RemoteLoad:
      case Code::RemoteStore: {
        const auto& op = desc.ops[(size_t)in.a];
        const auto& rb = desc.remote_buffers[(size_t)op.remote_buffer];
        const size_t bytes = rb.entry_bytes();
        for (State* s : active) {
          int64_t entry = 0;
          if (op.in[1] >= 0) entry = scalar_index(s->refs[(size_t)op.in[1]]);
          if (entry < 0 || entry >= rb.entries)
            throw RunError(op.type + " op '" + op.name + "': offset " + std::to_string(entry) +
                           " is out of range for remote buffer '" + rb.name + "' of " +
                           std::to_string(rb.entries) + " entries (replica " +
                           std::to_string(s->replica) + ")");
          uint8_t* slot = s->remote[(size_t)op.remote_buffer].data() + (size_t)entry * bytes;
          if (in.code == Code::RemoteStore) {
            // A tensor that views this very entry (see below) is already there.
            uint8_t* src = s->refs[(size_t)op.in[0]].data;
            if (src != slot) copy_bytes(slot, src, bytes);
            continue;
          }
          const int t = op.out[0];
          if (view_load_[(size_t)in.a]) {
            // The host pass view_remote_loads proved that reading and
            // writing the entry itself is what the copy would give: point
            // the loaded tensor (and its aliases) at it. An entry that is
            // not 64-byte aligned, as the arena's tensors are, is copied.
            uint8_t* p = (reinterpret_cast<uintptr_t>(slot) & 63) == 0 ? slot
                                                                     : s->home[(size_t)t];
            if (s->refs[(size_t)t].data != p)
              for (int m : al_.members[(size_t)t]) s->refs[(size_t)m].data = p;
            if (p == slot) continue;
          }
          copy_bytes(s->refs[(size_t)t].data, slot, bytes);
        }
        ++pc;
        break;
      }
      case Code::End:
        return;
    }
  }
}

std::vector<int64_t> Engine::run(std::vector<StreamBinding> bindings,
                                 std::function<void()> poll) {
  if (bindings.size() != desc_->streams.size())
    throw Error("Engine.run: expected " + std::to_string(desc_->streams.size()) +
                " stream bindings, got " + std::to_string(bindings.size()));
  if (desc_->total_replicas() != replicas() && dist_total_ == 0)
    throw Error("Engine.run: the program is one instance of " +
                std::to_string(desc_->total_replicas()) + " replicas: call set_distributed first");
  ++run_index_;
  state_defined_ = false;
  poll_ = std::move(poll);
  // The poll lives for this run only (it may refer to the caller's frame).
  struct ClearPoll {
    std::function<void()>& p;
    ~ClearPoll() { p = nullptr; }
  } clear_poll{poll_};
  if (direct_stores_.empty()) {
    execute(kMainProgram, bindings);
  } else {
    const auto bound = bind_direct_stores(bindings);
    try {
      execute(kMainProgram, bindings);
    } catch (...) {
      unbind_direct_stores(bound);
      throw;
    }
    unbind_direct_stores(bound);
  }
  state_defined_ = true;
  // Transfers of an output the program did not store this run are zeroed:
  // the host never sees uninitialised memory. The caller gets each
  // stream's transfer count and may warn.
  std::vector<int64_t> used(bindings.size(), 0);
  for (size_t s = 0; s < bindings.size(); ++s) {
    auto& b = bindings[s];
    used[s] = b.cursor;
    if (!desc_->streams[s].host_to_device && b.data && b.cursor < b.items)
      std::memset(b.data + b.cursor * states_.size() * b.item_bytes, 0,
                  (size_t)(b.items - b.cursor) * states_.size() * b.item_bytes);
  }
  return used;
}

std::vector<std::tuple<State*, int, uint8_t*>> Engine::bind_direct_stores(
    const std::vector<StreamBinding>& bindings) {
  std::vector<std::tuple<State*, int, uint8_t*>> bound;
  const size_t R = states_.size();
  auto span_of = [&](const StreamBinding& b) {
    const uintptr_t lo = reinterpret_cast<uintptr_t>(b.data);
    return std::make_pair(lo, lo + (size_t)b.items * R * b.item_bytes);
  };
  for (auto [stream, t] : direct_stores_) {
    const StreamBinding& b = bindings[(size_t)stream];
    if (!b.data || b.items < 1 || b.item_bytes != desc_->tensors[(size_t)t].nbytes()) continue;
    // Written while the program runs instead of at the store: no other
    // host array of the run (an input read later, another output) may
    // share those bytes, or the order of the writes would show.
    const auto mine = span_of(b);
    bool shared = false;
    for (size_t o = 0; o < bindings.size() && !shared; ++o) {
      if (o == (size_t)stream || !bindings[o].data || bindings[o].items < 1) continue;
      const auto other = span_of(bindings[o]);
      shared = mine.first < other.second && other.first < mine.second;
    }
    if (shared) continue;
    for (auto& sp : states_) {
      uint8_t* slot = b.data + (size_t)sp->replica * b.item_bytes;
      // Kernels may rely on the arena's 64-byte alignment: else copy.
      if ((reinterpret_cast<uintptr_t>(slot) & 63) != 0) continue;
      bound.emplace_back(sp.get(), t, sp->home[(size_t)t]);
      for (int m : al_.members[(size_t)t]) sp->refs[(size_t)m].data = slot;
      sp->home[(size_t)t] = slot;
    }
  }
  return bound;
}

void Engine::unbind_direct_stores(const std::vector<std::tuple<State*, int, uint8_t*>>& bound) {
  // Back to the arena: nothing keeps a pointer into the caller's arrays
  // once the run returns.
  for (auto it = bound.rbegin(); it != bound.rend(); ++it) {  // last bound first
    const auto& [s, t, home] = *it;
    for (int m : al_.members[(size_t)t]) s->refs[(size_t)m].data = home;
    s->home[(size_t)t] = home;
  }
}

bool Engine::has_weights_program(bool from_host) const {
  return !low_.programs[from_host ? kWeightsFromHostProgram : kWeightsToHostProgram].body.empty();
}

void Engine::run_weights_program(bool from_host) {
  if (!has_weights_program(from_host)) return;
  std::vector<StreamBinding> none(desc_->streams.size());
  state_defined_ = false;
  execute(from_host ? kWeightsFromHostProgram : kWeightsToHostProgram, none);
  state_defined_ = true;
}

void Engine::set_distributed(int offset, int total, ExchangeFn exchange) {
  const int R = replicas();
  if (total != desc_->total_replicas())
    throw Error("Engine.set_distributed: the program was built for " +
                std::to_string(desc_->total_replicas()) + " replicas in all, not " +
                std::to_string(total));
  if (total < R || total % R != 0 || offset < 0 || offset % R != 0 || offset + R > total)
    throw Error("Engine.set_distributed: this engine's " + std::to_string(R) +
                " replicas cannot start at replica " + std::to_string(offset) + " of " +
                std::to_string(total) + " (instances hold equal, contiguous blocks)");
  if (!exchange) throw Error("Engine.set_distributed: no exchange function");
  dist_offset_ = offset;
  dist_total_ = total;
  exchange_ = std::move(exchange);
}

void Engine::check_replica(int replica, const char* what) const {
  if (replica < 0 || replica >= (int)states_.size())
    throw Error(std::string(what) + ": replica " + std::to_string(replica) + " is out of range [0, " +
                std::to_string(states_.size()) + ")");
}

void Engine::write_tensor(int tensor, const uint8_t* src, size_t nbytes, int replica) {
  desc_->check_tensor(tensor, "write_tensor");
  if (replica >= 0) check_replica(replica, "write_tensor");
  const auto& want = states_[0]->refs[(size_t)tensor];
  if (nbytes != want.nbytes())
    throw Error("write_tensor '" + want.name + "': got " + std::to_string(nbytes) +
                " bytes, expected " + std::to_string(want.nbytes()));
  for (auto& sp : states_) {
    State& s = *sp;
    if (replica >= 0 && s.replica != replica) continue;
    auto& r = s.refs[(size_t)tensor];
    if (r.data != src) std::memcpy(r.data, src, nbytes);  // equal: bound to the host array
    s.host_write_epoch++;  // kernels' caches of host-only tensors are stale either way
  }
}

void Engine::read_tensor(int tensor, uint8_t* dst, size_t nbytes, int replica) const {
  desc_->check_tensor(tensor, "read_tensor");
  check_replica(replica, "read_tensor");
  const auto& r = states_[(size_t)replica]->refs[(size_t)tensor];
  if (nbytes != r.nbytes())
    throw Error("read_tensor '" + r.name + "': got " + std::to_string(nbytes) +
                " bytes, expected " + std::to_string(r.nbytes()));
  if (dst != r.data) std::memcpy(dst, r.data, nbytes);
}

uint8_t* Engine::remote_slot(int buffer, int64_t entry, int replica, size_t nbytes,
                             const char* what) const {
  if (buffer < 0 || buffer >= (int)desc_->remote_buffers.size())
    throw Error(std::string(what) + ": no remote buffer " + std::to_string(buffer));
  check_replica(replica, what);
  const auto& rb = desc_->remote_buffers[(size_t)buffer];
  if (entry < 0 || entry >= rb.entries)
    throw Error(std::string(what) + ": entry " + std::to_string(entry) +
                " is out of range for remote buffer '" + rb.name + "' of " +
                std::to_string(rb.entries) + " entries");
  if (nbytes != rb.entry_bytes())
    throw Error(std::string(what) + " '" + rb.name + "': got " + std::to_string(nbytes) +
                " bytes, an entry has " + std::to_string(rb.entry_bytes()));
  return states_[(size_t)replica]->remote[(size_t)buffer].data() + (size_t)entry * nbytes;
}

void Engine::write_remote(int buffer, int64_t entry, int replica, const uint8_t* src,
                          size_t nbytes) {
  std::memcpy(remote_slot(buffer, entry, replica, nbytes, "write_remote"), src, nbytes);
}

void Engine::read_remote(int buffer, int64_t entry, int replica, uint8_t* dst,
                         size_t nbytes) const {
  std::memcpy(dst, remote_slot(buffer, entry, replica, nbytes, "read_remote"), nbytes);
}

bool Engine::program_writes(int tensor) const {
  desc_->check_tensor(tensor, "program_writes");
  return program_written_.count(al_.root[(size_t)tensor]) != 0;
}

void Engine::bind_external(int tensor, uint8_t* data, size_t nbytes) {
  desc_->check_tensor(tensor, "bind_external");
  const auto& td = desc_->tensors[(size_t)tensor];
  State& s = state();
  auto& r = s.refs[(size_t)tensor];
  if (td.kind != TensorKind::Variable || td.graph != main_graph_ || al_.root[(size_t)tensor] != tensor)
    throw Error("bind_external '" + r.name + "': only a main-graph variable can use host memory");
  if (states_.size() != 1)
    throw Error("bind_external '" + r.name + "': replicated programs keep their own storage");
  if (nbytes != r.nbytes())
    throw Error("bind_external '" + r.name + "': got " + std::to_string(nbytes) +
                " bytes, expected " + std::to_string(r.nbytes()));
  if (reinterpret_cast<uintptr_t>(data) % 64 != 0)
    throw Error("bind_external '" + r.name + "': host memory must be 64-byte aligned");
  if (s.arena_home.count(tensor)) throw Error("bind_external '" + r.name + "': already bound");
  // Kernels, copies and call-site binds read each TensorRef's data pointer
  // when they run, so repointing every alias of the variable is enough.
  s.arena_home.emplace(tensor, s.home[(size_t)tensor]);
  for (int m : al_.members[(size_t)tensor]) s.refs[(size_t)m].data = data;
  s.home[(size_t)tensor] = data;
  s.host_write_epoch++;
}

void Engine::unbind_external(int tensor) {
  desc_->check_tensor(tensor, "unbind_external");
  State& s = state();
  auto it = s.arena_home.find(tensor);
  if (it == s.arena_home.end()) return;
  std::memcpy(it->second, s.refs[(size_t)tensor].data, s.refs[(size_t)tensor].nbytes());
  for (int m : al_.members[(size_t)tensor]) s.refs[(size_t)m].data = it->second;
  s.home[(size_t)tensor] = it->second;
  s.arena_home.erase(it);
  s.host_write_epoch++;
}

std::string Engine::describe(bool host) const {
  if (faithful_ && !host) return ipuxl::describe(faithful_low_, *faithful_);
  return ipuxl::describe(low_, *desc_);
}

std::map<std::string, int64_t> Engine::program_counts(bool host) const {
  if (faithful_ && !host) return count_nodes(faithful_low_);
  return count_nodes(low_);
}

}  // namespace ipuxl
