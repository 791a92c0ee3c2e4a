#pragma once
#include <iosfwd>
namespace popops {
/// Reduction operations.
enum class Operation { ADD, MUL, MIN, MAX, LOGICAL_AND, LOGICAL_OR, SQUARE_ADD, LOG_ADD };
std::ostream &operator<<(std::ostream &os, const Operation &op);
} // namespace popops
