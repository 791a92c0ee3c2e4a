// ipuxl's Poplar: OptionFlags, an ordered set of string options.
#pragma once
#include <initializer_list>
#include <map>
#include <poplar/StringRef.hpp>
#include <string>
#include <utility>

namespace poplar {

class OptionFlags {
public:
  using initializer_list = std::initializer_list<std::pair<const std::string, std::string>>;
  using const_iterator = std::map<std::string, std::string>::const_iterator;
  OptionFlags() = default;
  OptionFlags(initializer_list l) : m_(l) {}
  void set(initializer_list l) {
    for (auto &kv : l) m_[kv.first] = kv.second;
  }
  void set(StringRef option, StringRef value) { m_[option] = value; }
  /// The value of `option`; throws poplar::invalid_option when it is not set.
  StringRef at(StringRef option) const;
  void clear() { m_.clear(); }
  bool empty() const { return m_.empty(); }
  const_iterator begin() const { return m_.begin(); }
  const_iterator end() const { return m_.end(); }
  bool operator==(const OptionFlags &o) const { return m_ == o.m_; }
  /// ipuxl: whether `option` is set.
  bool ipuxlHas(const std::string &option) const { return m_.count(option) != 0; }

private:
  std::map<std::string, std::string> m_;
};

/// Parses a flat JSON object of options (as POPLAR_ENGINE_OPTIONS holds).
void readJSON(std::istream &is, OptionFlags &flags);
std::ostream &operator<<(std::ostream &os, const OptionFlags &flags);

} // namespace poplar
