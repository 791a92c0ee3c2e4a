#include "options.hpp"

#include <mutex>

#include "isa.hpp"
#include "kernel.hpp"
#include "parallel.hpp"

namespace ipuxl {

namespace {
CoreOptions g_options;
std::mutex g_mu;
}  // namespace

const CoreOptions& options() { return g_options; }

void configure(const CoreOptions& o) {
  std::lock_guard<std::mutex> lk(g_mu);
  if (o.num_threads < 0 || o.num_threads > kMaxThreads)
    throw Error("num_threads " + std::to_string(o.num_threads) + " is out of range (1 to " +
                std::to_string(kMaxThreads) + ", or 0 for the hardware's threads)");
  const isa::Level level = isa::resolve(o.isa);  // throws before anything changes
  g_options = o;
  isa::set_level(level);
  if (o.num_threads > 0 && pool_started() && num_threads() != o.num_threads)
    set_num_threads(o.num_threads);
}

}  // namespace ipuxl
