#include "target.hpp"

#include "../core/kernel.hpp"

namespace ipuxl {
namespace model {

Target make_target(const std::string& version) {
  Target t;
  t.name = version;
  if (version == "ipu2" || version == "ipu21" || version == "cpu") {
    // Mk2 GC200: 1472 tiles of 624 KiB (638,976 B; PopART's
    // available_memory_proportion_test.py:160, PopLiner --mem_per_tile);
    // clock 1.325 GHz [derived: 7.989 PFLOPS fp32 / 128 IPUs / (1472 x 32
    // flop)]; executable region 208 KiB (ipu-stack memory.rs, region 0)
    // [third-party]. §3.
    t.tiles_per_ipu = 1472;
    t.bytes_per_tile = 638976;
    t.code_region_bytes = 208 * 1024;
    t.clock_hz = 1.325e9;
    if (version == "ipu21") {
      // Bow: the GC200 architecture with wafer-on-wafer power delivery,
      // 1.85 GHz (press; 350 TFLOPS / (1472 x 128) = 1.857 GHz [derived]),
      // global sync 600 cycles (ipu-stack IPU21 costs) [third-party]. §3.
      t.clock_hz = 1.85e9;
      t.sync_global_cycles = 600;
    }
    if (version == "cpu") {
      t.tiles_per_ipu = 1;
      t.bytes_per_tile = 0;
      t.code_region_bytes = 0;
    }
    return t;
  }
  if (version == "ipu1") {
    // Mk1 GC2: 1216 tiles of 256 KiB, 1.6 GHz [derived: 31.1 TFLOPS fp32 /
    // (1216 x 16 flop)]; AMP 8 MAC/cycle fp32, 32 fp16 [derived] (Jia et
    // al., arXiv 1912.03413). The executable region is not published: the
    // whole tile [assumption]. §3.
    t.tiles_per_ipu = 1216;
    t.bytes_per_tile = 256 * 1024;
    t.code_region_bytes = 256 * 1024;
    t.clock_hz = 1.6e9;
    t.amp_out_fp32 = 8;
    t.amp_in_fp32 = 8;
    t.amp_out_fp16 = 16;
    t.amp_in_fp16 = 8;
    // Mk1's published fp16 peak (124.5 TFLOPS) is its mixed-precision
    // (fp16 in, fp32 accumulate) rate; no separate fp16.16 rate is
    // published, so both partials types use the same units [derived, §3].
    t.amp_out_fp16_fp32 = 16;
    return t;
  }
  throw Error("IpuModel: unknown IPU version '" + version +
              "' (expected 'ipu1', 'ipu2' or 'ipu21')");
}

}  // namespace model
}  // namespace ipuxl
