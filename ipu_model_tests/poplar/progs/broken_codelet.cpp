// A codelet that does not compile: its message must reach the user.
#include <poplar/Vertex.hpp>

class Broken : public poplar::Vertex {
public:
  poplar::Output<float> out;
  bool compute() {
    *out = undeclared_variable_xyz;
    return true;
  }
};
