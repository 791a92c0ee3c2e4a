// ipuxl's Poplar: the Engine's interpreter of the program tree, for a
// replicated graph too. A program runs once for a set of active replicas:
// each leaf (compute set, copy, stream, remote buffer) runs for each active
// replica in turn on that replica's memory, and the IPU model counts it
// once (the replicas run in parallel on their own IPUs). Control flow
// decides per replica: replicas whose predicates differ run the branch (or
// further loop iterations) as separate sets. A cross-replica collective
// needs every replica of each of its groups in the active set.
#include "engine_impl.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <poplar/exceptions.hpp>

namespace poplar {
namespace ipuxl_detail {

void EngineImpl::readStream(const StreamInfo &s, unsigned replica, char *buf) {
  auto &c = streams[s.handle][replica];
  std::size_t bytes = s.numElements * s.type.ipuxlSize();
  std::string who = replicas > 1 ? " (replica " + std::to_string(replica) + ")" : std::string();
  switch (c.kind) {
  case 0:
    throw stream_connection_error("Stream '" + s.handle + "'" + who +
                                  " is read by the program but not connected (use Engine::connectStream)");
  case 1: {
    std::size_t len = static_cast<std::size_t>(c.end - c.begin);
    if (len < bytes)
      throw stream_connection_error("Stream '" + s.handle + "': the connected buffer holds " + std::to_string(len) +
                                    " bytes, a transfer needs " + std::to_string(bytes));
    if (c.pos + bytes > len) c.pos = 0; // the buffer is circular
    std::memcpy(buf, c.begin + c.pos, bytes);
    c.pos += bytes;
    if (c.pos >= len) c.pos = 0;
    break;
  }
  case 2:
    c.fn(buf);
    break;
  case 3:
  case 4: {
    auto &cb = c.kind == 4 ? streams[s.handle][0] : c;
    if (cb.hasPrefetched) {
      std::memcpy(buf, cb.prefetched.data(), bytes);
      cb.hasPrefetched = false;
    } else {
      cb.cb->fetch(buf);
    }
    cb.cb->complete();
    // Prefetch the next transfer, as the SDK may while the device computes.
    cb.prefetched.resize(bytes + 1);
    cb.hasPrefetched = cb.cb->prefetch(cb.prefetched.data()) == StreamCallback::Result::Success;
    break;
  }
  }
}

void EngineImpl::streamIn(const ProgramImpl &p, const std::vector<unsigned> &active) {
  const auto &s = *p.stream;
  std::size_t bytes = s.numElements * s.type.ipuxlSize();
  std::vector<char> buf(bytes + 1);
  // A BROADCAST stream is read once (from replica 0's connection) for every replica.
  if (s.broadcast) readStream(s, 0, buf.data());
  for (std::size_t k = 0; k < active.size(); ++k) {
    select(active[k], k == 0);
    if (!s.broadcast) readStream(s, cur, buf.data());
    scatter(p.dst, buf.data());
    accountHost(bytes);
  }
}

void EngineImpl::streamOut(const ProgramImpl &p) {
  const auto &s = *p.stream;
  auto &c = streams[s.handle][cur];
  std::size_t bytes = s.numElements * s.type.ipuxlSize();
  std::vector<char> buf(bytes + 1);
  gather(p.src, buf.data());
  switch (c.kind) {
  case 0:
    throw stream_connection_error("Stream '" + s.handle + "'" +
                                  (replicas > 1 ? " (replica " + std::to_string(cur) + ")" : std::string()) +
                                  " is written by the program but not connected (use Engine::connectStream)");
  case 1: {
    std::size_t len = static_cast<std::size_t>(c.end - c.begin);
    if (len < bytes)
      throw stream_connection_error("Stream '" + s.handle + "': the connected buffer holds " + std::to_string(len) +
                                    " bytes, a transfer needs " + std::to_string(bytes));
    if (c.pos + bytes > len) c.pos = 0;
    std::memcpy(c.begin + c.pos, buf.data(), bytes);
    c.pos += bytes;
    if (c.pos >= len) c.pos = 0;
    break;
  }
  case 2:
    c.fn(buf.data());
    break;
  case 3:
  case 4: {
    auto &cb = c.kind == 4 ? streams[s.handle][0] : c;
    cb.cb->fetch(buf.data());
    cb.cb->complete();
    break;
  }
  }
  accountHost(bytes);
}

void EngineImpl::remoteCopy(const ProgramImpl &p, bool toRemote) {
  const auto &rb = *p.remote;
  auto &store = remote.at(rb.handle)[cur];
  std::size_t bytes = rb.numElements * rb.type.ipuxlSize();
  long long row = p.aux.valid() ? readScalar(p.aux) : 0;
  if (row < 0 || static_cast<std::size_t>(row) >= rb.repeats)
    throw poplar::runtime_error("Copy with remote buffer '" + rb.handle + "': offset " + std::to_string(row) +
                                " is out of range (the buffer has " + std::to_string(rb.repeats) + " repeats)");
  char *at = store.data() + static_cast<std::size_t>(row) * bytes;
  if (toRemote)
    gather(p.src, at);
  else
    scatter(p.dst, at);
  accountHost(bytes);
}

namespace {
/// The active replicas split by a per-replica key, each part in replica order.
template <class F> std::vector<std::pair<long long, std::vector<unsigned>>> partition(EngineImpl &e,
                                                                                     const std::vector<unsigned> &active,
                                                                                     F key) {
  std::vector<std::pair<long long, std::vector<unsigned>>> parts;
  for (std::size_t k = 0; k < active.size(); ++k) {
    e.select(active[k], k == 0);
    long long v = key();
    auto it = std::find_if(parts.begin(), parts.end(), [&](const auto &p) { return p.first == v; });
    if (it == parts.end())
      parts.push_back({v, {active[k]}});
    else
      it->second.push_back(active[k]);
  }
  e.select(active.empty() ? 0 : active[0], true);
  return parts;
}
} // namespace

void EngineImpl::runAll(const program::Program &prog) {
  std::vector<unsigned> all(replicas);
  for (unsigned r = 0; r < replicas; ++r) all[r] = r;
  run(prog, all);
  select(0, true);
}

void EngineImpl::run(const program::Program &prog, const std::vector<unsigned> &active) {
  if (active.empty()) return;
  const ProgramImpl &p = *prog.ipuxlImpl();
  auto each = [&](auto f) {
    for (std::size_t k = 0; k < active.size(); ++k) {
      select(active[k], k == 0);
      f();
    }
    select(active[0], true);
  };
  switch (p.kind) {
  case ProgKind::Sequence:
    for (const auto &c : p.children) run(c, active);
    break;
  case ProgKind::Execute:
    each([&] { execute(p.cs); });
    break;
  case ProgKind::CopyTensor:
    each([&] {
      std::vector<char> buf(p.src.numElements() * p.src.elementType().ipuxlSize() + 1);
      gather(p.src, buf.data());
      scatter(p.dst, buf.data());
      accountCopy(p.src, p.dst);
    });
    break;
  case ProgKind::CopyFromStream:
    streamIn(p, active);
    break;
  case ProgKind::CopyToStream:
    each([&] { streamOut(p); });
    break;
  case ProgKind::CopyFromRemote:
    each([&] { remoteCopy(p, false); });
    break;
  case ProgKind::CopyToRemote:
    each([&] { remoteCopy(p, true); });
    break;
  case ProgKind::Repeat:
    for (unsigned i = 0; i < p.count; ++i) run(p.children[0], active);
    break;
  case ProgKind::RepeatWhile: {
    std::vector<unsigned> going = active;
    run(p.children[0], going);
    accountSync();
    while (!going.empty()) {
      std::vector<unsigned> next;
      for (const auto &part : partition(*this, going, [&] { return (readScalar(p.aux) != 0) == p.whileTrue ? 1LL : 0LL; }))
        if (part.first) next = part.second;
      going = next;
      if (going.empty()) break;
      run(p.children[1], going);
      run(p.children[0], going);
      select(going[0], true);
      accountSync();
    }
    break;
  }
  case ProgKind::If:
    accountSync();
    for (const auto &part : partition(*this, active, [&] { return readScalar(p.aux) != 0 ? 1LL : 0LL; }))
      run(part.first ? p.children[0] : p.children[1], part.second);
    break;
  case ProgKind::Switch: {
    accountSync();
    for (const auto &part : partition(*this, active, [&] { return readScalar(p.aux); })) {
      const program::Program *body = p.hasDefault ? &p.defaultCase : nullptr;
      for (const auto &c : p.cases)
        if (c.first == part.first) {
          body = &c.second;
          break;
        }
      if (body) run(*body, part.second);
    }
    break;
  }
  case ProgKind::Call:
    run(g->functions.at(p.cs), active);
    break;
  case ProgKind::LoadFunction:
    // The Function's code comes with the executable and stays in place (PopXL's
    // user guide calls a code-loaded graph before its first load); a load
    // rewrites the same code.
    accountSync();
    break;
  case ProgKind::PrintTensor:
    each([&] { printTensor(p); });
    break;
  case ProgKind::WriteUndef:
    break; // the values become undefined; ipuxl leaves them as they are
  case ProgKind::Sync:
    accountSync();
    break;
  case ProgKind::Error:
    throw application_runtime_error(p.name);
  case ProgKind::Abort:
    each([&] {
      if (!p.aux.valid() || readScalar(p.aux) != 0) throw application_runtime_error(p.name);
    });
    break;
  case ProgKind::CrossReplica:
    crossReplica(p, active);
    break;
  }
}

} // namespace ipuxl_detail
} // namespace poplar
