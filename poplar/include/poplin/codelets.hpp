#pragma once
#include <poplar/Graph.hpp>
namespace poplin {
/// Adds poplin's vertex types to the graph (needed before poplin::matMul).
void addCodelets(poplar::Graph &graph);
}
