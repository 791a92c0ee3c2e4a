#include "isa.hpp"

#include <cctype>
#include <mutex>
#include <string>

#include "kernel.hpp"

namespace ipuxl {
namespace isa {

namespace detail {
std::atomic<int> g_level{-1};
}

namespace {

bool cpu_has(Level l) {
  if (l == Level::Base) return true;
#if IPUXL_MULTI_ISA
  // libgcc's / compiler-rt's CPU model also checks that the OS saves the
  // AVX / AVX-512 register state (XGETBV).
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
                    __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt");
  if (l == Level::AVX2) return avx2;
  if (l == Level::AVX512)
    return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512cd");
#endif
  return false;
}

std::vector<Level> all_levels() {
#if IPUXL_MULTI_ISA
  return {Level::Base, Level::AVX2, Level::AVX512};
#else
  return {Level::Base};
#endif
}

std::string names_of(const std::vector<Level>& ls) {
  std::string s;
  for (Level l : ls) s += (s.empty() ? "" : ", ") + std::string(level_name(l));
  return s;
}

}  // namespace

Level resolve(const std::string& name) {
  std::string want(name);
  for (auto& c : want) c = (char)std::tolower((unsigned char)c);
  if (want.empty() || want == "best" || want == "auto") return best();
  for (Level l : all_levels()) {
    if (want != level_name(l)) continue;
    if (!cpu_has(l))
      throw Error(name + ": this CPU does not support " + want + " (supported: " +
                  names_of(supported()) + ")");
    return l;
  }
  throw Error(name + " is not an instruction-set level of this build (" + names_of(all_levels()) +
              ", or best)");
}

const char* level_name(Level l) {
  switch (l) {
    case Level::AVX2: return "avx2";
    case Level::AVX512: return "avx512";
    default: break;
  }
#if IPUXL_X86
  return "sse";
#elif defined(__aarch64__) || defined(__ARM_NEON)
  return "neon";
#else
  return "generic";
#endif
}

std::vector<Level> supported() {
  std::vector<Level> out;
  for (Level l : all_levels())
    if (cpu_has(l)) out.push_back(l);
  return out;
}

Level best() { return supported().back(); }

Level level() {
  static std::mutex mu;
  std::lock_guard<std::mutex> lk(mu);
  if (detail::g_level.load() < 0) detail::g_level.store((int)best());
  return (Level)detail::g_level.load();
}

void set_level(Level l) { detail::g_level.store((int)l); }

}  // namespace isa
}  // namespace ipuxl
