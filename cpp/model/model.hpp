// The analytical IPU model: tile mapping, memory per tile by PopVision
// category, program size and cycle estimates of a compiled program.
//
// It reads the faithful program (the ProgramDesc PopXL would build, before
// any host-speed pass) and its Poplar-shaped program tree (lower/), never
// the host program, and changes nothing: functional results do not depend
// on it. shared/reference/ipu_model.md §4-§5 is the model's specification;
// docs/ipu_model.md describes the formulas and their calibration.
//
// Accounting follows Poplar:
//  * every tensor is mapped to tiles (linear with a grain and a rotating
//    start, as poputil/PopART's LinearMapper; matmul operands and outputs as
//    the matmul's plan; elementwise outputs like their input);
//  * vertex code is paid once per vertex type per tile; vertex state,
//    exchange code and control code once per *code instance* of a graph: a
//    called graph (Call, Repeat) is one Function whose code exists once, its
//    call sites adding control code and input/output copies (unless
//    elided); an If site inlines both branch graphs (PopART IfOpx), so a
//    graph used by two conditionals is paid twice; a repeat body exists
//    once whatever the trip count;
//  * remote_code_load(g) moves g's code (control and exchange code) from
//    always-live memory to not-always-live memory, from the load to the
//    last call in the loading graph;
//  * data is always-live (variables, constants) or not-always-live, live
//    over program steps; a graph's peak is composed into its callers'
//    steps (a Call step holds the callee's peak);
//  * cycles are BSP steps: compute (the slowest tile), exchange (bytes per
//    cycle), syncs, host transfers (a bandwidth parameter); Repeat
//    multiplies its body, If takes the longer branch;
//  * remote buffers live in Streaming Memory: only their landing pads (one
//    entry each, two when one exchange both loads and stores the buffer)
//    take tile memory; a RemoteLoad/RemoteStore costs a sync, its bytes at
//    the streaming bandwidth and the pad copy; the transfers merged into one
//    MultiExchange pay one sync between them; with IO tiles
//    (num_io_tiles > 0), an exchange or copy placed on them runs beside the
//    compute tiles' steps that follow it, until a step touches its tensors.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "../lower/lower.hpp"
#include "target.hpp"

namespace ipuxl {
namespace model {

// PopVision's memory categories, per tile (§4.1).
enum Category : int {
  kVertexCode = 0,
  kVertexInstanceState,
  kCopyDescriptor,
  kControlCode,
  kInternalExchangeCode,
  kHostExchangeCode,
  kGlobalExchangeCode,
  kStack,
  kVariables,       // always-live: variables (weights, optimiser state)
  kConstants,       // always-live: constants
  kNotAlwaysLive,   // the peak over program steps of data live for part of the program
  kNumCategories
};
const char* category_name(int c);
bool category_is_code(int c);

struct Options {
  std::string version = "ipu2";
  int tiles_per_ipu = 0;        // 0: the target's
  int num_ipus = 0;             // 0: as the program's placement needs (a power of two, as PopXL)
  int num_io_tiles = 0;
  int64_t bytes_per_tile = -1;  // -1: the target's; 0: no limit
  double clock_hz = 0;
  double host_bytes_per_second = 0;
  double streaming_bytes_per_second = 0;
  double available_memory_proportion = 0;
};

struct OpReport {
  int op = -1;
  std::string vertex;          // main vertex type ("" for none)
  int ipu = 0;
  int tiles = 0;               // tiles the op computes on
  int64_t cycles = 0;          // per execution: compute + exchange + syncs
  int64_t compute_cycles = 0;
  int64_t exchange_cycles = 0;
  double executions = 0;       // times it runs in one run of the main program
  double flops = 0;            // per execution
  int64_t temp_bytes = 0;      // temporaries while it runs (all tiles)
  int64_t state_bytes = 0;     // vertex state + copy descriptors (all tiles, one code instance)
  int64_t exchange_code_bytes = 0;
  int64_t control_code_bytes = 0;  // its leaf programs' control code (all tiles of its IPU)
  std::string plan;            // matmul: the partition chosen
};

struct GraphReport {
  int graph = -1;
  bool function = false;       // compiled as a Function (has Call/Repeat sites)
  int64_t code_instances = 0;  // Function (0/1) + inlined copies at If sites
  int64_t call_sites = 0;      // Call/Repeat ops calling it
  int64_t if_sites = 0;        // If ops using it as a branch
  bool code_loaded = false;    // remote_code_load'ed
  double executions = 0;
  int64_t cycles = 0;          // one execution of its body
  // Code of one instance, summed over tiles (control + exchange code +
  // vertex state + copy descriptors; vertex code is shared by type).
  int64_t code_bytes = 0;
  int64_t ops = 0;
};

struct Step {
  std::string kind;    // Execute, Copy, StreamCopy, Call, Repeat, If, ...
  std::string label;   // op or tensor names
  int op = -1;
  int64_t cycles = 0;  // including callees and trip counts
  int64_t live_bytes = 0;     // not-always-live bytes at this step (all tiles)
  int64_t max_tile_live = 0;  // the most on one tile
};

// One entry of what is live at the main program's peak step (the step of
// most not-always-live bytes), with the peaks of the graphs it calls
// expanded: a storage root, or an op's temporaries (tensor -1).
struct PeakEntry {
  int tensor = -1;     // storage root
  int op = -1;         // temporaries: the op whose step holds them
  int graph = -1;      // the graph whose step holds the entry
  int64_t bytes = 0;   // all tiles
};

struct TensorReport {
  int tensor = -1;
  int ipu = 0;
  int first_tile = 0;   // within its IPU
  int tiles = 0;
  int64_t bytes_per_tile = 0;  // on every tile but possibly the last
  bool always_live = false;
};

// A remote buffer: Streaming Memory (off chip) and its on-chip landing pads.
struct RemoteBufferReport {
  std::string name;
  int64_t entries = 0;
  int64_t entry_bytes = 0;     // one entry of one replica
  int64_t streaming_bytes = 0; // entries x entry bytes, per replica (off chip)
  int pads = 0;                // landing pads on chip: 1, or 2 if loaded and stored in one exchange
  int64_t pad_bytes = 0;       // on chip, all pads (counted with the always-live variables)
  int64_t loads = 0, stores = 0;  // RemoteLoad / RemoteStore ops using it
};

struct Report {
  Target target;
  std::vector<std::vector<double>> per_tile;  // [category][global tile]
  std::vector<double> loaded_code;            // per tile: code moved out by remote_code_load
  std::vector<OpReport> ops;                  // one per op of the desc (op == -1: not reached)
  std::vector<GraphReport> graphs;            // one per graph of the desc
  std::vector<Step> steps;                    // the main program's steps
  std::vector<PeakEntry> peak_live;           // live at the main program's peak step
  std::vector<TensorReport> tensors;          // one per tensor (storage roots; tiles == 0: none)
  std::vector<RemoteBufferReport> remote_buffers;  // one per remote buffer of the desc
  std::map<std::string, int64_t> vertex_types;  // type -> code bytes per tile
  std::map<std::string, int64_t> vertex_type_tiles;  // type -> tiles holding its code
  int64_t total_cycles = 0;      // main program, one run
  int64_t weights_from_host_cycles = 0, weights_to_host_cycles = 0;
  std::vector<std::string> warnings;
  int main_graph = 0;
};

Report analyse(const ProgramDesc& desc, int main, const Options& opts);

}  // namespace model
}  // namespace ipuxl
