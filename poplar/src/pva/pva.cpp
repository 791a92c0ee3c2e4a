// ipuxl's libpva: reads the summary of a profile written by ipuxl's Poplar.
#include <fstream>
#include <pva/pva.hpp>
#include <regex>
#include <sstream>
#include <stdexcept>

namespace pva {
namespace {
std::uint64_t number(const std::string &text, const char *key, const std::string &path) {
  std::smatch m;
  std::regex re(std::string("\"") + key + "\"\\s*:\\s*([0-9]+)");
  if (!std::regex_search(text, m, re))
    throw std::runtime_error("pva::openReport: '" + path + "' has no \"" + key + "\" (not a profile of ipuxl's Poplar?)");
  return std::stoull(m[1].str());
}
} // namespace

Report openReport(const std::string &path) {
  std::ifstream f(path);
  if (!f) throw std::runtime_error("pva::openReport: cannot open '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string t = ss.str();
  if (t.find("ipuxl-poplar-profile") == std::string::npos)
    throw std::runtime_error("pva::openReport: '" + path + "' is not a profile written by ipuxl's Poplar");
  unsigned ipus = static_cast<unsigned>(number(t, "numIPUs", path));
  unsigned tiles = static_cast<unsigned>(number(t, "tilesPerIPU", path)) * ipus;
  std::smatch m;
  std::string version = "ipuxl";
  if (std::regex_search(t, m, std::regex("\"poplarVersion\"\\s*:\\s*\"([^\"]*)\""))) version = m[1].str();
  return Report(Compilation(Target(tiles, ipus), Graph(number(t, "computeSets", path), number(t, "vertices", path),
                                                       number(t, "variables", path))),
                Version(version), Execution(number(t, "totalCycles", path)));
}
} // namespace pva
