// The IPU targets the analytical model knows, and the accounting constants
// it uses. Every hardware figure cites shared/reference/ipu_model.md (§ and
// the source given there); constants that no public source gives are marked
// [assumption] and were fitted to the one public calibration point (§4.3,
// one fp32 Dense 4096->1024 at batch 16 on a Mk2 IPU, Poplar 3.0).
#pragma once

#include <cstdint>
#include <string>

namespace ipuxl {
namespace model {

struct Target {
  std::string name;             // "ipu1", "ipu2", "ipu21" or "cpu"
  int tiles_per_ipu = 1472;
  int num_ipus = 1;
  int num_io_tiles = 0;         // the first tiles of each IPU (PopART: gcl::perIPUTiles(0, n))
  int64_t bytes_per_tile = 0;   // tile SRAM; 0: no limit (the "cpu" device)
  int64_t code_region_bytes = 0;  // executable (instruction-fetch) region per tile
  double clock_hz = 1.325e9;
  int workers = 6;              // worker contexts per tile (§3: 8,832 threads = 1472 x 6)

  // Exchange and memory (§3): 4 B/cycle per tile on the exchange
  // (Target::getExchangeBytesPerCycle, quoted by ipu-stack; 1472 x 4 B x
  // 1.325 GHz = 7.8 TB/s, the datasheet's "8 TB/s"); on-tile memcpy 8 B/cycle
  // (ipu-stack local copy) [third-party].
  int exchange_bytes_per_cycle = 4;
  // Two tiles share an exchange bus; both receive the same data in one
  // cycle (Target::getTilesPerSharedExchangeBus, popops/poplin
  // ExchangeEstimator, §3).
  int tiles_per_shared_exchange_bus = 2;
  int memcpy_bytes_per_cycle = 8;
  // Vector width of one worker: 64 bits, i.e. 2 x fp32 or 4 x fp16 per cycle
  // (§3.1, graphcore.ai "exploiting tile-level parallelism").
  int vector_bytes = 8;

  // AMP (matmul/conv) unit per tile: output channels x input channels
  // processed per pass (convUnits x convInputLoadElems, poplin
  // ConvModel.cpp:610-623); their product / cycles per pass gives the peak
  // MACs/cycle of §3: Mk2 16 MAC/cycle fp32, 64 fp16; Mk1 8 and 32.
  int amp_out_fp32 = 8, amp_in_fp32 = 16;
  int amp_out_fp16 = 16, amp_in_fp16 = 16;
  // Conv units for float16 inputs by partials type (poplin getNumConvUnits:
  // Target::getFp16InFp16OutConvUnitsPerTile for half partials, above, and
  // getFp16InFp32OutConvUnitsPerTile for float partials, here). On IPU2 the
  // float partials use 8 of the 16 units: poplin's SLIC vertex for this
  // pair is ConvPartial1x4SLIC_half_float_8_and_half_half_16, its AMP and
  // SLIC candidates offer 16 units only with half partials
  // (ConvVertexType.cpp), and poplibs' convolution test derives the 16.32
  // units as min(16.16 units, pipeline depth x fp32 stored per cycle) of
  // the 64-bit data path. Float inputs always take float partials (no
  // fp32-in/fp16-out units: poplin falls back to float AMP partials).
  int amp_out_fp16_fp32 = 8;
  // Worker cycles per output element per pass (ConvPartial1x1Out steady
  // state, poplin PerformanceEstimation.hpp:398-632): 8 fp32, 4 fp16.
  int amp_elem_cycles_fp32 = 8, amp_elem_cycles_fp16 = 4;

  // Syncs: internal (one IPU) [assumption: "tens of cycles", §5.6; the
  // calibration table's published matmul/conv figures hold with it, not
  // with ipuxl's Poplar's 150]; global (IPUs and host) 500 (legacy poplibs
  // IPU-model benchmarks) or 600 on ipu21 (ipu-stack,
  // Target::getGlobalSyncCycles) [third-party].
  int64_t sync_internal_cycles = 32;
  int64_t sync_global_cycles = 500;
  // Supervisor overhead of a vertex launch (popops::internal::
  // basicOpSupervisorOverhead, §3.1).
  int64_t supervisor_cycles = 11;

  // Bandwidths that no public source gives per IPU: parameters (§3, §7).
  // Host link 6 B/cycle [calibrated: tutorial 6's README IPUModel total,
  // 6,681,766 cycles, is its 40 MB of streams at 6 B/cycle; ipuxl's
  // Poplar reads this figure too].
  double host_bytes_per_second = 6.0 * 1.325e9;
  double streaming_bytes_per_second = 20e9;    // [assumption] Streaming Memory, not published
  double link_bytes_per_second = 32e9;         // [derived] 320 GB/s over 10 IPU-Links (§3)

  // PopART's availableMemoryProportion default for matmul plans (poplin):
  // the share of a tile the planner may use for an op's temporaries.
  double available_memory_proportion = 0.6;

  // ---- accounting constants, per tile [assumption, fitted to §4.3]
  // Control code: every tile of an IPU runs the same control program, so
  // each leaf program (Execute, exchange, stream copy) costs its bytes on
  // every tile (PopLiner: control code = sum over leaf programs of
  // controlCodeByTile, §4.2). ~70 B/tile for the 6 programs of one Dense
  // layer in §4.3 gives ~12 B per program, sync included.
  int64_t cc_program = 8;    // Execute / exchange / stream copy (+ cc_sync)
  int64_t cc_call = 8;       // Call: a branch to the function's code (§4.4: "a small call")
  int64_t cc_control = 16;   // Repeat / If: loop counter or predicate test
  int64_t cc_sync = 4;
  // Exchange code: x0 per exchange program on each tile taking part plus
  // x1 per contiguous region sent or received (§5.5 form; sizes fitted to
  // §4.3's 360 KiB of exchange code, ~250 B/tile, for one Dense layer).
  int64_t xc_program = 32;
  int64_t xc_region = 2;
  // Host exchange (stream copies): larger per-program code for the packet
  // handling [assumption].
  int64_t hxc_program = 48;
  // Vertex state (§5.5: 4 B per pointer field + 4 B per size field), plus
  // a descriptor per on-tile copy.
  int64_t copy_descriptor = 8;
  // Runtime memory every tile holds whatever the program: the stack of the
  // supervisor and 6 workers and the control-id/packet-header words
  // [assumption; PopVision's "stack" and "controlId" categories].
  int64_t stack_bytes = 1024;
  int64_t runtime_bytes = 128;

  // Cycles of control flow [assumption, §5.6: "~10-50"].
  int64_t call_cycles = 20;
  int64_t loop_cycles = 15;
  int64_t if_cycles = 20;

  int total_tiles() const { return tiles_per_ipu * num_ipus; }
  bool unlimited() const { return bytes_per_tile <= 0; }
};

// A target by version name: "ipu1" (Mk1 GC2), "ipu2" (Mk2 GC200, the
// default), "ipu21" (Bow), "cpu" (one tile, no memory limit: PopXL's cpu
// device runs "as if on a single tile", §2). Throws for anything else.
Target make_target(const std::string& version);

}  // namespace model
}  // namespace ipuxl
