// ipuxl's Poplar: StringRef, a string argument accepted from std::string or C strings.
#pragma once
#include <string>

namespace poplar {

class StringRef : public std::string {
public:
  StringRef() = default;
  StringRef(const char *s) : std::string(s ? s : "") {}
  StringRef(const std::string &s) : std::string(s) {}
  StringRef(const char *s, std::size_t n) : std::string(s, n) {}
  const std::string &str() const { return *this; }
  std::string cloneAsString() const { return *this; }
};

} // namespace poplar
