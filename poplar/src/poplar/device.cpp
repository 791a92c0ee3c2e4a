// ipuxl's Poplar: element types, option flags, targets, the IPUModel and
// the DeviceManager (which has no IPU hardware to offer).
#include "impl.hpp"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <poplar/DeviceManager.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/exceptions.hpp>

namespace poplar {
namespace ipuxl_detail {

std::size_t typeCodeSize(int c) {
  switch (c) {
  case T_FLOAT: case T_INT: case T_UNSIGNED_INT: return 4;
  case T_HALF: case T_SHORT: case T_UNSIGNED_SHORT: return 2;
  case T_CHAR: case T_SIGNED_CHAR: case T_UNSIGNED_CHAR: case T_BOOL: case T_QUARTER: return 1;
  case T_LONGLONG: case T_UNSIGNED_LONGLONG: return 8;
  default: return 0;
  }
}
const char *typeCodeName(int c) {
  switch (c) {
  case T_FLOAT: return "float";
  case T_HALF: return "half";
  case T_INT: return "int";
  case T_UNSIGNED_INT: return "unsigned int";
  case T_SHORT: return "short";
  case T_UNSIGNED_SHORT: return "unsigned short";
  case T_CHAR: return "char";
  case T_SIGNED_CHAR: return "signed char";
  case T_UNSIGNED_CHAR: return "unsigned char";
  case T_BOOL: return "bool";
  case T_LONGLONG: return "long long";
  case T_UNSIGNED_LONGLONG: return "unsigned long long";
  case T_QUARTER: return "quarter";
  default: return "<no type>";
  }
}

namespace {
double loadAs(int code, const char *p) {
  switch (code) {
  case -1: return *reinterpret_cast<const double *>(p);
  case T_FLOAT: return *reinterpret_cast<const float *>(p);
  case T_HALF: return float(*reinterpret_cast<const half *>(p));
  case T_INT: return *reinterpret_cast<const int *>(p);
  case T_UNSIGNED_INT: return *reinterpret_cast<const unsigned *>(p);
  case T_SHORT: return *reinterpret_cast<const short *>(p);
  case T_UNSIGNED_SHORT: return *reinterpret_cast<const unsigned short *>(p);
  case T_CHAR: return *reinterpret_cast<const char *>(p);
  case T_SIGNED_CHAR: return *reinterpret_cast<const signed char *>(p);
  case T_UNSIGNED_CHAR: return *reinterpret_cast<const unsigned char *>(p);
  case T_BOOL: return *reinterpret_cast<const bool *>(p) ? 1.0 : 0.0;
  case T_LONGLONG: return static_cast<double>(*reinterpret_cast<const long long *>(p));
  case T_UNSIGNED_LONGLONG: return static_cast<double>(*reinterpret_cast<const unsigned long long *>(p));
  }
  throw type_error("ipuxl: unsupported host element type code " + std::to_string(code));
}
template <class T> void put(char *p, T v) { std::memcpy(p, &v, sizeof(T)); }
void storeAs(int code, char *p, double v) {
  switch (code) {
  case -1: put(p, v); return;
  case T_FLOAT: put(p, static_cast<float>(v)); return;
  case T_HALF: put(p, half(static_cast<float>(v))); return;
  case T_INT: put(p, static_cast<int>(v)); return;
  case T_UNSIGNED_INT: put(p, static_cast<unsigned>(static_cast<long long>(v))); return;
  case T_SHORT: put(p, static_cast<short>(v)); return;
  case T_UNSIGNED_SHORT: put(p, static_cast<unsigned short>(v)); return;
  case T_CHAR: put(p, static_cast<char>(v)); return;
  case T_SIGNED_CHAR: put(p, static_cast<signed char>(v)); return;
  case T_UNSIGNED_CHAR: put(p, static_cast<unsigned char>(v)); return;
  case T_BOOL: put(p, v != 0.0); return;
  case T_LONGLONG: put(p, static_cast<long long>(v)); return;
  case T_UNSIGNED_LONGLONG: put(p, static_cast<unsigned long long>(v)); return;
  }
  throw type_error("ipuxl: unsupported device element type code " + std::to_string(code));
}
std::size_t hostSize(int code) { return code == -1 ? 8 : typeCodeSize(code); }
} // namespace

void convertElements(int from, const void *src, int to, void *dst, std::size_t n) {
  auto s = static_cast<const char *>(src);
  auto d = static_cast<char *>(dst);
  if (from == to) {
    std::memcpy(d, s, n * hostSize(from));
    return;
  }
  bool wide = (from == T_LONGLONG || from == T_UNSIGNED_LONGLONG) && (to == T_LONGLONG || to == T_UNSIGNED_LONGLONG);
  for (std::size_t i = 0; i < n; ++i) {
    if (wide)
      std::memcpy(d + i * 8, s + i * 8, 8);
    else
      storeAs(to, d + i * hostSize(to), loadAs(from, s + i * hostSize(from)));
  }
}

std::string readEnvironment(const char *name) {
  const char *v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

} // namespace ipuxl_detail

using namespace ipuxl_detail;

const Type BOOL(T_BOOL), CHAR(T_CHAR), UNSIGNED_CHAR(T_UNSIGNED_CHAR), SIGNED_CHAR(T_SIGNED_CHAR),
    UNSIGNED_SHORT(T_UNSIGNED_SHORT), SHORT(T_SHORT), UNSIGNED_INT(T_UNSIGNED_INT), INT(T_INT),
    UNSIGNED_LONG(T_UNSIGNED_LONGLONG), LONG(T_LONGLONG), UNSIGNED_LONGLONG(T_UNSIGNED_LONGLONG),
    LONGLONG(T_LONGLONG), HALF(T_HALF), FLOAT(T_FLOAT);

void copyFloatToDeviceHalf(const Target &, const float *src, void *dst, std::size_t n) {
  convertElements(T_FLOAT, src, T_HALF, dst, n);
}
void copyDeviceHalfToFloat(const Target &, const void *src, float *dst, std::size_t n) {
  convertElements(T_HALF, src, T_FLOAT, dst, n);
}
void copyDoubleToDeviceHalf(const Target &, const double *src, void *dst, std::size_t n) {
  convertElements(-1, src, T_HALF, dst, n);
}
void copyDeviceHalfToDouble(const Target &, const void *src, double *dst, std::size_t n) {
  convertElements(T_HALF, src, -1, dst, n);
}

// ---- OptionFlags ----
StringRef OptionFlags::at(StringRef option) const {
  auto it = m_.find(option);
  if (it == m_.end()) throw invalid_option("OptionFlags::at: option '" + option + "' is not set");
  return it->second;
}

void readJSON(std::istream &is, OptionFlags &flags) {
  std::string s((std::istreambuf_iterator<char>(is)), std::istreambuf_iterator<char>());
  std::size_t i = 0;
  auto ws = [&] { while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i; };
  auto fail = [&](const std::string &what) -> void {
    throw parse_error("readJSON: " + what + " at offset " + std::to_string(i) + " of '" + s + "'");
  };
  auto token = [&]() -> std::string {
    ws();
    if (i < s.size() && s[i] == '"') {
      std::string out;
      ++i;
      while (i < s.size() && s[i] != '"') {
        if (s[i] == '\\' && i + 1 < s.size()) ++i;
        out += s[i++];
      }
      if (i >= s.size()) fail("unterminated string");
      ++i;
      return out;
    }
    std::string out;
    while (i < s.size() && s[i] != ',' && s[i] != '}' && !std::isspace(static_cast<unsigned char>(s[i]))) out += s[i++];
    if (out.empty()) fail("expected a value");
    return out;
  };
  ws();
  if (i >= s.size() || s[i] != '{') fail("expected '{'");
  ++i;
  ws();
  if (i < s.size() && s[i] == '}') return;
  while (true) {
    std::string k = token();
    ws();
    if (i >= s.size() || s[i] != ':') fail("expected ':'");
    ++i;
    std::string v = token();
    flags.set(k, v);
    ws();
    if (i < s.size() && s[i] == ',') { ++i; continue; }
    if (i < s.size() && s[i] == '}') return;
    fail("expected ',' or '}'");
  }
}

std::ostream &operator<<(std::ostream &os, const OptionFlags &f) {
  os << "{";
  bool first = true;
  for (auto &kv : f) {
    os << (first ? "" : ", ") << "\"" << kv.first << "\": \"" << kv.second << "\"";
    first = false;
  }
  return os << "}";
}

// ---- Target / Device / IPUModel ----
namespace {
unsigned defaultTiles(const std::string &arch) {
  if (arch == "ipu1") return 1216;
  if (arch == "ipu2" || arch == "ipu21") return 1472;
  throw invalid_machine_model("IPUModel: unknown IPU version '" + arch + "' (expected ipu1, ipu2 or ipu21)");
}
unsigned defaultBytes(const std::string &arch) { return arch == "ipu1" ? 256 * 1024 : 624 * 1024; }
} // namespace

Target Target::createIPUTarget(unsigned numIPUs, StringRef systemType, const OptionFlags &) {
  std::string arch = systemType;
  if (arch.rfind("ipu", 0) != 0) arch = "ipu2";
  return Target(TargetType::IPU, arch, numIPUs, defaultTiles(arch), defaultBytes(arch), 1.33e9);
}
Target Target::createIPUTarget(unsigned numIPUs, unsigned tilesPerIPU, StringRef systemType, const OptionFlags &o) {
  Target t = createIPUTarget(numIPUs, systemType, o);
  t.tilesPerIPU_ = tilesPerIPU;
  return t;
}
Target Target::createCPUTarget(bool, unsigned numIPUs) {
  return Target(TargetType::CPU, "cpu", numIPUs, 1, 0x7fffffffu, 1e9);
}
Target Target::createVirtualTarget(unsigned numIPUs, unsigned tilesPerIPU) const {
  Target t = *this;
  t.numIPUs_ = numIPUs;
  t.tilesPerIPU_ = tilesPerIPU;
  return t;
}

const Target &Device::getTarget() const {
  if (!target_) throw poplar_error("Device::getTarget: this Device is empty (default-constructed)");
  return *target_;
}
Device Device::createVirtualDevice(unsigned tilesPerIPU) {
  return Device(getTarget().createVirtualTarget(getTarget().getNumIPUs(), tilesPerIPU), id_);
}

IPUModel::IPUModel(const char *version) : ipuVersion(version ? version : "ipu2") {
  tilesPerIPU = defaultTiles(ipuVersion);
  memoryPerTile = defaultBytes(ipuVersion);
}

Device IPUModel::createDevice(OptionFlags, bool, unsigned id) const {
  if (numIPUs == 0 || tilesPerIPU == 0)
    throw invalid_machine_model("IPUModel::createDevice: numIPUs and tilesPerIPU must be positive");
  Target t(TargetType::IPU_MODEL, ipuVersion, numIPUs, tilesPerIPU, memoryPerTile, tileClockFrequency);
  t.ipuxlSetMinSyncDelay(minIPUSyncDelay);
  return Device(t, id);
}

namespace {
void sayNoHardware() {
  static bool said = false;
  if (said) return;
  said = true;
  std::cerr << "ipuxl: no IPU hardware device is available: IPU devices need Graphcore's Poplar SDK "
               "and its driver, which ipuxl's Poplar does not include; use poplar::IPUModel instead\n";
}
} // namespace

namespace {
/// IPUXL_POPLAR_DEVICES=model: hardware requests get IPUModel devices (so
/// hardware-only programs such as the prefetch example run on the model).
bool modelAsHardware() { return ipuxl_detail::readEnvironment("IPUXL_POPLAR_DEVICES") == "model"; }
} // namespace

std::vector<Device> DeviceManager::getDevices(TargetType type, unsigned n, const OptionFlags &) const {
  if (type == TargetType::IPU && modelAsHardware()) {
    static bool said = false;
    if (!said) std::cerr << "ipuxl: IPUXL_POPLAR_DEVICES=model: IPU requests get IPU model devices\n";
    said = true;
    IPUModel m("ipu2");
    m.numIPUs = n ? n : 1;
    std::vector<Device> out;
    out.push_back(m.createDevice());
    return out;
  }
  if (type == TargetType::IPU) sayNoHardware();
  return {};
}
std::vector<Device> DeviceManager::getDevices(const OptionFlags &) const {
  sayNoHardware();
  return {};
}
Device DeviceManager::getDevice(unsigned id, const OptionFlags &) const {
  throw poplar_error("DeviceManager::getDevice(" + std::to_string(id) +
                     "): no IPU hardware device exists: IPU devices need Graphcore's Poplar SDK and "
                     "its driver, which ipuxl's Poplar does not include; use poplar::IPUModel instead");
}

} // namespace poplar
