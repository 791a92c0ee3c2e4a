// Runtime instruction-set dispatch.
//
// The core is compiled for the baseline of its architecture (x86-64: SSE2;
// aarch64: NEON). Hot loops are compiled a second and third time for AVX2+FMA
// and AVX-512 (function target attributes, never -march flags, so nothing
// else in the binary uses those instructions), and the level in use is
// chosen once, at import (configure(), core/options.hpp): the best the CPU
// supports, or the one the options name (x86: sse, avx2, avx512; aarch64:
// neon). An unknown level, or one this CPU lacks, is an error.
//
// Two ways to write level-specific code:
//  * isa::run(body, b, e) / isa::parallel_for(n, grain, body): body(b, e) is
//    a lambda (typically an elementwise loop); it is inlined into one copy
//    per level (GCC's flatten), so its loops are vectorised for each level.
//  * a namespace per level compiled under a target pragma (gemm_isa.inc),
//    with a table of entry points chosen by level().
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "parallel.hpp"

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
#define IPUXL_X86 1
#else
#define IPUXL_X86 0
#endif

// Function attributes of the x86 levels. AVX-512: the subsets every
// AVX-512 server core has (F, VL, BW, DQ, CD), and 512-bit vectors for
// compiler-vectorised loops (GCC otherwise prefers 256 bits).
#if IPUXL_X86 && (defined(__GNUC__) || defined(__clang__))
#define IPUXL_MULTI_ISA 1
#define IPUXL_AVX2_TARGET_STR "avx2,fma,bmi,bmi2,f16c,popcnt"
#if defined(__clang__)
#define IPUXL_AVX512_TARGET_STR \
  "avx512f,avx512vl,avx512bw,avx512dq,avx512cd,avx2,fma,bmi,bmi2,f16c,popcnt"
#else
#define IPUXL_AVX512_TARGET_STR \
  "avx512f,avx512vl,avx512bw,avx512dq,avx512cd,avx2,fma,bmi,bmi2,f16c,popcnt,prefer-vector-width=512"
#endif
#define IPUXL_TARGET_AVX2 __attribute__((target(IPUXL_AVX2_TARGET_STR)))
#define IPUXL_TARGET_AVX512 __attribute__((target(IPUXL_AVX512_TARGET_STR)))
#else
#define IPUXL_MULTI_ISA 0
#endif

#if defined(__GNUC__) && !defined(__clang__)
#define IPUXL_FLATTEN __attribute__((flatten))
#else
#define IPUXL_FLATTEN
#endif

namespace ipuxl {
namespace isa {

// Levels in increasing order. Baseline is SSE2 on x86-64, NEON on aarch64,
// plain C++ elsewhere.
enum class Level : int { Base = 0, AVX2 = 1, AVX512 = 2 };

// The level in use: the one configure() set, else the best supported.
Level level();
// The level a name asks for ("sse", "avx2", "avx512", "neon", "generic" as
// this architecture names them; "best", "auto" or "" for best()). Throws
// ipuxl::Error (ValueError in Python), its message starting with `name`,
// for a level this build does not have or this CPU does not support.
Level resolve(const std::string& name);
// Makes `l` the level in use (configure(); `l` from resolve()).
void set_level(Level l);
// Name of a level on this architecture ("sse", "avx2", "avx512"; "neon" or
// "generic" for Base elsewhere).
const char* level_name(Level l);
// Levels this CPU supports, lowest first.
std::vector<Level> supported();
// The best level this CPU supports.
Level best();

namespace detail {
extern std::atomic<int> g_level;  // -1 until level() has run
}

inline Level current() {
  const int l = detail::g_level.load(std::memory_order_relaxed);
  return l >= 0 ? (Level)l : level();
}

#if IPUXL_MULTI_ISA
template <class F>
IPUXL_TARGET_AVX512 IPUXL_FLATTEN void run_avx512(const F& f, int64_t b, int64_t e) {
  f(b, e);
}
template <class F>
IPUXL_TARGET_AVX2 IPUXL_FLATTEN void run_avx2(const F& f, int64_t b, int64_t e) {
  f(b, e);
}
#endif

// f(b, e) compiled for the current level (its loops vectorised for it).
template <class F>
void run(const F& f, int64_t b, int64_t e) {
#if IPUXL_MULTI_ISA
  switch (current()) {
    case Level::AVX512: run_avx512(f, b, e); return;
    case Level::AVX2: run_avx2(f, b, e); return;
    default: break;
  }
#endif
  f(b, e);
}

// ipuxl::parallel_for with every chunk run by isa::run.
template <class F>
void parallel_for(int64_t n, int64_t grain, const F& f) {
  ::ipuxl::parallel_for(n, grain, [&](int64_t b, int64_t e) { run(f, b, e); });
}

}  // namespace isa
}  // namespace ipuxl
