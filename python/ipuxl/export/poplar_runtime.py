"""The fixed C++ parts of an exported Poplar program (``ipuxl export poplar``):
the helpers every ``program.cpp`` carries (a minimal ``.npz`` reader and
writer, the tile-mapping helper) and its ``main()``, and the build files
(``Makefile``, ``CMakeLists.txt``).

The ``.npz`` code reads and writes what ``numpy.savez`` writes: a ZIP
archive of stored (uncompressed) ``.npy`` members, version 1-3 headers,
little-endian C-order arrays, ZIP64 local headers. ``numpy.savez_compressed``
archives (deflated members) are refused with a message saying so.
"""

__all__ = ["RUNTIME_CPP", "main_cpp", "makefile", "cmakelists"]

RUNTIME_CPP = r"""
namespace ipuxl_export {

struct HostArray {
  std::string descr;                // numpy dtype string, e.g. "<f4"
  std::vector<std::size_t> shape;
  std::vector<char> data;
  std::size_t elements() const {
    std::size_t n = 1;
    for (auto d : shape) n *= d;
    return n;
  }
};

[[noreturn]] static void fail(const std::string &msg) { throw std::runtime_error(msg); }

static std::uint32_t crc32(const char *p, std::size_t n) {
  static std::uint32_t table[256];
  static bool ready = false;
  if (!ready) {
    for (std::uint32_t i = 0; i < 256; ++i) {
      std::uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      table[i] = c;
    }
    ready = true;
  }
  std::uint32_t c = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < n; ++i) c = table[(c ^ (unsigned char)p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

static std::uint64_t le(const char *p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | (unsigned char)p[i];
  return v;
}

static void putLe(std::string &out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char((v >> (8 * i)) & 0xFF));
}

// One .npy member: its header dict's descr, fortran_order and shape.
static HostArray parseNpy(const char *p, std::size_t n, const std::string &what) {
  if (n < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0) fail(what + ": not a .npy array");
  const int major = (unsigned char)p[6];
  const std::size_t hlen = major == 1 ? le(p + 8, 2) : le(p + 8, 4);
  const std::size_t start = major == 1 ? 10 : 12;
  if (start + hlen > n) fail(what + ": truncated .npy header");
  const std::string h(p + start, hlen);
  HostArray a;
  auto field = [&](const char *key) {
    auto k = h.find(key);
    if (k == std::string::npos) fail(what + ": .npy header has no " + key);
    return h.find(':', k) + 1;
  };
  auto d = h.find('\'', field("'descr'"));
  a.descr = h.substr(d + 1, h.find('\'', d + 1) - d - 1);
  if (h.compare(h.find_first_not_of(' ', field("'fortran_order'")), 4, "True") == 0)
    fail(what + ": Fortran-order arrays are not supported (use np.ascontiguousarray)");
  auto s = h.find('(', field("'shape'"));
  auto e = h.find(')', s);
  std::string dims = h.substr(s + 1, e - s - 1);
  std::size_t pos = 0;
  while (pos < dims.size()) {
    auto q = dims.find_first_of("0123456789", pos);
    if (q == std::string::npos) break;
    std::size_t used = 0;
    a.shape.push_back(std::stoull(dims.substr(q), &used));
    pos = q + used;
  }
  const std::size_t body = start + hlen;
  a.data.assign(p + body, p + n);
  return a;
}

static std::size_t itemSize(const std::string &descr) {
  return std::stoul(descr.substr(2));
}

// The members of an .npz archive written by numpy.savez, by key (the member
// name without ".npy").
static std::map<std::string, HostArray> readNpz(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open " + path);
  std::string z((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::map<std::string, HostArray> out;
  std::size_t at = 0;
  while (at + 30 <= z.size() && le(&z[at], 4) == 0x04034b50u) {
    const char *h = &z[at];
    const unsigned flags = le(h + 6, 2), method = le(h + 8, 2);
    std::uint64_t csize = le(h + 18, 4), usize = le(h + 22, 4);
    const std::size_t nlen = le(h + 26, 2), xlen = le(h + 28, 2);
    std::string name(h + 30, nlen);
    const char *x = h + 30 + nlen;
    for (std::size_t k = 0; k + 4 <= xlen;) {  // ZIP64 sizes, as numpy.savez writes them
      const unsigned id = le(x + k, 2), sz = le(x + k + 2, 2);
      if (id == 1) {
        std::size_t q = k + 4;
        if (usize == 0xFFFFFFFFu) { usize = le(x + q, 8); q += 8; }
        if (csize == 0xFFFFFFFFu) { csize = le(x + q, 8); }
      }
      k += 4 + sz;
    }
    if (method != 0) fail(path + ": member " + name + " is compressed; write inputs with numpy.savez");
    if (flags & 8) fail(path + ": member " + name + " uses a data descriptor (not supported)");
    const std::size_t body = at + 30 + nlen + xlen;
    if (body + csize > z.size()) fail(path + ": truncated member " + name);
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0)
      name = name.substr(0, name.size() - 4);
    out[name] = parseNpy(&z[body], csize, path + ":" + name);
    at = body + csize;
  }
  return out;
}

static void writeNpz(const std::string &path, const std::vector<std::pair<std::string, HostArray>> &arrays) {
  std::string z, central;
  std::size_t count = 0;
  for (const auto &kv : arrays) {
    const HostArray &a = kv.second;
    std::string dict = "{'descr': '" + a.descr + "', 'fortran_order': False, 'shape': (";
    for (std::size_t i = 0; i < a.shape.size(); ++i)
      dict += std::to_string(a.shape[i]) + (a.shape.size() == 1 ? "," : i + 1 < a.shape.size() ? ", " : "");
    dict += "), }";
    while ((10 + dict.size() + 1) % 64 != 0) dict += ' ';
    dict += '\n';
    std::string npy("\x93NUMPY\x01\x00", 8);
    putLe(npy, dict.size(), 2);
    npy += dict;
    npy.append(a.data.data(), a.data.size());
    const std::string name = kv.first + ".npy";
    const std::uint32_t crc = crc32(npy.data(), npy.size());
    std::string local;
    putLe(local, 0x04034b50u, 4); putLe(local, 20, 2); putLe(local, 0, 2); putLe(local, 0, 2);
    putLe(local, 0, 2); putLe(local, 0x21, 2); putLe(local, crc, 4);
    putLe(local, npy.size(), 4); putLe(local, npy.size(), 4);
    putLe(local, name.size(), 2); putLe(local, 0, 2);
    const std::size_t offset = z.size();
    z += local + name + npy;
    putLe(central, 0x02014b50u, 4); putLe(central, 20, 2); putLe(central, 20, 2);
    putLe(central, 0, 2); putLe(central, 0, 2); putLe(central, 0, 2); putLe(central, 0x21, 2);
    putLe(central, crc, 4); putLe(central, npy.size(), 4); putLe(central, npy.size(), 4);
    putLe(central, name.size(), 2); putLe(central, 0, 2); putLe(central, 0, 2);
    putLe(central, 0, 2); putLe(central, 0, 2); putLe(central, 0, 4); putLe(central, offset, 4);
    central += name;
    ++count;
  }
  const std::size_t cdOffset = z.size();
  z += central;
  putLe(z, 0x06054b50u, 4); putLe(z, 0, 2); putLe(z, 0, 2); putLe(z, count, 2);
  putLe(z, count, 2); putLe(z, central.size(), 4); putLe(z, cdOffset, 4); putLe(z, 0, 2);
  std::ofstream f(path, std::ios::binary);
  if (!f) fail("cannot write " + path);
  f.write(z.data(), z.size());
}

// Maps the flattened tensor t as the IPU model does: `count` tiles of a tile
// set [setBegin, setBegin + setSize) of IPU `ipu`, from tile `first` of the set
// (wrapping within it), `perTile` elements on each tile but the last.
static void mapRun(poplar::Graph &graph, const poplar::Tensor &t, unsigned tilesPerIpu, unsigned ipu,
                   unsigned setBegin, unsigned setSize, unsigned first, unsigned count,
                   std::size_t perTile) {
  const poplar::Tensor flat = t.flatten();
  const std::size_t n = flat.numElements();
  std::size_t begin = 0;
  for (unsigned i = 0; i < count && begin < n; ++i) {
    const std::size_t end = i + 1 == count ? n : std::min(n, begin + perTile);
    const unsigned tile = ipu * tilesPerIpu + setBegin + (first + i) % setSize;
    graph.setTileMapping(flat.slice(begin, end), tile);
    begin = end;
  }
}

// A tensor from a host array, checked against the expected element type and
// element count.
static const HostArray &lookup(const std::map<std::string, HostArray> &m, const std::string &key,
                               const std::string &descr, std::size_t elements, const std::string &file) {
  auto it = m.find(key);
  if (it == m.end()) fail(file + " has no array '" + key + "'");
  const HostArray &a = it->second;
  std::string want = descr, got = a.descr;
  if (want[0] == '<' || want[0] == '|') want = want.substr(1);
  if (got[0] == '<' || got[0] == '|' || got[0] == '=') got = got.substr(1);
  if (want != got) fail(file + ": array '" + key + "' has dtype " + a.descr + ", expected " + descr);
  if (a.elements() != elements)
    fail(file + ": array '" + key + "' has " + std::to_string(a.elements()) + " elements, expected " +
         std::to_string(elements));
  return a;
}

} // namespace ipuxl_export
"""


def main_cpp() -> str:
    """``main()``: reads ``--weights`` (default: ``weights.npz`` beside the
    executable, else in the directory it was built from) and ``--inputs``, runs WeightsFromHost, the main program
    ``--runs`` times and WeightsToHost, writes ``--outputs`` (the
    device-to-host streams) and ``--save-weights`` (the final weights)."""
    return r"""
int main(int argc, char **argv) {
  using namespace ipuxl_export;
  std::string exe = argv[0];
  std::string dir = exe.find('/') == std::string::npos ? "." : exe.substr(0, exe.rfind('/'));
  // weights.npz beside the executable, else in the directory it was built from.
  std::string weightsPath = dir + "/weights.npz", inputsPath, outputsPath, saveWeightsPath;
  if (!std::ifstream(weightsPath)) weightsPath = std::string(IPUXL_EXPORT_DIR) + "/weights.npz";
  unsigned runs = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) fail(a + " needs a value");
      return argv[++i];
    };
    if (a == "--weights") weightsPath = next();
    else if (a == "--inputs") inputsPath = next();
    else if (a == "--outputs") outputsPath = next();
    else if (a == "--save-weights") saveWeightsPath = next();
    else if (a == "--runs") runs = std::stoul(next());
    else if (a == "--help" || a == "-h") {
      std::cout << "usage: " << exe << " [--inputs in.npz] [--outputs out.npz] [--weights weights.npz]\n"
                   "       [--save-weights final.npz] [--runs N]\n"
                   "Runs WeightsFromHost, the main program N times (default 1; each run reads the\n"
                   "inputs again) and WeightsToHost, as ipuxl's Session.run does.\n";
      return 0;
    } else {
      std::cerr << exe << ": unknown argument " << a << " (see --help)\n";
      return 2;
    }
  }
  try {
    poplar::Device device = createDevice();
    poplar::Graph graph = makeGraph(device);
    std::map<std::string, HostArray> weights = readNpz(weightsPath), inputs;
    std::vector<poplar::program::Program> programs = buildPrograms(graph, weights);
    poplar::Engine engine(graph, programs);
    engine.load(device);
    HostBuffers buffers;
    if (!inputsPath.empty()) inputs = readNpz(inputsPath);
    connectWeights(engine, weights, weightsPath, buffers);
    engine.run(WEIGHTS_FROM_HOST);
    writeRemote(engine, weights, weightsPath);
    std::vector<std::pair<std::string, HostArray>> outputs;
    for (unsigned r = 0; r < runs; ++r) {
      outputs.clear();
      connectStreams(engine, inputs, inputsPath, outputs, buffers);
      engine.run(MAIN_PROGRAM);
    }
    engine.run(WEIGHTS_TO_HOST);
    if (!outputsPath.empty()) writeNpz(outputsPath, outputs);
    if (!saveWeightsPath.empty()) {
      std::vector<std::pair<std::string, HostArray>> saved = savedWeights(engine, weights, buffers);
      writeNpz(saveWeightsPath, saved);
    }
  } catch (const std::exception &e) {
    std::cerr << exe << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
"""


def makefile(with_codelets: bool, gcl: bool = False) -> str:
    """The ``Makefile``: ``make`` builds ``program`` with the ``CXX`` and the
    ``CPATH`` / ``LIBRARY_PATH`` of the Poplar in use (the SDK's
    ``enable.sh`` or ``eval "$(ipuxl poplar-env)"``)."""
    deps = "program.cpp program.hpp" + (" codelets.cpp" if with_codelets else "")
    return f"""# Builds the exported program against the Poplar in CPATH / LIBRARY_PATH:
#   eval "$(ipuxl poplar-env)"   (or: source <poplar-sdk>/enable.sh)
#   make && ./program --inputs in.npz --outputs out.npz
CXX ?= g++
CXXFLAGS ?= -std=c++17 -O0
LDLIBS = {"-lgcl " if gcl else ""}-lpoplar -lpoplin -lpopnn -lpopops -lpoputil -lpoprand

program: {deps}
\t$(CXX) $(CXXFLAGS) -DIPUXL_EXPORT_DIR='"$(CURDIR)"' program.cpp -o $@ $(LDFLAGS) $(LDLIBS)

clean:
\trm -f program

.PHONY: clean
"""


def cmakelists(gcl: bool = False) -> str:
    """``CMakeLists.txt``: the same build for CMake users (the libraries
    are found on ``LIBRARY_PATH``, the headers on ``CPATH``)."""
    libs = ("gcl " if gcl else "") + "poplar poplin popnn popops poputil poprand"
    return """cmake_minimum_required(VERSION 3.10)
project(ipuxl_exported_program CXX)
# Poplar's headers and libraries come from the environment, as the SDK's
# enable.sh (or `eval "$(ipuxl poplar-env)"`) sets it.
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
string(REPLACE ":" ";" _inc "$ENV{CPATH}")
string(REPLACE ":" ";" _lib "$ENV{LIBRARY_PATH}")
include_directories(${_inc})
link_directories(${_lib})
add_executable(program program.cpp)
# codelets.cpp (when there is one) is compiled when the program runs, from here.
target_compile_definitions(program PRIVATE IPUXL_EXPORT_DIR="${CMAKE_CURRENT_SOURCE_DIR}")
target_link_libraries(program LIBS)
""".replace("LIBS", libs)
