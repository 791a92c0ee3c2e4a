// ipuxl's libpva: a small reader of the profile ipuxl's Poplar writes
// (autoReport: profile.pop, the same JSON as profile.json). It offers the
// part of PopVision's analysis API that reads the report's summary: the
// target, the graph's compute sets and the Poplar version.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

namespace pva {

class Target {
public:
  explicit Target(unsigned tiles = 0, unsigned ipus = 0) : tiles_(tiles), ipus_(ipus) {}
  unsigned numTiles() const { return tiles_; }
  unsigned numIPUs() const { return ipus_; }
  unsigned numTilesPerIPU() const { return ipus_ ? tiles_ / ipus_ : 0; }

private:
  unsigned tiles_, ipus_;
};

class Graph {
public:
  explicit Graph(std::uint64_t cs = 0, std::uint64_t v = 0, std::uint64_t vars = 0)
      : cs_(cs), v_(v), vars_(vars) {}
  std::uint64_t numComputeSets() const { return cs_; }
  std::uint64_t numVertices() const { return v_; }
  std::uint64_t numVars() const { return vars_; }

private:
  std::uint64_t cs_, v_, vars_;
};

class Compilation {
public:
  Compilation(Target t, Graph g) : t_(t), g_(g) {}
  const Target &target() const { return t_; }
  const Graph &graph() const { return g_; }

private:
  Target t_;
  Graph g_;
};

class Version {
public:
  explicit Version(std::string s = "") : s_(std::move(s)) {}
  const std::string &string() const { return s_; }

private:
  std::string s_;
};

class Execution {
public:
  explicit Execution(std::uint64_t cycles = 0) : cycles_(cycles) {}
  std::uint64_t totalCycles() const { return cycles_; }

private:
  std::uint64_t cycles_;
};

class Report {
public:
  Report(Compilation c, Version v, Execution e) : c_(c), v_(v), e_(e) {}
  const Compilation &compilation() const { return c_; }
  const Version &poplarVersion() const { return v_; }
  const Execution &execution() const { return e_; }

private:
  Compilation c_;
  Version v_;
  Execution e_;
};

/// Opens a profile written by ipuxl's Poplar; throws std::runtime_error naming the file otherwise.
Report openReport(const std::string &path);

} // namespace pva
