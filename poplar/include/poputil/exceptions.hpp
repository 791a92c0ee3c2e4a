// ipuxl's PopLibs: poputil::poplibs_error, the error PopLibs raises.
#pragma once
#include <stdexcept>
#include <string>

namespace poputil {
struct poplibs_error : std::logic_error {
  std::string type;
  explicit poplibs_error(const std::string &s) : std::logic_error(s), type("poplibs_error") {}
  explicit poplibs_error(const char *s) : std::logic_error(s), type("poplibs_error") {}
};
} // namespace poputil
