// Test helper: prints named arrays as `name shape : v v v` lines for the
// pytest side to parse and check against NumPy.
#pragma once
#include <cstdio>
#include <iostream>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <sstream>
#include <string>
#include <vector>

template <class T> void report(const std::string &name, const std::vector<std::size_t> &shape, const std::vector<T> &v) {
  std::ostringstream os;
  os.precision(17); // exact for float and int32 values
  os << "@" << name << " ";
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << " :";
  for (const auto &x : v) os << " " << static_cast<double>(x);
  std::cout << os.str() << "\n";
}

inline std::vector<float> ramp(std::size_t n, float scale = 0.5f, float offset = -3.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>((i * 7) % 23);
  return v;
}

/// Adds a variable of `shape`, mapped linearly, and a host write handle for it.
inline poplar::Tensor input(poplar::Graph &g, const std::string &name, poplar::Type t, std::vector<std::size_t> shape) {
  poplar::Tensor x = g.addVariable(t, shape, name);
  g.setTileMapping(x, 0);
  g.createHostWrite(name, x);
  return x;
}

/// A fresh variable holding a copy of `view` (so views of any kind read back), with a read handle.
inline poplar::Tensor output(poplar::Graph &g, poplar::program::Sequence &prog, const std::string &name,
                             const poplar::Tensor &view) {
  poplar::Tensor y = g.addVariable(view.elementType(), view.shape(), name);
  g.setTileMapping(y, 1);
  prog.add(poplar::program::Copy(view, y));
  g.createHostRead(name, y);
  return y;
}
