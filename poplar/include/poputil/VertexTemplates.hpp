// ipuxl's PopLibs: poputil::templateVertex, the name of a template vertex
// type for its arguments ("Name<float,int>").
#pragma once
#include <poplar/Type.hpp>
#include <sstream>
#include <string>

namespace poputil {
inline std::string templateVertexParam(const poplar::Type &t) { return t.toString(); }
inline std::string templateVertexParam(const std::string &s) { return s; }
inline std::string templateVertexParam(const char *s) { return s; }
inline std::string templateVertexParam(bool b) { return b ? "true" : "false"; }
template <class T> std::string templateVertexParam(const T &v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
inline std::string templateVertexParams(bool) { return ""; }
template <class T, class... Rest> std::string templateVertexParams(bool first, const T &x, const Rest &...rest) {
  return (first ? "" : ",") + templateVertexParam(x) + templateVertexParams(false, rest...);
}
template <class... Args> std::string templateVertex(const std::string &name, const Args &...args) {
  return name + "<" + templateVertexParams(true, args...) + ">";
}
} // namespace poputil
