// ipuxl's Poplar: DebugContext and friends. Names given to graph objects are
// kept (they appear in errors and profiles); the rest of the debug-info
// machinery of the SDK is not modelled.
#pragma once
#include <poplar/StringRef.hpp>
#include <string>

namespace poplar {

class DebugNameAndId {
public:
  DebugNameAndId(StringRef name = "") : name_(name) {}
  const std::string &getPathName() const { return name_; }

private:
  std::string name_;
};

class SourceLocation {
public:
  SourceLocation() = default;
  static SourceLocation Current() { return {}; }
};

class DebugContext {
public:
  DebugContext(StringRef name = "", SourceLocation = SourceLocation()) : name_(name) {}
  DebugContext(const char *name, SourceLocation = SourceLocation()) : name_(name ? name : "") {}
  DebugContext(const std::string &name, SourceLocation = SourceLocation()) : name_(name) {}
  DebugContext(const DebugNameAndId &d, StringRef name = "", SourceLocation = SourceLocation())
      : name_(d.getPathName().empty() ? std::string(name)
                                      : (name.empty() ? d.getPathName() : d.getPathName() + "/" + name)) {}
  DebugContext(const DebugContext &d, StringRef name, SourceLocation = SourceLocation())
      : name_(d.name_.empty() ? std::string(name) : (name.empty() ? d.name_ : d.name_ + "/" + name)) {}
  DebugContext(const DebugContext &) = default;
  const std::string &getPathName() const { return name_; }
  operator DebugNameAndId() const { return DebugNameAndId(name_); }

private:
  std::string name_;
};

class DebugInfo {
public:
  DebugInfo(const DebugContext &ctx, StringRef = "") : name_(ctx.getPathName()) {}
  const std::string &getPathName() const { return name_; }
  operator DebugNameAndId() const { return DebugNameAndId(name_); }

private:
  std::string name_;
};

} // namespace poplar
