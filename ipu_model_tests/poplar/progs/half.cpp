// poplar::half conversions of floats across the float16 range, subnormals
// and round-to-nearest-even ties included; pytest checks them against NumPy.
#include "report.hpp"
#include <poplar/HalfFloat.hpp>

int main() {
  std::vector<float> in, out;
  for (int e = -26; e <= 16; ++e)
    for (int k = 0; k < 64; ++k) {
      float v = std::ldexp(1.0f + static_cast<float>(k) / 64.0f, e);
      in.push_back(v);
      in.push_back(-v * 1.0001f);
    }
  for (int k = 0; k < 40; ++k) in.push_back(std::ldexp(static_cast<float>(2 * k + 1), -25)); // subnormal ties
  for (float v : in) out.push_back(static_cast<float>(poplar::half(v)));
  report("in", {in.size()}, in);
  report("half", {out.size()}, out);
  return 0;
}
